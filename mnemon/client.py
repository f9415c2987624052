"""The ``mnemon`` entry point: hand the command to the user's warm server, else run it here.

Imports only the standard library, and few of its modules (``_socket``, not ``socket``; no json,
no pathlib, no ``__future__``: the annotations here evaluate on 3.10): a served ``mnemon --help`` is this module, one connection and the worker's run. The
client sends argv as bytes, its environment, working directory, umask and stdio encodings, and
passes its stdin, stdout and stderr descriptors (SCM_RIGHTS); it exits with the worker's status
and forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the worker. See ``mnemon.server.protocol``.

``MNEMON_SERVER``: ``auto`` (default) uses a server and starts one in the background when none
answers (that call runs in-process); ``off`` never uses or starts one; ``require`` (tests and
benchmarks) starts one and waits for it, and fails instead of running in-process.

Fail open, never twice: no server, a refused or stale one, or no acknowledgement within
``ACK_TIMEOUT``: the command runs in-process. Once the server has acknowledged, the command
belongs to the worker, which owns this connection and sends its own status; it outlives a server
that dies meanwhile. Only a worker killed by a signal leaves the outcome unknown (it may have
committed before): the client then says exactly that (``KILLED``, exit 1) and never runs the
command again (a write could happen twice).

``--version`` and ``--help`` (and a bare ``mnemon``) use a server that runs but never start one:
they are what people type first, and a background process living for 30 minutes is a surprise.
"""

import os
import sys

ACK_TIMEOUT = 2.0
REQUIRE_START_TIMEOUT = 120.0
IN_PROCESS = ("mcp", "server")  # long-lived stdio, and the server's own controls
_GLOBAL_VALUE_FLAGS = ("--data-dir", "--store", "--embed-model")
_FORWARDED = (2, 15, 1, 3)  # SIGINT, SIGTERM, SIGHUP, SIGQUIT (numbers: no signal/enum import)
_NO_START = ("--help", "-h", "--version")  # answered without starting a server (see the docstring)
KILLED = ("mnemon server worker was killed; the command may or may not have taken effect "
          "(check with mnemon log)")


def command_word(argv: list[str]) -> str | None:
    """The subcommand, skipping global flags the way ``cli.state.split_global`` does."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return None
        if arg in _GLOBAL_VALUE_FLAGS:
            i += 2
            continue
        if not arg.startswith("-"):
            return arg
        i += 1
    return None


def _read_line(sock: object) -> bytes:
    """One reply line without its newline; b"" at EOF before a whole line (the sender died)."""
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(64)  # type: ignore[attr-defined]
        if not chunk:
            return b""
        data += chunk
    return data[:data.index(b"\n")]


def _in_process(argv: list[str]) -> int:
    _closed_streams_to_devnull()
    from mnemon.cli import main

    return main(argv)


def _closed_streams_to_devnull() -> None:
    """A standard stream its caller closed (``mnemon status >&-``, ``remember - <&-``) is None in Python:
    every read or write of it was an AttributeError traceback. It reads as empty and writes into
    /dev/null instead, as the Go program's ignored write errors leave it."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115 -- the process's stream


def _start_server(environ: dict[bytes, bytes]) -> None:
    import _socket

    if not hasattr(_socket, "AF_UNIX"):
        return  # no Unix sockets here: everything runs in-process
    try:
        from mnemon.server import control

        control.spawn(environ)
    except (OSError, ImportError):
        pass  # the command still runs in-process; a later call tries again


def serve(argv: list[bytes], fds: tuple[int, int, int], stdio: list[tuple[str, str]],
          environ: dict[bytes, bytes], cwd: bytes) -> int | None:
    """Run ``argv`` through the server: its exit status, or None when no server took it
    (nothing has run; the caller runs it in-process)."""
    import _socket

    from mnemon.server import paths, protocol
    from mnemon.server.fingerprint import identity

    if not all(hasattr(_socket, name) for name in ("AF_UNIX", "SCM_RIGHTS", "CMSG_LEN")):
        return None  # no Unix sockets or descriptor passing here: everything runs in-process
    if not paths.private_dir_ok(paths.runtime_dir(environ)):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(ACK_TIMEOUT)
        try:
            sock.connect(paths.server_path(environ, "sock"))
        except OSError:
            return None
        umask = os.umask(0o022)
        os.umask(umask)
        request = protocol.encode(identity(), cwd, umask, sys.getfilesystemencoding(), stdio, argv,
                                  [k + b"=" + v for k, v in environ.items()])
        try:
            sock.sendall(request)
            ack = _read_line(sock)
        except OSError:
            return None  # refused, reset or timed out: the worker (if any) sees us go and exits unrun
        if not ack.startswith(b"A"):
            return None  # R: stale or refusing; it exits by itself
        worker = int(ack[1:])
        sock.settimeout(None)
        received: list[int] = []
        _forward_signals(worker, received)
        # The descriptors travel with GO, to a worker that exists: sent with the request, they would
        # sit in the queue of a server that never accepts, holding the caller's pipes open.
        fd_bytes = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
        try:
            sock.sendmsg([protocol.GO], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd_bytes)])
        except OSError:
            return None  # the worker never got GO, so it never ran
        # From here on the command is the worker's: never return None, unless the server says it
        # never took it (NOT_RUN).
        try:
            status = _read_line(sock)
        except OSError:
            status = b""
    finally:
        sock.close()
    if status == protocol.NOT_RUN[:-1]:  # the worker ended before it took the command: nothing ran
        if received:
            _die_by(received[0])  # interrupted before it began: end as an in-process run would
        return None  # run it here
    if status.startswith(b"X"):
        return int(status[1:])
    if status.startswith(b"S"):
        sig = int(status[1:])
        if sig in received:
            _die_by(sig)  # the user's own signal: end the way an in-process run would have
    # Killed by a signal not ours (S<n> from the server), or no status at all: the worker died
    # without one and so did the server. It may have committed before it died: never say "failed".
    _error(KILLED)
    return 1


def _forward_signals(pid: int, received: list[int]) -> None:
    import _signal

    def forward(sig: int, _frame: object) -> None:
        received.append(sig)
        try:
            os.kill(pid, sig)
        except OSError:
            pass

    for sig in _FORWARDED:
        # A signal this process inherited as ignored (a background job of a non-interactive shell
        # ignores SIGINT and SIGQUIT) would not have stopped an in-process run either: leave it so.
        if _signal.getsignal(sig) != _signal.SIG_IGN:
            _signal.signal(sig, forward)


def _die_by(sig: int) -> None:
    import _signal

    sys.stdout.flush()
    _signal.signal(sig, _signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def _error(message: str) -> None:
    try:
        sys.stderr.write(f"Error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _stdio() -> list[tuple[str, str]] | None:
    streams = (sys.stdin, sys.stdout, sys.stderr)
    if any(s is None for s in streams):
        return None  # a closed descriptor: only the in-process run behaves as before
    return [(s.encoding, s.errors or "strict") for s in streams]


def run(argv: list[str]) -> int:
    """Run one command line (``sys.argv[1:]``) as the ``mnemon`` program; return its exit status."""
    code = _served(argv)
    return _in_process(argv) if code is None else code


def _served(argv: list[str]) -> int | None:
    """The exit status of the command run through the server (or of ``require`` failing), or None
    when it is to run in this process (a server was started in the background when none answered)."""
    # Empty is unset, as for every other MNEMON_ variable (MNEMON_SERVER= in an env file warned on every call).
    mode = os.environ.get("MNEMON_SERVER") or "auto"
    if mode not in ("auto", "off", "require"):
        # as every other setting with a value it cannot use: said, and the default taken
        sys.stderr.write(f'mnemon: ignoring invalid MNEMON_SERVER "{mode}"; using auto\n')
        mode = "auto"
    if mode == "off" or command_word(argv) in IN_PROCESS:
        return None
    environ = dict(os.environb)
    stdio = _stdio()
    try:
        cwd = os.getcwdb()
    except OSError:
        cwd = None  # a deleted working directory: in-process reports it as before
    if stdio is not None and cwd is not None:
        args = [os.fsencode(a) for a in argv]
        try:
            code = serve(args, (0, 1, 2), stdio, environ, cwd)
            if code is None and mode == "require":
                code = _require(args, stdio, environ, cwd)
        except KeyboardInterrupt:
            _error("interrupted")
            return 130
        if code is not None:
            return code
    if mode == "require":
        _error("no mnemon server could take the command (MNEMON_SERVER=require)")
        return 1
    if not _asks_for_help(argv):
        _start_server(environ)
    return None


def _asks_for_help(argv: list[str]) -> bool:
    """``--help``, ``--version`` (or a bare ``mnemon``, which prints the help): never worth a server."""
    if not argv:
        return True
    for arg in argv:
        if arg == "--":
            return False
        if arg in _NO_START:
            return True
    return False


def _require(args: list[bytes], stdio: list[tuple[str, str]], environ: dict[bytes, bytes], cwd: bytes) -> int | None:
    """``MNEMON_SERVER=require``: start a server (after a stale one has exited) and use it; again
    while none takes the command (a server killed meanwhile, or the pid file of a killed one read
    just as its successor starts): ``serve`` returning None means nothing ran, so trying again is safe."""
    import time

    from mnemon.server import control
    from mnemon.server.fingerprint import fingerprint

    own = fingerprint()
    deadline = time.monotonic() + REQUIRE_START_TIMEOUT
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or control.wait_current(environ, own, remaining) is None:
            return None
        code = serve(args, (0, 1, 2), stdio, environ, cwd)
        if code is not None:
            return code
        time.sleep(0.05)


def main() -> None:
    argv = sys.argv[1:]
    code = _served(argv)
    if code is None:
        sys.exit(_in_process(argv))
    # Served: this process imported a few stdlib modules and ran nothing else, so there is nothing
    # to tear down but the interpreter itself (a few ms): flush what we wrote and leave.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)
