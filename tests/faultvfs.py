"""A fault-injecting apsw VFS for the reliability suite: I/O errors, disk full, read-only, power cuts.

``FaultVFS(name)`` registers a VFS that passes every call to the default one and counts
``xRead``/``xWrite``/``xSync`` per connection-independent counter. A test points the store at it
with ``mnemon.store.connection.VFS_NAME = name`` and then:

- ``vfs.fail("write", n, apsw.IOError)``: the n-th write (1-based) and every later one raise, as a
  dying disk does; ``"sync"`` and ``"read"`` likewise, ``apsw.FullError`` models disk full;
- ``vfs.readonly = True``: opens asking for write access fail (SQLite then opens read-only, as on
  a read-only mount) and any write raises ``apsw.ReadOnlyError``;
- power cuts: writes go through to the real file (SQLite must read back what it wrote) but each is
  logged with the bytes it replaced until the file's next ``xSync``. ``vfs.cut_power()`` (or ``vfs.cut_at = n``, the
  n-th write) marks the moment; ``vfs.apply_power_cut(rng)`` then rewinds the files to a state a disk could be in after
  losing power at that moment: every write after the cut is undone, and each unsynced write before
  it is independently kept, dropped, or torn at a 512-byte boundary. The ``-shm`` file is deleted
  (shared memory does not survive a reboot).

Only files under ``root`` are logged, so other databases in the process are unaffected.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import apsw

SECTOR = 512


@dataclass
class _Write:
    path: str
    offset: int
    old: bytes  # bytes the write replaced (shorter than the write when it extended the file)
    new_len: int
    old_size: int
    after_cut: bool


@dataclass
class _Truncate:
    path: str
    old_tail: bytes
    size: int
    after_cut: bool


@dataclass
class _Delete:
    path: str
    content: bytes
    after_cut: bool


@dataclass
class Counters:
    read: int = 0
    write: int = 0
    sync: int = 0
    failures: dict[str, tuple[int, type[apsw.Error]]] = field(default_factory=dict)


def _pread(path: str, offset: int, length: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)


class FaultFile(apsw.VFSFile):
    def __init__(self, vfs: FaultVFS, name: apsw.URIFilename | str | None, flags: list[int]) -> None:
        self._vfs = vfs
        if isinstance(name, apsw.URIFilename):
            self._path = name.filename()
        else:
            self._path = name or ""
        self._logged = bool(self._path) and self._path.startswith(vfs.root)
        if vfs.readonly and flags[0] & apsw.SQLITE_OPEN_READWRITE and self._logged:
            raise apsw.CantOpenError("read-only file system (fault injection)")
        super().__init__("", name, flags)

    def _tick(self, kind: str) -> None:
        counters = self._vfs.counters
        setattr(counters, kind, getattr(counters, kind) + 1)
        failing = counters.failures.get(kind)
        if failing is not None and getattr(counters, kind) >= failing[0]:
            raise failing[1](f"injected {kind} failure")

    def xRead(self, amount: int, offset: int) -> bytes:
        if self._logged:
            self._tick("read")
        return super().xRead(amount, offset)

    def xWrite(self, data: bytes, offset: int) -> None:
        if self._logged:
            if self._vfs.readonly:
                raise apsw.ReadOnlyError("read-only file system (fault injection)")
            self._tick("write")
            if self._vfs.cut_at and self._vfs.counters.write >= self._vfs.cut_at:
                self._vfs.cut = True
            size = os.path.getsize(self._path) if os.path.exists(self._path) else 0
            old = _pread(self._path, offset, len(data))
            self._vfs.log.append(_Write(self._path, offset, old, len(data), size, self._vfs.cut))
        super().xWrite(data, offset)

    def xTruncate(self, newsize: int) -> None:
        if self._logged:
            size = os.path.getsize(self._path)
            tail = _pread(self._path, newsize, max(0, size - newsize))
            self._vfs.log.append(_Truncate(self._path, tail, newsize, self._vfs.cut))
        super().xTruncate(newsize)

    def xSync(self, flags: int) -> None:
        if self._logged:
            self._tick("sync")
            if not self._vfs.cut:
                # Durable from here on: forget how to undo this file's earlier writes.
                self._vfs.log = [w for w in self._vfs.log if w.path != self._path]
            if not self._vfs.real_sync:
                return  # durability is simulated by the log; a real fsync only costs wall time
        super().xSync(flags)


class FaultVFS(apsw.VFS):
    """Register with ``FaultVFS(name, root)``; unregister with ``.unregister()``."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = str(root)
        self.counters = Counters()
        self.readonly = False
        self.cut = False
        self.real_sync = False
        self.cut_at = 0  # when set, power is cut at this write (1-based): it and all later writes are lost
        self.log: list[_Write | _Truncate | _Delete] = []
        super().__init__(name, "")

    def xOpen(self, name: apsw.URIFilename | str | None, flags: list[int]) -> FaultFile:
        return FaultFile(self, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        if filename.startswith(self.root) and os.path.exists(filename):
            if self.cut:
                with open(filename, "rb") as fh:
                    self.log.append(_Delete(filename, fh.read(), True))
            else:
                # A durable unlink (SQLite syncs the directory): the old file's history is moot.
                self.log = [e for e in self.log if e.path != filename]
        super().xDelete(filename, syncdir)

    def reset(self, root: Path | None = None) -> None:
        if root is not None:
            self.root = str(root)
        self.counters = Counters()
        self.readonly = False
        self.cut = False
        self.cut_at = 0
        self.log = []

    def fail(self, kind: str, n: int, error: type[apsw.Error] = apsw.IOError) -> None:
        self.counters.failures[kind] = (n, error)

    def cut_power(self) -> None:
        self.cut = True

    def apply_power_cut(self, rng: random.Random) -> dict[str, int]:
        """Rewind the files as a disk might after the cut; return how many writes were kept/dropped/torn."""
        tally = {"kept": 0, "dropped": 0, "torn": 0, "undone_after_cut": 0}
        for entry in reversed(self.log):
            if isinstance(entry, _Delete):
                if entry.after_cut:  # the unlink never reached the disk
                    with open(entry.path, "wb") as fh:
                        fh.write(entry.content)
                continue
            if not os.path.exists(entry.path):
                continue  # deleted before the cut (SQLite syncs the directory): nothing to rewind
            if isinstance(entry, _Truncate):
                if entry.after_cut or rng.random() < 0.5:
                    with open(entry.path, "r+b") as fh:
                        fh.seek(entry.size)
                        fh.write(entry.old_tail)
                continue
            if entry.after_cut:
                choice = "undone_after_cut"
            else:
                choice = rng.choice(["kept", "dropped", "torn"])
            tally[choice] += 1
            if choice == "kept":
                continue
            keep = 0
            if choice == "torn":
                # The first k sectors of the write reached the platter, the rest did not.
                keep = SECTOR * rng.randrange(0, max(1, entry.new_len // SECTOR))
            with open(entry.path, "r+b") as fh:
                fh.seek(entry.offset + keep)
                fh.write(entry.old[keep:])
                if entry.offset + entry.new_len > entry.old_size:
                    # The write had extended the file: the unwritten part never existed.
                    fh.truncate(max(entry.old_size, entry.offset + keep))
        self.log = []
        for shm in Path(self.root).rglob("*-shm"):
            shm.unlink()
        return tally
