"""Numbers read from stored rows: what a malformed one reads as, and doctor's finding and rewriting of them.

SQLite keeps a value its column cannot convert as it was given, so a store edited by hand
(``UPDATE insights SET importance='x'``), written by another program, or a Go store (whose numeric
columns may be NULL) can hold text, a blob, NULL or an infinity where a number belongs. Every reader
of a numeric column converts through :func:`integer` and :func:`real`, so such a row reads as its
column's fallback below instead of failing every command with a ValueError; ``doctor`` names the
rows (:func:`malformed`) and ``doctor --repair`` writes exactly those fallbacks (:func:`repair`), so
what a command read before the repair is what the store holds after it.

Well-formed: an integer column holds an integer; a real column a finite number, or NULL where NULL
has a meaning of its own (``effective_importance``: not computed yet). Anything else is malformed.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw

from mnemon.records import DEFAULT_IMPORTANCE
from mnemon.store.check import shown

# The importance an insight is given when none is stated: "standard", neither immune to auto-prune
# (4, 5) nor marked temporary (1); the value that claims nothing about a row whose own is unreadable.
IMPORTANCE_FALLBACK = DEFAULT_IMPORTANCE
# Every insight starts at 0 accesses; reading more would grant immunity from pruning (3 and up) that no
# recorded access earned.
ACCESS_COUNT_FALLBACK = 0
# The column's default and what a row not yet computed reads as; the value is derived (importance,
# accesses, age, edges) and the next upkeep of the row recomputes it, so it only orders auto-prune meanwhile.
EFFECTIVE_IMPORTANCE_FALLBACK = 0.5
# The weight `link` and `import` give an edge whose weight is not stated (drafts.DEFAULT_EDGE_WEIGHT);
# not the column's DEFAULT 1.0, which no mnemon writer uses and would make an unknown edge a strongest link.
WEIGHT_FALLBACK = 0.5

_MAX = sys.float_info.max


def integer(value: object, fallback: int) -> int:
    """An integer column's value, or ``fallback`` for anything but an integer (text, blob, real, NULL)."""
    return value if type(value) is int else fallback


def real(value: object, fallback: float) -> float:
    """A real column's value as a float, or ``fallback`` for anything but a finite number."""
    if type(value) is float:
        return value if -_MAX <= value <= _MAX else fallback
    return float(value) if type(value) is int else fallback


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    fallback: float
    well_formed: Callable[[object], bool]
    kind: str  # what a value must be, for the report


def _is_integer(value: object) -> bool:
    return type(value) is int


def _is_finite(value: object) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _is_finite_or_null(value: object) -> bool:
    return value is None or _is_finite(value)


INSIGHT_COLUMNS = (
    Column("importance", IMPORTANCE_FALLBACK, _is_integer, "an integer"),
    Column("access_count", ACCESS_COUNT_FALLBACK, _is_integer, "an integer"),
    Column("effective_importance", EFFECTIVE_IMPORTANCE_FALLBACK, _is_finite_or_null, "a finite number"),
)
EDGE_COLUMNS = (Column("weight", WEIGHT_FALLBACK, _is_finite, "a finite number"),)

# Candidates only, decided in Python by the columns' ``well_formed`` (the readers' own rule): SQL that runs
# on both backends (PostgreSQL has no typeof()) and selects a superset. An integer differs from its CAST
# only when it is none (text, blob, real); a finite real lies between the extremes, text and blobs sort
# above every number, infinities and PostgreSQL's NaN outside.
_FINITE = f"BETWEEN {-_MAX!r} AND {_MAX!r}"
_SQL_INSIGHT_CANDIDATES = (
    "SELECT id, importance, access_count, effective_importance FROM insights "
    "WHERE importance IS NULL OR importance != CAST(importance AS INTEGER) "
    "OR access_count IS NULL OR access_count != CAST(access_count AS INTEGER) "
    f"OR NOT (effective_importance {_FINITE}) ORDER BY rowid"
)
_SQL_EDGE_CANDIDATES = (
    f"SELECT source_id, target_id, edge_type, weight FROM edges WHERE weight IS NULL OR NOT (weight {_FINITE}) "
    "ORDER BY rowid"
)
_SQL_REPAIR_INSIGHT = "UPDATE insights SET importance = ?, access_count = ?, effective_importance = ? WHERE id = ?"
_SQL_REPAIR_EDGE = "UPDATE edges SET weight = ? WHERE source_id = ? AND target_id = ? AND edge_type = ?"


@dataclass(frozen=True, slots=True)
class Malformed:
    """One row with at least one malformed numeric value: its key, and every column's value as read."""

    table: str
    key: tuple[str, ...]
    values: tuple[Any, ...]  # as stored, in the table's column order above
    bad: tuple[str, ...]  # the malformed columns' names


def _scan(conn: apsw.Connection, sql: str, n_key: int, table: str, columns: tuple[Column, ...]) -> list[Malformed]:
    found = []
    for row in conn.execute(sql):
        key, values = tuple(str(v) for v in row[:n_key]), tuple(row[n_key:])
        bad = tuple(c.name for c, v in zip(columns, values) if not c.well_formed(v))
        if bad:
            found.append(Malformed(table, key, values, bad))
    return found


def malformed(conn: apsw.Connection) -> list[Malformed]:
    """Every insight and edge row holding a malformed numeric value, insights first, each in rowid order."""
    return [
        *_scan(conn, _SQL_INSIGHT_CANDIDATES, 1, "insights", INSIGHT_COLUMNS),
        *_scan(conn, _SQL_EDGE_CANDIDATES, 3, "edges", EDGE_COLUMNS),
    ]


def describe(rows: list[Malformed]) -> list[str]:
    """One problem per malformed value, naming the row, the value and what it reads as."""
    out = []
    for row in rows:
        columns = INSIGHT_COLUMNS if row.table == "insights" else EDGE_COLUMNS
        where = f"insight {row.key[0]}" if row.table == "insights" else f"edge {row.key[0]} -> {row.key[1]} ({row.key[2]})"
        for column, value in zip(columns, row.values):
            if column.name in row.bad:
                fallback = int(column.fallback) if column.kind == "an integer" else column.fallback
                out.append(f"{where}: {column.name} {shown(value)} is not {column.kind}, read as {fallback}; "
                           "--repair writes that")
    return out


def repair(conn: apsw.Connection, rows: list[Malformed]) -> int:
    """Write each malformed value's fallback (well-formed ones as they are), inside the caller's transaction."""
    insights = [
        (
            integer(v[0], IMPORTANCE_FALLBACK),
            integer(v[1], ACCESS_COUNT_FALLBACK),
            None if v[2] is None else real(v[2], EFFECTIVE_IMPORTANCE_FALLBACK),
            r.key[0],
        )
        for r in rows if r.table == "insights" for v in (r.values,)
    ]  # fmt: skip
    edges = [(real(r.values[0], WEIGHT_FALLBACK), *r.key) for r in rows if r.table == "edges"]
    if insights:
        conn.executemany(_SQL_REPAIR_INSIGHT, insights)
    if edges:
        conn.executemany(_SQL_REPAIR_EDGE, edges)
    return sum(len(r.bad) for r in rows)
