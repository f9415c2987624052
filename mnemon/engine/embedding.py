"""The ``embed`` command: coverage status, one insight, or a batched backfill (contract §3.14, Decision 11).

``embed --status`` works without a provider. ``embed <id>`` and ``embed --all`` need one and
fail with the contract's "provider not available" message otherwise. ``--all`` embeds every
active insight lacking a vector (not at most 100 as the Go tool does) in batches of
``EMBED_BATCH_ROWS``: each batch is one HTTP request outside any transaction and then one short
write transaction, so a crash loses at most the batch in flight and a rerun resumes. When the
store's vectors come from another model or dimension than the provider's, ``--all`` first clears
them (one transaction) and re-embeds everything, so two vector spaces are never mixed. A provider
that composes a labelled memory's vector from its sentences (the local models,
``mnemon.embed.passages``) re-embeds, in the same batches, the labelled memories of a store whose
``mnemon_meta.embedding_passages`` is older, then records its version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mnemon.engine import wordvectors
from mnemon.engine.core import EngineBase
from mnemon.errors import EmbedderError, EmbedderUnavailable, InputError, NotFoundError
from mnemon.store import insights, oplog
from mnemon.store import vectors as vector_store
from mnemon.validate import check_text

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.embed import Embedder

EMBED_BATCH_ROWS = 64  # insights per request and per write transaction during a backfill
Progress = Callable[[int, int], None]  # (done, total)


class EmbedPipeline:
    """embed status / one / --all: vectors for stored insights, in batches, with the vector index kept current."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def embed_status(self) -> dict[str, object]:
        """Coverage and provider availability; never fails for want of a provider."""
        conn = self.ctx.store.conn
        total = insights.active_count(conn)
        embedded = vector_store.embedded_count(conn)
        available = self.ctx.embedder() is not None
        embedder = self.ctx.current_embedder or self.ctx.make_embedder()
        return {
            "total_insights": total,
            "embedded": embedded,
            "coverage": f"{(embedded / total * 100 if total else 0.0):.0f}%",
            "ollama_available": available,
            "embedding_available": available,
            "protocol": embedder.protocol,
            "model": embedder.model,
        }

    def _require_embedder(self) -> Embedder:
        from mnemon.embed import describe_unavailable

        embedder = self.ctx.embedder()
        if embedder is None:
            raise EmbedderUnavailable(describe_unavailable(self.ctx.current_embedder or self.ctx.make_embedder()))
        return embedder

    def embed_one(self, insight_id: str) -> dict[str, object]:
        """(Re-)embed one active insight; its vector must fit the store's vector space."""
        check_text(insight_id, "id")
        self.ctx.require_writable("embed")
        embedder = self._require_embedder()
        insight = insights.get(self.ctx.store.conn, insight_id)
        if insight is None:
            raise NotFoundError(f"insight {insight_id} not found")
        vector = embedder.embed(insight.content)
        dim = int(vector.shape[0])
        mismatch = self.ctx.vectors.vector_mismatch(embedder.model, dim)
        if mismatch is not None:
            raise InputError(f"{mismatch}; run `mnemon embed --all` to re-embed the store")
        stamp = self.ctx.now_ts()
        with self.ctx.store.transaction("embed") as conn:
            if insights.get(conn, insight_id) is None:
                raise NotFoundError(f"insight {insight_id} not found")
            if not self.ctx.vectors.write_vector(conn, insight_id, vector, embedder):
                raise InputError("the store's vector space changed meanwhile; run `mnemon embed --all`")
            vector_store.bump_epoch(conn)
            oplog.append(conn, "embed", insight_id, f"dim={dim} model={embedder.model}", stamp)
        self._track([(insight_id, vector)])
        return {"status": "embedded", "id": insight_id, "dimension": dim, "model": embedder.model}

    def embed_all(self, progress: Progress | None = None) -> dict[str, object]:
        """Embed every active insight lacking a vector, in batches; re-embed all on a space change, and
        the labelled memories embedded before the provider composed them (``mnemon.embed.passages``)."""
        from mnemon.embed.passages import labelled_sentences  # here: every command loads this module
        from mnemon.engine.vectors import passages_version, record_passages

        self.ctx.require_writable("embed")
        embedder = self._require_embedder()
        conn = self.ctx.store.conn
        pending = vector_store.lacking_embedding(conn)
        sample = pending[0][1] if pending else self._any_content()
        if sample is None:
            return {"status": "complete", "message": "all insights already have embeddings"}
        first = self._probe(embedder, [c for _, c in pending[:EMBED_BATCH_ROWS]] or [sample])
        if self.ctx.vectors.vector_mismatch(embedder.model, int(first.shape[0])) is not None:
            with self.ctx.store.transaction("embed") as tx:
                vector_store.clear_embeddings(tx)
                vector_store.set_vector_meta(tx, embedder.model, int(first.shape[0]))
                record_passages(tx, embedder)
                vector_store.bump_epoch(tx)
            self.ctx.after_write()
            pending = vector_store.lacking_embedding(conn)
        composes = passages_version(embedder)
        stale = composes > vector_store.passages_version(conn)
        if stale:  # vectors of labelled memories written as a whole: re-embedded like the missing ones
            pending = pending + [(i, c) for i, c in vector_store.embedded_content(conn) if labelled_sentences(c)]
        if not pending:
            if stale:
                with self.ctx.store.transaction("embed") as tx:
                    vector_store.set_passages_version(tx, composes)
            wordvectors.keep_current(self.ctx, embedder)  # a store written before the word table
            return {"status": "complete", "message": "all insights already have embeddings"}

        self.ctx.vectors.vector_index()  # opened before the first batch, so each batch is applied as a delta
        succeeded = failed = 0
        total = len(pending)
        if progress is not None:
            progress(0, total)
        for start in range(0, total, EMBED_BATCH_ROWS):
            batch = pending[start : start + EMBED_BATCH_ROWS]
            try:
                done = self._embed_batch(embedder, batch)
            except EmbedderUnavailable:
                failed += total - start  # the server went away: stop, a rerun resumes here
                break
            succeeded += done
            failed += len(batch) - done
            if progress is not None:
                progress(start + len(batch), total)
        with self.ctx.store.transaction("embed") as tx:
            detail = f"succeeded={succeeded} failed={failed} model={embedder.model}"
            oplog.append(tx, "embed:backfill", "", detail, self.ctx.now_ts())
            if stale and not failed:  # a rerun after a failure re-embeds the labelled memories again
                vector_store.set_passages_version(tx, composes)
        self.ctx.after_write()
        wordvectors.keep_current(self.ctx, embedder)
        return {"status": "backfill_complete", "succeeded": succeeded, "failed": failed, "model": embedder.model}

    def _track(self, stored: list[tuple[str, NDArray[np.float64]]], *, fresh: bool = False) -> None:
        """Bring the vector index along with the batch just committed (a delta, not a rebuild)."""
        self.ctx.vectors.track(stored, fresh=fresh)
        self.ctx.after_write()

    def _any_content(self) -> str | None:
        return insights.any_active_content(self.ctx.store.conn)

    def _embed_batch(self, embedder: Embedder, batch: list[tuple[str, str]]) -> int:
        """Embed and store one batch in one transaction; return how many were stored."""
        vectors: list[NDArray[np.float64] | None]
        try:
            vectors = list(embedder.embed_batch([content for _, content in batch]))
        except EmbedderUnavailable:
            raise
        except EmbedderError:
            vectors = [self._embed_single(embedder, content) for _, content in batch]  # isolate the bad one
        stored: list[tuple[str, NDArray[np.float64]]] = []
        fresh = True  # every row still lacked a vector when written (another process may have embedded one)
        with self.ctx.store.transaction("embed") as conn:
            for (insight_id, _), vector in zip(batch, vectors):
                if vector is None or insights.get(conn, insight_id) is None:
                    continue
                fresh = fresh and not vector_store.has_embedding(conn, insight_id)
                if self.ctx.vectors.write_vector(conn, insight_id, vector, embedder):
                    stored.append((insight_id, vector))
            if stored:
                vector_store.bump_epoch(conn)
        self._track(stored, fresh=fresh)
        return len(stored)

    def _probe(self, embedder: Embedder, samples: list[str]) -> NDArray[np.float64]:
        """The first vector the provider returns for one of ``samples`` (else for a memory it embedded
        before), to learn its model's dimension. A memory the provider refuses (longer than the model's
        context, say) is passed over: probing with it alone failed every backfill while it stayed first in
        line; the batches count it as failed instead. The first refusal is raised when nothing embeds (the
        provider is broken, not one memory)."""
        embedded_before = insights.any_embedded_content(self.ctx.store.conn)
        refusal: EmbedderError | None = None
        for content in samples if embedded_before is None else [*samples, embedded_before]:
            try:
                return embedder.embed(content)
            except EmbedderUnavailable:
                raise
            except EmbedderError as exc:
                refusal = refusal or exc
        assert refusal is not None  # samples is never empty
        raise refusal

    @staticmethod
    def _embed_single(embedder: Embedder, content: str) -> NDArray[np.float64] | None:
        try:
            return embedder.embed(content)
        except EmbedderUnavailable:
            raise
        except EmbedderError:
            return None
