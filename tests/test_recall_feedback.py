"""Pseudo-relevance feedback for a query written in Han characters without a model (mnemon.feedback):
real stores, the engine's keyword list and recall."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mnemon import feedback
from mnemon.cli.state import GlobalOptions

BONUS, SALARY = "年终奖春节前发了四个月工资", "四个月工资已经到账"
FILLERS = ("周末去爬山看日出", "新买的椅子坐着很舒服", "猫咪生病去看宠物医院", "明天要交这季度的房租")


@pytest.fixture
def engine(data_dir: Path):
    from mnemon.engine import Engine

    eng = Engine(GlobalOptions(data_dir=str(data_dir)).settings())
    yield eng
    eng.close()


def _rows(engine) -> dict[str, int]:
    from mnemon.store import insights

    index = engine.hot_index()
    return {i.content: index.row_of(i.id) for i in insights.all_active(engine.store.conn)}


def _keyword(engine, query: str, *, with_feedback: bool, use_numba: bool = False) -> np.ndarray:
    index = engine.hot_index()
    return engine.retrieval._keyword(index, query, np.array(index.active), use_numba, with_feedback=with_feedback)[0]


# a chatty turn (long: in the ramp of engine.retrieve.long_query_share) and a short question, about the bonus
TURN = "周末爬山坐着看日出的时候想起来，年终奖春节前是什么时候发的"
QUESTION = "年终奖什么时候发的"


def _long_share(engine, query: str) -> float:
    from mnemon.engine.retrieve import long_query_share
    from mnemon.text import recall_query_terms

    index = engine.hot_index()
    return long_query_share([t for t in dict.fromkeys(recall_query_terms(query)) if index.term_ids([t])])


def test_a_chinese_turn_finds_what_its_best_match_shares(engine) -> None:
    # "四个月工资已经到账" shares no character with the turn; the memory the turn asks about does share
    # its terms (四个月工资), so feedback gives it a keyword score below that memory's.
    for text in (SALARY, *FILLERS, BONUS):
        engine.remember(text, no_diff=True)
    rows = _rows(engine)
    assert 0.0 < _long_share(engine, TURN) < 1.0
    plain = _keyword(engine, TURN, with_feedback=False)
    fed = _keyword(engine, TURN, with_feedback=True)
    assert plain[rows[SALARY]] == 0.0 and fed[rows[SALARY]] > 0.0
    assert fed[rows[BONUS]] > fed[rows[SALARY]]
    assert np.all(fed >= plain)  # feedback only adds
    assert np.array_equal(_keyword(engine, TURN, with_feedback=True, use_numba=True), fed)  # numba agrees
    assert np.array_equal(_keyword(engine, TURN, with_feedback=True), fed)  # deterministic

    # recall (no model) asks for it: the salary memory comes back on its keyword signal
    hits = {h.insight.content: h for h in engine.recall(TURN, limit=10).hits}
    assert hits[SALARY].signals["keyword"] > 0.0


def test_a_short_chinese_question_has_no_feedback(engine) -> None:
    # a question names what it asks about: feedback would put its best match first less often
    for text in (SALARY, *FILLERS, BONUS):
        engine.remember(text, no_diff=True)
    rows = _rows(engine)
    assert _long_share(engine, QUESTION) == 0.0
    plain = _keyword(engine, QUESTION, with_feedback=False)
    assert np.array_equal(_keyword(engine, QUESTION, with_feedback=True), plain)
    assert plain[rows[SALARY]] == 0.0 and plain[rows[BONUS]] > 0.0


def test_the_expansion_weighs_by_the_long_share() -> None:
    scores, expansion = np.array([4.0, 2.0, 0.0]), np.array([0.0, 1.0, 2.0])
    assert np.array_equal(feedback.with_expansion(scores, expansion, 0.0), scores)
    whole = feedback.with_expansion(scores, expansion, 1.0)
    half = feedback.with_expansion(scores, expansion, 0.5)
    assert whole.tolist() == pytest.approx([4.0, 2.0 + 4.0 * feedback.FEEDBACK_WEIGHT * 0.5, 4.0 * feedback.FEEDBACK_WEIGHT])
    assert (half - scores).tolist() == pytest.approx(((whole - scores) / 2).tolist())
    assert np.array_equal(feedback.with_expansion(scores, np.zeros(3), 1.0), scores)  # nothing lent


def test_an_english_query_has_no_feedback(engine) -> None:
    # the English keyword path has its stems and word forms; feedback was measured on Chinese only
    for text in ("the bonus paid four months salary", "four months salary arrived", "we climbed the hill"):
        engine.remember(text, no_diff=True)
    rows = _rows(engine)
    query = "when was the bonus paid"
    plain = _keyword(engine, query, with_feedback=False)
    assert np.array_equal(_keyword(engine, query, with_feedback=True), plain)
    assert plain[rows["four months salary arrived"]] == 0.0


def test_expansion_terms_leave_out_the_query_and_break_ties_by_term() -> None:
    rows = [np.array([1, 2, 3]), np.array([3, 4])]
    df = {1: 1, 2: 1, 3: 2, 4: 5}
    # term 1 is the query's; 4 is in every memory (idf of df 5 in 5 is small but above 0)
    got = feedback.expansion_terms([2.0, 1.0], rows, df, 5, {1})
    terms = [t for t, _ in got]
    assert 1 not in terms and terms == [3, 2, 4]  # 3: both rows lend it
    assert got == feedback.expansion_terms([2.0, 1.0], rows, df, 5, {1})
    same = feedback.expansion_terms([1.0, 1.0], [np.array([7]), np.array([6])], {6: 1, 7: 1}, 5, set())
    assert [t for t, _ in same] == [6, 7]  # equal weights: by term id
    assert feedback.expansion_terms([0.0], [np.array([2])], {2: 1}, 5, set()) == []


def test_feedback_rows_are_the_best_first_pass_rows_ties_by_row() -> None:
    first = np.array([0.0, 2.0, 3.0, 2.0, 0.5, 1.0, 1.0, 0.0])
    assert feedback.feedback_rows(first).tolist() == [2, 1, 3, 5, 6][: feedback.FEEDBACK_ROWS]
    assert feedback.feedback_rows(np.zeros(4)).tolist() == []


def test_df_in_scope_reads_list_lengths_only_when_every_row_is_in_scope() -> None:
    from mnemon.engine.retrieve import df_in_scope

    ptr = np.array([0, 3, 3, 5, 9], dtype=np.int64)
    rows = np.array([0, 2, 4, 1, 2, 0, 1, 3, 4], dtype=np.int32)
    every = np.ones(5, dtype=np.bool_)
    assert df_in_scope(ptr, rows, every, 5).tolist() == [3, 0, 2, 4]
    some = np.array([True, False, True, True, False])
    assert df_in_scope(ptr, rows, some, 3).tolist() == [2, 0, 1, 2]


def test_feedback_counts_df_within_the_scope(engine, tmp_path: Path) -> None:
    # a category filter (a scope short of every row) scores as a store holding only that category:
    # the feedback's rows, terms and df are read in scope, not over the whole index
    from mnemon.engine import Engine

    facts = (SALARY, *FILLERS, BONUS)
    for text in facts:
        engine.remember(text, no_diff=True, category="fact")
    aside = "年终奖工资四个月周末爬山的事以后再说"
    engine.remember(aside, no_diff=True, category="context")
    index = engine.hot_index()
    scope = engine.retrieval._scope(index, "fact", "")
    assert 0 < int(scope.sum()) < index.n
    fed = engine.retrieval._keyword(index, TURN, scope, False, with_feedback=True)[0]
    rows = _rows(engine)
    assert fed[rows[aside]] == 0.0

    alone = Engine(GlobalOptions(data_dir=str(tmp_path / "alone")).settings())
    try:
        for text in facts:
            alone.remember(text, no_diff=True, category="fact")
        alone_index = alone.hot_index()
        alone_fed = alone.retrieval._keyword(alone_index, TURN, np.array(alone_index.active), False, with_feedback=True)[0]
        alone_rows = _rows(alone)
    finally:
        alone.close()
    assert alone_fed[alone_rows[SALARY]] > 0.0  # the feedback reaches the memory sharing no character
    for text in facts:
        assert fed[rows[text]] == pytest.approx(alone_fed[alone_rows[text]], rel=1e-12)
