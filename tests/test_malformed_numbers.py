"""A number column holding no number (a hand-edited store, another program's, a Go store's NULLs).

``sqlite3 mnemon.db "UPDATE insights SET importance='x' ..."`` made recall, search, remember, gc,
export and viz ValueError tracebacks, and ``doctor --repair`` left the row as it was. Now every
reader takes such a value as its column's fallback (``mnemon.store.numeric``), ``doctor`` names it
and ``doctor --repair`` writes that fallback, in its one write transaction. The damage is made with a
raw apsw connection, then the real CLI is asked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import pytest

from mnemon.store import numeric
from tests.test_store import build_go_db


def _db(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


def _rows(data_dir: Path, sql: str) -> list[tuple]:
    conn = apsw.Connection(str(_db(data_dir)))
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def _damage(data_dir: Path, statements: list[str]) -> None:
    conn = apsw.Connection(str(_db(data_dir)))
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()
    # every command then builds its index from the damaged rows (the hot index's build and catch-up read
    # rows through the same code), not from an index written before the damage
    shutil.rmtree(_db(data_dir).with_name("mnemon.db.index"), ignore_errors=True)


# One kind of malformed value per case, written into every numeric column the readers parse: the
# insights' importance, access_count and effective_importance (each on its own row) and an edge's weight.
KINDS = {
    "text": "'x'",
    "blob": "x'00ff'",
    "infinity": "9e999",  # SQLite stores it as a REAL infinity: int() raised OverflowError
    "real": "4.5",  # a REAL in an integer column (and a well-formed one in the real columns)
}


@pytest.fixture
def three(cli) -> list[str]:
    ids = [cli.ok("remember", text, "--no-diff")["id"] for text in (
        "Kafka retries are capped at five", "Kafka consumer lag is watched hourly", "Kafka brokers run on three hosts")]
    cli.ok("link", ids[0], ids[2], "--type", "causal", "--weight", "0.9")
    return ids


def _damage_every_column(data_dir: Path, ids: list[str], value: str) -> None:
    _damage(data_dir, [
        f"UPDATE insights SET importance = {value} WHERE id = '{ids[0]}'",
        f"UPDATE insights SET access_count = {value} WHERE id = '{ids[1]}'",
        f"UPDATE insights SET effective_importance = {value} WHERE id = '{ids[2]}'",
        f"UPDATE edges SET weight = {value} WHERE source_id = '{ids[0]}' AND target_id = '{ids[2]}' "
        "AND edge_type = 'causal'",
    ])


COMMANDS = {
    "recall": ["recall", "Kafka"],
    "recall-basic": ["recall", "Kafka", "--basic"],
    "search": ["search", "Kafka"],
    "remember": ["remember", "Kafka partitions were doubled"],
    "gc": ["gc"],
    "export": ["export"],
    "viz": ["viz"],
    "show": ["show", "{0}"],
    "related": ["related", "{0}"],
    "status": ["status"],
}


@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
@pytest.mark.parametrize("kind", KINDS, ids=list(KINDS))
def test_every_command_reads_a_malformed_number_as_its_fallback(cli, data_dir, three, kind, command) -> None:
    _damage_every_column(data_dir, three, KINDS[kind])
    res = cli(*(a.format(*three) for a in COMMANDS[command]))
    if command == "export" and kind == "real":
        # 4.5 is a well-formed weight, out of [0, 1] (doctor's edge_values): no draft carries it, and export says so
        # rather than write one that import refuses (tests/test_inputs_roundtrip.py)
        assert res.code == 1 and res.err.startswith(f"Error: export: edge {three[0]} -> {three[2]} (causal): weight "
                                                    "4.5 is out of 0-1: "), res.err
        return
    assert res.code == 0 and "Traceback" not in res.err, res.err
    if command in ("recall", "search"):
        out = res.json()
        hits = out["results"] if command == "recall" else out  # type: ignore[index]
        hit = next(h for h in hits if h["id"] == three[0])  # type: ignore[union-attr]
        assert hit["importance"] == numeric.IMPORTANCE_FALLBACK
    if command == "export":
        edge = next(e for e in res.json()["edges"] if e["edge_type"] == "causal")  # type: ignore[index]
        assert edge["weight"] == numeric.WEIGHT_FALLBACK
    if command == "show":
        assert res.json()["importance"] == numeric.IMPORTANCE_FALLBACK  # type: ignore[index]


def test_an_unreadable_weight_ranks_as_its_fallback_in_recall(cli, data_dir, three) -> None:
    """The hot index reads a weight as store.edges does: numpy alone parsed the text "3" as 3.0, and read
    NULL as NaN."""
    cli.ok("link", three[1], three[0], "--type", "causal", "--weight", "0.5")
    before = cli.ok("recall", "retries capped")
    _damage(data_dir, [f"UPDATE edges SET weight = '٣' WHERE source_id = '{three[1]}' AND edge_type = 'causal'"])
    assert cli.ok("recall", "retries capped") == before


@pytest.mark.parametrize("kind", KINDS, ids=list(KINDS))
def test_doctor_names_them_and_repair_writes_the_fallbacks(cli, data_dir, three, kind) -> None:
    _damage_every_column(data_dir, three, KINDS[kind])
    untouched = "SELECT id, content, category, tags, entities, source, created_at, updated_at FROM insights ORDER BY id"
    others = _rows(data_dir, untouched)
    found = cli("doctor")
    assert found.code == 1 and "numeric_values" in found.err
    check = next(c for c in found.json()["checks"] if c["name"] == "numeric_values")  # type: ignore[index]
    expected = [f"insight {three[0]}: importance", f"insight {three[1]}: access_count"]
    if kind != "real":  # 4.5 is a well-formed effective importance and weight
        expected += [f"insight {three[2]}: effective_importance", f"edge {three[0]} -> {three[2]} (causal): weight"]
    assert check["ok"] is False and check["detail"].startswith(f"{len(expected)} problem(s): ")
    for problem in expected:
        assert problem in check["detail"]
    generation = int(_rows(data_dir, "SELECT value FROM mnemon_meta WHERE key = 'generation'")[0][0])

    repaired = cli("doctor", "--repair").json()
    assert f"rewrote {len(expected)} malformed numeric value(s) as the value commands read them as" in \
        repaired["repaired"]  # type: ignore[index]
    # one write transaction (the dangling edges' and the numbers' together): one generation bump
    assert int(_rows(data_dir, "SELECT value FROM mnemon_meta WHERE key = 'generation'")[0][0]) == generation + 1
    after = cli("doctor")
    # a weight of 4.5 is a number, only out of [0, 1]: doctor's edge_values names it, and --repair clamps it
    # into 0-1 (store.ranges)
    assert after.err == "", after.err
    stored = {r[0]: r[1:] for r in _rows(data_dir, "SELECT id, importance, access_count, effective_importance "
                                                   "FROM insights")}
    assert stored[three[0]][0] == numeric.IMPORTANCE_FALLBACK
    assert stored[three[1]][1] == numeric.ACCESS_COUNT_FALLBACK
    weight = _rows(data_dir, f"SELECT weight FROM edges WHERE source_id = '{three[0]}' AND edge_type = 'causal'")
    if kind != "real":
        assert stored[three[2]][2] == numeric.EFFECTIVE_IMPORTANCE_FALLBACK
        assert weight == [(numeric.WEIGHT_FALLBACK,)]
    else:
        assert weight == [(1.0,)]
    assert _rows(data_dir, untouched) == others  # nothing else changed


def test_readonly_doctor_reports_and_repair_is_refused(cli, data_dir, three) -> None:
    _damage_every_column(data_dir, three, "'x'")
    before = _db(data_dir).read_bytes()
    assert "numeric_values" in cli("--readonly", "doctor").err
    assert cli("--readonly", "doctor", "--repair").code == 1
    assert _db(data_dir).read_bytes() == before


def test_a_go_store_with_null_numbers(cli, data_dir) -> None:
    """The Go schema lets importance, access_count and weight be NULL: int(None) failed every reader."""
    build_go_db(_db(data_dir))
    _damage(data_dir, ["UPDATE insights SET importance = NULL, access_count = NULL, effective_importance = NULL",
                       "UPDATE edges SET weight = NULL"])
    for args in (["recall", "Go"], ["search", "Go"], ["export"], ["viz"], ["gc"], ["remember", "Go store note"]):
        res = cli(*args)
        assert res.code == 0 and "Traceback" not in res.err, (args, res.err)
    found = cli("doctor")
    assert "numeric_values" in found.err
    cli.ok("doctor", "--repair")
    assert cli.ok("doctor")["ok"] is True  # type: ignore[index]
    assert _rows(data_dir, "SELECT COUNT(*) FROM insights WHERE importance IS NULL OR access_count IS NULL") == [(0,)]
    assert _rows(data_dir, "SELECT COUNT(*) FROM edges WHERE weight IS NULL") == [(0,)]


def test_an_importance_past_int8_is_clipped_in_the_recall_index(cli, data_dir, three) -> None:
    """1000 is an integer (doctor's "insights" check names it out of 1-5): the index's int8 column made
    numpy's OverflowError fail every recall of the store; the SQL re-read still shows the stored value."""
    _damage(data_dir, [f"UPDATE insights SET importance = 1000 WHERE id = '{three[0]}'",
                       f"UPDATE insights SET importance = -1000 WHERE id = '{three[1]}'"])
    hits = {h["id"]: h for h in cli.ok("recall", "Kafka")["results"]}  # type: ignore[index]
    assert hits[three[0]]["importance"] == 1000 and hits[three[1]]["importance"] == -1000


def test_a_counter_holding_no_integer_reads_as_the_real_count(cli, data_dir, three) -> None:
    """The status counters are kept by triggers; a hand-edited one ('x') failed status, doctor, and every
    recall and write through the hot index's edge guard. It reads as the real count, doctor names it and
    --repair recounts it."""
    cli.ok("remember", "Alice keeps the Kafka dashboards", "--entities", "Alice")
    status = cli.ok("status")
    _damage(data_dir, ["UPDATE mnemon_counts SET n = 'x' WHERE key = 'edges'",
                       "UPDATE mnemon_counts SET n = x'01' WHERE key = 'category:general'",
                       "UPDATE entity_counts SET n = 'x' WHERE entity = 'Alice'"])
    assert cli.ok("status") == status
    cli.ok("recall", "Kafka")
    found = cli("doctor")
    assert found.err == "Error: doctor found problems: counters\n"
    assert "counter edges: kept 'x', real" in found.out and "entity counter Alice: kept 'x', real 1" in found.out
    assert "recounted the status counters" in cli.ok("doctor", "--repair")["repaired"]  # type: ignore[index]
    assert cli.ok("doctor")["ok"] is True  # type: ignore[index]
    after = cli.ok("status")
    assert {k: v for k, v in after.items() if k != "oplog_count"} == \
        {k: v for k, v in status.items() if k != "oplog_count"}  # type: ignore[union-attr]  # (the recall logs)


@pytest.mark.parametrize("key", ["embedding_dim", "embedding_epoch"])
def test_a_meta_counter_of_other_digits_reads_as_unset(cli, data_dir, three, key) -> None:
    """str.isdigit() is true of "²", which int() refuses: a hand-edited mnemon_meta value failed every recall."""
    _damage(data_dir, [f"INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES ('{key}', '²')"])
    for args in (["recall", "Kafka"], ["remember", "Kafka topics are compacted"], ["status"]):
        res = cli(*args)
        assert res.code == 0 and "Traceback" not in res.err, (args, res.err)


@pytest.mark.parametrize("value", ["'abcdefgh'", "12345678"])
def test_text_in_the_embedding_column_is_no_vector(cli, data_dir, three, value) -> None:
    """Text or a number where a blob belongs: np.frombuffer and bytes() of it were TypeErrors (doctor, and a
    recall whose vector index catches up); it decodes as no vector and doctor names it."""
    _damage(data_dir, [f"UPDATE insights SET embedding = {value} WHERE id = '{three[0]}'"])
    for args in (["recall", "Kafka"], ["search", "Kafka"], ["export"]):
        res = cli(*args)
        assert res.code == 0 and "Traceback" not in res.err, (args, res.err)
    found = cli("doctor")
    assert found.code == 1 and "embeddings" in found.err and "Traceback" not in found.err
    assert "where a blob belongs" in found.out


def test_blob_decode_refuses_what_is_no_blob() -> None:
    from mnemon.store import blob

    assert blob.decode("abcdefgh", "float64") is None  # type: ignore[arg-type]
    assert blob.decode(12345678, "float64") is None  # type: ignore[arg-type]


def test_the_passages_mark_of_other_digits_reads_as_unset() -> None:
    """embedding_passages is read only by the local models' embedding paths: asked directly."""
    from mnemon.store import embeddings

    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE mnemon_meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO mnemon_meta VALUES ('embedding_passages', '²'), ('embedding_dim', '٣')")
    assert embeddings.passages_version(conn) == 0
    assert embeddings.vector_meta(conn).dim is None
