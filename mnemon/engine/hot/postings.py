"""Term postings of the hot index: the BM25 inputs recall and the write-path scans score.

Owns the base's posting lists (stemmed terms with tf, plain token sets), derived by inverting the
forward columns over the base's rows and terms, and a query's posting lists over base + delta (the
base list plus the delta rows that carry the term, rows ascending as a fresh build's), so BM25's df,
N and avgdl computed over them equal a fresh build's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnemon.engine.hot.arrays import _invert
from mnemon.engine.hot.vocabulary import Vocabulary

if TYPE_CHECKING:
    import numpy as np


@dataclass(slots=True)
class Postings:
    ptr: np.ndarray
    rows: np.ndarray
    tf: np.ndarray | None


class TermPostings(Vocabulary):
    """Posting lists of terms over the base, and of a query's terms over base + delta."""

    def _derive_postings(self) -> None:
        """Base postings over rows ``< base_n`` and terms ``< base_v`` (the delta is scanned per query)."""
        n, v = self.base_n, self.base_v
        r_end, p_end = int(self.r_ptr[n]), int(self.p_ptr[n])
        d = self._derived
        d["post_r_ptr"], d["post_r_rows"], d["post_r_tf"] = _invert(
            self.r_ptr[: n + 1], self.r_term[:r_end], v, self.r_tf[:r_end])
        d["post_p_ptr"], d["post_p_rows"] = _invert(self.p_ptr[: n + 1], self.p_term[:p_end], v)  # fmt: skip

    def query_postings(self, qids: list[int], *, plain: bool) -> tuple[Postings, list[int]]:
        """Posting lists of just ``qids`` over base + delta rows (rows ascending, as a fresh build's),
        and the query ids to score them with (0..k-1)."""
        import numpy as np

        if plain:
            b_ptr, b_rows, b_tf = self._get("post_p_ptr"), self._get("post_p_rows"), None
            ptr, name = self.p_ptr, "p_term"
        else:
            b_ptr, b_rows, b_tf = self._get("post_r_ptr"), self._get("post_r_rows"), self._get("post_r_tf")
            ptr, name = self.r_ptr, "r_term"
        start = int(ptr[self.base_n])
        d_terms = self._tail(name, start)
        d_tf = self._tail("r_tf", start) if not plain else None
        d_rows = np.repeat(np.arange(self.base_n, self.n, dtype=np.int32), np.diff(ptr[self.base_n :]))
        rows_out: list[np.ndarray] = []
        tf_out: list[np.ndarray] = []
        out_ptr = np.zeros(len(qids) + 1, dtype=np.int64)
        for k, q in enumerate(qids):
            size = 0
            if q < self.base_v:
                lo, hi = int(b_ptr[q]), int(b_ptr[q + 1])
                rows_out.append(np.asarray(b_rows[lo:hi], dtype=np.int32))
                if b_tf is not None:
                    tf_out.append(np.asarray(b_tf[lo:hi], dtype=np.int32))
                size += hi - lo
            if d_terms.shape[0]:
                hit = d_terms == q
                rows_out.append(d_rows[hit])
                if d_tf is not None:
                    tf_out.append(d_tf[hit])
                size += int(hit.sum())
            out_ptr[k + 1] = out_ptr[k] + size
        rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int32)
        tf = (np.concatenate(tf_out) if tf_out else np.zeros(0, dtype=np.int32)) if not plain else None
        return Postings(out_ptr, np.ascontiguousarray(rows, dtype=np.int32), tf), list(range(len(qids)))

    def recall_postings(self) -> Postings:
        """Full postings (merges the delta: O(store); scoring uses :meth:`query_postings`)."""
        if self.base_n == self.n and self.base_v == self.n_terms:
            return Postings(self._get("post_r_ptr"), self._get("post_r_rows"), self._get("post_r_tf"))
        ptr, rows, tf = _invert(self.r_ptr, self.r_term, self.n_terms, self.r_tf)
        return Postings(ptr, rows, tf)

    def plain_postings(self) -> Postings:
        if self.base_n == self.n and self.base_v == self.n_terms:
            return Postings(self._get("post_p_ptr"), self._get("post_p_rows"), None)
        ptr, rows = _invert(self.p_ptr, self.p_term, self.n_terms)
        return Postings(ptr, rows, None)
