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

from tests.gateway_server import mnemon, serve_store  # noqa: E402

HEAD = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n" \
       "Accept: application/json, text/event-stream\r\n"


class Slow:
    """One gateway with short deadlines over a store ``team`` and a write token."""

    def __init__(self, root: Path) -> None:
        self.gateway, self.token = serve_store(root, "--rate-limit", "0", "--header-timeout", "1", "--body-timeout",
                                               "1", "--call-timeout", "0.5")
        self.data = self.gateway.data_dir

    def head(self) -> bytes:
        return HEAD.format(port=self.gateway.port).encode()

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.gateway.port), timeout=10)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slow]:
    world = Slow(tmp_path_factory.mktemp("slow"))
    with world.gateway:
        yield world


def total(slow: Slow) -> int:
    out = mnemon(slow.data, "--store", "team", "--readonly", "status").stdout
    return int(json.loads(out)["total_insights"])


def closed_after(sock: socket.socket) -> tuple[float, bytes]:
    """Seconds until the gateway closes ``sock`` (reading whatever it sent first), and what it sent."""
    started, received = time.monotonic(), b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:  # a byte we sent after its close: the kernel answers a reset
            chunk = b""
        if not chunk:
            return time.monotonic() - started, received
        received += chunk


HEAD_408 = b"HTTP/1.1 408 Request Timeout\r\n"


def read_response(sock: socket.socket) -> bytes:
    """One whole response on a kept-alive connection: its head, then its body (by Content-Length, or chunked to
    the last chunk), so that nothing of it is left to be read in front of the next response."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed before the head ended: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    fields = {name.strip().lower(): value.strip() for name, _, value in
              (line.partition(b":") for line in head.split(b"\r\n")[1:])}
    length = fields.get(b"content-length")
    if length is None:
        assert fields.get(b"transfer-encoding", b"").lower() == b"chunked", head
    while len(body) < int(length) if length is not None else not body.endswith(b"0\r\n\r\n"):
        chunk = sock.recv(4096)
        assert chunk, f"closed before the body ended: {body!r}"
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_silent_connection_is_closed_at_the_header_deadline(slow: Slow) -> None:
    with slow.connect() as sock:
        seconds, sent = closed_after(sock)
    assert 0.8 <= seconds <= 4, seconds
    assert sent == b""  # no request begun: nothing to answer (an unsolicited 408 could meet a request on its way)


def test_a_request_head_left_half_sent_is_408_then_closed(slow: Slow) -> None:
    with slow.connect() as sock:
        sock.sendall(slow.head() + b"Authorization: Bea")  # then nothing more
        seconds, sent = closed_after(sock)
    assert 0.8 <= seconds <= 4, seconds
    head, _, body = sent.partition(b"\r\n\r\n")
    assert sent.startswith(HEAD_408) and b"connection: close" in head, sent
    assert json.loads(body) == {"error": "request head not received within 1 s"}
    assert total(slow) == 0


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
            seconds, sent = closed_after(sock)
            assert time.monotonic() - started <= 5, seconds
            # answered 408 (unless the reset for a byte sent after the close overtook it)
            assert not sent or sent.startswith(HEAD_408), sent
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
        answer = read_response(sock)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHo")  # then nothing more
        seconds, sent = closed_after(sock)
    assert seconds <= 4, seconds
    assert sent.startswith(HEAD_408), sent


@contextlib.contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Hold the store's write lock (SQLite ``BEGIN IMMEDIATE``, as any other writer would) while the body runs:
    a command that writes then waits inside its worker (within the busy timeout) for as long as the test says,
    however fast the machine is, and goes on once the lock is released."""
    holder = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_call_over_the_call_timeout_is_a_clear_error_and_its_import_completes(slow: Slow) -> None:
    draft = {"schema_version": "1", "insights": [
        {"content": f"Service {i} pages the on-call rotation {i % 7} when its error budget burns"} for i in range(3000)]}
    with write_lock_held(slow.data / "data" / "team" / "mnemon.db"):  # the import waits for it past the deadline
        started = time.monotonic()
        status, body = slow.gateway.call(slow.token, "import", {"draft": draft})
        assert status == 200
        result = body["result"]
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert text == ("Error: the import call ran over 0.5 s; the gateway has taken it and it may yet complete "
                        "(check before repeating a write)"), text
        assert time.monotonic() - started < 5
        status, body = slow.gateway.call(slow.token, "status", {})  # the other worker still serves reads
        assert json.loads(body["result"]["content"][0]["text"])["total_insights"] == 0
    # The lock released, the import goes on (in its committed batches, engine/bulk: readers in other workers see
    # them land) and completes: nothing is lost or stored twice.
    deadline = time.monotonic() + 120
    counts = []
    while time.monotonic() < deadline:
        status, body = slow.gateway.call(slow.token, "status", {})
        if status == 200 and not body["result"]["isError"]:
            counts.append(json.loads(body["result"]["content"][0]["text"])["total_insights"])
            if counts[-1] == 3000:
                break
        time.sleep(0.2)
    assert counts == sorted(counts) and counts[-1] == 3000, counts


def test_calls_that_never_got_a_worker_say_they_did_not_run_and_did_not(tmp_path: Path) -> None:
    """One worker, held by a remember waiting for the store's write lock: calls queued behind it past the
    deadline are never run; those the worker took complete once the lock is free."""
    gateway, token = serve_store(tmp_path, "--rate-limit", "0", "--workers", "1", "--call-timeout", "1")
    data = gateway.data_dir
    with gateway:
        answers: dict[int, str] = {}

        def remember(i: int) -> None:
            _, body = gateway.call(token, "remember", {"content": f"Queued note number {i} about the cache warmer",
                                                       "no_diff": True})
            answers[i] = body["result"]["content"][0]["text"]

        with write_lock_held(data / "data" / "team" / "mnemon.db"):
            threads = [threading.Thread(target=remember, args=(i,)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:  # every call answered (at its 1 s deadline) while the lock is still held
                t.join()
        not_run = [i for i, text in answers.items() if text.endswith("(the remember call did not run)")]
        taken = [i for i, text in answers.items() if text.startswith("Error: the remember call ran over 1 s")]
        assert not_run and taken and len(not_run) + len(taken) == 6, answers
        assert all(answers[i] == "Error: the gateway is busy: no command slot within 1 s (the remember call did "
                   "not run)" for i in not_run)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # every call that was taken completes
            _, body = gateway.call(token, "status", {})
            if not body["result"]["isError"] and \
                    json.loads(body["result"]["content"][0]["text"])["total_insights"] == len(taken):
                break
            time.sleep(0.2)
        for i in range(6):
            _, body = gateway.call(token, "search", {"query": f"Queued note number {i}"})
            found = f"Queued note number {i} about" in body["result"]["content"][0]["text"]
            assert found is (i in taken), (i, answers[i])


def test_timeout_flags_are_checked(tmp_path: Path) -> None:
    for flag in ("--header-timeout", "--body-timeout", "--call-timeout"):
        proc = mnemon(tmp_path, "mcp", "serve", "--http", flag, "0", check=False)
        assert proc.returncode == 1
        assert proc.stderr.decode().splitlines() == [f"Error: {flag} must be between 0 and 86400 seconds, got 0"]
        for value in ("inf", "nan"):
            proc = mnemon(tmp_path, "mcp", "serve", "--http", flag, value, check=False)
            assert (proc.returncode, proc.stderr.decode()) == (
                1, f"Error: {flag} must be between 0 and 86400 seconds, got {value}\n")
    # NaN and inf passed the rate's bound and read as "no limit"
    for value in ("inf", "nan"):
        proc = mnemon(tmp_path, "mcp", "serve", "--http", "--rate-limit", value, check=False)
        assert (proc.returncode, proc.stdout, proc.stderr.decode()) == (
            1, b"", f"Error: --rate-limit must be a finite number, got {value}\n")
    proc = mnemon(tmp_path, "mcp", "serve", "--http", "--rate-limit", "1e400", check=False)  # an overflow: strconv's
    assert (proc.returncode, proc.stdout, proc.stderr.decode()) == (1, b"", 'Error: invalid argument "1e400" for '
                                                                   '"--rate-limit" flag: strconv.ParseFloat: parsing "1e400": value out of range\n')
    proc = mnemon(tmp_path, "mcp", "serve", "--http", "--workers", "-1", check=False)
    assert (proc.returncode, proc.stderr.decode()) == (1, "Error: --workers must be between 0 and 64, got -1\n")
