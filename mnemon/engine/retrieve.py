"""Retrieval: smart and basic ``recall`` and ``search`` (contract §3.4, §3.5, §4.10, §4.2).

Owns the I/O order of the read path: open the hot index (caught up if stale), probe and embed
the query once when the store holds vectors, score BM25 / token overlap / entities over the
index arrays, run the pure pipeline of ``mnemon.recall``, load only the returned insights from
SQLite, then one short write transaction for the access bumps and the oplog row. Under
``--readonly`` nothing is written (the hot index lives in memory only).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mnemon import entities as entity_extraction
from mnemon import feedback, frequency
from mnemon.engine.core import EngineBase
from mnemon.intent import detect_intent, parse_intent
from mnemon.query_dates import query_days, query_months
from mnemon.records import (
    BACKBONE_MIN_SAMPLE,
    BACKBONE_SAMPLE,
    BM25_B,
    BM25_K1,
    CATEGORIES,
    LONG_QUERY_FULL,
    LONG_QUERY_IDF_POWER,
    LONG_QUERY_SWITCH,
    LONG_QUERY_TERMS,
    QUERY_DAY_BOOST,
    QUERY_DERIVED_WEIGHT,
    QUERY_IRREGULAR_WEIGHT,
    QUERY_MONTH_BOOST,
    QUERY_SPECIFICITY_POWER_TOKENS,
    SUBJECT_NAME_MIN_SHARE,
    TERM_NEIGHBOUR_MAX_SHARE,
    TERM_NEIGHBOUR_WEIGHT,
    TERM_NEIGHBOURS,
    THESAURUS_FLOOR,
    THESAURUS_WEIGHT,
    Insight,
    Intent,
)
from mnemon.store import hotindex, insights, oplog
from mnemon.text import (
    POSSESSIVE_TERM,
    derived_query_terms,
    irregular_query_terms,
    possessor_query_terms,
    query_length,
    query_name_terms,
    recall_query_terms,
    stem,
    tokenize,
    vocabulary_words,
    written_in_han,
)
from mnemon.validate import check_limit

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from mnemon.engine.hot import HotIndex
    from mnemon.engine.vectors import SimilarityBounds
    from mnemon.recall import Hit


def long_query_share(known_terms: list[str], switch: bool = False) -> float:
    """How far a query is a whole dialogue turn or prompt rather than a question, from 0 to 1, by
    its length in the terms the index knows (text.query_length): 0 at records.LONG_QUERY_TERMS and
    below, 1 at LONG_QUERY_FULL and above, linear between (a switch when they are equal). ``switch``:
    0 or 1 at records.LONG_QUERY_SWITCH, for a query with a model whose scale reads long queries
    (records.SimilarityScale.long_below_best): the ramp lowered its probe view."""
    length = query_length(known_terms)
    if switch:
        return 1.0 if length > LONG_QUERY_SWITCH else 0.0
    if length <= LONG_QUERY_TERMS:
        return 0.0
    if length >= LONG_QUERY_FULL:
        return 1.0
    return (length - LONG_QUERY_TERMS) / (LONG_QUERY_FULL - LONG_QUERY_TERMS)


class _HotIds:
    """The hot index's row ids as the vector alignment reads them (a length, and gathers by row),
    without joining the base's and the delta's id arrays (36 MB copied at 1M rows)."""

    def __init__(self, index: HotIndex) -> None:
        self._index = index

    def __len__(self) -> int:
        return self._index.n

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        return self._index.row_values("id_blob", rows)


@dataclass(frozen=True, slots=True)
class RecallHit:
    insight: Insight  # values before the access bump
    score: float
    via: str
    signals: dict[str, float]
    superseded: bool
    relevance: float = 0.0  # absolute: is the memory about the query at all (mnemon.relevance)


@dataclass(frozen=True, slots=True)
class RecallResult:
    hits: list[RecallHit]
    intent: Intent
    intent_source: str
    anchor_count: int
    traversed: int
    hint: str | None


@dataclass(frozen=True, slots=True)
class SearchHit:
    insight: Insight
    score: float


class RetrievePipeline:
    """recall (smart and basic) / search over the hot index and the vector index, and their access bump."""

    def __init__(self, ctx: EngineBase) -> None:
        self.ctx = ctx

    def _scope(self, index: HotIndex, category: str, source: str) -> np.ndarray:
        import numpy as np

        scope = np.array(index.active, dtype=np.bool_)
        if category:
            code = CATEGORIES.index(category) if category in CATEGORIES else -2
            scope &= index.category == code
        if source:
            code = index.sources.index(source) if source in index.sources else -2
            scope &= index.source == code
        return scope

    # --- vectors ----------------------------------------------------------------------------------

    def query_similarity(self, index: HotIndex, query: str) -> tuple[np.ndarray | None, SimilarityBounds | None]:
        """Cosine of every index row with the query embedding; None without vectors or server.

        On a large coded vector index the cosines are the int8 first pass's, with their bounds
        (``engine.vectors.SimilarityBounds``): the pipeline makes exact every row it ranks by.
        """
        import numpy as np

        from mnemon.store import vectors as vector_store

        conn = self.ctx.store.conn
        # Vectors exist if a row carried one when indexed, or our writers recorded a dimension
        # (embedding an existing row records it too): no scan of every row per query.
        if not index.any_vector and vector_store.vector_meta(conn).dim is None:
            return None, None
        embedded = self.ctx.embed_text(query, query=True)  # one request: it doubles as the availability probe
        if embedded is None:
            return None, None
        qvec = np.asarray(embedded, dtype=np.float64)
        hot_base = (index.build_id, index.base_n)  # what a certified hot-row hint names (engine.vectors)
        vectors = self.ctx.vectors
        # a large coded vector index: the int8 pass, made exact on demand by the pipeline; _HotIds
        # gathers the hot ids lazily (length and row indexing: all the bounded path asks of them)
        ids = _HotIds(index)
        bounded = vectors.vector_similarity_bounded(qvec, ids, index.rows_of, hot_base=hot_base)  # type: ignore[arg-type]
        if bounded is not None:
            return bounded
        # otherwise one exact scan, its rows aligned with the hot index's by id
        return vectors.vector_scores_aligned(qvec, index.id_blob[: index.n], index.rows_of, hot_base=hot_base), None

    # --- recall ------------------------------------------------------------------------------------

    def recall(
        self, query: str, *, limit: int = 10, category: str = "", source: str = "", intent: str | None = None
    ) -> RecallResult:
        """Smart recall (§4.10): intent, anchors, beam, rerank, expansion, ordering."""
        import numpy as np

        from mnemon import recall as pipeline

        check_limit(limit)
        if intent:  # an empty --intent means "not given", as Go's flag default
            chosen, source_of_intent = parse_intent(intent), "override"
        else:
            chosen, source_of_intent = detect_intent(query), "auto"
        index = self.ctx.hot_index()
        scope = self._scope(index, category, source)
        use_numba = pipeline.use_numba(index.n)
        # a model calibrated apart for a query written in Han characters reads it so (records.SimilarityScale.han)
        scale = self.ctx.similarity_scale().for_query(query)
        # an English-only model's similarity says less than nothing about a Chinese query (records.MINILM_SCALE)
        similarity, bounds = self.query_similarity(index, query) if scope.any() and scale.reads(query) else (None, None)
        if similarity is not None:
            similarity = np.where(scope, similarity, 0.0)
            if bounds is not None:
                bounds.restrict(scope)
        overlap, n_query_entities = self._entity_overlap(index, query)
        (csr_ptr, csr_nbr, csr_weight, csr_type, csr_out), delta = index.edge_arrays()
        mean_len = float(index.doc_len[scope].mean()) if scope.any() else 0.0  # BM25's avgdl, once
        # e5 (a scale with long_below_best) keeps the long-query switch it was measured with
        switch = similarity is not None and scale.long_below_best > 0.0
        # without similarity the keyword list alone carries the query: its terms' specificity weighs more there
        specificity = QUERY_SPECIFICITY_POWER_TOKENS if similarity is None else scale.specificity
        bm25, long_query = self._keyword(index, query, scope, use_numba, mean_len, switch,
                                         with_feedback=similarity is None, specificity=specificity)
        if long_query == 0.0:
            # the model's word vectors where it has measured ones, else the bundled thesaurus (no similarity, or
            # a model whose scale asks for it: SimilarityScale.thesaurus)
            neighbours = None
            if similarity is not None and scale.term_floor > 0.0:
                neighbours = self._neighbour_terms(index, query, scope, use_numba, mean_len, scale.term_floor)
            elif similarity is None or scale.thesaurus:
                neighbours = self._thesaurus_terms(index, query, scope, use_numba, mean_len)
            if neighbours is not None:
                bm25 = bm25 + neighbours
        arrays = pipeline.RecallArrays(
            scope=scope, bm25=bm25, similarity=similarity, long_query=long_query,
            entity_overlap=np.where(scope, overlap, 0), query_entity_count=n_query_entities,
            importance=np.asarray(index.importance), created_rank=index.derived("created_rank"),
            id_rank=index.derived("id_rank"), csr_ptr=csr_ptr, csr_nbr=csr_nbr, csr_weight=csr_weight,
            csr_type=csr_type, csr_out=csr_out, superseded=index.derived("superseded"),
            prev=index.derived("prev"), next=index.derived("next"),
            edge_delta=None if delta is None else pipeline.EdgeDelta(*delta), similarity_bounds=bounds,
            similarity_scale=scale, doc_len=index.doc_len, mean_doc_len=mean_len,
            created_day=lambda rows: index.row_values("created", rows).astype("S10"),
            subject=self._subject(index, query, scope),
            backbone_share=backbone_share(index, scope, category, source),
        )  # fmt: skip
        outcome = pipeline.run(arrays, chosen, limit, use_numba=use_numba)
        # issue 28: each hit's absolute relevance, beside the relative score (hooks filter on it)
        judged = self._relevance(index, query, scope, similarity, outcome.hits, mean_len)
        hits = []
        for hit, relevance in zip(outcome.hits, judged, strict=True):
            found = insights.get(self.ctx.store.conn, index.id_at(hit.row))
            if found is None:
                continue  # deleted after the snapshot: never return a forgotten insight
            signals = {"keyword": hit.keyword, "entity": hit.entity, "similarity": hit.similarity, "graph": hit.graph}
            hits.append(RecallHit(found, hit.score, hit.via, signals, hit.superseded, relevance))
        self.record_hits([h.insight.id for h in hits], "recall", f"q={query} hits={len(hits)}")
        hint = "sparse_results" if not hits or len(hits) < limit // 2 else None
        return RecallResult(hits, chosen, source_of_intent, outcome.anchor_count, outcome.traversed, hint)

    def _subject(self, index: HotIndex, query: str, scope: np.ndarray) -> np.ndarray | None:
        """The rows in scope whose first term is a proper name the query writes (text.query_name_terms)
        that at least records.SUBJECT_NAME_MIN_SHARE of the memories in scope carry; None if it names
        none. Read from the name terms' posting lists: a rare name is BM25's to weigh, a frequent one (a
        person the store is about) is the subject that recall's agreement factor asks a memory to share.
        A memory is about the person it names first (an English sentence's subject leads it; a dialogue
        turn is "<speaker>: ..."), so one that names them later ("Melanie supports Caroline's drive")
        does not share a query's subject Caroline. The first term is the first entry of the row's
        forward term list (the index lists a row's terms in the order they first occur)."""
        import numpy as np

        qids = index.term_ids(query_name_terms(query))
        n_docs = int(scope.sum())
        if not qids or n_docs == 0:
            return None
        frequent, carriers = [], []
        for qid in qids:
            post, _ = index.query_postings([qid], plain=False)
            rows = np.asarray(post.rows[: int(post.ptr[1])])
            rows = rows[scope[rows]]
            if rows.shape[0] >= SUBJECT_NAME_MIN_SHARE * n_docs:
                frequent.append(qid)
                carriers.append(rows)
        if not frequent:
            return None
        rows = np.unique(np.concatenate(carriers))
        first = index.row_values("r_term", np.asarray(index.r_ptr[rows]))
        subject = np.zeros(index.n, dtype=np.bool_)
        subject[rows[np.isin(first, frequent)]] = True
        return subject

    def _relevance(self, index: HotIndex, query: str, scope: np.ndarray, similarity: np.ndarray | None,
                   hits: list[Hit], mean_len: float) -> list[float]:
        """The absolute relevance of each hit row (``mnemon.relevance``): the share of the query's
        term weight the row carries, and its cosine against the query's background in the scope;
        ``mean_len``: the rows' mean length in scope."""
        import numpy as np

        from mnemon import relevance

        if not hits:
            return []
        rows, scores = [h.row for h in hits], [h.score for h in hits]
        n_docs = int(scope.sum())
        terms = relevance.informative(t for t in dict.fromkeys(recall_query_terms(query)) if t != POSSESSIVE_TERM)
        hit_rows = np.asarray(rows, dtype=np.int32)
        # which rows are hits, to read each posting list once (np.isin against a whole list of a
        # common term hashes it: 3 ms a term at 1M rows)
        is_hit = np.zeros(scope.shape[0], dtype=np.bool_)
        is_hit[hit_rows] = True
        weights: list[float] = []
        carried = np.zeros((len(terms), hit_rows.shape[0]), dtype=np.bool_)
        for k, term in enumerate(terms):
            qids = index.term_ids([term])
            if not qids:
                weights.append(relevance.term_weight(term, 0, n_docs))
                continue
            post, _ = index.query_postings(qids, plain=False)
            posted = post.rows[: int(post.ptr[1])]
            weights.append(relevance.term_weight(term, int(np.count_nonzero(scope[posted])), n_docs))
            carried[k] = np.isin(hit_rows, posted[is_hit[posted]])
        weights = relevance.specific_weights(terms, weights, mean_len)
        background = None
        if similarity is not None:
            background = relevance.background(similarity[relevance.sample_rows(np.flatnonzero(scope))])
        cosines = [None] * len(rows) if similarity is None else similarity[hit_rows].tolist()
        evidence = [
            relevance.Evidence(tuple(weights), tuple(carried[:, j].tolist()), cosines[j], background)
            for j in range(len(rows))
        ]  # fmt: skip
        return relevance.judge(evidence, scores)

    def recall_basic(self, query: str, *, limit: int = 10, category: str = "", source: str = "") -> list[Insight]:
        """``recall --basic``: substring match, importance then recency (§3.4)."""
        check_limit(limit)
        found = insights.basic_search(self.ctx.store.conn, query, category, source, limit)
        self.record_hits([i.id for i in found], "recall:basic", f"q={query} hits={len(found)}")
        return found

    def _bm25(self, index: HotIndex, query: str, scope: np.ndarray, use_numba: bool,
              mean_len: float | None = None) -> np.ndarray:
        """The query's BM25 over every row (:meth:`_keyword`'s scores)."""
        return self._keyword(index, query, scope, use_numba, mean_len)[0]

    def _keyword(self, index: HotIndex, query: str, scope: np.ndarray, use_numba: bool,
                 mean_len: float | None = None, switch: bool = False,
                 with_feedback: bool = False, specificity: float = 0.0) -> tuple[np.ndarray, float]:
        """Decision 12: BM25 over stemmed terms, N = active insights in scope, df within scope;
        plus the roots of the query's derived nouns at QUERY_DERIVED_WEIGHT (text.derived_query_terms)
        and its irregular verbs' other forms at QUERY_IRREGULAR_WEIGHT (text.irregular_query_terms).
        A possessive's "s" counts only where the word it is attached to matches (text.POSSESSIVE_TERM).
        A day or month the query names (query_dates) multiplies the scores of the memories written then.
        ``mean_len``: the rows' mean length in scope when the caller has it (BM25's avgdl).
        ``with_feedback``: a query written in Han characters adds its best rows' terms (:meth:`_feedback`);
        recall asks for it when the query has no similarity (no model, or one that cannot read it).
        ``specificity``: the power of the query's own terms' weights by their specificity in English
        (frequency.query_term_weights; records.QUERY_SPECIFICITY_POWER_*); 0 weighs them alike.
        Returns the scores and how long the query is (:func:`long_query_share`, ``switch``)."""
        import numpy as np

        n_docs = int(scope.sum())
        terms = list(dict.fromkeys(recall_query_terms(query)))
        owners = possessor_query_terms(query) if POSSESSIVE_TERM in terms else []
        if owners:
            terms.remove(POSSESSIVE_TERM)
        known = [(term, got) for term in terms for got in index.term_ids([term])]
        qids = [got for _, got in known]
        long = long_query_share([term for term, _ in known], switch)
        if n_docs == 0:
            return np.zeros(index.n, dtype=np.float64), long
        # the collection statistics once for every pass: each is O(rows); a long query's rare terms
        # dominate its common ones (records.LONG_QUERY_IDF_POWER), in every pass below
        avgdl = float(index.doc_len[scope].mean()) if mean_len is None else mean_len
        power = 1.0 + (LONG_QUERY_IDF_POWER - 1.0) * long
        stats = (n_docs, avgdl, np.asarray(index.doc_len, dtype=np.float64), power)
        fed = with_feedback and long > 0.0 and bool(qids) and written_in_han(query)
        # the feedback reads its rows from the scores at idf power 1: the same pass writes them
        plain = np.empty(index.n, dtype=np.float64) if fed else None
        # the query's own terms weighed by how specific each is in English (mnemon.frequency)
        stems = [term for term, _ in known] if specificity else None
        scores = self._bm25_terms(index, qids, scope, stats, use_numba, plain, stems, specificity)
        if plain is not None:
            scores = self._feedback(index, qids, scores, plain, scope, stats, use_numba, long)
        possessive = index.term_ids([POSSESSIVE_TERM]) if owners else []
        if possessive:
            # "Melanie's plans" asks for plans of Melanie's: the "s" of "Caroline's plans" is no
            # match. Dev set (bench/README.md, sixth round): facts/none adversarial 63.4 -> 64.8
            # and single-hop 59.2 -> 60.1, no category of the four views lower.
            owned = self._bm25_terms(index, index.term_ids(owners), scope, stats, use_numba) > 0
            scores = scores + np.where(owned, self._bm25_terms(index, possessive, scope, stats, use_numba), 0.0)
        derived = [t for t in index.term_ids(derived_query_terms(query)) if t not in qids]
        if derived:
            scores = scores + QUERY_DERIVED_WEIGHT * self._bm25_terms(index, derived, scope, stats, use_numba)
        irregular = [t for t in index.term_ids(irregular_query_terms(query)) if t not in qids and t not in derived]
        if irregular:
            scores = scores + QUERY_IRREGULAR_WEIGHT * self._bm25_terms(index, irregular, scope, stats, use_numba)
        days, months = query_days(query), query_months(query)
        if days or months:
            # "on 1 February, 2023" / "in October 2023": the memories written then (the date of
            # created_at, UTC as the store writes it) match more.
            written = created_days(index.created)
            if days:
                boost = np.where(np.isin(written, [day.encode() for day in days]), QUERY_DAY_BOOST, 0.0)
            else:  # query_months names none when the query names a day
                boost = np.where(np.isin(written.astype("S7"), [m.encode() for m in months]), QUERY_MONTH_BOOST, 0.0)
            scores = scores * (1.0 + boost)
        return scores, long

    def _feedback(self, index: HotIndex, qids: list[int], scores: np.ndarray, first: np.ndarray, scope: np.ndarray,
                  stats: tuple[int, float, np.ndarray, float], use_numba: bool, long: float) -> np.ndarray:
        """The query's BM25 ``scores`` with pseudo-relevance feedback (``mnemon.feedback``): the rows
        plain BM25 (idf power 1, whatever the query's length: ``first``) ranks first lend their terms, scored at the
        query's own idf power and added at feedback.FEEDBACK_WEIGHT times ``long``, the query's long share
        (a question asks in few words, a dialogue turn paraphrases in many). A Chinese dialogue turn
        paraphrasing an event memory: check set A 66.6 -> 68.4 at R@10 (bench/quality-ablations.md, tenth
        session)."""
        import kernels
        import numpy as np

        n_docs, avgdl, doc_len, power = stats
        rows = feedback.feedback_rows(first)
        if rows.shape[0] == 0:
            return scores
        r_ptr = index.r_ptr
        row_terms = [
            np.asarray(index.row_values("r_term", np.arange(int(r_ptr[r]), int(r_ptr[r + 1]))), dtype=np.int64)
            for r in rows.tolist()
        ]  # fmt: skip
        candidates = sorted(set(np.concatenate(row_terms).tolist()) - set(qids))
        if not candidates:
            return scores
        post, local = index.query_postings(candidates, plain=False)
        assert post.tf is not None  # plain=False: the postings carry their term frequencies
        df = dict(zip(candidates, df_in_scope(post.ptr, post.rows, scope, n_docs).tolist(), strict=True))
        chosen = feedback.expansion_terms(first[rows].tolist(), row_terms, df, n_docs, set(qids))
        if not chosen:
            return scores
        at = dict(zip(candidates, local, strict=True))
        score = kernels.bm25_scores if use_numba else kernels.bm25_scores_numpy
        # one pass for every added term, each at its own weight (not one row-sized pass per term)
        expansion = score(
            post.ptr, post.rows, post.tf, doc_len, np.array([at[term] for term, _ in chosen], dtype=np.int32),
            n_docs, avgdl, BM25_K1, BM25_B, scope, power, np.array([weight for _, weight in chosen]),
        )  # fmt: skip
        return feedback.with_expansion(scores, expansion, long)

    def _bm25_terms(self, index: HotIndex, qids: list[int], scope: np.ndarray,
                    stats: tuple[int, float, np.ndarray, float], use_numba: bool,
                    plain: np.ndarray | None = None, stems: list[str] | None = None,
                    specificity: float = 0.0) -> np.ndarray:
        """BM25 of the term ids ``qids`` over the rows in ``scope`` (zeros without terms); ``stats``
        is (rows in scope, their mean length, every row's length as float64, the idf power); ``plain``,
        when given, is overwritten with the scores at idf power 1 in the same pass. ``stems``, the terms
        of ``qids``, weighs each by its specificity in English to the power ``specificity``
        (frequency.query_term_weights)."""
        import kernels
        import numpy as np

        if not qids:
            if plain is not None:
                plain[:] = 0.0
            return np.zeros(index.n, dtype=np.float64)
        n_docs, avgdl, doc_len, power = stats
        post, local = index.query_postings(qids, plain=False)  # base lists + delta entries, qids only
        assert post.tf is not None  # plain=False: the postings carry their term frequencies
        weights = None
        if stems is not None and specificity and len(qids) > 1:
            present = (df_in_scope(post.ptr, post.rows, scope, n_docs) > 0).tolist()
            weights = np.array(frequency.query_term_weights(stems, present, avgdl, specificity))
        score = kernels.bm25_scores if use_numba else kernels.bm25_scores_numpy
        return score(
            post.ptr, post.rows, post.tf, doc_len, np.array(local, dtype=np.int32),
            n_docs, avgdl, BM25_K1, BM25_B, scope, power, weights, plain,
        )  # fmt: skip

    def _neighbour_terms(self, index: HotIndex, query: str, scope: np.ndarray, use_numba: bool, mean_len: float,
                         floor: float) -> np.ndarray | None:
        """The BM25 of the store's words the query's words name otherwise (records.TERM_NEIGHBOURS), each at
        its weight, over every row; None when there is none (or no whole word table, or the model fails)."""
        import numpy as np

        from mnemon.engine import wordvectors
        from mnemon.errors import EmbedderError

        embedder = self.ctx.embedder()
        names = set(query_name_terms(query))
        stemmed = [(w, stem(w)) for w in vocabulary_words(query)]
        words = [w for w, s in stemmed if s not in names]
        if embedder is None or not words:
            return None
        table = wordvectors.catch_up(self.ctx, embedder)
        if table is None or not table.words:
            return None
        # a query word the store has written has its vector in the table (the word alone, as asked here): only
        # the others are embedded, most often none (a second model call was 5-9 ms of a recall)
        rows = table.rows_of(words)
        missing = [w for w, row in zip(words, rows, strict=True) if row is None]
        try:
            fresh = iter(wordvectors.embed_words(embedder, missing)) if missing else iter(())
        except EmbedderError:
            return None
        asked = np.stack([table.vectors[row] if row is not None else next(fresh) for row in rows])
        cosines = asked @ np.asarray(table.vectors).T
        n_docs = int(scope.sum())
        share = TERM_NEIGHBOUR_MAX_SHARE * n_docs
        term_id: dict[str, int] = {}

        # asked term by term, only as far as the choice reads down each word's neighbours: a store's words above
        # the floor can number thousands
        def usable(term: str) -> bool:  # carried by some memory in scope, and by few
            ids = index.term_ids([term])
            if not ids:
                return False
            post, _ = index.query_postings(ids, plain=False)
            df = int(df_in_scope(post.ptr, post.rows, scope, n_docs)[0])
            term_id[term] = ids[0]
            return 0 < df <= share

        query_stems = [s for _, s in stemmed if s not in names]
        return self._neighbour_bm25(index, query, names, query_stems, cosines, table.stems, usable, term_id, scope,
                                    n_docs, use_numba, mean_len, floor, TERM_NEIGHBOUR_WEIGHT)

    def _thesaurus_terms(self, index: HotIndex, query: str, scope: np.ndarray, use_numba: bool,
                         mean_len: float) -> np.ndarray | None:
        """As _neighbour_terms without a model: the query's words' neighbours from the bundled thesaurus
        (records.THESAURUS_WEIGHT); None when there is none."""
        import numpy as np

        from mnemon import thesaurus

        names = set(query_name_terms(query))
        stems = [s for s in dict.fromkeys(stem(w) for w in vocabulary_words(query)) if s not in names]
        found = [thesaurus.neighbours(s) for s in stems]
        columns = sorted({other for near in found for other, _ in near})
        if not columns:
            return None
        column = {other: j for j, other in enumerate(columns)}
        cosines = np.zeros((len(stems), len(columns)), dtype=np.float64)
        for i, near in enumerate(found):
            for other, cos in near:
                cosines[i, column[other]] = cos
        # a few hundred candidates at most (THESAURUS_PER_STEM a word): their document frequencies in one read
        term_id: dict[str, int] = {}
        for other in columns:
            ids = index.term_ids([other])
            if ids:
                term_id[other] = ids[0]
        known = list(term_id)
        usable_terms: set[str] = set()
        n_docs = int(scope.sum())
        if known:
            post, _ = index.query_postings([term_id[t] for t in known], plain=False)
            df = df_in_scope(post.ptr, post.rows, scope, n_docs)
            usable_terms = {t for t, d in zip(known, df.tolist()) if 0 < d <= TERM_NEIGHBOUR_MAX_SHARE * n_docs}
        return self._neighbour_bm25(index, query, names, stems, cosines, columns, usable_terms.__contains__, term_id,
                                    scope, n_docs, use_numba, mean_len, THESAURUS_FLOOR, THESAURUS_WEIGHT)

    def _neighbour_bm25(self, index: HotIndex, query: str, names: set[str], query_stems: list[str],
                        cosines: np.ndarray, columns: list[str], usable: Callable[[str], bool],
                        term_id: dict[str, int], scope: np.ndarray, n_docs: int, use_numba: bool, mean_len: float,
                        floor: float, weight: float) -> np.ndarray | None:
        """The BM25 of the neighbour terms neighbours.choose takes from ``cosines`` (a row a query stem, a
        column a stem of ``columns``; ``usable`` says which the store can use, ``term_id`` has the id of every
        term it accepted; ``names``, the query's, and its own terms are never one), each at its weight, over
        every row of ``scope`` (``n_docs`` of them); None when it takes none."""
        import kernels
        import numpy as np

        from mnemon import neighbours

        chosen = neighbours.choose(
            query_stems, cosines, columns, floor=floor, per_word=TERM_NEIGHBOURS, weight=weight,
            skip=set(recall_query_terms(query)) | names, usable=usable,
        )  # fmt: skip
        if not chosen:
            return None
        terms = sorted(chosen)
        qids = [term_id[t] for t in terms]  # every chosen term passed usable()
        post, local = index.query_postings(qids, plain=False)
        assert post.tf is not None  # plain=False: the postings carry their term frequencies
        score = kernels.bm25_scores if use_numba else kernels.bm25_scores_numpy
        result: np.ndarray = score(
            post.ptr, post.rows, post.tf, np.asarray(index.doc_len, dtype=np.float64),
            np.array(local, dtype=np.int32), n_docs, mean_len, BM25_K1, BM25_B, scope,
            1.0, np.array([chosen[t] for t in terms]),
        )  # fmt: skip
        return result

    def _entity_overlap(self, index: HotIndex, query: str) -> tuple[np.ndarray, int]:
        """Distinct query entities (index-aware, case-insensitive) each row carries."""
        import numpy as np

        known = index.known_entities()
        extracted = entity_extraction.resolve_entities([], query, "auto", known)
        wanted = list(dict.fromkeys(e.lower() for e in extracted if e))
        overlap = np.zeros(index.n, dtype=np.int32)
        if not wanted or int(index.e_ptr[-1]) == 0:  # e_ptr: no join of the entity entries
            return overlap, len(wanted)
        slot = {e: i for i, e in enumerate(wanted)}
        ids_of_slot: dict[int, list[int]] = {}
        for ent_id, e in enumerate(index.entities):
            k = slot.get(e.lower())
            if k is not None:
                ids_of_slot.setdefault(k, []).append(ent_id)
        # per query entity, each row carrying any spelling of it counts once (entity posting lists)
        for ent_ids in ids_of_slot.values():
            rows = index.entity_postings(ent_ids)
            overlap[np.unique(np.concatenate(rows))] += 1
        return overlap, len(wanted)

    # --- search ------------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10) -> list[SearchHit]:
        """Keyword search (§3.5, §4.2): |Q∩T|/|Q| over every active insight, ties by importance,
        created_at desc, id asc."""
        from mnemon.engine.scan import ActiveTokens

        check_limit(limit)
        hits = []
        for scored in ActiveTokens(self.ctx.store.conn).keyword(tokenize(query), limit):
            found = insights.get(self.ctx.store.conn, scored.row.id)
            if found is not None:
                hits.append(SearchHit(found, scored.score))
        self.record_hits([h.insight.id for h in hits], "search", f"q={query} hits={len(hits)}")
        return hits

    # --- side effects ------------------------------------------------------------------------------

    def record_hits(self, ids: list[str], operation: str, detail: str) -> None:
        """Access bump + oplog in one short transaction (§3.4); nothing at all under --readonly.

        If nothing but this transaction changed the database since the hot index was current,
        the index is stamped current for the new generation instead of being re-checked.
        """
        from mnemon.engine import hot

        if self.ctx.settings.readonly:
            return
        store = self.ctx.store
        stamp = self.ctx.now_ts()
        index = hot.cached(store.conn)
        with store.transaction(operation) as conn:
            before = hotindex.fingerprint(conn)
            insights.bump_access(conn, ids, stamp)
            oplog.append(conn, operation, "", detail, stamp)
        if index is not None and index.fp == before:
            hot.mark_current(store.path, index, replace(before, generation=before.generation + 1), readonly=False)
        self.ctx.after_write()


def df_in_scope(ptr: np.ndarray, rows: np.ndarray, scope: np.ndarray, n_docs: int) -> np.ndarray:
    """Each posting list's rows in ``scope`` (its document frequency there), for lists ``ptr`` over
    ``rows``; ``n_docs`` is ``scope.sum()``. With every row in scope a list's length is its df: the scan
    of every listed row's scope cost 80 ms at 1M rows for the common characters of a long Chinese turn."""
    import numpy as np

    if n_docs == scope.shape[0]:
        return np.diff(ptr)
    in_scope = np.concatenate(([0], np.cumsum(scope[rows], dtype=np.int64)))
    return in_scope[ptr[1:]] - in_scope[ptr[:-1]]


def measure_backbone_share(index: HotIndex, scope: np.ndarray) -> float:
    """The share of the neighbour lift this store's backbone earns (recall.backbone_lift_share):
    up to records.BACKBONE_SAMPLE rows in scope whose backbone predecessor is in scope, strided over
    them, each compared with that predecessor and with the sampled rows a third, a half and two
    thirds of the sample away (written far from it). Terms weigh by their idf over the store's active
    memories (base postings plus the delta's rows, less those forgotten since the base). With fewer than
    records.BACKBONE_MIN_SAMPLE such rows: 0 when they are under half of at least that many rows in scope
    (memories with no backbone between them, each of a source of its own, are separate memories: the lift
    has nothing to lend along, and recall reads them as such, recall._signal_span), else 1 (too few to judge
    by: the lift as it always was; Decision 14, memories written next to each other belong together, holds
    for a new store's first notes, an incident and its fix sharing no word)."""
    import numpy as np

    from mnemon import recall as pipeline

    prev = index.derived("prev")
    linked = np.flatnonzero(scope & (prev >= 0))
    linked = linked[scope[prev[linked]]]
    if linked.shape[0] < BACKBONE_MIN_SAMPLE:
        in_scope = int(np.count_nonzero(scope))
        return 0.0 if in_scope >= BACKBONE_MIN_SAMPLE and 2 * linked.shape[0] < in_scope else 1.0
    k = min(BACKBONE_SAMPLE, linked.shape[0])
    sample = linked[(np.arange(k, dtype=np.int64) * linked.shape[0]) // k]
    # the term lists of the sampled rows and their predecessors only, as a CSR of their own
    rows = np.unique(np.concatenate([sample, prev[sample]]))
    ptr, listed = _term_lists(index, rows)
    found, terms = np.unique(listed, return_inverse=True)
    # each found term's document frequency over the store's active rows: the base postings' length, plus the
    # delta rows that carry it, less the rows forgotten since the base (a fresh build lists none of them: the
    # same store then measures the same share whatever its index's history); read for these terms only
    # (never a pass over the vocabulary)
    active = np.asarray(index.active[: index.n], dtype=np.bool_)
    base_ptr = index.derived("post_r_ptr")
    df = np.zeros(found.shape[0], dtype=np.float64)
    in_base = found < base_ptr.shape[0] - 1
    df[in_base] = np.asarray(base_ptr[found[in_base] + 1], dtype=np.float64) - base_ptr[found[in_base]]
    forgotten = np.flatnonzero(~active[: index.base_n])
    if forgotten.shape[0]:
        gone = np.sort(_term_lists(index, forgotten)[1])
        df -= np.searchsorted(gone, found, side="right") - np.searchsorted(gone, found, side="left")
    delta = np.arange(index.base_n, index.n, dtype=np.int64)
    tail = np.sort(_term_lists(index, delta[active[index.base_n :]])[1])
    df += np.searchsorted(tail, found, side="right") - np.searchsorted(tail, found, side="left")
    n = float(np.count_nonzero(active))
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    local = np.searchsorted(rows, sample)
    linked_overlap = pipeline.pair_overlaps(ptr, terms, idf, local, np.searchsorted(rows, prev[sample]))
    apart = np.concatenate([np.roll(local, -shift) for shift in (k // 3, k // 2, 2 * k // 3)])
    apart_overlap = pipeline.pair_overlaps(ptr, terms, idf, np.tile(local, 3), apart)
    return pipeline.backbone_lift_share(linked_overlap, apart_overlap)


def _term_lists(index: HotIndex, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The term lists of ``rows`` (ascending) as a CSR of their own: its pointers and the term ids."""
    import numpy as np

    r_ptr = index.r_ptr
    starts = np.asarray(r_ptr[rows], dtype=np.int64)
    lengths = np.asarray(r_ptr[rows + 1], dtype=np.int64) - starts
    ptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    at = np.repeat(starts - ptr[:-1], lengths) + np.arange(int(ptr[-1]), dtype=np.int64)
    return ptr, np.asarray(index.row_values("r_term", at), dtype=np.int64)


# The backbone share of each index in this process, with the state it was measured on: a store's
# property, not the query's, so one measurement serves every recall until a write or another filter
# (the warm server measures it once in the parent, warm_backbone_share, and its workers inherit it).
_SHARES: weakref.WeakKeyDictionary[HotIndex, tuple[tuple[int, int, int, str, str], float]] = weakref.WeakKeyDictionary()


def backbone_share(index: HotIndex, scope: np.ndarray, category: str = "", source: str = "") -> float:
    """``measure_backbone_share`` of ``scope``, measured once per index state (rows, edge rows, rows in
    scope) and filter."""
    key = (int(index.n), int(index.m), int(scope.sum()), category, source)
    known = _SHARES.get(index)
    if known is not None and known[0] == key:
        return known[1]
    share = measure_backbone_share(index, scope)
    _SHARES[index] = (key, share)
    return share


def warm_backbone_share(index: HotIndex) -> None:
    """Measure the backbone share of every active row (a recall without --cat/--source) now: the warm
    server's parent does, so its forked workers start with it."""
    import numpy as np

    backbone_share(index, np.array(index.active, dtype=np.bool_))


def created_days(created: np.ndarray) -> np.ndarray:
    """The ``YYYY-MM-DD`` prefix (S10) of each creation stamp. The stamps mnemon writes are 20
    bytes ("YYYY-MM-DDThh:mm:ssZ"), whose prefixes are a zero-copy view (every second S10 item);
    a wider array (one stamp longer than 20 bytes, fractional seconds say, widens the whole joined
    array) is truncated instead: a view would misalign."""
    import numpy as np

    if created.dtype.itemsize == 20 and created.flags.c_contiguous:
        return created.view("S10")[::2]
    return np.asarray(created).astype("S10")
