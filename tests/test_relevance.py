"""Recall's absolute relevance (issue 28, mnemon.relevance): what recall on prompt filters on.

The pure judgement first (weights, coverage, dates left out, determinism), then on a real store
through whole processes: a prompt about nothing stored gets no hit at the prompt floor, a prompt
naming a stored decision gets that decision above it, the field is the same in ``--brief`` and
``--verbose``, and a served recall carries exactly the in-process judgement.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_server import _mnemon, _start

from mnemon import relevance
from mnemon.relevance import PROMPT_FLOOR, Evidence
from tests.conftest import run_process, stop_servers

DECISION = "Decided to use Qdrant as the vector database for semantic search because it supports payload filters"
MEMORIES = [
    DECISION,
    "The billing service is written in Go and deployed on Fly.io",
    "Nightly backups of the Postgres cluster go to an S3 bucket in eu-west-1",
    "The team prefers small pull requests reviewed within one day",
    "Redis caches session tokens for thirty minutes",
    "Frontend builds use Vite; the old webpack config was removed in March",
    "Alice owns the onboarding flow and the welcome emails",
    "Load tests showed the search endpoint handles 900 requests per second",
    "We pinned numpy below 2.0 until the ONNX runtime supports it",
    "The staging cluster runs on three spot instances",
]
UNRELATED = [
    "Please summarise the plot of Moby Dick in three sentences",
    "Write a haiku about autumn leaves falling in the park",
    "How long should I boil an egg for a runny yolk?",
    "给房东写一封邮件，说暖气坏了",
]
ENV = {"MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9", "MNEMON_SERVER": "off"}


# --- the pure judgement ----------------------------------------------------------------------


def test_a_rarer_term_weighs_more_and_an_unknown_term_weighs_most() -> None:
    n = 1000
    weights = [relevance.term_weight("harbour", df, n) for df in (900, 100, 3, 1, 0)]
    assert weights == sorted(weights) and len(set(weights)) == len(weights)
    assert all(w >= 0 for w in weights) and relevance.term_weight("harbour", n, n) < 0.1
    # an unseen Han bigram may be an artefact of the bigram cut: half the weight
    assert relevance.term_weight("么时", 0, n) == relevance.UNSEEN_HAN_BIGRAM_SHARE * relevance.term_weight("x", 0, n)
    assert relevance.term_weight("房东", 3, n) == relevance.term_weight("harbour", 3, n)


def test_coverage_is_the_carried_share_of_the_weight() -> None:
    assert relevance.coverage([1.0, 3.0], [False, True]) == 0.75
    assert relevance.coverage([1.0, 3.0], [True, True]) == 1.0
    assert relevance.coverage([], []) == 0.0


def test_dates_and_numbers_say_nothing_about_the_subject() -> None:
    terms = ["paint", "juli", "2023", "23rd", "mel", "月", "7", "画画"]  # "juli": recall's stem of "July"
    assert relevance.informative(terms) == ["paint", "mel", "画画"]


@pytest.mark.parametrize("month", ["January", "February", "June", "July", "September", "October", "November",
                                   "December", "Sept", "Monday", "Saturday"])  # fmt: skip
def test_a_time_word_is_no_subject_as_recall_stems_it(month: str) -> None:
    # the query's terms are the stems recall makes ("januari", "juli", "decemb" under Porter2)
    from mnemon.text import recall_query_terms

    terms = recall_query_terms(f"What did Mel paint on {month} 23rd, 2023?")
    assert relevance.informative(terms) == ["mel", "paint"]


def test_a_hit_is_its_own_share_or_the_best_share_times_its_standing() -> None:
    weights = (2.0, 2.0)
    best = Evidence(weights, (True, True), None, None)
    half = Evidence(weights, (True, False), None, None)
    none = Evidence(weights, (False, False), None, None)
    assert relevance.judge([best, half, none], [1.0, 0.4, 0.8]) == [1.0, 0.5, 0.8]
    # nothing carried anywhere: nothing is relevant, whatever the ranking says
    assert relevance.judge([none, none], [1.0, 0.9]) == [0.0, 0.0]
    # the same evidence always gives the same figures (scores above 1 count as 1)
    assert relevance.judge([best, none], [1.7, 0.33333]) == relevance.judge([best, none], [1.7, 0.33333])
    assert relevance.judge([best, none], [1.7, 0.33333]) == [1.0, 0.333]


def test_with_embeddings_a_cosine_above_the_background_counts() -> None:
    bg = relevance.Background(0.2)
    close = Evidence((1.0,), (False,), 0.6, bg)  # 0.6 - 0.2
    assert relevance.share(close) == pytest.approx(0.4)
    assert relevance.share(Evidence((1.0,), (True,), 0.6, bg)) == 1.0  # the higher of the two
    assert relevance.share(Evidence((1.0,), (False,), 0.1, bg)) == 0.0
    assert relevance.share(Evidence((1.0,), (False,), None, None)) == 0.0


# --- on a real store ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("relevance") / "data"
    for text in MEMORIES:
        res = run_process(["remember", text, "--no-diff"], data_dir=data, env=ENV)
        assert res.code == 0, res.err
    return data


def brief(data: Path, prompt: str, limit: int = 3) -> list[dict]:
    res = run_process(["recall", "--brief", "--limit", str(limit), "--readonly", "--", prompt], data_dir=data, env=ENV)
    assert res.code == 0, res.err
    return json.loads(res.out)["results"]


def test_an_unrelated_prompt_gets_nothing_at_the_floor(store: Path) -> None:
    for prompt in UNRELATED:
        hits = brief(store, prompt)
        assert all(0.0 <= h["relevance"] < PROMPT_FLOOR for h in hits), (prompt, hits)


def test_a_prompt_naming_a_stored_decision_gets_it_above_the_floor(store: Path) -> None:
    hits = brief(store, "Which vector database did we choose for semantic search, and why?")
    kept = [h for h in hits if h["relevance"] >= PROMPT_FLOOR]
    assert kept and kept[0]["excerpt"] == DECISION
    assert kept[0]["relevance"] > 0.5 and kept[0]["score"] == hits[0]["score"]  # the score keeps its meaning


def test_brief_and_verbose_carry_the_same_relevance(store: Path) -> None:
    prompt = "Where do the Postgres backups go?"
    res = run_process(["recall", "--verbose", "--limit", "3", "--readonly", "--", prompt], data_dir=store, env=ENV)
    verbose = json.loads(res.out)["results"]
    assert [h["relevance"] for h in verbose] == [h["relevance"] for h in brief(store, prompt)]
    assert verbose[0]["relevance"] >= PROMPT_FLOOR and "S3" in verbose[0]["insight"]["content"]


def test_served_recall_judges_as_in_process(store: Path, tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    _start(runtime)
    try:
        for prompt in [*UNRELATED, "Which vector database did we choose for semantic search, and why?"]:
            args = ["--data-dir", str(store), "recall", "--brief", "--limit", "5", "--readonly", "--", prompt]
            served = _mnemon(runtime, "require", args, MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9")
            local = _mnemon(runtime, "off", args, MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9")
            assert served.returncode == local.returncode == 0, served.stderr
            assert served.stdout == local.stdout
            hits = json.loads(served.stdout)["results"]
            # a number: 0 where a hit shares none of the prompt's own terms ("Write a haiku ..." reaches
            # "written" through text.irregular_query_terms), which the JSON writes as 0, as Go does
            assert all(isinstance(h["relevance"], (int, float)) for h in hits)
    finally:
        stop_servers(runtime)
