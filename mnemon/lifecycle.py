"""Insight lifecycle: effective importance, immunity and the auto-prune policy (contract §4.8).

Owns the EI formula (base × access × decay × edge factor), the immunity rule, how many rows an
over-capacity store prunes and from which stored_at they become eligible, the prune oplog
detail (§3.12), and the RFC 3339 timestamps everything is stamped with (§2.3: UTC, second
precision, compared as strings; parsed by ``validate.parse_timestamp``, which the store's doctor reads too).

Pure: the caller passes ``now`` (an aware datetime) so that the time rules are testable; no
clock, no I/O, stdlib only.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from mnemon.errors import InputError
from mnemon.records import (
    AUTO_PRUNE_BATCH,
    BASE_IMPORTANCE,
    BASE_IMPORTANCE_OTHER,
    DECAY_HALF_LIFE_DAYS,
    EDGE_FACTOR_CAP,
    EDGE_FACTOR_STEP,
    GO_ZERO_STAMP,
    IMMUNE_ACCESS_COUNT,
    IMMUNE_IMPORTANCE,
)
from mnemon.validate import parse_timestamp  # the parser is validate's: the store's doctor reads stamps too

__all__ = [
    "base_importance",
    "days_since",
    "days_since_access",
    "effective_importance",
    "format_go_duration",
    "format_timestamp",
    "is_immune",
    "parse_timestamp",
    "prune_count",
    "prune_cutoff",
    "prune_detail",
]

_SECONDS_PER_DAY = 86_400.0

def format_timestamp(dt: datetime) -> str:
    """Format ``dt`` as UTC RFC 3339 with second precision ("2026-02-18T10:00:00Z").

    A naive datetime is taken to be UTC already.
    """
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}Z"


def days_since(ts: str, now: datetime) -> float:
    """Return the fractional days from timestamp ``ts`` to ``now`` (negative if ``ts`` is later)."""
    return (now - parse_timestamp(ts)).total_seconds() / _SECONDS_PER_DAY


# Go parses an unreadable timestamp to its zero time (year 1): such a row reads as ancient. (export writes
# an unreadable created_at as this stamp, and doctor --repair stores it: records.GO_ZERO_STAMP.)
_GO_ZERO_TIME = parse_timestamp(GO_ZERO_STAMP)


def days_since_access(last_access: str | None, created_at: str, now: datetime) -> float:
    """Return the days since the last access, else since creation (§4.8).

    Never raises: a stamp that does not parse is skipped, and when neither parses the days
    count from Go's zero time, so one odd row cannot fail ``gc`` or a write.
    """
    for ts in (last_access, created_at):
        if ts:
            try:
                return days_since(ts, now)
            except InputError:
                continue
    return (now - _GO_ZERO_TIME).total_seconds() / _SECONDS_PER_DAY


# A stamp in the future makes the exponent negative and the decay above 1 (§4.8's formula, as Go
# computes it); past about 84 years ahead 0.5 ** x overflows (Go: +Inf, which no JSON encodes). The
# exponent stops at -1000 there (decay about 1e301): every value Go computes finitely stays bit for
# bit, and a draft dated 2112 imports instead of failing with an OverflowError.
_DECAY_EXPONENT_FLOOR = -1000.0


def decay(days: float) -> float:
    """0.5 ^ (days / DECAY_HALF_LIFE_DAYS), its exponent at least _DECAY_EXPONENT_FLOOR."""
    return 0.5 ** max(days / DECAY_HALF_LIFE_DAYS, _DECAY_EXPONENT_FLOOR)


def base_importance(importance: int) -> float:
    """Return the EI base for an importance: 5→1.0, 4→0.8, 3→0.5, 2→0.3, other→0.15."""
    return BASE_IMPORTANCE.get(importance, BASE_IMPORTANCE_OTHER)


def effective_importance(
    importance: int,
    access_count: int,
    last_access: str | None,
    created_at: str,
    edge_rows: int,
    now: datetime,
) -> float:
    """Return EI = base × max(1, ln(1+access)) × 0.5^(days/30) × (1 + 0.1 × min(edges, 5)).

    Days run from the last access, or from ``created_at`` if never accessed, so a backdated
    import starts heavily decayed. ``edge_rows`` counts rows as source plus rows as target (a
    bidirectional link counts 2). An unreadable timestamp decays to 0, as Go's zero time does.
    """
    access = max(1.0, math.log1p(max(0, access_count)))  # a negative count (an odd Go row) is never-accessed
    edges = 1.0 + EDGE_FACTOR_STEP * min(edge_rows, EDGE_FACTOR_CAP)
    return base_importance(importance) * access * decay(days_since_access(last_access, created_at, now)) * edges


def is_immune(importance: int, access_count: int) -> bool:
    """Return True if auto-prune and gc must spare the insight (importance ≥ 4 or access ≥ 3)."""
    return importance >= IMMUNE_IMPORTANCE or access_count >= IMMUNE_ACCESS_COUNT


def prune_count(active: int, ceiling: int) -> int:
    """Return how many rows auto-prune removes: min(active − ceiling, 10); 0 if ceiling ≤ 0."""
    if ceiling <= 0 or active <= ceiling:
        return 0
    return min(active - ceiling, AUTO_PRUNE_BATCH)


def prune_cutoff(now: datetime, min_age_seconds: float) -> str:
    """Return the stored_at bound: only rows with ``COALESCE(stored_at, created_at) <=`` it prune.

    The 24 h grace (issue #83) keeps same-second writes and backdated imports from being reaped.
    """
    return format_timestamp(now - timedelta(seconds=min_age_seconds))


def prune_detail(active: int, ceiling: int, min_age_seconds: float, trigger: str) -> str:
    """Return the oplog detail of one ``prune`` row (§3.12)."""
    return (
        f"auto-prune: over capacity (active={active}, max={ceiling}, "
        f"min_age={format_go_duration(min_age_seconds)}) trigger={trigger}"
    )


def format_go_duration(seconds: float) -> str:
    """Format a duration as Go's ``time.Duration.String`` does ("24h0m0s", "1.5s", "250ms")."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000:
        return f"{sign}{nanos}ns"
    if nanos < 1_000_000:
        return f"{sign}{_decimal(nanos, 1_000)}µs"
    if nanos < 1_000_000_000:
        return f"{sign}{_decimal(nanos, 1_000_000)}ms"
    hours, rest = divmod(nanos, 3_600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    secs = _decimal(rest, 10**9)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _decimal(value: int, unit: int) -> str:
    """Render value/unit with the fraction's trailing zeros dropped ("1.5", "2")."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(frac).rjust(digits, '0').rstrip('0')}"
