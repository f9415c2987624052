"""Which code a process runs, and how a server knows its files have not changed since it started.

``fingerprint()``: the version plus the names, sizes and mtimes of the package files (a stat of
each file under ``mnemon/`` and ``kernels/``: code, prompts and hook templates, 0.5-0.9 ms). The
server computes it once at start, writes it to its pid file (``server status`` compares it with the
files now), and keeps a ``FileWatch`` on the package directories: before it serves a request, the
watch says whether any file may have changed since (an inotify event: then the fingerprint is
computed again and compared). So the client, on every call, sends only ``identity()`` (the version
and the package directory it imported), not the walk: a server whose identity differs, or whose
files changed, must not serve (an upgrade never runs old code). stdlib only (the client imports
this module; ``FileWatch`` and ``fingerprint`` run in the server and in ``mnemon server``).
"""

import os
from collections.abc import Callable

from mnemon import __version__

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGES = ("mnemon", "kernels")


def identity() -> str:
    """What the client sends: this version, imported from this directory (a server started from
    another directory, or another version, refuses). The server checks the files themselves."""
    return "%s:%s" % (__version__, _ROOT)


def _walk(top: str, out: list[bytes], dirs: list[str] | None = None) -> None:
    if dirs is not None:
        dirs.append(top)
    with os.scandir(top) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    _walk(entry.path, out, dirs)
            elif not entry.name.endswith(".pyc"):
                st = entry.stat()
                out.append(b"%s:%d:%d" % (os.fsencode(entry.path), st.st_size, st.st_mtime_ns))


def _tops(root: str) -> list[str]:
    return [os.path.join(root, name) for name in _PACKAGES]


def fingerprint(root: str = _ROOT) -> str:
    import binascii  # crc32 as zlib's (same values), a lighter import than zlib

    files: list[bytes] = []
    for top in _tops(root):
        _walk(top, files)
    files.sort()
    return "%s-%08x-%d" % (__version__, binascii.crc32(b"\n".join(files)), len(files))


# inotify(7): any change to an entry of a watched directory, or to the directory itself.
_IN_EVENTS = (0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800)
# IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE,
# IN_DELETE_SELF, IN_MOVE_SELF
_IN_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000


class FileWatch:
    """The server's watch on its package files (every directory but ``__pycache__``).

    ``current(expected)`` is True while the files still have the fingerprint ``expected``. With
    inotify it costs one non-blocking read while nothing changed; the kernel queues an event
    before the write that caused it returns, so a change made before a client connected is seen
    when its request is checked. Any event (a ``.pyc`` beside a source, a new directory, an
    overflow) re-arms the watch on every directory, then computes the fingerprint again: equal
    means nothing that counts changed. Without inotify (another OS, no watches left), every check
    computes the fingerprint.
    """

    def __init__(self, root: str = _ROOT, *, inotify: bool = True) -> None:
        self.root = root
        self.fd: int | None = None
        self._add: Callable[[int, bytes, int], int] | None = None  # libc's inotify_add_watch
        if inotify:
            self._open()

    def _open(self) -> None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        self.fd, self._add = fd, libc.inotify_add_watch
        if not self._arm():
            self.close()

    def _arm(self) -> bool:
        """Watch every package directory there is now; False if one cannot be watched."""
        dirs: list[str] = []
        for top in _tops(self.root):
            _walk(top, [], dirs)
        add, fd = self._add, self.fd
        if add is None or fd is None:
            return False
        return all(add(fd, os.fsencode(d), _IN_EVENTS) >= 0 for d in dirs)

    def _changed(self) -> bool:
        """Drain the queue: True if any event came."""
        seen = False
        while True:
            try:
                if not os.read(self.fd, 65536):  # type: ignore[arg-type]
                    return seen
            except BlockingIOError:
                return seen
            seen = True

    def current(self, expected: str) -> bool:
        try:
            if self.fd is None:
                return fingerprint(self.root) == expected
            if not self._changed():
                return True
            if not self._arm():  # a directory we cannot watch any more: compare on every request
                self.close()
            return fingerprint(self.root) == expected
        except OSError:  # files going away under us (an uninstall): not the code we started from
            return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
