"""Import speed regressions (targets: import ≥ 2,000 insights/s): same edges whatever the batching,
a generous time bound, and hot queries that use an index instead of scanning a table."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import apsw
import pytest

from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.engine import Engine, bulk, prepare
from mnemon.store import edges, insights
from mnemon.store.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate import generate_draft  # noqa: E402

NOW = datetime(2026, 9, 2, 12, 0, 0, tzinfo=timezone.utc)
N = 2000


@pytest.fixture(scope="module")
def draft_text() -> str:
    return json.dumps(generate_draft(N, seed=7))


def _import(data_dir: Path, text: str) -> tuple[dict[str, object], float]:
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW) as engine:
        started = time.process_time()
        report = engine.import_draft(parse_draft(text))
        return report, time.process_time() - started


def _state(data_dir: Path) -> tuple[Counter[tuple[object, ...]], Counter[tuple[object, ...]], list[tuple[object, ...]]]:
    """Edges, insights and oplog rows with ids replaced by contents (ids differ between imports)."""
    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        content = {str(r[0]): str(r[1]) for r in conn.execute("SELECT id, content FROM insights")}
        edge_rows = Counter(
            (content[s], content[t], kind, weight, meta, created)
            for s, t, kind, weight, meta, created in conn.execute(
                "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges"
            )
        )
        insight_rows = Counter(
            tuple(r) for r in conn.execute(
                "SELECT content, category, importance, tags, entities, source, created_at, deleted_at, "
                "effective_importance FROM insights"
            )
        )
        log = [
            (op, content.get(str(ref), ref), str(detail).replace(str(ref), content.get(str(ref), str(ref))))
            for op, ref, detail in conn.execute("SELECT operation, insight_id, detail FROM oplog ORDER BY id")
        ]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    return edge_rows, insight_rows, log


def test_batched_import_writes_what_one_item_per_transaction_writes(tmp_path, monkeypatch, draft_text):
    report, cpu = _import(tmp_path / "batched", draft_text)
    assert report["imported"] == N and report["errors"] == 0
    assert cpu < 60, f"import of {N} drafts took {cpu:.1f} s of CPU"  # about 1.5 s on a quiet machine

    monkeypatch.setattr(bulk, "IMPORT_BATCH", 1)
    single, _ = _import(tmp_path / "single", draft_text)
    strip = lambda r: {k: v for k, v in r.items() if k != "results"}  # noqa: E731
    assert strip(single) == strip(report)
    assert [(r["index"], r["action"]) for r in single["results"]] == [(r["index"], r["action"]) for r in report["results"]]
    batched_edges, batched_insights, batched_log = _state(tmp_path / "batched")
    single_edges, single_insights, single_log = _state(tmp_path / "single")
    assert sum(batched_edges.values()) > 10 * N  # entity, causal, backbone and explicit edges
    assert batched_edges == single_edges
    assert batched_insights == single_insights
    assert batched_log == single_log


def test_reimport_maps_every_item_to_its_existing_insight(tmp_path, draft_text):
    first, _ = _import(tmp_path, draft_text)
    again, _ = _import(tmp_path, draft_text)
    assert again["skipped"] == N and again["imported"] == 0
    assert [r["id"] for r in again["results"]] == [r["id"] for r in first["results"]]


HOT_QUERIES = {
    "with_entity": (insights._SQL_WITH_ENTITY, ("Redis", "x", 5)),
    "with_entity_dated": (insights._SQL_WITH_ENTITY_DATED, ("Redis", "x", 5)),
    "recent_same_source": (insights._SQL_RECENT_SAME_SOURCE, ("user", "x", 10)),
    "latest_same_source": (insights._SQL_LATEST_SAME_SOURCE, ("user", "x")),
    "recent_since": (insights._SQL_RECENT_SINCE, ("2026-01-01T00:00:00Z", "x", 11)),
    "prune_candidates": (insights._SQL_PRUNE_CANDIDATES, (4, 3, "2026-01-01T00:00:00Z", "[]", 10)),
    "prune_candidates_ahead": (insights._SQL_PRUNE_CANDIDATES_AHEAD, (256, 4, 3, "2026-01-01T00:00:00Z", "[]", 10)),
    "prune_first_importance": (insights._SQL_PRUNE_FIRST_IMPORTANCE, (4,)),
    "prune_next_importance": (insights._SQL_PRUNE_NEXT_IMPORTANCE, (1, 4)),
    "prune_first_access": (insights._SQL_PRUNE_FIRST_ACCESS, (3, 3)),
    "prune_next_access": (insights._SQL_PRUNE_NEXT_ACCESS, (3, 0, 3)),
    "prune_group_stamped": (insights._SQL_PRUNE_GROUP_STAMPED, (3, 0, "2026-01-01T00:00:00Z", 4096)),
    "prune_group_unstamped": (insights._SQL_PRUNE_GROUP_UNSTAMPED, (3, 0, "2026-01-01T00:00:00Z", 4096)),
    "prune_candidates_of": (insights._SQL_PRUNE_CANDIDATES_OF, ('["a"]', 4, 3, "2026-01-01T00:00:00Z", "[]", 10)),
    "exact_duplicate": (insights._SQL_EXACT_DUPLICATE, ("a",)),
    "active_count": (insights._SQL_ACTIVE_COUNT, ()),
    "deleted_count": (insights._SQL_DELETED_COUNT, ()),
    "active_embeddings": (insights._SQL_ACTIVE_EMBEDDINGS, ()),
    "by_category": (insights._SQL_BY_CATEGORY, ()),
    "exact_duplicates": (insights._SQL_ACTIVE_BY_CONTENT, ('["a"]',)),
    "get_many": (insights._SQL_GET_MANY, ('["a"]',)),
    "existing_ids": (insights._SQL_EXISTING, ('["a"]',)),
    "source_timeline": (insights._SQL_SOURCE_TIMELINE, ("user",)),
    "count_touching": (edges._SQL_COUNT_TOUCHING, ("a", "a")),
    "count_touching_many": (edges._SQL_COUNT_TOUCHING_MANY, ('["a"]', '["a"]')),
    "touching": (edges._SQL_TOUCHING, ("a", "a")),
    "delete_touching": (edges._SQL_DELETE_TOUCHING, ("a", "a")),
    "delete_pair": (edges._SQL_DELETE_PAIR, ("a", "b", "temporal")),
}


@pytest.mark.parametrize("name", sorted(HOT_QUERIES))
def test_hot_query_searches_an_index(tmp_path, name):
    _import(tmp_path, json.dumps(generate_draft(200, seed=3)))
    conn = apsw.Connection(str(tmp_path / "data" / "default" / "mnemon.db"))
    try:
        sql, args = HOT_QUERIES[name]
        plan = [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]
    finally:
        conn.close()
    scans = [step for step in plan if step.startswith("SCAN") and ("insights" in step or "edges" in step)]
    assert not scans, plan
    assert any(step.startswith("SEARCH") for step in plan), plan


def test_redundant_edge_indexes_are_dropped_and_reads_still_use_one(tmp_path):
    _import(tmp_path, json.dumps(generate_draft(50, seed=3)))
    conn = apsw.Connection(str(tmp_path / "data" / "default" / "mnemon.db"))
    try:
        names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'edges'")}
    finally:
        conn.close()
    assert names == {"sqlite_autoindex_edges_1", "idx_edges_target_type"}


def test_a_go_store_loses_the_redundant_edge_indexes_on_open(tmp_path):
    db = tmp_path / "data" / "default" / "mnemon.db"
    db.parent.mkdir(parents=True)
    conn = apsw.Connection(str(db))
    with conn:
        conn.execute((ROOT / "tests" / "go_schema.sql").read_text(encoding="utf-8"))
    conn.close()
    _import(tmp_path, json.dumps(generate_draft(20, seed=3)))
    conn = apsw.Connection(str(db))
    try:
        names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'edges'")}
    finally:
        conn.close()
    assert names == {"sqlite_autoindex_edges_1", "idx_edges_target_type"}


REDUNDANT_INSIGHT_INDEXES = {"idx_insights_deleted", "idx_insights_prune"}  # prefixes of idx_insights_prune_stored


def test_a_go_store_loses_the_redundant_insight_indexes_on_open_and_reopens_as_current(tmp_path):
    db = tmp_path / "data" / "default" / "mnemon.db"
    db.parent.mkdir(parents=True)
    conn = apsw.Connection(str(db))
    with conn:
        conn.execute((ROOT / "tests" / "go_schema.sql").read_text(encoding="utf-8"))
    conn.close()
    _import(tmp_path, json.dumps(generate_draft(20, seed=3)))
    _import(tmp_path, json.dumps(generate_draft(20, seed=4)))  # the migration is idempotent
    conn = apsw.Connection(str(db))
    try:
        names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'insights'")}
        schema = conn.execute("SELECT value FROM mnemon_meta WHERE key = 'schema'").fetchone()[0]
    finally:
        conn.close()
    assert not names & REDUNDANT_INSIGHT_INDEXES
    assert "idx_insights_prune_stored" in names
    assert schema == str(SCHEMA_VERSION)


def test_parallel_preparation_writes_what_in_process_preparation_writes(tmp_path, monkeypatch):
    """Large drafts are prepared in a pool of forked workers; small chunks force several tasks."""
    text = json.dumps(generate_draft(900, seed=21))
    monkeypatch.setattr(prepare, "PARALLEL_THRESHOLD", 10**9)
    local, _ = _import(tmp_path / "local", text)
    started: list[int] = []
    real_start = prepare.Preparer._start

    def start(self: prepare.Preparer) -> None:
        real_start(self)
        started.append(len(self.futures))

    monkeypatch.setattr(prepare, "PARALLEL_THRESHOLD", 100)
    monkeypatch.setattr(prepare, "PARALLEL_CHUNK", 128)
    monkeypatch.setattr(prepare.Preparer, "_start", start)
    pooled, _ = _import(tmp_path / "pooled", text)
    assert started and started[0] == 10  # 900 items in tasks of 16, 32, 64, then 128 (0 if fork is unavailable)
    strip = lambda r: {k: v for k, v in r.items() if k != "results"}  # noqa: E731
    assert strip(pooled) == strip(local)
    assert [(r["index"], r["action"]) for r in pooled["results"]] == [(r["index"], r["action"]) for r in local["results"]]
    assert _state(tmp_path / "pooled") == _state(tmp_path / "local")


def test_import_prepares_in_process_when_the_pool_cannot_start_or_breaks(tmp_path, monkeypatch):
    text = json.dumps(generate_draft(300, seed=22))
    monkeypatch.setattr(prepare, "PARALLEL_THRESHOLD", 10**9)
    _import(tmp_path / "local", text)
    monkeypatch.setattr(prepare, "PARALLEL_THRESHOLD", 10)
    monkeypatch.setattr(prepare, "PARALLEL_CHUNK", 64)

    def no_fork() -> None:
        raise OSError("no fork here")

    monkeypatch.setattr(prepare, "_fork_context", no_fork)
    _import(tmp_path / "nopool", text)

    class Broken:
        def result(self) -> None:
            raise RuntimeError("worker died")

    real_start = prepare.Preparer._start

    def broken_start(self: prepare.Preparer) -> None:
        real_start(self)
        self.futures = [Broken() for _ in range(len(self.starts) - 1)]

    monkeypatch.undo()
    monkeypatch.setattr(prepare, "PARALLEL_THRESHOLD", 10)
    monkeypatch.setattr(prepare, "PARALLEL_CHUNK", 64)
    monkeypatch.setattr(prepare.Preparer, "_start", broken_start)
    _import(tmp_path / "broken", text)
    assert _state(tmp_path / "nopool") == _state(tmp_path / "local")
    assert _state(tmp_path / "broken") == _state(tmp_path / "local")


def test_prepared_sub_type_flags_give_the_joined_texts_sub_type():
    from mnemon import linking

    texts = [
        "", "because", "we did it so that", "It was blocked", "due to rain; prevents leaks", "为了 x", "阻止",
        "so", "that", "in order to ship, because", "Leads To", "nothing here",
    ]
    for a in texts:
        for b in texts:
            flags = prepare.sub_type(prepare.sub_type_flags(a), prepare.sub_type_flags(b))
            assert flags == linking.causal_sub_type(a, b), (a, b)


def test_growing_batches_write_what_fixed_single_item_batches_write(tmp_path, monkeypatch):
    """Batches grow with the store (IMPORT_BATCH_GROWTH); into a non-empty store, with growth off
    and one item per transaction, the result is the same."""
    base = json.dumps(generate_draft(300, seed=11))
    more = json.dumps(generate_draft(600, seed=12))
    _import(tmp_path / "grown", base)
    grown, _ = _import(tmp_path / "grown", more)
    monkeypatch.setattr(bulk, "IMPORT_BATCH", 1)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_GROWTH", 0)
    _import(tmp_path / "single", base)
    single, _ = _import(tmp_path / "single", more)
    strip = lambda r: {k: v for k, v in r.items() if k != "results"}  # noqa: E731
    assert strip(single) == strip(grown)
    assert _state(tmp_path / "single") == _state(tmp_path / "grown")


def test_a_failing_row_fails_only_its_item_whatever_the_batching(tmp_path, monkeypatch):
    """The chunk's rows are written at once; a row the store refuses makes the chunk redo itself
    one savepoint per item, so only that item is an error, as with one item per transaction."""
    draft = generate_draft(120, seed=5)
    bad = draft["insights"][37]["content"]
    text = json.dumps(draft)

    def run(data_dir: Path) -> dict[str, object]:
        settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
        with Engine(settings, clock=lambda: NOW) as engine:
            with engine.store.conn:
                engine.store.conn.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON insights WHEN NEW.content = ? "
                    "BEGIN SELECT RAISE(ABORT, 'refused'); END".replace("?", json.dumps(bad).replace('"', "'"))
                )
            return engine.import_draft(parse_draft(text))

    batched = run(tmp_path / "batched")
    monkeypatch.setattr(bulk, "IMPORT_BATCH", 1)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_GROWTH", 0)
    single = run(tmp_path / "single")
    assert batched["errors"] == single["errors"] == 1
    assert [r for r in batched["results"] if r["action"] == "error"] == [
        {"index": 37, "id": "", "content": bad, "action": "error", "error": "refused"}
    ]
    strip = lambda r: {k: v for k, v in r.items() if k != "results"}  # noqa: E731
    assert strip(single) == strip(batched)
    assert _state(tmp_path / "single") == _state(tmp_path / "batched")


@pytest.mark.parametrize("name", ["vectors_after", "active_after", "hot_rows_since", "hot_edges_since"])
def test_catch_up_reads_walk_the_rowid_range(tmp_path, name):
    """What a write's index catch-up reads must be the rows after a rowid, never every active row
    (the planner preferred a partial index on deleted_at: each catch-up was O(store), issue 13)."""
    from mnemon.store import hotindex, vectors

    sql = {
        "vectors_after": vectors._SQL_ACTIVE_VECTORS_AFTER, "active_after": vectors._SQL_ACTIVE_COUNT_AFTER,
        "hot_rows_since": hotindex._SQL_ROWS_SINCE, "hot_edges_since": hotindex._SQL_EDGES_SINCE,
    }[name]  # fmt: skip
    _import(tmp_path, json.dumps(generate_draft(200, seed=3)))
    conn = apsw.Connection(str(tmp_path / "data" / "default" / "mnemon.db"))
    try:
        plan = [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, (150,))]
    finally:
        conn.close()
    assert plan[0].startswith("SEARCH") and "INTEGER PRIMARY KEY (rowid>?)" in plan[0], plan


def test_edge_counts_of_many_ids_are_the_same_scanned_or_probed(tmp_path, draft_text):
    """count_touching_many scans every edge when asked for a large share of the insights (an
    import's touched nodes) and probes two index ranges per id otherwise: the same counts."""
    _import(tmp_path, draft_text)
    conn = apsw.Connection(str(tmp_path / "data" / "default" / "mnemon.db"))
    try:
        ids = [str(r[0]) for r in conn.execute("SELECT id FROM insights ORDER BY rowid")]
        few = ids[:: edges.SCAN_SHARE * 3]  # below the share: probed
        assert len(few) * edges.SCAN_SHARE < len(ids)
        scanned, probed = edges.count_touching_many(conn, ids + ["no-such-id"]), edges.count_touching_many(conn, few)
        assert probed == {i: edges.count_touching(conn, i) for i in few if edges.count_touching(conn, i)}
        assert scanned == {i: n for i in ids if (n := edges.count_touching(conn, i))}
        assert {i: scanned[i] for i in probed} == probed and sum(scanned.values()) == 2 * edges.count_all(conn)
    finally:
        conn.close()


def test_an_import_leaves_the_hot_index_current(tmp_path, monkeypatch):
    """The import builds (or catches up) the hot index itself: the next recall neither builds it nor
    catches up a single row, so a big import's first recall is not left to a hook's timeout."""
    from mnemon.engine import hot

    _import(tmp_path, json.dumps(generate_draft(300, seed=23)))
    folder = tmp_path / "data" / "default" / "mnemon.db.index"
    assert (folder / "hot").exists()

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the recall after an import rebuilt or caught up the hot index")

    monkeypatch.setattr(hot.HotIndex, "build", classmethod(refuse))
    monkeypatch.setattr(hot.HotIndex, "catch_up", refuse)
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW) as engine:
        assert engine.recall("Kafka retries", limit=5).hits


def test_fresh_edge_keys_need_a_new_endpoint_an_unwritten_key_and_one_row():
    """``bulk._fresh`` (which edge rows a PostgreSQL import may COPY): a key with an endpoint the
    import created, not among the keys it wrote (sorted hashes), once in the rows; nothing while
    another process wrote since the import's last commit. A hash that matches a written key
    (a collision looks the same) only sends the row to the upsert."""
    import numpy as np

    new = {"n1", "n2"}
    rows = sorted([
        ("n1", "o1", "causal", 1.0, "{}", "t"),  # fresh
        ("o1", "n2", "entity", 1.0, "{}", "t"),  # fresh (one new end is enough)
        ("o1", "o2", "causal", 1.0, "{}", "t"),  # both ends old: may exist
        ("n1", "n2", "entity", 1.0, "{}", "t"),  # written by a chunk
        ("n2", "n1", "semantic", 0.5, "{}", "t"),  # repeated: upserted, the last wins
        ("n2", "n1", "semantic", 0.7, "{}", "t"),
    ], key=bulk._EDGE_KEY)
    written = np.sort(np.array([hash(("n1", "n2", "entity")), hash(("x", "y", "z"))], dtype=np.int64))
    fresh, hashes = bulk._fresh(rows, new, written, True)
    got = {r[:3] + (r[3],): f for r, f in zip(rows, fresh)}
    assert got == {
        ("n1", "o1", "causal", 1.0): True, ("o1", "n2", "entity", 1.0): True, ("o1", "o2", "causal", 1.0): False,
        ("n1", "n2", "entity", 1.0): False, ("n2", "n1", "semantic", 0.5): False, ("n2", "n1", "semantic", 0.7): False,
    }
    assert hashes.tolist() == [hash(bulk._EDGE_KEY(r)) for r in rows]
    assert bulk._fresh(rows, new, written, False)[0] == [False] * len(rows)
    assert bulk._fresh(rows, new, np.zeros(0, dtype=np.int64), True)[0].count(True) == 3


def _views(index: object) -> list[tuple[object, ...]]:
    """Each row's id, recall terms with their counts, plain terms and lengths, by term text (term
    ids differ between a build, whose vocabulary is sorted, and a catch-up, which appends)."""
    vocab = index.vocab  # type: ignore[attr-defined]
    r_ptr, r_term, r_tf = index.r_ptr, index.r_term, index.r_tf  # type: ignore[attr-defined]
    p_ptr, p_term = index.p_ptr, index.p_term  # type: ignore[attr-defined]
    out = []
    for row, insight_id in enumerate(index.ids_list()):  # type: ignore[attr-defined]
        terms = sorted((vocab[t], int(f)) for t, f in zip(r_term[r_ptr[row]:r_ptr[row + 1]], r_tf[r_ptr[row]:r_ptr[row + 1]]))
        plain = sorted(vocab[t] for t in p_term[p_ptr[row]:p_ptr[row + 1]])
        out.append((insight_id, terms, plain, int(index.doc_len[row]), int(index.n_plain[row])))  # type: ignore[attr-defined]
    return out


def test_the_index_an_import_leaves_uses_its_token_sequences_and_equals_a_rebuild(tmp_path, monkeypatch):
    """The hot index an import builds, then one a second import catches up, take the imported
    contents' token sequences from the import (no content is tokenised again) and describe every
    row as a build from the store alone does."""
    from mnemon import text
    from mnemon.engine import hot
    from mnemon.engine.hot import catchup  # the index tokenises rows there
    from mnemon.store import Store, hotindex

    first, second = generate_draft(300, seed=31), generate_draft(200, seed=32)
    contents = {item["content"] for item in first["insights"] + second["insights"]}
    tokenised: list[str] = []  # contents the index tokenised itself
    real = catchup.insight_views

    def views(content: str, tags: object, entities: object, sequence: list[str] | None = None,
              fields: object = None) -> object:
        if sequence is None:
            tokenised.append(content)
        else:
            assert sequence == text.token_sequence(content)
        return real(content, tags, entities, sequence, fields)  # type: ignore[arg-type]

    monkeypatch.setattr(catchup, "insight_views", views)
    caught_up: list[int] = []
    real_catch_up = hot.HotIndex.catch_up

    def catch_up(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        caught_up.append(1)
        return real_catch_up(self, *args, **kwargs)

    monkeypatch.setattr(hot.HotIndex, "catch_up", catch_up)
    for draft in (first, second):
        _import(tmp_path, json.dumps(draft))
        assert not contents.intersection(tokenised)
    db = tmp_path / "data" / "default" / "mnemon.db"
    left = hot._load(db)
    assert left is not None and caught_up  # the second import caught the first's index up
    store = Store.open(db, readonly=True, now="2026-09-02T12:00:00Z")
    try:
        with hotindex.read_snapshot(store.conn):
            rebuilt = hot.HotIndex.build(store.conn, hotindex.fingerprint(store.conn))
    finally:
        store.close()
    assert _views(left) == _views(rebuilt)


def test_block_starts_ramp_up_to_the_chunk_and_cover_every_item():
    assert prepare.block_starts(0, 2000) == [0]
    assert prepare.block_starts(100, 2000) == [0, 100]
    assert prepare.block_starts(10_000, 2000) == [0, 250, 750, 1750, 3750, 5750, 7750, 9750, 10_000]
    assert prepare.block_starts(5, 1) == [0, 1, 2, 3, 4, 5]


def test_the_preparation_pool_runs_a_bounded_number_of_blocks_ahead(monkeypatch):
    """Tasks are submitted ``PARALLEL_AHEAD`` blocks ahead of the block read, not all at once
    (their results wait in the importing process: a whole 1M draft's took about 2 GB)."""
    texts = [item["content"] for item in generate_draft(700, seed=23)["insights"]]
    monkeypatch.setattr(prepare, "PARALLEL_AHEAD", 2)
    prepared = prepare.Preparer(texts, threshold=10, chunk=64)
    try:
        if prepared.pool is None:
            pytest.skip("no fork here: no pool")
        # blocks of 8, 16, 32, then 64 items: starts 0, 8, 24, 56, 120, 184, ..., 696, 700
        assert prepared.starts[:6] == [0, 8, 24, 56, 120, 184] and prepared.starts[-1] == 700
        assert len(prepared.futures) == 14 and prepared.submitted == 3
        got = [prepared.get(k) for k in range(185)]
        assert prepared.submitted == 8  # block 5 read: blocks up to 7 submitted, 8-13 not yet
        assert all(f is None for f in prepared.futures[8:])
        got += [prepared.get(k) for k in range(185, len(texts))]
        assert prepared.submitted == 14
    finally:
        prepared.close()
    assert got == prepare.prepare_texts(texts)


def test_import_consumes_the_draft_and_reports_every_item(tmp_path: Path, draft_text: str) -> None:
    """The import releases the draft's edges and items as it goes (they are not the index build's
    memory); the report still lists every item with its content."""
    draft = parse_draft(draft_text)
    contents = [item.content for item in draft.insights]
    assert len(draft.edges) > 0
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW) as engine:
        report = engine.import_draft(draft)
    assert draft.insights == [] and len(draft.edges) == 0
    results = report["results"]
    assert isinstance(results, list) and [r["content"] for r in results] == contents
    assert [r["index"] for r in results] == list(range(N))


def _batch_sizes(settings: Settings, text: str) -> list[int]:
    """The sizes of an import's write transactions, read from its progress reports."""
    done: list[int] = []
    with Engine(settings, clock=lambda: NOW) as engine:
        engine.import_draft(parse_draft(text), progress=lambda n, total: done.append(n))
    return [b - a for a, b in zip([0, *done], done)]


def test_batches_grow_with_the_store_up_to_the_backends_largest(tmp_path, monkeypatch):
    """A SQLite import's batches grow with the store up to IMPORT_BATCH_MAX (what one batch holds
    in memory is bounded); the PostgreSQL cap (tests/test_postgres.py) is not SQLite's."""
    monkeypatch.setattr(bulk, "IMPORT_BATCH", 50)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_MAX", 120)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_MAX_POSTGRES", 400)
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    sizes = _batch_sizes(settings, json.dumps(generate_draft(700, seed=13)))
    assert sizes == [50, 50, 100, 120, 120, 120, 120, 20]
