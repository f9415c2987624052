"""The warm command server (issue 10): same behaviour as in-process, concurrency, faults, safety.

Every server here runs in a private runtime directory of its own and is stopped by the test (the
session fixture in conftest.py also stops whatever is left in the session's directory). Commands
run as whole processes (``python -m mnemon``) with ``MNEMON_SERVER=require`` (served or fail) or
``off`` (in-process), so a difference between the two is a difference a user would see.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

from mnemon.client import KILLED
from tests.conftest import REPO, stop_servers
from tests.embed_server import EmbedServer

CLOSED = "http://127.0.0.1:9"


def _env(runtime: Path, mode: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(XDG_RUNTIME_DIR=str(runtime), MNEMON_SERVER=mode, MNEMON_EMBED_ENDPOINT=CLOSED, PYTHONPATH=str(REPO))
    env.update(extra)
    return env


def _mnemon(runtime: Path, mode: str, args: list[str], *, stdin: bytes = b"", cwd: Path | str = REPO,
            **extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], input=stdin, capture_output=True,
                          env=_env(runtime, mode, **extra), cwd=cwd, timeout=120)


def _start(runtime: Path, **extra: str) -> dict[str, object]:
    proc = _mnemon(runtime, "off", ["server", "start"], **extra)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["running"] is True and report["current"] is True
    return report


def _children(pid: int) -> list[int]:
    """Children of ``pid``, oldest first (the busy worker before the spare forked after it)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    started: list[tuple[int, int]] = []
    for kid in kids:
        try:  # a child listed a moment ago may be gone already (a spare reaped): it is no child any more
            started.append((int(Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()[19]), kid))
        except OSError:
            continue
    return [kid for _, kid in sorted(started)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(predicate: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def _sound(data_dir: Path) -> None:
    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def _count(data_dir: Path, content: str) -> int:
    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        return conn.execute("SELECT COUNT(*) FROM insights WHERE content = ? AND deleted_at IS NULL",
                            (content,)).fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One server for this module's behaviour tests, in a runtime directory of its own."""
    path = tmp_path_factory.mktemp("served")
    path.chmod(0o700)
    _start(path)
    try:
        yield path
    finally:
        stop_servers(path)


def _both(runtime: Path, args: list[str], **kw: object) -> tuple[subprocess.CompletedProcess[bytes], ...]:
    return _mnemon(runtime, "off", args, **kw), _mnemon(runtime, "require", args, **kw)  # type: ignore[arg-type]


_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def _normal(text: bytes, data_dir: Path) -> bytes:
    return _STAMP.sub(b"<time>", _UUID.sub(b"<id>", text.replace(str(data_dir).encode(), b"<dir>")))


# --- same behaviour both ways --------------------------------------------------------------------

def test_outputs_exit_codes_and_stderr_are_byte_identical(runtime: Path, tmp_path: Path) -> None:
    off_dir, on_dir = tmp_path / "off", tmp_path / "on"
    steps = [
        ["remember", "Chose SQLite because the store must stay one file", "--cat", "decision", "--no-diff"],
        ["remember", "x", "--imp", "9"],  # Error line, exit 1
        ["remember", "--bogus"],  # usage error
        ["status"], ["search", "SQLite"], ["recall", "why SQLite"], ["--help"], ["remember", "--help"],
        ["--version"], ["nosuch"], ["store", "list"], [],
    ]
    for args in steps:
        off = _mnemon(runtime, "off", ["--data-dir", str(off_dir), *args])
        on = _mnemon(runtime, "require", ["--data-dir", str(on_dir), *args])
        # ids, timestamps and paths differ between the two stores; every other byte must not
        assert _normal(off.stdout, off_dir) == _normal(on.stdout, on_dir), args
        assert _normal(off.stderr, off_dir) == _normal(on.stderr, on_dir), args
        assert off.returncode == on.returncode, args


def test_undecodable_argv_stdin_cwd_umask_and_env_reach_the_worker(runtime: Path, tmp_path: Path) -> None:
    raw = b"caf\xe9 latin-1 bytes in argv"
    for mode in ("off", "require"):
        work = tmp_path / mode
        work.mkdir()
        env = _env(runtime, mode)
        argv = [os.fsencode(sys.executable), b"-m", b"mnemon", b"--data-dir", b"rel", b"remember", raw, b"--no-diff"]
        first = subprocess.run(argv, capture_output=True, env=env, cwd=work, timeout=60)
        piped = subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", "rel", "remember", "-"],
                               input="from stdin\n".encode(), capture_output=True, env=env, cwd=work, timeout=60)
        status = subprocess.run([sys.executable, "-m", "mnemon", "status"], capture_output=True,
                                env={**env, "MNEMON_DATA_DIR": str(work / "rel")}, cwd=work, timeout=60)
        db = work / "rel" / "data" / "default" / "mnemon.db"
        assert db.exists(), (mode, first.stderr)  # relative --data-dir resolved in the client's cwd
        results = (first.returncode, first.stderr, piped.returncode, json.loads(piped.stdout)["content"],
                   json.loads(status.stdout)["total_insights"], oct(db.stat().st_mode & 0o777))
        if mode == "off":
            expected = results
        else:
            assert results == expected  # noqa: F821 (set in the first round)


def test_terminal_dependent_output_is_the_same(runtime: Path, tmp_path: Path) -> None:
    """``import`` draws a progress bar only when stderr is a terminal: through a pty, both ways."""
    draft = tmp_path / "draft.json"
    items = [{"content": f"fact number {i} about pty output"} for i in range(30)]
    draft.write_text(json.dumps({"schema_version": "1", "insights": items}))
    screens = {}
    for mode in ("off", "require"):
        leader, follower = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(tmp_path / mode), "import",
                                 str(draft)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                                env=_env(runtime, mode))
        os.close(follower)
        screen = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            try:
                chunk = os.read(leader, 65536) if ready else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            screen += chunk
        out, _ = proc.communicate(timeout=60)
        os.close(leader)
        assert proc.returncode == 0, screen
        screens[mode] = (screen, _normal(out, tmp_path / mode))
    assert screens["off"] == screens["require"]
    assert screens["off"][0]  # the bar was drawn (a terminal), both ways


def test_readonly_leaves_the_database_byte_identical(runtime: Path, tmp_path: Path) -> None:
    assert _mnemon(runtime, "require", ["--data-dir", str(tmp_path), "remember", "Qdrant for vectors"]).returncode == 0
    db = tmp_path / "data" / "default" / "mnemon.db"
    before = db.read_bytes()
    for args in (["recall", "Qdrant"], ["status"], ["search", "Qdrant"]):
        assert _mnemon(runtime, "require", ["--data-dir", str(tmp_path), "--readonly", *args]).returncode == 0
    refused = _mnemon(runtime, "require", ["--data-dir", str(tmp_path), "--readonly", "remember", "x"])
    assert refused.returncode == 1 and b"unavailable with --readonly" in refused.stderr
    assert db.read_bytes() == before
    assert [p.name for p in db.parent.iterdir() if p.name.startswith("mnemon.db-")] == []


def test_sigint_mid_command_ends_as_in_process_and_the_store_stays_sound(runtime: Path, tmp_path: Path) -> None:
    outcomes = {}
    with EmbedServer(delay=30) as slow:
        for mode in ("off", "require"):
            data = tmp_path / mode
            # the default SIGINT even when pytest runs as a background job (which ignores it)
            code, out, err = _interrupted_remember(runtime, mode, data, slow, "stalls on the embedder", _sigint_default)
            outcomes[mode] = (code, err.decode().splitlines()[-1:], out)
            _sound(data)
            assert _count(data, "first fact") == 1
    assert outcomes["off"] == outcomes["require"]
    assert outcomes["off"][0] == 130


def _interrupted_remember(
    runtime: Path, mode: str, data: Path, slow: EmbedServer, text: str, preexec: Callable[[], None]
) -> tuple[int, bytes, bytes]:
    """A first remember, then ``remember TEXT`` sent SIGINT while it waits on the embedder:
    (exit status, stdout, stderr). ``preexec`` sets the child's SIGINT disposition."""
    assert _mnemon(runtime, mode, ["--data-dir", str(data), "remember", "first fact", "--no-diff"]).returncode == 0
    slow.clear()
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "remember", text],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(runtime, mode, MNEMON_EMBED_ENDPOINT=slow.url), preexec_fn=preexec)
    assert _wait(lambda: slow.requests, 60), "the command never reached the embedder"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_an_inherited_ignored_sigint_is_ignored_both_ways(runtime: Path, tmp_path: Path) -> None:
    """A client started with SIGINT ignored (a background job of a script) does not forward it: the
    command runs to its end through the server, as it does in-process."""
    outcomes = {}
    with EmbedServer(delay=1.0) as slow:
        for mode in ("off", "require"):
            data = tmp_path / mode
            code, out, _err = _interrupted_remember(runtime, mode, data, slow, "waits on the embedder", _sigint_ignored)
            outcomes[mode] = (code, json.loads(out)["action"])
            _sound(data)
            assert _count(data, "waits on the embedder") == 1
    assert outcomes["off"] == outcomes["require"] == (0, "added")


def test_mcp_and_server_commands_run_in_process(runtime: Path, tmp_path: Path) -> None:
    msg = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{}}}\n'
    proc = _mnemon(runtime, "require", ["--data-dir", str(tmp_path), "mcp", "serve"], stdin=msg)
    assert proc.returncode == 0
    reply = json.loads(proc.stdout)
    assert reply["result"]["isError"] is False and '"total_insights": 0' in reply["result"]["content"][0]["text"]
    status = json.loads(_mnemon(runtime, "require", ["server", "status"]).stdout)
    assert status["running"] is True and status["current"] is True


# --- concurrency and faults ------------------------------------------------------------------------

DRIVER = textwrap.dedent(
    """
    import os, sys, tempfile, time
    from mnemon import client

    data_dir, worker, per_worker, shared, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    contents = [f"worker {worker} writes memory number {i} about topic {i % 7}" for i in range(per_worker)]
    contents += [f"shared decision {k}: everyone agreed on it" for k in range(shared)]
    stdio = [("utf-8", "strict"), ("utf-8", "strict"), ("utf-8", "backslashreplace")]
    env, cwd = dict(os.environb), os.getcwdb()
    null = os.open(os.devnull, os.O_RDWR)
    while time.time() < start_at:
        time.sleep(0.005)
    failures = 0
    for i, content in enumerate(contents):
        with tempfile.TemporaryFile() as err:
            argv = [b"--data-dir", os.fsencode(data_dir), b"remember", content.encode(), b"--source", b"w%d" % worker]
            code = client.serve(argv, (null, null, err.fileno()), stdio, env, cwd)
            err.seek(0)
            message = err.read()
        if code != 0 or message:
            failures += 1
            sys.stderr.write(f"worker {worker} item {i}: {code}: {message!r}\\n")
    sys.exit(min(failures, 100))
    """
)


def test_eight_clients_hundred_remembers_each_through_the_server(runtime: Path, data_dir: Path) -> None:
    workers, per_worker, shared = 8, 100, 5
    start_at = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", DRIVER, str(data_dir), str(w), str(per_worker), str(shared),
                               str(start_at)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=_env(runtime, "require"))
             for w in range(workers)]
    errors = [p.communicate(timeout=300)[1].decode() for p in procs]
    assert [e for e, p in zip(errors, procs) if p.returncode != 0] == []
    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"))
    try:
        assert conn.execute("SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL").fetchone()[0] == \
            workers * per_worker + shared
        per_content = conn.execute("SELECT COUNT(*) FROM insights WHERE content LIKE 'shared decision %' "
                                   "GROUP BY content").fetchall()
        assert sorted(n for (n,) in per_content) == [1] * shared
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def _stalled_remember(runtime: Path, data: Path, slow: EmbedServer, content: str) -> subprocess.Popen[bytes]:
    slow.clear()
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "remember", content],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(runtime, "require", MNEMON_EMBED_ENDPOINT=slow.url))
    assert _wait(lambda: slow.requests, 60), "the command never reached the embedder"
    return proc


def test_kill_9_of_a_worker_mid_command(runtime: Path, tmp_path: Path) -> None:
    server = int(json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["pid"])
    content = "written while its worker is killed"
    with EmbedServer(delay=30) as slow:
        assert _mnemon(runtime, "require", ["--data-dir", str(tmp_path), "remember", "before", "--no-diff"]).returncode == 0
        proc = _stalled_remember(runtime, tmp_path, slow, content)
        worker = _children(server)[0]
        os.kill(worker, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == b""
    # The client cannot know whether a killed worker had committed: it says so, never "failed".
    assert err.decode().splitlines() == [f"Error: {KILLED}"]
    _sound(tmp_path)
    assert _count(tmp_path, content) == 0  # killed before its write: nothing half-written, never re-run
    again = _mnemon(runtime, "require", ["--data-dir", str(tmp_path), "remember", content])
    assert again.returncode == 0 and _count(tmp_path, content) == 1
    assert _alive(server)  # one worker's death costs one command, not the server


def test_kill_9_of_the_server_mid_command(tmp_path: Path) -> None:
    """The worker owns the command and its client's connection: it finishes the command and reports
    its own status after its server was killed (issue 26)."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    data = tmp_path / "data"
    server = int(_start(runtime)["pid"])  # type: ignore[call-overload]
    content = "written while the server is killed"
    try:
        with EmbedServer(delay=30) as slow:
            proc = _stalled_remember(runtime, data, slow, content)
            worker = _children(server)[0]
            os.kill(server, signal.SIGKILL)
            out, err = proc.communicate(timeout=60)  # the embedder's budget runs out: stored without a vector
        assert proc.returncode == 0 and err == b"", err
        assert json.loads(out)["content"] == content
        assert _wait(lambda: not _alive(worker), 10)  # done: the orphan ends with its command
        assert _count(data, content) == 1
        # the next call finds no server: in-process, and a fresh server starts for later calls
        auto = _mnemon(runtime, "auto", ["--data-dir", str(data), "remember", "--no-diff", "after the kill"])
        assert auto.returncode == 0 and _count(data, "after the kill") == 1
        _sound(data)
        fresh = lambda: json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout).get("pid")  # noqa: E731
        assert _wait(lambda: fresh() not in (None, server), 120)  # a new server, not the killed one's pid file
    finally:
        stop_servers(runtime)


def test_a_server_of_other_files_is_not_used_and_exits(tmp_path: Path) -> None:
    """A copy of the package runs a server; then its files change (an upgrade in place): the next
    client runs in-process with the new code and the stale server exits."""
    copy = tmp_path / "copy"
    for name in ("mnemon", "kernels"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = {**_env(runtime, "off"), "PYTHONPATH": str(copy), "NUMBA_DISABLE_JIT": "1"}
    run = lambda mode, *args: subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True,  # noqa: E731
                                             env={**env, "MNEMON_SERVER": mode}, cwd=tmp_path, timeout=120)
    try:
        started = json.loads(run("off", "server", "start").stdout)
        old = int(started["pid"])
        assert run("require", "--version").stdout == b"mnemon version 0.3.0\n"
        init = copy / "mnemon" / "__init__.py"
        init.write_text(init.read_text().replace('__version__ = "0.3.0"', '__version__ = "0.3.1"'))
        status = json.loads(run("off", "server", "status").stdout)
        assert status["running"] is True and status["current"] is False
        upgraded = run("auto", "--version")
        assert upgraded.returncode == 0 and upgraded.stdout == b"mnemon version 0.3.1\n"
        assert _wait(lambda: not _alive(old), 30), "the stale server did not exit"
        assert run("require", "--version").stdout == b"mnemon version 0.3.1\n"  # a current one took over
    finally:
        stop_servers(runtime)


def test_another_uid_cannot_connect(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to switch to another uid")
    # pytest's own temp tree is 0700: the other uid must be able to reach the runtime directory
    runtime = Path(tempfile.mkdtemp(prefix="mnemon-uid-"))
    runtime.chmod(0o755)
    sock = Path(_start(runtime)["socket"])  # type: ignore[arg-type]
    try:
        def attempt() -> str:
            """In a child that became uid 65534: connect and send a request; what happened."""
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                result = b"?"
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.settimeout(10)
                    s.connect(str(sock))
                    from mnemon.server import protocol

                    req = protocol.encode("x", b"/", 0o22, "utf-8", [("utf-8", "strict")] * 3, [b"status"], [])
                    socket.send_fds(s, [req], [0, 1, 2])
                    reply = s.recv(64)
                    result = b"answered:" + reply if reply else b"closed"
                except PermissionError:
                    result = b"permission denied"
                except OSError as exc:
                    result = f"oserror {exc.errno}".encode()
                os.write(write, result)
                os._exit(0)
            os.close(write)
            os.waitpid(pid, 0)
            with os.fdopen(read, "rb") as f:
                return f.read().decode()

        assert attempt() == "permission denied"  # the 0700 directory keeps others out
        # with the directory and socket opened up, the server itself refuses the peer's uid
        sock.parent.chmod(0o755)
        sock.chmod(0o777)
        assert attempt() in ("closed", "oserror 104", "oserror 32")  # no acknowledgement, connection dropped
        assert json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["running"] is True
    finally:
        stop_servers(runtime)
        shutil.rmtree(runtime, ignore_errors=True)


def test_fail_open_when_the_server_does_not_acknowledge(tmp_path: Path) -> None:
    """Something listens on the socket but never answers: after the short timeout the command runs
    in-process, once."""
    from mnemon.server import paths

    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    environ = {os.fsencode(k): os.fsencode(v) for k, v in _env(runtime, "auto").items()}
    directory = paths.runtime_dir(environ)
    os.mkdir(directory, 0o700)
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(paths.server_path(environ, "sock"))
    mute.listen(8)
    lock = os.open(paths.server_path(environ, "lock"), os.O_RDWR | os.O_CREAT)
    import fcntl

    fcntl.flock(lock, fcntl.LOCK_EX)  # "a server holds the lock": the client starts none
    try:
        t0 = time.monotonic()
        proc = _mnemon(runtime, "auto", ["--data-dir", str(tmp_path / "d"), "remember", "runs once", "--no-diff"])
        assert proc.returncode == 0, proc.stderr
        assert 1.5 < time.monotonic() - t0 < 60
        assert _count(tmp_path / "d", "runs once") == 1
    finally:
        mute.close()
        os.close(lock)


def test_concurrent_first_calls_start_one_server_and_idle_exit(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = _env(runtime, "auto", MNEMON_SERVER_IDLE="3s")
    try:
        procs = [subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(tmp_path / "d"), "status"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(4)]
        assert all(p.wait(timeout=120) == 0 for p in procs)
        status = lambda: json.loads(subprocess.run(  # noqa: E731
            [sys.executable, "-m", "mnemon", "server", "status"], capture_output=True, env=env, timeout=60).stdout)
        assert _wait(lambda: status()["running"], 120)
        pid = int(status()["pid"])
        assert status()["idle_exit_seconds"] == 3.0
        pid_files = list(runtime.glob("mnemon-*/server-*.pid"))
        assert len(pid_files) == 1
        assert _wait(lambda: not _alive(pid), 60), "the idle server did not exit"
        assert status()["running"] is False
        assert list(runtime.glob("mnemon-*/server-*.sock")) == []
    finally:
        stop_servers(runtime)


def test_an_idle_time_past_epolls_range_serves_and_a_non_finite_one_is_refused(tmp_path: Path) -> None:
    """MNEMON_SERVER_IDLE=720h is a valid duration, but the loop's first wait (epoll's timeout, an int of
    milliseconds: 24.8 days at most) raised OverflowError: the server died as it started and ``server
    start`` waited its whole two minutes for "did not start". inf, 1e400 and nan died the same way."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    try:
        report = _start(runtime, MNEMON_SERVER_IDLE="720h")
        assert report["idle_exit_seconds"] == 720 * 3600
        served = _mnemon(runtime, "require", ["--data-dir", str(tmp_path / "d"), "status"])
        assert served.returncode == 0, served.stderr
        assert json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["pid"] == report["pid"]
        assert json.loads(_mnemon(runtime, "off", ["server", "stop"]).stdout)["stopped"] is True
        for value in ("nan", "inf", "1e400"):
            refused = _mnemon(runtime, "off", ["server", "start"], MNEMON_SERVER_IDLE=value)
            assert (refused.returncode, refused.stdout) == (1, b"")
            assert refused.stderr.decode() == "Error: invalid MNEMON_SERVER_IDLE (use a duration such as 30m, or seconds)\n"
    finally:
        stop_servers(runtime)


def test_server_start_stop_status(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    bad = _mnemon(runtime, "off", ["server", "start"], MNEMON_SERVER_IDLE="soon")
    assert bad.returncode == 1 and bad.stderr.decode().startswith("Error: invalid MNEMON_SERVER_IDLE")
    assert json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["running"] is False
    first = _start(runtime)
    again = _start(runtime)
    assert again["pid"] == first["pid"]  # one server per installation
    for value in ("nan", "inf"):  # a deadline of "never": refused, and the server is left running
        refused = _mnemon(runtime, "off", ["server", "stop", "--wait", value])
        assert (refused.returncode, refused.stdout, refused.stderr.decode()) == (
            1, b"", f"Error: --wait must be a finite number, got {value}\n")
    assert json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["pid"] == first["pid"]
    stopped = json.loads(_mnemon(runtime, "off", ["server", "stop"]).stdout)
    assert stopped == {"stopped": True, "pid": first["pid"]}
    assert not _alive(int(first["pid"]))  # type: ignore[call-overload]
    assert json.loads(_mnemon(runtime, "off", ["server", "stop"]).stdout) == {"stopped": False}
    off = _mnemon(runtime, "off", ["--data-dir", str(tmp_path / "d"), "status"])
    assert off.returncode == 0 and list(runtime.glob("mnemon-*/server-*.pid")) == []  # off starts none


def test_server_start_says_why_its_socket_directory_is_unsafe(tmp_path: Path) -> None:
    """It refused without a reason, and only after waiting out its two-minute start timeout."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    directory = runtime / f"mnemon-{os.getuid()}"

    def refusal() -> str:
        proc = subprocess.run([sys.executable, "-m", "mnemon", "server", "start"], capture_output=True,
                              env=_env(runtime, "off"), cwd=REPO, timeout=60)  # at once, not after START_TIMEOUT
        assert (proc.returncode, proc.stdout) == (1, b"")
        prefix = f"Error: mnemon server cannot use its socket directory {directory}: it "
        err = proc.stderr.decode()
        assert err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1, err
        return err[len(prefix):-1]

    directory.mkdir()
    directory.chmod(0o755)
    assert refusal() == "is open to other users (mode 0755; it must be 0700)"
    assert list(directory.iterdir()) == [] and directory.stat().st_mode & 0o777 == 0o755  # nothing made or changed
    directory.rmdir()
    directory.symlink_to(tmp_path)
    assert refusal() == "is a symbolic link, not a directory"
    directory.unlink()
    if os.getuid() == 0:  # only root can give the directory to another user
        directory.mkdir(mode=0o700)
        os.chown(directory, 65534, -1)
        assert refusal() == "is owned by uid 65534, not by this user (uid 0)"
        directory.rmdir()
    assert list(runtime.glob("mnemon-*/server-*")) == []
    assert json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["running"] is False


def test_sigterm_the_moment_the_pid_file_appears_still_unlinks_the_socket(tmp_path: Path) -> None:
    # `server stop` sends SIGTERM as soon as it reads the pid file, so the server's handlers must
    # be in place before that file is written; under the default action it would die at once and
    # leave its socket behind. The server here signals itself right after the pid file's rename.
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    script = textwrap.dedent("""
        import os, signal, sys
        real_replace = os.replace
        def replace(src, dst, *args, **kwargs):
            real_replace(src, dst, *args, **kwargs)
            if os.fsencode(dst).endswith(b".pid"):
                os.kill(os.getpid(), signal.SIGTERM)
        os.replace = replace
        from mnemon.server.daemon import main
        sys.exit(main())
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", script], env=_env(runtime, "off"), cwd=REPO,
                              capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert list(runtime.glob("mnemon-*/server-*.sock")) == []
        assert list(runtime.glob("mnemon-*/server-*.pid")) == []
    finally:
        stop_servers(runtime)


def test_stop_right_after_a_background_start_stops_the_starting_server(tmp_path: Path) -> None:
    # A first call under auto runs in-process and spawns the server, which preloads before it
    # listens; a stop in that window must wait for it and stop it, not report that none runs.
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    try:
        first = _mnemon(runtime, "auto", ["--data-dir", str(tmp_path / "d"), "status"])
        assert first.returncode == 0, first.stderr
        stopped = json.loads(_mnemon(runtime, "off", ["server", "stop"]).stdout)
        assert stopped["stopped"] is True
        assert not _alive(int(stopped["pid"]))
        assert json.loads(_mnemon(runtime, "off", ["server", "status"]).stdout)["running"] is False
        assert list(runtime.glob("mnemon-*/server-*.sock")) == []
    finally:
        stop_servers(runtime)
