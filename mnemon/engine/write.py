"""The write pipeline: remember, link, forget (contract §3.3, §3.7, §3.8).

Order (§3.3): validate, then embed and run the advisory diff outside any transaction, then one
``BEGIN IMMEDIATE`` transaction for the exact-duplicate check, insert, blob, edges, lifecycle and
oplog, then the post-commit candidates. The exact-duplicate check sits inside the transaction so
that two agents writing the same content at once store it once.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING

from mnemon import diff as diffing
from mnemon import entities as entity_extraction
from mnemon import linking
from mnemon.engine import graph
from mnemon.engine import vectors as vector_engine
from mnemon.engine.core import EngineBase, format_ts
from mnemon.engine.scan import ActiveTokens
from mnemon.engine.upkeep import auto_prune, refresh_effective_importance
from mnemon.engine.read import neighbours
from mnemon.errors import InputError, NotFoundError
from mnemon.records import (
    CAUSAL_CANDIDATE_DEPTH,
    CAUSAL_CANDIDATE_MAX,
    DIFF_CANDIDATES,
    SEMANTIC_AUTO_TOP,
    SEMANTIC_CANDIDATE_TOP,
    SEMANTIC_FALLBACK_SIMILARITY,
    Edge,
    Insight,
)
from mnemon.store import edges, insights, oplog
from mnemon.text import jaccard, tokenize
from mnemon.validate import (
    check_category,
    check_content,
    check_edge_type,
    check_entities,
    check_entity_mode,
    check_importance,
    check_tags,
    check_text,
    check_weight,
    encodable,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.records import SimilarityScale


def new_id() -> str:
    return str(uuid.uuid4())


class WritePipeline:
    """remember / link / forget: validate, embed and diff outside the transaction, then one write transaction each."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def remember(
        self,
        content: str,
        *,
        category: str = "general",
        importance: int = 3,
        tags: list[str] | None = None,
        entities: list[str] | None = None,
        entity_mode: str = "merge",
        source: str = "user",
        no_diff: bool = False,
    ) -> dict[str, object]:
        """Store one insight and build its edges; return the §3.3 output object."""
        check_content(content)
        check_category(category)
        check_importance(importance)
        check_entity_mode(entity_mode)
        tags = check_tags(list(tags or []))
        provided = check_entities(list(entities or []))
        check_text(source, "source")
        self.ctx.require_writable("remember")

        now = self.ctx.now()
        stamp = format_ts(now)
        new = Insight(
            id=new_id(), content=content, category=category, importance=importance, tags=tags,
            entities=[], source=source, created_at=stamp, updated_at=stamp,
        )
        store = self.ctx.store
        vector = self.ctx.vectors.embed_for_write(content)
        # a vector composed from labelled sentences sits closer to its label's other memories: its
        # comparisons with them read the model's composed scale (records.SimilarityScale.for_vector)
        scale = self.ctx.similarity_scale().for_vector(vector_engine.composes(self.ctx.current_embedder, content))
        # stored either way, but an English-only model's cosines say nothing about a Chinese memory
        # (records.MINILM_SCALE): no semantic edge, diff or candidate reads them
        compared = vector if scale.reads(content) else None

        suggestion = "ADD"
        scan: ActiveTokens | None = None
        if not no_diff:
            scan = ActiveTokens(store.conn)
            suggestion = self._diff_suggestion(content, compared, scan, scale)

        if compared is not None:
            # the vector index made current for the committed state before the transaction (the diff above
            # opens it too): opened inside, it would stamp its header for this write's uncommitted row, and a
            # reader in that moment, not seeing the row, would rebuild it whole (slow on a large store)
            self.ctx.vectors.vector_index()
        with store.transaction("remember") as conn:
            if not no_diff:
                existing = insights.exact_duplicate(conn, content)
                if existing is not None:
                    oplog.append(conn, "diff-skip", new.id, f"duplicate of {existing}", stamp)
                    return {
                        "id": new.id, "content": content, "action": "skipped",
                        "diff_suggestion": "DUPLICATE", "replaced_id": existing,
                    }
            known = insights.known_among(conn, entity_extraction.entity_candidates(content))
            new.entities = entity_extraction.resolve_entities(provided, content, entity_mode, known)
            insights.insert(conn, new, stamp)
            if vector is not None and not self.ctx.vectors.store_vector(conn, new.id, vector):
                vector = None  # another process fixed a different vector space meanwhile
            counts = graph.EdgeCounts()
            graph.temporal_edges(conn, new, now, counts)
            graph.entity_edges(conn, new, now, counts)
            graph.causal_edges(conn, new, now, counts)
            semantic_matches: list[tuple[str, float]] = []
            if compared is not None:
                semantic_matches = self.ctx.vectors.cosine_neighbours(
                    compared, scale.auto_link, SEMANTIC_AUTO_TOP, exclude=new.id
                )
                graph.semantic_edges(conn, new, now, counts, semantic_matches)
            if new.entities:
                insights.set_entities(conn, new.id, new.entities)
            ei = refresh_effective_importance(conn, [new.id], now)[new.id]
            pruned = auto_prune(conn, self.ctx.settings, now, exclude=[new.id], trigger=new.id)
            oplog.append(conn, "remember", new.id, content, stamp)
        self.ctx.after_write()

        try:
            semantic = self._semantic_candidates(new, compared, scan, scale)
            causal = self._causal_candidates(new)
        except Exception as e:  # noqa: BLE001 - stored already: advice that fails must not say the write failed
            # the candidates read the indexes beside the database; one that cannot catch up (a full disk, see
            # EngineBase.after_write) leaves the advice empty, said on stderr, and the memory reported as added
            self.ctx.notice(f"mnemon: the memory is stored; its link candidates could not be read "
                            f"({type(e).__name__}: {e})")
            semantic, causal = [], []
        return {
            "id": new.id, "content": content, "category": category, "importance": importance,
            "tags": tags, "entities": new.entities, "action": "added", "diff_suggestion": suggestion,
            "created_at": stamp, "edges_created": counts.to_json(),
            "semantic_candidates": semantic, "causal_candidates": causal,
            "embedded": vector is not None, "effective_importance": ei,
            "auto_pruned": len(pruned), "auto_pruned_ids": pruned,
        }

    # --- diff and candidates ------------------------------------------------------------------

    def _diff_suggestion(
        self, content: str, vector: NDArray[np.float64] | None, scan: ActiveTokens, scale: SimilarityScale
    ) -> str:
        """Advisory classification against the closest active insights (§4.9), in the new memory's ``scale``."""
        new_tokens = tokenize(content)
        top = scan.keyword(new_tokens, DIFF_CANDIDATES)
        cosines: dict[str, float] = {}
        extra: list[diffing.DiffCandidate] = []
        if vector is not None:
            # Only the cosine extras need their rows' tokens: load just those few by id (the
            # whole store's rows cost ~0.8 s of re-tokenising at 10k insights).
            cosines = self.ctx.vectors.vector_cosines(vector, [hit.row.id for hit in top])
            present = {hit.row.id for hit in top}
            for other_id, cos in self.ctx.vectors.cosine_neighbours(vector, scale.diff_extra, DIFF_CANDIDATES + len(present)):
                if other_id in present or len(extra) >= DIFF_CANDIDATES:
                    continue
                row = scan.active_row(other_id)
                if row is None:
                    continue
                extra.append(diffing.DiffCandidate(row.id, row.content, jaccard(new_tokens, set(row.tokens)), cos))
        candidates = [
            diffing.DiffCandidate(
                hit.row.id, hit.row.content, jaccard(new_tokens, tokenize(hit.row.content)), cosines.get(hit.row.id)
            )
            for hit in top
        ]
        suggestion, _ = diffing.suggest(content, candidates, extra, scale)
        return suggestion

    def _semantic_candidates(
        self, new: Insight, vector: NDArray[np.float64] | None, scan: ActiveTokens | None, scale: SimilarityScale
    ) -> list[dict[str, object]]:
        """cosine ≥ 0.40 top 5 (the new memory's ``scale``); without vectors, ContentSimilarity ≥ 0.10 top 5 (§4.7)."""
        out: list[dict[str, object]] = []
        if vector is not None:
            for other_id, cos in self.ctx.vectors.cosine_neighbours(vector, scale.candidate, SEMANTIC_CANDIDATE_TOP, exclude=new.id):
                other = insights.get(self.ctx.store.conn, other_id)
                if other is None:
                    continue
                out.append({
                    "id": other.id, "content": other.content, "category": other.category,
                    "cosine": cos, "auto_linked": cos >= scale.auto_link,
                })
        if out:
            return out
        if scan is None:
            scan = ActiveTokens(self.ctx.store.conn)
        for hit in scan.similar(tokenize(new.content), SEMANTIC_FALLBACK_SIMILARITY, SEMANTIC_CANDIDATE_TOP, new.id):
            out.append({
                "id": hit.row.id, "content": hit.row.content, "category": hit.row.category,
                "cosine": hit.score, "auto_linked": False,
            })
        return out

    def _causal_candidates(self, new: Insight) -> list[dict[str, object]]:
        """Neighbours within 2 hops of the new insight, with their causal signal (§4.6)."""
        from mnemon.related import bfs

        conn = self.ctx.store.conn
        found = bfs(new.id, partial(neighbours, self.ctx.store.conn), CAUSAL_CANDIDATE_DEPTH, CAUSAL_CANDIDATE_MAX)
        out: list[dict[str, object]] = []
        for hit in found:
            other = insights.get(conn, hit.id)
            if other is None:
                continue
            signal = linking.causal_signal(other.content) or linking.causal_signal(new.content)
            out.append({
                "id": other.id, "content": other.content, "category": other.category, "hop": hit.depth,
                "via_edge": hit.via, "causal_signal": signal,
                "suggested_sub_type": linking.causal_sub_type(new.content, other.content),
            })
        return out

    # --- link / forget ------------------------------------------------------------------------

    def link(
        self, source_id: str, target_id: str, *, edge_type: str = "semantic", weight: float = 0.5, meta: str | None = None
    ) -> dict[str, object]:
        """Create (or replace) a user edge; both directions except ``supersedes`` (§3.8)."""
        import json

        check_edge_type(edge_type)
        check_weight(weight)
        check_text(source_id, "source id")
        check_text(target_id, "target id")
        metadata: dict[str, str] = {}
        if meta:
            try:
                parsed = json.loads(meta)
            except ValueError as exc:
                raise InputError(f"invalid metadata JSON: {exc}") from None
            if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
                raise InputError("invalid metadata JSON: must be an object of string values")
            # A \ud800 escape decodes to a lone surrogate, which no UTF-8 column can hold: refused here, before
            # the transaction, in the draft checks' words (drafts._weight_and_metadata). NUL stays allowed in a
            # key or value: the stored JSON escapes it (drafts._label).
            for key, value in parsed.items():
                if not (encodable(key) and encodable(value)):
                    raise InputError(f"invalid metadata JSON: metadata[{json.dumps(key)}] is not valid UTF-8")
            metadata = dict(parsed)
        metadata["created_by"] = "claude"
        if edge_type == "supersedes" and source_id == target_id:
            raise InputError("supersedes requires distinct insights")
        self.ctx.require_writable("link")
        stamp = self.ctx.now_ts()
        with self.ctx.store.transaction("link") as conn:
            if insights.get(conn, source_id) is None:
                raise NotFoundError(f"source insight {source_id} not found")
            if insights.get(conn, target_id) is None:
                raise NotFoundError(f"target insight {target_id} not found")
            edges.upsert(conn, Edge(source_id, target_id, edge_type, weight, metadata, stamp))
            if edge_type != "supersedes":
                edges.upsert(conn, Edge(target_id, source_id, edge_type, weight, dict(metadata), stamp))
            oplog.append(
                conn, "link", source_id, f"{source_id[:8]}→{target_id[:8]} type={edge_type} weight={weight:.2f}", stamp
            )
        self.ctx.after_write()
        return {
            "status": "linked", "source_id": source_id, "target_id": target_id, "edge_type": edge_type,
            "weight": weight, "metadata": dict(sorted(metadata.items())),
        }

    def forget(self, insight_id: str) -> dict[str, object]:
        """Soft-delete an insight and delete every edge touching it (§3.7)."""
        check_text(insight_id, "id")
        self.ctx.require_writable("forget")
        stamp = self.ctx.now_ts()
        with self.ctx.store.transaction("forget") as conn:
            if not insights.soft_delete(conn, insight_id, stamp):
                raise NotFoundError(f"forget: insight {insight_id} not found or already deleted")
            edges.delete_touching(conn, insight_id)
            oplog.append(conn, "forget", insight_id, "", stamp)
        self.ctx.after_write()
        return {"id": insight_id, "message": "Insight soft-deleted successfully", "status": "deleted"}
