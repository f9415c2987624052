"""The derived token/edge hot index that recall, search and the write-path scans read.

The index of one store holds per-row numbers (active flag, category, source, importance, created_at,
id), the forward token lists (stemmed BM25 terms with tf, plain §4.1 token sets), their postings, the
entities, and the edge list with its both-directions CSR and the temporal backbone prev/next.
``store.hotindex`` holds the files and the change queries; this package tokenises (it is the engine's
job, store never imports domain modules) and keeps the arrays.

Currency (architecture: the hot index): the index records the database fingerprint it describes. A
reader compares it with the live one; when it differs the index catches up (new rows by rowid,
deletions by the deletion log's sequence, new edge rows by rowid above the edges' mark, which never
falls: ``store.hotindex.Fingerprint``; then verifies the active-row and edge counts and reloads
whatever does not add up), so a crash between a commit and the index write can only make the
index stale, never wrong. Under ``--readonly`` the index is built or caught up in memory and nothing
is written.

Base and delta (writes cost O(delta), not O(store)): the big file ``hot`` is a *base* with sorted
vocabulary, postings, id/created ranks and the edge CSR. A catch-up never re-sorts or rewrites it: new
rows, their new terms (appended unsorted after the sorted vocabulary) and new edge rows are kept as a
small tail segment, persisted on their own in ``hot.delta`` (tied to the base's build id). Scoring
combines the two: a query's posting lists are the base list plus the matching delta entries (BM25's
df, N and avgdl are computed over the combined, scoped rows, so every answer equals a fresh build's);
ranks are updated by merging the few new ids; the delta's edges are a small CSR read beside the big
one. The base is re-persisted (merged) only when the delta passes :func:`merge_threshold` rows. The
edge-count check (the guard against an edge row deleted or replaced behind our back) compares with
the trigger-kept counter (``mnemon.store.counts``, one row read; COUNT(*) only on an old store opened
--readonly); it runs when an edge reader needs the graph.

The package, by concern (``HotIndex`` in ``index.py`` is composed of one class per concern, all on the
fields declared in ``state.py``):

- ``state``: every field an index holds, and which columns are kept in parts or grown in buffers;
- ``arrays``: array helpers (CSR from lists, inversion into postings, bisection, insertion, growth);
- ``columns``: the growable column store (segmented columns, per-row buffers with spare room);
- ``vocabulary``: term ids (the sorted base vocabulary read from the mapped bytes, then the tail);
- ``rowids``: id <-> row look-ups (bisection, hashed for large batches) and the id/created ranks;
- ``postings``: BM25 inputs (base posting lists; a query's lists over base + delta);
- ``entities``: entity ids, entity postings, the known-entity set from per-entity live counts;
- ``graph``: the edge CSRs (base, and the delta's beside it) and the superseded/prev/next links;
- ``edges``: the edge list's rows from SQL, drops named by the change log, reloads, the edge guard;
- ``derived``: the lazily derived arrays' dispatcher, deriving all before a write, fork preparation;
- ``catchup``: build, catch-up from the change log, merge (the only place text is tokenised);
- ``fileformat``: the base file's and the delta segment's contents, and loading them;
- this module: one index per connection, opened (loaded, caught up, rebuilt) and persisted.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemon.engine.hot.arrays import _FEW_BISECTIONS, _sorted_positions
from mnemon.engine.hot.derived import FORK_ROOM
from mnemon.engine.hot.edges import EDGE_STATS
from mnemon.engine.hot.fileformat import FORMAT_VERSION
from mnemon.engine.hot.graph import EDGE_CODES
from mnemon.engine.hot.index import HotIndex
from mnemon.engine.hot.postings import Postings
from mnemon.engine.hot.vocabulary import _SortedTerms
from mnemon.store import hotindex
from mnemon.store.hotindex import Fingerprint

if TYPE_CHECKING:
    import apsw

__all__ = [
    "EDGE_CODES", "EDGE_STATS", "FORK_ROOM", "FORMAT_VERSION", "MERGE_FRACTION", "MERGE_MIN_ROWS", "HotIndex",
    "Postings", "_FEW_BISECTIONS", "_SortedTerms", "_sorted_positions", "cached", "forget", "index_for", "inherited",
    "mark_current", "merge_threshold", "open_index",
]  # fmt: skip

# A delta segment is folded into a new base once it holds this many rows (new or deleted).
MERGE_MIN_ROWS = 512
MERGE_FRACTION = 0.02


def merge_threshold(n_rows: int) -> int:
    return max(MERGE_MIN_ROWS, int(n_rows * MERGE_FRACTION))


# One index per open connection, shared by recall, search and the write-path scans of a process.
_OPEN: weakref.WeakKeyDictionary[Any, HotIndex] = weakref.WeakKeyDictionary()


def _no_inherited(_db_path: Path) -> HotIndex | None:
    return None


# Where a worker forked from the warm server (mnemon.server.warm) finds the index its parent kept
# for a store, instead of loading the files again. Only a starting point: open_index checks it
# against the live fingerprint and catches it up like any cached index. Set only in such a worker.
inherited: Callable[[Path], HotIndex | None] = _no_inherited


def cached(conn: apsw.Connection) -> HotIndex | None:
    """The index this process last used with ``conn`` (possibly stale), if any."""
    return _OPEN.get(conn)


def forget(conn: apsw.Connection) -> None:
    """Drop the index this process holds for ``conn`` (its catch-up failed): the next use loads the files and
    catches them up from the fingerprint, or rebuilds them."""
    _OPEN.pop(conn, None)


def index_for(
    conn: apsw.Connection, db_path: Path, *, readonly: bool, edges: bool = True,
    sequences: Mapping[str, list[str]] | None = None,
) -> HotIndex:
    """Return the index for ``conn``, current for the committed database state.

    ``edges=False`` (the write-path scans) skips the edge-count check; recall needs it.
    ``sequences``: id → ``token_sequence`` of its content, for rows the caller has tokenised
    already (an import's); the index then does not tokenise those contents again.
    """
    start = _OPEN.get(conn)
    if start is None:
        start = inherited(db_path)
    index = open_index(conn, db_path, readonly=readonly, cached=start, edges=edges, sequences=sequences)
    _OPEN[conn] = index
    return index


def _load(db_path: Path) -> HotIndex | None:
    loaded = hotindex.read_index(db_path)
    index = HotIndex.from_file(*loaded) if loaded is not None else None
    if index is not None:
        stamp = hotindex.read_stamp(db_path)
        if stamp is not None and stamp[0] == index.state_id:
            index.fp = stamp[1]
    return index


def open_index(
    conn: apsw.Connection, db_path: Path, *, readonly: bool, cached: HotIndex | None, edges: bool = True,
    sequences: Mapping[str, list[str]] | None = None,
) -> HotIndex:
    """Return a hot index that describes the database now: loaded, caught up or rebuilt.

    Everything is read inside one read snapshot so the fingerprint and the rows agree. What is
    written: a fresh build or a merged base (``<db>.hot``, when the delta passed the threshold),
    else the small delta segment, else only the stamp; nothing under ``readonly``.
    """
    with hotindex.read_snapshot(conn):
        live = hotindex.fingerprint(conn)
        index = cached if cached is not None else _load(db_path)
        if index is not None and index.fp == live and (index.edges_verified or not edges):
            return index
        state = index.state_id if index is not None else ""
        verified = index is not None and index.edges_verified
        index = HotIndex.build(conn, live, sequences) if index is None else index.catch_up(conn, live, sequences)
        merge = index.edges_reloaded or index.delta_rows() >= merge_threshold(index.n)
        if edges or (merge and not readonly):
            index.verify_edges(conn)
            merge = merge or index.edges_reloaded
    if not readonly:
        if index.delta_id and merge:
            index.merge()
        if not index.delta_id and index.build_id != state.split("+")[0]:
            hotindex.write_index(db_path, index.header(), index.arrays())
            hotindex.remove_delta(db_path)
        elif index.state_id == state and (index.edges_verified == verified or not index.delta_id):
            hotindex.write_stamp(db_path, state, live)
        elif index.delta_id:
            hotindex.write_delta(db_path, index.delta_header(), index.delta_arrays())
    return index


def mark_current(db_path: Path, index: HotIndex, fp: Fingerprint, *, readonly: bool) -> None:
    """Our own write changed nothing the index holds: stamp it current for ``fp``."""
    index.fp = fp
    if not readonly:
        hotindex.write_stamp(db_path, index.state_id, fp)
