"""Array helpers of the hot index: CSR arrays from Python lists, a forward CSR inverted into posting
lists, bisection into an ordered column without gathering it, insertion into a big array by slice
copies, and the growth rule of the buffers. Pure numpy over arrays handed in; no index state."""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# _sorted_positions: up to this many wanted values are bisected in place instead of gathering the column
_FEW_BISECTIONS = 256


def _csr_from_lists(lists: list[list[int]], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(list(map(len, lists))) if lists else []
    flat = np.fromiter(chain.from_iterable(lists), dtype=dtype, count=int(ptr[-1]))  # C loops, no generator
    return ptr, flat


def _invert(ptr: np.ndarray, terms: np.ndarray, n_terms: int, *extra: np.ndarray) -> tuple[np.ndarray, ...]:
    """Postings by term from a forward CSR by row: (post_ptr, post_rows, *extra values)."""
    import numpy as np

    rows = np.repeat(np.arange(ptr.shape[0] - 1, dtype=np.int32), np.diff(ptr))
    order = np.argsort(terms, kind="stable")  # stable: rows ascending inside each posting list
    post_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=post_ptr[1:])
    return (post_ptr, np.ascontiguousarray(rows[order]), *(np.ascontiguousarray(e[order]) for e in extra))


def _sorted_positions(values: Any, order: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``searchsorted(values[order], wanted)``; a few wanted values are bisected in place, so the
    sorted copy (a 36 MB gather of ids at 1M rows) is not built. ``values``: an array, or a
    ``(whole, item)`` pair of callables (the whole array joined on demand, one element by index)."""
    import numpy as np

    whole, item = values if isinstance(values, tuple) else (lambda: values, values.__getitem__)
    if wanted.shape[0] > _FEW_BISECTIONS:
        return np.searchsorted(whole()[order], wanted)
    out = np.empty(wanted.shape[0], dtype=np.int64)
    for j, w in enumerate(wanted.tolist()):
        lo, hi = 0, int(order.shape[0])
        while lo < hi:
            mid = (lo + hi) // 2
            if item(int(order[mid])) < w:
                lo = mid + 1
            else:
                hi = mid
        out[j] = lo
    return out


def _insert_at(old: np.ndarray, at: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``np.insert(old, at, vals)`` for ascending ``at``, as a few slice copies (memory-bound)."""
    import numpy as np

    k = int(at.shape[0])
    out = np.empty(old.shape[0] + k, dtype=old.dtype)
    if k == 0:
        out[:] = old
        return out
    if k > 4096:
        mask = np.zeros(out.shape[0], dtype=np.bool_)
        mask[at + np.arange(k)] = True
        out[mask] = vals
        out[~mask] = old
        return out
    src = 0
    for i, a in enumerate(at.tolist()):
        out[src + i : a + i] = old[src:a]
        out[a + i] = vals[i]
        src = a
    out[src + k :] = old[src:]
    return out


def _headroom(size: int) -> int:
    """Capacity for an array about to hold ``size`` elements: geometric growth (amortised O(1) a row)."""
    return size + size // 8 + 64
