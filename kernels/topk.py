"""Deterministic top-k selection: fixed-size heaps, stable multi-key sorts, and the top-k kernel.

Ordering used everywhere in ``kernels``: an entry ``(score, rank, row)`` is *better* than another
when its score is higher; on equal scores when its ``rank`` is lower; on equal ranks when its
``row`` is lower. ``rank`` is a caller-supplied int32 array (``tie_rank`` / ``id_rank``) that
encodes the spec's tie-break order (importance desc, created_at desc, id asc; contract §4.2,
§4.10 step 6), so ties never depend on iteration order or on the number of threads; ``row`` only
matters if the caller hands in duplicate ranks. Rows whose score is ``-inf`` or NaN are never
returned. Empty heap slots hold the sentinels row ``-1``, score ``-inf``.

The jitted helpers here (``_heap_push``, ``_heap_sorted``, ``_argsort_desc``) are shared by
``cosine`` and ``beam``. Imports only numpy and ``kernels._jit``; numba is loaded on first use.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kernels._jit import jit

_NO_MASK = np.zeros(0, dtype=np.bool_)
_NO_MASK.flags.writeable = False
INT32_MAX = np.iinfo(np.int32).max


# --- jitted helpers ---------------------------------------------------------------------------


@jit()
def _better(score_a, rank_a, row_a, score_b, rank_b, row_b):
    """True if entry a sorts before entry b (score desc, rank asc, row asc)."""
    if score_a != score_b:
        return score_a > score_b
    if rank_a != rank_b:
        return rank_a < rank_b
    return row_a < row_b


@jit()
def _heap_push(h_score, h_rank, h_row, size, score, rank, row):
    """Offer one entry to a bounded heap whose root is its *worst* entry; return the new size.

    ``h_score`` f64 (k,), ``h_rank`` i32 (k,), ``h_row`` i32 (k,) are the heap's slots; ``size``
    is how many are in use. The heap keeps the best ``k`` entries offered so far.
    """
    k = h_score.shape[0]
    if size < k:
        i = size
        while i > 0:
            parent = (i - 1) // 2
            if _better(h_score[parent], h_rank[parent], h_row[parent], score, rank, row):
                h_score[i] = h_score[parent]
                h_rank[i] = h_rank[parent]
                h_row[i] = h_row[parent]
                i = parent
            else:
                break
        h_score[i] = score
        h_rank[i] = rank
        h_row[i] = row
        return size + 1
    if k == 0 or not _better(score, rank, row, h_score[0], h_rank[0], h_row[0]):
        return size
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        # Follow the worse child: it must stay above the better one.
        if right < size and _better(h_score[child], h_rank[child], h_row[child], h_score[right], h_rank[right], h_row[right]):
            child = right
        if _better(score, rank, row, h_score[child], h_rank[child], h_row[child]):
            h_score[i] = h_score[child]
            h_rank[i] = h_rank[child]
            h_row[i] = h_row[child]
            i = child
        else:
            break
    h_score[i] = score
    h_rank[i] = rank
    h_row[i] = row
    return size


@jit()
def _argsort_desc(scores, ranks, rows):
    """Return int64 positions sorting entries best first (score desc, rank asc, row asc).

    Bottom-up merge sort: stable, O(m log m), no recursion. ``ranks`` and ``rows`` are any
    integer arrays of the same length as ``scores``.
    """
    m = scores.shape[0]
    order = np.arange(m)
    buf = np.empty(m, dtype=np.int64)
    width = 1
    while width < m:
        lo = 0
        while lo < m:
            mid = min(lo + width, m)
            hi = min(lo + 2 * width, m)
            i = lo
            j = mid
            out = lo
            while i < mid and j < hi:
                a = order[i]
                b = order[j]
                if _better(scores[b], ranks[b], rows[b], scores[a], ranks[a], rows[a]):
                    buf[out] = b
                    j += 1
                else:
                    buf[out] = a
                    i += 1
                out += 1
            while i < mid:
                buf[out] = order[i]
                i += 1
                out += 1
            while j < hi:
                buf[out] = order[j]
                j += 1
                out += 1
            lo = hi
        order, buf = buf, order
        width *= 2
    return order


@jit()
def _heap_sorted(h_score, h_rank, h_row, size):
    """Return the heap's entries best first as (rows int32 (size,), scores f64 (size,))."""
    order = _argsort_desc(h_score[:size], h_rank[:size], h_row[:size])
    rows = np.empty(size, dtype=np.int32)
    scores = np.empty(size, dtype=np.float64)
    for i in range(size):
        rows[i] = h_row[order[i]]
        scores[i] = h_score[order[i]]
    return rows, scores


@jit()
def _topk(scores, k, tie_rank, valid):
    n = scores.shape[0]
    has_mask = valid.shape[0] != 0
    h_score = np.full(k, -np.inf)
    h_rank = np.full(k, INT32_MAX, dtype=np.int32)
    h_row = np.full(k, -1, dtype=np.int32)
    size = 0
    for i in range(n):
        s = scores[i]
        if not s > -np.inf:  # also rejects NaN
            continue
        if has_mask and not valid[i]:
            continue
        # Inline fast reject: most rows lose to the heap's worst entry (saves a call per row).
        if size == k and (k == 0 or not _better(s, tie_rank[i], i, h_score[0], h_rank[0], h_row[0])):
            continue
        size = _heap_push(h_score, h_rank, h_row, size, s, tie_rank[i], i)
    rows, _ = _heap_sorted(h_score, h_rank, h_row, size)
    return rows


# --- validation shared by the wrappers -----------------------------------------------------------


def readonly_view(arr: np.ndarray) -> np.ndarray:
    """Return a read-only view, so numba compiles one specialisation per kernel (architecture §6)."""
    if not arr.flags.writeable:
        return arr
    view = arr.view()
    view.flags.writeable = False
    return view


def check_array(arr: object, name: str, dtype: type, ndim: int = 1, length: int | None = None) -> np.ndarray:
    """Validate a kernel input (ndarray, exact dtype, C-contiguous, ndim, length); return it read-only."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(arr).__name__}")
    if arr.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {arr.dtype.name}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name} must have length {length}, got {arr.shape[0]}")
    return readonly_view(arr)


def check_mask(mask: object, name: str, length: int) -> np.ndarray:
    """Validate an optional bool row mask; ``None`` becomes the empty "no mask" array."""
    if mask is None:
        return _NO_MASK
    return check_array(mask, name, np.bool_, 1, length)


def check_k(k: object) -> int:
    """Validate a top-k size (a non-negative int)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return int(k)


# --- public wrappers ---------------------------------------------------------------------------


def topk(
    scores: npt.NDArray[np.float64],
    k: int,
    tie_rank: npt.NDArray[np.int32],
    valid: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.int32]:
    """Select the best ``k`` rows by score desc, then ``tie_rank`` asc, then row asc (numba path).

    Parameters
    ----------
    scores : float64 (n,), C-contiguous. Rows scoring ``-inf`` or NaN are never returned.
    k : int >= 0; ``k > n`` returns every eligible row.
    tie_rank : int32 (n,). Lower rank wins a tie.
    valid : bool (n,) or None. Rows with ``valid[i] == False`` are never returned.

    Returns
    -------
    rows : int32 (m,), m = min(k, number of eligible rows), best first.
    """
    scores = check_array(scores, "scores", np.float64)
    n = scores.shape[0]
    tie_rank = check_array(tie_rank, "tie_rank", np.int32, 1, n)
    mask = check_mask(valid, "valid", n)
    k = min(check_k(k), n)
    return _topk(scores, k, tie_rank, mask)


def topk_numpy(
    scores: npt.NDArray[np.float64],
    k: int,
    tie_rank: npt.NDArray[np.int32],
    valid: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.int32]:
    """Same contract as :func:`topk`, with numpy only (argpartition for the threshold + lexsort)."""
    scores = check_array(scores, "scores", np.float64)
    n = scores.shape[0]
    tie_rank = check_array(tie_rank, "tie_rank", np.int32, 1, n)
    mask = check_mask(valid, "valid", n)
    k = min(check_k(k), n)
    return _topk_numpy(scores, k, tie_rank, mask)


def _topk_numpy(scores: np.ndarray, k: int, tie_rank: np.ndarray, mask: np.ndarray) -> np.ndarray:
    eligible = scores > -np.inf  # False for NaN too
    if mask.shape[0]:
        eligible &= mask
    cand = np.flatnonzero(eligible)
    if k == 0 or cand.size == 0:
        return np.zeros(0, dtype=np.int32)
    if k < cand.size:
        cand_scores = scores[cand]
        # The k-th best score; every row scoring at least that may still win on tie_rank.
        kth = np.partition(cand_scores, cand.size - k)[cand.size - k]
        cand = cand[cand_scores >= kth]
    order = np.lexsort((cand, tie_rank[cand], -scores[cand]))[:k]
    return cand[order].astype(np.int32)
