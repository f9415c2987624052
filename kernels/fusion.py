"""Reciprocal rank fusion of anchor lists and max-normalisation (contract §4.10 step 3, Decision 2).

A row at 0-based position ``r`` of a ranked list contributes ``1 / (k + r + 1)`` (k = ``RRF_K``,
60), summed over the lists. Each list ranks distinct rows; if a row appears more than once in one
list, only its first (best) position counts. Lists are added in the order given, so the numba and
numpy paths produce bit-identical sums.

Imports only numpy and ``kernels.*``; numba is loaded on the first jitted call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kernels._jit import jit
from kernels.topk import readonly_view


_SHORT_LIST = 64  # up to this length, duplicates are found by scanning the list itself


@jit()
def _rrf(rows, offsets, n_rows, k):
    scores = np.zeros(n_rows, dtype=np.float64)
    n_lists = offsets.shape[0] - 1
    long_lists = False
    for li in range(n_lists):
        long_lists |= offsets[li + 1] - offsets[li] > _SHORT_LIST
    # Anchor lists are short (top 20): a quadratic duplicate scan beats allocating an n-row array.
    seen = np.full(n_rows if long_lists else 0, -1, dtype=np.int64)  # last list that scored a row
    for li in range(n_lists):
        lo = offsets[li]
        m = offsets[li + 1] - lo
        for pos in range(m):
            r = rows[lo + pos]
            if m > _SHORT_LIST:
                if seen[r] == li:
                    continue
                seen[r] = li
            else:
                dup = False
                for earlier in range(pos):
                    if rows[lo + earlier] == r:
                        dup = True
                        break
                if dup:
                    continue
            scores[r] += 1.0 / (k + pos + 1.0)
    return scores


def _check_lists(ranked_lists: Sequence[npt.ArrayLike], n_rows: int, k: float) -> list[np.ndarray]:
    if n_rows < 0:
        raise ValueError(f"n_rows must be >= 0, got {n_rows}")
    if not k >= 0:
        raise ValueError(f"k must be >= 0, got {k}")
    out = []
    for i, lst in enumerate(ranked_lists):
        arr = np.asarray(lst)
        if arr.ndim != 1:
            raise ValueError(f"ranked_lists[{i}] must be 1-dimensional, got shape {arr.shape}")
        if arr.size == 0:
            arr = arr.astype(np.int32)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ranked_lists[{i}] must hold integer rows, got {arr.dtype.name}")
        if arr.size and (arr.min() < 0 or arr.max() >= n_rows):
            raise ValueError(f"ranked_lists[{i}] holds a row outside [0, {n_rows})")
        out.append(arr.astype(np.int32, copy=False))
    return out


def rrf(ranked_lists: Sequence[npt.ArrayLike], n_rows: int, k: float = 60) -> npt.NDArray[np.float64]:
    """Fuse ranked row lists by reciprocal rank (numba path).

    Parameters
    ----------
    ranked_lists : sequence of integer arrays (m_i,), each a ranking of rows best first; values in
        ``[0, n_rows)``. Any integer dtype is accepted (converted to int32).
    n_rows : int, length of the result.
    k : float, the RRF constant (``records.RRF_K`` = 60).

    Returns
    -------
    scores : float64 (n_rows,), ``Σ_lists 1/(k + pos + 1)``; 0 for rows in no list.
    """
    lists = _check_lists(ranked_lists, n_rows, k)
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([a.size for a in lists])
    rows = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int32)
    return _rrf(readonly_view(rows.astype(np.int32, copy=False)), readonly_view(offsets), int(n_rows), float(k))


def rrf_numpy(ranked_lists: Sequence[npt.ArrayLike], n_rows: int, k: float = 60) -> npt.NDArray[np.float64]:
    """Same contract as :func:`rrf`, with numpy only."""
    lists = _check_lists(ranked_lists, n_rows, k)
    scores = np.zeros(int(n_rows), dtype=np.float64)
    for arr in lists:
        rows, first = np.unique(arr, return_index=True)  # first position of each distinct row
        scores[rows] += 1.0 / (float(k) + first + 1.0)
    return scores


def normalize_max(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Divide by the largest finite score so the best becomes 1.0 (contract §4.10 step 3).

    Parameters
    ----------
    scores : float64 (n,).

    Returns
    -------
    float64 (n,), a new array. If no finite score is positive (empty input, all zero, all
    negative or non-finite), an unchanged copy is returned.

    Plain numpy: one reduction and one division, nothing for numba to gain.
    """
    arr = np.asarray(scores)
    if arr.dtype != np.float64:
        raise TypeError(f"scores must have dtype float64, got {arr.dtype.name}")
    if arr.ndim != 1:
        raise ValueError(f"scores must be 1-dimensional, got shape {arr.shape}")
    finite = arr[np.isfinite(arr)]
    top = finite.max() if finite.size else 0.0
    if not top > 0.0:
        return arr.copy()
    return arr / top
