"""The hot index's sequences (schema 10): the deletion log and the edges' rowid mark, with their triggers.

A leaf of the store package (the schema's migration, ``counts``' bulk edge writes, ``hotindex``'s
fingerprint and doctor use it), so none of them imports another for it.
"""

from __future__ import annotations

import apsw

# What the hot index catches up by (store/hotindex.py), kept by triggers so every writer (ours, the Go
# program's, the sqlite3 shell's) keeps it, in the same transaction as the write:
# - ``mnemon_deletions``: one row per soft-deletion, numbered in commit order (writers serialise), so
#   a reader takes the deletions after the last number it has seen; ``deleted_at`` is stamped before
#   the write lock, by a clock that may be behind one already seen. No row is ever removed (insights
#   are only soft-deleted): the log is as long as the store's deleted rows.
# - ``edge_rowid_high`` (mnemon_meta): the highest edge rowid ever deleted. SQLite numbers a new row
#   above the current MAX(rowid), so after the newest edge rows are deleted (a forget of the newest
#   memory) the next rows would take their rowids, and a reader that saw them could not tell new rows
#   from old ones. ``edges_high_ai`` moves such a row above the mark (a rare update: only inserts
#   after such a delete), so every edge row is numbered above every rowid any reader has seen, and
#   max(MAX(rowid), the mark) never falls (hotindex.fingerprint).
EDGE_HIGH_KEY = "edge_rowid_high"
# The deletion log's epoch (mnemon_meta; absent = 0): moved whenever the log is recreated or its trigger
# restored over a store that had them (a table or trigger dropped by hand, ``doctor --repair``). The lost
# log's numbers cannot be recovered (SQLite forgets an AUTOINCREMENT table's counter with the table,
# PostgreSQL drops its bigserial's sequence), and a deletion made while the trigger was gone is in no log:
# a reader whose numbers came from another epoch could take a recreated log's later rows for the ones
# after its own and miss a deletion, so it rebuilds its index instead (engine/hot/catchup.py). Rare
# (a damaged store), and the one way that is right whatever the lost log held.
DELETIONS_EPOCH_KEY = "deletions_epoch"
_SQL_BUMP_EPOCH = (
    f"INSERT INTO mnemon_meta (key, value) VALUES ('{DELETIONS_EPOCH_KEY}', '1') "
    "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
)
DELETIONS_TABLE = "mnemon_deletions"
DELETIONS_TRIGGER = "insights_deletions_au"
_SQL_EDGE_HIGH = f"(SELECT CAST(value AS INTEGER) FROM mnemon_meta WHERE key = '{EDGE_HIGH_KEY}')"
_SQL_CREATE_DELETIONS = (
    "CREATE TABLE IF NOT EXISTS mnemon_deletions (seq INTEGER PRIMARY KEY AUTOINCREMENT, insight_id TEXT NOT NULL)"
)
_SQL_SEQUENCE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS insights_deletions_au AFTER UPDATE OF deleted_at ON insights "
    "WHEN OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL "
    "BEGIN INSERT INTO mnemon_deletions (insight_id) VALUES (NEW.id); END",
    f"CREATE TRIGGER IF NOT EXISTS edges_high_ad AFTER DELETE ON edges WHEN OLD.rowid > {_SQL_EDGE_HIGH} "
    f"BEGIN UPDATE mnemon_meta SET value = OLD.rowid WHERE key = '{EDGE_HIGH_KEY}'; END",
    f"CREATE TRIGGER IF NOT EXISTS edges_high_ai AFTER INSERT ON edges WHEN NEW.rowid <= {_SQL_EDGE_HIGH} "
    f"BEGIN UPDATE edges SET rowid = 1 + max((SELECT MAX(rowid) FROM edges), {_SQL_EDGE_HIGH}) "
    "WHERE rowid = NEW.rowid; END",
)
TRIGGER_NAMES = tuple(s.split()[5] for s in _SQL_SEQUENCE_TRIGGERS)
EDGE_HIGH_AI_SQL = _SQL_SEQUENCE_TRIGGERS[2]
DROP_EDGE_HIGH_AI = "DROP TRIGGER IF EXISTS edges_high_ai"
_SQL_EDGE_ROWS_ABOVE_MARK = (
    f"SELECT COALESCE((SELECT MAX(rowid) FROM edges), 0) >= {_SQL_EDGE_HIGH}, "
    "EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'edges_high_ai')"
)


def edge_rows_above_mark(conn: apsw.Connection) -> bool:
    """Whether the next edge row SQLite numbers (MAX(rowid) + 1) is above the edges' mark and the
    trigger that would otherwise move it is there: a bulk writer of inserts only may then drop that
    trigger for its statements and recreate it (``counts.edge_inserts_counted``)."""
    row = conn.execute(_SQL_EDGE_ROWS_ABOVE_MARK).fetchone()
    return bool(row and row[0] and row[1])


def _present(conn: apsw.Connection) -> set[tuple[str, str]]:
    return {(str(t), str(n)) for t, n in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger')")}


def install(conn: apsw.Connection, *, had_log: bool = False) -> bool:
    """Create the deletion log, the edge mark and their triggers (migration, ``doctor --repair``;
    idempotent, inside the caller's write transaction, after ``mnemon_meta`` exists).

    ``had_log``: the store had a deletion log (``doctor --repair`` on a migrated store), so recreating
    its table or its trigger restarts it. Without it, that is known only where one of the two is
    still there (a migration after an older mnemon reset the schema mark, say): both missing is a
    store gaining the log. A restarted log moves the epoch (``DELETIONS_EPOCH_KEY``); returns whether
    it did."""
    present = _present(conn)
    table, trigger = ("table", DELETIONS_TABLE) in present, ("trigger", DELETIONS_TRIGGER) in present
    conn.execute(_SQL_CREATE_DELETIONS)
    conn.execute("INSERT OR IGNORE INTO mnemon_meta (key, value) VALUES (?, '0')", (EDGE_HIGH_KEY,))
    for statement in _SQL_SEQUENCE_TRIGGERS:
        conn.execute(statement)
    restarted = not (table and trigger) and (had_log or table or trigger)
    if restarted:
        conn.execute(_SQL_BUMP_EPOCH)
    return restarted


def problems(conn: apsw.Connection) -> list[str]:
    """The deletion log's table and the sequence triggers that are missing (doctor). Without a trigger
    the hot index still describes the store, but catches up by ``deleted_at`` or rebuilds where it
    would follow a sequence; without the table every soft deletion fails (its trigger writes there)."""
    present = _present(conn)
    missing = [f"table {DELETIONS_TABLE} missing"] if ("table", DELETIONS_TABLE) not in present else []
    return missing + [f"trigger {name} missing" for name in TRIGGER_NAMES if ("trigger", name) not in present]
