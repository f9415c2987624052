"""Crash safety of the vector index: SIGKILL ``remember`` and ``embed --all`` at random moments.

Each round starts ``python -m mnemon`` against a real local embedding server, kills it with
SIGKILL after a seeded random delay (anywhere from start-up to after the commit), and moves on.
At the end the database must pass ``PRAGMA integrity_check``, every completed ``remember`` must
still be there, and the index (caught up from whatever the kills left behind) must give exactly
the scores and top-k of an index rebuilt from scratch. ``MNEMON_CRASH_ROUNDS`` raises the count.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from conftest import REPO
from embed_server import EmbedServer

from mnemon.config import Settings
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine
from mnemon.store import vectors as vector_store

DIM = 32
ROUNDS = int(os.environ.get("MNEMON_CRASH_ROUNDS", "30"))
SEED = 20261129
WORDS = "rust qdrant search vector memory agent graph latency index python store recall".split()


def _spawn(args: list[str], data_dir: Path, endpoint: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, MNEMON_EMBED_ENDPOINT=endpoint, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip


def _add_unembedded(data_dir: Path, rng: random.Random, count: int) -> None:
    """Insights written while no server is reachable: work for the next ``embed --all``."""
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings) as engine:
        for _ in range(count):
            engine.remember(" ".join(rng.choices(WORDS, k=6)) + f" {rng.random():.6f}", no_diff=True)


def test_sigkill_during_remember_and_embed_all(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    data_dir = tmp_path / "crash"
    completed: list[str] = []
    killed = 0
    with EmbedServer(dim=DIM, delay=0.01) as server:
        _add_unembedded(data_dir, rng, 40)
        # Calibrate: kill points are fractions of a whole run on this machine, so they fall from
        # start-up through the commit to the index update however fast or loaded the machine is.
        started = time.monotonic()
        calibration = _spawn(["remember", "calibration run about rust search", "--no-diff"], data_dir, server.url)
        out, _ = calibration.communicate(timeout=60)
        completed.append(json.loads(out)["id"])
        whole_run = time.monotonic() - started
        deadline = time.monotonic() + 40
        for round_no in range(ROUNDS):
            if time.monotonic() > deadline:
                break
            if round_no % 3 == 2:
                _add_unembedded(data_dir, rng, 30)
                args = ["embed", "--all"]
            else:
                args = ["remember", " ".join(rng.choices(WORDS, k=7)) + f" r{round_no}", "--no-diff"]
            proc = _spawn(args, data_dir, server.url)
            try:
                proc.wait(timeout=rng.uniform(0.2, 1.05) * whole_run)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                killed += 1
            out, err = proc.communicate(timeout=30)
            assert b"Traceback" not in err, err.decode()
            if proc.returncode == 0 and args[0] == "remember":
                completed.append(json.loads(out)["id"])
    print(f"crash rounds: {round_no + 1}, killed: {killed}, completed remembers: {len(completed)}")
    assert killed >= ROUNDS // 4, f"only {killed} of {ROUNDS} runs were killed: delays too long for this machine"

    db = data_dir / "data" / "default" / "mnemon.db"
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    present = {r[0] for r in conn.execute("SELECT id FROM insights WHERE deleted_at IS NULL")}
    embedded = {
        r[0] for r in conn.execute("SELECT id FROM insights WHERE deleted_at IS NULL AND embedding IS NOT NULL")
    }
    conn.close()
    assert set(completed) <= present

    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    queries = [HashEmbedder(DIM).embed(" ".join(rng.choices(WORDS, k=3))) for _ in range(5)]
    with Engine(settings) as engine:  # whatever the kills left on disk, caught up
        ids, cos = engine.vector_scores(queries[0])
        survived = dict(zip(ids.tolist(), cos.tolist()))
        tops = [engine.vector_search(q, 10) for q in queries]
    assert set(survived) == embedded
    vector_store.remove_files(db)
    with Engine(settings) as engine:  # a full rebuild from the blobs
        ids, cos = engine.vector_scores(queries[0])
        rebuilt = dict(zip(ids.tolist(), cos.tolist()))
        assert [engine.vector_search(q, 10) for q in queries] == tops
    assert survived == rebuilt


@pytest.mark.parametrize("cut", ["before_header", "after_data"])
def test_index_update_lost_after_commit(tmp_path: Path, cut: str) -> None:
    """The database committed but the index write never happened (or half happened)."""
    data_dir = tmp_path / "d"
    with EmbedServer(dim=DIM) as server:
        settings = Settings(data_dir=data_dir, store="default", embed_endpoint=server.url)
        with Engine(settings) as engine:
            engine.remember("rust qdrant search", no_diff=True)
            engine.vector_scores(HashEmbedder(DIM).embed("x"))
        header = data_dir / "data" / "default" / "mnemon.db.index" / "vec.json"
        saved = header.read_bytes()
        with Engine(settings) as engine:
            engine.remember("python memory agent", no_diff=True)
            engine.forget(engine.vector_search(HashEmbedder(DIM).embed("rust qdrant search"), 1)[0][0])
        if cut == "before_header":
            header.write_bytes(saved)  # data rows appended, header never replaced
        else:
            matrix = data_dir / "data" / "default" / "mnemon.db.index" / "vec"
            with open(matrix, "r+b") as fh:  # garbage past the committed rows
                fh.seek(DIM * 8 * 3)
                fh.write(os.urandom(DIM * 8))
            header.write_bytes(saved)
        with Engine(settings) as engine:
            got = engine.vector_search(HashEmbedder(DIM).embed("python memory agent"), 5)
    assert [round(c, 12) for _, c in got] == [1.0]


def test_crash_while_growing_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill after bigger files replaced the old ones but before the rows were copied back."""
    data_dir = tmp_path / "g"
    monkeypatch.setattr(vector_store, "MIN_CAPACITY", 1)
    original = vector_store.VectorIndex._grow

    def crash_after_replacing(self, need_rows: int, id_width: int) -> None:  # type: ignore[no-untyped-def]
        if need_rows > self.header.capacity and self.rows:
            self._create_files(need_rows * 2, max(id_width, self.header.id_width))
            raise KeyboardInterrupt("killed")
        original(self, need_rows, id_width)

    with EmbedServer(dim=DIM) as server:
        settings = Settings(data_dir=data_dir, store="default", embed_endpoint=server.url)
        with Engine(settings) as engine:
            first = engine.remember("rust qdrant search", no_diff=True)["id"]
            engine.vector_scores(HashEmbedder(DIM).embed("x"))
        monkeypatch.setattr(vector_store.VectorIndex, "_grow", crash_after_replacing)
        with Engine(settings) as engine, pytest.raises(KeyboardInterrupt):
            # the index is opened before the write's transaction and grows in the catch-up after its commit:
            # the kill lands there, the memory stored
            engine.remember("python memory agent", no_diff=True)
        monkeypatch.setattr(vector_store.VectorIndex, "_grow", original)
        with Engine(settings) as engine:
            second = [row[0] for row in engine.store.conn.execute(
                "SELECT id FROM insights WHERE content = 'python memory agent'")]  # fmt: skip
            hits = engine.vector_search(HashEmbedder(DIM).embed("rust qdrant search"), 5)
            index = engine.vectors.vector_index()
            assert index is not None and index.mismatches(engine.store.conn) == []
    assert len(second) == 1
    assert [(i, round(c, 12)) for i, c in hits][0] == (first, 1.0)
    assert sorted(i for i, _ in hits) == sorted([first, second[0]]) and hits[1][1] < 1.0
