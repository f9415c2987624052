"""Read commands that are not retrieval: show, related, status, log, receipt (§3.6, §3.9, §3.11-3.13)."""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING

from mnemon.engine.core import EngineBase
from mnemon.errors import InputError, NotFoundError
from mnemon.records import OplogEntry
from mnemon.related import bfs
from mnemon.store import counts, edges, insights, oplog, receiptkey
from mnemon.validate import check_edge_type, check_limit, check_text

if TYPE_CHECKING:
    import apsw

RELATED_MAX_NODES = 1000  # `related` has no flag for it; the depth bounds the walk in practice
TOP_ENTITIES = 20
RECEIPT_SCHEMA = "mnemon.memory.receipt.v1"


def neighbours(conn: apsw.Connection, node: str) -> list[tuple[str, str]]:
    """Both directions of every edge row touching ``node``, rowid order (BFS adjacency)."""
    out = []
    for e in edges.touching(conn, node):
        out.append((e.target_id if e.source_id == node else e.source_id, e.edge_type))
    return out


class ReadPipeline:
    """show / related / status / log / receipt: reads the store; writes only the access bump and its oplog row."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def neighbours(self, node: str) -> list[tuple[str, str]]:
        return neighbours(self.ctx.store.conn, node)

    def is_active(self, insight_id: str) -> bool:
        return insights.get(self.ctx.store.conn, insight_id) is not None

    def bump_access(self, ids: list[str], operation: str, detail: str) -> None:
        """Access-count side effect plus oplog row in one short transaction; skipped under --readonly."""
        if self.ctx.settings.readonly:
            return
        stamp = self.ctx.now_ts()
        with self.ctx.store.transaction(operation) as conn:
            insights.bump_access(conn, ids, stamp)
            oplog.append(conn, operation, ids[0] if len(ids) == 1 and operation == "show" else "", detail, stamp)
        self.ctx.after_write()

    def show(self, insight_id: str) -> dict[str, object]:
        check_text(insight_id, "id")
        found = insights.get(self.ctx.store.conn, insight_id)
        if found is None:
            raise NotFoundError(f"insight {insight_id} not found")
        self.bump_access([insight_id], "show", "full insight")
        return found.to_json()

    def related(self, insight_id: str, *, edge_type: str | None = None, depth: int = 2) -> list[dict[str, object]]:
        check_text(insight_id, "id")
        if edge_type:
            check_edge_type(edge_type)
        if depth <= 0:
            raise InputError("depth must be greater than 0")
        if insights.get(self.ctx.store.conn, insight_id) is None:
            raise NotFoundError(f"insight not found: {insight_id}")
        hits = bfs(
            insight_id, self.neighbours, depth, RELATED_MAX_NODES, edge_type=edge_type or None,
            is_active=self.is_active,
        )
        out = []
        for hit in hits:
            ins = insights.get(self.ctx.store.conn, hit.id)
            if ins is None:
                continue
            out.append({
                "id": ins.id, "content": ins.content, "category": ins.category, "importance": ins.importance,
                "depth": hit.depth, "via_edge_type": hit.via,
            })
        return out

    def status(self) -> dict[str, object]:
        conn = self.ctx.store.conn
        if counts.available(conn):  # O(categories + top entities): the counters the writes keep
            by_category = counts.by_category(conn)
            total, deleted, edge_count = sum(by_category.values()), counts.deleted_count(conn), counts.edge_count(conn)
            top = counts.top_entities(conn, TOP_ENTITIES)
        else:  # an old or Go store opened --readonly: never migrated, so counted the slow way
            by_category = insights.count_by_category(conn)
            total, deleted, edge_count = insights.active_count(conn), insights.deleted_count(conn), edges.count_all(conn)
            top = insights.top_entities(conn, TOP_ENTITIES)
        return {
            "total_insights": total,
            "deleted_insights": deleted,
            "by_category": dict(sorted(by_category.items())),
            "edge_count": edge_count,
            "top_entities": [{"entity": e, "count": n} for e, n in top],
            "oplog_count": oplog.count(conn),
            "db_path": str(self.ctx.settings.db_path),
            "db_size_bytes": self.ctx.store.size_bytes(),
        }

    def log(self, limit: int) -> list[OplogEntry]:
        check_limit(limit)
        return oplog.recent(self.ctx.store.conn, limit)

    def receipt(self, limit: int) -> dict[str, object]:
        """Privacy-reduced export of the last oplog rows: hashes, never raw content (§3.13)."""
        check_limit(limit)
        rows = oplog.recent(self.ctx.store.conn, limit)
        # Keyed per store (HMAC): a bare SHA-256 of a short id or detail is reversible by guessing.
        key = receiptkey.get(self.ctx.store.conn)
        note = "insight ids and details are HMAC-SHA256 digests keyed per store; raw content is never included"
        if key is None and self.ctx.settings.readonly:
            key = receiptkey.ephemeral()
            note += "; --readonly store without a key: an ephemeral key was used, digests match no other receipt"
        elif key is None:
            key = receiptkey.ensure(self.ctx.store.conn)
        events = []
        for row in rows:
            event: dict[str, object] = {
                "event_name": "mnemon.memory.operation.observed",
                "operation": row.operation,
                "created_at": row.created_at,
            }
            if row.insight_id:
                event["insight_id_hash"] = _digest(key, row.insight_id)
            if row.detail:
                event["detail_hash"] = _digest(key, row.detail)
            event["detail_present"] = bool(row.detail)
            events.append(event)
        return {
            "schema": RECEIPT_SCHEMA,
            "generated_at": self.ctx.now_ts(),
            "store": self.ctx.settings.store,
            "limit": limit,
            "count": len(events),
            "privacy": {
                "raw_detail_included": False,
                "hash_algorithm": "hmac-sha256",
                "note": note,
            },
            "events": events,
        }


def _digest(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()


class ReadEngine(EngineBase):
    """The context with the read pipeline alone, for ``status``: no other pipeline's modules are imported."""

    def status(self) -> dict[str, object]:
        return ReadPipeline(self).status()
