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
store's write mark moves: ``Store.write_mark``), that state is reloaded. Export writes the active store as a draft:
insights in timeline order and every edge between them as an index pair, with its weight and its whole metadata
map (README says what a draft carries and what it does not).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import operator
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mnemon import drafts, linking
from mnemon.drafts import Draft, DraftInsight
from mnemon.engine import graph, prepare, wordvectors
from mnemon.engine import vectors as vector_engine
from mnemon.engine.bulkedges import ExplicitEdges
from mnemon.engine.core import EngineBase, format_ts
from mnemon.engine.semantic import ChunkNeighbours
from mnemon.engine.upkeep import auto_prune, refresh_effective_importance
from mnemon.engine.upkeep import effective_importance as upkeep_ei
from mnemon.errors import EmbedderError, InputError
from mnemon.heap import release_free_memory
from mnemon.records import (
    CAUSAL_LOOKBACK,
    CAUSAL_MIN_OVERLAP,
    CATEGORIES,
    DEFAULT_CATEGORY,
    ENTITY_EDGE_CAP,
    ENTITY_EDGE_NEIGHBOURS,
    GO_ZERO_STAMP,
    MAX_ACCESS_COUNT,
    MAX_ENTITIES,
    MAX_ENTITY_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
    Edge,
    Insight,
)
from mnemon.store import StatementError, bulkwrite, edges, insights, oplog, ranges
from mnemon.text import token_overlap, tokenize
from mnemon.validate import plainly_draftable, stored_text_problems, timestamp_parses

if TYPE_CHECKING:
    import apsw
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.embed import Embedder
    from mnemon.engine.hotaside import AsideBuild

IMPORT_BATCH = 1000  # items per write transaction: durable progress without a commit per item
# Edge and index b-trees are keyed by random UUIDs, so a commit writes (to the WAL) nearly every
# page of them whatever the batch size: with a fixed batch the import cost grows with the square
# of the store. Batches therefore grow with the store (a fraction of the insights already in it,
# at most IMPORT_BATCH_MAX items), which keeps the commit cost per item about constant. Batches
# as large as the store (10 transactions for 100k items, 5 for 10k, instead of 25 and 12 with a
# quarter of it from 500) took 3 % less CPU at 10k and 100k. The largest batch bounds what an
# import holds for one batch (its edge rows as tuples, about 35 an item): a 100k import peaked at
# 925 MiB with batches of at most 5,000 items against 996 MiB with 20,000, for the same CPU
# (44.2 / 46.2 s against 45.4 / 45.9 s, two pairs, with synchronous=NORMAL batch commits). A
# PostgreSQL store keeps larger batches: each batch costs the server round trips and statements
# of its own (the chunk's look-ups, the statement-level counter triggers), and a 100k import took
# 71.0 / 83.7 s with 20,000 against 78.9 / 108.9 s with 5,000 (same client CPU; peak 757 against
# 635 MiB).
IMPORT_BATCH_GROWTH = 1  # a batch is at least as large as the store before it
IMPORT_BATCH_MAX = 5_000
IMPORT_BATCH_MAX_POSTGRES = 20_000
EMBED_BATCH = 64  # texts per embed_batch request
# What an import frees before its index build is handed back to the system only beyond this: the
# build reuses it (a 10k import had 93 MiB free there, and trimming it cost 1 % of the import's
# CPU in page faults for 2 MiB of peak; a 100k import had 337 MiB free, and trimming lowered its peak).
INDEX_BUILD_REUSE = 128 << 20
IMPORT_TRIGGER = "import"  # the prune oplog's trigger=… for the import's auto-prune
_EdgeRow = tuple[str, str, str, float, str, str]  # an edge as edges.upsert_row binds it
_Key = tuple[str, str, str]  # an edge row's key: source, target, type
_EDGE_KEY = operator.itemgetter(0, 1, 2)  # (source_id, target_id, edge_type)
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
    flags: int  # its causal sub-type keywords (prepare.sub_type_flags)


@dataclass(slots=True)
class _ChunkOut:
    """What one chunk did, item by item (merged into the import's report once it commits)."""

    ids: list[str | None] = field(default_factory=list)
    results: list[dict[str, object]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    sources: dict[str, None] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"imported": 0, "skipped": 0, "errors": 0})
    keys: Any = None  # hashes of the edge keys the chunk wrote (_key_hashes)


@dataclass(slots=True)
class _ImportState:
    """What the graph engine would re-read from the store for every item, kept in memory."""

    known: set[str] = field(default_factory=set)
    recent: dict[str, list[_Recent]] = field(default_factory=dict)
    # entity → its newest active insights as (created_at, order, id), newest last (§4.5 look-up)
    by_entity: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    order: int = 0
    mark: tuple[int, int] = (-1, -1)  # Store.write_mark() after our last commit
    # Another writer committed between two of our transactions: from then on, a key naming an
    # insight this import created may have a row we did not write (``_fresh`` proves nothing).
    foreign: bool = False
    # While a chunk defers its inserts: entity → its insights of this chunk not yet written, for
    # entities never looked up (a first look-up merges them with what the store has).
    pending: dict[str, list[tuple[str, int, str]]] | None = None
    # While a chunk defers its inserts: what the store holds for the entities the chunk may look
    # up (one query for the chunk, ``prefetch``), and the entity set it was taken against.
    prefetched: dict[str, list[tuple[str, str]]] | None = None
    prefetch_known: frozenset[str] = frozenset()
    # id → its content's token sequence (interned), for the hot index built at the end (_index_imported)
    sequences: dict[str, list[str]] = field(default_factory=dict)
    # The child building the hot index beside the finalize (``hotaside``): each committed batch's
    # sequences are handed to it instead of kept here.
    aside: AsideBuild | None = None
    # The edge keys the finalize deleted or replaced, which that child's index drops (it was built
    # before the finalize, and a SQLite store keeps no log of such changes).
    replaced: list[_Key] = field(default_factory=list)

    def reset(self, conn: apsw.Connection) -> None:
        self.known = insights.known_entities(conn)
        self.recent = {}
        self.by_entity = {}

    def prefetch(self, conn: apsw.Connection, names: set[str]) -> None:
        """Answer the chunk's entity look-ups (``newest_with``) from one query.

        Only for a deferring chunk: its rows are written after its last item, so the store's
        answer for an entity is the same before the first item as at its look-up. ``names`` are
        every entity string the chunk's items may carry; those the store does not know have no
        rows (``known`` is the store's entity set plus what this import added), those already in
        ``by_entity`` are answered from memory.
        """
        self.prefetch_known = frozenset(self.known)
        wanted = sorted(e for e in names if e in self.known and e not in self.by_entity and "\x00" not in e)
        self.prefetched = insights.with_entities_dated(conn, wanted, ENTITY_EDGE_NEIGHBOURS)

    def newest_with(self, conn: apsw.Connection, entity: str, new_id: str) -> list[str]:
        """insights.with_entity(entity, new_id, 5), answered from memory after one query.

        Called before the new insight joins the lists (``add_entities``), so it is never among them.
        """
        rows = self.by_entity.get(entity)
        if rows is None:
            found = self.prefetched.pop(entity, None) if self.prefetched is not None else None
            if found is None:
                if self.prefetched is not None and entity not in self.prefetch_known:
                    found = []  # first seen in this chunk: the store has no row of it
                else:
                    found = insights.with_entity_dated(conn, entity, new_id, ENTITY_EDGE_NEIGHBOURS)
            # Query order is created_at DESC, rowid DESC; stored oldest first like ``recent``.
            rows = [(created, -1 - pos, other) for pos, (other, created) in enumerate(found)]
            if self.pending:
                rows += self.pending.pop(entity, ())
            rows.sort()
            del rows[: -ENTITY_EDGE_NEIGHBOURS]
            self.by_entity[entity] = rows
        return [other for _, _, other in reversed(rows)]

    def add_entities(self, new: Insight, order: int) -> None:
        for entity in dict.fromkeys(new.entities):
            rows = self.by_entity.get(entity)
            if rows is None:
                if self.pending is not None:  # the row is not written yet: remember it for a look-up
                    self.pending.setdefault(entity, []).append((new.created_at, order, new.id))
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
                    linking.CAUSAL_PATTERN.search(r.content) is not None, prepare.sub_type_flags(r.content),
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


_ID_BLOCK = 1024  # ids formatted at a time


class _Ids:
    """Random version-4 UUID strings (as ``str(uuid.uuid4())``), drawn from the OS in blocks.

    ``plan(n)``: the next ``n`` ids are drawn at once and handed out in ascending order. Each is
    still a random version-4 UUID; only their order follows the calls. An import plans one id
    per draft item, so the keys its rows add to the id-keyed b-trees (the insights' primary key,
    the edges' (source, target, type) key, whose ends are mostly the newest items) land at the
    right edge of each tree, in order, instead of all over it: fewer pages touched per chunk,
    and full pages instead of half-split ones (measured on 4.8M edge rows written in an
    import's chunks: 30 % less CPU and wall than with random ids).
    """

    __slots__ = ("hex", "pos", "planned", "planned_pos")

    def __init__(self) -> None:
        self.hex: list[str] = []
        self.pos = 0
        self.planned = b""  # sorted raw ids not handed out yet (16 bytes each), from planned_pos
        self.planned_pos = 0

    def plan(self, n: int) -> None:
        import numpy as np

        raw = np.frombuffer(_draw(n), dtype="S16")
        self.planned = np.sort(raw).tobytes()  # byte order is the strings' order (lowercase hex)
        self.planned_pos = 0
        self.hex, self.pos = [], 0

    def __call__(self) -> str:
        if self.pos >= len(self.hex):
            if self.planned_pos < len(self.planned):
                raw = self.planned[self.planned_pos : self.planned_pos + 16 * _ID_BLOCK]
                self.planned_pos += len(raw)
            else:
                raw = _draw(_ID_BLOCK)
            h = raw.hex()
            self.hex = [
                f"{h[k:k + 8]}-{h[k + 8:k + 12]}-{h[k + 12:k + 16]}-{h[k + 16:k + 20]}-{h[k + 20:k + 32]}"
                for k in range(0, len(h), 32)
            ]
            self.pos = 0
        value = self.hex[self.pos]
        self.pos += 1
        return value


def _draw(n: int) -> bytes:
    """``n`` random version-4 UUIDs as 16 raw bytes each."""
    raw = bytearray(os.urandom(16 * n))
    raw[6::16] = bytes((b & 0x0F) | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes((b & 0x3F) | 0x80 for b in raw[8::16])  # RFC 4122 variant
    return bytes(raw)


_new_id = _Ids()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a bulk import (draft parsing, import, index build).

    An import holds millions of tracked objects (the draft's edges, the rows it writes, the edge
    rows the hot-index build reads back), and every automatic collection of the older
    generations walks them all again: 9 of the 24 s of the index build after a 100k import
    (measured), most of it spent on objects that live to the end. The import makes no reference
    cycles of its own, so reference counting frees its garbage as before; the collector runs
    again, as it was, once the import is done.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class ImportPipeline:
    """import / export: drafts in chunks of one write transaction each, the hot index built or caught up at the end."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    # --- import -------------------------------------------------------------------------------

    def import_draft(
        self, draft: Draft, *, no_diff: bool = False, progress: Progress | None = None, aside: AsideBuild | None = None
    ) -> dict[str, object]:
        """Import a validated draft; return the §3.15 output object.

        The draft is consumed: its explicit edges are released once the import holds its own
        narrow copy, and its items once the last batch is written (the report keeps each item's
        content), so neither adds to the index build's memory (a 1M draft holds about 300 MB).
        ``aside``: a child waiting to build the hot index beside the finalize (``hotaside``;
        SQLite stores only); this call ends it.
        """
        if aside is not None and self.ctx.store.backend != "sqlite":
            aside.cancel()  # its read-only connection is a SQLite file's
            aside = None
        child = aside
        try:
            self.ctx.require_writable("import")
            now = self.ctx.now()
            state = _ImportState(aside=aside)
            with self.ctx.store.bulk_tuning():
                report = self._import(draft, no_diff, progress, now, state)
            sequences, replaced, aside = state.sequences, state.replaced, state.aside
            del state  # the look-up state (entities, look-backs) is not the index build's
            release_free_memory(INDEX_BUILD_REUSE)  # what the draft and the batches freed, before the index's arrays
            # The WAL is copied into the database beside the index build, not after it by the close.
            checkpointed = self.ctx.store.checkpoint_aside()
            try:
                if aside is not None:
                    aside.finish(replaced)  # the finalize is committed: the child catches up and writes
                    aside.join()  # (if it failed, the index is built here below)
                self._index_imported(sequences)
            finally:
                checkpointed()
        finally:
            if child is not None:
                child.cancel()  # (a no-op once joined)
        return report

    def _index_imported(self, sequences: dict[str, list[str]]) -> None:
        """Bring the hot index up to the import now (build it, or catch it up by the new rows).

        Otherwise the first recall after a large import pays it: 15 s at 100k rows, minutes at 1M,
        inside a hook's timeout, which kills the build and leaves it for the next call to start over.
        The import has committed; a failure here loses nothing (the next reader builds the index).
        ``sequences``: the imported contents' token sequences, so the index need not tokenise
        them again (any other row it reads is tokenised as usual).
        """
        from mnemon.engine import hot

        store = self.ctx.store
        try:
            hot.index_for(store.conn, store.path, readonly=False, sequences=sequences)
        except OSError:
            pass  # an unwritable index folder: readers build it in memory, as before

    def _import(
        self, draft: Draft, no_diff: bool, progress: Progress | None, now: datetime, state: _ImportState
    ) -> dict[str, object]:
        stamp = format_ts(now)
        embedder = self.ctx.embedder()
        prepared = prepare.Preparer([item.content for item in draft.insights])
        try:
            return self._import_all(draft, no_diff, progress, now, stamp, embedder, state, prepared)
        finally:
            prepared.close()

    def _import_all(
        self,
        draft: Draft,
        no_diff: bool,
        progress: Progress | None,
        now: datetime,
        stamp: str,
        embedder: Embedder | None,
        state: _ImportState,
        prepared: prepare.Preparer,
    ) -> dict[str, object]:
        store = self.ctx.store
        total = len(draft.insights)
        ids: list[str | None] = [None] * total
        results: list[dict[str, object]] = []
        added: list[str] = []
        touched_sources: dict[str, None] = {}
        counts = {"imported": 0, "skipped": 0, "errors": 0}
        written: list[Any] = []  # per chunk: hashes of the edge keys it wrote
        explicit = ExplicitEdges(draft.edges, total)  # written with the chunk that completes them
        _release(draft.edges)  # (the import's copy is narrower)
        plan = getattr(_new_id, "plan", None)
        if plan is not None:
            plan(total)  # one ascending id per item (_Ids.plan)
        stored = insights.active_count(store.conn)
        # An import that at least doubles the store builds the edges' target index once at its end
        # (a sort) instead of keeping it up row by row (store/bulkwrite.py).
        defer_index = total >= max(IMPORT_BATCH, stored)
        deferred = False
        start = 0
        largest = IMPORT_BATCH_MAX_POSTGRES if store.backend == "postgres" else IMPORT_BATCH_MAX
        while start < total:
            size = IMPORT_BATCH
            if IMPORT_BATCH_GROWTH > 0:
                size = max(size, min(largest, (stored + start) // IMPORT_BATCH_GROWTH))
            chunk = draft.insights[start : start + size]
            vectors = self._embed_chunk(embedder, [item.content for item in chunk])
            store.bulk_cache_follow()  # the edge b-trees grew with the last chunk
            # Foreign keys are checked set-based before the chunk's edges are written (_checked).
            with store.foreign_keys_unchecked(), store.transaction("import") as conn:
                if store.write_mark() != state.mark:
                    state.foreign |= state.mark != (-1, -1)
                    state.reset(conn)  # first batch, or another process wrote since our last commit
                if defer_index and not deferred:
                    deferred = bulkwrite.defer_indexes(conn)
                try:
                    with conn:  # a savepoint: the chunk's rows are written at once
                        out = self._import_chunk(
                            conn, state, chunk, start, vectors, no_diff, stamp, now, prepared, (ids, explicit),
                            defer=True,
                        )
                except StatementError:
                    # A row failed (never seen in practice): redo the chunk one savepoint per item,
                    # so only the failing items become errors, from state as the store has it.
                    state.reset(conn)
                    out = self._import_chunk(
                        conn, state, chunk, start, vectors, no_diff, stamp, now, prepared, (ids, explicit),
                        defer=False,
                    )
                # Our commit's mark, read while we still hold the write lock: read after the commit, a
                # commit of another process in between (during the caches' catch-up) passed for ours.
                inside = store.write_mark()
            state.mark = store.mark_of_own_commit(inside)
            results.extend(out.results)  # (the chunk set its items' ids in ``ids``)
            added.extend(out.added)
            touched_sources.update(out.sources)
            written.append(out.keys)
            if state.aside is not None and not state.aside.send({i: state.sequences.pop(i) for i in out.added}):
                state.aside = None  # the child is gone: the index is built here, from the rest's sequences
            for key, value in out.counts.items():
                counts[key] += value
            self.ctx.after_write()  # (writes nothing to the database: the mark stays ours)
            start += len(chunk)
            if progress is not None:
                progress(start, total)

        _release(draft.insights)  # every item is written; the results keep their contents
        store.commits_synced()  # the last transaction's sync makes the batches' commits durable too
        if state.aside is not None:
            prepared.close()  # (its workers are done) before the child works on the other core
            if not state.aside.start(store.path):  # the batches' index, built while we finalize
                state.aside = None
        inserted, pruned = self._finalize_import(
            explicit, ids, added, list(touched_sources), now, _Written(written, state.mark, state.foreign), deferred,
            state.replaced,
        )
        if added:  # the words of what was written, for neighbour terms (engine.wordvectors)
            wordvectors.keep_current(self.ctx, embedder)
        return {
            "imported": counts["imported"], "updated": 0, "skipped": counts["skipped"], "errors": counts["errors"],
            "edges_inserted": inserted, "auto_pruned": len(pruned), "auto_pruned_ids": pruned, "results": results,
        }

    def _import_chunk(
        self,
        conn: apsw.Connection,
        state: _ImportState,
        chunk: list[DraftInsight],
        start: int,
        vectors: list[NDArray[np.float64] | None],
        no_diff: bool,
        stamp: str,
        now: datetime,
        prepared: prepare.Preparer,
        explicit: tuple[list[str | None], ExplicitEdges],
        *,
        defer: bool,
    ) -> _ChunkOut:
        """Import one chunk inside the caller's transaction; return what it did, item by item.

        ``defer``: the chunk's insight, vector and oplog rows are written after its last item, in
        a few statements (an error then fails the whole chunk, and the caller redoes it without
        ``defer``: each item in its own savepoint, written as it goes). ``explicit``: every item's id
        (the chunk's are set here), and the draft's explicit edges (those the chunk completes are
        written with its own edges, ``bulkedges``).
        """
        out = _ChunkOut()
        neighbours = self._chunk_neighbours(conn, vectors, [item.content for item in chunk])
        # Exact duplicates (Decision 5): one look-up for the chunk, then the chunk's own adds.
        seen = {} if no_diff else insights.exact_duplicates(conn, [item.content for item in chunk])
        # Edge rows as edges.upsert_rows_split binds them (graph.semantic_edges' Edge records converted).
        chunk_edges: dict[tuple[str, str, str], Any] = {}
        log: list[tuple[str, str, str, str]] = []
        rows: list[tuple[object, ...]] = []
        blobs: list[tuple[str, NDArray[np.float64]]] = []
        state.pending = {} if defer else None
        state.prefetched = None  # (a failed deferring attempt may have left its look-ups)
        # Taken once for the chunk: the preparer keeps only its latest block of items, so a second
        # pass over a chunk of many blocks would prepare the first ones again, in process.
        preps = [prepared.get(start + offset) for offset in range(len(chunk))]
        if defer:
            names: set[str] = set()
            for item, prep in zip(chunk, preps):
                names.update(item.entities, prep[0], prep[1])  # extracted entities, candidate words
            state.prefetch(conn, names)
        for offset, item in enumerate(chunk):
            result: dict[str, object] = {"index": start + offset, "id": "", "content": item.content}
            out.results.append(result)
            if not no_diff:
                existing = seen.get(item.content)
                if existing is None and "\x00" in item.content:  # json_each would cut it at the NUL
                    existing = insights.exact_duplicate(conn, item.content)
                if existing is not None:
                    log.append(("import-skip", existing, f"duplicate of {existing}", stamp))
                    out.ids.append(existing)
                    result.update(id=existing, action="skipped")
                    out.counts["skipped"] += 1
                    continue
            created = item.created_at or stamp
            new = Insight(
                id=_new_id(), content=item.content, category=item.category, importance=item.importance,
                tags=list(item.tags), source=item.source, created_at=created, updated_at=item.updated_at or created,
                access_count=item.access_count, last_accessed_at=item.last_accessed_at,
            )
            item_edges = graph.EdgeCounts(deferred={})
            vector = vectors[offset]
            prep = preps[offset]
            if defer:
                self._import_one(
                    conn, state, new, item.entities, prep, vector, neighbours, offset, now, stamp, item_edges, write=False
                )
                rows.append(insights.insert_row(new, stamp))
                if vector is not None:
                    blobs.append((new.id, vector))
            else:
                try:
                    with conn:  # a savepoint: one failing item never takes the batch down
                        self._import_one(
                            conn, state, new, item.entities, prep, vector, neighbours, offset, now, stamp, item_edges,
                            write=True,
                        )
                except StatementError as exc:
                    result.update(action="error", error=str(exc))
                    out.ids.append(None)
                    out.counts["errors"] += 1
                    continue
            if neighbours is not None:
                neighbours.stored(offset, new.id)  # later items of the chunk may link to it
            log.append(("import", new.id, new.content, stamp))
            # Every key of an item's edges names the item itself: keys never repeat across items.
            chunk_edges.update(item_edges.deferred or {})
            seen.setdefault(new.content, new.id)
            out.ids.append(new.id)
            out.added.append(new.id)
            out.sources[new.source] = None
            result.update(id=new.id, action="added")
            out.counts["imported"] += 1
        state.pending = state.prefetched = None
        ids, draft_edges = explicit
        ids[start : start + len(out.ids)] = out.ids  # a redone chunk sets them again, as it wrote them
        draft_edges.chunk_rows(start, [r.get("action") == "added" for r in out.results], ids, stamp, chunk_edges)
        bulkwrite.insert_insights(conn, rows)
        for insight_id, vector in blobs:
            self.ctx.vectors.store_vector(conn, insight_id, vector)
        oplog.append_many(conn, log)
        out.keys = _key_hashes(chunk_edges)
        rows_out = [v if type(v) is tuple else edges.edge_row(v) for v in chunk_edges.values()]
        # The chunk's own ids were inserted above, in this transaction: only the other ends are looked up.
        own = set(out.added)
        others = {r[0] for r in rows_out}
        others.update(r[1] for r in rows_out)
        others -= own
        missing = others - insights.existing_ids(conn, sorted(others))
        if missing:
            rows_out = [r for r in rows_out if r[0] not in missing and r[1] not in missing]
        # Every key names an insight of this chunk, new in this transaction: no row has it yet.
        edges.insert_new_rows_sorted(conn, rows_out)
        return out

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
                out.extend(self.ctx.vectors.embed_for_write(text) for text in part)
        return out

    def _chunk_neighbours(
        self, conn: apsw.Connection, vectors: list[NDArray[np.float64] | None], contents: list[str]
    ) -> ChunkNeighbours | None:
        """The semantic-neighbour finder for a chunk (inside its transaction), or None without vectors;
        ``contents``: the chunk's texts, whose composed vectors link from the model's composed threshold.

        Vectors of another model or length than the store's are never stored, so they find no
        neighbours either; the first vectors of a store without any fix its dimension (write_vector).
        """
        first = next((v for v in vectors if v is not None), None)
        embedder = self.ctx.current_embedder
        if first is None or embedder is None:
            return None
        dim = int(first.shape[0])
        if self.ctx.vectors.vector_mismatch(embedder.model, dim) is not None:
            return None
        index = self.ctx.vectors.vector_index()
        if index is not None:
            index.sync(conn)  # current for what this transaction sees (another process may have written)
        scale = self.ctx.similarity_scale()
        links = [scale.for_vector(vector_engine.composes(embedder, content)).auto_link for content in contents]
        return ChunkNeighbours(index, vectors, dim, self.ctx.store.embedding_format, scale, links)

    def _import_one(
        self,
        conn: apsw.Connection,
        state: _ImportState,
        new: Insight,
        provided: list[str],
        prep: prepare.Prepared,
        vector: NDArray[np.float64] | None,
        neighbours: ChunkNeighbours | None,
        offset: int,
        now: datetime,
        stamp: str,
        counts: graph.EdgeCounts,
        *,
        write: bool,
    ) -> None:
        """Build one item's entity, causal and semantic edges (§3.15, §4.5-4.7); with ``write``,
        insert its row (and vector) too, else the caller writes the chunk's rows at once.

        The edges collect in ``counts.deferred``; the caller writes the chunk's edges at once.
        """
        # entities.resolve_entities(provided, content, "merge", state.known) from the prepared
        # extraction and candidate words (every list is free of empties and de-duplicated).
        extracted, candidates, sequence, causal, flags = prep
        tokens = set(sequence)
        # Interned: an import keeps every sequence to its end, and the words repeat across items.
        state.sequences[new.id] = list(map(sys.intern, sequence))
        known = state.known
        new.entities = list(dict.fromkeys([*provided, *extracted, *[w for w in candidates if w in known]]))
        new.effective_importance = upkeep_ei(new.importance, new.access_count, new.last_accessed_at, new.created_at, 0, now)
        recent = state.recent_of(conn, new.source)  # before the insert: the look-back excludes self
        if write:
            insights.insert(conn, new, stamp)
            if vector is not None:
                self.ctx.vectors.store_vector(conn, new.id, vector)
        assert counts.deferred is not None  # an import's counts always defer
        _entity_edges(state, conn, new, stamp, counts.deferred)
        self._causal_from_recent(new, tokens, causal, flags, recent, stamp, counts)
        if neighbours is not None and neighbours.has_vector(offset) and neighbours.compares(new.content):
            graph.semantic_edges(conn, new, now, counts, neighbours.matches(offset))
        state.known.update(new.entities)
        state.order += 1
        state.add_recent(new.source, _Recent(new.created_at, state.order, new.id, new.content, tokens, causal, flags))
        state.add_entities(new, state.order)

    def _causal_from_recent(
        self,
        new: Insight,
        tokens: set[str],
        causal: bool,
        flags: int,
        recent: list[_Recent],
        stamp: str,
        counts: graph.EdgeCounts,
    ) -> None:
        """graph.causal_edges over the in-memory look-back (10 newest of the source, newest first)."""
        assert counts.deferred is not None
        for prev in reversed(recent):
            if not causal and not prev.causal:
                continue  # neither side has a causal keyword: causal_direction is None
            # linking.causal_direction: the side with the keyword is the effect.
            overlap = token_overlap(tokens, prev.tokens)
            if overlap < CAUSAL_MIN_OVERLAP:
                continue
            meta = edges.dump_metadata({
                "overlap": linking.format_metric(overlap, 4),
                "sub_type": prepare.sub_type(flags, prev.flags),
            })
            if causal:  # "prev_to_new"
                counts.deferred[(prev.id, new.id, "causal")] = (prev.id, new.id, "causal", overlap, meta, stamp)
            else:
                counts.deferred[(new.id, prev.id, "causal")] = (new.id, prev.id, "causal", overlap, meta, stamp)

    def _finalize_import(
        self, explicit: ExplicitEdges, ids: list[str | None], added: list[str], sources: list[str], now: datetime,
        written: _Written,
        deferred_index: bool,
        replaced: list[_Key],
    ) -> tuple[int, list[str]]:
        """The explicit edges the chunks could not write, backbone repair, EI of touched nodes,
        auto-prune: one transaction.

        The explicit edges between two inserted items were written with their chunks
        (``bulkedges``); the rest (an end that is an existing insight) are upserted here, those
        whose keys cannot exist yet (``_fresh``) inserted (edges.upsert_rows_split): the same rows
        as one upsert of all of them. So are the backbone rows. ``replaced`` collects the key of
        every edge row this may delete or replace (a superset: a listed key need not have a row).
        """
        stamp = format_ts(now)
        late, positions, ends, kept = explicit.finish(ids, self.ctx.notice, stamp)
        touched: dict[str, None] = dict.fromkeys(added)
        touched.update(ends)
        with self.ctx.store.foreign_keys_unchecked(), self.ctx.store.transaction("import") as conn:
            inserted = kept - len(late)  # written with the chunks (or replaced by a later edge of the draft)
            late, positions = _checked(conn, late, positions, self.ctx.notice)
            added_set = set(added)
            # Only while no other process wrote since our last commit: its rows are unknown to us.
            own = not written.foreign and self.ctx.store.write_mark() == written.mark
            if late:
                rows = _sorted_by_key(late, touched)  # key order keeps the edge b-trees' pages hot
                fresh, hashes = _fresh(rows, added_set, written.sorted(), own)
                written.parts.append(hashes)
                # an edge between two insights that were there before: only a missing one is written
                # (a re-imported export leaves the stored edges as they are; edges.insert_missing_rows)
                stored = [_between_stored(row, added_set) for row in rows]
                replaced += [row[:3] for row, new, old in zip(rows, fresh, stored) if not new and not old]
                try:
                    with conn:  # (stable sort: a repeated key's last row wins)
                        upserted = [(row, new) for row, new, old in zip(rows, fresh, stored) if not old]
                        edges.upsert_rows_split(conn, [row for row, _ in upserted], [new for _, new in upserted])
                        missing = edges.insert_missing_rows(conn, [row for row, old in zip(rows, stored) if old])
                    inserted += len(upserted) + missing
                except StatementError:
                    replaced += [row[:3] for row in late if not _between_stored(row, added_set)]
                    for k, row in zip(positions, late):  # find the failing ones, keep the rest
                        try:
                            with conn:
                                if _between_stored(row, added_set):
                                    inserted += edges.insert_missing_rows(conn, [row])
                                else:
                                    edges.upsert_row(conn, row)
                                    inserted += 1
                        except StatementError as exc:
                            self.ctx.notice(f"warning: explicit edge {k}: {exc}")
            known = written.sorted()  # the chunks' and the explicit edges' keys
            for source in sources:
                touched.update(dict.fromkeys(_repair_backbone(conn, source, added_set, stamp, known, own, replaced)))
            if deferred_index:  # after the import's last edge write, before the first read by target
                bulkwrite.restore_edge_target_index(conn)
            refresh_effective_importance(conn, touched, now)
            if deferred_index:  # after the last insight write, before the auto-prune's read by EI
                bulkwrite.restore_insight_indexes(conn)
            pruned = auto_prune(conn, self.ctx.settings, now, exclude=[], trigger=IMPORT_TRIGGER)
        self.ctx.after_write()
        return inserted, pruned

    # --- export -------------------------------------------------------------------------------

    def export_draft(self) -> dict[str, object]:
        """The active store as an import draft: insights in timeline order, edges as index pairs
        with their weights and whole metadata maps (drafts.py reads both back)."""
        conn = self.ctx.store.conn
        active = insights.all_active(conn)
        position = {ins.id: k for k, ins in enumerate(active)}
        items = [_draft_item(ins) for ins in active]
        _refuse_undraftable(active, items)
        out_edges: list[dict[str, object]] = []
        self_edges: list[dict[str, object]] = []
        heavy: list[Edge] = []
        for edge in edges.all_edges(conn):  # (maps shared between edges: read, never changed)
            s, t = position.get(edge.source_id), position.get(edge.target_id)
            if s is None or t is None:
                continue
            if not 0.0 <= edge.weight <= 1.0:
                heavy.append(edge)
            row: dict[str, object] = (
                {"source_index": s, "target_index": t} if s != t else {"index": s}  # a link to itself (§3.8)
            )
            row["edge_type"], row["weight"] = edge.edge_type, edge.weight
            metadata = edge.metadata
            if metadata:
                reason = metadata.get("reason")
                if reason and "\x00" not in reason:  # (a draft's reason is plain text; the map carries any)
                    row["reason"] = reason  # what the Go program's import reads
                row["metadata"] = metadata  # the whole map: entity, sub_type, hours_diff, link --meta's, ...
            (out_edges if s != t else self_edges).append(row)
        if heavy:
            _refuse_weights(heavy)
        # exact_weights: a stored weight 0 is imported as 0, not as the default 0.5 (drafts.py)
        draft: dict[str, object] = {"schema_version": "1", "exact_weights": True, "insights": items, "edges": out_edges}
        if self_edges:
            draft["self_edges"] = self_edges
        return draft


def _refuse_undraftable(active: list[Insight], items: list[dict[str, object]]) -> None:
    """Refuse the export, before a byte of it is written, when an item is one ``import`` would refuse: a memory
    whose text no draft carries unchanged (``validate.stored_text_problems``: cutting an over-long content or
    dropping a NUL would export another memory, and leaving it out would lose one unseen), or anything else the
    draft check refuses. The message names the first such memory and its problem, says how many there are, and
    points at doctor, which names each (a draft the user cannot import, found only at import, helps nobody)."""
    refused: list[tuple[str, str]] = []
    for ins, item in zip(active, items, strict=True):
        problems = stored_text_problems(ins.content, ins.source)
        if not problems and not (plainly_draftable(ins.tags, MAX_TAGS, MAX_TAG_BYTES)
                                 and plainly_draftable(ins.entities, MAX_ENTITIES, MAX_ENTITY_BYTES)):
            # What is left (tags or entities past a draft's limits, a NUL in one): import's own item check, for
            # the few items the test above cannot vouch for (it costs 12 us an item: 12 s a million).
            problems = [p] if (p := drafts.item_problem(item)) else []
        if problems:
            refused.append((ins.id, "; ".join(problems)))
    if refused:
        insight_id, problem = refused[0]
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise InputError(
            f"export: insight {insight_id}: {problem}: import refuses such a draft, so none was written{more}; "
            "`mnemon doctor` names each such memory: correct or forget it, then export again"
        )


def _refuse_weights(heavy: list[Edge]) -> None:
    """Refuse the export of an edge weight outside 0-1 (a hand edit: import refuses it). Recall adds a weight as it
    is, so no valid weight reads the same and the export does not choose one; ``doctor --repair`` clamps it into
    0-1 (``store.ranges``: the edge keeps its order among valid edges), which the user asks for knowingly."""
    first = heavy[0]
    more = f" (and {len(heavy) - 1} more)" if len(heavy) > 1 else ""
    raise InputError(
        f"export: edge {first.source_id} -> {first.target_id} ({first.edge_type}): weight {first.weight!r} is out of "
        f"0-1: import refuses such a draft, so none was written{more}; `mnemon doctor --repair` clamps it into 0-1, "
        "then export again"
    )


def _draft_item(ins: Insight) -> dict[str, object]:
    """An active insight as a draft item: the contract's fields, and what it has of its use (drafts.py:
    ``access_count``, ``last_accessed_at``, ``updated_at``) where that is not the default of a draft item.

    As every reader does (store.numeric, lifecycle): a negative access count is never accessed, one past
    MAX_ACCESS_COUNT (a SQLite count an older writer let grow) is written as that ceiling, the most a draft
    carries; an optional timestamp no reader can parse is left out rather than make the draft one that import
    refuses. A created_at is required, and one that does not parse (hand-edited text, a blob, an old writer's
    form) is written as the time the readers take it for: lifecycle's decay counts it from Go's zero time
    (``GO_ZERO_STAMP``, which doctor --repair also stores), so the imported row decays as the exported one did.
    (Recall reads no time from such a row: only its raw bytes, for same-day grouping and the last tie-break.)
    An empty created_at is one decay skips the same way, so it gets the same stamp (import would read "" as
    "now", a fresh memory where the readers saw an ancient one).

    The same holds for the other values ``store.ranges`` argues and doctor --repair stores: an importance
    outside 1-5 is written clamped into it, the importance every reader decides by (immunity, recall's ties;
    writing 0 would even read as "unstated", 3, in a draft), and a category not among the six (``narrative``
    included: the readers return it as a live memory) as ``general``, the category of a memory that states none.
    """
    created = ins.created_at if timestamp_parses(ins.created_at) else GO_ZERO_STAMP
    importance = min(max(ins.importance, ranges.IMPORTANCE_MIN), ranges.IMPORTANCE_MAX)
    category = ins.category if ins.category in CATEGORIES else DEFAULT_CATEGORY
    item: dict[str, object] = {
        "content": ins.content, "category": category, "importance": importance,
        "tags": ins.tags, "entities": ins.entities, "source": ins.source, "created_at": created,
    }
    accessed = min(max(ins.access_count, 0), MAX_ACCESS_COUNT)
    if accessed:
        item["access_count"] = accessed
    if ins.last_accessed_at and timestamp_parses(ins.last_accessed_at):
        item["last_accessed_at"] = ins.last_accessed_at
    if ins.updated_at != ins.created_at and timestamp_parses(ins.updated_at):
        item["updated_at"] = ins.updated_at
    return item


def _release(items: Any) -> None:
    """Empty a consumed part of the draft (a list, or the edge columns ``DraftEdges.clear`` frees);
    an immutable sequence (a test's tuple) is left as it is."""
    clear = getattr(items, "clear", None)
    if clear is not None:
        clear()


def _entity_edges(
    state: _ImportState, conn: apsw.Connection, new: Insight, stamp: str, out: dict[tuple[str, str, str], Any]
) -> None:
    """graph.entity_edges with the neighbours from ``state``, as edge rows into ``out`` (§4.5)."""
    written = 0
    new_id = new.id
    for entity in new.entities:
        if written >= ENTITY_EDGE_CAP:
            return
        meta = edges.dump_metadata({"entity": entity})
        for other in state.newest_with(conn, entity, new_id):
            if written >= ENTITY_EDGE_CAP:
                return
            out[(new_id, other, "entity")] = (new_id, other, "entity", 1.0, meta, stamp)
            out[(other, new_id, "entity")] = (other, new_id, "entity", 1.0, meta, stamp)
            written += 2


def _between_stored(row: _EdgeRow, added: set[str]) -> bool:
    """An explicit edge row between two insights stored before this import (neither end added by it)."""
    return row[0] not in added and row[1] not in added


def _checked(
    conn: apsw.Connection, written: list[_EdgeRow], positions: list[int], notice: Callable[[str], None] | None
) -> tuple[list[_EdgeRow], list[int]]:
    """The edge rows whose two endpoints exist, and their positions: the foreign-key check, once
    for all (in the writing transaction).

    Explicit edges map to ids this import added or found, and a missing one warns as the
    constraint did (``positions``: each row's number among the draft's kept explicit edges).
    """
    ends = {row[0]: None for row in written}
    ends.update((row[1], None) for row in written)
    present = insights.existing_ids(conn, ends)
    if len(present) == len(ends):
        return written, positions  # the usual case: every endpoint is there
    kept: list[_EdgeRow] = []
    kept_positions: list[int] = []
    for k, row in zip(positions, written):
        if row[0] in present and row[1] in present:
            kept.append(row)
            kept_positions.append(k)
        elif notice is not None:
            notice(f"warning: explicit edge {k}: FOREIGN KEY constraint failed")
    return kept, kept_positions


def _repair_backbone(
    conn: apsw.Connection, source: str, imported: set[str], stamp: str, written: NDArray[np.int64], own: bool,
    replaced: list[_Key],
) -> list[str]:
    """§4.4 import repair for one source; return the ids whose backbone edges were (re)written.

    Timeline = the source's active insights by created_at, rowid. Wherever imported insights sit
    between two older neighbours, the old backbone pair between those neighbours goes; then every
    adjacent pair with at least one imported side gets the precedes/succeeds pair (weight 1.0).
    ``written``, ``own``: as for ``_fresh`` (a pair's key is new unless the import wrote it: an
    explicit temporal edge). ``replaced`` gains the keys of the rows this deletes or may replace.
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
            replaced += [(timeline[last_old], insight_id, "temporal"), (insight_id, timeline[last_old], "temporal")]
        last_old, run = pos, False
    precedes = edges.dump_metadata({"sub_type": "backbone", "direction": "precedes"})
    succeeds = edges.dump_metadata({"sub_type": "backbone", "direction": "succeeds"})
    rows: list[tuple[str, str, str, float, str, str]] = []
    touched: list[str] = []
    for older, newer in zip(timeline, timeline[1:]):
        if older in imported or newer in imported:
            rows.append((older, newer, "temporal", 1.0, precedes, stamp))
            rows.append((newer, older, "temporal", 1.0, succeeds, stamp))
            touched += [older, newer]
    rows.sort()  # keys are distinct (adjacent pairs of distinct ids): whole-tuple order is key order
    fresh = _fresh(rows, imported, written, own)[0]
    replaced += [row[:3] for row, new in zip(rows, fresh) if not new]
    edges.upsert_rows_split(conn, rows, fresh)
    return touched


def _sorted_by_key(rows: list[_EdgeRow], ends: dict[str, None]) -> list[_EdgeRow]:
    """``sorted(rows, key=_EDGE_KEY)`` (stable), where ``ends`` holds every endpoint of ``rows``.

    One string per key, the three fields joined by NUL, orders as the key tuple does while no id
    holds a NUL (NUL sorts below every other character, so a shorter id that is a prefix of a
    longer one still sorts first); it compares in one call instead of one per field: 1.3 s
    instead of 3.3 s for 1.5M rows.
    """
    if any("\x00" in end for end in ends):
        return sorted(rows, key=_EDGE_KEY)
    return sorted(rows, key=lambda r: f"{r[0]}\x00{r[1]}\x00{r[2]}")


@dataclass(slots=True)
class _Written:
    """The edge keys this import wrote (hashes, per chunk) and the store's write mark after its
    last commit: the proof ``_fresh`` needs that a key has no row yet."""

    parts: list[NDArray[np.int64]]
    mark: tuple[int, int]
    foreign: bool  # another writer committed between two of the import's transactions

    def sorted(self) -> NDArray[np.int64]:
        import numpy as np

        self.parts = [np.sort(np.concatenate(self.parts))] if self.parts else [np.zeros(0, dtype=np.int64)]
        return self.parts[0]


def _key_hashes(keyed: dict[tuple[str, str, str], Any]) -> NDArray[np.int64]:
    """Hashes of edge keys (Python's own, of the key tuples: process-local, which is all they need)."""
    import numpy as np

    return np.fromiter(map(hash, keyed), dtype=np.int64, count=len(keyed))


def _fresh(
    rows: list[_EdgeRow], created: set[str], written: NDArray[np.int64], own: bool
) -> tuple[list[bool], NDArray[np.int64]]:
    """Which of ``rows`` (sorted by key) have a key no row can have yet; and the keys' hashes.

    A key is fresh when an endpoint is an insight this import created (no row with its id
    predates the import), the import wrote no edge with that key before (``written``: sorted
    hashes of the keys it wrote; membership by bisection: millions of keys, no set of tuples),
    and it appears once in ``rows``; and only while no other process wrote since our last commit
    (``own``). A hash collision only makes a fresh key look written: it is then upserted, as
    every row was before.
    """
    import numpy as np

    n = len(rows)
    hashes = np.fromiter(map(hash, map(_EDGE_KEY, rows)), dtype=np.int64, count=n)
    if not own or not n:
        return [False] * n, hashes
    new_end = np.fromiter(map(created.__contains__, map(operator.itemgetter(0), rows)), dtype=np.bool_, count=n)
    new_end |= np.fromiter(map(created.__contains__, map(operator.itemgetter(1), rows)), dtype=np.bool_, count=n)
    if written.size:
        pos = np.minimum(np.searchsorted(written, hashes), written.size - 1)
        new_end &= written[pos] != hashes
    repeated = hashes[1:] == hashes[:-1]  # sorted by key: a repeated key's rows are adjacent
    new_end[1:] &= ~repeated
    new_end[:-1] &= ~repeated
    return new_end.tolist(), hashes
