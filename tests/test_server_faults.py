"""Faults on the served path tell the truth (issue 26).

A command the server acknowledged belongs to its worker, which owns the client's connection and
reports its own status: a server killed meanwhile costs the command nothing, and only a worker that
is itself killed leaves the outcome unknown, which the client then says in those words, never
"failed". Stop, an upgrade and the idle exit let running commands finish; a worker whose client is
gone stops and writes nothing more to the client's terminal; ``--version`` and ``--help`` never
start a server.

The chaos test's size: ``MNEMON_CHAOS_CLIENTS`` clients x ``MNEMON_CHAOS_CALLS`` calls per phase
(default 4 x 50, as the issue asks), ``MNEMON_CHAOS_KILLS`` kills per phase (default 3 servers, 6
workers), seed ``MNEMON_CHAOS_SEED``. Every server runs in a runtime directory of its own.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import pytest

from mnemon.client import KILLED
from tests.conftest import REPO, stop_servers
from tests.test_server import _alive, _children, _env, _mnemon, _start, _wait

CLIENTS = int(os.environ.get("MNEMON_CHAOS_CLIENTS", "4"))
CALLS = int(os.environ.get("MNEMON_CHAOS_CALLS", "50"))
KILLS = os.environ.get("MNEMON_CHAOS_KILLS", "")
SEED = int(os.environ.get("MNEMON_CHAOS_SEED", "26"))


def _runtime(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    return path


def _server_pid(runtime: Path) -> int | None:
    """The live server's pid from its pid file (read directly: the killer must be quick)."""
    for pid_file in runtime.glob("mnemon-*/server-*.pid"):
        try:
            pid = int(pid_file.read_text().split("\n")[0])
        except (OSError, ValueError):
            continue
        if _alive(pid):
            return pid
    return None


def _stored(data: Path) -> dict[str, int]:
    conn = apsw.Connection(str(data / "data" / "default" / "mnemon.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT content, COUNT(*) FROM insights WHERE deleted_at IS NULL GROUP BY content")
        return {content: n for content, n in rows}
    finally:
        conn.close()


def _doctor_clean(runtime: Path, data: Path) -> None:
    proc = _mnemon(runtime, "off", ["--data-dir", str(data), "doctor"])
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"] is True, [c for c in report["checks"] if not c["ok"]]


def _clients(runtime: Path, data: Path, phase: str) -> tuple[list[threading.Thread], list[tuple[str, int, str]]]:
    """CLIENTS threads, each running CALLS ``remember --no-diff`` calls one after another as whole
    processes through the server (MNEMON_SERVER=require: a killed server is replaced, never skipped)."""
    results: list[tuple[str, int, str]] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        for i in range(CALLS):
            content = f"chaos {phase} client {c} call {i}: the deploy window moved to Thursday"
            proc = subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data), "remember", "--no-diff",
                                   content], capture_output=True, env=_env(runtime, "require"), timeout=300)
            with lock:
                results.append((content, proc.returncode, proc.stderr.decode(errors="replace")))

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    return threads, results


def _judge(results: list[tuple[str, int, str]], stored: dict[str, int], failures: list[str]) -> dict[str, int]:
    """Every call that exited 0 is stored exactly once, every plain failure not at all; only calls
    told KILLED are in doubt (stored once or not at all: never twice). Returns the counts."""
    counts = {"calls": len(results), "exit_0": 0, "plain_failure": 0, "in_doubt": 0, "in_doubt_stored": 0}
    for content, code, err in results:
        n = stored.get(content, 0)
        if code == 0:
            counts["exit_0"] += 1
            assert n == 1, (content, n, err)
        elif err.strip() == f"Error: {KILLED}":
            counts["in_doubt"] += 1
            counts["in_doubt_stored"] += n
            assert n in (0, 1) and code == 1, (content, n, code)
        else:
            counts["plain_failure"] += 1
            failures.append(f"{code}: {err.strip()}")
            assert n == 0, (content, code, err)
    return counts


def _run_phase(runtime: Path, data: Path, phase: str, kill: object, kills: int, rng: random.Random,
               failures: list[str]) -> dict[str, int]:
    threads, results = _clients(runtime, data, phase)
    done = 0
    while done < kills and any(t.is_alive() for t in threads):
        time.sleep(rng.uniform(0.2, 1.5))
        done += bool(kill())  # type: ignore[operator]
    for t in threads:
        t.join(timeout=600)
    assert len(results) == CLIENTS * CALLS
    counts = _judge(results, _stored(data), failures)
    counts["kills"] = done
    return counts


@pytest.mark.slow
def test_chaos_kill_9_of_the_server_then_of_workers(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    server_kills, worker_kills = (int(k) for k in (KILLS or "3,6").split(","))
    _start(runtime)
    orphans: list[int] = []  # the children of each killed server, left to finish alone

    def kill_server() -> bool:
        assert _wait(lambda: _server_pid(runtime) is not None, 120), "no server came back"
        pid = _server_pid(runtime)
        assert pid is not None
        time.sleep(rng.uniform(0.0, 0.5))  # a random moment of the new server's life
        working = [k for k in _children(pid) if _alive(k)]  # its running worker and its spare
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        orphans.extend(working)
        return True

    def kill_worker() -> bool:
        pid = _server_pid(runtime)
        kids = [k for k in _children(pid) if _alive(k)] if pid else []
        if not kids:
            return False
        try:
            os.kill(rng.choice(kids), signal.SIGKILL)  # the busy worker or the waiting spare
        except ProcessLookupError:
            return False
        return True

    try:
        failures: list[str] = []  # the plain failures' messages
        servers = _run_phase(runtime, data, "server", kill_server, server_kills, rng, failures)
        servers["orphaned_children"] = len(orphans)
        assert _wait(lambda: not any(_alive(k) for k in orphans), 30)  # none outlives its command
        server_failures = list(failures)
        workers = _run_phase(runtime, data, "worker", kill_worker, worker_kills, rng, failures)
        print(f"\nchaos, servers killed: {servers}\nchaos, workers killed: {workers}")
        # A killed server costs its commands nothing: the workers finish and report their own status.
        assert servers["exit_0"] == servers["calls"], (servers, server_failures)
        assert servers["kills"] == server_kills
        _doctor_clean(runtime, data)
    finally:
        stop_servers(runtime)


def _long_import(tmp_path: Path, items: int) -> Path:
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps({"schema_version": "1", "insights": [
        {"content": f"import item {i}: the billing service retries webhooks {i % 13} times", "tags": [f"t{i % 7}"]}
        for i in range(items)
    ]}), encoding="utf-8")
    return draft


def _busy_worker(server: int, timeout: float = 60.0) -> int:
    """The worker running a command: the server's oldest child (the next spare forks only after it).

    One listing is both the test and the answer: a child listed a moment ago may be gone by the next
    listing (a spare reaped while the next forks), which left the second listing empty under load."""
    found: list[int] = []

    def listed() -> bool:
        found[:] = [k for k in _children(server) if _alive(k)]
        return bool(found)

    assert _wait(listed, timeout)
    return found[0]


def _stored_count(data: Path) -> int:
    return sum(_stored(data).values())


def test_server_stop_during_a_long_import_lets_it_complete(tmp_path: Path) -> None:
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    items = 8000  # about 5 s: the stop comes well inside it
    draft = _long_import(tmp_path, items)
    server = int(_start(runtime)["pid"])  # type: ignore[call-overload]
    try:
        assert _mnemon(runtime, "require", ["--data-dir", str(data), "status"]).returncode == 0
        # stdout to a file: the import prints 1.5 MB, which would fill a pipe nobody reads during the
        # stop and block the import (and so the stop) until the wait ran out
        out_file = open(tmp_path / "import.out", "w+b")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "import", str(draft)],
                                stdout=out_file, stderr=subprocess.PIPE, env=_env(runtime, "require"))
        worker = _busy_worker(server)
        time.sleep(0.3)
        assert proc.poll() is None, "the import ended before the stop: make it longer"
        # --wait: long enough for the import on a loaded machine (under the 120 s run cap)
        stop = _mnemon(runtime, "off", ["server", "stop", "--wait", "100"])
        assert proc.poll() is None or proc.returncode == 0
        _, err = proc.communicate(timeout=300)
        # It was acknowledged before the stop, so it completes (the stop waits for it) and says so.
        assert proc.returncode == 0 and err == b"", err
        out_file.seek(0)
        assert json.loads(out_file.read())["imported"] == items
        out_file.close()
        assert _stored_count(data) == items
        assert json.loads(stop.stdout)["stopped"] is True
        assert _wait(lambda: not _alive(server) and not _alive(worker), 60)
        assert _server_pid(runtime) is None
        _doctor_clean(runtime, data)
    finally:
        stop_servers(runtime)


def test_server_stop_that_outwaits_its_wait_says_stopping_not_stopped(tmp_path: Path) -> None:
    """A stop whose --wait runs out while a long import still runs in the server says so truthfully
    ("stopping", not "stopped"); the import completes and the server then exits on its own."""
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    items = 8000
    draft = _long_import(tmp_path, items)
    server = int(_start(runtime)["pid"])  # type: ignore[call-overload]
    try:
        assert _mnemon(runtime, "require", ["--data-dir", str(data), "status"]).returncode == 0
        out_file = open(tmp_path / "import.out", "w+b")  # noqa: SIM115 (closed below); a file, not a pipe: see above
        proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "import", str(draft)],
                                stdout=out_file, stderr=subprocess.PIPE, env=_env(runtime, "require"))
        _busy_worker(server)
        time.sleep(0.3)
        assert proc.poll() is None, "the import ended before the stop: make it longer"
        stop = _mnemon(runtime, "off", ["server", "stop", "--wait", "0.1"])
        assert stop.returncode == 0, stop.stderr
        assert json.loads(stop.stdout) == {"stopped": False, "stopping": True, "pid": server}
        assert b"no longer takes commands" in stop.stderr
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and err == b"", err
        out_file.seek(0)
        assert json.loads(out_file.read())["imported"] == items
        out_file.close()
        assert _wait(lambda: not _alive(server), 60)
        _doctor_clean(runtime, data)
    finally:
        stop_servers(runtime)


def test_a_worker_whose_client_is_killed_stops_and_writes_nothing_more(tmp_path: Path) -> None:
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    draft = _long_import(tmp_path, 10000)
    server = int(_start(runtime)["pid"])  # type: ignore[call-overload]
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    try:
        assert _mnemon(runtime, "require", ["--data-dir", str(data), "status"]).returncode == 0
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "import", str(draft)],
                                    stdout=out, stderr=err, env=_env(runtime, "require"))
        _busy_worker(server)
        time.sleep(0.5)
        worker = _busy_worker(server)  # by now the import's: the oldest child
        proc.kill()
        proc.wait(timeout=30)
        assert _wait(lambda: not _alive(worker), 30), "the worker outlived its client"
        assert out_path.read_bytes() == b"" and err_path.read_bytes() == b""  # nothing on the "terminal"
        assert _alive(server)
        # The import stopped at a safe point: what it wrote is whole, and the server serves on.
        again = _mnemon(runtime, "require", ["--data-dir", str(data), "remember", "--no-diff", "after the kill"])
        assert again.returncode == 0, again.stderr
        _doctor_clean(runtime, data)
    finally:
        stop_servers(runtime)


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["remember", "--help"], []])
def test_version_and_help_leave_no_server_running(tmp_path: Path, args: list[str]) -> None:
    runtime = _runtime(tmp_path)
    proc = _mnemon(runtime, "auto", args)
    assert proc.stdout or proc.stderr
    # a background start opens its log (server-<key>.log) before the client exits: there is none
    assert list(runtime.glob("mnemon-*/server-*")) == []
    # while a server runs, they are served by it like any command (and still start nothing new)
    _start(runtime)
    try:
        served = _mnemon(runtime, "auto", args)
        assert (served.returncode, served.stdout) == (proc.returncode, proc.stdout)
    finally:
        stop_servers(runtime)


def test_an_upgrade_and_the_idle_exit_let_a_running_import_finish(tmp_path: Path) -> None:
    """A server of a copy of the package with a 1 s idle exit runs a long import; meanwhile the idle
    time passes and the copy's files change (an upgrade in place), and a client finds the server
    stale: the server stops, and the import still completes with its true status."""
    copy = tmp_path / "copy"
    for name in ("mnemon", "kernels"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    items = 8000
    draft = _long_import(tmp_path, items)
    env = {**_env(runtime, "off"), "PYTHONPATH": str(copy), "NUMBA_DISABLE_JIT": "1", "MNEMON_SERVER_IDLE": "1s"}
    run = lambda mode, *args: subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True,  # noqa: E731
                                             env={**env, "MNEMON_SERVER": mode}, cwd=tmp_path, timeout=120)
    try:
        server = int(json.loads(run("off", "server", "start").stdout)["pid"])
        proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "import", str(draft)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**env, "MNEMON_SERVER": "require"},
                                cwd=tmp_path)
        worker = _busy_worker(server)
        time.sleep(1.5)  # past the idle time
        assert proc.poll() is None, "the import ended too soon: make it longer"
        assert _alive(server)  # the idle exit waits for running commands
        init = copy / "mnemon" / "__init__.py"
        init.write_text(init.read_text().replace('__version__ = "0.3.0"', '__version__ = "0.3.1"'))
        assert run("auto", "--version").stdout == b"mnemon version 0.3.1\n"  # in-process: the server is stale
        assert proc.poll() is None, "the import ended too soon: make it longer"
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and err == b"", err
        assert json.loads(out)["imported"] == items and _stored_count(data) == items
        assert _wait(lambda: not _alive(server) and not _alive(worker), 60)
    finally:
        stop_servers(runtime)


def test_a_worker_killed_before_it_took_go_is_not_in_doubt(tmp_path: Path) -> None:
    """The waiting spare is stopped, handed a request, then killed before it could read GO: the
    server knows nothing ran (no TOOK), tells the client so, and the client has the command run
    once elsewhere: exit 0, stored once, no message."""
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    server = int(_start(runtime)["pid"])  # type: ignore[call-overload]
    try:
        assert _mnemon(runtime, "require", ["--data-dir", str(data), "status"]).returncode == 0
        assert _wait(lambda: [k for k in _children(server) if _alive(k)], 60)
        time.sleep(1.0)  # the new spare has primed and rehearsed: it waits for a request
        spare = [k for k in _children(server) if _alive(k)][-1]
        os.kill(spare, signal.SIGSTOP)
        content = "handed to a worker that never took it"
        proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "remember", "--no-diff",
                                 content], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(runtime, "require"))
        time.sleep(1.5)  # connected, acknowledged, GO sent: all queued at the stopped spare
        assert proc.poll() is None
        os.kill(spare, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and err == b"", err
        assert json.loads(out)["content"] == content
        assert _stored(data) == {content: 1}
    finally:
        stop_servers(runtime)
