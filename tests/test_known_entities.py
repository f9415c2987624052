"""The write path's index-aware entity lookup asks the store about a text's candidate words only."""

from __future__ import annotations

from pathlib import Path

from mnemon.entities import entity_candidates, extract_known_entities
from mnemon.store import Store, insights


def test_known_among_equals_filtering_the_full_entity_set(cli, data_dir: Path) -> None:
    cli.ok("remember", "Project Alpha ships on Friday", "--entities", "Alpha,Friday Release")
    cli.ok("remember", "Beta uses Redis", "--entities", "Beta")
    forgotten = cli.ok("remember", "Gamma is retired", "--entities", "Gamma")
    cli.ok("forget", forgotten["id"])
    text = "Alpha and Beta and Gamma meet Redis, Delta and Kubernetes"
    store = Store.open(data_dir / "data" / "default" / "mnemon.db", readonly=True, now="")
    try:
        full = insights.known_entities(store.conn)
        among = insights.known_among(store.conn, entity_candidates(text))
    finally:
        store.close()
    assert among == {c for c in entity_candidates(text) if c in full}
    assert extract_known_entities(text, among) == extract_known_entities(text, full) == ["Alpha", "Beta", "Redis"]


def test_a_new_insight_picks_up_a_known_entity_from_the_store(cli) -> None:
    cli.ok("remember", "Alpha routing notes", "--entities", "Alpha")
    out = cli.ok("remember", "We tuned Alpha for latency", "--no-diff")
    assert "Alpha" in out["entities"]


def test_status_top_entities_from_the_lookup_table_equal_the_json_scan(cli, data_dir: Path) -> None:
    cli.ok("remember", "Alpha uses Redis and Kafka", "--entities", "Alpha")
    cli.ok("remember", "Alpha moved to Postgres", "--entities", "Alpha")
    gone = cli.ok("remember", "Beta uses Redis", "--entities", "Beta")
    cli.ok("forget", gone["id"])
    store = Store.open(data_dir / "data" / "default" / "mnemon.db", readonly=True, now="")
    try:
        via_table = insights.top_entities(store.conn, 20)
        via_json = [(str(r[0]), int(r[1])) for r in store.conn.execute(insights._SQL_TOP_ENTITIES, (20,))]
    finally:
        store.close()
    assert via_table == via_json
    assert via_table[0] == ("Alpha", 2) and ("Beta", 1) not in via_table
