"""Import with embeddings: the blocked semantic-neighbour search gives exactly the edges of the
one-by-one import and of a brute-force oracle, on a draft full of real ties (issue 13)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import apsw
import numpy as np
import pytest

from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine, bulk, semantic
from mnemon.records import SEMANTIC_AUTO_COSINE, SEMANTIC_AUTO_TOP
from mnemon.store import blob

NOW = datetime(2026, 9, 2, 12, 0, 0, tzinfo=timezone.utc)
N = 1500
DIM = 64
WORDS = [f"w{k}" for k in range(40)]


def _texts(n: int, seed: int = 5) -> list[str]:
    """Groups of word bags: permutations (identical vectors, so exact ties), one-word variants
    (cosine about 0.88, linked) and two-word variants (about 0.75, not linked). All distinct."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        base = rng.sample(WORDS, 8)
        for _ in range(rng.randint(3, 9)):
            bag = list(base)
            change = rng.choice((0, 0, 1, 2))
            for pos in rng.sample(range(8), change):
                bag[pos] = rng.choice(WORDS)
            rng.shuffle(bag)
            text = " ".join(bag)
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out[:n]


@pytest.fixture(scope="module")
def draft_text() -> str:
    items = [
        {"content": t, "source": "user", "created_at": f"2026-05-01T00:{k // 60 % 60:02d}:{k % 60:02d}Z"}
        for k, t in enumerate(_texts(N))
    ]
    return json.dumps({"schema_version": "1", "insights": items})


class _SeededIds:
    """Version-4-shaped UUIDs from a seeded generator: both imports draw the same ids in the same
    order, so ties broken by id compare across imports (random ids would break them differently)."""

    def __init__(self) -> None:
        self.rng = random.Random(11)

    def __call__(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:]}"


def _import(data_dir: Path, text: str) -> dict[str, object]:
    bulk._new_id = _SeededIds()  # restored by the monkeypatch in each test (see _ids)
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW, embedder=HashEmbedder(dim=DIM)) as engine:
        return engine.import_draft(parse_draft(text))


def _db(data_dir: Path) -> apsw.Connection:
    return apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))


def _semantic_edges(data_dir: Path) -> Counter[tuple[object, ...]]:
    conn = _db(data_dir)
    try:
        return Counter(
            (s, t, w, m)
            for s, t, w, m in conn.execute(
                "SELECT source_id, target_id, weight, metadata FROM edges WHERE edge_type = 'semantic'"
            )
        )
    finally:
        conn.close()


def _oracle(data_dir: Path) -> tuple[set[tuple[str, str, float]], int]:
    """Brute force over the stored blobs in insertion order: every earlier vector, exact cosines
    (math.fsum of unit vectors), >= 0.80, best 3, ties by id. Also counts ties decided by id."""
    conn = _db(data_dir)
    try:
        rows = [
            (str(i), blob.decode(b, "float64"))
            for i, b in conn.execute("SELECT id, embedding FROM insights ORDER BY rowid")
        ]
    finally:
        conn.close()
    units = []
    for insight_id, vec in rows:
        norm = math.sqrt(math.fsum((vec * vec).tolist()))
        units.append((insight_id, vec / norm))
    expected: set[tuple[str, str, float]] = set()
    tie_cuts = 0
    for k, (new_id, unit) in enumerate(units):
        hits = []
        for other_id, other in units[:k]:
            cosine = math.fsum((unit * other).tolist())
            if cosine >= SEMANTIC_AUTO_COSINE:
                hits.append((-cosine, other_id))
        hits.sort()
        if len(hits) > SEMANTIC_AUTO_TOP and hits[SEMANTIC_AUTO_TOP][0] == hits[SEMANTIC_AUTO_TOP - 1][0]:
            tie_cuts += 1  # equal cosines straddle the top-3 cut: the id decides
        for neg, other_id in hits[:SEMANTIC_AUTO_TOP]:
            expected.add((new_id, other_id, -neg))
            expected.add((other_id, new_id, -neg))
    return expected, tie_cuts


@pytest.fixture(autouse=True)
def _ids(monkeypatch):
    monkeypatch.setattr(bulk, "_new_id", bulk._new_id)  # _import replaces it; put the real one back


def test_blocked_import_semantic_edges_equal_one_by_one_and_the_oracle(tmp_path, monkeypatch, draft_text):
    defaults = (semantic.QUERY_BLOCK, semantic.ROW_BLOCK)
    monkeypatch.setattr(semantic, "QUERY_BLOCK", 7)  # many block boundaries, inside chunks and across
    monkeypatch.setattr(semantic, "ROW_BLOCK", 13)
    blocked = _import(tmp_path / "blocked", draft_text)
    assert blocked["imported"] == N and blocked["errors"] == 0

    conn = _db(tmp_path / "blocked")
    try:
        got = {
            (str(s), str(t), float(w))
            for s, t, w in conn.execute("SELECT source_id, target_id, weight FROM edges WHERE edge_type = 'semantic'")
        }
    finally:
        conn.close()
    expected, tie_cuts = _oracle(tmp_path / "blocked")
    assert tie_cuts > 50, "the draft must exercise ties at the top-3 cut"
    assert len(expected) > 2 * N
    assert got == expected

    monkeypatch.setattr(semantic, "QUERY_BLOCK", defaults[0])
    monkeypatch.setattr(semantic, "ROW_BLOCK", defaults[1])
    default_blocks = _import(tmp_path / "default", draft_text)
    assert default_blocks["imported"] == N
    monkeypatch.setattr(bulk, "IMPORT_BATCH", 1)  # one item per chunk: only the stored rows
    monkeypatch.setattr(bulk, "IMPORT_BATCH_GROWTH", 0)
    single = _import(tmp_path / "single", draft_text)
    assert single["imported"] == N
    want = _semantic_edges(tmp_path / "single")
    assert _semantic_edges(tmp_path / "blocked") == want
    assert _semantic_edges(tmp_path / "default") == want


def test_block_products_never_hold_more_than_a_block(monkeypatch):
    """The candidate search allocates score blocks of QUERY_BLOCK x ROW_BLOCK, not chunk x store."""
    shapes: list[tuple[int, ...]] = []
    import kernels

    original = kernels.cosine_block

    def spy(vectors, norms, units):
        out = original(vectors, norms, units)
        shapes.append(out.shape)
        return out

    monkeypatch.setattr(kernels, "cosine_block", spy)
    monkeypatch.setattr(semantic, "QUERY_BLOCK", 256)  # four query blocks over the 1000 items
    monkeypatch.setattr(semantic, "ROW_BLOCK", 128)
    rng = np.random.default_rng(3)
    vectors = [rng.standard_normal(DIM) for _ in range(1000)]
    for copy in (10, 600, 700, 701):  # exact copies across query blocks: ties decided by id
        vectors[copy] = vectors[3] * (1 + copy)  # scaled: the same direction, cosine exactly 1
    finder = semantic.ChunkNeighbours(None, vectors, DIM, "float64")
    found = {}
    for k in range(1000):
        found[k] = finder.matches(k)
        finder.stored(k, f"id{999 - k:04d}")  # ids descend, so id order is not insertion order
    assert shapes
    assert max(r * q for r, q in shapes) <= semantic.QUERY_BLOCK * semantic.ROW_BLOCK
    assert found[10] == [("id0996", 1.0)]
    assert found[701] == [("id0299", 1.0), ("id0399", 1.0), ("id0989", 1.0)]
