"""bench/relevance.py on a tiny LoCoMo-format conversation: positives, negatives, figures per floor."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import relevance  # noqa: E402
from tests.test_bench_quality import SAMPLE  # noqa: E402


def test_the_negatives_are_written_for_the_harness_in_both_languages() -> None:
    negatives = json.loads(relevance.NEGATIVES.read_text(encoding="utf-8"))
    assert len(negatives["en"]) >= 60 and len(negatives["zh"]) >= 40
    assert len(set(negatives["en"])) == len(negatives["en"]) and len(set(negatives["zh"])) == len(negatives["zh"])


def test_figures_through_the_cli_in_process() -> None:
    negatives = ["Fix the failing test in test_parser.py", "给房东写一封邮件，说暖气坏了"]
    result = relevance.run_all([SAMPLE], "turns", "none", negatives, "inprocess", None)
    positives = [p for p in result.prompts if p.positive]
    assert len(positives) == 2 and len(result.prompts) == 4  # the question without evidence is not asked
    assert all(len(p.hits) <= relevance.RECALL_LIMIT and len(p.old_hits) <= relevance.OLD_LIMIT for p in result.prompts)
    greyhound = positives[0]
    assert any(h.covers == {"D1:1"} for h in relevance.kept(greyhound.hits, relevance.RECALL_FLOOR))
    for p in result.prompts[2:]:  # nothing about pottery or greyhounds: nothing injected
        assert relevance.kept(p.hits, relevance.RECALL_FLOOR) == []
    pos, neg, lines = relevance.figures(result.prompts, relevance.RECALL_FLOOR)
    assert pos >= 50.0 and neg == 0.0 and 1.0 <= lines <= relevance.RECALL_LIMIT
    assert f"limit {relevance.RECALL_LIMIT}, relevance >= {relevance.RECALL_FLOOR} (default) |" in relevance.table(result)


def _other_conversation() -> dict[str, Any]:
    """SAMPLE's shape with words that match nothing of SAMPLE (the turns ``--long-query other`` borrows)."""
    other = copy.deepcopy(SAMPLE)
    other["sample_id"] = "tiny-other"
    texts = ["Der Zug fährt um acht.", "Bitte schließ das Fenster.", "Das Wetter bleibt kalt.", "Wir essen später."]
    for turn, text in zip(other["conversation"]["session_1"] + other["conversation"]["session_2"], texts, strict=True):
        turn["text"] = text
        turn.pop("blip_caption", None)
    return other


def test_long_prompts_other_put_a_foreign_turn_before_each_question(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    ask = relevance._ask

    def recording(run: Any, text: str, *args: Any) -> list[relevance.Hit]:
        asked.append(text)
        return ask(run, text, *args)

    monkeypatch.setattr(relevance, "_ask", recording)
    negatives = ["Fix the failing test in test_parser.py", "Plan a week of vegetarian dinners"]
    result = relevance.run_all([SAMPLE, _other_conversation()], "turns", "none", negatives, "inprocess", None, long="other")
    assert result.long == "other" and "positives as long prompts (other)" in relevance.table(result)
    # the greyhound question (evidence D1:1, position 0) after the other conversation's turn 0, for both hook limits
    assert asked[:2] == ["Der Zug fährt um acht. Who adopted a greyhound?"] * 2
    # the negatives are long too, their borrowed turns spread over the other conversation (4 turns, 2 negatives)
    assert asked[4:6] == ["Der Zug fährt um acht. Fix the failing test in test_parser.py"] * 2
    assert asked[6:8] == ["Das Wetter bleibt kalt. Plan a week of vegetarian dinners"] * 2
    # the other conversation's store is asked the same way, borrowing from SAMPLE's turns
    assert all(len(text.split()) > 6 for text in asked) and len(asked) == 2 * 2 * (2 + 2)
    greyhound = result.prompts[0]
    assert greyhound.positive and any(h.covers == {"D1:1"} for h in relevance.kept(greyhound.hits, 0.0))


def test_long_prompts_far_leave_the_borrowed_turn_out_of_scope() -> None:
    bare = relevance.run_all([SAMPLE], "turns", "none", [], "inprocess", None)
    far = relevance.run_all([SAMPLE], "turns", "none", [], "inprocess", None, long="far")
    assert len(far.prompts) == len(bare.prompts) == 2
    # greyhound (D1:1): the turn half the conversation away is D2:1 ("Comet loves the beach ..."), which
    # names Comet as the evidence does; out of scope, it is never a hit of its own prompt
    greyhound = far.prompts[0]
    assert greyhound.hits and all(h.covers != {"D2:1"} for h in greyhound.hits + greyhound.old_hits)
    assert any(h.covers == {"D1:1"} for h in greyhound.hits)


def test_the_long_query_option_reaches_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    seen: list[tuple[Any, ...]] = []
    run_all = relevance.run_all

    def recording(*args: Any) -> relevance.Run:
        seen.append(args)
        return run_all(*args)

    monkeypatch.setattr(relevance, "run_all", recording)
    out = tmp_path / "out.md"
    assert relevance.main([str(data), "--units", "turns", "--mode", "inprocess", "--long-query", "far", "--out", str(out)]) == 0
    assert [a[6] for a in seen] == ["far"] and "positives as long prompts (far)" in out.read_text(encoding="utf-8")
    # an event-memory set: its own no-match prompts, its memories separate and as written
    nomatch = tmp_path / "nomatch.json"
    nomatch.write_text(json.dumps(["翻译一下这句话", "What is a monad?"]), encoding="utf-8")
    assert relevance.main([str(data), "--units", "turns", "--mode", "inprocess", "--negatives", str(nomatch),
                           "--separate", "alone", "--as-written"]) == 0  # fmt: skip
    assert seen[-1][3] == ["翻译一下这句话", "What is a monad?"] and seen[-1][8:] == ("alone", True)
    with pytest.raises(SystemExit):
        relevance.main([str(data), "--long-query", "prev"])  # only the views whose prompt is no memory
