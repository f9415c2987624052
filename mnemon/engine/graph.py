"""The graph engine on write (contract §4.3-4.7): edges for a newly stored insight.

Runs inside the caller's write transaction, in the contract's order: temporal, entity, causal,
semantic. Policy (keywords, directions, weights) comes from ``mnemon.linking``; this module only
sequences the store calls. Returns the per-type count of edge rows written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from mnemon import linking
from mnemon.engine.core import format_ts
from mnemon.lifecycle import parse_timestamp
from mnemon.records import (
    CAUSAL_LOOKBACK,
    CAUSAL_MIN_OVERLAP,
    ENTITY_EDGE_CAP,
    ENTITY_EDGE_NEIGHBOURS,
    PROXIMITY_LIMIT,
    PROXIMITY_WINDOW_HOURS,
    Edge,
    Insight,
)
from mnemon.store import edges, insights
from mnemon.text import token_overlap, tokenize
from mnemon.validate import timestamp_parses

if TYPE_CHECKING:
    import apsw


@dataclass(slots=True)
class EdgeCounts:
    """``edges_created`` of the remember output (§3.3), in the Go struct's key order."""

    temporal: int = 0
    entity: int = 0
    causal: int = 0
    semantic: int = 0
    written: list[Edge] = field(default_factory=list)
    # Bulk import: edges collect here by key (a later write of a key replaces the earlier one, as
    # INSERT OR REPLACE would) and the caller writes them in one sorted pass; import's own edges come
    # in already as the bound row (edges.edge_row's shape).
    deferred: dict[tuple[str, str, str], Edge | tuple[str, str, str, float, str, str]] | None = None

    def to_json(self) -> dict[str, int]:
        return {"temporal": self.temporal, "entity": self.entity, "causal": self.causal, "semantic": self.semantic}


def _put(conn: apsw.Connection, counts: EdgeCounts, edge: Edge) -> None:
    if counts.deferred is not None:
        counts.deferred[(edge.source_id, edge.target_id, edge.edge_type)] = edge
        return
    edges.upsert(conn, edge)
    counts.written.append(edge)


def _hours_between(a: str, b: str) -> float:
    return (parse_timestamp(a) - parse_timestamp(b)).total_seconds() / 3600.0


def temporal_edges(conn: apsw.Connection, new: Insight, now: datetime, counts: EdgeCounts) -> None:
    """Backbone to the latest insight of the same source, proximity to the last 24 h (§4.4)."""
    stamp = format_ts(now)
    backbone = insights.latest_same_source(conn, new.source, new.id)
    exclude = {new.id}
    if backbone is not None:
        prev_id = backbone[0]
        exclude.add(prev_id)
        _put(conn, counts, Edge(prev_id, new.id, "temporal", 1.0, {"sub_type": "backbone", "direction": "precedes"}, stamp))
        _put(conn, counts, Edge(new.id, prev_id, "temporal", 1.0, {"sub_type": "backbone", "direction": "succeeds"}, stamp))
        counts.temporal += 2
    since = format_ts(now - timedelta(hours=PROXIMITY_WINDOW_HOURS))
    # Fetch one extra row: the backbone neighbour is excluded after the query.
    recent = insights.recent_since(conn, since, new.id, PROXIMITY_LIMIT + 1)
    taken = 0
    for other_id, other_created in recent:
        if other_id in exclude or taken >= PROXIMITY_LIMIT:
            continue
        if not timestamp_parses(other_created):
            # Text that is no stamp ("not a time", "2999-02-30...") can compare as recent, but every reader takes
            # it as Go's zero time (lifecycle): far outside the window. Parsing it failed this write.
            continue
        hours = abs(_hours_between(new.created_at, other_created))
        meta = {"sub_type": "proximity", "hours_diff": linking.format_metric(hours, 2)}
        weight = linking.proximity_weight(hours)
        _put(conn, counts, Edge(new.id, other_id, "temporal", weight, meta, stamp))
        _put(conn, counts, Edge(other_id, new.id, "temporal", weight, dict(meta), stamp))
        counts.temporal += 2
        taken += 1


def entity_edges(
    conn: apsw.Connection,
    new: Insight,
    now: datetime,
    counts: EdgeCounts,
    with_entity: Callable[[str], list[str]] | None = None,
    *,
    stamp: str | None = None,
) -> None:
    """Link to up to 5 newest insights sharing each entity; at most 50 rows per insight (§4.5).

    ``with_entity`` answers the neighbour lookup from a caller's memory (bulk import) instead of
    the store; it must return what ``insights.with_entity`` would. ``stamp``: ``format_ts(now)``
    if the caller has it already.
    """
    if stamp is None:
        stamp = format_ts(now)
    for entity in new.entities:
        if counts.entity >= ENTITY_EDGE_CAP:
            return
        others = (
            with_entity(entity)
            if with_entity is not None
            else insights.with_entity(conn, entity, new.id, ENTITY_EDGE_NEIGHBOURS)
        )
        for other_id in others:
            if counts.entity >= ENTITY_EDGE_CAP:
                return
            meta = {"entity": entity}
            _put(conn, counts, Edge(new.id, other_id, "entity", 1.0, meta, stamp))
            _put(conn, counts, Edge(other_id, new.id, "entity", 1.0, dict(meta), stamp))
            counts.entity += 2


def causal_edges(conn: apsw.Connection, new: Insight, now: datetime, counts: EdgeCounts) -> None:
    """One directed causal edge per recent same-source insight that shares enough tokens (§4.6)."""
    stamp = format_ts(now)
    new_tokens = tokenize(new.content)
    for prev in insights.recent_same_source(conn, new.source, new.id, CAUSAL_LOOKBACK):
        direction = linking.causal_direction(new.content, prev.content)
        if direction is None:
            continue
        overlap = token_overlap(new_tokens, tokenize(prev.content))
        if overlap < CAUSAL_MIN_OVERLAP:
            continue
        meta = {
            "overlap": linking.format_metric(overlap, 4),
            "sub_type": linking.causal_sub_type(new.content, prev.content),
        }
        if direction == "prev_to_new":
            edge = Edge(prev.id, new.id, "causal", overlap, meta, stamp)
        else:
            edge = Edge(new.id, prev.id, "causal", overlap, meta, stamp)
        _put(conn, counts, edge)
        counts.causal += 1


def semantic_edges(
    conn: apsw.Connection, new: Insight, now: datetime, counts: EdgeCounts, matches: list[tuple[str, float]]
) -> None:
    """Bidirectional semantic edges to the (at most 3) cosine ≥ 0.80 matches (§4.7)."""
    stamp = format_ts(now)
    for other_id, cosine in matches:
        meta = {"created_by": "auto", "cosine": linking.format_metric(cosine, 4)}
        _put(conn, counts, Edge(new.id, other_id, "semantic", cosine, meta, stamp))
        _put(conn, counts, Edge(other_id, new.id, "semantic", cosine, dict(meta), stamp))
        counts.semantic += 2
