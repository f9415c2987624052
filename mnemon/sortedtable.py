"""A bundled lookup table read without loading it: a text file of ``KEY<TAB>VALUE`` lines sorted by the keys'
bytes (a ``#`` header line first), memory-mapped on its first lookup and searched by bisection, so a one-shot
recall reads a few pages of it whatever its size. The thesaurus (``mnemon.thesaurus``) and the English word
frequencies (``mnemon.frequency``) are such files."""

from __future__ import annotations

import mmap
from pathlib import Path


class SortedTable:
    """One such file. A missing, unreadable or empty file is an empty table (never an error: the callers go
    without what it gives); it is mapped once per process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: mmap.mmap | None = None
        self._opened = False

    def _map(self) -> mmap.mmap | None:
        if not self._opened:
            self._opened = True
            try:
                with open(self.path, "rb") as f:
                    self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # missing, unreadable or empty
                self._data = None
        return self._data

    def get(self, key: bytes) -> bytes | None:
        """The value part of ``key``'s line (empty when the line has no tab); None when no line has that key."""
        data = self._map()
        return None if data is None else find(data, key)


def find(data: mmap.mmap, key: bytes) -> bytes | None:
    """The value part of ``key``'s line in the mapped sorted ``data``, by binary search over its lines."""
    lo, hi = 0, len(data)  # lo and hi always sit at the start of a line
    while lo < hi:
        start = data.rfind(b"\n", 0, (lo + hi) // 2) + 1
        start = max(start, lo)
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        tab = data.find(b"\t", start, end)
        found = data[start : end if tab < 0 else tab]
        if found == key:
            return b"" if tab < 0 else data[tab + 1 : end]
        if found < key:
            lo = end + 1
        else:
            hi = start
    return None
