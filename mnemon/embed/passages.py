"""A labelled memory's vector, composed from its sentences (the local models' passage side).

A memory that opens with a label, ``"Melanie: Oh nice! The kids loved it. We went camping at the
beach last weekend."`` (a chat line, ``"Decision: ..."``, ``"张三：..."``), is about what the label
names in every one of its sentences, yet a small sentence-embedding model pools the whole text at
once: the label is one word among many, and a question that names it ("Where has Melanie camped?")
meets a vector where it has faded. Such a memory's vector is the normalised sum of two unit vectors:
the whole text's, and the mean of its sentences' vectors, each sentence embedded on its own with the
label before it (``"Melanie: We went camping at the beach last weekend."``). A memory with no
label, or of one sentence, keeps the whole text's vector; a recall query is embedded as written.

Measured with the quality harness (``bench/quality-ablations.md``, "A labelled memory's vector"):
dialogue turns stored as ``Speaker: text`` rise with both local models on the development
conversations and on seven conversations nothing was tuned on. The sentences averaged without the
label gain nothing, and sentence vectors pooled from the whole text's own token states ("late
chunking", which would save the second pass) lose: the label has to be read with each sentence.
The price is that second pass, over the sentences of each labelled memory when it is stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["MAX_PIECES", "VERSION", "combine", "compose", "labelled_sentences"]

# The store records it (``mnemon_meta.embedding_passages``) once every labelled memory's vector is
# composed this way, so that ``embed --all`` re-embeds the labelled memories of a store embedded
# before (engine.embedding); a change to the composition raises it.
VERSION = 1
# At most this many sentences of a memory are embedded apart: a memory's cost stays bounded (a 290-sentence
# one took 0.85 s instead of 0.07) while every labelled memory measured (at most 8 sentences) is whole.
MAX_PIECES = 16

# One word (no space, no colon) of at most 40 characters, then an ASCII colon and white space or a
# full-width colon: "Caroline: ", "Decision: ", "张三：". "10:30", "https://..." and "a: b" inside a
# sentence are no labels.
_LABEL = re.compile(r"([^\s:：]{1,40})(?::\s+|：\s*)")
# A sentence ends at . ! ? (a closing quote or bracket may follow) before white space, or at a
# full-width 。！？ (Chinese runs on without a space). "3.5" and "e.g.x" do not end one.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)\]])\s+|(?<=[。！？])\s*")


def labelled_sentences(content: str) -> list[str] | None:
    """The texts whose vectors make ``content``'s: its first sentence as written (the label in it),
    then each later one after the label, :data:`MAX_PIECES` at most; None when ``content`` has no
    label or fewer than two sentences."""
    label = _LABEL.match(content)
    if label is None:
        return None
    sentences = [s for s in (part.strip() for part in _SENTENCE_END.split(content)) if s]
    if len(sentences) < 2:
        return None
    prefix = label.group(1) + ("：" if "：" in label.group(0) else ": ")
    return [sentences[0]] + [prefix + s for s in sentences[1:MAX_PIECES]]


def combine(whole: NDArray[np.float64], pieces: NDArray[np.float64]) -> NDArray[np.float64]:
    """unit(unit(whole) + unit(mean of ``pieces``' unit rows)): a labelled memory's vector."""
    import numpy as np

    rows = pieces / np.maximum(np.linalg.norm(pieces, axis=1, keepdims=True), 1e-12)
    mean = rows.sum(axis=0)
    vector = whole / max(float(np.linalg.norm(whole)), 1e-12) + mean / max(float(np.linalg.norm(mean)), 1e-12)
    out: NDArray[np.float64] = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return out


def compose(
    whole: NDArray[np.float64], texts: list[str], embed_pieces: Callable[[list[str]], NDArray[np.float64]]
) -> NDArray[np.float64]:
    """``whole`` (one row per text of ``texts``) with each labelled text's row :func:`combine`d with its
    :func:`labelled_sentences`' vectors; ``embed_pieces`` embeds every piece in one call. Other rows
    are returned as they came; without a labelled text, ``whole`` itself."""
    import numpy as np

    plan = [(i, pieces) for i, pieces in enumerate(map(labelled_sentences, texts)) if pieces]
    if not plan:
        return whole
    vectors = embed_pieces([piece for _, pieces in plan for piece in pieces])
    out = np.array(whole, dtype=np.float64, copy=True)
    start = 0
    for i, pieces in plan:
        out[i] = combine(out[i], vectors[start : start + len(pieces)])
        start += len(pieces)
    return out
