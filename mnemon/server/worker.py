"""What a forked worker does with one request: become the client's process, then run the CLI.

The worker waits for the client's ``G`` (see ``protocol``), then takes the client's descriptors
as its 0, 1 and 2, its working directory, umask, environment and argv, rebuilds ``sys.stdin``,
``sys.stdout`` and ``sys.stderr`` as a fresh interpreter would have built them for those
descriptors (the client's encodings and error handlers, line buffering on a terminal), and runs
``mnemon.cli.run``: the very code of the in-process path, so output is byte for byte the same.
It never returns: it sends ``X<status>`` to the client itself and ends with ``os._exit``.

The worker owns the client's connection, as in chg: it does not die with the server (no
``PR_SET_PDEATHSIG``), so a command that began runs to its end and its own status reaches the
client even when the server is killed meanwhile; the parent, while it lives, reports only a
worker's death by signal (``S<n>``). Orphans stay bounded by their client instead: the client
never writes on the connection after ``G``, so the connection turning readable means the client
is gone (killed, or its terminal closed). The kernel says so at once (``O_ASYNC``: SIGIO), and the
handler points 0, 1 and 2 at ``/dev/null`` (never a write to a terminal whose command has
returned) and raises ``KeyboardInterrupt``, as Ctrl-C would in-process: the command stops at the
next bytecode, so a transaction either committed before or rolls back.
"""

from __future__ import annotations

import fcntl
import gc
import io
import os
import select
import signal
import socket
import sys
import time
import traceback

from mnemon.server import protocol
from mnemon.server.rehearsal import FAILED, FAILED_WORD, PRIMED, READY, REHEARSE, Rehearsal
from mnemon.server.warm import WarmIndexes

# worker -> parent, on the report channel, as soon as GO has come and before anything runs: a worker
# that dies without having said it never ran its command (its client is told NOT_RUN and runs it).
TOOK = b"T"
GO_TIMEOUT = 10.0  # the client answers the acknowledgement at once; a vanished one must not pin us


def _reset_signals() -> None:
    """Drop the server's handlers at once: a worker that ran the parent's SIGTERM handler would
    unlink the parent's socket. The worker gets what a fresh interpreter has."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


class ClientWatch:
    """Stop the command when its client goes (see the module's docstring); ``finish`` once the
    command has ended, so the client's normal close after reading the status changes nothing."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.finished = False
        self.gone = False
        signal.signal(signal.SIGIO, self._on_signal)  # before O_ASYNC: SIGIO's default action kills
        fd = conn.fileno()
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)

    def _on_signal(self, _sig: int, _frame: object) -> None:
        self.check()

    def check(self) -> None:
        """Stop the command if the client has gone (called once after O_ASYNC is set: a client
        that went before raised no signal)."""
        if self.finished or self.gone or not select.select([self.conn], [], [], 0)[0]:
            return  # SIGIO also says "room to write": only a readable connection means the client left
        self.gone = True
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        raise KeyboardInterrupt

    def finish(self) -> None:
        self.finished = True


def _stream(fd: int, mode: str, encoding: str, errors: str) -> io.TextIOWrapper:
    """A text stream on ``fd`` built the way CPython builds sys.std* at start-up (create_stdio)."""
    raw = io.FileIO(fd, mode, closefd=False)
    interactive = raw.isatty()
    buffered: io.BufferedReader | io.BufferedWriter = io.BufferedReader(raw) if mode == "rb" else io.BufferedWriter(raw)
    stream = io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline="\n",
                              line_buffering=interactive or fd == 2, write_through=False)
    stream.mode = mode[0]  # type: ignore[misc]  # as CPython sets it ("r" / "w")
    return stream


def _adopt(request: protocol.Request, fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target, inheritable=True)
        os.close(fd)
    os.chdir(request.cwd)
    os.umask(request.umask)
    env = {}
    for entry in request.env:
        name, _, value = entry.partition(b"=")
        env[name.decode(request.fs_encoding, "surrogateescape")] = value.decode(request.fs_encoding, "surrogateescape")
    os.environ.clear()
    os.environ.update(env)
    time.tzset()  # the C library read TZ when the server started; local times follow the client's TZ
    streams = [_stream(fd, mode, encoding, errors)
               for fd, (mode, (encoding, errors)) in enumerate(zip(("rb", "wb", "wb"), request.stdio))]
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


def _leave_parent(close: list[socket.socket], close_fds: list[int]) -> None:
    """A freshly forked worker: default signals, none of the parent's sockets or descriptors."""
    _reset_signals()
    for other in close:
        other.close()
    for fd in close_fds:
        os.close(fd)


def run(conn: socket.socket, request: protocol.Request, *, close: list[socket.socket], close_fds: list[int],
        warm: WarmIndexes | None = None, report: socket.socket | None = None) -> None:
    """Run one request; ``warm`` holds the indexes inherited from the parent, and the stores used
    go back on ``report`` after the client has its status."""
    code = 1
    try:
        _leave_parent(close, close_fds)
        conn.settimeout(GO_TIMEOUT)
        try:
            go, fds, _, _ = socket.recv_fds(conn, 1, 3)
        except OSError:
            go, fds = b"", []
        if go != protocol.GO or len(fds) != 3:
            os._exit(0)  # the client gave up before saying go: it runs the command itself
        if report is not None:
            try:
                report.sendall(TOOK)
            except OSError:
                pass  # the server is gone: no one to tell
        watch = ClientWatch(conn)
        _adopt(request, fds)
        argv = [a.decode(request.fs_encoding, "surrogateescape") for a in request.argv]
        sys.argv = ["mnemon", *argv]
        from mnemon.cli import run as run_command

        if warm is not None:
            from mnemon.engine import hot

            hot.inherited = warm.take
        try:
            watch.check()
            code = run_command(argv, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()  # what an uncaught exception prints in-process, then status 1
            code = 1
        watch.finish()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if not watch.gone:
            try:
                conn.settimeout(1.0)
                conn.sendall(b"X%d\n" % code)
            except OSError:
                pass  # the client is gone
        if warm is not None and report is not None and warm.used:
            try:
                report.sendall(warm.report())
            except OSError:
                pass  # the parent refreshes nothing for this command
    finally:
        os._exit(code)


def wait_for_request(channel: socket.socket, *, close: list[socket.socket], close_fds: list[int],
                     warm: WarmIndexes | None = None, rehearsal: Rehearsal | None = None, prime: bool = False) -> None:
    """The spare worker: wait for the parent to hand over a request (its bytes, and the client's
    connection as a descriptor), then run it and report on the same channel. Before that, with
    ``prime`` it rehearses the first phase at once and says ``PRIMED``; the parent may then say
    ``REHEARSE`` (alone, and only once): the spare rehearses the rest (until done or the channel
    stirs) and says ``READY``. The parent hands a request only to a spare that is not rehearsing.
    EOF means "not needed": exit."""
    code = 0
    try:
        _leave_parent(close, close_fds)
        if prime and rehearsal is not None:
            _rehearse(channel, rehearsal, 0, PRIMED)
        try:
            first = socket.recv_fds(channel, 65536, 1)[:2]
            if first == (REHEARSE, []) and rehearsal is not None:
                _rehearse(channel, rehearsal, 1, READY)
                first = socket.recv_fds(channel, 65536, 1)[:2]
            _, request, fds = receive(channel, 1, first=first)
        except (OSError, ValueError, UnicodeDecodeError):
            os._exit(0)
        run(socket.socket(fileno=fds[0]), request, close=[], close_fds=[], warm=warm, report=channel)
    finally:
        os._exit(code)


def _rehearse(channel: socket.socket, rehearsal: Rehearsal, phase: int, done: bytes) -> None:
    """Run a phase of the rehearsal unless the parent hangs up first, then say ``done``; a failure
    ends this spare (``FAILED``)."""

    def interrupted() -> bool:
        return bool(select.select([channel], [], [], 0)[0])  # the parent's hang-up

    try:
        rehearsal.run(interrupted, phase)
    except BaseException:  # noqa: BLE001  an unknown state: never serve from it
        try:  # a request handed over meanwhile was not taken: the parent has its client run it
            channel.sendall(FAILED_WORD)
        except OSError:
            pass
        os._exit(FAILED)
    gc.collect()  # the rehearsal's garbage, not the command's to collect
    gc.freeze()
    try:
        channel.sendall(done)
    except OSError:
        pass  # the parent hung up: receive() sees EOF


def receive(conn: socket.socket, nfds: int, *, first: tuple[bytes, list[int]] | None = None
            ) -> tuple[bytes, protocol.Request, list[int]]:
    """Read one request (header and payload, as sent) and the ``nfds`` descriptors that came with it;
    ``first`` is its first read when the caller made it already."""
    if first is not None:
        data, fds = first
    elif nfds:
        data, fds, _, _ = socket.recv_fds(conn, 65536, nfds)
    else:
        data, fds = conn.recv(65536), []
    try:
        if len(fds) != nfds:
            raise ValueError(f"a request carries exactly {nfds} descriptors")
        while len(data) < protocol.HEADER:
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("truncated request")
            data += chunk
        total = protocol.HEADER + protocol.payload_length(data[:protocol.HEADER])
        chunks = [data]
        have = len(data)
        while have < total:
            chunk = conn.recv(min(1 << 20, total - have))
            if not chunk:
                raise ValueError("truncated request")
            chunks.append(chunk)
            have += len(chunk)
        raw = b"".join(chunks)[:total]
        return raw, protocol.decode(raw[protocol.HEADER:]), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
