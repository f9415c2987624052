"""bench/generate.py: the benchmark corpus, English (pinned) and Chinese."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import generate_draft  # noqa: E402
from mnemon.text import written_in_han  # noqa: E402


def _fingerprint(draft: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(draft, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def test_the_english_corpus_is_the_one_every_figure_was_measured_on() -> None:
    # bench/README.md's figures name drafts by (n, seed, edges): a change of the generator must not move them
    draft = generate_draft(200, seed=5, edges_per_insight=10)
    assert _fingerprint(draft) == "7be83dfcd3b8cfe40d1fe43893a469436a72d7c6c8cbf172a5f80168f4aad24f"


def test_the_chinese_corpus_is_chinese_unique_and_deterministic() -> None:
    draft = generate_draft(600, seed=3, edges_per_insight=4, lang="zh")
    assert _fingerprint(draft) == _fingerprint(generate_draft(600, seed=3, edges_per_insight=4, lang="zh"))
    insights = draft["insights"]
    contents = [item["content"] for item in insights]
    assert len(set(contents)) == 600
    # every memory has Chinese words; the ones about a file path and an identifier are mostly code
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in c) for c in contents)
    assert sum(map(written_in_han, contents)) >= 0.8 * len(contents)
    assert all(c.endswith("）") for c in contents)  # the unique reference, written the Chinese way
    assert all(e in item["content"] for item in insights for e in item["entities"])
    assert {item["category"] for item in insights} == {"decision", "fact", "preference", "context", "insight"}
    assert _fingerprint(draft) != _fingerprint(generate_draft(600, seed=3, edges_per_insight=4))


def test_the_chinese_corpus_imports_and_recalls(data_dir: Path) -> None:
    from mnemon.cli.state import GlobalOptions
    from mnemon.drafts import parse_draft
    from mnemon.engine import Engine

    draft = generate_draft(300, seed=9, edges_per_insight=2, lang="zh")
    with Engine(GlobalOptions(data_dir=str(data_dir)).settings()) as engine:
        report = engine.import_draft(parse_draft(json.dumps(draft, ensure_ascii=False)))
        assert report["imported"] == 300 and report["errors"] == 0
        hits = engine.recall("上次计费服务的故障是什么原因，后来怎么修的", limit=5).hits
    assert hits and any("计费服务" in hit.insight.content for hit in hits)


def test_an_unknown_language_is_refused() -> None:
    with pytest.raises(ValueError, match="lang must be one of en, zh"):
        generate_draft(10, lang="fr")
