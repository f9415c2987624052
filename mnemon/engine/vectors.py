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

- :meth:`Vectors.vector_scores` — cosine of a query to *every* active embedded insight,
  as ``(ids, cosines)``;
- :meth:`Vectors.vector_search` — the best ``k`` with a floor, ``[(id, cosine)]`` best first,
  ties by id ascending.

Both return nothing when the store has no vectors or the query's length is not the store's.

From :data:`CODED_MIN_ROWS` vector rows on, both scan the index's int8 codes first
(``kernels.quantized``) and compute exact cosines only for the rows a proven error bound cannot rule
out; recall gets :meth:`Vectors.vector_similarity_bounded` (cosines with their bounds, made
exact on demand by the pipeline) instead. Every answer equals the exact scan's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mnemon.store import vectors as vector_store

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    from numpy.typing import NDArray

    from kernels.beam import ExactRead
    from mnemon.embed import Embedder
    from mnemon.engine.core import EngineBase
    from mnemon.store.vectors import VectorIndex

# Cosine scan kernel choice (measured on the 2-core box, d = 768, top-20, 2026 run recorded in the
# issue report): with numba already imported the numba scan overtakes numpy at about 30-50k rows;
# importing numba and loading a cached kernel costs about 350-500 ms in a fresh process, which the
# scan only earns back beyond about 2M rows (it saves ~0.17 ms per 1k rows). So a one-shot CLI
# stays on numpy unless something else (recall's beam search) already paid for numba.
NUMBA_WARM_MIN_ROWS = 50_000
NUMBA_COLD_MIN_ROWS = 2_000_000
# The bounded int8 first pass (kernels.quantized) reads an eighth of the bytes and faults in an
# eighth of the pages of the exact float64 scan (about 0.9 s per 1M rows at d = 768, plus ~0.8 s
# of page faults in a fresh process), then scores only its contenders exactly. Measured at 1M x 768:
# the numpy einsum pass ~0.34 s, the numba one ~0.1 s on two threads, but importing numba costs a
# fresh process ~0.55 s, so the numba pass runs only where numba is loaded already. Below this many
# rows one exact scan is cheap enough (and has nothing to refine).
CODED_MIN_ROWS = 100_000


def _use_numba(rows: int) -> bool:
    import kernels

    return rows >= NUMBA_COLD_MIN_ROWS or (kernels.numba_loaded() and rows >= NUMBA_WARM_MIN_ROWS)


def _use_codes(index: VectorIndex) -> bool:
    return index.coded and index.rows >= CODED_MIN_ROWS


def _code_dots_cached(index: VectorIndex, dots: Callable[..., NDArray[np.int32]], q: NDArray[np.int16]) -> NDArray[np.int32]:
    """The int8 dot products of every row with the coded query ``q``, reusing the last call's.

    remember scans twice with one vector (its semantic edges inside the transaction, its
    candidates after): the second call scores only the rows written since. Valid while the
    index's ``content_key`` holds (rows are append-only until then).
    """
    import numpy as np

    cached = getattr(index, "_dots_cache", None)
    key = (index.content_key, q.tobytes())
    if cached is not None and cached[0] == key and len(cached[1]) <= index.rows:
        done = cached[1]
        if len(done) == index.rows:
            return done
        out = np.concatenate([done, dots(np.ascontiguousarray(index.codes[len(done) :]), q)])
    else:
        out = dots(index.codes, q)
    index._dots_cache = (key, out)  # type: ignore[attr-defined]
    return out


def _coded_kernels(
    index: VectorIndex, query: NDArray[np.float64]
) -> tuple[Callable[..., NDArray[np.int32]], Callable[[NDArray[np.integer]], NDArray[np.float64]]]:
    """(code dots, exact cosines of given rows) of one path: the exact values equal that path's
    full scan (numba's row kernel, or numpy's einsum)."""
    from kernels import quantized

    numba = _use_numba(index.rows)
    exact = quantized.exact_scorer(index.vectors, index.norms, query, numba=numba)
    if numba:
        return quantized.code_dots, exact
    import functools
    import os

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return functools.partial(quantized.code_dots_numpy, threads=threads), exact


class Vectors:
    """The vector side of one engine: embedding for writes, the vector index kept current, cosine search."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx
        self._vector_index: VectorIndex | None = None
        self._pending_vectors: list[tuple[str, NDArray[np.float64]]] | None = None
        self._pending_fresh = False  # the pending vectors' rows had none before (embed --all)
        self._vector_warned = False

    # --- the store's vector space -------------------------------------------------------------

    def vector_space(self) -> tuple[str | None, int | None]:
        """The store's (model, dimension); dimension None until a first vector exists."""
        meta = vector_store.vector_meta(self.ctx.store.conn)
        if meta.dim is not None:
            return meta.model, meta.dim
        return meta.model, self._blob_dim()

    def _blob_dim(self) -> int | None:
        """The length of an existing vector blob (a Go store records no dimension)."""
        from mnemon.store import blob, insights

        conn = self.ctx.store.conn
        fmt = self.ctx.store.embedding_format
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
        vector = self.ctx.embed_text(text)
        embedder = self.ctx.current_embedder
        if vector is None or embedder is None:
            return None
        mismatch = self.vector_mismatch(embedder.model, int(vector.shape[0]))
        if mismatch is not None:
            if not self._vector_warned:
                self._vector_warned = True
                self.ctx.notice(f"mnemon: embedding not stored: {mismatch}; run `mnemon embed --all` to re-embed")
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
            vector_store.set_vector_meta(self.ctx.store.conn, embedder.model, int(vector.shape[0]))
            if store_dim is None:  # the store's first vector: every labelled memory is composed from now on
                record_passages(self.ctx.store.conn, embedder)
        vector_store.set_embedding(self.ctx.store.conn, insight_id, vector, self.ctx.store.embedding_format)
        return True

    def store_vector(self, conn: object, insight_id: str, vector: NDArray[np.float64]) -> bool:
        """Store the blob in a write's transaction (the embedder that made it must still answer);
        the index catches up in ``after_write``."""
        embedder = self.ctx.embedder()
        return embedder is not None and self.write_vector(conn, insight_id, vector, embedder)

    # --- the index ------------------------------------------------------------------------------

    def vector_index(self) -> VectorIndex | None:
        """The vector index, current for the committed database state; None if the store has no vectors."""
        model, dim = self.vector_space()
        if dim is None:
            return None
        index = self._vector_index
        if index is None or index.dim != dim or index.header.model != (model or ""):
            index = vector_store.VectorIndex.open(
                self.ctx.store.conn, self.ctx.settings.db_path, readonly=self.ctx.settings.readonly,
                dim=dim, model=model or "", fmt=self.ctx.store.embedding_format,
            )  # fmt: skip
            self._vector_index = index
        return index

    def after_write(self) -> None:
        """Catch the index up with the write just committed (if this process has it open)."""
        pending, self._pending_vectors = self._pending_vectors or [], None
        fresh, self._pending_fresh = self._pending_fresh, False
        index = self._vector_index
        if index is None:
            return  # the next process that needs vectors catches up from the fingerprint
        model, dim = self.vector_space()
        if dim != index.dim or (model or "") != index.header.model:
            self._vector_index = None  # the store's vector space changed (embed --all)
            return
        index.sync(self.ctx.store.conn, pending, fresh=fresh)

    def forget_index(self) -> None:
        """Drop the vector index this process holds and what it was to apply (its catch-up failed): the next
        use opens the files again and catches them up from the database."""
        self._vector_index = None
        self._pending_vectors, self._pending_fresh = None, False

    def track(self, stored: list[tuple[str, NDArray[np.float64]]], *, fresh: bool = False) -> None:
        """Have the next ``after_write`` apply ``stored`` (a batch just committed) as a delta.

        ``fresh``: none of the rows had a vector before the write, so none replaces an indexed row.
        """
        if self._vector_index is None:
            self.vector_index()  # the first open derives every row, this batch included
        else:
            self._pending_vectors = stored
            self._pending_fresh = fresh

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
        hot_base: tuple[str, int] | None = None,
    ) -> NDArray[np.float64]:
        """Cosine of ``query`` for each id of ``row_ids`` (bytes, e.g. the hot index's ``id_blob``).

        ``rows_of`` maps ids to positions in ``row_ids`` (-1 if absent), e.g. the hot index's
        ``rows_of`` over its persisted id ranks; without it, ``row_ids`` is sorted when needed.
        ``hot_base``: the hot index's ``(build_id, base_n)`` when ``row_ids`` are its rows (the
        hot-row hint's certificate, see ``_aligned_rows``).

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
        rows, vec_rows = _aligned_rows(index, row_ids, rows_of, hot_base)
        out[rows] = cosines[vec_rows]
        return out

    def vector_similarity_bounded(
        self,
        query: NDArray[np.float64],
        row_ids: NDArray[np.bytes_],
        rows_of: Callable[[NDArray[np.bytes_]], NDArray[np.int64]] | None = None,
        hot_base: tuple[str, int] | None = None,
    ) -> tuple[NDArray[np.float64], SimilarityBounds] | None:
        """Recall's similarity for a large coded index: bounded cosines plus a way to make rows exact.

        Returns ``(values, bounds)`` aligned with ``row_ids`` as :meth:`vector_scores_aligned`,
        except that ``values`` holds the int8 first pass's cosine wherever ``bounds.slack`` is
        positive (the exact cosine is within that slack); ``bounds.refine(values, rows)`` writes the
        exact cosines of ``rows`` (bit-equal to the exact scan's) and zeroes their slack. None when
        the index is small or uncoded: use :meth:`vector_scores_aligned`.
        """
        import numpy as np

        from kernels import quantized

        index = self.vector_index()
        if index is None or query.shape != (index.dim,) or not index.rows or not len(row_ids) or not _use_codes(index):
            return None
        query = np.ascontiguousarray(query, dtype=np.float64)
        coded = quantized.code_query(query)
        n = len(row_ids)
        values = np.zeros(n, dtype=np.float64)
        slack = np.zeros(n, dtype=np.float64)
        vec_of_row = np.full(n, -1, dtype=np.int64)
        dots, exact = _coded_kernels(index, query)
        if coded is None:  # a zero query: every cosine is exactly 0
            return values, SimilarityBounds(exact, vec_of_row, slack)
        codes, scale, error = coded
        rows, vec_rows = _aligned_rows(index, row_ids, rows_of, hot_base)
        approx = quantized.approx_cosines(_code_dots_cached(index, dots, codes), index.qmult, scale)
        values[rows] = approx[vec_rows]
        slack[rows] = quantized.slack(index.qresid[vec_rows], index.qmult[vec_rows], error)
        vec_of_row[rows] = vec_rows
        return values, SimilarityBounds(exact, vec_of_row, slack)

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
            gone = {hit[0] for hit in hits} - vector_store.active_ids(self.ctx.store.conn, [hit[0] for hit in hits])
            if not gone:
                return hits
            mask = mask & ~np.isin(index.ids, np.array([g.encode("utf-8") for g in gone]))

    def vector_cosines(self, query: NDArray[np.float64], ids: list[str]) -> dict[str, float]:
        """Cosine of ``query`` to each of ``ids`` that is active and has a vector (others absent)."""
        import numpy as np

        index = self.vector_index()
        if index is None or not ids or query.shape != (index.dim,) or not index.rows:
            return {}
        rows = _rows_of_ids(index, self.ctx.store.conn, ids)
        qnorm = float(np.sqrt(query @ query))
        out: dict[str, float] = {}
        live = vector_store.active_ids(self.ctx.store.conn, [index.id_at(int(r)) for r in rows])
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


def passages_version(embedder: Embedder) -> int:
    """How ``embedder`` composes a labelled memory's vector (``mnemon.embed.passages.VERSION``); 0: it
    embeds every memory as written (the server protocols)."""
    return int(getattr(embedder, "passages_version", 0))


def composes(embedder: Embedder | None, content: str) -> bool:
    """Whether ``embedder`` composes ``content``'s vector from its labelled sentences
    (``mnemon.embed.passages``): its comparisons with other memories then read the model's composed
    scale (records.SimilarityScale.for_vector)."""
    from mnemon.embed import passages

    return embedder is not None and passages_version(embedder) > 0 and passages.labelled_sentences(content) is not None


def record_passages(conn: object, embedder: Embedder) -> None:
    """Record that the store's labelled memories are composed as ``embedder`` composes them
    (``mnemon.embed.passages``), when it does: ``embed --all`` then has nothing to re-embed."""
    version = passages_version(embedder)
    if version:
        vector_store.set_passages_version(conn, version)  # type: ignore[arg-type]


def _search(
    index: VectorIndex, query: NDArray[np.float64], k: int, min_score: float, mask: NDArray[np.bool_]
) -> list[tuple[str, float]]:
    """Top ``k`` rows of ``mask`` by cosine ≥ ``min_score``, ties by id ascending."""
    import numpy as np

    import kernels

    n = index.rows
    if _use_codes(index):
        coded = _search_coded(index, query, k, min_score, mask)
        if coded is not None:
            return coded
    numba = _use_numba(n)
    topk = kernels.cosine_topk if numba else kernels.cosine_topk_numpy
    # The kernel breaks ties by row; ask for one extra row to see whether a tie straddles the cut.
    rows: NDArray[np.integer]  # the kernel's int32 rows, or flatnonzero's intp ones below
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


# Up to this many ids are found by their SQLite rowids (one int64 comparison over the rows each);
# more by one string set test over every row's id (about 0.3 s at 1M rows).
ROWID_LOOKUP_MAX = 64


def _rows_of_ids(index: VectorIndex, conn: object, ids: list[str]) -> NDArray[np.int64]:
    """The active vector rows holding ``ids`` (ascending; ids without one are left out)."""
    import numpy as np

    if len(ids) > ROWID_LOOKUP_MAX:
        wanted = np.array([i.encode("utf-8") for i in ids])
        return np.flatnonzero(index.active & np.isin(index.ids, wanted))
    rowids = index.rowids
    found: list[int] = []
    for insight_id in dict.fromkeys(ids):
        rowid = vector_store.rowid_of(conn, insight_id)  # type: ignore[arg-type]
        if rowid is None:
            continue
        key = insight_id.encode("utf-8")
        # a rowid is a hint (VACUUM renumbers): the id decides, and a miss falls back to the ids
        hits = [int(r) for r in np.flatnonzero(rowids == rowid) if index.active[r] and index.ids[r] == key]
        if not hits:
            hits = [int(r) for r in np.flatnonzero(index.active & (index.ids == key))]
        found.extend(hits)
    return np.array(sorted(found), dtype=np.int64)


class SimilarityBounds:
    """The slack of a bounded similarity array, and the exact cosines on demand (recall's pipeline).

    ``slack[r]``: how far ``values[r]`` may be from row ``r``'s exact cosine (0: exact already).
    """

    def __init__(
        self,
        exact: Callable[[NDArray[np.integer]], NDArray[np.float64]],
        vec_of_row: NDArray[np.int64],
        slack: NDArray[np.float64],
    ) -> None:
        self._exact = exact  # exact cosines of vector rows (kernels.quantized.exact_scorer)
        self._vec_of_row = vec_of_row
        self.slack = slack

    def restrict(self, keep: NDArray[np.bool_]) -> None:
        """Rows outside ``keep`` were set to exactly 0 by the caller (out of scope): no slack there."""
        self.slack[~keep] = 0.0

    def exact_read(self) -> ExactRead | None:
        """What ``kernels.beam_search`` needs to make rows exact as it reads them, with the same values
        :meth:`refine` writes: only when the exact cosines come from numba's row kernel (the numpy
        path's einsum may differ in the last bit); None otherwise."""
        from kernels.beam import ExactRead
        from kernels.quantized import ExactScorer

        e = self._exact
        if not isinstance(e, ExactScorer) or not e.numba:
            return None
        return ExactRead(e.vectors, e.norms, e.query, e.query_norm, self._vec_of_row, self.slack)

    def refine(self, values: NDArray[np.float64], rows: NDArray[np.integer]) -> None:
        """Write the exact cosines of ``rows`` into ``values`` (rows already exact are skipped;
        a row listed twice only gets the same value twice)."""
        import numpy as np

        rows = np.asarray(rows)
        rows = rows[self.slack[rows] > 0.0]
        if rows.size:
            values[rows] = self._exact(self._vec_of_row[rows])
            self.slack[rows] = 0.0


# A hot-row hint is rewritten when a lookup missed at least this many rows (or a 64th of them):
# below that, looking the misses up by id costs less than writing the hint.
HINT_MIN_MISSES = 1024


def _aligned_rows(
    index: VectorIndex,
    row_ids: NDArray[np.bytes_],
    rows_of: Callable[[NDArray[np.bytes_]], NDArray[np.int64]] | None,
    hot_base: tuple[str, int] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(rows, vec_rows)``: each active vector row's position in ``row_ids``, where it has one.

    Both indexes append rows in rowid order, so a vector row's position is usually its own row
    number shifted by a constant; where the orders drifted apart (``embed --all`` embeds by
    importance, re-embeds and forgets shift rows), the store's hot-row hint holds the last known
    positions. Every guess is checked against the ids in one vectorised comparison, and only
    the rows it misses are looked up by id (about 0.5 s for a million ids); the positions found
    then become the new hint when there were many. ``hot_base`` (the hot index's base build id and
    row count) lets a certified hint skip the comparison for the rows it vouches for, and lets
    a call that compared many ids certify the hint it writes (``store.vectors.HintCertificate``).
    """
    import numpy as np

    live = np.flatnonzero(index.active)
    n = len(row_ids)
    guess = _guess(vector_store.read_hot_rows_hint(index), index.rows, n)[live]
    inside = (guess >= 0) & (guess < n)
    match = np.zeros(len(live), dtype=np.bool_)
    certified = _certified_rows(index, hot_base)
    if certified:
        # rows the hint's certificate vouches for, inside the hot base it names: no id compared
        match[:] = (live < certified) & inside & (guess < hot_base[1])  # type: ignore[index]
        check = np.flatnonzero(inside & ~match)
        match[check] = row_ids[guess[check]] == index.ids[live[check]]
        checked = len(check)
    elif inside.all() and len(live) == index.rows:  # every row live: compare in place, no gather
        match[:] = row_ids[guess] == index.ids
        checked = len(live)
    else:
        match[inside] = row_ids[guess[inside]] == index.ids[live[inside]]
        checked = int(inside.sum())
    certify = rows_of is not None and hot_base is not None and checked >= CERTIFY_MIN_CHECKED
    if match.all():
        if certify:
            _write_hint(index, guess, live, hot_base)
        return guess, live
    rest = live[~match]
    if rows_of is not None:
        found = _tail_lookup(row_ids, index.ids[rest], n) if len(rest) <= TAIL_MAX_MISSES else np.full(len(rest), -1)
        unsure = found < 0
        if unsure.any():  # rows_of's first call in a process sorts the base's ids (0.4 s at 1M)
            found[unsure] = np.asarray(rows_of(index.ids[rest[unsure]]), dtype=np.int64)
    else:
        order = np.argsort(row_ids, kind="stable")
        sorted_ids = row_ids[order]
        wanted = index.ids[rest]
        pos = np.minimum(np.searchsorted(sorted_ids, wanted), n - 1)
        found = np.where(sorted_ids[pos] == wanted, order[pos], -1)
    hit = found >= 0
    rows = np.concatenate([guess[match], found[hit]])
    vec_rows = np.concatenate([live[match], rest[hit]])
    if certify or (rows_of is not None and len(rest) >= max(HINT_MIN_MISSES, index.rows // 64)):
        _write_hint(index, rows, vec_rows, hot_base)
    return rows, vec_rows


# A hint is rewritten with a certificate once a call compared this many ids (about 5 ms of gathers
# and comparisons at 100k): below it the comparison costs less than the 8-bytes-a-row rewrite.
CERTIFY_MIN_CHECKED = 65_536


def _certified_rows(index: VectorIndex, hot_base: tuple[str, int] | None) -> int:
    """How many leading vector rows the hint's certificate vouches for against ``hot_base``
    (the hot index's base build id and row count); 0 when it names other builds, or none."""
    cert = vector_store.read_hint_certificate(index)
    build = index.header.build_id
    if cert is None or hot_base is None or not build or cert.vec_build != build:
        return 0
    if (cert.hot_base, cert.hot_base_n) != hot_base:
        return 0
    return min(cert.vec_rows, index.rows)


def _write_hint(
    index: VectorIndex, rows: NDArray[np.int64], vec_rows: NDArray[np.int64], hot_base: tuple[str, int] | None
) -> None:
    """The positions just checked (or found by id) as the new hint; certified when the two builds are known."""
    import numpy as np

    hint = np.full(index.rows, -1, dtype=np.int64)
    hint[vec_rows] = rows
    cert = None
    if hot_base is not None and index.header.build_id:
        cert = vector_store.HintCertificate(hot_base[0], hot_base[1], index.header.build_id, index.rows)
    vector_store.write_hot_rows_hint(index, hint, cert)


TAIL_WINDOW = 1024  # hot rows beyond twice the misses that the tail look-up also reads
TAIL_MAX_MISSES = 2048  # more misses than this go straight to the index's own (hashed) look-up


def _tail_lookup(row_ids: NDArray[np.bytes_], wanted: NDArray[np.bytes_], n: int) -> NDArray[np.int64]:
    """Positions of ``wanted`` among the last rows of ``row_ids`` (-1 where not there).

    The vector rows a guess misses are nearly always the newest (written since the hint, with a
    few rows between them that have no vector): a dictionary over the hot index's last rows finds
    them without the whole-index look-up.
    """
    import numpy as np

    lo = max(0, n - 2 * len(wanted) - TAIL_WINDOW)
    tail = row_ids[np.arange(lo, n, dtype=np.int64)]
    where = {bytes(v): lo + i for i, v in enumerate(tail.tolist())}
    return np.array([where.get(bytes(w), -1) for w in wanted.tolist()], dtype=np.int64)


def _guess(hint: NDArray[np.int64] | None, rows: int, hot_rows: int) -> NDArray[np.int64]:
    """Each vector row's likely hot row: the hint, and past its end the tails aligned.

    Rows written since the hint (or all rows, without one) were appended to both indexes in rowid
    order, so the last vector row most likely is the last hot row, and so on backwards.
    """
    import numpy as np

    m = 0 if hint is None else min(rows, len(hint))
    guess = np.arange(rows, dtype=np.int64)
    if m:
        guess[:m] = hint[:m]  # type: ignore[index]
        guess[m:] += hot_rows - rows
    return guess


def _search_coded(
    index: VectorIndex, query: NDArray[np.float64], k: int, min_score: float, mask: NDArray[np.bool_]
) -> list[tuple[str, float]] | None:
    """:func:`_search` through the int8 codes: the same hits, exact cosines of the contenders only.

    A row whose interval tops neither ``min_score`` nor the k-th best lower bound cannot be a hit
    (its exact cosine is below both), so only the others are scored exactly. None for a zero query.
    """
    import numpy as np

    from kernels import quantized

    coded = quantized.code_query(query)
    if coded is None:
        return None
    codes, scale, error = coded
    dots, exact_rows = _coded_kernels(index, query)
    approx = quantized.approx_cosines(_code_dots_cached(index, dots, codes), index.qmult, scale)
    # One bound for every row (the largest slack) instead of each row's: a few more contenders, one
    # pass fewer over a million rows.
    widest = float(quantized.slack_bound(float(index.qresid.max()), error))
    contenders = np.flatnonzero(mask & (approx >= min_score - widest))
    if contenders.size > k:
        near = approx[contenders]
        kth_lower = np.partition(near, contenders.size - k)[contenders.size - k] - widest
        contenders = contenders[near + widest >= kth_lower]
    exact = exact_rows(contenders)
    keep = exact >= min_score
    hits = [(index.id_at(int(r)), float(s)) for r, s in zip(contenders[keep], exact[keep])]
    hits.sort(key=lambda hit: (-hit[1], hit[0]))
    return hits[:k]


def _decode_ids(raw: NDArray[np.bytes_]) -> NDArray[np.str_]:
    import numpy as np

    try:
        return raw.astype(str)  # ASCII (every UUID): a single C loop
    except UnicodeDecodeError:
        decoded: NDArray[np.str_] = np.char.decode(raw, "utf-8")
        return decoded
