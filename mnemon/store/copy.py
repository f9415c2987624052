"""``store copy SRC DST``: every row of one store into an empty one, between either backend.

Carries what an export does not: insight ids, every timestamp (created, updated, deleted, last
accessed, stored), access counts, effective importance, soft-deleted rows, embedding blobs, edge
metadata and times, the oplog with its ids, and the store's embedding and receipt keys in the
meta. The destination adopts the source's blob format, so blobs are copied byte for byte and a
copy of a copy equals the original. Rows go in source insertion order (rowid), so ties ordered by
(created_at, rowid) order the same. The source is read in one snapshot; the destination is written
in one transaction, and refused unless it holds no insight, edge or oplog row yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mnemon.errors import InputError
from mnemon.store import hotindex
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
    insights = [(*r[:12], None if r[12] is None else bytes(r[12]), *r[13:]) for r in insights]
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
