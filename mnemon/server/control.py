"""Start, stop and inspect a user's server from outside it (``mnemon server ...`` and the client).

A server holds an exclusive ``flock`` on its lock file for its whole life, so "is one running or
starting?" is one non-blocking lock attempt, and concurrent first calls start one server: each
spawned process that cannot take the lock exits at once. The pid file (written once the socket
listens) says who holds it. No heavy imports: this runs on the client's fallback path.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mnemon.server import paths

DEFAULT_IDLE_SECONDS = 30 * 60.0


def idle_seconds(text: str) -> float:
    """``MNEMON_SERVER_IDLE``: a Go duration (``30m``, ``90s``) or plain seconds; default 30 minutes."""
    text = text.strip()
    if not text:
        return DEFAULT_IDLE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = _parse_duration(text)
    if not value > 0 or value == float("inf"):  # NaN and inf too: a deadline that is never (or NaN) is no idle time
        raise ValueError(text)
    return value


def _parse_duration(text: str) -> float:
    from mnemon import config

    return config.parse_duration(text)


class ServerInfo:
    """What the pid file says about a live server."""

    __slots__ = ("pid", "fingerprint", "started", "idle_seconds")

    def __init__(self, pid: int, fingerprint: str, started: float, idle_seconds: float) -> None:
        self.pid, self.fingerprint, self.started, self.idle_seconds = pid, fingerprint, started, idle_seconds


def held(environ: dict[bytes, bytes]) -> bool:
    """True while some server (starting, serving or draining) holds this installation's lock."""
    try:
        fd = os.open(paths.server_path(environ, "lock"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def info(environ: dict[bytes, bytes]) -> ServerInfo | None:
    """The live server's pid file, or None when no server holds the lock."""
    if not held(environ):
        return None
    try:
        with open(paths.server_path(environ, "pid"), "rb") as f:
            pid, fp, started, idle = f.read().decode().split("\n")[:4]
        return ServerInfo(int(pid), fp, float(started), float(idle))
    except (OSError, ValueError):
        return None  # still preloading: the pid file appears once the socket listens


def spawn(environ: dict[bytes, bytes]) -> bool:
    """Start a detached server (own session, stdin and stdout on /dev/null, stderr appended to
    ``server-<key>.log``) unless one holds the lock."""
    directory = paths.runtime_dir(environ)
    if not paths.ensure_private_dir(directory) or held(environ):
        return False
    env = {os.fsdecode(k): os.fsdecode(v) for k, v in environ.items()}
    # stderr to a log beside the socket: a server that cannot start leaves its reason there
    log = os.open(paths.server_path(environ, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        subprocess.Popen(
            [sys.executable, "-m", "mnemon.server"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, start_new_session=True, close_fds=True, cwd="/", env=env,
        )
    finally:
        os.close(log)
    return True


def wait_ready(environ: dict[bytes, bytes], timeout: float) -> ServerInfo | None:
    """Wait until a server has written its pid file (it listens from then on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = info(environ)
        if found is not None:
            return found
        time.sleep(0.02)
    return None


def wait_current(environ: dict[bytes, bytes], fingerprint: str, timeout: float) -> ServerInfo | None:
    """Start a server if none holds the lock and wait until one of these files listens; a stale
    one (other files) is let go first: it exits once its running commands end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = info(environ)
        if found is not None and found.fingerprint == fingerprint:
            return found
        if not held(environ):
            spawn(environ)
        time.sleep(0.02)
    return None


@dataclass(frozen=True)
class Stop:
    """What ``stop`` saw: the server it asked to exit, and whether it was gone before the wait ran out
    (a server finishing a long command, such as a large import, exits later on its own)."""

    server: ServerInfo
    gone: bool


def stop(environ: dict[bytes, bytes], timeout: float = 30.0) -> Stop | None:
    """Ask the live server to exit (SIGTERM: it stops listening, lets running commands finish)
    and wait up to ``timeout`` seconds until it has released its lock and is gone; None when none ran."""
    found = info(environ)
    if found is None and held(environ):
        # a server still preloading (just started in the background by a first call) holds the lock
        # but has no pid file yet: stop it once it listens, rather than say "not running" and leave it
        found = wait_ready(environ, timeout)
    if found is None:
        return None
    try:
        os.kill(found.pid, signal.SIGTERM)
    except ProcessLookupError:
        return Stop(found, gone=True)
    deadline = time.monotonic() + timeout
    while held(environ) or _exists(found.pid):
        if time.monotonic() >= deadline:
            return Stop(found, gone=False)
        time.sleep(0.02)
    return Stop(found, gone=True)


def _exists(pid: int) -> bool:
    """Whether the process still runs. A zombie does not: it has exited and released its lock, and
    only waits for a parent to reap it, which an init that reaps lazily (as in some containers and
    micro-VMs) may not do for a long time; counting it as alive made ``stop`` wait its whole timeout."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        stat = ""
    if stat:
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
