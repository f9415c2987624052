"""Tests for mnemon.intent: §4.12 legacy counting, new-language cues, disagreement, parsing."""

from __future__ import annotations

import pytest

from mnemon.errors import InputError
from mnemon.intent import detect_intent, parse_intent
from mnemon.records import Intent

# The fifteen expectations of the Go project's end-to-end check (§4.12).
E2E_CASES = [
    ("為什麼選擇 Alpha？", Intent.WHY),
    ("हमने Alpha क्यों चुना?", Intent.WHY),
    ("¿Cuándo elegimos Alpha?", Intent.WHEN),
    ("ما هو Alpha؟", Intent.ENTITY),
    ("Qu’est-ce que Alpha ?", Intent.ENTITY),
    ("Alpha কী?", Intent.ENTITY),
    ("Alpha por quê?", Intent.WHY),
    ("Kapan memilih Alpha?", Intent.WHEN),
    ("Почему выбрали Alpha?", Intent.WHY),
    ("Was ist Alpha?", Intent.ENTITY),
    ("Alpha index tuning", Intent.GENERAL),
    ("Alpha কখনো कब्ज যখন", Intent.GENERAL),
    ("¿Por qué y cuándo elegimos Alpha?", Intent.GENERAL),
    ("Why Alpha, wann gewählt?", Intent.GENERAL),
    ("Pourquoi Alpha, why?", Intent.WHY),
]


@pytest.mark.parametrize(("query", "expected"), E2E_CASES)
def test_e2e_expectations(query: str, expected: Intent) -> None:
    assert detect_intent(query) is expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("why did we choose Qdrant", Intent.WHY),
        ("What was the RATIONALE", Intent.WHY),
        ("when did the migration happen", Intent.WHEN),
        ("timeline of releases before v2", Intent.WHEN),
        ("tell me about Qdrant", Intent.ENTITY),
        ("describe the storage layer", Intent.ENTITY),
        ("Qdrant vector index", Intent.GENERAL),
        ("", Intent.GENERAL),
        ("为什么选择向量数据库", Intent.WHY),
        ("什么时候上线", Intent.WHEN),
        ("Qdrant是什么", Intent.ENTITY),
        ("何時上線", Intent.WHEN),
        ("關於 Alpha", Intent.ENTITY),
        ("向量数据库选型", Intent.GENERAL),
    ],
)
def test_plain_english_and_chinese(query: str, expected: Intent) -> None:
    assert detect_intent(query) is expected


def test_ties_fall_to_entity() -> None:
    assert detect_intent("what is the reason") is Intent.ENTITY


def test_strict_majority_wins() -> None:
    # two WHY cues beat one WHEN cue; one each with no ENTITY cue is GENERAL
    assert detect_intent("why and for what reason after the launch") is Intent.WHY
    assert detect_intent("why after") is Intent.GENERAL


def test_legacy_words_need_word_boundaries() -> None:
    assert detect_intent("timestamps and whyever") is Intent.GENERAL  # no "time", no "why"
    assert detect_intent("because") is Intent.WHY  # "cause" inside "because" is not counted
    assert detect_intent("tell me about it") is Intent.ENTITY


def test_boundaries_are_unicode_aware() -> None:
    # A letter, mark or digit glued to the cue blocks it; punctuation does not.
    assert detect_intent("éwhy") is Intent.GENERAL
    assert detect_intent("why2") is Intent.GENERAL
    assert detect_intent("why_") is Intent.GENERAL
    assert detect_intent("(why)") is Intent.WHY


def test_vowel_signs_are_word_characters() -> None:
    assert detect_intent("कब्ज") is Intent.GENERAL
    assert detect_intent("कब हुआ") is Intent.WHEN
    assert detect_intent("কখনো") is Intent.GENERAL
    assert detect_intent("কখন হবে") is Intent.WHEN


def test_spanish_accent_may_be_combining() -> None:
    assert detect_intent("¿Cua\u0301ndo elegimos Alpha?") is Intent.WHEN
    assert detect_intent("¿Por que\u0301 Alpha?") is Intent.WHY


def test_multiword_cues_accept_any_whitespace_run() -> None:
    assert detect_intent("Was\u00a0\u00a0ist Alpha?") is Intent.ENTITY
    assert detect_intent("что\tтакое Alpha") is Intent.ENTITY
    assert detect_intent("Apa  itu Alpha") is Intent.ENTITY


def test_french_elisions_accept_both_apostrophes() -> None:
    assert detect_intent("Qu'est-ce que Alpha ?") is Intent.ENTITY
    assert detect_intent("qu'est ce que Alpha") is Intent.ENTITY
    assert detect_intent("C’est quoi Alpha") is Intent.ENTITY


def test_bengali_entity_cue_only_at_the_end() -> None:
    assert detect_intent("Alpha কী") is Intent.ENTITY
    assert detect_intent("Alpha কে？ ") is Intent.ENTITY
    assert detect_intent("কী Alpha") is Intent.GENERAL


def test_quoted_spans_are_blanked_before_new_cues() -> None:
    assert detect_intent('Alpha "warum" index') is Intent.GENERAL
    assert detect_intent("«Pourquoi» tuning") is Intent.GENERAL
    assert detect_intent("`wann` tuning") is Intent.GENERAL
    assert detect_intent("'kapan' tuning") is Intent.GENERAL
    assert detect_intent("“quando” tuning") is Intent.GENERAL
    # an unpaired quote blanks nothing
    assert detect_intent('"wann tuning') is Intent.WHEN


def test_arabic_diacritics_and_tatweel_are_ignored() -> None:
    assert detect_intent("لِمَاذَا Alpha") is Intent.WHY  # harakat
    assert detect_intent("مـتـى Alpha") is Intent.WHEN  # tatweel
    assert detect_intent("مَا هُوَ Alpha") is Intent.ENTITY


def test_new_language_cue_against_a_different_legacy_cue_is_general() -> None:
    assert detect_intent("Warum, what is Alpha?") is Intent.GENERAL
    assert detect_intent("Wann war das, time?") is Intent.WHEN  # same intent agrees


def test_new_language_cues_of_one_intent_agree() -> None:
    assert detect_intent("Warum? Pourquoi? Почему?") is Intent.WHY


@pytest.mark.parametrize("value", ["WHY", "why", "  When ", "entity", "General\n"])
def test_parse_intent_trims_and_ignores_case(value: str) -> None:
    assert parse_intent(value) is Intent(value.strip().upper())


def test_parse_intent_rejects_unknown() -> None:
    with pytest.raises(InputError) as info:
        parse_intent("HOW")
    assert str(info.value) == 'unknown intent "HOW"; valid: WHY, WHEN, ENTITY, GENERAL'


def test_parse_intent_error_quotes_like_go() -> None:
    with pytest.raises(InputError) as info:
        parse_intent('a"b\n')
    assert str(info.value).startswith('unknown intent "a\\"b\\n";')
