"""The SQL of ``mnemon doctor``: consistency checks over one store database and the one repair.

Each check returns a list of problems (empty means clean) so the engine can phrase the report;
the only write is ``remove_dangling_edges``, run inside the caller's write transaction. Checks
read in bounded, indexed queries except ``PRAGMA integrity_check`` and the embedding scan, which
are inherently whole-database (doctor is an explicit, occasional command). Only this package
imports apsw; nothing here imports the engine or the CLI.
"""

from __future__ import annotations

import math
import struct

import apsw

from mnemon.records import CATEGORIES, OPLOG_KEEP

PROBLEM_SAMPLE = 20  # problems listed per check; the count is always exact

_SQL_DANGLING_EDGES = """
SELECT e.source_id, e.target_id, e.edge_type FROM edges AS e
LEFT JOIN insights AS s ON s.id = e.source_id
LEFT JOIN insights AS t ON t.id = e.target_id
WHERE s.id IS NULL OR t.id IS NULL OR s.deleted_at IS NOT NULL OR t.deleted_at IS NOT NULL
ORDER BY e.rowid"""
_SQL_DELETE_DANGLING_EDGES = """
DELETE FROM edges WHERE rowid IN (
    SELECT e.rowid FROM edges AS e
    LEFT JOIN insights AS s ON s.id = e.source_id
    LEFT JOIN insights AS t ON t.id = e.target_id
    WHERE s.id IS NULL OR t.id IS NULL OR s.deleted_at IS NOT NULL OR t.deleted_at IS NOT NULL
)"""
_SQL_EDGE_VALUES = (
    "SELECT source_id, target_id, edge_type FROM edges "
    "WHERE NOT (weight BETWEEN 0.0 AND 1.0) OR json_valid(metadata) = 0 ORDER BY rowid"
)
_SQL_BAD_INSIGHTS = (
    "SELECT id FROM insights WHERE id = '' OR content = '' OR content IS NULL "
    "OR created_at IS NULL OR created_at = '' OR updated_at IS NULL "
    "OR importance NOT BETWEEN 1 AND 5 OR json_valid(tags) = 0 OR json_valid(entities) = 0 "
    "OR json_type(tags) != 'array' OR json_type(entities) != 'array' "
    "OR category NOT IN ({categories}) ORDER BY rowid"
)
_SQL_EMBEDDINGS = "SELECT id, embedding FROM insights WHERE embedding IS NOT NULL ORDER BY rowid"
_SQL_OPLOG_COUNT = "SELECT COUNT(*), MIN(id), MAX(id) FROM oplog"
_SQL_OPLOG_BAD_ROWS = (
    "SELECT id FROM oplog WHERE operation IS NULL OR operation = '' OR created_at IS NULL OR created_at = '' "
    "ORDER BY id LIMIT ?"
)
_SQL_OPLOG_SEQUENCE = "SELECT seq FROM sqlite_sequence WHERE name = 'oplog'"
_SQL_META = "SELECT key, value FROM mnemon_meta"
_SQL_HAS_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"

_WIDTH = {"float64": ("<d", 8), "float32": ("<f", 4)}


def integrity(conn: apsw.Connection) -> list[str]:
    """Rows of ``PRAGMA integrity_check`` other than the single ``ok``."""
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
    except apsw.Error as exc:
        return [f"integrity_check could not run: {exc}"]  # damaged beyond what the pragma can walk
    return [] if rows == ["ok"] else rows


def foreign_keys(conn: apsw.Connection) -> list[str]:
    """Rows of ``PRAGMA foreign_key_check`` as ``table rowid -> parent``."""
    return [f"{r[0]} row {r[1]} -> {r[2]}" for r in conn.execute("PRAGMA foreign_key_check")]


def dangling_edges(conn: apsw.Connection) -> list[tuple[str, str, str]]:
    """Edges whose source or target is missing or soft-deleted (forget and prune drop them)."""
    return [(str(r[0]), str(r[1]), str(r[2])) for r in conn.execute(_SQL_DANGLING_EDGES)]


def remove_dangling_edges(conn: apsw.Connection) -> int:
    """Delete every dangling edge inside the caller's transaction; return how many."""
    conn.execute(_SQL_DELETE_DANGLING_EDGES)
    return conn.changes()


def bad_edge_values(conn: apsw.Connection) -> list[tuple[str, str, str]]:
    """Edges with a weight outside [0, 1] or metadata that is not JSON."""
    return [(str(r[0]), str(r[1]), str(r[2])) for r in conn.execute(_SQL_EDGE_VALUES)]


def bad_insights(conn: apsw.Connection) -> list[str]:
    """Ids of half-written or out-of-contract insight rows (empty content, bad JSON, category...)."""
    # The categories are our own constants, not user input; the legacy 'narrative' rows are soft-deleted, not removed.
    categories = ", ".join(f"'{c}'" for c in (*CATEGORIES, "narrative"))
    return [str(r[0]) for r in conn.execute(_SQL_BAD_INSIGHTS.format(categories=categories))]


def bad_embeddings(conn: apsw.Connection, fmt: str) -> list[str]:
    """Ids whose embedding blob is mis-sized, non-finite, or of another dimension than the majority."""
    code, width = _WIDTH[fmt]
    problems: list[str] = []
    dims: dict[int, list[str]] = {}
    for insight_id, raw in conn.execute(_SQL_EMBEDDINGS):
        if not isinstance(raw, bytes):  # text or a number (a hand-edited store): bytes() of it was a TypeError
            problems.append(f"{insight_id}: {type(raw).__name__} where a blob belongs")
            continue
        data = bytes(raw)
        if not data or len(data) % width:
            problems.append(f"{insight_id}: blob of {len(data)} bytes")
            continue
        values = struct.unpack(f"<{len(data) // width}{code[1]}", data)
        if not all(math.isfinite(v) for v in values):
            problems.append(f"{insight_id}: non-finite value")
            continue
        dims.setdefault(len(values), []).append(str(insight_id))
    if len(dims) > 1:
        # Several dimensions mean a model switch without `embed --all`; name the minority rows.
        majority = max(dims, key=lambda d: (len(dims[d]), d))
        for dim, ids in sorted(dims.items()):
            if dim != majority:
                problems.extend(f"{i}: dimension {dim}, store majority {majority}" for i in ids)
    return problems


def oplog_problems(conn: apsw.Connection) -> list[str]:
    """Oplog rows without operation or time, more rows than the trim keeps, or a sequence behind the ids."""
    problems: list[str] = []
    row = conn.execute(_SQL_OPLOG_COUNT).fetchone()
    count, high = (int(row[0]), row[2]) if row else (0, None)
    if count > OPLOG_KEEP:
        problems.append(f"{count} rows, the trim keeps {OPLOG_KEEP}")
    problems.extend(
        f"row {r[0]}: missing operation or time" for r in conn.execute(_SQL_OPLOG_BAD_ROWS, (PROBLEM_SAMPLE,))
    )
    seq_row = conn.execute(_SQL_OPLOG_SEQUENCE).fetchone()
    if high is not None and (seq_row is None or int(seq_row[0]) < int(high)):
        problems.append(f"AUTOINCREMENT sequence {seq_row[0] if seq_row else None} behind max id {high}")
    return problems


def meta_problems(conn: apsw.Connection, schema_version: int) -> list[str]:
    """The bookkeeping table: schema version, an integer generation, a known blob format."""
    if conn.execute(_SQL_HAS_TABLE, ("mnemon_meta",)).fetchone() is None:
        return ["mnemon_meta table missing (store never opened writable by mnemon)"]
    meta = {str(k): str(v) for k, v in conn.execute(_SQL_META)}
    problems = []
    if meta.get("schema") != str(schema_version):
        problems.append(f"schema version {meta.get('schema')!r}, expected {schema_version}")
    generation = meta.get("generation", "")
    if not (generation.isascii() and generation.isdigit()):  # ("²".isdigit() is true)
        problems.append(f"generation {meta.get('generation')!r} is not a counter")
    if meta.get("embedding_format", "float64") not in _WIDTH:
        problems.append(f"unknown embedding format {meta.get('embedding_format')!r}")
    return problems


def describe_edges(rows: list[tuple[str, str, str]]) -> list[str]:
    return [f"{s} -> {t} ({kind})" for s, t, kind in rows]


def json_detail(problems: list[str]) -> str:
    """A one-line summary for the report: the count plus the first few problems."""
    if not problems:
        return "ok"
    shown = "; ".join(problems[:PROBLEM_SAMPLE])
    more = f" (+{len(problems) - PROBLEM_SAMPLE} more)" if len(problems) > PROBLEM_SAMPLE else ""
    return f"{len(problems)} problem(s): {shown}{more}"


__all__ = [
    "bad_edge_values",
    "bad_embeddings",
    "bad_insights",
    "dangling_edges",
    "describe_edges",
    "foreign_keys",
    "integrity",
    "json_detail",
    "meta_problems",
    "oplog_problems",
    "remove_dangling_edges",
]
