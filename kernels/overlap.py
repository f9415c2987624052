"""Token-overlap and BM25 scoring over the inverted token index (postings CSR by token id).

Implements the counting core of contract §4.2 (keyword |Q∩T|/|Q|, causal |A∩B|/max(|A|,|B|),
ContentSimilarity, Jaccard) and Decision 12 (BM25 for recall). The index is a postings CSR:
token ``t`` occurs in rows ``post_rows[post_indptr[t]:post_indptr[t+1]]`` with term frequencies
``post_tf[...]`` (1 everywhere for a set-semantics index). Rows inside one posting list are
distinct. :func:`overlap_counts` returns |Q∩T| per row; the caller divides by |Q|, by the row's
unique-token count, or by |Q∪T| = |Q| + |T| − |Q∩T| to get each similarity measure.

Query tokens: each wrapper de-duplicates ``query_ids`` first (a token repeated in the query
counts once) and ignores ids outside ``[0, V)`` (callers may map unknown tokens to -1). Both
paths visit the query tokens in ascending id order, so the float sums are identical.

Imports only numpy, math and ``kernels.*``; numba is loaded on the first jitted call.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from kernels._jit import jit
from kernels.topk import check_array, check_mask


@jit()
def _overlap_counts(post_indptr, post_rows, query_ids, n_rows):
    counts = np.zeros(n_rows, dtype=np.int32)
    n_tokens = post_indptr.shape[0] - 1
    for q in range(query_ids.shape[0]):
        t = query_ids[q]
        if t < 0 or t >= n_tokens:
            continue
        for j in range(post_indptr[t], post_indptr[t + 1]):
            counts[post_rows[j]] += 1
    return counts


@jit()
def _bm25_scores(
    post_indptr, post_rows, post_tf, doc_len, query_ids, n_docs, avgdl, k1, b, row_mask, idf_power, term_weights,
    plain_out,
):  # fmt: skip
    n_rows = doc_len.shape[0]
    scores = np.zeros(n_rows, dtype=np.float64)
    has_mask = row_mask.shape[0] != 0
    weighted = term_weights.shape[0] != 0
    plain = plain_out.shape[0] != 0
    if plain:
        plain_out[:] = 0.0
    n_tokens = post_indptr.shape[0] - 1
    for q in range(query_ids.shape[0]):
        t = query_ids[q]
        if t < 0 or t >= n_tokens:
            continue
        lo = post_indptr[t]
        hi = post_indptr[t + 1]
        if has_mask:
            df = 0
            for j in range(lo, hi):
                if row_mask[post_rows[j]]:
                    df += 1
        else:
            df = hi - lo
        if df == 0:
            continue
        idf_plain = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        idf = idf_plain**idf_power if idf_power != 1.0 else idf_plain
        weight = term_weights[q] if weighted else 1.0
        for j in range(lo, hi):
            r = post_rows[j]
            if has_mask and not row_mask[r]:
                continue
            tf = float(post_tf[j])
            ratio = doc_len[r] / avgdl if avgdl > 0.0 else 1.0
            saturated = tf * (k1 + 1.0)
            norm = tf + k1 * (1.0 - b + b * ratio)
            part = idf * saturated / norm
            scores[r] += weight * part if weighted else part
            if plain:
                part = idf_plain * saturated / norm
                plain_out[r] += weight * part if weighted else part
    return scores


def _check_query(query_ids: object) -> np.ndarray:
    """Return the sorted unique query token ids as int32 (any integer dtype is accepted)."""
    q = np.asarray(query_ids)
    if q.ndim != 1:
        raise ValueError(f"query_ids must be 1-dimensional, got shape {q.shape}")
    if q.size and q.dtype.kind not in "iu":
        raise TypeError(f"query_ids must be integers, got {q.dtype.name}")
    return np.unique(q).astype(np.int32)


_UNWEIGHTED = np.empty(0, dtype=np.float64)
_NO_PLAIN = np.empty(0, dtype=np.float64)  # never written: an empty "out" array


def _check_plain_out(plain_out: object, n_rows: int) -> np.ndarray:
    """The optional out array of the idf-power-1 scores: float64, (n,), C-contiguous and writable."""
    if plain_out is None:
        return _NO_PLAIN
    if not isinstance(plain_out, np.ndarray) or plain_out.dtype != np.float64 or plain_out.shape != (n_rows,):
        raise ValueError(f"plain_out must be a float64 array of shape ({n_rows},)")
    if not plain_out.flags.c_contiguous or not plain_out.flags.writeable:
        raise ValueError("plain_out must be C-contiguous and writable")
    return plain_out


def _check_weighted_query(query_ids: object, term_weights: object) -> tuple[np.ndarray, np.ndarray]:
    """The query token ids in ascending order with their weights (an empty array for none). Weighted
    ids must be distinct: a repeated id would have two weights."""
    if term_weights is None:
        return _check_query(query_ids), _UNWEIGHTED
    q = np.asarray(query_ids)
    ids = _check_query(q)
    weights = np.asarray(term_weights, dtype=np.float64)
    if weights.ndim != 1 or weights.shape[0] != q.shape[0]:
        raise ValueError(f"term_weights must have one weight per query id ({q.shape[0]}), got shape {weights.shape}")
    if ids.shape[0] != q.shape[0]:
        raise ValueError("weighted query_ids must be distinct")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0.0):
        raise ValueError("term_weights must be finite and >= 0")
    return ids, np.ascontiguousarray(weights[np.argsort(q, kind="stable")])


def _check_postings(post_indptr: object, post_rows: object, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    post_indptr = check_array(post_indptr, "post_indptr", np.int64)
    if post_indptr.shape[0] < 1:
        raise ValueError("post_indptr must have at least one entry (V + 1)")
    post_rows = check_array(post_rows, "post_rows", np.int32)
    if post_indptr[0] != 0 or post_indptr[-1] != post_rows.shape[0]:
        raise ValueError("post_indptr must start at 0 and end at len(post_rows)")
    if n_rows < 0:
        raise ValueError(f"n_rows must be >= 0, got {n_rows}")
    return post_indptr, post_rows


def overlap_counts(
    post_indptr: npt.NDArray[np.int64],
    post_rows: npt.NDArray[np.int32],
    query_ids: npt.ArrayLike,
    n_rows: int,
) -> npt.NDArray[np.int32]:
    """Return |Q∩T| for every row: how many distinct query tokens each row contains (numba path).

    Parameters
    ----------
    post_indptr : int64 (V+1,), postings offsets by token id.
    post_rows : int32 (nnz,), row of each posting; values in ``[0, n_rows)`` (trusted, not checked).
    query_ids : integer (q,), query token ids; de-duplicated, ids outside ``[0, V)`` ignored.
    n_rows : int, number of rows in the store (length of the result).

    Returns
    -------
    counts : int32 (n_rows,).
    """
    post_indptr, post_rows = _check_postings(post_indptr, post_rows, n_rows)
    return _overlap_counts(post_indptr, post_rows, _check_query(query_ids), int(n_rows))


def overlap_counts_numpy(
    post_indptr: npt.NDArray[np.int64],
    post_rows: npt.NDArray[np.int32],
    query_ids: npt.ArrayLike,
    n_rows: int,
) -> npt.NDArray[np.int32]:
    """Same contract as :func:`overlap_counts`, with numpy only."""
    post_indptr, post_rows = _check_postings(post_indptr, post_rows, n_rows)
    counts = np.zeros(int(n_rows), dtype=np.int32)
    n_tokens = post_indptr.shape[0] - 1
    for t in _check_query(query_ids):
        if 0 <= t < n_tokens:
            counts[post_rows[post_indptr[t] : post_indptr[t + 1]]] += 1  # rows are distinct per token
    return counts


def _check_bm25(
    post_indptr: object,
    post_rows: object,
    post_tf: object,
    doc_len: object,
    row_mask: object,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(doc_len, np.ndarray):
        raise TypeError(f"doc_len must be a numpy array, got {type(doc_len).__name__}")
    if doc_len.dtype == np.int32:
        doc_len = doc_len.astype(np.float64)
    doc_len = check_array(doc_len, "doc_len", np.float64)
    n_rows = doc_len.shape[0]
    post_indptr, post_rows = _check_postings(post_indptr, post_rows, n_rows)
    post_tf = check_array(post_tf, "post_tf", np.int32, 1, post_rows.shape[0])
    mask = check_mask(row_mask, "row_mask", n_rows)
    return post_indptr, post_rows, post_tf, doc_len, mask


def bm25_scores(
    post_indptr: npt.NDArray[np.int64],
    post_rows: npt.NDArray[np.int32],
    post_tf: npt.NDArray[np.int32],
    doc_len: npt.NDArray[np.float64] | npt.NDArray[np.int32],
    query_ids: npt.ArrayLike,
    n_docs: int,
    avgdl: float,
    k1: float,
    b: float,
    row_mask: npt.NDArray[np.bool_] | None = None,
    idf_power: float = 1.0,
    term_weights: npt.ArrayLike | None = None,
    plain_out: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Return the Okapi BM25 score of every row for the query (Decision 12; numba path).

    ``score(r) = Σ_t idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len(r)/avgdl))`` over the distinct
    query tokens ``t`` that occur in row ``r``, with ``idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))``.

    - ``N`` is ``n_docs`` as given by the caller: the number of active insights in scope (normally
      ``row_mask.sum()`` when a mask is given).
    - ``df`` is the length of ``t``'s posting list, or, when ``row_mask`` is given, the number of
      masked-in rows in it.
    - Rows outside ``row_mask`` score exactly 0. ``avgdl <= 0`` disables length normalisation
      (``len/avgdl`` taken as 1).
    - ``idf_power`` p: each term weighs ``idf(t)**p`` instead (1, the default, is Okapi's own,
      bit for bit); p > 1 lets the rare terms of a long query dominate its common ones.
    - ``term_weights`` w (one per query id, the ids then distinct): each term's part is multiplied by
      ``w(t)``, so ``Σ_t w(t)·score_t`` takes one pass instead of one call per term (pseudo-relevance
      feedback's added terms, mnemon.feedback). None, the default, is the unweighted sum bit for bit.
    - ``plain_out`` (a float64 (n,) writable array): overwritten, in the same pass, with the scores at idf
      power 1 (weighted alike), bit for bit those of a call with ``idf_power=1``: a long Chinese query's
      feedback reads its rows from them beside its own scores at the higher power (one pass over the
      query's posting lists, not two).

    Parameters
    ----------
    post_indptr : int64 (V+1,); post_rows : int32 (nnz,); post_tf : int32 (nnz,), term frequencies.
    doc_len : float64 or int32 (n,), token-sequence length per row (int32 is converted).
    query_ids : integer (q,), query token ids; de-duplicated, ids outside ``[0, V)`` ignored.
    n_docs : int, N. avgdl : float, mean document length over the scope. k1, b : floats
        (``records.BM25_K1``, ``records.BM25_B``).
    row_mask : bool (n,) or None. idf_power : float, p (``records.LONG_QUERY_IDF_POWER`` for long queries).
    term_weights : float (q,) or None, finite and >= 0, aligned with ``query_ids``.
    plain_out : float64 (n,), C-contiguous, writable, or None.

    Returns
    -------
    scores : float64 (n,), >= 0.
    """
    post_indptr, post_rows, post_tf, doc_len, mask = _check_bm25(post_indptr, post_rows, post_tf, doc_len, row_mask)
    ids, weights = _check_weighted_query(query_ids, term_weights)
    plain = _check_plain_out(plain_out, doc_len.shape[0])
    return _bm25_scores(
        post_indptr, post_rows, post_tf, doc_len, ids,
        float(n_docs), float(avgdl), float(k1), float(b), mask, float(idf_power), weights, plain,
    )  # fmt: skip


def bm25_scores_numpy(
    post_indptr: npt.NDArray[np.int64],
    post_rows: npt.NDArray[np.int32],
    post_tf: npt.NDArray[np.int32],
    doc_len: npt.NDArray[np.float64] | npt.NDArray[np.int32],
    query_ids: npt.ArrayLike,
    n_docs: int,
    avgdl: float,
    k1: float,
    b: float,
    row_mask: npt.NDArray[np.bool_] | None = None,
    idf_power: float = 1.0,
    term_weights: npt.ArrayLike | None = None,
    plain_out: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Same contract as :func:`bm25_scores`, with numpy only (same operation order, same floats)."""
    post_indptr, post_rows, post_tf, doc_len, mask = _check_bm25(post_indptr, post_rows, post_tf, doc_len, row_mask)
    docs, avgdl, k1, b = float(n_docs), float(avgdl), float(k1), float(b)
    scores = np.zeros(doc_len.shape[0], dtype=np.float64)
    plain = _check_plain_out(plain_out, doc_len.shape[0])
    if plain.shape[0]:
        plain[:] = 0.0
    n_tokens = post_indptr.shape[0] - 1
    ids, weights = _check_weighted_query(query_ids, term_weights)
    for k, t in enumerate(ids):
        if not 0 <= t < n_tokens:
            continue
        rows = post_rows[post_indptr[t] : post_indptr[t + 1]]
        tf = post_tf[post_indptr[t] : post_indptr[t + 1]].astype(np.float64)
        if mask.shape[0]:
            keep = mask[rows]
            rows, tf = rows[keep], tf[keep]
        df = rows.shape[0]
        if df == 0:
            continue
        idf_plain = math.log(1.0 + (docs - df + 0.5) / (df + 0.5))
        idf = idf_plain ** float(idf_power) if idf_power != 1.0 else idf_plain
        ratio = doc_len[rows] / avgdl if avgdl > 0.0 else 1.0
        saturated = tf * (k1 + 1.0)
        norm = tf + k1 * (1.0 - b + b * ratio)
        part = idf * saturated / norm
        scores[rows] += weights[k] * part if weights.shape[0] else part
        if plain.shape[0]:
            part = idf_plain * saturated / norm
            plain[rows] += weights[k] * part if weights.shape[0] else part
    return scores
