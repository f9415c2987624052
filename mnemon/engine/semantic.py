"""Semantic auto-edge neighbours for a bulk import: blocked cosine products, exact ties (§4.7).

Each imported item with a vector links to the (at most ``SEMANTIC_AUTO_TOP``) earlier vectors
with cosine ≥ ``SEMANTIC_AUTO_COSINE``, ties by id, exactly as importing the items one by one
would. Comparing every item with every earlier vector one at a time is quadratic in Python
calls and, done as one product per chunk, quadratic in memory. :class:`ChunkNeighbours` instead
compares a chunk of new vectors with the store's vector index (memory-mapped, never copied) and
with the chunk itself in blocks of ``QUERY_BLOCK`` x ``ROW_BLOCK`` through
``kernels.cosine_block``, so the extra memory is bounded by the block sizes plus the chunk's own
vectors. Block products only *find* candidates (within ``kernels.EXACT_MARGIN`` of the floor and
of the k-th best); every candidate's cosine is then recomputed by ``kernels.exact_cosine``, which
depends on the two vectors alone, so edges, weights and tie-breaks never depend on the blocking.

Vectors are taken as the store will hold them (through the blob format, so a float32 Go store
compares rounded vectors within a chunk as it does across chunks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemon.records import SEMANTIC_AUTO_COSINE, SEMANTIC_AUTO_TOP
from mnemon.store import blob

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.store.vectors import VectorIndex

QUERY_BLOCK = 256  # new vectors per block product
ROW_BLOCK = 8192  # stored rows per block product: QUERY_BLOCK x ROW_BLOCK float64 = 16 MiB


class ChunkNeighbours:
    """The semantic neighbours of one import chunk's items among everything stored before them.

    ``index`` is the vector index, current for the committed store before the chunk (None when
    the store has no vectors yet); ``vectors`` the chunk's vectors in draft order (None where
    the item has none). Call :meth:`stored` as each item's vector joins the store, and
    :meth:`matches` for an item before that.
    """

    def __init__(self, index: VectorIndex | None, vectors: list[NDArray[np.float64] | None], dim: int, fmt: str) -> None:
        import numpy as np

        import kernels

        self.index = index
        n = len(vectors)
        self.units = np.zeros((n, dim), dtype=np.float64)
        self.valid = np.zeros(n, dtype=np.bool_)
        for k, vector in enumerate(vectors):
            if vector is None or vector.shape != (dim,):
                continue
            held = blob.decode(blob.encode(vector, fmt), fmt)  # what the store (and its index) will hold
            if held is not None:
                self.units[k] = kernels.exact_unit(held)
                self.valid[k] = True
        self.ids: list[str | None] = [None] * n  # set once the item's vector is stored
        self._store: dict[int, tuple[NDArray[np.int64], NDArray[np.float64]]] = {}
        self._chunk: dict[int, NDArray[np.int64]] = {}
        self._row_units: dict[int, NDArray[np.float64]] = {}
        self._find_candidates()

    def has_vector(self, offset: int) -> bool:
        return bool(self.valid[offset])

    def stored(self, offset: int, insight_id: str) -> None:
        """The item at ``offset`` is now in the store with its vector: later items may link to it."""
        if self.valid[offset]:
            self.ids[offset] = insight_id

    def matches(self, offset: int) -> list[tuple[str, float]]:
        """Earlier vectors with cosine ≥ 0.80 to the item at ``offset``: best first, ties by id, top 3."""
        import kernels

        if not self.valid[offset]:
            return []
        unit = self.units[offset]
        hits: list[tuple[str, float]] = []
        rows, _ = self._store.get(offset, (None, None))
        if rows is not None and self.index is not None:
            for row in rows.tolist():
                cosine = kernels.exact_cosine(unit, self._row_unit(row))
                if cosine >= SEMANTIC_AUTO_COSINE:
                    hits.append((self.index.id_at(row), cosine))
        earlier = self._chunk.get(offset)
        for other in [] if earlier is None else earlier.tolist():
            other_id = self.ids[other]
            if other_id is None:
                continue  # skipped as a duplicate, failed, or not written: not among the earlier vectors
            cosine = kernels.exact_cosine(unit, self.units[other])
            if cosine >= SEMANTIC_AUTO_COSINE:
                hits.append((other_id, cosine))
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[:SEMANTIC_AUTO_TOP]

    # --- candidates ---------------------------------------------------------------------------

    def _row_unit(self, row: int) -> NDArray[np.float64]:
        import kernels

        unit = self._row_units.get(row)
        if unit is None:
            assert self.index is not None
            unit = kernels.exact_unit(self.index.vectors[row])
            self._row_units[row] = unit
        return unit

    def _find_candidates(self) -> None:
        import numpy as np

        queries = np.flatnonzero(self.valid)
        for start in range(0, len(queries), QUERY_BLOCK):
            block = queries[start : start + QUERY_BLOCK]
            self._store_candidates(block)
            self._chunk_candidates(block)

    def _store_candidates(self, block: NDArray[np.int64]) -> None:
        """Candidates among the stored rows, pruned to the floor and the k-th best (they all count)."""
        import numpy as np

        import kernels

        index = self.index
        if index is None or not index.rows:
            return
        floor = SEMANTIC_AUTO_COSINE - kernels.EXACT_MARGIN
        units = self.units[block]
        found: dict[int, list[tuple[NDArray[np.int64], NDArray[np.float64]]]] = {}
        vectors, norms, active = index.vectors, index.norms, index.active
        for lo in range(0, index.rows, ROW_BLOCK):
            hi = min(lo + ROW_BLOCK, index.rows)
            scores = kernels.cosine_block(vectors[lo:hi], norms[lo:hi], units)
            scores[~active[lo:hi]] = -np.inf
            rows, cols = np.nonzero(scores >= floor)
            for col in np.unique(cols).tolist():
                pick = cols == col
                found.setdefault(col, []).append((rows[pick] + lo, scores[rows[pick], col]))
        for col, parts in found.items():
            rows = np.concatenate([p[0] for p in parts])
            approx = np.concatenate([p[1] for p in parts])
            if len(rows) > SEMANTIC_AUTO_TOP:
                # Rows below the k-th best by more than the rounding margin can never make the top k.
                kth = np.partition(approx, len(approx) - SEMANTIC_AUTO_TOP)[len(approx) - SEMANTIC_AUTO_TOP]
                keep = approx >= kth - 2 * kernels.EXACT_MARGIN
                rows, approx = rows[keep], approx[keep]
            self._store[int(block[col])] = (rows.astype(np.int64), approx)

    def _chunk_candidates(self, block: NDArray[np.int64]) -> None:
        """Candidates among the chunk's earlier items (whether each counts is known only later)."""
        import numpy as np

        import kernels

        floor = SEMANTIC_AUTO_COSINE - kernels.EXACT_MARGIN
        last = int(block[-1])
        earlier = np.flatnonzero(self.valid[:last])
        if not len(earlier):
            return
        units = self.units[block]
        ones = np.ones(ROW_BLOCK, dtype=np.float64)
        found: dict[int, list[NDArray[np.int64]]] = {}
        for lo in range(0, len(earlier), ROW_BLOCK):
            rows = earlier[lo : lo + ROW_BLOCK]
            scores = kernels.cosine_block(self.units[rows], ones[: len(rows)], units)
            scores[rows[:, None] >= block[None, :]] = -np.inf  # only items before the query
            hit_rows, cols = np.nonzero(scores >= floor)
            for col in np.unique(cols).tolist():
                found.setdefault(col, []).append(rows[hit_rows[cols == col]])
        for col, parts in found.items():
            self._chunk[int(block[col])] = np.concatenate(parts).astype(np.int64)
