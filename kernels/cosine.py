"""Cosine similarity of one query against the stored float64 vector matrix, with fused top-k.

Implements contract §4.2 (cosine = dot / (|a| |b|), 0 for a zero vector) over the derived matrix
(architecture §6): ``vectors`` (n, d) float64 C-contiguous with precomputed ``norms`` (n,), so a
row's cosine is ``dot(row, query) / (norms[row] * |query|)``. Rows with norm 0, and every row when
the query is all zeros, score exactly 0.0.

The numba scan is memory-bound (one pass over n*d*8 bytes): each dot product accumulates in eight
independent float64 lanes (fixed order, so results are reproducible and need no fastmath), rows
are split into fixed blocks of :data:`BLOCK_ROWS` processed in ``prange``, each block keeps its own
bounded heap, and the heaps are merged serially. Block boundaries do not depend on the thread
count and the heap order is total (score desc, tie_rank asc, row asc; see ``kernels.topk``), so
results are identical for any ``NUMBA_NUM_THREADS``. The dot products differ from BLAS (numpy
path) in the last bits only.

Imports only numpy and ``kernels.*``; numba is loaded on the first jitted call.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from kernels._jit import jit, prange
from kernels.topk import INT32_MAX, _better, _heap_push, _heap_sorted, _topk_numpy, check_array, check_k, check_mask

BLOCK_ROWS = 1024  # rows per parallel block: amortises a heap, balances 10k rows over 2 threads


@jit()
def _dot(a, b):
    """Dot product of two equal-length float64 vectors in eight fixed accumulators."""
    d = a.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    m = d - d % 8
    for j in range(0, m, 8):
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
        s4 += a[j + 4] * b[j + 4]
        s5 += a[j + 5] * b[j + 5]
        s6 += a[j + 6] * b[j + 6]
        s7 += a[j + 7] * b[j + 7]
    for j in range(m, d):
        s0 += a[j] * b[j]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@jit()
def _cosine_row(vectors, norms, query, query_norm, i):
    denom = norms[i] * query_norm
    if denom == 0.0:
        return 0.0
    return _dot(vectors[i], query) / denom


@jit(parallel=True)
def _cosine_scores(vectors, norms, query, query_norm):
    n = vectors.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in prange(n):
        out[i] = _cosine_row(vectors, norms, query, query_norm, i)
    return out


@jit(parallel=True)
def _cosine_topk(vectors, norms, query, query_norm, k, tie_rank, min_score, row_mask):
    n = vectors.shape[0]
    has_mask = row_mask.shape[0] != 0
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    h_score = np.full((n_blocks, k), -np.inf)
    h_rank = np.full((n_blocks, k), INT32_MAX, dtype=np.int32)
    h_row = np.full((n_blocks, k), -1, dtype=np.int32)
    sizes = np.zeros(n_blocks, dtype=np.int64)
    for blk in prange(n_blocks):
        lo = blk * BLOCK_ROWS
        hi = min(lo + BLOCK_ROWS, n)
        size = 0
        for i in range(lo, hi):
            if has_mask and not row_mask[i]:
                continue
            s = _cosine_row(vectors, norms, query, query_norm, i)
            if not s >= min_score:
                continue
            if size == k and (k == 0 or not _better(s, tie_rank[i], i, h_score[blk, 0], h_rank[blk, 0], h_row[blk, 0])):
                continue  # inline fast reject: most rows lose to the block heap's worst entry
            size = _heap_push(h_score[blk], h_rank[blk], h_row[blk], size, s, tie_rank[i], i)
        sizes[blk] = size
    f_score = np.full(k, -np.inf)
    f_rank = np.full(k, INT32_MAX, dtype=np.int32)
    f_row = np.full(k, -1, dtype=np.int32)
    size = 0
    for blk in range(n_blocks):
        for j in range(sizes[blk]):
            size = _heap_push(f_score, f_rank, f_row, size, h_score[blk, j], h_rank[blk, j], h_row[blk, j])
    return _heap_sorted(f_score, f_rank, f_row, size)


def _check_inputs(
    vectors: object, norms: object, query: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    vectors = check_array(vectors, "vectors", np.float64, 2)
    n, d = vectors.shape
    norms = check_array(norms, "norms", np.float64, 1, n)
    query = check_array(query, "query", np.float64, 1, d)
    query_norm = math.sqrt(float(np.dot(query, query)))
    return vectors, norms, query, query_norm


def cosine_scores(
    vectors: npt.NDArray[np.float64], norms: npt.NDArray[np.float64], query: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Return the cosine of every row with ``query`` (numba path, parallel over rows).

    Parameters
    ----------
    vectors : float64 (n, d), C-contiguous (a read-only memory map is fine).
    norms : float64 (n,), the Euclidean norm of each row.
    query : float64 (d,).

    Returns
    -------
    scores : float64 (n,); 0.0 where a row norm is 0 or the query is all zeros.
    """
    vectors, norms, query, query_norm = _check_inputs(vectors, norms, query)
    return _cosine_scores(vectors, norms, query, query_norm)


def cosine_scores_numpy(
    vectors: npt.NDArray[np.float64], norms: npt.NDArray[np.float64], query: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Same contract as :func:`cosine_scores`, with numpy only (one ``einsum`` pass over the rows)."""
    vectors, norms, query, query_norm = _check_inputs(vectors, norms, query)
    return _cosine_scores_numpy(vectors, norms, query, query_norm)


def _cosine_scores_numpy(vectors: np.ndarray, norms: np.ndarray, query: np.ndarray, query_norm: float) -> np.ndarray:
    out = np.zeros(vectors.shape[0], dtype=np.float64)
    if query_norm == 0.0 or vectors.shape[0] == 0:
        return out
    denom = norms * query_norm
    # einsum, not BLAS ``vectors @ query``: gemv rounds a row differently depending on n and its
    # offset, so the same vector scored in two matrices (an index caught up vs rebuilt) or twice in
    # one (identical texts) could differ in the last bit and break id tie-breaks; measured as fast.
    np.divide(np.einsum("ij,j->i", vectors, query), denom, out=out, where=denom != 0.0)
    return out


def cosine_topk(
    vectors: npt.NDArray[np.float64],
    norms: npt.NDArray[np.float64],
    query: npt.NDArray[np.float64],
    k: int,
    tie_rank: npt.NDArray[np.int32],
    min_score: float = -math.inf,
    row_mask: npt.NDArray[np.bool_] | None = None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """Return the ``k`` rows most similar to ``query``, scanning once (numba path, parallel).

    Parameters
    ----------
    vectors, norms, query : as in :func:`cosine_scores`.
    k : int >= 0; ``k > n`` returns every qualifying row.
    tie_rank : int32 (n,); equal cosines are ordered by lower rank first (then lower row).
    min_score : float; only rows with ``cosine >= min_score`` (inclusive) qualify. For a strict
        floor such as the recall anchor floor ``cosine > 0.1`` pass ``np.nextafter(0.1, inf)``.
    row_mask : bool (n,) or None; rows with ``False`` never qualify.

    Returns
    -------
    rows : int32 (m,), best first (cosine desc, tie_rank asc, row asc), m <= k.
    scores : float64 (m,), their cosines.
    """
    vectors, norms, query, query_norm = _check_inputs(vectors, norms, query)
    n = vectors.shape[0]
    tie_rank = check_array(tie_rank, "tie_rank", np.int32, 1, n)
    mask = check_mask(row_mask, "row_mask", n)
    k = min(check_k(k), n)
    return _cosine_topk(vectors, norms, query, query_norm, k, tie_rank, float(min_score), mask)


def cosine_topk_numpy(
    vectors: npt.NDArray[np.float64],
    norms: npt.NDArray[np.float64],
    query: npt.NDArray[np.float64],
    k: int,
    tie_rank: npt.NDArray[np.int32],
    min_score: float = -math.inf,
    row_mask: npt.NDArray[np.bool_] | None = None,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """Same contract as :func:`cosine_topk`, with numpy only (BLAS scan, then argpartition + lexsort)."""
    vectors, norms, query, query_norm = _check_inputs(vectors, norms, query)
    n = vectors.shape[0]
    tie_rank = check_array(tie_rank, "tie_rank", np.int32, 1, n)
    mask = check_mask(row_mask, "row_mask", n)
    k = min(check_k(k), n)
    scores = _cosine_scores_numpy(vectors, norms, query, query_norm)
    eligible = scores >= float(min_score)
    if mask.shape[0]:
        eligible &= mask
    rows = _topk_numpy(scores, k, tie_rank, eligible)
    return rows, scores[rows]


# --- blocked all-pairs candidates (bulk import) ---------------------------------------------
#
# BLAS products are the only way to compare a block of new vectors with every stored one at
# memory speed, but a GEMM rounds each dot product differently depending on the block shapes, so
# (and, here, float32) values cannot decide ties or become edge weights. The bulk import therefore uses
# :func:`cosine_block` only to find candidates (everything within ``EXACT_MARGIN`` of the floor or
# of the k-th best), and recomputes each candidate's cosine with :func:`exact_cosine`, which depends
# on the two vectors alone: the same pair gives the same bits whatever the blocking.

# The candidate pass runs in float32 (half the memory traffic and twice the BLAS rate of float64);
# a 768-term float32 dot product of unit vectors is off by at most about 5e-5, so candidates are
# kept within this margin of every cut and then recomputed exactly.
EXACT_MARGIN = 2e-4


def cosine_block(
    vectors: npt.NDArray[np.float64] | npt.NDArray[np.float32], norms: npt.NDArray[np.float64],
    units: npt.NDArray[np.float32],
) -> npt.NDArray[np.float32]:  # fmt: skip
    """Approximate cosines (rows, queries) of raw ``vectors`` (norms given) with unit ``units``.

    One float32 BLAS product of a (rows, d) block with a (queries, d) block; rows of norm 0 score
    0. Memory: rows x queries float32 plus a float32 copy of the rows, so callers bound both.
    """
    if vectors.ndim != 2 or units.ndim != 2 or vectors.shape[1] != units.shape[1]:
        raise ValueError(f"cosine_block: shapes {vectors.shape} and {units.shape} do not match")
    dots = vectors.astype(np.float32) @ np.asarray(units, dtype=np.float32).T
    scale = np.zeros(len(norms), dtype=np.float64)
    np.divide(1.0, norms, out=scale, where=norms > 0.0)
    dots *= scale.astype(np.float32)[:, None]
    return dots


def exact_unit(vector: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``vector`` scaled to length 1 with a correctly rounded norm (zero stays zero); reproducible."""
    norm = math.sqrt(math.fsum((vector * vector).tolist()))
    if norm == 0.0:
        return np.zeros_like(vector, dtype=np.float64)
    return np.ascontiguousarray(vector / norm, dtype=np.float64)


def exact_cosine(unit_a: npt.NDArray[np.float64], unit_b: npt.NDArray[np.float64]) -> float:
    """Cosine of two :func:`exact_unit` vectors: a correctly rounded sum of the products.

    Depends on the two vectors only (not on any blocking, alignment or thread count), so equal
    vectors give bit-equal cosines and ties are real ties.
    """
    return math.fsum((unit_a * unit_b).tolist())
