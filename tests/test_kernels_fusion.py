"""kernels.fusion: rrf and normalize_max against the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from mnemon.records import RRF_K
from tests.reference import readonly, ref_rrf

RRF = [pytest.param(kernels.rrf, id="numba"), pytest.param(kernels.rrf_numpy, id="numpy")]


@pytest.mark.parametrize("rrf", RRF)
def test_rrf_hand_computed(rrf):
    # Row 3 is first in list A and third in list B: 1/61 + 1/63. Row 1 is second in A only: 1/62.
    got = rrf([np.array([3, 1], dtype=np.int32), np.array([0, 2, 3], dtype=np.int32)], 5, RRF_K)
    assert got.tolist() == [1 / 61, 1 / 62, 1 / 62, 1 / 61 + 1 / 63, 0.0]


@pytest.mark.parametrize("rrf", RRF)
@pytest.mark.parametrize("n, lists", [(0, 0), (1, 1), (30, 3), (200, 4)])
def test_rrf_matches_oracle(rrf, n, lists):
    rng = np.random.default_rng(n + lists)
    ranked = [readonly(rng.permutation(n)[: rng.integers(0, 21)].astype(np.int32)) for _ in range(lists)]
    got = rrf(ranked, n)
    np.testing.assert_array_equal(got, ref_rrf([r.tolist() for r in ranked], n, 60))


@pytest.mark.parametrize("rrf", RRF)
def test_rrf_counts_only_the_first_position_of_a_repeated_row(rrf):
    assert rrf([[2, 2, 0]], 3).tolist() == [1 / 63, 0.0, 1 / 61]


@pytest.mark.parametrize("rrf", RRF)
def test_rrf_long_lists_with_repeats_match_oracle(rrf):
    rng = np.random.default_rng(8)
    lists = [rng.integers(0, 300, 500).tolist(), rng.integers(0, 300, 10).tolist(), rng.integers(0, 300, 100).tolist()]
    np.testing.assert_array_equal(rrf(lists, 300), ref_rrf(lists, 300))


@pytest.mark.parametrize("rrf", RRF)
def test_rrf_accepts_empty_and_python_lists_and_other_int_dtypes(rrf):
    assert rrf([], 3).tolist() == [0.0, 0.0, 0.0]
    assert rrf([[], np.array([1], dtype=np.int64)], 3, k=0).tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("rrf", RRF)
def test_rrf_rejects_out_of_range_rows_and_float_lists(rrf):
    with pytest.raises(ValueError):
        rrf([[0, 3]], 3)
    with pytest.raises(ValueError):
        rrf([[-1]], 3)
    with pytest.raises(TypeError):
        rrf([[0.0]], 3)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.lists(st.integers(0, n - 1), max_size=25), max_size=4))))
def test_rrf_property_paths_agree_and_bounds_hold(case):
    n, lists = case
    got = kernels.rrf(lists, n)
    np.testing.assert_array_equal(got, kernels.rrf_numpy(lists, n))
    np.testing.assert_array_equal(got, ref_rrf(lists, n))
    assert np.all(got >= 0.0) and np.all(got <= len(lists) / 61 + 1e-15)


def test_normalize_max_divides_by_largest_finite_score():
    scores = np.array([0.5, 2.0, 1.0, -math.inf])
    assert kernels.normalize_max(scores).tolist() == [0.25, 1.0, 0.5, -math.inf]
    assert scores.tolist() == [0.5, 2.0, 1.0, -math.inf]  # input untouched
    assert kernels.normalize_max(np.array([math.inf, 4.0])).tolist() == [math.inf, 1.0]


def test_normalize_max_leaves_non_positive_and_empty_inputs_unchanged():
    for scores in (np.zeros(3), np.array([-1.0, -2.0]), np.zeros(0), np.array([math.nan])):
        out = kernels.normalize_max(readonly(scores))
        np.testing.assert_array_equal(out, scores)
        assert out.flags.writeable
    with pytest.raises(TypeError):
        kernels.normalize_max(np.zeros(3, dtype=np.float32))
