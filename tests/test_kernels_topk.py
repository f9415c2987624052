"""kernels.topk: numba and numpy paths against the sorted-list oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from tests.reference import readonly, ref_topk

IMPLS = [pytest.param(kernels.topk, id="numba"), pytest.param(kernels.topk_numpy, id="numpy")]


@pytest.mark.parametrize("topk", IMPLS)
@pytest.mark.parametrize("n, k", [(0, 5), (1, 1), (7, 3), (50, 10), (50, 50), (50, 80), (300, 20)])
def test_topk_matches_oracle_on_random_scores_with_ties(topk, n, k):
    rng = np.random.default_rng(n * 1000 + k)
    scores = rng.integers(0, 5, n).astype(np.float64)  # few distinct values: many ties
    tie_rank = rng.permutation(n).astype(np.int32)
    got = topk(readonly(scores), k, readonly(tie_rank))
    assert got.dtype == np.int32
    assert got.tolist() == ref_topk(scores.tolist(), k, tie_rank.tolist())


@pytest.mark.parametrize("topk", IMPLS)
def test_topk_equal_scores_break_by_tie_rank_not_position(topk):
    scores = np.full(6, 0.5)
    tie_rank = np.array([5, 3, 4, 0, 2, 1], dtype=np.int32)
    assert topk(scores, 3, tie_rank).tolist() == [3, 5, 4]


@pytest.mark.parametrize("topk", IMPLS)
def test_topk_never_returns_nan_or_minus_inf(topk):
    scores = np.array([math.nan, -math.inf, 1.0, -math.inf, 0.0, math.nan, math.inf])
    tie_rank = np.arange(7, dtype=np.int32)
    assert topk(scores, 10, tie_rank).tolist() == [6, 2, 4]


@pytest.mark.parametrize("topk", IMPLS)
def test_topk_respects_valid_mask_and_k_zero(topk):
    rng = np.random.default_rng(3)
    scores = rng.random(40)
    tie_rank = np.arange(40, dtype=np.int32)
    valid = rng.random(40) < 0.5
    assert topk(scores, 8, tie_rank, readonly(valid)).tolist() == ref_topk(scores.tolist(), 8, tie_rank.tolist(), valid.tolist())
    assert topk(scores, 0, tie_rank).tolist() == []


@pytest.mark.parametrize("topk", IMPLS)
def test_topk_duplicate_ranks_fall_back_to_row_order(topk):
    scores = np.array([1.0, 2.0, 2.0, 2.0])
    tie_rank = np.zeros(4, dtype=np.int32)
    assert topk(scores, 2, tie_rank).tolist() == [1, 2]


@pytest.mark.parametrize("topk", IMPLS)
def test_topk_rejects_wrong_dtype_shape_and_k(topk):
    scores = np.zeros(3)
    rank = np.arange(3, dtype=np.int32)
    with pytest.raises(TypeError):
        topk(scores.astype(np.float32), 1, rank)
    with pytest.raises(TypeError):
        topk(scores, 1, rank.astype(np.int64))
    with pytest.raises(ValueError):
        topk(scores, 1, rank[:2])
    with pytest.raises(ValueError):
        topk(np.zeros(6)[::2], 1, rank)
    with pytest.raises(ValueError):
        topk(scores, -1, rank)
    with pytest.raises(TypeError):
        topk(scores, 1.5, rank)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -math.inf, math.nan]), max_size=40),
    st.integers(0, 45),
    st.randoms(use_true_random=False),
)
def test_topk_property_both_paths_agree_with_oracle(values, k, random):
    n = len(values)
    ranks = list(range(n))
    random.shuffle(ranks)
    scores = np.array(values, dtype=np.float64)
    tie_rank = np.array(ranks, dtype=np.int32)
    want = ref_topk(values, k, ranks)
    assert kernels.topk(scores, k, tie_rank).tolist() == want
    assert kernels.topk_numpy(scores, k, tie_rank).tolist() == want
