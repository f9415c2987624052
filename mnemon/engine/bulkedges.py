"""An import's explicit edges (the draft's index pairs), written with the chunk that completes them.

An explicit edge between two items the import inserts can be written as soon as both exist: in
the chunk of its later endpoint, with that chunk's own edges, as plain inserts of keys no row
has yet (an explicit edge replaces the chunk's own edge with the same key, as the upsert after
every chunk did). Nothing written later can have its key: every edge a later item gets names
that item. So the finalize no longer holds and upserts millions of rows at its end.

Only the edges with an end the import did not insert (an exact duplicate's existing insight)
are left to the finalize's upsert, in draft order, after the chunks' rows: such a key may exist
already. One of them whose key a later edge of the draft (written with its chunk) also has is
dropped, so the draft's last edge per key wins, as when the whole list was upserted in order.
The warnings (an end not imported, both ends one insight) are printed by the finalize, in draft
order, with the numbering they always had.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mnemon.drafts import EDGE_TYPES, DraftEdge, DraftEdges, MetaLabel
from mnemon.store import edges as edge_sql

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

EdgeRow = tuple[str, str, str, float, str, str]  # as edges.upsert_row binds it


class ExplicitEdges:
    """The draft's explicit edges, grouped by the item that completes them."""

    def __init__(self, draft_edges: Sequence[DraftEdge], total: int) -> None:
        import numpy as np

        if not isinstance(draft_edges, DraftEdges):  # a draft built as a list (tests)
            kept = DraftEdges()
            for edge in draft_edges:
                kept.append(edge)
            draft_edges = kept
        source, target, kind, weight, meta, self.labels = draft_edges.columns()
        # Copies the import owns, as narrow as they go (16M edges at 1M): 19 bytes an edge.
        self.source = np.array(source, dtype=np.int32)
        self.target = np.array(target, dtype=np.int32)
        self.kind = np.array(kind, dtype=np.int8)
        self.weight = np.array(weight, dtype=np.float64)
        self.label = np.array(meta, dtype=np.int32)  # codes into ``labels``
        last = np.maximum(self.source, self.target)
        self.order = np.argsort(last, kind="stable")
        self.last_sorted = last[self.order]
        # Item k was inserted by this import (set per chunk, by its final attempt).
        self.created = np.zeros(total, dtype=np.bool_)
        self._encoded: list[str] = []  # _texts()
        self.metadata: dict[MetaLabel, str] = {"": edge_sql.dump_metadata({})}

    def meta(self, label: MetaLabel) -> str:
        """The metadata text of an explicit edge with this metadata (drafts.MetaLabel: a reason, or
        the whole map as pairs), encoded once per distinct one."""
        text = self.metadata.get(label)
        if text is None:
            value = {"reason": label} if isinstance(label, str) else dict(label)
            text = self.metadata[label] = edge_sql.dump_metadata(value)
        return text

    def chunk_rows(self, start: int, added: list[bool], ids: list[str | None], stamp: str, out: dict[Any, Any]) -> None:
        """Put the rows of the explicit edges the chunk ``[start, start + len(added))`` completes
        between two inserted items into ``out`` (the chunk's edge rows by key), in draft order:
        a repeated key's last edge wins, over the chunk's own edge too. ``ids``: every item's id
        so far, the chunk's included."""
        import numpy as np

        end = start + len(added)
        self.created[start:end] = added
        lo, hi = np.searchsorted(self.last_sorted, (start, end))
        if lo == hi:
            return
        ks = np.sort(self.order[lo:hi])
        ks = ks[self.created[self.source[ks]] & self.created[self.target[ks]]]
        metas = self._texts()
        for s, t, kind, weight, label in zip(
            self.source[ks].tolist(), self.target[ks].tolist(), self.kind[ks].tolist(), self.weight[ks].tolist(),
            self.label[ks].tolist(),
        ):
            source_id, target_id = ids[s], ids[t]
            if source_id is None or target_id is None or (source_id == target_id and s != t):
                continue  # (an item inserted twice over, never: the finalize warns, as before; a self-edge is kept)
            edge_type = EDGE_TYPES[kind]
            out[(source_id, target_id, edge_type)] = (source_id, target_id, edge_type, weight, metas[label], stamp)

    def finish(
        self, ids: list[str | None], notice: Callable[[str], None], stamp: str
    ) -> tuple[list[EdgeRow], list[int], dict[str, None], int]:
        """After the last chunk: warn about the edges never written (draft order), and return the
        rows left to the finalize (an end the import did not insert), their positions in the
        list of kept explicit edges (the numbering of a failed row's warning), the endpoints of
        every kept edge, and how many edges were kept."""
        import numpy as np

        codes: dict[str, int] = {}
        code = np.fromiter(
            (-1 if i is None else codes.setdefault(i, len(codes)) for i in ids), dtype=np.int64, count=len(ids)
        )
        cs, ct = code[self.source], code[self.target]
        missing = (cs < 0) | (ct < 0)
        dropped = missing | ((cs == ct) & (self.source != self.target))  # two items mapped to one insight; not a self-edge
        # A draft's self_edges follow its edges (drafts.py), and only they join an item to itself: each warning
        # names the item in the draft's own list.
        first_self = int(np.count_nonzero(self.source != self.target))
        for k in np.flatnonzero(dropped).tolist():
            where = f"self_edges[{k - first_self}]" if self.source[k] == self.target[k] else f"edges[{k}]"
            if missing[k]:
                notice(f"warning: {where}: endpoint was not imported; edge skipped")
            else:
                notice(f"warning: {where}: both ends map to insight {ids[int(self.source[k])]}; edge skipped")
        kept = ~dropped
        by_code = list(codes)
        ends = np.unique(np.concatenate((cs[kept], ct[kept])))
        touched = dict.fromkeys(by_code[c] for c in ends.tolist())
        late = kept & ~(self.created[self.source] & self.created[self.target])
        ks = np.flatnonzero(late)
        if ks.size:
            ks = ks[~self._replaced_later(ks, cs, ct, kept)]
        position = ks - np.cumsum(dropped)[ks]  # kept edges before k (dropped[k] is False)
        metas = self._texts()
        rows: list[EdgeRow] = [
            (ids[s], ids[t], EDGE_TYPES[kind], weight, metas[label], stamp)
            for s, t, kind, weight, label in zip(
                self.source[ks].tolist(), self.target[ks].tolist(), self.kind[ks].tolist(), self.weight[ks].tolist(),
                self.label[ks].tolist(),
            )
        ]
        return rows, position.tolist(), touched, int(kept.sum())

    def _texts(self) -> list[str]:
        """The metadata text of every distinct metadata, by code. Kept once built: a draft with a
        metadata map on every edge (an export's) has thousands of distinct ones, and every chunk
        asks for them."""
        if len(self._encoded) != len(self.labels):
            self._encoded = [self.meta(label) for label in self.labels]
        return self._encoded

    def _replaced_later(
        self, late: NDArray[np.int64], cs: NDArray[np.int64], ct: NDArray[np.int64], kept: NDArray[np.bool_]
    ) -> NDArray[np.bool_]:
        """Which of the ``late`` edges a later edge of the draft, written with its chunk, has the
        same key as (it must not be upserted over that one)."""
        import numpy as np

        early = np.flatnonzero(kept & self.created[self.source] & self.created[self.target])
        if not early.size:
            return np.zeros(late.size, dtype=np.bool_)
        types = self.kind
        span = int(max(cs.max(), ct.max())) + 1
        key_early = (cs[early] * span + ct[early]) * 8 + types[early]
        key_late = (cs[late] * span + ct[late]) * 8 + types[late]
        order = np.lexsort((early, key_early))  # by key, then edge number: the last per key is its latest
        key_sorted, k_sorted = key_early[order], early[order]
        pos = np.searchsorted(key_sorted, key_late, side="right") - 1
        pos_ok = pos >= 0
        pos = np.maximum(pos, 0)
        return pos_ok & (key_sorted[pos] == key_late) & (k_sorted[pos] > late)
