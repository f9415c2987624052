"""Token-set scans over the active insights for the write path (diff candidates, §4.9 step 1;
semantic fallback, §4.7).

Both need |Q∩T| against every active insight. The scan tokenises each active row once per
command; ranking ties break by importance desc, created_at desc, id asc (§4.2 newest).
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from mnemon.text import content_similarity, insight_tokens, keyword_score

_SQL_ACTIVE_TEXT = (
    "SELECT id, content, category, importance, created_at, tags, entities FROM insights WHERE deleted_at IS NULL"
)


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


def rank(items: list[ScoredRow], limit: int) -> list[ScoredRow]:
    """Order by score desc, importance desc, created_at desc, id asc; keep ``limit``."""
    items = sorted(items, key=lambda s: s.row.id)
    items.sort(key=lambda s: s.row.created_at, reverse=True)
    items.sort(key=lambda s: (-s.score, -s.row.importance))
    return items[:limit]


class ActiveTokens:
    """Every active insight with its §4.1 token set, loaded once per command."""

    def __init__(self, conn: apsw.Connection) -> None:
        import json

        rows: list[ScanRow] = []
        for r in conn.execute(_SQL_ACTIVE_TEXT):
            tags = json.loads(r[5]) if r[5] else []
            ents = json.loads(r[6]) if r[6] else []
            tokens = frozenset(insight_tokens(str(r[1]), [str(t) for t in tags], [str(e) for e in ents]))
            rows.append(ScanRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), tokens))
        self.rows = rows

    def keyword(self, query: set[str], limit: int, exclude: str | None = None) -> list[ScoredRow]:
        """Top insights by |Q∩T|/|Q| (zero overlap skipped; empty Q ⇒ nothing)."""
        if not query:
            return []
        hits = [ScoredRow(r, keyword_score(query, set(r.tokens))) for r in self.rows if r.id != exclude]
        return rank([h for h in hits if h.score > 0], limit)

    def similar(self, tokens: set[str], minimum: float, limit: int, exclude: str | None = None) -> list[ScoredRow]:
        """Top insights by ContentSimilarity ≥ ``minimum`` (the embedding-free fallback, §4.7)."""
        if not tokens:
            return []
        hits = [ScoredRow(r, content_similarity(tokens, set(r.tokens))) for r in self.rows if r.id != exclude]
        return rank([h for h in hits if h.score >= minimum and h.score > 0], limit)
