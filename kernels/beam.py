"""Per-anchor beam search over the edge CSR (contract §4.10 step 4, newest behaviour).

The caller builds an edge CSR holding *both* directions of every edge row: node ``u``'s incident
entries are ``indptr[u]:indptr[u+1]`` with neighbour ``nbr_rows``, edge ``weights`` and edge type
code ``etype`` (an index into ``type_weight``, the intent's traversal weight per type).
An optional second CSR (``delta``: the edge rows written since the first was built, over all n
rows) adds its entries after node ``u``'s first-CSR entries; the first CSR may then cover fewer
rows (``indptr`` shorter than n + 1: the rows added since have no entries there). Reading the two
side by side is what lets a process use a large persisted CSR without copying it to insert a few
new entries.

Semantics, per anchor, independently (own visited set, own budget):

1. The anchor starts at its anchor score and counts as visited (budget used: 1). Anchors outside
   ``row_mask`` are skipped.
2. For each depth level ``1..depth``, expand every node of the level in level order. A node's
   transitions are its CSR entries whose neighbour is inside ``row_mask`` (traversal never leaves
   the scope), each with ``delta = lambda_structural·type_weight[etype]·weight
   + lambda_semantic·max(0, similarity[nbr])`` (semantic term only when ``similarity`` is given).
   Transitions are ranked by delta desc, ``id_rank[nbr]`` asc, type code asc (then CSR position)
   *before* the budget applies. For each transition in that order: if the anchor's budget is
   spent (visited == ``max_visited``) the anchor's search stops; otherwise the neighbour's
   candidate ``score + delta`` updates the global best score, and a neighbour this anchor has not
   visited yet is marked visited (budget + 1) and enters the next level with that candidate score.
3. The next level keeps its top ``width`` entries by score desc, ``id_rank`` asc (row asc).
4. Stop at ``depth`` levels, an empty level, or a spent budget.

Global result over all anchors: ``best[r]`` = the maximum score any anchor gave row ``r`` (its
anchor score included), ``-inf`` if never reached. ``via[r]`` = the edge type code of the
transition that gave the best score (the lowest code among equal bests), :data:`VIA_ANCHOR` for
every anchor row (even if a traversal later beats its anchor score), :data:`VIA_NONE` if never
reached. Both are independent of anchor order and thread count.

Imports only numpy and ``kernels.*``; numba is loaded on the first jitted call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from kernels._jit import jit
from kernels.cosine import _cosine_row
from kernels.topk import _argsort_desc, check_array, check_mask, readonly_view

VIA_NONE = -1  # via of a row no anchor reached
VIA_ANCHOR = -2  # via of an anchor row


@jit()
def _offer(best, via, v, cand, code):
    """Record a candidate score for row v reached through edge type ``code``."""
    if via[v] == VIA_ANCHOR:
        if cand > best[v]:
            best[v] = cand
    elif cand > best[v]:
        best[v] = cand
        via[v] = code
    elif cand == best[v] and code < via[v]:
        via[v] = code


@jit()
def _collect(lo, hi, nbr_rows, weights, etype, type_weight, similarity, has_sim, lambda_structural,
             lambda_semantic, id_rank, row_mask, t_delta, t_rank, t_code, t_row, m,
             x_similarity, x_vectors, x_norms, x_query, x_query_norm, x_vec_of_row, x_slack, has_exact):  # fmt: skip
    """Append the in-scope transitions of CSR entries ``lo:hi`` to the t_* buffers from ``m``.

    With ``has_exact`` the similarities are read from (and written to) ``x_similarity``, the caller's
    writable array (``similarity`` is a read-only view): a neighbour whose value is still bounded
    (``x_slack`` > 0) gets its exact cosine first, its slack zeroed, so the search reads exact values only."""
    for j in range(lo, hi):
        v = nbr_rows[j]
        if not row_mask[v]:
            continue
        delta = lambda_structural * type_weight[etype[j]] * weights[j]
        if has_sim:
            if has_exact:
                if x_slack[v] > 0.0:
                    i = x_vec_of_row[v]
                    if i < 0 or i >= x_vectors.shape[0]:
                        raise ValueError("exact: a bounded row has no vector row")
                    x_similarity[v] = _cosine_row(x_vectors, x_norms, x_query, x_query_norm, i)
                    x_slack[v] = 0.0
                sim = x_similarity[v]
            else:
                sim = similarity[v]
            delta += lambda_semantic * max(0.0, sim)
        t_delta[m] = delta
        t_rank[m] = id_rank[v]
        t_code[m] = etype[j]
        t_row[m] = v
        m += 1
    return m


@jit()
def _beam_search(
    indptr, nbr_rows, weights, etype, type_weight, anchor_rows, anchor_scores,
    width, depth, max_visited, similarity, lambda_structural, lambda_semantic, id_rank, row_mask,
    d_ptr, d_nbr, d_weights, d_etype, expanded,
    x_similarity, x_vectors, x_norms, x_query, x_query_norm, x_vec_of_row, x_slack,
):  # fmt: skip
    n = id_rank.shape[0]
    record = expanded.shape[0] != 0
    has_exact = x_slack.shape[0] == n
    nb = indptr.shape[0] - 1  # rows the first CSR covers (<= n)
    has_delta = d_ptr.shape[0] == n + 1
    has_sim = similarity.shape[0] != 0
    best = np.full(n, -np.inf)
    via = np.full(n, VIA_NONE, dtype=np.int8)
    for a in range(anchor_rows.shape[0]):
        r = anchor_rows[a]
        if row_mask[r]:
            via[r] = VIA_ANCHOR
            if anchor_scores[a] > best[r]:
                best[r] = anchor_scores[a]

    max_deg = 0
    for u in range(n):
        deg = indptr[u + 1] - indptr[u] if u < nb else 0
        if has_delta:
            deg += d_ptr[u + 1] - d_ptr[u]
        max_deg = max(max_deg, deg)
    t_delta = np.empty(max_deg, dtype=np.float64)
    t_rank = np.empty(max_deg, dtype=np.int32)
    t_code = np.empty(max_deg, dtype=np.int8)
    t_row = np.empty(max_deg, dtype=np.int32)
    level_rows = np.empty(n, dtype=np.int32)
    level_scores = np.empty(n, dtype=np.float64)
    next_rows = np.empty(n, dtype=np.int32)
    next_scores = np.empty(n, dtype=np.float64)
    next_ranks = np.empty(n, dtype=np.int32)
    stamp = np.full(n, -1, dtype=np.int64)  # stamp[v] == a: anchor a has visited v

    for a in range(anchor_rows.shape[0]):
        root = anchor_rows[a]
        if not row_mask[root]:
            continue
        stamp[root] = a
        visited = 1
        level_rows[0] = root
        level_scores[0] = anchor_scores[a]
        level_n = 1
        spent = visited >= max_visited
        level = 0
        while level < depth and level_n > 0 and not spent:
            next_n = 0
            for li in range(level_n):
                u = level_rows[li]
                score = level_scores[li]
                if record:
                    expanded[u] = True
                m = 0
                if u < nb:
                    m = _collect(indptr[u], indptr[u + 1], nbr_rows, weights, etype, type_weight, similarity,
                                 has_sim, lambda_structural, lambda_semantic, id_rank, row_mask,
                                 t_delta, t_rank, t_code, t_row, m,
                                 x_similarity, x_vectors, x_norms, x_query, x_query_norm, x_vec_of_row, x_slack, has_exact)  # fmt: skip
                if has_delta:
                    m = _collect(d_ptr[u], d_ptr[u + 1], d_nbr, d_weights, d_etype, type_weight, similarity,
                                 has_sim, lambda_structural, lambda_semantic, id_rank, row_mask,
                                 t_delta, t_rank, t_code, t_row, m,
                                 x_similarity, x_vectors, x_norms, x_query, x_query_norm, x_vec_of_row, x_slack, has_exact)  # fmt: skip
                order = _argsort_desc(t_delta[:m], t_rank[:m], t_code[:m])
                for oi in range(m):
                    if visited >= max_visited:
                        spent = True
                        break
                    o = order[oi]
                    v = t_row[o]
                    cand = score + t_delta[o]
                    _offer(best, via, v, cand, t_code[o])
                    if stamp[v] != a:
                        stamp[v] = a
                        visited += 1
                        next_rows[next_n] = v
                        next_scores[next_n] = cand
                        next_ranks[next_n] = id_rank[v]
                        next_n += 1
                if spent:
                    break
            if spent:
                break
            order = _argsort_desc(next_scores[:next_n], next_ranks[:next_n], next_rows[:next_n])
            level_n = min(width, next_n)
            for li in range(level_n):
                level_rows[li] = next_rows[order[li]]
                level_scores[li] = next_scores[order[li]]
            level += 1
    return best, via


def _check_beam(
    indptr: object, nbr_rows: object, weights: object, etype: object, type_weight: object,
    anchor_rows: object, anchor_scores: object, width: int, depth: int, max_visited: int,
    similarity: object, id_rank: object, row_mask: object, delta: EdgeArrays | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           np.ndarray, EdgeArrays]:  # fmt: skip
    type_weight = check_array(type_weight, "type_weight", np.float64)
    indptr, nbr_rows, weights, etype = _check_csr(indptr, nbr_rows, weights, etype, type_weight, "")
    n = indptr.shape[0] - 1
    if delta is None:
        d_csr = _NO_DELTA
    else:
        d_csr = _check_csr(*delta, type_weight, "delta ")
        if d_csr[0].shape[0] - 1 < n:
            raise ValueError("the delta CSR must cover at least the rows of the first")
        n = d_csr[0].shape[0] - 1
    anchors = np.asarray(anchor_rows)
    if anchors.ndim != 1 or (anchors.size and anchors.dtype.kind not in "iu"):
        raise TypeError("anchor_rows must be a 1-dimensional integer array")
    if anchors.size and (anchors.min() < 0 or anchors.max() >= n):
        raise ValueError(f"anchor_rows holds a row outside [0, {n})")
    anchors = anchors.astype(np.int32)
    a_scores = np.asarray(anchor_scores, dtype=np.float64)
    if a_scores.shape != anchors.shape:
        raise ValueError("anchor_scores must have the same length as anchor_rows")
    for name, value in (("width", width), ("depth", depth), ("max_visited", max_visited)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if similarity is None:
        similarity = np.zeros(0, dtype=np.float64)
    similarity = check_array(similarity, "similarity", np.float64)
    if similarity.shape[0] not in (0, n):
        raise ValueError(f"similarity must have length 0 or {n}, got {similarity.shape[0]}")
    id_rank = check_array(id_rank, "id_rank", np.int32, 1, n)
    mask = check_mask(row_mask, "row_mask", n)
    if mask.shape[0] == 0:
        mask = np.ones(n, dtype=np.bool_)
        mask.flags.writeable = False
    return indptr, nbr_rows, weights, etype, type_weight, anchors, a_scores, similarity, id_rank, mask, d_csr


def _check_csr(indptr: object, nbr_rows: object, weights: object, etype: object, type_weight: np.ndarray,
               what: str) -> EdgeArrays:  # fmt: skip
    indptr = check_array(indptr, f"{what}indptr", np.int64)
    if indptr.shape[0] < 1:
        raise ValueError(f"{what}indptr must have n + 1 entries")
    nbr_rows = check_array(nbr_rows, f"{what}nbr_rows", np.int32)
    m = nbr_rows.shape[0]
    if indptr[0] != 0 or indptr[-1] != m:
        raise ValueError(f"{what}indptr must start at 0 and end at len(nbr_rows)")
    weights = check_array(weights, f"{what}weights", np.float64, 1, m)
    etype = check_array(etype, f"{what}etype", np.int8, 1, m)
    if m and (etype.min() < 0 or etype.max() >= type_weight.shape[0]):
        raise ValueError(f"{what}etype holds a code outside [0, len(type_weight))")
    return indptr, nbr_rows, weights, etype


# (indptr, nbr_rows, weights, etype) of one CSR
EdgeArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
_NO_DELTA: EdgeArrays = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64),
                         np.zeros(0, dtype=np.int8))  # fmt: skip


def beam_search(
    indptr: npt.NDArray[np.int64],
    nbr_rows: npt.NDArray[np.int32],
    weights: npt.NDArray[np.float64],
    etype: npt.NDArray[np.int8],
    type_weight: npt.NDArray[np.float64],
    anchor_rows: npt.ArrayLike,
    anchor_scores: npt.ArrayLike,
    width: int,
    depth: int,
    max_visited: int,
    similarity: npt.NDArray[np.float64] | None,
    lambda_structural: float,
    lambda_semantic: float,
    id_rank: npt.NDArray[np.int32],
    row_mask: npt.NDArray[np.bool_] | None = None,
    delta: EdgeArrays | None = None,
    expanded: npt.NDArray[np.bool_] | None = None,
    exact: ExactRead | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Run the per-anchor beam search described in the module docstring (numba path, serial).

    Parameters
    ----------
    indptr : int64 (n+1,); nbr_rows : int32 (m,), values in ``[0, n)``; weights : float64 (m,);
        etype : int8 (m,), codes in ``[0, n_types)``. The CSR contents are trusted (built by the
        store), only its shape and the type codes are checked.
    type_weight : float64 (n_types,), the intent's traversal weight per edge type code.
    anchor_rows : integer (a,), rows in ``[0, n)``; anchor_scores : float (a,).
    width, depth, max_visited : ints >= 0 (``records.BEAM_PARAMS``).
    similarity : float64 (n,) (cosine of each row with the query), or None / empty for no
        semantic term. Must be finite.
    lambda_structural, lambda_semantic : floats (``records.LAMBDA_STRUCTURAL``, ``LAMBDA_SEMANTIC``).
    id_rank : int32 (n,), the tie-break rank of each row (lower first).
    row_mask : bool (n,) or None (all rows in scope).
    delta : None, or a second CSR ``(indptr, nbr_rows, weights, etype)`` over all n rows whose
        entries follow the first CSR's at each node; the first then may cover only its first rows
        (``indptr`` of length <= n + 1), and n is the delta's row count.
    expanded : None, or a writable bool (n,) array: set True at every row whose edges were
        scored (the rows whose neighbours' similarities the search read). Nothing else changes.
    exact : None, or :class:`ExactRead` for a ``similarity`` that is bounded at some rows (the int8
        first pass): before the search reads a row whose ``slack`` is positive, it writes that row's
        exact cosine into ``similarity`` (``kernels.cosine``'s row kernel, bit-equal to
        ``kernels.quantized.exact_scorer(..., numba=True)``) and zeroes its slack. One search then
        reads exact values only, where searching with bounded values and refining what it read
        would need a search per round. ``similarity`` and ``slack`` are updated in place.

    Returns
    -------
    best : float64 (n,), best score per row, ``-inf`` where unreached.
    via : int8 (n,), edge type code of the best score, ``VIA_ANCHOR`` (-2) for anchors,
        ``VIA_NONE`` (-1) where unreached.
    """
    raw_similarity = similarity
    (indptr, nbr_rows, weights, etype, type_weight, anchors, a_scores, similarity, id_rank, mask, d_csr) = _check_beam(
        indptr, nbr_rows, weights, etype, type_weight, anchor_rows, anchor_scores,
        width, depth, max_visited, similarity, id_rank, row_mask, delta,
    )  # fmt: skip
    return _beam_search(
        indptr, nbr_rows, weights, etype, type_weight, anchors, a_scores,
        int(width), int(depth), int(max_visited), similarity,
        float(lambda_structural), float(lambda_semantic), id_rank, mask, *d_csr,
        _check_expanded(expanded, id_rank.shape[0]), *_check_exact(exact, raw_similarity, id_rank.shape[0]),
    )  # fmt: skip


class ExactRead(NamedTuple):
    """What :func:`beam_search` needs to make a bounded similarity exact where it reads it."""

    vectors: npt.NDArray[np.float64]  # (rows, dim), C-contiguous: the stored vectors
    norms: npt.NDArray[np.float64]  # (rows,): their norms
    query: npt.NDArray[np.float64]  # (dim,)
    query_norm: float
    vec_of_row: npt.NDArray[np.int64]  # (n,): each search row's vector row (read where slack > 0)
    slack: npt.NDArray[np.float64]  # (n,), writable: > 0 where ``similarity`` is bounded, not exact


# No exact reads: the same array types as a real ExactRead's (read-only inputs, writable outputs), so
# numba compiles the search once for both; has_exact is False since the slack is empty.
_NO_EXACT = (np.zeros(0), readonly_view(np.zeros((0, 1))), readonly_view(np.zeros(0)), readonly_view(np.zeros(1)), 0.0,
             readonly_view(np.zeros(0, dtype=np.int64)), np.zeros(0))  # fmt: skip


def _check_exact(exact: ExactRead | None, similarity: object, n: int) -> tuple[object, ...]:
    if exact is None:
        return _NO_EXACT
    if (not isinstance(similarity, np.ndarray) or similarity.dtype != np.float64 or similarity.shape != (n,)
            or not similarity.flags.writeable or not similarity.flags.c_contiguous):  # fmt: skip
        raise ValueError("exact needs a writable C-contiguous float64 similarity of length n (exact values are written there)")
    vectors = check_array(exact.vectors, "exact.vectors", np.float64, 2)
    if not vectors.flags.c_contiguous:
        raise ValueError("exact.vectors must be C-contiguous")
    norms = check_array(exact.norms, "exact.norms", np.float64, 1, vectors.shape[0])
    query = check_array(exact.query, "exact.query", np.float64, 1, vectors.shape[1])
    vec_of_row = check_array(exact.vec_of_row, "exact.vec_of_row", np.int64, 1, n)
    check_array(exact.slack, "exact.slack", np.float64, 1, n)
    if not exact.slack.flags.writeable:
        raise ValueError("exact.slack must be writable")
    return similarity, vectors, norms, query, float(exact.query_norm), vec_of_row, exact.slack


def _check_expanded(expanded: object, n: int) -> np.ndarray:
    if expanded is None:
        return np.zeros(0, dtype=np.bool_)
    if not isinstance(expanded, np.ndarray) or expanded.dtype != np.bool_ or expanded.shape != (n,):
        raise ValueError(f"expanded must be a bool array of length {n}")
    if not expanded.flags.writeable or not expanded.flags.c_contiguous:
        raise ValueError("expanded must be writable and C-contiguous")
    return expanded


def beam_search_numpy(
    indptr: npt.NDArray[np.int64],
    nbr_rows: npt.NDArray[np.int32],
    weights: npt.NDArray[np.float64],
    etype: npt.NDArray[np.int8],
    type_weight: npt.NDArray[np.float64],
    anchor_rows: npt.ArrayLike,
    anchor_scores: npt.ArrayLike,
    width: int,
    depth: int,
    max_visited: int,
    similarity: npt.NDArray[np.float64] | None,
    lambda_structural: float,
    lambda_semantic: float,
    id_rank: npt.NDArray[np.int32],
    row_mask: npt.NDArray[np.bool_] | None = None,
    delta: EdgeArrays | None = None,
    expanded: npt.NDArray[np.bool_] | None = None,
    before_read: Callable[[npt.NDArray[np.int32]], None] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Same contract as :func:`beam_search`, in numpy + Python (vectorised per node, no numba).

    ``before_read``: called once per level of each root's search with the in-scope neighbours of
    every row of that level (the rows whose similarities the level may read), before any of them
    is read; it may update the ``similarity`` array passed in, at those rows (recall makes bounded
    similarities exact this way in a single search). One call per level, not per row: at 1M rows a
    WHY search expands about 2,000 rows, and each call has a fixed cost. A level cut short by
    ``max_visited`` has had a few more rows refined than it read, which changes no value.
    """
    (indptr, nbr_rows, weights, etype, type_weight, anchors, a_scores, similarity, id_rank, mask, d_csr) = _check_beam(
        indptr, nbr_rows, weights, etype, type_weight, anchor_rows, anchor_scores,
        width, depth, max_visited, similarity, id_rank, row_mask, delta,
    )  # fmt: skip
    nb = indptr.shape[0] - 1
    n = max(nb, d_csr[0].shape[0] - 1)
    d_ptr, d_nbr, d_weights, d_etype = d_csr
    record = _check_expanded(expanded, id_rank.shape[0])
    lam_s, lam_v = float(lambda_structural), float(lambda_semantic)
    # the rows a search reaches, as dicts: per-element updates are cheaper than on arrays, and a
    # search touches a few thousand rows, so nothing here is O(rows) but the two arrays returned
    # (lists of every row cost 60-70 ms per recall at 1M rows)
    best_d: dict[int, float] = {}
    via_d: dict[int, int] = {}
    for r, s in zip(anchors.tolist(), a_scores.tolist()):
        if mask[r]:
            via_d[r] = VIA_ANCHOR
            best_d[r] = max(best_d.get(r, -math.inf), s)
    for root, root_score in zip(anchors.tolist(), a_scores.tolist()):
        if not mask[root]:
            continue
        visited = {root}
        level = [(root, root_score)]
        spent = len(visited) >= max_visited
        for _ in range(depth):
            if not level or spent:
                break
            nxt: list[tuple[int, float]] = []
            if before_read is not None:
                _before_level(before_read, level, indptr, nbr_rows, nb, d_ptr, d_nbr, mask)
            for u, score in level:
                if record.shape[0]:
                    record[u] = True
                lo, hi = (int(indptr[u]), int(indptr[u + 1])) if u < nb else (0, 0)
                nbrs, codes, wts = nbr_rows[lo:hi], etype[lo:hi], weights[lo:hi]
                if d_ptr.shape[0] > u + 1 and d_ptr[u + 1] > d_ptr[u]:
                    dlo, dhi = int(d_ptr[u]), int(d_ptr[u + 1])
                    nbrs = np.concatenate([nbrs, d_nbr[dlo:dhi]])
                    codes = np.concatenate([codes, d_etype[dlo:dhi]])
                    wts = np.concatenate([wts, d_weights[dlo:dhi]])
                keep = mask[nbrs]
                nbrs, codes = nbrs[keep], codes[keep]
                gain = lam_s * type_weight[codes] * wts[keep]
                if similarity.shape[0]:
                    gain = gain + lam_v * np.maximum(0.0, similarity[nbrs])
                order = np.lexsort((codes, id_rank[nbrs], -gain))
                for v, d, code in zip(nbrs[order].tolist(), gain[order].tolist(), codes[order].tolist()):
                    if len(visited) >= max_visited:
                        spent = True
                        break
                    cand = score + d
                    held, how = best_d.get(v, -math.inf), via_d.get(v, VIA_NONE)
                    if how == VIA_ANCHOR:
                        best_d[v] = max(held, cand)
                    elif cand > held or (cand == held and code < how):
                        best_d[v] = cand
                        via_d[v] = code
                    if v not in visited:
                        visited.add(v)
                        nxt.append((v, cand))
                if spent:
                    break
            nxt.sort(key=lambda e: (-e[1], int(id_rank[e[0]]), e[0]))
            level = nxt[:width]
    best = np.full(n, -np.inf)
    via = np.full(n, VIA_NONE, dtype=np.int8)
    if best_d:
        best[np.fromiter(best_d, np.int64, len(best_d))] = np.fromiter(best_d.values(), np.float64, len(best_d))
    if via_d:
        via[np.fromiter(via_d, np.int64, len(via_d))] = np.fromiter(via_d.values(), np.int8, len(via_d))
    return best, via


def _before_level(
    before_read: Callable[[npt.NDArray[np.int32]], None],
    level: list[tuple[int, float]],
    indptr: npt.NDArray[np.int64],
    nbr_rows: npt.NDArray[np.int32],
    nb: int,
    d_ptr: npt.NDArray[np.int64],
    d_nbr: npt.NDArray[np.int32],
    mask: npt.NDArray[np.bool_],
) -> None:
    """Call ``before_read`` once with the in-scope neighbours of every row of ``level``
    (base CSR and delta CSR), each row once."""
    parts = []
    for u, _ in level:
        if u < nb and indptr[u + 1] > indptr[u]:
            parts.append(nbr_rows[int(indptr[u]) : int(indptr[u + 1])])
        if d_ptr.shape[0] > u + 1 and d_ptr[u + 1] > d_ptr[u]:
            parts.append(d_nbr[int(d_ptr[u]) : int(d_ptr[u + 1])])
    if not parts:
        return
    rows = np.unique(np.concatenate(parts))
    rows = rows[mask[rows]]
    if rows.shape[0]:
        before_read(rows)
