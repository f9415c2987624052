"""Embedding server faults (local test server): writes still succeed, nothing bad is stored, time-outs hold.

For every fault mode of ``tests/embed_server.py`` (wrong dimension, NaN, null, null values,
empty, empty vector, all zeros, wrong count, ragged, malformed JSON, 404 model, 500, 503, a stall
past the 2 s probe, a trickled body) and for connection refused: ``remember`` exits 0 with
``embedded: false`` (a correct but trickled answer may embed) within the time-outs; ``recall``
and ``search`` still answer; ``embed --all`` fails cleanly or embeds nothing bad; and afterwards
every stored embedding is finite and of the store's one dimension (doctor's embeddings check).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import apsw
import pytest
from embed_server import EmbedServer

from mnemon.store import check

DIM = 16
PROBE_LIMIT_S = 2.0 + 1.5  # the contract's 2 s availability probe, plus slack for a noisy machine
FAULTS = [
    "wrong_dim", "nan", "null", "null_values", "empty", "empty_vector", "zeros", "wrong_count", "ragged",
    "malformed", "not_found", "error500", "unavailable", "stall", "trickle",
]


def _embeddings_ok(db: Path) -> list[int]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert check.bad_embeddings(conn, "float64") == []
        return [len(r[0]) for r in conn.execute("SELECT embedding FROM insights WHERE embedding IS NOT NULL")]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", FAULTS)
def test_remember_survives_embedding_fault(mode: str, cli, data_dir: Path, monkeypatch) -> None:
    with EmbedServer(dim=DIM, stall_seconds=3.0) as server:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        first = cli.ok("remember", "a healthy first memory about vectors")
        assert first["embedded"] is True
        server.mode = mode
        began = time.monotonic()
        res = cli("remember", "the second memory about vectors and faults")
        elapsed = time.monotonic() - began
        assert res.code == 0, res.err
        out = res.json()
        if mode == "trickle":
            assert elapsed < 3.0 + PROBE_LIMIT_S  # correct answer, slowly: may embed
        else:
            assert out["embedded"] is False, mode
            assert elapsed < PROBE_LIMIT_S, (mode, elapsed)
        for args in (("recall", "memory about vectors"), ("search", "vectors")):
            began = time.monotonic()
            found = cli(*args)
            assert found.code == 0, (args, found.err)
            assert time.monotonic() - began < PROBE_LIMIT_S + (3.0 if mode == "trickle" else 0.0)
        res = cli("embed", "--all")
        assert res.code in (0, 1)
        if res.code == 1:
            assert len(res.err.splitlines()) == 1 and res.err.startswith("Error: ")
    sizes = _embeddings_ok(data_dir / "data" / "default" / "mnemon.db")
    # One dimension per store. `embed --all` against a server that now answers in another
    # dimension re-embeds every row consistently (a model change), so only wrong_dim may differ.
    assert sizes and len(set(sizes)) == 1, sizes
    if mode != "wrong_dim":
        assert set(sizes) == {DIM * 8}, sizes
    doctor = cli("doctor")
    assert doctor.code == 0, doctor.out


def test_connection_refused_is_fast_and_not_an_error(cli, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")
    began = time.monotonic()
    out = cli.ok("remember", "no server at all")
    assert out["embedded"] is False and time.monotonic() - began < PROBE_LIMIT_S
    res = cli("embed", "--all")
    assert res.code in (0, 1) and (res.code == 0 or res.err.count("\n") == 1)
    status = json.loads(cli("embed", "--status").out)
    assert status["embedded"] == 0
