"""Values of the right type outside the contract, JSON columns holding no JSON of their kind, and what
writes do to damaged values before a repair does.

``doctor`` named an importance of 7, a weight of 4.5 or tags that are no JSON, and ``doctor --repair``
left them ("no canonical value to write"). Now ``--repair`` writes, per column, the valid value chosen
from what the readers do with it (``mnemon.store.ranges``), reports each value it rewrote, and says what
it still cannot mend ("not repaired: ..."). A recall's access bump and the counter triggers no longer
turn a malformed value into a wrong valid one; ``store copy`` writes a damaged store as it reads. The
damage is made with a raw apsw connection, then the real CLI is asked.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import apsw
import pytest

from mnemon.engine import upkeep


def _db(data_dir: Path, store: str = "default") -> Path:
    return data_dir / "data" / store / "mnemon.db"


def _rows(data_dir: Path, sql: str, store: str = "default") -> list[tuple]:
    conn = apsw.Connection(str(_db(data_dir, store)))
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def _damage(data_dir: Path, statements: list[str], store: str = "default") -> None:
    conn = apsw.Connection(str(_db(data_dir, store)))
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()
    shutil.rmtree(_db(data_dir, store).with_name("mnemon.db.index"), ignore_errors=True)


def _check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


@pytest.fixture
def four(cli) -> list[str]:
    ids = [cli.ok("remember", text, "--no-diff")["id"] for text in (
        "Kafka retries are capped at five", "Kafka consumer lag is watched hourly",
        "Kafka brokers run on three hosts", "Kafka topics are compacted weekly")]
    cli.ok("link", ids[0], ids[2], "--type", "causal", "--weight", "0.9")
    cli.ok("link", ids[1], ids[3], "--type", "causal", "--weight", "0.4")
    return ids


def _edge(ids: list[str], a: int, b: int) -> str:
    return f"source_id = '{ids[a]}' AND target_id = '{ids[b]}' AND edge_type = 'causal'"


_EVERY_COLUMN = (
    "SELECT id, content, category, importance, tags, entities, source, access_count, created_at, updated_at, "
    "deleted_at, last_accessed_at, embedding, effective_importance, stored_at FROM insights ORDER BY rowid"
)
_EVERY_EDGE_COLUMN = "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges ORDER BY rowid"


def test_repair_writes_the_readers_value_for_every_out_of_range_value(cli, data_dir, four) -> None:
    _damage(data_dir, [
        f"UPDATE insights SET importance = 7, access_count = -3, tags = 'not json' WHERE id = '{four[0]}'",
        f"UPDATE insights SET importance = 0, entities = '{{\"a\": 1}}' WHERE id = '{four[1]}'",
        f"UPDATE insights SET importance = -4, tags = 5 WHERE id = '{four[2]}'",
        f"UPDATE edges SET weight = 4.5, metadata = 'nope' WHERE {_edge(four, 0, 2)}",
        f"UPDATE edges SET weight = -2 WHERE {_edge(four, 1, 3)}",
    ])
    before_insights, before_edges = _rows(data_dir, _EVERY_COLUMN), _rows(data_dir, _EVERY_EDGE_COLUMN)
    found = cli("doctor")
    assert found.code == 1 and found.err == "Error: doctor found problems: edge_values, insights\n"
    report = found.json()
    insights, edges = _check(report, "insights")["detail"], _check(report, "edge_values")["detail"]
    for problem in (f"insight {four[0]}: importance 7 is out of 1-5; --repair writes 5",
                    f"insight {four[0]}: access_count -3 is negative; --repair writes 0",
                    f"insight {four[0]}: tags 'not json' is not a JSON array; --repair writes '[]'",
                    f"insight {four[1]}: importance 0 is out of 1-5; --repair writes 1",
                    f"insight {four[1]}: entities '{{\"a\": 1}}' is not a JSON array; --repair writes '[]'",
                    f"insight {four[2]}: importance -4 is out of 1-5; --repair writes 1",
                    f"insight {four[2]}: tags '5' is not a JSON array; --repair writes '[]'"):
        assert problem in insights, (problem, insights)
    assert insights.startswith("7 problem(s): ")
    for problem in (f"edge {four[0]} -> {four[2]} (causal): weight 4.5 is out of 0-1; --repair writes 1.0",
                    f"edge {four[0]} -> {four[2]} (causal): metadata 'nope' is not a JSON object; --repair writes '{{}}'",
                    f"edge {four[1]} -> {four[3]} (causal): weight -2.0 is out of 0-1; --repair writes 0.0"):
        assert problem in edges, (problem, edges)
    generation = int(_rows(data_dir, "SELECT value FROM mnemon_meta WHERE key = 'generation'")[0][0])

    started = datetime.now(timezone.utc)
    repaired = cli.ok("doctor", "--repair")
    ended = datetime.now(timezone.utc)
    line = next(r for r in repaired["repaired"] if r.startswith("rewrote 10 value(s) outside the contract: "))
    assert f"insight {four[0]}: importance 7 -> 5" in line and f"edge {four[1]} -> {four[3]} (causal): weight -2.0 -> 0.0" in line
    assert not any(r.startswith("not repaired") for r in repaired["repaired"])
    # one write transaction: one generation bump
    assert int(_rows(data_dir, "SELECT value FROM mnemon_meta WHERE key = 'generation'")[0][0]) == generation + 1
    assert cli.ok("doctor")["ok"] is True

    # exactly the named values changed, to the documented ones; every other column and row as it was, but
    # the effective importance of the importance lowered from 7 to 5: written as upkeep computes it for 5 at
    # the repair's clock (second precision; the decay over a few seconds is below 1e-6 of it)
    after = _rows(data_dir, _EVERY_COLUMN)
    row = next(r for r in after if r[0] == four[0])
    touching = _rows(data_dir, f"SELECT (SELECT COUNT(*) FROM edges WHERE source_id = '{four[0]}') "
                               f"+ (SELECT COUNT(*) FROM edges WHERE target_id = '{four[0]}')")[0][0]
    for at in (started, ended):
        assert row[13] == pytest.approx(upkeep.effective_importance(5, 0, row[11], row[8], touching, at), rel=1e-5)
    assert row[13] != pytest.approx(next(r for r in before_insights if r[0] == four[0])[13], rel=1e-3)
    expected = {four[0]: {3: 5, 7: 0, 4: "[]", 13: row[13]}, four[1]: {3: 1, 5: "[]"}, four[2]: {3: 1, 4: "[]"}}
    assert len(after) == len(before_insights)
    for old, new in zip(before_insights, after):
        want = list(old)
        for at, value in expected.get(old[0], {}).items():
            want[at] = value
        assert list(new) == want
    weights = {(r[0], r[1], r[2]): r[3:5] for r in _rows(data_dir, _EVERY_EDGE_COLUMN)}
    assert weights[(four[0], four[2], "causal")] == (1.0, "{}")
    assert weights[(four[1], four[3], "causal")][0] == 0.0
    unchanged = [r for r in before_edges if r[2] != "causal"]
    assert [r for r in _rows(data_dir, _EVERY_EDGE_COLUMN) if r[2] != "causal"] == unchanged
    # a second repair finds nothing to rewrite
    assert not any(r.startswith("rewrote") for r in cli.ok("doctor", "--repair")["repaired"])


def test_the_repaired_values_read_as_the_damaged_ones_did_where_the_readers_agreed(cli, data_dir, four) -> None:
    """Below 1 and a negative count every reader already took as 1 and 0; tags that are no JSON as none:
    recall, show and gc answer the same before and after the repair."""
    _damage(data_dir, [
        f"UPDATE insights SET importance = -2, access_count = -7, tags = '[broken' WHERE id = '{four[0]}'",
    ])
    before = [cli.ok("--readonly", "show", four[0]), cli.ok("--readonly", "recall", "Kafka retries"),
              cli.ok("--readonly", "search", "Kafka")]
    cli.ok("doctor", "--repair")
    after = [cli.ok("--readonly", "show", four[0]), cli.ok("--readonly", "recall", "Kafka retries"),
             cli.ok("--readonly", "search", "Kafka")]
    def ranked(hits: list[dict]) -> list[tuple]:  # the stored importance is shown as it is: 1 now, -2 before
        return [tuple((k, v) for k, v in h.items() if k != "importance") for h in hits]

    assert ranked(after[1]["results"]) == ranked(before[1]["results"]) and ranked(after[2]) == ranked(before[2])
    shown_before, shown_after = before[0], after[0]
    assert shown_after["tags"] == shown_before["tags"] == []
    assert (shown_before["importance"], shown_after["importance"]) == (-2, 1)
    assert (shown_before["access_count"], shown_after["access_count"]) == (-7, 0)


def test_what_repair_cannot_mend_is_said_in_the_report(cli, data_dir, four) -> None:
    _damage(data_dir, [
        f"UPDATE insights SET content = '' WHERE id = '{four[0]}'",
        f"UPDATE insights SET category = 'bogus', importance = 9 WHERE id = '{four[1]}'",
    ])
    res = cli("doctor", "--repair")
    assert res.code == 1 and res.err == "Error: doctor found problems: insights\n"
    repaired = res.json()["repaired"]
    # (an unknown category is written as general, what export writes for it: test_inputs_roundtrip)
    assert (f"rewrote 2 value(s) outside the contract: insight {four[1]}: importance 9 -> 5; "
            f"insight {four[1]}: category 'bogus' -> 'general'") in repaired
    left = [r for r in repaired if r.startswith("not repaired: ")]
    assert left == [f"not repaired: insights: 1 problem(s): insight {four[0]}: content is empty; not repaired"]


def test_a_blob_is_shown_by_its_size(cli, data_dir, four) -> None:
    """A blob in a timestamp column was not reported at all, and a blob in a number column was shown as
    Python's b'...'; both are named with their size."""
    _damage(data_dir, [
        f"UPDATE insights SET created_at = x'0102', last_accessed_at = x'00' WHERE id = '{four[0]}'",
        f"UPDATE insights SET importance = x'00ff' WHERE id = '{four[1]}'",
        "UPDATE mnemon_counts SET n = x'01' WHERE key = 'edges'",
    ])
    res = cli("doctor")
    assert res.code == 1 and "Traceback" not in res.err
    report = res.json()
    assert f"insight {four[0]}: created_at <blob of 2 bytes> is not text; not repaired" in _check(report, "insights")["detail"]
    assert f"insight {four[0]}: last_accessed_at <blob of 1 bytes> is not text" in _check(report, "insights")["detail"]
    assert f"insight {four[1]}: importance <blob of 2 bytes> is not an integer" in _check(report, "numeric_values")["detail"]
    assert "counter edges: kept <blob of 1 bytes>, real" in _check(report, "counters")["detail"]
    assert "b'" not in res.out


@pytest.mark.parametrize("value", ["'7x'", "x'39'", "-5", "4.5", "'x'"],
                         ids=["digits-then-text", "blob-of-a-digit", "negative", "real", "text"])
def test_an_access_bump_counts_a_damaged_count_from_the_value_read(cli, data_dir, four, value) -> None:
    """SQLite's access_count + 1 made '7x' an 8 and the blob '9' a 10: valid counts no access earned (3 and up
    is immune to auto-prune), and left -5 at -4, an access lost. The bump adds to what every reader reads (0),
    as gc --keep does."""
    damage = f"UPDATE insights SET access_count = {value} WHERE id = '{four[0]}'"
    _damage(data_dir, [damage])
    hits = [h["id"] for h in cli.ok("recall", "Kafka retries capped")["results"]]
    assert four[0] in hits
    assert _rows(data_dir, f"SELECT access_count FROM insights WHERE id = '{four[0]}'") == [(1,)]
    _damage(data_dir, [damage])
    cli.ok("gc", "--keep", four[0])
    assert _rows(data_dir, f"SELECT access_count FROM insights WHERE id = '{four[0]}'") == [(3,)]


def test_a_counter_trigger_leaves_a_damaged_counter_to_the_real_count(cli, data_dir, four) -> None:
    """'x' + 1 is 1 in SQLite: a remember after a hand edit made the category counter a valid wrong count,
    which status printed. The triggers now move integers only: the damaged counter still reads as the
    real count, doctor names it and --repair recounts it."""
    cli.ok("remember", "Alice keeps the Kafka dashboards", "--entities", "Alice")
    _damage(data_dir, ["UPDATE mnemon_counts SET n = 'x' WHERE key = 'category:general'",
                       "UPDATE mnemon_counts SET n = '7x' WHERE key = 'edges'",
                       "UPDATE entity_counts SET n = x'01' WHERE entity = 'Alice'"])
    cli.ok("remember", "Alice reads the Kafka lag graphs", "--entities", "Alice")
    cli.ok("forget", four[3])
    stored = dict(_rows(data_dir, "SELECT key, n FROM mnemon_counts"))
    assert stored["category:general"] == "x" and stored["edges"] == "7x"
    assert _rows(data_dir, "SELECT n FROM entity_counts WHERE entity = 'Alice'") == [(b"\x01",)]
    status = cli.ok("status")
    assert status["total_insights"] == 5 == _rows(data_dir, "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL")[0][0]
    assert status["edge_count"] == _rows(data_dir, "SELECT COUNT(*) FROM edges")[0][0]
    assert {"entity": "Alice", "count": 2} in status["top_entities"]
    assert cli("doctor").err == "Error: doctor found problems: counters\n"
    cli.ok("doctor", "--repair")
    assert cli.ok("doctor")["ok"] is True
    assert {k: v for k, v in cli.ok("status").items() if k != "db_size_bytes"} == \
        {k: v for k, v in status.items() if k != "db_size_bytes"}


def test_a_store_of_schema_8_gets_the_triggers_that_keep_a_damaged_counter(cli, data_dir, four) -> None:
    """The counter triggers are part of the schema: a store written before (schema 8, n = n + 1) has them
    replaced on its next writable open."""
    from mnemon.store import counts

    conn = apsw.Connection(str(_db(data_dir)))
    conn.execute("DROP TRIGGER insights_count_ai")
    conn.execute("CREATE TRIGGER insights_count_ai AFTER INSERT ON insights BEGIN INSERT INTO mnemon_counts (key, n) "
                 "VALUES (CASE WHEN NEW.deleted_at IS NULL THEN 'category:' || NEW.category ELSE 'deleted' END, 1) "
                 "ON CONFLICT(key) DO UPDATE SET n = n + (1); END")
    conn.execute("UPDATE mnemon_meta SET value = '8' WHERE key = 'schema'")
    conn.close()
    cli.ok("remember", "Kafka quotas are set per client")
    triggers = dict(_rows(data_dir, "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    for name in counts.TRIGGER_NAMES:
        assert "CAST(n AS INTEGER)" in triggers[name], name
    _damage(data_dir, ["UPDATE mnemon_counts SET n = 'x' WHERE key = 'category:general'"])
    cli.ok("remember", "Kafka quotas are reviewed monthly")
    assert _rows(data_dir, "SELECT n FROM mnemon_counts WHERE key = 'category:general'") == [("x",)]
    assert cli.ok("status")["total_insights"] == 6


def test_store_copy_writes_a_damaged_store_as_it_reads(cli, data_dir, four) -> None:
    """A malformed number, tags that are no JSON and text where an embedding belongs: the copy holds what
    every command read on the source (bytes() of the text was a TypeError traceback), so it answers the
    same; out-of-contract values of the right type are carried, and named by doctor there too."""
    _damage(data_dir, [
        f"UPDATE insights SET importance = 'x', access_count = '7x', tags = 'nope', embedding = 'abc' "
        f"WHERE id = '{four[0]}'",
        f"UPDATE insights SET effective_importance = x'00', importance = 9 WHERE id = '{four[1]}'",
        f"UPDATE edges SET weight = 'heavy', metadata = x'00' WHERE {_edge(four, 0, 2)}",
    ])
    before = {args[0]: cli.ok("--readonly", *args) for args in (["export"], ["search", "Kafka"], ["show", four[0]])}
    copied = cli("store", "copy", "default", "two")
    assert copied.code == 0 and "Traceback" not in copied.err, copied.err
    after = {args[0]: cli.ok("--readonly", "--store", "two", *args)
             for args in (["export"], ["search", "Kafka"], ["show", four[0]])}
    assert after == before
    rows = {r[0]: r for r in _rows(data_dir, _EVERY_COLUMN, store="two")}
    assert rows[four[0]][3:8] == (3, "[]", rows[four[0]][5], rows[four[0]][6], 0) and rows[four[0]][12] is None
    assert rows[four[1]][3] == 9 and rows[four[1]][13] == 0.5
    edge = next(r for r in _rows(data_dir, _EVERY_EDGE_COLUMN, store="two") if r[:3] == (four[0], four[2], "causal"))
    assert edge[3:5] == (0.5, "{}")
    found = cli("--store", "two", "doctor")
    assert found.err == "Error: doctor found problems: insights\n"  # the importance of 9, carried
    assert f"insight {four[1]}: importance 9 is out of 1-5" in found.out
    # an undamaged row is copied byte for byte
    source = {r[0]: r for r in _rows(data_dir, _EVERY_COLUMN)}
    assert rows[four[2]] == source[four[2]] and rows[four[3]] == source[four[3]]
