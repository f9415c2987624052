"""Semantic auto-edge neighbours for a bulk import: blocked cosine products, exact ties (§4.7).

Each imported item with a vector links to the (at most ``SEMANTIC_AUTO_TOP``) earlier vectors
with cosine ≥ its threshold (the model's auto-link cosine, ``SEMANTIC_AUTO_COSINE`` in the
contract's scale; higher for a vector composed from labelled sentences:
``SimilarityScale.for_vector``), ties by id, exactly as importing the items one by one would.
Comparing every item with every earlier vector one at a time is quadratic in Python calls and,
done as one product per chunk, quadratic in memory. :class:`ChunkNeighbours` instead compares
the chunk's new vectors, ``QUERY_BLOCK`` at a time as the import reaches them, with the store's
vector index (memory-mapped, never copied) and with the chunk's items already stored, in
products of ``QUERY_BLOCK`` x ``ROW_BLOCK`` through ``kernels.cosine_block``; an item's earlier
neighbours inside its own query block are compared when the item is reached. So the extra memory
is bounded by the block sizes plus the chunk's own vectors. Block products only *find*
candidates: those within ``kernels.EXACT_MARGIN`` of the floor and of the running k-th best (all
of them already stored, so a row below the k-th best can never make the top k). Every
candidate's cosine is then recomputed by ``kernels.exact_cosine``, which depends on the two
vectors alone, so edges, weights and tie-breaks never depend on the blocking.

Vectors are taken as the store will hold them (through the blob format, so a float32 Go store
compares rounded vectors within a chunk as it does across chunks).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mnemon.records import CONTRACT_SIMILARITY, SEMANTIC_AUTO_TOP, SimilarityScale
from mnemon.store import blob

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.store.vectors import VectorIndex

QUERY_BLOCK = 1024  # new vectors per block product (each stored row block is read once per block)
ROW_BLOCK = 8192  # stored rows per block product: QUERY_BLOCK x ROW_BLOCK float32 = 32 MiB


class ChunkNeighbours:
    """The semantic neighbours of one import chunk's items among everything stored before them.

    ``index`` is the vector index, current for the committed store before the chunk (None when
    the store has no vectors yet); ``vectors`` the chunk's vectors in draft order (None where
    the item has none). Items are visited in order: call :meth:`matches` for an item, then
    :meth:`stored` once its vector joins the store (never for a skipped or failed item).
    """

    def __init__(
        self, index: VectorIndex | None, vectors: list[NDArray[np.float64] | None], dim: int, fmt: str,
        scale: SimilarityScale = CONTRACT_SIMILARITY, links: list[float] | None = None,
    ) -> None:
        import numpy as np

        import kernels

        self.scale = scale  # the model's (records.similarity_scale)
        n = len(vectors)
        # each item's auto-link threshold (SimilarityScale.for_vector: a composed vector's is higher)
        self.links = np.array(links if links is not None else [scale.auto_link] * n, dtype=np.float64)
        self.index = index if index is not None and index.rows else None
        self.units = np.zeros((n, dim), dtype=np.float64)
        self.valid = np.zeros(n, dtype=np.bool_)
        for k, vector in enumerate(vectors):
            if vector is None or vector.shape != (dim,):
                continue
            held = blob.decode(blob.encode(vector, fmt), fmt)  # what the store (and its index) will hold
            if held is not None:
                self.units[k] = kernels.exact_unit(held)
                self.valid[k] = True
        self.units32 = self.units.astype(np.float32)
        self.ids: list[str | None] = [None] * n  # set once the item's vector is stored
        self._block = -1  # the query block whose candidates are in _found
        # offset -> (refs, approximate cosines, is_store_row): pruned candidates, all already stored
        self._found: dict[int, tuple[NDArray[np.int64], NDArray[np.float32], NDArray[np.bool_]]] = {}
        self._row_units: dict[int, NDArray[np.float64]] = {}
        self._in_block: dict[int, list[tuple[int, float]]] = {}  # offset -> earlier (offset, approx) of its block

    def has_vector(self, offset: int) -> bool:
        return bool(self.valid[offset])

    def compares(self, content: str) -> bool:
        """Whether the model's cosines say anything about ``content``: not an English-only model's
        about a Chinese memory (records.MINILM_SCALE), whose vector is stored but links nothing."""
        return self.scale.reads(content)

    def stored(self, offset: int, insight_id: str) -> None:
        """The item at ``offset`` is now in the store with its vector: later items may link to it."""
        if self.valid[offset]:
            self.ids[offset] = insight_id

    def matches(self, offset: int) -> list[tuple[str, float]]:
        """Earlier vectors with cosine ≥ the item's threshold (0.80 in the contract's scale) to the item at
        ``offset``: best first, ties by id, top 3."""
        import numpy as np

        import kernels

        if not self.valid[offset]:
            return []
        block = offset // QUERY_BLOCK
        if block != self._block:
            self._find_block(block)
        unit = self.units[offset]
        hits: list[tuple[str, float]] = []
        empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), np.empty(0, dtype=np.bool_))
        refs, approx, is_row = self._found.get(offset, empty)
        same_block = [(j, v) for j, v in self._in_block.get(offset, ()) if self.ids[j] is not None]
        if same_block:  # earlier items of this query block: whether they were stored is known only now
            refs = np.concatenate([refs, np.array([j for j, _ in same_block], dtype=np.int64)])
            approx = np.concatenate([approx, np.array([v for _, v in same_block], dtype=np.float32)])
            is_row = np.concatenate([is_row, np.zeros(len(same_block), dtype=np.bool_)])
            # All of them count now: prune to the k-th best again before the exact cosines.
            refs, _, approx, is_row = _prune(refs, np.zeros(len(refs), dtype=np.int64), approx, is_row)
        for ref, row in zip(refs.tolist(), is_row.tolist()):
            if row:
                assert self.index is not None
                other_id, other = self.index.id_at(ref), self._row_unit(ref)
            else:
                other_id, other = self.ids[ref], self.units[ref]
            assert other_id is not None
            cosine = kernels.exact_cosine(unit, other)
            if cosine >= self.links[offset]:
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

    def _find_block(self, block: int) -> None:
        """Candidates of one query block among the stored rows and the chunk's items stored before it."""
        import numpy as np

        import kernels

        self._block, self._found, self._row_units, self._in_block = block, {}, {}, {}
        lo = block * QUERY_BLOCK
        queries = lo + np.flatnonzero(self.valid[lo : lo + QUERY_BLOCK])
        if not len(queries):
            return
        units = self.units32[queries]
        floor = self.links[queries] - kernels.EXACT_MARGIN  # per query (a column of the products below)
        # Earlier items of the same block, above the floor, unpruned (some may be skipped later).
        inside = units @ units.T
        inside[np.tril_indices(len(queries))] = -np.inf  # keep pairs (earlier j, later k) only
        rows, cols = np.nonzero(inside >= floor)
        for j, k, v in zip(rows.tolist(), cols.tolist(), inside[rows, cols].tolist()):
            self._in_block.setdefault(int(queries[k]), []).append((int(queries[j]), v))
        del inside
        kept: tuple[Any, ...] | None = None
        for is_row, base, scores in self._score_blocks(units, lo):
            r, c = np.nonzero(scores >= floor)  # one comparison pass; hits above the floor are few
            part = (base[r], c, scores[r, c], np.full(len(r), is_row, dtype=np.bool_))
            kept = part if kept is None else tuple(np.concatenate([x, y]) for x, y in zip(kept, part))
            if len(kept[0]) > 8 * SEMANTIC_AUTO_TOP * len(queries):
                kept = _prune(*kept)
        if kept is None or not len(kept[0]):
            return
        ref, col, val, flag = _prune(*kept)  # sorted by query, best first
        starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
        ends = np.r_[starts[1:], len(col)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            self._found[int(queries[col[s]])] = (ref[s:e].astype(np.int64), val[s:e], flag[s:e])

    def _score_blocks(self, units: NDArray[np.float32], lo: int) -> Iterator[tuple[bool, NDArray[np.int64], Any]]:
        """(is_store_row, refs, approximate cosines (rows, queries)) per block of earlier vectors."""
        import numpy as np

        import kernels

        index = self.index
        if index is not None:
            vectors, norms, active = index.vectors, index.norms, index.active
            for start in range(0, index.rows, ROW_BLOCK):
                stop = min(start + ROW_BLOCK, index.rows)
                scores = kernels.cosine_block(vectors[start:stop], norms[start:stop], units)
                scores[~active[start:stop]] = -np.inf
                yield True, np.arange(start, stop, dtype=np.int64), scores
        earlier = np.array([j for j in range(lo) if self.ids[j] is not None], dtype=np.int64)
        ones = np.ones(ROW_BLOCK, dtype=np.float64)
        for start in range(0, len(earlier), ROW_BLOCK):
            part = earlier[start : start + ROW_BLOCK]
            yield False, part, kernels.cosine_block(self.units32[part], ones[: len(part)], units)


def _prune(ref: Any, col: Any, val: Any, flag: Any) -> tuple[Any, Any, Any, Any]:
    """Keep, per query (``col``), the candidates within twice the margin of its k-th best.

    Every candidate here is already stored, so one more than the margin below the k-th best can
    never make the top k (its exact cosine is below the k others' exact cosines). Sorted by query,
    then approximate cosine descending.
    """
    import numpy as np

    import kernels

    order = np.lexsort((-val, col))
    ref, col, val, flag = ref[order], col[order], val[order], flag[order]
    starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    group = np.cumsum(np.r_[False, col[1:] != col[:-1]])
    rank = np.arange(len(col)) - starts[group]
    kth = np.full(len(starts), -np.inf, dtype=np.float64)
    at_k = rank == SEMANTIC_AUTO_TOP - 1
    kth[group[at_k]] = val[at_k]
    keep = val >= kth[group] - 2 * kernels.EXACT_MARGIN
    return ref[keep], col[keep], val[keep], flag[keep]
