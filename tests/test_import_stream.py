"""A draft file is read as a stream (``drafts._stream_draft``: neither its text nor its parsed
objects held whole, issue 24) and gives exactly what the whole parse gives: the same Draft for
a valid draft, and for anything else the whole parse's own result or error message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.generate import generate_draft
from mnemon import drafts
from mnemon.errors import InputError


def _whole(path: Path) -> drafts.Draft | str:
    try:
        return drafts.parse_draft(drafts.read_draft_text(str(path)))
    except InputError as exc:
        return str(exc)


def _loaded(path: Path) -> drafts.Draft | str:
    try:
        return drafts.load_draft(str(path))
    except InputError as exc:
        return str(exc)


@pytest.mark.parametrize("block", [1, 7, 4096, 1 << 20])
def test_a_streamed_draft_equals_the_whole_parse_whatever_the_block(tmp_path: Path, monkeypatch, block: int) -> None:
    draft = generate_draft(120, seed=5)
    draft["edges"][3]["reason"] = "ünïcödé reason"  # type: ignore[index]
    draft["edges"][4]["weight"] = 0  # type: ignore[index]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(draft, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    monkeypatch.setattr(drafts, "_STREAM_BLOCK", block)
    streamed = drafts._stream_draft(str(path))
    assert streamed is not None  # the plain case is streamed, not parsed whole
    whole = _whole(path)
    assert isinstance(whole, drafts.Draft)
    assert streamed.insights == whole.insights and streamed.edges == whole.edges
    assert list(streamed.edges) == list(whole.edges) and len(streamed.edges) == len(whole.edges) > 100
    assert streamed.edges[4].weight == drafts.DEFAULT_EDGE_WEIGHT and streamed.edges[3].reason == "ünïcödé reason"
    assert streamed.edges[-1] == list(whole.edges)[-1] and streamed.edges[2:5] == list(whole.edges)[2:5]


def _variants() -> dict[str, bytes]:
    base = generate_draft(12, seed=9)
    compact = json.dumps(base, separators=(",", ":")).encode()
    items, edges = base["insights"], base["edges"]
    bad_item = [*items[:5], {**items[5], "importance": 9}, *items[6:]]  # type: ignore[misc,index]
    bad_edge = [*edges[:2], {**edges[2], "target_index": 99}]  # type: ignore[misc,index]
    out = {
        "pretty": json.dumps(base, indent=2).encode(),
        "crlf": json.dumps(base, indent=1).replace("\n", "\r\n").encode(),
        "keys reversed": json.dumps(dict(reversed(list(base.items())))).encode(),
        "source after insights": json.dumps({"schema_version": "1", "insights": items, "source": "late"}).encode(),
        "edges before insights": json.dumps({"schema_version": "1", "edges": edges, "insights": items}).encode(),
        "duplicate insights": compact[:-1] + b',"insights":[{"content":"the last one wins"}]}',
        "unknown key": json.dumps({"schema_version": "1", "x": [1, {"y": 2}], "insights": items}).encode(),
        "bom": b"\xef\xbb\xbf" + compact,
        "invalid utf-8 at the end": compact + b" \xff",
        "truncated": compact[: len(compact) // 2],
        "trailing data": compact + b" {}",
        "nan weight": compact.replace(b'"weight":', b'"weight":NaN,"w":', 1),
        "bad schema": compact.replace(b'"schema_version":"1"', b'"schema_version":1', 1),
        "no insights": json.dumps({"schema_version": "1", "insights": []}).encode(),
        "insights null": json.dumps({"schema_version": "1", "insights": None}).encode(),
        "edges null": json.dumps({"schema_version": "1", "insights": items, "edges": None}).encode(),
        "bad item": json.dumps({"schema_version": "1", "insights": bad_item}).encode(),
        "bad edge": json.dumps({"schema_version": "1", "insights": items, "edges": bad_edge}).encode(),
        "bad draft source": json.dumps({"schema_version": "1", "source": "a\x00b", "insights": items}).encode(),
        "array": b"[1, 2]",
        "empty": b"",
        "number at the end": b'{"schema_version":"1","insights":[{"content":"x","importance":3',
        "big number": json.dumps({"schema_version": "1", "insights": [{"content": "x", "importance": 3}] * 3}).encode(),
    }
    return out


@pytest.mark.parametrize("name", sorted(_variants()))
@pytest.mark.parametrize("block", [3, 1 << 20])
def test_any_other_draft_loads_as_the_whole_parse_loads_it(tmp_path: Path, monkeypatch, name: str, block: int) -> None:
    path = tmp_path / "d.json"
    path.write_bytes(_variants()[name])
    monkeypatch.setattr(drafts, "_STREAM_BLOCK", block)
    assert _loaded(path) == _whole(path)


def test_a_missing_file_is_the_read_error(tmp_path: Path) -> None:
    assert _loaded(tmp_path / "nope.json") == _whole(tmp_path / "nope.json")
    assert str(_loaded(tmp_path / "nope.json")).startswith("read file: ")
