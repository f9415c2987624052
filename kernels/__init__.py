"""Numeric kernels for mnemon: cosine top-k, token overlap and BM25, RRF, beam search, top-k.

Every kernel has two implementations with one contract: the numba path (``cosine_topk``, ...)
and a plain numpy path (``cosine_topk_numpy``, ...). Importing this package, and calling any
``*_numpy`` function, does not import numba (about 250 ms); the first call of a numba path does
(see ``kernels._jit``). The engine picks the numpy path where numba's import would cost more
than it saves (small stores) and calls :func:`warmup` where it will use the numba paths.

Arrays cross this boundary as C-contiguous numeric arrays with the dtypes documented on each
function; wrappers raise ``TypeError``/``ValueError`` for a wrong dtype, shape or contiguity and
pass read-only views to the jitted cores, so each core compiles a single specialisation.
Imports only numpy and ``kernels.*`` (architecture §3).
"""

from __future__ import annotations

import numpy as np

from kernels._jit import numba_loaded
from kernels.beam import VIA_ANCHOR, VIA_NONE, beam_search, beam_search_numpy
from kernels.cosine import (
    EXACT_MARGIN,
    cosine_block,
    cosine_scores,
    cosine_scores_numpy,
    cosine_topk,
    cosine_topk_numpy,
    exact_cosine,
    exact_unit,
)
from kernels.fusion import normalize_max, rrf, rrf_numpy
from kernels.overlap import bm25_scores, bm25_scores_numpy, overlap_counts, overlap_counts_numpy
from kernels.topk import topk, topk_numpy

__all__ = [
    "EXACT_MARGIN",
    "VIA_ANCHOR",
    "VIA_NONE",
    "beam_search",
    "beam_search_numpy",
    "bm25_scores",
    "bm25_scores_numpy",
    "cosine_block",
    "cosine_scores",
    "cosine_scores_numpy",
    "cosine_topk",
    "cosine_topk_numpy",
    "exact_cosine",
    "exact_unit",
    "normalize_max",
    "numba_loaded",
    "overlap_counts",
    "overlap_counts_numpy",
    "rrf",
    "rrf_numpy",
    "topk",
    "topk_numpy",
    "warmup",
]


def warmup() -> None:
    """Compile (or load from the numba cache) every numba kernel by calling it on tiny inputs."""
    n, d = 4, 8
    vectors = np.arange(n * d, dtype=np.float64).reshape(n, d)
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    rank = np.arange(n, dtype=np.int32)
    mask = np.ones(n, dtype=np.bool_)
    cosine_scores(vectors, norms, vectors[1].copy())
    cosine_topk(vectors, norms, vectors[1].copy(), 2, rank, row_mask=mask)
    topk(norms, 2, rank, mask)
    indptr = np.array([0, 2, 3, 4], dtype=np.int64)
    rows = np.array([0, 1, 2, 3], dtype=np.int32)
    tf = np.ones(4, dtype=np.int32)
    overlap_counts(indptr, rows, [0, 2], n)
    bm25_scores(indptr, rows, tf, np.ones(n), [0, 2], n, 1.0, 1.2, 0.75, mask)
    rrf([rows, rows[::-1]], n)
    edge_indptr = np.array([0, 1, 2, 2, 2], dtype=np.int64)
    nbrs = np.array([1, 0], dtype=np.int32)
    beam_search(
        edge_indptr, nbrs, np.ones(2), np.zeros(2, dtype=np.int8), np.ones(1), [0], [1.0],
        2, 2, 10, norms, 1.0, 0.4, rank, mask,
    )  # fmt: skip
