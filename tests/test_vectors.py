"""The vector index against real SQLite files and a real local embedding server (Ollama API).

Covers: remember stores the blob and the index row; semantic edges/candidates carry ``cosine``;
the index stays current across remember/forget/auto-prune; deleting the files, corrupting the
header, or a stale header all give the same ``vector_scores`` as a fresh rebuild; ``--readonly``
writes no index file; a Go-style float32 store works; ties at the cut are broken by id.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from embed_server import EmbedServer

from mnemon.config import Settings
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine
from mnemon.store import vectors as vector_store

DIM = 32
TEXTS = [
    "Chose Qdrant because Rust performance is critical",
    "Qdrant chosen since Rust performance is critical for search",
    "The team prefers PostgreSQL for relational storage",
    "Deploy the API gateway on Fridays only after review",
    "Rust performance matters for the vector search engine",
    "Lunch is served at noon in the cafeteria",
]


@pytest.fixture(scope="module")
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=DIM) as srv:
        yield srv


@pytest.fixture
def endpoint(server: EmbedServer, monkeypatch: pytest.MonkeyPatch) -> str:
    server.mode = "ok"
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    return server.url


def settings(data_dir: Path, url: str, *, readonly: bool = False, max_insights: int = 1000) -> Settings:
    return Settings(
        data_dir=data_dir, store="default", readonly=readonly, embed_endpoint=url, max_insights=max_insights,
        auto_prune_min_age=0.0,
    )


def index_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "data" / "default" / "mnemon.db.index").glob("vec*"))


def fresh_scores(data_dir: Path, url: str, query: np.ndarray) -> dict[str, float]:
    """Scores from an index derived from scratch (files removed first)."""
    db = data_dir / "data" / "default" / "mnemon.db"
    vector_store.remove_files(db)
    with Engine(settings(data_dir, url)) as engine:
        ids, cos = engine.vector_scores(query)
    return dict(zip(ids.tolist(), cos.tolist()))


def scores_of(engine: Engine, query: np.ndarray) -> dict[str, float]:
    ids, cos = engine.vector_scores(query)
    return dict(zip(ids.tolist(), cos.tolist()))


def expected_cosines(engine_ids: dict[str, str], query: np.ndarray) -> dict[str, float]:
    """Cosine of ``query`` with HashEmbedder vectors of each id's text, straight from the formula."""
    emb = HashEmbedder(DIM)
    out = {}
    for insight_id, text in engine_ids.items():
        v = emb.embed(text)
        out[insight_id] = float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query)))
    return out


def test_remember_embeds_and_links_semantically(cli, endpoint: str, data_dir: Path) -> None:
    first = cli.ok("remember", TEXTS[0])
    assert first["embedded"] is True
    second = cli.ok("remember", TEXTS[1])
    assert second["embedded"] is True
    cand = second["semantic_candidates"]
    assert cand and cand[0]["id"] == first["id"]
    want = float(HashEmbedder(DIM).embed(TEXTS[0]) @ HashEmbedder(DIM).embed(TEXTS[1]))
    assert cand[0]["cosine"] == pytest.approx(want, abs=1e-12)
    assert cand[0]["auto_linked"] is (want >= 0.80)
    files = index_files(data_dir)
    assert files, "the index is written beside the database"
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_semantic_auto_edge_at_high_cosine(cli, endpoint: str) -> None:
    a = cli.ok("remember", "alpha beta gamma delta epsilon zeta eta theta", "--no-diff")
    b = cli.ok("remember", "alpha beta gamma delta epsilon zeta eta theta iota", "--no-diff")
    cos = b["semantic_candidates"][0]["cosine"]
    assert cos >= 0.80
    assert b["semantic_candidates"][0] == {
        "id": a["id"], "content": "alpha beta gamma delta epsilon zeta eta theta", "category": "general",
        "cosine": cos, "auto_linked": True,
    }
    assert b["edges_created"]["semantic"] == 2  # bidirectional


def test_index_tracks_writes_and_matches_rebuild(endpoint: str, data_dir: Path) -> None:
    texts: dict[str, str] = {}
    with Engine(settings(data_dir, endpoint)) as engine:
        for text in TEXTS:
            texts[engine.remember(text, no_diff=True)["id"]] = text
        query = HashEmbedder(DIM).embed("Rust performance search")
        got = scores_of(engine, query)
        assert got.keys() == texts.keys()
        for insight_id, cos in expected_cosines(texts, query).items():
            assert got[insight_id] == pytest.approx(cos, abs=1e-12)
        gone = next(iter(texts))
        engine.forget(gone)
        del texts[gone]
        after = scores_of(engine, query)
        assert gone not in after and after.keys() == texts.keys()
        hits = engine.vector_search(query, 3)
        assert gone not in {h[0] for h in hits}
        assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)
    assert fresh_scores(data_dir, endpoint, query) == pytest.approx(after, abs=1e-12)


def test_other_process_writes_are_caught_up(endpoint: str, data_dir: Path) -> None:
    query = HashEmbedder(DIM).embed("Qdrant Rust")
    with Engine(settings(data_dir, endpoint)) as a:
        a.remember(TEXTS[0])
        assert len(scores_of(a, query)) == 1
        with Engine(settings(data_dir, endpoint)) as b:  # another writer, its own index handle
            new_id = b.remember(TEXTS[1])["id"]
            old_id = next(iter(scores_of(b, query)))
        _ = a.store.conn  # a still holds an index synced before b's write
        a.after_write()  # a's next write hook (or open) sees the new fingerprint
        got = scores_of(a, query)
        assert new_id in got and old_id in got
        with Engine(settings(data_dir, endpoint)) as b:
            b.forget(new_id)
        a.after_write()
        assert new_id not in scores_of(a, query)
        assert new_id not in {h[0] for h in a.vector_search(query, 5)}


def test_search_rechecks_hits_against_the_database(endpoint: str, data_dir: Path) -> None:
    """A hit forgotten by another process after this index was synced is never returned."""
    query = HashEmbedder(DIM).embed(TEXTS[0])
    with Engine(settings(data_dir, endpoint)) as a:
        ids = [a.remember(t, no_diff=True)["id"] for t in TEXTS[:3]]
        best = a.vector_search(query, 1)[0][0]
        assert best == ids[0]
        with Engine(settings(data_dir, endpoint)) as b:
            b.forget(ids[0])
        # no after_write in ``a``: its index still marks ids[0] active
        hits = a.vector_search(query, 2)
        assert ids[0] not in {h[0] for h in hits} and len(hits) == 2


def test_auto_prune_masks_pruned_rows(endpoint: str, data_dir: Path) -> None:
    with Engine(settings(data_dir, endpoint, max_insights=3)) as engine:
        pruned: list[str] = []
        for text in TEXTS:
            pruned += engine.remember(text, no_diff=True)["auto_pruned_ids"]
        assert pruned
        ids, _ = engine.vector_scores(HashEmbedder(DIM).embed("anything"))
        assert not set(pruned) & set(ids.tolist())
        assert len(ids) == 3


@pytest.mark.parametrize("damage", ["delete", "corrupt_header", "stale_header", "truncate_matrix"])
def test_damaged_or_missing_index_equals_rebuild(endpoint: str, data_dir: Path, damage: str) -> None:
    with Engine(settings(data_dir, endpoint)) as engine:
        for text in TEXTS:
            engine.remember(text, no_diff=True)
        engine.forget(engine.vector_search(HashEmbedder(DIM).embed(TEXTS[2]), 1)[0][0])
    query = HashEmbedder(DIM).embed("Rust storage search")
    store_dir = data_dir / "data" / "default"
    header = store_dir / "mnemon.db.index" / "vec.json"
    reference = fresh_scores(data_dir, endpoint, query)
    assert len(reference) == len(TEXTS) - 1
    if damage == "delete":
        for path in index_files(data_dir):
            path.unlink()
    elif damage == "corrupt_header":
        header.write_text("{not json")
    elif damage == "stale_header":
        raw = json.loads(header.read_text())
        raw.update(generation=0, active_count=1, max_rowid=1)  # claims an older state
        header.write_text(json.dumps(raw))
    else:
        os.truncate(store_dir / "mnemon.db.index" / "vec", 100)
    with Engine(settings(data_dir, endpoint)) as engine:
        assert scores_of(engine, query) == pytest.approx(reference, abs=1e-12)


def test_readonly_writes_no_index_file(endpoint: str, data_dir: Path) -> None:
    with Engine(settings(data_dir, endpoint)) as engine:
        for text in TEXTS[:3]:
            engine.remember(text, no_diff=True)
    for path in index_files(data_dir):
        path.unlink()
    db = data_dir / "data" / "default" / "mnemon.db"
    before = db.read_bytes()
    listing = sorted(p.name for p in db.parent.iterdir())
    query = HashEmbedder(DIM).embed(TEXTS[0])
    with Engine(settings(data_dir, endpoint, readonly=True)) as engine:
        got = scores_of(engine, query)
        assert len(got) == 3
        assert engine.vector_search(query, 1)[0][1] == pytest.approx(1.0)
    assert index_files(data_dir) == []
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir()) == listing


def test_readonly_uses_a_current_index_and_catches_up_in_memory(endpoint: str, data_dir: Path) -> None:
    with Engine(settings(data_dir, endpoint)) as engine:
        first = engine.remember(TEXTS[0], no_diff=True)["id"]
        engine.vector_scores(HashEmbedder(DIM).embed("x"))  # index written at this state
    # a write whose index update never happened (as after a crash): the header is now stale
    header = data_dir / "data" / "default" / "mnemon.db.index" / "vec.json"
    saved = header.read_bytes()
    with Engine(settings(data_dir, endpoint)) as engine:
        second = engine.remember(TEXTS[1], no_diff=True)["id"]
    header.write_bytes(saved)
    snapshot = {p.name: p.read_bytes() for p in index_files(data_dir)}
    with Engine(settings(data_dir, endpoint, readonly=True)) as engine:
        got = scores_of(engine, HashEmbedder(DIM).embed("Qdrant"))
    assert set(got) == {first, second}
    assert {p.name: p.read_bytes() for p in index_files(data_dir)} == snapshot


def test_go_float32_store(endpoint: str, data_dir: Path) -> None:
    """A Go store holds float32 blobs and records no model/dimension: read, search and append work."""
    with Engine(settings(data_dir, endpoint)) as engine:
        conn = engine.store.conn
        conn.execute("UPDATE mnemon_meta SET value = 'float32' WHERE key = 'embedding_format'")
    ids = {}
    with Engine(settings(data_dir, endpoint)) as engine:
        assert engine.store.embedding_format == "float32"
        for text in TEXTS[:3]:
            ids[engine.remember(text, no_diff=True)["id"]] = text
        raw = engine.store.conn.execute("SELECT embedding FROM insights LIMIT 1").fetchone()[0]
        assert len(raw) == DIM * 4
        engine.store.conn.execute("DELETE FROM mnemon_meta WHERE key IN ('embedding_model', 'embedding_dim')")
    with Engine(settings(data_dir, endpoint)) as engine:
        assert engine.vector_space() == (None, DIM)
        query = HashEmbedder(DIM).embed(TEXTS[1])
        got = scores_of(engine, query)
        for insight_id, cos in expected_cosines(ids, query).items():
            assert got[insight_id] == pytest.approx(cos, abs=1e-6)  # float32 rounding
        assert engine.remember(TEXTS[3], no_diff=True)["embedded"] is True


def test_ties_at_the_cut_are_broken_by_id(endpoint: str, data_dir: Path) -> None:
    with Engine(settings(data_dir, endpoint)) as engine:
        ids = sorted(engine.remember("identical twin text", no_diff=True)["id"] for _ in range(4))
        engine.remember("something else entirely", no_diff=True)
        hits = engine.vector_search(HashEmbedder(DIM).embed("identical twin text"), 2)
    assert [h[0] for h in hits] == ids[:2]
    assert hits[0][1] == pytest.approx(1.0)


def test_vector_cosines_for_diff_candidates(endpoint: str, data_dir: Path) -> None:
    with Engine(settings(data_dir, endpoint)) as engine:
        a = engine.remember(TEXTS[0], no_diff=True)["id"]
        b = engine.remember(TEXTS[2], no_diff=True)["id"]
        engine.forget(b)
        query = HashEmbedder(DIM).embed(TEXTS[1])
        got = engine.vector_cosines(query, [a, b, "missing"])
    assert set(got) == {a}
    assert got[a] == pytest.approx(expected_cosines({a: TEXTS[0]}, query)[a], abs=1e-12)


def test_index_grows_past_its_first_capacity(endpoint: str, data_dir: Path) -> None:
    many = vector_store.MIN_CAPACITY + 10
    with Engine(settings(data_dir, endpoint)) as engine:
        engine.remember("seed text for the index", no_diff=True)
        engine.vector_scores(HashEmbedder(DIM).embed("x"))
        conn = engine.store.conn
        matrix = Path(str(engine.vector_index().base))
        inode, first_row = matrix.stat().st_ino, np.array(engine.vector_index()._vectors[0])
        emb = HashEmbedder(DIM)
        with engine.store.transaction() as tx:  # bulk rows as an importer would write them
            for i in range(many):
                tx.execute(
                    "INSERT INTO insights (id, content, created_at, updated_at, embedding) VALUES (?, ?, ?, ?, ?)",
                    (f"bulk-{i:04d}", f"bulk text {i}", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
                     emb.embed(f"bulk text {i}").astype("<f8").tobytes()),
                )  # fmt: skip
        engine.after_write()
        index = engine.vector_index()
        assert index is not None and index.rows == many + 1 and index.header.capacity >= many + 1
        hits = engine.vector_search(emb.embed("bulk text 7"), 1)
        assert hits[0][0] == "bulk-0007"
        assert conn is engine.store.conn
        # grown in place (same file, longer), not copied into memory and rewritten
        assert matrix.stat().st_ino == inode
        assert matrix.stat().st_size == index.header.capacity * DIM * 8
        assert np.array_equal(np.asarray(index._vectors[0]), first_row)
        query = emb.embed("bulk text 7")
        grown = scores_of(engine, query)
    # a new engine maps the grown files as they are (no rebuild), and scores as a rebuild does
    with Engine(settings(data_dir, endpoint)) as engine:
        assert scores_of(engine, query) == grown
    assert matrix.stat().st_ino == inode
    assert fresh_scores(data_dir, endpoint, query) == pytest.approx(grown, abs=1e-12)


def test_aligned_scores_equal_the_by_id_mapping_in_any_row_order(endpoint: str, data_dir: Path) -> None:
    """``vector_scores_aligned`` (recall's similarity) == ``vector_scores`` looked up by id."""
    with Engine(settings(data_dir, endpoint)) as engine:
        ids = [engine.remember(text, no_diff=True)["id"] for text in TEXTS]
        engine.forget(ids[2])
        engine.embed_one(ids[4])  # a re-embedded insight: new vector row, old row inactive
        query = HashEmbedder(DIM).embed("Rust performance search")
        by_id = scores_of(engine, query)
        hot = engine.hot_index()
        row_ids = hot.id_blob[: hot.n]
        rng = np.random.default_rng(7)
        extra = np.array([b"not-an-insight"], dtype=row_ids.dtype)
        for order in (np.arange(len(row_ids)), np.arange(len(row_ids))[::-1], rng.permutation(len(row_ids))):
            shuffled = np.concatenate([row_ids[order], extra])
            for rows_of in (None, hot.rows_of if order[0] == 0 else None):
                got = engine.vector_scores_aligned(query, shuffled, rows_of)
                want = [by_id.get(i.decode(), 0.0) for i in shuffled.tolist()]
                assert got.tolist() == want
        assert engine.vector_scores_aligned(query[:-1], row_ids).tolist() == [0.0] * len(row_ids)
