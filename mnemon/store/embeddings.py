"""The embedding SQL of a store: its vector blobs and the embedding model, dimension and epoch.

Owns reading and writing ``insights.embedding`` (through ``blob``) and the ``mnemon_meta`` keys that
say what the store's vectors are (``embedding_model``, ``embedding_dim``, fixed by the first vector
written) and when vectors of existing rows changed (``embedding_epoch``, which makes every vector
index rebuild). The vector matrix derived from these blobs is ``store.vectors.VectorIndex``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from mnemon.store import blob
from mnemon.store.connection import scalar

if TYPE_CHECKING:
    import apsw
    import numpy as np
    from numpy.typing import NDArray

_SQL_META_GET = "SELECT value FROM mnemon_meta WHERE key = ?"
_SQL_META_SET = "INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES (?, ?)"
_SQL_BUMP_EPOCH = (
    "INSERT INTO mnemon_meta (key, value) VALUES ('embedding_epoch', '1') "
    "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
)
_SQL_SET_EMBEDDING = "UPDATE insights SET embedding = ? WHERE id = ?"
_SQL_CLEAR_EMBEDDINGS = "UPDATE insights SET embedding = NULL WHERE embedding IS NOT NULL"
_SQL_LACKING = (
    "SELECT id, content FROM insights WHERE deleted_at IS NULL AND embedding IS NULL "
    "ORDER BY importance DESC, created_at DESC, id ASC"
)
_SQL_EMBEDDED_CONTENT = (
    "SELECT id, content FROM insights WHERE deleted_at IS NULL AND embedding IS NOT NULL "
    "ORDER BY importance DESC, created_at DESC, id ASC"
)
_SQL_HAS_EMBEDDING = "SELECT 1 FROM insights WHERE id = ? AND embedding IS NOT NULL"
_SQL_EMBEDDED_COUNT = "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL AND embedding IS NOT NULL"
_SQL_IS_ACTIVE = "SELECT 1 FROM insights WHERE id = ? AND deleted_at IS NULL"
_SQL_ROWID_OF = "SELECT rowid FROM insights WHERE id = ?"


@dataclass(frozen=True, slots=True)
class VectorMeta:
    """What the store's vectors are: fixed by the first vector written (model may be unknown)."""

    model: str | None
    dim: int | None
    epoch: int


def _has_meta(conn: apsw.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mnemon_meta'").fetchone()
    return row is not None


def _meta(conn: apsw.Connection, key: str) -> str | None:
    if not _has_meta(conn):
        return None
    row = conn.execute(_SQL_META_GET, (key,)).fetchone()
    return None if row is None else str(row[0])


def _counter(value: str | None) -> TypeGuard[str]:
    """Whether a meta value is ASCII digits: str.isdigit() is also true of "²" and "٣", which int() refuses or reads
    as another number (a hand-edited mnemon_meta failed every recall with a ValueError)."""
    return value is not None and value != "" and value.isascii() and value.isdigit()


def vector_meta(conn: apsw.Connection) -> VectorMeta:
    """Return the recorded model, dimension and epoch (dim None: no vector was ever recorded)."""
    dim = _meta(conn, "embedding_dim")
    epoch = _meta(conn, "embedding_epoch")
    return VectorMeta(
        model=_meta(conn, "embedding_model") or None,
        dim=int(dim) if _counter(dim) and int(dim) > 0 else None,
        epoch=int(epoch) if _counter(epoch) else 0,
    )


def set_vector_meta(conn: apsw.Connection, model: str, dim: int) -> None:
    """Fix the store's embedding model and dimension (inside the caller's transaction)."""
    conn.execute(_SQL_META_SET, ("embedding_model", model))
    conn.execute(_SQL_META_SET, ("embedding_dim", str(dim)))


def passages_version(conn: apsw.Connection) -> int:
    """How the store's labelled memories were embedded (``mnemon_meta.embedding_passages``): 0, as
    written (every store before the composition); ``mnemon.embed.passages.VERSION`` once composed."""
    value = _meta(conn, "embedding_passages")
    return int(value) if _counter(value) else 0


def set_passages_version(conn: apsw.Connection, version: int) -> None:
    """Record that every labelled memory's vector is composed by ``version`` (in the caller's transaction)."""
    conn.execute(_SQL_META_SET, ("embedding_passages", str(version)))


def bump_epoch(conn: apsw.Connection) -> None:
    """Record that vectors of existing rows changed, so every index rebuilds or applies the delta."""
    conn.execute(_SQL_BUMP_EPOCH)


def set_embedding(conn: apsw.Connection, insight_id: str, vector: NDArray[np.float64], fmt: str) -> None:
    conn.execute(_SQL_SET_EMBEDDING, (blob.encode(vector, fmt), insight_id))


def has_embedding(conn: apsw.Connection, insight_id: str) -> bool:
    return conn.execute(_SQL_HAS_EMBEDDING, (insight_id,)).fetchone() is not None


def clear_embeddings(conn: apsw.Connection) -> None:
    conn.execute(_SQL_CLEAR_EMBEDDINGS)


def lacking_embedding(conn: apsw.Connection) -> list[tuple[str, str]]:
    """Active (id, content) pairs without a vector: importance desc, created_at desc, id asc."""
    return [(str(r[0]), str(r[1])) for r in conn.execute(_SQL_LACKING)]


def embedded_content(conn: apsw.Connection) -> list[tuple[str, str]]:
    """Active (id, content) pairs that hold a vector, in :func:`lacking_embedding`'s order."""
    return [(str(r[0]), str(r[1])) for r in conn.execute(_SQL_EMBEDDED_CONTENT)]


def embedded_count(conn: apsw.Connection) -> int:
    """Active insights that hold a vector blob (a full scan: for ``embed --status`` only)."""
    return int(scalar(conn, _SQL_EMBEDDED_COUNT))


def active_ids(conn: apsw.Connection, ids: Iterable[str]) -> set[str]:
    """The subset of ``ids`` that are active insights right now (search results are re-checked)."""
    found: set[str] = set()
    for insight_id in ids:
        if conn.execute(_SQL_IS_ACTIVE, (insight_id,)).fetchone() is not None:
            found.add(insight_id)
    return found


def rowid_of(conn: apsw.Connection, insight_id: str) -> int | None:
    row = conn.execute(_SQL_ROWID_OF, (insight_id,)).fetchone()
    return None if row is None else int(row[0])

