"""PostgreSQL text for the store's SQLite statements: the SQL the PostgreSQL backend runs.

The store modules (``insights``, ``edges``, ``oplog``, ``counts``, ``hotindex``, ``vectors``, ...)
hold each query once, written for SQLite; the PostgreSQL schema (``postgres/schema.py``) keeps the
same tables, columns (``rowid`` is a real ``bigserial`` column there) and SQLite-compatible helper
functions (``json_each``, ``json_valid``, ``json_type``, ``instr``, the ``sqlite_master`` view), so
most statements need only their placeholders rewritten. What differs is rewritten here, once per
distinct statement (cached):

- ``?`` placeholders become ``$1, $2, ...`` (server-side binding, so ``%`` needs no escaping);
- ``INSERT OR IGNORE`` becomes ``ON CONFLICT DO NOTHING``, ``INSERT OR REPLACE`` an upsert on the
  table's key that also moves a replaced edge to a new ``rowid`` (SQLite's REPLACE deletes and
  re-inserts, which the hot index's catch-up by ``rowid`` relies on);
- ``LIKE`` becomes ``ILIKE`` (SQLite's LIKE folds ASCII case; on ``COLLATE "C"`` columns ILIKE folds
  exactly ASCII), ``+col`` (a planner hint for SQLite) loses its ``+``, a FROM sub-query gets the
  alias PostgreSQL 15 requires;
- PRAGMAs have fixed answers (integrity and foreign keys are the server's job).
"""

from __future__ import annotations

import re

# Primary keys of the tables written with INSERT OR REPLACE (the upsert's conflict target).
_KEYS = {
    "edges": ("source_id", "target_id", "edge_type"),
    "mnemon_meta": ("key",),
    "insights": ("id",),
}
_REPLACED_ROW_MOVES = {"edges": "rowid = nextval(pg_get_serial_sequence('edges', 'rowid'))"}

# PRAGMA → the rows SQLite would return for a healthy database.
PRAGMA_ROWS: dict[str, list[tuple[object, ...]]] = {
    "user_version": [(0,)],
    "integrity_check": [("ok",)],
    "foreign_key_check": [],
}

_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\?")
_INSERT_OR = re.compile(r"^\s*INSERT OR (IGNORE|REPLACE) INTO (\w+)\s*\(([^)]*)\)", re.S)
_PLUS_HINT = re.compile(r"(?<=[\s(])\+(?=[a-z_])")
_LIKE = re.compile(r"\bLIKE\b")
_SUBQUERY_GROUP = re.compile(r"\)\s+GROUP BY")

_CACHE: dict[str, str] = {}


def _placeholders(sql: str) -> str:
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) != "?":
            return match.group(0)  # a string literal: left as it is
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql)


def _insert_or(sql: str) -> str:
    match = _INSERT_OR.match(sql)
    if match is None:
        return sql
    verb, table, columns = match.group(1), match.group(2), match.group(3)
    head = f"INSERT INTO {table} ({columns})"
    body = head + sql[match.end() :]
    if verb == "IGNORE":
        return body + " ON CONFLICT DO NOTHING"
    keys = _KEYS[table]
    names = [c.strip() for c in columns.split(",")]
    sets = [f"{c} = EXCLUDED.{c}" for c in names if c not in keys]
    if table in _REPLACED_ROW_MOVES:
        sets.append(_REPLACED_ROW_MOVES[table])
    return body + f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(sets)}"


def translate(sql: str) -> str:
    """The PostgreSQL text of one SQLite statement of the store modules."""
    cached = _CACHE.get(sql)
    if cached is not None:
        return cached
    out = _insert_or(sql)
    out = _PLUS_HINT.sub("", out)
    out = _LIKE.sub("ILIKE", out)
    out = _SUBQUERY_GROUP.sub(") AS rows_of GROUP BY", out)
    out = _placeholders(out)
    _CACHE[sql] = out
    return out


def pragma(sql: str) -> str | None:
    """The PRAGMA's name when ``sql`` is one (``PRAGMA name`` or ``PRAGMA name=value``)."""
    stripped = sql.strip()
    if not stripped[:6].upper() == "PRAGMA":
        return None
    return re.split(r"[\s=(]", stripped[6:].strip(), maxsplit=1)[0].lower()
