"""Pseudo-relevance feedback for a Chinese query recalled without a model (issue 23).

A user's chatty turn that paraphrases a short event memory shares a few mid-frequency Han characters
with it and some incidental ones with other memories; a long query's idf power (records.
LONG_QUERY_IDF_POWER) lets one incidental rare character lead. The memories that plain BM25 (idf to
the power 1) ranks first are more often about what the turn paraphrases, so the terms they share
(weighted by how high those memories rank, over their length, times the term's idf) are added to the
query as a second list at FEEDBACK_WEIGHT of the first times the query's long share
(engine.retrieve.long_query_share: none for a question of LONG_QUERY_TERMS words or fewer, all of it from
LONG_QUERY_FULL), each over its best. A short question names what it asks about: given feedback at the full
weight it found more at R@10 on the development questions (72.7 -> 73.5) but put the evidence first less
often (MRR 0.509 -> 0.492), and the prompt hook injected the evidence for 5 fewer of 231 questions. Pure:
the engine reads the rows' forward terms and the terms' document frequencies (``engine/retrieve.py`` ``_feedback``).
Measured in bench/quality-ablations.md, "Chinese event memories without a model, tenth session".
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

FEEDBACK_ROWS = 5  # the first pass's best rows read; 4 and 6 measured beside it
FEEDBACK_TERMS = 20  # terms added (15 and 25 measured)
# The added list's weight against the query's own, each over its best, for a wholly long query: 0.2 to 0.3 hold
# on every view (0.35 lowers `far --borrowed-out` by 1.3); 0.25 is the middle.
FEEDBACK_WEIGHT = 0.25


def feedback_rows(first_pass: np.ndarray) -> np.ndarray:
    """The FEEDBACK_ROWS rows with the highest first-pass score above 0; equal scores by row order
    (the index's, deterministic). A partial selection: sorting every matching row cost 75 ms at 1M."""
    import numpy as np

    import kernels

    by_row = np.zeros(first_pass.shape[0], dtype=np.int32)  # no rank of its own: ties by row
    return kernels.topk_numpy(np.ascontiguousarray(first_pass, dtype=np.float64), FEEDBACK_ROWS, by_row, first_pass > 0)


def expansion_terms(
    row_scores: list[float], row_terms: list[np.ndarray], df: dict[int, int], n_docs: int, query_ids: set[int]
) -> list[tuple[int, float]]:
    """The FEEDBACK_TERMS best terms of the feedback rows that the query does not have, with their
    weights: each row lends its share of the rows' summed score over its term count to each of its
    terms; a term's weight is that sum times its idf in scope (a term every memory has lends nothing).
    Ties by term id."""
    total = sum(row_scores)
    if total <= 0:
        return []
    weight: dict[int, float] = {}
    for score, terms in zip(row_scores, row_terms, strict=True):
        share = score / total / max(1, len(terms))
        for term in sorted(set(terms.tolist())):
            if term not in query_ids:
                weight[term] = weight.get(term, 0.0) + share
    weighted = []
    for term, w in weight.items():
        n = df.get(term, 0)
        idf = math.log(1.0 + (n_docs - n + 0.5) / (n + 0.5)) if n else 0.0
        if w * idf > 0:
            weighted.append((term, w * idf))
    weighted.sort(key=lambda kv: (-kv[1], kv[0]))
    return weighted[:FEEDBACK_TERMS]


def with_expansion(scores: np.ndarray, expansion: np.ndarray, long: float) -> np.ndarray:
    """The query's scores with the expansion list added at FEEDBACK_WEIGHT times ``long`` (the query's long
    share, 0 to 1), each over its best, on the query's own scale (its best stays its best's order of
    magnitude)."""
    top, best = float(scores.max()), float(expansion.max())
    if top <= 0 or best <= 0:
        return scores
    return (scores / top + long * FEEDBACK_WEIGHT * expansion / best) * top
