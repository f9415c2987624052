"""Bulk import of memory drafts and export of a store as a draft (contract §3.15, §4.4, Decision 5).

Import, per item in draft order: defaults, embedding (in batches, outside any transaction), the
exact-duplicate rule (an exact repeat of an active insight, also of an earlier item of the same
draft, maps the draft index to the existing id; oplog ``import-skip``), insert, entity resolution
in ``merge`` mode, entity, causal and semantic edges as the graph engine builds them (temporal
edges disabled), oplog ``import``. Finalize: explicit edges one direction (weight 0 ⇒ 0.5),
temporal backbone repair per touched source (§4.4), EI of touched nodes, auto-prune with no
exclusions.

Speed without changing what is observed: items are written ``IMPORT_BATCH`` per transaction (each
committed batch is durable; a re-run maps its items as duplicates), and the per-item lookups that
would rescan the store are answered from per-import state built once: the known-entity set, the
ten newest insights of each source (causal look-back) with their token sets, and a normalised
vector matrix for the semantic neighbours. If another process writes between two batches (the
store's generation moves), that state is reloaded. Export writes the active store as a draft:
insights in timeline order and every edge between them as an index pair.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import apsw

from mnemon import entities as entity_extraction
from mnemon import lifecycle, linking
from mnemon.drafts import Draft
from mnemon.engine import graph
from mnemon.engine.core import format_ts
from mnemon.engine.upkeep import auto_prune, refresh_effective_importance
from mnemon.engine.write import WriteMixin
from mnemon.errors import EmbedderError
from mnemon.records import (
    CAUSAL_LOOKBACK,
    CAUSAL_MIN_OVERLAP,
    ENTITY_EDGE_NEIGHBOURS,
    SEMANTIC_AUTO_COSINE,
    SEMANTIC_AUTO_TOP,
    Edge,
    Insight,
)
from mnemon.store import blob, connection, edges, insights, oplog
from mnemon.text import token_overlap, tokenize

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.embed import Embedder

IMPORT_BATCH = 500  # items per write transaction: durable progress without a commit per item
EMBED_BATCH = 64  # texts per embed_batch request
IMPORT_TRIGGER = "import"  # the prune oplog's trigger=… for the import's auto-prune
Progress = Callable[[int, int], None]


@dataclass(slots=True)
class _Recent:
    """One of a source's newest insights, as the causal look-back (§4.6) needs it."""

    created_at: str
    order: int  # insertion order; ties on created_at go to the later row (rowid DESC)
    id: str
    content: str
    tokens: set[str]
    causal: bool  # the content has a causal keyword (§4.6)


@dataclass(slots=True)
class _ImportState:
    """What the graph engine would re-read from the store for every item, kept in memory."""

    known: set[str] = field(default_factory=set)
    recent: dict[str, list[_Recent]] = field(default_factory=dict)
    # entity → its newest active insights as (created_at, order, id), newest last (§4.5 look-up)
    by_entity: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    order: int = 0
    vec_ids: list[str] = field(default_factory=list)
    matrix: Any = None  # float64 (capacity, dim) unit rows; zero rows for zero vectors
    dim: int = 0
    generation: int = -1

    def reset(self, conn: apsw.Connection) -> None:
        self.known = insights.known_entities(conn)
        self.recent = {}
        self.by_entity = {}

    def newest_with(self, conn: apsw.Connection, entity: str, new_id: str) -> list[str]:
        """insights.with_entity(entity, new_id, 5), answered from memory after one query.

        Called before the new insight joins the lists (``add_entities``), so it is never among them.
        """
        rows = self.by_entity.get(entity)
        if rows is None:
            found = insights.with_entity_dated(conn, entity, new_id, ENTITY_EDGE_NEIGHBOURS)
            # Query order is created_at DESC, rowid DESC; stored oldest first like ``recent``.
            rows = [(created, -1 - pos, other) for pos, (other, created) in enumerate(found)]
            rows.sort()
            self.by_entity[entity] = rows
        return [other for _, _, other in reversed(rows)]

    def add_entities(self, new: Insight, order: int) -> None:
        for entity in dict.fromkeys(new.entities):
            rows = self.by_entity.get(entity)
            if rows is None:
                continue  # never looked up: a later look-up queries the store, which has the row
            bisect.insort(rows, (new.created_at, order, new.id))
            if len(rows) > ENTITY_EDGE_NEIGHBOURS:
                del rows[0]

    def recent_of(self, conn: apsw.Connection, source: str) -> list[_Recent]:
        """The source's newest insights, oldest first (sorted by (created_at, order))."""
        rows = self.recent.get(source)
        if rows is None:
            found = insights.recent_same_source(conn, source, "", CAUSAL_LOOKBACK)
            # Query order is created_at DESC, rowid DESC: later rows get larger (still negative) order.
            rows = [
                _Recent(
                    r.created_at, -1 - pos, r.id, r.content, tokenize(r.content),
                    linking.CAUSAL_PATTERN.search(r.content) is not None,
                )
                for pos, r in enumerate(found)
            ]
            rows.sort(key=lambda r: (r.created_at, r.order))
            self.recent[source] = rows
        return rows

    def add_recent(self, source: str, row: _Recent) -> None:
        rows = self.recent[source]
        bisect.insort(rows, row, key=lambda r: (r.created_at, r.order))
        if len(rows) > CAUSAL_LOOKBACK:
            del rows[0]

    def load_vectors(self, conn: apsw.Connection, dim: int, fmt: str) -> None:
        import numpy as np

        self.dim = dim
        ids: list[str] = []
        rows: list[NDArray[np.float64]] = []
        for insight_id, raw in insights.active_embeddings(conn):
            vec = blob.decode(raw, fmt)
            if vec is not None and vec.shape == (dim,):
                ids.append(insight_id)
                rows.append(vec)
        self.vec_ids = ids
        self.matrix = np.zeros((max(len(ids) * 2, 1024), dim), dtype=np.float64)
        if rows:
            self.matrix[: len(ids)] = _unit_rows(np.vstack(rows))

    def add_vector(self, insight_id: str, unit: NDArray[np.float64]) -> None:
        import numpy as np

        n = len(self.vec_ids)
        if n == self.matrix.shape[0]:
            grown = np.zeros((n * 2, self.dim), dtype=np.float64)
            grown[:n] = self.matrix
            self.matrix = grown
        self.matrix[n] = unit
        self.vec_ids.append(insight_id)


def _unit_rows(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norms > 0, matrix / norms, 0.0)


def _new_id() -> str:
    return str(uuid.uuid4())


class ImportMixin(WriteMixin):
    """import / export."""

    # --- import -------------------------------------------------------------------------------

    def import_draft(self, draft: Draft, *, no_diff: bool = False, progress: Progress | None = None) -> dict[str, object]:
        """Import a validated draft; return the §3.15 output object."""
        self.require_writable("import")
        now = self.now()
        with connection.bulk_tuning(self.store.conn):
            return self._import(draft, no_diff, progress, now)

    def _import(self, draft: Draft, no_diff: bool, progress: Progress | None, now: datetime) -> dict[str, object]:
        stamp = format_ts(now)
        store = self.store
        embedder = self.embedder()
        state = _ImportState()
        total = len(draft.insights)
        ids: list[str | None] = [None] * total
        results: list[dict[str, object]] = []
        added: list[str] = []
        touched_sources: dict[str, None] = {}
        counts = {"imported": 0, "skipped": 0, "errors": 0}
        for start in range(0, total, IMPORT_BATCH):
            chunk = draft.insights[start : start + IMPORT_BATCH]
            vectors = self._embed_chunk(embedder, [item.content for item in chunk])
            if embedder is not None and state.matrix is None:
                dim = next((v.shape[0] for v in vectors if v is not None), 0)
                if dim:
                    state.load_vectors(store.conn, dim, store.embedding_format)
            # Foreign keys are checked set-based before the chunk's edges are written (_checked).
            with connection.foreign_keys_unchecked(store.conn), store.transaction("import") as conn:
                if store.generation() != state.generation:
                    state.reset(conn)  # first batch, or another process wrote since our last commit
                scores = self._chunk_scores(state, vectors)
                # Exact duplicates (Decision 5): one look-up for the chunk, then the chunk's own adds.
                seen = {} if no_diff else insights.exact_duplicates(conn, [item.content for item in chunk])
                chunk_edges: dict[tuple[str, str, str], Edge] = {}
                for offset, item in enumerate(chunk):
                    index = start + offset
                    result: dict[str, object] = {"index": index, "id": "", "content": item.content}
                    if not no_diff:
                        existing = seen.get(item.content)
                        if existing is None and "\x00" in item.content:  # json_each would cut it at the NUL
                            existing = insights.exact_duplicate(conn, item.content)
                        if existing is not None:
                            oplog.append(conn, "import-skip", existing, f"duplicate of {existing}", stamp)
                            ids[index] = existing
                            result.update(id=existing, action="skipped")
                            results.append(result)
                            counts["skipped"] += 1
                            continue
                    created = item.created_at or stamp
                    new = Insight(
                        id=_new_id(), content=item.content, category=item.category, importance=item.importance,
                        tags=list(item.tags), source=item.source, created_at=created, updated_at=created,
                    )
                    item_edges = graph.EdgeCounts(deferred={})
                    try:
                        with conn:  # a savepoint: one failing item never takes the batch down
                            self._import_one(
                                conn, state, new, item.entities, vectors[offset], scores, offset, now, item_edges
                            )
                            oplog.append(conn, "import", new.id, new.content, stamp)
                    except apsw.Error as exc:
                        result.update(action="error", error=str(exc))
                        results.append(result)
                        counts["errors"] += 1
                        continue
                    # Every key of an item's edges names the item itself: keys never repeat across items.
                    chunk_edges.update(item_edges.deferred or {})
                    seen.setdefault(new.content, new.id)
                    ids[index] = new.id
                    added.append(new.id)
                    touched_sources[new.source] = None
                    result.update(id=new.id, action="added")
                    results.append(result)
                    counts["imported"] += 1
                edges.upsert_sorted(conn, _checked(conn, list(chunk_edges.values()), None))
            state.generation = store.generation()
            self.after_write()
            state.generation = store.generation()
            if progress is not None:
                progress(min(start + IMPORT_BATCH, total), total)

        inserted, pruned = self._finalize_import(draft, ids, added, list(touched_sources), now)
        return {
            "imported": counts["imported"], "updated": 0, "skipped": counts["skipped"], "errors": counts["errors"],
            "edges_inserted": inserted, "auto_pruned": len(pruned), "auto_pruned_ids": pruned, "results": results,
        }

    def _embed_chunk(self, embedder: Embedder | None, texts: list[str]) -> list[NDArray[np.float64] | None]:
        """Vectors for the chunk, in requests of EMBED_BATCH; None where the server failed."""
        if embedder is None:
            return [None] * len(texts)
        out: list[NDArray[np.float64] | None] = []
        for start in range(0, len(texts), EMBED_BATCH):
            part = texts[start : start + EMBED_BATCH]
            try:
                out.extend(embedder.embed_batch(part))
            except EmbedderError:
                out.extend(self.embed_for_write(text) for text in part)
        return out

    def _chunk_scores(self, state: _ImportState, vectors: list[NDArray[np.float64] | None]) -> Any:
        """Cosines of the chunk's vectors against the matrix as it stood before the chunk (one pass)."""
        if state.matrix is None or not any(v is not None for v in vectors):
            return None
        import numpy as np

        queries = np.zeros((len(vectors), state.dim), dtype=np.float64)
        for row, vec in enumerate(vectors):
            if vec is not None and vec.shape == (state.dim,):
                queries[row] = vec
        queries = _unit_rows(queries)
        before = len(state.vec_ids)
        return before, queries, state.matrix[:before] @ queries.T

    def _import_one(
        self,
        conn: apsw.Connection,
        state: _ImportState,
        new: Insight,
        provided: list[str],
        vector: NDArray[np.float64] | None,
        scores: Any,
        offset: int,
        now: datetime,
        counts: graph.EdgeCounts,
    ) -> None:
        """Insert one item and build its entity, causal and semantic edges (§3.15, §4.5-4.7).

        The edges collect in ``counts.deferred``; the caller writes the chunk's edges at once.
        """
        new.entities = entity_extraction.resolve_entities(provided, new.content, "merge", state.known)
        new.effective_importance = lifecycle.effective_importance(
            new.importance, 0, None, new.created_at, 0, now
        )
        recent = state.recent_of(conn, new.source)  # before the insert: the look-back excludes self
        insights.insert(conn, new, format_ts(now))
        if vector is not None:
            self._store_vector(conn, new.id, vector)
        graph.entity_edges(conn, new, now, counts, lambda entity: state.newest_with(conn, entity, new.id))
        tokens = tokenize(new.content)
        causal = linking.CAUSAL_PATTERN.search(new.content) is not None
        self._causal_from_recent(new, tokens, causal, recent, now, counts)
        unit = None
        if scores is not None and vector is not None and vector.shape == (state.dim,):
            unit = scores[1][offset]
            matches = self._semantic_matches(state, scores, offset, unit)
            graph.semantic_edges(conn, new, now, counts, matches)
        state.known.update(new.entities)
        state.order += 1
        state.add_recent(new.source, _Recent(new.created_at, state.order, new.id, new.content, tokens, causal))
        state.add_entities(new, state.order)
        if unit is not None:
            state.add_vector(new.id, unit)

    def _causal_from_recent(
        self,
        new: Insight,
        tokens: set[str],
        causal: bool,
        recent: list[_Recent],
        now: datetime,
        counts: graph.EdgeCounts,
    ) -> None:
        """graph.causal_edges over the in-memory look-back (10 newest of the source, newest first)."""
        stamp = format_ts(now)
        assert counts.deferred is not None
        for prev in reversed(recent):
            if not causal and not prev.causal:
                continue  # neither side has a causal keyword: causal_direction is None
            direction = linking.causal_direction(new.content, prev.content)
            if direction is None:
                continue
            overlap = token_overlap(tokens, prev.tokens)
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
            counts.deferred[(edge.source_id, edge.target_id, edge.edge_type)] = edge

    def _semantic_matches(
        self, state: _ImportState, scores: Any, offset: int, unit: NDArray[np.float64]
    ) -> list[tuple[str, float]]:
        """cosine ≥ 0.80, top 3, ties by id (§4.7), against every vector stored before this item."""
        before, _, against_store = scores
        cosines = list(zip(state.vec_ids[:before], against_store[:, offset].tolist()))
        if len(state.vec_ids) > before:  # items of this chunk stored before this one
            later = state.matrix[before : len(state.vec_ids)] @ unit
            cosines.extend(zip(state.vec_ids[before:], later.tolist()))
        hits = [(i, c) for i, c in cosines if c >= SEMANTIC_AUTO_COSINE]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:SEMANTIC_AUTO_TOP]

    def _finalize_import(
        self, draft: Draft, ids: list[str | None], added: list[str], sources: list[str], now: datetime
    ) -> tuple[int, list[str]]:
        """Explicit edges, backbone repair, EI of touched nodes, auto-prune: one transaction."""
        stamp = format_ts(now)
        explicit: list[Edge] = []
        touched: dict[str, None] = dict.fromkeys(added)
        for k, e in enumerate(draft.edges):
            source_id, target_id = ids[e.source_index], ids[e.target_index]
            if source_id is None or target_id is None:
                self._notice(f"warning: edges[{k}]: endpoint was not imported; edge skipped")
                continue
            if source_id == target_id:
                self._notice(f"warning: edges[{k}]: both ends map to insight {source_id}; edge skipped")
                continue
            meta = {"reason": e.reason} if e.reason else {}
            explicit.append(Edge(source_id, target_id, e.edge_type, e.weight, meta, stamp))
            touched[source_id] = None
            touched[target_id] = None
        with connection.foreign_keys_unchecked(self.store.conn), self.store.transaction("import") as conn:
            inserted = 0
            explicit = _checked(conn, explicit, self._notice)
            try:
                with conn:  # key order keeps the edge b-trees' pages hot
                    edges.upsert_many(conn, sorted(explicit, key=lambda e: (e.source_id, e.target_id, e.edge_type)))
                inserted = len(explicit)
            except apsw.Error:
                for k, edge in enumerate(explicit):  # find the failing ones, keep the rest
                    try:
                        with conn:
                            edges.upsert(conn, edge)
                        inserted += 1
                    except apsw.Error as exc:
                        self._notice(f"warning: explicit edge {k}: {exc}")
            added_set = set(added)
            for source in sources:
                touched.update(dict.fromkeys(_repair_backbone(conn, source, added_set, stamp)))
            refresh_effective_importance(conn, touched, now)
            pruned = auto_prune(conn, self.settings, now, exclude=[], trigger=IMPORT_TRIGGER)
        self.after_write()
        return inserted, pruned

    # --- export -------------------------------------------------------------------------------

    def export_draft(self) -> dict[str, object]:
        """The active store as an import draft: insights in timeline order, edges as index pairs."""
        conn = self.store.conn
        active = insights.all_active(conn)
        position = {ins.id: k for k, ins in enumerate(active)}
        items = [
            {
                "content": ins.content, "category": ins.category, "importance": ins.importance,
                "tags": ins.tags, "entities": ins.entities, "source": ins.source, "created_at": ins.created_at,
            }
            for ins in active
        ]
        out_edges: list[dict[str, object]] = []
        for edge in edges.all_edges(conn):
            s, t = position.get(edge.source_id), position.get(edge.target_id)
            if s is None or t is None or s == t:
                continue
            row: dict[str, object] = {
                "source_index": s, "target_index": t, "edge_type": edge.edge_type, "weight": edge.weight,
            }
            if edge.metadata.get("reason"):
                row["reason"] = edge.metadata["reason"]
            out_edges.append(row)
        return {"schema_version": "1", "insights": items, "edges": out_edges}


def _checked(conn: apsw.Connection, written: list[Edge], notice: Callable[[str], None] | None) -> list[Edge]:
    """The edges whose two endpoints exist: the foreign-key check, once for all (in the writing transaction).

    Entity, causal and semantic neighbours come from the store in this transaction or from state
    kept since (reloaded whenever another process wrote), so they always pass; explicit edges map
    to ids this import added or found, and a missing one warns as the constraint did.
    """
    present = insights.existing_ids(conn, [i for e in written for i in (e.source_id, e.target_id)])
    kept: list[Edge] = []
    for k, edge in enumerate(written):
        if edge.source_id in present and edge.target_id in present:
            kept.append(edge)
        elif notice is not None:
            notice(f"warning: explicit edge {k}: FOREIGN KEY constraint failed")
    return kept


def _repair_backbone(conn: apsw.Connection, source: str, imported: set[str], stamp: str) -> list[str]:
    """§4.4 import repair for one source; return the ids whose backbone edges were (re)written.

    Timeline = the source's active insights by created_at, rowid. Wherever imported insights sit
    between two older neighbours, the old backbone pair between those neighbours goes; then every
    adjacent pair with at least one imported side gets the precedes/succeeds pair (weight 1.0).
    """
    timeline = insights.source_timeline(conn, source)
    last_old: int | None = None
    run = False
    for pos, insight_id in enumerate(timeline):
        if insight_id in imported:
            run = True
            continue
        if run and last_old is not None:
            edges.delete_pair(conn, timeline[last_old], insight_id, "temporal")
            edges.delete_pair(conn, insight_id, timeline[last_old], "temporal")
        last_old, run = pos, False
    pairs: list[Edge] = []
    touched: list[str] = []
    for older, newer in zip(timeline, timeline[1:]):
        if older in imported or newer in imported:
            pairs.append(Edge(older, newer, "temporal", 1.0, {"sub_type": "backbone", "direction": "precedes"}, stamp))
            pairs.append(Edge(newer, older, "temporal", 1.0, {"sub_type": "backbone", "direction": "succeeds"}, stamp))
            touched += [older, newer]
    edges.upsert_many(conn, sorted(pairs, key=lambda e: (e.source_id, e.target_id)))
    return touched
