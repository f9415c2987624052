"""The hot index on disk and the SQL that keeps it current (architecture: the hot index).

Owns the file format of the derived index in the store's derived folder (``<db>.index/hot``, see
``mnemon.store.derived``: one file, a JSON
header plus 64-byte aligned raw arrays, memory-mapped on read, replaced atomically by rename,
mode 0600), the small delta segment beside it (``hot.delta``: what changed since that base, so a
write never rewrites the base), the small stamp file (``hot.stamp``) that lets a process which only bumped
access counts mark the unchanged index current for the new generation, and the queries that
tell what changed since a snapshot (new rows by rowid, deletions by the deletion log's sequence, or
by ``deleted_at`` where there is none, new edge rows by rowid above a mark that never falls, counts). It knows nothing about tokens or scores: the engine tokenises and hands in
named numpy arrays. Deleting either file loses nothing; the engine rebuilds from SQLite.
"""

from __future__ import annotations

import json
import mmap
import os
import secrets
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from mnemon.records import EDGE_TYPES
from mnemon.store import derived
from mnemon.store.connection import FILE_MODE, ensure_private_dir, one_row, scalar
from mnemon.store.sequences import DELETIONS_EPOCH_KEY, EDGE_HIGH_KEY

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"MNEMHOT1"
_ALIGN = 64

_SQL_MAX_ROWID = "SELECT COALESCE(MAX(rowid), 0) FROM insights"
_SQL_MAX_EDGE_ROWID = "SELECT COALESCE(MAX(rowid), 0) FROM edges"
_SQL_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('mnemon_meta', 'mnemon_deletions', 'edge_changes')"
)
_SQL_DELETED = "SELECT COUNT(*), COALESCE(MAX(deleted_at), '') FROM insights WHERE deleted_at IS NOT NULL"
_SQL_ACTIVE = "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL"
_SQL_EDGE_COUNT = "SELECT COUNT(*) FROM edges"
_SQL_META_MARKS = (
    f"SELECT key, value FROM mnemon_meta WHERE key IN ('generation', '{EDGE_HIGH_KEY}', '{DELETIONS_EPOCH_KEY}')"
)
# The deletion log (schema 10, store/sequences.py; PostgreSQL revision 4): soft-deletions in
# commit order. A reader takes those after the last number it has seen, whatever their deleted_at.
_SQL_DELETED_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM mnemon_deletions"
_SQL_DELETIONS_SINCE = "SELECT insight_id FROM mnemon_deletions WHERE seq > ? ORDER BY seq"
_SQL_ROWS_SINCE = (
    "SELECT rowid, id, content, tags, entities, category, source, importance, created_at, "
    "embedding IS NOT NULL FROM insights "
    "WHERE rowid > ? AND +deleted_at IS NULL ORDER BY rowid"  # "+": the rowid range, not a partial index
)
_SQL_DELETED_SINCE = "SELECT id FROM insights WHERE deleted_at IS NOT NULL AND deleted_at >= ?"
# The backbone flag is computed in SQL so the metadata JSON of millions of edges is never parsed
# in Python (§1: backbone rows carry sub_type=backbone and direction=precedes older→newer); so is
# the type's code (its position in EDGE_TYPES, -1 for any other text): a build reads millions of
# rows, and a type string per row, made and hashed to find its code, was a third of their cost.
_SQL_EDGE_TYPE_CODE = "CASE edge_type " + " ".join(f"WHEN '{t}' THEN {k}" for k, t in enumerate(EDGE_TYPES)) + " ELSE -1 END"
_SQL_EDGES_SINCE = (
    f"SELECT source_id, target_id, {_SQL_EDGE_TYPE_CODE}, weight, "
    "(edge_type = 'temporal' AND instr(metadata, '\"backbone\"') > 0 AND instr(metadata, '\"precedes\"') > 0) "
    "FROM edges WHERE rowid > ? ORDER BY rowid"
)


# A store with an edge change log (PostgreSQL, schema revision 2: postgres/schema.py) keeps the
# keys of deleted and replaced edge rows with the change sequence; the position a reader has seen
# is its fingerprint's ``edge_seq`` (0 where there is no log: SQLite, whose files never carry it).
_SQL_EDGE_SEQ = (
    "SELECT COALESCE((SELECT MAX(seq) FROM edge_changes), "
    "(SELECT CAST(value AS INTEGER) FROM mnemon_meta WHERE key = 'edge_changes_floor'), 0)"
)
_SQL_EDGE_FLOOR = "SELECT value FROM mnemon_meta WHERE key = 'edge_changes_floor'"
_SQL_EDGE_CHANGES = (
    "SELECT DISTINCT source_id, target_id, edge_type FROM edge_changes WHERE seq > ? AND seq <= ? "
    "ORDER BY source_id, target_id, edge_type"
)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a reader compares to decide whether the index describes the database.

    ``max_edge_rowid`` is the edges' mark: MAX(rowid), or the highest edge rowid ever deleted where
    that is higher (``sequences.EDGE_HIGH_KEY``); every later edge row is numbered above it. It falls
    only when rowids are renumbered (VACUUM, the Go store's table rebuild), or on a store from
    before the mark. ``deleted_seq``: the deletion log's last number, -1 for none (a store without
    the log, or a fingerprint written before it: deletions are then found by ``deleted_at``).
    ``deletions_epoch``: which deletion log ``deleted_seq`` numbers (``sequences.DELETIONS_EPOCH_KEY``: 0
    until the log is recreated); a reader of another epoch rebuilds.
    """

    generation: int
    max_rowid: int
    max_edge_rowid: int
    deleted_count: int
    last_deleted_at: str
    edge_seq: int = 0  # the edge change log's last sequence (stores that keep one)
    deleted_seq: int = -1
    deletions_epoch: int = 0

    def to_json(self) -> dict[str, Any]:
        out = {
            "generation": self.generation, "max_rowid": self.max_rowid, "max_edge_rowid": self.max_edge_rowid,
            "deleted_count": self.deleted_count, "last_deleted_at": self.last_deleted_at,
        }  # fmt: skip
        if self.edge_seq:
            out["edge_seq"] = self.edge_seq  # absent for SQLite: its files stay as they were
        if self.deleted_seq >= 0:
            out["deleted_seq"] = self.deleted_seq  # a reader of the previous version ignores it
        if self.deletions_epoch:
            out["deletions_epoch"] = self.deletions_epoch  # absent until a log is recreated: files stay as they were
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Fingerprint:
        return cls(
            int(raw["generation"]), int(raw["max_rowid"]), int(raw["max_edge_rowid"]),
            int(raw["deleted_count"]), str(raw["last_deleted_at"]), int(raw.get("edge_seq", 0)),
            int(raw.get("deleted_seq", -1)), int(raw.get("deletions_epoch", 0)),
        )  # fmt: skip


@contextmanager
def read_snapshot(conn: apsw.Connection) -> Iterator[None]:
    """Read the fingerprint and the changed rows from one consistent snapshot.

    Inside a caller's open transaction the reads already share that snapshot; no BEGIN then.
    """
    if not conn.in_transaction:
        conn.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            conn.execute("COMMIT")
    else:
        yield


def fingerprint(conn: apsw.Connection) -> Fingerprint:
    """Read the cheap change markers (all index lookups, no table scan)."""
    tables = {str(r[0]) for r in conn.execute(_SQL_TABLES)}
    marks = {str(k): v for k, v in conn.execute(_SQL_META_MARKS)} if "mnemon_meta" in tables else {}
    gen = _meta_int(marks.get("generation"), -1)  # a damaged counter: the other markers still tell a change
    deleted, last = one_row(conn, _SQL_DELETED)
    return Fingerprint(
        gen,
        max_rowid(conn),
        # a damaged mark reads as none: the trigger reads it as 0 too (CAST), so rows are numbered above MAX(rowid)
        max(int(scalar(conn, _SQL_MAX_EDGE_ROWID)), _meta_int(marks.get(EDGE_HIGH_KEY), 0)),
        int(deleted),
        str(last),
        # (a log dropped by hand reads as none: a reader that has seen a position rebuilds; doctor names it)
        int(scalar(conn, _SQL_EDGE_SEQ)) if has_edge_log(conn) and "edge_changes" in tables else 0,
        int(scalar(conn, _SQL_DELETED_SEQ)) if "mnemon_deletions" in tables else -1,
        _meta_int(marks.get(DELETIONS_EPOCH_KEY), -1),  # damaged: an epoch of its own, named by no log
    )


def _meta_int(value: object, damaged: int) -> int:
    """A counter of mnemon_meta (text): 0 when absent, ``damaged`` when it holds no integer (doctor reports it)."""
    if value is None:
        return 0
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return damaged


def max_rowid(conn: apsw.Connection) -> int:
    """The highest insight rowid (0 for none): what a reader that follows the insights by rowid has seen."""
    return int(scalar(conn, _SQL_MAX_ROWID))


def has_edge_log(conn: apsw.Connection) -> bool:
    """Whether the store logs deleted and replaced edge keys (set by the backend on open)."""
    return bool(getattr(conn, "edge_change_log", False))


def edge_changes_since(conn: apsw.Connection, seq: int, upto: int) -> list[tuple[str, str, str]] | None:
    """The distinct (source, target, type) keys deleted or replaced in ``(seq, upto]``, or None when
    the log no longer reaches back to ``seq`` (pruned past it: the reader cannot prove the delta)."""
    row = conn.execute(_SQL_EDGE_FLOOR).fetchone()
    try:
        floor = int(row[0]) if row and row[0] is not None else upto
    except (TypeError, ValueError):
        return None  # a damaged floor (mnemon_meta edited by hand) proves nothing: the reader reloads the edges
    if seq < floor:
        return None
    return [(str(a), str(b), str(c)) for a, b, c in conn.execute(_SQL_EDGE_CHANGES, (seq, upto))]


def active_count(conn: apsw.Connection) -> int:
    """Active insights: the trigger-kept counters (O(1)), or COUNT(*) on a store without them."""
    from mnemon.store import counts

    if counts.available(conn):
        return counts.active_count(conn)
    return int(scalar(conn, _SQL_ACTIVE))


def edge_count(conn: apsw.Connection) -> int:
    """The number of edge rows: the trigger-kept counter (O(1)), or COUNT(*) on a store without one."""
    from mnemon.store import counts

    if counts.available(conn):
        return counts.edge_count(conn)
    return int(scalar(conn, _SQL_EDGE_COUNT))


def rows_since(conn: apsw.Connection, rowid: int) -> Iterator[tuple[Any, ...]]:
    """Active insight rows inserted after ``rowid``: (rowid, id, content, tags, entities, category,
    source, importance, created_at, has_embedding); tags/entities are the raw JSON text."""
    return _streamed(conn, _SQL_ROWS_SINCE, (rowid,))


def deleted_since(conn: apsw.Connection, deleted_at: str) -> list[str]:
    """Ids soft-deleted at or after ``deleted_at`` (second precision, so the bound is inclusive; a
    deletion stamped by a clock behind is missed: the caller's active-count check then rebuilds)."""
    return [str(r[0]) for r in conn.execute(_SQL_DELETED_SINCE, (deleted_at,))]


def deletions_since(conn: apsw.Connection, seq: int) -> list[str]:
    """Ids the deletion log numbers after ``seq`` (a fingerprint's ``deleted_seq``), in commit order."""
    return [str(r[0]) for r in conn.execute(_SQL_DELETIONS_SINCE, (seq,))]


def edges_since(conn: apsw.Connection, rowid: int) -> Iterator[tuple[Any, ...]]:
    """Edge rows after ``rowid``, in rowid order: (source_id, target_id, type code (position in
    ``EDGE_TYPES``, -1 for an unknown type), weight, is_backbone_precedes)."""
    return _streamed(conn, _SQL_EDGES_SINCE, (rowid,))


def _streamed(conn: apsw.Connection, statement: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """The statement's rows as they come: apsw's cursor steps the statement; a PostgreSQL store's
    connection fetches a whole result unless asked to stream it (``PgConnection.stream``)."""
    stream = getattr(conn, "stream", None)
    return stream(statement, params) if stream is not None else iter(conn.execute(statement, params))


# --- files -------------------------------------------------------------------------------------


def index_path(db_path: Path) -> Path:
    return derived.path(db_path, "hot")


def stamp_path(db_path: Path) -> Path:
    return derived.path(db_path, "hot.stamp")


def _write_atomic(path: Path, chunks: list[bytes | memoryview]) -> None:
    if not path.parent.is_dir():
        ensure_private_dir(path.parent)  # the folder was deleted (the documented way to rebuild)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def delta_path(db_path: Path) -> Path:
    return derived.path(db_path, "hot.delta")


def write_delta(db_path: Path, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write the small delta segment (``hot.delta``, same format) atomically."""
    write_index(db_path, header, arrays, path=delta_path(db_path))


def remove_delta(db_path: Path) -> None:
    try:
        delta_path(db_path).unlink()
    except OSError:
        pass


def write_index(db_path: Path, header: dict[str, Any], arrays: dict[str, np.ndarray], *, path: Path | None = None) -> None:
    """Write header + arrays to ``<db>.hot`` atomically; an I/O failure only loses the cache."""
    import numpy as np

    layout: dict[str, Any] = {}
    offset = 0
    blobs: list[tuple[int, np.ndarray]] = []
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        offset = -(-offset // _ALIGN) * _ALIGN
        # each array's CRC-32, which only doctor reads (the whole file): a flipped byte in a mapped array
        # is otherwise a wrong answer or a crash, never noticed (zlib: about 0.3 ms per MB written)
        layout[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset, "crc32": _crc(arr)}
        blobs.append((offset, arr))
        offset += arr.nbytes
    head = json.dumps({"header": header, "arrays": layout}, ensure_ascii=False).encode("utf-8")
    base = -(-(16 + len(head)) // _ALIGN) * _ALIGN
    chunks: list[bytes | memoryview] = [MAGIC, base.to_bytes(8, "little"), head, b"\0" * (base - 16 - len(head))]
    pos = 0
    for off, arr in blobs:
        if off > pos:
            chunks.append(b"\0" * (off - pos))
        chunks.append(memoryview(arr).cast("B") if arr.nbytes else b"")  # type: ignore[arg-type]  # ndarray has the buffer protocol; numpy's stubs declare it for Python 3.12+ only
        pos = off + arr.nbytes
    try:
        _write_atomic(path or index_path(db_path), chunks)
    except OSError:
        pass  # derived data: the next process rebuilds


def read_index(db_path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """Map ``<db>.hot`` read-only; None if missing, truncated or foreign (then the caller rebuilds).

    A delta segment written for this base (``hot.delta``, same build id) comes along: its
    arrays prefixed ``x_``, its header under ``delta``; the header's fingerprint and build id are
    then those of base + delta (``build+delta``), the base's own under ``base_header``.
    """
    base = _read_file(index_path(db_path))
    if base is None:
        return None
    header, arrays = base
    delta = _read_file(delta_path(db_path))
    if delta is None or not isinstance(header, dict) or not isinstance(delta[0], dict) or \
            delta[0].get("base_id") != header.get("build_id"):  # fmt: skip
        return base
    merged = dict(header)
    merged.update({
        "fingerprint": delta[0].get("fingerprint"), "build_id": f"{header.get('build_id')}+{delta[0].get('delta_id')}",
        "delta": delta[0], "base_header": header,
    })  # fmt: skip
    arrays = dict(arrays)
    arrays.update({f"x_{k}": v for k, v in delta[1].items()})
    return merged, arrays


def _read_file(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    parsed = _parse_file(path)
    return None if parsed is None else (parsed[0]["header"], parsed[1])


def _parse_file(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The file's JSON head (header and array layout) and its arrays mapped read-only; None if missing,
    truncated or foreign."""
    import numpy as np

    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < 16:
                return None
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        if mm[:8] != MAGIC:
            return None
        base = int.from_bytes(mm[8:16], "little")
        raw = json.loads(bytes(mm[16:base]).rstrip(b"\0").decode("utf-8"))
        arrays: dict[str, np.ndarray] = {}
        for name, spec in raw["arrays"].items():
            dtype = np.dtype(spec["dtype"])
            shape = tuple(spec["shape"])
            count = int(np.prod(shape)) if shape else 1
            start = base + int(spec["offset"])
            if start + count * dtype.itemsize > len(mm):
                return None
            arrays[name] = np.frombuffer(mm, dtype=dtype, count=count, offset=start).reshape(shape)
        return raw, arrays
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _crc(arr: np.ndarray) -> int:
    """The CRC-32 of a C-contiguous array's bytes (0 for an empty one), as written and as checked."""
    return zlib.crc32(memoryview(arr).cast("B")) if arr.nbytes else 0  # type: ignore[arg-type]  # as in write_index


def damaged_arrays(path: Path) -> list[str] | None:
    """The arrays of one index file (``index_path`` or ``delta_path``) whose bytes no longer match the
    CRC-32 written with them, read whole (doctor only); None when the file is missing or unreadable.
    A file written before the checksums has none to compare: it reads as undamaged."""
    parsed = _parse_file(path)
    if parsed is None:
        return None
    layout, arrays = parsed[0]["arrays"], parsed[1]
    return [
        str(name) for name, arr in arrays.items()
        if "crc32" in layout[name] and _crc(arr) != layout[name]["crc32"]
    ]  # fmt: skip


def write_stamp(db_path: Path, build_id: str, fp: Fingerprint) -> None:
    """Record that index build ``build_id`` also describes the database at ``fp``."""
    body = json.dumps({"build_id": build_id, "fingerprint": fp.to_json()}).encode("utf-8")
    try:
        _write_atomic(stamp_path(db_path), [body])
    except OSError:
        pass


def read_stamp(db_path: Path) -> tuple[str, Fingerprint] | None:
    try:
        raw = json.loads(stamp_path(db_path).read_bytes())
        return str(raw["build_id"]), Fingerprint.from_json(raw["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
