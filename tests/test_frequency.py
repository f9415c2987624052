"""Query terms weighed by their specificity in English (mnemon.frequency, records.QUERY_SPECIFICITY_POWER_*): the
bundled table of English word frequencies, its lookup, the weights, and what recall does with them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mnemon import frequency, relevance
from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.engine import Engine
from mnemon.engine import retrieve as retrieve_module
from mnemon.records import CONTRACT_SIMILARITY, QUERY_SPECIFICITY_POWER_TOKENS
from mnemon.sortedtable import SortedTable

REPO = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 8, 12, 0, 0, tzinfo=timezone.utc)
FILLERS = [f"Joanna wrote chapter {k} of her screenplay about a road trip through town number {k}." for k in range(30)]
# the same memory but for one word: a store's statistics cannot tell them apart
YOGA = "The green notebook on the shelf holds notes about yoga."
ACTIVITIES = "The green notebook on the shelf holds notes about activities."


def _engine(data_dir: Path) -> Engine:
    # port 9 refuses at once: the store has no model
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    return Engine(settings, clock=lambda: NOW)


def _fill(data_dir: Path, texts: list[str]) -> None:
    items = [{"content": t, "created_at": f"2026-11-{1 + k % 28:02d}T00:00:00Z"} for k, t in enumerate(texts)]
    with _engine(data_dir) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)


def _ranked(data_dir: Path, query: str) -> list[tuple[str, float, float]]:
    """(content, score, keyword signal) of each hit, best first."""
    with _engine(data_dir) as engine:
        return [(h.insight.content, h.score, h.signals["keyword"]) for h in engine.recall(query, limit=10).hits]


# apart in the store, so that neither is the other's backbone neighbour: without the rule the activities
# memory ranks first (the graph signal: its backbone neighbour is nearer to the yoga memory's)
STORE = FILLERS[:15] + [ACTIVITIES] + FILLERS[15:] + [YOGA]


# --- the bundled file ----------------------------------------------------------------------------------


def test_the_bundled_table_is_sorted_with_one_line_a_stem_and_names_its_source_and_licence() -> None:
    lines = frequency.TABLE.path.read_bytes().decode("ascii").splitlines()
    assert lines[0].startswith("#") and "wordfreq" in lines[0] and "CC BY-SA 4.0" in lines[0]
    keys = [line.split("\t", 1)[0] for line in lines[1:]]
    assert [k.encode() for k in keys] == sorted(k.encode() for k in keys)
    assert len(set(keys)) == len(keys) > 100_000
    zipf = [float(line.split("\t", 1)[1]) for line in lines[1:]]
    assert all(0.0 < z < 9.0 for z in zipf)


def test_a_stem_has_the_share_of_english_words_it_stands_for() -> None:
    the, paint, yoga = frequency.frequency("the"), frequency.frequency("paint"), frequency.frequency("yoga")
    assert the is not None and paint is not None and yoga is not None
    assert 0.01 < the < 0.1  # about one word in twenty
    assert the > paint > yoga > 0.0
    # "activities" and "activity" are one stem, far more frequent than "yoga"
    activ = frequency.frequency("activ")
    assert activ is not None and activ > 10 * yoga


def test_a_name_a_foreign_or_unknown_word_has_no_frequency() -> None:
    for stem in ("zzzzqx", "", "瑜伽", "#", "caroline's"):
        assert frequency.frequency(stem) is None


def test_the_build_script_writes_the_bundled_table(tmp_path: Path) -> None:
    wordfreq = pytest.importorskip("wordfreq")  # a build-time tool only: not among the test extras
    out = tmp_path / "frequency.txt"
    subprocess.run([sys.executable, str(REPO / "scripts" / "build-word-frequency"), "--out", str(out)], check=True,
                   capture_output=True)  # fmt: skip
    assert wordfreq and out.read_bytes() == frequency.TABLE.path.read_bytes()


# --- the lookup ----------------------------------------------------------------------------------------


def test_a_line_of_the_table_is_read_as_a_zipf_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "frequency.txt"
    table.write_text("# header\nactiv\t5.46\npaint\t5.06\nyoga\t4.20\n", encoding="ascii")
    monkeypatch.setattr(frequency, "TABLE", SortedTable(table))
    assert frequency.frequency("activ") == pytest.approx(10 ** (5.46 - 9))
    assert frequency.frequency("yoga") == pytest.approx(10 ** (4.20 - 9))
    assert frequency.frequency("pain") is None and frequency.frequency("zz") is None


@pytest.mark.parametrize("content", [None, b"", b"# header\nyoga\tfour\n", b"# header\nyoga\t12.5\n"])
def test_a_missing_empty_or_damaged_table_weighs_every_term_alike_and_recall_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None
) -> None:
    table = tmp_path / "frequency.txt"
    if content is not None:
        table.write_bytes(content)
    monkeypatch.setattr(frequency, "TABLE", SortedTable(table))
    assert frequency.frequency("yoga") is None
    assert frequency.query_term_weights(["yoga", "activ"], [True, True], 12.0, 0.5) == [1.0, 1.0]
    data = tmp_path / "data"
    _fill(data, STORE)
    ranked = _ranked(data, "activities yoga")
    assert [c for c, _, _ in ranked[:2]] == [ACTIVITIES, YOGA]
    assert ranked[0][2] == ranked[1][2] == 1.0  # their keyword scores alike, as before the rule


# --- the weights ---------------------------------------------------------------------------------------


def test_a_specific_word_weighs_more_than_a_common_one_relative_to_the_query() -> None:
    weights = frequency.query_term_weights(["activ", "yoga"], [True, True], 12.0, QUERY_SPECIFICITY_POWER_TOKENS)
    assert weights[0] < 1.0 < weights[1]
    # relative to the query's own terms (their mean specificity weighs 1): the two stay either side of 1
    assert math.sqrt(weights[0] * weights[1]) == pytest.approx(1.0, abs=0.05)
    # the power: 0 weighs every term alike, 1 is the ratio itself
    assert frequency.query_term_weights(["activ", "yoga"], [True, True], 12.0, 0.0) == [1.0, 1.0]
    ratio = frequency.query_term_weights(["activ", "yoga"], [True, True], 12.0, 1.0)
    assert ratio[1] / ratio[0] == pytest.approx((weights[1] / weights[0]) ** 2)


def test_a_name_an_unknown_word_or_a_term_that_matches_nothing_keeps_the_weight_one() -> None:
    weights = frequency.query_term_weights(["melani", "activ", "yoga", "zzzzqx"], [True, True, True, True], 12.0, 0.5)
    assert weights[3] == 1.0 and weights[1] < 1.0 < weights[2]
    assert frequency.frequency("melani") is not None  # "Melanie" is an English word's stem too: weighed
    # a term no memory in scope carries takes no part in the mean: the others weigh as if it were absent
    absent = frequency.query_term_weights(["activ", "yoga", "paint"], [True, True, False], 12.0, 0.5)
    assert absent[:2] == frequency.query_term_weights(["activ", "yoga"], [True, True], 12.0, 0.5)
    assert absent[2] == 1.0
    # one known term, or none: nothing to weigh it against
    assert frequency.query_term_weights(["yoga", "zzzzqx"], [True, True], 12.0, 0.5) == [1.0, 1.0]
    assert frequency.query_term_weights([], [], 12.0, 0.5) == []


def test_memories_so_long_that_every_known_word_is_in_each_weigh_the_terms_alike() -> None:
    # p = 1 - (1 - share)^L rounds to 1 for common words in very long memories: specificity 0, no mean to divide by
    assert frequency.specificity(0.05, 5000.0) == 0.0
    assert frequency.query_term_weights(["the", "and"], [True, True], 5000.0, 0.5) == [1.0, 1.0]
    weights = frequency.query_term_weights(["the", "yoga"], [True, True], 5000.0, 0.5)
    assert weights[0] == 0.0 < 1.0 < weights[1]  # a word in every such memory tells nothing


def test_specificity_is_the_idf_of_a_background_of_memories_as_long_as_the_stores() -> None:
    share = 1e-4
    p = 1.0 - (1.0 - share) ** 12.0
    assert frequency.specificity(share, 12.0) == pytest.approx(math.log(1.0 + (1.0 - p) / p))
    assert frequency.specificity(share, 12.0) > frequency.specificity(10 * share, 12.0)
    assert frequency.specificity(share, 0.0) == frequency.specificity(share, 1.0)  # an empty store's mean length


# --- recall --------------------------------------------------------------------------------------------


def test_recall_ranks_the_memory_of_the_specific_word_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(tmp_path, STORE)
    ranked = _ranked(tmp_path, "activities yoga")
    assert [c for c, _, _ in ranked[:2]] == [YOGA, ACTIVITIES]
    assert ranked[0][2] == 1.0 > ranked[1][2] > 0.5  # "activities" still counts, for less
    assert _ranked(tmp_path, "activities yoga") == ranked  # deterministic
    monkeypatch.setattr(retrieve_module, "QUERY_SPECIFICITY_POWER_TOKENS", 0.0)  # the rule off (no model here)
    flat = _ranked(tmp_path, "activities yoga")
    assert [c for c, _, _ in flat[:2]] == [ACTIVITIES, YOGA] and flat[0][2] == flat[1][2] == 1.0


def test_a_query_with_a_models_similarity_weighs_its_terms_by_the_embedded_power(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemon.embed.fake import HashEmbedder

    def keyword_signals() -> dict[str, float]:
        settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
        with Engine(settings, clock=lambda: NOW, embedder=HashEmbedder(dim=64)) as engine:
            hits = engine.recall("activities yoga", limit=10).hits
            assert any(h.signals["similarity"] for h in hits)  # the query has the model's similarity
        return {h.insight.content: h.signals["keyword"] for h in hits}

    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    items = [{"content": t, "created_at": f"2026-11-{1 + k % 28:02d}T00:00:00Z"} for k, t in enumerate(STORE)]
    with Engine(settings, clock=lambda: NOW, embedder=HashEmbedder(dim=64)) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
    weighed = keyword_signals()
    assert weighed[YOGA] == 1.0 > weighed[ACTIVITIES] > 0.5
    monkeypatch.setattr(retrieve_module, "QUERY_SPECIFICITY_POWER_TOKENS", 0.0)  # not the power read here
    assert keyword_signals() == weighed
    monkeypatch.setattr(Engine, "similarity_scale", lambda self: replace(CONTRACT_SIMILARITY, specificity=0.0))
    flat = keyword_signals()
    assert flat[YOGA] == flat[ACTIVITIES] == 1.0


# --- relevance (the prompt hook's judgement) -------------------------------------------------------


def test_relevance_weighs_a_terms_specificity_beside_its_idf() -> None:
    idf = [2.0, 2.0, 1.0]
    weighed = relevance.specific_weights(["activ", "yoga", "zzzzqx"], idf, 12.0)
    assert weighed[0] < 2.0 < weighed[1] and weighed[2] == 1.0  # the unknown word keeps its idf
    factors = frequency.query_term_weights(["activ", "yoga", "zzzzqx"], [True] * 3, 12.0, relevance.SPECIFICITY_POWER)
    assert weighed == [w * f for w, f in zip(idf, factors, strict=True)]
    assert relevance.specific_weights([], [], 12.0) == []


def test_a_prompt_sharing_only_common_words_with_a_memory_is_judged_less_about_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = [
        "Decided to use Qdrant as the vector database for semantic search because it supports payload filters",
        "The billing service is written in Go and deployed on Fly.io",
        "The team prefers small pull requests reviewed within one day",
        "Redis caches session tokens for thirty minutes",
        "Alice owns the onboarding flow and the welcome emails",
    ]
    _fill(tmp_path, notes)
    idle = "Can you suggest some small activities for one day off?"  # shares "small", "one", "day"
    asked = "Which vector database did we choose for semantic search, and why?"

    def judged(prompt: str) -> float:
        with _engine(tmp_path) as engine:
            return engine.recall(prompt, limit=3).hits[0].relevance

    weighed = {prompt: judged(prompt) for prompt in (idle, asked)}
    monkeypatch.setattr(relevance, "SPECIFICITY_POWER", 0.0)
    plain = {prompt: judged(prompt) for prompt in (idle, asked)}
    assert weighed[idle] < plain[idle] and weighed[asked] > plain[asked]
