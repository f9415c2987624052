"""Derived files in one folder per store (mnemon.db.index/): old layouts move silently, also with
two processes opening at once; --readonly creates and moves nothing; deleting the folder rebuilds;
a commit landing while the vector index catches up is indexed once."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon.store import derived

REPO = Path(__file__).resolve().parent.parent


def _store(data_dir: Path) -> Path:
    return data_dir / "data" / "default"


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file()
    }  # fmt: skip


@pytest.fixture
def embedded(data_dir: Path, monkeypatch, cli):
    """A store with a hot index (+ delta, stamp) and a vector index, as the current layout writes it."""
    sys.path.insert(0, str(REPO / "tests"))
    from embed_server import EmbedServer

    with EmbedServer(dim=16) as server:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        for k in range(6):
            cli.ok("remember", f"Layout memory {k} about Rust and SQLite", "--no-diff")
        cli.ok("recall", "Rust SQLite")
        cli.ok("remember", "Layout memory after the index about Rust", "--no-diff")
        cli.ok("recall", "Rust")
        yield server


def _to_old_layout(data_dir: Path) -> list[str]:
    """Move the folder's files back beside the database, as stores written before the folder hold them."""
    store = _store(data_dir)
    folder = store / "mnemon.db.index"
    names = sorted(p.name for p in folder.iterdir())
    for name in names:
        os.rename(folder / name, store / f"mnemon.db.{name}")
    folder.rmdir()
    (store / ".mnemon.db.hot.0123abcd.tmp").write_bytes(b"torn")  # a temp file of an interrupted write
    return names


def test_every_derived_file_lives_in_the_folder(cli, data_dir: Path, embedded) -> None:
    store = _store(data_dir)
    assert sorted(p.name for p in store.iterdir() if p.is_file()) == ["mnemon.db"]
    names = {p.name for p in (store / "mnemon.db.index").iterdir()}
    assert {"hot", "vec", "vec.json", "vec.lock", "vec.norms", "vec.ids", "vec.rowids", "vec.active",
            "vec.q8", "vec.qmult", "vec.qresid"} <= names
    assert names <= set(derived.NAMES)


def test_an_old_layout_moves_silently_and_answers_the_same(cli, data_dir: Path, embedded) -> None:
    expected = cli.ok("recall", "Rust SQLite")
    moved = _to_old_layout(data_dir)
    res = cli("recall", "Rust SQLite")
    assert res.code == 0 and res.err == ""
    assert res.json() == expected
    store = _store(data_dir)
    assert sorted(p.name for p in store.iterdir() if p.is_file()) == ["mnemon.db"]
    assert set(moved) <= {p.name for p in (store / "mnemon.db.index").iterdir()}
    assert cli("doctor").code == 0


def test_two_processes_opening_an_old_layout_at_once(cli, data_dir: Path, embedded) -> None:
    expected = cli.ok("recall", "Rust SQLite")
    for _ in range(3):
        _to_old_layout(data_dir)
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        argv = [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir)]
        procs = [
            subprocess.Popen([*argv, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for args in (["recall", "Rust SQLite"], ["recall", "Rust SQLite"], ["remember", "Concurrent Rust note", "--no-diff"])
        ]  # fmt: skip
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], [o[1] for o in outs]
        assert all(err == b"" for _, err in outs)
        assert not derived.legacy_files(_store(data_dir) / "mnemon.db")
        assert cli("doctor").code == 0
        cli.ok("forget", json.loads(outs[2][0])["id"])  # so the next round's recall answers the same
    assert cli.ok("recall", "Rust SQLite") == expected


def test_readonly_on_an_old_layout_creates_and_moves_nothing(cli, data_dir: Path, embedded) -> None:
    expected = cli.ok("recall", "Rust SQLite")
    _to_old_layout(data_dir)
    store = _store(data_dir)
    before = _tree(store)
    assert cli.ok("--readonly", "recall", "Rust SQLite") == expected
    assert cli.ok("--readonly", "status")["total_insights"] == 7
    assert _tree(store) == before
    assert not (store / "mnemon.db.index").exists()


def test_deleting_the_folder_is_a_rebuild(cli, data_dir: Path, embedded) -> None:
    import shutil

    expected = cli.ok("recall", "Rust SQLite")
    shutil.rmtree(_store(data_dir) / "mnemon.db.index")
    assert cli.ok("recall", "Rust SQLite") == expected
    assert (_store(data_dir) / "mnemon.db.index" / "vec.json").exists()
    assert cli("doctor").code == 0
    shutil.rmtree(_store(data_dir) / "mnemon.db.index")
    cli.ok("remember", "Written after the folder was deleted, about Rust", "--no-diff")  # writers recreate it
    assert cli.ok("recall", "Rust SQLite")["results"]
    assert cli("doctor").code == 0


@pytest.mark.parametrize("index_state", ["stale", "missing"])
def test_a_commit_while_the_vector_index_catches_up_is_indexed_once(tmp_path: Path, monkeypatch, index_state) -> None:
    """The interleaving behind the test above's rare failure, forced in one process: another
    connection commits a new vector right after the catch-up (``stale``: the header behind the
    files, as a lost header write leaves it) or the rebuild (``missing``) read the fingerprint and
    before it reads the rows. Read apart, those rows were held under the older fingerprint, and the
    next catch-up appended the new one a second time (doctor: "row N holds no active insight of its
    own"). Read in one snapshot, the late commit is left to the next catch-up."""
    import uuid

    from mnemon.config import Settings
    from mnemon.embed.fake import HashEmbedder
    from mnemon.engine import Engine
    from mnemon.records import Insight
    from mnemon.store import Store, insights
    from mnemon.store import vectors as vector_store

    embedder = HashEmbedder(16)
    settings = Settings(data_dir=tmp_path / "race", store="default")
    db = settings.db_path
    with Engine(settings, embedder=embedder) as engine:
        for k in range(3):
            engine.remember(f"Race memory {k} about Rust", no_diff=True)
        engine.vector_scores(embedder.embed("Rust"))
        header = derived.path(db, "vec.json")
        saved = header.read_bytes()
        engine.remember("Race memory 3 about Rust", no_diff=True)  # the index catches it up
    if index_state == "stale":
        header.write_bytes(saved)  # the data rows written, the header never replaced
    else:
        vector_store.remove_files(db)

    late: list[str] = []

    def commit_between(conn):  # type: ignore[no-untyped-def]
        fp = read_fingerprint(conn)
        if not late:  # once: a writer that never opens the vector index commits a new vector now
            late.append(str(uuid.uuid4()))
            other = Store.open(db, readonly=False, now="2026-01-01T00:00:00Z")
            try:
                with other.transaction() as tx:
                    stamp = "2026-01-01T00:00:00Z"
                    insights.insert(tx, Insight(id=late[0], content="Late memory about Rust", created_at=stamp,
                                                updated_at=stamp), stamp)  # fmt: skip
                    vector_store.set_embedding(tx, late[0], embedder.embed("late"), other.embedding_format)
            finally:
                other.conn.close()
        return fp

    read_fingerprint = vector_store.fingerprint
    monkeypatch.setattr(vector_store, "fingerprint", commit_between)
    with Engine(settings, embedder=embedder) as engine:
        engine.vector_scores(embedder.embed("Rust"))  # the catch-up or rebuild the commit lands in
    monkeypatch.setattr(vector_store, "fingerprint", read_fingerprint)
    assert late

    with Engine(settings, embedder=embedder) as engine:
        ids, _ = engine.vector_scores(embedder.embed("Rust"))  # the next catch-up: the late row, once
        assert ids.tolist().count(late[0]) == 1 and len(ids) == 5
        index = engine.vectors.vector_index()
        assert index is not None and index.active_count() == 5
        assert index.mismatches(engine.store.conn) == []
        assert engine.doctor()["ok"] is True


def test_remember_opens_the_vector_index_before_its_transaction(tmp_path: Path, monkeypatch) -> None:
    """A `remember --no-diff` with a model, the first of its process to need the vector index (its semantic
    edges), opened the index inside its write transaction: the index caught up with what that transaction sees
    and stamped its header for the uncommitted row. A concurrent reader then found a header naming a row its
    snapshot lacks and rebuilt the whole index. The header stays the committed state's until the commit."""
    from mnemon.config import Settings
    from mnemon.embed.fake import HashEmbedder
    from mnemon.engine import Engine
    from mnemon.engine import graph

    embedder = HashEmbedder(16)
    settings = Settings(data_dir=tmp_path / "stamp", store="default")
    header = derived.path(settings.db_path, "vec.json")
    with Engine(settings, embedder=embedder) as engine:
        for k in range(3):
            engine.remember(f"Stamp memory {k} about Rust", no_diff=True)
        engine.vector_scores(embedder.embed("Rust"))  # the index current for the three
    before = header.read_bytes()
    seen: list[bytes] = []
    semantic_edges = graph.semantic_edges

    def in_the_transaction(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(header.read_bytes())  # after the semantic search, before the commit
        return semantic_edges(*args, **kwargs)

    monkeypatch.setattr(graph, "semantic_edges", in_the_transaction)
    with Engine(settings, embedder=embedder) as engine:  # a new process: the index not open yet
        engine.remember("Stamp memory 3 about Rust", no_diff=True)
    assert seen == [before]
    monkeypatch.setattr(graph, "semantic_edges", semantic_edges)
    with Engine(settings, embedder=embedder) as engine:
        ids, _ = engine.vector_scores(embedder.embed("Rust"))
        assert len(ids) == 4
        index = engine.vectors.vector_index()
        assert index is not None and index.mismatches(engine.store.conn) == []
