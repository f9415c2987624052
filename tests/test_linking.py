"""Tests for mnemon.linking: §4.6 causal keywords/direction/sub-type, §4.4 weights, formats."""

from __future__ import annotations

import pytest

from mnemon.linking import (
    CAUSAL_PATTERN,
    causal_direction,
    causal_signal,
    causal_sub_type,
    format_metric,
    proximity_weight,
)
from mnemon.text import token_overlap, tokenize


def test_contract_causal_example() -> None:
    prev = "Rust performance benchmarks for vector databases"
    new = "Chose Qdrant because Rust performance is critical"
    assert causal_signal(new) == "because"
    assert causal_signal(prev) == ""
    assert causal_direction(new, prev) == "prev_to_new"  # keyword on the new side: it is the effect
    assert causal_sub_type(new, prev) == "causes"
    # and the pair clears the 0.15 overlap floor: {rust, performance} / 6
    assert token_overlap(tokenize(new), tokenize(prev)) == pytest.approx(2 / 6)


def test_direction_when_only_the_earlier_text_gives_a_reason() -> None:
    assert causal_direction("Qdrant is deployed", "We picked Qdrant due to latency") == "new_to_prev"


def test_no_keyword_no_direction() -> None:
    assert causal_direction("Qdrant is deployed", "Qdrant benchmarks") is None


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("BECAUSE of latency", "because"),
        ("It was Chosen Because it is fast", "chosen because"),
        ("as a result, we moved", "as a result"),
        ("We Decided To migrate", "decided to"),
        ("this leads to churn; therefore", "leads to"),
        ("我们因为性能选择了它", "因为"),
        ("为了速度所以换了", "为了"),
        ("becauseof typo", ""),
        ("the cause is unknown", ""),
        ("resultsin", ""),
    ],
)
def test_causal_signal_first_match_lower_cased(text: str, signal: str) -> None:
    assert causal_signal(text) == signal


def test_english_keywords_use_ascii_boundaries() -> None:
    # é is not an ASCII word character, so RE2 sees a boundary before "because".
    assert causal_signal("ébecause") == "because"
    assert CAUSAL_PATTERN.search("xbecause") is None
    assert CAUSAL_PATTERN.search("because_") is None


def test_sub_type_precedence_prevents_then_enables_then_causes() -> None:
    assert causal_sub_type("we cache because reads dominate", "it blocked the release") == "prevents"
    assert causal_sub_type("we cache so that reads are fast", "because latency") == "enables"
    assert causal_sub_type("the outage was caused by DNS", "retry storms") == "causes"
    assert causal_sub_type("therefore we moved", "nothing else") == "causes"  # default
    assert causal_sub_type("为了提速", "因为慢") == "enables"
    assert causal_sub_type("防止数据丢失", "为了安全") == "prevents"


def test_sub_type_keywords_never_span_the_two_texts() -> None:
    assert causal_sub_type("the release was so", "that ends it") == "causes"
    assert causal_sub_type("we enables", "x") == "enables"


def test_proximity_weight() -> None:
    assert proximity_weight(0.0) == 1.0
    assert proximity_weight(3.0) == 0.25
    assert proximity_weight(-3.0) == 0.25


def test_format_metric_matches_go_printf() -> None:
    assert format_metric(1.5, 2) == "1.50"
    assert format_metric(0.123456, 4) == "0.1235"
    assert format_metric(2.675, 2) == "2.67"  # exact binary value is below .675, as in Go
    assert format_metric(0.0, 4) == "0.0000"
    assert format_metric(float("nan"), 2) == "NaN"
    assert format_metric(float("inf"), 2) == "+Inf"
