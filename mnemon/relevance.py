"""Absolute relevance: is a recalled memory about the query at all (issue 28)?

Recall's ``score`` (and the ``confidence`` derived from it) is relative to the best candidate of
the same query, so the top hit of a prompt that has nothing to do with the store still scores
high. Recall on prompt needs the opposite question answered: how much better does this memory
match the query than chance would in *this* store? Two pieces of evidence, both read against the
store's own background, neither dependent on the exact ranking:

- **terms**: the share of the query's information the memory carries. Each informative query term
  weighs its inverse document frequency in the store (a term most memories carry says little; a
  term no memory carries weighs the most, so a prompt about something the store never mentions
  stays uncovered), times its specificity in English relative to the query's other terms
  (``specific_weights``); the memory covers the weight of the terms it contains.
- **meaning** (with embeddings only): how far the memory's cosine with the query rises above the
  query's mean cosine with the store at large (a deterministic sample of its rows). A related
  memory stands out of that background; the best of an unrelated prompt's hits does not. Not
  scaled by the room left above the background: a model that finds every text alike (MiniLM on
  Chinese) then has little rise to give, and its cosines cannot make everything relevant.

Dates and numbers are left out of the query's terms: a memory's date is its ``created_at``, not its
text, so "What did Mel paint in July 2023?" is no less about the memory that says what Mel painted.

The judgement is a number in [0, 1]; hooks keep the memories at or above ``PROMPT_FLOOR``. Pure:
no store, no clock; the engine hands in the counts and cosines (``engine/retrieve.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# The floor recall on prompt keeps hits at (hooks and plugins), chosen on the development
# conversations with bench/relevance.py (bench/README.md: what it trades).
PROMPT_FLOOR = 0.3

# The power of a term's specificity in English in its weight (specific_weights, mnemon.frequency): at the
# default floor, the five English development conversations' prompts (bench/relevance.py, twenty-sixth session)
# with evidence injected 65.5 % -> 65.7 % and unrelated prompts with anything injected 4.9 % -> 2.2 %; with
# MiniLM 69.2 % / 5.2 % -> 69.5 % / 2.5 %; after an off-topic turn 12.6 % / 1.5 % -> 14.3 % / 0.9 %; Chinese
# unchanged. 0.5 gave 65.3 % / 3.4 %, 1.5 65.1 % / 1.8 %.
SPECIFICITY_POWER = 1.0

# How many rows of the scope the cosine background reads at most: a fixed stride over the rows,
# so the same store and query always give the same figures, at a cost bounded at any store size.
BACKGROUND_SAMPLE = 4096


# Words that name a time rather than a subject: months, weekdays, and the lone Han characters of a
# Chinese date (2023年5月7日, 星期一); numbers and ordinals are _NUMBER. Listed as words and compared as
# the stems recall makes of them (text.stem): a list of stems written by hand went stale when the
# stemmer changed ("january" is "januari" under Porter2, and was then an informative term).
_TIME_WORDS = (
    "january", "february", "march", "april", "june", "july", "august", "september", "october", "november",
    "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "monday",
    "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "年", "月", "日", "号", "星期",
)  # fmt: skip


@lru_cache(maxsize=1)
def _time_terms() -> frozenset[str]:
    from mnemon.text import stem

    return frozenset(stem(word) for word in _TIME_WORDS)


_NUMBER = re.compile(r"\d+(?:st|nd|rd|th)?")
_HAN_BIGRAM = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2}")
UNSEEN_HAN_BIGRAM_SHARE = 0.5


def informative(terms: Iterable[str]) -> list[str]:
    """The query terms that say what a memory is about: without dates and numbers."""
    time_terms = _time_terms()
    return [t for t in terms if t not in time_terms and _NUMBER.fullmatch(t) is None]


@dataclass(frozen=True, slots=True)
class Background:
    """The query's cosine with the store at large: its mean over a sample of the rows."""

    mean: float


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the judgement of one hit reads."""

    weights: tuple[float, ...]  # each informative query term's weight in this store (term_weight)
    carried: tuple[bool, ...]  # which of those terms the memory carries
    cosine: float | None  # the memory's cosine with the query; None without embeddings
    background: Background | None  # the query's cosine background in this store


def term_weight(term: str, df: int, n_docs: int) -> float:
    """Inverse document frequency of ``term``, carried by ``df`` of ``n_docs`` memories (>= 0).

    A term no memory carries gets the largest weight the store can give (df = 0.5): a query word
    the store never uses is information the store cannot match. Except half of it for a Han bigram:
    mnemon.text cuts a run of Han characters into overlapping bigrams, about half of which straddle
    two words, so an absent one is as likely an artefact of the cut as a missing subject."""
    weight = max(0.0, math.log((n_docs + 1.0) / (max(df, 0) + 0.5)))
    if df <= 0 and _HAN_BIGRAM.fullmatch(term) is not None:
        return UNSEEN_HAN_BIGRAM_SHARE * weight
    return weight


def specific_weights(terms: Sequence[str], weights: Sequence[float], mean_len: float) -> list[float]:
    """The terms' ``weights`` each times its specificity in English relative to the query's terms
    (``frequency.query_term_weights`` at SPECIFICITY_POWER; ``mean_len``: the store's mean memory length
    in terms). A store's idf cannot tell a word it holds once because it is specific from one it holds once
    because its memories seldom say it: a prompt that shares only "activities" or "plans" with a memory is
    less about it than one sharing "yoga"."""
    from mnemon import frequency

    factors = frequency.query_term_weights(list(terms), [True] * len(terms), mean_len, SPECIFICITY_POWER)
    return [w * f for w, f in zip(weights, factors, strict=True)]


def coverage(weights: Sequence[float], carried: Sequence[bool]) -> float:
    """The share of the total term weight that the carried terms hold (0 for a query without terms)."""
    total = math.fsum(weights)
    if total <= 0.0:
        return 0.0
    return math.fsum(w for w, c in zip(weights, carried, strict=True) if c) / total


def background(cosines: np.ndarray) -> Background | None:
    """The background of a cosine sample (float64); None for an empty one."""
    if cosines.shape[0] == 0:
        return None
    return Background(float(cosines.mean()))


def sample_rows(scope_rows: np.ndarray) -> np.ndarray:
    """At most ``BACKGROUND_SAMPLE`` of ``scope_rows`` at a fixed stride (deterministic)."""
    step = max(1, -(-scope_rows.shape[0] // BACKGROUND_SAMPLE))
    return scope_rows[::step]


def share(evidence: Evidence) -> float:
    """How much of the query one memory carries, in [0, 1]: its term coverage, or with embeddings,
    if higher, how far its cosine rises above the query's background."""
    covered = coverage(evidence.weights, evidence.carried)
    if evidence.cosine is None or evidence.background is None:
        return covered
    return max(covered, min(1.0, evidence.cosine - evidence.background.mean))


def judge(hits: Sequence[Evidence], scores: Sequence[float]) -> list[float]:
    """The relevance of each hit of one recall, in [0, 1], rounded to 3 decimals (deterministic).

    A hit is as relevant as the share of the query it carries itself, or as the query's best
    evidence (the best share any hit of this recall carries) times its own standing in the ranking
    (its score, at most 1): an answer often sits in a memory that words it differently (the reply
    after a matched question), and the ranking's other signals are what find it. The best evidence
    is the absolute part: a prompt the store knows nothing about has none, whatever the ranking.
    """
    shares = [share(e) for e in hits]
    best = max(shares, default=0.0)
    return [round(max(own, best * min(1.0, max(0.0, score))), 3) for own, score in zip(shares, scores, strict=True)]
