"""Lifecycle upkeep (contract §4.8, §3.10): effective importance, auto-prune, gc, compaction."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mnemon import lifecycle
from mnemon.config import Settings
from mnemon.engine.core import EngineBase, format_ts
from mnemon.errors import NotFoundError
from mnemon.lifecycle import _SECONDS_PER_DAY
from mnemon.records import (
    EDGE_FACTOR_CAP,
    EDGE_FACTOR_STEP,
    GC_KEEP_ACCESS_BONUS,
    IMMUNE_ACCESS_COUNT,
    IMMUNE_IMPORTANCE,
    Insight,
)
from mnemon.store import counts, edges, insights, numeric, oplog
from mnemon.validate import check_text

if TYPE_CHECKING:
    import apsw


def effective_importance_of(insight: Insight, edge_rows: int, now: datetime) -> float:
    return effective_importance(
        insight.importance, insight.access_count, insight.last_accessed_at, insight.created_at, edge_rows, now
    )


def _canonical_stamp(ts: str | None) -> datetime | None:
    """``ts`` parsed in C when it is a canonical UTC stamp (``YYYY-MM-DDTHH:MM:SSZ``), else None."""
    if not ts or len(ts) != 20 or _CANONICAL_STAMP.fullmatch(ts) is None:
        return None
    try:
        return datetime(
            int(ts[:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]), int(ts[17:19]),
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None


_CANONICAL_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)


def effective_importance(
    importance: int, access_count: int, last_access: str | None, created_at: str, edge_rows: int, now: datetime
) -> float:
    """lifecycle.effective_importance, bit for bit, with the canonical stamps every write stores
    parsed in C (the lifecycle parser handles every other form)."""
    ts = last_access or created_at
    parsed = _canonical_stamp(ts)
    if parsed is None:
        return lifecycle.effective_importance(importance, access_count, last_access, created_at, edge_rows, now)
    days = (now - parsed).total_seconds() / _SECONDS_PER_DAY
    access = max(1.0, math.log1p(max(0, access_count)))  # as lifecycle's: a negative count reads as 0
    edges_factor = 1.0 + EDGE_FACTOR_STEP * min(edge_rows, EDGE_FACTOR_CAP)
    return lifecycle.base_importance(importance) * access * lifecycle.decay(days) * edges_factor


def refresh_effective_importance(conn: apsw.Connection, ids: Iterable[str], now: datetime) -> dict[str, float]:
    """Recompute and store EI for ``ids`` (active ones); return the new values."""
    wanted = list(dict.fromkeys(ids))
    if len(wanted) <= 1:  # remember, gc --keep: two index look-ups
        found = [i for i in (insights.get(conn, w) for w in wanted) if i is not None]
        touching = {i.id: edges.count_touching(conn, i.id) for i in found}
        by_id = {i.id: (i.importance, i.access_count, i.last_accessed_at, i.created_at) for i in found}
    else:  # import: set-based, a few statements instead of two per id, and only the EI columns
        by_id = {
            str(r[0]): (numeric.integer(r[1], numeric.IMPORTANCE_FALLBACK),
                        numeric.integer(r[2], numeric.ACCESS_COUNT_FALLBACK), None if r[3] is None else str(r[3]),
                        str(r[4]))
            for r in insights.ei_inputs_many(conn, wanted)
        }
        touching = edges.count_touching_many(conn, list(by_id))
    values = {
        k: effective_importance(*by_id[k], touching.get(k, 0), now) for k in wanted if k in by_id
    }
    insights.set_effective_importance(conn, ((v, k) for k, v in values.items()))
    return values


def auto_prune(
    conn: apsw.Connection, settings: Settings, now: datetime, *, exclude: list[str], trigger: str
) -> list[str]:
    """Soft-delete up to 10 lowest-EI, non-immune, past-grace insights over the ceiling (§4.8).

    Runs inside the caller's transaction; every pruned id gets its own ``prune`` oplog row.
    """
    ceiling = settings.max_insights
    if ceiling <= 0:
        return []
    # The trigger-kept counter (one row) where the store has it: COUNT(*) scans every row (0.1 s at 1M).
    active = counts.active_count(conn) if counts.available(conn) else insights.active_count(conn)
    if active <= ceiling:
        return []
    victims = insights.prune_candidates(
        conn,
        max_importance=IMMUNE_IMPORTANCE,
        max_access=IMMUNE_ACCESS_COUNT,
        stored_before=lifecycle.prune_cutoff(now, settings.auto_prune_min_age),
        exclude=exclude,
        limit=lifecycle.prune_count(active, ceiling),
    )
    stamp = format_ts(now)
    detail = lifecycle.prune_detail(active, ceiling, settings.auto_prune_min_age, trigger)
    pruned: list[str] = []
    for victim in victims:
        if insights.soft_delete(conn, victim.id, stamp):
            edges.delete_touching(conn, victim.id)
            oplog.append(conn, "prune", victim.id, detail, stamp)
            pruned.append(victim.id)
    return pruned


class UpkeepPipeline:
    """gc suggest / keep / compact: effective importance over every active insight, retention, VACUUM."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def gc(self, threshold: float, limit: int) -> dict[str, object]:
        """Recompute EI for every active insight and list the prunable ones (§3.10)."""
        self.ctx.require_writable("gc")
        now = self.ctx.now()
        with self.ctx.store.transaction("gc") as conn:
            active = insights.all_active(conn)
            counts = edges.counts_by_node(conn)
            scored = []
            for ins in active:
                ei = effective_importance_of(ins, counts.get(ins.id, 0), now)
                ins.effective_importance = ei
                scored.append(ins)
            insights.set_effective_importance(conn, ((i.effective_importance, i.id) for i in scored))
            found = [
                i for i in scored
                if i.effective_importance < threshold and not lifecycle.is_immune(i.importance, i.access_count)
            ]
            found.sort(key=lambda i: (i.effective_importance, i.created_at, i.id))
            shown = found[:limit]
            oplog.append(
                conn, "gc", "", f"threshold={threshold:.2f} found={len(found)} total={len(active)}", format_ts(now)
            )
        candidates = [
            {
                "insight": i.to_json(),
                "effective_importance": i.effective_importance,
                "days_since_access": lifecycle.days_since_access(i.last_accessed_at, i.created_at, now),
                "edge_count": counts.get(i.id, 0),
                "immune": lifecycle.is_immune(i.importance, i.access_count),
            }
            for i in shown
        ]
        return {
            "total_insights": len(active),
            "threshold": threshold,
            "candidates_found": len(found),
            "candidates": candidates,
            "max_insights": max(self.ctx.settings.max_insights, 0),
            "actions": {"purge": "mnemon forget <id>", "keep": "mnemon gc --keep <id>"},
        }

    def gc_keep(self, insight_id: str) -> dict[str, object]:
        """Retain an insight: +3 accesses, touched now, EI refreshed (§3.10)."""
        check_text(insight_id, "id")
        self.ctx.require_writable("gc")
        now = self.ctx.now()
        stamp = format_ts(now)
        with self.ctx.store.transaction("gc") as conn:
            if not insights.keep(conn, insight_id, stamp, GC_KEEP_ACCESS_BONUS):
                raise NotFoundError(f"insight {insight_id} not found")
            ei = refresh_effective_importance(conn, [insight_id], now)[insight_id]
            kept = insights.get(conn, insight_id)
            assert kept is not None
            oplog.append(conn, "gc_keep", insight_id, f"access={kept.access_count}", stamp)
        return {
            "status": "retained",
            "id": insight_id,
            "content": kept.content,
            "new_access": kept.access_count,
            "effective_importance": ei,
            "immune": lifecycle.is_immune(kept.importance, kept.access_count),
        }

    def gc_compact(self) -> dict[str, object]:
        """Checkpoint the WAL, VACUUM, checkpoint again; report the size before and after."""
        self.ctx.require_writable("gc --compact")
        before, after = self.ctx.store.compact()
        return {"status": "compacted", "before_bytes": before, "after_bytes": after}

