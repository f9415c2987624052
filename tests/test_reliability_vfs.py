"""I/O errors, disk full, read-only media and power cuts, injected under SQLite by ``faultvfs``.

- For every n, the n-th ``xWrite`` / ``xSync`` / ``xRead`` of a ``remember`` (and of ``link``,
  ``forget``) fails, and keeps failing, as a dying disk does: the CLI exits 1 with one ``Error:``
  line (a StoreError, no traceback), and the database, reopened normally, passes
  ``integrity_check`` and is either unchanged or holds the whole new insight.
- Disk full (``SQLITE_FULL`` from every write from the n-th on) and a read-only medium: the same.
- Power cuts at a seeded random write during a run of commands: unsynced writes are kept, dropped
  or torn at sector boundaries and everything after the cut is lost. With ``synchronous=FULL``
  no acknowledged command is lost and the database is never corrupt; the derived hot index
  (which may now describe writes the database lost) is never trusted: recall returns only
  insights the database holds, and doctor is clean after it.

``MNEMON_RELIABILITY_SCALE=N`` multiplies the power-cut count.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import apsw
import pytest
from faultvfs import FaultVFS

from mnemon.store import check, connection, ranges

SCALE = max(1, int(os.environ.get("MNEMON_RELIABILITY_SCALE", "1")))
POWER_CUTS = 20 * SCALE
NEW_TEXT = "the new insight about SQLite durability because of fsync"


@pytest.fixture(scope="module")
def vfs(tmp_path_factory: pytest.TempPathFactory):
    fault = FaultVFS("mnemon-fault", tmp_path_factory.mktemp("vfs-root"))
    yield fault
    fault.unregister()


@pytest.fixture
def faulty(vfs: FaultVFS, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FaultVFS:
    vfs.reset(tmp_path)
    monkeypatch.setattr(connection, "VFS_NAME", vfs.name)
    return vfs


def _run(data_dir: Path, *args: str) -> tuple[int, str, str]:
    from mnemon.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--data-dir", str(data_dir), *args])
    return code, out.getvalue(), err.getvalue()


def _db(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    base = tmp_path_factory.mktemp("vfs-template") / "data-dir"
    os.environ["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"
    ids = []
    for text in ("SQLite keeps the truth", "Python drives numba kernels", "Go was the old binary"):
        code, out, err = _run(base, "remember", text)
        assert code == 0, err
        ids.append(json.loads(out)["id"])
    return base, ids


def _state(db: Path) -> tuple[object, ...]:
    """Open normally (WAL recovery included), check, and return (generation, rows, edges, active)."""
    conn = apsw.Connection(str(db))
    try:
        assert check.integrity(conn) == []
        assert check.foreign_keys(conn) == []
        assert ranges.insight_findings(conn) == []
        assert check.dangling_edges(conn) == []
        gen = conn.execute("SELECT value FROM mnemon_meta WHERE key = 'generation'").fetchone()[0]
        rows = conn.execute("SELECT COUNT(*), COUNT(deleted_at) FROM insights").fetchone()
        edges = conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0]
        contents = tuple(sorted(r[0] for r in conn.execute("SELECT content FROM insights WHERE deleted_at IS NULL")))
        oplog = conn.execute("SELECT COUNT(*) FROM oplog").fetchone()[0]
        return gen, rows, edges, contents, oplog
    finally:
        conn.close()


def _copy(template: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(template, dest)
    return dest


def _assert_one_error_line(code: int, err: str, args: tuple[str, ...]) -> None:
    assert code in (0, 1), (args, code, err)
    if code == 1:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, err)


COMMANDS = {
    "remember": lambda ids: ("remember", NEW_TEXT),
    "link": lambda ids: ("link", ids[0], ids[1], "--type", "causal"),
    "forget": lambda ids: ("forget", ids[2]),
}


def _count_ops(faulty: FaultVFS, template: Path, work: Path, args: tuple[str, ...]) -> dict[str, int]:
    data_dir = _copy(template, work / "count")
    faulty.reset(work)
    code, _, err = _run(data_dir, *args)
    assert code == 0, err
    return {"read": faulty.counters.read, "write": faulty.counters.write, "sync": faulty.counters.sync}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind,error", [("write", apsw.IOError), ("sync", apsw.IOError), ("read", apsw.IOError),
                                        ("write", apsw.FullError)], ids=["write", "sync", "read", "disk-full"])
def test_every_failing_operation_leaves_the_store_unchanged_or_fully_changed(
    faulty: FaultVFS, template, tmp_path: Path, command: str, kind: str, error: type[apsw.Error]
) -> None:
    base, ids = template
    args = COMMANDS[command](ids)
    total = _count_ops(faulty, base, tmp_path, args)[kind]
    assert total > 0
    clean_before = None
    outcomes = {"failed": 0, "survived": 0}
    for n in range(1, total + 1):
        data_dir = _copy(base, tmp_path / "run")
        if clean_before is None:
            connection_vfs, connection.VFS_NAME = connection.VFS_NAME, None
            clean_before = _state(_db(data_dir))
            connection.VFS_NAME = connection_vfs
        faulty.reset(tmp_path)
        faulty.fail(kind, n, error)
        code, _out, err = _run(data_dir, *args)
        _assert_one_error_line(code, err, (kind, n, *args))
        assert "Traceback" not in err
        faulty.reset(tmp_path)
        faulty.counters.failures.clear()
        after = _state(_db(data_dir))
        changed = after != clean_before
        if code == 0:
            assert changed, (kind, n, "acknowledged but not stored")
        outcomes["failed" if code else "survived"] += 1
        if changed:
            _assert_fully_changed(command, after, clean_before)
    # Failing every operation of some kind must have made at least the first attempt fail.
    assert outcomes["failed"] >= 1, outcomes


def _assert_fully_changed(command: str, after: tuple, before: tuple) -> None:
    gen_a, rows_a, edges_a, contents_a, oplog_a = after
    gen_b, rows_b, edges_b, contents_b, oplog_b = before
    assert int(gen_a) > int(gen_b)
    if command == "remember":
        assert NEW_TEXT in contents_a and rows_a[0] == rows_b[0] + 1 and oplog_a == oplog_b + 1
    elif command == "link":
        assert edges_a >= edges_b + 1 and oplog_a == oplog_b + 1
    else:
        assert rows_a[1] == rows_b[1] + 1 and len(contents_a) == len(contents_b) - 1 and oplog_a == oplog_b + 1


def test_read_only_medium_is_a_clear_error_and_changes_nothing(faulty: FaultVFS, template, tmp_path: Path) -> None:
    base, ids = template
    data_dir = _copy(base, tmp_path / "ro")
    connection_vfs, connection.VFS_NAME = connection.VFS_NAME, None
    before = _state(_db(data_dir))
    before_bytes = _db(data_dir).read_bytes()
    connection.VFS_NAME = connection_vfs
    faulty.readonly = True
    for args in (("remember", NEW_TEXT), ("link", ids[0], ids[1]), ("forget", ids[0]), ("gc",), ("status",),
                 ("recall", "SQLite"), ("doctor", "--repair")):
        code, _out, err = _run(data_dir, *args)
        _assert_one_error_line(code, err, args)
        if args[0] in ("remember", "link", "forget", "gc"):
            assert code == 1, args
    faulty.readonly = False
    assert _db(data_dir).read_bytes() == before_bytes
    connection.VFS_NAME = None
    assert _state(_db(data_dir)) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes")
def test_read_only_data_directory_is_a_clear_error(template, tmp_path: Path) -> None:
    base, _ids = template
    data_dir = _copy(base, tmp_path / "ro-dir")
    store = _db(data_dir).parent
    os.chmod(_db(data_dir), 0o400)
    os.chmod(store, 0o500)
    try:
        code, _out, err = _run(data_dir, "remember", NEW_TEXT)
        assert code == 1 and len(err.splitlines()) == 1 and err.startswith("Error: ")
    finally:
        os.chmod(store, 0o700)
        os.chmod(_db(data_dir), 0o600)


def test_power_cuts_lose_no_acknowledged_write_and_never_corrupt(
    faulty: FaultVFS, template, tmp_path: Path
) -> None:
    base, ids = template
    rng = random.Random(424242)
    tally_total = {"kept": 0, "dropped": 0, "torn": 0, "undone_after_cut": 0}
    for cut in range(POWER_CUTS):
        data_dir = _copy(base, tmp_path / "cut")
        faulty.reset(tmp_path)
        faulty.cut_at = rng.randint(1, 120)
        acknowledged: list[str] = []
        forgotten: list[str] = []
        for step in range(8):
            if step == 5:
                args: tuple[str, ...] = ("link", ids[0], ids[1], "--type", "causal")
            elif step == 6:
                args = ("forget", ids[2])
            elif step == 7:
                args = ("recall", "SQLite durability")
            else:
                args = ("remember", f"cut {cut} step {step}: memory about fsync and WAL")
            code, out, err = _run(data_dir, *args)
            assert code == 0, err  # the cut is silent: the process does not notice it
            if not faulty.cut:
                if args[0] == "remember":
                    acknowledged.append(json.loads(out)["id"])
                elif args[0] == "forget":
                    forgotten.append(ids[2])
        tally = faulty.apply_power_cut(rng)
        for key, value in tally.items():
            tally_total[key] += value
        connection_vfs, connection.VFS_NAME = connection.VFS_NAME, None
        try:
            _state(_db(data_dir))
            conn = apsw.Connection(str(_db(data_dir)))
            try:
                rows = dict(conn.execute("SELECT id, deleted_at FROM insights"))
            finally:
                conn.close()
            lost = [i for i in acknowledged if i not in rows]
            assert not lost, (cut, faulty.cut_at, lost)
            for gone in forgotten:
                assert rows[gone] is not None, (cut, "acknowledged forget lost")
            # The derived index may describe writes the database lost: it must not be trusted.
            code, out, err = _run(data_dir, "recall", "memory about fsync")
            assert code == 0, err
            hits = json.loads(out)
            hit_ids = [h["id"] for h in (hits["results"] if isinstance(hits, dict) else hits)]
            active = {i for i, deleted in rows.items() if deleted is None}
            assert set(hit_ids) <= active, (cut, set(hit_ids) - active)
            code, out, err = _run(data_dir, "doctor")
            assert code == 0, out
        finally:
            connection.VFS_NAME = connection_vfs
    # The model really exercised lost and torn writes.
    assert tally_total["dropped"] > 0 and tally_total["torn"] > 0 and tally_total["undone_after_cut"] > 0


def _draft_file(tmp_path: Path, n: int, seed: int) -> Path:
    from bench.generate import generate_draft, write_draft

    path = tmp_path / f"draft-{n}-{seed}.json"
    write_draft(generate_draft(n, seed=seed, edges_per_insight=4), path)
    return path


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> int:
    """Imports in batches of 40 items, so a small draft takes several transactions."""
    from mnemon.engine import bulk

    monkeypatch.setattr(bulk, "IMPORT_BATCH", 40)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_GROWTH", 0)
    return 40


def test_a_power_cut_after_an_import_answered_loses_none_of_it(
    faulty: FaultVFS, template, tmp_path: Path, small_batches: int
) -> None:
    """The batches commit without a sync (bulk_tuning); the import's last transaction syncs them
    all before its result is printed, so a cut right after the answer loses nothing of it.

    Another process's reader holds an old snapshot meanwhile, so no checkpoint can copy (and
    sync) the WAL: the commits' own syncs are all the durability there is."""
    base, _ids = template
    draft = _draft_file(tmp_path, 150, seed=11)  # 4 batches
    for trial in range(3):
        data_dir = _copy(base, tmp_path / "import-cut")
        faulty.reset(tmp_path)
        reader = apsw.Connection(str(_db(data_dir)), flags=apsw.SQLITE_OPEN_READONLY)
        reader.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)  # its close must write nothing
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM insights").fetchone()[0] == 3
        try:
            code, out, err = _run(data_dir, "import", str(draft))
        finally:
            reader.close()
        assert code == 0, err
        syncs = faulty.counters.sync
        faulty.cut_power()
        faulty.apply_power_cut(random.Random(1000 + trial))
        connection_vfs, connection.VFS_NAME = connection.VFS_NAME, None
        try:
            _gen, (rows, _deleted), edges, _contents, _oplog = _state(_db(data_dir))
            report = json.loads(out)
            added = {r["id"] for r in report["results"] if r["action"] == "added"}
            conn = apsw.Connection(str(_db(data_dir)))
            try:
                present = {str(r[0]) for r in conn.execute("SELECT id FROM insights")}
            finally:
                conn.close()
            assert report["imported"] == 150 and added <= present, (trial, len(added - present))
            assert rows == 3 + 150 and edges > 0
        finally:
            connection.VFS_NAME = connection_vfs
    # One sync of the WAL for the four batches' commits, not one per commit (the checkpoint and the
    # close sync the WAL and the database once more each): every-commit syncs would be at least 5.
    assert syncs <= 4, syncs


def test_a_power_cut_during_an_import_leaves_a_store_the_same_import_completes(
    faulty: FaultVFS, template, tmp_path: Path, small_batches: int
) -> None:
    """Cut anywhere in an import: the store opens consistent, holding whole batches or none, its
    counters equal COUNT(*), and running the same import again brings every item in once."""
    base, _ids = template
    draft = _draft_file(tmp_path, 150, seed=12)
    rng = random.Random(777)
    for trial in range(4):
        data_dir = _copy(base, tmp_path / "import-mid")
        faulty.reset(tmp_path)
        faulty.cut_at = rng.randint(20, 400)
        code, _out, err = _run(data_dir, "import", str(draft))
        assert code == 0, err  # the cut is silent
        faulty.apply_power_cut(rng)
        connection_vfs, connection.VFS_NAME = connection.VFS_NAME, None
        try:
            _state(_db(data_dir))  # integrity, foreign keys, no dangling edge
            code, out, err = _run(data_dir, "import", str(draft))
            assert code == 0, err
            conn = apsw.Connection(str(_db(data_dir)))
            try:
                contents = [str(r[0]) for r in conn.execute("SELECT content FROM insights WHERE deleted_at IS NULL")]
                counted = conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0]
            finally:
                conn.close()
            assert len(contents) == len(set(contents)) == 3 + 150, (trial, faulty.cut_at)
            code, out, err = _run(data_dir, "status")
            assert code == 0, err
            status = json.loads(out)
            assert status["total_insights"] == 153 and status["edge_count"] == counted, status
            code, out, err = _run(data_dir, "doctor")
            assert code == 0, out
        finally:
            connection.VFS_NAME = connection_vfs
