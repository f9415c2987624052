"""Vectors in the engine: embed for writes, keep the vector index current, search it (§3.3, §4.7, §4.9).

Owns the engine side of the hot vector index (architecture §6): the ``VectorIndex`` from
``mnemon.store.vectors`` is opened lazily, caught up after every committed write
(``after_write``), and searched here with the ``kernels`` cosine scan. An unreachable or
misbehaving server never fails a write: the insight is stored with ``embedded: false``.

A store's vectors all come from one model with one dimension, fixed by the first vector written
(``mnemon_meta`` keys ``embedding_model`` / ``embedding_dim``; a Go store without them takes the
dimension of its blobs). A vector from another model or of another length is never mixed in:
``remember`` stores the insight without it and warns on stderr; ``embed --all`` re-embeds.

For recall (and anything else that needs cosines):

- :meth:`VectorMixin.vector_scores` — cosine of a query to *every* active embedded insight,
  as ``(ids, cosines)``;
- :meth:`VectorMixin.vector_search` — the best ``k`` with a floor, ``[(id, cosine)]`` best first,
  ties by id ascending.

Both return nothing when the store has no vectors or the query's length is not the store's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mnemon.engine.core import EngineBase
from mnemon.store import vectors as vector_store

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    from numpy.typing import NDArray

    from mnemon.embed import Embedder
    from mnemon.store.vectors import VectorIndex

# Cosine scan kernel choice (measured on the 2-core box, d = 768, top-20, 2026 run recorded in the
# issue report): with numba already imported the numba scan overtakes numpy at about 30-50k rows;
# importing numba and loading a cached kernel costs about 350-500 ms in a fresh process, which the
# scan only earns back beyond about 2M rows (it saves ~0.17 ms per 1k rows). So a one-shot CLI
# stays on numpy unless something else (recall's beam search) already paid for numba.
NUMBA_WARM_MIN_ROWS = 50_000
NUMBA_COLD_MIN_ROWS = 2_000_000


def _use_numba(rows: int) -> bool:
    import kernels

    return rows >= NUMBA_COLD_MIN_ROWS or (kernels.numba_loaded() and rows >= NUMBA_WARM_MIN_ROWS)


class VectorMixin(EngineBase):
    """Embedding for writes and cosine lookups over the vector index; shared by every pipeline."""

    _vector_index: VectorIndex | None = None
    _pending_vectors: list[tuple[str, NDArray[np.float64]]] | None = None
    _pending_fresh = False  # the pending vectors' rows had none before (embed --all)
    _vector_warned = False

    # --- the store's vector space -------------------------------------------------------------

    def vector_space(self) -> tuple[str | None, int | None]:
        """The store's (model, dimension); dimension None until a first vector exists."""
        meta = vector_store.vector_meta(self.store.conn)
        if meta.dim is not None:
            return meta.model, meta.dim
        return meta.model, self._blob_dim()

    def _blob_dim(self) -> int | None:
        """The length of an existing vector blob (a Go store records no dimension)."""
        from mnemon.store import blob, insights

        conn = self.store.conn
        fmt = self.store.embedding_format
        raw = insights.any_active_blob(conn)
        vector = None if raw is None else blob.decode(raw, fmt)
        return None if vector is None else int(vector.shape[0])

    def vector_mismatch(self, model: str, dim: int) -> str | None:
        """Describe why a ``dim``-long vector from ``model`` does not fit this store, or None."""
        store_model, store_dim = self.vector_space()
        if store_dim is None:
            return None
        if store_dim != dim or (store_model and store_model != model):
            held = f"{store_dim}-dim vectors" + (f" from {store_model}" if store_model else "")
            return f"this store holds {held}, but {model} gives {dim}-dim vectors"
        return None

    # --- embedding for writes -----------------------------------------------------------------

    def embed_for_write(self, text: str) -> NDArray[np.float64] | None:
        """Embed ``text`` if a server is reachable and its vectors fit the store; None otherwise."""
        vector = self.embed_text(text)
        embedder = self._embedder
        if vector is None or embedder is None:
            return None
        mismatch = self.vector_mismatch(embedder.model, int(vector.shape[0]))
        if mismatch is not None:
            if not self._vector_warned:
                self._vector_warned = True
                self._notice(f"mnemon: embedding not stored: {mismatch}; run `mnemon embed --all` to re-embed")
            return None
        return vector

    def write_vector(self, conn: object, insight_id: str, vector: NDArray[np.float64], embedder: Embedder) -> bool:
        """Store ``vector`` inside the caller's transaction; False if it no longer fits the store.

        Re-checked under the write lock: another process may have fixed the store's dimension
        since the vector was computed. The first vector fixes model and dimension.
        """
        if self.vector_mismatch(embedder.model, int(vector.shape[0])) is not None:
            return False
        store_model, store_dim = self.vector_space()
        if store_dim is None or store_model is None:
            vector_store.set_vector_meta(self.store.conn, embedder.model, int(vector.shape[0]))
        vector_store.set_embedding(self.store.conn, insight_id, vector, self.store.embedding_format)
        return True

    # --- the index ------------------------------------------------------------------------------

    def vector_index(self) -> VectorIndex | None:
        """The vector index, current for the committed database state; None if the store has no vectors."""
        model, dim = self.vector_space()
        if dim is None:
            return None
        index = self._vector_index
        if index is None or index.dim != dim or index.header.model != (model or ""):
            index = vector_store.VectorIndex.open(
                self.store.conn, self.settings.db_path, readonly=self.settings.readonly,
                dim=dim, model=model or "", fmt=self.store.embedding_format,
            )  # fmt: skip
            self._vector_index = index
        return index

    def after_write(self) -> None:
        """Catch the index up with the write just committed (if this process has it open)."""
        super().after_write()
        pending, self._pending_vectors = self._pending_vectors or [], None
        fresh, self._pending_fresh = self._pending_fresh, False
        index = self._vector_index
        if index is None:
            return  # the next process that needs vectors catches up from the fingerprint
        model, dim = self.vector_space()
        if dim != index.dim or (model or "") != index.header.model:
            self._vector_index = None  # the store's vector space changed (embed --all)
            return
        index.sync(self.store.conn, pending, fresh=fresh)

    # --- search -------------------------------------------------------------------------------

    def vector_scores(self, query: NDArray[np.float64]) -> tuple[NDArray[np.str_], NDArray[np.float64]]:
        """Return the cosine of ``query`` to every active insight that has a vector.

        Returns ``(ids, cosines)``: ``ids`` a numpy array of ``str`` (insight UUIDs, in index row
        order, which is not meaningful), ``cosines`` float64 aligned with it. Deleted insights
        are never included; an insight without a vector is simply absent (treat its cosine as 0).
        Both are empty when the store has no vectors or ``len(query)`` is not the store's
        dimension. To look cosines up by id: ``dict(zip(ids.tolist(), cosines.tolist()))``.
        A zero query gives cosine 0 everywhere. Cost: one scan of the matrix (about 15 ms per
        100k rows at d = 768), no SQLite row reads when the index is current.
        """
        import numpy as np

        import kernels

        index = self.vector_index()
        if index is None or query.shape != (index.dim,) or not index.rows:
            return np.empty(0, dtype=str), np.empty(0, dtype=np.float64)
        query = np.ascontiguousarray(query, dtype=np.float64)
        scan = kernels.cosine_scores if _use_numba(index.rows) else kernels.cosine_scores_numpy
        active = index.active
        cosines = scan(index.vectors, index.norms, query)[active]
        return _decode_ids(index.ids[active]), cosines

    def vector_scores_aligned(
        self,
        query: NDArray[np.float64],
        row_ids: NDArray[np.bytes_],
        rows_of: Callable[[NDArray[np.bytes_]], NDArray[np.int64]] | None = None,
    ) -> NDArray[np.float64]:
        """Cosine of ``query`` for each id of ``row_ids`` (bytes, e.g. the hot index's ``id_blob``).

        ``rows_of`` maps ids to positions in ``row_ids`` (-1 if absent), e.g. the hot index's
        ``rows_of`` over its persisted id ranks; without it, ``row_ids`` is sorted when needed.

        0.0 where an id has no active vector (or the store none of the query's length). Same
        values as mapping :meth:`vector_scores` by id, without a per-query dictionary or string
        sort: both indexes append rows in rowid order, so row ``r`` of one is nearly always row
        ``r`` of the other; one vectorised comparison settles those, and only the few others
        (re-embedded insights, rows not yet in both) are looked up by id.
        """
        import numpy as np

        import kernels

        out = np.zeros(len(row_ids), dtype=np.float64)
        index = self.vector_index()
        if index is None or query.shape != (index.dim,) or not index.rows or not len(row_ids):
            return out
        query = np.ascontiguousarray(query, dtype=np.float64)
        scan = kernels.cosine_scores if _use_numba(index.rows) else kernels.cosine_scores_numpy
        cosines = scan(index.vectors, index.norms, query)
        active = index.active
        m = min(index.rows, len(row_ids))
        same = np.zeros(index.rows, dtype=np.bool_)
        same[:m] = index.ids[:m] == row_ids[:m]
        aligned = np.flatnonzero(same & active)
        out[aligned] = cosines[aligned]
        rest = np.flatnonzero(active & ~same)
        if len(rest) and rows_of is not None:
            rows = np.asarray(rows_of(index.ids[rest]), dtype=np.int64)
            hit = rows >= 0
            out[rows[hit]] = cosines[rest[hit]]
        elif len(rest):
            order = np.argsort(row_ids, kind="stable")
            sorted_ids = row_ids[order]
            wanted = index.ids[rest]
            pos = np.minimum(np.searchsorted(sorted_ids, wanted), len(row_ids) - 1)
            hit = sorted_ids[pos] == wanted
            out[order[pos[hit]]] = cosines[rest[hit]]
        return out

    def vector_search(
        self, query: NDArray[np.float64], k: int, min_score: float = -math.inf, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """Return up to ``k`` active insights with cosine ≥ ``min_score``: best first, ties id ascending.

        ``exclude`` drops one id (the insight being written). Empty when the store has no
        vectors or ``len(query)`` differs from the store's dimension.
        """
        import numpy as np

        index = self.vector_index()
        if index is None or k <= 0 or query.shape != (index.dim,) or not index.rows:
            return []
        query = np.ascontiguousarray(query, dtype=np.float64)
        mask = index.active
        if exclude is not None:
            mask = mask & (index.ids != exclude.encode("utf-8"))
        while True:
            hits = _search(index, query, k, min_score, mask)
            # Never trust the index blindly: a concurrent process may have forgotten a hit since
            # the index was last synced (e.g. while this process waited for the write lock).
            gone = {hit[0] for hit in hits} - vector_store.active_ids(self.store.conn, [hit[0] for hit in hits])
            if not gone:
                return hits
            mask = mask & ~np.isin(index.ids, np.array([g.encode("utf-8") for g in gone]))

    def vector_cosines(self, query: NDArray[np.float64], ids: list[str]) -> dict[str, float]:
        """Cosine of ``query`` to each of ``ids`` that is active and has a vector (others absent)."""
        import numpy as np

        index = self.vector_index()
        if index is None or not ids or query.shape != (index.dim,) or not index.rows:
            return {}
        wanted = np.array([i.encode("utf-8") for i in ids])
        rows = np.flatnonzero(index.active & np.isin(index.ids, wanted))
        qnorm = float(np.sqrt(query @ query))
        out: dict[str, float] = {}
        live = vector_store.active_ids(self.store.conn, [index.id_at(int(r)) for r in rows])
        for row in rows:
            insight_id = index.id_at(int(row))
            denom = float(index.norms[row]) * qnorm
            if insight_id in live:
                out[insight_id] = float(index.vectors[row] @ query) / denom if denom else 0.0
        return out

    def cosine_neighbours(
        self, vector: NDArray[np.float64], minimum: float, limit: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """Active insights with cosine ≥ ``minimum`` to ``vector``, best first (ties: id asc)."""
        return self.vector_search(vector, limit, minimum, exclude)


def _search(
    index: VectorIndex, query: NDArray[np.float64], k: int, min_score: float, mask: NDArray[np.bool_]
) -> list[tuple[str, float]]:
    """Top ``k`` rows of ``mask`` by cosine ≥ ``min_score``, ties by id ascending."""
    import numpy as np

    import kernels

    n = index.rows
    numba = _use_numba(n)
    topk = kernels.cosine_topk if numba else kernels.cosine_topk_numpy
    # The kernel breaks ties by row; ask for one extra row to see whether a tie straddles the cut.
    rows, scores = topk(index.vectors, index.norms, query, k + 1, np.zeros(n, dtype=np.int32), min_score, mask)
    if len(rows) > k and scores[k] == scores[k - 1]:
        # Take every row tied with the k-th, so ids decide who is in.
        scan = kernels.cosine_scores if numba else kernels.cosine_scores_numpy
        every = scan(index.vectors, index.norms, query)
        rows = np.flatnonzero(mask & (every >= scores[k - 1]) & (every >= min_score))
        scores = every[rows]
    hits = [(index.id_at(int(r)), float(s)) for r, s in zip(rows, scores)]
    hits.sort(key=lambda hit: (-hit[1], hit[0]))
    return hits[:k]


def _decode_ids(raw: NDArray[np.bytes_]) -> NDArray[np.str_]:
    import numpy as np

    try:
        return raw.astype(str)  # ASCII (every UUID): a single C loop
    except UnicodeDecodeError:
        decoded: NDArray[np.str_] = np.char.decode(raw, "utf-8")
        return decoded
