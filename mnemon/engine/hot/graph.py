"""The hot index's edge graph: the both-directions CSR, the delta's side CSR, and the backbone links.

Owns what is derived from the edge list: the CSR of every edge row (each row listed at its source,
``out``, and at its target), the small CSR of the edge rows added since it (read beside the big one,
never inserted into it: that would copy five arrays of the big CSR per process; folded only before
a base is written), and the superseded flags and the temporal backbone's prev/next per row.
The read path takes the graph only through :meth:`EdgeGraph.edge_arrays`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemon.engine.hot.arrays import _insert_at
from mnemon.engine.hot.columns import ColumnStore
from mnemon.records import EDGE_TYPES

if TYPE_CHECKING:
    import numpy as np

EDGE_CODES = {name: code for code, name in enumerate(EDGE_TYPES)}
_CSR_KEYS = ("csr_ptr", "csr_nbr", "csr_weight", "csr_type", "csr_out")
_LINK_KEYS = ("superseded", "prev", "next")


class EdgeGraph(ColumnStore):
    """The edge CSRs (base and delta) and the per-row links derived from the edge list."""

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
        # Both directions of every row: entry k < m is row k listed at its source (``out``), entry
        # m + k the same row at its target. Per-row values are gathered with ``mode="wrap"``
        # (entry k reads row k mod m) instead of from both copies joined, and each temporary is
        # dropped when used: this is the peak of a large import (3.5M rows at 100k: 290 MB above
        # the index with every copy alive).
        node = np.concatenate([src, dst])
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=n), out=ptr[1:])
        order = np.argsort(node, kind="stable")  # stable keeps rowid order within a node
        del node
        return {
            "csr_ptr": ptr,
            "csr_nbr": np.concatenate([dst, src])[order],
            "csr_weight": np.take(self.edge_weight, order, mode="wrap"),
            "csr_type": np.take(self.edge_type, order, mode="wrap"),
            "csr_out": order < m,
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
