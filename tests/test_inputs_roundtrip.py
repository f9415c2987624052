"""Stored values at the edge of what a draft carries, on both backends: every store the readers read keeps
working under recall and ``gc --keep``, and exports a draft that ``import`` takes.

- An access count at PostgreSQL's 32-bit ceiling made every recall returning the row fail with "integer out
  of range" (the access bump overflowed the column); a SQLite count could grow past what a draft carries
  (0..2^31-1). The bump now saturates at 2147483647 on both backends, and export writes any larger count as
  2147483647.
- A created_at that does not parse (hand-edited text, an old writer's form, a blob) was exported as it is, and
  import refused the draft; doctor named only an empty or non-text one. Export now writes the time the readers
  take it for (lifecycle's decay: Go's zero time, records.GO_ZERO_STAMP), doctor names the text and --repair
  stores that stamp.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mnemon import records
from tests.conftest import Cli
from tests.test_cli_remember import query

CEILING = 2**31 - 1
GO_ZERO_STAMP = "0001-01-01T00:00:00Z"  # Go's zero time, from which decay counts an unparsable stamp


def _count(cli: Cli, insight_id: str, store: str = "default") -> int:
    ((count,),) = query(cli.data_dir, "SELECT access_count FROM insights WHERE id = ?", (insight_id,), store=store)
    return int(count)


def _set_count(cli: Cli, insight_id: str, count: int, store: str = "default") -> None:
    query(cli.data_dir, "UPDATE insights SET access_count = ? WHERE id = ?", (count, insight_id), store=store)


def test_the_constants_are_the_ones_the_code_uses() -> None:
    assert records.MAX_ACCESS_COUNT == CEILING  # PostgreSQL's integer column, and a draft's bound
    assert records.GO_ZERO_STAMP == GO_ZERO_STAMP


def test_recall_and_show_saturate_the_access_count_at_the_ceiling(cli: Cli) -> None:
    at = cli.ok("remember", "Qdrant cluster runs on the staging nodes")["id"]
    below = cli.ok("remember", "Qdrant snapshots are taken nightly", "--no-diff")["id"]
    _set_count(cli, at, CEILING)
    _set_count(cli, below, CEILING - 1)
    hits = cli("recall", "Qdrant")
    assert hits.code == 0, hits.err
    assert {at, below} <= {r["id"] for r in json.loads(hits.out)["results"]}
    assert (_count(cli, at), _count(cli, below)) == (CEILING, CEILING)
    shown = cli("show", at)
    assert shown.code == 0, shown.err
    assert _count(cli, at) == CEILING
    again = cli("recall", "Qdrant")
    assert again.code == 0, again.err
    assert (_count(cli, at), _count(cli, below)) == (CEILING, CEILING)


def test_gc_keep_saturates_the_access_count_at_the_ceiling(cli: Cli) -> None:
    made = cli.ok("remember", "a memory kept by hand very often")["id"]
    _set_count(cli, made, CEILING - 1)  # + 3 would pass the ceiling
    kept = cli.ok("gc", "--keep", made)
    assert kept["new_access"] == CEILING and kept["immune"] is True
    assert cli.ok("gc", "--keep", made)["new_access"] == CEILING
    assert _count(cli, made) == CEILING
    logged = query(cli.data_dir, "SELECT detail FROM oplog WHERE operation = 'gc_keep'")
    assert len(logged) == 2 and all(d.endswith(f"access={CEILING}") for (d,) in logged)  # (a gateway adds its token)


def test_an_ordinary_bump_still_adds(cli: Cli) -> None:
    made = cli.ok("remember", "Qdrant holds the vectors")["id"]
    _set_count(cli, made, 7)
    assert cli("recall", "Qdrant").code == 0
    assert _count(cli, made) == 8
    assert cli.ok("gc", "--keep", made)["new_access"] == 11


@pytest.mark.sqlite_only  # only a SQLite column holds a count past 32 bits
def test_a_sqlite_count_past_the_ceiling_is_bumped_to_the_ceiling(cli: Cli) -> None:
    """A count that an older writer let grow past 2^31-1 is written as the ceiling by its next access,
    the value its export carries, never a larger one."""
    made = cli.ok("remember", "Qdrant is accessed a great deal")["id"]
    _set_count(cli, made, 5_000_000_000)
    assert cli("recall", "Qdrant").code == 0
    assert _count(cli, made) == CEILING


def test_an_export_of_a_count_past_the_ceiling_imports_on_either_backend(cli: Cli, tmp_path: Path) -> None:
    """The source is a SQLite store (the only column that holds such a count); the draft imports into the
    test's store, SQLite or PostgreSQL, with the count at the ceiling."""
    big = cli.ok("--store", "big", "remember", "Qdrant is accessed a great deal")["id"]
    small = cli.ok("--store", "big", "remember", "Milvus was tried once", "--no-diff")["id"]
    _set_count(cli, big, 5_000_000_000, store="big")
    _set_count(cli, small, 4, store="big")
    out = tmp_path / "export.json"
    assert cli("--store", "big", "export", "-o", str(out)).code == 0
    counts = {i["content"]: i.get("access_count") for i in json.loads(out.read_text(encoding="utf-8"))["insights"]}
    assert counts == {"Qdrant is accessed a great deal": CEILING, "Milvus was tried once": 4}
    imported = cli.ok("import", str(out))
    assert imported["imported"] == 2 and imported["errors"] == 0
    rows = query(cli.data_dir, "SELECT content, access_count FROM insights ORDER BY content")
    assert rows == [("Milvus was tried once", 4), ("Qdrant is accessed a great deal", CEILING)]


def test_an_export_of_a_store_at_the_ceiling_imports_and_recalls(cli: Cli, tmp_path: Path) -> None:
    """The test's own store (either backend) at the ceiling: export, import into a new store, recall there."""
    made = cli.ok("remember", "Qdrant cluster runs on the staging nodes")["id"]
    _set_count(cli, made, CEILING)
    out = tmp_path / "export.json"
    assert cli("export", "-o", str(out)).code == 0
    imported = cli.ok("--store", "copy", "import", str(out))
    assert imported["imported"] == 1 and imported["errors"] == 0
    again = cli("--store", "copy", "recall", "Qdrant")
    assert again.code == 0, again.err
    assert query(cli.data_dir, "SELECT access_count FROM insights", store="copy") == [(CEILING,)]


# --- a created_at that does not parse ----------------------------------------------------------------------

UNPARSABLE = ["not a time", "2026-02-30T10:00:00Z", "2026-01-01 10:00:00", "2026-01-01t10:00:00z"]


def _damaged_pair(cli: Cli, created: str) -> tuple[str, str]:
    """Two memories, the first's created_at hand-edited to ``created`` (apsw on the SQLite file, SQL on the
    PostgreSQL schema: the store's own text column), the second intact."""
    damaged = cli.ok("remember", "Kafka retries are capped at five", "--entities", "Kafka")["id"]
    intact = cli.ok("remember", "Milvus holds the GPU index", "--no-diff")["id"]
    query(cli.data_dir, "UPDATE insights SET created_at = ? WHERE id = ?", (created, damaged))
    return damaged, intact


def _gc_ei(cli: Cli, insight_id: str, store: str = "default") -> float:
    """The effective importance gc computes now for the insight (never stored, never rounded by a write)."""
    out = cli.ok("--store", store, "gc", "--threshold", "10", "--limit", "100")
    (found,) = [c for c in out["candidates"] if c["insight"]["id"] == insight_id]
    return float(found["effective_importance"])


@pytest.mark.parametrize("created", UNPARSABLE)
def test_an_unparsable_created_at_exports_a_draft_that_imports(cli: Cli, tmp_path: Path, created: str) -> None:
    damaged, intact = _damaged_pair(cli, created)
    out = tmp_path / "export.json"
    assert cli("export", "-o", str(out)).code == 0
    items = {i["content"]: i for i in json.loads(out.read_text(encoding="utf-8"))["insights"]}
    assert items["Kafka retries are capped at five"]["created_at"] == GO_ZERO_STAMP
    ((kept,),) = query(cli.data_dir, "SELECT created_at FROM insights WHERE id = ?", (intact,))
    assert items["Milvus holds the GPU index"]["created_at"] == kept
    imported = cli.ok("--store", "copy", "import", str(out))
    assert imported["imported"] == 2 and imported["errors"] == 0
    assert query(cli.data_dir, "SELECT created_at FROM insights WHERE content LIKE 'Kafka%'", store="copy") == [
        (GO_ZERO_STAMP,)]
    # decay reads the exported stamp as it read the unparsable one: the same effective importance on both sides
    ((copied,),) = query(cli.data_dir, "SELECT id FROM insights WHERE content LIKE 'Kafka%'", store="copy")
    assert _gc_ei(cli, copied, "copy") == _gc_ei(cli, damaged) == 0


@pytest.mark.sqlite_only  # a PostgreSQL text column holds no blob
def test_a_blob_created_at_exports_a_draft_that_imports(cli: Cli, tmp_path: Path) -> None:
    damaged, _ = _damaged_pair(cli, "2026-01-01T00:00:00Z")
    query(cli.data_dir, "UPDATE insights SET created_at = x'0102' WHERE id = ?", (damaged,))
    out = tmp_path / "export.json"
    assert cli("export", "-o", str(out)).code == 0
    items = {i["content"]: i for i in json.loads(out.read_text(encoding="utf-8"))["insights"]}
    assert items["Kafka retries are capped at five"]["created_at"] == GO_ZERO_STAMP
    assert cli.ok("--store", "copy", "import", str(out))["imported"] == 2


@pytest.mark.local_only  # doctor has no remote form: it runs on the gateway's machine
@pytest.mark.parametrize("created", UNPARSABLE)
def test_doctor_names_an_unparsable_created_at_and_repair_writes_what_decay_reads(cli: Cli, created: str) -> None:
    damaged, intact = _damaged_pair(cli, created)
    before = _gc_ei(cli, damaged)
    res = cli("doctor")
    assert res.code == 1 and res.err == "Error: doctor found problems: insights\n"
    (check,) = [c for c in res.json()["checks"] if c["name"] == "insights"]
    assert check["detail"] == (
        f"1 problem(s): insight {damaged}: created_at {created!r} is not RFC 3339; --repair writes {GO_ZERO_STAMP!r}")
    repaired = cli("doctor", "--repair")
    assert repaired.code == 0, repaired.err
    assert (f"rewrote 1 value(s) outside the contract: insight {damaged}: created_at {created!r} -> "
            f"{GO_ZERO_STAMP!r}") in repaired.json()["repaired"]
    assert query(cli.data_dir, "SELECT id, created_at FROM insights ORDER BY id") == sorted(
        [(damaged, GO_ZERO_STAMP), (intact, query(cli.data_dir, "SELECT created_at FROM insights WHERE id = ?",
                                                   (intact,))[0][0])])
    # the entity lookup follows the row's stamp (its update trigger), and nothing a reader computes moved
    assert query(cli.data_dir, "SELECT created_at FROM insight_entities WHERE insight_id = ?", (damaged,)) == [
        (GO_ZERO_STAMP,)]
    assert _gc_ei(cli, damaged) == before
    assert cli.ok("doctor")["ok"] is True
    assert damaged in [r["id"] for r in cli.ok("recall", "Kafka retries")["results"]]


@pytest.mark.local_only  # doctor has no remote form: it runs on the gateway's machine
def test_doctor_passes_every_stamp_that_parses(cli: Cli) -> None:
    """Offsets, fractions and a leap day parse (the readers read them): not named."""
    made = [cli.ok("remember", f"Kafka note number {k}", "--no-diff")["id"] for k in range(3)]
    for insight_id, stamp in zip(made, ["2026-01-01T10:00:00+02:00", "2026-01-01T10:00:00.123456789Z",
                                        "2024-02-29T23:59:59Z"], strict=True):
        query(cli.data_dir, "UPDATE insights SET created_at = ? WHERE id = ?", (stamp, insight_id))
    assert cli.ok("doctor")["ok"] is True


@pytest.mark.parametrize("created", ["not a time", "2999-02-30T10:00:00Z", "2999-01-01 10:00:00", "2999-01-01t10:00:00z"])
def test_remember_beside_an_unparsable_created_at_links_around_it(cli: Cli, created: str) -> None:
    """Stamps are compared as text, so these sort as the most recent: the proximity links of a new memory (of
    another source: no backbone link) took the damaged row in, and parsing its stamp failed the remember
    ("invalid timestamp ..."), a write refused for another row's value. The row reads as Go's zero time there
    too: far outside the 24 h window, no link."""
    damaged, intact = _damaged_pair(cli, created)
    made = cli("remember", "Kafka consumer lag is watched hourly", "--source", "ops", "--no-diff")
    assert made.code == 0, made.err
    new = json.loads(made.out)["id"]
    linked = query(cli.data_dir, "SELECT target_id, metadata FROM edges WHERE source_id = ? AND edge_type = "
                   "'temporal'", (new,))
    assert [(target, json.loads(meta)["sub_type"]) for target, meta in linked] == [(intact, "proximity")]


# --- the other stored values a draft cannot carry as they are ---------------------------------------------------
#
# Each store below is hand-edited (apsw on the SQLite file, SQL on the PostgreSQL schema), exported and imported
# into a fresh store: on main the draft was refused (importance 9, category 'bogus', ...), imported as another
# memory without a word (importance 0 read as "unstated", 3; an empty created_at as "now"), or written although
# no import takes it (empty, NUL-holding or over-long text).


def _edited(cli: Cli, sql: str, params: tuple = ()) -> tuple[str, str]:
    """Two memories, ``sql`` run on the first (its id the last parameter), the second intact; the recall index is
    dropped so the readers read the edit (a hand edit moves no generation)."""
    damaged = cli.ok("remember", "Kafka retries are capped at five", "--entities", "Kafka")["id"]
    intact = cli.ok("remember", "Milvus holds the GPU index", "--no-diff")["id"]
    query(cli.data_dir, sql, (*params, damaged))
    shutil.rmtree(cli.data_dir / "data" / "default" / "mnemon.db.index", ignore_errors=True)
    return damaged, intact


def _round_trip(cli: Cli, tmp_path: Path) -> tuple[dict[str, dict], str]:
    """Export the default store, import the draft into the fresh store "copy": the exported Kafka item and the
    imported row's id."""
    out = tmp_path / "export.json"
    exported = cli("export", "-o", str(out))
    assert exported.code == 0, exported.err
    items = {i["content"]: i for i in json.loads(out.read_text(encoding="utf-8"))["insights"]}
    imported = cli.ok("--store", "copy", "import", str(out))
    assert imported["imported"] == 2 and imported["errors"] == 0
    ((copied,),) = query(cli.data_dir, "SELECT id FROM insights WHERE content LIKE 'Kafka%'", store="copy")
    return items, copied


def _gc_view(cli: Cli, insight_id: str, store: str = "default") -> tuple[float, float] | None:
    """What gc computes of the insight now (effective importance, days since access), None when it is immune."""
    out = cli.ok("--store", store, "gc", "--threshold", "10", "--limit", "100")
    found = [c for c in out["candidates"] if c["insight"]["id"] == insight_id]
    return (float(found[0]["effective_importance"]), round(float(found[0]["days_since_access"]))) if found else None


def _same(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Two gc views alike: decay moves between two commands' clocks, so an effective importance at a relative 1e-5."""
    return a == b if a is None or b is None else a == pytest.approx(b, rel=1e-5)


def _recalled(cli: Cli, insight_id: str, store: str = "default") -> dict:
    (hit,) = [h for h in cli.ok("--store", store, "recall", "Kafka retries")["results"] if h["id"] == insight_id]
    return hit


@pytest.mark.parametrize(("stored", "read"), [(9, 5), (0, 1), (-3, 1), (2**31 - 1, 5)])  # (the most a PostgreSQL column holds)
def test_an_importance_outside_1_to_5_exports_as_the_readers_read_it(cli: Cli, tmp_path: Path, stored: int,
                                                                     read: int) -> None:
    """Every reader decides by the clamped importance (immune at 4 and up; below 1 decays from 1's base): the
    draft carries it, and the imported row is pruned, kept and decayed as the original is."""
    damaged, _ = _edited(cli, "UPDATE insights SET importance = ? WHERE id = ?", (stored,))
    items, copied = _round_trip(cli, tmp_path)
    assert items["Kafka retries are capped at five"]["importance"] == read
    assert query(cli.data_dir, "SELECT importance FROM insights WHERE id = ?", (copied,), store="copy") == [(read,)]
    assert _same(_gc_view(cli, copied, "copy"), _gc_view(cli, damaged))  # None (immune) for 5, the same decay for 1
    assert (_gc_view(cli, copied, "copy") is None) == (read == 5)
    assert _recalled(cli, copied, "copy")["importance"] == read


@pytest.mark.parametrize("category", ["bogus", "narrative"])
def test_a_category_not_among_the_six_exports_as_general(cli: Cli, tmp_path: Path, category: str) -> None:
    """Recall, show and status read such a row as a live memory (``narrative`` too: its soft-delete is the schema
    migration's, which a current store never runs again); the draft carries it as ``general``, and import takes it."""
    damaged, _ = _edited(cli, "UPDATE insights SET category = ? WHERE id = ?", (category,))
    assert _recalled(cli, damaged)["category"] == category  # what the readers read: a live memory
    items, copied = _round_trip(cli, tmp_path)
    assert items["Kafka retries are capped at five"]["category"] == "general"
    assert _same(_gc_view(cli, copied, "copy"), _gc_view(cli, damaged))  # (before the copy's recall bumps its count)
    assert _recalled(cli, copied, "copy")["category"] == "general"


UNDRAFTABLE = [
    ("content = ''", "content is empty"),
    ("content = '   '", "content is whitespace only"),
    (f"content = '{'Kafka' * 1800}'", "content is 9000 bytes, over the 8000 a memory holds"),
]
SQLITE_UNDRAFTABLE = [  # a PostgreSQL text column holds no NUL
    ("content = 'Kafka' || char(0) || 'retries'", "content holds a NUL byte"),
    ("source = 'ops' || char(0)", "source holds a NUL byte"),
]


def _refused(cli: Cli, tmp_path: Path, assignment: str, problem: str) -> str:
    damaged, _ = _edited(cli, f"UPDATE insights SET {assignment} WHERE id = ?")
    out = tmp_path / "export.json"
    refused = cli("export", "-o", str(out))
    assert refused.code == 1 and refused.out == ""
    assert refused.err == (
        f"Error: export: insight {damaged}: {problem}: import refuses such a draft, so none was written; "
        "`mnemon doctor` names each such memory: correct or forget it, then export again\n")
    assert not out.exists()
    to_stdout = cli("export")
    assert to_stdout.code == 1 and to_stdout.out == "" and to_stdout.err == refused.err
    return damaged


@pytest.mark.parametrize(("assignment", "problem"), UNDRAFTABLE)
def test_export_refuses_a_memory_no_draft_carries(cli: Cli, tmp_path: Path, assignment: str, problem: str) -> None:
    """Cutting the content or dropping a character would export another memory, and leaving the row out would
    lose one unseen: export writes nothing and says which memory and why."""
    _refused(cli, tmp_path, assignment, problem)


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("assignment", "problem"), SQLITE_UNDRAFTABLE)
def test_export_refuses_a_nul_no_draft_carries(cli: Cli, tmp_path: Path, assignment: str, problem: str) -> None:
    _refused(cli, tmp_path, assignment, problem)


@pytest.mark.sqlite_only
def test_export_refuses_tags_past_a_drafts_limits_in_imports_words(cli: Cli, tmp_path: Path) -> None:
    """What the text test does not cover goes through import's own item check."""
    tags = json.dumps([f"t{k}" for k in range(25)])
    _refused(cli, tmp_path, f"tags = '{tags}'", "too many tags (25, max 20)")


@pytest.mark.sqlite_only
def test_export_counts_every_memory_it_refuses(cli: Cli, tmp_path: Path) -> None:
    first, second = (cli.ok("remember", text, "--no-diff")["id"] for text in ("Kafka one", "Kafka two"))
    query(cli.data_dir, "UPDATE insights SET content = content || char(0)")
    refused = cli("export")
    assert refused.code == 1 and refused.err.startswith(f"Error: export: insight {first}: content holds a NUL byte: ")
    assert "so none was written (and 1 more); " in refused.err and refused.err.count("\n") == 1


# --- doctor names each, and --repair stores what export writes ----------------------------------------------------


def _insights_detail(cli: Cli) -> str:
    res = cli("doctor")
    assert res.code == 1 and res.err == "Error: doctor found problems: insights\n"
    (check,) = [c for c in res.json()["checks"] if c["name"] == "insights"]
    return str(check["detail"])


def _repaired(cli: Cli) -> list[str]:
    res = cli("doctor", "--repair")
    assert res.code == 0, res.err
    return list(res.json()["repaired"])


@pytest.mark.local_only  # doctor has no remote form: it runs on the gateway's machine
@pytest.mark.parametrize("category", ["bogus", "narrative"])
def test_doctor_names_a_category_not_among_the_six_and_repair_writes_general(cli: Cli, category: str) -> None:
    damaged, _ = _edited(cli, "UPDATE insights SET category = ? WHERE id = ?", (category,))
    assert _insights_detail(cli) == (
        f"1 problem(s): insight {damaged}: category {category!r} is not one of preference, decision, fact, insight, "
        "context, general; --repair writes 'general'")
    assert f"insight {damaged}: category {category!r} -> 'general'" in " ".join(_repaired(cli))
    assert query(cli.data_dir, "SELECT category FROM insights WHERE id = ?", (damaged,)) == [("general",)]
    assert cli.ok("doctor")["ok"] is True
    assert _recalled(cli, damaged)["category"] == "general"
    assert cli.ok("status")["by_category"] == {"general": 2}


@pytest.mark.local_only
def test_doctor_names_an_empty_created_at_and_repair_writes_the_zero_time(cli: Cli, tmp_path: Path) -> None:
    """Decay skips an empty stamp as it skips one that does not parse: Go's zero time, which export already wrote
    for it (d1e8f68's rule), while doctor called it "missing; not repaired". It now names the value and --repair
    stores that stamp, so the store holds what its export carries."""
    damaged, _ = _edited(cli, "UPDATE insights SET created_at = '' WHERE id = ?")
    before = _gc_view(cli, damaged)
    assert before is not None and before[0] == 0
    items, copied = _round_trip(cli, tmp_path)
    assert items["Kafka retries are capped at five"]["created_at"] == GO_ZERO_STAMP
    assert query(cli.data_dir, "SELECT created_at FROM insights WHERE id = ?", (copied,), store="copy") == [
        (GO_ZERO_STAMP,)]
    assert _same(_gc_view(cli, copied, "copy"), before)
    assert _insights_detail(cli) == (
        f"1 problem(s): insight {damaged}: created_at '' is empty; --repair writes {GO_ZERO_STAMP!r}")
    assert f"insight {damaged}: created_at '' -> {GO_ZERO_STAMP!r}" in " ".join(_repaired(cli))
    assert query(cli.data_dir, "SELECT created_at FROM insights WHERE id = ?", (damaged,)) == [(GO_ZERO_STAMP,)]
    assert _same(_gc_view(cli, damaged), before)
    assert cli.ok("doctor")["ok"] is True


@pytest.mark.local_only
def test_doctor_names_unparsable_access_and_update_stamps_and_repair_writes_what_a_round_trip_stores(
        cli: Cli, tmp_path: Path) -> None:
    """Export already left such stamps out (the draft imports); doctor did not name them. No reader computes from
    updated_at (show prints it): --repair stores the row's created_at, what import gives a row exported without
    it. Decay skips an unparsable last_accessed_at for created_at, as for NULL: NULL."""
    damaged, _ = _edited(cli, "UPDATE insights SET last_accessed_at = 'yesterday', updated_at = '2026-13-01T00:00:00Z' "
                              "WHERE id = ?")
    ((created,),) = query(cli.data_dir, "SELECT created_at FROM insights WHERE id = ?", (damaged,))
    before = _gc_view(cli, damaged)
    items, copied = _round_trip(cli, tmp_path)
    assert not {"last_accessed_at", "updated_at"} & set(items["Kafka retries are capped at five"])
    assert _same(_gc_view(cli, copied, "copy"), before)  # decay counts from created_at on both sides
    assert query(cli.data_dir, "SELECT updated_at, last_accessed_at FROM insights WHERE id = ?", (copied,),
                 store="copy") == [(created, None)]  # what --repair stores below
    assert _insights_detail(cli) == (
        f"2 problem(s): insight {damaged}: updated_at '2026-13-01T00:00:00Z' is not RFC 3339; --repair writes "
        f"{created!r}; insight {damaged}: last_accessed_at 'yesterday' is not RFC 3339; --repair writes NULL")
    _repaired(cli)
    assert query(cli.data_dir, "SELECT updated_at, last_accessed_at FROM insights WHERE id = ?", (damaged,)) == [
        (created, None)]
    assert _same(_gc_view(cli, damaged), before)
    assert cli.ok("doctor")["ok"] is True


@pytest.mark.local_only
@pytest.mark.parametrize(("assignment", "problem"), UNDRAFTABLE)
def test_doctor_names_what_export_refuses_and_repair_leaves_it(cli: Cli, tmp_path: Path, assignment: str,
                                                               problem: str) -> None:
    damaged = _refused(cli, tmp_path, assignment, problem)
    assert _insights_detail(cli) == f"1 problem(s): insight {damaged}: {problem}; not repaired"
    res = cli("doctor", "--repair")
    assert res.code == 1 and f"not repaired: insights: 1 problem(s): insight {damaged}: {problem}" in " ".join(
        res.json()["repaired"])
    assert cli("export").code == 1  # still refused: nothing was cut or dropped
    cli.ok("forget", damaged)
    assert cli("export").code == 0


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("assignment", "problem"), SQLITE_UNDRAFTABLE)
def test_doctor_names_a_nul_export_refuses(cli: Cli, tmp_path: Path, assignment: str, problem: str) -> None:
    damaged = _refused(cli, tmp_path, assignment, problem)
    assert _insights_detail(cli) == f"1 problem(s): insight {damaged}: {problem}; not repaired"


LISTS_PAST_LIMITS = [
    (f"tags = '{json.dumps([f't{k}' for k in range(25)])}'", "too many tags (25, max 20)"),
    (f"entities = '{json.dumps(['E' * 300])}'", f"entity too long (300 bytes, max 200): {'E' * 50}"),
]


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("assignment", "problem"), LISTS_PAST_LIMITS)
def test_doctor_names_tags_or_entities_export_refuses(cli: Cli, tmp_path: Path, assignment: str, problem: str) -> None:
    """Export's refusal points at doctor, which used to say nothing of tags or entities past a draft's limits:
    it names them in import's words, and --repair leaves them (dropping a tag would change the memory)."""
    damaged = _refused(cli, tmp_path, assignment, problem)
    assert _insights_detail(cli) == f"1 problem(s): insight {damaged}: {problem}; not repaired"
    res = cli("doctor", "--repair")
    assert res.code == 1 and f"insight {damaged}: {problem}" in " ".join(res.json()["repaired"])
    cli.ok("forget", damaged)
    assert cli("export").code == 0


@pytest.mark.sqlite_only  # only a SQLite column holds a count past 32 bits
def test_doctor_names_a_count_past_the_ceiling_and_repair_writes_the_ceiling(cli: Cli) -> None:
    made = cli.ok("remember", "Qdrant is accessed a great deal")["id"]
    _set_count(cli, made, 5_000_000_000)
    assert _insights_detail(cli) == (
        f"1 problem(s): insight {made}: access_count 5000000000 is beyond {CEILING}; --repair writes {CEILING}")
    _repaired(cli)
    assert _count(cli, made) == CEILING
    assert cli.ok("doctor")["ok"] is True


# --- an edge weight outside 0-1 --------------------------------------------------------------------------------

_SET_CAUSAL = "UPDATE edges SET weight = ? WHERE source_id = ? AND target_id = ? AND edge_type = 'causal'"


def test_export_refuses_an_edge_weight_outside_0_to_1_and_repair_lets_it_through(cli: Cli, tmp_path: Path) -> None:
    """The draft carried the weight as stored and import refused it ("weight must be between 0.0 and 1.0"). Recall
    adds a weight as it is, so export chooses no valid one: it refuses, naming the edge, and doctor --repair's clamp
    (which keeps the edge the strongest link) is the user's to ask for; the repaired store exports and imports."""
    a = cli.ok("remember", "Kafka retries are capped at five")["id"]
    b = cli.ok("remember", "Kafka consumer lag is watched hourly", "--no-diff")["id"]
    cli.ok("link", a, b, "--type", "causal", "--weight", "0.9")
    query(cli.data_dir, _SET_CAUSAL, (4.5, a, b))
    out = tmp_path / "export.json"
    refused = cli("export", "-o", str(out))
    assert refused.code == 1 and refused.out == "" and not out.exists()
    assert refused.err == (
        f"Error: export: edge {a} -> {b} (causal): weight 4.5 is out of 0-1: import refuses such a draft, so none was "
        "written; `mnemon doctor --repair` clamps it into 0-1, then export again\n")
    query(cli.data_dir, _SET_CAUSAL, (1.0, a, b))  # what --repair writes
    assert cli("export", "-o", str(out)).code == 0
    assert cli.ok("--store", "copy", "import", str(out))["imported"] == 2
    assert (1.0,) in query(cli.data_dir, "SELECT weight FROM edges WHERE edge_type = 'causal'", store="copy")


@pytest.mark.local_only  # doctor has no remote form
def test_doctor_repair_of_an_edge_weight_outside_0_to_1_makes_the_store_export(cli: Cli, tmp_path: Path) -> None:
    a = cli.ok("remember", "Kafka retries are capped at five")["id"]
    b = cli.ok("remember", "Kafka consumer lag is watched hourly", "--no-diff")["id"]
    cli.ok("link", a, b, "--type", "causal", "--weight", "0.9")
    query(cli.data_dir, _SET_CAUSAL, (4.5, a, b))
    assert cli("export").code == 1
    assert f"edge {a} -> {b} (causal): weight 4.5 -> 1.0" in " ".join(_repaired(cli))
    out = tmp_path / "export.json"
    assert cli("export", "-o", str(out)).code == 0
    assert cli.ok("--store", "copy", "import", str(out))["imported"] == 2
