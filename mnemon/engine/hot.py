"""The derived token/edge hot index that recall, search and the write-path scans read.

Owns the in-memory form of the index: per-row numbers (active flag, category, source, importance,
created_at, id), the forward token lists (stemmed BM25 terms with tf, plain §4.1 token sets),
their postings, the entities, and the edge list with its both-directions CSR and the temporal
backbone prev/next. ``store.hotindex`` holds the file and the change queries; this module
tokenises (it is the engine's job, store never imports domain modules) and keeps the arrays.

Currency (architecture: the hot index): the index records the database fingerprint it
describes. A reader compares it with the live one; when it differs the index catches up
(new rows by rowid, deletions by ``deleted_at``, new edge rows by rowid, then verifies the
active-row and edge counts and reloads whatever does not add up), so a crash between a commit
and the index write can only make the index stale, never wrong. Under ``--readonly`` the index
is built or caught up in memory and nothing is written.

Base and delta (writes cost O(delta), not O(store)): the big file ``<db>.hot`` is a *base*
with sorted vocabulary, postings, id/created ranks and the edge CSR. A catch-up never re-sorts
or rewrites it: new rows, their new terms (appended unsorted after the sorted vocabulary) and
new edge rows are kept as a small tail segment, persisted on their own in ``<db>.index/hot.delta``
(tied to the base's build id). Scoring combines the two: a query's posting lists are the base
list plus the matching delta entries (BM25's df, N and avgdl are computed over the combined,
scoped rows, so every answer equals a fresh build's); ranks are updated by merging the few new
ids; the edge CSR is extended in place. The base is re-persisted (merged) only when the delta
passes :func:`merge_threshold` rows. The edge-count check (the guard against an edge row deleted
or replaced behind our back) compares with the trigger-kept counter (``mnemon.store.counts``, one
row read; COUNT(*) only on an old store opened --readonly); it runs when an edge reader needs the graph.
"""

from __future__ import annotations

import json
import secrets
import weakref
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import islice, repeat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemon.records import CATEGORIES, EDGE_TYPES
from mnemon.store import hotindex
from mnemon.store.hotindex import Fingerprint
from mnemon.text import insight_views

if TYPE_CHECKING:
    import apsw
    import numpy as np

FORMAT_VERSION = 1
EDGE_CODES = {name: code for code, name in enumerate(EDGE_TYPES)}
# What this process did to edge lists, for tests to assert on (never read by the index itself):
# full reloads from SQL, and edge rows dropped from the lists by a change-log catch-up.
EDGE_STATS = {"reloads": 0, "dropped": 0}


def _loads(raw: object) -> list[str]:
    try:
        value = json.loads(str(raw)) if raw else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _csr_from_lists(lists: list[list[int]], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(x) for x in lists]) if lists else []
    flat = np.fromiter((v for x in lists for v in x), dtype=dtype, count=int(ptr[-1]))
    return ptr, flat


def _concat_csr(a_ptr: np.ndarray, a_val: np.ndarray, b_ptr: np.ndarray, b_val: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    return np.concatenate([a_ptr, b_ptr[1:] + a_ptr[-1]]), np.concatenate([a_val, b_val])


def _invert(ptr: np.ndarray, terms: np.ndarray, n_terms: int, *extra: np.ndarray) -> tuple[np.ndarray, ...]:
    """Postings by term from a forward CSR by row: (post_ptr, post_rows, *extra values)."""
    import numpy as np

    rows = np.repeat(np.arange(ptr.shape[0] - 1, dtype=np.int32), np.diff(ptr))
    order = np.argsort(terms, kind="stable")  # stable: rows ascending inside each posting list
    post_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=post_ptr[1:])
    return (post_ptr, np.ascontiguousarray(rows[order]), *(np.ascontiguousarray(e[order]) for e in extra))


def _sorted_positions(values: Any, order: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``searchsorted(values[order], wanted)``; a few wanted values are bisected in place, so the
    sorted copy (a 36 MB gather of ids at 1M rows) is not built. ``values``: an array, or a
    ``(whole, item)`` pair of callables (the whole array joined on demand, one element by index)."""
    import numpy as np

    whole, item = values if isinstance(values, tuple) else (lambda: values, values.__getitem__)
    if wanted.shape[0] > _FEW_BISECTIONS:
        return np.searchsorted(whole()[order], wanted)
    out = np.empty(wanted.shape[0], dtype=np.int64)
    for j, w in enumerate(wanted.tolist()):
        lo, hi = 0, int(order.shape[0])
        while lo < hi:
            mid = (lo + hi) // 2
            if item(int(order[mid])) < w:
                lo = mid + 1
            else:
                hi = mid
        out[j] = lo
    return out


_FEW_BISECTIONS = 256


@dataclass(slots=True)
class Postings:
    ptr: np.ndarray
    rows: np.ndarray
    tf: np.ndarray | None


# rows_of: from this many ids on, hashing every row's id once beats bisecting string comparisons
_HASHED_LOOKUP_MIN_IDS = 4096
_HASH_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                     0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9)  # fmt: skip


def _id_hashes(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each fixed-width bytes id (uint64; equal ids give equal hashes).

    The id bytes, zero-padded to whole 8-byte words, are summed word by word with odd multipliers
    (uint64 arithmetic wraps), then mixed; collisions are possible and rows_of confirms every match.
    """
    import numpy as np

    n, width = ids.shape[0], ids.dtype.itemsize
    words = -(-width // 8)
    raw = np.zeros((n, words * 8), dtype=np.uint8)
    raw[:, :width] = np.frombuffer(np.ascontiguousarray(ids).tobytes(), dtype=np.uint8).reshape(n, width)
    packed = raw.view("<u8")
    h = np.zeros(n, dtype=np.uint64)
    for j in range(words):
        h += packed[:, j] * np.uint64(_HASH_MULTIPLIERS[j % len(_HASH_MULTIPLIERS)])
        h ^= h >> np.uint64(29)
    return h


def _insert_at(old: np.ndarray, at: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``np.insert(old, at, vals)`` for ascending ``at``, as a few slice copies (memory-bound)."""
    import numpy as np

    k = int(at.shape[0])
    out = np.empty(old.shape[0] + k, dtype=old.dtype)
    if k == 0:
        out[:] = old
        return out
    if k > 4096:
        mask = np.zeros(out.shape[0], dtype=np.bool_)
        mask[at + np.arange(k)] = True
        out[mask] = vals
        out[~mask] = old
        return out
    src = 0
    for i, a in enumerate(at.tolist()):
        out[src + i : a + i] = old[src:a]
        out[a + i] = vals[i]
        src = a
    out[src + k :] = old[src:]
    return out


# Arrays whose size grows with the store's tokens or edges: kept as a base part plus small
# appended parts, joined only when something reads the whole array (a merge, a test).
_SEGMENTED = ("r_term", "r_tf", "p_term", "e_ent", "edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone")
_SEG_DTYPES = {"r_term": "int32", "r_tf": "int32", "p_term": "int32", "e_ent": "int32", "edge_src": "int32",
               "edge_dst": "int32", "edge_type": "int8", "edge_weight": "float64", "edge_backbone": "bool",
               "id_blob": "S36", "created": "S20"}  # fmt: skip
# The widest per-row arrays (36 + 20 bytes a row) are segmented too: appending a delta's rows to a
# million mapped ids would copy 56 MB per process; readers take a part (_slice/_tail/_item).
_ROW_SEGMENTED = ("id_blob", "created")
_CSR_KEYS = ("csr_ptr", "csr_nbr", "csr_weight", "csr_type", "csr_out")
_LINK_KEYS = ("superseded", "prev", "next")
_EDGE_KEYS = _CSR_KEYS + _LINK_KEYS
_PER_ROW = ("id_blob", "created", "importance", "category", "source", "doc_len", "n_plain")

# Per-row arrays (and the row pointers of the forward CSRs) that a catch-up extends: each lives in a
# buffer with room to grow (``HotIndex._extend``), so appending a few rows writes those rows instead
# of copying the whole array (3.5 MB at 100k rows, faulted in fresh by every process that appended).
_GROWN = ("importance", "category", "source", "active", "doc_len", "n_plain", "r_ptr", "p_ptr", "e_ptr")

_BULK_LOOKUP = 4096  # edge rows per batch above which ids are resolved through one dict of every id
_LOAD_CHUNK = 1_000_000  # edge rows (a tenth as many insight rows) read from SQL per slice

# A delta segment is folded into a new base once it holds this many rows (new or deleted).
MERGE_MIN_ROWS = 512
MERGE_FRACTION = 0.02


# Rows of room the warm server leaves in an inherited index's per-row arrays (35 bytes a row).
FORK_ROOM = 4096


def merge_threshold(n_rows: int) -> int:
    return max(MERGE_MIN_ROWS, int(n_rows * MERGE_FRACTION))


def _headroom(size: int) -> int:
    """Capacity for an array about to hold ``size`` elements: geometric growth (amortised O(1) a row)."""
    return size + size // 8 + 64


class _Seg:
    """A segmented array attribute: reading joins the parts once; ``tail`` reads only a suffix."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> np.ndarray:
        import numpy as np

        parts: list[np.ndarray] = obj._parts[self.name]
        if len(parts) != 1:
            parts[:] = [np.concatenate(parts) if parts else np.zeros(0, dtype=_SEG_DTYPES[self.name])]
        return parts[0]

    def __set__(self, obj: Any, value: np.ndarray) -> None:
        obj._parts[self.name] = [value]


class _SortedTerms:
    """The base's sorted vocabulary straight from the mapped file (``\n``-joined UTF-8): looked up
    by bisection over the bytes (UTF-8 byte order is code point order), so a process that only
    asks for a query's few terms never splits a million-term string into a list."""

    def __init__(self, raw: np.ndarray) -> None:
        import numpy as np

        self.raw = raw
        breaks = np.flatnonzero(raw == 10)
        self.starts = np.concatenate([[0], breaks + 1]) if raw.size else np.zeros(0, dtype=np.int64)
        self.ends = np.concatenate([breaks, [raw.size]]) if raw.size else np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def _bytes(self, i: int) -> bytes:
        return self.raw[int(self.starts[i]) : int(self.ends[i])].tobytes()

    def find(self, term: str) -> int | None:
        try:
            want = term.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no stored term has one
            return None
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bytes(mid) < want:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self) and self._bytes(lo) == want else None

    def tolist(self) -> list[str]:
        text = self.raw.tobytes().decode("utf-8")
        return text.split("\n") if text else []


class HotIndex:
    """The hot index of one store; build with :meth:`open` (loads, catches up, persists)."""

    r_term = _Seg()
    r_tf = _Seg()
    p_term = _Seg()
    e_ent = _Seg()
    edge_src = _Seg()
    edge_dst = _Seg()
    edge_type = _Seg()
    edge_weight = _Seg()
    edge_backbone = _Seg()
    id_blob = _Seg()
    created = _Seg()

    def __init__(self) -> None:
        import numpy as np

        self._parts: dict[str, list[np.ndarray]] = {k: [np.zeros(0, dtype=v)] for k, v in _SEG_DTYPES.items()}
        self.fp = Fingerprint(-1, 0, 0, 0, "")
        self.base_fp = self.fp
        self.build_id = ""  # the base this index extends (a fresh build is its own base)
        self.delta_id = ""  # "" while the index is exactly its base
        self.edge_count_db = 0
        self.edges_verified = True  # edge_count_db was checked against the store's edge count at self.fp
        self.edges_reloaded = False  # the edge list no longer extends the base's: only a merge persists it
        self.any_vector = False  # some row carried an embedding blob when it was indexed
        self.ids: list[str] = []
        self.importance = np.zeros(0, dtype=np.int8)
        self.category = np.zeros(0, dtype=np.int8)
        self.source = np.zeros(0, dtype=np.int32)
        self.active = np.zeros(0, dtype=np.bool_)
        self.base_active = self.active  # the base's flags (to tell which base rows a delta deleted)
        self.doc_len = np.zeros(0, dtype=np.int32)
        self.n_plain = np.zeros(0, dtype=np.int32)
        self.sources: list[str] = []
        self.entities: list[str] = []
        # Term ids: the sorted base terms (a list, or the mapped bytes until a list is needed), then
        # the terms appended since, unsorted (ids n_sorted.., found through _tail_terms).
        self._sorted_terms: list[str] | _SortedTerms = []
        self._tail_vocab: list[str] = []
        self._tail_terms: dict[str, int] = {}
        self.base_n = 0  # rows, terms, edge rows and entities the base postings/CSR cover
        self.base_v = 0
        self.base_m = 0
        self.base_ent = 0
        self.r_ptr = np.zeros(1, dtype=np.int64)
        self.p_ptr = np.zeros(1, dtype=np.int64)
        self.e_ptr = np.zeros(1, dtype=np.int64)
        self._derived: dict[str, Any] = {}
        # Edge rows [0, _csr_m) are in the derived CSR (its ptr may cover fewer rows than n); rows
        # [_csr_m, m) are read from a small second CSR (the delta adjacency) instead of being
        # inserted, which would copy every array of the big one. -1: no CSR derived yet.
        self._csr_m = -1
        self._links_m = -1  # edge rows superseded/prev/next reflect (-1: none)
        self._delta_adj: tuple[tuple[int, int, int], tuple[np.ndarray, ...]] | None = None
        self._row_of: dict[str, int] | None = None
        # Entity -> id, kept in step with ``entities`` (append-only) so a catch-up does not rebuild it
        # over every entity; valid while it has as many keys as ``entities`` has names.
        self._ent_index: dict[str, int] | None = None
        self._known: tuple[tuple[str, str, int], np.ndarray, frozenset[str]] | None = None  # known_entities()
        # name -> (buffer, the view of it the attribute holds): see _GROWN and _extend.
        self._buffers: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._single_lookups = 0
        self._base_sorted: np.ndarray | None = None
        self._id_hashes: tuple[int, np.ndarray, np.ndarray] | None = None  # rows_of's hash order

    # --- size and lookups ---------------------------------------------------------------------

    @property
    def n(self) -> int:
        return int(self.active.shape[0])

    @property
    def m(self) -> int:
        return sum(int(p.shape[0]) for p in self._parts["edge_src"])

    @property
    def state_id(self) -> str:
        """Names what this index holds (the stamp file refers to it)."""
        return f"{self.build_id}+{self.delta_id}" if self.delta_id else self.build_id

    def _tail(self, name: str, start: int) -> np.ndarray:
        """Elements ``start:`` of a segmented array without joining the parts."""
        return self._slice(name, start, None)

    def _slice(self, name: str, start: int, stop: int | None) -> np.ndarray:
        """Elements ``start:stop`` of a segmented array without joining the parts."""
        import numpy as np

        out, off = [], 0
        for part in self._parts[name]:
            end = off + int(part.shape[0])
            if end > start and (stop is None or off < stop):
                out.append(part[max(0, start - off) : None if stop is None else max(0, stop - off)])
            off = end
        if not out:
            return np.zeros(0, dtype=_SEG_DTYPES[name])
        return out[0] if len(out) == 1 else np.concatenate(out)

    def row_values(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Elements ``rows`` of a segmented array (``id_blob``, ``created``) without joining its parts:
        a ranking of a few candidate rows reads their ids and times, not every row's."""
        import numpy as np

        parts = self._parts[name]
        if len(parts) == 1:
            return parts[0][rows]
        dtype = np.result_type(*parts)  # bytes: the widest part's width
        first = parts[0]
        base = int(first.shape[0])
        # Nearly every row lies in the base part (the parts after it are a delta's few rows): one
        # gather there, then the rows past it; no pass over ``rows`` per part (a million-row gather).
        out = first[np.minimum(rows, max(base - 1, 0))].astype(dtype, copy=False) if base else np.empty(rows.shape[0], dtype=dtype)
        late = np.flatnonzero(rows >= base)
        if late.size:
            tail = np.concatenate(parts[1:])
            out[late] = tail[rows[late] - base]
        return out

    def _item(self, name: str, index: int) -> Any:
        """Element ``index`` of a segmented array without joining the parts."""
        off = 0
        for part in self._parts[name]:
            end = off + int(part.shape[0])
            if index < end:
                return part[index - off]
            off = end
        raise IndexError(index)

    def _append_part(self, name: str, values: np.ndarray) -> None:
        if values.shape[0]:
            self._parts[name].append(values)

    def _extend(self, name: str, values: np.ndarray) -> None:
        """Append ``values`` to the per-row array ``name`` (one of _GROWN) in its buffer's spare room.

        Only elements past the current end are written, so a view handed out earlier (the array
        as a caller read it) never changes; the buffer is reallocated with headroom when full, when
        the attribute was replaced since, or when it is not ours to write (a mapped base file)."""
        k = int(values.shape[0])
        if not self._room(name, k):
            self._rebuffer(name, _headroom(int(getattr(self, name).shape[0]) + k))
        buf, cur = self._buffers[name]
        size = int(cur.shape[0])
        buf[size : size + k] = values
        view = buf[: size + k]
        setattr(self, name, view)
        self._buffers[name] = (buf, view)

    def _room(self, name: str, k: int) -> bool:
        buf, view = self._buffers.get(name, (None, None))
        return buf is not None and view is getattr(self, name) and buf.shape[0] >= view.shape[0] + k

    def _rebuffer(self, name: str, capacity: int) -> None:
        """Move ``name`` into a fresh buffer of ``capacity`` elements (a private, writable copy)."""
        import numpy as np

        cur = getattr(self, name)
        buf = np.empty(capacity, dtype=cur.dtype)
        buf[: cur.shape[0]] = cur
        view = buf[: cur.shape[0]]
        setattr(self, name, view)
        self._buffers[name] = (buf, view)

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` more rows in every per-row array, so that appending them (a forked
        worker's catch-up after a write) copies nothing: the warm server calls it once per load."""
        for name in _GROWN:
            if not self._room(name, rows):
                size = int(getattr(self, name).shape[0])
                self._rebuffer(name, max(_headroom(size), size + rows))

    def _entity_index(self) -> dict[str, int]:
        if self._ent_index is None or len(self._ent_index) != len(self.entities):
            self._ent_index = {e: i for i, e in enumerate(self.entities)}
        return self._ent_index

    def row_of(self, insight_id: str) -> int | None:
        if self._row_of is None:
            self._single_lookups += 1
            if self._single_lookups <= 64:  # a few look-ups: bisection; many: one dict
                return self._lookup([insight_id])[0]
            self._row_of = {i: r for r, i in enumerate(self.ids_list())}
        return self._row_of.get(insight_id)

    def _lookup(self, ids: list[str]) -> list[int | None]:
        """Rows of ``ids`` (None if unknown): bisection over the base's sorted ids, a dict for the tail."""
        import numpy as np

        if self._row_of is not None:
            return [self._row_of.get(i) for i in ids]
        out: list[int | None] = [None] * len(ids)
        tail = {bytes(b).decode("ascii", "replace"): self.base_n + r
                for r, b in enumerate(self._tail("id_blob", self.base_n).tolist())}  # fmt: skip
        rest = []
        for k, insight_id in enumerate(ids):
            got = tail.get(insight_id)
            if got is not None:
                out[k] = got
            else:
                rest.append(k)
        if rest and self.base_n:
            order = self._base_order()
            base_ids = self._slice("id_blob", 0, self.base_n)
            width = base_ids.dtype.itemsize
            wanted = [ids[k].encode("ascii", "replace") for k in rest]
            fits = [len(w) <= width for w in wanted]
            arr = np.array([w if f else b"" for w, f in zip(wanted, fits)], dtype=base_ids.dtype)
            pos = np.minimum(_sorted_positions(base_ids, order, arr), self.base_n - 1)
            rows = order[pos]
            hit = (base_ids[rows] == arr).tolist()
            for j, k in enumerate(rest):
                if fits[j] and hit[j]:
                    out[k] = int(rows[j])
        return out

    def _base_order(self) -> np.ndarray:
        """Base rows in id order (the inverse of the base's id ranks; the ids themselves are not copied)."""
        import numpy as np

        if self._base_sorted is None:
            rank = self._derived.get("id_rank")
            if rank is not None and rank.shape[0] == self.base_n:  # the base's own ranks: a permutation
                order = np.empty(self.base_n, dtype=np.int64)
                order[np.asarray(rank)] = np.arange(self.base_n, dtype=np.int64)
            else:
                rank = np.asarray(self._get("id_rank"))[: self.base_n]  # ranks among all rows: gaps for new ids
                slots = np.full(self.n, -1, dtype=np.int64)
                slots[rank] = np.arange(self.base_n, dtype=np.int64)
                order = slots[slots >= 0]
            self._base_sorted = order
        return self._base_sorted

    def ids_list(self) -> list[str]:
        if len(self.ids) != self.n:
            self.ids = [b.decode("ascii", "replace") for b in self.id_blob.tolist()]
        return self.ids

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows of many ids at once (-1 where unknown).

        Many ids (a vector index written in another order than this one, e.g. by ``embed --all``)
        are matched by a 64-bit hash of their bytes, sorted once per row count, then confirmed
        byte for byte; bisection over the sorted ids (string comparisons: 2 s for a million ids)
        settles only the few ids whose hash another row shares, and small batches.
        """
        import numpy as np

        wanted = np.char.encode(ids.astype(str), "ascii") if ids.dtype.kind == "U" else np.asarray(ids)
        if self.n == 0:
            return np.full(wanted.shape[0], -1, dtype=np.int64)
        if wanted.dtype.itemsize > self.id_blob.dtype.itemsize:  # an id longer than every stored one is unknown
            fits = np.char.str_len(wanted) <= self.id_blob.dtype.itemsize
            out = np.full(wanted.shape[0], -1, dtype=np.int64)
            if fits.any():
                out[fits] = self.rows_of(wanted[fits].astype(self.id_blob.dtype))
            return out
        wanted = wanted.astype(self.id_blob.dtype)
        if wanted.shape[0] < _HASHED_LOOKUP_MIN_IDS:
            return self._rows_by_bisection(wanted)
        keys, rows = self._id_hash_order()
        hashed = _id_hashes(wanted)
        by_hash = np.argsort(hashed)  # bisecting in hash order walks ``keys`` once: 10x fewer cache misses
        pos = np.empty(hashed.shape[0], dtype=np.int64)
        pos[by_hash] = np.searchsorted(keys, hashed[by_hash])
        np.minimum(pos, self.n - 1, out=pos)
        found = keys[pos] == hashed
        cand = rows[pos]
        same = found & (self.id_blob[cand] == wanted)
        out = np.where(same, cand, -1).astype(np.int64)
        shared = np.flatnonzero(found & ~same)  # the first row with this hash is another id
        if shared.size:
            out[shared] = self._rows_by_bisection(wanted[shared])
        return out

    def _id_hash_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted hashes of every row's id, the rows in that order), kept until rows are added."""
        import numpy as np

        cached = self._id_hashes
        if cached is None or cached[0] != self.n:
            hashed = _id_hashes(self.id_blob[: self.n])
            # any order among equal hashes will do: a match is confirmed by the id, a miss bisected
            order = np.argsort(hashed)
            cached = self._id_hashes = (self.n, hashed[order], order.astype(np.int64))
        return cached[1], cached[2]

    def _rows_by_bisection(self, wanted: np.ndarray) -> np.ndarray:
        """Rows of ``wanted`` (bytes of the ids' width) by bisection over the ids in id order (-1 where unknown)."""
        import numpy as np

        rank = self._get("id_rank")  # inverting it is O(n), no string sort per query
        order = np.empty(self.n, dtype=np.int64)
        order[rank] = np.arange(self.n, dtype=np.int64)
        sorted_ids = self.id_blob[order]
        pos = np.minimum(np.searchsorted(sorted_ids, wanted), max(self.n - 1, 0))
        return np.where(sorted_ids[pos] == wanted, order[pos], -1).astype(np.int64)

    def id_at(self, row: int) -> str:
        return bytes(self._item("id_blob", row)).decode("ascii", "replace")

    def term_ids(self, terms: Iterable[str]) -> list[int]:
        """Ids of the known terms among ``terms`` (unknown terms cannot match anything)."""
        out = []
        for term in terms:
            got = self._term_id(term)
            if got is not None:
                out.append(got)
        return out

    def _term_id(self, term: str) -> int | None:
        got = self._sorted_id(term)
        return got if got is not None else self._tail_terms.get(term)

    def _sorted_id(self, term: str) -> int | None:
        terms = self._sorted_terms
        if isinstance(terms, _SortedTerms):
            return terms.find(term)
        pos = bisect_left(terms, term)
        return pos if pos < len(terms) and terms[pos] == term else None

    @property
    def n_sorted(self) -> int:
        return len(self._sorted_terms)

    @property
    def n_terms(self) -> int:
        return len(self._sorted_terms) + len(self._tail_vocab)

    @property
    def vocab(self) -> list[str]:
        """Every term by id (builds the list: for merges, persistence and tests, not queries)."""
        if isinstance(self._sorted_terms, _SortedTerms):
            self._sorted_terms = self._sorted_terms.tolist()
        return self._sorted_terms + self._tail_vocab

    def _vocab_from(self, start: int) -> list[str]:
        """Terms with ids ``start..`` (the tail alone when ``start`` is past the sorted part)."""
        if start >= self.n_sorted:
            return self._tail_vocab[start - self.n_sorted :]
        return self.vocab[start:]

    # --- derived arrays (cached per process; the base's come from the file) ---------------------

    def _get(self, name: str) -> Any:
        if name.startswith("post_e_"):
            if name not in self._derived:
                self._derive_entity_postings()
        elif name.startswith("post_"):
            if name not in self._derived:
                self._derive_postings()
        elif name in ("id_rank", "created_rank"):
            got = self._derived.get(name)
            if got is None or got.shape[0] != self.n:
                self._derive_ranks()
        elif name in _CSR_KEYS:
            if self._csr_m < 0 or self._csr_m > self.m or any(k not in self._derived for k in _CSR_KEYS):
                self._derive_csr()
        elif name in _LINK_KEYS:
            self._derive_links()
        return self._derived[name]

    def _derive_postings(self) -> None:
        """Base postings over rows ``< base_n`` and terms ``< base_v`` (the delta is scanned per query)."""
        n, v = self.base_n, self.base_v
        r_end, p_end = int(self.r_ptr[n]), int(self.p_ptr[n])
        d = self._derived
        d["post_r_ptr"], d["post_r_rows"], d["post_r_tf"] = _invert(
            self.r_ptr[: n + 1], self.r_term[:r_end], v, self.r_tf[:r_end])
        d["post_p_ptr"], d["post_p_rows"] = _invert(self.p_ptr[: n + 1], self.p_term[:p_end], v)  # fmt: skip

    def _derive_entity_postings(self) -> None:
        """Rows by entity over the base rows (a store file without them derives them once here)."""
        e_end = int(self.e_ptr[self.base_n])
        self._derived["post_e_ptr"], self._derived["post_e_rows"] = _invert(
            self.e_ptr[: self.base_n + 1], self._slice("e_ent", 0, e_end), self.base_ent)  # fmt: skip

    def entity_postings(self, ent_ids: list[int]) -> list[np.ndarray]:
        """The rows (active or not) carrying each entity of ``ent_ids``: the base's posting list plus
        the delta's entries, so a query never reads every row's entities."""
        import numpy as np

        ptr, rows = self._get("post_e_ptr"), self._get("post_e_rows")
        start = int(self.e_ptr[self.base_n])
        d_ents = self._tail("e_ent", start)
        d_rows = np.repeat(np.arange(self.base_n, self.n, dtype=np.int32), np.diff(self.e_ptr[self.base_n :]))
        out = []
        for e in ent_ids:
            base = np.asarray(rows[int(ptr[e]) : int(ptr[e + 1])]) if e < self.base_ent else np.zeros(0, np.int32)
            out.append(np.concatenate([base, d_rows[d_ents == e]]) if d_ents.shape[0] else base)
        return out

    def _derive_ranks(self) -> None:
        """id_rank and created_rank; after a catch-up the few new rows are merged into the old ranks."""
        import numpy as np

        n = self.n
        old_id = self._derived.get("id_rank")
        old_cr = self._derived.get("created_rank")
        k = 0 if old_id is None or old_cr is None else int(old_id.shape[0])
        if k == 0 or k > n:
            self._derived["id_rank"] = np.argsort(np.argsort(self.id_blob, kind="stable"), kind="stable").astype(np.int32)
            _, created_rank = np.unique(self.created, return_inverse=True)
            self._derived["created_rank"] = created_rank.astype(np.int32).reshape(n)
            return
        assert old_id is not None and old_cr is not None
        old_id, old_cr = np.asarray(old_id, dtype=np.int64), np.asarray(old_cr, dtype=np.int64)
        # ids: new rank = old rank + new ids sorting before it; new ids slot in after their bisection point
        order = np.empty(k, dtype=np.int64)
        order[old_id] = np.arange(k, dtype=np.int64)
        new_ids = self._tail("id_blob", k)
        new_order = np.argsort(new_ids, kind="stable")
        old_ids = (lambda: self._slice("id_blob", 0, k), lambda r: self._item("id_blob", r))  # no join for a few
        pos = _sorted_positions(old_ids, order, new_ids[new_order])
        id_rank = np.empty(n, dtype=np.int32)
        id_rank[:k] = old_id + np.searchsorted(pos, old_id, side="right")
        id_rank[k + new_order] = pos + np.arange(n - k)
        self._derived["id_rank"] = id_rank
        # created_at (dense rank): cheap when the new rows are not older than every old one's newest
        top = int(old_cr.max()) if k else -1
        newest = self._item("created", int(np.argmax(old_cr))) if k else b""
        new_created = self._tail("created", k)
        if new_created.shape[0] and bool((new_created < newest).any()):
            _, created_rank = np.unique(self.created, return_inverse=True)
            self._derived["created_rank"] = created_rank.astype(np.int32).reshape(n)
            return
        uniq, inv = np.unique(new_created, return_inverse=True)
        shift = 0 if (uniq.shape[0] and uniq[0] == newest) else 1
        cr = np.empty(n, dtype=np.int32)
        cr[:k] = old_cr
        cr[k:] = top + shift + inv.reshape(-1)
        self._derived["created_rank"] = cr

    def prepare_for_forks(self, rows: int = FORK_ROOM) -> None:
        """Derive now what commands derive lazily (postings, ranks, the edge CSR with the delta's,
        the base's id order for look-ups, the entity index) and make room for ``rows`` appended
        rows: processes forked from this one (the warm server's workers) inherit all of it, and
        their catch-up after a write appends a row without copying a per-row array."""
        for name in ("post_r_ptr", "post_p_ptr", "post_e_ptr", "id_rank"):
            self._get(name)
        self.edge_arrays()
        if self.base_n:
            self._base_order()
        self._entity_index()
        self.known_entities()  # derives the base's per-entity live counts when its file lacks them
        self.reserve(rows)

    def _derive(self) -> None:
        """Every derived array, the delta's edges folded into the CSR (before a base is written)."""
        import numpy as np

        for name in ("post_r_ptr", "post_e_ptr", "id_rank", "csr_ptr", "superseded"):
            self._get(name)
        if "entity_live" not in self._derived and self.base_n == self.n:
            self._derived["entity_live"] = self._entity_live_of(np.arange(self.n), np.asarray(self.active))
        if self._csr_m != self.m or self._derived["csr_ptr"].shape[0] != self.n + 1:
            self._derived.update(self._folded_csr())
            self._csr_m = self.m
            self._delta_adj = None

    def edge_arrays(self) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...] | None]:
        """The edge CSR as the read path takes it: the big CSR as derived (or mapped from the base
        file) and, when edge rows were added since, the delta adjacency over all n rows (both
        ``(ptr, nbr, weight, type, out)``; None: no delta). O(delta + n) per change, never O(E)."""
        big = tuple(self._get(k) for k in _CSR_KEYS)
        if self._csr_m == self.m and big[0].shape[0] == self.n + 1:
            return big, None  # rows added since without edges still need the delta's n + 1 ptr
        return big, self._delta_csr()

    def _delta_csr(self) -> tuple[np.ndarray, ...]:
        import numpy as np

        key = (self._csr_m, self.m, self.n)
        if self._delta_adj is None or self._delta_adj[0] != key:
            n, start = self.n, self._csr_m
            src, dst = self._tail("edge_src", start), self._tail("edge_dst", start)
            e_type, e_weight = self._tail("edge_type", start), self._tail("edge_weight", start)
            # Same entry order as inserting at each node's segment end: outgoing entries in rowid
            # order, then incoming ones (the order of a fresh build differs only among identical
            # transitions, see _folded_csr).
            node = np.concatenate([src, dst]).astype(np.int64)
            order = np.argsort(node, kind="stable")
            ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(node, minlength=n), out=ptr[1:])
            out_flag = np.concatenate([np.ones(src.shape[0], dtype=np.bool_), np.zeros(src.shape[0], dtype=np.bool_)])
            arrays = (
                ptr, np.ascontiguousarray(np.concatenate([dst, src])[order], dtype=np.int32),
                np.ascontiguousarray(np.concatenate([e_weight, e_weight])[order], dtype=np.float64),
                np.ascontiguousarray(np.concatenate([e_type, e_type])[order], dtype=np.int8),
                np.ascontiguousarray(out_flag[order]),
            )  # fmt: skip
            self._delta_adj = (key, arrays)
        return self._delta_adj[1]

    def incident(self, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Row ``row``'s CSR entries (neighbour, type, weight, out flag) over both CSRs."""
        import numpy as np

        (ptr, nbr, wt, typ, out), delta = self.edge_arrays()
        lo, hi = (int(ptr[row]), int(ptr[row + 1])) if row < ptr.shape[0] - 1 else (0, 0)
        parts = [(nbr[lo:hi], typ[lo:hi], wt[lo:hi], out[lo:hi])]
        if delta is not None:
            d_ptr, d_nbr, d_wt, d_typ, d_out = delta
            dlo, dhi = int(d_ptr[row]), int(d_ptr[row + 1])
            parts.append((d_nbr[dlo:dhi], d_typ[dlo:dhi], d_wt[dlo:dhi], d_out[dlo:dhi]))
        return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]

    def _derive_csr(self) -> None:
        """The CSR of every edge row from scratch (a build, a reload): O(E)."""
        self._derived.update(self._derive_edges())
        self._csr_m = self._links_m = self.m
        self._delta_adj = None

    def _derive_links(self) -> None:
        """superseded/prev/next for n rows, extended by the edge rows added since (O(n + delta))."""
        import numpy as np

        d = self._derived
        if self._links_m < 0 or self._links_m > self.m or any(k not in d for k in _LINK_KEYS):
            self._derive_csr()
            return
        if self._links_m == self.m and d["superseded"].shape[0] == self.n:
            return
        start = self._links_m
        pad = self.n - d["superseded"].shape[0]
        superseded = np.concatenate([d["superseded"], np.zeros(pad, dtype=np.bool_)])
        prev = np.concatenate([d["prev"], np.full(pad, -1, dtype=np.int32)])
        nxt = np.concatenate([d["next"], np.full(pad, -1, dtype=np.int32)])
        src, dst = self._tail("edge_src", start), self._tail("edge_dst", start)
        e_type, e_bb = self._tail("edge_type", start), self._tail("edge_backbone", start)
        superseded[dst[e_type == EDGE_CODES["supersedes"]]] = True
        bb = np.flatnonzero(e_bb)  # older→newer; later rows (higher rowid) win
        prev[dst[bb]] = src[bb]
        nxt[src[bb]] = dst[bb]
        d.update({"superseded": superseded, "prev": prev, "next": nxt})
        self._links_m = self.m

    def _folded_csr(self) -> dict[str, Any]:
        """The CSR with the delta adjacency's entries inserted (a merge writes it as the new base).

        Re-sorting every entry would cost more than inserting the few new ones. New entries go to
        the end of their node's segment, where the delta adjacency lists them too: within a node
        the CSR order only separates transitions that are identical for the beam (same neighbour,
        type and delta), so results do not change.
        """
        import numpy as np

        old, m_old = self._derived, self._csr_m
        n = self.n
        src, dst = self._tail("edge_src", m_old), self._tail("edge_dst", m_old)
        e_type, e_weight = self._tail("edge_type", m_old), self._tail("edge_weight", m_old)
        ptr_old = np.asarray(old["csr_ptr"])
        ptr = np.concatenate([ptr_old, np.full(n + 1 - ptr_old.shape[0], ptr_old[-1], dtype=np.int64)])
        node = np.concatenate([src, dst]).astype(np.int64)
        order = np.argsort(node, kind="stable")
        at = ptr[node[order] + 1]  # the end of each node's current segment
        both_w = np.concatenate([e_weight, e_weight])[order]
        both_t = np.concatenate([e_type, e_type])[order]
        out_flag = np.concatenate([np.ones(src.shape[0], dtype=np.bool_), np.zeros(src.shape[0], dtype=np.bool_)])
        grown = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=n), out=grown[1:])
        d: dict[str, Any] = {
            "csr_ptr": ptr + grown,
            "csr_nbr": _insert_at(np.asarray(old["csr_nbr"]), at, np.concatenate([dst, src])[order].astype(np.int32)),
            "csr_weight": _insert_at(np.asarray(old["csr_weight"]), at, both_w),
            "csr_type": _insert_at(np.asarray(old["csr_type"]), at, both_t),
            "csr_out": _insert_at(np.asarray(old["csr_out"]), at, out_flag[order]),
        }
        return d

    def _derive_edges(self) -> dict[str, Any]:
        import numpy as np

        n = self.n
        src, dst = self.edge_src, self.edge_dst
        m = src.shape[0]
        # Both directions of every row; ``out`` marks the entry listed at the edge's source.
        node = np.concatenate([src, dst])
        nbr = np.concatenate([dst, src])
        order = np.argsort(node, kind="stable")  # stable keeps rowid order within a node
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=n), out=ptr[1:])
        out = np.concatenate([np.ones(m, dtype=np.bool_), np.zeros(m, dtype=np.bool_)])
        return {
            "csr_ptr": ptr,
            "csr_nbr": np.ascontiguousarray(nbr[order]),
            "csr_weight": np.ascontiguousarray(np.concatenate([self.edge_weight, self.edge_weight])[order]),
            "csr_type": np.ascontiguousarray(np.concatenate([self.edge_type, self.edge_type])[order]),
            "csr_out": np.ascontiguousarray(out[order]),
            **self._links_of(n, src, dst, self.edge_type, self.edge_backbone),
        }

    @staticmethod
    def _links_of(n: int, src: np.ndarray, dst: np.ndarray, typ: np.ndarray, backbone: np.ndarray) -> dict[str, Any]:
        """superseded/prev/next of n rows from every listed edge row (in rowid order)."""
        import numpy as np

        superseded = np.zeros(n, dtype=np.bool_)
        superseded[dst[typ == EDGE_CODES["supersedes"]]] = True
        prev = np.full(n, -1, dtype=np.int32)
        nxt = np.full(n, -1, dtype=np.int32)
        bb = np.flatnonzero(backbone)  # older→newer; later rows (higher rowid) win
        prev[dst[bb]] = src[bb]
        nxt[src[bb]] = dst[bb]
        return {"superseded": superseded, "prev": prev, "next": nxt}

    def query_postings(self, qids: list[int], *, plain: bool) -> tuple[Postings, list[int]]:
        """Posting lists of just ``qids`` over base + delta rows (rows ascending, as a fresh build's),
        and the query ids to score them with (0..k-1)."""
        import numpy as np

        if plain:
            b_ptr, b_rows, b_tf = self._get("post_p_ptr"), self._get("post_p_rows"), None
            ptr, name = self.p_ptr, "p_term"
        else:
            b_ptr, b_rows, b_tf = self._get("post_r_ptr"), self._get("post_r_rows"), self._get("post_r_tf")
            ptr, name = self.r_ptr, "r_term"
        start = int(ptr[self.base_n])
        d_terms = self._tail(name, start)
        d_tf = self._tail("r_tf", start) if not plain else None
        d_rows = np.repeat(np.arange(self.base_n, self.n, dtype=np.int32), np.diff(ptr[self.base_n :]))
        rows_out: list[np.ndarray] = []
        tf_out: list[np.ndarray] = []
        out_ptr = np.zeros(len(qids) + 1, dtype=np.int64)
        for k, q in enumerate(qids):
            size = 0
            if q < self.base_v:
                lo, hi = int(b_ptr[q]), int(b_ptr[q + 1])
                rows_out.append(np.asarray(b_rows[lo:hi], dtype=np.int32))
                if b_tf is not None:
                    tf_out.append(np.asarray(b_tf[lo:hi], dtype=np.int32))
                size += hi - lo
            if d_terms.shape[0]:
                hit = d_terms == q
                rows_out.append(d_rows[hit])
                if d_tf is not None:
                    tf_out.append(d_tf[hit])
                size += int(hit.sum())
            out_ptr[k + 1] = out_ptr[k] + size
        rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int32)
        tf = (np.concatenate(tf_out) if tf_out else np.zeros(0, dtype=np.int32)) if not plain else None
        return Postings(out_ptr, np.ascontiguousarray(rows, dtype=np.int32), tf), list(range(len(qids)))

    def recall_postings(self) -> Postings:
        """Full postings (merges the delta: O(store); scoring uses :meth:`query_postings`)."""
        if self.base_n == self.n and self.base_v == self.n_terms:
            return Postings(self._get("post_r_ptr"), self._get("post_r_rows"), self._get("post_r_tf"))
        ptr, rows, tf = _invert(self.r_ptr, self.r_term, self.n_terms, self.r_tf)
        return Postings(ptr, rows, tf)

    def plain_postings(self) -> Postings:
        if self.base_n == self.n and self.base_v == self.n_terms:
            return Postings(self._get("post_p_ptr"), self._get("post_p_rows"), None)
        ptr, rows = _invert(self.p_ptr, self.p_term, self.n_terms)
        return Postings(ptr, rows, None)

    def derived(self, name: str) -> Any:
        if name in _CSR_KEYS:  # the big CSR alone misses a delta's edge rows: read both, never one
            raise KeyError(f"{name}: read the edge CSR through HotIndex.edge_arrays() (base CSR + delta CSR)")
        return self._get(name)

    def entity_rows(self) -> np.ndarray:
        import numpy as np

        return np.repeat(np.arange(self.n, dtype=np.int32), np.diff(self.e_ptr))

    def known_entities(self) -> frozenset[str]:
        """Entity strings present on active insights (index-aware extraction, §4.3).

        From the base's per-entity count of active rows carrying it (``entity_live``, written with
        the base), adjusted by the delta's rows and the base rows deleted since: O(delta), where
        reading every row's entities is O(entity occurrences) per process. Kept until the rows or
        their flags change (a catch-up gives a new delta id; the warm server's workers inherit it):
        building the set of 50k names costs milliseconds."""
        import numpy as np

        key = (self.build_id, self.delta_id, self.n)
        if self._known is not None and self._known[0] == key and self._known[1] is self.active:
            return self._known[2]
        counts = np.zeros(len(self.entities), dtype=np.int64)
        base = self._derived.get("entity_live")
        if base is None or base.shape[0] != self.base_ent:
            # A base file without it (written before it was kept): derived once per base, not per call
            # (9 ms at 100k); base rows carry only the base's entities, so the rest of the counts are 0.
            base = self._entity_live_of(np.arange(self.base_n), np.asarray(self.base_active))[: self.base_ent]
            self._derived["entity_live"] = base
        counts[: base.shape[0]] += base
        counts += self._entity_live_of(np.arange(self.base_n, self.n), self.active[self.base_n :])
        gone = np.flatnonzero(np.asarray(self.base_active) & ~self.active[: self.base_n])
        counts -= self._entity_live_of(gone, np.ones(gone.shape[0], dtype=np.bool_))
        known = frozenset(self.entities[i] for i in np.flatnonzero(counts > 0).tolist())
        self._known = (key, self.active, known)
        return known

    def _entity_live_of(self, rows: np.ndarray, live: np.ndarray) -> np.ndarray:
        """Per entity, how many of ``rows`` (those with ``live`` set) carry it."""
        import numpy as np

        rows = rows[live]
        if rows.shape[0] == 0:
            return np.zeros(len(self.entities), dtype=np.int64)
        lo, hi = self.e_ptr[rows], self.e_ptr[rows + 1]
        start, lens = int(lo.min()), hi - lo
        segment = self._slice("e_ent", start, int(hi.max()))  # the base part or the delta's: no join
        before = np.cumsum(lens) - lens
        ents = segment[np.repeat(lo - start - before, lens) + np.arange(int(lens.sum()))]
        return np.bincount(ents, minlength=len(self.entities)).astype(np.int64)

    # --- building and catching up ----------------------------------------------------------------

    def _append_rows(self, rows: list[tuple[Any, ...]], sequences: Mapping[str, list[str]] | None = None) -> None:
        """Tokenise new active rows and append them (the only place text is tokenised; a row
        whose id is in ``sequences`` comes with its content's token sequence)."""
        import numpy as np

        if not rows:
            return
        tail, tail_vocab, sorted_id = self._tail_terms, self._tail_vocab, self._sorted_id
        n_sorted = self.n_sorted

        def tid(term: str) -> int:
            got = tail.get(term)
            if got is None:
                got = sorted_id(term)
                if got is not None:
                    return got
                got = tail[term] = n_sorted + len(tail_vocab)
                tail_vocab.append(term)
            return got

        ent_index, entities = self._entity_index(), self.entities

        def eid(entity: str) -> int:
            got = ent_index.get(entity)
            if got is None:  # a new entity: the name list and its index grow together
                got = ent_index[entity] = len(entities)
                entities.append(entity)
            return got

        src_index = {s: i for i, s in enumerate(self.sources)}
        r_lists: list[list[int]] = []
        tf_lists: list[list[int]] = []
        p_lists: list[list[int]] = []
        e_lists: list[list[int]] = []
        ids, created, imp, cat, srcs, doc_len, n_plain = [], [], [], [], [], [], []
        for _rowid, ins_id, content, tags_raw, ents_raw, category, source, importance, created_at, has_vec in rows:
            self.any_vector = self.any_vector or bool(has_vec)
            tags, ents = _loads(tags_raw), _loads(ents_raw)
            content = str(content)
            sequence = sequences.get(ins_id) if sequences else None
            terms, plain, content_len = insight_views(content, tags, ents, sequence)
            counts = Counter(terms)
            r_lists.append([tid(t) for t in counts])
            tf_lists.append(list(counts.values()))
            p_lists.append([tid(t) for t in plain])
            e_lists.append([eid(e) for e in dict.fromkeys(ents)])
            ids.append(str(ins_id))
            created.append(str(created_at).encode("utf-8"))
            imp.append(int(importance))
            cat.append(CATEGORIES.index(category) if category in CATEGORIES else -1)
            srcs.append(src_index.setdefault(str(source), len(src_index)))
            doc_len.append(content_len)
            n_plain.append(len(plain))
        self.sources = list(src_index)
        r_ptr, r_term = _csr_from_lists(r_lists, np.int32)
        _, r_tf = _csr_from_lists(tf_lists, np.int32)
        p_ptr, p_term = _csr_from_lists(p_lists, np.int32)
        e_ptr, e_ent = _csr_from_lists(e_lists, np.int32)
        self._extend("r_ptr", r_ptr[1:] + self.r_ptr[-1])
        self._extend("p_ptr", p_ptr[1:] + self.p_ptr[-1])
        self._extend("e_ptr", e_ptr[1:] + self.e_ptr[-1])
        self._append_part("r_term", r_term)
        self._append_part("r_tf", r_tf)
        self._append_part("p_term", p_term)
        self._append_part("e_ent", e_ent)
        # new parts (joining promotes to the widest part's width)
        self._append_part("id_blob", np.array(ids, dtype=f"S{max([len(i) for i in ids] + [1])}"))
        self._append_part("created", np.array(created, dtype=f"S{max([len(c) for c in created] + [1])}"))
        self._extend("importance", np.array(imp, dtype=np.int8))
        self._extend("category", np.array(cat, dtype=np.int8))
        self._extend("source", np.array(srcs, dtype=np.int32))
        self._extend("active", np.ones(len(ids), dtype=np.bool_))
        self._extend("doc_len", np.array(doc_len, dtype=np.int32))
        self._extend("n_plain", np.array(n_plain, dtype=np.int32))
        self.ids = []
        if self._row_of is not None:
            self._row_of.update((i, self.n - len(ids) + k) for k, i in enumerate(ids))

    def _sort_vocab(self) -> None:
        """Sort the whole vocabulary (ids = positions) and renumber every term (a build or merge)."""
        import numpy as np

        merged = self.vocab
        order = sorted(range(len(merged)), key=merged.__getitem__)
        remap = np.empty(len(merged), dtype=np.int32)
        remap[np.array(order, dtype=np.int64)] = np.arange(len(merged), dtype=np.int32)
        self._sorted_terms = [merged[i] for i in order]
        self.r_term = remap[self.r_term] if self.r_term.size else self.r_term
        self.p_term = remap[self.p_term] if self.p_term.size else self.p_term
        self._tail_vocab = []
        self._tail_terms = {}

    def _append_edges(self, rows: list[tuple[Any, ...]]) -> int:
        """Append edge rows between known rows; return how many edge rows were read.

        Column by column (a build reads tens of millions of rows): ids to rows through one dict
        for a large batch, by bisection over the base for a catch-up's few rows.
        """
        import numpy as np

        k = len(rows)
        if not k:
            return 0
        _rowid, src_ids, dst_ids, types, weights, backbone = zip(*rows)
        if k > _BULK_LOOKUP:
            if self._row_of is None:
                self._row_of = {i: r for r, i in enumerate(self.ids_list())}
            get = self._row_of.get
            src = np.fromiter(map(get, src_ids, repeat(-1)), dtype=np.int64, count=k)
            dst = np.fromiter(map(get, dst_ids, repeat(-1)), dtype=np.int64, count=k)
        else:
            ends = self._lookup([str(i) for i in src_ids] + [str(i) for i in dst_ids])
            both = np.array([-1 if e is None else e for e in ends], dtype=np.int64)
            src, dst = both[:k], both[k:]
        typ = np.fromiter(map(EDGE_CODES.get, types, repeat(-1)), dtype=np.int64, count=k)
        keep = (src >= 0) & (dst >= 0) & (typ >= 0)  # else: touches an insight deleted before we saw it
        if keep.any():
            self._append_part("edge_src", src[keep].astype(np.int32))
            self._append_part("edge_dst", dst[keep].astype(np.int32))
            self._append_part("edge_type", typ[keep].astype(np.int8))
            self._append_part("edge_weight", np.array(weights, dtype=np.float64)[keep])
            self._append_part("edge_backbone", np.array(backbone, dtype=np.bool_)[keep])
        return k

    def _append_edges_from(self, cursor: Iterable[tuple[Any, ...]]) -> int:
        """``_append_edges`` over a cursor in slices, so a build never holds every edge row as tuples."""
        read = 0
        it = iter(cursor)
        while chunk := list(islice(it, _LOAD_CHUNK)):
            read += self._append_edges(chunk)
        return read

    def _reload_edges(self, conn: apsw.Connection) -> None:
        for name in ("edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone"):
            self._parts[name] = []
        self._csr_m = self._links_m = -1
        self._delta_adj = None
        self.edges_reloaded = True
        EDGE_STATS["reloads"] += 1
        self._append_edges_from(hotindex.edges_since(conn, 0))
        # The reference is the store's edge count as the guard reads it (the counter when kept), so
        # a counter off by a constant (a foreign writer without the triggers) reloads once, not on
        # every read; doctor reports such a counter and --repair recounts it.
        self.edge_count_db = hotindex.edge_count(conn)
        self.edges_verified = True

    @classmethod
    def build(cls, conn: apsw.Connection, fp: Fingerprint, sequences: Mapping[str, list[str]] | None = None) -> HotIndex:
        """Build from scratch (inside the caller's read snapshot); ``sequences`` as in ``index_for``."""
        index = cls()
        it = hotindex.rows_since(conn, 0)
        while chunk := list(islice(it, _LOAD_CHUNK // 10)):  # rows carry their text: smaller slices
            index._append_rows(chunk, sequences)
        index._sort_vocab()
        index._reload_edges(conn)
        index.fp = fp
        index._make_base()
        return index

    def _make_base(self) -> None:
        """This index becomes a base: everything it holds is covered by sorted vocab, postings, CSR."""
        self.base_n, self.base_v, self.base_m, self.base_ent = self.n, self.n_terms, self.m, len(self.entities)
        self.base_fp = self.fp
        self.base_active = self.active
        self.build_id = secrets.token_hex(8)
        self.delta_id = ""
        self.edges_reloaded = False
        for name in ("post_r_ptr", "post_r_rows", "post_r_tf", "post_p_ptr", "post_p_rows", "entity_live",
                     "post_e_ptr", "post_e_rows"):
            self._derived.pop(name, None)
        self._base_sorted = None

    def merge(self) -> None:
        """Fold the delta into a new base (sorted vocabulary, fresh postings); O(store), rare."""
        if self._tail_vocab:
            self._sort_vocab()
        self._make_base()
        self._derive()

    def delta_rows(self) -> int:
        """Rows the delta holds beyond its base: new rows plus base rows deleted since."""
        return (self.n - self.base_n) + max(0, self.fp.deleted_count - self.base_fp.deleted_count)

    def catch_up(self, conn: apsw.Connection, fp: Fingerprint, sequences: Mapping[str, list[str]] | None = None) -> HotIndex:
        """Apply what changed since ``self.fp``; rebuild what cannot be reconciled.

        New rows, deletions and new edge rows are applied by rowid/``deleted_at`` in O(delta).
        The edge-count check that catches an edge row deleted or replaced out of sight is left
        to :meth:`verify_edges`, which edge readers (recall) call.
        """
        import numpy as np

        old = self.fp
        if (fp.max_rowid < old.max_rowid or fp.max_edge_rowid < old.max_edge_rowid or fp.deleted_count < old.deleted_count
                or fp.edge_seq < old.edge_seq):
            return HotIndex.build(conn, fp, sequences)  # rowids renumbered (VACUUM) or rows undeleted: start over
        if replace(fp, generation=old.generation) == old:
            self.fp = fp  # only access counts, EI or vectors changed: nothing this index holds
            return self
        self._append_rows(list(hotindex.rows_since(conn, old.max_rowid)), sequences)
        # A store with an edge change log names every edge row deleted or replaced since old.fp:
        # drop those from the lists (before the new rows are appended, so only rows seen before
        # can match). Without one, a deleted row's edges are counted below and any other change
        # is caught by verify_edges' count, which then reloads the whole list.
        logged = hotindex.has_edge_log(conn)
        dropped = 0
        if logged and fp.edge_seq != old.edge_seq:
            keys = hotindex.edge_changes_since(conn, old.edge_seq, fp.edge_seq)
            if keys is None:
                self.edge_count_db = -1  # the log was pruned past us: verify_edges reloads
            else:
                dropped = self._drop_edges(keys)
        gone_rows: list[int] = []
        if fp.deleted_count != old.deleted_count:
            found = [row for row in self._lookup(hotindex.deleted_since(conn, old.last_deleted_at))
                     if row is not None and self.active[row]]  # fmt: skip
            if found:
                # A private copy before clearing flags: the array may be the mapped base file's, or
                # shared with base_active or with a view a caller still holds.
                self._rebuffer("active", _headroom(self.n))
                for row in found:
                    if self.active[row]:
                        self.active[row] = False
                        gone_rows.append(row)
        if int(self.active.sum()) != hotindex.active_count(conn):
            return HotIndex.build(conn, fp, sequences)
        removed = 0
        if gone_rows and not logged:  # forget/prune drop the edges of a deleted row: count those still listed live
            gone = np.zeros(self.n, dtype=np.bool_)
            gone[np.array(gone_rows, dtype=np.int64)] = True
            live = self.active.copy()  # the flags before this catch-up's deletions (new rows: live)
            live[gone] = True
            lo = 0
            for src in list(self._parts["edge_src"]):  # part by part: the base's are never joined
                dst = self._slice("edge_dst", lo, lo + int(src.shape[0]))
                removed += int(((gone[src] | gone[dst]) & live[src] & live[dst]).sum())
                lo += int(src.shape[0])
        appended = self._append_edges_from(hotindex.edges_since(conn, old.max_edge_rowid))
        if self.edge_count_db >= 0:
            self.edge_count_db += appended - removed - dropped
        self.edges_verified = False
        self.fp = fp
        self.delta_id = secrets.token_hex(8)
        return self

    def _drop_edges(self, keys: list[tuple[str, str, str]]) -> int:
        """Remove the listed rows with these (source, target, type) keys from the edge lists, the
        derived CSR and links; return how many were listed. O(changes) SQL, one vectorised pass
        over the source column to find them, then one copy of each array without them (the
        beam kernels take plain CSR arrays, so a dropped row cannot stay as a masked entry).

        The edge list then no longer extends the base on disk: ``edges_reloaded`` makes the
        caller fold it into a new base (as after a reload), so a delta never describes drops.
        """
        import numpy as np

        if not keys:
            return 0
        ends = self._lookup([k[0] for k in keys] + [k[1] for k in keys])
        wanted: set[tuple[int, int, int]] = set()
        for (_s, _d, kind), src, dst in zip(keys, ends[: len(keys)], ends[len(keys) :]):
            code = EDGE_CODES.get(kind)
            if src is not None and dst is not None and code is not None:
                wanted.add((src, dst, code))
        if not wanted:
            return 0  # none of them touched rows this index holds (nor were counted)
        n = self.n
        triple = np.array(sorted(wanted), dtype=np.int64).reshape(-1, 3)
        marked = np.zeros(n, dtype=np.bool_)
        marked[triple[:, 0]] = True
        wanted_keys = np.sort((triple[:, 0] * n + triple[:, 1]) * 8 + triple[:, 2])  # one int64 per key
        found: list[np.ndarray] = []
        lo = 0
        for src_part in list(self._parts["edge_src"]):  # part by part: the base's are never joined
            k = int(src_part.shape[0])
            hits = np.flatnonzero(marked[src_part])  # rows from a listed source: few
            if hits.size:
                dst_rows = self._slice("edge_dst", lo, lo + k)[hits].astype(np.int64)
                typ = self._slice("edge_type", lo, lo + k)[hits].astype(np.int64)
                keys_at = (src_part[hits].astype(np.int64) * n + dst_rows) * 8 + typ
                found.append(hits[np.isin(keys_at, wanted_keys)] + lo)
            lo += k
        gone = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        if not gone.size:
            return 0
        self._remove_edge_rows(gone)
        EDGE_STATS["dropped"] += int(gone.shape[0])
        return int(gone.shape[0])

    def _remove_edge_rows(self, gone: np.ndarray) -> None:
        """Drop edge rows at positions ``gone`` (sorted) from the lists and what is derived from them."""
        import numpy as np

        m = self.m
        keep = np.ones(m, dtype=np.bool_)
        keep[gone] = False
        src, dst = self.edge_src[gone], self.edge_dst[gone]
        typ, backbone = self.edge_type[gone], self.edge_backbone[gone]
        d = self._derived
        if 0 <= self._csr_m <= m and all(k in d for k in _CSR_KEYS):
            in_csr = gone < self._csr_m
            self._drop_csr_entries(src[in_csr], dst[in_csr], typ[in_csr])
            self._csr_m -= int(in_csr.sum())
        else:
            self._csr_m = -1
        links_hit = bool((backbone | (typ == EDGE_CODES["supersedes"])).any())
        links_m = self._links_m
        for name in ("edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name)[keep]))
        if 0 <= links_m <= m and all(k in d for k in _LINK_KEYS):
            if links_hit:
                d.update(self._links_of(self.n, self.edge_src, self.edge_dst, self.edge_type, self.edge_backbone))
                self._links_m = self.m  # recomputed over every row still listed, as a build would
            else:
                self._links_m = links_m - int((gone < links_m).sum())
        else:
            self._links_m = -1
        self._delta_adj = None
        self.edges_reloaded = True

    def _drop_csr_entries(self, src: np.ndarray, dst: np.ndarray, typ: np.ndarray) -> None:
        """Remove each row's two CSR entries (at its source, out; at its target, in)."""
        import numpy as np

        d = self._derived
        ptr = np.asarray(d["csr_ptr"])
        nbr, ctype, out = d["csr_nbr"], d["csr_type"], d["csr_out"]
        entries: list[int] = []
        for a, b, t in zip(src.tolist(), dst.tolist(), typ.tolist()):
            for node, other, flag in ((a, b, True), (b, a, False)):
                lo, hi = int(ptr[node]), int(ptr[node + 1])
                hit = np.flatnonzero((nbr[lo:hi] == other) & (ctype[lo:hi] == t) & (out[lo:hi] == flag))
                if hit.size:
                    entries.append(lo + int(hit[0]))
        if not entries:
            return
        at = np.unique(np.array(entries, dtype=np.int64))
        keep = np.ones(nbr.shape[0], dtype=np.bool_)
        keep[at] = False
        # Each node's pointer moves down by the entries removed before it.
        removed_before = np.searchsorted(at, ptr, side="left")
        d["csr_ptr"] = (ptr - removed_before).astype(np.int64)
        for key in ("csr_nbr", "csr_weight", "csr_type", "csr_out"):
            d[key] = np.ascontiguousarray(np.asarray(d[key])[keep])

    def verify_edges(self, conn: apsw.Connection) -> None:
        """Check the edge rows we track against the store's edge counter (O(1)); reload them on a mismatch."""
        if not self.edges_verified:
            if self.edge_count_db != hotindex.edge_count(conn):
                self._reload_edges(conn)  # a replaced or deleted edge row we cannot see by rowid
                self.delta_id = secrets.token_hex(8)
            self.edges_verified = True

    # --- persistence -----------------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION, "fingerprint": self.fp.to_json(), "build_id": self.build_id,
            "edge_count_db": self.edge_count_db, "sources": self.sources, "entities": self.entities,
            "any_vector": self.any_vector,
        }  # fmt: skip

    def arrays(self) -> dict[str, np.ndarray]:
        import numpy as np

        vocab = "\n".join(self.vocab).encode("utf-8")
        out = {
            "id_blob": self.id_blob, "created": self.created, "importance": self.importance,
            "category": self.category, "source": self.source, "active": self.active,
            "doc_len": self.doc_len, "n_plain": self.n_plain, "vocab": np.frombuffer(vocab, dtype=np.uint8),
            "r_ptr": self.r_ptr, "r_term": self.r_term, "r_tf": self.r_tf, "p_ptr": self.p_ptr,
            "p_term": self.p_term, "e_ptr": self.e_ptr, "e_ent": self.e_ent, "edge_src": self.edge_src,
            "edge_dst": self.edge_dst, "edge_type": self.edge_type, "edge_weight": self.edge_weight,
            "edge_backbone": self.edge_backbone,
        }  # fmt: skip
        self._derive()
        out.update({f"d_{k}": v for k, v in self._derived.items()})
        return out

    def delta_header(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION, "base_id": self.build_id, "delta_id": self.delta_id,
            "fingerprint": self.fp.to_json(), "edge_count_db": self.edge_count_db,
            "edges_verified": self.edges_verified, "any_vector": self.any_vector, "sources": self.sources,
            "entities_tail": self.entities[self.base_ent :], "base_n": self.base_n, "base_v": self.base_v,
            "base_m": self.base_m, "base_ent": self.base_ent,
        }  # fmt: skip

    def delta_arrays(self) -> dict[str, np.ndarray]:
        """The delta segment: rows, terms and edges beyond the base, and base rows deleted since."""
        import numpy as np

        k = self.base_n
        out: dict[str, np.ndarray] = {
            name: self._tail(name, k) if name in _ROW_SEGMENTED else getattr(self, name)[k:] for name in _PER_ROW
        }
        out["active_tail"] = self.active[k:]
        out["deleted"] = np.flatnonzero(np.asarray(self.base_active) & ~self.active[:k]).astype(np.int32)
        for ptr_name, values in (("r_ptr", ("r_term", "r_tf")), ("p_ptr", ("p_term",)), ("e_ptr", ("e_ent",))):
            ptr = getattr(self, ptr_name)
            out[ptr_name] = ptr[k:] - ptr[k]
            for name in values:
                out[name] = self._tail(name, int(ptr[k]))
        for name in ("edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone"):
            out[name] = self._tail(name, self.base_m)
        out["vocab_tail"] = np.frombuffer("\n".join(self._vocab_from(self.base_v)).encode("utf-8"), dtype=np.uint8)
        return out

    def apply_delta(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
        """Extend this (freshly loaded) base by a persisted delta segment; False if it does not fit."""
        import numpy as np

        if header.get("version") != FORMAT_VERSION or header.get("base_id") != self.build_id or self.delta_id:
            return False
        sizes = (int(header["base_n"]), int(header["base_v"]), int(header["base_m"]), int(header["base_ent"]))
        if sizes != (self.n, self.n_terms, self.m, len(self.entities)):
            return False
        deleted = arrays["deleted"].astype(np.int64)
        if deleted.size and int(deleted.max()) >= self.n:
            return False
        self._rebuffer("active", _headroom(self.n + int(arrays["active_tail"].shape[0])))  # base_active stays
        self.active[deleted] = False
        for name in _PER_ROW:
            tail = arrays[name]
            if name in _ROW_SEGMENTED:
                self._append_part(name, tail)
                continue
            mine = getattr(self, name)
            if mine.dtype.kind == "S":
                width = max(mine.dtype.itemsize, tail.dtype.itemsize)
                wide = f"S{width}"  # no astype copy when the widths agree (36 MB of ids at 1M rows)
                setattr(self, name, np.concatenate([mine.astype(wide, copy=False), tail.astype(wide, copy=False)]))
            else:
                self._extend(name, tail.astype(mine.dtype))
        self._extend("active", arrays["active_tail"].astype(np.bool_))
        for ptr_name in ("r_ptr", "p_ptr", "e_ptr"):
            ptr = getattr(self, ptr_name)
            self._extend(ptr_name, arrays[ptr_name][1:] + ptr[-1])
        for name in _SEGMENTED:
            self._append_part(name, arrays[name].astype(_SEG_DTYPES[name]))
        raw = arrays["vocab_tail"].tobytes().decode("utf-8")
        for term in raw.split("\n") if raw else []:
            self._tail_terms[term] = self.n_terms
            self._tail_vocab.append(term)
        self.entities = self.entities + list(header["entities_tail"])
        self._ent_index = None
        self.sources = list(header["sources"])
        self.any_vector = bool(header["any_vector"])
        self.edge_count_db = int(header["edge_count_db"])
        self.edges_verified = bool(header["edges_verified"])
        self.fp = Fingerprint.from_json(header["fingerprint"])
        self.delta_id = str(header["delta_id"])
        self.ids = []
        return True

    @classmethod
    def from_file(cls, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> HotIndex | None:
        if header.get("version") != FORMAT_VERSION:
            return None
        index = cls()
        base_header = header.get("base_header", header)
        index.fp = Fingerprint.from_json(base_header["fingerprint"])
        index.base_fp = index.fp
        index.build_id = str(base_header["build_id"])
        index.edge_count_db = int(base_header["edge_count_db"])
        index.any_vector = bool(base_header.get("any_vector", True))
        index.sources = list(base_header["sources"])
        index.entities = list(base_header["entities"])
        index._sorted_terms = _SortedTerms(arrays["vocab"])
        delta_arrays: dict[str, np.ndarray] = {}
        for name, arr in arrays.items():
            if name.startswith("x_"):
                delta_arrays[name[2:]] = arr
            elif name.startswith("d_"):
                index._derived[name[2:]] = arr
            elif name != "vocab":
                setattr(index, name, arr)
        index.base_n, index.base_v, index.base_m, index.base_ent = index.n, index.n_terms, index.m, len(index.entities)
        index.base_active = index.active
        if all(k in index._derived for k in _CSR_KEYS):
            index._csr_m = index.m  # the mapped base CSR; the delta's edges are read beside it
        if all(k in index._derived for k in _LINK_KEYS):
            index._links_m = index.m
        delta = header.get("delta")
        if isinstance(delta, dict):
            try:
                index.apply_delta(delta, delta_arrays)
            except (KeyError, TypeError, ValueError):
                return None
        return index


# One index per open connection, shared by recall, search and the write-path scans of a process.
_OPEN: weakref.WeakKeyDictionary[Any, HotIndex] = weakref.WeakKeyDictionary()


def _no_inherited(_db_path: Path) -> HotIndex | None:
    return None


# Where a worker forked from the warm server (mnemon.server.warm) finds the index its parent kept
# for a store, instead of loading the files again. Only a starting point: open_index checks it
# against the live fingerprint and catches it up like any cached index. Set only in such a worker.
inherited: Callable[[Path], HotIndex | None] = _no_inherited


def cached(conn: apsw.Connection) -> HotIndex | None:
    """The index this process last used with ``conn`` (possibly stale), if any."""
    return _OPEN.get(conn)


def index_for(
    conn: apsw.Connection, db_path: Path, *, readonly: bool, edges: bool = True,
    sequences: Mapping[str, list[str]] | None = None,
) -> HotIndex:
    """Return the index for ``conn``, current for the committed database state.

    ``edges=False`` (the write-path scans) skips the edge-count check; recall needs it.
    ``sequences``: id → ``token_sequence`` of its content, for rows the caller has tokenised
    already (an import's); the index then does not tokenise those contents again.
    """
    start = _OPEN.get(conn)
    if start is None:
        start = inherited(db_path)
    index = open_index(conn, db_path, readonly=readonly, cached=start, edges=edges, sequences=sequences)
    _OPEN[conn] = index
    return index


def _load(db_path: Path) -> HotIndex | None:
    loaded = hotindex.read_index(db_path)
    index = HotIndex.from_file(*loaded) if loaded is not None else None
    if index is not None:
        stamp = hotindex.read_stamp(db_path)
        if stamp is not None and stamp[0] == index.state_id:
            index.fp = stamp[1]
    return index


def open_index(
    conn: apsw.Connection, db_path: Path, *, readonly: bool, cached: HotIndex | None, edges: bool = True,
    sequences: Mapping[str, list[str]] | None = None,
) -> HotIndex:
    """Return a hot index that describes the database now: loaded, caught up or rebuilt.

    Everything is read inside one read snapshot so the fingerprint and the rows agree. What is
    written: a fresh build or a merged base (``<db>.hot``, when the delta passed the threshold),
    else the small delta segment, else only the stamp; nothing under ``readonly``.
    """
    with hotindex.read_snapshot(conn):
        live = hotindex.fingerprint(conn)
        index = cached if cached is not None else _load(db_path)
        if index is not None and index.fp == live and (index.edges_verified or not edges):
            return index
        state = index.state_id if index is not None else ""
        verified = index is not None and index.edges_verified
        index = HotIndex.build(conn, live, sequences) if index is None else index.catch_up(conn, live, sequences)
        merge = index.edges_reloaded or index.delta_rows() >= merge_threshold(index.n)
        if edges or (merge and not readonly):
            index.verify_edges(conn)
            merge = merge or index.edges_reloaded
    if not readonly:
        if index.delta_id and merge:
            index.merge()
        if not index.delta_id and index.build_id != state.split("+")[0]:
            hotindex.write_index(db_path, index.header(), index.arrays())
            hotindex.remove_delta(db_path)
        elif index.state_id == state and (index.edges_verified == verified or not index.delta_id):
            hotindex.write_stamp(db_path, state, live)
        elif index.delta_id:
            hotindex.write_delta(db_path, index.delta_header(), index.delta_arrays())
    return index


def mark_current(db_path: Path, index: HotIndex, fp: Fingerprint, *, readonly: bool) -> None:
    """Our own write changed nothing the index holds: stamp it current for ``fp``."""
    index.fp = fp
    if not readonly:
        hotindex.write_stamp(db_path, index.state_id, fp)
