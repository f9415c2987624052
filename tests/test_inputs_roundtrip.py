"""Stored values at the edge of what a draft carries, on both backends: every store the readers read keeps
working under recall and ``gc --keep``, and exports a draft that ``import`` takes.

- An access count at PostgreSQL's 32-bit ceiling made every recall returning the row fail with "integer out
  of range" (the access bump overflowed the column); a SQLite count could grow past what a draft carries
  (0..2^31-1). The bump now saturates at 2147483647 on both backends, and export writes any larger count as
  2147483647.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon.records import MAX_ACCESS_COUNT
from tests.conftest import Cli
from tests.test_cli_remember import query

CEILING = 2**31 - 1


def _count(cli: Cli, insight_id: str, store: str = "default") -> int:
    ((count,),) = query(cli.data_dir, "SELECT access_count FROM insights WHERE id = ?", (insight_id,), store=store)
    return int(count)


def _set_count(cli: Cli, insight_id: str, count: int, store: str = "default") -> None:
    query(cli.data_dir, "UPDATE insights SET access_count = ? WHERE id = ?", (count, insight_id), store=store)


def test_the_draft_ceiling_is_the_postgresql_column_ceiling() -> None:
    assert MAX_ACCESS_COUNT == CEILING


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
    assert logged == [(f"access={CEILING}",)] * 2


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
