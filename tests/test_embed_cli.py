"""``embed`` and embedding-aware ``remember`` through the CLI, against real local servers.

Both protocols (Ollama at ``server.url``, OpenAI-compatible at ``server.openai_url``) via
``MNEMON_EMBED_ENDPOINT``; outages and every bad-response mode degrade to ``embedded: false``
(never a traceback); ``embed`` messages, oplog rows, the backfill, dimension/model mismatch and
re-embedding; a whole-process run checks plain JSON (no progress bar) when stderr is a pipe.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import run_process
from embed_server import EmbedServer

from mnemon.embed.fake import HashEmbedder

DIM = 16


@pytest.fixture(scope="module")
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=DIM, stall_seconds=3.0) as srv:
        yield srv


@pytest.fixture(params=["ollama", "openai"])
def endpoint(request: pytest.FixtureRequest, server: EmbedServer, monkeypatch: pytest.MonkeyPatch) -> str:
    server.mode = "ok"
    url = server.url if request.param == "ollama" else server.openai_url
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", url)
    return str(request.param)


def oplog_ops(cli) -> list[str]:
    res = cli("log", "--limit", "50")
    return [line.split()[1] for line in res.out.splitlines()[2:]]


def test_status_without_provider(cli) -> None:
    cli.ok("remember", "a fact without any server")
    status = cli.ok("embed", "--status")
    assert list(status) == [
        "total_insights", "embedded", "coverage", "ollama_available", "embedding_available", "protocol", "model",
    ]  # fmt: skip
    assert status == {
        "total_insights": 1, "embedded": 0, "coverage": "0%", "ollama_available": False,
        "embedding_available": False, "protocol": "ollama", "model": "nomic-embed-text",
    }  # fmt: skip


def test_unavailable_provider_messages(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("remember", "something to embed")
    res = cli("embed", "--all")
    assert (res.code, res.out) == (1, "")
    assert res.err == "Error: Ollama embedding provider not available at http://127.0.0.1:9\n"
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9/v1")
    res = cli("embed", "some-id")
    assert res.err == "Error: OpenAI-compatible embedding provider not available at http://127.0.0.1:9/v1\n"


def test_no_flag_message(cli) -> None:
    res = cli("embed")
    assert res.code == 1
    assert res.err == "Error: specify --all to backfill, --status to check coverage, or provide an insight ID\n"


def test_remember_embeds_with_both_protocols(cli, endpoint: str, server: EmbedServer) -> None:
    server.clear()
    out = cli.ok("remember", "Chose Qdrant because Rust performance is critical")
    assert out["embedded"] is True
    paths = {r.path for r in server.embed_requests}
    assert paths == ({"/api/embed"} if endpoint == "ollama" else {"/v1/embeddings"})
    status = cli.ok("embed", "--status")
    assert status["embedded"] == 1 and status["coverage"] == "100%"
    assert status["protocol"] == endpoint and status["embedding_available"] is True


@pytest.mark.parametrize(
    "mode",
    ["wrong_dim", "nan", "null", "null_values", "empty", "empty_vector", "zeros", "wrong_count", "ragged",
     "malformed", "not_found", "error500", "unavailable"],
)  # fmt: skip
def test_bad_responses_degrade_to_unembedded(cli, server: EmbedServer, monkeypatch, mode: str) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.mode = "ok"
    cli.ok("remember", "first memory about Qdrant and Rust")
    server.mode = mode
    res = cli("remember", "second memory about Qdrant and Rust")
    assert res.code == 0, res.err
    assert "Traceback" not in res.err
    out = res.json()
    assert out["embedded"] is False
    assert out["semantic_candidates"] == [] or all("cosine" in c for c in out["semantic_candidates"])
    server.mode = "ok"


def test_server_down_after_probe_is_not_fatal(cli, monkeypatch) -> None:
    with EmbedServer(dim=DIM) as srv:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", srv.url)
        cli.ok("remember", "embedded while the server was up")
    out = cli.ok("remember", "written after the server went away")
    assert out["embedded"] is False


def test_embed_all_backfills_in_batches(cli, endpoint: str, server: EmbedServer, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")
    ids = [cli.ok("remember", f"backfill memory number {i} about topic {i % 3}", "--no-diff")["id"] for i in range(70)]
    cli.ok("forget", ids[0])
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url if endpoint == "ollama" else server.openai_url)
    server.clear()
    out = cli.ok("embed", "--all")
    assert out == {"status": "backfill_complete", "succeeded": 69, "failed": 0, "model": "nomic-embed-text"}
    assert len(server.embed_requests) >= 2  # 69 rows in batches of at most 64 (plus the sample)
    assert cli.ok("embed", "--all") == {"status": "complete", "message": "all insights already have embeddings"}
    assert "embed:backfill" in oplog_ops(cli)
    status = cli.ok("embed", "--status")
    assert (status["total_insights"], status["embedded"], status["coverage"]) == (69, 69, "100%")
    # the index now serves the backfilled vectors (and never the forgotten one)
    res = cli.ok("remember", "backfill memory number 5 about topic 2", "--no-diff")
    assert res["semantic_candidates"][0]["id"] == ids[5]
    assert res["semantic_candidates"][0]["cosine"] == pytest.approx(1.0)
    assert ids[0] not in {c["id"] for c in res["semantic_candidates"]}


def test_embed_all_passes_over_a_memory_the_provider_refuses(cli, endpoint: str, server: EmbedServer, monkeypatch) -> None:
    """One memory the provider cannot embed (longer than its model's context: HTTP 400) and first in line (the
    most important): the backfill probed with it alone and failed as a whole, run after run, never embedding
    the others. It is counted as failed instead, and a rerun reports it again without an error."""
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")
    cli.ok("remember", "a short memory about Qdrant")
    cli.ok("remember", "too long for the model " * 60, "--imp", "5")
    cli.ok("remember", "another short memory about Rust")
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url if endpoint == "ollama" else server.openai_url)
    server.mode = "too_long"
    out = cli.ok("embed", "--all")
    assert out == {"status": "backfill_complete", "succeeded": 2, "failed": 1, "model": "nomic-embed-text"}
    assert cli.ok("embed", "--status")["embedded"] == 2
    again = cli.ok("embed", "--all")  # only the refused memory is left: probed with one embedded before
    assert again == {"status": "backfill_complete", "succeeded": 0, "failed": 1, "model": "nomic-embed-text"}
    server.mode = "nan"  # a provider that embeds nothing is still one clear error
    res = cli("embed", "--all")
    assert (res.code, res.out) == (1, "")
    assert res.err.startswith("Error: embedding server at ") and "non-finite embedding" in res.err
    server.mode = "ok"


def test_install_model_is_refused_under_readonly(cli, data_dir: Path) -> None:
    """--install-model writes <data-dir>/models/ (and went to the hub for it) under --readonly too, where every
    other command that writes the data directory (store set, token create) is refused before it writes."""
    res = cli("--readonly", "embed", "--install-model", "all-MiniLM-L6-v2")
    assert (res.code, res.out) == (1, "")
    assert res.err == "Error: embed --install-model is unavailable with --readonly: database writes are disabled\n"
    assert not (data_dir / "models").exists()


def test_embed_one(cli, server: EmbedServer, monkeypatch) -> None:
    insight = cli.ok("remember", "single insight to embed later")["id"]
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.mode = "ok"
    out = cli.ok("embed", insight)
    assert out == {"status": "embedded", "id": insight, "dimension": DIM, "model": "nomic-embed-text"}
    assert "embed" in oplog_ops(cli)
    again = cli.ok("embed", insight)  # re-embedding replaces, never duplicates, the row
    assert again["status"] == "embedded"
    assert cli.ok("embed", "--status")["embedded"] == 1
    res = cli("embed", "no-such-id")
    assert (res.code, res.err) == (1, "Error: insight no-such-id not found\n")
    res = cli("embed", "a", "b")
    assert res.code == 1 and res.err.startswith("Error: ")
    res = cli("--readonly", "embed", insight)
    assert res.err == "Error: embed is unavailable with --readonly: database writes are disabled\n"


def test_dimension_mismatch_reported_then_reembedded(cli, server: EmbedServer, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.mode = "ok"
    a = cli.ok("remember", "Rust performance is critical for Qdrant")["id"]
    monkeypatch.setenv("MNEMON_EMBED_DIMENSIONS", "8")
    res = cli("remember", "Rust performance matters for Qdrant search")
    assert res.code == 0
    assert res.json()["embedded"] is False
    assert "16-dim" in res.err and "8-dim" in res.err and "embed --all" in res.err
    assert len(res.err.strip().splitlines()) == 1
    res = cli("embed", a)
    assert res.code == 1 and "embed --all" in res.err
    out = cli.ok("embed", "--all")
    assert out["status"] == "backfill_complete" and out["succeeded"] == 2
    status = cli.ok("embed", "--status")
    assert status["embedded"] == 2
    nxt = cli.ok("remember", "Rust performance is critical for Qdrant", "--no-diff")
    assert nxt["embedded"] is True
    assert nxt["semantic_candidates"][0]["id"] == a and nxt["semantic_candidates"][0]["cosine"] == pytest.approx(1.0)


def test_model_change_is_reported(cli, server: EmbedServer, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.mode = "ok"
    cli.ok("remember", "first vector fixes the model")
    res = cli("--embed-model", "other-model", "remember", "second text from another model")
    assert res.json()["embedded"] is False
    assert "nomic-embed-text" in res.err and "other-model" in res.err


def test_embed_all_whole_process_plain_json(tmp_path: Path) -> None:
    data = tmp_path / "d"
    env = {"MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"}
    for i in range(3):
        assert run_process(["remember", f"process memory {i}", "--no-diff"], data_dir=data, env=env).code == 0
    with EmbedServer(dim=DIM) as srv:
        res = run_process(["embed", "--all"], data_dir=data, env={"MNEMON_EMBED_ENDPOINT": srv.url})
    assert res.code == 0, res.err
    assert res.err == ""  # stderr is a pipe: no progress bar
    assert res.json() == {"status": "backfill_complete", "succeeded": 3, "failed": 0, "model": "nomic-embed-text"}


@pytest.mark.in_process  # patches this process
def test_progress_bar_only_on_a_terminal(cli, server: EmbedServer, monkeypatch, capsys) -> None:
    import sys

    cli.ok("remember", "progress one")
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
    server.mode = "ok"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    res = cli("embed", "--all")
    assert res.code == 0
    assert "embedding [" in res.err and "1/1" in res.err
    assert res.json()["succeeded"] == 1
    np.testing.assert_allclose(HashEmbedder(DIM).embed("progress one") @ HashEmbedder(DIM).embed("progress one"), 1.0)
