"""Entities in the hot index: entity ids, their posting lists and the known-entity set.

Owns the entity name -> id index (append-only, kept in step with ``entities``), the base's rows by
entity plus the delta's entries, and the set of entities present on active rows, counted from the
base's per-entity live counts (``entity_live``, written with the base) adjusted by the delta: O(delta)
per change instead of reading every row's entities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemon.engine.hot.arrays import _invert
from mnemon.engine.hot.columns import ColumnStore

if TYPE_CHECKING:
    import numpy as np


class EntityIndex(ColumnStore):
    """Entity ids, rows by entity, and the entities present on active rows."""

    def _entity_index(self) -> dict[str, int]:
        if self._ent_index is None or len(self._ent_index) != len(self.entities):
            self._ent_index = {e: i for i, e in enumerate(self.entities)}
        return self._ent_index

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
