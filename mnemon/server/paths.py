"""Where a user's server lives: one 0700 directory per uid, one socket per installation.

The directory is ``$XDG_RUNTIME_DIR/mnemon-<uid>``, else ``$TMPDIR/mnemon-<uid>`` (else under
``/tmp``). Inside it, each installation (virtualenv and Python version, package directory and the environment read
at start-up by numba and Python) has its own ``server-<key>`` socket, lock and pid file, so two
virtualenvs never fight over one server, while an upgrade in place (same key, new files) meets
the old server and makes it exit (see ``fingerprint``). stdlib only: imported by every client call.
"""

import os
import sys

# Variables read once at start or import time by the interpreter and the preloaded libraries: a
# server started under other values would not behave as a fresh process would, so they are part
# of the installation key. (PYTHONPATH is not: which mnemon the client imported is PACKAGE_DIR.)
_IMPORT_TIME_PREFIXES = (b"NUMBA_", b"PYTHONHASHSEED")
# The BLAS pool sizes numpy reads at import; absent means 1 (config.limit_blas_threads).
_BLAS_THREADS = (b"OPENBLAS_NUM_THREADS", b"OMP_NUM_THREADS", b"MKL_NUM_THREADS")

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# CRC-32 (zlib's polynomial, the same values as binascii.crc32) four bits at a time: for the few
# hundred bytes of an installation key this takes about 60 us, where importing binascii (a shared
# library) took about 270 us of every client call.
_CRC_NIBBLE = (0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4, 0x4db26158, 0x5005713c,
               0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c, 0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c)


def crc32(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_NIBBLE[(crc ^ byte) & 0xF] ^ (crc >> 4)
        crc = _CRC_NIBBLE[(crc ^ (byte >> 4)) & 0xF] ^ (crc >> 4)
    return crc ^ 0xFFFFFFFF


def runtime_dir(environ: dict[bytes, bytes]) -> bytes:
    base = environ.get(b"XDG_RUNTIME_DIR") or environ.get(b"TMPDIR") or b"/tmp"
    return os.path.join(base, b"mnemon-%d" % os.getuid())


def install_key(environ: dict[bytes, bytes]) -> str:
    # sys.prefix (the virtualenv) and the version, not sys.executable: python and python3 in one
    # venv are the same interpreter and must share one server.
    parts = [os.fsencode(sys.prefix), sys.version.encode(), os.fsencode(PACKAGE_DIR)]
    parts += sorted(k + b"=" + v for k, v in environ.items() if k.startswith(_IMPORT_TIME_PREFIXES))
    parts += [k + b"=" + environ.get(k, b"1") for k in _BLAS_THREADS]
    return "%08x" % crc32(b"\0".join(parts))


def server_path(environ: dict[bytes, bytes], suffix: str) -> bytes:
    """``<runtime dir>/server-<key>.<suffix>`` for suffix ``sock``, ``lock`` or ``pid``."""
    return os.path.join(runtime_dir(environ), b"server-%s.%s" % (install_key(environ).encode(), suffix.encode()))


def scratch_path(environ: dict[bytes, bytes]) -> bytes:
    """Where this server's spares rehearse (``rehearsal``): in memory (``/dev/shm``) when there is
    such a directory, else ``<runtime dir>/server-<key>.scratch``. A rehearsal writes and syncs a
    small throwaway store (about 20 fsyncs): on a disk it took 95-100 ms instead of 29 ms, and its
    syncs queued with the users' own. Named for the installation and the runtime directory: one
    server owns it, and the next one for the same pair removes a killed one's."""
    shm = b"/dev/shm"
    if os.path.isdir(shm):
        base = os.path.join(shm, b"mnemon-%d" % os.getuid())
        if ensure_private_dir(base):
            return os.path.join(base, b"server-%s-%08x.scratch" % (install_key(environ).encode(),
                                                                 crc32(runtime_dir(environ))))
    return server_path(environ, "scratch")


def private_dir_problem(path: bytes) -> str | None:
    """None when ``path`` is a real directory owned by us that no one else may enter, else what it is
    instead (said after "it"): a socket in any other directory could be someone else's, who would then
    receive our stdio and env."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return "cannot be examined: %s" % exc.strerror
    kind = st.st_mode & 0o170000
    if kind != 0o040000:
        return "is a symbolic link, not a directory" if kind == 0o120000 else "is not a directory"
    if st.st_uid != os.getuid():
        return "is owned by uid %d, not by this user (uid %d)" % (st.st_uid, os.getuid())
    if st.st_mode & 0o077:
        return "is open to other users (mode %04o; it must be 0700)" % (st.st_mode & 0o7777)
    return None


def private_dir_ok(path: bytes) -> bool:
    return private_dir_problem(path) is None


def prepare_private_dir(path: bytes) -> str | None:
    """Create the runtime directory 0700 if missing; None when it is safe to use, else why not (after "it")."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return "cannot be created: %s" % exc.strerror
    return private_dir_problem(path)


def ensure_private_dir(path: bytes) -> bool:
    return prepare_private_dir(path) is None
