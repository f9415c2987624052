"""export, then import into an empty store, gives back the store: every edge with its type, weight and
whole metadata map, every insight with the fields a draft carries (README: what a draft carries).

Before, an export wrote each edge's ``reason`` only: an entity edge's ``entity``, a temporal edge's
``sub_type``/``direction``/``hours_diff``, a causal edge's ``overlap``/``sub_type`` and every key a user gave
``link --meta`` were lost by the round trip; so was an insight's use (its access count, last access and update
time: a memory kept by ``gc --keep`` lost its immunity to auto-prune). A draft without the additions (the Go
program's) imports as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.test_cli_remember import query, stored_state

_EDGES = (
    "SELECT s.content, t.content, e.edge_type, e.weight, e.metadata FROM edges e "
    "JOIN insights s ON s.id = e.source_id JOIN insights t ON t.id = e.target_id"
)


def _edges(data_dir: Path, store: str = "default") -> list[tuple[str, str, str, float, dict[str, str]]]:
    """Every edge row of a store, by its ends' contents (ids differ between stores), sorted."""
    rows = query(data_dir, _EDGES, store=store)
    return sorted((r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows)


def _insights(data_dir: Path, store: str = "default") -> list[tuple[object, ...]]:
    """The fields of the active insights a draft carries, by content (all but the id, the embedding, the
    insert time stored_at and the effective importance, which is computed again)."""
    return query(
        data_dir,
        "SELECT content, category, importance, tags, entities, source, created_at, access_count, last_accessed_at, "
        "updated_at FROM insights WHERE deleted_at IS NULL ORDER BY content",
        store=store,
    )


def _write(tmp_path: Path, draft: object, name: str = "draft.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(draft), encoding="utf-8")
    return str(path)


def _build(cli: Cli, store: str = "default") -> None:
    """A store whose edges carry every kind of metadata the engine writes, and a user's."""
    on = ("--store", store)
    first = cli.ok(*on, "remember", "Chose Qdrant because Rust performance is critical", "--cat", "decision",
                   "--imp", "4", "--tags", "db,perf")["id"]
    second = cli.ok(*on, "remember", "Qdrant runs in the staging cluster on Kubernetes", "--source", "ops")["id"]
    cli.ok(*on, "remember", "Rust services therefore need a Qdrant client", "--entities", "QdrantClient")
    cli.ok(*on, "remember", "Kubernetes upgrade planned for the staging cluster", "--source", "ops")
    cli.ok(*on, "remember", "The Qdrant upgrade caused the staging cluster outage", "--source", "ops")
    # a user's links: several keys, a reason among them, a NUL (link takes one; the JSON escapes it), weight 0
    cli.ok(*on, "link", first, second, "--type", "causal", "--weight", "0.8",
           "--meta", '{"reason": "ops follow-up", "ticket": "OPS-1", "note": "a\\u0000b"}')
    cli.ok(*on, "link", first, second, "--type", "semantic", "--weight", "0", "--meta", '{"reason": ""}')
    cli.ok(*on, "link", first, first, "--type", "semantic", "--weight", "0.3", "--meta", '{"why": "restated"}')
    cli.ok(*on, "link", second, first, "--type", "supersedes", "--weight", "1")
    # their use: an access (show) and an explicit keep (gc --keep: +3, immune to auto-prune from then on)
    cli.ok(*on, "show", first)
    cli.ok(*on, "gc", "--keep", second)


def _kinds(edges: list[tuple[str, str, str, float, dict[str, str]]]) -> set[str]:
    return {key for *_, meta in edges for key in meta}


def test_export_then_import_gives_back_every_edge_with_its_metadata(cli, tmp_path):
    _build(cli)
    out = tmp_path / "export.json"
    assert cli("export", "-o", str(out)).code == 0
    original = _edges(cli.data_dir)
    # what the round trip has to carry: the engine's metadata and the user's
    assert {"entity", "sub_type", "direction", "hours_diff", "overlap", "created_by", "ticket", "why"} <= _kinds(original)
    imported = cli("--store", "copy", "import", str(out))
    assert imported.code == 0 and imported.err == "", imported.err
    assert _edges(cli.data_dir, "copy") == original
    assert _insights(cli.data_dir, "copy") == _insights(cli.data_dir)
    assert {row[7] for row in _insights(cli.data_dir, "copy")} == {0, 1, 3}
    kept = cli.ok("--store", "copy", "gc", "--threshold", "100")
    assert {c["insight"]["content"] for c in kept["candidates"]} == {
        row[0] for row in _insights(cli.data_dir, "copy") if row[7] < 3 and row[2] < 4}  # the kept one is immune
    # the export writes each map whole (only where it is not empty), and a reason beside it for the Go program
    exported = json.loads(out.read_text(encoding="utf-8"))
    rows = exported["edges"] + exported["self_edges"]
    assert all(row["metadata"] for row in rows if "metadata" in row)
    assert all(row.get("reason") == row["metadata"]["reason"] for row in rows if row.get("metadata", {}).get("reason"))
    assert any(row["metadata"] == {"reason": "", "created_by": "claude"} and "reason" not in row for row in rows)
    # parsed whole (another key order) it is the same draft: the same rows
    reordered = _write(tmp_path, {k: exported[k] for k in ("self_edges", "edges", "insights", "exact_weights",
                                                           "schema_version")}, "reordered.json")
    assert cli("--store", "whole", "import", reordered).code == 0
    assert _edges(cli.data_dir, "whole") == original
    # and the copy exports as the original does
    again = tmp_path / "again.json"
    assert cli("--store", "copy", "export", "-o", str(again)).code == 0
    copied = json.loads(again.read_text(encoding="utf-8"))
    for draft in (copied, exported):  # (edges in the order of their rows, which the import wrote in its own)
        draft["edges"].sort(key=lambda e: json.dumps(e, sort_keys=True))
    assert copied == exported


def test_a_dense_export_round_trips_through_the_sliced_parse(cli, tmp_path):
    """Thousands of edges with maps: the parse checks them a slice at a time (drafts.DraftEdges.extend_plain),
    not one by one; an edge whose endpoint was stored before the import goes through the finalize instead."""
    n = 120
    items = [{"content": f"memory {k} about subject {k % 7}", "created_at": f"2026-01-01T00:{k // 60:02d}:{k % 60:02d}Z"}
             for k in range(n)]
    edges = [
        {"source_index": s, "target_index": t, "edge_type": ("semantic", "causal", "entity")[(s + t) % 3],
         "weight": round(((s * 7 + t) % 100) / 100, 2),
         "metadata": {"cosine": f"0.{(s * t) % 97:04d}", "created_by": "auto", **({"reason": "r"} if s % 5 == 0 else {})},
         **({"reason": "r"} if s % 5 == 0 else {})}
        for s in range(n) for t in range(n) if s != t and (s * 31 + t) % 3 == 0
    ]
    assert len(edges) > 4000
    cli.ok("remember", items[0]["content"])  # stored before: its edges are written by the finalize
    assert cli("import", _write(tmp_path, {"schema_version": "1", "exact_weights": True, "insights": items,
                                           "edges": edges})).code == 0
    stored = {(s, t, k): (w, m) for s, t, k, w, m in _edges(cli.data_dir)}
    for edge in edges:
        key = (items[edge["source_index"]]["content"], items[edge["target_index"]]["content"], edge["edge_type"])
        assert stored[key] == (edge["weight"], edge["metadata"]), key


def test_a_reason_beside_a_metadata_map_wins_over_the_maps_own(cli, tmp_path):
    """``reason`` is what the Go program reads and stores: given (not empty), it is the stored reason whatever
    ``metadata.reason`` says; absent or empty, the map is stored as it is."""
    items = [{"content": f"memory number {k}"} for k in range(7)]
    given = [
        ({"reason": "outer"}, {"reason": "inner", "x": "y"}, {"reason": "outer", "x": "y"}),
        ({"reason": "outer"}, {"reason": "inner"}, {"reason": "outer"}),
        ({}, {"reason": "inner"}, {"reason": "inner"}),
        ({"reason": ""}, {"reason": "inner", "x": "y"}, {"reason": "inner", "x": "y"}),
        ({"reason": "outer"}, {}, {"reason": "outer"}),
        ({}, {"reason": ""}, {"reason": ""}),
        ({}, {}, {}),
    ]
    edges = [{"source_index": k, "target_index": (k + 1) % 7, "edge_type": "causal", "weight": 0.5, **reason,
              "metadata": meta} for k, (reason, meta, _) in enumerate(given)]
    assert cli("import", _write(tmp_path, {"schema_version": "1", "insights": items, "edges": edges})).code == 0
    stored = {s: m for s, t, kind, w, m in _edges(cli.data_dir) if kind == "causal"}
    assert [stored[f"memory number {k}"] for k in range(7)] == [want for *_, want in given]


def test_a_go_draft_without_metadata_imports_as_before(cli, tmp_path):
    """The Go program's draft (no metadata): an edge's reason is its whole metadata, none is {}; the weight
    0 is the default 0.5."""
    draft = {
        "schema_version": "1",
        "insights": [{"content": "Use Postgres for billing"}, {"content": "Billing moved to Postgres 16"},
                     {"content": "Postgres 16 upgrade done"}],
        "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal", "weight": 0, "reason": "follow-up"},
                  {"source_index": 1, "target_index": 2, "edge_type": "semantic", "weight": 0.7}],
    }
    out = cli.ok("import", _write(tmp_path, draft))
    assert out["edges_inserted"] == 2
    assert {(row[7], row[8], row[9] == row[6]) for row in _insights(cli.data_dir)} == {(0, None, True)}
    explicit = [e for e in _edges(cli.data_dir) if e[2] in ("causal", "semantic")]
    assert explicit == [
        ("Billing moved to Postgres 16", "Postgres 16 upgrade done", "semantic", 0.7, {}),
        ("Use Postgres for billing", "Billing moved to Postgres 16", "causal", 0.5, {"reason": "follow-up"}),
    ]


@pytest.mark.parametrize(
    ("edge", "message"),
    [
        ({"metadata": ["a"]}, "edges[{k}]: metadata must be an object of strings, got array"),
        ({"metadata": "reason"}, "edges[{k}]: metadata must be an object of strings, got string"),
        ({"metadata": 3}, "edges[{k}]: metadata must be an object of strings, got number"),
        ({"metadata": {"a": "b", "n": 1}}, 'edges[{k}]: metadata["n"] must be a string, got number'),
        ({"metadata": {"n": None}}, 'edges[{k}]: metadata["n"] must be a string, got null'),
        ({"metadata": {"n": {"x": "y"}}}, 'edges[{k}]: metadata["n"] must be a string, got object'),
        ({"metadata": {"n": ["x"]}}, 'edges[{k}]: metadata["n"] must be a string, got array'),
        ({"metadata": {"n": True}}, 'edges[{k}]: metadata["n"] must be a string, got boolean'),
        ({"metadata": {"n": "\ud800"}}, 'edges[{k}]: metadata["n"] is not valid UTF-8'),
        ({"metadata": {"\udfff": "x"}}, 'edges[{k}]: metadata["\\udfff"] is not valid UTF-8'),
    ],
)
def test_a_bad_metadata_map_is_one_error_naming_the_edge_and_nothing_is_stored(cli, tmp_path, edge, message):
    cli.ok("remember", "Stored before the import")
    before = stored_state(cli.data_dir)
    items = [{"content": f"memory number {k}"} for k in range(50)]
    # the bad edge after thousands of good ones with maps: the sliced parse hands it to the one that phrases it
    good = [{"source_index": s, "target_index": t, "edge_type": "causal", "metadata": {"m": f"{s}-{t}"}}
            for s in range(50) for t in range(50) if s != t]
    k = 2000
    edges = [*good[:k], {"source_index": 1, "target_index": 2, "edge_type": "entity", **edge}, *good[k:]]
    for name, draft in (("edges", {"schema_version": "1", "insights": items, "edges": edges}),
                        ("self", {"schema_version": "1", "insights": items,
                                  "self_edges": [{"index": 3, "edge_type": "entity"},
                                                 {"index": 4, "edge_type": "entity", **edge}]})):
        want = message.format(k=k) if name == "edges" else message.replace("edges[{k}]", "self_edges[1]")
        for args in (("import",), ("import", "--dry-run")):
            res = cli(*args, _write(tmp_path, draft, f"{name}.json"))
            assert (res.code, res.out, res.err) == (1, "", f"Error: invalid draft: {want}\n"), res.err
        assert stored_state(cli.data_dir) == before


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"access_count": -1}, "access_count must be an integer from 0 to 2147483647, got -1"),
        ({"access_count": 1.5}, "access_count must be an integer from 0 to 2147483647, got 1.5"),
        ({"access_count": "3"}, 'access_count must be an integer from 0 to 2147483647, got "3"'),
        ({"access_count": True}, "access_count must be an integer from 0 to 2147483647, got true"),
        ({"access_count": 2**31}, "access_count must be an integer from 0 to 2147483647, got 2147483648"),
        ({"last_accessed_at": "yesterday"},
         'last_accessed_at "yesterday" is not RFC 3339 (e.g. 2026-02-18T10:00:00Z)'),
        ({"last_accessed_at": 5}, "last_accessed_at must be an RFC 3339 string"),
        ({"updated_at": "2026-13-01T00:00:00Z"},
         'updated_at "2026-13-01T00:00:00Z" is not RFC 3339 (e.g. 2026-02-18T10:00:00Z)'),
    ],
)
def test_a_bad_use_field_of_an_insight_is_one_error_naming_it_and_nothing_is_stored(cli, tmp_path, field, message):
    cli.ok("remember", "Stored before the import")
    before = stored_state(cli.data_dir)
    items = [{"content": "first memory", "access_count": 2, "last_accessed_at": "2026-01-02T03:04:05+01:00"},
             {"content": "second memory", **field}]
    res = cli("import", _write(tmp_path, {"schema_version": "1", "insights": items}))
    assert (res.code, res.out, res.err) == (1, "", f"Error: invalid draft: insights[1]: {message}\n")
    assert stored_state(cli.data_dir) == before
    # the good one alone: stored as given (the stamp in UTC, second precision)
    assert cli("import", _write(tmp_path, {"schema_version": "1", "insights": items[:1]})).code == 0
    assert [row[7:] for row in _insights(cli.data_dir) if row[0] == "first memory"] == [
        (2, "2026-01-02T02:04:05Z", query(cli.data_dir, "SELECT created_at FROM insights WHERE content = ?",
                                          ("first memory",))[0][0])]


def test_an_edge_between_two_stored_insights_keeps_its_stored_metadata(cli, tmp_path):
    """README's rule for explicit edges holds with maps too: an edge of that type between two insights stored
    before the import stays as stored (weight and metadata); a missing one is written with the draft's map."""
    first = cli.ok("remember", "Redis caches the sessions")["id"]
    second = cli.ok("remember", "Sessions expire after two hours")["id"]
    cli.ok("link", first, second, "--type", "causal", "--weight", "0.7", "--meta", '{"why": "eviction"}')
    before = _edges(cli.data_dir)
    draft = {"schema_version": "1",
             "insights": [{"content": "Redis caches the sessions"}, {"content": "Sessions expire after two hours"}],
             "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal", "weight": 0.2,
                        "metadata": {"why": "other"}},
                       {"source_index": 0, "target_index": 1, "edge_type": "entity", "weight": 0.4,
                        "metadata": {"entity": "Redis", "by": "draft"}}]}
    out = cli.ok("import", _write(tmp_path, draft))
    assert (out["skipped"], out["edges_inserted"]) == (2, 1)
    after = _edges(cli.data_dir)
    assert [e for e in after if e[2] != "entity"] == [e for e in before if e[2] != "entity"]
    assert ("Redis caches the sessions", "Sessions expire after two hours", "entity", 0.4,
            {"entity": "Redis", "by": "draft"}) in after


def test_export_then_import_on_postgres_gives_back_every_edge_with_its_metadata(tmp_path, capsys, pg_db):
    """The same round trip between two PostgreSQL stores (the import's fresh rows go by COPY there)."""
    cli = Cli(tmp_path / "m", capsys, served=False)
    for store in ("pg", "pgcopy"):
        assert cli("store", "create", store, "--postgres", pg_db).code == 0
    _build(cli, "pg")
    out = tmp_path / "export.json"
    assert cli("--store", "pg", "export", "-o", str(out)).code == 0
    original = _edges(cli.data_dir, "pg")
    assert {"entity", "sub_type", "direction", "hours_diff", "overlap", "ticket", "why"} <= _kinds(original)
    imported = cli("--store", "pgcopy", "import", str(out))
    assert imported.code == 0 and imported.err == "", imported.err
    assert _edges(cli.data_dir, "pgcopy") == original
    assert _insights(cli.data_dir, "pgcopy") == _insights(cli.data_dir, "pg")
    assert cli.ok("--store", "pgcopy", "doctor")["ok"] is True
