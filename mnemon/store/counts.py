"""Exact row counters kept by triggers, so ``status`` and the hot index never count by scanning.

Owns two derived tables inside the database (schema 6) and the triggers that keep them exact in
the same transaction as every write, ours or the Go program's (triggers live in the schema, so a
Go process writing the file keeps them current too):

- ``mnemon_counts(key, n)``: ``edges`` (every edge row), ``deleted`` (soft-deleted insights) and
  ``category:<name>`` (active insights of that category; their sum is the active count);
- ``entity_counts(entity, n)``: active insights naming each entity (rows of ``insight_entities``),
  with an ``(n DESC, entity)`` index so the top entities are an index range.

Edges are written with ``INSERT OR REPLACE``, and SQLite fires no DELETE trigger for the row a
REPLACE removes (``recursive_triggers`` is off, as in every client). So the edge counter counts
up in a BEFORE INSERT trigger only when the key is not there yet, and down on real deletes
(``DELETE``, foreign-key cascades): exact for REPLACE, IGNORE and failing statements alike (a
failing statement rolls back its triggers' writes). A store that has no counters yet (read-only
open of an old or Go store) is counted the old way: :func:`available` tells which.
``doctor`` compares every counter with a real count (:func:`problems`); ``--repair`` recomputes
them (:func:`rebuild`).

A bulk edge write (import) counts its own rows instead (:func:`edge_inserts_counted`): SQLite has
no statement-level triggers, and the per-row look-up and counter update of ``edges_count_bi``
cost as much as the edge rows themselves. The trigger is dropped and recreated inside the
writer's own transaction, so no other connection ever sees the store without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw
from mnemon.store import sequences
from mnemon.store.check import shown
from mnemon.store.connection import scalar

CATEGORY_PREFIX = "category:"

_SQL_CREATE = (
    "CREATE TABLE IF NOT EXISTS mnemon_counts (key TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS entity_counts (entity TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS idx_entity_counts_n ON entity_counts(n DESC, entity)",
)


# A counter holding no integer (text, a blob, a real: a hand edit) reads as the real count (below); SQLite's
# "n + 1" would turn 'x' into 1 and '7x' into 8, valid counts that are wrong, which status would then print.
# Every counter update therefore moves an integer only and leaves any other value as it is, still read as the
# real count, named by doctor and recounted by --repair. (An integer equals its CAST; text, a blob or a real
# does not: no typeof(), as in store.numeric.)
_INTEGER_N = "n = CAST(n AS INTEGER)"


def _bump(key_expr: str, delta: str) -> str:
    return (
        f"INSERT INTO mnemon_counts (key, n) VALUES ({key_expr}, {delta}) "
        f"ON CONFLICT(key) DO UPDATE SET n = CASE WHEN {_INTEGER_N} THEN n + ({delta}) ELSE n END"
    )


_INSIGHT_KEY_NEW = f"CASE WHEN NEW.deleted_at IS NULL THEN '{CATEGORY_PREFIX}' || NEW.category ELSE 'deleted' END"
_INSIGHT_KEY_OLD = f"CASE WHEN OLD.deleted_at IS NULL THEN '{CATEGORY_PREFIX}' || OLD.category ELSE 'deleted' END"

_SQL_EDGES_BI = (
    "CREATE TRIGGER IF NOT EXISTS edges_count_bi BEFORE INSERT ON edges "
    "WHEN NOT EXISTS (SELECT 1 FROM edges WHERE source_id = NEW.source_id AND target_id = NEW.target_id "
    "AND edge_type = NEW.edge_type) "
    f"BEGIN {_bump(chr(39) + 'edges' + chr(39), '1')}; END"
)
_SQL_TRIGGERS = (
    _SQL_EDGES_BI,
    f"CREATE TRIGGER IF NOT EXISTS edges_count_ad AFTER DELETE ON edges BEGIN {_bump(chr(39) + 'edges' + chr(39), '-1')}; END",
    f"CREATE TRIGGER IF NOT EXISTS insights_count_ai AFTER INSERT ON insights BEGIN {_bump(_INSIGHT_KEY_NEW, '1')}; END",
    "CREATE TRIGGER IF NOT EXISTS insights_count_au AFTER UPDATE OF category, deleted_at ON insights "
    f"WHEN {_INSIGHT_KEY_OLD} IS NOT {_INSIGHT_KEY_NEW} "
    f"BEGIN {_bump(_INSIGHT_KEY_OLD, '-1')}; {_bump(_INSIGHT_KEY_NEW, '1')}; END",
    f"CREATE TRIGGER IF NOT EXISTS insights_count_ad AFTER DELETE ON insights BEGIN {_bump(_INSIGHT_KEY_OLD, '-1')}; END",
    "CREATE TRIGGER IF NOT EXISTS entities_count_ai AFTER INSERT ON insight_entities "
    "BEGIN INSERT INTO entity_counts (entity, n) VALUES (NEW.entity, 1) "
    f"ON CONFLICT(entity) DO UPDATE SET n = CASE WHEN {_INTEGER_N} THEN n + 1 ELSE n END; END",
    "CREATE TRIGGER IF NOT EXISTS entities_count_ad AFTER DELETE ON insight_entities "
    f"BEGIN UPDATE entity_counts SET n = n - 1 WHERE entity = OLD.entity AND {_INTEGER_N}; "
    "DELETE FROM entity_counts WHERE entity = OLD.entity AND n <= 0; END",
)
TRIGGER_NAMES = tuple(s.split()[5] for s in _SQL_TRIGGERS)
TRIGGER_SQL = _SQL_TRIGGERS  # for a bulk writer that drops and recreates some inside its transaction (bulkwrite)

# The real counts, for the backfill, doctor and --repair (whole-table scans: never on a hot path).
_SQL_REAL = (
    "SELECT 'edges', COUNT(*) FROM edges "
    "UNION ALL SELECT 'deleted', COUNT(*) FROM insights WHERE deleted_at IS NOT NULL "
    f"UNION ALL SELECT '{CATEGORY_PREFIX}' || category, COUNT(*) FROM insights WHERE deleted_at IS NULL GROUP BY category"
)
_SQL_REAL_ENTITIES = "SELECT entity, COUNT(*) FROM insight_entities GROUP BY entity"
_SQL_HAS = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('mnemon_counts', 'entity_counts')"
_SQL_GET = "SELECT n FROM mnemon_counts WHERE key = ?"
_SQL_CATEGORIES = (
    f"SELECT substr(key, {len(CATEGORY_PREFIX) + 1}), n FROM mnemon_counts WHERE key >= ? AND key < ? AND n != 0"
)
_SQL_ALL = "SELECT key, n FROM mnemon_counts WHERE n != 0"
_SQL_ALL_ENTITIES = "SELECT entity, n FROM entity_counts"
_SQL_TOP = "SELECT entity, n FROM entity_counts WHERE n > 0 ORDER BY n DESC, entity ASC LIMIT ?"
_SQL_REAL_TOP = "SELECT entity, COUNT(*) AS n FROM insight_entities GROUP BY entity ORDER BY n DESC, entity ASC LIMIT ?"
_SQL_ADD_EDGES = _bump("'edges'", "?")
_SQL_DROP_EDGES_BI = "DROP TRIGGER IF EXISTS edges_count_bi"


TABLE_NAMES = ("mnemon_counts", "entity_counts")


def kept_exactly(conn: apsw.Connection) -> bool:
    """Whether the counters have been kept by every write so far: both tables and every counter trigger
    are there (asked before :func:`install`). Each trigger counts in the writing transaction, whoever
    writes (an older mnemon, the Go program, the sqlite3 shell), and mnemon's bulk writers drop one only
    inside their own transaction; so with all of them present the counters hold the real counts, damaged
    ones aside (a hand edit: doctor names those, ``--repair`` recounts)."""
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    return present.issuperset(TABLE_NAMES) and present.issuperset(TRIGGER_NAMES)


def install(conn: apsw.Connection, *, recount: bool = True) -> None:
    """Create the tables and triggers and, with ``recount``, fill the counters from a real count
    (migration, ``doctor --repair``; idempotent).

    Runs inside the caller's write transaction, after ``insight_entities`` exists. The full count is
    needed where the counters may not hold the real counts (:func:`kept_exactly` is false: a store
    gaining them, a table or trigger dropped); the migration skips it otherwise (store/schema.py).
    """
    for statement in _SQL_CREATE:
        conn.execute(statement)
    for name in TRIGGER_NAMES:  # an older definition is replaced (schema 9: counters holding no integer kept)
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    for statement in _SQL_TRIGGERS:
        conn.execute(statement)
    if recount:
        rebuild(conn)


def rebuild(conn: apsw.Connection) -> None:
    """Recompute every counter from the tables (inside the caller's write transaction)."""
    conn.execute("DELETE FROM mnemon_counts")
    conn.execute("DELETE FROM entity_counts")
    conn.execute(f"INSERT INTO mnemon_counts (key, n) {_SQL_REAL}")
    conn.execute(f"INSERT INTO entity_counts (entity, n) {_SQL_REAL_ENTITIES}")


@contextmanager
def edge_inserts_counted(conn: apsw.Connection) -> Iterator[bool]:
    """Edge inserts whose rows the caller counts itself (:func:`add_edges`), once per statement.

    Only inside the caller's write transaction (or a savepoint of it): ``edges_count_bi`` is
    dropped while the body runs and recreated after it, in the same transaction, so every other
    connection (the Go program, the sqlite3 shell, another mnemon) sees the trigger before and
    after, and a rollback or a crash restores it together with the rows and the counter. Yields
    whether the caller must count: False on a PostgreSQL store, whose statement-level triggers
    already count once per statement. The body may write edges only through statements whose
    new rows it knows (plain INSERTs of fresh keys, or upserts after a key probe, ``edges``);
    deletes are still counted by ``edges_count_ad``.
    """
    if not isinstance(conn, apsw.Connection):
        yield False
        return
    # The edges' rowid mark (sequences.install): a body of inserts and upserts never deletes a row
    # (a REPLACE's delete fires no trigger and its new row is numbered above the old), so once MAX(rowid)
    # is at or above the mark every row it inserts is numbered above it, and ``edges_high_ai`` (a trigger
    # that, present, made every insert statement keep a statement journal) can be left out as well.
    unneeded = sequences.edge_rows_above_mark(conn)
    conn.execute(_SQL_DROP_EDGES_BI)
    if unneeded:
        conn.execute(sequences.DROP_EDGE_HIGH_AI)
    try:
        yield True
    finally:
        conn.execute(_SQL_EDGES_BI)
        if unneeded:
            conn.execute(sequences.EDGE_HIGH_AI_SQL)


def add_edges(conn: apsw.Connection, n: int) -> None:
    """Add ``n`` to the edge counter (a writer inside :func:`edge_inserts_counted`)."""
    if n:
        conn.execute(_SQL_ADD_EDGES, (n, n))


def add(conn: apsw.Connection, key: str, n: int) -> None:
    """Add ``n`` to the counter ``key`` (a bulk writer counting its own rows, ``bulkwrite``)."""
    if n:
        conn.execute(_bump("?", "?"), (key, n, n))


def available(conn: apsw.Connection) -> bool:
    """Whether this database keeps counters (schema 6 or later; not an old store opened read-only)."""
    return int(scalar(conn, _SQL_HAS)) == 2


# A counter holding no integer (a hand-edited store: SQLite keeps the text 'x' as given) is read as the
# real count, what doctor --repair recounts it to; int() of it failed status, and every recall through
# the hot index's edge guard. Whole-table counts, but only for a damaged store.


def _real(conn: apsw.Connection) -> dict[str, int]:
    return {str(k): int(n) for k, n in conn.execute(_SQL_REAL)}


def _kept(conn: apsw.Connection, key: str) -> int:
    row = conn.execute(_SQL_GET, (key,)).fetchone()
    if row is None:
        return 0
    return row[0] if type(row[0]) is int else _real(conn).get(key, 0)


def edge_count(conn: apsw.Connection) -> int:
    return _kept(conn, "edges")


def active_count(conn: apsw.Connection) -> int:
    """Active insights: the sum of the category counters (a handful of rows)."""
    return sum(by_category(conn).values())


def deleted_count(conn: apsw.Connection) -> int:
    return _kept(conn, "deleted")


def by_category(conn: apsw.Connection) -> dict[str, int]:
    """Active insights per category (categories with none are absent, as in a GROUP BY)."""
    bounds = (CATEGORY_PREFIX, CATEGORY_PREFIX[:-1] + chr(ord(CATEGORY_PREFIX[-1]) + 1))
    kept = [(str(c), n) for c, n in conn.execute(_SQL_CATEGORIES, bounds)]
    if all(type(n) is int for _, n in kept):
        return dict(kept)
    return {k[len(CATEGORY_PREFIX):]: n for k, n in _real(conn).items() if k.startswith(CATEGORY_PREFIX) and n}


def top_entities(conn: apsw.Connection, limit: int) -> list[tuple[str, int]]:
    """Entities by number of active insights, ties by name: ``limit`` rows of an index."""
    top = [(str(e), n) for e, n in conn.execute(_SQL_TOP, (limit,))]
    if all(type(n) is int for _, n in top):  # (text and blobs sort above every number: a damaged one is here)
        return top
    return [(str(e), int(n)) for e, n in conn.execute(_SQL_REAL_TOP, (limit,))]


def missing_tables(conn: apsw.Connection) -> list[str]:
    """The counter tables that are not there (doctor, on a migrated store: every write's triggers write
    into them, so each write then fails; readers count by scanning meanwhile)."""
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [f"table {name} missing" for name in TABLE_NAMES if name not in present]


def problems(conn: apsw.Connection) -> list[str]:
    """Counters that differ from a real count, or missing triggers (doctor; whole-table scans)."""
    if not available(conn):
        return []  # an old store opened read-only, or a table dropped (the store's missing_tables names it)
    out: list[str] = []
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    out.extend(f"trigger {name} missing" for name in TRIGGER_NAMES if name not in present)
    checks = [("counter", _SQL_REAL, _SQL_ALL), ("entity counter", _SQL_REAL_ENTITIES, _SQL_ALL_ENTITIES)]
    if "insight_entities" not in {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
        checks.pop()  # no entity rows to count (the store's trigger_problems names the table)
    for label, real_sql, kept_sql in checks:
        real = {str(k): int(n) for k, n in conn.execute(real_sql) if int(n)}
        # a kept value that is no integer ('x') differs from every real count: named, and recounted by --repair
        kept = {str(k): n for k, n in conn.execute(kept_sql) if n != 0}
        for key in sorted(real.keys() | kept.keys()):
            if real.get(key, 0) != kept.get(key, 0):
                kept_n = kept.get(key, 0)
                out.append(f"{label} {key}: kept {shown(kept_n)}, real {real.get(key, 0)}")
    return out
