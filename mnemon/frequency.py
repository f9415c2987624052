"""How specific a query's word is in English at large: the query's own keyword terms weighed by it
(records.QUERY_SPECIFICITY_POWER_*).

A store's idf says how rare a word is among its memories; in a store of a few hundred memories that says
little about a word it holds once or twice. "What activities has Melanie done with her family?" gives
"activities" (in two memories) as much weight as a rarer word asked about would get, though any memory
may say so in other words; "yoga" in "What types of yoga has Maria practiced?" names the thing itself. General
English tells them apart: "activities" (with "activity") is about 18 times as frequent as "yoga".

``frequency.txt`` (beside this module, built by ``scripts/build-word-frequency`` from wordfreq's English list,
CC BY-SA 4.0 as its header says) holds, for each recall stem (``text.stem``) of wordfreq's 200,000 most frequent
English words, its Zipf value (log10 of its frequency per billion words). A lookup is a binary search over the
memory-mapped file (``mnemon.sortedtable``). A missing or damaged file gives no frequencies: the terms keep the
weight 1, as before the rule, never an error.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from mnemon.sortedtable import SortedTable

TABLE = SortedTable(Path(__file__).with_name("frequency.txt"))


def frequency(stem: str) -> float | None:
    """The share of English running words that are one of ``stem``'s words; None for a stem the table
    lacks (a rare or misspelt word, most names, a non-ASCII term) or a damaged line."""
    if not stem or not stem.isascii():
        return None
    return _share(TABLE, stem)


@lru_cache(maxsize=1 << 14)  # a warm process asks for the same words again and again (0.3 ms a recall without)
def _share(table: SortedTable, stem: str) -> float | None:
    raw = table.get(stem.encode("ascii"))
    if not raw:
        return None
    try:
        zipf = float(raw)
    except ValueError:
        return None
    share = 10.0 ** (zipf - 9.0)
    return share if 0.0 < share < 1.0 else None


def specificity(share: float, mean_len: float) -> float:
    """The idf of a word of English share ``share`` in a background of memories ``mean_len`` terms long:
    log(1 + (1 - p) / p) with p = 1 - (1 - share)^mean_len, the chance that such a memory holds the word."""
    p = 1.0 - (1.0 - share) ** max(mean_len, 1.0)
    return math.log(1.0 + (1.0 - p) / p)


def query_term_weights(stems: list[str], present: list[bool], mean_len: float, power: float) -> list[float]:
    """The weight of each of a query's keyword terms: (its specificity / the mean specificity of the
    query's terms that the table knows and some memory in scope carries)^``power``. A term the table does
    not know (a name, a rare word) or that matches nothing keeps 1, the mean's weight. Relative to the query's
    own terms, so a query's total weight moves little; with fewer than two such terms every weight is 1."""
    shares = [frequency(s) if here else None for s, here in zip(stems, present, strict=True)]
    known = [specificity(share, mean_len) for share in shares if share is not None]
    mean = sum(known) / len(known) if known else 0.0
    # mean 0: every known word is in every memory of such a length (p rounds to 1): nothing to weigh them by
    if len(known) < 2 or power == 0.0 or mean <= 0.0:
        return [1.0] * len(stems)
    return [1.0 if share is None else (specificity(share, mean_len) / mean) ** power for share in shares]
