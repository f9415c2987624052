"""Values of the right type outside the contract, and JSON columns holding no JSON of their kind: what the
readers make of them, what ``doctor`` names and what ``doctor --repair`` writes.

``store.numeric`` handles a number column holding no number (text, a blob, NULL, an infinity); this module
the well-formed values the contract still does not allow, which a hand edit, another program or a Go store
can leave: an importance of 7, a negative access count, an edge weight of 4.5, tags that are not a JSON
array. Every command reads them without failing; ``--repair`` writes, per column, the valid value chosen
from what the readers already do with it (each choice is argued at its rule below and listed in README's
storage section). Only the columns named here are rewritten, and only where their value is out of the
contract: a valid value is never changed.

- ``importance`` (integer 1-5): clamped into 1-5. Below 1 every reader already takes it as 1: its
  effective-importance base is BASE_IMPORTANCE_OTHER (importance 1's), it is not immune to auto-prune (as
  1), and it sorts below every valid importance. Above 5 the readers that decide anything take it as 5:
  immune to auto-prune and ``gc`` (importance >= 4), first among equal recall and ``recall --basic``
  scores. Only its effective-importance base (BASE_IMPORTANCE_OTHER, the lookup's "other") moves to 5's,
  and effective importance orders only rows that are not immune, so nothing a command decides changes;
  ``--repair`` writes the row's effective importance that 5 gives along with it (``lowered_importance``:
  the doctor pipeline computes it with upkeep's function), so the store is consistent at once. (Below 1
  the base is already 1's, "other": the stored effective importance stays as it is.) The
  default 3 was not chosen: it would make an immune row prunable, or lift a row below 1 over valid 1s and 2s.
- ``access_count`` (integer >= 0): 0. Effective importance reads a negative count as 0 (``max(0, n)``)
  and the immunity rule (>= 3) treats it as 0: writing 0 changes nothing any reader computes. One above
  ``records.MAX_ACCESS_COUNT`` (a SQLite count an older writer let grow) becomes that ceiling: the access bump
  writes it on the row's next access, ``export`` and ``store copy`` write it, and nothing a command decides
  moves (immune either way; effective importance orders only rows that are not).
- ``weight`` (finite, 0-1): clamped into 0-1. The readers take a weight as it is (recall's beam search
  adds lambda x type weight x weight), so no valid value reads the same; the nearest valid one keeps the
  edge's order among every valid edge (a 4.5 stays a strongest link, a -2 a weakest), where the
  fallback 0.5 would discard what the number says.
- ``tags``, ``entities`` (a JSON array of strings): the list every row reader (``show``, recall, export,
  the recall index, the token scan) reads, re-encoded: ``[]`` for anything but a JSON array (the SQL
  readers' ``json_valid`` guards read those as empty too).
- an edge's ``metadata`` (a JSON object of strings): likewise the object ``store.edges`` reads, ``{}`` for
  anything but a JSON object. (The recall index's backbone flag looks for two words in the raw text; a
  non-JSON text holding both read as a backbone link there and no longer does.)
- ``created_at`` (an RFC 3339 stamp): text that does not parse (a hand edit, an old writer's form) becomes
  ``records.GO_ZERO_STAMP``, 0001-01-01T00:00:00Z: lifecycle's decay, the one reader that reads a time from it,
  counts such a row from Go's zero time, so effective importance, ``gc`` and auto-prune compute what they did;
  ``export`` writes the same stamp for it (its draft then imports). Recall read only the raw bytes (the first ten
  as a day for same-day grouping, the whole for the last tie-break, where text after the digits sorted as the
  newest); it now reads the oldest day. An empty one (``''``) is read by decay exactly so (it skips an empty
  stamp as it skips one that does not parse) and gets the same stamp; one that is no text (a blob) stays
  ``check.insight_problems``' ("not text": not repaired), though export writes the stamp for it too.
- ``last_accessed_at`` (an RFC 3339 stamp or NULL): text that does not parse becomes NULL. Decay, its one
  reader, skips such a stamp and counts from ``created_at``, as it does for a row never accessed (NULL), and
  ``export`` leaves it out, so an imported copy holds NULL too.
- ``updated_at`` (an RFC 3339 stamp): text that does not parse becomes the row's ``created_at`` (GO_ZERO_STAMP
  where that does not parse either). No reader computes anything from it (``show`` prints it); ``export``
  leaves it out, and import gives a row without one its created_at: the repair stores what a round trip does.
- ``category`` (one of the six): any other text, the legacy ``narrative`` included, becomes ``general``. No
  command decides anything by a category but the ``--cat`` scope, which holds no such row, and ``viz``, which
  colours it as general; ``general`` is what the contract gives a memory whose category is not stated (a
  draft item without one, the column's default), so ``export`` writes it and the draft imports. ``narrative``
  is soft-deleted by the schema migration (§1), which runs only when an older store is brought forward: a row
  given it later (an old Go writer on a migrated store, a hand edit) stays active, and recall, ``show`` and
  ``status`` read it as a live memory, so it is carried like any other rather than dropped unseen. (It does
  lose its own label: ``show`` printed ``bogus``, the repaired row ``general``; README says so.)

The candidates are selected by SQL that runs on both backends; Python decides each value by the
rules above (the malformed numbers are ``store.numeric``'s and skipped here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import apsw

from mnemon.records import (
    CATEGORIES,
    DEFAULT_CATEGORY,
    GO_ZERO_STAMP,
    MAX_ACCESS_COUNT,
    MAX_ENTITIES,
    MAX_ENTITY_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
)
from mnemon.store import edges as edge_sql
from mnemon.store import insights as insight_sql
from mnemon.store import check
from mnemon.store.check import shown
from mnemon.validate import plainly_draftable, timestamp_parses

IMPORTANCE_MIN, IMPORTANCE_MAX = 1, 5
WEIGHT_MIN, WEIGHT_MAX = 0.0, 1.0

# The JSON type of a column's text where it is valid JSON, else NULL (json_type of a blob or of text that is no
# JSON raises on SQLite, so it is asked only under json_valid).
def _kind(column: str) -> str:
    return f"CASE WHEN json_valid({column}) = 1 THEN json_type({column}) END"


def _not_kind(column: str, kind: str) -> str:
    # NULL is not asked about (json_valid(NULL) is NULL; every reader reads it as empty)
    return f"({column} IS NOT NULL AND COALESCE({_kind(column)}, '') != '{kind}')"


_SQL_INSIGHT_CANDIDATES = (
    f"SELECT id, importance, access_count, tags, entities, {_kind('tags')}, {_kind('entities')} FROM insights "
    f"WHERE importance NOT BETWEEN 1 AND 5 OR access_count < 0 OR access_count > {MAX_ACCESS_COUNT} "
    f"OR {_not_kind('tags', 'array')} OR {_not_kind('entities', 'array')} ORDER BY rowid"
)
_SQL_EDGE_CANDIDATES = (
    f"SELECT source_id, target_id, edge_type, weight, metadata, {_kind('metadata')} FROM edges "
    f"WHERE NOT (weight BETWEEN 0.0 AND 1.0) OR {_not_kind('metadata', 'object')} ORDER BY rowid"
)
# Every row's stamp is read: no SQL that runs on both backends tells an RFC 3339 stamp (PostgreSQL's LIKE is
# rewritten to ILIKE, SQLite's folds case); ``timestamp_parses`` reads most by a pattern alone.
_SQL_STAMPS = "SELECT id, created_at, updated_at, last_accessed_at FROM insights ORDER BY rowid"
_CATEGORY_LIST = ", ".join(f"'{c}'" for c in CATEGORIES)
_SQL_CATEGORY = f"SELECT id, category FROM insights WHERE category NOT IN ({_CATEGORY_LIST}) ORDER BY rowid"
_INSIGHT_UPDATE = {
    name: f"UPDATE insights SET {name} = ? WHERE id = ?"
    for name in ("importance", "access_count", "tags", "entities", "category", "created_at", "updated_at",
                 "last_accessed_at")
}
_EDGE_UPDATE = {
    name: f"UPDATE edges SET {name} = ? WHERE source_id = ? AND target_id = ? AND edge_type = ?"
    for name in ("weight", "metadata")
}


@dataclass(frozen=True, slots=True)
class OutOfRange:
    """One value outside the contract: where it is, what it is, why, and what ``--repair`` writes."""

    table: str  # "insights" or "edges"
    key: tuple[str, ...]
    column: str
    value: Any  # as stored
    why: str  # "is out of 1-5", ...
    repair: Any  # the value --repair writes

    def where(self) -> str:
        return f"insight {self.key[0]}" if self.table == "insights" else f"edge {self.key[0]} -> {self.key[1]} ({self.key[2]})"

    def describe(self) -> str:
        return f"{self.where()}: {self.column} {shown(self.value)} {self.why}; --repair writes {shown(self.repair)}"


def _importance(value: object) -> int | None:
    if type(value) is not int or IMPORTANCE_MIN <= value <= IMPORTANCE_MAX:
        return None  # valid, or malformed (store.numeric's)
    return min(max(value, IMPORTANCE_MIN), IMPORTANCE_MAX)


def _weight(value: object) -> float | None:
    if type(value) is int:
        value = float(value)
    if type(value) is not float or not math.isfinite(value) or WEIGHT_MIN <= value <= WEIGHT_MAX:
        return None
    return min(max(value, WEIGHT_MIN), WEIGHT_MAX)


def insights_out_of_range(conn: apsw.Connection) -> list[OutOfRange]:
    found: list[OutOfRange] = []
    for row in conn.execute(_SQL_INSIGHT_CANDIDATES):
        key = (str(row[0]),)
        importance, access_count = row[1], row[2]
        if (fixed := _importance(importance)) is not None:
            found.append(OutOfRange("insights", key, "importance", importance,
                                    f"is out of {IMPORTANCE_MIN}-{IMPORTANCE_MAX}", fixed))
        if type(access_count) is int and access_count < 0:
            found.append(OutOfRange("insights", key, "access_count", access_count, "is negative", 0))
        elif type(access_count) is int and access_count > MAX_ACCESS_COUNT:
            found.append(OutOfRange("insights", key, "access_count", access_count,
                                    f"is beyond {MAX_ACCESS_COUNT}", MAX_ACCESS_COUNT))
        for name, raw, kind in (("tags", row[3], row[5]), ("entities", row[4], row[6])):
            if raw is not None and kind != "array":
                canonical = insight_sql.dump_list(insight_sql.load_list(raw))
                found.append(OutOfRange("insights", key, name, raw, "is not a JSON array", canonical))
    for insight_id, category in conn.execute(_SQL_CATEGORY):
        if type(category) is str:  # (NULL and a blob are check.insight_problems')
            found.append(OutOfRange("insights", (str(insight_id),), "category", category,
                                    f"is not one of {', '.join(CATEGORIES)}", DEFAULT_CATEGORY))
    for insight_id, created, updated, accessed in conn.execute(_SQL_STAMPS):
        key = (str(insight_id),)
        # (a blob is check.insight_problems'; a NULL created_at or updated_at too: the columns are NOT NULL)
        created_ok = timestamp_parses(created)
        if type(created) is str and not created_ok:
            why = "is empty" if created == "" else "is not RFC 3339"
            found.append(OutOfRange("insights", key, "created_at", created, why, GO_ZERO_STAMP))
        if type(updated) is str and not timestamp_parses(updated):
            found.append(OutOfRange("insights", key, "updated_at", updated, "is not RFC 3339",
                                    created if created_ok else GO_ZERO_STAMP))
        if type(accessed) is str and not timestamp_parses(accessed):
            found.append(OutOfRange("insights", key, "last_accessed_at", accessed, "is not RFC 3339", None))
    return found


def edges_out_of_range(conn: apsw.Connection) -> list[OutOfRange]:
    found: list[OutOfRange] = []
    for row in conn.execute(_SQL_EDGE_CANDIDATES):
        key = (str(row[0]), str(row[1]), str(row[2]))
        weight, metadata, kind = row[3], row[4], row[5]
        if (fixed := _weight(weight)) is not None:
            found.append(OutOfRange("edges", key, "weight", weight,
                                    f"is out of {WEIGHT_MIN:g}-{WEIGHT_MAX:g}", fixed))
        if metadata is not None and kind != "object":
            canonical = edge_sql.dump_metadata(edge_sql.load_metadata(metadata))
            found.append(OutOfRange("edges", key, "metadata", metadata, "is not a JSON object", canonical))
    return found


def out_of_range(conn: apsw.Connection) -> list[OutOfRange]:
    """Every value outside the contract, insights first (their categories, then their stamps, last), each in rowid
    order."""
    return [*insights_out_of_range(conn), *edges_out_of_range(conn)]


def lowered_importance(found: list[OutOfRange]) -> list[str]:
    """The insights whose importance ``repair`` lowers to 5: their effective importance base moves
    (BASE_IMPORTANCE_OTHER to 5's), so the caller writes the effective importance 5 gives."""
    return [o.key[0] for o in found if o.table == "insights" and o.column == "importance" and o.value > IMPORTANCE_MAX]


def repair(conn: apsw.Connection, found: list[OutOfRange]) -> None:
    """Write each value's repair, inside the caller's transaction; nothing else is touched."""
    for item in found:
        if item.table == "insights":
            conn.execute(_INSIGHT_UPDATE[item.column], (item.repair, *item.key))
        else:
            conn.execute(_EDGE_UPDATE[item.column], (item.repair, *item.key))


# The longest JSON text of a list that cannot be past a draft's limits, when ASCII and holding no NUL: n items
# take at least 3n + 1 characters ('[""]', '["",""]', ...), and an ASCII JSON string decodes to at most as many
# bytes as it has characters. 3 x 20 + 1 for tags, 3 x 50 + 1 for entities (both under 100 and 200 bytes).
_SHORT_TAGS = 3 * MAX_TAGS + 1
_SHORT_ENTITIES = 3 * MAX_ENTITIES + 1


def _short(raw: object, most: int) -> bool:
    """A stored list too short to be past a draft's limits, told without parsing it (doctor reads every row)."""
    return raw is None or (isinstance(raw, str) and len(raw) <= most and raw.isascii() and "\x00" not in raw
                           and "\\u0000" not in raw)


def list_problems(tags: object, entities: object) -> list[str]:
    """What import's item check says of a row's tags and entities, as the readers read them (``load_list``)."""
    if _short(tags, _SHORT_TAGS) and _short(entities, _SHORT_ENTITIES):
        return []
    tag_list, entity_list = insight_sql.load_list(tags), insight_sql.load_list(entities)
    if plainly_draftable(tag_list, MAX_TAGS, MAX_TAG_BYTES) and plainly_draftable(entity_list, MAX_ENTITIES,
                                                                                    MAX_ENTITY_BYTES):
        return []
    from mnemon import drafts  # a rare row only: doctor's other paths need no draft parser

    problem = drafts.item_problem({"content": "-", "tags": tag_list, "entities": entity_list})
    return [problem] if problem else []


def insight_findings(conn: apsw.Connection) -> list[str]:
    """Every problem of the insight rows doctor's ``insights`` check names: the values ``--repair`` rewrites,
    then those it cannot (``check.insight_problems``). Empty for a store every command reads as written
    (the crash and fuzz suites' invariant)."""
    return [*(i.describe() for i in insights_out_of_range(conn)), *check.insight_problems(conn),
            *check.text_problems(conn, list_problems)]
