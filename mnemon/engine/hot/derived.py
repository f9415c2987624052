"""What the hot index derives from its columns, lazily, and deriving it all ahead of time.

Owns the one dispatcher every concern asks for a derived array (``_get``: postings, entity
postings, ranks, the CSR, the links; each derived on first use and kept per process, the base's
mapped from its file), deriving everything before a base is written (``_derive``, the delta's
edges folded into the CSR), and the warm server's fork preparation (``prepare_for_forks``: derive
what commands derive lazily and leave room for appended rows, so forked workers inherit it all).
"""

from __future__ import annotations

from typing import Any

from mnemon.engine.hot.entities import EntityIndex
from mnemon.engine.hot.graph import _CSR_KEYS, _LINK_KEYS, EdgeGraph
from mnemon.engine.hot.postings import TermPostings
from mnemon.engine.hot.rowids import RowIds

# Rows of room the warm server leaves in an inherited index's per-row arrays (35 bytes a row).
FORK_ROOM = 4096


class Derived(RowIds, TermPostings, EntityIndex, EdgeGraph):
    """The lazily derived arrays, and deriving all of them ahead (a base write, a fork)."""

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

    def derived(self, name: str) -> Any:
        if name in _CSR_KEYS:  # the big CSR alone misses a delta's edge rows: read both, never one
            raise KeyError(f"{name}: read the edge CSR through HotIndex.edge_arrays() (base CSR + delta CSR)")
        return self._get(name)

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
