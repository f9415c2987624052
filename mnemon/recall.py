"""The smart recall pipeline over arrays (contract §4.10 with Decisions 1, 2, 12 and 14).

anchors (keyword BM25, vector, entity, recency for WHEN) → RRF (k = 60) normalised by the max →
per-anchor beam search with the intent's parameters and edge weights (ties: the later row) →
rerank with the one weight table of Decision 1 → directional neighbour expansion over the
temporal backbone (Decision 14; a neighbour lends its own signals in the lift table) → subject
agreement (records.SUBJECT_MISMATCH_FACTOR_*) → ``supersedes`` demotion → ordering (score,
importance, created_at desc, id asc) → truncation → WHY causal reorder (Kahn) →
``sparse_results`` hint.

Pure: the engine fetches every array (scope mask, BM25 scores, cosine similarities, entity
matches, edge CSR, tie-break ranks) and passes them in; this module does no I/O, reads no clock
and knows no SQL. Kernels are called through ``kernels`` with the numba or numpy path chosen by
the store size (:data:`NUMBA_MIN_ROWS`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from mnemon.records import (
    CONTRACT_SIMILARITY,
    ANCHOR_TOP_K,
    BACKBONE_COHERENT,
    BACKBONE_UNRELATED,
    BEAM_PARAMS,
    EDGE_TYPES,
    INTENT_EDGE_WEIGHTS,
    LAMBDA_SEMANTIC,
    LAMBDA_STRUCTURAL,
    NEIGHBOUR_EXPANSION_EMBEDDED,
    NEIGHBOUR_EXPANSION_TOKENS,
    NEIGHBOUR_LIFT_WEIGHTS_EMBEDDED,
    NEIGHBOUR_BRIDGE_SHORTER,
    NEIGHBOUR_LIFT_WEIGHTS_TOKENS,
    RERANK_WEIGHTS_EMBEDDED,
    RERANK_WEIGHTS_TOKENS,
    RRF_K,
    SESSION_PRIOR_WEIGHT,
    SUBJECT_MISMATCH_FACTOR_EMBEDDED,
    SUBJECT_MISMATCH_FACTOR_TOKENS,
    SUPERSEDED_FACTOR,
    Intent,
    SimilarityScale,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from kernels.beam import ExactRead

# The numba kernels run only where they pay for themselves in this process. Measured on the 2-core
# box (bench/recall_latency.py store, in-process, warm): on 10k insights x 34 edges the numpy beam
# search plus BM25 take about 90 ms per query, the numba path about 50 ms, but importing numba and
# loading the cached kernels costs about 360 ms per process (targets.md: 250 + 110 ms). The beam's
# cost is bounded by anchors x budget (at most 80 x 500 transitions), not by the store size, so a
# one-shot CLI process never earns the import back below about a million rows; a long-lived
# process (MCP server) that has numba loaded already uses it from the first query. Re-measured at
# 1M insights x 21M edge rows (whole CLI process, paired runs, load 4): the numpy path 0.78 s, the
# numba path 1.20 s; so a one-shot process keeps the numpy kernels at every store size measured.
NUMBA_MIN_ROWS = 10_000_000


def use_numba(n_rows: int) -> bool:
    """Whether the numba kernels are worth it for a store of ``n_rows`` rows in this process."""
    import kernels

    return n_rows >= NUMBA_MIN_ROWS or kernels.numba_loaded()


class Bounds(Protocol):
    """Bounded similarities (a large store's int8 first pass, ``engine.vectors.SimilarityBounds``).

    ``similarity[r]`` is within ``slack[r]`` of row ``r``'s exact cosine; ``refine`` writes the
    exact cosines of some rows into the similarity array and zeroes their slack. The pipeline
    refines every row whose similarity can decide anything (the vector anchors' contenders, the
    rows the beam reads, the reranked candidates), so its result equals the exact scan's.
    """

    slack: np.ndarray

    def refine(self, values: np.ndarray, rows: np.ndarray) -> None: ...

    def exact_read(self) -> ExactRead | None:
        """What the numba beam search needs to make rows exact as it reads them (the values
        ``refine`` writes), or None where only ``refine`` can."""
        ...


VIA_NEIGHBOR = "neighbor"
_EDGE_TYPE_CODE = {name: code for code, name in enumerate(EDGE_TYPES)}


@dataclass(frozen=True, slots=True)
class RecallArrays:
    """Everything the pipeline reads, aligned by row (n rows)."""

    scope: np.ndarray  # bool (n,): active and inside --cat/--source
    bm25: np.ndarray  # float64 (n,): BM25 of the query, 0 outside scope
    similarity: np.ndarray | None  # float64 (n,): cosine with the query; None without embeddings
    entity_overlap: np.ndarray  # int32 (n,): distinct query entities the row carries
    query_entity_count: int
    importance: np.ndarray  # int8 (n,)
    created_rank: np.ndarray  # int32 (n,): larger = newer (equal created_at ⇒ equal rank)
    id_rank: np.ndarray  # int32 (n,): id ascending order
    csr_ptr: np.ndarray  # int64 (n+1,): both directions of every edge row
    csr_nbr: np.ndarray  # int32
    csr_weight: np.ndarray  # float64
    csr_type: np.ndarray  # int8 codes into records.EDGE_TYPES
    csr_out: np.ndarray  # bool: the entry is listed at the edge's source
    superseded: np.ndarray  # bool (n,): some supersedes edge targets the row
    prev: np.ndarray  # int32 (n,): temporal-backbone predecessor, -1 none
    next: np.ndarray  # int32 (n,): temporal-backbone successor, -1 none
    # Edge rows written since the csr_* arrays were built, as their own CSR over all n rows (the
    # csr_* arrays then cover only their first rows); None when csr_* hold every edge row.
    edge_delta: EdgeDelta | None = None
    # Set when ``similarity`` is bounded rather than exact (see Bounds); None: exact everywhere.
    similarity_bounds: Bounds | None = None
    # The query embedding model's scale: its anchor floor and the similarity signal's floor
    # (records.similarity_scale); the contract's for every model not calibrated on its own.
    similarity_scale: SimilarityScale = CONTRACT_SIMILARITY
    # int32 (n,): each row's length in BM25 terms, and their mean in scope (BM25's avgdl): a short
    # backbone neighbour bridges the lift (records.NEIGHBOUR_BRIDGE_SHORTER). None: no bridging.
    doc_len: np.ndarray | None = None
    mean_doc_len: float = 0.0
    # How far the query is a whole dialogue turn or prompt rather than a question, 0 to 1
    # (engine.retrieve.long_query_share): that share of the graph signal's weight goes to the keyword
    # signal (_long_query_weights); the session prior keeps the rest of its weight (none at 1).
    long_query: float = 0.0
    # The creation day (bytes, "YYYY-MM-DD") of each of some rows, read at the candidates only: a
    # row gains its session's best match (records.SESSION_PRIOR_WEIGHT). None: no session prior.
    created_day: Callable[[np.ndarray], np.ndarray] | None = None
    # bool (n,): the rows whose first term is a frequent proper name the query writes (engine.retrieve,
    # records.SUBJECT_MISMATCH_FACTOR_*); the other candidates' scores are scaled down. None: the query names none.
    subject: np.ndarray | None = None
    # The share of the backbone neighbour lift the store's backbone earns (backbone_lift_share): 1 where
    # consecutive memories are about the same thing (a conversation), 0 where they are separate events.
    backbone_share: float = 1.0
    # The exact largest cosine in scope once _query_scale has read it (_best_similarity), so that the
    # signal's span reads the same value instead of a second pass over the scope.
    best_similarity: float | None = None


@dataclass(frozen=True, slots=True)
class EdgeDelta:
    """A second, small edge CSR read beside the big one (the hot index's delta, not merged in)."""

    ptr: np.ndarray  # int64 (n+1,)
    nbr: np.ndarray  # int32
    weight: np.ndarray  # float64
    type: np.ndarray  # int8
    out: np.ndarray  # bool


def incident(a: RecallArrays, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row ``r``'s CSR entries (neighbour, type code, out flag): the big CSR's, then the delta's."""
    import numpy as np

    nb = a.csr_ptr.shape[0] - 1
    lo, hi = (int(a.csr_ptr[r]), int(a.csr_ptr[r + 1])) if r < nb else (0, 0)
    parts = [(a.csr_nbr[lo:hi], a.csr_type[lo:hi], a.csr_out[lo:hi])]
    d = a.edge_delta
    if d is not None and int(d.ptr[r + 1]) > int(d.ptr[r]):
        dlo, dhi = int(d.ptr[r]), int(d.ptr[r + 1])
        parts.append((d.nbr[dlo:dhi], d.type[dlo:dhi], d.out[dlo:dhi]))
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Hit:
    row: int
    score: float
    via: str
    keyword: float
    entity: float
    similarity: float
    graph: float
    superseded: bool


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    hits: list[Hit]
    anchor_count: int
    traversed: int
    hint: str | None


def _top(scores: np.ndarray, eligible: np.ndarray, a: RecallArrays, k: int) -> np.ndarray:
    """Top ``k`` eligible rows by score desc, then created_at desc, id asc (anchor ranking)."""
    import numpy as np

    rows = np.flatnonzero(eligible)
    if rows.size > k:
        s = scores[rows]
        kth = np.partition(s, rows.size - k)[rows.size - k]
        rows = rows[s >= kth]
    keys = (a.id_rank[rows], -a.created_rank[rows].astype(np.int64), -scores[rows])
    return rows[np.lexsort(keys)][:k]


def _vector_top(a: RecallArrays) -> np.ndarray:
    """The vector anchors: top ``ANCHOR_TOP_K`` rows with similarity above the floor.

    With bounds, only rows whose interval can reach the floor and the k-th best lower bound are
    made exact first: any other row's exact cosine is below both, so the exact top k is the same.
    """
    import numpy as np

    sim, bounds = a.similarity, a.similarity_bounds
    assert sim is not None
    floor = a.similarity_scale.anchor_floor()
    if bounds is None:
        return _top(sim, a.scope & (sim > floor), a, ANCHOR_TOP_K)
    upper = sim + bounds.slack
    contenders = np.flatnonzero(a.scope & (upper > floor))
    if contenders.size > ANCHOR_TOP_K:
        lower = sim[contenders] - bounds.slack[contenders]
        kth_lower = np.partition(lower, contenders.size - ANCHOR_TOP_K)[contenders.size - ANCHOR_TOP_K]
        contenders = contenders[upper[contenders] >= kth_lower]
    bounds.refine(sim, contenders)
    eligible = np.zeros(sim.shape[0], dtype=np.bool_)
    eligible[contenders] = True
    return _top(sim, eligible & (sim > floor), a, ANCHOR_TOP_K)


def _rows_read_by_beam(a: RecallArrays, expanded: np.ndarray) -> np.ndarray:
    """The neighbours of every row whose edges the beam scored: the rows whose similarity it read."""
    import numpy as np

    rows = np.flatnonzero(expanded)
    parts = [_neighbours(a.csr_ptr, a.csr_nbr, rows[rows < a.csr_ptr.shape[0] - 1])]
    d = a.edge_delta
    if d is not None:
        parts.append(_neighbours(d.ptr, d.nbr, rows[rows < d.ptr.shape[0] - 1]))
    return np.concatenate(parts)


def _neighbours(ptr: np.ndarray, nbr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The CSR entries of ``rows``, concatenated (vectorised: no Python loop over rows)."""
    import numpy as np

    starts, ends = ptr[rows], ptr[rows + 1]
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.asarray(nbr[offsets + np.arange(total)], dtype=np.int64)


def anchors(a: RecallArrays, intent: Intent) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """Decision 2: keyword, vector and entity anchors (top 20 each), recency only for WHEN; RRF."""
    import kernels
    import numpy as np

    n = a.scope.shape[0]
    lists: list[np.ndarray] = []
    via: dict[int, str] = {}

    def add(rows: np.ndarray, name: str) -> None:
        lists.append(rows)
        for r in rows.tolist():
            if r not in via:
                via[r] = name
            elif name != "entity" or via[r] != name:
                via[r] = "hybrid"

    add(_top(a.bm25, a.scope & (a.bm25 > 0), a, ANCHOR_TOP_K), "keyword")
    if a.similarity is not None:
        add(_vector_top(a), "vector")
    if intent is Intent.WHEN:
        add(_top(a.created_rank.astype(np.float64), a.scope, a, ANCHOR_TOP_K), "time")
    add(_top(a.entity_overlap.astype(np.float64), a.scope & (a.entity_overlap > 0), a, ANCHOR_TOP_K), "entity")
    rows = np.array(sorted(via), dtype=np.int32)
    if rows.size == 0:
        return rows, np.zeros(0, dtype=np.float64), via
    fused = kernels.normalize_max(kernels.rrf_numpy(lists, n, RRF_K))
    return rows, fused[rows], via


def _beam(a: RecallArrays, intent: Intent, rows: np.ndarray, scores: np.ndarray, use_numba: bool) -> tuple[np.ndarray, np.ndarray]:
    import kernels
    import numpy as np

    params = BEAM_PARAMS[intent]
    weights = INTENT_EDGE_WEIGHTS[intent]
    type_weight = np.array([weights.get(t, 0.0) for t in EDGE_TYPES], dtype=np.float64)
    similarity = None if a.similarity is None else np.ascontiguousarray(a.similarity, dtype=np.float64)
    if a.similarity_bounds is not None and similarity is not a.similarity:
        raise ValueError("bounded similarity must be a C-contiguous float64 array (refined in place)")
    beam = kernels.beam_search if use_numba else kernels.beam_search_numpy
    # Beam ties go to the later-written row (row order is rowid order), not to the smaller random
    # UUID: the same memories written in the same order then rank the same in every store (the
    # dev-set figures moved by up to 0.5 points between two imports of one draft before).
    tie = np.arange(a.scope.shape[0] - 1, -1, -1, dtype=np.int32)
    d = a.edge_delta
    bounds = a.similarity_bounds
    edges = None if d is None else (d.ptr, d.nbr, d.weight, d.type)
    search = (
        a.csr_ptr, a.csr_nbr, a.csr_weight, a.csr_type, type_weight, rows, scores,
        params.width, params.depth, params.max_visited, similarity, LAMBDA_STRUCTURAL, LAMBDA_SEMANTIC,
        tie, a.scope, edges,
    )  # fmt: skip
    if bounds is not None and similarity is not None and not use_numba:
        # the numpy search calls back before each read: one search, exact wherever it reads
        def before_read(rows: np.ndarray) -> None:
            bounds.refine(similarity, rows)

        return kernels.beam_search_numpy(*search, None, before_read)
    # With numba's exact cosines behind the bounds, the numba search makes each bounded row exact as it
    # reads it (kernels.beam.ExactRead): one search. Otherwise it marks what it expanded, and the loop
    # refines what it read and searches again until a search read exact values only.
    on_read = bounds.exact_read() if bounds is not None and similarity is not None and use_numba else None
    while True:
        expanded = None if bounds is None or on_read is not None else np.zeros(a.scope.shape[0], dtype=np.bool_)
        best, via = beam(*search, expanded) if on_read is None else kernels.beam_search(*search, None, on_read)
        if bounds is None or similarity is None or expanded is None:
            return best, via
        # The beam read bounded similarities: make every row it read exact and search again,
        # until a search reads exact values only (each round only adds exact rows).
        read = _rows_read_by_beam(a, expanded)
        unsure = read[bounds.slack[read] > 0.0]
        if not unsure.size:
            return best, via
        bounds.refine(similarity, unsure)


def run(a: RecallArrays, intent: Intent, limit: int, *, use_numba: bool = False) -> RecallOutcome:
    """Run the pipeline; ``hits`` are truncated to ``limit`` and WHY-ordered."""
    import numpy as np

    scale, best_similarity = _query_scale(a)
    if scale is not a.similarity_scale or best_similarity is not None:
        a = replace(a, similarity_scale=scale, best_similarity=best_similarity)
    anchor_rows, anchor_scores, anchor_via = anchors(a, intent)
    if anchor_rows.size == 0:
        return RecallOutcome([], 0, 0, "sparse_results")
    best, via_codes = _beam(a, intent, anchor_rows, anchor_scores, use_numba)
    scored = np.flatnonzero(np.isfinite(best) & a.scope)
    traversed = int(np.isfinite(best).sum())

    embedded = a.similarity is not None
    top_bm25 = float(a.bm25[a.scope].max()) if a.scope.any() else 0.0
    entity_div = max(1, a.query_entity_count)
    lo, hi = float(best[scored].min()), float(best[scored].max())
    graph_div = (hi - lo) or 1.0
    is_cand = np.zeros(a.scope.shape[0], dtype=np.bool_)
    is_cand[scored] = True

    # The signals are computed at the rows that need them only (candidates, their backbone
    # neighbours, the hits), never over every row: at 1M rows each whole-array pass allocates and
    # faults in 8 MB, and the rerank below made about thirty of them (200 ms of a 1 s recall).
    # Elementwise the same arithmetic as whole arrays, so every score is bit-identical.
    def keyword(rows: np.ndarray) -> np.ndarray:
        return a.bm25[rows] / top_bm25 if top_bm25 > 0 else np.zeros(rows.shape[0])

    def entity(rows: np.ndarray) -> np.ndarray:
        return np.minimum(1.0, a.entity_overlap[rows] / entity_div)

    def graph(rows: np.ndarray) -> np.ndarray:
        return np.where(is_cand[rows], (best[rows] - lo) / graph_div, 0.0)

    # Decision 14: prev/next on the backbone; non-candidates count 0; their neighbours join, and the
    # rows beyond a short neighbour (records.NEIGHBOUR_BRIDGE_SHORTER), which it bridges to.
    short = _bridge(a)
    neighbours = _backbone_side(a, scored, short)
    joined = np.unique(neighbours[a.scope[neighbours] & ~is_cand[neighbours]])
    cand = np.concatenate([scored, joined]).astype(np.int64)
    prev_c, next_c = a.prev[cand], a.next[cand]
    prev2_c, next2_c = _bridged(a.prev, prev_c, short), _bridged(a.next, next_c, short)
    rerank_weights = RERANK_WEIGHTS_EMBEDDED if embedded else RERANK_WEIGHTS_TOKENS
    # a long query (a whole turn or prompt) matches many sessions, the one of its own topic best: the
    # prior would pull that session up rather than the question's (bench/quality-ablations.md, far);
    # a partly long one (records.LONG_QUERY_FULL) keeps that share less of it
    session = None if a.long_query >= 1.0 else _sessions(a, cand)
    # the model's own weight when its similarity is in the signals (records.SimilarityScale.session_prior)
    session_weight = (a.similarity_scale.session_prior if embedded else SESSION_PRIOR_WEIGHT) * (1.0 - a.long_query)
    lift_weights = NEIGHBOUR_LIFT_WEIGHTS_EMBEDDED if embedded else NEIGHBOUR_LIFT_WEIGHTS_TOKENS
    if a.long_query > 0.0:
        to_similarity = embedded and a.similarity_scale.long_below_best > 0.0
        rerank_weights = _long_query_weights(rerank_weights, to_similarity, a.long_query)
        lift_weights = _long_query_weights(lift_weights, to_similarity, a.long_query)
    after, before = NEIGHBOUR_EXPANSION_EMBEDDED if embedded else NEIGHBOUR_EXPANSION_TOKENS
    after, before = after * a.backbone_share, before * a.backbone_share
    # subject agreement: a candidate about someone other than the person the query names weighs less; more so
    # when only the keyword list can tell who a memory is about (no similarity)
    # when no candidate is about them (a product the store's notes name, not open with) no candidate agrees
    # more than another: scaling them all alike would only lower every score the output shows
    mismatch = SUBJECT_MISMATCH_FACTOR_EMBEDDED if embedded else SUBJECT_MISMATCH_FACTOR_TOKENS
    carries = None if a.subject is None else a.subject[cand]
    agreement = None if carries is None or not carries.any() else np.where(carries, 1.0, mismatch)

    def mix(rows: np.ndarray, weights: tuple[float, ...], similarity: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Weighted sum of the (keyword, entity, similarity, graph) signals at ``rows``; 0 at non-candidates."""
        signals = (keyword(rows), entity(rows), similarity(rows), graph(rows))
        return np.where(is_cand[rows], sum(w * sig for w, sig in zip(weights, signals, strict=True)), 0.0)

    def final_scores(similarity: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Rerank, neighbour lift and demotion of every candidate (aligned with ``cand``)."""

        def neighbour_score(side: np.ndarray) -> np.ndarray:
            out = np.zeros(side.shape[0])
            ok = side >= 0
            out[ok] = mix(side[ok], lift_weights, similarity)
            return out

        lift = np.maximum(after * neighbour_score(prev_c), before * neighbour_score(next_c))
        if short is not None:
            bridged = np.maximum(after * after * neighbour_score(prev2_c), before * before * neighbour_score(next2_c))
            lift = np.maximum(lift, bridged)
        final = mix(cand, rerank_weights, similarity) + lift
        if session is not None:
            # the row's own match without the graph's reach, ungated: a backbone neighbour that
            # joined is as much a part of its session as a candidate
            w_keyword, w_entity, w_similarity, _ = rerank_weights
            own = w_keyword * keyword(cand) + w_entity * entity(cand) + w_similarity * similarity(cand)
            final += session_weight * _session_best(own, session)
        if agreement is not None:  # a positive factor per row: the bounded-similarity bracket holds
            final *= agreement
        final[a.superseded[cand]] *= SUPERSEDED_FACTOR
        return final

    floor = a.similarity_scale.signal_floor
    span = _signal_span(a)

    def signal(cosines: np.ndarray) -> np.ndarray:
        """The similarity signal: the cosine itself for the contract's models (bit for bit), else
        rescaled so the model's floor maps to 0 (non-decreasing: the score brackets above hold)."""
        if floor == 0.0:
            return np.maximum(0.0, cosines)
        return np.maximum(0.0, (cosines - floor) / span)

    ranked = cand
    bounds = a.similarity_bounds
    if bounds is not None and a.similarity is not None:
        # Every weight is >= 0, so a final score only grows with any row's similarity: the scores
        # from the similarities' lower and upper bounds bracket the exact ones. A candidate whose
        # upper score is below the limit-th best lower score cannot rank; the others, and the
        # backbone neighbours that lend them lift, are made exact.
        if cand.size > limit:
            sims, slack = a.similarity, bounds.slack
            final_lo = final_scores(lambda rows: signal(sims[rows] - slack[rows]))
            final_hi = final_scores(lambda rows: signal(sims[rows] + slack[rows]))
            kth = np.partition(final_lo, cand.size - limit)[cand.size - limit]
            kept = final_hi >= kth
            ranked = cand[kept]
            if session is not None:  # a ranked row's session prior reads its day's candidates
                ranked_days = cand[np.isin(session, session[kept])]
                bounds.refine(a.similarity, ranked_days)
        bounds.refine(a.similarity, np.concatenate([ranked, _backbone_side(a, ranked, short)]))
    exact = a.similarity

    def similarity(rows: np.ndarray) -> np.ndarray:
        return signal(exact[rows]) if exact is not None else np.zeros(rows.shape[0])

    final = np.zeros(a.scope.shape[0])
    final[cand] = final_scores(similarity)

    ordered = _order_rows(final, ranked, a)[:limit]
    if intent is Intent.WHY:
        ordered = causal_order(ordered, a)

    code_names = {code: name for name, code in _EDGE_TYPE_CODE.items()}
    hits = []
    signals = zip(*(f(ordered).tolist() for f in (keyword, entity, similarity, graph)))
    for r, (keyword_r, entity_r, similarity_r, graph_r) in zip(ordered.tolist(), signals):
        if r in anchor_via:
            via = anchor_via[r]
        elif not is_cand[r]:
            via = VIA_NEIGHBOR
        else:
            via = code_names.get(int(via_codes[r]), "")
        hits.append(Hit(
            int(r), float(final[r]), via, keyword_r, entity_r, similarity_r, graph_r, bool(a.superseded[r]),
        ))  # fmt: skip
    hint = "sparse_results" if len(hits) < limit // 2 or not hits else None
    return RecallOutcome(hits, int(anchor_rows.size), traversed, hint)


def _query_scale(a: RecallArrays) -> tuple[SimilarityScale, float | None]:
    """This query's similarity scale, and its best cosine in scope when the scale read it: a model with ``signal_below_best`` (``long_below_best`` for a long
    query; records.SimilarityScale) starts the query's signal (and so its vector anchors' floor) that
    far below the query's best cosine in scope; without that margin the fixed floor stays (the same
    object). A scale with ``long_below_best`` keeps the long-query switch (engine.retrieve.long_query_share),
    so its queries are wholly long or not at all; any other scale's long margin is 0. An ordinary query
    with a scale's ``spread_below_best`` starts that many standard deviations of its cosines below its best
    in a conversation (backbone share 1), the margin among separate memories (share 0), in between by the
    share: on separate event memories the spread's floor lowered short Chinese probes (bench/quality-ablations.md,
    tenth Chinese session)."""
    scale = a.similarity_scale
    margin = scale.long_below_best if a.long_query > 0.0 else scale.signal_below_best
    if a.similarity is None or margin <= 0.0 or not a.scope.any():
        return scale, None
    best = _best_similarity(a)
    if a.long_query <= 0.0 and scale.spread_below_best > 0.0:
        # how flat the query's cosines lie, over every row in scope (with bounds, the rows not made
        # exact count at their estimate: the spread, not any one row's rank, is read)
        spread = float(a.similarity[a.scope].std()) if a.backbone_share > 0.0 else 0.0
        if spread > 0.0:
            share = a.backbone_share
            below = share * scale.spread_below_best * spread + (1.0 - share) * margin
            return replace(scale, signal_floor=best - below), best
        # one cosine, all equal, or separate memories: the margin's floor and span
        return replace(scale, signal_floor=best - margin, spread_below_best=0.0), best
    return replace(scale, signal_floor=best - margin), best


def _signal_span(a: RecallArrays) -> float:
    """The cosine range the similarity signal spreads over its floor: 1 - floor, so that a cosine of 1
    is signal 1; for a long query in a store of separate memories, with a scale's
    ``separate_best_signal`` (records.SimilarityScale), narrower, so that the query's best cosine
    (``long_below_best`` above the floor ``_query_scale`` set) reaches that signal, in proportion as
    the store's backbone share is below 1 (0: all of it; 1, a conversation: none). For an ordinary query
    with a scale's ``spread_below_best`` and ``best_signal``, the span that takes its best cosine to
    ``best_signal`` in proportion as the share is above 0 (1: all of it; 0, separate memories: none).

    Why: the relative floor leaves a long query's best cosine at long_below_best / (1 - floor), about
    0.3 for e5, while the best keyword match is 1. In a conversation the keyword list and the signals
    around it (lift, session, graph) find a dialogue turn's evidence better than its dense list does;
    among separate event memories a long turn's keyword list rewards a short memory for an incidental
    rare character, and the dense match, which reads the whole memory, is the surer one."""
    scale = a.similarity_scale
    floor = scale.signal_floor
    span = 1.0 - floor
    if a.similarity is not None and a.long_query <= 0.0 and scale.best_signal > 0.0 and scale.spread_below_best > 0.0:
        # an ordinary query's floor by its cosines' spread (_query_scale): its best cosine reaches best_signal,
        # the store's backbone share of the way from the plain span's signal
        below = _best_similarity(a) - floor
        if below <= 0.0:
            return span
        share = a.backbone_share
        return below / (share * scale.best_signal + (1.0 - share) * below / span)
    target, margin = scale.separate_best_signal, scale.long_below_best
    if a.similarity is None or a.long_query <= 0.0 or target <= 0.0 or margin <= 0.0 or a.backbone_share >= 1.0:
        return span
    own = margin / span  # the best cosine's signal with the plain span
    if own >= target:
        return span
    return margin / (own + (1.0 - a.backbone_share) * (target - own))


def _best_similarity(a: RecallArrays) -> float:
    """The exact largest cosine in scope. With bounds, the rows whose upper bound reaches the best
    lower bound are made exact first: the best row is among them. Read once per query (``a.best_similarity``)."""
    import numpy as np

    if a.best_similarity is not None:
        return a.best_similarity
    sim, bounds = a.similarity, a.similarity_bounds
    assert sim is not None
    rows = np.flatnonzero(a.scope)
    if bounds is not None:
        slack = bounds.slack[rows]
        rows = rows[sim[rows] + slack >= float((sim[rows] - slack).max())]
        bounds.refine(sim, rows)
    return float(sim[rows].max())


def _long_query_weights(weights: tuple[float, float, float, float], to_similarity: bool = False,
                        share: float = 1.0) -> tuple[float, float, float, float]:  # fmt: skip
    """A long query's (keyword, entity, similarity, graph) weights: ``share`` of the graph's go to the
    keyword, or to the similarity (``to_similarity``: a model measured to read a whole turn,
    records.SimilarityScale ``long_below_best``); ``share`` is how long the query is
    (engine.retrieve.long_query_share), 1 for a whole turn.

    The graph signal is a row's reach from the anchors; a whole dialogue turn's anchors are spread
    over its many topics, and the turns around the ones its other words match reach each other
    best. Chinese development set, each question after a borrowed turn (bench/quality-ablations.md):
    a turn of the same conversation 38.5 -> 52.4 without embeddings; ordinary questions unchanged.
    With multilingual-e5-small, a dialogue turn that is no memory (bench/quality.py --long-query
    probe) 34.6 -> 36.1 with the similarity taking it (and the floor relative to the best cosine)."""
    keyword, entity, similarity, graph = weights
    moved = graph * share
    if to_similarity:
        return (keyword, entity, similarity + moved, graph - moved)
    return (keyword + moved, entity, similarity, graph - moved)


def _sessions(a: RecallArrays, cand: np.ndarray) -> np.ndarray | None:
    """Each candidate's session: its creation day as a small integer (equal days, equal ids); None
    without days."""
    import numpy as np

    if a.created_day is None or cand.size == 0:
        return None
    _, session = np.unique(a.created_day(cand), return_inverse=True)
    return session.reshape(-1)


def pair_overlaps(ptr: np.ndarray, terms: np.ndarray, idf: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The idf-weighted Jaccard of each pair of rows (``x[i]``, ``y[i]``) of a term list in CSR form
    (``ptr``, ``terms``: each row's distinct term ids; ``idf`` indexed by term id): what two memories
    share, rare terms counting most; 0 for a pair of empty rows. One pass for all pairs, no loop."""
    import numpy as np

    lengths = np.diff(ptr)
    owner = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    row_weight = np.bincount(owner, weights=idf[terms], minlength=lengths.shape[0])
    width = int(idf.shape[0])

    def keyed(rows: np.ndarray) -> np.ndarray:  # (pair, term) as one int64 key per term of each pair's row
        size = lengths[rows]
        at = np.repeat(ptr[rows] - np.cumsum(size) + size, size) + np.arange(int(size.sum()), dtype=np.int64)
        return np.repeat(np.arange(rows.shape[0], dtype=np.int64) * width, size) + terms[at]

    both = np.intersect1d(keyed(x), keyed(y), assume_unique=True)
    shared = np.bincount(both // width, weights=idf[both % width], minlength=x.shape[0])
    union = row_weight[x] + row_weight[y] - shared
    return np.divide(shared, union, out=np.zeros(x.shape[0]), where=union > 0)


def backbone_lift_share(linked: np.ndarray, apart: np.ndarray) -> float:
    """The share of the backbone neighbour lift a store earns (records.BACKBONE_COHERENT): from the
    overlaps (``pair_overlaps``) of sampled memories with their backbone predecessors, ``linked``, and
    with memories written far from them, ``apart``. Their means' ratio is ~1 where consecutive memories
    are unrelated: 0 at BACKBONE_UNRELATED and below, 1 at BACKBONE_COHERENT and above, linear between.
    1 without a sample (nothing to judge by: the lift as it always was)."""
    if linked.shape[0] == 0 or apart.shape[0] == 0:
        return 1.0
    base = float(apart.mean())
    if base <= 0.0:
        return 1.0
    ratio = float(linked.mean()) / base
    return min(1.0, max(0.0, (ratio - BACKBONE_UNRELATED) / (BACKBONE_COHERENT - BACKBONE_UNRELATED)))


def _session_best(own: np.ndarray, session: np.ndarray) -> np.ndarray:
    """For each candidate, the largest ``own`` among the candidates of its session. Non-decreasing
    in every ``own`` value, so the bounded-similarity bracket above holds."""
    import numpy as np

    best = np.zeros(int(session.max()) + 1)
    np.maximum.at(best, session, own)
    return best[session]


def _bridge(a: RecallArrays) -> Callable[[np.ndarray], np.ndarray] | None:
    """Whether each of some rows is short enough to bridge the lift (records.NEIGHBOUR_BRIDGE_SHORTER
    x the mean length in scope); None without lengths. Read at the rows asked only."""
    if a.doc_len is None or a.mean_doc_len <= 0.0:
        return None
    lengths, cut = a.doc_len, NEIGHBOUR_BRIDGE_SHORTER * a.mean_doc_len
    return lambda rows: lengths[rows] < cut


def _bridged(links: np.ndarray, rows: np.ndarray, short: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray:
    """The row one step beyond each of ``rows`` along ``links`` where that row is short; else -1."""
    import numpy as np

    if short is None:
        return np.full(rows.shape[0], -1, dtype=links.dtype)
    at = np.maximum(rows, 0)
    return np.where((rows >= 0) & short(at), links[at], -1)


def _backbone_side(a: RecallArrays, rows: np.ndarray, short: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray:
    """The backbone neighbours of ``rows`` and the rows their short neighbours bridge to."""
    import numpy as np

    prev, nxt = a.prev[rows], a.next[rows]
    side = np.concatenate([prev, nxt, _bridged(a.prev, prev, short), _bridged(a.next, nxt, short)])
    return side[side >= 0]


def _order_rows(final: np.ndarray, rows: np.ndarray, a: RecallArrays) -> np.ndarray:
    """Rows sorted by score desc, importance desc, created_at desc, id asc (§4.10 step 6)."""
    import numpy as np

    keys = (a.id_rank[rows], -a.created_rank[rows].astype(np.int64), -a.importance[rows].astype(np.int64), -final[rows])
    return rows[np.lexsort(keys)]


def causal_order(ordered: np.ndarray, a: RecallArrays) -> np.ndarray:
    """WHY (§4.10 step 7): Kahn over causal edges among the results, cause first; the best-ranked
    ready node goes next; nodes left in cycles are appended in rank order."""
    import numpy as np

    rows = ordered.tolist()
    pos = {r: i for i, r in enumerate(rows)}
    causal = _EDGE_TYPE_CODE["causal"]
    succ: dict[int, set[int]] = {}
    indeg = dict.fromkeys(rows, 0)
    for r in rows:
        nbr, typ, out_flag = incident(a, r)
        outgoing = (typ == causal) & out_flag
        succ[r] = {v for v in nbr[outgoing].tolist() if v in pos and v != r}
        for v in succ[r]:
            indeg[v] += 1
    ready = [r for r in rows if indeg[r] == 0]
    out: list[int] = []
    done: set[int] = set()
    while ready:
        ready.sort(key=pos.__getitem__)
        r = ready.pop(0)
        out.append(r)
        done.add(r)
        for v in sorted(succ[r], key=pos.__getitem__):
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    out.extend(r for r in rows if r not in done)
    return np.array(out, dtype=np.int64)
