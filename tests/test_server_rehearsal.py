"""A spare worker's rehearsal (mnemon.server.rehearsal): it pre-copies the pages the everyday
commands write, and must never cost a client more than it saves: a request waits at most for the
priming (one short command), never for the long rehearsal; a rehearsal that fails switches
rehearsing off, and a request handed over meanwhile runs once; its scratch copies never pile up or
outlive the server; a burst of calls is served correctly. Real servers in private runtime
directories, commands as whole processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from test_server import _env, _mnemon, _start, _wait

from mnemon.server import paths
from tests.conftest import REPO, stop_servers

# A server whose spares rehearse with ``run`` replaced (the daemon and everything else as shipped).
_SERVER = textwrap.dedent("""
    import os, sys, time
    import mnemon.server.rehearsal as rehearsal

    def slow(self, interrupted, phase):
        if phase == 0:
            return  # primed at once
        os.mkdir(self._copy(os.getpid()))  # its scratch copy, as a real rehearsal's first step makes
        time.sleep(20)  # one long step of the second phase that never looks at its channel

    def failing(self, interrupted, phase):
        raise RuntimeError("rehearsal broke")

    def slow_failing(self, interrupted, phase):
        time.sleep(3)  # a request is handed over meanwhile, and waits for the priming
        raise RuntimeError("priming broke")

    real = rehearsal.Rehearsal.run

    def logged(self, interrupted, phase):
        started = time.monotonic()
        real(self, interrupted, phase)
        with open(os.environ["REHEARSAL_LOG"], "a") as log:
            log.write(f"{os.getpid()} {phase} {started} {time.monotonic()}\\n")

    rehearsal.Rehearsal.run = {"slow": slow, "failing": failing, "logged": logged, "slow_failing": slow_failing}[sys.argv[1]]
    from mnemon.server.daemon import main
    os._exit(main())
""")


def _scratch(runtime: Path) -> list[Path]:
    """The scratch directory of the server of this runtime directory, if it exists."""
    path = Path(os.fsdecode(paths.scratch_path({k.encode(): v.encode() for k, v in _env(runtime, "off").items()})))
    return [path] if path.exists() else []


def _running(runtime: Path) -> bool:
    return bool(list(runtime.glob("mnemon-*/server-*.sock")))


@contextmanager
def _patched_server(runtime: Path, mode: str, **extra: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, mode], env=_env(runtime, "off", **extra), cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait(lambda: _running(runtime), 120), "the server never listened"
        yield proc
    finally:
        proc.terminate()  # SIGTERM, as ``server stop`` sends; reaped here (stop_servers would wait on the zombie)
        proc.wait(timeout=60)


def _runtime(tmp_path: Path) -> Path:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    return runtime


def test_spares_rehearse_on_private_copies_that_go_with_the_rehearsal_and_the_server(tmp_path: Path) -> None:
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    _start(runtime)
    try:
        (scratch,) = _scratch(runtime)
        for args in (["remember", "Rehearsed spares serve this note", "--no-diff"], ["status"],
                     ["recall", "rehearsed note"], ["search", "note"]):
            on = _mnemon(runtime, "require", ["--data-dir", str(data), *args])
            assert on.returncode == 0, on.stderr
        # once the next spare has rehearsed, only the template is left: each copy goes with its rehearsal
        assert _wait(lambda: sorted(p.name for p in scratch.iterdir()) == ["template"], 30)
        assert (scratch.stat().st_mode & 0o777) == 0o700
    finally:
        stop_servers(runtime)
    assert _scratch(runtime) == []


def test_a_request_never_waits_for_the_long_rehearsal(tmp_path: Path) -> None:
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    with _patched_server(runtime, "slow"):
        # meanwhile the first spare is in its 20 s step (the priming passes at once: the second phase)
        assert _mnemon(runtime, "off", ["--data-dir", str(data), "remember", "A note", "--no-diff"]).returncode == 0
        off = _mnemon(runtime, "off", ["--data-dir", str(data), "status"])
        (scratch,) = _scratch(runtime)
        rehearsing = [p for p in scratch.iterdir() if p.name.startswith("spare-")]
        assert len(rehearsing) == 1
        started = time.monotonic()
        on = _mnemon(runtime, "require", ["--data-dir", str(data), "status"])
        elapsed = time.monotonic() - started
        # the rehearsing spare was killed, not left to compete for the CPU; its copy went with it
        assert _wait(lambda: not rehearsing[0].exists(), 10)
    assert on.returncode == 0 and on.stdout == off.stdout and on.stderr == off.stderr
    assert elapsed < 10, f"the served call waited {elapsed:.1f} s: it was handed to the rehearsing spare"


def test_a_failing_rehearsal_switches_rehearsing_off_and_serving_goes_on(tmp_path: Path) -> None:
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    with _patched_server(runtime, "failing") as server:
        assert _wait(lambda: _scratch(runtime) == [], 30)  # the first spare failed: the template went
        for _ in range(3):
            on = _mnemon(runtime, "require", ["--data-dir", str(data), "status"])
            assert on.returncode == 0, on.stderr
        assert server.poll() is None
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
        assert _wait(lambda: len(children.read_text().split()) == 1, 30)  # one waiting spare, no failing loop
        time.sleep(0.5)
        assert len(children.read_text().split()) == 1
    assert os.path.exists(data / "data" / "default" / "mnemon.db")


def test_a_burst_of_back_to_back_calls_is_served_correctly(tmp_path: Path) -> None:
    """Calls with no gap between them (a hook script, an agent's loop) each find a spare that has not
    been asked to rehearse yet, or one forked at once: every call is served, in order, with the
    output an in-process run gives."""
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    _start(runtime)
    try:
        served = []
        for i in range(6):  # back to back: each call starts as soon as the previous one has exited
            remember = _mnemon(runtime, "require", ["--data-dir", str(data), "remember", f"Burst note {i} about caching",
                                                    "--no-diff"])
            assert remember.returncode == 0, remember.stderr
            insight = json.loads(remember.stdout)["id"]
            show = _mnemon(runtime, "require", ["--data-dir", str(data), "show", insight])
            assert show.returncode == 0 and json.loads(show.stdout)["content"] == f"Burst note {i} about caching"
            status = _mnemon(runtime, "require", ["--data-dir", str(data), "status"])
            assert status.returncode == 0 and json.loads(status.stdout)["total_insights"] == i + 1
            served.append(insight)
        found = _mnemon(runtime, "require", ["--data-dir", str(data), "search", "Burst caching", "--limit", "10"])
        assert found.returncode == 0 and sorted(r["id"] for r in json.loads(found.stdout)) == sorted(served)
        # the same reads in-process (after the burst) print what the last served ones printed
        last = [["status"], ["show", served[-1]]]
        for args in last:
            off = _mnemon(runtime, "off", ["--data-dir", str(data), *args])
            on = _mnemon(runtime, "require", ["--data-dir", str(data), *args])
            assert (on.returncode, on.stderr) == (off.returncode, off.stderr) == (0, b"")
            assert _strip_access(on.stdout) == _strip_access(off.stdout)
    finally:
        stop_servers(runtime)
    assert _scratch(runtime) == []


def _strip_access(out: bytes) -> object:
    """A command's JSON without the access counters that each ``show`` moves."""
    value = json.loads(out)
    if isinstance(value, dict):
        for key in ("access_count", "last_accessed_at"):
            value.pop(key, None)
    return value


def test_a_spare_primes_at_once_and_rehearses_the_rest_after_a_quiet_gap(tmp_path: Path) -> None:
    from mnemon.server.daemon import REHEARSE_AFTER

    runtime, data, log = _runtime(tmp_path), tmp_path / "data", tmp_path / "rehearsals"
    with _patched_server(runtime, "logged", REHEARSAL_LOG=str(log)):
        assert _wait(lambda: log.exists() and len(log.read_text().splitlines()) >= 2, 60)
        on = _mnemon(runtime, "require", ["--data-dir", str(data), "status"])
        assert on.returncode == 0, on.stderr
        assert _wait(lambda: len(log.read_text().splitlines()) >= 4, 60)  # the next spare, both phases
    runs = [line.split() for line in log.read_text().splitlines()]
    by_spare: dict[str, list[tuple[int, float, float]]] = {}
    for pid, phase, started, ended in runs:
        by_spare.setdefault(pid, []).append((int(phase), float(started), float(ended)))
    assert len(by_spare) >= 2
    for phases in by_spare.values():
        assert [p for p, _, _ in phases] == [0, 1]  # primed first, the rest once asked
        # asked only once the loop has been quiet for REHEARSE_AFTER since the fork, and never before
        # the priming ended; the priming begins a few ms after the fork (10 ms of slack)
        assert phases[1][1] >= phases[0][2]
        assert phases[1][1] - phases[0][1] >= REHEARSE_AFTER - 0.01


def test_a_request_handed_to_a_spare_whose_priming_fails_runs_in_process_once(tmp_path: Path) -> None:
    """A request may wait for the spare's priming (one short command); if the priming fails the
    spare never took the request: the client runs it in-process, once, and serving goes on."""
    runtime, data = _runtime(tmp_path), tmp_path / "data"
    with _patched_server(runtime, "slow_failing") as server:
        note = "Written once although its spare failed"
        on = _mnemon(runtime, "require", ["--data-dir", str(data), "remember", note, "--no-diff"])
        assert on.returncode == 0 and on.stderr == b"", on.stderr
        assert json.loads(on.stdout)["content"] == note
        again = _mnemon(runtime, "require", ["--data-dir", str(data), "status"])  # rehearsing is off now
        assert again.returncode == 0 and json.loads(again.stdout)["total_insights"] == 1
        assert server.poll() is None
