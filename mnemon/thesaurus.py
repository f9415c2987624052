"""The bundled English thesaurus: neighbour terms for a store without a model (records.THESAURUS_WEIGHT).

``thesaurus.txt`` (beside this module, built by ``scripts/build-thesaurus``) holds, for each stem of the
all-MiniLM-L6-v2 vocabulary's English words, the stems of the other vocabulary words whose vectors (each word
embedded alone) lie at a cosine >= records.THESAURUS_FLOOR from one of its words: at most
records.THESAURUS_PER_STEM, closest first. One line a stem, sorted by its bytes, a ``#`` header first::

    pet<TAB>anim 822 dog 817 cat 765 ...

(a cosine in thousandths). A lookup is a binary search over the memory-mapped file, so a one-shot recall reads a
few pages of it, not 5 MB. A missing or damaged file gives no neighbours (recall without them), never an error.
"""

from __future__ import annotations

import mmap
from pathlib import Path

FILE = Path(__file__).with_name("thesaurus.txt")

_mapped: mmap.mmap | None = None
_opened = False


def _map() -> mmap.mmap | None:
    global _mapped, _opened
    if not _opened:
        _opened = True
        try:
            with open(FILE, "rb") as f:
                _mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # missing, unreadable or empty: no thesaurus
            _mapped = None
    return _mapped


def _line(data: mmap.mmap, key: bytes) -> bytes | None:
    """The neighbours part of ``key``'s line, by binary search over the sorted lines."""
    lo, hi = 0, len(data)  # lo and hi always sit at the start of a line
    while lo < hi:
        start = data.rfind(b"\n", 0, (lo + hi) // 2) + 1
        start = max(start, lo)
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        tab = data.find(b"\t", start, end)
        found = data[start : end if tab < 0 else tab]
        if found == key:
            return None if tab < 0 else data[tab + 1 : end]
        if found < key:
            lo = end + 1
        else:
            hi = start
    return None


def neighbours(stem: str) -> list[tuple[str, float]]:
    """The thesaurus's neighbours of ``stem`` with their cosines, closest first; [] for none."""
    data = _map()
    if data is None or not stem.isascii() or not stem:
        return []
    raw = _line(data, stem.encode("ascii"))
    if not raw:
        return []
    fields = raw.split()
    try:
        return [(fields[i].decode("ascii"), int(fields[i + 1]) / 1000.0) for i in range(0, len(fields) - 1, 2)]
    except (ValueError, UnicodeDecodeError):  # a damaged line: none rather than wrong ones
        return []
