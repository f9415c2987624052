"""The wire format between client and server (one Unix stream connection per command).

1. client -> server: ``MAGIC``, a 4-byte big-endian payload length, then the payload:
   NUL-separated byte fields (none of them can hold a NUL: argv, environment entries and paths
   are C strings)::

       identity, cwd, umask, fs encoding, 3 x (stdio encoding, errors), argc, argv..., env...

   (identity: the client's version and package directory, ``fingerprint.identity``; the server
   checks its files itself.)

2. server -> client: ``A<worker pid>\\n`` (acknowledged: a worker is forked and waits) or
   ``R<reason>\\n`` (refused: run in-process).
3. client -> worker: ``G`` (go), carrying the client's stdin, stdout and stderr descriptors
   (SCM_RIGHTS). Only now does the worker run the command, so a client that gave up waiting for
   the acknowledgement and ran the command in-process can never see it run twice: its closed
   connection makes the waiting worker exit unrun. The descriptors go only to a worker that
   exists: queued with the request at a server that never accepts, they would hold the caller's
   pipes open after the client has exited.
4. worker -> client when the command has ended: ``X<exit status>\\n``. The worker owns the
   connection and outlives a server killed meanwhile. The server, while it lives, answers once the
   worker has ended: ``S<signal number>\\n`` (killed: it may have committed first, so the client
   says the outcome is unknown), a copy of ``X`` (the client reads the first line only), or
   ``NOT_RUN`` when the worker ended before it took the command (its priming failed, see
   ``rehearsal``, or it was killed before GO came: it tells the server ``worker.TOOK`` on taking
   GO, before anything runs): nothing ran, and the client runs it in-process. EOF without a
   line: the worker and the server both died; the outcome is unknown, as after ``S``.

stdlib only (imported by every client call; no json, no struct).
"""

MAGIC = b"MNEMON1\0"
HEADER = len(MAGIC) + 4
MAX_PAYLOAD = 8 << 20  # argv + environment; Linux caps both together far below this
GO = b"G"
NOT_RUN = b"N\n"


class Request:
    """One decoded request (a plain class: dataclasses would cost the client milliseconds)."""

    __slots__ = ("identity", "cwd", "umask", "fs_encoding", "stdio", "argv", "env")

    def __init__(self, identity: str, cwd: bytes, umask: int, fs_encoding: str,
                 stdio: list[tuple[str, str]], argv: list[bytes], env: list[bytes]) -> None:
        self.identity = identity
        self.cwd = cwd
        self.umask = umask
        self.fs_encoding = fs_encoding
        self.stdio = stdio  # (encoding, errors) of stdin, stdout, stderr
        self.argv = argv
        self.env = env  # b"NAME=value"


def encode(identity: str, cwd: bytes, umask: int, fs_encoding: str, stdio: list[tuple[str, str]],
           argv: list[bytes], env: list[bytes]) -> bytes:
    fields = [identity.encode(), cwd, b"%d" % umask, fs_encoding.encode()]
    for encoding, errors in stdio:
        fields += [encoding.encode(), errors.encode()]
    fields.append(b"%d" % len(argv))
    payload = b"\0".join(fields + argv + env)
    return MAGIC + len(payload).to_bytes(4, "big") + payload


def payload_length(header: bytes) -> int:
    """Length announced by a request header; ValueError for anything that is not one."""
    if len(header) != HEADER or not header.startswith(MAGIC):
        raise ValueError("not a mnemon request")
    length = int.from_bytes(header[len(MAGIC):], "big")
    if length > MAX_PAYLOAD:
        raise ValueError("request too large")
    return length


def decode(payload: bytes) -> Request:
    fields = payload.split(b"\0")
    if len(fields) < 11:
        raise ValueError("truncated request")
    argc = int(fields[10])
    argv, env = fields[11:11 + argc], [e for e in fields[11 + argc:] if e]
    if len(argv) != argc:
        raise ValueError("truncated request")
    stdio = [(fields[i].decode(), fields[i + 1].decode()) for i in (4, 6, 8)]
    return Request(fields[0].decode(), fields[1], int(fields[2]), fields[3].decode(), stdio, argv, env)
