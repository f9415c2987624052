"""Concurrent agents: many writer processes, readers beside them, and a hook beside a big import.

- 8 writer processes each run ``remember`` in a loop (a share of the contents is identical
  across processes) while 2 processes loop ``recall`` and ``status``: no lost write, no non-zero
  exit anywhere, every identical content stored exactly once, ``doctor`` clean afterwards.
- An ``import`` of a large draft beside a hook that calls ``status`` every 50 ms: the hook never
  waits more than 1 s and never fails.

Workers are Python processes looping ``mnemon.cli.main`` (every call opens, writes and closes
the store like a separate CLI run; thousands of interpreter starts would take minutes on 2
cores). CI: 8 x 40 writes and an import of 1,000; ``MNEMON_RELIABILITY_SCALE=N`` multiplies both
(N=7 gives 8 x 280, beyond the issue's 8 x 250, and an import of 7,000).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apsw

from tests.conftest import REPO

SCALE = max(1, int(os.environ.get("MNEMON_RELIABILITY_SCALE", "1")))
WRITERS = 8
PER_WRITER = 40 * SCALE
SHARED_EVERY = 6  # every 6th content of each writer is one every writer also writes
READERS = ("recall", "status")
IMPORT_SIZE = 1000 * SCALE
HOOK_PERIOD = 0.05
HOOK_MAX_WAIT = 1.0

WORKER = textwrap.dedent(
    """
    import contextlib, io, json, sys, time
    from mnemon.cli import main

    data_dir, role, index, count, start_at, stop_file = sys.argv[1:7]
    index, count, start_at = int(index), int(count), float(start_at)
    while time.time() < start_at:
        time.sleep(0.002)
    report = {"failures": [], "ids": [], "calls": 0, "max_wait": 0.0}
    def call(*args):
        out, err = io.StringIO(), io.StringIO()
        began = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--data-dir", data_dir, *args])
        report["max_wait"] = max(report["max_wait"], time.monotonic() - began)
        report["calls"] += 1
        if code != 0:
            report["failures"].append([list(args), code, err.getvalue()])
        return code, out.getvalue()
    if role == "writer":
        for i in range(count):
            if i % SHARED_EVERY == 0:
                content = f"shared decision {i}: every agent agreed to use SQLite WAL"
            else:
                content = f"writer {index} memory {i} about topic {i % 11} and Python"
            code, out = call("remember", content)
            if code == 0:
                result = json.loads(out)
                # An exact duplicate is skipped (Decision 5): replaced_id names the stored insight.
                stored = result["replaced_id"] if result["action"] == "skipped" else result["id"]
                report["ids"].append([stored, content])
    elif role == "reader":
        import os
        while not os.path.exists(stop_file):
            call("recall", "memory about Python") if index == 0 else call("status")
    elif role == "hook":
        import os
        while not os.path.exists(stop_file):
            call("status")
            time.sleep(HOOK_PERIOD)
    elif role == "import":
        call("import", stop_file)
    print(json.dumps(report))
    """
).replace("SHARED_EVERY", str(SHARED_EVERY)).replace("HOOK_PERIOD", str(HOOK_PERIOD))


def _worker(data_dir: Path, role: str, index: int, count: int, start_at: float, stop: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(data_dir), role, str(index), str(count), str(start_at), str(stop)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _doctor(data_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), "doctor"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_eight_writers_and_two_readers_lose_nothing(data_dir: Path, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    start_at = time.time() + 3.0  # every interpreter is up before the first write
    writers = [_worker(data_dir, "writer", i, PER_WRITER, start_at, stop) for i in range(WRITERS)]
    readers = [_worker(data_dir, "reader", i, 0, start_at, stop) for i in range(len(READERS))]
    try:
        writer_reports = [_finish(w) for w in writers]
    finally:
        stop.touch()
    reader_reports = [_finish(r) for r in readers]
    failures = [f for r in writer_reports + reader_reports for f in r["failures"]]
    assert failures == [], failures[:3]
    assert all(r["calls"] > 0 for r in reader_reports)
    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        stored = dict(conn.execute("SELECT id, content FROM insights WHERE deleted_at IS NULL"))
        per_content: dict[str, int] = {}
        for content in stored.values():
            per_content[content] = per_content.get(content, 0) + 1
    finally:
        conn.close()
    reported = [(i, c) for r in writer_reports for i, c in r["ids"]]
    assert len(reported) == WRITERS * PER_WRITER  # every call succeeded
    missing = [i for i, _c in reported if i not in stored]
    assert missing == [], f"{len(missing)} acknowledged writes lost"
    shared = {c for _i, c in reported if c.startswith("shared decision")}
    assert all(per_content[c] == 1 for c in shared), "identical content stored more than once"
    unique = {c for _i, c in reported}
    assert len(stored) == len(unique)
    # Every writer that wrote a shared content got the one stored id back.
    ids_by_content: dict[str, set[str]] = {}
    for i, c in reported:
        ids_by_content.setdefault(c, set()).add(i)
    assert all(len(ids_by_content[c]) == 1 for c in shared)
    _doctor(data_dir)


def test_status_hook_beside_a_large_import_never_waits_a_second(data_dir: Path, tmp_path: Path) -> None:
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps({
        "schema_version": "1",
        "insights": [{"content": f"imported memory {i} about topic {i % 37} in Python and SQLite",
                      "category": "fact"} for i in range(IMPORT_SIZE)],
    }))
    stop = tmp_path / "stop"
    start_at = time.time() + 2.0
    # The hook's stop file doubles as the import's draft path argument slot; keep them distinct.
    importer = _worker(data_dir, "import", 0, 0, start_at, draft)
    hook = _worker(data_dir, "hook", 0, 0, start_at, stop)
    try:
        import_report = _finish(importer)
    finally:
        stop.touch()
    hook_report = _finish(hook)
    assert import_report["failures"] == [], import_report["failures"][:1]
    assert hook_report["failures"] == [], hook_report["failures"][:3]
    assert hook_report["calls"] >= 5, "the hook barely ran beside the import"
    assert hook_report["max_wait"] <= HOOK_MAX_WAIT, hook_report["max_wait"]
    _doctor(data_dir)
