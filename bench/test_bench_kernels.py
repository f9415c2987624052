"""Kernel benchmarks: one group per kernel, numba and numpy paths side by side, per size.

Run::

    python -m pytest bench/test_bench_kernels.py --benchmark-only -p no:cacheprovider \
        --benchmark-group-by=group,param:n --benchmark-columns=median,iqr,min,rounds
    MNEMON_BENCH_1M=1 python -m pytest bench/test_bench_kernels.py --benchmark-only -p no:cacheprovider

Each benchmark checks its result against the other path (computed once, untimed) and records
``extra_info`` (N, d, k, threads; GB/s and % of the measured bandwidth for the vector scans).
"""

from __future__ import annotations

import numpy as np
import pytest
from bench.conftest import DIM, SIZES

import kernels
from mnemon.records import ANCHOR_TOP_K, BEAM_PARAMS, BM25_B, BM25_K1, LAMBDA_SEMANTIC, LAMBDA_STRUCTURAL, RRF_K, Intent

IMPLS = ["numba", "numpy"]
K = ANCHOR_TOP_K


def _median(benchmark) -> float | None:  # type: ignore[no-untyped-def]
    stats = getattr(benchmark, "stats", None)
    return stats.stats.median if stats is not None else None


def _record_bandwidth(benchmark, nbytes: int, bandwidth: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
    median = _median(benchmark)
    benchmark.extra_info["machine_gbs"] = round(bandwidth["best_gbs"], 1)
    if median:
        gbs = nbytes / median / 1e9
        benchmark.extra_info["gbs"] = round(gbs, 1)
        benchmark.extra_info["pct_of_bandwidth"] = round(100 * gbs / bandwidth["best_gbs"], 1)


@pytest.mark.benchmark(group="bandwidth")
@pytest.mark.parametrize("n", SIZES)
def test_bandwidth_probe(benchmark, vector_data, n):
    """The physical floor: a numba sum over the same matrix the cosine kernels scan."""
    from bench.bandwidth import _sum_parallel

    flat = vector_data(n).vectors.reshape(-1)
    total = benchmark(_sum_parallel, flat)
    assert np.isfinite(total)
    benchmark.extra_info.update(N=n, d=DIM, bytes=flat.nbytes)


@pytest.mark.benchmark(group="cosine_topk")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", SIZES)
def test_cosine_topk(benchmark, vector_data, memory_bandwidth, num_threads, n, impl):
    data = vector_data(n)
    func = kernels.cosine_topk if impl == "numba" else kernels.cosine_topk_numpy
    other = kernels.cosine_topk_numpy if impl == "numba" else kernels.cosine_topk
    rows, scores = benchmark(func, data.vectors, data.norms, data.query, K, data.tie_rank)
    want_rows, want_scores = other(data.vectors, data.norms, data.query, K, data.tie_rank)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, rtol=1e-12)
    benchmark.extra_info.update(N=n, d=DIM, k=K, threads=num_threads)
    _record_bandwidth(benchmark, data.vectors.nbytes, memory_bandwidth)


@pytest.mark.benchmark(group="cosine_scores")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", SIZES)
def test_cosine_scores(benchmark, vector_data, memory_bandwidth, num_threads, n, impl):
    data = vector_data(n)
    func = kernels.cosine_scores if impl == "numba" else kernels.cosine_scores_numpy
    other = kernels.cosine_scores_numpy if impl == "numba" else kernels.cosine_scores
    scores = benchmark(func, data.vectors, data.norms, data.query)
    np.testing.assert_allclose(scores, other(data.vectors, data.norms, data.query), rtol=1e-12, atol=1e-15)
    benchmark.extra_info.update(N=n, d=DIM, threads=num_threads)
    _record_bandwidth(benchmark, data.vectors.nbytes, memory_bandwidth)


_CODED: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _coded(data, n):  # type: ignore[no-untyped-def]
    """The int8 codes of the benchmark matrix (coded once per size, untimed)."""
    from mnemon.store.vectors import quantize

    if n not in _CODED:
        _CODED[n] = quantize(data.vectors)
    return _CODED[n]


@pytest.mark.benchmark(group="int8_code_dots")
@pytest.mark.parametrize("impl", [*IMPLS, "numpy-2-threads"])
@pytest.mark.parametrize("n", SIZES)
def test_int8_code_dots(benchmark, vector_data, memory_bandwidth, num_threads, n, impl):
    """The bounded first pass of a large store's vector scan: an eighth of cosine_scores' bytes."""
    from kernels import quantized

    data = vector_data(n)
    codes, _mult, _resid = _coded(data, n)
    q, _scale, _error = quantized.code_query(data.query)  # type: ignore[misc]
    if impl == "numba":
        dots = benchmark(quantized.code_dots, codes, q)
    else:
        threads = 2 if impl == "numpy-2-threads" else 1
        dots = benchmark(quantized.code_dots_numpy, codes, q, threads)
    np.testing.assert_array_equal(dots, codes.astype(np.int64) @ q.astype(np.int64))  # exact integers
    benchmark.extra_info.update(N=n, d=DIM, threads=num_threads if impl == "numba" else impl)
    _record_bandwidth(benchmark, codes.nbytes, memory_bandwidth)


@pytest.mark.benchmark(group="topk")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", SIZES)
def test_topk(benchmark, vector_data, n, impl):
    data = vector_data(n)
    scores = kernels.cosine_scores_numpy(data.vectors, data.norms, data.query)
    func = kernels.topk if impl == "numba" else kernels.topk_numpy
    rows = benchmark(func, scores, K, data.tie_rank)
    assert rows.tolist() == np.argsort(-scores, kind="stable")[:K].tolist()
    benchmark.extra_info.update(N=n, k=K)


@pytest.mark.benchmark(group="overlap_counts")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", SIZES)
def test_overlap_counts(benchmark, token_data, n, impl):
    data = token_data(n)
    func = kernels.overlap_counts if impl == "numba" else kernels.overlap_counts_numpy
    other = kernels.overlap_counts_numpy if impl == "numba" else kernels.overlap_counts
    counts = benchmark(func, data.post_indptr, data.post_rows, data.query_ids, n)
    np.testing.assert_array_equal(counts, other(data.post_indptr, data.post_rows, data.query_ids, n))
    assert counts.max() >= 2
    benchmark.extra_info.update(N=n, nnz=int(data.post_rows.size), query_tokens=int(data.query_ids.size))


@pytest.mark.benchmark(group="bm25")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("n", SIZES)
def test_bm25_scores(benchmark, token_data, n, impl, masked):
    data = token_data(n)
    mask = np.arange(n) % 10 != 0 if masked else None  # 10 % of rows out of scope (e.g. forgotten)
    func = kernels.bm25_scores if impl == "numba" else kernels.bm25_scores_numpy
    other = kernels.bm25_scores_numpy if impl == "numba" else kernels.bm25_scores
    args = (data.post_indptr, data.post_rows, data.post_tf, data.doc_len, data.query_ids,
            n, float(data.doc_len.mean()), BM25_K1, BM25_B, mask)  # fmt: skip
    scores = benchmark(func, *args)
    np.testing.assert_array_equal(scores, other(*args))
    assert scores.max() > 0.0
    benchmark.extra_info.update(N=n, nnz=int(data.post_rows.size), query_tokens=int(data.query_ids.size), masked=masked)


@pytest.mark.benchmark(group="rrf")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", SIZES)
def test_rrf(benchmark, n, impl):
    rng = np.random.default_rng(n)
    lists = [rng.choice(n, K, replace=False).astype(np.int32) for _ in range(4)]
    func = kernels.rrf if impl == "numba" else kernels.rrf_numpy
    scores = benchmark(func, lists, n, RRF_K)
    np.testing.assert_array_equal(scores, (kernels.rrf_numpy if impl == "numba" else kernels.rrf)(lists, n, RRF_K))
    benchmark.extra_info.update(N=n, lists=len(lists), k=RRF_K)


@pytest.mark.benchmark(group="beam")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", SIZES)
def test_beam_search(benchmark, graph_data, num_threads, n, impl):
    data = graph_data(n)
    params = BEAM_PARAMS[Intent.GENERAL]
    type_weight = np.full(5, 0.25)
    type_weight[4] = 0.0
    func = kernels.beam_search if impl == "numba" else kernels.beam_search_numpy
    other = kernels.beam_search_numpy if impl == "numba" else kernels.beam_search
    args = (data.indptr, data.nbr_rows, data.weights, data.etype, type_weight, data.anchor_rows,
            data.anchor_scores, params.width, params.depth, params.max_visited, data.similarity,
            LAMBDA_STRUCTURAL, LAMBDA_SEMANTIC, data.id_rank)  # fmt: skip
    best, via = benchmark(func, *args)
    want_best, want_via = other(*args)
    np.testing.assert_array_equal(best, want_best)
    np.testing.assert_array_equal(via, want_via)
    benchmark.extra_info.update(
        N=n, edges=int(data.nbr_rows.size), anchors=int(data.anchor_rows.size),
        width=params.width, depth=params.depth, max_visited=params.max_visited,
        scored=int(np.isfinite(best).sum()),
    )  # fmt: skip
