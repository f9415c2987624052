"""Neighbour terms: the store's words a query's words name in other words (records.TERM_NEIGHBOURS).

Pure policy over cosines: which of the store's words (by stem, the BM25 term) join an ordinary query, and at
what weight. The engine (``engine.wordvectors``, ``engine.retrieve``) reads the word vectors and scores BM25.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def choose(
    query_stems: Sequence[str], cosines: np.ndarray, vocabulary_stems: Sequence[str], *, floor: float, per_word: int,
    weight: float, skip: set[str], usable: Callable[[str], bool],
) -> dict[str, float]:
    """The neighbour terms and their weights: for each query word (row ``i`` of ``cosines``, whose stem is
    ``query_stems[i]``), the ``per_word`` stems of the store's words (column ``j`` is a word of stem
    ``vocabulary_stems[j]``) closest at or above ``floor``, a stem counting once at its best word, each at
    ``weight`` x (cosine - floor) / (1 - floor); a stem in ``skip`` (the query's own terms and names), the
    word's own stem and a stem ``usable`` refuses take no place. A stem found for several query words keeps
    its largest weight. Equal cosines go to the word the store wrote first (its column), so the choice is
    the same every time."""
    import numpy as np

    chosen: dict[str, float] = {}
    for i, own in enumerate(query_stems):
        row = cosines[i]
        near = np.flatnonzero(row >= floor)
        # by cosine desc, then column asc (a stable sort of the negated cosines keeps the column order)
        near = near[np.argsort(-row[near], kind="stable")]
        found: dict[str, float] = {}
        for j in near.tolist():
            stem = vocabulary_stems[j]
            if stem in found or stem == own or stem in skip or not usable(stem):
                continue
            found[stem] = weight * (float(row[j]) - floor) / (1.0 - floor)
            if len(found) >= per_word:
                break
        for stem, w in found.items():
            if w > chosen.get(stem, -1.0):
                chosen[stem] = w
    return chosen
