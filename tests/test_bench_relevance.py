"""bench/relevance.py on a tiny LoCoMo-format conversation: positives, negatives, figures per floor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
