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
"""

from __future__ import annotations

import json
import secrets
import weakref
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
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


class HotIndex:
    """The hot index of one store; build with :meth:`open` (loads, catches up, persists)."""

    def __init__(self) -> None:
        import numpy as np

        self.fp = Fingerprint(-1, 0, 0, 0, "")
        self.build_id = ""
        self.edge_count_db = 0
        self.any_vector = False  # some row carried an embedding blob when it was indexed
        self.ids: list[str] = []
        self.id_blob = np.zeros(0, dtype="S36")
        self.created = np.zeros(0, dtype="S20")
        self.importance = np.zeros(0, dtype=np.int8)
        self.category = np.zeros(0, dtype=np.int8)
        self.source = np.zeros(0, dtype=np.int32)
        self.active = np.zeros(0, dtype=np.bool_)
        self.doc_len = np.zeros(0, dtype=np.int32)
        self.n_plain = np.zeros(0, dtype=np.int32)
        self.sources: list[str] = []
        self.entities: list[str] = []
        self.vocab: list[str] = []  # sorted; a term's id is its position
        self.r_ptr = np.zeros(1, dtype=np.int64)
        self.r_term = np.zeros(0, dtype=np.int32)
        self.r_tf = np.zeros(0, dtype=np.int32)
        self.p_ptr = np.zeros(1, dtype=np.int64)
        self.p_term = np.zeros(0, dtype=np.int32)
        self.e_ptr = np.zeros(1, dtype=np.int64)
        self.e_ent = np.zeros(0, dtype=np.int32)
        self.edge_src = np.zeros(0, dtype=np.int32)
        self.edge_dst = np.zeros(0, dtype=np.int32)
        self.edge_type = np.zeros(0, dtype=np.int8)
        self.edge_weight = np.zeros(0, dtype=np.float64)
        self.edge_backbone = np.zeros(0, dtype=np.bool_)
        self._derived: dict[str, Any] = {}
        self._edges_appended_from: int | None = None  # edge rows before a catch-up's appends
        self._row_of: dict[str, int] | None = None

    # --- size and lookups ---------------------------------------------------------------------

    @property
    def n(self) -> int:
        return int(self.active.shape[0])

    def row_of(self, insight_id: str) -> int | None:
        if self._row_of is None:
            self._row_of = {i: r for r, i in enumerate(self.ids_list())}
        return self._row_of.get(insight_id)

    def ids_list(self) -> list[str]:
        if len(self.ids) != self.n:
            self.ids = [b.decode("ascii", "replace") for b in self.id_blob.tolist()]
        return self.ids

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows of many ids at once (-1 where unknown), by bisection over the sorted ids."""
        import numpy as np

        rank = self._get("id_rank")  # persisted: inverting it is O(n), no string sort per query
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
            pos = bisect_left(self.vocab, term)
            if pos < len(self.vocab) and self.vocab[pos] == term:
                out.append(pos)
        return out

    # --- derived arrays (rebuilt from the primary arrays, cached per process) ------------------

    def _get(self, name: str) -> Any:
        if name not in self._derived:
            self._derive()
        return self._derived[name]

    def _derive(self) -> None:
        import numpy as np

        n, v = self.n, len(self.vocab)
        d: dict[str, Any] = {}
        d["post_r_ptr"], d["post_r_rows"], d["post_r_tf"] = _invert(self.r_ptr, self.r_term, v, self.r_tf)
        d["post_p_ptr"], d["post_p_rows"] = _invert(self.p_ptr, self.p_term, v)
        d["id_rank"] = np.argsort(np.argsort(self.id_blob, kind="stable"), kind="stable").astype(np.int32)
        _, created_rank = np.unique(self.created, return_inverse=True)
        d["created_rank"] = created_rank.astype(np.int32).reshape(n)
        edge_keys = ("csr_ptr", "csr_nbr", "csr_weight", "csr_type", "csr_out", "superseded", "prev", "next")
        stale = self._derived
        if self._edges_appended_from is not None and all(k in stale for k in edge_keys):
            d.update(self._extend_edges(stale, self._edges_appended_from))
        else:
            d.update(self._derive_edges())
        self._edges_appended_from = None
        self._derived = d

    def _extend_edges(self, old: dict[str, Any], m_old: int) -> dict[str, Any]:
        """Insert the edge rows appended since the last derive into the existing CSR.

        A catch-up after one ``remember`` adds a few dozen edge rows to a graph of hundreds of
        thousands; re-sorting every entry would dominate the write. New entries go to the end of
        their node's segment: within a node the CSR order only separates transitions that are
        identical for the beam (same neighbour, type and delta), so results do not change.
        """
        import numpy as np

        n = self.n
        src, dst = self.edge_src[m_old:], self.edge_dst[m_old:]
        ptr_old = np.asarray(old["csr_ptr"])
        ptr = np.concatenate([ptr_old, np.full(n + 1 - ptr_old.shape[0], ptr_old[-1], dtype=np.int64)])
        node = np.concatenate([src, dst]).astype(np.int64)
        order = np.argsort(node, kind="stable")
        at = ptr[node[order] + 1]  # the end of each node's current segment
        both_w = np.concatenate([self.edge_weight[m_old:], self.edge_weight[m_old:]])[order]
        both_t = np.concatenate([self.edge_type[m_old:], self.edge_type[m_old:]])[order]
        out_flag = np.concatenate([np.ones(src.shape[0], dtype=np.bool_), np.zeros(src.shape[0], dtype=np.bool_)])
        grown = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=n), out=grown[1:])
        d: dict[str, Any] = {
            "csr_ptr": ptr + grown,
            "csr_nbr": np.insert(np.asarray(old["csr_nbr"]), at, np.concatenate([dst, src])[order]),
            "csr_weight": np.insert(np.asarray(old["csr_weight"]), at, both_w),
            "csr_type": np.insert(np.asarray(old["csr_type"]), at, both_t),
            "csr_out": np.insert(np.asarray(old["csr_out"]), at, out_flag[order]),
        }
        pad = n - np.asarray(old["superseded"]).shape[0]
        superseded = np.concatenate([old["superseded"], np.zeros(pad, dtype=np.bool_)])
        prev = np.concatenate([old["prev"], np.full(pad, -1, dtype=np.int32)])
        nxt = np.concatenate([old["next"], np.full(pad, -1, dtype=np.int32)])
        superseded[dst[self.edge_type[m_old:] == EDGE_CODES["supersedes"]]] = True
        bb = np.flatnonzero(self.edge_backbone[m_old:])
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

    def recall_postings(self) -> Postings:
        return Postings(self._get("post_r_ptr"), self._get("post_r_rows"), self._get("post_r_tf"))

    def plain_postings(self) -> Postings:
        return Postings(self._get("post_p_ptr"), self._get("post_p_rows"), None)

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
        vocab_index = {t: i for i, t in enumerate(self.vocab)}
        new_terms: dict[str, int] = {}

        def tid(term: str) -> int:
            got = vocab_index.get(term)
            if got is None:
                got = new_terms.setdefault(term, len(self.vocab) + len(new_terms))
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
        self.r_ptr, self.r_term = _concat_csr(self.r_ptr, self.r_term, r_ptr, r_term)
        self.r_tf = np.concatenate([self.r_tf, r_tf])
        self.p_ptr, self.p_term = _concat_csr(self.p_ptr, self.p_term, p_ptr, p_term)
        self.e_ptr, self.e_ent = _concat_csr(self.e_ptr, self.e_ent, e_ptr, e_ent)
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
        if new_terms:
            self._resort_vocab(list(new_terms))
        self.ids = []
        self._row_of = None

    def _resort_vocab(self, added: list[str]) -> None:
        """Keep the vocabulary sorted (ids = positions) so a query looks terms up by bisection."""
        import numpy as np

        merged = self.vocab + added
        order = sorted(range(len(merged)), key=merged.__getitem__)
        remap = np.empty(len(merged), dtype=np.int32)
        remap[np.array(order, dtype=np.int64)] = np.arange(len(merged), dtype=np.int32)
        self.vocab = [merged[i] for i in order]
        self.r_term = remap[self.r_term] if self.r_term.size else self.r_term
        self.p_term = remap[self.p_term] if self.p_term.size else self.p_term

    def _append_edges(self, rows: list[tuple[Any, ...]]) -> int:
        """Append edge rows between known rows; return how many edge rows were read."""
        import numpy as np

        src, dst, typ, wt, bb = [], [], [], [], []
        row_of = self.row_of
        for _rowid, s, t, edge_type, weight, backbone in rows:
            a, b = row_of(str(s)), row_of(str(t))
            code = EDGE_CODES.get(str(edge_type))
            if a is None or b is None or code is None:
                continue  # touches an insight deleted before we saw it: never traversable
            src.append(a)
            dst.append(b)
            typ.append(code)
            wt.append(float(weight))
            bb.append(bool(backbone))
        if src:
            self.edge_src = np.concatenate([self.edge_src, np.array(src, dtype=np.int32)])
            self.edge_dst = np.concatenate([self.edge_dst, np.array(dst, dtype=np.int32)])
            self.edge_type = np.concatenate([self.edge_type, np.array(typ, dtype=np.int8)])
            self.edge_weight = np.concatenate([self.edge_weight, np.array(wt, dtype=np.float64)])
            self.edge_backbone = np.concatenate([self.edge_backbone, np.array(bb, dtype=np.bool_)])
        return len(rows)

    def _reload_edges(self, conn: apsw.Connection) -> None:
        import numpy as np

        self.edge_src = np.zeros(0, dtype=np.int32)
        self.edge_dst = np.zeros(0, dtype=np.int32)
        self.edge_type = np.zeros(0, dtype=np.int8)
        self.edge_weight = np.zeros(0, dtype=np.float64)
        self.edge_backbone = np.zeros(0, dtype=np.bool_)
        self.edge_count_db = self._append_edges(list(hotindex.edges_since(conn, 0)))

    @classmethod
    def build(cls, conn: apsw.Connection, fp: Fingerprint) -> HotIndex:
        """Build from scratch (inside the caller's read snapshot)."""
        index = cls()
        index._append_rows(list(hotindex.rows_since(conn, 0)))
        index._reload_edges(conn)
        index.fp = fp
        index.build_id = secrets.token_hex(8)
        return index

    def catch_up(self, conn: apsw.Connection, fp: Fingerprint) -> HotIndex:
        """Apply what changed since ``self.fp``; rebuild what cannot be reconciled."""
        import numpy as np

        old = self.fp
        if fp.max_rowid < old.max_rowid or fp.max_edge_rowid < old.max_edge_rowid or fp.deleted_count < old.deleted_count:
            return HotIndex.build(conn, fp)  # rowids renumbered (VACUUM) or rows undeleted: start over
        if replace(fp, generation=old.generation) == old:
            self.fp = fp  # only access counts, EI or vectors changed: nothing this index holds
            return self
        self._thaw()
        before = self.active.copy()
        self._append_rows(list(hotindex.rows_since(conn, old.max_rowid)))
        if fp.deleted_count != old.deleted_count:
            for insight_id in hotindex.deleted_since(conn, old.last_deleted_at):
                row = self.row_of(insight_id)
                if row is not None:
                    self.active[row] = False
        if int(self.active.sum()) != hotindex.active_count(conn):
            return HotIndex.build(conn, fp)
        n_before = before.shape[0]
        m_before = int(self.edge_src.shape[0])
        gone = np.zeros(self.n, dtype=np.bool_)
        gone[:n_before] = before & ~self.active[:n_before]
        live = np.concatenate([before, np.ones(self.n - n_before, dtype=np.bool_)])
        src, dst = self.edge_src, self.edge_dst
        removed = int(((gone[src] | gone[dst]) & live[src] & live[dst]).sum())  # forget/prune drop these
        expected = self.edge_count_db - removed + self._append_edges(list(hotindex.edges_since(conn, old.max_edge_rowid)))
        if expected != hotindex.edge_count(conn):
            self._reload_edges(conn)  # a replaced or deleted edge row we cannot see by rowid
            self._edges_appended_from = None
        else:
            self.edge_count_db = expected
            self._edges_appended_from = m_before
        self.fp = fp
        self.build_id = secrets.token_hex(8)
        self._derive()
        return self

    def _thaw(self) -> None:
        """Copy the memory-mapped (read-only) active flags before deletions are applied in place."""
        self.active = self.active.copy()

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
        if not self._derived:
            self._derive()
        out.update({f"d_{k}": v for k, v in self._derived.items()})
        return out

    @classmethod
    def from_file(cls, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> HotIndex | None:
        if header.get("version") != FORMAT_VERSION:
            return None
        index = cls()
        index.fp = Fingerprint.from_json(header["fingerprint"])
        index.build_id = str(header["build_id"])
        index.edge_count_db = int(header["edge_count_db"])
        index.any_vector = bool(header.get("any_vector", True))
        index.sources = list(header["sources"])
        index.entities = list(header["entities"])
        vocab = arrays["vocab"].tobytes().decode("utf-8")
        index.vocab = vocab.split("\n") if vocab else []
        for name, arr in arrays.items():
            if name.startswith("d_"):
                index._derived[name[2:]] = arr
            elif name != "vocab":
                setattr(index, name, arr)
        return index


# One index per open connection, shared by recall, search and the write-path scans of a process.
_OPEN: weakref.WeakKeyDictionary[Any, HotIndex] = weakref.WeakKeyDictionary()


def cached(conn: apsw.Connection) -> HotIndex | None:
    """The index this process last used with ``conn`` (possibly stale), if any."""
    return _OPEN.get(conn)


def index_for(conn: apsw.Connection, db_path: Path, *, readonly: bool) -> HotIndex:
    """Return the index for ``conn``, current for the committed database state."""
    index = open_index(conn, db_path, readonly=readonly, cached=_OPEN.get(conn))
    _OPEN[conn] = index
    return index


def open_index(conn: apsw.Connection, db_path: Path, *, readonly: bool, cached: HotIndex | None) -> HotIndex:
    """Return a hot index that describes the database now: loaded, caught up or rebuilt.

    Everything is read inside one read snapshot so the fingerprint and the rows agree.
    """
    with hotindex.read_snapshot(conn):
        live = hotindex.fingerprint(conn)
        index = cached
        if index is None:
            loaded = hotindex.read_index(db_path)
            index = HotIndex.from_file(*loaded) if loaded is not None else None
            if index is not None:
                stamp = hotindex.read_stamp(db_path)
                if stamp is not None and stamp[0] == index.build_id:
                    index.fp = stamp[1]
        if index is not None and index.fp == live:
            return index
        build_id = index.build_id if index is not None else ""
        index = HotIndex.build(conn, live) if index is None else index.catch_up(conn, live)
    if not readonly:
        if index.build_id == build_id:
            hotindex.write_stamp(db_path, build_id, live)
        else:
            hotindex.write_index(db_path, index.header(), index.arrays())
    return index


def mark_current(db_path: Path, index: HotIndex, fp: Fingerprint, *, readonly: bool) -> None:
    """Our own write changed nothing the index holds: stamp it current for ``fp``."""
    index.fp = fp
    if not readonly:
        hotindex.write_stamp(db_path, index.build_id, fp)
