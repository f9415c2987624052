"""Advisory diff heuristic: how a new insight relates to similar existing ones (contract §4.9).

Owns the ADD / UPDATE / CONFLICT / DUPLICATE classification with the newest extension and
polarity rules, and the ranking of keyword and embedding matches into one suggestion. The
result is advice only (Decision 5): the engine never deletes or skips anything because of it;
only byte-identical content is skipped, and that check lives with the write path.

The caller computes the inputs (Jaccard over :func:`mnemon.text.tokenize` sets, cosine when
both vectors exist); this module is pure and imports only ``regex`` and mnemon leaf modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from mnemon.records import (
    CONTRACT_SIMILARITY,
    DIFF_CANDIDATES,
    DIFF_DUPLICATE_ABOVE,
    DIFF_EXTENSION_RATIO,
    SimilarityScale,
)
from mnemon.text import byte_len

__all__ = [
    "ADD",
    "CONFLICT",
    "DUPLICATE",
    "NEGATION_PHRASES",
    "UPDATE",
    "DiffCandidate",
    "DiffMatch",
    "classify",
    "has_negative_polarity",
    "is_extension",
    "suggest",
]

ADD = "ADD"
UPDATE = "UPDATE"
CONFLICT = "CONFLICT"
DUPLICATE = "DUPLICATE"

# Substrings of the lower-cased text that signal a changed fact (snapshot rule).
NEGATION_PHRASES: tuple[str, ...] = (
    "no longer",
    "don't",
    "doesn't",
    "never",
    "switched from",
    "instead of",
    "rather than",
    "replaced",
    "deprecated",
    "不再",
    "放弃",
    "替换",
    "取消",
)

# Standalone negators with the newest Unicode word boundary (letters, marks, numbers, _, ZWNJ,
# ZWJ are word characters), plus any n't contraction ("isn't", "can’t").
_WORD_CHAR = r"[\p{L}\p{M}\p{N}_\u200c\u200d]"
_POLARITY = regex.compile(
    rf"(?<!{_WORD_CHAR})(?:not|no|never|cannot|without|none)(?!{_WORD_CHAR})"
    rf"|(?<={_WORD_CHAR})n['’]t(?!{_WORD_CHAR})",
    regex.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class DiffCandidate:
    """An existing active insight to compare with; ``cosine`` is None without both vectors."""

    id: str
    content: str
    jaccard: float
    cosine: float | None = None


@dataclass(frozen=True, slots=True)
class DiffMatch:
    """One classified match, as ranked by :func:`suggest`."""

    id: str
    similarity: float
    suggestion: str


def is_extension(new_content: str, existing_content: str) -> bool:
    """Return True if the new text is more than 25 % longer (UTF-8 bytes) than the existing one.

    A longer restatement adds detail, so it is never called a duplicate.
    """
    return byte_len(new_content) > byte_len(existing_content) * DIFF_EXTENSION_RATIO


def has_negative_polarity(text: str) -> bool:
    """Return True if ``text`` holds a standalone negator or an n't contraction."""
    return _POLARITY.search(text) is not None


def _has_negation_phrase(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in NEGATION_PHRASES)


def classify(
    new_content: str, existing_content: str, similarity: float, jaccard: float, scale: SimilarityScale = CONTRACT_SIMILARITY
) -> str:
    """Classify the new content against one existing insight (§4.9, newest rules).

    1. Jaccard > 0.9 and not an extension: CONFLICT if exactly one side is negative
       ("uses X" vs "does not use X"), else DUPLICATE. This runs before the phrase scan,
       so two near-identical texts that both say "never" stay duplicates.
    2. similarity < 0.5: ADD.
    3. similarity ≥ 0.7 and either text contains a negation phrase: CONFLICT.
    4. similarity > 0.9: CONFLICT on a polarity mismatch, UPDATE for an extension, else
       DUPLICATE.
    5. otherwise UPDATE.

    0.5, 0.7 and 0.9 are ``scale``'s (``diff_add_below``, ``diff_conflict_at``, ``diff_duplicate_above``):
    the contract's for a Jaccard similarity and the contract's models, a model's own for its cosine
    (records.SimilarityScale: e5's cosines bunch high, and so do those of a composed vector).
    """
    extension = is_extension(new_content, existing_content)
    polarity_mismatch = has_negative_polarity(new_content) != has_negative_polarity(existing_content)
    if jaccard > DIFF_DUPLICATE_ABOVE and not extension:
        return CONFLICT if polarity_mismatch else DUPLICATE
    if similarity < scale.diff_add_below:
        return ADD
    if similarity >= scale.diff_conflict_at and (
        _has_negation_phrase(new_content) or _has_negation_phrase(existing_content)
    ):
        return CONFLICT
    if similarity > scale.diff_duplicate_above:
        if polarity_mismatch:
            return CONFLICT
        return UPDATE if extension else DUPLICATE
    return UPDATE


def _keyword_similarity(candidate: DiffCandidate, scale: SimilarityScale) -> tuple[float, SimilarityScale]:
    """Jaccard, replaced by cosine only when cosine ≥ 0.85 (the model's override) and larger (§4.9 step 2),
    with the scale whose cuts it reads: the contract's for a Jaccard, ``scale`` for a cosine."""
    cosine = candidate.cosine
    if cosine is not None and cosine >= scale.diff_override and cosine > candidate.jaccard:
        return cosine, scale
    return candidate.jaccard, CONTRACT_SIMILARITY


def suggest(
    new_content: str,
    candidates: list[DiffCandidate],
    extra: list[DiffCandidate],
    scale: SimilarityScale = CONTRACT_SIMILARITY,
) -> tuple[str, list[DiffMatch]]:
    """Return the overall suggestion and the ranked matches (§4.9).

    ``candidates`` are the keyword top-5 for the new content; every one becomes a match.
    ``extra`` are embedding neighbours with cosine ≥ 0.70 (best first); those already among
    the candidates are skipped, at most five are considered, their similarity is their cosine,
    and they are kept only if not classified ADD. Matches sort by similarity desc, then id.
    Overall: DUPLICATE if any match is, else the top match's class; ADD with no matches.
    """
    matches: list[DiffMatch] = []
    present: set[str] = set()
    for candidate in candidates:
        similarity, cuts = _keyword_similarity(candidate, scale)
        suggestion = classify(new_content, candidate.content, similarity, candidate.jaccard, cuts)
        matches.append(DiffMatch(candidate.id, similarity, suggestion))
        present.add(candidate.id)

    considered = 0
    for candidate in sorted(extra, key=lambda c: (-(c.cosine or 0.0), c.id)):
        if considered == DIFF_CANDIDATES:
            break
        if candidate.id in present or candidate.cosine is None or candidate.cosine < scale.diff_extra:
            continue
        present.add(candidate.id)
        considered += 1
        suggestion = classify(new_content, candidate.content, candidate.cosine, candidate.jaccard, scale)
        if suggestion != ADD:
            matches.append(DiffMatch(candidate.id, candidate.cosine, suggestion))

    if not matches:
        return ADD, []
    matches.sort(key=lambda m: (-m.similarity, m.id))
    if any(m.suggestion == DUPLICATE for m in matches):
        return DUPLICATE, matches
    return matches[0].suggestion, matches
