"""The store on disk (contract §2.1-2.5): schema and idempotent migrations, a Go-written
database (tests/go_schema.sql) opened writable and read-only, ``--readonly`` byte identity,
file permissions, the oplog trim, write transactions (rollback, busy, generation).
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import struct
from pathlib import Path

import apsw
import pytest

from mnemon.errors import StoreBusyError
from mnemon.records import OPLOG_KEEP
from mnemon.store import Store, blob, oplog, schema
from mnemon.store.tx import write_tx
from tests.conftest import REPO
from tests.test_cli_remember import db_path

NOW = "2026-02-18T10:00:00Z"
GO_SQL = REPO / "tests" / "go_schema.sql"
GO_ID1 = "aaaaaaaa-0000-4000-8000-000000000001"
GO_ID2 = "aaaaaaaa-0000-4000-8000-000000000002"
GO_NARRATIVE = "aaaaaaaa-0000-4000-8000-000000000003"
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def build_go_db(path: Path) -> Path:
    """Create the Go program's snapshot store from the SQL text, in WAL mode as Go leaves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute(GO_SQL.read_text(encoding="utf-8"))
    conn.close()
    assert not Path(f"{path}-wal").exists()
    return path


def master(conn: apsw.Connection) -> list[tuple]:
    return [tuple(r) for r in conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")]


# --- schema and migrations ---------------------------------------------------------------------


def test_fresh_schema_has_the_newest_shape(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s" / "mnemon.db", readonly=False, now=NOW)
    conn = store.conn
    columns = {r[1] for r in conn.execute("PRAGMA table_info(insights)")}
    assert {"stored_at", "embedding", "last_accessed_at", "effective_importance"} <= columns
    names = {r[1] for r in master(conn)}
    assert {"insights", "edges", "oplog", "mnemon_meta", "insights_stored_at"} <= names
    assert {"idx_insights_active_created", "idx_insights_prune_stored", "idx_oplog_created"} <= names
    assert not {"idx_insights_importance", "idx_insights_created", "idx_insights_source"} & names
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.embedding_format == "float64"
    # The trigger stamps stored_at when a writer (e.g. the Go program) omits it.
    with store.transaction() as tx:
        tx.execute("INSERT INTO insights (id, content, created_at, updated_at) VALUES ('x', 'c', ?, ?)", (NOW, NOW))
    stored = conn.execute("SELECT stored_at FROM insights WHERE id = 'x'").fetchone()[0]
    assert stored is not None and len(stored) == 20 and stored.endswith("Z")
    store.close()


def test_migration_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "s" / "mnemon.db"
    Store.open(path, readonly=False, now=NOW).close()
    first = sha(path)
    Store.open(path, readonly=False, now=NOW).close()
    assert sha(path) == first  # opening a current store writes nothing
    store = Store.open(path, readonly=False, now=NOW)
    before = master(store.conn)
    # Force the migration to run again over an already-current schema.
    schema.migrate(store.conn, NOW)
    assert master(store.conn) == before
    store.close()
    Store.open(path, readonly=False, now=NOW).close()
    conn = apsw.Connection(str(path))
    assert master(conn) == before
    conn.close()


def test_generation_bumps_per_write_and_rollback_keeps_nothing(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s" / "mnemon.db", readonly=False, now=NOW)
    start = store.generation()
    with store.transaction() as tx:
        oplog.append(tx, "remember", "id1", "detail", NOW)
    assert store.generation() == start + 1
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            oplog.append(tx, "remember", "id2", "detail", NOW)
            raise RuntimeError("boom")
    assert store.generation() == start + 1
    assert oplog.count(store.conn) == 1
    store.close()


def test_busy_writer_gets_a_store_busy_error(tmp_path: Path) -> None:
    path = tmp_path / "s" / "mnemon.db"
    holder = Store.open(path, readonly=False, now=NOW)
    other = Store.open(path, readonly=False, now=NOW)
    other.conn.set_busy_timeout(50)
    holder.conn.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusyError):
            with write_tx(other.conn):
                pass
    finally:
        holder.conn.execute("ROLLBACK")
        holder.close()
        other.close()


@pytest.mark.parametrize("damaged", ["'zz'", "1.5", "X'00'", "99999999999999999999"])
def test_a_damaged_generation_is_read_as_the_bump_reads_it(cli, data_dir: Path, damaged: str, monkeypatch) -> None:
    """mnemon_meta's generation that is no integer (doctor's "not a counter"): every command building the vector
    index (recall, remember on an embedded store) ended in a ValueError traceback until some write's bump (CAST AS
    INTEGER + 1) happened to cure it. It is read as the bump reads it, and the indexes follow the store as before."""
    from tests.embed_server import EmbedServer

    with EmbedServer(dim=16) as server:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        cli.ok("remember", "Kafka keeps the event log")
        conn = apsw.Connection(str(db_path(data_dir)))
        conn.execute(f"UPDATE mnemon_meta SET value = {damaged} WHERE key = 'generation'")
        conn.close()
        shutil.rmtree(f"{db_path(data_dir)}.index")  # derived: the next command builds it, reading the generation
        for args in (["recall", "Kafka"], ["--readonly", "recall", "Kafka"], ["remember", "Kafka partitions the topic"]):
            res = cli(*args)
            assert (res.code, res.err) == (0, ""), res.err
        found = cli.ok("recall", "Kafka")["results"]  # type: ignore[index]
    assert sorted(r["content"] for r in found) == ["Kafka keeps the event log", "Kafka partitions the topic"]


def test_oplog_is_trimmed_to_the_newest_rows(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s" / "mnemon.db", readonly=False, now=NOW)
    with store.transaction() as tx:
        for i in range(OPLOG_KEEP + 7):
            oplog.append(tx, "remember", f"id{i}", str(i), NOW)
    low, high, n = store.conn.execute("SELECT MIN(id), MAX(id), COUNT(*) FROM oplog").fetchone()
    assert n == OPLOG_KEEP and high - low == OPLOG_KEEP - 1
    assert oplog.recent(store.conn, 1)[0].detail == str(OPLOG_KEEP + 6)
    store.close()


# --- a database written by the Go program ------------------------------------------------------------


def test_go_store_opens_writable_and_migrates(cli, data_dir: Path) -> None:
    path = build_go_db(db_path(data_dir))
    status = cli.ok("status")
    assert status["total_insights"] == 2  # the narrative row is soft-deleted on open, one was deleted already
    assert status["deleted_insights"] == 2 and status["edge_count"] == 3
    conn = apsw.Connection(str(path))
    rows = dict(conn.execute("SELECT id, stored_at = created_at FROM insights").fetchall())
    assert all(rows.values())  # stored_at backfilled from created_at
    assert conn.execute("SELECT deleted_at IS NOT NULL FROM insights WHERE id = ?", (GO_NARRATIVE,)).fetchone()[0]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT value FROM mnemon_meta WHERE key = 'embedding_format'").fetchone()[0] == "float32"
    conn.close()

    shown = cli.ok("show", GO_ID1)
    assert (shown["content"], shown["tags"], shown["entities"], shown["access_count"]) == (
        "Chose Qdrant because Rust performance is critical", ["db"], ["Qdrant", "Rust"], 2,
    )
    linked = cli.ok("link", GO_ID1, GO_ID2, "--type", "supersedes", "--weight", "1.0")
    assert linked["edge_type"] == "supersedes"
    related = cli.ok("related", GO_ID2, "--depth", "1")
    assert [(r["id"], r["via_edge_type"]) for r in related] == [(GO_ID1, "temporal")]
    added = cli.ok("remember", "Qdrant cluster runs on three nodes")
    assert added["action"] == "added" and "Qdrant" in added["entities"]
    assert added["edges_created"]["entity"] == 2  # linked to the Go row that carries "Qdrant"

    store = Store.open(path, readonly=False, now=NOW)
    try:
        raw = store.conn.execute("SELECT embedding FROM insights WHERE id = ?", (GO_ID1,)).fetchone()[0]
        assert raw == struct.pack("<4f", 1.0, 0.5, -0.25, 2.0)
        vector = blob.decode(raw, store.embedding_format)
        assert vector is not None and vector.dtype.name == "float64"
        assert vector.tolist() == [1.0, 0.5, -0.25, 2.0]
        assert blob.decode(raw[:-1], store.embedding_format) is None  # a mis-sized blob is "no vector"
    finally:
        store.close()


def test_go_store_read_only_is_queried_and_untouched(cli, data_dir: Path) -> None:
    path = build_go_db(db_path(data_dir))
    digest, files = sha(path), listing(path.parent)
    status = cli.ok("--readonly", "status")
    assert status["total_insights"] == 3  # no migration ran: the narrative row is still active
    assert cli.ok("--readonly", "show", GO_ID2)["category"] == "fact"
    assert [r["id"] for r in cli.ok("--readonly", "related", GO_ID2)] == [GO_ID1]
    assert "remember" in cli("--readonly", "log").out
    assert sha(path) == digest and listing(path.parent) == files


def test_go_store_is_copied_as_it_opens(cli, data_dir: Path) -> None:
    """``store copy`` read a store the Go tool wrote as it was: its rows have no stored_at column, and the copy
    failed with "database error: no such column: stored_at". The source is brought forward first, as by every
    command that writes, and the copy holds what the migrated source holds."""
    build_go_db(db_path(data_dir, "gostore"))
    res = cli("store", "copy", "gostore", "copied")
    assert (res.code, res.err) == (0, ""), res.err
    assert res.out == 'Copied store "gostore" to "copied" (4 insights, 3 edges, 2 oplog entries)\n'
    source, copied = cli.ok("--store", "gostore", "status"), cli.ok("--store", "copied", "status")
    assert (copied["total_insights"], copied["deleted_insights"], copied["edge_count"]) == (2, 2, 3)
    own = ("db_path", "db_size_bytes")  # the file's, not the store's
    assert {k: v for k, v in copied.items() if k not in own} == {k: v for k, v in source.items() if k not in own}
    assert cli.ok("--store", "copied", "show", GO_ID1)["content"] == "Chose Qdrant because Rust performance is critical"


# --- --readonly on our own store ---------------------------------------------------------------------


def test_readonly_reads_leave_bytes_and_directory_identical(cli, data_dir: Path) -> None:
    a = cli.ok("remember", "Readonly target about Kafka")
    cli.ok("remember", "Kafka second memory for edges")
    path = db_path(data_dir)
    digest, files = sha(path), listing(path.parent)
    assert not [f for f in files if f.endswith(SIDE_SUFFIXES)]
    before_access = None
    for args in (["status"], ["show", a["id"]], ["related", a["id"]], ["log"], ["receipt"]):
        res = cli("--readonly", *args)
        assert res.code == 0, res.err
        if args[0] == "show":
            before_access = res.json()["access_count"]
        assert sha(path) == digest, args
        assert listing(path.parent) == files, args
    assert before_access == 0
    assert cli.ok("show", a["id"])["access_count"] == 0  # the readonly show did not bump


def test_readonly_on_a_missing_database(cli, data_dir: Path) -> None:
    res = cli("--readonly", "status")
    assert (res.code, res.err) == (1, f"Error: database not found: {db_path(data_dir)}\n")
    assert not data_dir.exists()


# --- permissions ---------------------------------------------------------------------------------


def test_private_permissions(cli, data_dir: Path, tmp_path: Path) -> None:
    nested = tmp_path / "deep" / "er"
    cli.ok("--data-dir", str(nested), "remember", "private memory")
    for directory in (tmp_path / "deep", nested, nested / "data", nested / "data" / "default"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    store_dir = nested / "data" / "default"
    for f in store_dir.rglob("*"):  # the derived folder mnemon.db.index/ is private too
        assert stat.S_IMODE(f.stat().st_mode) == (0o700 if f.is_dir() else 0o600), f
    # While a connection is open the WAL side files exist and are private too.
    store = Store.open(store_dir / "mnemon.db", readonly=False, now=NOW)
    try:
        with store.transaction() as tx:
            oplog.append(tx, "remember", "x", "y", NOW)
        for suffix in ("-wal", "-shm"):
            side = Path(f"{store_dir / 'mnemon.db'}{suffix}")
            assert side.exists() and stat.S_IMODE(side.stat().st_mode) == 0o600
    finally:
        store.close()
    assert not [f for f in listing(store_dir) if f.endswith(SIDE_SUFFIXES)]


def test_first_open_waits_for_a_process_creating_the_same_database(tmp_path: Path) -> None:
    """Switching to WAL while another connection writes the new file in rollback mode: SQLite
    answers SQLITE_BUSY at once (no busy handler: a possible deadlock); the open must wait for it
    (seen as a flaky "database is locked" from a hook's status beside the first import)."""
    import threading

    from mnemon.store.connection import open_writable

    path = tmp_path / "mnemon.db"
    other = apsw.Connection(str(path))
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE t (x)")
    threading.Timer(0.3, lambda: other.execute("COMMIT")).start()
    conn = open_writable(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    finally:
        conn.close()
        other.close()


def test_entity_rows_of_one_insight_are_deleted_through_an_index(tmp_path: Path) -> None:
    """The entity triggers run this on every remember, forget and prune: a scan was 0.3-0.5 s at 1M."""
    store = Store.open(tmp_path / "mnemon.db", readonly=False, now="2026-01-01T00:00:00Z")
    try:
        plan = [r[-1] for r in store.conn.execute("EXPLAIN QUERY PLAN DELETE FROM insight_entities WHERE insight_id = ?", ("x",))]
        assert any("idx_insight_entities_insight" in step for step in plan), plan
        assert schema.is_current(store.conn)
    finally:
        store.close()


def test_prune_candidates_walk_an_index_in_their_order(tmp_path: Path) -> None:
    """Auto-prune runs on every write over the ceiling: its candidates come from an index walked in
    their order (lowest stored EI, oldest, id), never a sort of every non-immune row (1.9 s at 1M),
    and they are the rows the rule names, ties included."""
    import random

    from mnemon.store import insights

    store = Store.open(tmp_path / "mnemon.db", readonly=False, now="2026-01-01T00:00:00Z")
    conn = store.conn
    try:
        plan = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + insights._SQL_PRUNE_CANDIDATES, (4, 3, "", "[]", 10))]
        assert any("idx_insights_active_ei" in step for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan
        # a store written within the grace has no candidate: two look-ups say so, not a walk of every row
        plan = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + insights._SQL_ANY_PAST_GRACE, ("", ""))]
        assert [step for step in plan if step.startswith("SEARCH")] == [
            "SEARCH insights USING INDEX idx_insights_stored (stored_at<?)",
            "SEARCH insights USING INDEX idx_insights_stored (stored_at=?)",
        ], plan
        rng = random.Random(7)
        rows = []
        for i in range(600):
            row = (
                f"{rng.randrange(16**8):08x}-{i:04d}", f"memory {i}", rng.randrange(1, 6), rng.randrange(0, 5),
                f"2026-01-0{rng.randrange(1, 4)}T00:00:00Z", f"2026-01-0{rng.randrange(1, 4)}T00:00:00Z",
                rng.choice([0.1, 0.2, 0.25, rng.random()]), None if rng.random() < 0.9 else "2026-01-05T00:00:00Z",
            )
            rows.append(row)
        with write_tx(conn):
            conn.executemany(
                "INSERT INTO insights (id, content, category, importance, access_count, created_at, updated_at, "
                "stored_at, effective_importance, deleted_at) VALUES (?, ?, 'general', ?, ?, ?, ?, ?, ?, ?)",
                [(r[0], r[1], r[2], r[3], r[4], r[4], r[5], r[6], r[7]) for r in rows],
            )
        exclude = [rows[0][0], rows[1][0]]
        cases = (("2026-01-02T00:00:00Z", 10), ("2026-01-03T00:00:00Z", 25), ("2026-01-01T00:00:00Z", 600),
                 ("2025-12-31T00:00:00Z", 10))
        for cutoff, limit in cases:
            got = [i.id for i in insights.prune_candidates(
                conn, max_importance=4, max_access=3, stored_before=cutoff, exclude=exclude, limit=limit)]
            wanted = sorted(
                (r for r in rows if r[7] is None and r[2] < 4 and r[3] < 3 and r[5] <= cutoff and r[0] not in exclude),
                key=lambda r: (r[6], r[4], r[0]),
            )[:limit]
            assert got == [r[0] for r in wanted]
            assert bool(got) == (cutoff >= "2026-01-01")
    finally:
        store.close()


def _prune_rule(rows: list[tuple], cutoff: str, exclude: list[str], limit: int) -> list[str]:
    """§4.8's candidates, from the rows themselves: (id, importance, access_count, created_at, stored_at, ei)."""
    past = [r for r in rows if (r[4] if r[4] is not None else r[3]) <= cutoff]
    wanted = [r for r in past if r[1] < 4 and r[2] < 3 and r[0] not in exclude]
    return [r[0] for r in sorted(wanted, key=lambda r: (r[5], r[3], r[0]))[:limit]]


def _insert_prune_rows(conn: apsw.Connection, rows: list[tuple]) -> None:
    with write_tx(conn):
        conn.executemany(
            "INSERT INTO insights (id, content, category, importance, access_count, created_at, updated_at, "
            "stored_at, effective_importance) VALUES (?, ?, 'general', ?, ?, ?, ?, ?, ?)",
            [(r[0], f"memory {r[0]}", r[1], r[2], r[3], r[3], r[4], r[5]) for r in rows],
        )
        # the stored_at trigger fills a NULL in; a Go store's row may still have none
        conn.executemany("UPDATE insights SET stored_at = NULL WHERE id = ?", [(r[0],) for r in rows if r[4] is None])


def test_prune_candidates_when_every_row_past_the_grace_is_immune(tmp_path: Path, monkeypatch) -> None:
    """Over the ceiling, with every row past the grace immune (kept, or important) and the non-immune
    ones within it, each write walked every active row in EI order to find no candidate: O(rows) per
    write (20k rows: 5-9 ms a remember). The candidates are now read by their own index ranges when the
    first rows of the walk hold too few: the work no longer grows with the immune rows. And whichever
    way they are read (the bounded walk, the ranges, the whole walk), they are the rows the rule names."""
    import random

    from mnemon.store import insights

    store = Store.open(tmp_path / "mnemon.db", readonly=False, now="2026-01-01T00:00:00Z")
    conn = store.conn
    steps = 0

    def count() -> bool:
        nonlocal steps
        steps += 1
        return False

    def cost(cutoff: str) -> tuple[list[str], int]:
        nonlocal steps
        steps = 0
        conn.set_progress_handler(count, 100)
        try:
            got = insights.prune_candidates(conn, max_importance=4, max_access=3, stored_before=cutoff,
                                            exclude=["new"], limit=10)
        finally:
            conn.set_progress_handler(None)
        return [i.id for i in got], steps

    try:
        # the look-ups' plans: each an index range, never a created_at range over a whole importance
        for name in ("_SQL_PRUNE_FIRST_ACCESS", "_SQL_PRUNE_NEXT_ACCESS", "_SQL_PRUNE_GROUP_STAMPED",
                     "_SQL_PRUNE_GROUP_UNSTAMPED"):
            sql = getattr(insights, name)
            plan = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, (1,) * sql.count("?"))]
            assert len(plan) == 1 and plan[0].startswith("SEARCH insights USING") and "idx_insights_prune_stored" in plan[0]
        for name in ("_SQL_PRUNE_FIRST_IMPORTANCE", "_SQL_PRUNE_NEXT_IMPORTANCE"):
            sql = getattr(insights, name)
            plan = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, (1,) * sql.count("?"))]
            assert len(plan) == 1 and plan[0].startswith("SEARCH insights USING COVERING INDEX"), plan
        plan = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + insights._SQL_PRUNE_CANDIDATES_AHEAD,
                                            (256, 4, 3, "", "[]", 10))]
        assert any("idx_insights_active_ei" in step for step in plan) and not any("TEMP B-TREE" in s for s in plan)

        old, fresh = "2026-01-01T00:00:00Z", "2026-01-09T00:00:00Z"
        immune = [(f"imm-{i:05d}", 4 + i % 2, 0, old, old, 0.01 * (i % 7)) if i % 3 else  # important
                  (f"imm-{i:05d}", 1 + i % 3, 3 + i % 4, old, old, 0.01 * (i % 7))  # kept (gc --keep, recalls)
                  for i in range(2000)]
        within = [(f"new-{i:03d}", 1 + i % 3, i % 3, fresh, fresh, 0.001) for i in range(20)]
        _insert_prune_rows(conn, immune + within)
        cutoff = "2026-01-05T00:00:00Z"
        got, small = cost(cutoff)
        assert got == []
        more = [(f"imm-{i:05d}", 4, 7, old, old, 0.001 * (i % 5)) for i in range(2000, 10000)]
        _insert_prune_rows(conn, more)
        got, large = cost(cutoff)
        assert got == []
        assert large < small * 1.5, (small, large)  # five times the immune rows, about the same work

        # the rule, on every path: a few candidates behind many immune rows of lower EI, unstamped
        # rows, a negative access count, a fractional importance, an excluded row, tied EIs
        rng = random.Random(11)
        odd = [(f"odd-{i:03d}", rng.choice([1, 2, 3, 2.5, 3.0, 4, 5]), rng.choice([-2, 0, 1, 2, 3, 9]),
                rng.choice([old, fresh]), rng.choice([None, old, fresh]), rng.choice([0.5, 0.75, rng.random()]))
               for i in range(300)]
        _insert_prune_rows(conn, odd + [("new", 1, 0, old, old, 0.9)])
        rows = immune + within + more + odd + [("new", 1, 0, old, old, 0.9)]
        for ahead, ranged in ((256, 4096), (2, 4096), (2, 3), (0, 0)):
            monkeypatch.setattr(insights, "PRUNE_AHEAD_ROWS", ahead)
            monkeypatch.setattr(insights, "PRUNE_RANGE_ROWS", ranged)
            for moment, limit in ((cutoff, 10), (cutoff, 500), ("2026-01-10T00:00:00Z", 10), ("2025-12-31T00:00:00Z", 10)):
                got = [i.id for i in insights.prune_candidates(
                    conn, max_importance=4, max_access=3, stored_before=moment, exclude=["new"], limit=limit)]
                assert got == _prune_rule(rows, moment, ["new"], limit), (ahead, ranged, moment, limit)
    finally:
        store.close()
