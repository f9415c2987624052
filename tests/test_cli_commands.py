"""Every non-remember command of the memory path through the real CLI (contract §2.1-2.2,
§3.1, §3.6-3.13, §3.16): show, forget, link, related, status, log, gc, receipt, store, global
flags, ``--version``, store resolution and the legacy database move.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from mnemon import __version__
from mnemon.cli import main
from tests.conftest import Result, run_process
from tests.gateway_server import store_dir, unsigned
from tests.test_cli_remember import T0, db_path, ok_at, query, run_at

DAY = timedelta(days=1)


def plain(data_dir: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """Run with exactly ``argv`` (no --data-dir injected), so flag positions are the test's."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return Result(code, out, err)


@pytest.fixture
def trio(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    """Three insights days apart, different sources, no shared entities: no automatic edges."""
    texts = ["first plain note", "second plain remark", "third plain jotting"]
    out = []
    for i, text in enumerate(texts):
        row = ok_at(data_dir, capsys, T0 + i * 3 * DAY, "remember", text, "--source", f"s{i}")
        assert row["edges_created"] == {"temporal": 0, "entity": 0, "causal": 0, "semantic": 0}
        out.append(row)
    return out


# --- show / forget -------------------------------------------------------------------------------


def test_show_prints_the_insight_and_bumps_access(cli) -> None:
    made = cli.ok("remember", "Show me in full", "--tags", "x", "--cat", "fact")
    first = cli.ok("show", made["id"])
    assert list(first) == [
        "id", "content", "category", "importance", "tags", "entities", "source", "access_count",
        "created_at", "updated_at",
    ]
    assert first["content"] == "Show me in full" and first["access_count"] == 0
    assert cli.ok("show", made["id"])["access_count"] == 1
    assert "show      " in cli("log").out and "full insight" in cli("log").out


def test_show_unknown_or_deleted(cli) -> None:
    res = cli("show", "nope")
    assert (res.code, res.out, res.err) == (1, "", "Error: insight nope not found\n")
    made = cli.ok("remember", "short lived")
    cli.ok("forget", made["id"])
    assert cli("show", made["id"]).err == f"Error: insight {made['id']} not found\n"


def test_forget_soft_deletes_and_drops_edges(cli) -> None:
    a = cli.ok("remember", "Redis caches sessions")
    b = cli.ok("remember", "Redis needs eviction tuning")
    assert cli.ok("status")["edge_count"] > 0
    out = cli.ok("forget", a["id"])
    assert out == {"id": a["id"], "message": "Insight soft-deleted successfully", "status": "deleted"}
    status = cli.ok("status")
    assert status["total_insights"] == 1 and status["deleted_insights"] == 1 and status["edge_count"] == 0
    assert cli.ok("related", b["id"]) == []
    again = cli("forget", a["id"])
    assert again.code == 1 and again.err == f"Error: forget: insight {a['id']} not found or already deleted\n"
    assert cli("forget", "missing-id").err == "Error: forget: insight missing-id not found or already deleted\n"


# --- link / related ------------------------------------------------------------------------------


def test_link_both_directions_with_meta(data_dir, capsys, trio) -> None:
    a, b, _ = trio
    res = run_at(data_dir, capsys, None, "link", a["id"], b["id"], "--type", "causal", "--weight", "0.8",
                 "--meta", '{"reason": "because", "created_by": "me"}')
    assert res.code == 0, res.err
    out = res.json()
    assert list(out) == ["status", "source_id", "target_id", "edge_type", "weight", "metadata"]
    assert out["status"] == "linked" and out["edge_type"] == "causal" and out["weight"] == 0.8
    assert list(out["metadata"].items()) == [("created_by", "claude"), ("reason", "because")]
    rows = query(data_dir, "SELECT source_id, target_id, weight, metadata FROM edges ORDER BY rowid")
    assert {(r[0], r[1]) for r in rows} == {(a["id"], b["id"]), (b["id"], a["id"])}
    assert all(r[3] == '{"created_by":"claude","reason":"because"}' for r in rows)
    detail = unsigned(query(data_dir, "SELECT detail FROM oplog WHERE operation = 'link'")[0][0])
    assert detail == f"{a['id'][:8]}→{b['id'][:8]} type=causal weight=0.80"


def test_link_defaults_and_relink_replaces(cli, data_dir, trio) -> None:
    a, b, _ = trio
    out = cli.ok("link", a["id"], b["id"])
    assert (out["edge_type"], out["weight"], out["metadata"]) == ("semantic", 0.5, {"created_by": "claude"})
    cli.ok("link", a["id"], b["id"], "--weight", "1")
    assert query(data_dir, "SELECT COUNT(*), MIN(weight) FROM edges") == [(2, 1.0)]


def test_supersedes_is_one_way_and_self_supersede_rejected(cli, data_dir, trio) -> None:
    old, new, _ = trio
    out = cli.ok("link", new["id"], old["id"], "--type", "supersedes", "--weight", "1.0")
    assert out["weight"] == 1
    assert query(data_dir, "SELECT source_id, target_id, edge_type FROM edges") == [
        (new["id"], old["id"], "supersedes")
    ]
    res = cli("link", new["id"], new["id"], "--type", "supersedes")
    assert (res.code, res.err) == (1, "Error: supersedes requires distinct insights\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weight", "1.5"], "weight must be between 0.0 and 1.0, got 1.50"),
        (["--weight", "-0.1"], "weight must be between 0.0 and 1.0, got -0.10"),
        (["--type", "narrative"], 'invalid edge type "narrative"; valid: temporal, semantic, causal, entity, supersedes'),
        (["--meta", "[1]"], "invalid metadata JSON: must be an object of string values"),
        (["--meta", '{"a": 1}'], "invalid metadata JSON: must be an object of string values"),
    ],
)
def test_link_rejects_bad_flags(cli, trio, args: list[str], message: str) -> None:
    res = cli("link", trio[0]["id"], trio[1]["id"], *args)
    assert (res.code, res.out, res.err) == (1, "", f"Error: {message}\n")


@pytest.mark.parametrize(
    ("meta", "shown"),
    [('{"k": "\\ud800"}', '"k"'), ('{"\\udc00x": "v"}', '"\\udc00x"'), ('{"a": "ok", "b": "x\\udfff"}', '"b"')],
)
def test_link_meta_with_a_lone_surrogate_is_refused_and_writes_nothing(cli, data_dir, trio, meta: str, shown: str) -> None:
    """A JSON escape of a lone surrogate, in a key or a value, is an input error before anything is written
    (it was a UnicodeEncodeError traceback from the edge upsert)."""
    before = query(data_dir, "SELECT COUNT(*) FROM edges"), query(data_dir, "SELECT COUNT(*) FROM oplog")
    res = cli("link", trio[0]["id"], trio[1]["id"], "--meta", meta)
    assert (res.code, res.out, res.err) == (1, "", f"Error: invalid metadata JSON: metadata[{shown}] is not valid UTF-8\n")
    assert (query(data_dir, "SELECT COUNT(*) FROM edges"), query(data_dir, "SELECT COUNT(*) FROM oplog")) == before


def test_link_meta_keeps_nul_in_values(cli, data_dir, trio) -> None:
    """NUL stays allowed in a metadata value (the stored JSON escapes it; an exported draft carries it back)."""
    out = cli.ok("link", trio[0]["id"], trio[1]["id"], "--meta", '{"k": "a\\u0000b"}')
    assert out["metadata"] == {"created_by": "claude", "k": "a\x00b"}
    rows = query(data_dir, "SELECT metadata FROM edges")
    assert rows == [('{"created_by":"claude","k":"a\\u0000b"}',)] * 2


def test_link_unknown_endpoints(cli, trio) -> None:
    assert cli("link", "ghost", trio[0]["id"]).err == "Error: source insight ghost not found\n"
    assert cli("link", trio[0]["id"], "ghost").err == "Error: target insight ghost not found\n"
    assert cli("link", trio[0]["id"]).err == "Error: accepts 2 arg(s), received 1\n"


def test_related_bfs_depth_and_edge_filter(cli, trio) -> None:
    a, b, c = trio
    cli.ok("link", a["id"], b["id"], "--type", "semantic")
    cli.ok("link", b["id"], c["id"], "--type", "causal")
    one = cli.ok("related", a["id"], "--depth", "1")
    assert one == [{
        "id": b["id"], "content": b["content"], "category": "general", "importance": 3, "depth": 1,
        "via_edge_type": "semantic",
    }]
    two = cli.ok("related", a["id"])  # default depth 2
    assert [(r["id"], r["depth"], r["via_edge_type"]) for r in two] == [(b["id"], 1, "semantic"), (c["id"], 2, "causal")]
    assert [r["id"] for r in cli.ok("related", a["id"], "--edge", "semantic")] == [b["id"]]
    assert cli.ok("related", a["id"], "--edge", "causal") == []
    cli.ok("forget", b["id"])
    assert cli.ok("related", a["id"]) == []


def test_related_rejects_depth_zero_and_unknown(cli, trio) -> None:
    assert cli("related", trio[0]["id"], "--depth", "0").err == "Error: depth must be greater than 0\n"
    assert cli("related", "ghost").err == "Error: insight not found: ghost\n"


# --- status / log / receipt ------------------------------------------------------------------------


def test_status_layout_for_hooks(cli, data_dir) -> None:
    cli.ok("remember", "Docker builds are slow", "--cat", "fact")
    cli.ok("remember", "Docker layer caching helps", "--cat", "insight")
    res = cli("status")
    assert re.search(r'^  "total_insights": 2,$', res.out, re.MULTILINE)
    out = res.json()
    assert list(out) == [
        "total_insights", "deleted_insights", "by_category", "edge_count", "top_entities", "oplog_count",
        "db_path", "db_size_bytes",
    ]
    assert out["by_category"] == {"fact": 1, "insight": 1}
    assert out["top_entities"] == [{"entity": "Docker", "count": 2}]
    assert out["oplog_count"] == 2 and out["db_path"] == str(db_path(data_dir))
    assert out["db_path"].endswith("data/default/mnemon.db") and out["db_size_bytes"] > 0


def test_log_table_truncation_and_limit(cli) -> None:
    assert cli("log").out == "No operations recorded yet.\n"
    long_text = "x" * 30 + " " + "é" * 40  # > 60 bytes: cut to 57 bytes (never mid-character) + "..."
    made = cli.ok("remember", long_text)
    cli.ok("show", made["id"])
    lines = cli("log").out.splitlines()
    assert re.fullmatch(r"TIME +OP +INSIGHT +DETAIL", lines[0])
    assert re.fullmatch(r"-{4} +-{2} +-{7} +-{6}", lines[1])
    # (on a remote store each detail starts with the gateway's "[token NAME] ", inside the same 60-byte cut)
    assert lines[2].split()[1:3] == ["show", made["id"][:8]]
    assert unsigned(lines[2].split(made["id"][:8], 1)[1].strip()) == "full insight"
    detail = unsigned(lines[3].split(made["id"][:8], 1)[1].strip())
    assert detail.endswith("...") and len(detail[:-3].encode()) <= 57 and long_text.startswith(detail[:-3])
    # Columns are aligned with two spaces of padding (tabwriter).
    assert lines[0].index("OP") == lines[2].index("show") == lines[3].index("remember")
    assert len(cli("log", "--limit", "1").out.splitlines()) == 3


def test_receipt_hashes_instead_of_raw(cli) -> None:
    made = cli.ok("remember", "secret plans for the launch")
    out = cli.ok("receipt", "--limit", "5")
    assert out["schema"] == "mnemon.memory.receipt.v1" and out["store"] == "default"
    assert (out["limit"], out["count"]) == (5, 1)
    assert out["privacy"]["raw_detail_included"] is False and out["privacy"]["hash_algorithm"] == "hmac-sha256"
    (event,) = out["events"]
    assert event["event_name"] == "mnemon.memory.operation.observed" and event["operation"] == "remember"
    # Keyed per store (tests/test_security.py checks the key): never the guessable bare SHA-256.
    assert len(event["insight_id_hash"]) == 64
    assert event["insight_id_hash"] != hashlib.sha256(made["id"].encode()).hexdigest()
    assert event["detail_hash"] != hashlib.sha256(b"secret plans for the launch").hexdigest()
    assert event["detail_present"] is True
    assert "secret plans" not in cli("receipt").out


@pytest.mark.sqlite_only
@pytest.mark.local_only
@pytest.mark.parametrize("damaged", ["'zz'", "''", "X'00'", "123"])
def test_receipt_replaces_a_key_it_cannot_read(cli, data_dir, damaged) -> None:
    """A receipt key in mnemon_meta that is no hex text: the key was taken as missing, the insert that would
    create one was ignored (the row exists), and every writable receipt ended in an AssertionError traceback."""
    import apsw

    cli.ok("remember", "secret plans for the launch")
    cli.ok("receipt")
    conn = apsw.Connection(str(db_path(data_dir)))
    conn.execute(f"UPDATE mnemon_meta SET value = {damaged} WHERE key = 'receipt_key'")
    conn.close()
    readonly = cli("--readonly", "receipt")
    assert readonly.code == 0 and "an ephemeral key was used" in readonly.out, readonly.err
    res = cli("receipt")
    assert (res.code, res.err) == (0, ""), res.err
    first = res.json()["events"][0]["insight_id_hash"]  # type: ignore[index]
    assert cli.ok("receipt")["events"][0]["insight_id_hash"] == first  # the new key is kept: stable digests
    conn = apsw.Connection(str(db_path(data_dir)))
    (key,) = conn.execute("SELECT value FROM mnemon_meta WHERE key = 'receipt_key'").fetchone()
    conn.close()
    assert isinstance(key, str) and len(bytes.fromhex(key)) == 32


# --- gc --------------------------------------------------------------------------------------------


def test_gc_candidates_keep_and_compact(data_dir, capsys) -> None:
    low = ok_at(data_dir, capsys, T0, "remember", "temporary scratch note", "--imp", "1", "--source", "a")
    ok_at(data_dir, capsys, T0, "remember", "critical fact never prune", "--imp", "5", "--source", "b")
    later = T0 + timedelta(days=60)  # two half-lives: decay 0.25
    out = ok_at(data_dir, capsys, later, "gc")
    assert list(out) == ["total_insights", "threshold", "candidates_found", "candidates", "max_insights", "actions"]
    assert (out["total_insights"], out["threshold"], out["candidates_found"], out["max_insights"]) == (2, 0.5, 1, 1000)
    (cand,) = out["candidates"]
    assert cand["insight"]["id"] == low["id"] and cand["immune"] is False
    assert cand["effective_importance"] == pytest.approx(0.15 * 0.25 * 1.2)  # one proximity pair: 2 edge rows
    assert cand["days_since_access"] == pytest.approx(60) and cand["edge_count"] == 2
    assert out["actions"] == {"purge": "mnemon forget <id>", "keep": "mnemon gc --keep <id>"}
    gc_row = [unsigned(r[0]) for r in query(data_dir, "SELECT detail FROM oplog WHERE operation = 'gc'")]
    assert gc_row == ["threshold=0.50 found=1 total=2"]

    kept = ok_at(data_dir, capsys, later, "gc", "--keep", low["id"])
    assert list(kept) == ["status", "id", "content", "new_access", "effective_importance", "immune"]
    assert (kept["status"], kept["new_access"], kept["immune"]) == ("retained", 3, True)
    assert ok_at(data_dir, capsys, later, "gc")["candidates_found"] == 0
    assert run_at(data_dir, capsys, later, "gc", "--keep", "ghost").err == "Error: insight ghost not found\n"

    if store_dir(data_dir) != data_dir / "data" / "default":  # remote: compacting is for the gateway's machine
        assert "Error: gc --compact has no remote form" in run_at(data_dir, capsys, later, "gc", "--compact").err
        return
    compact = ok_at(data_dir, capsys, later, "gc", "--compact")
    assert compact["status"] == "compacted" and compact["after_bytes"] > 0


def test_gc_threshold_limit_and_validation(data_dir, capsys) -> None:
    for i in range(3):
        ok_at(data_dir, capsys, T0, "remember", f"low value note {i}", "--imp", "2", "--source", f"s{i}")
    out = ok_at(data_dir, capsys, T0 + timedelta(days=90), "gc", "--limit", "2", "--threshold", "0.9")
    assert out["candidates_found"] == 3 and len(out["candidates"]) == 2
    assert run_at(data_dir, capsys, None, "gc", "--threshold", "-1").err == "Error: --threshold must be non-negative, got -1\n"
    assert run_at(data_dir, capsys, None, "gc", "--limit", "0").err == "Error: --limit must be at least 1, got 0\n"


def test_gc_survives_unparsable_timestamps(data_dir, capsys) -> None:
    made = ok_at(data_dir, capsys, T0, "remember", "row the Go program stamped oddly", "--imp", "2")
    query(data_dir, "UPDATE insights SET created_at = 'not a time', last_accessed_at = '' WHERE id = ?", (made["id"],))
    out = ok_at(data_dir, capsys, T0, "gc")
    (cand,) = out["candidates"]
    # An unreadable stamp reads as Go's zero time: maximally decayed, very old.
    assert cand["effective_importance"] == 0 and cand["days_since_access"] > 700_000


def test_gc_survives_a_negative_access_count(data_dir, capsys) -> None:
    """No mnemon writer stores one (doctor calls it out of contract), but a Go store may: gc once ended with
    "math domain error" (the log of 1 + the count). The row reads as never accessed."""
    made = ok_at(data_dir, capsys, T0, "remember", "row with an odd access count", "--imp", "2")
    (before,) = ok_at(data_dir, capsys, T0, "gc")["candidates"]
    query(data_dir, "UPDATE insights SET access_count = -5 WHERE id = ?", (made["id"],))
    (cand,) = ok_at(data_dir, capsys, T0, "gc")["candidates"]
    assert cand["insight"]["id"] == made["id"] and cand["effective_importance"] == before["effective_importance"]


# --- stores, global flags, resolution ----------------------------------------------------------------


@pytest.mark.sqlite_only  # a fresh data dir: the postgres run pre-registers "default"
def test_store_subcommands_and_messages(cli, data_dir) -> None:
    res = cli("store", "list")
    assert res.out == "  (no stores yet — run 'mnemon store create <name>' or any command to create default)\n"
    assert cli("store", "create", "work").out == 'Created store "work"\n'
    assert (data_dir / "data" / "work" / "mnemon.db").is_file()
    assert cli("store", "create", "work").err == 'Error: store "work" already exists\n'
    assert cli("store", "list").out == "  work\n"
    cli.ok("remember", "lands in default")
    assert cli("store", "list").out == "* default\n  work\n"
    assert cli("store", "set", "work").out == 'Active store set to "work"\n'
    assert (data_dir / "active").read_text() == "work\n"
    assert cli("store", "list").out == "  default\n* work\n"
    assert cli("store", "set", "nope").err == (
        "Error: store \"nope\" does not exist (use 'mnemon store create nope' first)\n"
    )
    assert cli("store", "remove", "work").err == (
        "Error: cannot remove the active store \"work\" (switch first with 'mnemon store set <other>')\n"
    )
    assert cli("store", "remove", "nope").err == 'Error: store "nope" does not exist\n'
    assert cli("store", "remove", "default").out == 'Removed store "default"\n'
    assert not (data_dir / "data" / "default").exists()
    # data/ still there but holding no store (the last one removed; a file, a hidden or invalid name): the
    # no-stores line, not a blank line
    (data_dir / "active").unlink()  # "default" is the active store again, so "work" may go
    assert cli("store", "remove", "work").out == 'Removed store "work"\n'
    (data_dir / "data" / ".hidden").mkdir()
    (data_dir / "data" / "notes.txt").write_text("not a store")
    assert (data_dir / "data").is_dir()
    empty = cli("store", "list")
    assert (empty.code, empty.err) == (0, "")
    assert empty.out == "  (no stores yet — run 'mnemon store create <name>' or any command to create default)\n"
    assert cli("store", "create", "../x").err == (
        'Error: invalid store name "../x": must match [a-zA-Z0-9][a-zA-Z0-9_-]*\n'
    )


@pytest.mark.sqlite_only
@pytest.mark.local_only
def test_store_copy_sees_commits_still_in_another_processes_wal(cli, data_dir) -> None:
    """A store held open elsewhere (an MCP server, a gateway) keeps its recent commits in the WAL: the copy
    read the main file alone (an immutable snapshot) and silently left them out."""
    import apsw

    cli.ok("remember", "first memory before the reader opened")
    reader = apsw.Connection(str(db_path(data_dir)))
    try:
        reader.execute("SELECT count(*) FROM insights").fetchall()  # a WAL reader: no checkpoint on our close
        cli.ok("remember", "second memory committed into the WAL")
        assert Path(f"{db_path(data_dir)}-wal").stat().st_size > 0  # the case under test
        res = cli("store", "copy", "default", "copied")
        assert (res.code, res.err) == (0, ""), res.err
        assert res.out == 'Copied store "default" to "copied" (2 insights, 2 edges, 2 oplog entries)\n'
    finally:
        reader.close()
    assert cli.ok("--store", "copied", "status")["total_insights"] == 2


@pytest.mark.sqlite_only
@pytest.mark.local_only
def test_a_failed_store_copy_leaves_no_new_store(cli, data_dir, tmp_path) -> None:
    """A source page that cannot be read fails the copy after the destination was created: an empty store of
    that name stayed behind (listed, and taken for a finished copy). A destination that existed before stays."""
    import json

    import apsw

    draft = tmp_path / "draft.json"
    rows = [{"content": f"memory {i} " + "filler words " * 60} for i in range(40)]
    draft.write_text(json.dumps({"schema_version": "1", "insights": rows}))
    cli.ok("import", str(draft))
    conn = apsw.Connection(str(db_path(data_dir)))
    leaves = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'insights' AND pagetype = 'leaf'")]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(db_path(data_dir), "r+b") as f:  # one leaf of the insights table zeroed: malformed
        f.seek((leaves[len(leaves) // 2] - 1) * page_size)
        f.write(bytes(page_size))
    res = cli("store", "copy", "default", "fresh")
    assert (res.code, res.out, res.err) == (1, "", "Error: database error: database disk image is malformed\n")
    assert cli("store", "list").out == "* default\n"
    assert not (data_dir / "data" / "fresh").exists()
    assert cli("store", "create", "kept").code == 0
    assert cli("store", "copy", "default", "kept").code == 1
    assert cli("store", "list").out == "* default\n  kept\n"


def test_store_resolution_precedence(cli, data_dir, monkeypatch) -> None:
    for name in ("fromactive", "fromenv", "fromflag"):
        cli("store", "create", name)
    cli("store", "set", "fromactive")
    assert cli.ok("status")["db_path"].endswith("data/fromactive/mnemon.db")
    monkeypatch.setenv("MNEMON_STORE", "fromenv")
    assert cli.ok("status")["db_path"].endswith("data/fromenv/mnemon.db")
    assert cli.ok("status", "--store", "fromflag")["db_path"].endswith("data/fromflag/mnemon.db")
    monkeypatch.setenv("MNEMON_STORE", "../x")
    assert cli("status").err == 'Error: invalid store name "../x"\n'
    monkeypatch.delenv("MNEMON_STORE")
    (data_dir / "active").write_text("  bad name!\n")  # invalid active file ⇒ ignored
    assert cli.ok("status")["db_path"].endswith("data/default/mnemon.db")


def test_global_flags_before_or_after_the_command(data_dir, capsys, tmp_path, monkeypatch) -> None:
    assert plain(data_dir, capsys, "remember", "after flags", "--data-dir", str(data_dir), "--store", "w").code == 0
    assert plain(data_dir, capsys, "--store", "w", "--data-dir", str(data_dir), "status").json()["total_insights"] == 1
    assert plain(data_dir, capsys, f"--data-dir={data_dir}", "status", "--store=w").json()["total_insights"] == 1
    monkeypatch.setenv("MNEMON_DATA_DIR", str(data_dir))
    assert plain(data_dir, capsys, "status", "--store", "w").json()["total_insights"] == 1


def test_boolean_flags_take_an_explicit_value_as_the_go_program_does(data_dir, capsys) -> None:
    """pflag reads --verbose=true / --readonly=false (strconv.ParseBool's spellings): scripts written for
    the Go program may say so. A value it does not read is its error, one line."""
    added = plain(data_dir, capsys, "remember", "Redis caches the sessions", "--no-diff=true").json()
    assert added["action"] == "added"
    verbose = plain(data_dir, capsys, "recall", "Redis sessions", "--verbose=true").json()
    assert "signals" in verbose["results"][0]
    for spelling in ("false", "0", "F"):
        quiet = plain(data_dir, capsys, "recall", "Redis sessions", f"--verbose={spelling}").json()
        assert "signals" not in quiet["results"][0]
    assert plain(data_dir, capsys, "--readonly=false", "remember", "a second memory").code == 0
    refused = plain(data_dir, capsys, "--readonly=TRUE", "remember", "a third memory")
    assert (refused.code, refused.err) == (1, "Error: remember is unavailable with --readonly: database writes are disabled\n")
    bad = plain(data_dir, capsys, "recall", "Redis", "--verbose=maybe")
    assert (bad.code, bad.err) == (
        1, 'Error: invalid argument "maybe" for "--verbose" flag: strconv.ParseBool: parsing "maybe": invalid syntax\n'
    )
    # after "--" it is a word of the query, as any other
    assert plain(data_dir, capsys, "recall", "--", "--verbose=true").code == 0


def test_version_and_help(capsys, data_dir) -> None:
    res = plain(data_dir, capsys, "--version")
    assert (res.code, res.out) == (0, f"mnemon version {__version__}\n")
    assert plain(data_dir, capsys, "status", "--version").out == f"mnemon version {__version__}\n"
    help_res = plain(data_dir, capsys, "--help")
    assert help_res.code == 0
    for command in ("remember", "show", "forget", "link", "related", "status", "log", "gc", "receipt", "store"):
        assert command in help_res.out
    assert plain(data_dir, capsys, "remember", "--help").code == 0
    # a command with subcommands and nothing else (the root too) prints its help and succeeds, as the Go
    # program's cobra does: no "Error:" line holding the help flattened
    for group in ([], ["store"], ["server"], ["mcp", "token"]):
        bare, asked = plain(data_dir, capsys, *group), plain(data_dir, capsys, *group, "--help")
        assert (bare.code, bare.out, bare.err) == (0, asked.out, "") and bare.out.startswith("Usage: mnemon")


@pytest.mark.sqlite_only
def test_legacy_database_is_migrated_once(data_dir, capsys) -> None:
    ok_at(data_dir, capsys, None, "remember", "from the old layout")
    default = db_path(data_dir)
    default.rename(data_dir / "mnemon.db")
    shutil.rmtree(default.parent)  # derived index files go too: they are rebuilt from the database
    res = run_at(data_dir, capsys, None, "status")
    assert res.code == 0
    assert res.err == f"mnemon: migrated database to {default}\n"
    assert res.json()["total_insights"] == 1 and not (data_dir / "mnemon.db").exists()
    assert run_at(data_dir, capsys, None, "status").err == ""


def test_whole_process_round_trip(data_dir) -> None:
    made = run_process(["remember", "whole process memory", "--cat", "fact"], data_dir=data_dir)
    assert made.code == 0, made.err
    shown = run_process(["show", made.json()["id"]], data_dir=data_dir)
    assert shown.json()["category"] == "fact"
    side = [p.name for p in db_path(data_dir).parent.iterdir() if p.name.endswith(("-wal", "-shm", "-journal"))]
    # (a PostgreSQL store has no database file here at all: only its registration and caches)
    assert side == []  # closed deterministically: the WAL is checkpointed away
