"""PostgreSQL text for the store's SQLite statements: the SQL the PostgreSQL backend runs.

The store modules (``insights``, ``edges``, ``oplog``, ``counts``, ``hotindex``, ``vectors``, ...)
hold each query once, written for SQLite; the PostgreSQL schema (``postgres/schema.py``) keeps the
same tables, columns (``rowid`` is a real ``bigserial`` column there) and SQLite-compatible helper
functions (``json_each``, ``json_valid``, ``json_type``, ``instr``, the ``sqlite_master`` view), so
most statements need only their placeholders rewritten. What differs is rewritten here, once per
distinct statement (cached):

- ``?`` placeholders become ``$1, $2, ...`` (server-side binding, so ``%`` needs no escaping);
- an upsert's bare column in ``DO UPDATE SET`` is qualified with its table;
- ``INSERT OR IGNORE`` becomes ``ON CONFLICT DO NOTHING``, ``INSERT OR REPLACE`` an upsert on the
  table's key that also moves a replaced edge to a new ``rowid`` (SQLite's REPLACE deletes and
  re-inserts, which the hot index's catch-up by ``rowid`` relies on), or to the ``rowid`` the
  statement gives (``PgConnection.upsert_split``: rowids reserved up front);
- ``LIKE`` becomes ``ILIKE`` (SQLite's LIKE folds ASCII case; on ``COLLATE "C"`` columns ILIKE folds
  exactly ASCII), ``+col`` (a planner hint for SQLite) loses its ``+``, a FROM sub-query gets the
  alias PostgreSQL 15 requires;
- PRAGMAs have fixed answers (integrity is the server's job), except ``foreign_key_check``, a query.
"""

from __future__ import annotations

import operator
import re
from typing import Any

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
}
# PRAGMA → the query answering it as SQLite would. The edges' endpoints are kept by triggers
# (schema revision 3) rather than foreign keys, so doctor checks them as on SQLite: one row per
# edge and missing endpoint (table, rowid, parent, which key).
PRAGMA_QUERIES: dict[str, str] = {
    "foreign_key_check": (
        "SELECT 'edges', e.rowid, 'insights', k.fkid FROM edges AS e "
        "CROSS JOIN LATERAL (VALUES (0, e.target_id), (1, e.source_id)) AS k (fkid, id) "
        "WHERE NOT EXISTS (SELECT 1 FROM insights AS i WHERE i.id = k.id) ORDER BY e.rowid, k.fkid"
    ),
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
    if table in _REPLACED_ROW_MOVES and "rowid" not in names:  # (given rowids: the row moves to its own)
        sets.append(_REPLACED_ROW_MOVES[table])
    return body + f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(sets)}"


_UPSERT_SET = re.compile(r"^\s*INSERT INTO (\w+)\b.*?\bDO UPDATE SET\b", re.S)
_CAST_COLUMN = re.compile(r"\bCAST\((\w+) AS\b")


def _qualify_upsert(sql: str) -> str:
    """In SQLite's ``DO UPDATE SET col = f(col)`` a bare column is the existing row's; PostgreSQL
    calls it ambiguous (the existing row or EXCLUDED), so it is qualified with the table."""
    match = _UPSERT_SET.match(sql)
    if match is None:
        return sql
    table = match.group(1)
    return sql[: match.end()] + _CAST_COLUMN.sub(lambda m: f"CAST({table}.{m.group(1)} AS", sql[match.end() :])


def translate(sql: str) -> str:
    """The PostgreSQL text of one SQLite statement of the store modules."""
    cached = _CACHE.get(sql)
    if cached is not None:
        return cached
    out = _qualify_upsert(_insert_or(sql))
    out = _PLUS_HINT.sub("", out)
    out = _LIKE.sub("ILIKE", out)
    out = _SUBQUERY_GROUP.sub(") AS rows_of GROUP BY", out)
    out = _placeholders(out)
    _CACHE[sql] = out
    return out


_INSERT_INTO = re.compile(r"^\s*INSERT(?: OR \w+)? INTO (\w+)\s*\(([^)]*)\)", re.S)
_VALUES = re.compile(r"\bVALUES\s*\(([^)]*)\)", re.S)
_MULTI_CACHE: dict[str, MultiRow | None] = {}


class MultiRow:
    """An ``INSERT ... VALUES (?, ...)`` run for many rows as multi-row statements.

    One upsert statement may not touch a key twice, so for INSERT OR REPLACE only each key's last
    row is kept, which is what running the rows one by one leaves (the last write wins).
    """

    def __init__(
        self, head: str, tail: str, slots: list[str], key_positions: tuple[int, ...] | None, table: str, columns: list[str]
    ) -> None:
        self.head, self.tail, self.slots = head, tail, slots  # a slot: "?" (bound) or a constant
        self.table, self.columns = table, columns
        self.width = max(1, slots.count("?"))
        self.key_positions = key_positions
        # A plain INSERT (no conflict clause, only bound values and integer constants): a COPY.
        self.plain = key_positions is None and not tail.strip() and all(v == "?" or v.isdigit() for v in slots)
        # A row's key in one C-level call (for a one-column key, the bare value: as distinct).
        self._key = operator.itemgetter(*key_positions) if key_positions else None
        self.rows_per_statement = max(1, min(1000, 60_000 // self.width))  # PostgreSQL binds at most 65535 values
        self._texts: dict[int, str] = {}

    def text(self, n: int) -> str:
        cached = self._texts.get(n)
        if cached is None:
            groups = []
            bound = 0
            for _ in range(n):
                values = []
                for slot in self.slots:
                    if slot == "?":
                        bound += 1
                        values.append(f"${bound}")
                    else:
                        values.append(slot)
                groups.append("(" + ", ".join(values) + ")")
            cached = ", ".join(groups)
            cached = self._texts[n] = f"{self.head} VALUES {cached}{self.tail}"
        return cached

    def last_per_key(self, rows: list[Any]) -> list[Any]:
        """The rows to write: each key's last row for an upsert (keys index the bound values)."""
        if self.key_positions is None:
            return rows
        assert self._key is not None
        keys = list(map(self._key, rows))
        if len(set(keys)) == len(rows):
            return rows  # the usual case (bulk writes are built with distinct keys): no copy
        keyed: dict[tuple[Any, ...], Any] = {}
        for key, row in zip(keys, rows):
            keyed.pop(key, None)  # re-inserted at the end: the order of last writes is kept
            keyed[key] = row
        return list(keyed.values())


def multi_row(sql: str) -> MultiRow | None:
    """The multi-row form of an INSERT statement with one ``VALUES (?, ...)`` group, else None."""
    if sql in _MULTI_CACHE:
        return _MULTI_CACHE[sql]
    found: MultiRow | None = None
    stripped = sql.lstrip()
    match = _VALUES.search(stripped)
    if stripped.upper().startswith("INSERT") and match is not None:
        slots = [v.strip() for v in match.group(1).split(",")]
        if all(v in ("?", "0") for v in slots) and "SELECT" not in stripped.upper():
            translated = translate(stripped)
            values = _VALUES.search(translated)
            assert values is not None
            head, tail = translated[: values.start()].rstrip(), translated[values.end() :]
            keys = None
            insert = _INSERT_OR.match(stripped)
            if insert is not None and insert.group(1) == "REPLACE":
                columns = [c.strip() for c in insert.group(3).split(",")]
                bound = [c for c, v in zip(columns, slots) if v == "?"]  # positions among the bound values
                keys = tuple(bound.index(k) for k in _KEYS[insert.group(2)])
            target = _INSERT_INTO.match(stripped)
            assert target is not None
            table, columns = target.group(1), [c.strip() for c in target.group(2).split(",")]
            found = MultiRow(head, tail, slots, keys, table, columns)
    _MULTI_CACHE[sql] = found
    return found


def given_rowids(sql: str) -> tuple[MultiRow, MultiRow]:
    """For an ``INSERT OR REPLACE INTO t (cols) VALUES (...)``: the same upsert and the same plain
    INSERT with the ``rowid`` as a first bound column (rows whose rowids the caller reserved)."""
    match = _INSERT_OR.match(sql)
    values = _VALUES.search(sql)
    assert match is not None and match.group(1) == "REPLACE" and values is not None
    table, columns = match.group(2), match.group(3).strip()
    tail = f"{columns}) VALUES (?, {values.group(1).strip()})"
    upsert = multi_row(f"INSERT OR REPLACE INTO {table} (rowid, {tail}")
    plain = multi_row(f"INSERT INTO {table} (rowid, {tail}")
    assert upsert is not None and plain is not None and plain.plain
    return upsert, plain


def pragma(sql: str) -> str | None:
    """The PRAGMA's name when ``sql`` is one (``PRAGMA name`` or ``PRAGMA name=value``)."""
    stripped = sql.strip()
    if not stripped[:6].upper() == "PRAGMA":
        return None
    return re.split(r"[\s=(]", stripped[6:].strip(), maxsplit=1)[0].lower()
