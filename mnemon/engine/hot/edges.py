"""The hot index's edge list and its guard: edge rows read from SQL, dropped, verified.

Owns the edge columns' contents: appending edge rows between known rows (ids resolved column by
column), dropping the rows the store's edge change log names (and their CSR entries), reloading
the whole list, and the guard: the edge count the index expects against the store's trigger-kept
counter (one row read), which catches an edge row deleted or replaced behind the index's back.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

from mnemon.engine.hot.graph import _CSR_KEYS, _LINK_KEYS, EDGE_CODES, EdgeGraph
from mnemon.engine.hot.rowids import RowIds
from mnemon.store import hotindex, numeric

if TYPE_CHECKING:
    import apsw
    import numpy as np

# What this process did to edge lists, for tests to assert on (never read by the index itself):
# full reloads from SQL, and edge rows dropped from the lists by a change-log catch-up.
EDGE_STATS = {"reloads": 0, "dropped": 0}

_BULK_LOOKUP = 4096  # edge rows per batch above which ids are resolved through one dict of every id
# Edge rows (a tenth as many insight rows) read from SQL per slice: a slice's rows are Python tuples
# of two UUID strings and more, about 400 bytes an edge, so a million-row slice peaked at 400 MB
# (140 MB for the 350k edges of a 10k import); at 50k a slice costs about 20 MB, for the same CPU.
_LOAD_CHUNK = 50_000


def _weights(weights: Sequence[Any]) -> np.ndarray:
    """The rows' weights as float64, a malformed one (text, a blob, NULL, an infinity) read as store.numeric's
    fallback, as ``store.edges`` reads it. Without a dtype numpy reports anything but floats (a str dtype, an
    object one), which costs no more than the conversion to float64 (which would parse "3" or "nan" as text)."""
    import numpy as np

    array = np.array(weights)
    if array.dtype == np.float64 and np.isfinite(array).all():
        return array
    return np.array([numeric.real(w, numeric.WEIGHT_FALLBACK) for w in weights], dtype=np.float64)


class EdgeList(RowIds, EdgeGraph):
    """Edge rows in and out of the edge columns, and the edge-count guard."""

    def _append_edges(self, rows: list[tuple[Any, ...]]) -> int:
        """Append edge rows between known rows; return how many edge rows were read.

        Column by column (a build reads tens of millions of rows): ids to rows through one dict
        for a large batch, by bisection over the base for a catch-up's few rows.
        """
        import numpy as np

        k = len(rows)
        if not k:
            return 0
        src_ids, dst_ids, types, weights, backbone = zip(*rows)
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
        typ = np.array(types, dtype=np.int64)  # the codes of EDGE_CODES, computed by the query
        keep = (src >= 0) & (dst >= 0) & (typ >= 0)  # else: touches an insight deleted before we saw it
        if keep.any():
            self._append_part("edge_src", src[keep].astype(np.int32))
            self._append_part("edge_dst", dst[keep].astype(np.int32))
            self._append_part("edge_type", typ[keep].astype(np.int8))
            self._append_part("edge_weight", _weights(weights)[keep])
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

    def verify_edges(self, conn: apsw.Connection) -> None:
        """Check the edge rows we track against the store's edge counter (O(1)); reload them on a mismatch."""
        if not self.edges_verified:
            if self.edge_count_db != hotindex.edge_count(conn):
                self._reload_edges(conn)  # a replaced or deleted edge row we cannot see by rowid
                self.delta_id = secrets.token_hex(8)
            self.edges_verified = True
