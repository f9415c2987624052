"""What a bulk writer (import) pays once per statement instead of once per row, on SQLite.

Two costs of an import grow with every row it writes, and neither has to:

- The counter and entity triggers (``counts``, ``schema``): each inserted insight runs
  ``insights_count_ai`` (one counter upsert), ``insights_entities_ai`` (``json_each`` over its
  entities, one ``insight_entities`` row each) and, per entity row, ``entities_count_ai`` (one
  more upsert). :func:`insert_insights` drops the three inside the writer's own transaction,
  inserts the rows, writes the entity rows and adds every counter once per distinct key, and
  recreates them before the transaction ends: no other connection (the Go program, the sqlite3
  shell, another mnemon) ever sees the store without them, and a rollback or a crash restores
  them with the rows. The rows it writes are exactly the triggers' (same statement, same
  ``json_each`` decoding of the stored ``entities`` text).
- The edges' target index (``idx_edges_target_type``): every edge row lands in it under a random
  UUID key, about half of an edge row's cost; built at the end from the finished table it is a
  sort (0.4 s for 352k rows, against about 1 s of upkeep for the same rows). Likewise the six
  insight indexes no import statement reads (``schema.BULK_DEFERRED_INDEXES``): each insight row
  went to nine b-trees. An import that at least doubles the store drops them in its first
  transaction (:func:`defer_indexes`) and recreates them in its last
  (:func:`restore_edge_target_index`, :func:`restore_insight_indexes`). While they are dropped the
  store's ``schema`` mark is not the current version, so any other writable open in between, or
  the next one after a crash, runs the (idempotent) migration, which recreates them (and leaves
  the counters, which the triggers kept: ``schema.migrate``); readers without them are slower, never wrong. The import itself reads edges
  by key and by rowid only, insights by id, content and source.

A PostgreSQL store is left to its own statement-level triggers and indexes (both are no-ops
there, and :func:`insert_insights` is the plain insert).
"""

from __future__ import annotations

import json
from collections import Counter

import apsw

from mnemon.store import connection, counts, insights, schema

_ENTITY_ROWS = "INSERT OR IGNORE INTO insight_entities (entity, created_at, insight_id) VALUES (?, ?, ?)"
# as the trigger it stands in for: a counter holding no integer is left as it is (store.counts)
_ENTITY_COUNT = (
    "INSERT INTO entity_counts (entity, n) VALUES (?, ?) "
    "ON CONFLICT(entity) DO UPDATE SET n = CASE WHEN n = CAST(n AS INTEGER) THEN n + excluded.n ELSE n END"
)
_ROW_TRIGGERS = ("insights_count_ai", "insights_entities_ai", "entities_count_ai")
# Positions in insights.insert_row's tuple.
_ID, _CATEGORY, _ENTITIES, _CREATED = 0, 2, 5, 7


def _trigger_sql() -> dict[str, str]:
    found = {s.split()[5]: s for s in (*counts.TRIGGER_SQL, *schema.ENTITY_TRIGGER_SQL)}
    return {name: found[name] for name in _ROW_TRIGGERS}


def _entity_values(raw: object) -> list[str]:
    """What ``json_each(...) WHERE type = 'text'`` yields for a stored entities column."""
    if raw == "[]":
        return []
    try:
        values = json.loads(str(raw))
    except ValueError:
        return []  # the trigger reads a malformed column as '[]'
    return [v for v in values if type(v) is str] if isinstance(values, list) else []


def insert_insights(conn: apsw.Connection, rows: list[tuple[object, ...]]) -> None:
    """``insights.insert_many(conn, rows)`` (active rows built by ``insights.insert_row``) with the
    row triggers' work done once for all of them, inside the caller's write transaction."""
    if not rows:
        return
    if not isinstance(conn, apsw.Connection):
        insights.insert_many(conn, rows)
        return
    sql = _trigger_sql()
    for name in _ROW_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    try:
        insights.insert_many(conn, rows)
        entity_rows = sorted(
            dict.fromkeys((e, row[_CREATED], row[_ID]) for row in rows for e in _entity_values(row[_ENTITIES]))
        )
        before = conn.totalchanges()
        conn.executemany(_ENTITY_ROWS, entity_rows)
        if conn.totalchanges() - before != len(entity_rows):  # never for new ids: count them one by one
            raise apsw.ConstraintError("insert_insights: an entity row of a new insight already existed")
        conn.executemany(_ENTITY_COUNT, sorted(Counter(e for e, _, _ in entity_rows).items()))
        categories = Counter(str(row[_CATEGORY]) for row in rows)
        for category, n in sorted(categories.items()):
            counts.add(conn, counts.CATEGORY_PREFIX + category, n)
    finally:
        for name in _ROW_TRIGGERS:
            conn.execute(sql[name])


def defer_indexes(conn: apsw.Connection) -> bool:
    """Drop the edges' target index and the insight indexes an import does not read
    (``schema.BULK_DEFERRED_INDEXES``) until :func:`restore_edge_target_index` and
    :func:`restore_insight_indexes` (inside the bulk writer's transaction); return whether it did
    (SQLite only)."""
    if not isinstance(conn, apsw.Connection):
        return False
    for name in (schema.EDGE_TARGET_INDEX, *schema.BULK_DEFERRED_INDEXES):
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    schema.mark_incomplete(conn)
    return True


def restore_edge_target_index(conn: apsw.Connection) -> None:
    """Recreate the edges' target index (inside a write transaction, before any read by target)."""
    with connection.sort_cache(conn):
        conn.execute(schema.EDGE_TARGET_INDEX_SQL)


def restore_insight_indexes(conn: apsw.Connection) -> None:
    """Recreate the deferred insight indexes and the current schema mark (inside a write
    transaction, after the import's last insight write but the auto-prune)."""
    for name in schema.BULK_DEFERRED_INDEXES:
        conn.execute(schema.index_sql(name))
    schema.mark_complete(conn)
