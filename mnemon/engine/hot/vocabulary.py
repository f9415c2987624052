"""The hot index's vocabulary: term ids for stemmed BM25 terms and plain tokens.

The base's terms are sorted (ids are positions), kept as the mapped bytes of the file until a list
is needed (``_SortedTerms``: looked up by bisection over the bytes); terms first seen after the base
are appended unsorted (ids ``n_sorted..``, found through a dict). A build or a merge sorts the whole
vocabulary and renumbers every term column (``_sort_vocab``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mnemon.engine.hot.columns import ColumnStore

if TYPE_CHECKING:
    import numpy as np


# terms a base vocabulary remembers having looked up (about 100 bytes each), forgotten all at once past it
FOUND_MAX = 100_000


class _SortedTerms:
    """The base's sorted vocabulary straight from the mapped file (``\n``-joined UTF-8): looked up
    by bisection over the bytes (UTF-8 byte order is code point order), so a process that only
    asks for a query's few terms never splits a million-term string into a list."""

    def __init__(self, raw: np.ndarray) -> None:
        import numpy as np

        self.raw = raw
        breaks = np.flatnonzero(raw == 10)
        self.starts = np.concatenate([[0], breaks + 1]) if raw.size else np.zeros(0, dtype=np.int64)
        self.ends = np.concatenate([breaks, [raw.size]]) if raw.size else np.zeros(0, dtype=np.int64)
        # memoryviews, no copy: indexing one gives a Python int and slicing one skips numpy's scalar and view
        # objects (a lookup 10.6 -> 6.2 us on a 1k-turn store; the thesaurus's neighbour terms ask for a few hundred)
        self._raw = np.ascontiguousarray(raw, dtype=np.uint8).data
        self._starts = np.ascontiguousarray(self.starts, dtype=np.int64).data
        self._ends = np.ascontiguousarray(self.ends, dtype=np.int64).data
        # the answers so far: the bytes never change, and a warm process asks for the same terms again (the
        # thesaurus's neighbour terms look up about 160 a question, most of them absent from a small store)
        self._found: dict[str, int | None] = {}

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def _bytes(self, i: int) -> bytes:
        return self._raw[self._starts[i] : self._ends[i]].tobytes()

    def find(self, term: str) -> int | None:
        found = self._found
        if term in found:
            return found[term]
        if len(found) >= FOUND_MAX:
            found.clear()
        found[term] = got = self._search(term)
        return got

    def _search(self, term: str) -> int | None:
        try:
            want = term.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no stored term has one
            return None
        raw, starts, ends = self._raw, self._starts, self._ends  # inlined _bytes: the loop is the cost
        lo, hi = 0, len(starts)
        while lo < hi:
            mid = (lo + hi) // 2
            if raw[starts[mid] : ends[mid]].tobytes() < want:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(starts) and self._bytes(lo) == want else None

    def tolist(self) -> list[str]:
        text = self.raw.tobytes().decode("utf-8")
        return text.split("\n") if text else []


class Vocabulary(ColumnStore):
    """Term ids: the sorted base vocabulary, then the terms appended since."""

    def term_ids(self, terms: Iterable[str]) -> list[int]:
        """Ids of the known terms among ``terms`` (unknown terms cannot match anything)."""
        out = []
        for term in terms:
            got = self._term_id(term)
            if got is not None:
                out.append(got)
        return out

    def _term_id(self, term: str) -> int | None:
        got = self._sorted_id(term)
        return got if got is not None else self._tail_terms.get(term)

    def _sorted_id(self, term: str) -> int | None:
        terms = self._sorted_terms
        if isinstance(terms, _SortedTerms):
            return terms.find(term)
        pos = bisect_left(terms, term)
        return pos if pos < len(terms) and terms[pos] == term else None

    @property
    def n_sorted(self) -> int:
        return len(self._sorted_terms)

    @property
    def n_terms(self) -> int:
        return len(self._sorted_terms) + len(self._tail_vocab)

    @property
    def vocab(self) -> list[str]:
        """Every term by id (builds the list: for merges, persistence and tests, not queries)."""
        if isinstance(self._sorted_terms, _SortedTerms):
            self._sorted_terms = self._sorted_terms.tolist()
        return self._sorted_terms + self._tail_vocab

    def _vocab_from(self, start: int) -> list[str]:
        """Terms with ids ``start..`` (the tail alone when ``start`` is past the sorted part)."""
        if start >= self.n_sorted:
            return self._tail_vocab[start - self.n_sorted :]
        return self.vocab[start:]

    def _sort_vocab(self) -> None:
        """Sort the whole vocabulary (ids = positions) and renumber every term (a build or merge)."""
        import numpy as np

        merged = self.vocab
        order = sorted(range(len(merged)), key=merged.__getitem__)
        remap = np.empty(len(merged), dtype=np.int32)
        remap[np.array(order, dtype=np.int64)] = np.arange(len(merged), dtype=np.int32)
        self._sorted_terms = [merged[i] for i in order]
        self.r_term = remap[self.r_term] if self.r_term.size else self.r_term
        self.p_term = remap[self.p_term] if self.p_term.size else self.p_term
        self._tail_vocab = []
        self._tail_terms = {}
