"""The store's word vectors, kept current for neighbour terms (records.TERM_NEIGHBOURS).

Every word the store has written (text.vocabulary_words) with its stem and the embedding model's vector of
the word alone, in ``<db>.index/words`` (``store.wordvectors``). The table follows the insights by rowid: a
read embeds the words of the rows written since (a ``remember`` adds a few; an import or ``embed --all``
brings it up to date itself, ``catch_up(complete=True)``), so a recall pays at most WORD_CATCH_UP_BUDGET new
words, and until the table is whole it reads as absent (no neighbour terms yet, rather than some): a recall
whose budget is spent keeps what it embedded for the next. Under ``--readonly`` nothing is written; the table is
caught up in memory only, and only from a table a writable command wrote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemon.errors import EmbedderError
from mnemon.store import vectors as vector_store
from mnemon.store import wordvectors as word_store
from mnemon.text import stem, vocabulary_words

if TYPE_CHECKING:
    import numpy as np

    from mnemon.embed import Embedder
    from mnemon.engine.core import EngineBase

# words embedded per request to the model
WORD_BATCH = 256
# insight rows read per statement while catching up
WORD_ROWS = 2000
# the new words a recall embeds at most: 0.7-1.1 ms each with the local MiniLM (a loaded machine the latter), so
# about half a second, which leaves a one-shot recall (0.5 s) inside the prompt hook's 1.5 s
# (setup.hooks.RECALL_BUDGET_SECONDS; a recall the hook kills keeps nothing); the rest on the next recall. An
# import or `embed --all` completes the table itself.
WORD_CATCH_UP_BUDGET = 500
# the rows a recall reads at most while catching up (tokenised at a few microseconds each): late in a large
# store's catch-up new words are rare, and finding a thousand could mean reading most of a million rows
WORD_CATCH_UP_ROWS = 50_000
# the words a table holds at most (1.5 KB each with MiniLM: 300 MB); past it the rest of the store's words are
# no neighbours. A store's vocabulary grows slower than its rows, but names, typos and identifiers do not stop.
WORD_TABLE_MAX = 200_000


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of length 1 (a zero row stays zero)."""
    import numpy as np

    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def embed_words(embedder: Embedder, words: list[str]) -> np.ndarray:
    """The unit float32 vectors of ``words``, each embedded alone (raises EmbedderError)."""
    import numpy as np

    parts = [unit_rows(embedder.embed_batch(words[i : i + WORD_BATCH])) for i in range(0, len(words), WORD_BATCH)]
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def catch_up(ctx: EngineBase, embedder: Embedder, *, complete: bool = False) -> word_store.WordTable | None:
    """The store's word table for ``embedder``'s model, caught up with the insights; None while it is not
    whole (more than the budget behind, unless ``complete``), when the store has no vectors yet or the
    model fails."""
    import numpy as np

    store = ctx.store
    conn = store.conn
    dim = vector_store.vector_meta(conn).dim
    if dim is None:
        return None
    model = embedder.model
    table = word_store.read(store.path, model, dim)
    top = word_store.max_rowid(conn)
    if table is None or table.watermark > top:  # none yet, or rowids renumbered under it (a vacuum): anew
        if store.readonly:
            return None  # a read-only command builds no table (it would pay the whole budget on every call)
        table = word_store.WordTable(model, 0, [], [], np.zeros((0, dim), dtype=np.float32))
    if table.watermark >= top:
        return table
    known = set(table.words)
    words: list[str] = []
    watermark = table.watermark
    read = 0
    while watermark < top and (complete or (len(words) < WORD_CATCH_UP_BUDGET and read < WORD_CATCH_UP_ROWS)):
        rows = list(word_store.contents_since(conn, watermark, WORD_ROWS))
        if not rows:
            watermark = top
            break
        read += len(rows)
        for rowid, content in rows:
            for word in vocabulary_words(str(content)):
                if word not in known and len(known) < WORD_TABLE_MAX:
                    known.add(word)
                    words.append(word)
            watermark = int(rowid)
            if not complete and len(words) >= WORD_CATCH_UP_BUDGET:
                break
    try:
        vectors = embed_words(embedder, words) if words else np.zeros((0, dim), dtype=np.float32)
    except EmbedderError:
        return None
    if vectors.shape[1] != dim and words:
        return None  # the model answers in another dimension than the store's vectors: a model change
    table = word_store.WordTable(
        model, watermark, table.words + words, table.stems + [stem(w) for w in words],
        np.concatenate([np.asarray(table.vectors, dtype=np.float32), vectors]) if words else table.vectors,
    )  # fmt: skip
    if not store.readonly:
        try:
            word_store.write(store.path, table)
        except OSError:
            pass  # a cache: the next read catches up again
    return table if watermark >= top else None


def keep_current(ctx: EngineBase, embedder: Embedder | None) -> None:
    """After an import or `embed --all` with ``embedder``: the whole word table, when its model reads
    neighbour terms (SimilarityScale.term_floor), so the next recall embeds nothing of what was written."""
    from mnemon.records import similarity_scale

    if embedder is None or ctx.store.readonly or similarity_scale(embedder.model).term_floor <= 0.0:
        return
    catch_up(ctx, embedder, complete=True)
