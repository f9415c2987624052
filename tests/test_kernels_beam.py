"""kernels.beam: per-anchor beam search, numba and numpy paths, against the dict-based oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernels
from mnemon.records import LAMBDA_SEMANTIC, LAMBDA_STRUCTURAL
from tests.reference import VIA_ANCHOR, VIA_NONE, build_edge_csr, readonly, ref_beam_search

BEAM = [pytest.param(kernels.beam_search, id="numba"), pytest.param(kernels.beam_search_numpy, id="numpy")]
TEMPORAL, SEMANTIC, CAUSAL, ENTITY, SUPERSEDES = range(5)  # codes in records.EDGE_TYPES order
GENERAL = readonly(np.array([0.25, 0.25, 0.25, 0.25, 0.0]))
WHY = readonly(np.array([0.20, 0.05, 0.70, 0.05, 0.0]))


def run(beam_search, n, edges, anchors, *, width=10, depth=4, max_visited=500, type_weight=GENERAL,
        similarity=None, id_rank=None, mask=None):  # fmt: skip
    """Call a kernel path and the oracle on the same plain inputs; return both as dicts."""
    indptr, nbrs, weights, etype = build_edge_csr(n, edges)
    id_rank = np.arange(n, dtype=np.int32) if id_rank is None else id_rank
    sim = None if similarity is None else readonly(np.asarray(similarity, dtype=np.float64))
    best, via = beam_search(
        indptr, nbrs, weights, etype, type_weight,
        np.array([a for a, _ in anchors], dtype=np.int32), np.array([s for _, s in anchors]),
        width, depth, max_visited, sim, LAMBDA_STRUCTURAL, LAMBDA_SEMANTIC, readonly(id_rank),
        None if mask is None else readonly(np.asarray(mask, dtype=bool)),
    )  # fmt: skip
    assert best.dtype == np.float64 and via.dtype == np.int8 and best.shape == via.shape == (n,)
    want_best, want_via = ref_beam_search(
        n, edges, type_weight.tolist(), anchors, width, depth, max_visited,
        None if similarity is None else list(similarity), LAMBDA_STRUCTURAL, LAMBDA_SEMANTIC,
        id_rank.tolist(), mask,
    )  # fmt: skip
    got_best = {r: float(best[r]) for r in range(n) if best[r] > -math.inf}
    got_via = {r: int(via[r]) for r in range(n) if via[r] != VIA_NONE}
    assert set(got_best) == set(got_via)
    assert np.all(via[best == -math.inf] == VIA_NONE)
    return (got_best, got_via), (want_best, want_via)


def random_graph(rng: np.random.Generator, n: int, m: int) -> list[tuple[int, int, int, float]]:
    # Weights from a small set so transitions tie often and the tie-break order matters.
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    codes = rng.integers(0, 5, m)
    weights = rng.choice([0.5, 1.0, 0.25], m)
    return [(int(s), int(d), int(c), float(w)) for s, d, c, w in zip(src, dst, codes, weights) if s != d]


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_chain_scores_accumulate_hop_by_hop(beam_search):
    # 0 -temporal(1.0)- 1 -causal(0.5)- 2 ; GENERAL weights 0.25 each, no similarity.
    edges = [(0, 1, TEMPORAL, 1.0), (1, 2, CAUSAL, 0.5)]
    got, want = run(beam_search, 4, edges, [(0, 1.0)], depth=2)
    assert got == want
    # Level 1: 0→1 = 1.25. Level 2 expands 1: 1→0 = 1.5 (an already visited row still takes a
    # better score; the anchor keeps via ANCHOR) and 1→2 = 1.375. Row 3 is unreached.
    assert got[0] == {0: 1.5, 1: 1.25, 2: 1.375}
    assert got[1] == {0: VIA_ANCHOR, 1: TEMPORAL, 2: CAUSAL}
    got, want = run(beam_search, 4, edges, [(0, 1.0)], depth=3)
    assert got == want
    assert got[0] == {0: 1.5, 1: 1.5, 2: 1.375}  # level 3 expands 2: 2→1 = 1.375 + 0.125


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_semantic_term_uses_clamped_similarity(beam_search):
    edges = [(0, 1, ENTITY, 1.0), (0, 2, ENTITY, 1.0)]
    got, want = run(beam_search, 3, edges, [(0, 0.0)], similarity=[0.9, 0.5, -0.8])
    assert got == want
    assert got[0][1] == pytest.approx(0.25 + 0.4 * 0.5)
    assert got[0][2] == 0.25  # negative similarity contributes 0


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_cycle_keeps_best_and_anchor_stays_anchor(beam_search):
    # Triangle 0-1-2 plus a strong edge back to the anchor: the anchor's best may rise, via stays ANCHOR.
    edges = [(0, 1, CAUSAL, 1.0), (1, 2, CAUSAL, 1.0), (2, 0, CAUSAL, 1.0)]
    got, want = run(beam_search, 3, edges, [(0, 0.1)], type_weight=WHY, depth=5)
    assert got == want
    assert got[1][0] == VIA_ANCHOR and got[0][0] > 0.1


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_disconnected_component_is_never_reached(beam_search):
    edges = [(0, 1, TEMPORAL, 1.0), (2, 3, TEMPORAL, 1.0)]
    got, want = run(beam_search, 5, edges, [(0, 1.0)])
    assert got == want
    assert set(got[0]) == {0, 1}


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_budget_counts_anchor_and_follows_transition_order(beam_search):
    # Star around 0; ties on delta are broken by id_rank, so with max_visited 3 (anchor + 2)
    # exactly the two best-ranked neighbours are scored.
    edges = [(0, v, ENTITY, 1.0) for v in range(1, 7)]
    id_rank = np.array([0, 6, 5, 4, 3, 2, 1], dtype=np.int32)
    got, want = run(beam_search, 7, edges, [(0, 1.0)], max_visited=3, id_rank=id_rank)
    assert got == want
    assert set(got[0]) == {0, 6, 5}
    got, want = run(beam_search, 7, edges, [(0, 1.0)], max_visited=1, id_rank=id_rank)
    assert got == want and set(got[0]) == {0}


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_ranks_transitions_by_delta_before_budget(beam_search):
    # The heavier edge to row 3 is taken first even though rows 1 and 2 rank better.
    edges = [(0, 1, TEMPORAL, 0.5), (0, 2, TEMPORAL, 0.5), (0, 3, TEMPORAL, 1.0)]
    got, want = run(beam_search, 4, edges, [(0, 0.0)], max_visited=2)
    assert got == want and set(got[0]) == {0, 3}


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_equal_delta_breaks_by_type_code_and_via_takes_lowest_code(beam_search):
    # Two parallel edge rows of different types with equal delta: via must be the lower code.
    tw = readonly(np.array([0.5, 0.5, 0.5, 0.5, 0.0]))
    edges = [(0, 1, ENTITY, 1.0), (0, 1, SEMANTIC, 1.0)]
    got, want = run(beam_search, 2, edges, [(0, 0.0)], type_weight=tw)
    assert got == want and got[1][1] == SEMANTIC


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_width_keeps_only_top_of_each_level(beam_search):
    # Level 1 = {1, 2, 3} with different scores; width 1 keeps only row 3, so only 3's child is reached.
    edges = [(0, 1, TEMPORAL, 0.1), (0, 2, TEMPORAL, 0.2), (0, 3, TEMPORAL, 0.3),
             (1, 4, TEMPORAL, 1.0), (2, 5, TEMPORAL, 1.0), (3, 6, TEMPORAL, 1.0)]  # fmt: skip
    got, want = run(beam_search, 7, edges, [(0, 0.0)], width=1)
    assert got == want and set(got[0]) == {0, 1, 2, 3, 6}
    got, want = run(beam_search, 7, edges, [(0, 0.0)], depth=1)
    assert got == want and set(got[0]) == {0, 1, 2, 3}
    got, want = run(beam_search, 7, edges, [(0, 0.0)], depth=0)
    assert got == want and set(got[0]) == {0}


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_never_leaves_the_row_mask(beam_search):
    # 0 - 1 - 2 with row 1 out of scope: nothing beyond the anchor is reachable; anchor 3 is out too.
    edges = [(0, 1, TEMPORAL, 1.0), (1, 2, TEMPORAL, 1.0), (3, 0, TEMPORAL, 1.0)]
    got, want = run(beam_search, 4, edges, [(0, 1.0), (3, 2.0)], mask=[True, False, True, False])
    assert got == want and got[0] == {0: 1.0}


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_anchors_search_independently_and_order_does_not_matter(beam_search):
    rng = np.random.default_rng(21)
    edges = random_graph(rng, 40, 120)
    anchors = [(3, 1.0), (17, 0.6), (25, 0.9), (3, 0.2)]
    got, want = run(beam_search, 40, edges, anchors, width=3, depth=3, max_visited=12)
    assert got == want
    got_reversed, _ = run(beam_search, 40, edges, anchors[::-1], width=3, depth=3, max_visited=12)
    assert got_reversed == got


@pytest.mark.parametrize("beam_search", BEAM)
@pytest.mark.parametrize("seed", range(8))
def test_beam_matches_oracle_on_random_graphs(beam_search, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    edges = random_graph(rng, n, int(rng.integers(0, 4 * n)))
    k = int(rng.integers(1, min(n, 6) + 1))
    anchors = [(int(r), float(s)) for r, s in zip(rng.choice(n, k, replace=False), rng.random(k))]
    similarity = rng.uniform(-1, 1, n).round(2) if seed % 2 else None
    mask = rng.random(n) < 0.85 if seed % 3 == 0 else None
    id_rank = rng.permutation(n).astype(np.int32)
    got, want = run(
        beam_search, n, edges, anchors, width=int(rng.integers(1, 6)), depth=int(rng.integers(0, 6)),
        max_visited=int(rng.integers(1, 40)), type_weight=WHY if seed % 2 else GENERAL,
        similarity=similarity, id_rank=id_rank, mask=None if mask is None else mask.tolist(),
    )  # fmt: skip
    assert got == want


@pytest.mark.parametrize("beam_search", BEAM)
@pytest.mark.parametrize("seed", range(6))
def test_beam_over_a_big_csr_plus_a_delta_csr_equals_one_csr(beam_search, seed):
    # The hot index reads its persisted CSR (covering the first n_big rows and the older edge rows)
    # beside a small CSR of the edge rows written since, over all n rows, instead of merging them.
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 90))
    n_big = int(rng.integers(1, n + 1))
    old = random_graph(rng, n_big, 3 * n_big)
    new = random_graph(rng, n, int(rng.integers(0, 2 * n)))
    anchors = rng.choice(n, min(n, 5), replace=False).astype(np.int32)
    scores = rng.random(anchors.shape[0])
    sim = readonly(rng.uniform(-1, 1, n).round(2)) if seed % 2 else None
    id_rank = readonly(rng.permutation(n).astype(np.int32))
    mask = readonly(rng.random(n) < 0.9)
    common = (anchors, scores, 6, 4, int(rng.integers(2, 60)), sim, LAMBDA_STRUCTURAL, LAMBDA_SEMANTIC, id_rank, mask)
    whole = beam_search(*build_edge_csr(n, old + new), WHY, *common)
    split = beam_search(*build_edge_csr(n_big, old), WHY, *common, delta=build_edge_csr(n, new))
    np.testing.assert_array_equal(whole[0], split[0])
    np.testing.assert_array_equal(whole[1], split[1])


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_rejects_a_delta_csr_shorter_than_the_big_one(beam_search):
    big = build_edge_csr(4, [(0, 1, CAUSAL, 1.0)])
    with pytest.raises(ValueError, match="delta CSR"):
        beam_search(*big, GENERAL, [0], [1.0], 4, 2, 10, None, 1.0, 0.4, np.arange(4, dtype=np.int32),
                    delta=build_edge_csr(3, []))  # fmt: skip


def test_beam_paths_agree_bit_for_bit_on_a_larger_graph():
    rng = np.random.default_rng(77)
    n = 2000
    indptr, nbrs, weights, etype = build_edge_csr(n, random_graph(rng, n, 20 * n))
    sim = readonly(rng.uniform(-1, 1, n))
    id_rank = readonly(rng.permutation(n).astype(np.int32))
    anchors = rng.choice(n, 20, replace=False).astype(np.int32)
    args = (indptr, nbrs, weights, etype, WHY, anchors, rng.random(20), 15, 5, 500, sim, 1.0, 0.4, id_rank)
    best, via = kernels.beam_search(*args)
    best_np, via_np = kernels.beam_search_numpy(*args)
    np.testing.assert_array_equal(best, best_np)
    np.testing.assert_array_equal(via, via_np)
    assert 20 < np.isfinite(best).sum() <= 20 * 500


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_empty_graph_and_no_anchors(beam_search):
    indptr = readonly(np.zeros(1, dtype=np.int64))
    empty_i32, empty_f64, empty_i8 = np.zeros(0, np.int32), np.zeros(0), np.zeros(0, np.int8)
    best, via = beam_search(indptr, empty_i32, empty_f64, empty_i8, GENERAL, [], [], 10, 4, 500, None, 1.0, 0.4, empty_i32)
    assert best.shape == via.shape == (0,)
    indptr3 = readonly(np.zeros(4, dtype=np.int64))
    rank = np.arange(3, dtype=np.int32)
    best, via = beam_search(indptr3, empty_i32, empty_f64, empty_i8, GENERAL, [], [], 10, 4, 500, None, 1.0, 0.4, rank)
    assert np.all(best == -math.inf) and np.all(via == VIA_NONE)


@pytest.mark.parametrize("beam_search", BEAM)
def test_beam_rejects_bad_inputs(beam_search):
    indptr, nbrs, weights, etype = build_edge_csr(3, [(0, 1, TEMPORAL, 1.0)])
    rank = np.arange(3, dtype=np.int32)
    ok = (indptr, nbrs, weights, etype, GENERAL, [0], [1.0], 10, 4, 500, None, 1.0, 0.4, rank)
    beam_search(*ok)
    bad_cases = [
        (ValueError, {5: [3]}),  # anchor out of range
        (ValueError, {6: [1.0, 2.0]}),  # anchor_scores length
        (ValueError, {3: readonly(np.array([7, 7], dtype=np.int8))}),  # type code beyond type_weight
        (TypeError, {3: etype.astype(np.int32)}),
        (ValueError, {7: -1}),
        (ValueError, {10: np.zeros(2)}),  # similarity length
        (TypeError, {0: indptr.astype(np.int32)}),
    ]
    for exc, change in bad_cases:
        args = list(ok)
        for pos, value in change.items():
            args[pos] = value
        with pytest.raises(exc):
            beam_search(*args)


def test_beam_reports_the_rows_it_expanded_and_reads_no_other_similarity():
    """``expanded``: both paths mark the same rows, and similarities outside those rows'
    neighbourhoods do not change the result (recall's bounded similarity relies on it)."""
    rng = np.random.default_rng(78)
    n = 3000
    edges = random_graph(rng, n, 8 * n)
    indptr, nbrs, weights, etype = build_edge_csr(n, edges)
    sim = rng.uniform(-1, 1, n)
    id_rank = readonly(rng.permutation(n).astype(np.int32))
    anchors = rng.choice(n, 10, replace=False).astype(np.int32)
    args = (indptr, nbrs, weights, etype, WHY, anchors, rng.random(10), 4, 3, 60)
    marks = []
    for beam in (kernels.beam_search, kernels.beam_search_numpy):
        expanded = np.zeros(n, dtype=np.bool_)
        best, via = beam(*args, readonly(sim), 1.0, 0.4, id_rank, None, None, expanded)
        marks.append((expanded, best, via))
    (e1, b1, v1), (e2, b2, v2) = marks
    np.testing.assert_array_equal(e1, e2)
    assert 10 <= e1.sum() < n // 4
    read = np.zeros(n, dtype=np.bool_)
    for u in np.flatnonzero(e1):
        read[nbrs[indptr[u] : indptr[u + 1]]] = True
    changed = np.where(read, sim, rng.uniform(-1, 1, n))  # every unread similarity replaced
    best, via = kernels.beam_search(*args, readonly(changed), 1.0, 0.4, id_rank)
    np.testing.assert_array_equal(best, b1)
    np.testing.assert_array_equal(via, v1)
    with pytest.raises(ValueError, match="expanded"):
        kernels.beam_search(*args, readonly(sim), 1.0, 0.4, id_rank, None, None, np.zeros(n - 1, dtype=np.bool_))


def _bounded_case(seed: int, n: int = 3000, dim: int = 24):
    """A graph, vectors behind it (a few rows without one), the exact cosines as the numba row kernel
    gives them, and bounded values: exact where the slack is 0, off by up to the slack elsewhere."""
    from kernels.quantized import exact_scorer

    rng = np.random.default_rng(seed)
    edges = random_graph(rng, n, 8 * n)
    csr = build_edge_csr(n, edges)
    vectors = rng.normal(size=(n + 5, dim))
    vectors[3] = 0.0  # a zero vector: its cosine is exactly 0
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    query = rng.normal(size=dim)
    vec_of_row = rng.permutation(n + 5)[:n].astype(np.int64)  # search row -> vector row, not the identity
    scorer = exact_scorer(vectors, norms, query, numba=True)
    exact = scorer(vec_of_row)
    slack = np.where(rng.random(n) < 0.8, rng.uniform(0.0, 0.05, n), 0.0)
    bounded = exact + slack * rng.uniform(-1.0, 1.0, n)
    id_rank = readonly(rng.permutation(n).astype(np.int32))
    anchors = rng.choice(n, 12, replace=False).astype(np.int32)
    args = (*csr, WHY, anchors, rng.random(12), 5, 3, 200)
    return args, scorer, vec_of_row, exact, slack, bounded, id_rank


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_beam_with_exact_reads_equals_the_search_on_exact_values(seed):
    """``exact``: one search that makes each bounded similarity exact as it reads it gives what the
    search over exact values gives, bit for bit, and writes exact values (and zero slack) at the rows
    it read only (recall's single search at 1M with vectors relies on it)."""
    args, scorer, vec_of_row, exact, slack, bounded, id_rank = _bounded_case(seed)
    n = exact.shape[0]
    want_best, want_via = kernels.beam_search(*args, readonly(exact), 1.0, 0.4, id_rank)
    values, left = bounded.copy(), slack.copy()
    read = kernels.beam.ExactRead(scorer.vectors, scorer.norms, scorer.query, scorer.query_norm, vec_of_row, left)
    expanded = np.zeros(n, dtype=np.bool_)
    best, via = kernels.beam_search(*args, values, 1.0, 0.4, id_rank, None, None, expanded, read)
    np.testing.assert_array_equal(best, want_best)
    np.testing.assert_array_equal(via, want_via)
    made = (slack > 0) & (left == 0)
    assert made.sum() > 50  # the search read many bounded rows
    np.testing.assert_array_equal(values[made], exact[made])  # bit-equal to the exact scorer's
    untouched = left > 0
    np.testing.assert_array_equal(values[untouched], bounded[untouched])
    # what it made exact lies among the rows it could read: the neighbours of the rows it expanded
    indptr, nbrs = args[0], args[1]
    could = np.zeros(n, dtype=np.bool_)
    for u in np.flatnonzero(expanded):
        could[nbrs[indptr[u] : indptr[u + 1]]] = True
    assert not np.any(made & ~could)
    # and the bounded search without exact reads differs (the case is not trivial)
    loose_best, _ = kernels.beam_search(*args, readonly(bounded), 1.0, 0.4, id_rank)
    assert not np.array_equal(loose_best, want_best)


def test_beam_exact_reads_reject_bad_inputs():
    args, scorer, vec_of_row, exact, slack, bounded, id_rank = _bounded_case(9, n=400)
    good = kernels.beam.ExactRead(scorer.vectors, scorer.norms, scorer.query, scorer.query_norm, vec_of_row, slack.copy())
    with pytest.raises(ValueError, match="writable"):  # nowhere to write the exact values
        kernels.beam_search(*args, readonly(bounded), 1.0, 0.4, id_rank, None, None, None, good)
    with pytest.raises(ValueError, match="writable"):
        kernels.beam_search(*args, None, 1.0, 0.4, id_rank, None, None, None, good)
    with pytest.raises(ValueError, match="slack"):
        kernels.beam_search(*args, bounded.copy(), 1.0, 0.4, id_rank, None, None, None, good._replace(slack=readonly(slack)))
    with pytest.raises((ValueError, TypeError), match="vec_of_row"):
        kernels.beam_search(*args, bounded.copy(), 1.0, 0.4, id_rank, None, None, None,
                            good._replace(vec_of_row=vec_of_row[:-1]))  # fmt: skip
    with pytest.raises(ValueError, match="no vector row"):  # a bounded row the search reads, without a vector
        kernels.beam_search(*args, bounded.copy(), 1.0, 0.4, id_rank, None, None, None,
                            good._replace(vec_of_row=np.full(400, -1, dtype=np.int64), slack=np.full(400, 0.01)))  # fmt: skip
