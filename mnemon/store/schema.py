"""DDL and idempotent migrations (contract §2.4 including the newest changes).

A database written by the Go program (its schema, float32 embedding blobs, ``user_version = 1``)
is brought forward in place: ``stored_at`` with its trigger, the ``supersedes`` edge type (table
rebuilt only if the CHECK probe fails), the partial covering indexes, legacy ``narrative`` rows
soft-deleted. Our own bookkeeping lives in ``mnemon_meta`` (schema version, write generation,
embedding blob format), a table the Go program ignores. Read-only opens never migrate.
"""

from __future__ import annotations

import apsw

from mnemon.store import counts, sequences
from mnemon.store.tx import write_tx
from mnemon.store.connection import scalar

# 6: exact counters (mnemon.store.counts); 7: insight_entities by insight_id; 8: idx_insights_active_ei;
# 9: the counter triggers leave a counter holding no integer as it is (counts._bump)
# 10: the hot index's sequences (store/sequences.py: the deletion log, the edges' rowid mark)
SCHEMA_VERSION = 10

_SQL_CREATE_INSIGHTS = """
CREATE TABLE IF NOT EXISTS insights (
    id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    category TEXT NOT NULL DEFAULT 'general',
    importance INTEGER NOT NULL DEFAULT 3,
    tags TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    source TEXT NOT NULL DEFAULT 'user',
    access_count INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
)"""

_EDGES_COLUMNS = """(
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    edge_type TEXT NOT NULL CHECK (edge_type IN ('temporal', 'semantic', 'causal', 'entity', 'supersedes')),
    weight REAL NOT NULL DEFAULT 1.0,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, edge_type),
    FOREIGN KEY (source_id) REFERENCES insights(id) ON DELETE CASCADE,
    FOREIGN KEY (target_id) REFERENCES insights(id) ON DELETE CASCADE
)"""
_SQL_CREATE_EDGES = "CREATE TABLE IF NOT EXISTS edges " + _EDGES_COLUMNS

_SQL_CREATE_OPLOG = """
CREATE TABLE IF NOT EXISTS oplog (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    operation TEXT NOT NULL,
    insight_id TEXT,
    detail TEXT DEFAULT '',
    created_at TEXT NOT NULL
)"""

_SQL_CREATE_META = "CREATE TABLE IF NOT EXISTS mnemon_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

# Derived entity lookup (§4.5): one row per (entity, active insight), kept by triggers in the same
# transaction as every insight write (ours or the Go program's), so an entity's newest insights are
# an index range instead of a LIKE scan over every row. Soft-deleted insights have no rows here.
_SQL_CREATE_ENTITY_INDEX = """
CREATE TABLE IF NOT EXISTS insight_entities (
    entity TEXT NOT NULL,
    created_at TEXT NOT NULL,
    insight_id TEXT NOT NULL,
    PRIMARY KEY (entity, created_at, insight_id)
) WITHOUT ROWID"""
_SQL_ENTITY_ROWS_OF_NEW = (
    "INSERT OR IGNORE INTO insight_entities (entity, created_at, insight_id) "
    "SELECT j.value, NEW.created_at, NEW.id "
    # A malformed entities column (possible in old Go stores) would make json_each raise.
    "FROM json_each(CASE WHEN json_valid(NEW.entities) THEN NEW.entities ELSE '[]' END) j WHERE j.type = 'text'"
)
_SQL_ENTITY_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS insights_entities_ai AFTER INSERT ON insights "
    "WHEN NEW.deleted_at IS NULL "
    f"BEGIN {_SQL_ENTITY_ROWS_OF_NEW}; END",
    "CREATE TRIGGER IF NOT EXISTS insights_entities_au AFTER UPDATE OF entities, deleted_at, created_at ON insights "
    "BEGIN DELETE FROM insight_entities WHERE insight_id = OLD.id; "
    f"{_SQL_ENTITY_ROWS_OF_NEW} AND NEW.deleted_at IS NULL; END",
    "CREATE TRIGGER IF NOT EXISTS insights_entities_ad AFTER DELETE ON insights "
    "BEGIN DELETE FROM insight_entities WHERE insight_id = OLD.id; END",
)
ENTITY_TRIGGER_SQL = _SQL_ENTITY_TRIGGERS  # for a bulk writer (bulkwrite)
_SQL_ENTITY_BACKFILL = (
    "INSERT OR IGNORE INTO insight_entities (entity, created_at, insight_id) "
    "SELECT j.value, i.created_at, i.id FROM insights i, "
    "json_each(CASE WHEN json_valid(i.entities) THEN i.entities ELSE '[]' END) j "
    "WHERE i.deleted_at IS NULL AND j.type = 'text'"
)

_ADDED_COLUMNS = (
    ("last_accessed_at", "TEXT"),
    ("embedding", "BLOB"),
    ("effective_importance", "REAL DEFAULT 0.5"),
    ("stored_at", "TEXT"),
)

_SQL_STORED_AT_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS insights_stored_at AFTER INSERT ON insights
WHEN NEW.stored_at IS NULL
BEGIN
    UPDATE insights SET stored_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE rowid = NEW.rowid;
END"""

EDGE_TARGET_INDEX = "idx_edges_target_type"
EDGE_TARGET_INDEX_SQL = f"CREATE INDEX IF NOT EXISTS {EDGE_TARGET_INDEX} ON edges(target_id, edge_type)"
_SQL_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_insights_category ON insights(category)",
    "CREATE INDEX IF NOT EXISTS idx_insights_ei ON insights(effective_importance)",
    "CREATE INDEX IF NOT EXISTS idx_insights_stored ON insights(stored_at)",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_created ON insights(deleted_at, created_at DESC) "
    "WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_source ON insights(source, created_at) WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_importance ON insights(deleted_at, importance DESC, "
    "created_at DESC) WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_prune_stored ON insights(deleted_at, importance, access_count, "
    "stored_at, effective_importance)",
    # Auto-prune's candidates in their order (lowest stored EI, oldest, id): the walk stops at the
    # few victims it takes instead of sorting every non-immune row on each write over the ceiling
    # (50 ms at 100k, 1.9 s at 1M; schema 8).
    "CREATE INDEX IF NOT EXISTS idx_insights_active_ei ON insights(deleted_at, effective_importance, created_at, id) "
    "WHERE deleted_at IS NULL",
    # The entity triggers delete an insight's rows by insight_id on every entities/deleted_at update
    # (remember, forget, prune): without this index each such write scanned every entity row.
    "CREATE INDEX IF NOT EXISTS idx_insight_entities_insight ON insight_entities(insight_id)",
    # Exact-duplicate lookup (Decision 5) must not scan every content on a large store.
    "CREATE INDEX IF NOT EXISTS idx_insights_active_content ON insights(content) WHERE deleted_at IS NULL",
    # Edges keep two b-trees besides the table: the primary key (source_id, target_id, edge_type)
    # serves every source_id lookup, this one every target_id lookup. Each edge row lands in every
    # index under a random UUID key, so each extra index made an import's edge writes slower.
    EDGE_TARGET_INDEX_SQL,
    "CREATE INDEX IF NOT EXISTS idx_oplog_created ON oplog(created_at)",
)
# Insight indexes no statement of an import reads before its last transaction: an import that at
# least doubles the store drops them in its first and rebuilds them in its last (store/bulkwrite.py),
# so each of its rows is written to the three b-trees it reads (primary key, content, source)
# instead of nine. The migration recreates them like every index of _SQL_INDEXES.
BULK_DEFERRED_INDEXES = (
    "idx_insights_category",
    "idx_insights_ei",
    "idx_insights_stored",
    "idx_insights_active_created",
    "idx_insights_active_importance",
    "idx_insights_prune_stored",
    "idx_insights_active_ei",
)


def index_sql(name: str) -> str:
    """The CREATE statement of one of ``_SQL_INDEXES``, by index name."""
    return next(s for s in _SQL_INDEXES if s.split()[5] == name)


# Superseded by the partial covering indexes in the newest schema, or by the edges primary key.
_SQL_DROP_OLD_INDEXES = (
    "DROP INDEX IF EXISTS idx_insights_importance",
    "DROP INDEX IF EXISTS idx_insights_created",
    "DROP INDEX IF EXISTS idx_insights_source",
    # Schema 4: redundant edge indexes (the snapshot's list; covered by the two kept above).
    "DROP INDEX IF EXISTS idx_edges_source",
    "DROP INDEX IF EXISTS idx_edges_target",
    "DROP INDEX IF EXISTS idx_edges_type",
    "DROP INDEX IF EXISTS idx_edges_source_type",
    # Schema 5: prefixes of idx_insights_prune_stored (deleted_at, importance, access_count, ...),
    # which answers their look-ups; each insight row costs one index write less per index.
    "DROP INDEX IF EXISTS idx_insights_deleted",
    "DROP INDEX IF EXISTS idx_insights_prune",
)


ENTITY_TRIGGER_NAMES = tuple(statement.split()[5] for statement in _SQL_ENTITY_TRIGGERS)


def entity_rows_missing(conn: apsw.Connection) -> list[str]:
    """The entity lookup table, if it is missing (doctor: its triggers fail every remember and forget), or
    its triggers: without one, writes succeed and the lookup silently stops following the insights (a new
    memory's entities find no neighbours for their entity edges, a forgotten one's are still found)."""
    if not _has_table(conn, "insight_entities"):
        return ["table insight_entities missing"]
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    return [f"trigger {name} missing" for name in ENTITY_TRIGGER_NAMES if name not in present]


def restore_entity_rows(conn: apsw.Connection) -> None:
    """Recreate a missing entity lookup with its rows, index and triggers (``doctor --repair``, inside
    its write transaction; as the migration creates it). Where a trigger was missing the rows may have
    drifted from the insights since it went: they are written again from the insights, as the backfill does."""
    if not _has_table(conn, "insight_entities"):
        conn.execute(_SQL_CREATE_ENTITY_INDEX)
        conn.execute(_SQL_ENTITY_BACKFILL)
        conn.execute(index_sql("idx_insight_entities_insight"))
    elif entity_rows_missing(conn):
        conn.execute("DELETE FROM insight_entities")
        conn.execute(_SQL_ENTITY_BACKFILL)
    for statement in _SQL_ENTITY_TRIGGERS:
        conn.execute(statement)


def _columns(conn: apsw.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _meta_get(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM mnemon_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _has_table(conn: apsw.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def is_current(conn: apsw.Connection) -> bool:
    """Return whether the schema is already at SCHEMA_VERSION (the cheap check on every open)."""
    if not _has_table(conn, "mnemon_meta"):
        return False
    return _meta_get(conn, "schema") == str(SCHEMA_VERSION)


def mark_incomplete(conn: apsw.Connection) -> None:
    """Mark the schema as not current (a bulk writer dropped an index it recreates at its end,
    ``bulkwrite``): until :func:`mark_complete`, every writable open migrates, which recreates it."""
    conn.execute("UPDATE mnemon_meta SET value = ? WHERE key = 'schema'", (f"{SCHEMA_VERSION}-bulk",))


def mark_complete(conn: apsw.Connection) -> None:
    conn.execute("UPDATE mnemon_meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))


def embedding_format(conn: apsw.Connection) -> str:
    """Return the blob format the store holds: ``float64`` (ours, old Go) or ``float32`` (Go ≥ 0.1.14)."""
    if _has_table(conn, "mnemon_meta"):
        value = _meta_get(conn, "embedding_format")
        if value in ("float32", "float64"):
            return value
    version = scalar(conn, "PRAGMA user_version")
    return "float32" if version == 1 else "float64"


def generation(conn: apsw.Connection) -> int:
    """Return the write generation (bumped by every write transaction); 0 if never written by us."""
    if not _has_table(conn, "mnemon_meta"):
        return 0
    # Read as the bump (store.tx) reads it, cast to an integer (BIGINT: PostgreSQL's INTEGER is 32-bit): a
    # damaged value ('zz', 1.5, a blob) made every reader of the derived indexes a ValueError traceback, until
    # some write's bump happened to cure it.
    row = conn.execute("SELECT CAST(value AS BIGINT) FROM mnemon_meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def _edges_accept_supersedes(conn: apsw.Connection) -> bool:
    """Return whether the edges CHECK constraint already admits ``supersedes`` (newest schema)."""
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'edges'").fetchone()
    return sql is not None and "supersedes" in str(sql[0])


def _rebuild_edges(conn: apsw.Connection) -> None:
    """Recreate ``edges`` with the widened CHECK, keeping every row whose type is still valid."""
    conn.execute("ALTER TABLE edges RENAME TO edges_old")
    conn.execute("CREATE TABLE edges " + _EDGES_COLUMNS)
    conn.execute(
        "INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
        "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges_old "
        "WHERE edge_type IN ('temporal', 'semantic', 'causal', 'entity', 'supersedes') ORDER BY rowid"
    )
    conn.execute("DROP TABLE edges_old")


def migrate(conn: apsw.Connection, now: str) -> None:
    """Create or bring the schema forward in one write transaction; idempotent."""
    with write_tx(conn, bump=False):
        if is_current(conn):
            return  # another process migrated while we waited for the lock
        existed = _has_table(conn, "insights")
        fmt = embedding_format(conn) if existed else "float64"
        # A store is migrated again whenever its mark is not ours: an older mnemon resets it to its own
        # version on open (its migration writes 'schema' as every migration does), an import of ours
        # leaves '10-bulk' until its end. That migration is needed (an older writer, schema 7-8, recreates
        # the counter triggers with its own definitions; a '-bulk' mark means dropped indexes), and it is
        # cheap but for one full scan: the recount of every counter. The counters need it only where some
        # write may have gone uncounted, which is exactly where a counter table or trigger is missing
        # now (counts.kept_exactly): every trigger counts in the writing transaction whoever writes, an
        # older mnemon included (it never removes one it does not know, and the bulk writers of every
        # version since schema 7 drop theirs only inside their own transaction), and a version of schema
        # 6-9 recounted on its own open of this store anyway. So an older writer costs one recount (its
        # own), not two, and each later open of ours none.
        counted = existed and counts.kept_exactly(conn)
        conn.execute(_SQL_CREATE_INSIGHTS)
        have = _columns(conn, "insights")
        for name, decl in _ADDED_COLUMNS:
            if name not in have:
                conn.execute(f"ALTER TABLE insights ADD COLUMN {name} {decl}")
        conn.execute("UPDATE insights SET stored_at = created_at WHERE stored_at IS NULL")
        conn.execute(_SQL_STORED_AT_TRIGGER)
        if _has_table(conn, "edges") and not _edges_accept_supersedes(conn):
            _rebuild_edges(conn)
        conn.execute(_SQL_CREATE_EDGES)
        conn.execute(_SQL_CREATE_OPLOG)
        if not _has_table(conn, "insight_entities"):
            conn.execute(_SQL_CREATE_ENTITY_INDEX)
            conn.execute(_SQL_ENTITY_BACKFILL)
        for statement in _SQL_ENTITY_TRIGGERS:
            conn.execute(statement)
        counts.install(conn, recount=not counted)  # before the legacy clean-up below, whose update the triggers follow
        conn.execute(_SQL_CREATE_META)
        sequences.install(conn)  # before the legacy clean-up below too: its deletions are logged
        for statement in _SQL_DROP_OLD_INDEXES:
            conn.execute(statement)
        for statement in _SQL_INDEXES:
            conn.execute(statement)
        # Legacy seventh category (§1): soft-delete on open, as the Go program does.
        conn.execute(
            "UPDATE insights SET deleted_at = ?, updated_at = ? WHERE category = 'narrative' AND deleted_at IS NULL",
            (now, now),
        )  # the count triggers are in place: the counters follow this update
        conn.execute("INSERT OR IGNORE INTO mnemon_meta (key, value) VALUES ('generation', '0')")
        conn.execute("INSERT OR IGNORE INTO mnemon_meta (key, value) VALUES ('embedding_format', ?)", (fmt,))
        conn.execute(
            "INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
        )
        conn.execute("UPDATE mnemon_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
