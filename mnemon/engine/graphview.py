"""The whole active graph in one read, for ``viz`` (contract §3.17).

Active insights and the edge rows whose two ends are both active; no access bump, no oplog
(``viz`` is an export, not a recall).
"""

from __future__ import annotations

from mnemon.engine.core import EngineBase
from mnemon.records import Edge, Insight
from mnemon.store import edges, insights


class GraphView:
    """graph_snapshot: the active graph in one read (viz)."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def graph_snapshot(self) -> tuple[list[Insight], list[Edge]]:
        conn = self.ctx.store.conn
        nodes = insights.all_active(conn)
        active = {n.id for n in nodes}
        links = [e for e in edges.all_edges(conn) if e.source_id in active and e.target_id in active]
        return nodes, links
