"""Building the hot index and keeping it current with the store (the only place text is tokenised).

Owns the index's currency: a build from SQL (rows in slices, then the vocabulary sorted, then the
edge list), making the result a base, the catch-up from what changed since the fingerprint the index
describes (new rows by rowid, deletions by the deletion log's sequence (by ``deleted_at`` for a
fingerprint or store without one), edge rows the change log names, new edge rows by rowid above the
edges' mark: O(delta); whatever does not add up is rebuilt), and folding a delta into a new base.
A crash between a commit and the index write can only make the index stale, never wrong.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from mnemon.engine.hot.arrays import _csr_from_lists, _headroom
from mnemon.engine.hot.derived import Derived
from mnemon.engine.hot.edges import _LOAD_CHUNK, EdgeList
from mnemon.records import CATEGORIES
from mnemon.store import hotindex
from mnemon.store.numeric import IMPORTANCE_FALLBACK
from mnemon.store.hotindex import Fingerprint
from mnemon.text import insight_views

if TYPE_CHECKING:
    import apsw
    import numpy as np

_Index = TypeVar("_Index", bound="Currency")


_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads' C scanner, without its wrappers
_STR = frozenset({str})


def _loads(raw: object) -> list[str]:
    """A row's tags or entities (JSON text): its strings, or [] for anything but a JSON array."""
    if type(raw) is str and raw:
        try:
            value, end = _scan(raw, 0)  # the usual case: an array of strings, no space around it
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end == len(raw) and type(value) is list and _STR.issuperset(map(type, value)):
            return value
    try:
        value = json.loads(str(raw)) if raw else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _int8(values: list[int]) -> np.ndarray:
    """Importances as the index's int8 column. An integer past int8 (a hand-edited 1000: well-formed, only
    out of the contract's 1-5, which doctor reports) is clipped, so the order of importances is kept,
    instead of numpy's OverflowError failing every catch-up (and so every recall) of the store."""
    import numpy as np

    try:
        return np.array(values, dtype=np.int8)
    except OverflowError:
        return np.clip(np.array(values, dtype=np.int64), -128, 127).astype(np.int8)


class Currency(Derived, EdgeList):
    """Build, catch up, merge: the index describes the store's committed state."""

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

        known = tail.get  # a term met before: its id without a call of ``tid`` (most terms of a build)

        def tids(terms: Iterable[str]) -> list[int]:
            got = list(map(known, terms))
            if None in got:  # (terms are distinct: a term ``tid`` adds is not met again in the list)
                return [tid(t) if g is None else g for g, t in zip(got, terms)]
            return got  # type: ignore[return-value]

        src_index = {s: i for i, s in enumerate(self.sources)}
        r_lists: list[list[int]] = []
        tf_lists: list[list[int]] = []
        p_lists: list[list[int]] = []
        e_lists: list[list[int]] = []
        ids, created, imp, cat, srcs, doc_len, n_plain = [], [], [], [], [], [], []
        fields: dict[str, tuple[list[str], list[str]]] = {}  # tag and entity texts' views, once each
        for _rowid, ins_id, content, tags_raw, ents_raw, category, source, importance, created_at, has_vec in rows:
            self.any_vector = self.any_vector or bool(has_vec)
            tags, ents = _loads(tags_raw), _loads(ents_raw)
            content = str(content)
            sequence = sequences.get(ins_id) if sequences else None
            terms, plain, content_len = insight_views(content, tags, ents, sequence, fields)
            counts = Counter(terms)
            r_lists.append(tids(counts))
            tf_lists.append(list(counts.values()))
            p_lists.append(tids(plain))
            e_lists.append([eid(e) for e in dict.fromkeys(ents)])
            ids.append(str(ins_id))
            created.append(str(created_at).encode("utf-8"))
            # a malformed importance reads as store.numeric's fallback, as every other reader has it (a
            # type test: cheaper than the int() it replaced)
            imp.append(importance if type(importance) is int else IMPORTANCE_FALLBACK)
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
        self._extend("importance", _int8(imp))
        self._extend("category", np.array(cat, dtype=np.int8))
        self._extend("source", np.array(srcs, dtype=np.int32))
        self._extend("active", np.ones(len(ids), dtype=np.bool_))
        self._extend("doc_len", np.array(doc_len, dtype=np.int32))
        self._extend("n_plain", np.array(n_plain, dtype=np.int32))
        self.ids = []
        if self._row_of is not None:
            self._row_of.update((i, self.n - len(ids) + k) for k, i in enumerate(ids))

    @classmethod
    def build(
        cls: type[_Index], conn: apsw.Connection, fp: Fingerprint, sequences: Mapping[str, list[str]] | None = None
    ) -> _Index:
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

    def catch_up(
        self: _Index, conn: apsw.Connection, fp: Fingerprint, sequences: Mapping[str, list[str]] | None = None,
        replaced: Sequence[tuple[str, str, str]] = (),
    ) -> _Index:
        """Apply what changed since ``self.fp``; rebuild what cannot be reconciled.

        New rows, deletions and new edge rows are applied by rowid/deletion sequence in O(delta)
        (deletions by ``deleted_at`` when either fingerprint has no sequence: an index file of the
        previous version, or a store not yet migrated).
        The edge-count check that catches an edge row deleted or replaced out of sight is left
        to :meth:`verify_edges`, which edge readers (recall) call. ``replaced``: on a store
        without an edge change log, the keys of edge rows the caller itself deleted or replaced
        since ``self.fp`` (an import, for the index built beside its last transaction,
        ``hotaside``), dropped as the log's keys are. A listed key without a row is ignored;
        a change not listed is still caught by the count check.
        """
        import numpy as np

        old = self.fp
        logged = hotindex.has_edge_log(conn)
        by_seq = old.deleted_seq >= 0 and fp.deleted_seq >= 0
        # The edges' mark never falls on SQLite (store/sequences.py) unless rowids were renumbered; on a
        # store with an edge change log (PostgreSQL) rowids are never reused, so a lower MAX(rowid) only
        # means the newest rows were deleted, which the log names.
        if (fp.max_rowid < old.max_rowid or (fp.max_edge_rowid < old.max_edge_rowid and not logged)
                or fp.deleted_count < old.deleted_count or fp.edge_seq < old.edge_seq
                or (by_seq and fp.deleted_seq < old.deleted_seq) or fp.deletions_epoch != old.deletions_epoch):
            # rowids renumbered (VACUUM), rows undeleted, or the deletion log recreated (its numbers are
            # not the ones this index has seen, store/sequences.py): start over
            return type(self).build(conn, fp, sequences)
        if replace(fp, generation=old.generation) == old:
            self.fp = fp  # only access counts, EI or vectors changed: nothing this index holds
            return self
        self._append_rows(list(hotindex.rows_since(conn, old.max_rowid)), sequences)
        # A store with an edge change log names every edge row deleted or replaced since old.fp:
        # drop those from the lists (before the new rows are appended, so only rows seen before
        # can match). Without one, a deleted row's edges are counted below and any other change
        # is caught by verify_edges' count, which then reloads the whole list.
        dropped = 0
        if logged and fp.edge_seq != old.edge_seq:
            keys = hotindex.edge_changes_since(conn, old.edge_seq, fp.edge_seq)
            if keys is None:
                self.edge_count_db = -1  # the log was pruned past us: verify_edges reloads
            else:
                dropped = self._drop_edges(keys)
        elif not logged and replaced:
            dropped = self._drop_edges(list(dict.fromkeys(replaced)))
        gone_rows: list[int] = []
        if fp.deleted_count != old.deleted_count or fp.deleted_seq != old.deleted_seq:
            ids = (hotindex.deletions_since(conn, old.deleted_seq) if by_seq
                   else hotindex.deleted_since(conn, old.last_deleted_at))  # fmt: skip
            found = [row for row in self._lookup(ids) if row is not None and self.active[row]]
            if found:
                # A private copy before clearing flags: the array may be the mapped base file's, or
                # shared with base_active or with a view a caller still holds.
                self._rebuffer("active", _headroom(self.n))
                for row in found:
                    if self.active[row]:
                        self.active[row] = False
                        gone_rows.append(row)
        if int(self.active.sum()) != hotindex.active_count(conn):
            return type(self).build(conn, fp, sequences)
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
