"""``store copy SRC DST``: every row of one store into an empty one, between either backend.

Carries what an export does not: insight ids, every timestamp (created, updated, deleted, last
accessed, stored), access counts, effective importance, soft-deleted rows, embedding blobs, edge
metadata and times, the oplog with its ids, and the store's embedding and receipt keys in the
meta. The destination adopts the source's blob format, so blobs are copied byte for byte and a
copy of a copy equals the original. Rows go in source insertion order (rowid), so ties ordered by
(created_at, rowid) order the same. The source is read in one snapshot; the destination is written
in one transaction, and refused unless it holds no insight, edge or oplog row yet.

A damaged source (a hand edit, another program) is copied as every command reads it, so the copy answers as
the original does and is written on either backend: a number column holding no number gets its fallback
(``store.numeric``, what every reader reads), tags, entities and edge metadata that are no JSON array or
object get the list or object the readers read (``[]``, ``{}`` for text that is no JSON), and an embedding
that is no blob is no vector (NULL). Everything else is carried as it is, out-of-contract values included
(an importance of 7 reads the same in the copy, and doctor names it there as on the source). A blob where
text belongs cannot be held by a PostgreSQL text column: such a copy is refused, naming the row, before
anything is written (into SQLite it is carried as it is).

A PostgreSQL ``integer`` column holds 32 bits, SQLite's 64: a value beyond them (a hand edit; nothing mnemon
writes comes near) is written into PostgreSQL as the readers read it, by ``store.ranges``' rules: an
importance clamped into 1-5, a negative access count as 0, and an access count above 2^31-1 as 2^31-1
(``records.MAX_ACCESS_COUNT``): the access bump saturates there (the next recall of such a SQLite row writes
it), ``export`` writes it, and no reader decides anything between the two (immunity is 3 accesses; effective
importance orders only rows that are not immune).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import json

from mnemon.errors import InputError
from mnemon.records import MAX_ACCESS_COUNT
from mnemon.store import edges as edge_sql
from mnemon.store import hotindex, numeric, ranges
from mnemon.store import insights as insight_sql
from mnemon.store.check import shown
from mnemon.store.tx import write_tx
from mnemon.store.connection import scalar

if TYPE_CHECKING:
    from mnemon.store import Store

_INSIGHT_COLUMNS = (
    "id, content, category, importance, tags, entities, source, access_count, created_at, updated_at, "
    "deleted_at, last_accessed_at, embedding, effective_importance, stored_at"
)
_EDGE_COLUMNS = "source_id, target_id, edge_type, weight, metadata, created_at"
_OPLOG_COLUMNS = "id, operation, insight_id, detail, created_at"
_SQL_INSIGHTS = f"SELECT {_INSIGHT_COLUMNS} FROM insights ORDER BY rowid"
_SQL_EDGES = f"SELECT {_EDGE_COLUMNS} FROM edges ORDER BY rowid"
_SQL_OPLOG = f"SELECT {_OPLOG_COLUMNS} FROM oplog ORDER BY id"
_SQL_META = (
    "SELECT key, value FROM mnemon_meta "
    "WHERE key IN ('embedding_model', 'embedding_dim', 'embedding_epoch', 'embedding_passages', 'receipt_key')"
)
_SQL_PUT_INSIGHT = f"INSERT INTO insights ({_INSIGHT_COLUMNS}) VALUES ({', '.join('?' * 15)})"
_SQL_PUT_EDGE = f"INSERT INTO edges ({_EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
_SQL_PUT_OPLOG = f"INSERT INTO oplog ({_OPLOG_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
_SQL_PUT_META = "INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES (?, ?)"
_SQL_OCCUPIED = "SELECT (SELECT COUNT(*) FROM insights) + (SELECT COUNT(*) FROM edges) + (SELECT COUNT(*) FROM oplog)"
# A PostgreSQL serial does not follow explicit ids: move it past the copied oplog rows.
_SQL_PG_OPLOG_SEQUENCE = "SELECT setval(pg_get_serial_sequence('oplog', 'id'), GREATEST((SELECT MAX(id) FROM oplog), 1))"
_BATCH = 2000


@dataclass(frozen=True, slots=True)
class Copied:
    insights: int
    edges: int
    oplog: int


def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql)]


def copy_store(source: Store, target: Store) -> Copied:
    """Copy every row of ``source`` into the empty ``target`` in one write transaction."""
    with hotindex.read_snapshot(source.conn):
        insights = _rows(source.conn, _SQL_INSIGHTS)
        edges = _rows(source.conn, _SQL_EDGES)
        oplog = _rows(source.conn, _SQL_OPLOG)
        meta = _rows(source.conn, _SQL_META) if _has_meta(source) else []
    insights = [_insight(r) for r in insights]
    edges = [_edge(r) for r in edges]
    if target.backend == "postgres":
        _refuse_blobs_in_text(insights, edges, oplog)
        insights = [_in_32_bits(r) for r in insights]
    conn = target.conn
    with write_tx(conn):
        if int(scalar(conn, _SQL_OCCUPIED)):
            raise InputError("store copy: the destination store is not empty (copy into a new store)")
        conn.execute(_SQL_PUT_META, ("embedding_format", source.embedding_format))
        for key, value in meta:
            conn.execute(_SQL_PUT_META, (key, value))
        for sql, rows in ((_SQL_PUT_INSIGHT, insights), (_SQL_PUT_EDGE, edges), (_SQL_PUT_OPLOG, oplog)):
            for start in range(0, len(rows), _BATCH):
                conn.executemany(sql, rows[start : start + _BATCH])
        if target.backend == "postgres" and oplog:
            conn.execute(_SQL_PG_OPLOG_SEQUENCE)
    target.embedding_format = source.embedding_format
    return Copied(len(insights), len(edges), len(oplog))


def _has_meta(store: Store) -> bool:
    row = store.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mnemon_meta'").fetchone()
    return row is not None


def _json_as_read(raw: object, kind: type, canonical: str) -> object:
    """``raw`` where it is JSON text of ``kind`` (kept byte for byte), else the value the readers read."""
    if isinstance(raw, str):
        try:
            if isinstance(json.loads(raw), kind):
                return raw
        except ValueError:
            pass
    return canonical


def _insight(r: tuple[Any, ...]) -> tuple[Any, ...]:
    """A source row as every command reads it where it is malformed (the module's docstring)."""
    return (
        *r[:3],
        numeric.integer(r[3], numeric.IMPORTANCE_FALLBACK),
        _json_as_read(r[4], list, insight_sql.dump_list(insight_sql.load_list(r[4]))),
        _json_as_read(r[5], list, insight_sql.dump_list(insight_sql.load_list(r[5]))),
        r[6],
        numeric.integer(r[7], numeric.ACCESS_COUNT_FALLBACK),
        *r[8:12],
        bytes(r[12]) if isinstance(r[12], (bytes, memoryview)) else None,
        None if r[13] is None else numeric.real(r[13], numeric.EFFECTIVE_IMPORTANCE_FALLBACK),
        r[14],
    )


def _edge(r: tuple[Any, ...]) -> tuple[Any, ...]:
    metadata = _json_as_read(r[4], dict, edge_sql.dump_metadata(edge_sql.load_metadata(r[4])))
    return (*r[:3], numeric.real(r[3], numeric.WEIGHT_FALLBACK), metadata, r[5])


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_IMPORTANCE, _ACCESS_COUNT = 3, 7  # positions in _INSIGHT_COLUMNS


def _in_32_bits(r: tuple[Any, ...]) -> tuple[Any, ...]:
    """An insight row whose integers a PostgreSQL ``integer`` column holds (the module's docstring)."""
    importance, access_count = r[_IMPORTANCE], r[_ACCESS_COUNT]
    if INT32_MIN <= importance <= INT32_MAX and INT32_MIN <= access_count <= INT32_MAX:
        return r
    fitted = list(r)
    if not INT32_MIN <= importance <= INT32_MAX:
        fitted[_IMPORTANCE] = min(max(importance, ranges.IMPORTANCE_MIN), ranges.IMPORTANCE_MAX)
    if access_count < INT32_MIN:
        fitted[_ACCESS_COUNT] = 0
    elif access_count > INT32_MAX:
        fitted[_ACCESS_COUNT] = MAX_ACCESS_COUNT
    return tuple(fitted)


_TEXT_COLUMNS = {
    "insight": ((0, "id"), (1, "content"), (2, "category"), (6, "source"), (8, "created_at"), (9, "updated_at"),
                (10, "deleted_at"), (11, "last_accessed_at"), (14, "stored_at")),
    "edge": ((0, "source_id"), (1, "target_id"), (2, "edge_type"), (5, "created_at")),
    "oplog row": ((1, "operation"), (2, "insight_id"), (3, "detail"), (4, "created_at")),
}  # fmt: skip


def _refuse_blobs_in_text(insights: list[tuple[Any, ...]], edges: list[tuple[Any, ...]], oplog: list[tuple[Any, ...]]) -> None:
    for kind, rows in (("insight", insights), ("edge", edges), ("oplog row", oplog)):
        for row in rows:
            for at, name in _TEXT_COLUMNS[kind]:
                if isinstance(row[at], (bytes, memoryview)):
                    key = row[0] if isinstance(row[0], str) else shown(row[0])
                    raise InputError(
                        f"store copy: {kind} {key}: {name} is {shown(row[at])}, which a PostgreSQL text column "
                        "cannot hold (nothing was copied; correct the source row first)"
                    )
