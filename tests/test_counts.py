"""Status counters kept by triggers (schema 6, mnemon.store.counts): exact after every kind of write
(ours, foreign SQL like the Go program's, REPLACE, cascades), an O(1) read, migrated once on a Go
store, never under --readonly, checked by doctor and recounted by --repair (issue 13)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw

from mnemon.store import Store, counts
from mnemon.store.schema import SCHEMA_VERSION
from tests.test_store import GO_ID1, build_go_db

NOW = "2026-02-18T10:00:00Z"


def _db(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


def _slow_status(conn: apsw.Connection) -> dict[str, object]:
    """What status reported before the counters: real counts over the tables."""
    return {
        "total": conn.execute("SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL").fetchone()[0],
        "deleted": conn.execute("SELECT COUNT(*) FROM insights WHERE deleted_at IS NOT NULL").fetchone()[0],
        "by_category": dict(
            conn.execute(
                "SELECT category, COUNT(*) FROM insights WHERE deleted_at IS NULL GROUP BY category ORDER BY category"
            ).fetchall()
        ),  # fmt: skip
        "edges": conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0],
        "top": [
            tuple(r)
            for r in conn.execute(
                "SELECT j.value, COUNT(DISTINCT i.id) AS n FROM insights i, json_each(i.entities) j "
                "WHERE i.deleted_at IS NULL AND j.type = 'text' GROUP BY j.value ORDER BY n DESC, j.value LIMIT 10"
            )
        ],  # fmt: skip
    }


def _status_matches_a_real_count(cli, data_dir: Path) -> None:
    status = cli.ok("status")
    conn = apsw.Connection(str(_db(data_dir)))
    try:
        assert counts.problems(conn) == []
        slow = _slow_status(conn)
    finally:
        conn.close()
    assert status["total_insights"] == slow["total"]
    assert status["deleted_insights"] == slow["deleted"]
    assert status["by_category"] == slow["by_category"]
    assert status["edge_count"] == slow["edges"]
    assert [(e["entity"], e["count"]) for e in status["top_entities"]] == slow["top"]


def test_counters_stay_exact_through_every_kind_of_write(cli, data_dir: Path) -> None:
    ids = [cli.ok("remember", f"Use Redis and Kafka for queue {k}", "--cat", "decision" if k % 2 else "fact",
                  "--no-diff")["id"] for k in range(12)]  # fmt: skip
    _status_matches_a_real_count(cli, data_dir)
    cli.ok("link", ids[0], ids[5], "--type", "causal")
    cli.ok("link", ids[0], ids[5], "--type", "causal", "--weight", "0.9")  # INSERT OR REPLACE of one key
    cli.ok("forget", ids[3])  # soft delete: its edges go, its entities leave the lookup
    _status_matches_a_real_count(cli, data_dir)
    conn = apsw.Connection(str(_db(data_dir)))
    try:  # a foreign writer (the Go program) with plain SQL, recursive_triggers off
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(
            "INSERT OR REPLACE INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
            "SELECT source_id, target_id, edge_type, 0.3, metadata, created_at FROM edges LIMIT 5"
        )
        conn.execute(
            "INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
            "SELECT source_id, target_id, edge_type, 0.3, metadata, created_at FROM edges LIMIT 5"
        )
        conn.execute("DELETE FROM edges WHERE rowid IN (SELECT rowid FROM edges LIMIT 3)")
        conn.execute("UPDATE insights SET category = 'preference' WHERE id = ?", (ids[1],))
        conn.execute('UPDATE insights SET entities = \'["Redis","Zig"]\' WHERE id = ?', (ids[2],))
        conn.execute("DELETE FROM insights WHERE id = ?", (ids[4],))  # hard delete: edges cascade
        try:
            conn.execute(
                "INSERT INTO edges (source_id, target_id, edge_type, created_at) VALUES (?, 'nope', 'entity', 'x')",
                (ids[0],),
            )
        except apsw.ConstraintError:
            pass  # a failing statement rolls back its trigger's count too
    finally:
        conn.close()
    _status_matches_a_real_count(cli, data_dir)
    cli.ok("recall", "Redis queue")  # the hot index's edge guard reads the counter
    cli.ok("remember", "Kafka queue retries in Redis", "--no-diff")
    _status_matches_a_real_count(cli, data_dir)


def test_status_reads_counters_not_the_tables(cli, data_dir: Path) -> None:
    cli.ok("remember", "Counters answer status in constant time", "--no-diff")
    conn = apsw.Connection(str(_db(data_dir)))
    try:
        for sql, args in ((counts._SQL_GET, ("edges",)), (counts._SQL_CATEGORIES, ("category:", "category;")),
                          (counts._SQL_TOP, (10,))):  # fmt: skip
            plan = [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]
            assert not [s for s in plan if "edges" in s or "insights" in s], plan
            assert not [s for s in plan if s.startswith("SCAN")], plan
    finally:
        conn.close()


def test_doctor_names_a_wrong_counter_and_repair_recounts(cli, data_dir: Path) -> None:
    for k in range(4):
        cli.ok("remember", f"Doctor counts memory {k} about Postgres", "--no-diff")
    assert cli("doctor").code == 0
    conn = apsw.Connection(str(_db(data_dir)))
    try:
        conn.execute("UPDATE mnemon_counts SET n = n + 7 WHERE key = 'edges'")
        conn.execute("DROP TRIGGER entities_count_ai")
    finally:
        conn.close()
    report = cli("doctor")
    assert report.code == 1
    detail = {c["name"]: c["detail"] for c in report.json()["checks"] if not c["ok"]}
    assert set(detail) == {"counters"}
    assert "counter edges: kept" in detail["counters"] and "entities_count_ai missing" in detail["counters"]
    fixed = cli("doctor", "--repair")
    assert fixed.code == 0, fixed.out
    assert "recounted the status counters" in fixed.json()["repaired"]
    cli.ok("remember", "Postgres after the repair", "--no-diff")
    _status_matches_a_real_count(cli, data_dir)


def test_go_store_gets_counters_once_and_readonly_never_migrates(tmp_path: Path, cli, data_dir: Path) -> None:
    db = build_go_db(_db(data_dir))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    readonly = cli.ok("--readonly", "status")  # counted the slow way: no counters, nothing written
    assert readonly["total_insights"] == 3 and readonly["edge_count"] >= 0
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["mnemon.db"]
    store = Store.open(db, readonly=False, now=NOW)
    try:
        assert counts.available(store.conn)
        assert store.conn.execute("SELECT value FROM mnemon_meta WHERE key = 'schema'").fetchone()[0] == str(
            SCHEMA_VERSION
        )
    finally:
        store.close()
    conn = apsw.Connection(f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        assert counts.problems(conn) == []  # the migration counted after its own narrative clean-up
    finally:
        conn.close()
    assert cli.ok("show", GO_ID1)["id"] == GO_ID1
    _status_matches_a_real_count(cli, data_dir)
