"""The hot index follows deletions and edge rows by sequence, not by timestamp or a falling MAX(rowid).

A forget of the newest memory deletes the newest edge rows; on SQLite the next edge rows would reuse
their rowids, so a reader once rebuilt the whole index whenever MAX(edge rowid) fell. A deletion stamped
by a clock behind one already seen (``deleted_at`` is read before the write lock, and PostgreSQL stores
are shared by machines) was invisible to ``deleted_at >= last`` and caught only by the active-count
check, which rebuilt. Both are now caught up in O(change): the base file is left alone and the
index equals a fresh build. Stores of the previous schema (and the Go program's) migrate in place.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import apsw
from test_hotindex import _cached_index, db_file, fresh_build, hot_file, same_content
from test_hotindex_delta import answers, answers_of_a_fresh_build, base_identity, fresh_base
from test_store import GO_ID1, build_go_db, master

from mnemon.engine.hot import HotIndex
from mnemon.store import Store, hotindex, schema, sequences

NOW = "2026-01-01T00:00:00Z"


def _remember_some(cli) -> list[str]:
    return [cli.ok("remember", f"Otter number {i} floats near Rust harbour in the kelp forest")["id"] for i in range(6)]


def _edge_marks(data_dir: Path) -> tuple[int, int]:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        return int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM edges").fetchone()[0]), hotindex.fingerprint(
            conn
        ).max_edge_rowid
    finally:
        conn.close()


def test_forget_of_the_newest_memory_is_caught_up_not_rebuilt(cli, data_dir: Path) -> None:
    _remember_some(cli)
    fresh_base(cli, data_dir, "otter")
    newest = cli.ok("remember", "Otter census counts quokka smiles in the kelp forest")["id"]
    base = base_identity(data_dir)
    top_before, _ = _edge_marks(data_dir)
    cli.ok("forget", newest)
    top_after, mark = _edge_marks(data_dir)
    assert top_after < top_before  # the forgotten memory held the newest edge rows
    cli.ok("recall", "otter")  # the next reader (the forget's own process, when it holds the index)
    assert base_identity(data_dir) == base  # caught up: no rebuild rewrote the base
    assert mark >= top_before  # the fingerprint's edge mark never falls
    cached = _cached_index(data_dir)
    assert cached.delta_id
    same_content(cached, fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)
    # The next edge rows are numbered above every rowid a reader has seen: caught up, still no rebuild.
    cli.ok("remember", "Otter pups learn to float near Rust harbour")
    cli.ok("recall", "otter")  # an edge reader: the edge-count check finds nothing missed
    assert base_identity(data_dir) == base
    cached = _cached_index(data_dir)
    same_content(cached, fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


def test_a_deletion_stamped_before_one_already_seen_is_applied_without_a_rebuild(cli, data_dir: Path) -> None:
    ids = _remember_some(cli)
    fresh_base(cli, data_dir, "otter")
    base = base_identity(data_dir)
    cli.ok("forget", ids[1])
    cli.ok("recall", "otter")  # the index has seen this deletion (its deleted_at is now)
    # Another machine, its clock an hour behind, commits a deletion stamped before that one.
    conn = apsw.Connection(str(db_file(data_dir)))
    with conn:
        conn.execute(
            "UPDATE insights SET deleted_at = '2000-01-01T00:00:00Z', updated_at = '2000-01-01T00:00:00Z' WHERE id = ?",
            (ids[3],),
        )
        conn.execute("DELETE FROM edges WHERE source_id = ? OR target_id = ?", (ids[3], ids[3]))
        conn.execute("UPDATE mnemon_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    conn.close()
    cli.ok("recall", "otter")
    assert base_identity(data_dir) == base  # caught up, not rebuilt
    cached = _cached_index(data_dir)
    assert cached.delta_id and cached.row_of(ids[3]) is not None and not cached.active[cached.row_of(ids[3])]
    same_content(cached, fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


def test_an_index_of_the_previous_version_catches_up_by_deleted_at(cli, data_dir: Path) -> None:
    """A fingerprint without a deletion sequence (an index file of the previous version) cannot
    tell which logged deletions it has seen: it catches up by ``deleted_at`` as before."""
    ids = _remember_some(cli)
    cli.ok("recall", "otter")
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        with hotindex.read_snapshot(conn):
            index = HotIndex.build(conn, hotindex.fingerprint(conn))
        assert index.fp.deleted_seq >= 0 and "deleted_seq" in index.fp.to_json()
        index.fp = hotindex.Fingerprint.from_json({k: v for k, v in index.fp.to_json().items() if k != "deleted_seq"})
        assert index.fp.deleted_seq == -1
        with conn:
            conn.execute("UPDATE insights SET deleted_at = ? WHERE id = ?", (NOW, ids[2]))
        with hotindex.read_snapshot(conn):
            live = hotindex.fingerprint(conn)
            caught = index.catch_up(conn, live)
        assert caught is index and caught.fp == live  # caught up in place, not rebuilt
        same_content(caught, fresh_build(data_dir))
    finally:
        conn.close()


def _downgrade(path: Path) -> None:
    """Make a store of the current schema one of the previous (schema 9): no deletion log, no edge
    mark, none of their triggers."""
    conn = apsw.Connection(str(path))
    with conn:
        for name in sequences.TRIGGER_NAMES:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP TABLE mnemon_deletions")
        conn.execute("DELETE FROM mnemon_meta WHERE key = 'edge_rowid_high'")
        conn.execute("UPDATE mnemon_meta SET value = '9' WHERE key = 'schema'")
    conn.close()


def test_a_store_of_the_previous_schema_migrates_in_place(cli, data_dir: Path) -> None:
    ids = _remember_some(cli)
    cli.ok("forget", ids[0])
    cli.ok("recall", "otter")
    path = db_file(data_dir)
    _downgrade(path)
    conn = apsw.Connection(str(path))
    fp = hotindex.fingerprint(conn)
    conn.close()
    assert fp.deleted_seq == -1  # no log: the fingerprint says so
    # an index file with a deletion sequence, over a store without the log: caught up by deleted_at (in memory)
    assert cli.ok("--readonly", "recall", "otter")["results"]
    conn = apsw.Connection(str(path))
    rows = conn.execute("SELECT * FROM insights ORDER BY rowid").fetchall()
    edge_rows = conn.execute("SELECT rowid, * FROM edges ORDER BY rowid").fetchall()
    conn.close()
    store = Store.open(path, readonly=False, now=NOW)  # migrates
    try:
        conn = store.conn
        assert conn.execute("SELECT value FROM mnemon_meta WHERE key = 'schema'").fetchone()[0] == str(schema.SCHEMA_VERSION)
        assert conn.execute("SELECT * FROM insights ORDER BY rowid").fetchall() == rows  # no data lost or changed
        assert conn.execute("SELECT rowid, * FROM edges ORDER BY rowid").fetchall() == edge_rows
        before = master(conn)
        schema.migrate(conn, NOW)  # idempotent
        assert master(conn) == before
        assert hotindex.fingerprint(conn).deleted_seq == 0  # the log starts empty: deletions from now on
    finally:
        store.close()
    cli.ok("recall", "otter")  # (the index file numbers deletions of the dropped log: rebuilt once)
    base = base_identity(data_dir)
    newest = cli.ok("remember", "Otter census near Rust harbour")["id"]
    cli.ok("forget", ids[4])
    cli.ok("forget", newest)
    cli.ok("recall", "otter")
    assert base_identity(data_dir) == base
    same_content(_cached_index(data_dir), fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


def test_a_go_store_gains_the_sequences_and_its_forget_is_caught_up(cli, data_dir: Path) -> None:
    path = build_go_db(db_file(data_dir))
    cli.ok("status")  # migrates
    conn = apsw.Connection(str(path))
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert {"mnemon_deletions", *sequences.TRIGGER_NAMES} <= names
    cli.ok("recall", "Qdrant")
    base = base_identity(data_dir)
    newest = cli.ok("remember", "Qdrant cluster runs on three nodes")["id"]
    cli.ok("forget", newest)
    cli.ok("forget", GO_ID1)
    cli.ok("recall", "Qdrant")
    assert base_identity(data_dir) == base
    same_content(_cached_index(data_dir), fresh_build(data_dir))
    assert hot_file(data_dir).exists()


def test_doctor_names_and_repairs_a_dropped_sequence_trigger(cli, data_dir: Path) -> None:
    _remember_some(cli)
    conn = apsw.Connection(str(db_file(data_dir)))
    conn.execute("DROP TRIGGER edges_high_ai")
    conn.close()
    report = cli("doctor")
    assert "trigger edges_high_ai missing" in report.out
    fixed = cli("doctor", "--repair")
    assert fixed.code == 0, fixed.out
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'edges_high_ai'").fetchone() is not None
    finally:
        conn.close()


def test_edge_rows_after_a_falling_max_are_numbered_above_the_mark(tmp_path: Path) -> None:
    """Whoever deletes and inserts (the Go program, the sqlite3 shell), a new edge row's rowid is above
    every edge rowid that ever existed, so a reader's ``rowid > mark`` never misses it."""
    store = Store.open(tmp_path / "s" / "mnemon.db", readonly=False, now=NOW)
    conn = store.conn
    with store.transaction() as tx:
        for i in range(4):
            tx.execute("INSERT INTO insights (id, content, created_at, updated_at) VALUES (?, 'c', ?, ?)", (f"i{i}", NOW, NOW))
        for i in range(3):
            tx.execute("INSERT INTO edges (source_id, target_id, edge_type, created_at) VALUES (?, ?, 'causal', ?)",
                       (f"i{i}", f"i{i + 1}", NOW))  # fmt: skip
    seen = hotindex.fingerprint(conn).max_edge_rowid
    assert seen == 3
    with store.transaction() as tx:
        tx.execute("DELETE FROM edges WHERE source_id IN ('i1', 'i2')")
    assert hotindex.fingerprint(conn).max_edge_rowid == seen  # never falls
    with store.transaction() as tx:
        tx.execute("INSERT OR REPLACE INTO edges (source_id, target_id, edge_type, created_at) VALUES ('i3', 'i0', 'causal', ?)", (NOW,))
        tx.execute("INSERT INTO edges (source_id, target_id, edge_type, created_at) VALUES ('i2', 'i0', 'causal', ?)", (NOW,))
    new = [tuple(r) for r in conn.execute("SELECT rowid, source_id FROM edges WHERE rowid > ? ORDER BY rowid", (seen,))]
    assert new == [(4, "i3"), (5, "i2")]
    assert hotindex.fingerprint(conn).max_edge_rowid == 5
    store.close()


def test_fingerprint_json_round_trip_keeps_the_deletion_sequence() -> None:
    fp = hotindex.Fingerprint(3, 10, 20, 2, NOW, 0, 7)
    assert hotindex.Fingerprint.from_json(fp.to_json()) == fp
    assert replace(fp, deleted_seq=-1).to_json().keys() == {"generation", "max_rowid", "max_edge_rowid", "deleted_count",
                                                              "last_deleted_at"}  # fmt: skip


def test_an_import_after_a_forget_of_the_newest_numbers_its_edges_above_the_mark(cli, data_dir: Path, tmp_path: Path) -> None:
    """An import's bulk edge writes leave the moving trigger out only when MAX(rowid) is already at or
    above the mark; after a forget of the newest memory it is not, and they keep it: every edge row the
    import writes is numbered above every rowid a reader had seen, and the trigger is there after."""
    import json
    import sys

    from conftest import REPO

    sys.path.insert(0, str(REPO))
    from bench.generate import generate_draft

    ids = _remember_some(cli)
    cli.ok("recall", "otter")
    cli.ok("forget", ids[-1])
    top, mark = _edge_marks(data_dir)
    assert top < mark
    cli.ok("recall", "otter")
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(generate_draft(40, seed=5, edges_per_insight=4)), encoding="utf-8")
    cli.ok("import", str(draft))
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        new = conn.execute("SELECT COUNT(*) FROM edges WHERE rowid > ?", (top,)).fetchone()[0]
        assert new > 0 and conn.execute("SELECT COUNT(*) FROM edges WHERE rowid > ? AND rowid <= ?", (top, mark)).fetchone()[0] == 0
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")} >= set(sequences.TRIGGER_NAMES)
    finally:
        conn.close()
    cli.ok("recall", "otter")
    same_content(_cached_index(data_dir), fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)
