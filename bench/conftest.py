"""Shared benchmark fixtures: seeded data generators, sizes, warm compilation, environment header.

Sizes: 10k and 100k rows by default; 1M rows only with ``MNEMON_BENCH_1M=1`` (the 1M x 768
float64 matrix alone is 6.1 GB and takes a while to generate). All data come from seeded
``np.random.default_rng`` generators and are cached per session, so numba and numpy paths of one
kernel see identical inputs. Arrays are handed over read-only, as the store does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DIM = 768  # nomic-embed-text, the seeds' model
VOCAB = 50_000
TOKENS_PER_DOC = 24  # token-sequence length per insight (content + tags + entities)
EDGES_PER_ROW = 35  # CSR entries per row (both directions), as in the 10k Go perf store
SIZES = [10_000, 100_000] + ([1_000_000] if os.environ.get("MNEMON_BENCH_1M") == "1" else [])
SEED = 20_240_601


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class VectorData:
    vectors: np.ndarray  # float64 (n, DIM)
    norms: np.ndarray  # float64 (n,)
    query: np.ndarray  # float64 (DIM,)
    tie_rank: np.ndarray  # int32 (n,)


@dataclass(frozen=True)
class TokenData:
    post_indptr: np.ndarray  # int64 (VOCAB+1,)
    post_rows: np.ndarray  # int32 (nnz,)
    post_tf: np.ndarray  # int32 (nnz,)
    doc_len: np.ndarray  # float64 (n,)
    query_ids: np.ndarray  # int32 (q,)


@dataclass(frozen=True)
class GraphData:
    indptr: np.ndarray  # int64 (n+1,)
    nbr_rows: np.ndarray  # int32 (m,)
    weights: np.ndarray  # float64 (m,)
    etype: np.ndarray  # int8 (m,)
    similarity: np.ndarray  # float64 (n,)
    id_rank: np.ndarray  # int32 (n,)
    anchor_rows: np.ndarray  # int32 (a,)
    anchor_scores: np.ndarray  # float64 (a,)


def make_vectors(n: int, d: int = DIM, seed: int = SEED) -> VectorData:
    """Uniform(-0.5, 0.5) rows, generated in chunks to keep the peak memory at one matrix."""
    rng = np.random.default_rng(seed)
    vectors = np.empty((n, d), dtype=np.float64)
    for lo in range(0, n, 65_536):
        hi = min(lo + 65_536, n)
        rng.random(out=vectors[lo:hi])
        vectors[lo:hi] -= 0.5
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    query = rng.random(d) - 0.5
    tie_rank = rng.permutation(n).astype(np.int32)
    return VectorData(_readonly(vectors), _readonly(norms), _readonly(query), _readonly(tie_rank))


def make_tokens(n: int, seed: int = SEED) -> TokenData:
    """Zipf-distributed token ids (a few very common words, a long tail), as postings CSR."""
    rng = np.random.default_rng(seed + 1)
    doc = np.repeat(np.arange(n, dtype=np.int64), TOKENS_PER_DOC)
    token = np.minimum(rng.zipf(1.2, doc.size) - 1, VOCAB - 1)
    key = token * n + doc  # sort by token, then row; repeats of (token, row) become tf
    uniq, tf = np.unique(key, return_counts=True)
    post_tok, post_rows = uniq // n, uniq % n
    indptr = np.zeros(VOCAB + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(post_tok, minlength=VOCAB))
    doc_len = np.full(n, float(TOKENS_PER_DOC))
    # A realistic query: one common word, two mid-frequency words, two rare ones.
    query = np.array([1, 20, 150, 3_000, 20_000], dtype=np.int32)
    return TokenData(
        _readonly(indptr), _readonly(post_rows.astype(np.int32)), _readonly(tf.astype(np.int32)),
        _readonly(doc_len), _readonly(query),
    )  # fmt: skip


def make_graph(n: int, seed: int = SEED) -> GraphData:
    """A random multigraph with ``EDGES_PER_ROW`` CSR entries per row, both directions of each edge."""
    rng = np.random.default_rng(seed + 2)
    m_half = n * EDGES_PER_ROW // 2
    src = rng.integers(0, n, m_half)
    # Mostly local edges (temporal backbone, same-session entities) plus some long-range ones.
    dst = np.where(rng.random(m_half) < 0.7, (src + rng.integers(1, 50, m_half)) % n, rng.integers(0, n, m_half))
    codes = rng.integers(0, 5, m_half).astype(np.int8)
    weights = rng.random(m_half)
    both_src = np.concatenate([src, dst])
    order = np.argsort(both_src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(both_src, minlength=n))
    return GraphData(
        indptr=_readonly(indptr),
        nbr_rows=_readonly(np.concatenate([dst, src])[order].astype(np.int32)),
        weights=_readonly(np.concatenate([weights, weights])[order]),
        etype=_readonly(np.concatenate([codes, codes])[order]),
        similarity=_readonly(rng.uniform(-0.2, 0.9, n)),
        id_rank=_readonly(rng.permutation(n).astype(np.int32)),
        anchor_rows=_readonly(rng.choice(n, 40, replace=False).astype(np.int32)),
        anchor_scores=_readonly(np.sort(rng.random(40))[::-1].copy()),
    )


_CACHE: dict[tuple[str, int], Any] = {}


def _cached(kind: str, n: int, make: Callable[[int], Any]) -> Any:
    if (kind, n) not in _CACHE:
        if kind == "vectors":  # keep at most one big matrix alive
            for key in [k for k in _CACHE if k[0] == "vectors"]:
                del _CACHE[key]
        _CACHE[(kind, n)] = make(n)
    return _CACHE[(kind, n)]


@pytest.fixture(scope="session")
def vector_data() -> Callable[[int], VectorData]:
    """Return a getter ``n -> VectorData`` (seeded, cached per size)."""
    return lambda n: _cached("vectors", n, make_vectors)


@pytest.fixture(scope="session")
def token_data() -> Callable[[int], TokenData]:
    """Return a getter ``n -> TokenData`` (seeded, cached per size)."""
    return lambda n: _cached("tokens", n, make_tokens)


@pytest.fixture(scope="session")
def graph_data() -> Callable[[int], GraphData]:
    """Return a getter ``n -> GraphData`` (seeded, cached per size)."""
    return lambda n: _cached("graph", n, make_graph)


@pytest.fixture(scope="session", autouse=True)
def warm_kernels() -> None:
    """Compile (or load from cache) every numba kernel before anything is timed."""
    import kernels

    kernels.warmup()


@pytest.fixture(scope="session")
def memory_bandwidth() -> dict[str, float]:
    """Measured read bandwidth of this machine (GB/s), once per session (bench/bandwidth.py)."""
    from bench.bandwidth import measure_bandwidth

    return measure_bandwidth(mib=1024, repeats=11)


@pytest.fixture(scope="session")
def num_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Print the environment the numbers were measured in (apsw speedtest style)."""
    import numba

    try:
        import apsw

        sqlite = f"apsw {apsw.apswversion()}, SQLite {apsw.sqlite_lib_version()}"
    except ImportError:  # pragma: no cover
        sqlite = "apsw not installed"
    return [
        f"mnemon bench: numpy {np.__version__}, numba {numba.__version__}, {sqlite}",
        f"NUMBA_NUM_THREADS={os.environ.get('NUMBA_NUM_THREADS', '(unset)')} -> {numba.config.NUMBA_NUM_THREADS} threads,"
        f" NUMBA_THREADING_LAYER={os.environ.get('NUMBA_THREADING_LAYER', '(unset: workqueue)')},"
        f" cpus={os.cpu_count()}",
        f"sizes={SIZES} (MNEMON_BENCH_1M=1 adds 1M), d={DIM}",
    ]
