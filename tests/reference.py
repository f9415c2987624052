"""Slow, obvious oracles for every kernel, written straight from the spec's formulas.

Plain Python over lists, sets and dicts (no vectorisation, no CSR tricks), so that a bug in a
kernel and a bug here are unlikely to coincide. The helpers at the bottom build the compact
inputs the kernels take (postings CSR, edge CSR, read-only arrays) from the same plain data the
oracles read. Tests import this module; it is not part of the package.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

VIA_NONE = -1
VIA_ANCHOR = -2


# --- top-k (kernels.topk) -------------------------------------------------------------------


def ref_topk(scores: Sequence[float], k: int, tie_rank: Sequence[int], valid: Sequence[bool] | None = None) -> list[int]:
    """Rows sorted by score desc, tie_rank asc, row asc; -inf/NaN and invalid rows dropped; first k."""
    rows = [
        i
        for i, s in enumerate(scores)
        if not math.isnan(s) and s != -math.inf and (valid is None or valid[i])
    ]
    rows.sort(key=lambda i: (-scores[i], tie_rank[i], i))
    return rows[:k]


# --- cosine (contract §4.2) -------------------------------------------------------------------


def ref_cosine(a: Sequence[float], b: Sequence[float], norm_a: float | None = None) -> float:
    """dot(a, b) / (|a| |b|); 0 when either vector is zero. ``norm_a`` overrides |a| (stored norms)."""
    dot = math.fsum(x * y for x, y in zip(a, b))
    na = math.sqrt(math.fsum(x * x for x in a)) if norm_a is None else norm_a
    nb = math.sqrt(math.fsum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


def ref_cosine_scores(vectors: np.ndarray, norms: np.ndarray, query: np.ndarray) -> list[float]:
    return [ref_cosine(list(row), list(query), float(nr)) for row, nr in zip(vectors, norms)]


def ref_cosine_topk(
    vectors: np.ndarray,
    norms: np.ndarray,
    query: np.ndarray,
    k: int,
    tie_rank: Sequence[int],
    min_score: float = -math.inf,
    row_mask: Sequence[bool] | None = None,
) -> tuple[list[int], list[float]]:
    scores = ref_cosine_scores(vectors, norms, query)
    valid = [s >= min_score and (row_mask is None or row_mask[i]) for i, s in enumerate(scores)]
    rows = ref_topk(scores, k, tie_rank, valid)
    return rows, [scores[r] for r in rows]


# --- token overlap and BM25 (contract §4.2, Decision 12) ------------------------------------------


def ref_overlap_counts(docs: Sequence[Iterable[int]], query: Iterable[int]) -> list[int]:
    """|Q ∩ T| per document, with Q and T as sets."""
    q = set(query)
    return [len(q & set(doc)) for doc in docs]


def ref_bm25(
    docs: Sequence[Sequence[int]],
    query: Iterable[int],
    k1: float,
    b: float,
    in_scope: Sequence[bool] | None = None,
    n_docs: int | None = None,
    avgdl: float | None = None,
    idf_power: float = 1.0,
) -> list[float]:
    """Okapi BM25 per document; docs are token sequences with repeats (tf = count, len = length).
    Each term weighs idf(t) ** idf_power.

    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), df = in-scope documents containing t,
    N = in-scope documents (unless given), avgdl = mean in-scope length (unless given).
    Query tokens are a set. Out-of-scope documents score 0.
    """
    scope = [True] * len(docs) if in_scope is None else list(in_scope)
    members = [d for d, ok in zip(docs, scope) if ok]
    n = len(members) if n_docs is None else n_docs
    if avgdl is None:
        avgdl = sum(len(d) for d in members) / len(members) if members else 0.0
    out = []
    for doc, ok in zip(docs, scope):
        if not ok:
            out.append(0.0)
            continue
        tf = Counter(doc)
        score = 0.0
        for t in sorted(set(query)):
            if tf[t] == 0:
                continue
            df = sum(1 for d in members if t in d)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5)) ** idf_power
            ratio = len(doc) / avgdl if avgdl > 0 else 1.0
            score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * ratio))
        out.append(score)
    return out


# --- RRF (contract §4.10 step 3) -------------------------------------------------------------


def ref_rrf(lists: Sequence[Sequence[int]], n_rows: int, k: float = 60) -> list[float]:
    """Σ over lists of 1/(k + rank + 1), rank = 0-based first position of the row in the list."""
    scores = [0.0] * n_rows
    for lst in lists:
        seen: set[int] = set()
        for rank, row in enumerate(lst):
            if row in seen:
                continue
            seen.add(row)
            scores[row] += 1.0 / (k + rank + 1)
    return scores


# --- beam search (contract §4.10 step 4, newest) -----------------------------------------------


def ref_beam_search(
    n: int,
    edges: Sequence[tuple[int, int, int, float]],
    type_weight: Sequence[float],
    anchors: Sequence[tuple[int, float]],
    width: int,
    depth: int,
    max_visited: int,
    similarity: Sequence[float] | None,
    lambda_structural: float,
    lambda_semantic: float,
    id_rank: Sequence[int],
    in_scope: Sequence[bool] | None = None,
) -> tuple[dict[int, float], dict[int, int]]:
    """Transcription of §4.10 step 4 over edge rows (source, target, type code, weight).

    Every edge row is walkable in both directions. Returns dicts best[row] and via[row] for the
    rows reached (anchors have via VIA_ANCHOR).
    """
    scope = [True] * n if in_scope is None else list(in_scope)
    adjacency: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    for src, dst, code, weight in edges:
        adjacency[src].append((dst, code, weight))
        adjacency[dst].append((src, code, weight))

    best: dict[int, float] = {}
    via: dict[int, int] = {}

    def record(row: int, score: float, code: int) -> None:
        if via.get(row) == VIA_ANCHOR:
            best[row] = max(best[row], score)
        elif row not in best or score > best[row]:
            best[row], via[row] = score, code
        elif score == best[row] and code < via[row]:
            via[row] = code

    for row, score in anchors:
        if scope[row]:
            best[row] = max(best.get(row, -math.inf), score)
            via[row] = VIA_ANCHOR

    for anchor, anchor_score in anchors:
        if not scope[anchor]:
            continue
        visited = {anchor}
        beam = [(anchor, anchor_score)]
        for _level in range(depth):
            if not beam or len(visited) >= max_visited:
                break
            next_level: list[tuple[int, float]] = []
            budget_spent = False
            for node, score in beam:
                transitions = []
                for nbr, code, weight in adjacency[node]:
                    if not scope[nbr]:
                        continue
                    delta = lambda_structural * type_weight[code] * weight
                    if similarity is not None:
                        delta += lambda_semantic * max(0.0, similarity[nbr])
                    transitions.append((delta, nbr, code))
                transitions.sort(key=lambda t: (-t[0], id_rank[t[1]], t[2]))
                for delta, nbr, code in transitions:
                    if len(visited) >= max_visited:
                        budget_spent = True
                        break
                    record(nbr, score + delta, code)
                    if nbr not in visited:
                        visited.add(nbr)
                        next_level.append((nbr, score + delta))
                if budget_spent:
                    break
            if budget_spent:
                break
            next_level.sort(key=lambda e: (-e[1], id_rank[e[0]], e[0]))
            beam = next_level[:width]
    return best, via


# --- builders for kernel inputs ------------------------------------------------------------------


def readonly(arr: np.ndarray) -> np.ndarray:
    """Return a read-only C-contiguous copy, as the store hands arrays to kernels."""
    out = np.ascontiguousarray(arr).copy()
    out.flags.writeable = False
    return out


def build_postings(docs: Sequence[Sequence[int]], vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Postings CSR (indptr int64, rows int32, tf int32) and doc_len float64 from token sequences."""
    postings: list[list[tuple[int, int]]] = [[] for _ in range(vocab)]
    for row, doc in enumerate(docs):
        for token, count in sorted(Counter(doc).items()):
            postings[token].append((row, count))
    indptr = np.zeros(vocab + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p) for p in postings])
    rows = np.array([r for p in postings for r, _ in p], dtype=np.int32)
    tf = np.array([c for p in postings for _, c in p], dtype=np.int32)
    doc_len = np.array([len(d) for d in docs], dtype=np.float64)
    return readonly(indptr), readonly(rows), readonly(tf), readonly(doc_len)


def build_edge_csr(
    n: int, edges: Sequence[tuple[int, int, int, float]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edge CSR (indptr int64, nbr_rows int32, weights float64, etype int8) holding both directions."""
    adjacency: list[list[tuple[int, int, float]]] = [[] for _ in range(n)]
    for src, dst, code, weight in edges:
        adjacency[src].append((dst, code, weight))
        adjacency[dst].append((src, code, weight))
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(a) for a in adjacency])
    nbrs = np.array([v for a in adjacency for v, _, _ in a], dtype=np.int32)
    etype = np.array([c for a in adjacency for _, c, _ in a], dtype=np.int8)
    weights = np.array([w for a in adjacency for _, _, w in a], dtype=np.float64)
    return readonly(indptr), readonly(nbrs), readonly(weights), readonly(etype)
