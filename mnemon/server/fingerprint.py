"""Which code a process runs: the version plus the names, sizes and mtimes of the package files.

The client computes it on every call (a stat of each file under ``mnemon/`` and ``kernels/``:
code, prompts and hook templates, about a millisecond) and the server once at start; a server whose fingerprint
differs from the client's was started from other files, so it must not serve (an upgrade never
runs old code). stdlib only.
"""

import binascii  # crc32 as zlib's (same values), a lighter import than zlib
import os

from mnemon import __version__

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGES = ("mnemon", "kernels")


def _walk(top: str, out: list[bytes]) -> None:
    with os.scandir(top) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    _walk(entry.path, out)
            elif not entry.name.endswith(".pyc"):
                st = entry.stat()
                out.append(b"%s:%d:%d" % (os.fsencode(entry.path), st.st_size, st.st_mtime_ns))


def fingerprint() -> str:
    files: list[bytes] = []
    for name in _PACKAGES:
        _walk(os.path.join(_ROOT, name), files)
    files.sort()
    return "%s-%08x-%d" % (__version__, binascii.crc32(b"\n".join(files)), len(files))
