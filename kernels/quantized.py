"""Bounded int8 cosines: a first pass over an eighth of the bytes, then exact cosines where they count.

A 1M x 768 float64 matrix is 6.1 GB: one exact scan reads all of it, and a fresh process first
faults every page of it in (about 0.8 s of system time measured at 1M). Each row is therefore
also kept as int8 codes with a per-row scale (``v ≈ scale · codes``), 768 bytes a row, coded by
the vector index (``mnemon.store.vectors.quantize``), and the scan reads those instead. It is not an approximation of the result: each row carries a *slack*,
a proven bound on how far its approximate cosine can be from the exact one, so a caller keeps
every row whose interval could reach a cut (a floor, the k-th best) and recomputes just those
exactly with :func:`cosine_rows` (the row kernel of ``kernels.cosine.cosine_scores``) or
:func:`cosine_rows_numpy` (the einsum of ``cosine_scores_numpy``), bit-equal to that path's scan. Rows no interval can lift stay out for certain.

The bound, for a row ``v`` with codes ``c``, scale ``s`` and residual ``e = v - s·c``, and a unit
query ``u`` itself coded as ``u = t·q + f`` (int16 codes ``q``, scale ``t``, residual ``f``):
``v·u = s·t·(c·q) + s·(c·f) + e·u``, with ``|s·(c·f)| <= (|v| + |e|)·|f|`` and ``|e·u| <= |e|``. So
the approximate cosine ``s·t·(c·q) / |v|`` is within ``r + (1 + r)·|f|`` of the exact one, where
``r = |e| / |v|`` is stored per row (by the vector index) and ``|f|`` is known per query
(:func:`code_query`); :data:`ROUNDING_SLACK` covers the few float64 roundings of the final products
(the dot product ``c·q`` itself is an exact integer, so its value does not depend on the order of
summation, the thread count or the numba/numpy path). Rows of norm 0 have scale 0 and slack 0:
their cosine is exactly 0, as in the exact kernels.

Imports only numpy and ``kernels.*``; numba is loaded on the first jitted call.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import numpy.typing as npt

from kernels._jit import jit, prange
from kernels.cosine import _check_inputs, _cosine_row, _cosine_scores_numpy
from kernels.topk import check_array

CODE_MAX = 127  # the rows' int8 codes lie in [-127, 127] (mnemon.store.vectors.quantize codes them)
ROUNDING_SLACK = 1e-9  # cosine units: a few float64 roundings of the final products (module doc)
INT32_MAX = 2**31 - 1
PARALLEL_MIN_ROWS = 100_000  # the numpy scan splits into threads only above this many rows per part
PARALLEL_MAX_PARTS = 4


def query_code_max(dim: int) -> int:
    """Largest query code such that ``|c·q| <= 127·max|q|·dim`` stays inside int32 (int16 at most)."""
    return max(1, min(2**15 - 1, INT32_MAX // (CODE_MAX * max(1, dim))))


def code_query(query: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int16], float, float] | None:
    """Code the query's unit vector: ``(codes int16 (d,), scale t, |f| rounded up)``; None if zero."""
    query = np.asarray(query, dtype=np.float64)
    norm = math.sqrt(float(np.dot(query, query)))
    if norm == 0.0:
        return None
    unit = query / norm
    top = query_code_max(unit.shape[0])
    scale = float(np.max(np.abs(unit))) / top
    codes = np.clip(np.rint(unit / scale), -top, top)
    error = unit - codes * scale
    error_norm = math.sqrt(math.fsum((error * error).tolist()))
    return np.ascontiguousarray(codes, dtype=np.int16), scale, math.nextafter(error_norm, math.inf)


def slack(
    resid: npt.NDArray[np.float64], mult: npt.NDArray[np.float64], query_error: float
) -> npt.NDArray[np.float64]:
    """Per-row bound on ``|approximate - exact cosine|`` for a query coded with residual ``query_error``.

    0 for rows of norm 0 (``mult`` 0): both cosines are exactly 0 there.
    """
    return np.where(mult > 0.0, slack_bound(resid, query_error), 0.0)


def slack_bound(resid: npt.ArrayLike, query_error: float) -> npt.NDArray[np.float64]:
    """The bound of the module doc for relative residual(s) ``resid`` (no zero-row special case)."""
    r = np.asarray(resid, dtype=np.float64)
    return r + (1.0 + r) * query_error + ROUNDING_SLACK


@jit(parallel=True)
def _code_dots(codes, q):
    n, d = codes.shape
    out = np.empty(n, dtype=np.int32)
    for i in prange(n):
        row = codes[i]
        s = np.int32(0)
        # int32 products and sums (never wider): LLVM turns this into pairwise int16 multiply-adds
        # over a whole vector register; the bound of query_code_max keeps every sum inside int32.
        for j in range(d):
            s = np.int32(s + np.int32(row[j] * q[j]))
        out[i] = s
    return out


def _check_codes(codes: object, q: object) -> tuple[np.ndarray, np.ndarray]:
    codes = check_array(codes, "codes", np.int8, 2)
    q = check_array(q, "query codes", np.int16, 1, codes.shape[1])
    if codes.shape[1] and int(np.max(np.abs(q.astype(np.int64)))) > query_code_max(codes.shape[1]):
        raise ValueError("query codes exceed query_code_max(dim): the int32 sums could overflow")
    return codes, q


def code_dots(codes: npt.NDArray[np.int8], q: npt.NDArray[np.int16]) -> npt.NDArray[np.int32]:
    """``codes @ q`` as exact int32 integers (numba, parallel over rows)."""
    codes, q = _check_codes(codes, q)
    return _code_dots(codes, q)


def code_dots_numpy(codes: npt.NDArray[np.int8], q: npt.NDArray[np.int16], threads: int = 1) -> npt.NDArray[np.int32]:
    """Same values as :func:`code_dots` with numpy only: ``einsum`` summing in int32, on up to
    ``threads`` threads (row blocks of at least :data:`PARALLEL_MIN_ROWS`).

    einsum casts through small buffers (never a widened copy of the matrix) and runs about a
    third as fast as the two-thread numba scan, with no numba import (~0.55 s in a fresh process).
    """
    codes, q = _check_codes(codes, q)
    n = codes.shape[0]
    out = np.empty(n, dtype=np.int32)
    parts = max(1, min(int(threads), PARALLEL_MAX_PARTS, n // PARALLEL_MIN_ROWS))
    if parts == 1:
        np.einsum("ij,j->i", codes, q, dtype=np.int32, casting="unsafe", out=out)
        return out
    # einsum releases the GIL: row blocks on threads, each summing its own rows (same integers)
    bounds = [n * k // parts for k in range(parts + 1)]

    def scan(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        np.einsum("ij,j->i", codes[lo:hi], q, dtype=np.int32, casting="unsafe", out=out[lo:hi])

    workers = [threading.Thread(target=scan, args=(k,)) for k in range(1, parts)]
    for t in workers:
        t.start()
    scan(0)
    for t in workers:
        t.join()
    return out


def approx_cosines(
    dots: npt.NDArray[np.int32], mult: npt.NDArray[np.float64], query_scale: float
) -> npt.NDArray[np.float64]:
    """Approximate cosines from :func:`code_dots`: within :func:`slack` of the exact ones."""
    return mult * (query_scale * dots.astype(np.float64))


@jit()
def _cosine_rows(vectors, norms, query, query_norm, rows):
    out = np.empty(rows.shape[0], dtype=np.float64)
    for k in range(rows.shape[0]):
        out[k] = _cosine_row(vectors, norms, query, query_norm, rows[k])
    return out


def exact_scorer(
    vectors: npt.NDArray[np.float64], norms: npt.NDArray[np.float64], query: npt.NDArray[np.float64], *, numba: bool
) -> ExactScorer:
    """A function giving the exact cosines of any rows, bit-equal to that path's full scan there
    (``kernels.cosine_scores`` with ``numba``, else ``kernels.cosine_scores_numpy``'s einsum).

    The arrays are checked once, here: recall calls the scorer once per node its beam expands.
    """
    # a plain ndarray, not numpy.memmap: each memmap gather runs Python code
    return ExactScorer(*_check_inputs(np.asarray(vectors), np.asarray(norms), query), numba=numba)


class ExactScorer:
    """Exact cosines of given rows (:func:`exact_scorer`); with ``numba``, its checked arrays are what
    ``kernels.beam_search`` reads to compute the same values itself (``kernels.beam.ExactRead``)."""

    def __init__(self, vectors: np.ndarray, norms: np.ndarray, query: np.ndarray, query_norm: float, *,
                 numba: bool) -> None:  # fmt: skip
        self.vectors, self.norms, self.query, self.query_norm, self.numba = vectors, norms, query, query_norm, numba

    def __call__(self, rows: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
        picked = _check_rows(np.ascontiguousarray(rows, dtype=np.int64), self.vectors.shape[0])
        if self.numba:
            return _cosine_rows(self.vectors, self.norms, self.query, self.query_norm, picked)
        return _cosine_scores_numpy(
            np.ascontiguousarray(self.vectors[picked]), self.norms[picked], self.query, self.query_norm
        )


def cosine_rows_numpy(
    vectors: npt.NDArray[np.float64],
    norms: npt.NDArray[np.float64],
    query: npt.NDArray[np.float64],
    rows: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """Exact cosines of ``rows``, bit-equal to ``kernels.cosine_scores_numpy`` there (its einsum)."""
    return exact_scorer(vectors, norms, query, numba=False)(rows)


def _check_rows(rows: object, n: int) -> np.ndarray:
    rows = check_array(rows, "rows", np.int64, 1)
    if rows.shape[0] and (int(rows.min()) < 0 or int(rows.max()) >= n):
        raise ValueError(f"cosine_rows: rows must lie in [0, {n})")
    return rows


def cosine_rows(
    vectors: npt.NDArray[np.float64],
    norms: npt.NDArray[np.float64],
    query: npt.NDArray[np.float64],
    rows: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """Exact cosines of the given ``rows`` (int64), bit-equal to ``kernels.cosine_scores`` there."""
    return exact_scorer(vectors, norms, query, numba=True)(rows)
