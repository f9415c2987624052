"""The pure recall pipeline (``mnemon.recall``) on hand-built arrays, and BM25 on a real store
against hand-computed values (Decisions 12 and 14, §4.10 steps 5-8)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mnemon import recall
from mnemon.cli.state import GlobalOptions
from mnemon.records import (
    NEIGHBOUR_EXPANSION_TOKENS,
    NEIGHBOUR_LIFT_WEIGHTS_TOKENS,
    RERANK_WEIGHTS_TOKENS,
    SESSION_PRIOR_WEIGHT,
    SUBJECT_MISMATCH_FACTOR_EMBEDDED,
    SUBJECT_MISMATCH_FACTOR_TOKENS,
    SUBJECT_NAME_MIN_SHARE,
    Intent,
)


def arrays(n: int, *, bm25: list[float], prev: list[int] | None = None, nxt: list[int] | None = None,
           edges: list[tuple[int, int, str, float]] = (), superseded: list[int] = ()) -> recall.RecallArrays:  # type: ignore[assignment]
    from mnemon.records import EDGE_TYPES

    code = {t: i for i, t in enumerate(EDGE_TYPES)}
    node, nbr, w, typ, out = [], [], [], [], []
    for s, t, kind, weight in edges:
        node += [s, t]
        nbr += [t, s]
        w += [weight, weight]
        typ += [code[kind], code[kind]]
        out += [True, False]
    order = np.argsort(np.array(node, dtype=np.int64), kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(np.array(node, dtype=np.int64), minlength=n), out=ptr[1:])
    sup = np.zeros(n, dtype=np.bool_)
    sup[list(superseded)] = True
    return recall.RecallArrays(
        scope=np.ones(n, dtype=np.bool_), bm25=np.array(bm25, dtype=np.float64), similarity=None,
        entity_overlap=np.zeros(n, dtype=np.int32), query_entity_count=0,
        importance=np.full(n, 3, dtype=np.int8), created_rank=np.arange(n, dtype=np.int32),
        id_rank=np.arange(n, dtype=np.int32), csr_ptr=ptr,
        csr_nbr=np.array(nbr, dtype=np.int32)[order], csr_weight=np.array(w, dtype=np.float64)[order],
        csr_type=np.array(typ, dtype=np.int8)[order], csr_out=np.array(out, dtype=np.bool_)[order],
        superseded=sup, prev=np.array(prev or [-1] * n, dtype=np.int32), next=np.array(nxt or [-1] * n, dtype=np.int32),
    )  # fmt: skip


def test_neighbour_expansion_lifts_by_the_backbone_neighbours_directionally() -> None:
    # Rows 0 and 2 match; row 1 sits between them on the backbone but matches nothing and no
    # edge reaches it in the traversal arrays: it joins only through Decision 14.
    a = arrays(4, bm25=[2.0, 0.0, 1.0, 0.0], prev=[-1, 0, 1, 2], nxt=[1, 2, 3, -1])
    out = recall.run(a, Intent.GENERAL, 10)
    by_row = {h.row: h for h in out.hits}
    w_kw, _, _, w_graph = RERANK_WEIGHTS_TOKENS
    l_kw, _, _, l_graph = NEIGHBOUR_LIFT_WEIGHTS_TOKENS
    after, before = NEIGHBOUR_EXPANSION_TOKENS
    # Anchors: RRF 1/61 (row 0) and 1/62 (row 2) normalised by the max; graph min-max over both.
    kw0, kw2 = 1.0, 0.5
    base0 = w_kw * kw0 + w_graph * 1.0
    base2 = w_kw * kw2 + w_graph * 0.0
    # What a neighbour lends is its own signals in the lift table, not its rerank score.
    lent0 = l_kw * kw0 + l_graph * 1.0
    lent2 = l_kw * kw2 + l_graph * 0.0
    assert math.isclose(by_row[0].score, base0)  # its neighbour row 1 is not a candidate: counts 0
    assert math.isclose(by_row[2].score, base2)
    # Row 1 follows row 0 (lift `after`) and precedes row 2 (lift `before`); row 3 follows row 2.
    assert by_row[1].via == "neighbor" and math.isclose(by_row[1].score, max(after * lent0, before * lent2))
    assert by_row[3].via == "neighbor" and math.isclose(by_row[3].score, after * lent2)
    expected = sorted(by_row, key=lambda r: (-by_row[r].score, -r))  # equal scores: the newer first
    assert [h.row for h in out.hits] == expected
    assert out.anchor_count == 2 and out.traversed == 2 and out.hint == "sparse_results"  # 4 < 10 // 2


def test_a_short_neighbour_bridges_the_lift_to_the_row_beyond_it() -> None:
    # Row 0 matches; row 1 ("How did they react?") is short, so row 2 (the reply) is lifted by row 0
    # at the lift's weight applied twice; row 3 lies beyond a long row 2 and stays out.
    def with_lengths(lengths: list[int]) -> recall.RecallArrays:
        a = arrays(5, bm25=[2.0, 0.0, 0.0, 0.0, 0.0], prev=[-1, 0, 1, 2, 3], nxt=[1, 2, 3, 4, -1])
        doc_len = np.array(lengths, dtype=np.int32)
        return recall.RecallArrays(**{**{f: getattr(a, f) for f in a.__dataclass_fields__},
                                      "doc_len": doc_len, "mean_doc_len": float(doc_len.mean())})  # fmt: skip

    after, before = NEIGHBOUR_EXPANSION_TOKENS
    lent0 = NEIGHBOUR_LIFT_WEIGHTS_TOKENS[0] * 1.0  # keyword 1.0; the graph signal of a lone candidate is 0
    bridged = {h.row: h for h in recall.run(with_lengths([10, 2, 10, 10, 10]), Intent.GENERAL, 10).hits}
    assert sorted(bridged) == [0, 1, 2]
    assert math.isclose(bridged[1].score, after * lent0)
    assert bridged[2].via == "neighbor" and math.isclose(bridged[2].score, after * after * lent0)
    # every row as long as the others (and without lengths at all): one step only, as before
    assert sorted(h.row for h in recall.run(with_lengths([10] * 5), Intent.GENERAL, 10).hits) == [0, 1]
    plain = recall.run(arrays(5, bm25=[2.0, 0.0, 0.0, 0.0, 0.0], prev=[-1, 0, 1, 2, 3], nxt=[1, 2, 3, 4, -1]),
                       Intent.GENERAL, 10)  # fmt: skip
    assert sorted(h.row for h in plain.hits) == [0, 1]
    # the other way: a short row before a match bridges to the row before it, at before x before
    back = {h.row: h for h in recall.run(recall.RecallArrays(**{
        **{f: getattr(with_lengths([10, 10, 10, 2, 10]), f) for f in recall.RecallArrays.__dataclass_fields__},
        "bm25": np.array([0.0, 0.0, 0.0, 0.0, 2.0])}), Intent.GENERAL, 10).hits}  # fmt: skip
    assert sorted(back) == [2, 3, 4] and math.isclose(back[2].score, before * before * lent0)


def test_a_row_gains_the_best_match_of_its_session() -> None:
    # Rows 0-2 were written on one day, rows 3-4 on another; no backbone, no edges. Row 0 matches
    # strongly, rows 2 and 4 equally weakly: row 2 shares row 0's day and so ranks above row 4.
    bm25 = [4.0, 0.0, 1.0, 1.2, 1.0]
    days = np.array([b"2026-03-01", b"2026-03-01", b"2026-03-01", b"2026-03-02", b"2026-03-02"])
    plain = arrays(5, bm25=bm25)
    read: list[list[int]] = []

    def created_day(rows: np.ndarray) -> np.ndarray:
        read.append(sorted(rows.tolist()))
        return days[rows]

    a = recall.RecallArrays(**{**{f: getattr(plain, f) for f in plain.__dataclass_fields__},
                               "created_day": created_day})  # fmt: skip
    by_row = {h.row: h for h in recall.run(a, Intent.GENERAL, 10).hits}
    before = {h.row: h for h in recall.run(plain, Intent.GENERAL, 10).hits}
    assert sorted(by_row) == sorted(before) == [0, 2, 3, 4]  # row 1 matches nothing: no candidate
    assert read == [[0, 2, 3, 4]]  # the days of the candidates only, read once
    w_kw, w_entity, _, _ = RERANK_WEIGHTS_TOKENS
    own = {r: w_kw * bm25[r] / 4.0 for r in by_row}  # keyword signal (max-normalised), no entity
    best = {0: own[0], 2: own[0], 3: own[3], 4: own[3]}
    for r in by_row:
        assert math.isclose(by_row[r].score, before[r].score + SESSION_PRIOR_WEIGHT * best[r])
    # equal matches: without the prior row 4 goes first (its graph signal is higher), with it row 2
    assert before[2].keyword == before[4].keyword and before[2].score < before[4].score
    order = [h.row for h in recall.run(a, Intent.GENERAL, 10).hits]
    assert order.index(2) < order.index(4)
    assert [h.row for h in recall.run(plain, Intent.GENERAL, 10).hits].index(4) < \
        [h.row for h in recall.run(plain, Intent.GENERAL, 10).hits].index(2)
    # signals reported per hit are the row's own, the prior only moves the score
    assert by_row[2].keyword == before[2].keyword and by_row[2].graph == before[2].graph
    # a long query (a whole turn or prompt) matches many sessions: no prior
    import dataclasses

    long = recall.run(dataclasses.replace(a, long_query=True), Intent.GENERAL, 10)
    assert long == recall.run(dataclasses.replace(plain, long_query=True), Intent.GENERAL, 10)


def test_the_session_prior_weight_is_the_models_when_its_similarity_is_in_the_signals() -> None:
    # Same rows and days as above, with a similarity: a scale's session_prior weighs the session prior
    # (e5: records.SESSION_PRIOR_E5); without a query vector, SESSION_PRIOR_WEIGHT whatever the scale.
    import dataclasses

    from mnemon.records import CONTRACT_SIMILARITY, SESSION_PRIOR_E5, similarity_scale

    assert similarity_scale("multilingual-e5-small").session_prior == SESSION_PRIOR_E5 != SESSION_PRIOR_WEIGHT
    assert CONTRACT_SIMILARITY.session_prior == SESSION_PRIOR_WEIGHT
    days = np.array([b"2026-03-01", b"2026-03-01", b"2026-03-01", b"2026-03-02", b"2026-03-02"])
    base = dataclasses.replace(arrays(5, bm25=[4.0, 0.0, 1.0, 1.2, 1.0]), created_day=lambda rows: days[rows],
                               similarity=np.array([0.9, 0.1, 0.3, 0.2, 0.3]))  # fmt: skip
    doubled = dataclasses.replace(CONTRACT_SIMILARITY, session_prior=2 * SESSION_PRIOR_WEIGHT)

    def gain(a: recall.RecallArrays, scale: object) -> dict[int, float]:
        """Each hit's score with its session prior less its score without (no days: no prior)."""
        with_prior = recall.run(dataclasses.replace(a, similarity_scale=scale), Intent.GENERAL, 10).hits
        without = recall.run(dataclasses.replace(a, similarity_scale=scale, created_day=None), Intent.GENERAL, 10).hits
        return {h.row: h.score - {w.row: w.score for w in without}[h.row] for h in with_prior}

    contract, twice = gain(base, CONTRACT_SIMILARITY), gain(base, doubled)
    assert sorted(contract) == sorted(twice) and contract[2] > 0  # row 2 shares row 0's day
    for r in contract:  # the same own matches (same floor): the gain scales with the weight alone
        assert math.isclose(twice[r], 2 * contract[r])
    vectorless = dataclasses.replace(base, similarity=None)
    assert gain(vectorless, doubled) == gain(vectorless, CONTRACT_SIMILARITY)


def test_supersedes_demotion_after_expansion_and_flag() -> None:
    plain = recall.run(arrays(3, bm25=[1.0, 2.0, 0.0], prev=[-1, 0, 1], nxt=[1, 2, -1]), Intent.GENERAL, 10)
    demoted = recall.run(arrays(3, bm25=[1.0, 2.0, 0.0], prev=[-1, 0, 1], nxt=[1, 2, -1], superseded=[1]),
                         Intent.GENERAL, 10)  # fmt: skip
    before = {h.row: h for h in plain.hits}
    after = {h.row: h for h in demoted.hits}
    assert after[1].superseded and not after[0].superseded
    assert math.isclose(after[1].score, before[1].score * 0.25)
    # Expansion used the undemoted score of row 1: its neighbours keep their lift.
    assert math.isclose(after[0].score, before[0].score) and math.isclose(after[2].score, before[2].score)
    assert [h.row for h in plain.hits][0] == 1 and [h.row for h in demoted.hits][-1] == 1


def test_ties_break_by_importance_then_created_then_id() -> None:
    a = arrays(4, bm25=[0.0] * 4)
    a = recall.RecallArrays(**{**{f: getattr(a, f) for f in a.__dataclass_fields__},
                               "importance": np.array([3, 5, 3, 3], dtype=np.int8),
                               "created_rank": np.array([0, 0, 2, 2], dtype=np.int32),
                               "id_rank": np.array([3, 2, 1, 0], dtype=np.int32)})  # fmt: skip
    final = np.full(4, 0.5)
    assert recall._order_rows(final, np.arange(4), a).tolist() == [1, 3, 2, 0]
    final[0] = 0.6
    assert recall._order_rows(final, np.arange(4), a).tolist() == [0, 1, 3, 2]


def test_hint_sparse_when_fewer_than_half_the_limit() -> None:
    a = arrays(3, bm25=[1.0, 0.5, 0.0])
    assert recall.run(a, Intent.GENERAL, 4).hint is None  # 2 results, 4 // 2 = 2
    assert recall.run(a, Intent.GENERAL, 6).hint == "sparse_results"
    assert recall.run(arrays(1, bm25=[0.0]), Intent.GENERAL, 1).hint == "sparse_results"


def test_causal_order_kahn_with_cycle_appended_in_score_order() -> None:
    # Results in score order 0..4; causal 3 → 0, 4 → 3; 1 ⇄ 2 form a cycle.
    a = arrays(5, bm25=[0.0] * 5, edges=[(3, 0, "causal", 1.0), (4, 3, "causal", 1.0), (1, 2, "causal", 1.0),
                                          (2, 1, "causal", 1.0), (0, 1, "temporal", 1.0)])
    ordered = recall.causal_order(np.arange(5), a)
    assert ordered.tolist() == [4, 3, 0, 1, 2]


def test_numba_and_numpy_paths_agree() -> None:
    rng = np.random.default_rng(7)
    n = 60
    edges = [(int(s), int(t), ["temporal", "causal", "entity", "semantic"][int(k)], float(w))
             for s, t, k, w in zip(rng.integers(0, n, 200), rng.integers(0, n, 200), rng.integers(0, 4, 200),
                                   rng.random(200)) if s != t]  # fmt: skip
    bm25 = np.where(rng.random(n) < 0.3, rng.random(n) * 3, 0.0).tolist()
    a = arrays(n, bm25=bm25, edges=edges, prev=[-1] + list(range(n - 1)), nxt=list(range(1, n)) + [-1])
    for intent in Intent:
        slow = recall.run(a, intent, 10, use_numba=False)
        fast = recall.run(a, intent, 10, use_numba=True)
        assert slow == fast


# --- BM25 (Decision 12) on a real store ---------------------------------------------------------------


@pytest.fixture
def engine(data_dir: Path):
    from mnemon.engine import Engine

    eng = Engine(GlobalOptions(data_dir=str(data_dir)).settings())
    yield eng
    eng.close()


def test_bm25_matches_a_hand_computed_example(engine) -> None:
    # Stemming (Decision 13): "painted" / "painting" / "paints" all become "paint".
    for text in ("painted fence", "painting the fence and painting the barn", "barn owl"):
        engine.remember(text, no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    scores = engine.retrieval._bm25(index, "paints", scope, False)
    by_text = {t: scores[index.row_of(i)] for t, i in _ids(engine).items()}
    # N = 3, df(paint) = 2, doc lengths 2 ("painted fence") and 4 ("painting fence painting barn"),
    # avgdl = (2 + 4 + 2) / 3; tf = 1 and 2.
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    avgdl = 8 / 3

    def term(tf: int, length: int) -> float:
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avgdl))

    assert math.isclose(by_text["painted fence"], term(1, 2), rel_tol=1e-12)
    assert math.isclose(by_text["painting the fence and painting the barn"], term(2, 4), rel_tol=1e-12)
    assert by_text["barn owl"] == 0.0
    # Scope changes N, df and avgdl: only the second and third rows in scope.
    scope2 = scope.copy()
    scope2[index.row_of(_ids(engine)["painted fence"])] = False
    scoped = engine.retrieval._bm25(index, "paints", scope2, False)
    idf2 = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    expect = idf2 * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 4 / 3))
    assert math.isclose(scoped[index.row_of(_ids(engine)["painting the fence and painting the barn"])], expect)
    assert np.array_equal(engine.retrieval._bm25(index, "paints", scope, True), scores)  # numba path agrees


def _ids(engine) -> dict[str, str]:
    from mnemon.store import insights

    return {i.content: i.id for i in insights.all_active(engine.store.conn)}


def test_tag_only_terms_count_once(engine) -> None:
    engine.remember("zebra crossing", tags=["safety", "safety-first"], no_diff=True)
    index = engine.hot_index()
    row = 0
    lo, hi = int(index.r_ptr[row]), int(index.r_ptr[row + 1])
    tf = dict(zip((index.vocab[t] for t in index.r_term[lo:hi]), index.r_tf[lo:hi].tolist()))
    assert tf == {"zebra": 1, "cross": 1, "safeti": 1, "first": 1}  # "crossing" stems to "cross"
    assert int(index.doc_len[row]) == 2  # the content's token sequence only


@pytest.mark.parametrize("weight_name, query, other_form, with_other, with_own, filler", [
    # "mentorship" stems to itself (Porter2 keeps -ship); the memory says "mentored" (stem "mentor"): the
    # root of a derived noun
    ("QUERY_DERIVED_WEIGHT", "mentorship", "mentor", "she mentored two students", "the mentorship papers", "papers"),
    # "meet" and "met" share no stem (no stemmer joins an irregular verb's forms): another form of it
    ("QUERY_IRREGULAR_WEIGHT", "meet", "met", "Maria met Jean at the shelter", "Maria will meet Jean soon", "Maria will Jean soon"),
])  # fmt: skip
def test_a_query_words_other_form_counts_at_a_reduced_weight(
    engine, weight_name: str, query: str, other_form: str, with_other: str, with_own: str, filler: str
) -> None:
    from mnemon import records

    # The query's other form adds the weight x its own BM25; a memory with the query's own word keeps the full term.
    for text in (with_other, with_own, "barn owl"):
        engine.remember(text, no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    ids = _ids(engine)
    scores = engine.retrieval._bm25(index, query, scope, False)
    other_only = engine.retrieval._bm25(index, other_form, scope, False)
    own_only = engine.retrieval._bm25(index, with_own, scope, False) - engine.retrieval._bm25(index, filler, scope, False)
    other, own = index.row_of(ids[with_other]), index.row_of(ids[with_own])
    assert math.isclose(scores[other], getattr(records, weight_name) * other_only[other], rel_tol=1e-12)
    assert math.isclose(scores[own], own_only[own], rel_tol=1e-12)
    assert scores[own] > scores[other] > 0
    assert scores[index.row_of(ids["barn owl"])] == 0.0
    assert np.array_equal(engine.retrieval._bm25(index, query, scope, True), scores)  # numba path agrees


def test_a_possessive_s_counts_only_with_its_owner(engine) -> None:
    # "Melanie's plans" asks for Melanie's plans: the "s" of "Caroline's plans" is no match, the
    # one of a memory that also says "Melanie" is. Without a content word before it ("it's") the
    # query's "s" counts as any term.
    for text in ("Caroline's plans for summer", "Melanie's plans for summer", "plans for summer",
                 "it's a sunny day", "Melanie's dog"):
        engine.remember(text, no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    ids = _ids(engine)
    row = {text: index.row_of(i) for text, i in ids.items()}
    scores = engine.retrieval._bm25(index, "What are Melanie's plans for summer?", scope, False)
    without_s = engine.retrieval._bm25(index, "What are Melanie plans for summer?", scope, False)
    assert scores[row["Caroline's plans for summer"]] == without_s[row["Caroline's plans for summer"]]
    assert scores[row["Melanie's plans for summer"]] > without_s[row["Melanie's plans for summer"]]
    assert scores[row["it's a sunny day"]] == 0.0
    assert scores[row["Melanie's dog"]] > without_s[row["Melanie's dog"]] > 0
    assert engine.retrieval._bm25(index, "it's sunny", scope, False)[row["it's a sunny day"]] > \
        engine.retrieval._bm25(index, "sunny", scope, False)[row["it's a sunny day"]]  # no owner: "s" unbound
    assert np.array_equal(engine.retrieval._bm25(index, "What are Melanie's plans for summer?", scope, True), scores)
    top = engine.recall("What are Melanie's plans for summer?", limit=1).hits
    assert top[0].insight.content == "Melanie's plans for summer"


def test_a_camel_case_identifier_meets_its_words(engine) -> None:
    # An agent writes "OrderRouter"; a question says "the order router" (and the other way round).
    for text in ("Switched OrderRouter to async retries", "the payment gateway was rewritten in Go",
                 "The order form was redesigned", "barn owl"):
        engine.remember(text, no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    row = {text: index.row_of(i) for text, i in _ids(engine).items()}
    spaced = engine.retrieval._bm25(index, "order router", scope, False)
    assert spaced[row["Switched OrderRouter to async retries"]] > spaced[row["The order form was redesigned"]] > 0
    camel = engine.retrieval._bm25(index, "PaymentGateway", scope, False)
    assert camel[row["the payment gateway was rewritten in Go"]] > 0
    assert camel[row["barn owl"]] == 0.0
    exact = engine.retrieval._bm25(index, "OrderRouter", scope, False)  # the identifier itself counts too
    assert exact[row["Switched OrderRouter to async retries"]] > exact[row["The order form was redesigned"]] > 0
    assert np.array_equal(engine.retrieval._bm25(index, "order router", scope, True), spaced)  # numba agrees
    assert engine.recall("which router handles orders", limit=1).hits[0].insight.content == \
        "Switched OrderRouter to async retries"


def test_a_neighbour_lends_its_match_not_its_reach() -> None:
    # Rows 0 and 2 have the same keyword score; only row 0 is linked to the top anchor (row 4), so it
    # gets the higher graph signal and the higher rerank score. The rows after them (1 and 3) match
    # nothing: what each is lent comes from the lift table, where the graph counts for little.
    a = arrays(
        6, bm25=[1.0, 0.0, 1.0, 0.0, 3.0, 0.0], prev=[-1, 0, -1, 2, -1, 4], nxt=[1, -1, 3, -1, 5, -1],
        edges=[(4, 0, "semantic", 1.0)],
    )
    out = recall.run(a, Intent.GENERAL, 10)
    by_row = {h.row: h for h in out.hits}
    assert by_row[0].graph > by_row[2].graph
    l_kw, _, _, l_graph = NEIGHBOUR_LIFT_WEIGHTS_TOKENS
    after, _ = NEIGHBOUR_EXPANSION_TOKENS
    for follower, matched in ((1, 0), (3, 2)):
        hit = by_row[matched]
        assert math.isclose(by_row[follower].score, after * (l_kw * hit.keyword + l_graph * hit.graph))
    # The lift gap between the followers is the graph gap at the lift table's (small) graph weight.
    gap = by_row[1].score - by_row[3].score
    assert math.isclose(gap, after * l_graph * (by_row[0].graph - by_row[2].graph))
    assert [h.row for h in recall.run(a, Intent.GENERAL, 10).hits] == [h.row for h in out.hits]  # deterministic


def test_lift_tables_keep_a_lent_score_at_most_one() -> None:
    # The prompt hook's floor (setup/hooks.py) sits above `after` on the premise that a neighbour is
    # lent at most 1 x after; every lift table must keep that.
    from mnemon.records import NEIGHBOUR_LIFT_WEIGHTS_EMBEDDED

    for table in (NEIGHBOUR_LIFT_WEIGHTS_EMBEDDED, NEIGHBOUR_LIFT_WEIGHTS_TOKENS):
        assert all(w >= 0 for w in table) and sum(table) <= 1.0


def test_a_day_or_month_named_in_the_query_boosts_the_memories_written_then(engine, tmp_path) -> None:
    from mnemon.drafts import parse_draft
    from mnemon.records import QUERY_DAY_BOOST, QUERY_MONTH_BOOST

    draft = {"schema_version": "1", "insights": [
        {"content": "Gina found a wholesaler for the clothing store today", "created_at": "2023-02-01T13:56:00Z"},
        {"content": "Gina found a logo for the store", "created_at": "2023-03-10T09:00:00Z"},
        {"content": "Jon practised a dance", "created_at": "2023-02-01T13:57:00Z"},
    ]}  # fmt: skip
    engine.import_draft(parse_draft(json.dumps(draft)), no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    ids = _ids(engine)
    row = {text: index.row_of(i) for text, i in ids.items()}
    plain = engine.retrieval._bm25(index, "What did Gina find for the store?", scope, False)
    dated = engine.retrieval._bm25(index, "What did Gina find for the store on 1 February, 2023?", scope, False)
    wholesaler, logo = row["Gina found a wholesaler for the clothing store today"], row["Gina found a logo for the store"]
    assert math.isclose(dated[wholesaler], (1 + QUERY_DAY_BOOST) * plain[wholesaler], rel_tol=1e-12)
    assert dated[logo] == plain[logo] > 0  # another day: unchanged
    assert dated[row["Jon practised a dance"]] == 0.0  # the day alone matches nothing
    in_month = engine.retrieval._bm25(index, "What did Gina find for the store in February 2023?", scope, False)
    assert math.isclose(in_month[wholesaler], (1 + QUERY_MONTH_BOOST) * plain[wholesaler], rel_tol=1e-12)
    assert in_month[logo] == plain[logo]  # another month: unchanged
    assert plain[logo] > plain[wholesaler]  # the shorter memory ranks first without the day ...
    top = engine.recall("What did Gina find for the store on 1 February, 2023?", limit=3).hits
    assert top[0].insight.content == "Gina found a wholesaler for the clothing store today"  # ... and second with it


def test_created_days_reads_the_date_of_any_stamp_width() -> None:
    from mnemon.engine.retrieve import created_days

    plain = np.array([b"2023-02-01T13:56:00Z", b"2023-03-10T09:00:00Z"], dtype="S20")
    assert created_days(plain).tolist() == [b"2023-02-01", b"2023-03-10"]
    # one stamp with fractional seconds widens the whole array: the prefix is still the date
    wide = np.array([b"2023-02-01T13:56:00.123456789Z", b"2023-03-10T09:00:00Z"], dtype="S30")
    assert created_days(wide).tolist() == [b"2023-02-01", b"2023-03-10"]
    assert created_days(plain[::-1]).tolist() == [b"2023-03-10", b"2023-02-01"]  # a non-contiguous view


def test_a_long_query_ranks_by_its_match_not_the_graph() -> None:
    # Rows 0 and 2 match equally; row 0 is linked to the top anchor (row 4), so an ordinary query
    # ranks it above row 2 by the graph signal. A long query (a whole dialogue turn: its anchors are
    # spread over its many topics) gives the graph's weight to the keyword signal: the two tie on
    # score, and the lift a follower is lent comes from its neighbour's match alone.
    import dataclasses

    a = arrays(
        6, bm25=[1.0, 0.0, 1.0, 0.0, 3.0, 0.0], prev=[-1, 0, -1, 2, -1, 4], nxt=[1, -1, 3, -1, 5, -1],
        edges=[(4, 0, "semantic", 1.0)],
    )
    short = {h.row: h for h in recall.run(a, Intent.GENERAL, 10).hits}
    assert short[0].score > short[2].score
    long = {h.row: h for h in recall.run(dataclasses.replace(a, long_query=True), Intent.GENERAL, 10).hits}
    kw, ent, _, graph = RERANK_WEIGHTS_TOKENS
    for row in (0, 2, 4):
        assert long[row].graph == short[row].graph  # the signal is the same; its weight is not
        assert math.isclose(long[row].score, (kw + graph) * long[row].keyword + ent * long[row].entity)
    assert long[0].score == long[2].score and long[1].score == long[3].score
    assert recall._long_query_weights((0.6, 0.1, 0.2, 0.1)) == (0.7, 0.1, 0.2, 0.0)


def test_a_partly_long_query_moves_that_share_of_the_graph_s_weight() -> None:
    # engine.retrieve.long_query_share: a query between LONG_QUERY_TERMS and LONG_QUERY_FULL is that far
    # a whole turn; that share of the graph's weight goes to the keyword (or the similarity), the rest
    # stays, and its score lies between the ordinary query's and the long one's.
    import dataclasses

    assert recall._long_query_weights((0.6, 0.1, 0.2, 0.1), False, 0.5) == pytest.approx((0.65, 0.1, 0.2, 0.05))
    assert recall._long_query_weights((0.6, 0.1, 0.2, 0.1), True, 0.25) == pytest.approx((0.6, 0.1, 0.225, 0.075))
    assert recall._long_query_weights((0.6, 0.1, 0.2, 0.1), False, 1.0) == (0.7, 0.1, 0.2, 0.0)
    a = arrays(
        6, bm25=[1.0, 0.0, 1.0, 0.0, 3.0, 0.0], prev=[-1, 0, -1, 2, -1, 4], nxt=[1, -1, 3, -1, 5, -1],
        edges=[(4, 0, "semantic", 1.0)],
    )
    short = {h.row: h for h in recall.run(a, Intent.GENERAL, 10).hits}
    half = {h.row: h for h in recall.run(dataclasses.replace(a, long_query=0.5), Intent.GENERAL, 10).hits}
    long = {h.row: h for h in recall.run(dataclasses.replace(a, long_query=1.0), Intent.GENERAL, 10).hits}
    assert short[0].score > half[0].score > long[0].score  # row 0's graph reach counts half
    assert half[0].score == pytest.approx((short[0].score + long[0].score) / 2)
    assert long[0].score == long[2].score and half[0].score > half[2].score


def test_the_engine_passes_each_candidate_s_creation_day(engine, monkeypatch) -> None:
    from mnemon.drafts import parse_draft

    stamps = {"Gina found a wholesaler for the clothing store": "2023-02-01T13:56:00Z",
              "Gina found a logo for the store": "2023-03-10T09:00:00Z",
              "Jon practised a dance for the store opening": "2023-02-01T23:59:59Z"}  # fmt: skip
    draft = {"schema_version": "1", "insights": [{"content": c, "created_at": t} for c, t in stamps.items()]}
    engine.import_draft(parse_draft(json.dumps(draft)), no_diff=True)
    seen: list[recall.RecallArrays] = []
    original = recall.run

    def spy(a: recall.RecallArrays, *args, **kwargs):
        seen.append(a)
        return original(a, *args, **kwargs)

    monkeypatch.setattr(recall, "run", spy)
    hits = engine.recall("store", limit=3).hits
    assert len(hits) == 3
    index = engine.hot_index()
    rows = np.array([index.row_of(h.insight.id) for h in hits], dtype=np.int64)
    (a,) = seen
    assert a.created_day is not None
    assert a.created_day(rows).tolist() == [stamps[h.insight.content][:10].encode() for h in hits]


class _Bounds:
    """Bounded similarities as the int8 pass gives them: within ``slack`` of the exact cosines,
    made exact row by row on ``refine``."""

    def __init__(self, exact: np.ndarray, slack: np.ndarray) -> None:
        self.exact, self.slack = exact, slack.copy()

    def refine(self, values: np.ndarray, rows: np.ndarray) -> None:
        values[rows] = self.exact[rows]
        self.slack[rows] = 0.0

    def exact_read(self) -> None:  # no vectors behind these values: the search refines by rounds
        return None


def test_a_relative_floor_starts_an_ordinary_query_s_signal_below_its_best_cosine() -> None:
    # A model scale with signal_below_best: an ordinary query's similarity signal maps its best cosine
    # in scope less that margin to 0 (and its vector anchors' floor follows); a long query keeps the
    # fixed floor; the contract's scale (every model not calibrated) is left as it is.
    import dataclasses

    from mnemon.records import CONTRACT_SIMILARITY, SimilarityScale

    scale = SimilarityScale(signal_floor=0.85, signal_below_best=0.07)
    cosines = np.array([0.80, 0.84, 0.86, 0.89, 0.90, 0.95], dtype=np.float64)
    a = dataclasses.replace(arrays(6, bm25=[1.0, 0.5, 0.0, 0.2, 0.0, 0.0]), similarity=cosines, similarity_scale=scale)
    a = dataclasses.replace(a, scope=np.array([True, True, True, True, True, False]))  # 0.95 is out of scope
    floor = 0.90 - 0.07
    assert recall._query_scale(a)[0].signal_floor == pytest.approx(floor)
    hits = {h.row: h for h in recall.run(a, Intent.GENERAL, 10).hits}
    for row in hits:
        assert hits[row].similarity == pytest.approx(max(0.0, (cosines[row] - floor) / (1 - floor)))
    assert 0 in hits and hits[0].similarity == 0.0  # below the relative floor: no signal, still a keyword hit
    long = dataclasses.replace(a, long_query=True)
    assert recall._query_scale(long)[0] is scale
    long_hits = {h.row: h for h in recall.run(long, Intent.GENERAL, 10).hits}
    assert long_hits[4].similarity == pytest.approx((0.90 - 0.85) / 0.15) and long_hits[1].similarity == 0.0
    contract = dataclasses.replace(a, similarity_scale=CONTRACT_SIMILARITY)
    assert recall._query_scale(contract)[0] is CONTRACT_SIMILARITY


def test_a_floor_by_the_spread_starts_an_ordinary_query_s_signal_standard_deviations_below_its_best() -> None:
    # A scale with spread_below_best and best_signal (e5's for a query written in Han): an ordinary query's
    # floor is its best cosine in scope less that many standard deviations of its cosines in scope, and its
    # best cosine's signal is best_signal, in a conversation (backbone share 1); a long query keeps its own
    # margin and span, and so do a scope of one cosine (no spread) and separate memories (share 0).
    import dataclasses

    from mnemon.records import SimilarityScale

    scale = SimilarityScale(signal_floor=0.85, signal_below_best=0.07, long_below_best=0.04,
                            spread_below_best=1.5, best_signal=0.4)  # fmt: skip
    cosines = np.array([0.80, 0.84, 0.86, 0.89, 0.90, 0.95], dtype=np.float64)
    scope = np.array([True, True, True, True, True, False])  # 0.95 is out of scope
    a = dataclasses.replace(arrays(6, bm25=[1.0, 0.5, 0.0, 0.2, 0.0, 0.0]), similarity=cosines,
                            similarity_scale=scale, scope=scope)  # fmt: skip
    floor = 0.90 - 1.5 * float(cosines[scope].std())
    assert recall._query_scale(a)[0].signal_floor == pytest.approx(floor)
    hits = {h.row: h for h in recall.run(a, Intent.GENERAL, 10).hits}
    assert hits[4].similarity == pytest.approx(0.4)
    for row in hits:
        assert hits[row].similarity == pytest.approx(max(0.0, 0.4 * (cosines[row] - floor) / (0.90 - floor)))
    assert hits[1].similarity == 0.0 < hits[3].similarity  # 0.84 is below the floor (0.846), 0.89 above
    long = dataclasses.replace(a, long_query=1.0)
    assert recall._query_scale(long)[0].signal_floor == pytest.approx(0.90 - 0.04)
    assert recall._signal_span(dataclasses.replace(long, similarity_scale=recall._query_scale(long)[0])) == pytest.approx(
        1 - (0.90 - 0.04))
    alone = dataclasses.replace(a, scope=np.array([False, False, False, False, True, False]))
    assert recall._query_scale(alone)[0].signal_floor == pytest.approx(0.90 - 0.07)
    (hit,) = recall.run(alone, Intent.GENERAL, 10).hits
    assert hit.similarity == pytest.approx(0.07 / (1 - (0.90 - 0.07)))
    # separate memories (backbone share 0): the margin's floor and span, bit for bit; half way at share 0.5
    separate = dataclasses.replace(a, backbone_share=0.0)
    plain = dataclasses.replace(separate, similarity_scale=dataclasses.replace(scale, spread_below_best=0.0))
    assert [(h.row, h.score) for h in recall.run(separate, Intent.GENERAL, 10).hits] == [
        (h.row, h.score) for h in recall.run(plain, Intent.GENERAL, 10).hits]
    half = dataclasses.replace(a, backbone_share=0.5)
    below = 0.5 * 1.5 * float(cosines[scope].std()) + 0.5 * 0.07
    assert recall._query_scale(half)[0].signal_floor == pytest.approx(0.90 - below)
    hits = {h.row: h for h in recall.run(half, Intent.GENERAL, 10).hits}
    assert hits[4].similarity == pytest.approx(0.5 * 0.4 + 0.5 * below / (1 - (0.90 - below)))


def test_a_model_measured_on_long_queries_gives_them_a_relative_floor_and_the_graph_s_weight() -> None:
    # A scale with long_below_best: a long query's floor is its best cosine in scope less that margin,
    # and its graph weight goes to the similarity rather than the keyword; an ordinary query keeps its
    # own margin and its graph; without the margin (the contract's scale) a long query keeps the fixed
    # floor and gives the graph's weight to the keyword.
    import dataclasses

    from mnemon.records import CONTRACT_SIMILARITY, RERANK_WEIGHTS_EMBEDDED, SimilarityScale

    assert recall._long_query_weights((0.6, 0.1, 0.2, 0.1), True) == pytest.approx((0.6, 0.1, 0.3, 0.0))
    assert recall._long_query_weights((0.6, 0.1, 0.2, 0.1), False) == (0.7, 0.1, 0.2, 0.0)
    scale = SimilarityScale(signal_floor=0.85, signal_below_best=0.07, long_below_best=0.04)
    cosines = np.array([0.80, 0.84, 0.86, 0.89, 0.90, 0.95], dtype=np.float64)
    a = arrays(6, bm25=[1.0, 0.5, 0.0, 0.2, 0.0, 0.0], edges=[(0, 3, "semantic", 1.0)])
    a = dataclasses.replace(a, similarity=cosines, similarity_scale=scale,
                            scope=np.array([True, True, True, True, True, False]))  # fmt: skip
    long = dataclasses.replace(a, long_query=True)
    assert recall._query_scale(long)[0].signal_floor == pytest.approx(0.90 - 0.04)
    assert recall._query_scale(a)[0].signal_floor == pytest.approx(0.90 - 0.07)
    floor = 0.90 - 0.04
    kw, ent, sim, graph = RERANK_WEIGHTS_EMBEDDED
    for hit in recall.run(long, Intent.GENERAL, 10).hits:  # no backbone here: no lift
        assert hit.similarity == pytest.approx(max(0.0, (cosines[hit.row] - floor) / (1 - floor)))
        assert hit.score == pytest.approx(kw * hit.keyword + ent * hit.entity + (sim + graph) * hit.similarity)
    contract = dataclasses.replace(long, similarity_scale=CONTRACT_SIMILARITY)
    assert recall._query_scale(contract)[0] is CONTRACT_SIMILARITY
    for hit in recall.run(contract, Intent.GENERAL, 10).hits:
        assert hit.score == pytest.approx((kw + graph) * hit.keyword + ent * hit.entity + sim * hit.similarity)


def test_a_long_query_among_separate_memories_gives_its_best_cosine_the_scale_s_signal() -> None:
    # A scale with separate_best_signal: a long query's best cosine reaches that signal where the store's
    # backbone share is 0 (separate memories), the share less of the way between (0.5: half), and the
    # plain (cosine - floor) / (1 - floor) in a conversation (share 1), for an ordinary query and for a
    # scale without it. Every signal keeps its order: one span for every row.
    import dataclasses

    from mnemon.records import SimilarityScale, similarity_scale

    assert similarity_scale("multilingual-e5-small").separate_best_signal > 0.0
    scale = SimilarityScale(signal_floor=0.85, signal_below_best=0.07, long_below_best=0.04, separate_best_signal=0.6)
    cosines = np.array([0.80, 0.84, 0.86, 0.89, 0.90, 0.95], dtype=np.float64)
    a = arrays(6, bm25=[1.0, 0.5, 0.0, 0.2, 0.0, 0.0])
    a = dataclasses.replace(a, similarity=cosines, similarity_scale=scale, long_query=1.0,
                            scope=np.array([True, True, True, True, True, False]))  # fmt: skip
    floor = 0.90 - 0.04
    plain = 0.04 / (1 - floor)  # the best cosine's signal with the plain span

    def signals(arrays_: recall.RecallArrays) -> dict[int, float]:
        return {h.row: h.similarity for h in recall.run(arrays_, Intent.GENERAL, 10).hits}

    conversation = signals(a)  # backbone share 1 (the default)
    assert conversation[4] == pytest.approx(plain) and conversation[3] == pytest.approx(0.03 / (1 - floor))
    separate = signals(dataclasses.replace(a, backbone_share=0.0))
    assert separate[4] == pytest.approx(0.6) and separate[3] == pytest.approx(0.6 * 0.03 / 0.04)
    assert separate[0] == separate[1] == 0.0  # below the floor: still no signal
    half = signals(dataclasses.replace(a, backbone_share=0.5))
    assert half[4] == pytest.approx(plain + 0.5 * (0.6 - plain))
    assert signals(dataclasses.replace(a, backbone_share=0.0, long_query=0.0))[4] == pytest.approx(0.07 / (1 - 0.83))
    without = dataclasses.replace(scale, separate_best_signal=0.0)
    assert signals(dataclasses.replace(a, backbone_share=0.0, similarity_scale=without)) == conversation


def test_a_relative_floor_ranks_bounded_similarities_as_the_exact_ones() -> None:
    # The relative floor reads the best cosine in scope; with bounded similarities it makes exact only
    # the rows that can be the best, and the ranking equals the exact scan's.
    import dataclasses

    from mnemon.records import SimilarityScale

    rng = np.random.default_rng(7)
    n = 300
    exact = rng.uniform(0.75, 0.95, n)
    slack = rng.uniform(0.0, 0.02, n)
    bm25 = np.where(rng.random(n) < 0.3, rng.uniform(0.0, 3.0, n), 0.0)
    prev = [-1] + list(range(n - 1))
    nxt = list(range(1, n)) + [-1]
    base = arrays(n, bm25=bm25.tolist(), prev=prev, nxt=nxt, edges=[(i, i + 1, "temporal", 1.0) for i in range(n - 1)])
    scale = SimilarityScale(signal_floor=0.85, signal_below_best=0.07)
    want = recall.run(dataclasses.replace(base, similarity=exact.copy(), similarity_scale=scale), Intent.GENERAL, 10)
    approx = exact + slack * rng.uniform(-1.0, 1.0, n)
    bounds = _Bounds(exact, slack)
    bounded = dataclasses.replace(base, similarity=approx, similarity_bounds=bounds, similarity_scale=scale)
    got = recall.run(bounded, Intent.GENERAL, 10)
    assert [(h.row, h.score, h.similarity) for h in got.hits] == [(h.row, h.score, h.similarity) for h in want.hits]
    assert np.count_nonzero(bounds.slack == 0.0) < n  # only some rows were made exact


def test_a_candidate_without_the_querys_subject_is_scaled_down() -> None:
    # Rows 0-3 match; rows 0 and 2 carry the name the query writes (the subject mask), rows 1 and 3
    # do not; row 4 follows row 3 on the backbone and joins by the lift. Every candidate without the
    # subject, a joined neighbour too, scores SUBJECT_MISMATCH_FACTOR_TOKENS x its score without the rule (no similarity);
    # the signals reported are the row's own.
    import dataclasses

    plain = arrays(5, bm25=[1.0, 3.0, 0.5, 2.0, 0.0], prev=[-1, -1, -1, -1, 3], nxt=[-1, -1, -1, 4, -1])
    subject = np.array([True, False, True, False, False])
    before = {h.row: h for h in recall.run(plain, Intent.GENERAL, 10).hits}
    after = {h.row: h for h in recall.run(dataclasses.replace(plain, subject=subject), Intent.GENERAL, 10).hits}
    assert sorted(after) == sorted(before) == [0, 1, 2, 3, 4] and after[4].via == "neighbor"
    for r in after:
        factor = 1.0 if subject[r] else SUBJECT_MISMATCH_FACTOR_TOKENS
        assert math.isclose(after[r].score, factor * before[r].score, rel_tol=1e-12)
        assert (after[r].keyword, after[r].graph) == (before[r].keyword, before[r].graph)
    assert 0.0 < SUBJECT_MISMATCH_FACTOR_TOKENS < SUBJECT_MISMATCH_FACTOR_EMBEDDED < 1.0
    # a row without the subject can fall below one that has it; without a mask nothing changes
    order = [h.row for h in recall.run(dataclasses.replace(plain, subject=subject), Intent.GENERAL, 10).hits]
    assert order == sorted(after, key=lambda r: (-after[r].score, -r))
    assert recall.run(dataclasses.replace(plain, subject=None), Intent.GENERAL, 10) == recall.run(plain, Intent.GENERAL, 10)


def test_when_no_candidate_carries_the_subject_no_score_is_scaled() -> None:
    # The query names a frequent name that no candidate opens with (a product an agent's notes name later in
    # their sentences): no candidate agrees more than another, so the scores stay what they are without the
    # rule (they were all scaled by the factor, the order unchanged, before).
    import dataclasses

    plain = arrays(5, bm25=[1.0, 3.0, 0.5, 2.0, 0.0], prev=[-1, -1, -1, -1, 3], nxt=[-1, -1, -1, 4, -1])
    nobody = np.zeros(5, dtype=np.bool_)
    assert recall.run(dataclasses.replace(plain, subject=nobody), Intent.GENERAL, 10) == recall.run(
        plain, Intent.GENERAL, 10
    )
    # a carrier outside the candidates does not count either
    outside = arrays(6, bm25=[1.0, 3.0, 0.5, 2.0, 0.0, 0.0])
    far = np.array([False] * 5 + [True])
    assert recall.run(dataclasses.replace(outside, subject=far), Intent.GENERAL, 10) == recall.run(
        outside, Intent.GENERAL, 10
    )


def test_the_readme_query_keeps_its_score_when_its_memory_names_the_subject_later(engine, monkeypatch) -> None:
    # The README's first command: one memory, "Chose Qdrant ...", recalled by "why did we pick Qdrant". Qdrant is
    # in every memory (a frequent name), yet the memory opens with "Chose": no memory is about Qdrant more
    # than another, and the score is the one without the rule.
    engine.remember("Chose Qdrant because Rust performance is critical", no_diff=True)
    ruled = [h.score for h in engine.recall("why did we pick Qdrant", limit=5).hits]
    monkeypatch.setattr(recall, "SUBJECT_MISMATCH_FACTOR_TOKENS", 1.0)
    monkeypatch.setattr(recall, "SUBJECT_MISMATCH_FACTOR_EMBEDDED", 1.0)
    assert ruled == [h.score for h in engine.recall("why did we pick Qdrant", limit=5).hits] and len(ruled) == 1


def test_with_a_models_similarity_a_candidate_without_the_subject_keeps_more_of_its_score() -> None:
    # A model's vector reads the name in its context (a turn's vector carries its speaker's label), so with
    # the query's similarity the factor is the milder SUBJECT_MISMATCH_FACTOR_EMBEDDED; the keyword list alone
    # (no similarity, the test above) takes SUBJECT_MISMATCH_FACTOR_TOKENS.
    import dataclasses

    plain = dataclasses.replace(arrays(5, bm25=[1.0, 3.0, 0.5, 2.0, 0.0]), similarity=np.array([0.6, 0.5, 0.4, 0.7, 0.2]))
    subject = np.array([True, False, True, False, False])
    before = {h.row: h.score for h in recall.run(plain, Intent.GENERAL, 10).hits}
    after = {h.row: h.score for h in recall.run(dataclasses.replace(plain, subject=subject), Intent.GENERAL, 10).hits}
    assert sorted(after) == sorted(before) and len(after) >= 4
    for r in after:
        factor = 1.0 if subject[r] else SUBJECT_MISMATCH_FACTOR_EMBEDDED
        assert math.isclose(after[r], factor * before[r], rel_tol=1e-12)


def test_the_subject_is_a_frequent_name_the_query_writes(engine, monkeypatch) -> None:
    # Two speakers, each in half of the 23 memories (BM25 gives them little weight); a third name in
    # one memory only, below the share.
    notes = [f"{'Melanie' if i % 2 else 'Caroline'}: weather note {i}, rain again" for i in range(20)]
    speakers = [
        "Caroline: I painted a sunset over the lake last week",
        "Melanie: I painted the lake at dawn before the kids woke up",
        "Caroline: I talked to Oscar about adoption",
    ]
    for text in notes + speakers:
        engine.remember(text, no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    row = {text: index.row_of(i) for text, i in _ids(engine).items()}
    retrieval = engine.retrieval
    melanie = sorted(r for text, r in row.items() if text.startswith("Melanie"))
    subject = retrieval._subject(index, "When did Melanie paint a sunset?", scope)
    assert subject is not None and subject.shape == (index.n,)
    assert np.flatnonzero(subject).tolist() == melanie
    both = retrieval._subject(index, "Did Melanie or Caroline paint?", scope)  # either name counts
    assert np.flatnonzero(both).tolist() == sorted(row.values())
    assert SUBJECT_NAME_MIN_SHARE * 23 > 1  # Oscar: 1 of 23 memories, below the share
    assert retrieval._subject(index, "What did Oscar say?", scope) is None
    assert retrieval._subject(index, "Melanie painted what?", scope) is None  # the first word starts the sentence
    assert retrieval._subject(index, "what did melanie paint", scope) is None  # no capital: no name
    assert retrieval._subject(index, "When did Nobody paint?", scope) is None  # unknown to the store
    dawn = row[speakers[1]]
    outside = np.array([bool(index.active[r]) and r != dawn for r in range(index.n)])
    scoped = retrieval._subject(index, "When did Melanie paint a sunset?", outside)
    assert np.flatnonzero(scoped).tolist() == [r for r in melanie if r != dawn]  # out of scope never counts

    # End to end: without the rule Caroline's sunset over the lake (the query's rarer words) ranks
    # first; with it Melanie's lake does, and every hit's score is its score without the rule, times
    # the factor for the memories that do not name Melanie.
    # Every candidate is listed (the limit is above the store's 23 memories): which memories fill a
    # top 10 depends on the factor (and, among the weather notes' equal scores, on their random ids),
    # the candidates do not.
    query = "When did Melanie paint a sunset over the lake?"
    ruled = {h.insight.content: h.score for h in engine.recall(query, limit=50).hits}
    monkeypatch.setattr(recall, "SUBJECT_MISMATCH_FACTOR_TOKENS", 1.0)
    free = {h.insight.content: h.score for h in engine.recall(query, limit=50).hits}
    assert ruled.keys() == free.keys() and len(ruled) > 10
    for text, score in ruled.items():
        expected = free[text] * (1.0 if text.startswith("Melanie") else SUBJECT_MISMATCH_FACTOR_TOKENS)
        assert math.isclose(score, expected, rel_tol=1e-12), text
    assert any(not text.startswith("Melanie") for text in ruled)


def test_a_memory_shares_the_subject_it_names_first(engine) -> None:
    # Each speaker in half of the memories. A memory naming Melanie after another word (Caroline's turn
    # about her, a sentence opening with a time) is not about Melanie; one that opens with her name is,
    # whatever it says after. Rows written after the index was built (its delta) are read the same way.
    notes = [f"{'Melanie' if i % 2 else 'Caroline'}: weather note {i}, rain again" for i in range(20)]
    late = ["Caroline: Melanie painted the lake at dawn", "Yesterday Melanie painted a sunset"]
    for text in notes:
        engine.remember(text, no_diff=True)
    engine.hot_index()
    for text in late:  # into the built index's delta
        engine.remember(text, no_diff=True)
    engine.remember("Melanie thinks Caroline paints better", no_diff=True)
    index = engine.hot_index()
    assert index.n > index.base_n  # the late rows are the delta's
    scope = np.array(index.active)
    row = {text: index.row_of(i) for text, i in _ids(engine).items()}
    subject = engine.retrieval._subject(index, "What did Melanie paint?", scope)
    assert subject is not None
    want = sorted(r for text, r in row.items() if text.startswith("Melanie"))
    assert np.flatnonzero(subject).tolist() == want
    assert not subject[row[late[0]]] and not subject[row[late[1]]]
    caroline = engine.retrieval._subject(index, "What does Caroline paint?", scope)
    assert caroline is not None and not caroline[row["Melanie thinks Caroline paints better"]]
    assert caroline[row[late[0]]]


def test_pair_overlaps_is_the_idf_weighted_jaccard_of_each_pair() -> None:
    # rows: {0, 1, 2}, {1, 2, 3}, {}, {4}
    ptr = np.array([0, 3, 6, 6, 7], dtype=np.int64)
    terms = np.array([0, 1, 2, 1, 2, 3, 4], dtype=np.int64)
    idf = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    got = recall.pair_overlaps(ptr, terms, idf, np.array([0, 0, 2, 3, 1]), np.array([1, 3, 2, 3, 0]))
    assert np.allclose(got, [(2 + 3) / (1 + 2 + 3 + 4), 0.0, 0.0, 1.0, (2 + 3) / (1 + 2 + 3 + 4)])


def test_the_lift_share_follows_how_much_more_backbone_neighbours_share_than_memories_apart() -> None:
    from mnemon.records import BACKBONE_COHERENT, BACKBONE_UNRELATED

    apart = np.full(6, 0.1)

    def share(ratio: float) -> float:
        return recall.backbone_lift_share(np.full(4, 0.1 * ratio), apart)

    assert share(1.0) == 0.0 and share(BACKBONE_UNRELATED) == 0.0  # neighbours no closer than strangers
    assert share(BACKBONE_COHERENT) == 1.0 and share(3.0) == 1.0  # a conversation: the whole lift
    assert math.isclose(share((BACKBONE_UNRELATED + BACKBONE_COHERENT) / 2), 0.5)
    assert recall.backbone_lift_share(np.zeros(0), apart) == 1.0  # nothing to judge by: the lift as it was
    assert recall.backbone_lift_share(np.full(4, 0.2), np.zeros(6)) == 1.0


def test_a_store_of_unrelated_consecutive_memories_lends_no_lift() -> None:
    """The backbone share scales the neighbour lift: at 0 a row after a strong match gains nothing
    from it; at 1 (the default) it gains the lift as before."""
    from dataclasses import replace

    a = arrays(4, bm25=[2.0, 0.0, 1.0, 0.0], prev=[-1, 0, 1, 2], nxt=[1, 2, 3, -1])
    lifted = {h.row: h.score for h in recall.run(a, Intent.GENERAL, 10).hits}
    assert lifted[1] > 0.0 and lifted[3] > 0.0
    alone = {h.row: h.score for h in recall.run(replace(a, backbone_share=0.0), Intent.GENERAL, 10).hits}
    assert alone[1] == 0.0 and alone[3] == 0.0  # neither matches: no lift from a neighbour
    assert alone[0] == lifted[0] and alone[2] == lifted[2]
    half = {h.row: h.score for h in recall.run(replace(a, backbone_share=0.5), Intent.GENERAL, 10).hits}
    assert math.isclose(half[3], lifted[3] / 2)


@pytest.mark.parametrize("layout", ["conversation", "separate"])
def test_the_backbone_share_is_measured_on_the_store(data_dir: Path, layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation's consecutive memories share its thread's words (share 1: the lift as before);
    separate events written one after another share no more than any two (share 0: no lift), and
    the memory written after a strong match then gains nothing from it."""
    from mnemon.engine import Engine, retrieve

    animals = ("otter heron badger lynx walrus gecko falcon bison moose ibis koala lemur panda quokka raven "
               "sloth tapir viper wombat yak zebu alpaca beaver camel dingo egret ferret gibbon hyena impala").split()  # fmt: skip
    if layout == "conversation":  # two memories per thread, the second answering the first
        texts = [f"{'Ana' if i % 2 else 'Bo'}: about the {animals[i // 2]} {'again' if i % 2 else 'today'} note{i}"
                 for i in range(2 * len(animals))]  # fmt: skip
    else:  # each an event of its own
        texts = [f"Ana: saw a {animals[i % len(animals)]} at place{i} with item{i}" for i in range(2 * len(animals))]
    eng = Engine(GlobalOptions(data_dir=str(data_dir)).settings())
    try:
        for text in texts:
            eng.remember(text, no_diff=True)
        index = eng.hot_index()
        share = retrieve.measure_backbone_share(index, np.array(index.active))
        assert share == (1.0 if layout == "conversation" else 0.0)
        query = "note7" if layout == "conversation" else "place7 item7"
        measured = {h.insight.content: h.score for h in eng.recall(query, limit=10).hits}
        monkeypatch.setattr(retrieve, "backbone_share", lambda index, scope, category, source: 1.0)
        whole_lift = {h.insight.content: h.score for h in eng.recall(query, limit=10).hits}
        assert next(iter(measured)) == texts[7] == next(iter(whole_lift))
        if layout == "conversation":
            assert measured == whole_lift
        else:  # the memory written after the match gains nothing from it
            assert measured.get(texts[8], 0.0) < whole_lift[texts[8]]
    finally:
        eng.close()


def test_memories_with_no_backbone_between_them_are_separate(data_dir: Path) -> None:
    """Memories each of a source of its own have no backbone: share 0, separate memories (recall reads
    them as such); fewer memories than a sample, or a backbone over most of them, keep 1."""
    from mnemon.engine import Engine, retrieve
    from mnemon.records import BACKBONE_MIN_SAMPLE

    eng = Engine(GlobalOptions(data_dir=str(data_dir)).settings())
    try:
        for i in range(BACKBONE_MIN_SAMPLE - 1):
            eng.remember(f"saw a heron at place{i}", source=f"s{i}", no_diff=True)
        index = eng.hot_index()
        assert retrieve.measure_backbone_share(index, np.array(index.active)) == 1.0  # too few to judge by
        eng.remember("saw an otter at the lake", source="last", no_diff=True)
        index = eng.hot_index()
        assert retrieve.measure_backbone_share(index, np.array(index.active)) == 0.0
        for i in range(BACKBONE_MIN_SAMPLE - 1):  # a thread of one source over most memories in scope
            eng.remember(f"Ana: the heron again, note{i}", no_diff=True)
        index = eng.hot_index()
        thread = np.array(index.active) & (index.source == index.sources.index("user"))
        assert retrieve.measure_backbone_share(index, thread) == 1.0  # 30 linked of 31: too few to judge by
    finally:
        eng.close()


def test_the_backbone_share_is_measured_once_per_store_state(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemon.engine import Engine, retrieve

    measured: list[int] = []
    real = retrieve.measure_backbone_share
    monkeypatch.setattr(retrieve, "measure_backbone_share", lambda index, scope: measured.append(index.n) or real(index, scope))
    eng = Engine(GlobalOptions(data_dir=str(data_dir)).settings())
    try:
        for i in range(40):
            eng.remember(f"Ana: saw a heron at place{i} with item{i}", no_diff=True)
        eng.recall("heron", limit=5)
        eng.recall("place3", limit=5)
        assert measured == [40]  # one store state, one measurement
        eng.recall("heron", limit=5, source="nobody")  # another scope: measured for it
        eng.remember("Ana: saw an otter", no_diff=True)
        eng.recall("heron", limit=5)  # a write: measured again
        assert measured == [40, 40, 41]
        retrieve.warm_backbone_share(eng.hot_index())  # the warm server's call: the recall's own state
        assert measured == [40, 40, 41]
    finally:
        eng.close()


def test_the_backbone_share_of_an_index_with_forgotten_rows_is_a_fresh_builds(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The share's term weights count the store's active memories only: an index whose base still lists
    memories forgotten since (and a delta with new ones) compares the same pairs with the same weights as a
    fresh build of the same store, so recall's scores do not depend on the index's history."""
    from test_hotindex import fresh_build

    from mnemon import recall as pipeline
    from mnemon.engine import Engine, retrieve

    animals, places = "otter heron badger lynx walrus gecko falcon".split(), "lake dock ridge barn mill".split()
    eng = Engine(GlobalOptions(data_dir=str(data_dir)).settings())
    try:
        texts = [f"Ana: the {animals[i % 7]} by the {places[i % 5]}, note{i}" for i in range(43)]
        for text in texts[:40]:
            eng.remember(text, no_diff=True)
        eng.hot_index().merge()  # the 40 as the base
        ids = _ids(eng)
        for i in (3, 4, 17):
            eng.forget(ids[texts[i]])
        for text in texts[40:]:
            eng.remember(text, no_diff=True)
        cached = eng.hot_index()
        assert cached.base_n < cached.n and not bool(np.asarray(cached.active[: cached.base_n]).all())
        seen: list[tuple[np.ndarray, np.ndarray]] = []
        real = pipeline.backbone_lift_share
        monkeypatch.setattr(pipeline, "backbone_lift_share", lambda linked, apart: seen.append((linked, apart)) or real(linked, apart))
        shares = [retrieve.measure_backbone_share(index, np.array(index.active, dtype=np.bool_))
                  for index in (cached, fresh_build(data_dir))]  # fmt: skip
        (linked, apart), (fresh_linked, fresh_apart) = seen
        assert linked.shape[0] >= 32 and linked.max() > 0.0
        np.testing.assert_array_equal(linked, fresh_linked)
        np.testing.assert_array_equal(apart, fresh_apart)
        assert shares[0] == shares[1]
    finally:
        eng.close()


def test_a_chinese_query_names_its_subject_where_it_opens_the_question(engine, monkeypatch) -> None:
    # Chinese has no sentence case and its subject opens the question: "Melanie什么时候画了湖上的日落？"
    # names Melanie as "When did Melanie paint ...?" does. Before, the opening word was skipped as a
    # sentence's first, so a Chinese question about a speaker never had a subject.
    notes = [f"{'Melanie' if i % 2 else 'Caroline'}: 天气记录{i}，又下雨了" for i in range(20)]
    speakers = ["Caroline: 我上周画了湖上的日落", "Melanie: 孩子们醒来前我画了湖上的落日"]
    for text in notes + speakers:
        engine.remember(text, no_diff=True)
    index = engine.hot_index()
    scope = np.array(index.active)
    row = {text: index.row_of(i) for text, i in _ids(engine).items()}
    melanie = sorted(r for text, r in row.items() if text.startswith("Melanie"))
    query = "Melanie什么时候画了湖上的日落？"
    subject = engine.retrieval._subject(index, query, scope)
    assert subject is not None and np.flatnonzero(subject).tolist() == melanie
    both = engine.retrieval._subject(index, "Jon和Caroline什么时候画的？", scope)  # Jon: unknown to the store
    assert both is not None and np.flatnonzero(both).tolist() == sorted(r for t, r in row.items() if t.startswith("Caroline"))

    # End to end, through recall: every memory that does not open with Melanie scores the factor times
    # its score without the rule (before, the question had no subject and nothing was scaled).
    ruled = {h.insight.content: h.score for h in engine.recall(query, limit=50).hits}
    monkeypatch.setattr(recall, "SUBJECT_MISMATCH_FACTOR_TOKENS", 1.0)
    free = {h.insight.content: h.score for h in engine.recall(query, limit=50).hits}
    assert ruled.keys() == free.keys() and speakers[1] in ruled
    for text, score in ruled.items():
        expected = free[text] * (1.0 if text.startswith("Melanie") else SUBJECT_MISMATCH_FACTOR_TOKENS)
        assert math.isclose(score, expected, rel_tol=1e-12), text
    assert any(not text.startswith("Melanie") for text in ruled)
