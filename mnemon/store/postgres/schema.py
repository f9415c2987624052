"""The PostgreSQL store schema: same tables and rules as the SQLite store, one schema per store.

Created and migrated idempotently by the first writer, under the store's advisory lock (so two
machines opening a new store at once create it once). Text columns are ``COLLATE "C"``: ordering
and comparison are byte-wise, as in SQLite, so ties break the same way on both backends. Each
table SQLite keys by ``rowid`` has a ``rowid bigserial`` column with the same role (insert order;
the hot index and vector matrix catch up by it). The triggers keep the derived rows SQLite's
triggers keep (``stored_at``, ``insight_entities``, ``mnemon_counts``, ``entity_counts``) under the
same names, plus the change sequence: every insert and update of an insight or an edge stamps the
row with ``nextval('mnemon_change_seq')`` (``change_seq``), and every delete advances it, so a
reader can tell "nothing changed" (the sequence's last value) and which rows changed after a value (a
scan of ``change_seq``; not indexed: every index costs each imported edge row a write, and the
caches catch up by the same ``rowid`` and generation markers as on SQLite). Embeddings are
little-endian float32 (the Go format). Helper functions and a ``sqlite_master`` view let the store
modules' statements run unchanged (see ``dialect.py``).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from mnemon.store import counts, sequences
from mnemon.store.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from mnemon.store.postgres.connection import PgConnection

EMBEDDING_FORMAT = "float32"

_C = 'COLLATE "C"'
_TABLES = (
    f"""CREATE TABLE IF NOT EXISTS insights (
    rowid bigserial NOT NULL UNIQUE,
    id text {_C} PRIMARY KEY,
    content text {_C} NOT NULL,
    category text {_C} NOT NULL DEFAULT 'general',
    importance integer NOT NULL DEFAULT 3,
    tags text {_C} NOT NULL DEFAULT '[]',
    entities text {_C} NOT NULL DEFAULT '[]',
    source text {_C} NOT NULL DEFAULT 'user',
    access_count integer NOT NULL DEFAULT 0,
    created_at text {_C} NOT NULL,
    updated_at text {_C} NOT NULL,
    deleted_at text {_C},
    last_accessed_at text {_C},
    embedding bytea,
    effective_importance double precision DEFAULT 0.5,
    stored_at text {_C},
    change_seq bigint NOT NULL DEFAULT 0
)""",
    "CREATE SEQUENCE IF NOT EXISTS mnemon_change_seq",  # before the edges' column default
    f"""CREATE TABLE IF NOT EXISTS edges (
    rowid bigserial NOT NULL UNIQUE,
    source_id text {_C} NOT NULL,
    target_id text {_C} NOT NULL,
    edge_type text {_C} NOT NULL CHECK (edge_type IN ('temporal', 'semantic', 'causal', 'entity', 'supersedes')),
    weight double precision NOT NULL DEFAULT 1.0,
    metadata text {_C} NOT NULL DEFAULT '{{}}',
    created_at text {_C} NOT NULL,
    change_seq bigint NOT NULL DEFAULT nextval('mnemon_change_seq'),
    PRIMARY KEY (source_id, target_id, edge_type)
)""",
    f"""CREATE TABLE IF NOT EXISTS oplog (
    id bigserial PRIMARY KEY,
    operation text {_C} NOT NULL,
    insight_id text {_C},
    detail text {_C} DEFAULT '',
    created_at text {_C} NOT NULL
)""",
    f"CREATE TABLE IF NOT EXISTS mnemon_meta (key text {_C} PRIMARY KEY, value text {_C} NOT NULL)",
    f"""CREATE TABLE IF NOT EXISTS insight_entities (
    entity text {_C} NOT NULL,
    created_at text {_C} NOT NULL,
    insight_id text {_C} NOT NULL,
    PRIMARY KEY (entity, created_at, insight_id)
)""",
    f"CREATE TABLE IF NOT EXISTS mnemon_counts (key text {_C} PRIMARY KEY, n bigint NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS entity_counts (entity text {_C} PRIMARY KEY, n bigint NOT NULL)",
    # Revision 2: the keys of deleted and replaced edge rows with their change sequence, so
    # another machine's caches drop exactly those (a replaced row moves to a new rowid, which the
    # caches read as a new row; the old one is invisible to rowid markers). Written by triggers,
    # pruned by them (mnemon_log_edge_changes); ``edge_changes_floor`` in the meta: every change
    # after it is logged.
    f"""CREATE TABLE IF NOT EXISTS edge_changes (
    seq bigint PRIMARY KEY,
    source_id text {_C} NOT NULL,
    target_id text {_C} NOT NULL,
    edge_type text {_C} NOT NULL
)""",
    # Revision 4: the deletion log, as on SQLite (store/schema.py, schema 10): one row per soft-deletion,
    # numbered by its own sequence inside the deleting transaction, which holds the store's advisory lock
    # until it commits, so the numbers follow the commit order whatever clock stamped ``deleted_at``.
    f"CREATE TABLE IF NOT EXISTS mnemon_deletions (seq bigserial PRIMARY KEY, insight_id text {_C} NOT NULL)",
)

# The PostgreSQL schema's own revision beside the shared SCHEMA_VERSION (meta ``pg_revision``;
# absent = 1). 2: edge_changes. 3: the edges' endpoints are checked by statement-level triggers
# instead of foreign keys (see _ENDPOINT_FUNCTIONS), and an inserted edge row takes its change
# sequence from the column's default instead of a row trigger (which made every COPY insert its
# rows one at a time); updates are still stamped by the trigger. 4: mnemon_deletions.
PG_REVISION = 4
# Revision 3 on a schema of an earlier one: the foreign keys go (their default names), the default comes.
_MIGRATIONS = (
    "ALTER TABLE edges DROP CONSTRAINT IF EXISTS edges_source_id_fkey, DROP CONSTRAINT IF EXISTS edges_target_id_fkey",
    "ALTER TABLE edges ALTER COLUMN change_seq SET DEFAULT nextval('mnemon_change_seq')",
)
# The change log keeps at least this many rows, and at most about the edge count (past that a
# reader behind it reloads the edge list, which then costs no more than reading the log would).
EDGE_CHANGES_MIN_KEEP = 10_000

_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_insights_category ON insights(category)",
    "CREATE INDEX IF NOT EXISTS idx_insights_ei ON insights(effective_importance)",
    "CREATE INDEX IF NOT EXISTS idx_insights_stored ON insights(stored_at)",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_created ON insights(created_at DESC) WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_source ON insights(source, created_at) WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_importance ON insights(importance DESC, created_at DESC) "
    "WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_prune_stored ON insights(deleted_at, importance, access_count, "
    "stored_at, effective_importance)",
    "CREATE INDEX IF NOT EXISTS idx_insights_active_ei ON insights(effective_importance, created_at, id) "
    "WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_insights_deleted_at ON insights(deleted_at) WHERE deleted_at IS NOT NULL",
    # A B-tree entry is limited to about 2.7 kB; content may be longer: a hash index for equality.
    "CREATE INDEX IF NOT EXISTS idx_insights_active_content ON insights USING hash (content) WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_edges_target_type ON edges(target_id, edge_type)",
    "CREATE INDEX IF NOT EXISTS idx_oplog_created ON oplog(created_at)",
    "CREATE INDEX IF NOT EXISTS idx_entity_counts_n ON entity_counts(n DESC, entity)",
    # schema 7, as on SQLite: the entity triggers delete by insight id on every update and forget
    "CREATE INDEX IF NOT EXISTS idx_insight_entities_insight ON insight_entities(insight_id)",
)

# SQLite's JSON and string functions the store's statements use, with SQLite's results.
_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION json_valid(raw text) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF raw IS NULL THEN RETURN NULL; END IF;
    PERFORM raw::json;
    RETURN 1;
EXCEPTION WHEN others THEN
    RETURN 0;
END $$""",
    """CREATE OR REPLACE FUNCTION json_type(raw text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE t text;
BEGIN
    t := json_typeof(raw::json);
    RETURN CASE t WHEN 'string' THEN 'text' WHEN 'number' THEN 'real' WHEN 'boolean' THEN raw::json::text ELSE t END;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$""",
    # An inlinable SQL function: the planner sees through it (one index probe per element).
    """CREATE OR REPLACE FUNCTION json_each(raw text) RETURNS TABLE(value text, type text)
LANGUAGE sql IMMUTABLE ROWS 20 AS $$
    SELECT e #>> '{}', CASE json_typeof(e) WHEN 'string' THEN 'text' WHEN 'number' THEN 'real' ELSE json_typeof(e) END
    FROM json_array_elements(raw::json) AS e
$$""",
    "CREATE OR REPLACE FUNCTION instr(haystack text, needle text) RETURNS integer LANGUAGE sql IMMUTABLE "
    "AS $$ SELECT strpos(haystack, needle) $$",
    # The entity strings of an entities column; malformed JSON (old Go stores) yields none.
    """CREATE OR REPLACE FUNCTION mnemon_entities_of(raw text) RETURNS SETOF text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF raw IS NULL OR raw = '[]' THEN RETURN; END IF;
    RETURN QUERY SELECT DISTINCT e #>> '{}' FROM json_array_elements(raw::json) AS e WHERE json_typeof(e) = 'string';
EXCEPTION WHEN others THEN
    RETURN;
END $$""",
)

_CATEGORY_KEY = f"CASE WHEN {{row}}.deleted_at IS NULL THEN '{counts.CATEGORY_PREFIX}' || {{row}}.category ELSE 'deleted' END"


def _bump(key: str, delta: str) -> str:
    return f"INSERT INTO mnemon_counts (key, n) VALUES ({key}, {delta}) ON CONFLICT (key) DO UPDATE SET n = mnemon_counts.n + ({delta});"


_TRIGGER_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION mnemon_stored_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.stored_at IS NULL THEN
        NEW.stored_at := to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
    END IF;
    RETURN NEW;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_change_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_seq := nextval('mnemon_change_seq');
    RETURN NEW;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_change_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('mnemon_change_seq');
    RETURN NULL;
END $$""",
    # Statement-level with transition tables: one multi-row insert (import) is one counter update
    # per key, not one per row (a row updated many times in one transaction costs more each time).
    """CREATE OR REPLACE FUNCTION mnemon_entities_ai() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO insight_entities (entity, created_at, insight_id)
    SELECT e, n.created_at, n.id FROM new_rows AS n CROSS JOIN LATERAL mnemon_entities_of(n.entities) AS e
    WHERE n.deleted_at IS NULL ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_entities_au() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.entities IS DISTINCT FROM OLD.entities OR NEW.deleted_at IS DISTINCT FROM OLD.deleted_at
            OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        DELETE FROM insight_entities WHERE insight_id = OLD.id;
        IF NEW.deleted_at IS NULL THEN
            INSERT INTO insight_entities (entity, created_at, insight_id)
            SELECT e, NEW.created_at, NEW.id FROM mnemon_entities_of(NEW.entities) AS e ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_log_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        INSERT INTO mnemon_deletions (insight_id) VALUES (NEW.id);
    END IF;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_entities_ad() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM insight_entities WHERE insight_id = OLD.id;
    RETURN NULL;
END $$""",
    f"""CREATE OR REPLACE FUNCTION mnemon_count_insight() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE old_key text; new_key text;
BEGIN
    old_key := {_CATEGORY_KEY.format(row='OLD')};
    new_key := {_CATEGORY_KEY.format(row='NEW')};
    IF old_key IS DISTINCT FROM new_key THEN
        {_bump('old_key', '-1')}
        {_bump('new_key', '1')}
    END IF;
    RETURN NULL;
END $$""",
    f"""CREATE OR REPLACE FUNCTION mnemon_count_insights_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mnemon_counts (key, n) SELECT {_CATEGORY_KEY.format(row='r')}, COUNT(*) FROM new_rows AS r GROUP BY 1
    ON CONFLICT (key) DO UPDATE SET n = mnemon_counts.n + EXCLUDED.n;
    RETURN NULL;
END $$""",
    f"""CREATE OR REPLACE FUNCTION mnemon_count_insights_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mnemon_counts (key, n) SELECT {_CATEGORY_KEY.format(row='r')}, -COUNT(*) FROM old_rows AS r GROUP BY 1
    ON CONFLICT (key) DO UPDATE SET n = mnemon_counts.n + EXCLUDED.n;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_count_edges_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k bigint;
BEGIN
    SELECT COUNT(*) INTO k FROM new_rows;
    IF k > 0 THEN
        INSERT INTO mnemon_counts (key, n) VALUES ('edges', k) ON CONFLICT (key) DO UPDATE SET n = mnemon_counts.n + k;
    END IF;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_count_edges_removed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k bigint;
BEGIN
    SELECT COUNT(*) INTO k FROM old_rows;
    IF k > 0 THEN
        INSERT INTO mnemon_counts (key, n) VALUES ('edges', -k) ON CONFLICT (key) DO UPDATE SET n = mnemon_counts.n - k;
    END IF;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_count_entities_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entity_counts (entity, n) SELECT entity, COUNT(*) FROM new_rows GROUP BY entity
    ON CONFLICT (entity) DO UPDATE SET n = entity_counts.n + EXCLUDED.n;
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_count_entities_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE entity_counts AS c SET n = c.n - d.k FROM (SELECT entity, COUNT(*) AS k FROM old_rows GROUP BY entity) AS d
    WHERE c.entity = d.entity;
    DELETE FROM entity_counts AS c USING (SELECT DISTINCT entity FROM old_rows) AS d WHERE c.entity = d.entity AND c.n <= 0;
    RETURN NULL;
END $$""",
)

_EDGE_CHANGE_FUNCTION = f"""CREATE OR REPLACE FUNCTION mnemon_log_edge_changes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k bigint; kept bigint; cap bigint; cut bigint;
BEGIN
    INSERT INTO edge_changes (seq, source_id, target_id, edge_type)
    SELECT nextval('mnemon_change_seq'), source_id, target_id, edge_type FROM old_rows;
    GET DIAGNOSTICS k = ROW_COUNT;
    IF k = 0 THEN RETURN NULL; END IF;
    UPDATE mnemon_meta SET value = (value::bigint + k)::text WHERE key = 'edge_changes_rows' RETURNING value::bigint INTO kept;
    SELECT GREATEST({EDGE_CHANGES_MIN_KEEP}, COALESCE((SELECT n FROM mnemon_counts WHERE key = 'edges'), 0)) INTO cap;
    IF kept > cap THEN  -- keep the newest half: pruning stays rare, a reader behind the floor reloads
        SELECT seq INTO cut FROM edge_changes ORDER BY seq DESC OFFSET cap / 2 LIMIT 1;
        IF cut IS NOT NULL THEN
            DELETE FROM edge_changes WHERE seq <= cut;
            UPDATE mnemon_meta SET value = cut::text WHERE key = 'edge_changes_floor';
        END IF;
        UPDATE mnemon_meta SET value = (SELECT COUNT(*) FROM edge_changes)::text WHERE key = 'edge_changes_rows';
    END IF;
    RETURN NULL;
END $$"""

def _missing_endpoint(column: str, rows: str) -> str:
    """The plpgsql that raises PostgreSQL's own foreign-key error for the first edge of ``rows``
    whose ``column`` names no insight (an anti-join: one pass for the statement's rows)."""
    return f"""SELECT n.{column} INTO missing FROM {rows} AS n
    WHERE NOT EXISTS (SELECT 1 FROM insights AS i WHERE i.id = n.{column}) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = 'insert or update on table "edges" violates foreign key constraint "edges_{column}_fkey"',
            DETAIL = format('Key ({column})=(%s) is not present in table "insights".', missing);
    END IF;"""


# Revision 3: the edges' two foreign keys on insights(id), as triggers. A foreign key checks each
# inserted row on its own (a trigger call and a row lock on the insight per edge row: 45 % of the
# server's time for an import's edge rows), and only a superuser may skip those checks. These
# check a statement's rows at once, with the same error; and a deleted insight takes its edges
# with it (ON DELETE CASCADE). The row locks a foreign key takes guard against a concurrent delete
# of an endpoint: mnemon's writers of one store serialise on its advisory lock, and mnemon never
# deletes an insight row except with its edges. Keys never change in mnemon's statements (an
# upsert updates the other columns), so the row-level checks on key updates never fire in use.
_ENDPOINT_FUNCTIONS = (
    f"""CREATE OR REPLACE FUNCTION mnemon_edges_endpoints() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE missing text;
BEGIN
    {_missing_endpoint("source_id", "new_rows")}
    {_missing_endpoint("target_id", "new_rows")}
    RETURN NULL;
END $$""",
    f"""CREATE OR REPLACE FUNCTION mnemon_edge_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE missing text;
BEGIN
    {_missing_endpoint("source_id", "(SELECT NEW.source_id)")}
    {_missing_endpoint("target_id", "(SELECT NEW.target_id)")}
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_insights_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM edges WHERE source_id IN (SELECT id FROM old_rows);
    DELETE FROM edges WHERE target_id IN (SELECT id FROM old_rows);
    RETURN NULL;
END $$""",
    """CREATE OR REPLACE FUNCTION mnemon_insight_id_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id AND EXISTS (
            SELECT 1 FROM edges WHERE source_id = OLD.id UNION ALL SELECT 1 FROM edges WHERE target_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = 'update or delete on table "insights" violates foreign key constraint '
                || '"edges_source_id_fkey" on table "edges"',
            DETAIL = format('Key (id)=(%s) is still referenced from table "edges".', OLD.id);
    END IF;
    RETURN NULL;
END $$""",
)

# (name, timing and events, table, level, function); the counter triggers carry SQLite's names,
# which doctor's trigger check (counts.TRIGGER_NAMES) looks for.
_NEW = "REFERENCING NEW TABLE AS new_rows"
_OLD = "REFERENCING OLD TABLE AS old_rows"
_TRIGGERS = (
    ("insights_stored_at", "BEFORE INSERT", "insights", "ROW", "mnemon_stored_at"),
    ("insights_change_seq", "BEFORE INSERT OR UPDATE", "insights", "ROW", "mnemon_change_stamp"),
    ("edges_change_seq", "BEFORE UPDATE", "edges", "ROW", "mnemon_change_stamp"),  # inserts: the default
    ("insights_change_del", "AFTER DELETE", "insights", "STATEMENT", "mnemon_change_deleted"),
    ("edges_change_del", "AFTER DELETE", "edges", "STATEMENT", "mnemon_change_deleted"),
    ("insights_entities_ai", f"AFTER INSERT ON insights {_NEW}", None, "STATEMENT", "mnemon_entities_ai"),
    ("insights_entities_au", "AFTER UPDATE OF entities, deleted_at, created_at", "insights", "ROW", "mnemon_entities_au"),
    ("insights_entities_ad", "AFTER DELETE", "insights", "ROW", "mnemon_entities_ad"),
    ("insights_deletions_au", "AFTER UPDATE OF deleted_at", "insights", "ROW", "mnemon_log_deletion"),
    ("insights_count_ai", f"AFTER INSERT ON insights {_NEW}", None, "STATEMENT", "mnemon_count_insights_added"),
    ("insights_count_au", "AFTER UPDATE OF category, deleted_at", "insights", "ROW", "mnemon_count_insight"),
    ("insights_count_ad", f"AFTER DELETE ON insights {_OLD}", None, "STATEMENT", "mnemon_count_insights_removed"),
    # The insert transition table holds only rows really inserted (not an upsert's updates): exact.
    ("edges_count_bi", f"AFTER INSERT ON edges {_NEW}", None, "STATEMENT", "mnemon_count_edges_added"),
    ("edges_count_ad", f"AFTER DELETE ON edges {_OLD}", None, "STATEMENT", "mnemon_count_edges_removed"),
    # A replaced edge (INSERT OR REPLACE: an upsert's DO UPDATE) is logged like a deleted one.
    ("edges_changes_ad", f"AFTER DELETE ON edges {_OLD}", None, "STATEMENT", "mnemon_log_edge_changes"),
    ("edges_changes_au", f"AFTER UPDATE ON edges {_OLD}", None, "STATEMENT", "mnemon_log_edge_changes"),
    ("edges_endpoints_ai", f"AFTER INSERT ON edges {_NEW}", None, "STATEMENT", "mnemon_edges_endpoints"),
    ("edges_endpoints_au", "AFTER UPDATE OF source_id, target_id", "edges", "ROW", "mnemon_edge_keys_changed"),
    ("insights_edges_ad", f"AFTER DELETE ON insights {_OLD}", None, "STATEMENT", "mnemon_insights_cascade"),
    ("insights_id_au", "AFTER UPDATE OF id", "insights", "ROW", "mnemon_insight_id_changed"),
    ("entities_count_ai", f"AFTER INSERT ON insight_entities {_NEW}", None, "STATEMENT", "mnemon_count_entities_added"),
    ("entities_count_ad", f"AFTER DELETE ON insight_entities {_OLD}", None, "STATEMENT", "mnemon_count_entities_removed"),
)

# What the store modules ask SQLite's catalogue, answered from PostgreSQL's for this schema.
_SQLITE_MASTER = """CREATE OR REPLACE VIEW sqlite_master AS
    SELECT 'table'::text AS type, c.relname::text AS name, NULL::text AS sql
    FROM pg_class c WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind IN ('r', 'v')
    UNION ALL
    SELECT 'trigger'::text, t.tgname::text, NULL::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = '{schema}'::regnamespace AND NOT t.tgisinternal"""
_SQLITE_SEQUENCE = """CREATE OR REPLACE VIEW sqlite_sequence AS
    SELECT 'oplog'::text AS name, CASE WHEN is_called THEN last_value ELSE 0 END AS seq FROM oplog_id_seq"""


def is_current(conn: PgConnection) -> bool:
    if not exists(conn):
        return False
    found = dict(conn.execute("SELECT key, value FROM mnemon_meta WHERE key IN ('schema', 'pg_revision')", raw=True).fetchall())
    return found.get("schema") == str(SCHEMA_VERSION) and found.get("pg_revision", "1") == str(PG_REVISION)


def exists(conn: PgConnection) -> bool:
    row = conn.execute("SELECT to_regclass('mnemon_meta') IS NOT NULL", raw=True).fetchone()
    return bool(row and row[0])


def migrate(conn: PgConnection, quoted_schema: str, schema_name: str) -> None:
    """Create or bring the schema forward in one transaction under the store's lock; idempotent."""
    conn.begin_write()
    try:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted_schema}", raw=True)
        if is_current(conn):
            conn.commit()
            return  # another machine created it while we waited for the lock
        statements = (*_TABLES, *_MIGRATIONS, *_FUNCTIONS, *_TRIGGER_FUNCTIONS, _EDGE_CHANGE_FUNCTION)
        for statement in (*statements, *_ENDPOINT_FUNCTIONS, *_INDEXES):
            conn.execute(statement, raw=True)
        literal = schema_name.replace("'", "''")
        conn.execute(_SQLITE_MASTER.format(schema='"' + literal.replace('"', '""') + '"'), raw=True)
        conn.execute(_SQLITE_SEQUENCE, raw=True)
        _create_triggers(conn)
        # Changes before the log existed are unknown: its floor starts at the sequence's position.
        row = conn.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM mnemon_change_seq", raw=True).fetchone()
        floor = str(int(row[0]) if row else 0)
        fresh = (("generation", "0"), ("embedding_format", EMBEDDING_FORMAT), ("store_id", secrets.token_hex(16)),
                 ("edge_changes_floor", floor), ("edge_changes_rows", "0"))  # fmt: skip
        for key, value in fresh:
            conn.execute(
                "INSERT INTO mnemon_meta (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING", (key, value), raw=True
            )
        for key, value in (("schema", str(SCHEMA_VERSION)), ("pg_revision", str(PG_REVISION))):
            conn.execute(
                "INSERT INTO mnemon_meta (key, value) VALUES ($1, $2) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value), raw=True
            )
        conn.execute("UPDATE mnemon_meta SET value = (value::bigint + 1)::text WHERE key = 'generation'", raw=True)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def _create_triggers(conn: PgConnection) -> None:
    for name, when, table, level, function in _TRIGGERS:
        target = f"{when} ON {table}" if table else when  # transition-table triggers name their table inline
        conn.execute(f"CREATE OR REPLACE TRIGGER {name} {target} FOR EACH {level} EXECUTE FUNCTION {function}()", raw=True)


TRIGGER_NAMES = tuple(t[0] for t in _TRIGGERS)


def missing_triggers(conn: PgConnection) -> list[str]:
    """The schema's triggers that are not on their tables (dropped by hand, a partial restore)."""
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'", raw=True)}
    return [name for name in TRIGGER_NAMES if name not in present]


# The tables the triggers write into: dropped by hand, every write that fires one fails (a forget on a
# missing deletion log, a remember on missing counters), and doctor names them; --repair recreates them.
_TABLE_SQL = {s.split()[5]: s for s in _TABLES if s.startswith("CREATE TABLE")}
KEPT_TABLES = ("insight_entities", "mnemon_counts", "entity_counts", "edge_changes", "mnemon_deletions")
_SQL_ENTITY_BACKFILL = (
    "INSERT INTO insight_entities (entity, created_at, insight_id) SELECT e, i.created_at, i.id "
    "FROM insights AS i, mnemon_entities_of(i.entities) AS e WHERE i.deleted_at IS NULL ON CONFLICT DO NOTHING"
)
_SQL_CHANGE_POSITION = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM mnemon_change_seq"
_SQL_BUMP_DELETIONS_EPOCH = (
    f"INSERT INTO mnemon_meta (key, value) VALUES ('{sequences.DELETIONS_EPOCH_KEY}', '1') ON CONFLICT (key) DO UPDATE "
    "SET value = (CASE WHEN mnemon_meta.value ~ '^-?[0-9]{1,18}$' THEN mnemon_meta.value::bigint ELSE 0 END + 1)::text"
)


def missing_tables(conn: PgConnection) -> list[str]:
    present = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'", raw=True)}
    return [name for name in KEPT_TABLES if name not in present]


def reinstall_triggers(conn: PgConnection) -> bool:
    """Recreate the tables the triggers write into, every trigger function and trigger (``doctor
    --repair``; in the caller's write transaction, idempotent): what they keep is then recounted by
    the caller. A recreated table starts as its migration starts it: the entity rows filled from the
    active insights; the edge change log empty, its floor at the change sequence's position (a cache
    behind it cannot be told what changed before and reloads the edges, as for a pruned log); the
    deletion log restarted in a new epoch, as where its trigger was missing (store/sequences.py: every
    cache rebuilds its index, since a deletion may be in no log); the entity rows written again where an
    entity trigger was missing. Returns whether the log restarted."""
    missing = missing_tables(conn)
    gone = missing_triggers(conn)
    restarted = "mnemon_deletions" in missing or sequences.DELETIONS_TRIGGER in gone
    # without one of its triggers the entity lookup drifted from the insights: written again from them
    entity_rows_stale = "insight_entities" not in missing and any(n.startswith("insights_entities_") for n in gone)
    for name in missing:
        conn.execute(_TABLE_SQL[name], raw=True)
    for statement in _INDEXES:  # the tables' own indexes (IF NOT EXISTS: the others are there)
        conn.execute(statement, raw=True)
    for statement in (*_TRIGGER_FUNCTIONS, _EDGE_CHANGE_FUNCTION, *_ENDPOINT_FUNCTIONS):
        conn.execute(statement, raw=True)
    if entity_rows_stale:
        conn.execute("DELETE FROM insight_entities", raw=True)
    if "insight_entities" in missing or entity_rows_stale:
        conn.execute(_SQL_ENTITY_BACKFILL, raw=True)
    if "edge_changes" in missing:
        row = conn.execute(_SQL_CHANGE_POSITION, raw=True).fetchone()
        for key, value in (("edge_changes_floor", str(int(row[0]) if row else 0)), ("edge_changes_rows", "0")):
            conn.execute("INSERT INTO mnemon_meta (key, value) VALUES ($1, $2) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value), raw=True)
    if restarted:
        conn.execute(_SQL_BUMP_DELETIONS_EPOCH, raw=True)
    _create_triggers(conn)
    return restarted


def store_id(conn: PgConnection) -> str:
    row = conn.execute("SELECT value FROM mnemon_meta WHERE key = 'store_id'", raw=True).fetchone()
    return str(row[0]) if row else ""


def drop(conn: PgConnection, quoted_schema: str) -> None:
    """Drop the store's schema and everything in it (``store remove --drop``), under its lock."""
    conn.begin_write()
    try:
        conn.execute(f"DROP SCHEMA IF EXISTS {quoted_schema} CASCADE", raw=True)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
