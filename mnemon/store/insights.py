"""SQL for the ``insights`` table: insert, lookups the graph engine needs, access bumps, soft delete.

Rows come back as ``Insight`` records; ``effective_importance`` and ``last_accessed_at`` ride along
because lifecycle needs them. Values are always bound, never formatted into SQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw

from mnemon.records import MAX_ACCESS_COUNT, MAX_CONTENT_BYTES, Insight
from mnemon.store import numeric
from mnemon.store.connection import scalar

INSIGHT_COLUMNS = (
    "id, content, category, importance, tags, entities, source, access_count, "
    "created_at, updated_at, deleted_at, last_accessed_at, effective_importance"
)

_SQL_INSERT = (
    "INSERT INTO insights (id, content, category, importance, tags, entities, source, "
    "created_at, updated_at, effective_importance, stored_at, access_count, last_accessed_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SQL_GET = f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE id = ?"
_SQL_GET_ACTIVE = f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE id = ? AND deleted_at IS NULL"
_SQL_EXACT_DUPLICATE = (
    "SELECT id FROM insights WHERE content = ? AND deleted_at IS NULL ORDER BY created_at, rowid LIMIT 1"
)
_SQL_LATEST_SAME_SOURCE = (
    "SELECT id, created_at FROM insights WHERE deleted_at IS NULL AND source = ? AND id != ? "
    "ORDER BY created_at DESC, rowid DESC LIMIT 1"
)
_SQL_RECENT_SINCE = (
    "SELECT id, created_at FROM insights WHERE deleted_at IS NULL AND created_at >= ? AND id != ? "
    "ORDER BY created_at DESC, rowid DESC LIMIT ?"
)
_SQL_RECENT_SAME_SOURCE = (
    f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE deleted_at IS NULL AND source = ? AND id != ? "
    "ORDER BY created_at DESC, rowid DESC LIMIT ?"
)
# The derived insight_entities table (schema.py) holds one row per (entity, active insight), so an
# entity's newest insights are an index range (§4.5: exact, case-sensitive, newest first).
_SQL_WITH_ENTITY = (
    "SELECT e.insight_id FROM insight_entities e JOIN insights i ON i.id = e.insight_id "
    "WHERE e.entity = ? AND e.insight_id != ? AND i.deleted_at IS NULL "
    "ORDER BY e.created_at DESC, i.rowid DESC LIMIT ?"
)
_SQL_WITH_ENTITY_DATED = (
    "SELECT e.insight_id, e.created_at FROM insight_entities e JOIN insights i ON i.id = e.insight_id "
    "WHERE e.entity = ? AND e.insight_id != ? AND i.deleted_at IS NULL ORDER BY e.created_at DESC, i.rowid DESC LIMIT ?"
)
_SQL_KNOWN_ENTITIES = "SELECT DISTINCT entity FROM insight_entities"
_SQL_ACTIVE_COUNT = "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL"
_SQL_DELETED_COUNT = "SELECT COUNT(*) FROM insights WHERE deleted_at IS NOT NULL"
_SQL_BY_CATEGORY = "SELECT category, COUNT(*) FROM insights WHERE deleted_at IS NULL GROUP BY category ORDER BY category"
_SQL_TOP_ENTITIES = (
    "SELECT j.value, COUNT(DISTINCT i.id) AS n FROM insights i, json_each(i.entities) j "
    "WHERE i.deleted_at IS NULL AND j.type = 'text' GROUP BY j.value ORDER BY n DESC, j.value ASC LIMIT ?"
)
_SQL_SET_ENTITIES = "UPDATE insights SET entities = ? WHERE id = ?"
_SQL_SET_EI = "UPDATE insights SET effective_importance = ? WHERE id = ?"
_SQL_SOFT_DELETE = "UPDATE insights SET deleted_at = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL"
# An access adds to the count every reader reads: SQLite's "access_count + 1" made the text '7x' an 8 and
# a blob b'9' a 10, valid counts no access earned (immune to auto-prune from 3). A count holding no integer
# (store.numeric: read as 0) or a negative one (store.ranges: read as 0) is counted from 0. (An integer
# equals its CAST; text, a blob or a real does not: no typeof(), which PostgreSQL lacks.)
_ACCESS_READ = "CASE WHEN access_count = CAST(access_count AS INTEGER) AND access_count > 0 THEN access_count ELSE 0 END"
# The sum saturates at MAX_ACCESS_COUNT, PostgreSQL's integer column's ceiling and the most a draft carries:
# there "access_count + ?" past it failed the whole recall ("integer out of range"), and on SQLite a larger
# count made an export that import refuses. The comparison is written so that no step overflows a 32-bit
# integer (the amount is 1 or 3, never negative); a SQLite count an older writer let grow past the ceiling
# is written as the ceiling, the value its export carries.
_ACCESS_PLUS = (
    f"CASE WHEN {_ACCESS_READ} >= {MAX_ACCESS_COUNT} - ? THEN {MAX_ACCESS_COUNT} ELSE {_ACCESS_READ} + ? END"
)
_SQL_BUMP_ACCESS = (
    f"UPDATE insights SET access_count = {_ACCESS_PLUS}, last_accessed_at = ? WHERE id = ? AND deleted_at IS NULL"
)
_SQL_KEEP = (
    f"UPDATE insights SET access_count = {_ACCESS_PLUS}, last_accessed_at = ?, updated_at = ? "
    "WHERE id = ? AND deleted_at IS NULL"
)
_SQL_ALL_ACTIVE = f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE deleted_at IS NULL ORDER BY created_at, rowid"
# The unary plus keeps the planner off the importance range (whose rows it would sort, every one of
# them): it walks idx_insights_active_ei in the wanted order and stops at LIMIT.
_SQL_PRUNE_CANDIDATES = (
    f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE deleted_at IS NULL AND +importance < ? AND +access_count < ? "
    "AND COALESCE(stored_at, created_at) <= ? AND id NOT IN (SELECT value FROM json_each(?)) "
    "ORDER BY effective_importance ASC, created_at ASC, id ASC LIMIT ?"
)
# Whether any active row is past the grace at all (the candidates' COALESCE split in two, each a
# look-up of idx_insights_stored; the plus keeps the planner off the active-row indexes, which it
# would scan): a store written within the grace (a large import today) has no candidate, and the
# ordered walk above would visit every active row to find that out (2.8 s at 1M).
_SQL_ANY_PAST_GRACE = (
    "SELECT EXISTS(SELECT 1 FROM insights WHERE stored_at <= ? AND +deleted_at IS NULL) "
    "OR EXISTS(SELECT 1 FROM insights WHERE stored_at IS NULL AND +deleted_at IS NULL AND +created_at <= ?)"
)
# The walk above over the first ? active rows of its order only (the sub-query's LIMIT bounds the rows read):
# where candidates exist they are usually among the first few rows it reads.
_SQL_PRUNE_CANDIDATES_AHEAD = (
    f"SELECT {INSIGHT_COLUMNS} FROM (SELECT {INSIGHT_COLUMNS}, stored_at FROM insights WHERE deleted_at IS NULL "
    "ORDER BY effective_importance ASC, created_at ASC, id ASC LIMIT ?) AS w "
    "WHERE +importance < ? AND +access_count < ? AND COALESCE(stored_at, created_at) <= ? "
    "AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY effective_importance ASC, created_at ASC, id ASC LIMIT ?"
)
# When they are not, the candidates are read by their own index ranges: the distinct non-immune importances
# (idx_insights_active_importance), then access counts (idx_insights_prune_stored: deleted_at, importance,
# access_count, stored_at, ...), each the next entry after the last (a look-up, however many rows share a
# value), then each such group's rows past the grace. A store whose rows past the grace are all immune (kept, or important) costs
# these look-ups, not a walk of every active row in EI order on each write over the ceiling.
_SQL_PRUNE_FIRST_IMPORTANCE = (
    "SELECT importance FROM insights WHERE deleted_at IS NULL AND importance < ? ORDER BY importance LIMIT 1"
)
_SQL_PRUNE_NEXT_IMPORTANCE = (
    "SELECT importance FROM insights WHERE deleted_at IS NULL AND importance > ? AND importance < ? "
    "ORDER BY importance LIMIT 1"
)
_SQL_PRUNE_FIRST_ACCESS = (
    "SELECT access_count FROM insights WHERE deleted_at IS NULL AND importance = ? AND access_count < ? "
    "ORDER BY access_count LIMIT 1"
)
_SQL_PRUNE_NEXT_ACCESS = (
    "SELECT access_count FROM insights WHERE deleted_at IS NULL AND importance = ? AND access_count > ? "
    "AND access_count < ? ORDER BY access_count LIMIT 1"
)
# A group's rows past the grace: stamped ones by the stored_at range, unstamped ones (stored_at NULL,
# which COALESCE reads as created_at) by equality; the plus keeps the planner off created_at ranges.
_SQL_PRUNE_GROUP_STAMPED = (
    "SELECT id FROM insights WHERE deleted_at IS NULL AND importance = ? AND access_count = ? AND stored_at <= ? "
    "LIMIT ?"
)
_SQL_PRUNE_GROUP_UNSTAMPED = (
    "SELECT id FROM insights WHERE deleted_at IS NULL AND importance = ? AND access_count = ? AND stored_at IS NULL "
    "AND +created_at <= ? LIMIT ?"
)
_SQL_PRUNE_CANDIDATES_OF = (
    f"SELECT {', '.join('i.' + c.strip() for c in INSIGHT_COLUMNS.split(','))} FROM json_each(?) j "
    "CROSS JOIN insights i WHERE i.id = j.value AND i.deleted_at IS NULL AND +i.importance < ? "
    "AND +i.access_count < ? AND COALESCE(i.stored_at, i.created_at) <= ? "
    "AND i.id NOT IN (SELECT value FROM json_each(?)) "
    "ORDER BY i.effective_importance ASC, i.created_at ASC, i.id ASC LIMIT ?"
)
PRUNE_AHEAD_ROWS = 256  # active rows the first, bounded walk reads
PRUNE_RANGE_ROWS = 4096  # candidates read by their ranges and sorted at most; more: the whole walk
_PRUNE_GROUPS_MAX = 64  # distinct (importance, access_count) groups below immunity looked up at most

_SQL_BASIC_SEARCH = (
    f"SELECT {INSIGHT_COLUMNS} FROM insights WHERE deleted_at IS NULL AND content LIKE ? ESCAPE '\\' "
    "AND (? = '' OR category = ?) AND (? = '' OR source = ?) "
    "ORDER BY importance DESC, created_at DESC, id ASC LIMIT ?"
)


def load_list(raw: object) -> list[str]:
    """Decode a JSON string array column; anything malformed reads as empty (Go stores may be odd)."""
    if not raw:
        return []
    try:
        value = json.loads(str(raw))
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def row_to_insight(row: Sequence[Any]) -> Insight:
    """Build an Insight from a row selected with INSIGHT_COLUMNS.

    A malformed number (text, a blob, NULL, an infinity: a hand-edited or Go store) reads as its
    column's fallback (``store.numeric``), never a ValueError that fails every command touching the row;
    the type tests cost less than the ``int()`` calls they replace.
    """
    importance, access_count, ei = row[3], row[7], row[12]
    return Insight(
        id=str(row[0]),
        content=str(row[1]),
        category=str(row[2]),
        importance=importance if type(importance) is int else numeric.IMPORTANCE_FALLBACK,
        tags=load_list(row[4]),
        entities=load_list(row[5]),
        source=str(row[6]),
        access_count=access_count if type(access_count) is int else numeric.ACCESS_COUNT_FALLBACK,
        created_at=str(row[8]),
        updated_at=str(row[9]),
        deleted_at=None if row[10] is None else str(row[10]),
        last_accessed_at=None if row[11] is None else str(row[11]),
        effective_importance=numeric.real(ei, numeric.EFFECTIVE_IMPORTANCE_FALLBACK),
    )


def dump_list(values: Iterable[str]) -> str:
    """Encode a string list as the JSON column value (compact, raw UTF-8, like Go's encoder)."""
    return _encode_compact(list(values))


# One encoder for every list (json.dumps with options builds a new one per call: an import encodes
# two lists per insight).
_encode_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def insert_row(insight: Insight, stored_at: str) -> tuple[object, ...]:
    """The bound values of ``insert`` (for ``insert_many``)."""
    return (
        insight.id,
        insight.content,
        insight.category,
        insight.importance,
        dump_list(insight.tags) if insight.tags else "[]",
        dump_list(insight.entities) if insight.entities else "[]",
        insight.source,
        insight.created_at,
        insight.updated_at,
        insight.effective_importance,
        stored_at,
        insight.access_count,  # (0 and None but for an import that carries them: drafts.DraftInsight)
        insight.last_accessed_at,
    )


def insert(conn: apsw.Connection, insight: Insight, stored_at: str) -> None:
    conn.execute(_SQL_INSERT, insert_row(insight, stored_at))


def insert_many(conn: apsw.Connection, rows: list[tuple[object, ...]]) -> None:
    """Insert rows built by ``insert_row``, in order, in one statement."""
    if rows:
        conn.executemany(_SQL_INSERT, rows)


def get(conn: apsw.Connection, insight_id: str, *, active_only: bool = True) -> Insight | None:
    row = conn.execute(_SQL_GET_ACTIVE if active_only else _SQL_GET, (insight_id,)).fetchone()
    return None if row is None else row_to_insight(row)


def exact_duplicate(conn: apsw.Connection, content: str) -> str | None:
    """Return the id of an active insight with byte-identical content (Decision 5), if any."""
    row = conn.execute(_SQL_EXACT_DUPLICATE, (content,)).fetchone()
    return None if row is None else str(row[0])


def latest_same_source(conn: apsw.Connection, source: str, exclude_id: str) -> tuple[str, str] | None:
    row = conn.execute(_SQL_LATEST_SAME_SOURCE, (source, exclude_id)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def recent_since(conn: apsw.Connection, since: str, exclude_id: str, limit: int) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in conn.execute(_SQL_RECENT_SINCE, (since, exclude_id, limit))]


def recent_same_source(conn: apsw.Connection, source: str, exclude_id: str, limit: int) -> list[Insight]:
    return [row_to_insight(r) for r in conn.execute(_SQL_RECENT_SAME_SOURCE, (source, exclude_id, limit))]


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def with_entity(conn: apsw.Connection, entity: str, exclude_id: str, limit: int) -> list[str]:
    """Ids of active insights whose entities contain exactly ``entity``, newest first (§4.5)."""
    rows = conn.execute(_SQL_WITH_ENTITY, (entity, exclude_id, limit))
    return [str(r[0]) for r in rows]


def with_entity_dated(conn: apsw.Connection, entity: str, exclude_id: str, limit: int) -> list[tuple[str, str]]:
    """with_entity, with each id's created_at."""
    rows = conn.execute(_SQL_WITH_ENTITY_DATED, (entity, exclude_id, limit))
    return [(str(r[0]), str(r[1])) for r in rows]


# with_entity_dated for many entities in one statement: each entity's ``limit`` newest active
# insights (the same order: created_at DESC, rowid DESC), one index range per wanted entity. A bulk
# import asks this once per chunk instead of once per entity (a round trip each on PostgreSQL).
_SQL_WITH_ENTITIES_DATED = (
    "SELECT entity, insight_id, created_at FROM ("
    "SELECT e.entity AS entity, e.insight_id AS insight_id, e.created_at AS created_at, "
    "ROW_NUMBER() OVER (PARTITION BY e.entity ORDER BY e.created_at DESC, i.rowid DESC) AS k "
    "FROM json_each(?) j CROSS JOIN insight_entities e JOIN insights i ON i.id = e.insight_id "
    "WHERE e.entity = j.value AND i.deleted_at IS NULL) AS ranked WHERE k <= ? ORDER BY entity, k"
)


def with_entities_dated(conn: apsw.Connection, entities: list[str], limit: int) -> dict[str, list[tuple[str, str]]]:
    """with_entity_dated (no exclusion) for each of ``entities`` at once: entity → [(id, created_at)]
    newest first; an entity without active insights maps to []. Entities with a NUL are not
    allowed (json_each would cut them): the caller looks those up one by one."""
    out: dict[str, list[tuple[str, str]]] = {e: [] for e in entities}
    for start in range(0, len(entities), _ID_CHUNK):
        chunk = json.dumps(entities[start : start + _ID_CHUNK])
        for entity, insight_id, created_at in conn.execute(_SQL_WITH_ENTITIES_DATED, (chunk, limit)):
            out[str(entity)].append((str(insight_id), str(created_at)))
    return out


def known_entities(conn: apsw.Connection) -> set[str]:
    """The set of entity strings present on active insights (index-aware extraction, §4.3)."""
    return {str(r[0]) for r in conn.execute(_SQL_KNOWN_ENTITIES)}


# CROSS JOIN keeps the candidates as the outer loop: one index probe per candidate word.
_SQL_KNOWN_AMONG = (
    "SELECT DISTINCT j.value FROM json_each(?) j CROSS JOIN insight_entities e WHERE e.entity = j.value"
)


def known_among(conn: apsw.Connection, candidates: list[str]) -> set[str]:
    """Those of ``candidates`` that are entity strings of active insights (one probe each)."""
    if not candidates:
        return set()
    return {str(r[0]) for r in conn.execute(_SQL_KNOWN_AMONG, (json.dumps(candidates),))}


def active_count(conn: apsw.Connection) -> int:
    return int(scalar(conn, _SQL_ACTIVE_COUNT))


def deleted_count(conn: apsw.Connection) -> int:
    return int(scalar(conn, _SQL_DELETED_COUNT))


def count_by_category(conn: apsw.Connection) -> dict[str, int]:
    return {str(r[0]): int(r[1]) for r in conn.execute(_SQL_BY_CATEGORY)}


# The entity lookup table holds active rows only; a Go store opened read-only has no such table.
_SQL_TOP_ENTITIES_INDEXED = (
    "SELECT entity, COUNT(DISTINCT insight_id) AS n FROM insight_entities GROUP BY entity ORDER BY n DESC, entity ASC "
    "LIMIT ?"
)
_SQL_HAS_ENTITY_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'insight_entities'"


def top_entities(conn: apsw.Connection, limit: int) -> list[tuple[str, int]]:
    """Entities by number of distinct active insights (status, §3.11), from the lookup table when present."""
    indexed = conn.execute(_SQL_HAS_ENTITY_TABLE).fetchone() is not None
    sql = _SQL_TOP_ENTITIES_INDEXED if indexed else _SQL_TOP_ENTITIES
    return [(str(r[0]), int(r[1])) for r in conn.execute(sql, (limit,))]


def set_entities(conn: apsw.Connection, insight_id: str, entities: list[str]) -> None:
    conn.execute(_SQL_SET_ENTITIES, (dump_list(entities), insight_id))


def set_effective_importance(conn: apsw.Connection, values: Iterable[tuple[float, str]]) -> None:
    conn.executemany(_SQL_SET_EI, list(values))


def soft_delete(conn: apsw.Connection, insight_id: str, now: str) -> bool:
    conn.execute(_SQL_SOFT_DELETE, (now, now, insight_id))
    return conn.changes() > 0


def bump_access(conn: apsw.Connection, ids: Iterable[str], now: str, amount: int = 1) -> None:
    conn.executemany(_SQL_BUMP_ACCESS, [(amount, amount, now, i) for i in ids])


def keep(conn: apsw.Connection, insight_id: str, now: str, amount: int) -> bool:
    conn.execute(_SQL_KEEP, (amount, amount, now, now, insight_id))
    return conn.changes() > 0


def all_active(conn: apsw.Connection) -> list[Insight]:
    return [row_to_insight(r) for r in conn.execute(_SQL_ALL_ACTIVE)]


def prune_candidates(
    conn: apsw.Connection, *, max_importance: int, max_access: int, stored_before: str, exclude: list[str], limit: int
) -> list[Insight]:
    """Active, non-immune insights stored before the grace cut-off, lowest stored EI first (§4.8).

    Three ways to the same rows, cheapest first: the first ``PRUNE_AHEAD_ROWS`` active rows in EI
    order (where candidates are, they are usually there); else every candidate read by its index
    ranges and sorted, when there are fewer than ``PRUNE_RANGE_ROWS`` (none at all: every row past
    the grace is immune); else the walk in EI order until ``limit`` are found.
    """
    if limit <= 0 or not scalar(conn, _SQL_ANY_PAST_GRACE, (stored_before, stored_before)):
        return []
    excluded = json.dumps(exclude)
    rows = conn.execute(
        _SQL_PRUNE_CANDIDATES_AHEAD,
        (PRUNE_AHEAD_ROWS, max_importance, max_access, stored_before, excluded, limit),
    ).fetchall()
    if len(rows) < limit:
        ids = _prune_range_ids(conn, max_importance, max_access, stored_before)
        if ids is not None:
            if not ids:
                return []
            rows = conn.execute(
                _SQL_PRUNE_CANDIDATES_OF,
                (json.dumps(ids), max_importance, max_access, stored_before, excluded, limit),
            ).fetchall()
        else:
            rows = conn.execute(
                _SQL_PRUNE_CANDIDATES, (max_importance, max_access, stored_before, excluded, limit)
            ).fetchall()
    return [row_to_insight(r) for r in rows]


def _prune_range_ids(conn: apsw.Connection, max_importance: int, max_access: int, stored_before: str) -> list[str] | None:
    """The ids of every active, non-immune row past the grace (excluded ones too), read by index
    ranges; None when there are ``PRUNE_RANGE_ROWS`` or more of them,
    or more groups than ``_PRUNE_GROUPS_MAX`` (the caller walks instead)."""
    ids: list[str] = []
    groups = 0
    importance = _first(conn, _SQL_PRUNE_FIRST_IMPORTANCE, (max_importance,))
    while importance is not None:
        access = _first(conn, _SQL_PRUNE_FIRST_ACCESS, (importance, max_access))
        while access is not None:
            groups += 1
            if groups > _PRUNE_GROUPS_MAX:
                return None
            for sql in (_SQL_PRUNE_GROUP_STAMPED, _SQL_PRUNE_GROUP_UNSTAMPED):
                room = PRUNE_RANGE_ROWS - len(ids)
                ids += [str(r[0]) for r in conn.execute(sql, (importance, access, stored_before, room))]
                if len(ids) >= PRUNE_RANGE_ROWS:
                    return None
            access = _first(conn, _SQL_PRUNE_NEXT_ACCESS, (importance, access, max_access))
        importance = _first(conn, _SQL_PRUNE_NEXT_IMPORTANCE, (importance, max_importance))
    return ids


def _first(conn: apsw.Connection, sql: str, params: tuple[object, ...]) -> Any:
    """The first column of the query's first row; None when it has none."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def basic_search(conn: apsw.Connection, query: str, category: str, source: str, limit: int) -> list[Insight]:
    """Substring match over content (``recall --basic``) with LIKE wildcards escaped."""
    if len(query.encode("utf-8")) > MAX_CONTENT_BYTES:
        # no stored content is that long (every writer checks it), so nothing matches; asked anyway,
        # SQLite refuses a LIKE pattern past 50,000 bytes with a database error ("pattern too complex")
        return []
    pattern = "%" + _like_literal(query) + "%"
    rows = conn.execute(_SQL_BASIC_SEARCH, (pattern, category, category, source, source, limit))
    return [row_to_insight(r) for r in rows]


# --- bulk import and export (contract §3.15, §4.4) ----------------------------------------------

_SQL_SOURCE_TIMELINE = "SELECT id FROM insights WHERE deleted_at IS NULL AND source = ? ORDER BY created_at, rowid"
_SQL_ACTIVE_EMBEDDINGS = "SELECT id, embedding FROM insights WHERE deleted_at IS NULL AND embedding IS NOT NULL"


# CROSS JOIN fixes the loop order: one index look-up per wanted value, never a pass over every
# active row (the planner otherwise prefers the deleted_at IS NULL range).
_SQL_ACTIVE_BY_CONTENT = (
    "SELECT i.content, i.id FROM json_each(?) j CROSS JOIN insights i "
    "WHERE i.content = j.value AND i.deleted_at IS NULL ORDER BY i.created_at DESC, i.rowid DESC"
)
_SQL_GET_MANY = (
    f"SELECT {', '.join('i.' + c.strip() for c in INSIGHT_COLUMNS.split(','))} "
    "FROM json_each(?) j CROSS JOIN insights i WHERE i.id = j.value AND i.deleted_at IS NULL"
)
_SQL_EXISTING = "SELECT id FROM insights WHERE id IN (SELECT value FROM json_each(?))"
_SQL_EI_INPUTS_MANY = (
    "SELECT i.id, i.importance, i.access_count, i.last_accessed_at, i.created_at "
    "FROM json_each(?) j CROSS JOIN insights i WHERE i.id = j.value AND i.deleted_at IS NULL"
)
_ID_CHUNK = 5000


def exact_duplicates(conn: apsw.Connection, contents: list[str]) -> dict[str, str]:
    """exact_duplicate for many contents at once: content → id, for those that have one."""
    found: dict[str, str] = {}
    for content, insight_id in conn.execute(_SQL_ACTIVE_BY_CONTENT, (json.dumps(contents),)):
        found[str(content)] = str(insight_id)  # rows come newest first: the oldest (created_at, rowid) wins
    return found


def existing_ids(conn: apsw.Connection, ids: Iterable[str]) -> set[str]:
    """The ids among ``ids`` that have a row, active or not (what a foreign key requires)."""
    wanted = list(dict.fromkeys(ids))
    out: set[str] = set()
    for start in range(0, len(wanted), _ID_CHUNK):
        rows = conn.execute(_SQL_EXISTING, (json.dumps(wanted[start : start + _ID_CHUNK]),))
        out.update(str(r[0]) for r in rows)
    return out


def get_many(conn: apsw.Connection, ids: list[str]) -> list[Insight]:
    """The active insights among ``ids`` (in no particular order)."""
    out: list[Insight] = []
    for start in range(0, len(ids), _ID_CHUNK):
        rows = conn.execute(_SQL_GET_MANY, (json.dumps(ids[start : start + _ID_CHUNK]),))
        out.extend(row_to_insight(r) for r in rows)
    return out


def ei_inputs_many(conn: apsw.Connection, ids: list[str]) -> list[tuple[str, int, int, str | None, str]]:
    """(id, importance, access_count, last_accessed_at, created_at) of the active insights among
    ``ids`` (in no particular order): what effective importance needs, without decoding rows."""
    out: list[tuple[str, int, int, str | None, str]] = []
    for start in range(0, len(ids), _ID_CHUNK):
        out.extend(conn.execute(_SQL_EI_INPUTS_MANY, (json.dumps(ids[start : start + _ID_CHUNK]),)))
    return out


def source_timeline(conn: apsw.Connection, source: str) -> list[str]:
    """Ids of the source's active insights, created_at ASC then rowid ASC (backbone order, §4.4)."""
    return [str(r[0]) for r in conn.execute(_SQL_SOURCE_TIMELINE, (source,))]


def active_embeddings(conn: apsw.Connection) -> Iterator[tuple[str, bytes]]:
    """(id, raw blob) of every active insight that has an embedding."""
    for r in conn.execute(_SQL_ACTIVE_EMBEDDINGS):
        if isinstance(r[1], bytes):  # text in the column is no vector (blob.decode)
            yield str(r[0]), bytes(r[1])


# --- the write path's token scans (engine/scan.py) -----------------------------------------------

_SQL_SCAN_ROW = "SELECT id, content, category, importance, created_at, tags, entities, deleted_at FROM insights WHERE id = ?"
_SQL_SCAN_ACTIVE = (
    "SELECT id, content, category, importance, created_at, tags, entities FROM insights WHERE deleted_at IS NULL"
)
_SQL_ANY_ACTIVE_CONTENT = "SELECT content FROM insights WHERE deleted_at IS NULL LIMIT 1"


def scan_row(conn: apsw.Connection, insight_id: str) -> tuple[object, ...] | None:
    """(id, content, category, importance, created_at, tags, entities, deleted_at) of one insight."""
    return conn.execute(_SQL_SCAN_ROW, (insight_id,)).fetchone()


def scan_rows(conn: apsw.Connection) -> Iterator[tuple[object, ...]]:
    """(id, content, category, importance, created_at, tags, entities) of every active insight."""
    return iter(conn.execute(_SQL_SCAN_ACTIVE))


def any_active_content(conn: apsw.Connection) -> str | None:
    """The content of some active insight (the embed command's probe text), or None."""
    row = conn.execute(_SQL_ANY_ACTIVE_CONTENT).fetchone()
    return None if row is None else str(row[0])


_SQL_ANY_EMBEDDED_CONTENT = "SELECT content FROM insights WHERE deleted_at IS NULL AND embedding IS NOT NULL LIMIT 1"


def any_embedded_content(conn: apsw.Connection) -> str | None:
    """The content of some active insight that holds a vector (one the provider embedded before), or None."""
    row = conn.execute(_SQL_ANY_EMBEDDED_CONTENT).fetchone()
    return None if row is None else str(row[0])


_SQL_ANY_ACTIVE_BLOB = "SELECT embedding FROM insights WHERE embedding IS NOT NULL AND deleted_at IS NULL LIMIT 1"


def any_active_blob(conn: apsw.Connection) -> bytes | None:
    """The embedding blob of some active insight (its length tells a Go store's dimension), or None."""
    row = conn.execute(_SQL_ANY_ACTIVE_BLOB).fetchone()
    # text in the column (a hand-edited store) is no blob: decoded as no vector, like a mis-sized one
    return None if row is None or not isinstance(row[0], bytes) else bytes(row[0])
