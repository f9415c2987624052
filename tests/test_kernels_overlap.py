"""kernels.overlap: overlap_counts and bm25_scores, numba and numpy paths, against the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernels
from mnemon.records import BM25_B, BM25_K1
from tests.reference import build_postings, readonly, ref_bm25, ref_overlap_counts

COUNTS = [pytest.param(kernels.overlap_counts, id="numba"), pytest.param(kernels.overlap_counts_numpy, id="numpy")]
BM25 = [pytest.param(kernels.bm25_scores, id="numba"), pytest.param(kernels.bm25_scores_numpy, id="numpy")]


def random_docs(rng: np.random.Generator, n: int, vocab: int, max_len: int = 12) -> list[list[int]]:
    # Zipf-ish token draw so that some tokens are common and some rare; some docs are empty.
    weights = 1.0 / np.arange(1, vocab + 1)
    weights /= weights.sum()
    return [rng.choice(vocab, int(rng.integers(0, max_len + 1)), p=weights).tolist() for _ in range(n)]


# --- overlap_counts ------------------------------------------------------------------------------


@pytest.mark.parametrize("overlap_counts", COUNTS)
@pytest.mark.parametrize("n, vocab", [(0, 5), (1, 3), (40, 10), (300, 60)])
def test_overlap_counts_match_oracle(overlap_counts, n, vocab):
    rng = np.random.default_rng(n + vocab)
    docs = random_docs(rng, n, vocab)
    indptr, rows, _, _ = build_postings(docs, vocab)
    query = rng.choice(vocab, 4).tolist()
    got = overlap_counts(indptr, rows, readonly(np.array(query, dtype=np.int32)), n)
    assert got.dtype == np.int32
    assert got.tolist() == ref_overlap_counts(docs, query)


@pytest.mark.parametrize("overlap_counts", COUNTS)
def test_overlap_counts_repeated_unknown_and_empty_query_tokens(overlap_counts):
    docs = [[0, 1, 1], [], [2], [0, 2]]
    indptr, rows, _, _ = build_postings(docs, 3)
    # Token 0 twice counts once; -1 and 7 are not in the vocabulary.
    assert overlap_counts(indptr, rows, [0, 0, -1, 7, 2], 4).tolist() == [1, 0, 1, 2]
    assert overlap_counts(indptr, rows, [], 4).tolist() == [0, 0, 0, 0]
    assert overlap_counts(indptr, rows, np.array([1], dtype=np.int64), 4).tolist() == [1, 0, 0, 0]


@pytest.mark.parametrize("overlap_counts", COUNTS)
def test_overlap_counts_derive_the_spec_measures(overlap_counts):
    # §4.2: keyword |Q∩T|/|Q|, Jaccard |Q∩T|/|Q∪T|, causal |A∩B|/max, ContentSimilarity max of ratios.
    docs = [[0, 1, 2, 3], [2, 3], [4]]
    indptr, rows, _, _ = build_postings(docs, 5)
    query = [1, 2, 5 - 1]
    inter = overlap_counts(indptr, rows, query, 3)
    sizes = np.array([len(set(d)) for d in docs])
    assert (inter / len(query)).tolist() == [2 / 3, 1 / 3, 1 / 3]
    assert (inter / (len(query) + sizes - inter)).tolist() == [2 / 5, 1 / 4, 1 / 3]
    assert (inter / np.maximum(len(query), sizes)).tolist() == [2 / 4, 1 / 3, 1 / 3]


@pytest.mark.parametrize("overlap_counts", COUNTS)
def test_overlap_counts_reject_bad_postings(overlap_counts):
    rows = np.array([0, 1], dtype=np.int32)
    with pytest.raises(TypeError):
        overlap_counts(np.array([0, 2], dtype=np.int32), rows, [0], 2)
    with pytest.raises(ValueError):
        overlap_counts(np.array([0, 3], dtype=np.int64), rows, [0], 2)
    with pytest.raises(TypeError):
        overlap_counts(np.array([0, 2], dtype=np.int64), rows, [0.5], 2)


# --- bm25_scores ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bm25_scores", BM25)
def test_bm25_hand_computed_example(bm25_scores):
    # Tokens a=0 b=1 c=2 d=3. doc0 "a b a" (len 3), doc1 "b c" (len 2), doc2 "c c c d" (len 4).
    # N = 3, avgdl = 3, k1 = 1.2, b = 0.75; query "a c".
    # idf(a) = ln(1 + (3-1+0.5)/(1+0.5)) = ln(8/3); idf(c) = ln(1 + (3-2+0.5)/(2+0.5)) = ln(1.6).
    # doc0: tf(a)=2, K = 1.2*(0.25 + 0.75*3/3) = 1.2   -> ln(8/3) * 2*2.2/(2+1.2) = ln(8/3) * 1.375
    # doc1: tf(c)=1, K = 1.2*(0.25 + 0.75*2/3) = 0.9   -> ln(1.6) * 2.2/1.9
    # doc2: tf(c)=3, K = 1.2*(0.25 + 0.75*4/3) = 1.5   -> ln(1.6) * 6.6/4.5
    docs = [[0, 1, 0], [1, 2], [2, 2, 2, 3]]
    indptr, rows, tf, doc_len = build_postings(docs, 4)
    got = bm25_scores(indptr, rows, tf, doc_len, [0, 2], 3, 3.0, 1.2, 0.75)
    want = [0.9808292530117262 * 1.375, 0.47000362924573563 * 2.2 / 1.9, 0.47000362924573563 * 6.6 / 4.5]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(want, [1.3486402228911234, 0.5442147286003255, 0.6893386562270789], rtol=1e-13)
    # A query token repeated in the query counts once.
    np.testing.assert_array_equal(bm25_scores(indptr, rows, tf, doc_len, [2, 0, 2, 0], 3, 3.0, 1.2, 0.75), got)


@pytest.mark.parametrize("bm25_scores", BM25)
def test_bm25_mask_counts_df_over_masked_in_rows(bm25_scores):
    # Same docs with doc1 out of scope: N = 2 (caller), df(c) = 1 -> idf(c) = ln(1 + 1.5/1.5) = ln 2.
    docs = [[0, 1, 0], [1, 2], [2, 2, 2, 3]]
    indptr, rows, tf, doc_len = build_postings(docs, 4)
    mask = readonly(np.array([True, False, True]))
    got = bm25_scores(indptr, rows, tf, doc_len, [2], 2, 3.5, 1.2, 0.75, mask)
    k = 1.2 * (0.25 + 0.75 * 4 / 3.5)
    assert got[0] == 0.0 and got[1] == 0.0
    assert got[2] == pytest.approx(math.log(2.0) * 3 * 2.2 / (3 + k), rel=1e-14)


@pytest.mark.parametrize("bm25_scores", BM25)
@pytest.mark.parametrize("n, vocab", [(0, 4), (1, 2), (50, 12), (400, 80)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("idf_power", [1.0, 2.0])
def test_bm25_matches_oracle(bm25_scores, n, vocab, masked, idf_power):
    rng = np.random.default_rng(n * 7 + vocab + masked)
    docs = random_docs(rng, n, vocab)
    indptr, rows, tf, doc_len = build_postings(docs, vocab)
    scope = rng.random(n) < 0.7 if masked else np.ones(n, dtype=bool)
    members = [len(d) for d, ok in zip(docs, scope) if ok]
    n_docs, avgdl = len(members), (sum(members) / len(members) if members else 0.0)
    query = rng.choice(vocab, 5).tolist() + [-1, vocab + 3]
    got = bm25_scores(
        indptr, rows, tf, doc_len, query, n_docs, avgdl, BM25_K1, BM25_B, readonly(scope) if masked else None,
        idf_power,
    )  # fmt: skip
    want = ref_bm25(docs, query, BM25_K1, BM25_B, scope.tolist(), idf_power=idf_power)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert np.all(got >= 0.0)


def test_bm25_numba_and_numpy_paths_agree_bit_for_bit():
    rng = np.random.default_rng(99)
    docs = random_docs(rng, 500, 50, max_len=30)
    indptr, rows, tf, doc_len = build_postings(docs, 50)
    query = rng.choice(50, 6)
    args = (indptr, rows, tf, doc_len, query, 500, float(doc_len.mean()), BM25_K1, BM25_B)
    np.testing.assert_array_equal(kernels.bm25_scores(*args), kernels.bm25_scores_numpy(*args))
    # idf_power 1 is Okapi's own bit for bit; another power agrees across the paths too
    np.testing.assert_array_equal(kernels.bm25_scores(*args, None, 1.0), kernels.bm25_scores(*args))
    np.testing.assert_array_equal(kernels.bm25_scores(*args, None, 2.0), kernels.bm25_scores_numpy(*args, None, 2.0))


@pytest.mark.parametrize("bm25_scores", BM25)
def test_bm25_edge_cases_empty_query_empty_docs_int32_lengths_zero_avgdl(bm25_scores):
    docs: list[list[int]] = [[], [0], []]
    indptr, rows, tf, doc_len = build_postings(docs, 1)
    assert bm25_scores(indptr, rows, tf, doc_len, [], 3, 1 / 3, 1.2, 0.75).tolist() == [0.0, 0.0, 0.0]
    as_int = readonly(doc_len.astype(np.int32))
    np.testing.assert_array_equal(
        bm25_scores(indptr, rows, tf, as_int, [0], 3, 1 / 3, 1.2, 0.75),
        bm25_scores(indptr, rows, tf, doc_len, [0], 3, 1 / 3, 1.2, 0.75),
    )
    # avgdl <= 0: no length normalisation (len/avgdl taken as 1) instead of a division by zero.
    got = bm25_scores(indptr, rows, tf, doc_len, [0], 3, 0.0, 1.2, 0.75)
    assert got[1] == pytest.approx(math.log(1 + 2.5 / 1.5) * 2.2 / 2.2)
    with pytest.raises(TypeError):
        bm25_scores(indptr, rows, tf.astype(np.int64), doc_len, [0], 3, 1.0, 1.2, 0.75)
    with pytest.raises(ValueError):
        bm25_scores(indptr, rows, tf, doc_len, [0], 3, 1.0, 1.2, 0.75, np.ones(2, dtype=bool))


@pytest.mark.parametrize("bm25_scores", BM25)
@pytest.mark.parametrize("masked", [False, True])
def test_bm25_term_weights_are_the_weighted_sum_of_each_terms_scores(bm25_scores, masked):
    # Feedback's added terms each have a weight: one weighted pass is Σ_t w(t)·score_t, the terms
    # taken in ascending id order, bit for bit (the query's order does not matter).
    rng = np.random.default_rng(7 + masked)
    docs = random_docs(rng, 300, 40, max_len=25)
    indptr, rows, tf, doc_len = build_postings(docs, 40)
    scope = readonly(rng.random(300) < 0.8) if masked else None
    n_docs = int(scope.sum()) if masked else 300
    query = [31, 4, 17, 9, 22, -1]
    weights = [0.5, 2.0, 0.0, 1.25, 0.3, 9.0]
    args = (indptr, rows, tf, doc_len)
    stats = (n_docs, float(doc_len.mean()), BM25_K1, BM25_B, scope, 3.0)
    got = bm25_scores(*args, query, *stats, weights)
    want = np.zeros(300)
    for term, weight in sorted(zip(query, weights)):
        want += weight * bm25_scores(*args, [term], *stats)
    np.testing.assert_array_equal(got, want)
    # weights of one are the unweighted sum, bit for bit
    np.testing.assert_array_equal(bm25_scores(*args, query, *stats, np.ones(6)), bm25_scores(*args, query, *stats))


def test_bm25_term_weights_numba_and_numpy_paths_agree_bit_for_bit():
    rng = np.random.default_rng(11)
    docs = random_docs(rng, 400, 60, max_len=30)
    indptr, rows, tf, doc_len = build_postings(docs, 60)
    query = rng.choice(60, 12, replace=False)
    weights = rng.random(12) * 3
    args = (indptr, rows, tf, doc_len, query, 400, float(doc_len.mean()), BM25_K1, BM25_B, None, 2.0, weights)
    np.testing.assert_array_equal(kernels.bm25_scores(*args), kernels.bm25_scores_numpy(*args))


@pytest.mark.parametrize("bm25_scores", BM25)
@pytest.mark.parametrize(
    "query, weights, message",
    [
        ([0, 1], [1.0], "one weight per query id"),
        ([0, 0], [1.0, 2.0], "distinct"),
        ([0, 1], [1.0, -0.5], "finite and >= 0"),
        ([0, 1], [1.0, float("nan")], "finite and >= 0"),
        ([0, 1], [[1.0, 2.0]], "one weight per query id"),
    ],
)
def test_bm25_term_weights_are_checked(bm25_scores, query, weights, message):
    indptr, rows, tf, doc_len = build_postings([[0, 1], [1]], 2)
    with pytest.raises(ValueError, match=message):
        bm25_scores(indptr, rows, tf, doc_len, query, 2, 1.5, 1.2, 0.75, None, 1.0, weights)


@pytest.mark.parametrize("bm25_scores", BM25)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_bm25_plain_out_is_the_idf_power_one_pass_bit_for_bit(bm25_scores, masked, weighted):
    # a long Chinese query's feedback reads the idf-power-1 scores beside its own: one pass writes both
    rng = np.random.default_rng(31 + 2 * masked + weighted)
    docs = random_docs(rng, 300, 40, max_len=25)
    indptr, rows, tf, doc_len = build_postings(docs, 40)
    scope = readonly(rng.random(300) < 0.8) if masked else None
    n_docs = int(scope.sum()) if masked else 300
    query = [3, 11, 27, 8, -1]
    weights = [0.4, 1.5, 2.0, 0.7, 1.0] if weighted else None
    head = (indptr, rows, tf, doc_len, query, n_docs, float(doc_len.mean()), BM25_K1, BM25_B, scope)
    plain = np.full(300, 7.0)  # overwritten, not added to
    got = bm25_scores(*head, 3.0, weights, plain)
    np.testing.assert_array_equal(got, bm25_scores(*head, 3.0, weights))
    np.testing.assert_array_equal(plain, bm25_scores(*head, 1.0, weights))
    assert np.any(plain != got)


@pytest.mark.parametrize("bm25_scores", BM25)
def test_bm25_plain_out_is_checked(bm25_scores):
    indptr, rows, tf, doc_len = build_postings([[0, 1], [1]], 2)
    args = (indptr, rows, tf, doc_len, [0, 1], 2, 1.5, 1.2, 0.75, None, 3.0, None)
    for bad in (np.zeros(3), np.zeros(2, dtype=np.float32), np.zeros((2, 1)), readonly(np.zeros(2)), np.zeros(4)[::2]):
        with pytest.raises(ValueError, match="plain_out"):
            bm25_scores(*args, bad)
