"""The tables the triggers write into, and the schema mark an older mnemon sets back (SQLite).

A ``mnemon_deletions`` or a counter table dropped by hand while its trigger stays made every ``forget``
(every ``remember``) fail, and ``doctor`` said the store was fine: it checked the triggers, never the
tables. Now doctor names each missing table and ``--repair`` recreates it; a recreated deletion log
starts a new epoch, so a reader whose numbers came from the lost log rebuilds instead of taking the new
log's rows for the ones after its own.

An older mnemon opening a store of schema 10 writes its own version into the mark, so the next open
here migrates again. That migration recounted every counter (whole-table scans) each time; it now
recounts only where a counter table or trigger is missing, the one case where a write may have gone
uncounted.
"""

from __future__ import annotations

import apsw
from test_hotindex import db_file, fresh_build, same_content

from mnemon.engine.hot import HotIndex
from mnemon.store import Store, counts, hotindex, schema, sequences

NOW = "2026-01-01T00:00:00Z"
_EVERY = "SELECT id, content, deleted_at FROM insights ORDER BY rowid"


def _remember_some(cli) -> list[str]:
    return [cli.ok("remember", f"Otter number {i} floats near Rust harbour in the kelp forest")["id"] for i in range(6)]


def _run(data_dir, *statements: str) -> list[tuple]:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        out: list[tuple] = []
        for statement in statements:
            out = [tuple(r) for r in conn.execute(statement)]
        return out
    finally:
        conn.close()


def _counters(report: dict) -> dict:
    return next(c for c in report["checks"] if c["name"] == "counters")


def _caught_up(data_dir, index: HotIndex) -> HotIndex:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        with hotindex.read_snapshot(conn):
            return index.catch_up(conn, hotindex.fingerprint(conn))
    finally:
        conn.close()


def test_a_dropped_deletion_log_is_named_by_doctor_and_recreated_by_repair(cli, data_dir) -> None:
    ids = _remember_some(cli)
    cli.ok("forget", ids[0])
    reader = fresh_build(data_dir)
    assert reader.fp.deleted_seq == 1 and reader.fp.deletions_epoch == 0
    before = _run(data_dir, "DROP TABLE mnemon_deletions", _EVERY)
    failed = cli("forget", ids[1])
    assert failed.code == 1 and failed.err == "Error: database error: no such table: main.mnemon_deletions\n"
    assert _run(data_dir, _EVERY) == before  # nothing stored changed
    found = cli("doctor")
    assert found.code == 1 and found.err == "Error: doctor found problems: counters\n"
    assert _counters(found.json())["detail"] == "1 problem(s): table mnemon_deletions missing"
    repaired = cli.ok("doctor", "--repair")["repaired"]
    assert repaired[:3] == ["recreated the table(s) mnemon_deletions",
                            "restarted the deletion log (every recall index is rebuilt once)",
                            "recounted the status counters"]  # fmt: skip
    assert cli.ok("doctor")["ok"] is True
    assert _run(data_dir, f"SELECT value FROM mnemon_meta WHERE key = '{sequences.DELETIONS_EPOCH_KEY}'") == [("1",)]
    for k in (1, 2, 3):  # the new log numbers these 1-3: past the reader's 1, which named another deletion
        cli.ok("forget", ids[k])
    assert _run(data_dir, "SELECT seq, insight_id FROM mnemon_deletions ORDER BY seq") == [
        (1, ids[1]), (2, ids[2]), (3, ids[3])]  # fmt: skip
    caught = _caught_up(data_dir, reader)
    assert caught is not reader  # another epoch: rebuilt, whatever the new numbers say
    same_content(caught, fresh_build(data_dir))
    assert {caught.id_at(r) for r in range(caught.n) if caught.active[r]} == set(ids[4:])
    assert {r["id"] for r in cli.ok("search", "otter")} == set(ids[4:])


def test_a_reader_of_another_deletion_epoch_rebuilds_and_one_of_the_same_catches_up(cli, data_dir) -> None:
    ids = _remember_some(cli)
    reader = fresh_build(data_dir)
    cli.ok("forget", ids[0])
    assert _caught_up(data_dir, reader) is reader  # the same log: caught up in place
    reader = fresh_build(data_dir)
    cli.ok("forget", ids[1])
    _run(data_dir, f"INSERT INTO mnemon_meta (key, value) VALUES ('{sequences.DELETIONS_EPOCH_KEY}', '1')")
    caught = _caught_up(data_dir, reader)
    assert caught is not reader and caught.fp.deletions_epoch == 1
    same_content(caught, fresh_build(data_dir))
    assert "deletions_epoch" in caught.fp.to_json()
    assert hotindex.Fingerprint.from_json(caught.fp.to_json()) == caught.fp


def test_a_dropped_trigger_of_the_deletion_log_restarts_it_too(cli, data_dir) -> None:
    """Deletions made while the trigger was gone are in no log: a reader's numbers no longer tell what it
    missed, so the restored trigger starts a new epoch as a recreated table does."""
    ids = _remember_some(cli)
    _run(data_dir, f"DROP TRIGGER {sequences.DELETIONS_TRIGGER}")
    cli.ok("forget", ids[0])  # logged nowhere
    assert "trigger insights_deletions_au missing" in _counters(cli("doctor").json())["detail"]
    repaired = cli.ok("doctor", "--repair")["repaired"]
    assert "restarted the deletion log (every recall index is rebuilt once)" in repaired
    assert cli.ok("doctor")["ok"] is True


def test_dropped_counter_and_entity_tables_are_named_and_recreated(cli, data_dir) -> None:
    ids = _remember_some(cli)
    cli.ok("remember", "Kafka brokers run on three hosts near Rust harbour")
    cli.ok("forget", ids[0])
    entity_rows = "SELECT entity, created_at, insight_id FROM insight_entities ORDER BY 1, 2, 3"
    entities = _run(data_dir, entity_rows)
    kept = _run(data_dir, "SELECT key, n FROM mnemon_counts ORDER BY key")
    assert entities and kept
    before = _run(data_dir, "DROP TABLE mnemon_counts", "DROP TABLE entity_counts", "DROP TABLE insight_entities", _EVERY)
    for args in (["remember", "Otter pups learn to float"], ["forget", ids[1]]):
        failed = cli(*args)
        assert failed.code == 1 and failed.err.startswith("Error: database error: no such table: "), failed.err
        assert failed.err.count("\n") == 1
    assert _run(data_dir, _EVERY) == before
    found = cli("doctor")
    assert found.code == 1
    assert _counters(found.json())["detail"] == (
        "3 problem(s): table insight_entities missing; table mnemon_counts missing; table entity_counts missing")
    repaired = cli.ok("doctor", "--repair")["repaired"]
    assert repaired[0] == "recreated the table(s) insight_entities, mnemon_counts, entity_counts"
    assert "recounted the status counters" in repaired
    assert _run(data_dir, entity_rows) == entities
    assert _run(data_dir, "SELECT key, n FROM mnemon_counts ORDER BY key") == kept
    assert cli.ok("doctor")["ok"] is True
    cli.ok("forget", ids[1])
    assert cli.ok("status")["total_insights"] == 5


# --- the schema mark an older mnemon sets back ------------------------------------------------------


def _statements_of_opening(path) -> list[str]:
    """Every statement a writable open of ``path`` runs (the migration's included)."""
    seen: list[str] = []

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = lambda _cursor, sql, _bindings: seen.append(sql) or True

    apsw.connection_hooks.append(hook)
    try:
        Store.open(path, readonly=False, now=NOW).close()
    finally:
        apsw.connection_hooks.remove(hook)
    return seen


_RECOUNT = "INSERT INTO mnemon_counts (key, n) SELECT"
# What a mnemon of schema 7 or 8 leaves after an import (store/bulkwrite.py of its day): its own counter
# trigger definitions, which move a counter holding no integer as well.
_OLD_EDGES_BI = (
    "CREATE TRIGGER edges_count_bi BEFORE INSERT ON edges WHEN NOT EXISTS (SELECT 1 FROM edges "
    "WHERE source_id = NEW.source_id AND target_id = NEW.target_id AND edge_type = NEW.edge_type) "
    "BEGIN INSERT INTO mnemon_counts (key, n) VALUES ('edges', 1) ON CONFLICT(key) DO UPDATE SET n = n + 1; END"
)


def _older_writer(data_dir, ids: list[str], mark: str) -> None:
    """What an older mnemon does to this store: its migration sets the mark to its own version (and,
    schema 7-8, leaves its own trigger definitions); its writes fire every trigger in the schema, the
    ones it does not know included."""
    _run(data_dir,
         "BEGIN",
         f"INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES ('schema', '{mark}')",
         "DROP TRIGGER edges_count_bi", _OLD_EDGES_BI,
         f"INSERT INTO insights (id, content, category, entities, created_at, updated_at) VALUES "
         f"('older-1', 'Otter written by an older mnemon', 'fact', '[\"Rust\"]', '{NOW}', '{NOW}')",
         f"INSERT INTO edges (source_id, target_id, edge_type, created_at) VALUES ('older-1', '{ids[2]}', 'causal', '{NOW}')",
         f"UPDATE insights SET deleted_at = '{NOW}', updated_at = '{NOW}' WHERE id = '{ids[3]}'",
         f"DELETE FROM edges WHERE source_id = '{ids[3]}' OR target_id = '{ids[3]}'",
         "COMMIT")  # fmt: skip


def test_an_older_mnemon_setting_the_mark_back_costs_no_recount_here(cli, data_dir) -> None:
    ids = _remember_some(cli)
    _older_writer(data_dir, ids, "9")
    statements = _statements_of_opening(db_file(data_dir))
    assert any("INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES ('schema'" in s for s in statements)  # migrated
    assert not [s for s in statements if s.startswith(_RECOUNT)]  # but counted nothing
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        assert conn.execute("SELECT value FROM mnemon_meta WHERE key = 'schema'").fetchone()[0] == str(schema.SCHEMA_VERSION)
        assert counts.problems(conn) == []  # the triggers kept every counter exact
        edges_bi = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'edges_count_bi'").fetchone()[0]
        assert edges_bi == counts.TRIGGER_SQL[0].replace(" IF NOT EXISTS", "")  # our definition again
        assert conn.execute("SELECT insight_id FROM mnemon_deletions ORDER BY seq DESC LIMIT 1").fetchone()[0] == ids[3]
    finally:
        conn.close()
    assert cli.ok("doctor")["ok"] is True
    assert not [s for s in _statements_of_opening(db_file(data_dir)) if "mnemon_meta (key, value) VALUES ('schema'" in s]


def test_a_mark_set_back_over_a_missing_counter_trigger_recounts(cli, data_dir) -> None:
    """Rows written while a counter trigger was missing went uncounted: that migration still recounts."""
    ids = _remember_some(cli)
    _run(data_dir, "DROP TRIGGER insights_count_ai")
    _older_writer(data_dir, ids, "9-bulk")
    statements = _statements_of_opening(db_file(data_dir))
    assert [s for s in statements if s.startswith(_RECOUNT)]
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        assert counts.problems(conn) == []
    finally:
        conn.close()
    assert cli.ok("status")["total_insights"] == 6
    assert cli.ok("doctor")["ok"] is True


def test_a_dropped_entity_trigger_is_named_and_repair_rewrites_the_lookup(cli, data_dir) -> None:
    """Without ``insights_entities_ai`` and ``_au`` every remember succeeds and the entity lookup silently
    stops following the insights (a remember inserts the row, then writes its entities): a new memory's entities are in no lookup row, so the next memory naming the
    same entity gets no entity edge to it. Doctor names the trigger; --repair recreates it and writes
    the lookup again from the insights."""
    first = cli.ok("remember", "Kelp survey in the north bay", "--entities", "Kelpwatch")["id"]
    _run(data_dir, "DROP TRIGGER insights_entities_ai", "DROP TRIGGER insights_entities_au")
    second = cli.ok("remember", "Second kelp survey by the diving team", "--entities", "Kelpwatch")["id"]
    rows = "SELECT insight_id FROM insight_entities WHERE entity = 'Kelpwatch' ORDER BY insight_id"
    assert _run(data_dir, rows) == [(first,)]  # the lookup no longer follows
    found = cli("doctor")
    assert found.code == 1 and found.err == "Error: doctor found problems: counters\n"
    detail = _counters(found.json())["detail"]
    assert "trigger insights_entities_ai missing" in detail and "trigger insights_entities_au missing" in detail
    repaired = cli.ok("doctor", "--repair")["repaired"]
    assert "recreated the trigger(s) insights_entities_ai, insights_entities_au and rewrote the entity lookup from the insights" in repaired
    assert cli.ok("doctor")["ok"] is True
    assert _run(data_dir, rows) == sorted([(first,), (second,)])
    third = cli.ok("remember", "Third kelp survey after the storm", "--entities", "Kelpwatch")["id"]
    assert _run(data_dir, rows) == sorted([(first,), (second,), (third,)])  # the trigger follows again
    entity_edges = _run(data_dir, f"SELECT target_id FROM edges WHERE source_id = '{third}' AND edge_type = 'entity'")
    assert {first, second} <= {r[0] for r in entity_edges}  # both earlier memories found through the lookup
