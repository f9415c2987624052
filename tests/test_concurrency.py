"""Concurrent writers (targets: reliability; contract §5 "no busy timeout" beaten): 8 processes
each running 100 ``remember`` against one store at once store all 800 with zero errors, and a
content written by several processes at the same moment is stored exactly once (the exact-
duplicate check sits inside the BEGIN IMMEDIATE transaction).

Each worker is one Python process that calls ``mnemon.cli.main`` in a loop (800 whole-process
starts would take minutes on 2 cores); every call still opens, writes and closes the database
like a separate CLI run would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apsw

from tests.conftest import REPO

WORKERS = 8
PER_WORKER = 100
SHARED = 5  # contents every worker also writes; each must be stored once

DRIVER = textwrap.dedent(
    """
    import contextlib, io, sys, time
    from mnemon.cli import main

    data_dir, worker, per_worker, shared, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    while time.time() < start_at:  # start every worker at the same moment
        time.sleep(0.005)
    failures = 0
    contents = [f"worker {worker} writes memory number {i} about topic {i % 7}" for i in range(per_worker)]
    contents += [f"shared decision {k}: everyone agreed on it" for k in range(shared)]
    for i, content in enumerate(contents):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--data-dir", data_dir, "remember", content, "--source", f"w{worker}"])
        if code != 0 or err.getvalue():
            failures += 1
            sys.stderr.write(f"worker {worker} item {i}: exit {code}: {err.getvalue()}")
    sys.exit(min(failures, 100))
    """
)


def test_eight_processes_hundred_remembers_each(data_dir: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    start_at = time.time() + 1.5  # time for every interpreter to import before the race starts
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(data_dir), str(w), str(PER_WORKER), str(SHARED), str(start_at)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )
        for w in range(WORKERS)
    ]
    errors = []
    for proc in procs:
        _, err = proc.communicate(timeout=170)
        if proc.returncode != 0:
            errors.append(err.decode("utf-8", "replace"))
    assert errors == []

    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        active = conn.execute("SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL").fetchone()[0]
        assert active == WORKERS * PER_WORKER + SHARED
        per_content = conn.execute(
            "SELECT content, COUNT(*) FROM insights WHERE content LIKE 'shared decision %' GROUP BY content"
        ).fetchall()
        assert sorted(n for _, n in per_content) == [1] * SHARED
        skips = conn.execute("SELECT COUNT(*) FROM oplog WHERE operation = 'diff-skip'").fetchone()[0]
        assert skips == (WORKERS - 1) * SHARED
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
