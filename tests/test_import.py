"""Import (contract §3.15, Decision 5, §4.4) and export round trip, through the CLI on real stores."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REMOTE
from tests.test_cli_remember import db_path, query, stored_state

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate import generate_draft  # noqa: E402


def _write(tmp_path: Path, draft: object, name: str = "draft.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(draft), encoding="utf-8")
    return str(path)


def _db(data_dir: Path) -> Path:
    return db_path(data_dir)


def _edges(data_dir: Path, store: str = "default") -> list[tuple[str, str, str, float, dict[str, str]]]:
    rows = query(
        data_dir,
        "SELECT s.content, t.content, e.edge_type, e.weight, e.metadata FROM edges e "
        "JOIN insights s ON s.id = e.source_id JOIN insights t ON t.id = e.target_id",
        store=store,
    )
    return [(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows]


def test_alpha_beta_alpha_maps_the_repeat_to_the_first_id(cli, tmp_path):
    draft = {"schema_version": "1", "insights": [{"content": "Alpha"}, {"content": "Beta"}, {"content": "Alpha"}]}
    out = cli.ok("import", _write(tmp_path, draft))
    assert (out["imported"], out["updated"], out["skipped"], out["errors"]) == (2, 0, 1, 0)
    assert out["results"][0]["id"] == out["results"][2]["id"]
    assert [r["action"] for r in out["results"]] == ["added", "added", "skipped"]
    assert cli.ok("status")["total_insights"] == 2
    log = cli("log").out
    assert "import-skip" in log and "import " in log


def test_repeat_of_an_existing_insight_is_skipped_and_edges_attach_to_it(cli, tmp_path):
    existing = cli.ok("remember", "Chose Qdrant because Rust performance is critical", "--no-diff")["id"]
    draft = {
        "schema_version": "1",
        "insights": [{"content": "Chose Qdrant because Rust performance is critical"}, {"content": "Qdrant index tuned"}],
        "edges": [{"source_index": 1, "target_index": 0, "edge_type": "causal", "weight": 0, "reason": "follow-up"}],
    }
    out = cli.ok("import", _write(tmp_path, draft))
    assert out["results"][0] == {"index": 0, "id": existing, "content": draft["insights"][0]["content"], "action": "skipped"}
    assert out["edges_inserted"] == 1
    causal = [e for e in _edges(cli.data_dir) if e[2] == "causal" and e[4].get("reason") == "follow-up"]
    assert causal == [("Qdrant index tuned", "Chose Qdrant because Rust performance is critical", "causal", 0.5,
                       {"reason": "follow-up"})]


def test_no_diff_stores_exact_repeats(cli, tmp_path):
    draft = {"schema_version": "1", "insights": [{"content": "Alpha"}, {"content": "Alpha"}]}
    out = cli.ok("import", "--no-diff", _write(tmp_path, draft))
    assert out["imported"] == 2 and out["skipped"] == 0
    assert out["results"][0]["id"] != out["results"][1]["id"]


def test_explicit_edges_are_one_direction_with_defaults_and_item_fields(cli, tmp_path):
    draft = {
        "schema_version": "1",
        "source": "notes",
        "insights": [
            {"content": "Use Postgres for billing", "category": "decision", "importance": 5, "tags": ["db"],
             "entities": ["Billing"], "created_at": "2026-01-02T03:04:05+02:00"},
            {"content": "Billing latency doubled", "source": "alerts", "importance": 0},
        ],
        "edges": [{"source_index": 0, "target_index": 1, "edge_type": "semantic", "weight": 0.7}],
    }
    out = cli.ok("import", _write(tmp_path, draft))
    first = cli.ok("show", out["results"][0]["id"])
    assert first["category"] == "decision" and first["importance"] == 5 and first["tags"] == ["db"]
    assert first["source"] == "notes" and first["created_at"] == "2026-01-02T01:04:05Z"
    assert first["entities"][0] == "Billing" and "Postgres" in first["entities"]
    second = cli.ok("show", out["results"][1]["id"])
    assert second["source"] == "alerts" and second["importance"] == 3 and second["category"] == "general"
    semantic = [e for e in _edges(cli.data_dir) if e[2] == "semantic"]
    assert semantic == [("Use Postgres for billing", "Billing latency doubled", "semantic", 0.7, {})]
    # temporal edges are not produced per item: each source here has a single insight
    assert not [e for e in _edges(cli.data_dir) if e[2] == "temporal"]


def test_backdated_items_repair_the_temporal_backbone(cli, tmp_path, monkeypatch):
    a = cli.ok("remember", "first note about the release", "--source", "log")["id"]
    b = cli.ok("remember", "second note about the rollout", "--source", "log")["id"]
    assert ("first note about the release", "second note about the rollout", "temporal", 1.0,
            {"direction": "precedes", "sub_type": "backbone"}) in _edges(cli.data_dir)
    # Backdated between nothing and a: created long before both; and one between a and b is impossible
    # with same-second stamps, so put one far in the past and one far in the future.
    draft = {"schema_version": "1", "insights": [
        {"content": "ancient planning note", "source": "log", "created_at": "2020-01-01T00:00:00Z"},
        {"content": "future retro note", "source": "log", "created_at": "2099-01-01T00:00:00Z"},
    ]}
    cli.ok("import", _write(tmp_path, draft))
    backbone = sorted((s, t) for s, t, k, w, m in _edges(cli.data_dir)
                      if k == "temporal" and m.get("direction") == "precedes")
    assert backbone == sorted([
        ("ancient planning note", "first note about the release"),
        ("first note about the release", "second note about the rollout"),
        ("second note about the rollout", "future retro note"),
    ])
    assert a and b


def test_import_between_two_old_neighbours_replaces_their_backbone_pair(cli, tmp_path):
    draft = {"schema_version": "1", "insights": [
        {"content": "monday standup", "source": "log", "created_at": "2026-03-02T09:00:00Z"},
        {"content": "friday retro", "source": "log", "created_at": "2026-03-06T09:00:00Z"},
    ]}
    cli.ok("import", _write(tmp_path, draft, "a.json"))
    middle = {"schema_version": "1", "insights": [
        {"content": "wednesday incident", "source": "log", "created_at": "2026-03-04T09:00:00Z"},
    ]}
    cli.ok("import", _write(tmp_path, middle, "b.json"))
    pairs = sorted((s, t, m["direction"]) for s, t, k, w, m in _edges(cli.data_dir) if k == "temporal")
    assert pairs == sorted([
        ("monday standup", "wednesday incident", "precedes"), ("wednesday incident", "monday standup", "succeeds"),
        ("wednesday incident", "friday retro", "precedes"), ("friday retro", "wednesday incident", "succeeds"),
    ])


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        ({"schema_version": "2", "insights": []}, 'invalid draft: unsupported schema_version "2" (expected "1")'),
        ({"insights": [{"content": "x"}]}, 'invalid draft: unsupported schema_version "" (expected "1")'),
        ({"schema_version": 1, "insights": [{"content": "x"}]},
         'invalid draft: unsupported schema_version 1 (expected "1")'),
        ({"schema_version": "1", "insights": []}, "invalid draft: insights must not be empty"),
        ({"schema_version": "1", "insights": [{"content": "ok"}, {"content": "  "}]},
         "invalid draft: insights[1]: content is required"),
        ({"schema_version": "1", "insights": [{"content": "x" * 8001}]},
         "invalid draft: insights[0]: content too long (8001 bytes, max 8000)"),
        ({"schema_version": "1", "insights": [{"content": "x", "category": "narrative"}]},
         'invalid draft: insights[0]: invalid category "narrative"; valid: preference, decision, fact, insight, '
         "context, general"),
        ({"schema_version": "1", "insights": [{"content": "x", "importance": 6}]},
         "invalid draft: insights[0]: importance must be 1-5, got 6"),
        ({"schema_version": "1", "insights": [{"content": "x", "tags": [str(i) for i in range(21)]}]},
         "invalid draft: insights[0]: too many tags (21, max 20)"),
        ({"schema_version": "1", "insights": [{"content": "x", "tags": ["t" * 101]}]},
         f"invalid draft: insights[0]: tag too long (101 bytes, max 100): {'t' * 50}"),
        ({"schema_version": "1", "insights": [{"content": "x", "entities": [str(i) for i in range(51)]}]},
         "invalid draft: insights[0]: too many entities (51, max 50)"),
        ({"schema_version": "1", "insights": [{"content": "x", "entities": ["e" * 201]}]},
         f"invalid draft: insights[0]: entity too long (201 bytes, max 200): {'e' * 50}"),
        ({"schema_version": "1", "insights": [{"content": "x", "created_at": "yesterday"}]},
         'invalid draft: insights[0]: created_at "yesterday" is not RFC 3339 (e.g. 2026-02-18T10:00:00Z)'),
        ({"schema_version": "1", "insights": [{"content": "x", "created_at": "9999-12-31T23:59:59-14:00"}]},
         'invalid draft: insights[0]: created_at "9999-12-31T23:59:59-14:00" is not RFC 3339 '
         "(e.g. 2026-02-18T10:00:00Z)"),
        ({"schema_version": "1", "insights": [{"content": "x"}],
          "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal"}]},
         "invalid draft: edges[0]: target_index 1 out of range [0,1)"),
        ({"schema_version": "1", "insights": [{"content": "x"}, {"content": "y"}],
          "edges": [{"source_index": 1, "target_index": 1, "edge_type": "causal"}]},
         "invalid draft: edges[0]: source_index and target_index must differ"),
        ({"schema_version": "1", "insights": [{"content": "x"}, {"content": "y"}],
          "edges": [{"source_index": 0, "target_index": 1, "edge_type": "friend"}]},
         'invalid draft: edges[0]: invalid edge type "friend"; valid: temporal, semantic, causal, entity, supersedes'),
        ({"schema_version": "1", "insights": [{"content": "x"}, {"content": "y"}],
          "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal", "weight": 1.5}]},
         "invalid draft: edges[0]: weight must be between 0.0 and 1.0, got 1.50"),
        # export's additions (a store's weights as stored, its links of an insight to itself)
        ({"schema_version": "1", "exact_weights": "yes", "insights": [{"content": "x"}]},
         "invalid draft: exact_weights must be true or false"),
        ({"schema_version": "1", "insights": [{"content": "x"}], "self_edges": {"index": 0}},
         "invalid draft: self_edges must be an array"),
        ({"schema_version": "1", "insights": [{"content": "x"}], "self_edges": [{"edge_type": "causal"}]},
         "invalid draft: self_edges[0]: index is required"),
        ({"schema_version": "1", "insights": [{"content": "x"}], "self_edges": [{"index": 1, "edge_type": "causal"}]},
         "invalid draft: self_edges[0]: index 1 out of range [0,1)"),
        ({"schema_version": "1", "insights": [{"content": "x"}],
          "self_edges": [{"index": 0, "edge_type": "causal"}, {"index": 0, "edge_type": "supersedes"}]},
         "invalid draft: self_edges[1]: supersedes requires distinct insights"),
        ({"schema_version": "1", "insights": [{"content": "x"}],
          "self_edges": [{"index": 0, "edge_type": "entity", "weight": -0.5}]},
         "invalid draft: self_edges[0]: weight must be between 0.0 and 1.0, got -0.50"),
    ],
)
def test_bad_drafts_fail_with_the_contract_message_and_change_nothing(cli, tmp_path, draft, message):
    cli.ok("remember", "kept memory")
    before = stored_state(cli.data_dir)
    result = cli("import", _write(tmp_path, draft))
    assert result.code == 1
    assert result.err.strip() == f"Error: {message}"
    assert "Traceback" not in result.err
    assert stored_state(cli.data_dir) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [  # numbers JSON reads as infinity, or past an int's range: as written in the draft
        ('{"schema_version": "1", "insights": [{"content": "x", "importance": 1e400}]}',
         "invalid draft: insights[0]: importance must be an integer, got Infinity"),
        ('{"schema_version": "1", "insights": [{"content": "x", "importance": 1e308}]}',
         "invalid draft: insights[0]: importance must be 1-5, got 1e+308"),
        ('{"schema_version": "1", "insights": [{"content": "x"}, {"content": "y"}], '
         '"edges": [{"source_index": 1e400, "target_index": 0, "edge_type": "causal"}]}',
         "invalid draft: edges[0]: source_index must be an integer"),
        ('{"schema_version": "1", "insights": [{"content": "x"}, {"content": "y"}], '
         '"edges": [{"source_index": 0, "target_index": -1e400, "edge_type": "causal"}]}',
         "invalid draft: edges[0]: target_index must be an integer"),
    ],
)
def test_drafts_with_huge_numbers_fail_with_one_line(cli, tmp_path, text, message):
    cli.ok("remember", "kept memory")
    before = stored_state(cli.data_dir)
    path = tmp_path / "huge.json"
    path.write_text(text, encoding="utf-8")
    for args in (["import", str(path), "--dry-run"], ["import", str(path)]):
        result = cli(*args)
        assert (result.code, result.err.strip()) == (1, f"Error: {message}")
    assert stored_state(cli.data_dir) == before


def test_a_draft_dated_a_century_ahead_imports(cli, tmp_path):
    """0.5 ** (days / 30) overflows past about 84 years ahead (an OverflowError traceback, after --dry-run had
    passed the draft): the decay's exponent stops at -1000, so the import succeeds and every EI is finite."""
    draft = {"schema_version": "1", "insights": [{"content": "from the far future", "created_at": "2112-01-01T00:00:00Z"},
                                                 {"content": "from next year", "created_at": "2027-06-01T00:00:00Z"}]}
    assert cli("import", _write(tmp_path, draft), "--dry-run").code == 0
    assert cli.ok("import", _write(tmp_path, draft))["imported"] == 2
    eis = [row[0] for row in query(cli.data_dir, "SELECT effective_importance FROM insights ORDER BY created_at")]
    assert all(math.isfinite(ei) and ei > 1 for ei in eis) and eis[1] > eis[0]
    assert cli.ok("gc")["total_insights"] == 2


def test_load_errors(cli, tmp_path):
    missing = cli("import", str(tmp_path / "nope.json"))
    assert missing.code == 1 and missing.err.startswith("Error: read file: ")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    parsed = cli("import", str(bad))
    assert parsed.code == 1 and parsed.err.startswith("Error: parse JSON: ")
    empty = cli("import")
    assert empty.code == 1 and "accepts 1 arg(s), received 0" in empty.err


def test_dry_run_writes_nothing(cli, tmp_path):
    cli.ok("remember", "existing memory")
    db = _db(cli.data_dir)
    before = stored_state(cli.data_dir)
    draft = {"schema_version": "1", "insights": [{"content": "a"}, {"content": "b"}],
             "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal"}]}
    result = cli("import", "--dry-run", _write(tmp_path, draft))
    assert result.code == 0
    assert result.out == "Dry run: 2 insights, 1 explicit edges — validation passed.\n"
    assert stored_state(cli.data_dir) == before
    assert not Path(f"{db}-wal").exists()


def test_draft_from_stdin_in_a_whole_process(data_dir):
    from tests.conftest import run_process

    draft = {"schema_version": "1", "insights": [{"content": "piped memory"}]}
    result = run_process(["import", "-"], data_dir=data_dir, stdin=json.dumps(draft).encode())
    assert result.code == 0, result.err
    assert result.json()["imported"] == 1


def test_readonly_import_is_refused(cli, tmp_path):
    cli.ok("remember", "x")
    result = cli("--readonly", "import", _write(tmp_path, {"schema_version": "1", "insights": [{"content": "y"}]}))
    assert result.code == 1 and "import is unavailable with --readonly" in result.err


def test_batched_import_equals_one_by_one(cli, tmp_path, monkeypatch, data_dir):
    """Several batches (batch size 7) give the same insights and edges as one batch."""
    from mnemon.engine import bulk

    draft = generate_draft(40, seed=3, edges_per_insight=6)
    path = _write(tmp_path, draft)
    cli.ok("import", path)
    one = _edge_multiset(cli.data_dir)
    monkeypatch.setattr(bulk, "IMPORT_BATCH", 7)
    cli.ok("--store", "other", "import", path)
    many = _edge_multiset(cli.data_dir, "other")
    assert one == many and sum(one.values()) > 40


def _edge_multiset(data_dir: Path, store: str = "default") -> Counter[tuple[str, str, str, float]]:
    rows = query(
        data_dir,
        "SELECT s.content, t.content, e.edge_type, e.weight FROM edges e "
        "JOIN insights s ON s.id = e.source_id JOIN insights t ON t.id = e.target_id",
        store=store,
    )
    return Counter((r[0], r[1], r[2], round(r[3], 12)) for r in rows)


def _insight_rows(data_dir: Path, store: str) -> list[tuple[object, ...]]:
    return query(
        data_dir,
        "SELECT content, category, importance, tags, entities, source, created_at FROM insights "
        "WHERE deleted_at IS NULL ORDER BY content",
        store=store,
    )


def test_export_then_import_reproduces_insights_and_edges(cli, tmp_path):
    cli.ok("remember", "Chose Qdrant because Rust performance is critical", "--cat", "decision", "--imp", "4",
           "--tags", "db,perf")
    cli.ok("remember", "Qdrant runs in the staging cluster on Kubernetes", "--source", "ops")
    cli.ok("remember", "Rust services therefore need a Qdrant client", "--entities", "QdrantClient")
    cli.ok("remember", "Kubernetes upgrade planned for the staging cluster", "--source", "ops")
    ids = [r["id"] for r in cli.ok("search", "Qdrant")]
    cli.ok("link", ids[0], ids[1], "--type", "causal", "--weight", "0.8", "--meta", '{"reason": "ops follow-up"}')
    out = tmp_path / "export.json"
    result = cli("export", "--output", str(out))
    assert result.code == 0, result.err
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert exported["schema_version"] == "1" and len(exported["insights"]) == 4
    assert any(e.get("reason") == "ops follow-up" for e in exported["edges"])
    imported = cli.ok("--store", "copy", "import", str(out))
    assert imported["imported"] == 4 and imported["errors"] == 0
    assert _insight_rows(cli.data_dir, "copy") == _insight_rows(cli.data_dir, "default")
    assert _edge_multiset(cli.data_dir, "copy") == _edge_multiset(cli.data_dir, "default")
    # stdout export is the same draft
    assert json.loads(cli("export").out) == exported
    # a NUL in the path (in-process only: no real argv holds one) raised ValueError, a traceback
    nul = cli("export", "-o", "draft\x00.json")
    assert nul.code == 1 and nul.err == "Error: write file: embedded null byte: draft\x00.json\n"


def test_an_export_keeps_weight_zero_and_links_of_an_insight_to_itself(cli, tmp_path):
    """A stored weight 0 came back as 0.5 (a draft's weight 0 is the default, §3.15) and a link of an insight
    to itself (which link accepts: §3.8 refuses only a self-supersedes) was left out of the export. The export
    now says its weights are exact and carries such links in self_edges: both come back as stored."""
    first = cli.ok("remember", "Chose Qdrant because Rust performance is critical")["id"]
    second = cli.ok("remember", "Qdrant runs in the staging cluster")["id"]
    cli.ok("link", first, second, "--type", "causal", "--weight", "0")
    cli.ok("link", first, first, "--type", "semantic", "--weight", "0.3", "--meta", '{"reason": "restated"}')
    cli.ok("link", second, second, "--type", "entity", "--weight", "0")
    assert cli("link", first, first, "--type", "supersedes").err == "Error: supersedes requires distinct insights\n"
    out = tmp_path / "export.json"
    assert cli("export", "-o", str(out)).code == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert list(exported) == ["schema_version", "exact_weights", "insights", "edges", "self_edges"]
    assert exported["exact_weights"] is True
    assert sorted((e["index"], e["edge_type"], e["weight"], e.get("reason")) for e in exported["self_edges"]) == [
        (0, "semantic", 0.3, "restated"), (1, "entity", 0.0, None)]
    assert cli("import", "--dry-run", str(out)).out == (
        f"Dry run: 2 insights, {len(exported['edges']) + 2} explicit edges — validation passed.\n")
    # streamed, and in another key order parsed whole
    reordered = _write(tmp_path, {k: exported[k] for k in ("self_edges", "schema_version", "edges", "insights",
                                                           "exact_weights")}, "reordered.json")
    for store, path in (("copy", str(out)), ("whole", reordered)):
        result = cli("--store", store, "import", path)
        assert result.code == 0 and result.err == "", result.err
        assert _edge_multiset(cli.data_dir, store) == _edge_multiset(cli.data_dir, "default")
    assert (0.0 in {w for *_, w in _edge_multiset(cli.data_dir, "copy")})
    # imported again into its own store: every edge is there already, none is written
    assert cli.ok("import", str(out))["edges_inserted"] == 0
    assert _edge_multiset(cli.data_dir, "copy") == _edge_multiset(cli.data_dir, "default")


def test_a_draft_weight_zero_is_the_default_unless_the_draft_says_its_weights_are_exact(cli, tmp_path):
    """§3.15 (the Go program's zero value): an explicit edge's weight 0, or none, is written as 0.5; under
    exact_weights (what export writes) a 0 stays 0 and a missing weight is still 0.5."""
    items = [{"content": f"memory number {k}"} for k in range(4)]
    edges = [{"source_index": 0, "target_index": 1, "edge_type": "causal", "weight": 0},
             {"source_index": 1, "target_index": 2, "edge_type": "causal"},
             {"source_index": 2, "target_index": 3, "edge_type": "causal", "weight": None},
             {"source_index": 3, "target_index": 0, "edge_type": "causal", "weight": 0.25}]
    for store, exact, wanted in (("go", None, [0.5, 0.5, 0.5, 0.25]), ("exact", True, [0.0, 0.5, 0.5, 0.25]),
                                 ("inexact", False, [0.5, 0.5, 0.5, 0.25])):
        draft: dict[str, object] = {"schema_version": "1", "insights": items, "edges": edges}
        if exact is not None:
            draft = {"schema_version": "1", "exact_weights": exact, "insights": items, "edges": edges}
        assert cli.ok("--store", store, "import", _write(tmp_path, draft, f"{store}.json"))["edges_inserted"] == 4
        got = sorted((s, w) for s, t, k, w, m in _edges(cli.data_dir, store) if k == "causal")
        assert [w for _, w in got] == wanted, store
    # exact_weights after the edges: the whole parse reads it (the stream cannot), same weights
    late = {"schema_version": "1", "insights": items, "edges": edges, "exact_weights": True}
    cli.ok("--store", "late", "import", _write(tmp_path, late, "late.json"))
    assert sorted((s, w) for s, t, k, w, m in _edges(cli.data_dir, "late") if k == "causal") == sorted(
        (s, w) for s, t, k, w, m in _edges(cli.data_dir, "exact") if k == "causal")


def test_an_export_or_graph_over_a_stores_own_files_is_refused(cli, tmp_path):
    """`export -o data/default/mnemon.db` wrote the draft over the database it was exporting: every later command
    said "file is not a database". Any path inside the data folder (or a link to one) is refused first."""
    first = cli.ok("remember", "Nightly backups run at two")["id"]
    stores = cli.data_dir / "data"
    link = tmp_path / "innocent.json"
    link.symlink_to(stores / "default" / "mnemon.db")
    for command in ("export",) if REMOTE else ("export", "viz"):  # viz has no remote form
        for target in (stores / "default" / "mnemon.db", stores / "default" / "mnemon.db-wal",
                       stores / "other" / "draft.json", link):
            res = cli(command, "-o", str(target))
            assert res.code == 1 and res.err.startswith(f"Error: refusing to write {target}: "), res.err
            assert "inside mnemon's data folder" in res.err and "Traceback" not in res.err
        legacy = cli(command, "-o", str(cli.data_dir / "mnemon.db"))
        assert legacy.code == 1 and "it is a store's database" in legacy.err
    assert not (stores / "other").exists() and not (cli.data_dir / "mnemon.db").exists()
    assert [hit["id"] for hit in cli.ok("search", "backups")] == [first]  # the store as it was
    outside = tmp_path / "draft.json"
    assert cli("export", "-o", str(outside)).code == 0 and json.loads(outside.read_text())["insights"]


def test_an_export_imported_again_into_its_store_changes_no_edge(cli, tmp_path):
    """Every item is an exact duplicate, so every explicit edge joins two insights that were there
    before: an edge that exists stays as stored (its weight and metadata, which recall reads: the
    backbone's, an entity's), a missing one is inserted and counted."""
    for text in ("Redis caches the sessions", "Redis eviction policy is allkeys-lru",
                 "Sessions expire after two hours", "The cache cluster runs on three nodes"):
        cli.ok("remember", text)
    ids = [r["id"] for r in cli.ok("search", "Redis sessions cache")]
    cli.ok("link", ids[0], ids[1], "--type", "causal", "--weight", "0.7", "--meta", '{"why": "eviction"}')
    out = tmp_path / "export.json"
    assert cli("export", "--output", str(out)).code == 0
    full = "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges ORDER BY 1, 2, 3"
    before_edges = query(cli.data_dir, full)
    before_recall = cli.ok("recall", "why are sessions cached", "--limit", "4")["results"]
    again = cli.ok("import", str(out))
    assert (again["imported"], again["skipped"], again["edges_inserted"]) == (0, 4, 0)
    assert query(cli.data_dir, full) == before_edges
    assert cli.ok("recall", "why are sessions cached", "--limit", "4")["results"] == before_recall
    # a draft's edge that no row has between two stored insights is written; one that exists is not rewritten
    draft = json.loads(out.read_text(encoding="utf-8"))
    first, second = draft["insights"][0]["content"], draft["insights"][1]["content"]
    draft["edges"] = [
        {"source_index": 0, "target_index": 1, "edge_type": "semantic", "weight": 0.3, "reason": "new"},
        {"source_index": 0, "target_index": 1, "edge_type": "semantic", "weight": 0.4, "reason": "newer"},
        *({"source_index": e["source_index"], "target_index": e["target_index"], "edge_type": e["edge_type"],
           "weight": 0.05} for e in json.loads(out.read_text(encoding="utf-8"))["edges"]),
    ]
    third = cli.ok("import", _write(tmp_path, draft, "more.json"))
    assert third["edges_inserted"] == 1
    assert (first, second, "semantic", 0.4, {"reason": "newer"}) in _edges(cli.data_dir)
    assert [row for row in query(cli.data_dir, full) if row[2] != "semantic"] == [
        row for row in before_edges if row[2] != "semantic"
    ]


def test_generator_is_deterministic_and_hits_the_edge_target(cli, tmp_path):
    a = generate_draft(300, seed=5, edges_per_insight=12)
    assert a == generate_draft(300, seed=5, edges_per_insight=12)
    assert len({i["content"] for i in a["insights"]}) == 300
    out = cli.ok("import", _write(tmp_path, a))
    assert out["imported"] == 300
    edges = cli.ok("status")["edge_count"]
    assert 0.7 * 12 * 300 <= edges <= 1.3 * 12 * 300


@pytest.mark.parametrize("batch", [500, 2])
def test_explicit_edges_last_per_key_wins_across_chunks_and_duplicates(cli, tmp_path, monkeypatch, batch):
    """Explicit edges between inserted items are written with the chunk of their later end, those
    with a duplicate's end by the finalize: still the draft's last edge per key wins, the
    warnings keep their order and wording, and ``edges_inserted`` counts every kept edge."""
    from mnemon.engine import bulk

    monkeypatch.setattr(bulk, "IMPORT_BATCH", batch)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_GROWTH", 0)
    names = ["Alpha ledger", "Bravo queue", "Charlie cache", "Alpha ledger", "Delta index", "Echo broker"]
    plan = [  # (source, target, type, weight): item 3 repeats item 0
        (3, 1, "semantic", 0.1), (0, 1, "semantic", 0.2),  # same key, the later (chunk-written) wins
        (1, 2, "causal", 0.3),
        (1, 0, "causal", 0.5), (1, 3, "causal", 0.4),  # same key, the later (a duplicate's end) wins
        (2, 4, "entity", 0.6), (4, 2, "entity", 0.65), (2, 4, "entity", 0.7),
        (0, 2, "temporal", 0.85), (3, 2, "temporal", 0.9),
        (3, 0, "semantic", 0.95),  # both ends are Alpha: skipped with a warning
        (5, 1, "causal", 0.55), (0, 5, "semantic", 0.45),
    ]
    draft = {
        "schema_version": "1",
        "insights": [{"content": n} for n in names],
        "edges": [
            {"source_index": s, "target_index": t, "edge_type": kind, "weight": w, "reason": f"r{k}"}
            for k, (s, t, kind, w) in enumerate(plan)
        ],
    }
    res = cli("import", _write(tmp_path, draft))
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["edges_inserted"] == len(plan) - 1
    assert [line for line in res.err.splitlines() if "warning" in line] == [
        f"warning: edges[10]: both ends map to insight {out['results'][0]['id']}; edge skipped"
    ]
    expected: dict[tuple[str, str, str], tuple[float, str]] = {}
    for k, (s, t, kind, w) in enumerate(plan):
        if names[s] != names[t]:
            expected[(names[s], names[t], kind)] = (w, f"r{k}")
    stored = {(s, t, kind): (w, meta.get("reason")) for s, t, kind, w, meta in _edges(cli.data_dir)}
    for key, value in expected.items():
        assert stored[key] == value, key


def test_a_skipped_edges_warning_names_its_place_in_the_draft_self_edges_included() -> None:
    # A draft's self_edges follow its edges in the import's one list: a warning about one of them names
    # self_edges[j], not edges[k] past the end of edges (ids: item 1's statement failed, so it has none).
    from mnemon.drafts import parse_draft
    from mnemon.engine.bulkedges import ExplicitEdges

    draft = parse_draft(json.dumps({
        "schema_version": "1",
        "insights": [{"content": "a"}, {"content": "b"}, {"content": "c"}],
        "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal"},
                  {"source_index": 0, "target_index": 2, "edge_type": "causal"}],
        "self_edges": [{"index": 2, "edge_type": "entity"}, {"index": 1, "edge_type": "causal"}],
    }))
    assert [(e.source_index, e.target_index) for e in draft.edges] == [(0, 1), (0, 2), (2, 2), (1, 1)]
    warnings: list[str] = []
    explicit = ExplicitEdges(draft.edges, 3)
    explicit.chunk_rows(0, [True, False, True], ["id-a", None, "id-c"], "2026-01-01T00:00:00Z", {})
    explicit.finish(["id-a", None, "id-c"], warnings.append, "2026-01-01T00:00:00Z")
    assert warnings == ["warning: edges[0]: endpoint was not imported; edge skipped",
                        "warning: self_edges[1]: endpoint was not imported; edge skipped"]
