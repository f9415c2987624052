"""A bundled lookup table read without loading it: a text file of ``KEY<TAB>VALUE`` lines sorted by the keys'
bytes (a ``#`` header line first), memory-mapped and searched by bisection, so a one-shot recall reads a few
pages of it whatever its size. The thesaurus (``mnemon.thesaurus``) and the English word frequencies
(``mnemon.frequency``) are such files."""

from __future__ import annotations

import mmap
from pathlib import Path


def map_file(path: Path) -> mmap.mmap | None:
    """The file memory-mapped read-only; None when it is missing, unreadable or empty (no table, never an
    error: the callers then go without what it gives)."""
    try:
        with open(path, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def find(data: mmap.mmap, key: bytes) -> bytes | None:
    """The value part of ``key``'s line (empty when the line has no tab), by binary search over the sorted
    lines; None when no line has that key."""
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
