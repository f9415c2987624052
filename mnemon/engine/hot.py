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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemon.records import CATEGORIES, EDGE_TYPES
from mnemon.store import hotindex
from mnemon.store.hotindex import Fingerprint
from mnemon.text import insight_tokens, recall_insight_terms, recall_terms

if TYPE_CHECKING:
    import apsw
    import numpy as np

FORMAT_VERSION = 1
EDGE_CODES = {name: code for code, name in enumerate(EDGE_TYPES)}


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


@dataclass(slots=True)
class Postings:
    ptr: np.ndarray
    rows: np.ndarray
    tf: np.ndarray | None


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
               "edge_dst": "int32", "edge_type": "int8", "edge_weight": "float64", "edge_backbone": "bool"}  # fmt: skip
_EDGE_KEYS = ("csr_ptr", "csr_nbr", "csr_weight", "csr_type", "csr_out", "superseded", "prev", "next")
_PER_ROW = ("id_blob", "created", "importance", "category", "source", "doc_len", "n_plain")

# A delta segment is folded into a new base once it holds this many rows (new or deleted).
MERGE_MIN_ROWS = 512
MERGE_FRACTION = 0.02


def merge_threshold(n_rows: int) -> int:
    return max(MERGE_MIN_ROWS, int(n_rows * MERGE_FRACTION))


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
        self.id_blob = np.zeros(0, dtype="S36")
        self.created = np.zeros(0, dtype="S20")
        self.importance = np.zeros(0, dtype=np.int8)
        self.category = np.zeros(0, dtype=np.int8)
        self.source = np.zeros(0, dtype=np.int32)
        self.active = np.zeros(0, dtype=np.bool_)
        self.base_active = self.active  # the base's flags (to tell which base rows a delta deleted)
        self.doc_len = np.zeros(0, dtype=np.int32)
        self.n_plain = np.zeros(0, dtype=np.int32)
        self.sources: list[str] = []
        self.entities: list[str] = []
        self.vocab: list[str] = []  # vocab[:n_sorted] sorted (bisection); later terms appended (dict)
        self.n_sorted = 0
        self._tail_terms: dict[str, int] = {}
        self.base_n = 0  # rows, terms, edge rows and entities the base postings/CSR cover
        self.base_v = 0
        self.base_m = 0
        self.base_ent = 0
        self.r_ptr = np.zeros(1, dtype=np.int64)
        self.p_ptr = np.zeros(1, dtype=np.int64)
        self.e_ptr = np.zeros(1, dtype=np.int64)
        self._derived: dict[str, Any] = {}
        self._edges_derived_m = -1  # edge rows the derived CSR covers (-1: none)
        self._row_of: dict[str, int] | None = None
        self._single_lookups = 0
        self._base_sorted: tuple[np.ndarray, np.ndarray] | None = None

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
        import numpy as np

        out, off = [], 0
        for part in self._parts[name]:
            end = off + int(part.shape[0])
            if end > start:
                out.append(part[max(0, start - off) :])
            off = end
        if not out:
            return np.zeros(0, dtype=_SEG_DTYPES[name])
        return out[0] if len(out) == 1 else np.concatenate(out)

    def _append_part(self, name: str, values: np.ndarray) -> None:
        if values.shape[0]:
            self._parts[name].append(values)

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
        tail = {bytes(b).decode("ascii", "replace"): self.base_n + r for r, b in enumerate(self.id_blob[self.base_n :].tolist())}
        rest = []
        for k, insight_id in enumerate(ids):
            got = tail.get(insight_id)
            if got is not None:
                out[k] = got
            else:
                rest.append(k)
        if rest and self.base_n:
            order, sorted_ids = self._base_order()
            width = sorted_ids.dtype.itemsize
            wanted = [ids[k].encode("ascii", "replace") for k in rest]
            fits = [len(w) <= width for w in wanted]
            arr = np.array([w if f else b"" for w, f in zip(wanted, fits)], dtype=sorted_ids.dtype)
            pos = np.minimum(np.searchsorted(sorted_ids, arr), self.base_n - 1)
            hit = (sorted_ids[pos] == arr).tolist()
            rows = order[pos].tolist()
            for j, k in enumerate(rest):
                if fits[j] and hit[j]:
                    out[k] = int(rows[j])
        return out

    def _base_order(self) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        if self._base_sorted is None:
            rank = np.asarray(self._get("id_rank"))[: self.base_n]  # ranks among all rows: gaps for new ids
            slots = np.full(self.n, -1, dtype=np.int64)
            slots[rank] = np.arange(self.base_n, dtype=np.int64)
            order = slots[slots >= 0]
            self._base_sorted = (order, self.id_blob[: self.base_n][order])
        return self._base_sorted

    def ids_list(self) -> list[str]:
        if len(self.ids) != self.n:
            self.ids = [b.decode("ascii", "replace") for b in self.id_blob.tolist()]
        return self.ids

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows of many ids at once (-1 where unknown), by bisection over the sorted ids."""
        import numpy as np

        rank = self._get("id_rank")  # inverting it is O(n), no string sort per query
        order = np.empty(self.n, dtype=np.int64)
        order[rank] = np.arange(self.n, dtype=np.int64)
        wanted = np.char.encode(ids.astype(str), "ascii") if ids.dtype.kind == "U" else ids.astype(self.id_blob.dtype)
        sorted_ids = self.id_blob[order]
        pos = np.minimum(np.searchsorted(sorted_ids, wanted), max(self.n - 1, 0))
        if self.n == 0:
            return np.full(wanted.shape[0], -1, dtype=np.int64)
        return np.where(sorted_ids[pos] == wanted, order[pos], -1).astype(np.int64)

    def id_at(self, row: int) -> str:
        return bytes(self.id_blob[row]).decode("ascii", "replace")

    def term_ids(self, terms: Iterable[str]) -> list[int]:
        """Ids of the known terms among ``terms`` (unknown terms cannot match anything)."""
        out = []
        for term in terms:
            got = self._term_id(term)
            if got is not None:
                out.append(got)
        return out

    def _term_id(self, term: str) -> int | None:
        pos = bisect_left(self.vocab, term, 0, self.n_sorted)
        if pos < self.n_sorted and self.vocab[pos] == term:
            return pos
        return self._tail_terms.get(term)

    # --- derived arrays (cached per process; the base's come from the file) ---------------------

    def _get(self, name: str) -> Any:
        if name.startswith("post_"):
            if name not in self._derived:
                self._derive_postings()
        elif name in ("id_rank", "created_rank"):
            got = self._derived.get(name)
            if got is None or got.shape[0] != self.n:
                self._derive_ranks()
        elif name in _EDGE_KEYS and self._edges_stale():
            self._derive_edges_now()
        return self._derived[name]

    def _edges_stale(self) -> bool:
        if self._edges_derived_m != self.m or any(k not in self._derived for k in _EDGE_KEYS):
            return True
        return bool(self._derived["superseded"].shape[0] != self.n)

    def _derive_postings(self) -> None:
        """Base postings over rows ``< base_n`` and terms ``< base_v`` (the delta is scanned per query)."""
        n, v = self.base_n, self.base_v
        r_end, p_end = int(self.r_ptr[n]), int(self.p_ptr[n])
        d = self._derived
        d["post_r_ptr"], d["post_r_rows"], d["post_r_tf"] = _invert(
            self.r_ptr[: n + 1], self.r_term[:r_end], v, self.r_tf[:r_end])
        d["post_p_ptr"], d["post_p_rows"] = _invert(self.p_ptr[: n + 1], self.p_term[:p_end], v)  # fmt: skip

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
        sorted_old = self.id_blob[:k][order]
        new_ids = self.id_blob[k:]
        new_order = np.argsort(new_ids, kind="stable")
        pos = np.searchsorted(sorted_old, new_ids[new_order])
        id_rank = np.empty(n, dtype=np.int32)
        id_rank[:k] = old_id + np.searchsorted(pos, old_id, side="right")
        id_rank[k + new_order] = pos + np.arange(n - k)
        self._derived["id_rank"] = id_rank
        # created_at (dense rank): cheap when the new rows are not older than every old one's newest
        top = int(old_cr.max()) if k else -1
        newest = self.created[:k][int(np.argmax(old_cr))] if k else b""
        new_created = self.created[k:]
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

    def _derive_edges_now(self) -> None:
        m_old = self._edges_derived_m
        old = self._derived
        if m_old >= 0 and m_old <= self.m and all(k in old for k in _EDGE_KEYS):
            self._derived.update(self._extend_edges(old, m_old))
        else:
            self._derived.update(self._derive_edges())
        self._edges_derived_m = self.m

    def _derive(self) -> None:
        """Every derived array (before a base is written)."""
        for name in ("post_r_ptr", "id_rank", "csr_ptr"):
            self._get(name)

    def _extend_edges(self, old: dict[str, Any], m_old: int) -> dict[str, Any]:
        """Insert the edge rows appended since the last derive into the existing CSR.

        A catch-up after one ``remember`` adds a few dozen edge rows to a graph of hundreds of
        thousands; re-sorting every entry would dominate the write. New entries go to the end of
        their node's segment: within a node the CSR order only separates transitions that are
        identical for the beam (same neighbour, type and delta), so results do not change.
        """
        import numpy as np

        n = self.n
        src, dst = self._tail("edge_src", m_old), self._tail("edge_dst", m_old)
        e_type, e_weight = self._tail("edge_type", m_old), self._tail("edge_weight", m_old)
        e_bb = self._tail("edge_backbone", m_old)
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
        pad = n - np.asarray(old["superseded"]).shape[0]
        superseded = np.concatenate([old["superseded"], np.zeros(pad, dtype=np.bool_)])
        prev = np.concatenate([old["prev"], np.full(pad, -1, dtype=np.int32)])
        nxt = np.concatenate([old["next"], np.full(pad, -1, dtype=np.int32)])
        superseded[dst[e_type == EDGE_CODES["supersedes"]]] = True
        bb = np.flatnonzero(e_bb)
        prev[dst[bb]] = src[bb]
        nxt[src[bb]] = dst[bb]
        d.update({"superseded": superseded, "prev": prev, "next": nxt})
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
        superseded = np.zeros(n, dtype=np.bool_)
        sup = self.edge_type == EDGE_CODES["supersedes"]
        superseded[dst[sup]] = True
        prev = np.full(n, -1, dtype=np.int32)
        nxt = np.full(n, -1, dtype=np.int32)
        bb = np.flatnonzero(self.edge_backbone)  # older→newer; later rows (higher rowid) win
        prev[dst[bb]] = src[bb]
        nxt[src[bb]] = dst[bb]
        return {
            "csr_ptr": ptr,
            "csr_nbr": np.ascontiguousarray(nbr[order]),
            "csr_weight": np.ascontiguousarray(np.concatenate([self.edge_weight, self.edge_weight])[order]),
            "csr_type": np.ascontiguousarray(np.concatenate([self.edge_type, self.edge_type])[order]),
            "csr_out": np.ascontiguousarray(out[order]),
            "superseded": superseded,
            "prev": prev,
            "next": nxt,
        }

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
        if self.base_n == self.n and self.base_v == len(self.vocab):
            return Postings(self._get("post_r_ptr"), self._get("post_r_rows"), self._get("post_r_tf"))
        ptr, rows, tf = _invert(self.r_ptr, self.r_term, len(self.vocab), self.r_tf)
        return Postings(ptr, rows, tf)

    def plain_postings(self) -> Postings:
        if self.base_n == self.n and self.base_v == len(self.vocab):
            return Postings(self._get("post_p_ptr"), self._get("post_p_rows"), None)
        ptr, rows = _invert(self.p_ptr, self.p_term, len(self.vocab))
        return Postings(ptr, rows, None)

    def derived(self, name: str) -> Any:
        return self._get(name)

    def entity_rows(self) -> np.ndarray:
        import numpy as np

        return np.repeat(np.arange(self.n, dtype=np.int32), np.diff(self.e_ptr))

    def known_entities(self) -> set[str]:
        """Entity strings present on active insights (index-aware extraction, §4.3)."""
        import numpy as np

        live = self.active[self.entity_rows()]
        return {self.entities[i] for i in np.unique(self.e_ent[live]).tolist()}

    # --- building and catching up ----------------------------------------------------------------

    def _append_rows(self, rows: list[tuple[Any, ...]]) -> None:
        """Tokenise new active rows and append them (the only place text is tokenised)."""
        import numpy as np

        if not rows:
            return
        vocab, tail, n_sorted = self.vocab, self._tail_terms, self.n_sorted

        def tid(term: str) -> int:
            got = tail.get(term)
            if got is None:
                pos = bisect_left(vocab, term, 0, n_sorted)
                if pos < n_sorted and vocab[pos] == term:
                    return pos
                got = tail[term] = len(vocab)
                vocab.append(term)
            return got

        ent_index = {e: i for i, e in enumerate(self.entities)}
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
            counts = Counter(recall_insight_terms(content, tags, ents))
            r_lists.append([tid(t) for t in counts])
            tf_lists.append(list(counts.values()))
            plain = insight_tokens(content, tags, ents)
            p_lists.append([tid(t) for t in plain])
            e_lists.append([ent_index.setdefault(e, len(ent_index)) for e in dict.fromkeys(ents)])
            ids.append(str(ins_id))
            created.append(str(created_at).encode("utf-8"))
            imp.append(int(importance))
            cat.append(CATEGORIES.index(category) if category in CATEGORIES else -1)
            srcs.append(src_index.setdefault(str(source), len(src_index)))
            doc_len.append(len(recall_terms(content)))
            n_plain.append(len(plain))
        self.sources = list(src_index)
        self.entities = list(ent_index)
        r_ptr, r_term = _csr_from_lists(r_lists, np.int32)
        _, r_tf = _csr_from_lists(tf_lists, np.int32)
        p_ptr, p_term = _csr_from_lists(p_lists, np.int32)
        e_ptr, e_ent = _csr_from_lists(e_lists, np.int32)
        self.r_ptr = np.concatenate([self.r_ptr, r_ptr[1:] + self.r_ptr[-1]])
        self.p_ptr = np.concatenate([self.p_ptr, p_ptr[1:] + self.p_ptr[-1]])
        self.e_ptr = np.concatenate([self.e_ptr, e_ptr[1:] + self.e_ptr[-1]])
        self._append_part("r_term", r_term)
        self._append_part("r_tf", r_tf)
        self._append_part("p_term", p_term)
        self._append_part("e_ent", e_ent)
        width = max([len(i) for i in ids] + [self.id_blob.dtype.itemsize, 1])
        self.id_blob = np.concatenate([self.id_blob.astype(f"S{width}"), np.array(ids, dtype=f"S{width}")])
        cwidth = max([len(c) for c in created] + [self.created.dtype.itemsize, 1])
        self.created = np.concatenate([self.created.astype(f"S{cwidth}"), np.array(created, dtype=f"S{cwidth}")])
        self.importance = np.concatenate([self.importance, np.array(imp, dtype=np.int8)])
        self.category = np.concatenate([self.category, np.array(cat, dtype=np.int8)])
        self.source = np.concatenate([self.source, np.array(srcs, dtype=np.int32)])
        self.active = np.concatenate([self.active, np.ones(len(ids), dtype=np.bool_)])
        self.doc_len = np.concatenate([self.doc_len, np.array(doc_len, dtype=np.int32)])
        self.n_plain = np.concatenate([self.n_plain, np.array(n_plain, dtype=np.int32)])
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
        self.vocab = [merged[i] for i in order]
        self.r_term = remap[self.r_term] if self.r_term.size else self.r_term
        self.p_term = remap[self.p_term] if self.p_term.size else self.p_term
        self.n_sorted = len(self.vocab)
        self._tail_terms = {}

    def _append_edges(self, rows: list[tuple[Any, ...]]) -> int:
        """Append edge rows between known rows; return how many edge rows were read."""
        import numpy as np

        ends = self._lookup([str(r[1]) for r in rows] + [str(r[2]) for r in rows]) if rows else []
        src, dst, typ, wt, bb = [], [], [], [], []
        for k, (_rowid, _s, _t, edge_type, weight, backbone) in enumerate(rows):
            a, b = ends[k], ends[len(rows) + k]
            code = EDGE_CODES.get(str(edge_type))
            if a is None or b is None or code is None:
                continue  # touches an insight deleted before we saw it: never traversable
            src.append(a)
            dst.append(b)
            typ.append(code)
            wt.append(float(weight))
            bb.append(bool(backbone))
        if src:
            self._append_part("edge_src", np.array(src, dtype=np.int32))
            self._append_part("edge_dst", np.array(dst, dtype=np.int32))
            self._append_part("edge_type", np.array(typ, dtype=np.int8))
            self._append_part("edge_weight", np.array(wt, dtype=np.float64))
            self._append_part("edge_backbone", np.array(bb, dtype=np.bool_))
        return len(rows)

    def _reload_edges(self, conn: apsw.Connection) -> None:
        for name in ("edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone"):
            self._parts[name] = []
        self._edges_derived_m = -1
        self.edges_reloaded = True
        self._append_edges(list(hotindex.edges_since(conn, 0)))
        # The reference is the store's edge count as the guard reads it (the counter when kept), so
        # a counter off by a constant (a foreign writer without the triggers) reloads once, not on
        # every read; doctor reports such a counter and --repair recounts it.
        self.edge_count_db = hotindex.edge_count(conn)
        self.edges_verified = True

    @classmethod
    def build(cls, conn: apsw.Connection, fp: Fingerprint) -> HotIndex:
        """Build from scratch (inside the caller's read snapshot)."""
        index = cls()
        index._append_rows(list(hotindex.rows_since(conn, 0)))
        index._sort_vocab()
        index._reload_edges(conn)
        index.fp = fp
        index._make_base()
        return index

    def _make_base(self) -> None:
        """This index becomes a base: everything it holds is covered by sorted vocab, postings, CSR."""
        self.base_n, self.base_v, self.base_m, self.base_ent = self.n, len(self.vocab), self.m, len(self.entities)
        self.base_fp = self.fp
        self.base_active = self.active
        self.build_id = secrets.token_hex(8)
        self.delta_id = ""
        self.edges_reloaded = False
        for name in ("post_r_ptr", "post_r_rows", "post_r_tf", "post_p_ptr", "post_p_rows"):
            self._derived.pop(name, None)
        self._base_sorted = None

    def merge(self) -> None:
        """Fold the delta into a new base (sorted vocabulary, fresh postings); O(store), rare."""
        if self.n_sorted != len(self.vocab):
            self._sort_vocab()
        self._make_base()
        self._derive()

    def delta_rows(self) -> int:
        """Rows the delta holds beyond its base: new rows plus base rows deleted since."""
        return (self.n - self.base_n) + max(0, self.fp.deleted_count - self.base_fp.deleted_count)

    def catch_up(self, conn: apsw.Connection, fp: Fingerprint) -> HotIndex:
        """Apply what changed since ``self.fp``; rebuild what cannot be reconciled.

        New rows, deletions and new edge rows are applied by rowid/``deleted_at`` in O(delta).
        The edge-count check that catches an edge row deleted or replaced out of sight is left
        to :meth:`verify_edges`, which edge readers (recall) call.
        """
        import numpy as np

        old = self.fp
        if fp.max_rowid < old.max_rowid or fp.max_edge_rowid < old.max_edge_rowid or fp.deleted_count < old.deleted_count:
            return HotIndex.build(conn, fp)  # rowids renumbered (VACUUM) or rows undeleted: start over
        if replace(fp, generation=old.generation) == old:
            self.fp = fp  # only access counts, EI or vectors changed: nothing this index holds
            return self
        self.active = self.active.copy()  # the mapped base flags are read-only
        n_before = self.n
        before = self.active.copy()
        self._append_rows(list(hotindex.rows_since(conn, old.max_rowid)))
        gone_rows: list[int] = []
        if fp.deleted_count != old.deleted_count:
            for row in self._lookup(hotindex.deleted_since(conn, old.last_deleted_at)):
                if row is not None and self.active[row]:
                    self.active[row] = False
                    gone_rows.append(row)
        if int(self.active.sum()) != hotindex.active_count(conn):
            return HotIndex.build(conn, fp)
        removed = 0
        if gone_rows:  # forget/prune drop the edges of a deleted row: count those still listed live
            gone = np.zeros(self.n, dtype=np.bool_)
            gone[np.array(gone_rows, dtype=np.int64)] = True
            live = np.concatenate([before, np.ones(self.n - n_before, dtype=np.bool_)])
            src, dst = self.edge_src, self.edge_dst
            removed = int(((gone[src] | gone[dst]) & live[src] & live[dst]).sum())
        self.edge_count_db += self._append_edges(list(hotindex.edges_since(conn, old.max_edge_rowid))) - removed
        self.edges_verified = False
        self.fp = fp
        self.delta_id = secrets.token_hex(8)
        return self

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
        out: dict[str, np.ndarray] = {name: getattr(self, name)[k:] for name in _PER_ROW}
        out["active_tail"] = self.active[k:]
        out["deleted"] = np.flatnonzero(np.asarray(self.base_active) & ~self.active[:k]).astype(np.int32)
        for ptr_name, values in (("r_ptr", ("r_term", "r_tf")), ("p_ptr", ("p_term",)), ("e_ptr", ("e_ent",))):
            ptr = getattr(self, ptr_name)
            out[ptr_name] = ptr[k:] - ptr[k]
            for name in values:
                out[name] = self._tail(name, int(ptr[k]))
        for name in ("edge_src", "edge_dst", "edge_type", "edge_weight", "edge_backbone"):
            out[name] = self._tail(name, self.base_m)
        out["vocab_tail"] = np.frombuffer("\n".join(self.vocab[self.base_v :]).encode("utf-8"), dtype=np.uint8)
        return out

    def apply_delta(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
        """Extend this (freshly loaded) base by a persisted delta segment; False if it does not fit."""
        import numpy as np

        if header.get("version") != FORMAT_VERSION or header.get("base_id") != self.build_id or self.delta_id:
            return False
        sizes = (int(header["base_n"]), int(header["base_v"]), int(header["base_m"]), int(header["base_ent"]))
        if sizes != (self.n, len(self.vocab), self.m, len(self.entities)):
            return False
        active = self.active.copy()
        deleted = arrays["deleted"].astype(np.int64)
        if deleted.size and int(deleted.max()) >= self.n:
            return False
        active[deleted] = False
        for name in _PER_ROW:
            mine = getattr(self, name)
            tail = arrays[name]
            if mine.dtype.kind == "S":
                width = max(mine.dtype.itemsize, tail.dtype.itemsize)
                setattr(self, name, np.concatenate([mine.astype(f"S{width}"), tail.astype(f"S{width}")]))
            else:
                setattr(self, name, np.concatenate([mine, tail.astype(mine.dtype)]))
        self.active = np.concatenate([active, arrays["active_tail"].astype(np.bool_)])
        for ptr_name in ("r_ptr", "p_ptr", "e_ptr"):
            ptr = getattr(self, ptr_name)
            setattr(self, ptr_name, np.concatenate([ptr, arrays[ptr_name][1:] + ptr[-1]]))
        for name in _SEGMENTED:
            self._append_part(name, arrays[name].astype(_SEG_DTYPES[name]))
        raw = arrays["vocab_tail"].tobytes().decode("utf-8")
        for term in raw.split("\n") if raw else []:
            self._tail_terms[term] = len(self.vocab)
            self.vocab.append(term)
        self.entities = self.entities + list(header["entities_tail"])
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
        vocab = arrays["vocab"].tobytes().decode("utf-8")
        index.vocab = vocab.split("\n") if vocab else []
        index.n_sorted = len(index.vocab)
        delta_arrays: dict[str, np.ndarray] = {}
        for name, arr in arrays.items():
            if name.startswith("x_"):
                delta_arrays[name[2:]] = arr
            elif name.startswith("d_"):
                index._derived[name[2:]] = arr
            elif name != "vocab":
                setattr(index, name, arr)
        index.base_n, index.base_v, index.base_m, index.base_ent = index.n, len(index.vocab), index.m, len(index.entities)
        index.base_active = index.active
        if "csr_ptr" in index._derived:
            index._edges_derived_m = index.m
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


def index_for(conn: apsw.Connection, db_path: Path, *, readonly: bool, edges: bool = True) -> HotIndex:
    """Return the index for ``conn``, current for the committed database state.

    ``edges=False`` (the write-path scans) skips the edge-count check; recall needs it.
    """
    start = _OPEN.get(conn)
    if start is None:
        start = inherited(db_path)
    index = open_index(conn, db_path, readonly=readonly, cached=start, edges=edges)
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
    conn: apsw.Connection, db_path: Path, *, readonly: bool, cached: HotIndex | None, edges: bool = True
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
        index = HotIndex.build(conn, live) if index is None else index.catch_up(conn, live)
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
