"""The server process: take the lock, warm up, listen, fork one worker per request, exit when idle.

Single-threaded on purpose: ``fork`` copies only the calling thread, so the parent never runs a
thread that a worker could inherit mid-operation. The loop waits on the listening socket and on a
self-pipe that SIGCHLD and SIGTERM write to (``signal.set_wakeup_fd``). A worker sends its client
its own status and does not die with the server (``worker``); the parent tells the client of a
worker killed by a signal (``S<signal>``, or repeats ``X<code>``). A request from another version or
package directory, or one that arrives after the package files changed (the ``FileWatch``), is
refused and the server stops: it was started from other files (an upgrade).

Between requests (no worker running, no client waiting) the parent refreshes the warm indexes of
the stores the last workers reported (``mnemon.server.warm``) and forks the next spare worker from
that state; neither runs while a worker does, so on a small machine they never take its CPU. The
spare primes at once (``mnemon.server.rehearsal``: one short command, 5 ms) and rehearses the rest
only when the parent tells it to, after ``REHEARSE_AFTER`` without a request: a burst of calls (a
hook script, an agent's loop) is served by primed spares, instead of each request finding one
mid-rehearsal, killing it and forking a cold one.

Stopping (SIGTERM, ``mnemon server stop``, a stale fingerprint, or ``MNEMON_SERVER_IDLE`` with no
request and no command running): the socket is unlinked at once, so new clients run in-process or
start a fresh server, and the server exits when its running workers have ended: a command that
began always runs to its end.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import os
import selectors
import signal
import socket
import struct
import sys
import time

from mnemon import config
from mnemon.server import control, paths, protocol, rehearsal, warm, worker
from mnemon.server.fingerprint import FileWatch, fingerprint, identity
from mnemon.server.rehearsal import Rehearsal

ACCEPT_TIMEOUT = 2.0  # a connected client sends its request at once; never let one stall the loop
# Quiet time before a primed spare rehearses the rest. Back-to-back calls arrive 12-30 ms apart
# (the next client's interpreter start, more on a loaded machine) and must find the spare primed,
# not rehearsing; the rest (about 25 ms on a memory scratch) started this soon is still done within
# the 75-100 ms of a call spaced like an in-process run. Measured: issue 10's fourth pass (git history
# of bench/README.md).
REHEARSE_AFTER = 0.04
# The longest single wait of the loop: epoll takes an int of milliseconds (24.8 days at most), and a longer
# MNEMON_SERVER_IDLE (720h) made every select an OverflowError, so the server died as it started.
MAX_WAIT = 24 * 3600.0
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Daemon:
    def __init__(self, listener: socket.socket, sock_path: bytes, idle: float, own_fingerprint: str,
                 lock_fd: int, rehearsal: Rehearsal | None = None, watch: FileWatch | None = None) -> None:
        self.listener = listener
        self.lock_fd = lock_fd
        self.sock_path = sock_path
        self.sock_inode = os.stat(sock_path).st_ino
        self.idle = idle
        self.fingerprint = own_fingerprint
        self.identity = identity()
        self.watch = watch or FileWatch(inotify=False)
        self.workers: dict[int, socket.socket] = {}
        self.reports: dict[int, socket.socket] = {}  # worker pid -> the channel it reports its stores on
        self.spare: tuple[int, socket.socket] | None = None
        # The spare's rehearsal: "priming" (its first phase, until PRIMED: not handed a request),
        # None (primed or not priming: it waits, ready; the rest not asked yet), "asked" (told to
        # rehearse the rest, until READY: not handed a request) or "done".
        self.spare_rehearsal: str | None = None
        self.spare_since = 0.0  # when the spare was forked (the loop has been quiet since, or it is gone)
        self.rehearsal = rehearsal
        self.dropped: set[int] = set()  # spares let go but not reaped yet (see end_spares)
        self.warm = warm.WarmIndexes()
        self.dirty: list[str] = []  # stores whose warm index to refresh once no client waits
        self.stopping = False
        self.last_active = time.monotonic()
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.sel = selectors.DefaultSelector()  # the listener, the wake-up pipe, a rehearsing spare's channel

    # --- loop ---------------------------------------------------------------------------------
    def install_signals(self) -> None:
        """The server's signal handlers. Installed before the pid file says where the server is:
        ``mnemon server stop`` sends SIGTERM as soon as it reads that file, and under the default
        action the server would die without unlinking its socket."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler (not SIG_IGN) so children stay reapable
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        signal.signal(signal.SIGINT, lambda *_: self.stop())
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def run(self) -> None:
        sel = self.sel
        sel.register(self.listener, selectors.EVENT_READ)
        sel.register(self.wake_r, selectors.EVENT_READ)
        if not self.stopping:  # (a stop may have come before the loop started)
            self.fork_spare(prime=True)
        while True:
            self.reap()
            if self.stopping and not self.workers:
                return
            timeout = None
            if not self.workers and not self.stopping:
                now = time.monotonic()
                timeout = self.last_active + self.idle - now
                if timeout <= 0:
                    self.stop()
                    return
                timeout = min(timeout, MAX_WAIT)  # a longer idle time is waited in steps (the loop comes back)
                if self.rehearsal_due():
                    timeout = min(timeout, max(0.0, self.spare_since + REHEARSE_AFTER - now))
            # Between requests (no worker running, no client waiting): refresh the warm indexes
            # the last commands changed, then fork the next spare from that state. Neither runs
            # while a worker does: on a small machine it would take the worker's CPU.
            between = not self.workers and not self.stopping and (self.dirty or self.spare is None)
            if between:
                timeout = 0  # look for waiting clients first
            events = sel.select(timeout)
            if between and not events:
                if self.dirty:
                    self.refresh()
                if self.spare is None:
                    self.fork_spare(prime=True)
            elif not events and not self.workers and self.rehearsal_due() \
                    and time.monotonic() >= self.spare_since + REHEARSE_AFTER:
                self.ask_rehearsal()
            for key, _ in events:
                if self.spare is not None and key.fileobj is self.spare[1]:
                    self.spare_ready()  # it said PRIMED or READY (or died): take it in
                elif key.fileobj is self.listener and not self.stopping:
                    self.accept()
                elif key.fileobj == self.wake_r:
                    try:
                        os.read(self.wake_r, 4096)
                    except BlockingIOError:
                        pass
            if self.stopping and self.listener.fileno() != -1:
                sel.unregister(self.listener)
                self.listener.close()

    def stop(self) -> None:
        """Stop listening now; the loop exits once the running workers have ended."""
        if self.stopping:
            return
        self.stopping = True
        self.drop_spare()
        try:  # unlink only our own socket: a newer server may have bound the path since
            if os.stat(self.sock_path).st_ino == self.sock_inode:
                os.unlink(self.sock_path)
        except OSError:
            pass

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            self.dropped.discard(pid)
            unrun = self.take_report(pid)
            if conn is None or unrun:
                if self.spare is not None and self.spare[0] == pid:
                    self.drop_spare()  # killed while waiting; the next request forks anew
                    self.dropped.discard(pid)  # reaped: never signal its pid again
                if os.WIFEXITED(status) and os.WEXITSTATUS(status) == rehearsal.FAILED and self.rehearsal:
                    self.rehearsal.close()  # it would fail again in every spare: spares wait unrehearsed
                    self.rehearsal = None
                elif os.WIFSIGNALED(status) and self.rehearsal:
                    self.rehearsal.remove_copy(pid)  # killed mid-rehearsal: its copy stayed behind
                if conn is not None:  # it ended (priming failed, or killed) before it took GO: nothing ran
                    self.reply(conn, protocol.NOT_RUN)
                continue
            if os.WIFSIGNALED(status):
                self.reply(conn, b"S%d\n" % os.WTERMSIG(status))
            else:
                self.reply(conn, b"X%d\n" % os.waitstatus_to_exitcode(status))

    def reply(self, conn: socket.socket, line: bytes) -> None:
        try:
            conn.sendall(line)
        except OSError:
            pass  # the client is gone (killed); nothing to tell
        conn.close()
        self.last_active = time.monotonic()

    # --- one request ----------------------------------------------------------------------------
    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.last_active = time.monotonic()
        try:
            conn.settimeout(ACCEPT_TIMEOUT)
            _, uid, _ = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
            if uid != os.getuid():
                raise ConnectionRefusedError(f"uid {uid} is not the server's")
            raw, request, _ = worker.receive(conn, 0)
            if request.identity != self.identity or not self.watch.current(self.fingerprint):
                conn.sendall(b"Rstale server\n")
                self.stop()
                raise ConnectionAbortedError("stale")
            pid = self.hand_to_spare(raw, conn)
            if pid is None:  # no spare (taken, died, or still rehearsing): fork one for this request
                self.fork_spare(prime=False)
                pid = self.hand_to_spare(raw, conn)
            if pid is None:
                raise ConnectionAbortedError("no worker")
            self.workers[pid] = conn
            try:
                conn.sendall(b"A%d\n" % pid)
            except OSError:
                pass  # client gone: the worker sees EOF instead of GO and exits unrun
            conn = None  # type: ignore[assignment]
        except (OSError, ValueError, UnicodeDecodeError):
            pass
        finally:
            if conn is not None:
                conn.close()

    # --- the spare worker -----------------------------------------------------------------------
    # A worker forked ahead of time waits on a socket pair for its request and connection: the fork and the
    # child's first page faults (a few ms for a parent this size) then fall between requests; once the
    # loop has been quiet for REHEARSE_AFTER, it rehearses the everyday commands (``rehearsal``) to take
    # the rest.
    def fork_spare(self, *, prime: bool) -> None:
        """Fork the next spare; with ``prime`` (between requests) it primes at once (see ``rehearsal``);
        without (forked for a waiting request) it takes the request as it is."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        gc.freeze()  # what the parent made since the last fork stays out of the worker's collections too
        prime = prime and self.rehearsal is not None
        pid = os.fork()
        if pid == 0:
            ours.close()
            worker.wait_for_request(theirs, close=self.inherited(), close_fds=self.inherited_fds(), warm=self.warm,
                                    rehearsal=self.rehearsal, prime=prime)
        theirs.close()
        self.spare = (pid, ours)
        self.spare_rehearsal = "priming" if prime else None
        self.spare_since = time.monotonic()
        if prime:
            self.sel.register(ours, selectors.EVENT_READ)

    def rehearsal_due(self) -> bool:
        """A spare waits that has not been asked to rehearse (and rehearsing is on)."""
        return self.spare is not None and self.spare_rehearsal is None and self.rehearsal is not None

    def ask_rehearsal(self) -> None:
        """Tell the waiting spare to rehearse the rest now; it says READY when done (see ``spare_ready``)."""
        assert self.spare is not None
        try:
            self.spare[1].sendall(rehearsal.REHEARSE)
        except OSError:
            self.drop_spare()  # it died; the loop forks the next one
            return
        self.spare_rehearsal = "asked"
        self.sel.register(self.spare[1], selectors.EVENT_READ)

    def spare_ready(self) -> bool:
        """True unless the spare is rehearsing (priming or asked, and no word yet; nothing else is sent)."""
        if self.spare_rehearsal not in ("priming", "asked") or self.spare is None:
            return True
        try:
            said = self.spare[1].recv(1, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            said = b""
        self.sel.unregister(self.spare[1])
        expected = rehearsal.PRIMED if self.spare_rehearsal == "priming" else rehearsal.READY
        self.spare_rehearsal = None if self.spare_rehearsal == "priming" else "done"
        return said == expected  # b"": it died; handing over fails and a new one is forked

    def hand_to_spare(self, raw: bytes, conn: socket.socket) -> int | None:
        if self.spare is None:
            return None
        if not self.spare_ready() and self.spare_rehearsal == "asked":
            # The client must not wait for the long rehearsal, nor share the CPU with it: the spare
            # only works on its own scratch copy, so it is killed (the copy goes when it is reaped).
            self.drop_spare(kill=True)
            return None
        # Ready, or still priming: one short command, then it takes the request (cheaper than a
        # cold fork); or dead: the hand-over fails and a new one is forked.
        pid, channel = self.spare
        if self.spare_rehearsal == "priming":
            self.sel.unregister(channel)  # from now on its report channel (PRIMED comes first)
        self.spare = None
        try:
            socket.send_fds(channel, [raw], [conn.fileno()])
        except OSError:
            channel.close()
            return None  # it died; the reaper collects it
        self.reports[pid] = channel  # it reports the stores it used on the same channel
        return pid

    def drop_spare(self, *, kill: bool = False) -> None:
        if self.spare is not None:
            if self.spare_rehearsal in ("priming", "asked"):
                self.sel.unregister(self.spare[1])
            self.spare[1].close()  # EOF: the spare exits unrun (a rehearsing one after its current step)
            self.dropped.add(self.spare[0])
            if kill:
                try:
                    os.kill(self.spare[0], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.spare = None

    def end_spares(self) -> None:
        """At exit: end the spares still alive (waiting or rehearsing, never running a command) and
        wait for them, so that none writes into the scratch directory after it is removed."""
        self.drop_spare()
        for pid in self.dropped:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.dropped.clear()

    # --- warm per-store state -------------------------------------------------------------------
    def take_report(self, pid: int) -> bool:
        """Note the stores a finished worker used (sent just before it exited, so all there). True
        when it never took its request: it failed while priming, or ended (even killed) before it said
        ``TOOK`` on receiving GO, so nothing of the command ran."""
        channel = self.reports.pop(pid, None)
        if channel is None:
            return False
        data = b""
        try:
            channel.setblocking(False)
            while len(data) < warm.MAX_REPORT:
                chunk = channel.recv(warm.MAX_REPORT)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass  # nothing (more) sent: a worker killed before it reported
        finally:
            channel.close()
        data = data.lstrip(rehearsal.PRIMED)  # handed over while priming: the word came after
        if not data.startswith(worker.TOOK):
            return True  # FAILED_WORD, or nothing: GO never came, or the worker died before it said so
        data = data[len(worker.TOOK):]
        for name in warm.parse_report(data):  # store paths: absolute, so never starting with a word
            if name not in self.dirty:
                self.dirty.append(name)
        return False

    def refresh(self) -> None:
        """Reload the warm indexes of the stores the last commands used; a spare forked before
        holds the old state (which the files no longer match), so it goes and the loop forks anew."""
        changed = False
        for name in self.dirty:
            try:
                changed = self.warm.refresh(name) or changed
            except Exception:  # noqa: BLE001  a damaged file must never stop the server: workers load as before
                changed = self.warm.entries.pop(name, None) is not None or changed
        self.dirty.clear()
        if changed:
            self.drop_spare()

    def inherited(self) -> list[socket.socket]:
        """Sockets a new child must close: the listener, running workers' connections and report
        channels, the spare's channel."""
        return [self.listener, *self.workers.values(), *self.reports.values(),
                *([self.spare[1]] if self.spare else [])]

    def inherited_fds(self) -> list[int]:
        return [self.wake_r, self.wake_w, self.lock_fd, *([self.watch.fd] if self.watch.fd is not None else [])]


def _take_lock(path: bytes) -> int | None:
    """The installation's lock, or None when another server holds it. Retried briefly because a
    client's liveness probe holds a shared lock for a few microseconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    for _ in range(20):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        time.sleep(0.01)
    os.close(fd)
    return None


def _listen(path: bytes) -> socket.socket:
    try:
        os.unlink(path)  # a dead server's socket; we hold the lock, so no live server owns it
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def main() -> int:
    environ = config.process_environment()
    directory = paths.runtime_dir(environ)
    problem = paths.prepare_private_dir(directory)
    if problem is not None:
        print(f"mnemon server: {os.fsdecode(directory)} is not a private directory: it {problem}", file=sys.stderr)
        return 1
    try:
        idle = control.idle_seconds(config.server_idle_text())
    except ValueError:
        idle = control.DEFAULT_IDLE_SECONDS
    lock = _take_lock(paths.server_path(environ, "lock"))
    if lock is None:
        return 0  # another server runs or starts for this installation
    pid_path = paths.server_path(environ, "pid")
    try:  # a killed server's: until ours is written, no one must take its pid for ours
        os.unlink(pid_path)
    except FileNotFoundError:
        pass
    from mnemon.server import preload

    watch = FileWatch()  # before the fingerprint: a change made after it is an event
    own = fingerprint()
    preload.warm()
    scratch = Rehearsal.prepare(os.fsdecode(paths.scratch_path(environ)))
    # Everything loaded so far lives as long as the server: move it out of the collector's reach,
    # so a worker's garbage collection never walks (and copies, page by page) the parent's heap.
    gc.collect()
    gc.freeze()
    sock_path = paths.server_path(environ, "sock")
    listener = _listen(sock_path)
    daemon = Daemon(listener, sock_path, idle, own, lock, scratch, watch)
    daemon.install_signals()
    with open(pid_path + b".tmp", "w") as f:
        f.write(f"{os.getpid()}\n{own}\n{time.time():.3f}\n{idle}\n")
    os.replace(pid_path + b".tmp", pid_path)
    try:
        daemon.run()
    finally:
        daemon.stop()
        if daemon.rehearsal is not None:
            daemon.end_spares()
            daemon.rehearsal.close()
        try:
            os.unlink(pid_path)
        except OSError:
            pass
        os.close(lock)
        watch.close()
    return 0
