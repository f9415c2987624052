"""Query intent detection and ``--intent`` parsing (contract §4.12, newest behaviour).

Owns the legacy English + Chinese (Simplified and Traditional) cue counting, the question-form
cues of nine further languages, and the rule that combines them. Intent only steers traversal
weights, beam parameters and the WHY causal ordering (Decision 1), so a wrong guess costs a
little ranking, never correctness; that is why disagreement falls back to GENERAL.

Pure functions over ``regex``; no numpy, no I/O.
"""

from __future__ import annotations

import regex

from mnemon.errors import InputError, go_quote
from mnemon.records import Intent

__all__ = ["detect_intent", "parse_intent"]

# Newest word boundary: letters, marks, numbers, "_", ZWNJ and ZWJ are word characters, so a
# Devanagari or Bengali word does not end at a vowel sign ("कब्ज" does not contain "कब").
_WORD_CHAR = r"[\p{L}\p{M}\p{N}_\u200c\u200d]"
_B_BEFORE = rf"(?<!{_WORD_CHAR})"
_B_AFTER = rf"(?!{_WORD_CHAR})"


def _words(*alternatives: str) -> str:
    """Join alternatives into one group bounded by the Unicode word-boundary rule."""
    return rf"{_B_BEFORE}(?:{'|'.join(alternatives)}){_B_AFTER}"


def _compile(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern, regex.IGNORECASE)


# --- legacy cues: counted; Han cues need no boundary ------------------------------------------

_LEGACY: dict[Intent, regex.Pattern[str]] = {
    Intent.WHY: _compile(
        _words("why", "reason", "because", "cause", "motivation", "rationale") + "|为什么|原因|理由|為什麼|為甚麼"
    ),
    Intent.WHEN: _compile(
        _words("when", "time", "date", "before", "after", "during", "timeline", "history", "sequence")
        + "|什么时候|何时|时间|之前|之后|什麼時候|甚麼時候|何時|時間|之後"
    ),
    Intent.ENTITY: _compile(
        _words("what is", "who is", "tell me about", "describe", "about")
        + "|是什么|谁是|关于|介绍|是什麼|是甚麼|誰是|關於|介紹"
    ),
}

# --- question-form cues of nine more languages ------------------------------------------------

_S = r"\s+"  # "space" in a cue is any run of Unicode whitespace
_E_ACUTE = "(?:é|e\u0301)"  # precomposed or combining accent
_A_ACUTE = "(?:á|a\u0301)"
_E_CIRCUMFLEX = "(?:ê|e\u0302)"
_APOSTROPHE = "['’]"

# Per language: WHY, WHEN and ENTITY alternatives, as listed in §4.12.
_WHY, _WHEN, _ENTITY = Intent.WHY, Intent.WHEN, Intent.ENTITY
_CUE_TABLE: dict[str, dict[Intent, tuple[str, ...]]] = {
    "hi": {_WHY: ("क्यों", "क्यूँ", "किसलिए"), _WHEN: ("कब",), _ENTITY: (f"(?:क्या|कौन){_S}(?:है|हैं)",)},
    "es": {
        _WHY: (f"por{_S}qu{_E_ACUTE}",),
        _WHEN: (f"cu{_A_ACUTE}ndo",),
        _ENTITY: (f"qu{_E_ACUTE}{_S}es", f"qui{_E_ACUTE}n{_S}es"),
    },
    "ar": {_WHY: ("لماذا",), _WHEN: ("متى",), _ENTITY: (f"(?:ما|من){_S}(?:هو|هي)",)},
    "fr": {
        _WHY: ("pourquoi",),
        _WHEN: ("quand",),
        _ENTITY: (
            f"qu{_APOSTROPHE}est-ce{_S}que",
            f"qu{_APOSTROPHE}est{_S}ce{_S}que",
            f"qui{_S}est",
            f"c{_APOSTROPHE}est{_S}quoi",
        ),
    },
    "bn": {_WHY: ("কেন",), _WHEN: ("কখন", "কবে"), _ENTITY: ()},  # ENTITY: see _BENGALI_ENTITY
    "pt": {
        _WHY: (f"por{_S}que", f"por{_S}qu{_E_CIRCUMFLEX}"),
        _WHEN: ("quando",),
        _ENTITY: (f"(?:o{_S}que|quem){_S}{_E_ACUTE}",),
    },
    "id": {_WHY: ("mengapa", "kenapa"), _WHEN: ("kapan",), _ENTITY: (f"(?:apa|siapa){_S}itu",)},
    "ru": {
        _WHY: ("почему", "зачем"),
        _WHEN: ("когда",),
        _ENTITY: (f"что{_S}такое", f"кто{_S}(?:такой|такая|такие)"),
    },
    "de": {_WHY: ("warum", "wieso", "weshalb"), _WHEN: ("wann",), _ENTITY: (f"(?:was|wer){_S}(?:ist|sind)",)},
}
# Bengali ENTITY: the question word must close the query (optionally followed by ?/？).
_BENGALI_ENTITY = rf"{_B_BEFORE}(?:কী|কি|কে)\s*[?？]?\s*\Z"

_CUES: dict[Intent, regex.Pattern[str]] = {
    intent: _compile(
        _words(*(alt for cues in _CUE_TABLE.values() for alt in cues[intent]))
        + (f"|{_BENGALI_ENTITY}" if intent is _ENTITY else "")
    )
    for intent in (_WHY, _WHEN, _ENTITY)
}

# Quoted spans are blanked before the new cues run, so a quoted title or term ("Warum", «quand»)
# is not read as a question word. A quote only opens after a non-word character and only closes
# before one, so elisions like "qu'est-ce" and "c'est" keep their apostrophe.
_QUOTED = regex.compile(
    "|".join(
        rf"{_B_BEFORE}{open_}[^{close}]*{close}{_B_AFTER}"
        for open_, close in (('"', '"'), ("“", "”"), ("«", "»"), ("`", "`"), ("'", "'"))
    )
)
# Arabic tatweel, harakat (U+064B-0652) and superscript alif are optional in writing.
_ARABIC_OPTIONAL = regex.compile("[\u0640\u064b-\u0652\u0670]")


def _legacy_counts(query: str) -> dict[Intent, int]:
    return {intent: len(pattern.findall(query)) for intent, pattern in _LEGACY.items()}


def _legacy_intent(counts: dict[Intent, int]) -> Intent:
    """Snapshot rule: a strict winner among WHY then WHEN; any ENTITY cue wins ties."""
    why, when, entity = counts[Intent.WHY], counts[Intent.WHEN], counts[Intent.ENTITY]
    if why > 0 and why > when and why > entity:
        return Intent.WHY
    if when > 0 and when > why and when > entity:
        return Intent.WHEN
    if entity > 0:
        return Intent.ENTITY
    return Intent.GENERAL


def _question_cues(query: str) -> set[Intent]:
    text = _ARABIC_OPTIONAL.sub("", query)
    text = _QUOTED.sub(lambda m: " " * len(m.group(0)), text)
    return {intent for intent, pattern in _CUES.items() if pattern.search(text)}


def detect_intent(query: str) -> Intent:
    """Return the intent of ``query`` (§4.12).

    New-language cues decide when they agree among themselves and no legacy cue points to a
    different intent; any disagreement gives GENERAL. Without new-language cues the legacy
    counting rule applies ("what is the reason" ⇒ ENTITY: the tie goes to ENTITY).
    """
    counts = _legacy_counts(query)
    cues = _question_cues(query)
    if not cues:
        return _legacy_intent(counts)
    if len(cues) > 1:
        return Intent.GENERAL
    (intent,) = cues
    if any(count > 0 for other, count in counts.items() if other is not intent):
        return Intent.GENERAL
    return intent


def parse_intent(value: str) -> Intent:
    """Parse an ``--intent`` override: trimmed, case-insensitive (§3.4).

    Raises :class:`InputError` with the contract's message for anything else.
    """
    try:
        return Intent(value.strip().upper())
    except ValueError:
        valid = ", ".join(i.value for i in Intent)
        raise InputError(f"unknown intent {go_quote(value)}; valid: {valid}") from None
