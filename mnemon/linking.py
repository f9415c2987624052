"""Edge-producer policy: causal keywords, causal direction and sub-type, proximity weights,
and the metadata number formats (contract §4.4-§4.7, metadata table of §1).

The engine's graph step does the I/O (which insights to compare, writing rows); this module
decides what an edge looks like. Pure: stdlib ``re`` only, no numpy, no I/O, no clock.

English keywords use Go RE2's ASCII word boundaries and case-insensitive matching; Chinese
keywords match anywhere, since Han text has no word boundaries.
"""

from __future__ import annotations

import math
import re
from typing import Literal

__all__ = [
    "CAUSAL_PATTERN",
    "CausalDirection",
    "causal_direction",
    "causal_signal",
    "causal_sub_type",
    "format_metric",
    "proximity_weight",
]

CausalDirection = Literal["prev_to_new", "new_to_prev"]

_CAUSAL_EN = (
    "because",
    "therefore",
    "due to",
    "caused by",
    "as a result",
    "decided to",
    "chosen because",
    "so that",
    "in order to",
    "leads to",
    "results in",
)
_CAUSAL_ZH = ("因为", "所以", "由于", "导致", "因此", "决定", "为了", "以便")


def _keywords(english: tuple[str, ...], chinese: tuple[str, ...]) -> re.Pattern[str]:
    """Compile English words inside ASCII \\b plus bare Chinese words, case-insensitively."""
    return re.compile(
        rf"\b(?:{'|'.join(english)})\b|{'|'.join(chinese)}",
        re.IGNORECASE | re.ASCII,
    )


# §4.6: a pair of insights is only causally linked if one of them says why.
CAUSAL_PATTERN: re.Pattern[str] = _keywords(_CAUSAL_EN, _CAUSAL_ZH)

# §4.6 sub-types in precedence order: prevents > enables > causes; "causes" is also the default.
_SUB_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("prevents", _keywords(("despite", "prevented", "prevents", "blocked"), ("阻止", "防止"))),
    ("enables", _keywords(("so that", "in order to", "enables", "leads to"), ("为了", "以便"))),
    ("causes", _keywords(("because", "caused by", "due to"), ("因为", "由于"))),
)
_DEFAULT_SUB_TYPE = "causes"


def causal_signal(text: str) -> str:
    """Return the first causal keyword in ``text`` as written but lower-cased, or ""."""
    match = CAUSAL_PATTERN.search(text)
    return match.group(0).lower() if match else ""


def causal_sub_type(text_a: str, text_b: str) -> str:
    """Return the causal sub-type suggested by the two texts together (§4.6).

    The texts are joined with a newline: words of the two texts cannot merge, and since the
    multi-word keywords are spelled with a single space, none can span the seam either
    ("... so" + "that ..." is not "so that").
    """
    joined = f"{text_a}\n{text_b}"
    for sub_type, pattern in _SUB_TYPES:
        if pattern.search(joined):
            return sub_type
    return _DEFAULT_SUB_TYPE


def causal_direction(new_text: str, prev_text: str) -> CausalDirection | None:
    """Return which way a causal edge between a new and an earlier insight points (§4.6).

    The side that gives the reason is the effect: if the new text has a keyword the edge runs
    prev→new, else if only the earlier one has it new→prev; None if neither does (no edge).
    """
    if CAUSAL_PATTERN.search(new_text):
        return "prev_to_new"
    if CAUSAL_PATTERN.search(prev_text):
        return "new_to_prev"
    return None


def proximity_weight(hours_diff: float) -> float:
    """Return the temporal proximity edge weight 1 / (1 + |Δhours|) (§4.4)."""
    return 1.0 / (1.0 + abs(hours_diff))


def format_metric(x: float, digits: int) -> str:
    """Format an edge-metadata number like Go's ``%.<digits>f`` ("%.2f" hours, "%.4f" scores).

    Both round the exact binary value half-to-even; only the non-finite spellings differ.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return f"{x:.{digits}f}"
