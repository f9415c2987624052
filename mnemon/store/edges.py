"""SQL for the ``edges`` table (contract §1, §4.4-4.7, §4.11).

Writes are INSERT OR REPLACE on the (source, target, type) key, so re-linking replaces weight and
metadata. Deletes are physical (only the insights are soft-deleted).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import apsw

from mnemon.records import Edge
from mnemon.store import counts, numeric
from mnemon.store.connection import scalar

_SQL_UPSERT = (
    "INSERT OR REPLACE INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_SQL_INSERT = (
    "INSERT INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?)"
)
_SQL_DELETE_TOUCHING = "DELETE FROM edges WHERE source_id = ? OR target_id = ?"
_SQL_HAS_KEY = "SELECT COUNT(*) FROM edges WHERE source_id = ? AND target_id = ? AND edge_type = ?"
_SQL_DELETE_PAIR = "DELETE FROM edges WHERE source_id = ? AND target_id = ? AND edge_type = ?"
_SQL_COUNT_TOUCHING = (
    "SELECT (SELECT COUNT(*) FROM edges WHERE source_id = ?) + (SELECT COUNT(*) FROM edges WHERE target_id = ?)"
)
_SQL_COUNT = "SELECT COUNT(*) FROM edges"
# One index range per id on each side: the primary key for source_id, idx_edges_target_type for target_id.
_SQL_COUNT_TOUCHING_MANY = (
    "SELECT id, SUM(n) FROM ("
    "SELECT j.value AS id, (SELECT COUNT(*) FROM edges WHERE source_id = j.value) AS n FROM json_each(?) j "
    "UNION ALL "
    "SELECT j.value AS id, (SELECT COUNT(*) FROM edges WHERE target_id = j.value) AS n FROM json_each(?) j"
    ") GROUP BY id"
)
_ID_CHUNK = 5000
SCAN_SHARE = 4  # count_touching_many scans every edge when asked for 1/SCAN_SHARE of the insights or more
_SQL_COUNTS_BY_NODE = (
    "SELECT id, SUM(n) FROM (SELECT source_id AS id, COUNT(*) AS n FROM edges GROUP BY source_id "
    "UNION ALL SELECT target_id AS id, COUNT(*) AS n FROM edges GROUP BY target_id) GROUP BY id"
)
_SQL_ALL = "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges ORDER BY rowid"
_SQL_TOUCHING = (
    "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges "
    "WHERE source_id = ? OR target_id = ? ORDER BY rowid"
)
_SQL_SUPERSEDED = "SELECT DISTINCT target_id FROM edges WHERE edge_type = 'supersedes'"


_META_CACHE: dict[tuple[tuple[str, str], ...], str] = {}
_META_CACHE_MAX = 4096  # entity names, sub-types, reasons: a bulk write repeats a few metadata maps


def dump_metadata(metadata: dict[str, str]) -> str:
    """Encode metadata as Go does for a map: keys sorted, compact, raw UTF-8."""
    key = tuple(metadata.items())
    try:
        text = _META_CACHE.get(key)
    except TypeError:  # an unhashable value: encode without the cache
        return json.dumps(metadata, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if text is None:
        text = json.dumps(metadata, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        if len(_META_CACHE) >= _META_CACHE_MAX:
            _META_CACHE.clear()
        _META_CACHE[key] = text
    return text


def load_metadata(raw: object) -> dict[str, str]:
    try:
        value = json.loads(str(raw)) if raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _row_to_edge(row: tuple[object, ...], metadata: dict[str, str] | None = None) -> Edge:
    """An edge row as an Edge; ``metadata``: the row's map already decoded (all_edges shares them)."""
    # a malformed weight (text, NULL, an infinity) reads as store.numeric's fallback, not a ValueError
    weight = numeric.real(row[3], numeric.WEIGHT_FALLBACK)
    return Edge(str(row[0]), str(row[1]), str(row[2]), weight,
                load_metadata(row[4]) if metadata is None else metadata, str(row[5]))


def upsert(conn: apsw.Connection, edge: Edge) -> None:
    conn.execute(
        _SQL_UPSERT,
        (edge.source_id, edge.target_id, edge.edge_type, edge.weight, dump_metadata(edge.metadata), edge.created_at),
    )


def delete_touching(conn: apsw.Connection, insight_id: str) -> int:
    conn.execute(_SQL_DELETE_TOUCHING, (insight_id, insight_id))
    return conn.changes()


def delete_pair(conn: apsw.Connection, source_id: str, target_id: str, edge_type: str) -> None:
    conn.execute(_SQL_DELETE_PAIR, (source_id, target_id, edge_type))


def count_touching(conn: apsw.Connection, insight_id: str) -> int:
    """Edge rows as source plus rows as target (a bidirectional link counts 2, §4.8)."""
    return int(scalar(conn, _SQL_COUNT_TOUCHING, (insight_id, insight_id)))


def count_all(conn: apsw.Connection) -> int:
    return int(scalar(conn, _SQL_COUNT))


def counts_by_node(conn: apsw.Connection) -> dict[str, int]:
    return {str(r[0]): int(r[1]) for r in conn.execute(_SQL_COUNTS_BY_NODE)}


def all_edges(conn: apsw.Connection) -> list[Edge]:
    """Every edge row, for readers that never change an edge's metadata (export, viz): edges whose stored
    metadata text is the same share one decoded map. A store repeats few (a backbone's two, an entity's
    name, a reason), so each is decoded once, not once per edge. An export of 10k insights (352k edges)
    that carries every map took 1.38x the CPU of the reason-only export decoding per edge, 0.78x with the
    maps shared (5 pairs each), and 383 MiB at its peak instead of 440."""
    decoded: dict[object, dict[str, str]] = {}
    out: list[Edge] = []
    for row in conn.execute(_SQL_ALL):
        raw = row[4]
        metadata = decoded.get(raw)
        if metadata is None:
            metadata = decoded[raw] = load_metadata(raw)
        out.append(_row_to_edge(row, metadata))
    return out


def touching(conn: apsw.Connection, insight_id: str) -> list[Edge]:
    return [_row_to_edge(r) for r in conn.execute(_SQL_TOUCHING, (insight_id, insight_id))]


def superseded_ids(conn: apsw.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute(_SQL_SUPERSEDED)}


def upsert_many(conn: apsw.Connection, edges: Iterable[Edge]) -> None:
    conn.executemany(
        _SQL_UPSERT,
        [(e.source_id, e.target_id, e.edge_type, e.weight, dump_metadata(e.metadata), e.created_at) for e in edges],
    )


def upsert_sorted(conn: apsw.Connection, edges: Iterable[Edge]) -> None:
    """Write edges in key order (each b-tree is then walked once, left to right).

    Only for edges whose keys are distinct: with a repeated key the later write must win, and
    sorting would decide that by the other fields instead.
    """
    rows = [(e.source_id, e.target_id, e.edge_type, e.weight, dump_metadata(e.metadata), e.created_at) for e in edges]
    rows.sort()  # distinct keys: whole-tuple order is key order, without building key tuples
    conn.executemany(_SQL_UPSERT, rows)


def upsert_row(conn: apsw.Connection, row: tuple[str, str, str, float, str, str]) -> None:
    """upsert for a row built as ``edge_row`` builds it (metadata already encoded)."""
    conn.execute(_SQL_UPSERT, row)


def edge_row(e: Edge) -> tuple[str, str, str, float, str, str]:
    """The bound values of an upsert of ``e`` (for ``upsert_rows_split``)."""
    return (e.source_id, e.target_id, e.edge_type, e.weight, dump_metadata(e.metadata), e.created_at)


def upsert_rows_split(conn: apsw.Connection, rows: list[tuple[str, str, str, float, str, str]], fresh: list[bool]) -> None:
    """upsert_many for rows built as ``edge_row`` builds them, in their order (a repeated key's
    last row wins), where ``fresh[k]`` says no row can have row k's key yet and it appears once
    in ``rows`` (a false True would fail the write on PostgreSQL and miscount on SQLite, a false
    False only costs time).

    SQLite replaces a missing key as fast as it inserts one: one upsert of all, counted once
    (``counts.edge_inserts_counted``): the fresh rows are new keys, the others' keys are probed
    first. A PostgreSQL store writes the fresh rows as a COPY and upserts only the rest, in the
    same rowid order (``PgConnection.upsert_split``).
    """
    split = getattr(conn, "upsert_split", None)
    with counts.edge_inserts_counted(conn) as counting:
        if counting:
            added = _new_keys(conn, rows, fresh)
            conn.executemany(_SQL_UPSERT, rows)
            counts.add_edges(conn, added)
        elif split is None or True not in fresh:
            conn.executemany(_SQL_UPSERT, rows)
        else:
            split(_SQL_UPSERT, rows, fresh)


def _new_keys(conn: apsw.Connection, rows: list[tuple[str, str, str, float, str, str]], fresh: list[bool]) -> int:
    """How many distinct keys of ``rows`` no edge row has yet: the fresh rows, plus the other
    rows' distinct keys that a look-up (one primary-key probe each) does not find."""
    probed = {(r[0], r[1], r[2]): None for r, f in zip(rows, fresh) if not f}
    present = sum(n for (n,) in conn.executemany(_SQL_HAS_KEY, list(probed))) if probed else 0
    return len(rows) - fresh.count(False) + len(probed) - present


_SQL_INSERT_MISSING = (
    "INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


def insert_missing_rows(conn: apsw.Connection, rows: list[tuple[str, str, str, float, str, str]]) -> int:
    """Insert the rows (as ``edge_row`` builds them) whose keys no edge has yet, a repeated key's
    last row; every edge that exists stays as stored. Returns how many rows were inserted.

    An import's explicit edge between two insights that were there before it: re-importing an
    export (every engine edge in it) into a store that shares its memories must not rewrite the
    stored edges' weights and metadata (the backbone, an entity's name), which recall reads."""
    last = list({(r[0], r[1], r[2]): r for r in rows}.values())  # key order kept, the last row per key
    if not last:
        return 0
    with counts.edge_inserts_counted(conn) as counting:
        if counting:
            new = _new_keys(conn, last, [False] * len(last))
            conn.executemany(_SQL_INSERT_MISSING, last)
            counts.add_edges(conn, new)
            return new
        conn.executemany(_SQL_INSERT_MISSING, last)
        return conn.changes()


def insert_new_rows_sorted(conn: apsw.Connection, rows: list[tuple[str, str, str, float, str, str]]) -> None:
    """upsert_many, sorted, for rows whose keys no row has yet (each names an insight written in
    this transaction): plain INSERTs, which a PostgreSQL store streams with one COPY. On SQLite
    the edge counter is bumped once for all of them (a key that exists fails the statement, and
    the caller's savepoint with it), not by a trigger per row."""
    rows.sort()  # distinct keys: whole-tuple order is key order
    with counts.edge_inserts_counted(conn) as counting:
        conn.executemany(_SQL_INSERT, rows)
        if counting:
            counts.add_edges(conn, len(rows))


def count_touching_many(conn: apsw.Connection, ids: list[str]) -> dict[str, int]:
    """count_touching for many ids at once (ids absent from the result touch no edge).

    Asked for a large share of the store's insights (an import's touched nodes), one pass over
    the edges (``counts_by_node``) is cheaper than two index ranges per id: the ranges visit about
    the same rows, each at random, and rows written in the same transaction cannot be counted
    from the index alone on PostgreSQL (four times slower there than after the commit).
    """
    if len(ids) * SCAN_SHARE >= _insight_rows(conn):
        wanted = set(ids)
        return {k: n for k, n in counts_by_node(conn).items() if k in wanted}
    out: dict[str, int] = {}
    for start in range(0, len(ids), _ID_CHUNK):
        chunk = json.dumps(ids[start : start + _ID_CHUNK])
        for insight_id, n in conn.execute(_SQL_COUNT_TOUCHING_MANY, (chunk, chunk)):
            out[str(insight_id)] = int(n)
    return out


def _insight_rows(conn: apsw.Connection) -> int:
    """Insight rows, active and deleted, from the trigger-kept counters (unknown: never a scan)."""
    if not counts.available(conn):
        return 1 << 62
    return counts.active_count(conn) + counts.deleted_count(conn)
