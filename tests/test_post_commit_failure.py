"""A failure after a write's commit (an index beside the database cannot catch up: a full disk) is no error.

The memory is stored by then; reporting the command as failed would have an agent store it again. The command
answers as usual, says on stderr that an index lags, and the next user of that index catches it up or rebuilds it
from the database (derived files are rebuildable).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from conftest import Cli
from embed_server import EmbedServer

from mnemon.config import Settings
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine
from mnemon.store import hotindex
from mnemon.store import vectors as vector_store

DIM = 32


def _disk_full(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.in_process
def test_a_hot_index_that_cannot_catch_up_after_the_commit_leaves_remember_a_success(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = cli.ok("remember", "rust services keep their latency budget")
    assert cli.ok("recall", "latency budget")  # the index files are current on disk
    with monkeypatch.context() as m:
        for writer in ("write_delta", "write_index", "write_stamp"):
            m.setattr(hotindex, writer, _disk_full)
        res = cli("remember", "postgres backups run nightly at two")
    assert res.code == 0, res.err
    stored = res.json()
    assert stored["action"] == "added" and stored["id"] != first["id"]  # type: ignore[index]
    assert "the write is stored, but an index beside the database could not catch up" in res.err
    assert "OSError" in res.err and "Traceback" not in res.err
    # stored once, and found: the next command catches the index up from the database
    assert cli.ok("status")["total_insights"] == 2  # type: ignore[index]
    found = cli.ok("recall", "nightly postgres backups")
    assert [hit["id"] for hit in found["results"]][:1] == [stored["id"]]  # type: ignore[index]
    assert cli("doctor").code == 0


@pytest.mark.in_process
def test_a_vector_index_that_cannot_grow_after_the_commit_leaves_remember_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "v"
    with EmbedServer(dim=DIM) as server:
        settings = Settings(data_dir=data_dir, store="default", embed_endpoint=server.url)
        with Engine(settings) as engine:
            first = engine.remember("rust qdrant search", no_diff=True)["id"]
            engine.vector_scores(HashEmbedder(DIM).embed("x"))  # this process now holds the vector index
            capsys.readouterr()
            with monkeypatch.context() as m:
                m.setattr(vector_store.VectorIndex, "sync", _disk_full)
                second = engine.remember("python memory agent", no_diff=True)
            assert second["action"] == "added"
            assert "could not catch up (OSError" in capsys.readouterr().err
            # the same engine goes on: its next use opens the index again and catches it up
            hits = engine.vector_search(HashEmbedder(DIM).embed("python memory agent"), 5)
            assert [(i, round(c, 12)) for i, c in hits][0] == (second["id"], 1.0)
        with Engine(settings) as engine:
            index = engine.vectors.vector_index()
            assert index is not None and index.mismatches(engine.store.conn) == []
            rows = [r[0] for r in engine.store.conn.execute("SELECT id FROM insights ORDER BY created_at")]
    assert rows == [first, second["id"]]


def test_an_interrupt_after_the_commit_still_ends_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C is the user's: it is not turned into a notice (the memory is stored all the same)."""
    settings = Settings(data_dir=tmp_path / "i", store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings) as engine:
        engine.remember("the first memory", no_diff=True)
        engine.hot_index()

        def interrupted(*_args: object, **_kwargs: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(hotindex, "write_delta", interrupted)
        monkeypatch.setattr(hotindex, "write_index", interrupted)
        with pytest.raises(KeyboardInterrupt):
            engine.remember("the second memory", no_diff=True)
    monkeypatch.undo()
    with Engine(settings) as engine:
        contents = sorted(r[0] for r in engine.store.conn.execute("SELECT content FROM insights"))
        found = {hit.insight.content for hit in engine.recall("the second memory").hits}
    assert contents == ["the first memory", "the second memory"]
    assert "the second memory" in found  # the index the interrupt left behind caught up
