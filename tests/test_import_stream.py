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


def _tricky_draft() -> dict[str, object]:
    """Text that looks like a slice boundary where it is none: ``},`` inside strings and inside
    nested values of an unknown key, and edges whose optional fields take every plain form."""
    draft = generate_draft(60, seed=11)
    items = draft["insights"]
    assert isinstance(items, list)
    items[3]["content"] = 'a quoted object {"k": 1},{"k": 2}, then more'
    items[7]["x"] = [{"a": 1}, {"b": [{"c": "},"}]}]
    items[-1]["content"] = "the last one ends with },"
    edges = draft["edges"]
    assert isinstance(edges, list)
    edges[0]["reason"] = 0
    edges[1]["weight"] = None
    edges[2]["weight"] = 1
    edges[3]["weight"] = 0
    edges[4].pop("weight", None)
    edges[5]["reason"] = "a reason with },{ inside"
    edges[6]["reason"] = ""
    return draft


@pytest.mark.parametrize("block", [1, 5, 64, 700, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_a_streamed_draft_with_false_boundaries_equals_the_whole_parse(
    tmp_path: Path, monkeypatch, block: int, indent: int | None
) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_tricky_draft(), indent=indent), encoding="utf-8")
    monkeypatch.setattr(drafts, "_STREAM_BLOCK", block)
    streamed = drafts._stream_draft(str(path))
    assert streamed is not None
    whole = _whole(path)
    assert isinstance(whole, drafts.Draft)
    assert streamed.insights == whole.insights and list(streamed.edges) == list(whole.edges)
    assert streamed.edges.columns() == whole.edges.columns()  # reason codes too, in first-seen order
    assert streamed.insights[3].content.startswith("a quoted object") and streamed.edges[0].reason == ""


def _one_by_one(items: list[object], n: int) -> drafts.DraftEdges | str:
    """The edges as each item alone makes one (the reference ``DraftEdges.extend_plain`` must equal)."""
    out = drafts.DraftEdges()
    try:
        for i, item in enumerate(items):
            out.append(drafts._plain_edge(item, n, {}) or drafts._edge(i, item, n))
    except InputError as exc:
        return str(exc)
    return out


_EDGE = {"source_index": 0, "target_index": 1, "edge_type": "entity", "weight": 0.5, "reason": "r"}


@pytest.mark.parametrize(
    "change",
    [
        {}, {"source_index": True}, {"source_index": 1.0}, {"target_index": -1}, {"target_index": 3},
        {"target_index": 0}, {"edge_type": "nope"}, {"edge_type": ["entity"]}, {"weight": 1.5}, {"weight": -0.0},
        {"weight": True}, {"weight": "0.5"}, {"weight": 0}, {"weight": None}, {"reason": ["r"]}, {"reason": "a\x00b"},
        {"reason": "\ud800"}, {"reason": 0}, {"reason": 7}, {"source_index": 2**70},
    ],
)
def test_edges_checked_slice_by_slice_are_the_edges_item_by_item(change: dict[str, object]) -> None:
    items: list[object] = [dict(_EDGE), {**_EDGE, **change}, dict(_EDGE, reason="s")]
    want = _one_by_one(items, 3)
    text = json.dumps({"schema_version": "1", "insights": [{"content": f"c{i}"} for i in range(3)], "edges": items})
    try:
        got: drafts.DraftEdges | str = drafts.parse_draft(text).edges  # type: ignore[assignment]
    except InputError as exc:
        got = str(exc)
    if isinstance(want, str):
        assert got == want
    else:
        assert isinstance(got, drafts.DraftEdges) and got.columns() == want.columns()
    assert drafts.DraftEdges().extend_plain([{**_EDGE, **change}], 3) == (change in ({}, {"weight": 0}, {"weight": None}, {"reason": 0}, {"weight": -0.0}))
