"""A memory whose vector is composed from its labelled sentences reads its model's composed scale in its
comparisons with other memories (records.SimilarityScale.for_vector): it auto-links from
records.COMPOSED_AUTO_LINK in remember and in import alike, and its diff advice and candidates read the
composed thresholds; every other memory reads the model's own (fifteenth session, bench/quality-ablations.md)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import apsw
import numpy as np
import pytest

from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine, semantic
from mnemon.engine import vectors as vector_engine
from mnemon.records import COMPOSED_AUTO_LINK, SEMANTIC_AUTO_COSINE, SEMANTIC_AUTO_TOP, similarity_scale

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=timezone.utc)
# Eight shared words of nine: a cosine near 8/9 (0.89), between the contract's 0.80 and the composed 0.95.
LABELLED = ("Note: alpha beta gamma delta. Epsilon zeta eta theta.", "Note: alpha beta gamma delta. Epsilon zeta eta iota.")
PLAIN = ("Note alpha beta gamma delta, epsilon zeta eta theta.", "Note alpha beta gamma delta, epsilon zeta eta iota.")


class ComposingEmbedder(HashEmbedder):
    """HashEmbedder named as the local MiniLM, composing as a local model does (passages_version):
    its cosines are the bag-of-words ones, so the threshold alone decides."""

    passages_version = 1

    def __init__(self) -> None:
        super().__init__(dim=2048, model="all-MiniLM-L6-v2")


def _cos(a: str, b: str) -> float:
    e = ComposingEmbedder()
    va, vb = e.embed(a), e.embed(b)
    return float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb))


def test_the_pairs_sit_between_the_two_thresholds() -> None:
    for a, b in (LABELLED, PLAIN):
        assert SEMANTIC_AUTO_COSINE <= _cos(a, b) < COMPOSED_AUTO_LINK


@pytest.mark.parametrize(
    ("model", "plain", "composed"),
    [("all-MiniLM-L6-v2", 0.80, COMPOSED_AUTO_LINK), ("multilingual-e5-small", 0.92, COMPOSED_AUTO_LINK),
     ("nomic-embed-text", 0.80, 0.80)],
)
def test_each_model_has_its_composed_threshold(model: str, plain: float, composed: float) -> None:
    scale = similarity_scale(model)
    assert scale.for_vector(False).auto_link == plain
    assert scale.for_vector(True).auto_link == composed
    assert scale.for_vector(False) is scale


@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "multilingual-e5-small"])
def test_a_composed_scale_reads_memory_pairs_higher_and_queries_as_before(model: str) -> None:
    scale = similarity_scale(model)
    composed = scale.for_vector(True)
    for name in ("auto_link", "candidate", "diff_override", "diff_extra", "diff_add_below", "diff_conflict_at",
                 "diff_duplicate_above"):  # fmt: skip
        assert getattr(scale, name) < getattr(composed, name) < 1.0, name
    # recall's side (the similarity signal, Han text) is the model's own
    for name in ("signal_floor", "signal_below_best", "long_below_best", "session_prior", "reads_han"):
        assert getattr(composed, name) == getattr(scale, name), name
    assert composed.composed is None


def test_only_a_composing_embedder_composes_a_labelled_memory() -> None:
    assert vector_engine.composes(ComposingEmbedder(), LABELLED[0])
    assert not vector_engine.composes(ComposingEmbedder(), PLAIN[0])  # no label
    assert not vector_engine.composes(ComposingEmbedder(), "Note: one sentence only")
    assert not vector_engine.composes(HashEmbedder(), LABELLED[0])  # a server protocol embeds as written
    assert not vector_engine.composes(None, LABELLED[0])


def _engine(data_dir: Path) -> Engine:
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    return Engine(settings, clock=lambda: NOW, embedder=ComposingEmbedder())


@pytest.mark.parametrize(("texts", "linked"), [(LABELLED, False), (PLAIN, True)])
def test_remember_links_a_composed_memory_from_the_composed_threshold(tmp_path: Path, texts: tuple[str, str], linked: bool) -> None:
    with _engine(tmp_path) as engine:
        engine.remember(texts[0])
        out = engine.remember(texts[1])
    assert out["embedded"] is True
    assert out["edges_created"]["semantic"] == (2 if linked else 0)  # an edge is stored both ways
    (candidate,) = out["semantic_candidates"]
    assert candidate["auto_linked"] is linked
    assert SEMANTIC_AUTO_COSINE <= candidate["cosine"] < COMPOSED_AUTO_LINK


def test_remember_still_links_a_composed_memory_above_the_composed_threshold(tmp_path: Path) -> None:
    with _engine(tmp_path) as engine:
        engine.remember("Note: alpha beta gamma delta. Epsilon zeta eta theta.")
        out = engine.remember("Note: epsilon zeta eta theta. Alpha beta gamma delta.")  # the same words
    assert out["edges_created"]["semantic"] == 2
    assert out["semantic_candidates"][0]["auto_linked"] is True


def _semantic_edges(data_dir: Path) -> int:
    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        return int(conn.execute("SELECT COUNT(*) FROM edges WHERE edge_type = 'semantic'").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize(("texts", "edges"), [(LABELLED, 0), (PLAIN, 2)])
def test_import_links_as_remember_does(tmp_path: Path, texts: tuple[str, str], edges: int) -> None:
    items = [{"content": t, "created_at": f"2026-12-01T00:00:0{k}Z"} for k, t in enumerate(texts)]
    with _engine(tmp_path) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
    assert _semantic_edges(tmp_path) == edges  # an edge is stored both ways


def test_chunk_neighbours_apply_each_items_threshold_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random items with per-item thresholds across several query and row blocks: the blocked search
    finds exactly what a brute-force pass over every earlier item finds."""
    monkeypatch.setattr(semantic, "QUERY_BLOCK", 64)
    monkeypatch.setattr(semantic, "ROW_BLOCK", 32)
    rng = np.random.default_rng(15)
    base = rng.standard_normal((40, 32))
    vectors = [base[k % 40] + rng.uniform(0.05, 0.6) * rng.standard_normal(32) for k in range(300)]
    links = [0.95 if k % 3 else 0.80 for k in range(300)]
    finder = semantic.ChunkNeighbours(None, vectors, 32, "float64", similarity_scale("all-MiniLM-L6-v2"), links)
    units = np.array([v / np.linalg.norm(v) for v in vectors])
    ids = [f"id{299 - k:04d}" for k in range(300)]
    linked_at = {0.80: 0, 0.95: 0}
    for k in range(300):
        found = finder.matches(k)
        finder.stored(k, ids[k])
        oracle = sorted(((ids[j], float(units[k] @ units[j])) for j in range(k) if units[k] @ units[j] >= links[k]),
                        key=lambda hit: (-hit[1], hit[0]))[:SEMANTIC_AUTO_TOP]  # fmt: skip
        assert [i for i, _ in found] == [i for i, _ in oracle]
        assert all(abs(a - b) < 1e-9 for (_, a), (_, b) in zip(found, oracle))
        linked_at[links[k]] += bool(found)
    assert linked_at[0.80] > 0 and linked_at[0.95] > 0  # both thresholds were exercised
