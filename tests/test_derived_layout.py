"""Derived files in one folder per store (mnemon.db.index/): old layouts move silently, also with
two processes opening at once; --readonly creates and moves nothing; deleting the folder rebuilds."""

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
