"""The gateway's deadlines (issue 25, "timeouts"), with raw sockets on 127.0.0.1.

uvicorn alone bounds only the idle time between requests: a client that connects and says nothing,
trickles its headers a byte at a time, or announces a body and never sends it held its connection
forever (all three still open after 20 s, measured before ``gateway.deadlines``). Here each is cut
off within its deadline while the gateway keeps answering everyone else, and a tool call that runs
over ``--call-timeout`` gets an error that says whether its command ran.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the gateway tests need mnemon[gateway] (the MCP SDK)")

from tests.gateway_server import Gateway, create_token, mnemon  # noqa: E402

HEAD = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n" \
       "Accept: application/json, text/event-stream\r\n"


class Slow:
    """One gateway with short deadlines over a store ``team`` and a write token."""

    def __init__(self, root: Path) -> None:
        self.data = root / "server"
        mnemon(self.data, "store", "create", "team")
        self.token = create_token(self.data, "alice", "team")
        self.gateway = Gateway(self.data, root / "gateway.log", "--rate-limit", "0", "--header-timeout", "1",
                               "--body-timeout", "1", "--call-timeout", "0.5")

    def head(self) -> bytes:
        return HEAD.format(port=self.gateway.port).encode()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.gateway.port), timeout=10)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slow]:
    world = Slow(tmp_path_factory.mktemp("slow"))
    try:
        yield world
    finally:
        world.gateway.stop()


def total(slow: Slow) -> int:
    out = mnemon(slow.data, "--store", "team", "--readonly", "status").stdout
    return int(json.loads(out)["total_insights"])


def closed_after(sock: socket.socket) -> tuple[float, bytes]:
    """Seconds until the gateway closes ``sock`` (reading whatever it sent first), and what it sent."""
    started, received = time.monotonic(), b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return time.monotonic() - started, received
        received += chunk


def test_a_silent_connection_is_closed_at_the_header_deadline(slow: Slow) -> None:
    with slow.connect() as sock:
        seconds, sent = closed_after(sock)
    assert 0.8 <= seconds <= 4, seconds
    assert sent == b""


def test_headers_trickled_byte_by_byte_are_cut_off_and_others_are_served_meanwhile(slow: Slow) -> None:
    """The slowloris attack: a byte every 0.1 s would keep a connection forever without a head deadline."""
    socks = [slow.connect() for _ in range(20)]
    stop = threading.Event()
    closed: dict[int, float] = {}
    started = time.monotonic()

    def trickle(i: int, sock: socket.socket) -> None:
        for byte in slow.head() * 100:
            if stop.is_set():
                return
            try:
                sock.send(bytes([byte]))
            except OSError:  # the gateway closed it
                closed[i] = time.monotonic() - started
                return
            time.sleep(0.1)

    threads = [threading.Thread(target=trickle, args=(i, s)) for i, s in enumerate(socks)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        status, body = slow.gateway.call(slow.token, "status", {})  # served while 20 connections trickle
        assert status == 200 and not body["result"]["isError"]
        assert time.monotonic() - t0 < 5
        for sock in socks:  # every trickling connection is closed by the gateway, within its deadline
            seconds, _ = closed_after(sock)
            assert time.monotonic() - started <= 5, seconds
    finally:
        stop.set()
        for t in threads:
            t.join()
        for sock in socks:
            sock.close()


def test_a_body_announced_but_never_sent_is_408_and_stores_nothing(slow: Slow) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "remember", "arguments": {"content": "half a body never lands"}}}).encode()
    with slow.connect() as sock:
        sock.sendall(slow.head() + f"Authorization: Bearer {slow.token}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                     + body[: len(body) // 2])
        seconds, sent = closed_after(sock)
    assert 0.8 <= seconds <= 4, seconds
    assert sent.startswith(b"HTTP/1.1 408 "), sent[:80]
    assert b"request body not received within 1 s" in sent
    assert total(slow) == 0


def test_a_kept_alive_connection_gets_the_same_deadline_for_its_next_head(slow: Slow) -> None:
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "status", "arguments": {}}}).encode()
    with slow.connect() as sock:
        sock.sendall(slow.head() + f"Authorization: Bearer {slow.token}\r\nContent-Length: {len(request)}\r\n\r\n".encode()
                     + request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHo")  # then nothing more
        seconds, _ = closed_after(sock)
    assert seconds <= 4, seconds


def test_a_call_over_the_call_timeout_is_a_clear_error_and_its_import_completes(slow: Slow) -> None:
    draft = {"schema_version": "1", "insights": [
        # 15,000: several seconds on a quiet machine (3,000 once fit inside the 0.5 s timeout after import got faster)
        {"content": f"Service {i} pages the on-call rotation {i % 7} when its error budget burns"} for i in range(15000)]}
    started = time.monotonic()
    status, body = slow.gateway.call(slow.token, "import", {"draft": draft})
    assert status == 200
    result = body["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text == ("Error: the import call ran over 0.5 s; the gateway has taken it and it may yet complete "
                    "(check before repeating a write)"), text
    assert time.monotonic() - started < 5
    # The import goes on (in its committed batches, engine/bulk: readers in other workers see them land) and
    # completes: nothing is lost or stored twice.
    deadline = time.monotonic() + 120
    counts = []
    while time.monotonic() < deadline:
        status, body = slow.gateway.call(slow.token, "status", {})
        if status == 200 and not body["result"]["isError"]:
            counts.append(json.loads(body["result"]["content"][0]["text"])["total_insights"])
            if counts[-1] == 15000:
                break
        time.sleep(0.5)
    assert counts == sorted(counts) and counts[-1] == 15000, counts


def test_calls_that_never_got_a_worker_say_they_did_not_run_and_did_not(tmp_path: Path) -> None:
    """One worker busy with a long import: calls queued behind it past the deadline are never run."""
    data = tmp_path / "server"
    mnemon(data, "store", "create", "team")
    token = create_token(data, "alice", "team")
    gateway = Gateway(data, tmp_path / "gateway.log", "--rate-limit", "0", "--workers", "1", "--call-timeout", "1")
    try:
        draft = {"schema_version": "1", "insights": [
            {"content": f"Batch job {i} retries its upload {i % 5} times before paging"} for i in range(15000)]}
        answers: dict[int, str] = {}
        importing = threading.Event()

        def watch_import() -> None:
            """Set ``importing`` once the import's first chunk is committed: it holds the one worker then.
            (A fixed delay raced on a quiet machine: the remembers reached the worker before the import.)"""
            db = f"file:{data / 'data' / 'team' / 'mnemon.db'}?mode=ro"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not importing.is_set():
                try:
                    with contextlib.closing(sqlite3.connect(db, uri=True, timeout=5)) as conn:
                        if conn.execute("SELECT COUNT(*) FROM insights").fetchone()[0] > 0:
                            importing.set()
                except sqlite3.Error:
                    pass  # not created yet, or busy: look again
                time.sleep(0.02)

        def remember(i: int) -> None:
            assert importing.wait(120), "the import never started"
            _, body = gateway.call(token, "remember", {"content": f"Queued note number {i} about the cache warmer",
                                                       "no_diff": True})
            answers[i] = body["result"]["content"][0]["text"]

        threads = [threading.Thread(target=remember, args=(i,)) for i in range(6)]
        threads.append(threading.Thread(target=watch_import))
        for t in threads:
            t.start()
        gateway.call(token, "import", {"draft": draft})
        for t in threads:
            t.join()
        not_run = [i for i, text in answers.items() if text.endswith("(the remember call did not run)")]
        assert not_run, answers
        assert all(text == "Error: the gateway is busy: no command slot within 1 s (the remember call did not run)"
                   or text.startswith(("Error: the remember call ran over 1 s", "{")) for text in answers.values())
        time.sleep(0.5)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the import and every call that was taken complete
            _, body = gateway.call(token, "status", {})
            if not body["result"]["isError"] and \
                    json.loads(body["result"]["content"][0]["text"])["total_insights"] == 15000 + 6 - len(not_run):
                break
            time.sleep(0.5)
        for i in range(6):
            _, body = gateway.call(token, "search", {"query": f"Queued note number {i}"})
            found = f"Queued note number {i} about" in body["result"]["content"][0]["text"]
            assert found is (i not in not_run), (i, answers[i])
    finally:
        gateway.stop()


def test_timeout_flags_are_checked(tmp_path: Path) -> None:
    for flag in ("--header-timeout", "--body-timeout", "--call-timeout"):
        proc = mnemon(tmp_path, "mcp", "serve", "--http", flag, "0", check=False)
        assert proc.returncode == 1
        assert proc.stderr.decode().splitlines() == [f"Error: {flag} must be between 0 and 86400 seconds, got 0"]
    proc = mnemon(tmp_path, "mcp", "serve", "--http", "--workers", "-1", check=False)
    assert (proc.returncode, proc.stderr.decode()) == (1, "Error: --workers must be between 0 and 64, got -1\n")
