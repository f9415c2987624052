"""The warm server's per-store state (mnemon.server.warm): the hot index a worker inherits.

In-process tests of the table (load, take, refresh, eviction), with ``hot.inherited`` pointed at
it as a forked worker has it, and answers compared with a process that loads the files itself;
then one whole-process test through a real server, where writes from every side (served,
in-process, raw SQL behind the index's back) must leave served answers byte-identical to
in-process ones.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest
from test_hotindex import db_file, fresh_build, ids_of, same_content
from test_server import _mnemon, _start, _wait

from tests.conftest import stop_servers
from mnemon.engine import hot
from mnemon.server import warm
from mnemon.store import hotindex

pytestmark = pytest.mark.in_process  # points hot.inherited at a table in this process

NOTES = [
    "Lighthouse keepers logged the fog every night",
    "The fog horn at the lighthouse was replaced in 1962",
    "Decided to automate the lighthouse lamp because keepers retired",
    "Fog signals now run from a timer in the lighthouse",
]


def _seed(cli) -> None:
    for note in NOTES:
        cli.ok("remember", note, "--no-diff")
    cli.ok("recall", "lighthouse fog")  # the index is built and written


@pytest.fixture
def table() -> warm.WarmIndexes:
    return warm.WarmIndexes()


@contextmanager
def worker(table: warm.WarmIndexes) -> Iterator[None]:
    """Run commands as a worker forked from a parent holding ``table`` would."""
    before = hot.inherited
    hot.inherited = table.take
    try:
        yield
    finally:
        hot.inherited = before


def _answers(cli) -> tuple[object, object]:
    return cli.ok("recall", "lighthouse fog", "--readonly"), cli.ok("search", "fog lighthouse", "--readonly")


def _live(data_dir: Path) -> hotindex.Fingerprint:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        return hotindex.fingerprint(conn)
    finally:
        conn.close()


def test_a_worker_starts_from_the_warm_index_and_answers_as_a_fresh_load(cli, data_dir: Path, table) -> None:
    _seed(cli)
    name = warm.key(db_file(data_dir))
    assert table.refresh(name) is True
    entry = table.entries[name]
    assert entry.index.fp == _live(data_dir)
    assert {"csr_ptr", "csr_nbr", "id_rank", "post_r_ptr"} <= set(entry.index._derived)  # derived ahead
    with worker(table):
        served = _answers(cli)
    assert table.kept == [entry.index] and name not in table.entries  # taken, once
    assert table.used == [name] and warm.parse_report(table.report()) == [name]
    assert _answers(cli) == served  # without the table: loaded from the files, as a fresh process


def test_a_delta_written_unseen_is_caught_up_and_a_new_base_is_not_taken(cli, data_dir: Path, table) -> None:
    _seed(cli)
    name = warm.key(db_file(data_dir))
    table.refresh(name)
    old = table.entries[name].index
    made = cli.ok("remember", "A new keeper arrived with the supply boat and fog", "--no-diff")  # a new hot.delta
    with worker(table):  # same base file: taken, then caught up from the database
        out = cli.ok("recall", "keeper fog", "--verbose")
    assert table.kept == [old] and made["id"] in ids_of(out)
    same_content(old, fresh_build(data_dir))
    assert table.refresh(name) is True  # the parent reloads what changed
    assert table.entries[name].index is not old and table.entries[name].index.fp == _live(data_dir)
    shutil.rmtree(hotindex.index_path(db_file(data_dir)).parent)  # the documented way to force a rebuild
    cli.ok("recall", "keeper")  # a new base
    assert table.take(db_file(data_dir)) is None


def test_a_new_stamp_only_moves_the_fingerprint(cli, data_dir: Path, table) -> None:
    _seed(cli)
    name = warm.key(db_file(data_dir))
    table.refresh(name)
    index = table.entries[name].index
    stamp_before = hotindex.read_stamp(db_file(data_dir))
    cli.ok("recall", "keepers")  # bumps access counts only: a new stamp for the same base and delta
    assert hotindex.read_stamp(db_file(data_dir)) != stamp_before
    assert table.refresh(name) is True
    assert table.entries[name].index is index and index.fp == _live(data_dir)
    assert table.refresh(name) is False  # nothing changed since


def test_a_write_behind_the_index_back_is_caught_up_from_the_inherited_index(cli, data_dir: Path, table) -> None:
    """The files did not change (a crash between commit and index write, or a foreign writer),
    so the worker takes the warm index: the live fingerprint then tells it to catch up."""
    _seed(cli)
    name = warm.key(db_file(data_dir))
    table.refresh(name)
    conn = apsw.Connection(str(db_file(data_dir)))
    conn.execute(
        "INSERT INTO insights (id, content, category, importance, tags, entities, source, created_at, updated_at) "
        "VALUES ('11111111-2222-4333-8444-555555555555', 'Lighthouse fog lens polished', 'fact', 3, '[]', '[]', "
        "'go', '2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z')"
    )
    conn.close()
    with worker(table):
        out = cli.ok("recall", "lighthouse fog", "--verbose")
    assert table.kept, "the worker did not start from the warm index"
    assert "11111111-2222-4333-8444-555555555555" in ids_of(out)
    same_content(table.kept[0], fresh_build(data_dir))


def test_only_the_last_stores_stay_warm_and_a_store_without_index_has_none(cli, data_dir: Path, table,
                                                                          tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(warm, "MAX_STORES", 1)
    _seed(cli)
    first = warm.key(db_file(data_dir))
    table.refresh(first)
    assert table.refresh(warm.key(tmp_path / "none" / "mnemon.db")) is False  # no index file: no entry
    assert list(table.entries) == [first]
    other = tmp_path / "other"
    cli.__class__(other, cli.capsys, served=False).ok("remember", "Keepers of another store", "--no-diff")
    second = warm.key(db_file(other))
    assert table.refresh(second) is True
    assert list(table.entries) == [second]  # the older one went
    os.unlink(hotindex.index_path(db_file(other)))
    assert table.refresh(second) is True and not table.entries


def test_served_answers_follow_writes_from_every_side(tmp_path: Path) -> None:
    """Whole processes through one server: the server keeps the store's index warm (it maps the
    file), and after served writes, in-process writes and a raw SQL write, every served answer is
    byte for byte the in-process one."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    data = tmp_path / "data"
    info = _start(runtime)
    try:
        def run(mode: str, *args: str) -> bytes:
            proc = _mnemon(runtime, mode, ["--data-dir", str(data), *args])
            assert proc.returncode == 0, proc.stderr
            return proc.stdout

        def same() -> None:
            for args in (["recall", "lighthouse fog", "--readonly"], ["search", "fog", "--readonly"],
                         ["recall", "keepers", "--readonly", "--verbose"]):
                assert run("require", *args) == run("off", *args), args

        for note in NOTES[:2]:
            run("require", "remember", note, "--no-diff")
        run("off", "remember", NOTES[2], "--no-diff")
        run("require", "recall", "lighthouse")  # builds the index; the server loads it after
        hot_path = str(hotindex.index_path(db_file(data)))
        maps = Path(f"/proc/{info['pid']}/maps")
        assert _wait(lambda: hot_path in maps.read_text(), 10), "the server did not keep the index warm"
        same()
        run("off", "remember", NOTES[3], "--no-diff")  # another process writes a delta
        same()
        conn = apsw.Connection(str(db_file(data)))
        conn.execute("UPDATE insights SET deleted_at = '2030-01-01T00:00:00Z' WHERE content = ?", (NOTES[0],))
        conn.close()  # behind the index's back: no file changes, no generation bump
        same()
        made = json.loads(run("require", "remember", "Keepers trained on the new fog timer", "--no-diff"))
        same()
        assert made["id"] in run("require", "recall", "keepers fog timer", "--readonly").decode()
    finally:
        stop_servers(runtime)
