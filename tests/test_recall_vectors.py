"""Recall with embeddings (§4.10, Decisions 1 and 2): vector anchors and the similarity signal only
when the store holds vectors AND the embedding server answers; the query is embedded once."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from mnemon.records import RERANK_WEIGHTS_EMBEDDED, RERANK_WEIGHTS_TOKENS, SESSION_PRIOR_WEIGHT
from embed_server import EmbedServer

from mnemon.embed.fake import HashEmbedder

DIM = 64


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=DIM) as srv:
        yield srv


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_embedded_recall_uses_the_embedding_weights(cli, server: EmbedServer, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    a = cli.ok("remember", "Vector search latency budget is tight", "--source", "a")
    assert a["embedded"] is True
    cli.ok("remember", "Completely different gardening topic", "--source", "b")
    server.clear()
    out = cli.ok("recall", "vector search latency", "--verbose")
    assert len(server.embed_requests) == 1  # the query is embedded once
    top = out["results"][0]
    assert top["insight"]["id"] == a["id"]
    emb = HashEmbedder(dim=DIM)
    expected = cosine(emb.embed("vector search latency"), emb.embed("Vector search latency budget is tight"))
    s = top["signals"]
    assert math.isclose(s["similarity"], max(0.0, expected), rel_tol=1e-9)
    # Decision 1 with embeddings; plus any backbone lift (none here: different sources) and
    # proximity edges only feed the graph signal.
    w_kw, w_ent, w_sim, w_graph = RERANK_WEIGHTS_EMBEDDED
    assert top["score"] >= w_kw * s["keyword"] + w_ent * s["entity"] + w_sim * s["similarity"] + w_graph * s["graph"] - 1e-12
    assert top["via"] == "hybrid"  # keyword and vector anchor


def test_unreachable_server_falls_back_to_the_token_table(cli, server: EmbedServer, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    a = cli.ok("remember", "Token fallback keeps working", "--source", "a")["id"]
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")
    out = cli.ok("recall", "token fallback", "--verbose")
    (top,) = out["results"]
    assert top["insight"]["id"] == a and top["signals"]["similarity"] == 0
    s = top["signals"]
    w_kw, w_ent, _, w_graph = RERANK_WEIGHTS_TOKENS
    own = w_kw * s["keyword"] + w_ent * s["entity"]  # the token table's, no similarity: the lone hit's session prior too
    assert math.isclose(top["score"], own + w_graph * s["graph"] + SESSION_PRIOR_WEIGHT * own, abs_tol=5e-4)


def test_store_without_vectors_never_contacts_the_server(cli, server: EmbedServer, monkeypatch) -> None:
    cli.ok("remember", "Stored while the server was away")
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.clear()
    out = cli.ok("recall", "server away", "--verbose")
    assert out["results"] and out["results"][0]["signals"]["similarity"] == 0
    assert server.requests == []


def test_a_healthy_server_gets_exactly_one_request_per_recall_and_remember(
    cli, server: EmbedServer, monkeypatch
) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.clear()
    assert cli.ok("remember", "Vector search latency budget is tight")["embedded"] is True
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/api/embed")]  # no separate probe
    server.clear()
    cli.ok("recall", "vector search latency")
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/api/embed")]
    server.clear()
    assert cli.ok("embed", "--status")["embedding_available"] is True  # --status still probes for real
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/api/tags")]


def test_a_server_that_cannot_embed_leaves_recall_embedding_free(cli, server: EmbedServer, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    a = cli.ok("remember", "Vector search latency budget is tight")["id"]
    for mode in ("not_found", "error500", "nan", "unavailable"):
        server.mode = mode
        out = cli.ok("recall", "vector search latency", "--verbose")
        assert out["results"][0]["insight"]["id"] == a
        assert all(r["signals"]["similarity"] == 0 for r in out["results"])
        assert cli.ok("remember", f"another note while {mode}", "--no-diff")["embedded"] is False
