"""A real gateway for the tests: ``mnemon mcp serve --http`` as its own process on a free loopback
port, its stderr kept in a file (the tests read the log for tokens), tokens made by the CLI."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import REPO

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-06-18"}


# (Here, not in conftest: pytest's conftest module and an imported tests.conftest are two modules.)
# A remote test store's directory (the client's registration) -> the gateway's store directory behind it, so that
# a test that checks what a command stored reads the store the gateway wrote (its SQLite file, or its schema).
SERVER_STORES: dict[Path, Path] = {}


def store_dir(data_dir: Path, store: str = "default") -> Path:
    """The directory of ``store``'s database: the gateway's when the test's store is remote."""
    local = data_dir / "data" / store
    return SERVER_STORES.get(local, local)


def unsigned(detail: str) -> str:
    """An oplog entry's detail without the ``[token NAME] `` a gateway puts in front of what a token wrote."""
    if detail.startswith("[token ") and "] " in detail:
        return detail.split("] ", 1)[1]
    return detail


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["MNEMON_SERVER"] = "off"
    env["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"  # never a real embedder
    env.update(extra or {})
    return env


def mnemon(data_dir: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
           check: bool = True) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *args], input=stdin,
                          capture_output=True, env=environment(env), timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr.decode()
    return proc


def create_token(data_dir: Path, name: str, store: str, *flags: str) -> str:
    out = mnemon(data_dir, "mcp", "token", "create", name, "--store", store, *flags).stdout
    return str(json.loads(out)["token"])


class Gateway:
    """One gateway process; ``stop()`` ends it (SIGTERM), ``kill()`` is kill -9; ``with`` stops it at the end."""

    def __init__(self, data_dir: Path, log: Path, *flags: str, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log = log
        self.flags = flags
        self.start()

    def start(self) -> None:
        self.log_fh = open(self.log, "ab")  # noqa: SIM115 (kept open for the process's life)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnemon", "--data-dir", str(self.data_dir), "mcp", "serve", "--http",
             "--port", str(self.port), *self.flags],
            stdout=self.log_fh, stderr=self.log_fh, env=environment(), start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("gateway did not start")

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def post(self, body: bytes | dict[str, Any] | list[Any], token: str | None = None, path: str = "/mcp",
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        all_headers = dict(HEADERS)
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("POST", path, body=raw, headers=all_headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def call(self, token: str, tool: str, arguments: dict[str, Any], path: str = "/mcp") -> tuple[int, Any]:
        status, body = self.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": tool, "arguments": arguments}}, token, path)
        return status, json.loads(body) if body else None

    def family(self) -> set[int]:
        """The gateway's descendants (its forkserver and command workers), from /proc."""
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        found, frontier = set(), {self.proc.pid}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
            found |= frontier
        return found

    def stop(self) -> None:
        if self.log_fh.closed:  # stopped or killed already
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)
        self.log_fh.close()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=20)
        self.log_fh.close()


def serve_store(root: Path, *flags: str, token: str = "alice", store: str = "team") -> tuple[Gateway, str]:
    """The usual start of a gateway test: data dir ``root/server`` with ``store`` and a write token named ``token``
    for it, behind a running gateway (log ``root/gateway.log``) started with ``flags``; (gateway, the token).
    The gateway's ``data_dir`` is the data dir; ``with gateway:`` stops it."""
    data = root / "server"
    mnemon(data, "store", "create", store)
    secret = create_token(data, token, store)
    return Gateway(data, root / "gateway.log", *flags), secret


def alive(pids: set[int], within: float) -> set[int]:
    """Those of ``pids`` still running (zombies count as gone) after waiting up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        left = set()
        for pid in pids:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    left.add(pid)
            except (OSError, IndexError):
                continue
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)

