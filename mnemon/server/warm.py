"""Per-store state the server keeps warm for its workers: each recently used store's hot index.

Without it every worker loads ``<db>.index/hot`` (with ``hot.delta`` and ``hot.stamp``) and derives
the edge CSR with the delta's edges merged in: about 15 ms at 1k insights, 150 ms at 100k, paid
again by every command. The parent instead loads the index of each store its workers used, derives
every array a command reads (postings, ranks, the CSR), and forks later workers from there: they
inherit it copy-on-write (``mnemon.engine.hot.inherited``).

Freshness, so that a worker never uses a stale index:
- The parent reads only the derived files, never the database (it holds no connection a worker
  could inherit). An entry remembers the identity (inode, size, mtime) of the three files it was
  loaded from.
- A worker takes it only while the base file (``hot``) is the one it was loaded from: the same
  base a fresh process would read. It then checks it against the live fingerprint like any
  process does, so what changed since (a new ``hot.delta`` or stamp written by a process the
  server did not see, a write behind the index's back) is caught up from the database, exactly as
  a process that loaded an older delta catches up. A new base (a merge, a rebuild, a deleted
  folder) is never bridged: the worker loads the files.
- A worker reports the stores it opened an index for; the parent reloads those between requests
  (only the stamp changed: the fingerprint it records; anything else: the whole load).
- A worker takes an entry once: its first connection to a store mutates the index while catching
  up, so a second connection in the same process starts from the files.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnemon.engine.hot import HotIndex

MAX_STORES = 4  # the last stores used; each costs the parent its derived arrays (~150 MB at 100k)
MAX_REPORT = 1 << 16  # bytes of store paths a worker reports
_Identity = tuple[int, int, int] | None  # (inode, size, mtime_ns) of a file, None when missing


def _identity(path: Path) -> _Identity:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _files(db_path: Path) -> tuple[Path, Path, Path]:
    from mnemon.store import hotindex

    return hotindex.index_path(db_path), hotindex.delta_path(db_path), hotindex.stamp_path(db_path)


def key(db_path: Path | str) -> str:
    """One name per database file, however the command spelled its path (run after the worker's chdir)."""
    return os.path.realpath(db_path)


class Entry:
    __slots__ = ("db_path", "index", "files")

    def __init__(self, db_path: Path, index: HotIndex, files: tuple[_Identity, _Identity, _Identity]) -> None:
        self.db_path = db_path
        self.index = index
        self.files = files  # identities of hot, hot.delta, hot.stamp when ``index`` was loaded from them


class WarmIndexes:
    """The parent's table of warm indexes, and the worker's view of the copy it inherited."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.used: list[str] = []  # worker side: stores this command opened an index for
        # Worker side: indexes handed out, held to the end. Freed when the command closes its store,
        # a large one costs milliseconds of unmapping (10 ms at 100k) that os._exit does after the
        # client has its status.
        self.kept: list[HotIndex] = []

    # --- parent side ----------------------------------------------------------------------------
    def refresh(self, name: str) -> bool:
        """Bring the entry for the database ``name`` (a :func:`key`) in line with its files: load
        it, update its fingerprint from a new stamp, or drop it when the store has no index file.
        True when the entry changed (a spare forked before holds the old one)."""
        db_path = Path(name)
        paths = _files(db_path)
        now = tuple(_identity(p) for p in paths)
        entry = self.entries.get(name)
        if now[0] is None:  # no index yet (or the store is gone): the worker builds one
            return self.entries.pop(name, None) is not None
        if entry is not None and entry.files == now:
            self.entries.move_to_end(name)
            return False
        if entry is not None and entry.files[:2] == now[:2] and self._take_stamp(entry, paths[2], now):
            self.entries.move_to_end(name)
            return True
        self._load(name, db_path, paths)
        return True

    def _take_stamp(self, entry: Entry, stamp_path: Path, now: tuple[_Identity, ...]) -> bool:
        """A new stamp for the same base and delta: what a fresh load does with it (the stamp's
        fingerprint when it names this index's state). False when it names another state."""
        from mnemon.store import hotindex

        stamp = hotindex.read_stamp(entry.db_path)
        if stamp is None or stamp[0] != entry.index.state_id or _identity(stamp_path) != now[2]:
            return False
        entry.index.fp = stamp[1]
        entry.files = (now[0], now[1], now[2])
        return True

    def _load(self, name: str, db_path: Path, paths: tuple[Path, Path, Path]) -> None:
        from mnemon.engine.hot import HotIndex
        from mnemon.engine.retrieve import warm_backbone_share
        from mnemon.store import hotindex

        self.entries.pop(name, None)
        for _ in range(3):  # a worker may replace a file while we read: read until they hold still
            before = tuple(_identity(p) for p in paths)
            loaded = hotindex.read_index(db_path)
            index = HotIndex.from_file(*loaded) if loaded is not None else None
            if index is None:
                return
            stamp = hotindex.read_stamp(db_path)
            if stamp is not None and stamp[0] == index.state_id:
                index.fp = stamp[1]
            if tuple(_identity(p) for p in paths) != before:
                continue
            index.prepare_for_forks()  # what commands derive lazily, done once here; room to append rows
            warm_backbone_share(index)  # a store's property every recall reads: measured once, here
            self.entries[name] = Entry(db_path, index, (before[0], before[1], before[2]))
            while len(self.entries) > MAX_STORES:
                self.entries.popitem(last=False)
            return

    # --- worker side ----------------------------------------------------------------------------
    def take(self, db_path: Path) -> HotIndex | None:
        """The inherited index for ``db_path`` while its base file is the one it was loaded from
        (installed as ``mnemon.engine.hot.inherited`` in a worker)."""
        name = key(db_path)
        if name not in self.used:
            self.used.append(name)
        entry = self.entries.pop(name, None)
        if entry is None or _identity(_files(entry.db_path)[0]) != entry.files[0]:
            return None
        self.kept.append(entry.index)
        return entry.index

    def report(self) -> bytes:
        """The stores this worker used, for its parent to refresh."""
        return b"\0".join(os.fsencode(name) for name in self.used)[:MAX_REPORT]


def parse_report(data: bytes) -> list[str]:
    return [os.fsdecode(name) for name in data.split(b"\0") if name]
