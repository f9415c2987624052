"""kernels.cosine: cosine_scores / cosine_topk, numba and numpy paths, against the oracle."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import kernels
from kernels.cosine import BLOCK_ROWS
from tests.reference import readonly, ref_cosine_scores, ref_cosine_topk

SCORES = [pytest.param(kernels.cosine_scores, id="numba"), pytest.param(kernels.cosine_scores_numpy, id="numpy")]
TOPK = [pytest.param(kernels.cosine_topk, id="numba"), pytest.param(kernels.cosine_topk_numpy, id="numpy")]


def make_store(rng: np.random.Generator, n: int, d: int, zero_rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
    vectors = rng.standard_normal((n, d))
    vectors[rng.choice(n, zero_rows, replace=False)] = 0.0
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    return readonly(vectors), readonly(norms)


@pytest.mark.parametrize("cosine_scores", SCORES)
@pytest.mark.parametrize("n, d", [(0, 4), (1, 1), (9, 7), (60, 16), (33, 768)])
def test_cosine_scores_match_oracle(cosine_scores, n, d):
    rng = np.random.default_rng(n + d)
    vectors, norms = make_store(rng, n, d, zero_rows=min(n, 2))
    query = readonly(rng.standard_normal(d))
    got = cosine_scores(vectors, norms, query)
    assert got.dtype == np.float64 and got.shape == (n,)
    np.testing.assert_allclose(got, ref_cosine_scores(vectors, norms, query), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cosine_scores", SCORES)
def test_cosine_is_exactly_zero_for_zero_rows_and_zero_query(cosine_scores):
    rng = np.random.default_rng(1)
    vectors, norms = make_store(rng, 5, 8, zero_rows=2)
    got = cosine_scores(vectors, norms, rng.standard_normal(8))
    assert np.all(got[norms == 0.0] == 0.0)
    assert np.all(cosine_scores(vectors, norms, np.zeros(8)) == 0.0)


@pytest.mark.parametrize("cosine_topk", TOPK)
@pytest.mark.parametrize("n, d, k", [(0, 8, 5), (3, 8, 10), (50, 16, 7), (2 * BLOCK_ROWS + 17, 12, 20)])
def test_cosine_topk_matches_oracle_across_blocks(cosine_topk, n, d, k):
    rng = np.random.default_rng(7 * n + k)
    vectors, norms = make_store(rng, n, d, zero_rows=min(n, 3))
    query = readonly(rng.standard_normal(d))
    tie_rank = readonly(rng.permutation(n).astype(np.int32))
    rows, scores = cosine_topk(vectors, norms, query, k, tie_rank)
    want_rows, want_scores = ref_cosine_topk(vectors, norms, query, k, tie_rank)
    assert rows.dtype == np.int32 and scores.dtype == np.float64
    assert rows.tolist() == want_rows
    np.testing.assert_allclose(scores, want_scores, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cosine_topk", TOPK)
def test_cosine_topk_ties_break_by_rank_across_blocks(cosine_topk):
    # Identical rows in different parallel blocks score identically; tie_rank decides.
    rng = np.random.default_rng(11)
    n, d = 3 * BLOCK_ROWS, 8
    vectors = rng.standard_normal((n, d)) * 0.01
    query = rng.standard_normal(d)
    twins = [5, BLOCK_ROWS + 3, 2 * BLOCK_ROWS + 9, 2 * BLOCK_ROWS + 10]
    vectors[twins] = query
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    tie_rank = np.arange(n, dtype=np.int32)[::-1].copy()  # later rows win ties
    rows, scores = cosine_topk(readonly(vectors), readonly(norms), readonly(query), 3, readonly(tie_rank))
    assert rows.tolist() == [2 * BLOCK_ROWS + 10, 2 * BLOCK_ROWS + 9, BLOCK_ROWS + 3]
    assert len(set(scores.tolist())) == 1


@pytest.mark.parametrize("cosine_topk", TOPK)
def test_cosine_topk_min_score_is_inclusive_and_mask_excludes(cosine_topk):
    vectors = readonly(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.0], [0.0, 0.0]]))
    norms = readonly(np.sqrt((vectors * vectors).sum(axis=1)))
    query = readonly(np.array([1.0, 0.0]))
    tie_rank = readonly(np.arange(5, dtype=np.int32))
    rows, _ = cosine_topk(vectors, norms, query, 10, tie_rank, min_score=0.0)
    assert rows.tolist() == [0, 1, 2, 4]  # cos = 1, 0.707, 0, -1, 0 (zero row)
    rows, _ = cosine_topk(vectors, norms, query, 10, tie_rank, min_score=np.nextafter(0.0, 1.0))
    assert rows.tolist() == [0, 1]
    mask = readonly(np.array([False, True, True, True, True]))
    rows, scores = cosine_topk(vectors, norms, query, 2, tie_rank, row_mask=mask)
    assert rows.tolist() == [1, 2]
    np.testing.assert_allclose(scores, [math.sqrt(0.5), 0.0])
    rows, scores = cosine_topk(vectors, norms, query, 0, tie_rank)
    assert rows.shape == scores.shape == (0,)


@pytest.mark.parametrize("cosine_topk", TOPK)
def test_cosine_topk_accepts_writeable_and_readonly_inputs_alike(cosine_topk):
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((30, 6))
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    query = rng.standard_normal(6)
    tie_rank = np.arange(30, dtype=np.int32)
    a = cosine_topk(vectors, norms, query, 5, tie_rank)
    b = cosine_topk(readonly(vectors), readonly(norms), readonly(query), 5, readonly(tie_rank))
    assert a[0].tolist() == b[0].tolist()
    assert vectors.flags.writeable  # the wrapper must not flip the caller's flags


@pytest.mark.parametrize("cosine_topk", TOPK)
def test_cosine_rejects_bad_inputs(cosine_topk):
    vectors = np.zeros((4, 3))
    norms = np.zeros(4)
    rank = np.arange(4, dtype=np.int32)
    with pytest.raises(TypeError):
        cosine_topk(vectors.astype(np.float32), norms, np.zeros(3), 1, rank)
    with pytest.raises(ValueError):
        cosine_topk(np.asfortranarray(np.zeros((4, 3))), norms, np.zeros(3), 1, rank)
    with pytest.raises(ValueError):
        cosine_topk(vectors, norms, np.zeros(4), 1, rank)
    with pytest.raises(ValueError):
        cosine_topk(vectors, norms[:3], np.zeros(3), 1, rank)
    with pytest.raises(TypeError):
        cosine_topk(vectors, norms, [0.0, 0.0, 0.0], 1, rank)


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="threads only exist when jitted")
def test_cosine_results_do_not_depend_on_thread_count():
    import numba

    rng = np.random.default_rng(2)
    vectors, norms = make_store(rng, 3 * BLOCK_ROWS + 5, 16)
    query = readonly(rng.standard_normal(16))
    tie_rank = readonly(rng.permutation(vectors.shape[0]).astype(np.int32))
    before = numba.get_num_threads()
    try:
        results = []
        for threads in sorted({1, before}):
            numba.set_num_threads(threads)
            rows, scores = kernels.cosine_topk(vectors, norms, query, 25, tie_rank)
            results.append((rows.tolist(), scores.tobytes(), kernels.cosine_scores(vectors, norms, query).tobytes()))
    finally:
        numba.set_num_threads(before)
    assert all(r == results[0] for r in results)


def test_importing_kernels_and_numpy_paths_do_not_import_numba():
    code = (
        "import sys, numpy as np, kernels\n"
        "v = np.eye(3); n = np.ones(3); r = np.arange(3, dtype=np.int32)\n"
        "kernels.cosine_topk_numpy(v, n, v[0].copy(), 2, r)\n"
        "kernels.cosine_scores_numpy(v, n, v[0].copy())\n"
        "kernels.topk_numpy(n, 2, r)\n"
        "ip = np.array([0, 1, 3], dtype=np.int64); pr = np.array([0, 1, 2], dtype=np.int32)\n"
        "kernels.overlap_counts_numpy(ip, pr, [0, 1], 3)\n"
        "kernels.bm25_scores_numpy(ip, pr, np.ones(3, dtype=np.int32), n, [1], 3, 1.0, 1.2, 0.75)\n"
        "kernels.rrf_numpy([r], 3); kernels.normalize_max(n)\n"
        "kernels.beam_search_numpy(ip, pr, n, np.zeros(3, dtype=np.int8), np.ones(1), [0], [1.0],"
        " 2, 2, 10, None, 1.0, 0.4, r[:2].copy())\n"
        "assert 'numba' not in sys.modules, 'numba was imported'\n"
        "assert not kernels.numba_loaded()\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
