"""Row identity in the hot index: insight id <-> row, and the id and created_at orders.

Owns looking rows up by id (a few by bisection over the base's ids in id order, many by a 64-bit hash
of the id bytes, confirmed byte for byte), the base's id order, and the id and created_at ranks that
break ties deterministically (after a catch-up the few new rows are merged into the old ranks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemon.engine.hot.arrays import _sorted_positions
from mnemon.engine.hot.columns import ColumnStore

if TYPE_CHECKING:
    import numpy as np

# rows_of: from this many ids on, hashing every row's id once beats bisecting string comparisons
_HASHED_LOOKUP_MIN_IDS = 4096
_HASH_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                     0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9)  # fmt: skip


def _id_hashes(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each fixed-width bytes id (uint64; equal ids give equal hashes).

    The id bytes, zero-padded to whole 8-byte words, are summed word by word with odd multipliers
    (uint64 arithmetic wraps), then mixed; collisions are possible and rows_of confirms every match.
    """
    import numpy as np

    n, width = ids.shape[0], ids.dtype.itemsize
    words = -(-width // 8)
    raw = np.zeros((n, words * 8), dtype=np.uint8)
    raw[:, :width] = np.frombuffer(np.ascontiguousarray(ids).tobytes(), dtype=np.uint8).reshape(n, width)
    packed = raw.view("<u8")
    h = np.zeros(n, dtype=np.uint64)
    for j in range(words):
        h += packed[:, j] * np.uint64(_HASH_MULTIPLIERS[j % len(_HASH_MULTIPLIERS)])
        h ^= h >> np.uint64(29)
    return h


class RowIds(ColumnStore):
    """Rows by insight id, ids by row, and the id and created_at ranks."""

    def row_of(self, insight_id: str) -> int | None:
        if self._row_of is None:
            self._single_lookups += 1
            if self._single_lookups <= 64:  # a few look-ups: bisection; many: one dict
                return self._lookup([insight_id])[0]
            self._row_of = {i: r for r, i in enumerate(self.ids_list())}
        return self._row_of.get(insight_id)

    def _lookup(self, ids: list[str]) -> list[int | None]:
        """Rows of ``ids`` (None if unknown): bisection over the base's sorted ids, a dict for the tail."""
        import numpy as np

        if self._row_of is not None:
            return [self._row_of.get(i) for i in ids]
        out: list[int | None] = [None] * len(ids)
        tail = {bytes(b).decode("ascii", "replace"): self.base_n + r
                for r, b in enumerate(self._tail("id_blob", self.base_n).tolist())}  # fmt: skip
        rest = []
        for k, insight_id in enumerate(ids):
            got = tail.get(insight_id)
            if got is not None:
                out[k] = got
            else:
                rest.append(k)
        if rest and self.base_n:
            order = self._base_order()
            base_ids = self._slice("id_blob", 0, self.base_n)
            width = base_ids.dtype.itemsize
            wanted = [ids[k].encode("ascii", "replace") for k in rest]
            fits = [len(w) <= width for w in wanted]
            arr = np.array([w if f else b"" for w, f in zip(wanted, fits)], dtype=base_ids.dtype)
            pos = np.minimum(_sorted_positions(base_ids, order, arr), self.base_n - 1)
            rows = order[pos]
            hit = (base_ids[rows] == arr).tolist()
            for j, k in enumerate(rest):
                if fits[j] and hit[j]:
                    out[k] = int(rows[j])
        return out

    def _base_order(self) -> np.ndarray:
        """Base rows in id order (the inverse of the base's id ranks; the ids themselves are not copied)."""
        import numpy as np

        if self._base_sorted is None:
            rank = self._derived.get("id_rank")
            if rank is not None and rank.shape[0] == self.base_n:  # the base's own ranks: a permutation
                order = np.empty(self.base_n, dtype=np.int64)
                order[np.asarray(rank)] = np.arange(self.base_n, dtype=np.int64)
            else:
                rank = np.asarray(self._get("id_rank"))[: self.base_n]  # ranks among all rows: gaps for new ids
                slots = np.full(self.n, -1, dtype=np.int64)
                slots[rank] = np.arange(self.base_n, dtype=np.int64)
                order = slots[slots >= 0]
            self._base_sorted = order
        return self._base_sorted

    def ids_list(self) -> list[str]:
        if len(self.ids) != self.n:
            self.ids = [b.decode("ascii", "replace") for b in self.id_blob.tolist()]
        return self.ids

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows of many ids at once (-1 where unknown).

        Many ids (a vector index written in another order than this one, e.g. by ``embed --all``)
        are matched by a 64-bit hash of their bytes, sorted once per row count, then confirmed
        byte for byte; bisection over the sorted ids (string comparisons: 2 s for a million ids)
        settles only the few ids whose hash another row shares, and small batches.
        """
        import numpy as np

        wanted = np.char.encode(ids.astype(str), "ascii") if ids.dtype.kind == "U" else np.asarray(ids)
        if self.n == 0:
            return np.full(wanted.shape[0], -1, dtype=np.int64)
        if wanted.dtype.itemsize > self.id_blob.dtype.itemsize:  # an id longer than every stored one is unknown
            fits = np.char.str_len(wanted) <= self.id_blob.dtype.itemsize
            out = np.full(wanted.shape[0], -1, dtype=np.int64)
            if fits.any():
                out[fits] = self.rows_of(wanted[fits].astype(self.id_blob.dtype))
            return out
        wanted = wanted.astype(self.id_blob.dtype)
        if wanted.shape[0] < _HASHED_LOOKUP_MIN_IDS:
            return self._rows_by_bisection(wanted)
        keys, rows = self._id_hash_order()
        hashed = _id_hashes(wanted)
        by_hash = np.argsort(hashed)  # bisecting in hash order walks ``keys`` once: 10x fewer cache misses
        pos = np.empty(hashed.shape[0], dtype=np.int64)
        pos[by_hash] = np.searchsorted(keys, hashed[by_hash])
        np.minimum(pos, self.n - 1, out=pos)
        found = keys[pos] == hashed
        cand = rows[pos]
        same = found & (self.id_blob[cand] == wanted)
        out = np.where(same, cand, -1).astype(np.int64)
        shared = np.flatnonzero(found & ~same)  # the first row with this hash is another id
        if shared.size:
            out[shared] = self._rows_by_bisection(wanted[shared])
        return out

    def _id_hash_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted hashes of every row's id, the rows in that order), kept until rows are added."""
        import numpy as np

        cached = self._id_hashes
        if cached is None or cached[0] != self.n:
            hashed = _id_hashes(self.id_blob[: self.n])
            # any order among equal hashes will do: a match is confirmed by the id, a miss bisected
            order = np.argsort(hashed)
            cached = self._id_hashes = (self.n, hashed[order], order.astype(np.int64))
        return cached[1], cached[2]

    def _rows_by_bisection(self, wanted: np.ndarray) -> np.ndarray:
        """Rows of ``wanted`` (bytes of the ids' width) by bisection over the ids in id order (-1 where unknown)."""
        import numpy as np

        rank = self._get("id_rank")  # inverting it is O(n), no string sort per query
        order = np.empty(self.n, dtype=np.int64)
        order[rank] = np.arange(self.n, dtype=np.int64)
        sorted_ids = self.id_blob[order]
        pos = np.minimum(np.searchsorted(sorted_ids, wanted), max(self.n - 1, 0))
        return np.where(sorted_ids[pos] == wanted, order[pos], -1).astype(np.int64)

    def id_at(self, row: int) -> str:
        return bytes(self._item("id_blob", row)).decode("ascii", "replace")

    def _derive_ranks(self) -> None:
        """id_rank and created_rank; after a catch-up the few new rows are merged into the old ranks."""
        import numpy as np

        n = self.n
        old_id = self._derived.get("id_rank")
        old_cr = self._derived.get("created_rank")
        k = 0 if old_id is None or old_cr is None else int(old_id.shape[0])
        if k == 0 or k > n:
            self._derived["id_rank"] = np.argsort(np.argsort(self.id_blob, kind="stable"), kind="stable").astype(np.int32)
            _, created_rank = np.unique(self.created, return_inverse=True)
            self._derived["created_rank"] = created_rank.astype(np.int32).reshape(n)
            return
        assert old_id is not None and old_cr is not None
        old_id, old_cr = np.asarray(old_id, dtype=np.int64), np.asarray(old_cr, dtype=np.int64)
        # ids: new rank = old rank + new ids sorting before it; new ids slot in after their bisection point
        order = np.empty(k, dtype=np.int64)
        order[old_id] = np.arange(k, dtype=np.int64)
        new_ids = self._tail("id_blob", k)
        new_order = np.argsort(new_ids, kind="stable")
        old_ids = (lambda: self._slice("id_blob", 0, k), lambda r: self._item("id_blob", r))  # no join for a few
        pos = _sorted_positions(old_ids, order, new_ids[new_order])
        id_rank = np.empty(n, dtype=np.int32)
        id_rank[:k] = old_id + np.searchsorted(pos, old_id, side="right")
        id_rank[k + new_order] = pos + np.arange(n - k)
        self._derived["id_rank"] = id_rank
        # created_at (dense rank): cheap when the new rows are not older than every old one's newest
        top = int(old_cr.max()) if k else -1
        newest = self._item("created", int(np.argmax(old_cr))) if k else b""
        new_created = self._tail("created", k)
        if new_created.shape[0] and bool((new_created < newest).any()):
            _, created_rank = np.unique(self.created, return_inverse=True)
            self._derived["created_rank"] = created_rank.astype(np.int32).reshape(n)
            return
        uniq, inv = np.unique(new_created, return_inverse=True)
        shift = 0 if (uniq.shape[0] and uniq[0] == newest) else 1
        cr = np.empty(n, dtype=np.int32)
        cr[:k] = old_cr
        cr[k:] = top + shift + inv.reshape(-1)
        self._derived["created_rank"] = cr
