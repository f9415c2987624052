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
from collections.abc import Callable

import apsw

from mnemon.records import OPLOG_KEEP
from mnemon.validate import stored_text_problems

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
# Rows out of the contract in a way no repair can undo: what a command reads there is no value the row was
# meant to hold (empty content, a missing creation time, no category at all, a timestamp that is no text).
# The columns a repair can write (importance, access_count, tags, entities, a category or a stamp that is text)
# are store.ranges' and store.numeric's. A timestamp is asked only whether it is text: on SQLite a TEXT column keeps a blob as
# given, which equals no CAST of it to text (PostgreSQL's text columns hold nothing else).
_TIMESTAMPS = ("created_at", "updated_at", "deleted_at", "last_accessed_at", "stored_at")
_SQL_INSIGHT_PROBLEMS = (
    f"SELECT id, content, category, {', '.join(_TIMESTAMPS)} FROM insights "
    "WHERE id = '' OR content = '' OR content IS NULL OR content != CAST(content AS TEXT) "
    "OR created_at IS NULL OR updated_at IS NULL OR category IS NULL OR category != CAST(category AS TEXT) "
    + "".join(f"OR {c} != CAST({c} AS TEXT) " for c in _TIMESTAMPS)
    + "ORDER BY rowid"
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


def shown(value: object) -> str:
    """A stored value as a report shows it: NULL, a blob by its size, text quoted (cut at 40 characters)."""
    if value is None:
        return "NULL"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<blob of {len(value)} bytes>"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def insight_problems(conn: apsw.Connection) -> list[str]:
    """Each out-of-contract value of an insight row that no repair rewrites, named with the row and
    the value (``store.ranges`` and ``store.numeric`` name those a repair rewrites)."""
    out: list[str] = []
    for row in conn.execute(_SQL_INSIGHT_PROBLEMS):
        where = f"insight {shown(row[0]) if not isinstance(row[0], str) else row[0]}"
        content, category, stamps = row[1], row[2], dict(zip(_TIMESTAMPS, row[3:]))
        found = []
        if row[0] == "":
            found.append("id is empty")
        if content is None:  # (an empty text is text_problems', with the rest of what no draft carries)
            found.append("content is empty")
        elif not isinstance(content, str):
            found.append(f"content {shown(content)} is not text")
        for name in ("created_at", "updated_at"):
            if stamps[name] is None:
                found.append(f"{name} is missing")
        if category is None:
            found.append("category is missing")
        elif not isinstance(category, str):
            found.append(f"category {shown(category)} is not text")
        found += [f"{name} {shown(v)} is not text" for name, v in stamps.items() if v is not None and not isinstance(v, str)]
        out += [f"{where}: {problem}; not repaired" for problem in found]
    return out


# Every row's text is read: no SQL that runs on both backends finds a NUL (a PostgreSQL text column holds none,
# SQLite's may), and a whole-table read is what doctor's integrity_check already costs.
_SQL_TEXT = "SELECT id, content, source, tags, entities FROM insights ORDER BY rowid"


def text_problems(conn: apsw.Connection, lists: Callable[[object, object], list[str]]) -> list[str]:
    """Each insight whose text no draft carries unchanged (``validate.stored_text_problems``), or whose stored
    tags and entities ``lists`` finds past a draft's limits (``store.ranges.list_problems``: they are decoded as
    the readers decode them, which this module, imported by theirs, cannot import): export refuses a store
    holding one among its active memories, and ``--repair`` writes no value for it (dropping a tag would change
    the memory)."""
    out: list[str] = []
    for insight_id, content, source, tags, entities in conn.execute(_SQL_TEXT):
        where = f"insight {insight_id if isinstance(insight_id, str) else shown(insight_id)}"
        problems = stored_text_problems(content, source) + lists(tags, entities)
        out += [f"{where}: {problem}; not repaired" for problem in problems]
    return out


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
    meta = {str(k): v for k, v in conn.execute(_SQL_META)}
    problems = []
    if meta.get("schema") != str(schema_version):
        problems.append(f"schema version {shown(meta.get('schema'))}, expected {schema_version}")
    generation = meta.get("generation", "")
    if not (isinstance(generation, str) and generation.isascii() and generation.isdigit()):  # ("²".isdigit() is true)
        problems.append(f"generation {shown(meta.get('generation'))} is not a counter")
    if meta.get("embedding_format", "float64") not in _WIDTH:
        problems.append(f"unknown embedding format {shown(meta.get('embedding_format'))}")
    return problems


def describe_edges(rows: list[tuple[str, str, str]]) -> list[str]:
    return [f"{s} -> {t} ({kind})" for s, t, kind in rows]


def sample(items: list[str]) -> str:
    """The first PROBLEM_SAMPLE items joined, and how many more there are."""
    more = f" (+{len(items) - PROBLEM_SAMPLE} more)" if len(items) > PROBLEM_SAMPLE else ""
    return "; ".join(items[:PROBLEM_SAMPLE]) + more


def json_detail(problems: list[str]) -> str:
    """A one-line summary for the report: the count plus the first few problems."""
    if not problems:
        return "ok"
    return f"{len(problems)} problem(s): {sample(problems)}"


__all__ = [
    "bad_embeddings",
    "dangling_edges",
    "describe_edges",
    "foreign_keys",
    "insight_problems",
    "integrity",
    "text_problems",
    "json_detail",
    "meta_problems",
    "oplog_problems",
    "remove_dangling_edges",
    "sample",
    "shown",
]
