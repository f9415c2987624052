"""Tests for mnemon.lifecycle: §4.8 EI, immunity, prune policy; RFC 3339 timestamps."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from mnemon.errors import InputError
from mnemon.lifecycle import (
    base_importance,
    days_since,
    effective_importance,
    format_go_duration,
    format_timestamp,
    is_immune,
    parse_timestamp,
    prune_count,
    prune_cutoff,
    prune_detail,
)

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def test_parse_utc_and_offsets_to_aware_utc() -> None:
    assert parse_timestamp("2026-02-18T10:00:00Z") == datetime(2026, 2, 18, 10, tzinfo=timezone.utc)
    assert parse_timestamp("2026-02-18T12:30:00+02:30") == datetime(2026, 2, 18, 10, tzinfo=timezone.utc)
    assert parse_timestamp("2026-02-18T05:00:00-05:00") == datetime(2026, 2, 18, 10, tzinfo=timezone.utc)
    assert parse_timestamp("2026-02-18T10:00:00Z").tzinfo is timezone.utc


def test_parse_fractional_seconds_truncated_to_microseconds() -> None:
    dt = parse_timestamp("2026-02-18T10:00:00.123456789Z")
    assert dt.microsecond == 123456
    assert parse_timestamp("2026-02-18T10:00:00.5Z").microsecond == 500000


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "2026-02-18",
        "2026-02-18 10:00:00Z",
        "2026-02-18T10:00:00",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-02-18T24:00:00Z",
        "2026-02-18T10:00:00+24:00",
        "2026-02-18T10:00:00Z ",
        "yesterday",
        "0001-01-01T00:00:00+14:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
    ],
)
def test_parse_rejects_non_rfc3339(bad: str) -> None:
    with pytest.raises(InputError, match="invalid timestamp"):
        parse_timestamp(bad)


def test_format_is_second_precision_utc() -> None:
    dt = datetime(2026, 2, 18, 12, 30, 5, 999999, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(dt) == "2026-02-18T10:30:05Z"
    assert format_timestamp(datetime(2026, 2, 18, 10, 0, 0)) == "2026-02-18T10:00:00Z"
    assert format_timestamp(parse_timestamp("0999-01-02T03:04:05Z")) == "0999-01-02T03:04:05Z"


def test_days_since_is_fractional() -> None:
    assert days_since("2026-02-28T00:00:00Z", NOW) == pytest.approx(1.5)
    assert days_since("2026-03-02T12:00:00Z", NOW) == pytest.approx(-1.0)


def test_base_importance_table() -> None:
    assert [base_importance(i) for i in (5, 4, 3, 2, 1, 0, 9)] == [1.0, 0.8, 0.5, 0.3, 0.15, 0.15, 0.15]


def test_fresh_standard_insight_is_its_base() -> None:
    assert effective_importance(3, 0, None, "2026-03-01T12:00:00Z", 0, NOW) == pytest.approx(0.5)


def test_decay_halves_every_thirty_days_from_created_at() -> None:
    created = "2026-01-30T12:00:00Z"  # 30 days before NOW
    assert effective_importance(5, 0, None, created, 0, NOW) == pytest.approx(0.5)


def test_last_access_resets_decay() -> None:
    ei = effective_importance(5, 0, "2026-03-01T12:00:00Z", "2025-01-01T00:00:00Z", 0, NOW)
    assert ei == pytest.approx(1.0)


def test_access_factor_is_log_but_never_below_one() -> None:
    now_ts = "2026-03-01T12:00:00Z"
    assert effective_importance(3, 1, now_ts, now_ts, 0, NOW) == pytest.approx(0.5)  # ln 2 < 1
    assert effective_importance(3, 9, now_ts, now_ts, 0, NOW) == pytest.approx(0.5 * math.log(10))
    # an access count below zero (no mnemon writer makes one; a Go store may hold one): never accessed, not a
    # math domain error that ended gc with a traceback
    assert effective_importance(3, -5, now_ts, now_ts, 0, NOW) == effective_importance(3, 0, now_ts, now_ts, 0, NOW)


def test_edge_factor_caps_at_five_rows() -> None:
    now_ts = "2026-03-01T12:00:00Z"
    assert effective_importance(3, 0, None, now_ts, 2, NOW) == pytest.approx(0.5 * 1.2)
    assert effective_importance(3, 0, None, now_ts, 5, NOW) == pytest.approx(0.75)
    assert effective_importance(3, 0, None, now_ts, 40, NOW) == pytest.approx(0.75)


def test_full_formula() -> None:
    ei = effective_importance(4, 4, "2026-02-15T12:00:00Z", "2026-01-01T00:00:00Z", 3, NOW)
    expected = 0.8 * math.log(5) * 0.5 ** (14 / 30) * 1.3  # Feb 2026 has 28 days
    assert ei == pytest.approx(expected)


def test_unreadable_timestamps_decay_to_zero_or_fall_back() -> None:
    assert effective_importance(5, 0, None, "garbage", 0, NOW) == 0.0
    assert effective_importance(5, 0, "garbage", "2026-03-01T12:00:00Z", 0, NOW) == pytest.approx(1.0)


def test_immunity() -> None:
    assert is_immune(4, 0)
    assert is_immune(5, 0)
    assert is_immune(1, 3)
    assert not is_immune(3, 2)


def test_prune_count() -> None:
    assert prune_count(1000, 1000) == 0
    assert prune_count(1003, 1000) == 3
    assert prune_count(1500, 1000) == 10
    assert prune_count(5000, 0) == 0  # ceiling ≤ 0 disables
    assert prune_count(5000, -1) == 0


def test_prune_cutoff_is_min_age_before_now() -> None:
    assert prune_cutoff(NOW, 24 * 3600) == "2026-02-28T12:00:00Z"
    assert prune_cutoff(NOW, 0) == "2026-03-01T12:00:00Z"


def test_prune_detail_matches_oplog_wording() -> None:
    assert prune_detail(1001, 1000, 86400, "abc") == (
        "auto-prune: over capacity (active=1001, max=1000, min_age=24h0m0s) trigger=abc"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (86400, "24h0m0s"),
        (604800, "168h0m0s"),
        (5400, "1h30m0s"),
        (60, "1m0s"),
        (30, "30s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (0.0000015, "1.5µs"),
        (-90, "-1m30s"),
    ],
)
def test_go_duration_formatting(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text
