"""Token-set scans over the active insights for the write path (diff candidates, §4.9 step 1;
semantic fallback, §4.7).

Both need |Q∩T| against every active insight. They read the plain-token postings of the hot
index (``engine.hot``), so ``remember`` no longer tokenises every active row: only the handful
of returned rows are loaded from SQLite. Ranking ties break by importance desc, created_at
desc, id asc (§4.2 newest), exactly as the former full scan did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mnemon.store import insights, numeric
from mnemon.text import insight_tokens

if TYPE_CHECKING:
    import apsw
    import numpy as np

    from mnemon.engine.hot import HotIndex



@dataclass(frozen=True, slots=True)
class ScanRow:
    id: str
    content: str
    category: str
    importance: int
    created_at: str
    tokens: frozenset[str]


@dataclass(frozen=True, slots=True)
class ScoredRow:
    row: ScanRow
    score: float


def _scan_row(r: tuple[object, ...]) -> ScanRow:
    # the store's tolerant reading (as show and recall have it): a malformed tags or entities column
    # (a Go store may hold one) is no list, not a JSONDecodeError that failed every search and remember
    tokens = frozenset(insight_tokens(str(r[1]), insights.load_list(r[5]), insights.load_list(r[6])))
    importance = numeric.integer(r[3], numeric.IMPORTANCE_FALLBACK)  # a malformed one: store.numeric
    return ScanRow(str(r[0]), str(r[1]), str(r[2]), importance, str(r[4]), tokens)


class ActiveTokens:
    """The active insights' §4.1 token sets, answered from the hot index of ``conn``'s store."""

    def __init__(self, conn: apsw.Connection) -> None:
        from mnemon.engine import hot

        self._conn = conn
        # Rows and tokens only: the O(E) edge-count check is left to recall (edges=False).
        self._index: HotIndex = hot.index_for(conn, Path(conn.filename), readonly=conn.readonly("main"), edges=False)
        self._rows: list[ScanRow] | None = None

    @property
    def rows(self) -> list[ScanRow]:
        """Every active row with its tokens (loaded on first use only; the ranked scans never need it)."""
        if self._rows is None:
            self._rows = [_scan_row(r) for r in insights.scan_rows(self._conn)]
        return self._rows

    def active_row(self, insight_id: str) -> ScanRow | None:
        """One active insight with its §4.1 tokens, exactly as ``rows`` would hold it, or None."""
        r = insights.scan_row(self._conn, insight_id)
        return None if r is None or r[7] is not None else _scan_row(r)

    def _hits(self, scored: list[tuple[int, float]]) -> list[ScoredRow]:
        out = []
        for row, score in scored:
            r = insights.scan_row(self._conn, self._index.id_at(row))
            if r is not None:
                out.append(ScoredRow(_scan_row(r), score))
        return out

    def _counts(self, tokens: set[str]) -> np.ndarray:
        import kernels
        import numpy as np

        post, local = self._index.query_postings(self._index.term_ids(tokens), plain=True)
        return kernels.overlap_counts_numpy(post.ptr, post.rows, np.array(local, dtype=np.int32), self._index.n)

    def _rank(self, rows: np.ndarray, score: np.ndarray, limit: int, exclude: str | None) -> list[tuple[int, float]]:
        """Order the eligible ``rows`` (ascending, ``score`` beside them) by score desc, importance
        desc, created_at desc, id asc; keep ``limit``.

        The created_at and id orders are taken among the candidates themselves (their ids and
        times), the same relative order as the index's whole-store ranks, which a write's scan then
        need not derive (an O(store) step after every catch-up)."""
        import numpy as np

        index = self._index
        if exclude is not None:
            row = index.row_of(exclude)
            if row is not None:
                keep = rows != row
                rows, score = rows[keep], score[keep]
        if rows.size > limit > 0:  # only rows scoring at least the limit-th best can be kept (1M rows: no full sort)
            keep = score >= np.partition(score, rows.size - limit)[rows.size - limit]
            rows, score = rows[keep], score[keep]
        _, id_order = np.unique(index.row_values("id_blob", rows), return_inverse=True)
        _, created_order = np.unique(index.row_values("created", rows), return_inverse=True)  # equal times: equal
        keys = (
            id_order.reshape(-1), -created_order.reshape(-1).astype(np.int64),
            -np.asarray(index.importance)[rows].astype(np.int64), -score,
        )  # fmt: skip
        return [(int(rows[k]), float(score[k])) for k in np.lexsort(keys)[:limit]]

    def keyword(self, query: set[str], limit: int, exclude: str | None = None) -> list[ScoredRow]:
        """Top insights by |Q∩T|/|Q| (zero overlap skipped; empty Q ⇒ nothing)."""
        import numpy as np

        if not query:
            return []
        counts = self._counts(query)
        rows = np.flatnonzero(counts)  # only rows sharing a token are scored (not every row's zero)
        rows = rows[self._index.active[rows]]
        return self._hits(self._rank(rows, counts[rows] / len(query), limit, exclude))

    def similar(self, tokens: set[str], minimum: float, limit: int, exclude: str | None = None) -> list[ScoredRow]:
        """Top insights by ContentSimilarity ≥ ``minimum`` (the embedding-free fallback, §4.7)."""
        import numpy as np

        if not tokens:
            return []
        counts = self._counts(tokens)
        rows = np.flatnonzero(counts)  # only rows sharing a token are scored (not every row's zero)
        shared = counts[rows]
        score = np.maximum(shared / len(tokens), shared / np.maximum(self._index.n_plain[rows], 1))
        keep = self._index.active[rows] & (score >= minimum)
        return self._hits(self._rank(rows[keep], score[keep], limit, exclude))
