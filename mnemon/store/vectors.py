"""VectorIndex: the derived float64 vector matrix of a store (the embedding SQL is ``store.embeddings``).

Contract §2.5 and Decision 3; architecture "the hot index" and §6. SQLite is the truth: every
vector lives in ``insights.embedding`` (float64 blobs in our stores, float32 in Go stores, read via
``blob``). This module keeps a contiguous float64 copy of the *active* embedded rows, memory-mapped
in the store's derived folder (``mnemon.store.derived``) so a query scans one matrix instead of
decoding every blob:

    mnemon.db.index/vec          float64 (capacity, dim)   the vectors, row-major, C-contiguous
    mnemon.db.index/vec.norms    float64 (capacity,)       Euclidean norm of each row
    mnemon.db.index/vec.ids      S<w>    (capacity,)       row -> insight id (UTF-8, NUL padded)
    mnemon.db.index/vec.rowids   int64   (capacity,)       row -> SQLite rowid (a hint, see below)
    mnemon.db.index/vec.active   uint8   (capacity,)       1 while the row's insight is active
    mnemon.db.index/vec.q8       int8    (capacity, dim)   the rows coded in int8 (see below)
    mnemon.db.index/vec.qmult    float64 (capacity,)       scale / norm of each coded row
    mnemon.db.index/vec.qresid   float64 (capacity,)       |row - scale·codes| / norm, rounded up
    mnemon.db.index/vec.hotrows  int64   (rows,) [+ 6]     a hint: row -> the hot index's row; a certificate (below)
    mnemon.db.index/vec.json     the header: dim, model, blob format, rows, capacity, build_id and the fingerprint
    mnemon.db.index/vec.lock     flock target serialising processes that update the files

Rows are keyed by the insight UUID; the rowid is only used to find deletions cheaply (a covering
partial index lists active rowids) and is checked against the id at the tail, because VACUUM may
renumber rowids. The header is the commit point: it is replaced atomically after the data it
describes is flushed, so a crash between the database commit and the index write leaves an index
whose fingerprint no longer matches, and the next open catches it up or rebuilds it.

The int8 codes let a large store's query scan an eighth of the bytes first
(``kernels.quantized``): each row is ``scale · codes`` up to a residual whose relative norm is
stored, which bounds how far the coded cosine can be from the exact one, so the engine recomputes
exactly (from the float64 rows) every row a bound cannot rule out. :func:`quantize` defines the
coding; it is derived like the norms, row by row, and rebuilt with everything else. An index of
version 1 (no codes) is upgraded in place on its first writable open, coding the float64 rows it
already holds; under ``--readonly`` it is used without codes (exact scans).

The hot-row hint remembers where each vector row sat among the hot index's rows the last time
recall had to look many of them up by id (after ``embed --all``, a re-embed or forgets, the two
row orders drift apart). A guess is checked against the ids, and only the rows it misses are
looked up again, so a stale, torn or missing hint costs time, never a wrong answer; it is written
outside the header's commit protocol for that reason. Once every row of a hint was checked, the
writer adds a certificate naming the two builds it checked against (this index's ``build_id``, a
fresh token per rebuild, and the hot index's base build id) under a CRC-32: a reader whose two
builds are those skips the comparison for the rows certified (:class:`HintCertificate`), and checks
the rest as before.

Fingerprint (all cheap to read): ``mnemon_meta.generation`` (bumped by every write transaction),
the active insight count, ``max(rowid)``, the id at ``max(rowid)`` and ``embedding_epoch`` (bumped
by any write that sets or clears the vector of an *existing* row). Equal: current. Only the
generation differs: no vector changed (access bumps, edges). Otherwise rows past the old
``max(rowid)`` are appended and deleted insights masked out; an epoch, dimension, model or format
change, or a tail mismatch, means a full rebuild from the blobs. Writes from the Go program do not
bump the epoch, so a Go ``embed`` of an already-indexed row is not seen until the next rebuild
(deleting the files forces one; nothing is lost).

Under ``--readonly`` no file is created or changed: a missing or stale index is built in memory.
Files are created 0600. Only numpy and apsw are used; no kernels (architecture §3): searching the
matrix is the engine's job (``mnemon.engine.vectors``).

This module owns the index files, the fingerprint, the catch-up and the rebuild; beside it,
``store.embeddings`` (the embedding SQL and the store's vector meta), ``store.vectorcodes`` (the int8
coding) and ``store.vectorhint`` (the hot-row hint and its certificate). Callers import those names
from here too.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import apsw

from mnemon.errors import StoreError
from mnemon.store import blob, derived
from mnemon.store.connection import FILE_MODE, ensure_private_dir, scalar
from mnemon.store.schema import generation
from mnemon.store.hotindex import read_snapshot
from mnemon.store.embeddings import (
    VectorMeta, active_ids, bump_epoch, clear_embeddings, embedded_content, embedded_count, has_embedding,
    lacking_embedding, passages_version, rowid_of, set_embedding, set_passages_version, set_vector_meta, vector_meta,
)  # fmt: skip
from mnemon.store.vectorcodes import CODE_MAX, QUANTIZE_BLOCK, quantize
from mnemon.store.vectorhint import (
    HINT_MAGIC, HINT_SUFFIX, HintCertificate, read_hint_certificate, read_hot_rows_hint, write_hot_rows_hint,
)  # fmt: skip

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

INDEX_VERSION = 2  # 2: the int8 codes (vec.q8, vec.qmult, vec.qresid); 1 is upgraded in place
MIN_CAPACITY = 256  # rows preallocated on first build; capacity doubles when full
MIN_ID_WIDTH = 36  # a UUID; longer ids widen the id table on rebuild
_SUFFIXES = ("", ".norms", ".ids", ".rowids", ".active", ".q8", ".qmult", ".qresid")
# the array attributes, in _SUFFIXES order; the last three are the int8 coding (version 2)
_ARRAYS = ("_vectors", "_norms", "_ids", "_rowids", "_active", "_codes", "_qmult", "_qresid")
_CODED = 5  # _ARRAYS[:_CODED] exist in every version; _ARRAYS[_CODED:] from version 2

# Re-exported: callers import the embedding SQL, the coding and the hint from here.
__all__ = [
    "CODE_MAX", "HINT_MAGIC", "HINT_SUFFIX", "INDEX_VERSION", "MIN_CAPACITY", "MIN_ID_WIDTH", "QUANTIZE_BLOCK",
    "Fingerprint", "Header", "HintCertificate", "VectorIndex", "VectorMeta", "active_ids", "bump_epoch",
    "clear_embeddings", "embedded_content", "embedded_count", "fingerprint", "has_embedding", "lacking_embedding",
    "passages_version", "quantize", "read_hint_certificate", "read_hot_rows_hint", "remove_files", "rowid_of",
    "set_embedding", "set_passages_version", "set_vector_meta", "vector_meta", "write_hot_rows_hint",
]  # fmt: skip

_SQL_ACTIVE_COUNT = "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL"
_SQL_MAX_ROWID = "SELECT rowid, id FROM insights ORDER BY rowid DESC LIMIT 1"
_SQL_ID_AT = "SELECT id FROM insights WHERE rowid = ?"
_SQL_ACTIVE_ROWIDS = "SELECT rowid FROM insights WHERE deleted_at IS NULL"
_SQL_ACTIVE_COUNT_AFTER = "SELECT COUNT(*) FROM insights WHERE rowid > ? AND +deleted_at IS NULL"  # rowid range
_SQL_ACTIVE_BLOBS_OF = (
    "SELECT i.id, i.embedding FROM json_each(?) j CROSS JOIN insights i WHERE i.id = j.value AND i.deleted_at IS NULL"
)
_SQL_ACTIVE_WITH_WIDTH = "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL AND length(embedding) = ?"
def _same_vector(stored: NDArray[np.float64] | None, row: NDArray[np.float64]) -> bool:
    import numpy as np

    return stored is not None and bool(np.array_equal(stored, row))


_CHECK_BLOCK = 4096  # rows compared at a time by VectorIndex.mismatches (doctor): 25 MB of 768-d rows
_SQL_ACTIVE_VECTORS_AFTER = (
    # "+deleted_at": without it the planner walks a partial index on deleted_at (every active row)
    # instead of the rowid range, which made each catch-up O(store).
    "SELECT rowid, id, embedding FROM insights WHERE rowid > ? AND +deleted_at IS NULL AND embedding IS NOT NULL "
    "ORDER BY rowid"
)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    generation: int
    active_count: int
    max_rowid: int
    tail_id: str
    epoch: int

    def same_vectors(self, other: Fingerprint) -> bool:
        """Equal apart from the generation: the write touched no vector and no active row set."""
        return (self.active_count, self.max_rowid, self.tail_id, self.epoch) == (
            other.active_count, other.max_rowid, other.tail_id, other.epoch,
        )  # fmt: skip


def _active_count(conn: apsw.Connection) -> int:
    from mnemon.store import counts

    if counts.available(conn):
        return counts.active_count(conn)  # O(1): the trigger-kept counters
    return int(scalar(conn, _SQL_ACTIVE_COUNT))


def fingerprint(conn: apsw.Connection) -> Fingerprint:
    """Read the cheap fingerprint (a covering-index count and two point lookups)."""
    tail = conn.execute(_SQL_MAX_ROWID).fetchone()
    return Fingerprint(
        generation=generation(conn),
        active_count=_active_count(conn),
        max_rowid=int(tail[0]) if tail else 0,
        tail_id=str(tail[1]) if tail else "",
        epoch=vector_meta(conn).epoch,
    )



@dataclass(slots=True)
class Header:
    version: int
    dim: int
    model: str
    fmt: str
    id_width: int
    rows: int
    capacity: int
    generation: int
    active_count: int
    max_rowid: int
    tail_id: str
    epoch: int
    # Names this index's rows: a fresh token on every rebuild (and once for an index written before
    # the field), kept while rows are only appended or masked, so a row number with the same
    # build_id holds the same insight in any process (the hot-row hint's certificate relies on it).
    build_id: str = ""

    def fingerprint(self) -> Fingerprint:
        return Fingerprint(self.generation, self.active_count, self.max_rowid, self.tail_id, self.epoch)

    def stamp(self, fp: Fingerprint) -> None:
        self.generation, self.active_count = fp.generation, fp.active_count
        self.max_rowid, self.tail_id, self.epoch = fp.max_rowid, fp.tail_id, fp.epoch


class VectorIndex:
    """The active embedded rows of one store as a float64 matrix with norms, ids and an active mask.

    Build it with :meth:`open`; it is current for the database state it was opened (or
    :meth:`sync`-ed) against. Rows are append-only: a forgotten insight's row stays with
    ``active`` False, a re-embedded insight gets a new row and its old row is deactivated, so
    ``vectors[active]`` is exactly the set of active insights with a vector of the store's
    dimension. ``vectors``, ``norms``, ``active``, ``ids`` are views of length ``rows`` (read-only
    memory maps, or in-memory arrays under ``--readonly``); never write into them.

    Searching lives in ``mnemon.engine.vectors`` (``vector_search`` / ``vector_scores``), which
    passes these arrays to the ``kernels`` cosine scan.
    """

    # The backing arrays, assigned by name from _ARRAYS (_alloc, _set_arrays): memory maps of the files or
    # in-memory arrays. The three code arrays are None for a version-1 index opened --readonly; every
    # reader of them checks ``coded`` (or ``_codes is None``) first.
    _vectors: NDArray[np.float64]
    _norms: NDArray[np.float64]
    _ids: NDArray[np.bytes_]
    _rowids: NDArray[np.int64]
    _active: NDArray[np.uint8]
    _codes: NDArray[np.int8]
    _qmult: NDArray[np.float64]
    _qresid: NDArray[np.float64]

    def __init__(self, base: Path, *, readonly: bool, dim: int, model: str, fmt: str) -> None:
        self.base = base  # <db path>.index/vec
        self.readonly = readonly
        self.persisted = False  # True when the arrays are memory maps of the files
        self.header = Header(INDEX_VERSION, dim, model, fmt, MIN_ID_WIDTH, 0, 0, -1, -1, -1, "", -1)
        self._alloc(MIN_CAPACITY, MIN_ID_WIDTH)
        self._id_pos: dict[str, int] | None = None
        self._hot_rows_hint: NDArray[np.int64] | None = None  # see read_hot_rows_hint
        self._hint_certificate: HintCertificate | None = None
        self._header_seen = False  # the maps match the header last read or written (see _header_unchanged)
        # Replaced whenever rows already held may have changed (a rebuild, other files mapped):
        # rows are otherwise append-only, so a cache of per-row results keyed by it stays valid
        # for the rows it covers (engine.vectors caches a query's int8 dot products this way).
        self.content_key: object = object()
        self._files_key: tuple[int, int] | None = None
        self._opened = False  # the files were read (or found unusable) once
        self._mapped_readonly = False  # arrays are read-only maps: copy before changing them

    # -- public views --

    @property
    def dim(self) -> int:
        return self.header.dim

    @property
    def rows(self) -> int:
        return self.header.rows

    @property
    def vectors(self) -> NDArray[np.float64]:
        return self._vectors[: self.rows]

    @property
    def norms(self) -> NDArray[np.float64]:
        return self._norms[: self.rows]

    @property
    def active(self) -> NDArray[np.bool_]:
        return self._active[: self.rows].view(bool)

    @property
    def ids(self) -> NDArray[np.bytes_]:
        """Row -> insight id as UTF-8 bytes (decode with ``.decode()`` or ``astype(str)``)."""
        return self._ids[: self.rows]

    @property
    def rowids(self) -> NDArray[np.int64]:
        """Row -> SQLite rowid when the row was indexed (a hint: VACUUM may renumber)."""
        return self._rowids[: self.rows]

    @property
    def coded(self) -> bool:
        """The int8 codes exist (always, except for a version-1 index opened ``--readonly``)."""
        return self._codes is not None

    @property
    def codes(self) -> NDArray[np.int8]:
        return self._codes[: self.rows]

    @property
    def qmult(self) -> NDArray[np.float64]:
        return self._qmult[: self.rows]

    @property
    def qresid(self) -> NDArray[np.float64]:
        return self._qresid[: self.rows]

    def id_at(self, row: int) -> str:
        return bytes(self._ids[row]).decode("utf-8")

    def active_count(self) -> int:
        import numpy as np

        return int(np.count_nonzero(self._active[: self.rows]))

    def row_of(self, insight_id: str) -> int | None:
        """The active row holding ``insight_id``, or None."""
        if self._id_pos is None:
            pos: dict[str, int] = {}
            active = self._active
            for row in range(self.rows):
                if active[row]:
                    pos[self.id_at(row)] = row
            self._id_pos = pos
        return self._id_pos.get(insight_id)

    @property
    def mapped(self) -> bool:
        """The arrays are the files' (mapped), not rows built in memory."""
        return self.persisted or self._mapped_readonly

    def mismatches(self, conn: apsw.Connection, *, shown: int = 3) -> list[str]:
        """Every active row against the database, exactly (doctor only: O(rows x dim) reads of the
        blobs): its id an active insight's, once; its vector that insight's; its norm and int8 codes
        those the vector gives; and as many active rows as active insights with a vector of this
        dimension. The header's fingerprint vouches for none of the bytes behind it: a flipped one is a
        wrong cosine or a crash in recall. At most ``shown`` rows are named per kind, then counted."""
        import numpy as np

        found: dict[str, list[int]] = {}
        rows = np.flatnonzero(self.active)
        seen: set[str] = set()
        width = self.dim * (4 if self.header.fmt == "float32" else 8)
        for start in range(0, rows.shape[0], _CHECK_BLOCK):
            block = rows[start : start + _CHECK_BLOCK]
            ids = []
            for row in block.tolist():
                try:
                    ids.append(self.id_at(row))
                except UnicodeDecodeError:
                    ids.append("")
            stored = {str(i): raw for i, raw in conn.execute(_SQL_ACTIVE_BLOBS_OF, (json.dumps(ids),))}
            vectors = np.asarray(self.vectors[block])
            for k, (row, insight_id) in enumerate(zip(block.tolist(), ids, strict=True)):
                raw = stored.get(insight_id)
                if insight_id in seen or raw is None or len(raw) != width:
                    found.setdefault("holds no active insight of its own", []).append(row)
                elif not _same_vector(blob.decode(raw, self.header.fmt), vectors[k]):
                    found.setdefault("differs from its insight's vector", []).append(row)
                seen.add(insight_id)
            # the derived sums within a relative 1e-9: a summation order may differ with the block a row
            # was written in; a damaged byte that moves a value less than that changes no ranking
            norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
            wrong = ~np.isclose(self.norms[block], norms, rtol=1e-9, atol=0.0)
            found.setdefault("has a wrong norm", []).extend(block[wrong].tolist())
            if self.coded:
                codes, qmult, qresid = quantize(vectors)
                wrong = (self.codes[block] != codes).any(axis=1)
                wrong |= ~np.isclose(self.qmult[block], qmult, rtol=1e-9, atol=0.0)
                wrong |= ~np.isclose(self.qresid[block], qresid, rtol=1e-9, atol=1e-12)
                found.setdefault("has wrong int8 codes", []).extend(block[wrong].tolist())
        problems = []
        for kind, bad in found.items():
            if bad:
                named = ", ".join(str(r) for r in sorted(set(bad))[:shown])
                more = len(set(bad)) - shown
                problems.append(f"row {named}{f' and {more} more' if more > 0 else ''} {kind}")
        embedded = int(scalar(conn, _SQL_ACTIVE_WITH_WIDTH, (width,)))
        if embedded != len(seen):
            problems.append(f"{len(seen)} active rows for {embedded} active insights with a {self.dim}-d vector")
        return problems

    # -- opening --

    @classmethod
    def open(
        cls, conn: apsw.Connection, db_path: Path, *, readonly: bool, dim: int, model: str, fmt: str
    ) -> VectorIndex:
        """Load the index beside ``db_path`` and bring it up to date with ``conn`` (see module doc)."""
        index = cls(derived.path(db_path, "vec"), readonly=readonly, dim=dim, model=model, fmt=fmt)
        index.sync(conn)
        return index

    def sync(
        self, conn: apsw.Connection, added: Iterable[tuple[str, NDArray[np.float64]]] = (), *, fresh: bool = False
    ) -> None:
        """Make the index current for ``conn``'s committed state (inside a caller's transaction:
        for what that transaction sees).

        ``added`` optionally names (id, vector) pairs the caller just committed for *existing*
        rows (``embed``): when the index was current right before that write, they are applied as
        a delta instead of a rebuild. ``fresh``: none of them had a vector before that write, so
        no indexed row is replaced (saves an O(rows) id comparison per batch of ``embed --all``).

        The fingerprint and every row the catch-up or rebuild reads come from one read snapshot,
        taken once the lock is held. Read apart, a commit landing between them put rows in the
        matrix that the header's fingerprint (``max_rowid``) said were not there yet, and the next
        catch-up appended them a second time. Snapshot after the lock: it is at least as new as the
        committed state any earlier holder read (a header a writer stamped inside its own transaction
        names a tail row this snapshot may not see yet: the tail check rebuilds, from this snapshot).
        """
        with self._locked(), read_snapshot(conn):
            fp = fingerprint(conn)
            # Re-map when writable and the header changed: another process may have replaced the
            # files since (each such change replaces the header, the commit point, last).
            reload = not self._opened or (not self.readonly and not self._header_unchanged())
            if reload and not self._load_files():
                self._rebuild(conn, fp)
                return
            known = self.header.fingerprint()
            if known == fp:
                return
            if known.same_vectors(fp):
                self._commit(fp)
                return
            delta = list(added)
            if fp.epoch != known.epoch and not (delta and fp.epoch == known.epoch + 1):
                self._rebuild(conn, fp)
                return
            if not self._tail_matches(conn):
                self._rebuild(conn, fp)
                return
            self._catch_up(conn, fp, delta, fresh)

    # -- internals: files --

    def _path(self, suffix: str) -> Path:
        return Path(str(self.base) + suffix)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold an exclusive flock on the lock file while reading or updating the files."""
        lock_path = self._path(".lock")
        if self.readonly:
            try:
                fd = os.open(lock_path, os.O_RDONLY)
            except OSError:
                yield  # nothing to lock: no index files exist, or they cannot be read
                return
            mode = fcntl.LOCK_SH
        else:
            try:
                if not lock_path.parent.is_dir():
                    ensure_private_dir(lock_path.parent)  # the folder was deleted to force a rebuild
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            except (OSError, StoreError):
                self.readonly = True  # an unwritable directory: serve from memory
                yield
                return
            mode = fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _alloc(self, capacity: int, id_width: int) -> None:
        """Fresh in-memory arrays (the readonly path, and the first step of a rebuild)."""
        import numpy as np

        for name, (_suffix, dtype, shape) in zip(_ARRAYS, self._shapes(capacity, id_width), strict=True):
            setattr(self, name, np.zeros(shape, dtype=dtype))
        self.header.capacity, self.header.id_width = capacity, id_width
        self.persisted = False
        self._mapped_readonly = False

    def _shapes(self, capacity: int, id_width: int) -> list[tuple[str, str, tuple[int, ...]]]:
        d = self.header.dim
        return [
            ("", "<f8", (capacity, d)),
            (".norms", "<f8", (capacity,)),
            (".ids", f"S{id_width}", (capacity,)),
            (".rowids", "<i8", (capacity,)),
            (".active", "u1", (capacity,)),
            (".q8", "i1", (capacity, d)),
            (".qmult", "<f8", (capacity,)),
            (".qresid", "<f8", (capacity,)),
        ]

    def _arrays(self) -> list[NDArray[np.generic] | None]:
        return [getattr(self, name) for name in _ARRAYS]

    def _set_arrays(self, arrays: Sequence[NDArray[np.generic] | None]) -> None:
        for name, array in zip(_ARRAYS, arrays, strict=True):
            setattr(self, name, array)

    def _header_unchanged(self) -> bool:
        """The header on disk says what this index's maps hold (nobody committed since we read or
        wrote it). Compared by content, not by inode or mtime (an inode is reused, an mtime is
        coarse): files whose header equals ours in every field hold the same rows."""
        if not self.persisted or not self._header_seen:
            return False
        try:
            on_disk = json.loads(self._path(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return bool(on_disk == asdict(self.header))

    def _load_files(self) -> bool:
        """Map the files if the header describes this store's vectors; False means rebuild."""
        import numpy as np

        self._opened = True
        self._header_seen = False
        try:
            raw = json.loads(self._path(".json").read_text(encoding="utf-8"))
            # fields a later version added are ignored (it reads ours the same way): no rebuild
            header = Header(**{key: value for key, value in raw.items() if key in Header.__dataclass_fields__})
        except (OSError, ValueError, TypeError):
            return False
        want = self.header
        if (
            header.version not in (1, INDEX_VERSION) or header.dim != want.dim or header.model != want.model
            or header.fmt != want.fmt or not 0 <= header.rows <= header.capacity or header.id_width < 1
        ):  # fmt: skip
            return False
        maps: list[NDArray[np.generic] | None] = []
        mode: Literal["r", "r+"] = "r" if self.readonly else "r+"
        shapes = self._shapes(header.capacity, header.id_width)
        if header.version == 1:
            shapes = shapes[:_CODED]  # no codes yet: coded below when writable
        try:
            for suffix, dtype, shape in shapes:
                path = self._path(suffix)
                need = int(np.prod(shape)) * np.dtype(dtype).itemsize
                if path.stat().st_size < need:
                    return False
                if need == 0:
                    maps.append(np.zeros(shape, dtype=dtype))
                else:
                    maps.append(np.memmap(path, dtype=dtype, mode=mode, shape=shape))
        except (OSError, ValueError):
            return False
        maps += [None] * (len(_ARRAYS) - len(maps))
        self._set_arrays(maps)
        self.header = header
        self.persisted = not self.readonly
        self._mapped_readonly = self.readonly
        self._id_pos = None
        self._header_seen = True
        files_key = (os.stat(self._path("")).st_ino, header.epoch)  # extended in place: same inode
        if files_key != self._files_key:
            self._files_key, self.content_key = files_key, object()
        if not header.build_id and not self.readonly:
            header.build_id = secrets.token_hex(8)  # an index written before the field: name its rows now
            self._commit(header.fingerprint())
        if header.version == 1 and not self.readonly:
            try:
                self._upgrade_codes()
            except OSError:  # no room for the codes (a full disk): serve without them, try again later
                self._set_arrays([*self._arrays()[:_CODED], *([None] * (len(_ARRAYS) - _CODED))])
                self.header.version = 1
        return True

    def _upgrade_codes(self) -> None:
        """Version 1 -> 2: create the code files and code the rows already held, block by block."""
        import numpy as np

        header = self.header
        for (suffix, dtype, shape), name in zip(
            self._shapes(header.capacity, header.id_width)[_CODED:], _ARRAYS[_CODED:], strict=True
        ):
            path = self._path(suffix)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            try:
                os.ftruncate(fd, int(np.prod(shape)) * np.dtype(dtype).itemsize)
            finally:
                os.close(fd)
            empty = not np.prod(shape)
            setattr(self, name, np.zeros(shape, dtype=dtype) if empty else np.memmap(path, dtype=dtype, mode="r+", shape=shape))
        self._code_rows(0, header.rows)
        self.content_key = object()
        header.version = INDEX_VERSION
        self._commit(header.fingerprint())

    def _code_rows(self, start: int, end: int) -> None:
        """Fill the codes of rows [start, end) from their float64 vectors (block by block)."""
        if self._codes is None:
            return  # a version-1 index under --readonly: searched without codes
        for lo in range(start, end, QUANTIZE_BLOCK):
            hi = min(end, lo + QUANTIZE_BLOCK)
            self._codes[lo:hi], self._qmult[lo:hi], self._qresid[lo:hi] = quantize(self._vectors[lo:hi])

    def _detach(self) -> None:
        """Copy read-only maps into memory before a --readonly catch-up changes them."""
        import numpy as np

        if self._mapped_readonly:
            n = self.rows
            self._set_arrays([None if a is None else np.array(a[:n]) for a in self._arrays()])
            self.header.capacity = n
            self._mapped_readonly = False

    def _tail_matches(self, conn: apsw.Connection) -> bool:
        """The id at the indexed max(rowid) is unchanged (VACUUM did not renumber rows)."""
        if self.header.max_rowid <= 0:
            return True
        row = conn.execute(_SQL_ID_AT, (self.header.max_rowid,)).fetchone()
        return row is not None and str(row[0]) == self.header.tail_id

    def _create_files(self, capacity: int, id_width: int) -> None:
        """Create (or replace) the data files at ``capacity`` rows, 0600, and map them."""
        import numpy as np

        # Drop the header first: a crash while files are replaced must not leave an old header
        # vouching for new, still empty files. No header means rebuild.
        try:
            os.unlink(self._path(".json"))
        except FileNotFoundError:
            pass
        maps = []
        for suffix, dtype, shape in self._shapes(capacity, id_width):
            path = self._path(suffix)
            tmp = Path(str(path) + ".tmp")
            size = int(np.prod(shape)) * np.dtype(dtype).itemsize
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            maps.append(np.memmap(path, dtype=dtype, mode="r+", shape=shape))
        self._set_arrays(maps)
        self.header.capacity, self.header.id_width = capacity, id_width
        self.header.version = INDEX_VERSION
        self.persisted = True

    def _grow(self, need_rows: int, id_width: int) -> None:
        """Make room for ``need_rows`` rows and ids up to ``id_width`` bytes (doubling capacity)."""
        import numpy as np

        header = self.header
        if need_rows <= header.capacity and id_width <= header.id_width:
            return
        capacity = max(header.capacity, MIN_CAPACITY)
        while capacity < need_rows:
            capacity *= 2
        width = max(header.id_width, id_width)
        if self.persisted and not self.readonly and width == header.id_width:
            self._extend_files(capacity)
            return
        n = header.rows
        saved = [None if a is None else np.array(a[:n]) for a in self._arrays()]
        if self.persisted and not self.readonly:
            self._create_files(capacity, width)
        else:
            self._alloc(capacity, width)
        for target, values in zip(self._arrays(), saved, strict=True):
            if values is not None:
                target[:n] = values  # type: ignore[index]
        if saved[_CODED] is None:  # a version-1 index caught up under --readonly stays uncoded
            self._set_arrays([*self._arrays()[:_CODED], *([None] * (len(_ARRAYS) - _CODED))])

    def _extend_files(self, capacity: int) -> None:
        """Grow the mapped files to ``capacity`` rows in place: every array is row-major, so the
        rows already written keep their offsets and nothing is copied (a copy of a 100k x 768
        matrix held 0.6 GB of anonymous memory beside both files' pages during an import)."""
        import numpy as np

        try:  # as in _create_files: a crash before the next commit leaves no header, so a rebuild
            os.unlink(self._path(".json"))
        except FileNotFoundError:
            pass
        shapes = self._shapes(capacity, self.header.id_width)
        held = [a is not None for a in self._arrays()]  # an uncoded (version-1) index has no codes
        self._flush()
        # drop this object's maps before mapping the longer files, so the pages count once
        self._set_arrays([None] * len(_ARRAYS))
        maps: list[NDArray[np.generic] | None] = []
        for (suffix, dtype, shape), present in zip(shapes, held, strict=True):
            if not present:
                maps.append(None)
                continue
            path = self._path(suffix)
            os.truncate(path, int(np.prod(shape)) * np.dtype(dtype).itemsize)
            maps.append(np.memmap(path, dtype=dtype, mode="r+", shape=shape))
        self._set_arrays(maps)
        self.header.capacity = capacity

    def _flush(self) -> None:
        """Write the mapped arrays' dirty pages to their files."""
        for arr in self._arrays():
            flush = getattr(arr, "flush", None)
            if flush is not None:
                flush()

    def _commit(self, fp: Fingerprint) -> None:
        """Flush the data, then atomically replace the header (the index's commit point)."""
        if self._mapped_readonly:
            self.header = Header(**asdict(self.header))  # never alter what the maps describe
        self.header.stamp(fp)
        if self.readonly or not self.persisted:
            return
        self._flush()
        path = self._path(".json")
        tmp = Path(str(path) + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(self.header), fh)
        os.replace(tmp, path)
        self._header_seen = True

    # -- internals: content --

    def _append(self, rows: list[tuple[int, str, NDArray[np.float64]]], *, replaces: bool = True) -> None:
        """Append (rowid, id, vector) rows; with ``replaces``, deactivate older rows of the same ids."""
        import numpy as np

        if not rows:
            return
        width = max(len(r[1].encode("utf-8")) for r in rows)
        self._grow(self.rows + len(rows), width)
        replaced = {r[1] for r in rows}
        if self.rows and replaces:
            old = np.isin(self._ids[: self.rows], np.array([i.encode("utf-8") for i in replaced]))
            self._active[: self.rows][old] = 0
        start = self.rows
        block = np.vstack([r[2] for r in rows])
        end = start + len(rows)
        self._vectors[start:end] = block
        self._norms[start:end] = np.sqrt(np.einsum("ij,ij->i", block, block))
        self._ids[start:end] = [r[1].encode("utf-8") for r in rows]
        self._rowids[start:end] = [r[0] for r in rows]
        self._active[start:end] = 1
        self._code_rows(start, end)
        self.header.rows = end
        self._id_pos = None

    def _decoded(self, rows: Iterable[tuple[object, object, object]]) -> list[tuple[int, str, NDArray[np.float64]]]:
        """Decode blobs in the store's format, keeping only vectors of the index's dimension."""
        out = []
        for rowid, insight_id, raw in rows:
            vector = blob.decode(raw, self.header.fmt)  # type: ignore[arg-type]
            if vector is not None and vector.shape[0] == self.header.dim:
                out.append((int(rowid), str(insight_id), vector))  # type: ignore[call-overload]
        return out

    def _mask_deleted(self, conn: apsw.Connection) -> None:
        import numpy as np

        if not self.rows:
            return
        active_rowids = np.fromiter((r[0] for r in conn.execute(_SQL_ACTIVE_ROWIDS)), dtype=np.int64)
        alive = np.isin(self._rowids[: self.rows], active_rowids)
        self._active[: self.rows][~alive] = 0
        self._id_pos = None

    def _catch_up(
        self, conn: apsw.Connection, fp: Fingerprint, delta: list[tuple[str, NDArray[np.float64]]], fresh: bool
    ) -> None:
        self._detach()
        # Rows past the old max(rowid) are new insights: no indexed row holds their ids.
        new_rows = self._decoded(conn.execute(_SQL_ACTIVE_VECTORS_AFTER, (self.header.max_rowid,)))
        changed = []
        for insight_id, vector in delta:
            rowid = rowid_of(conn, insight_id)
            if rowid is not None and vector.shape[0] == self.header.dim:
                changed.append((rowid, insight_id, vector))
        known = self.header.fingerprint()
        self._append(new_rows, replaces=False)
        self._append(changed, replaces=not fresh)
        # Rows leave only by deletion (nothing is undeleted), so when the active count grew by
        # exactly the active rows inserted since, no indexed row was deleted: skip the O(n) pass
        # over every active rowid that masking needs (it made each write O(store) at 1M rows).
        inserted = int(scalar(conn, _SQL_ACTIVE_COUNT_AFTER, (known.max_rowid,)))
        if fp.active_count != known.active_count + inserted:
            self._mask_deleted(conn)
        self._commit(fp)

    def _rebuild(self, conn: apsw.Connection, fp: Fingerprint) -> None:
        """Derive every row from the blobs (the first open, or anything the header cannot vouch for)."""
        self.content_key, self._files_key = object(), None
        self.header = Header(
            INDEX_VERSION, self.header.dim, self.header.model, self.header.fmt, MIN_ID_WIDTH, 0, 0, -1, -1, -1, "", -1,
            build_id=secrets.token_hex(8),
        )
        rows = self._decoded(conn.execute(_SQL_ACTIVE_VECTORS_AFTER, (-1,)))
        width = max([MIN_ID_WIDTH] + [len(r[1].encode("utf-8")) for r in rows])
        capacity = MIN_CAPACITY
        while capacity < len(rows):
            capacity *= 2
        if self.readonly:
            self._alloc(capacity, width)
        else:
            try:
                self._create_files(capacity, width)
            except OSError:
                self.readonly = True  # cannot write beside the database: keep it in memory
                self._alloc(capacity, width)
        self._append(rows)
        self._commit(fp)



def remove_files(db_path: Path) -> None:
    """Delete the index files of the store at ``db_path`` (they are rebuilt on the next open)."""
    base = str(derived.path(db_path, "vec"))
    for suffix in (*_SUFFIXES, ".json", ".lock", HINT_SUFFIX):
        try:
            os.unlink(base + suffix)
        except FileNotFoundError:
            pass
