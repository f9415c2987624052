"""Hostile import drafts: derandomised hypothesis mutations of valid drafts through ``mnemon import``.

A valid draft (§3.15) is generated, then damaged: a value somewhere swapped for another type,
NaN/Infinity literals, numbers past their bounds, huge arrays, deep nesting, bad or equal edge
indices, unknown keys; then the bytes: a BOM, CRLF line ends, truncation, invalid UTF-8. Each
example imports it (sometimes ``--dry-run``) in-process against a copy of a small store:

- exit 0 or 1, never a traceback; on 1 exactly one ``Error:`` line and the store unchanged
  (validation happens before any write, §3.15); ``--dry-run`` never changes the store;
- on 0 the output is the documented summary, and the store passes doctor's row checks;
- nothing is written outside the data dir.

CI runs ``DRAFT_EXAMPLES`` (600, about 20 s); ``MNEMON_RELIABILITY_SCALE=N`` multiplies it
(N=4 gives the issue's 2,000+).
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.store import check, ranges
from tests.test_fuzz_cli import _snapshot

SCALE = max(1, int(os.environ.get("MNEMON_RELIABILITY_SCALE", "1")))
DRAFT_EXAMPLES = 600 * SCALE

_CATEGORIES = ["preference", "decision", "fact", "insight", "context", "general", "", "narrative", "x"]
_EDGE_TYPES = ["temporal", "semantic", "causal", "entity", "supersedes", "backbone", ""]
_HOSTILE_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 5, 6, 2**63, -(2**63) - 1, 1.5, math.nan, math.inf, -math.inf, 1e308, "", " ",
    "\x00", "a\x00b", "\u202e", "x" * 8001, "é" * 4001, [], {}, [None], [1, 2], {"a": 1}, ["t"] * 25,
    ["e" * 201], "2026-13-45T99:99:99Z", "not a date", "2026-01-01T00:00:00+25:00", "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z", "%_", "'; DROP TABLE insights;--",
]


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _valid_draft() -> st.SearchStrategy[dict[str, Any]]:
    insight = st.fixed_dictionaries(
        {"content": st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1,
                            max_size=40)},
        optional={
            "category": st.sampled_from(_CATEGORIES[:6]),
            "importance": st.integers(0, 5),
            "tags": st.lists(st.text(max_size=8, alphabet="abcxyz"), max_size=3),
            "entities": st.lists(st.sampled_from(["Python", "Go", "SQLite"]), max_size=2),
            "source": st.sampled_from(["agent", "user", "import"]),
            "created_at": st.sampled_from(["2026-01-02T03:04:05Z", "2025-06-01T12:00:00+02:00"]),
        },
    )
    return st.lists(insight, min_size=1, max_size=4).flatmap(
        lambda items: st.fixed_dictionaries(
            {"schema_version": st.just("1"), "insights": st.just(items)},
            optional={
                "source": st.sampled_from(["agent", "bulk"]),
                "edges": st.lists(
                    st.fixed_dictionaries(
                        {"source_index": st.integers(0, len(items) - 1), "target_index": st.integers(0, len(items) - 1),
                         "edge_type": st.sampled_from(_EDGE_TYPES[:5])},
                        optional={"weight": st.floats(0, 1), "reason": st.text(max_size=10)},
                    ),
                    max_size=3,
                ),
            },
        )
    )


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if len(prefix) > 6:
        return out  # a deep nest planted by an earlier mutation: its top is enough to aim at
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[head] = _replace(doc[head], rest, new)
    return copy


@st.composite
def hostile_draft(draw: st.DrawFn) -> bytes:
    doc: Any = draw(_valid_draft())
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        kind = draw(st.sampled_from(["value", "deep", "huge", "index", "drop", "extra"]))
        if kind == "value":
            doc = _replace(doc, path, draw(st.sampled_from(_HOSTILE_VALUES)))
        elif kind == "deep":
            doc = _replace(doc, path, _deep(draw(st.sampled_from([50, 900, 5000]))))
        elif kind == "huge":
            doc = _replace(doc, path, [draw(st.sampled_from(["x", 1, None, {}]))] * draw(st.sampled_from([1000, 20000])))
        elif kind == "index" and isinstance(doc, dict) and isinstance(doc.get("edges"), list) and doc["edges"]:
            edge = draw(st.integers(0, len(doc["edges"]) - 1))
            if isinstance(doc["edges"][edge], dict):  # an earlier mutation may have replaced it
                key = draw(st.sampled_from(["source_index", "target_index"]))
                bad = draw(st.sampled_from([-1, 4, 10**20, 1.0, "0", None, True]))
                edges = list(doc["edges"])
                edges[edge] = {**edges[edge], key: bad}
                doc = {**doc, "edges": edges}
        elif kind == "drop" and path and isinstance(_get(doc, path[:-1]), dict):
            parent = dict(_get(doc, path[:-1]))
            parent.pop(path[-1], None)
            doc = _replace(doc, path[:-1], parent)
        elif kind == "extra" and isinstance(doc, dict):
            doc = {**doc, draw(st.sampled_from(["unknown", "__proto__", "insights "])): draw(st.sampled_from(_HOSTILE_VALUES))}
    try:
        text = json.dumps(doc, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    except (RecursionError, ValueError):
        text = "[" * 10000
    data = text.encode("utf-8", "surrogatepass")
    for mutation in draw(st.lists(st.sampled_from(["bom", "crlf", "truncate", "badutf8", "nul", "dupkey"]), max_size=2)):
        if mutation == "bom":
            data = b"\xef\xbb\xbf" + data
        elif mutation == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif mutation == "truncate":
            data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
        elif mutation == "badutf8":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + b"\xff\xc3(" + data[at:]
        elif mutation == "nul":
            data = data.replace(b'"content": "', b'"content": "\\u0000', 1)
        elif mutation == "dupkey":
            data = data.replace(b'"schema_version": "1"', b'"schema_version": "1", "schema_version": "2"', 1)
    return data


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mnemon.cli import main

    base = tmp_path_factory.mktemp("draft-template") / "data-dir"
    os.environ["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"
    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        for text in ("existing memory about Python", "another one about Go"):
            assert main(["--data-dir", str(base), "remember", text]) == 0
    finally:
        sys.stdout = saved
    return base


def test_hostile_drafts_fail_cleanly_or_import_validly(template: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    from mnemon.cli import main

    workdir = tmp_path / "cwd"
    workdir.mkdir()
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    monkeypatch.chdir(workdir)
    draft_path = inputs / "draft.json"

    @settings(max_examples=DRAFT_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=hostile_draft(), dry_run=st.booleans(), no_diff=st.booleans())
    def run(data: bytes, dry_run: bool, no_diff: bool) -> None:
        data_dir = workdir / "data-dir"
        if data_dir.exists():
            shutil.rmtree(data_dir)
        shutil.copytree(template, data_dir)
        db = data_dir / "data" / "default" / "mnemon.db"
        draft_path.write_bytes(data)
        before = _snapshot(db)
        flags = (["--dry-run"] if dry_run else []) + (["--no-diff"] if no_diff else [])
        capsys.readouterr()
        code = main(["--data-dir", str(data_dir), "import", str(draft_path), *flags])
        out, err = capsys.readouterr()
        assert code in (0, 1), (code, err)
        if code == 1 or dry_run:
            assert _snapshot(db) == before
        if code == 1:
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("Error: "), err
        elif dry_run:
            assert out.startswith("Dry run: ") and "validation passed" in out
        else:
            summary = json.loads(out)
            assert {"imported", "skipped", "errors", "edges_inserted", "results"} <= set(summary)
            conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                assert ranges.insight_findings(conn) == [] and check.dangling_edges(conn) == []
                assert check.foreign_keys(conn) == []
            finally:
                conn.close()
        assert sorted(p.name for p in workdir.iterdir()) == ["data-dir"]
        assert sorted(p.name for p in inputs.iterdir()) == ["draft.json"]

    run()
