"""The bundled English thesaurus: neighbour terms for a store without a model (records.THESAURUS_WEIGHT).

``thesaurus.txt`` (beside this module, built by ``scripts/build-thesaurus``) holds, for each stem of the
all-MiniLM-L6-v2 vocabulary's English words, the stems of the other vocabulary words whose vectors (each word
embedded alone) lie at a cosine >= records.THESAURUS_FLOOR from one of its words: at most
records.THESAURUS_PER_STEM, closest first. One line a stem, sorted by its bytes, a ``#`` header first::

    pet<TAB>anim 822 dog 817 cat 765 ...

(a cosine in thousandths). A lookup is a binary search over the memory-mapped file (``mnemon.sortedtable``), so a
one-shot recall reads a few pages of it, not 5 MB. A missing or damaged file gives no neighbours (recall without them), never an error.
"""

from __future__ import annotations

from pathlib import Path

from mnemon.sortedtable import SortedTable

TABLE = SortedTable(Path(__file__).with_name("thesaurus.txt"))


def neighbours(stem: str) -> list[tuple[str, float]]:
    """The thesaurus's neighbours of ``stem`` with their cosines, closest first; [] for none."""
    if not stem.isascii() or not stem:
        return []
    raw = TABLE.get(stem.encode("ascii"))
    if not raw:
        return []
    fields = raw.split()
    try:
        return [(fields[i].decode("ascii"), int(fields[i + 1]) / 1000.0) for i in range(0, len(fields) - 1, 2)]
    except (ValueError, UnicodeDecodeError):  # a damaged line: none rather than wrong ones
        return []
