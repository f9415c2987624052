"""Tests for mnemon.diff: §4.9 classification (newest rules) and match ranking."""

from __future__ import annotations

import pytest

from mnemon.diff import (
    ADD,
    CONFLICT,
    DUPLICATE,
    UPDATE,
    DiffCandidate,
    DiffMatch,
    classify,
    has_negative_polarity,
    is_extension,
    suggest,
)
from mnemon.records import similarity_scale
from mnemon.text import jaccard, tokenize

ALPHA = "Project Alpha uses PostgreSQL database for persistent application storage"
BETA = "Project Beta uses PostgreSQL database for persistent application storage"
TAIL = (
    " with nightly backups replicas across three zones monitored dashboards alerting rotation"
    " encrypted snapshots retained thirty days audited compliance reviews"
)


def _jac(a: str, b: str) -> float:
    return jaccard(tokenize(a), tokenize(b))


def test_reference_alpha_beta_is_update() -> None:
    j = _jac(ALPHA, BETA)
    assert j == pytest.approx(7 / 9)
    assert classify(BETA, ALPHA, j, j) == UPDATE


def test_reference_long_shared_tail_is_duplicate() -> None:
    j = _jac(ALPHA + TAIL, BETA + TAIL)
    assert j == pytest.approx(25 / 27)
    assert classify(BETA + TAIL, ALPHA + TAIL, j, j) == DUPLICATE


def test_low_similarity_is_add() -> None:
    assert classify("Rust is fast", "Bananas are yellow", 0.1, 0.1) == ADD


def test_similar_with_negation_phrase_is_conflict() -> None:
    old = "We use Redis for session caching in the gateway"
    new = "We no longer use Redis for session caching in the gateway"
    assert classify(new, old, 0.75, 0.75) == CONFLICT
    assert classify("我们不再使用 Redis 做缓存", "我们使用 Redis 做缓存", 0.8, 0.8) == CONFLICT
    assert classify("Redis was replaced for caching", "Redis for caching", 0.7, 0.7) == CONFLICT


def test_negation_phrase_below_conflict_threshold_is_update() -> None:
    assert classify("Redis deprecated here", "Redis used here", 0.6, 0.6) == UPDATE


def test_polarity_mismatch_on_near_identical_text_is_conflict() -> None:
    old = "the deploy pipeline uses canary releases for every service in production today"
    new = "the deploy pipeline uses not canary releases for every service in production today"
    j = _jac(new, old)
    assert j > 0.9  # "not" is a stopword, so the token sets are identical
    assert classify(new, old, j, j) == CONFLICT


def test_same_polarity_near_identical_is_duplicate_even_with_negation_phrase() -> None:
    text = "we never deploy on fridays because the on-call rotation is thin"
    assert classify(text + "!", text, 1.0, 1.0) == DUPLICATE


def test_extension_is_never_duplicate() -> None:
    old = "Alpha uses PostgreSQL"
    new = "Alpha uses PostgreSQL postgresql POSTGRESQL, Alpha uses PostgreSQL!!"
    assert is_extension(new, old)
    j = _jac(new, old)
    assert j == 1.0
    assert classify(new, old, j, j) == UPDATE


def test_cosine_duplicate_branch_respects_extension_and_polarity() -> None:
    old = "Alpha stores data in PostgreSQL"
    assert classify("Alpha keeps its data in PostgreSQL", old, 0.95, 0.5) == DUPLICATE
    longer = "Alpha keeps all of its data in PostgreSQL with replicas"
    assert classify(longer, old, 0.95, 0.5) == UPDATE
    assert classify("Alpha can't keep data in PostgreSQL", old, 0.95, 0.5) == CONFLICT


def test_extension_threshold_counts_utf8_bytes() -> None:
    assert not is_extension("x" * 125, "x" * 100)
    assert is_extension("x" * 126, "x" * 100)
    assert is_extension("é" * 63, "x" * 100)  # 126 bytes, 63 code points


@pytest.mark.parametrize(
    ("text", "negative"),
    [
        ("this is not ok", True),
        ("No way", True),
        ("it cannot be", True),
        ("without tests", True),
        ("none of them", True),
        ("never again", True),
        ("it doesn't work", True),
        ("it isn’t", True),
        ("nothing knots another notable node", False),
        ("nonetheless", False),
        ("not_a_word", False),
        ("it works", False),
    ],
)
def test_polarity_words_need_unicode_boundaries(text: str, negative: bool) -> None:
    assert has_negative_polarity(text) is negative


def test_suggest_without_matches_is_add() -> None:
    assert suggest("anything", [], []) == (ADD, [])


def test_suggest_ranks_by_similarity_then_id_and_reports_top_class() -> None:
    new = BETA
    candidates = [
        DiffCandidate("b", "unrelated words entirely here", 0.1),
        DiffCandidate("c", ALPHA, _jac(new, ALPHA)),
        DiffCandidate("a", "unrelated other words", 0.1),
    ]
    overall, matches = suggest(new, candidates, [])
    assert overall == UPDATE
    assert [m.id for m in matches] == ["c", "a", "b"]
    assert matches[0] == DiffMatch("c", pytest.approx(7 / 9), UPDATE)  # type: ignore[arg-type]
    assert matches[1].suggestion == ADD


def test_suggest_any_duplicate_wins_overall() -> None:
    same_tail_old = ALPHA + TAIL
    candidates = [
        DiffCandidate("x", "Project Alpha moved", 0.2, cosine=0.99),  # cosine wins: top match
        DiffCandidate("y", same_tail_old, _jac(BETA + TAIL, same_tail_old)),
    ]
    overall, matches = suggest(BETA + TAIL, candidates, [])
    assert matches[0].id == "x"
    assert overall == DUPLICATE


def test_cosine_replaces_jaccard_only_at_or_above_override_and_when_larger() -> None:
    new = "Alpha uses PostgreSQL"
    _, m = suggest(new, [DiffCandidate("a", "x y z", 0.3, cosine=0.84)], [])
    assert m[0].similarity == 0.3
    _, m = suggest(new, [DiffCandidate("a", "x y z", 0.3, cosine=0.85)], [])
    assert m[0].similarity == 0.85
    _, m = suggest(new, [DiffCandidate("a", "x y z", 0.95, cosine=0.9)], [])
    assert m[0].similarity == 0.95


def test_extra_embedding_matches_kept_only_if_not_add() -> None:
    new = "Alpha stores data in PostgreSQL"
    extra = [
        DiffCandidate("k", "keyword one", 0.1, cosine=0.99),  # already a keyword candidate
        DiffCandidate("e1", "Alpha keeps data in PostgreSQL", 0.5, cosine=0.72),  # UPDATE
        DiffCandidate("e2", "other", 0.0, cosine=0.65),  # below the extra floor
    ]
    overall, matches = suggest(new, [DiffCandidate("k", "keyword one", 0.1)], extra)
    assert [(m.id, m.similarity, m.suggestion) for m in matches] == [("e1", 0.72, UPDATE), ("k", 0.1, ADD)]
    assert overall == UPDATE


def test_at_most_five_extras_are_considered() -> None:
    new = "Alpha stores data in PostgreSQL"
    extra = [DiffCandidate(f"e{i}", "Alpha data", 0.0, cosine=0.80 - i / 100) for i in range(8)]
    _, matches = suggest(new, [], extra)
    assert [m.id for m in matches] == ["e0", "e1", "e2", "e3", "e4"]


# --- the cuts of a model's cosine (records.SimilarityScale.diff_*) -----------------------------------------


E5 = similarity_scale("multilingual-e5-small")
SAME_LENGTH_OLD = "Alpha keeps its data in PostgreSQL"  # neither side an extension, no negation
SAME_LENGTH_NEW = "Alpha saves its data in PostgreSQL"


def test_a_cosine_reads_its_models_cuts() -> None:
    # e5's cosines bunch high: 0.95 is a near-duplicate in MiniLM's space, a related memory in e5's
    assert classify(SAME_LENGTH_NEW, SAME_LENGTH_OLD, 0.95, 0.5) == DUPLICATE
    assert classify(SAME_LENGTH_NEW, SAME_LENGTH_OLD, 0.95, 0.5, E5) == UPDATE
    assert classify(SAME_LENGTH_NEW, SAME_LENGTH_OLD, 0.985, 0.5, E5) == DUPLICATE
    assert classify(SAME_LENGTH_NEW, SAME_LENGTH_OLD, 0.85, 0.5) == UPDATE
    assert classify(SAME_LENGTH_NEW, SAME_LENGTH_OLD, 0.85, 0.5, E5) == ADD
    # the Jaccard rule is the contract's for every model
    assert classify(SAME_LENGTH_NEW, SAME_LENGTH_OLD, 0.5, 0.95, E5) == DUPLICATE


def test_suggest_reads_a_jaccard_with_the_contracts_cuts_and_a_cosine_with_the_models() -> None:
    assert E5.diff_duplicate_above > 0.96 > E5.diff_override  # the cases below sit between the two
    # a keyword candidate below e5's override: its Jaccard, read with the contract's cuts (> 0.9 is no duplicate
    # by itself: step 1 needs Jaccard > 0.9)
    _, m = suggest(SAME_LENGTH_NEW, [DiffCandidate("a", SAME_LENGTH_OLD, 0.6, cosine=0.93)], [], E5)
    assert (m[0].similarity, m[0].suggestion) == (0.6, UPDATE)
    # at or above the override: its cosine, read with e5's cuts
    _, m = suggest(SAME_LENGTH_NEW, [DiffCandidate("a", SAME_LENGTH_OLD, 0.6, cosine=0.96)], [], E5)
    assert (m[0].similarity, m[0].suggestion) == (0.96, UPDATE)
    _, m = suggest(SAME_LENGTH_NEW, [DiffCandidate("a", SAME_LENGTH_OLD, 0.6, cosine=0.96)], [])
    assert (m[0].similarity, m[0].suggestion) == (0.96, DUPLICATE)  # the contract's scale
    # an embedding neighbour (extra): its cosine, with e5's cuts
    overall, m = suggest(SAME_LENGTH_NEW, [], [DiffCandidate("e", SAME_LENGTH_OLD, 0.6, cosine=0.96)], E5)
    assert (overall, m[0].suggestion) == (UPDATE, UPDATE)
