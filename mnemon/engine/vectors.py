"""Vectors for the write path: embed outside any transaction, find cosine neighbours (§3.3, §4.7, §4.9).

An unreachable or misbehaving server never fails a write: the insight is stored with
``embedded: false``. Cosine neighbours are read from the store's vectors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemon.engine.core import EngineBase
from mnemon.errors import EmbedderError
from mnemon.store import blob

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_SQL_ACTIVE_VECTORS = "SELECT id, embedding FROM insights WHERE deleted_at IS NULL AND embedding IS NOT NULL"


class VectorMixin(EngineBase):
    """Embedding and cosine lookups shared by remember and import."""

    def embed_for_write(self, text: str) -> NDArray[np.float64] | None:
        """Embed ``text`` if a server is reachable; None on any embedder failure."""
        embedder = self.embedder()
        if embedder is None:
            return None
        try:
            return embedder.embed(text)
        except EmbedderError:
            return None

    def cosine_neighbours(
        self, vector: NDArray[np.float64], minimum: float, limit: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """Active insights with cosine ≥ ``minimum`` to ``vector``, best first (ties: id asc)."""
        import numpy as np

        fmt = self.store.embedding_format
        ids: list[str] = []
        rows: list[NDArray[np.float64]] = []
        for insight_id, raw in self.store.conn.execute(_SQL_ACTIVE_VECTORS):
            if insight_id == exclude:
                continue
            vec = blob.decode(raw, fmt)
            if vec is not None and vec.shape == vector.shape:
                ids.append(str(insight_id))
                rows.append(vec)
        if not rows:
            return []
        matrix = np.vstack(rows)
        norms = np.linalg.norm(matrix, axis=1)
        qnorm = float(np.linalg.norm(vector))
        if qnorm == 0:
            return []
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = np.where(norms > 0, matrix @ vector / (norms * qnorm), 0.0)
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
        return [(ids[i], float(scores[i])) for i in order if scores[i] >= minimum][:limit]
