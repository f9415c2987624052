"""HashEmbedder: a deterministic, offline embedder for tests and benchmarks (architecture §2).

Each lower-cased word token gets a fixed pseudo-random Gaussian vector, seeded by a BLAKE2b hash of
the word (never Python's per-process randomised ``hash``), so the same text gives the same vector
in every process and on every machine. A text's vector is the L2-normalised sum of its tokens'
vectors, repeats included: texts that share words point in similar directions, and the expected
cosine of two texts is about the overlap of their bags of words. Han, kana and hangul characters
count one token each, so CJK texts also share tokens. Imports numpy lazily, nothing else.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from mnemon.embed.closing import ClosingContext

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["HashEmbedder", "tokens"]

_WORD = re.compile(r"[^\W_]+")
# CJK scripts write words without spaces: split those runs into single characters.
_CJK_CLASS = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
_CJK = re.compile(f"[{_CJK_CLASS}]")
_CJK_SPLIT = re.compile(f"[{_CJK_CLASS}]|[^{_CJK_CLASS}]+")
_EMPTY_TEXT_TOKEN = "\x00"  # a text without word tokens still gets a fixed, finite unit vector


def tokens(text: str) -> list[str]:
    """Return the lower-cased word tokens the HashEmbedder sums, in order, with repeats."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word):
            out.extend(_CJK_SPLIT.findall(word))
        else:
            out.append(word)
    return out


@lru_cache(maxsize=1 << 16)
def _token_vector(token: str, dim: int) -> NDArray[np.float64]:
    import numpy as np

    seed = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(dim)
    vector.flags.writeable = False  # shared through the cache
    return vector


class HashEmbedder(ClosingContext):
    """Deterministic offline :class:`mnemon.embed.Embedder`; ``probe()`` is always True.

    Parameters
    ----------
    dim : int
        Vector length (64 by default; use 768 to mimic nomic-embed-text).
    model : str
        Reported model name (``"hash"``).
    """

    protocol = "fake"

    def __init__(self, dim: int = 64, model: str = "hash") -> None:
        if isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.dim = dim
        self.dimensions = dim
        self.model = model
        self.endpoint = f"hash://{model}"

    def probe(self) -> bool:
        """Return True: the fake is always available."""
        return True

    def embed_batch(self, texts: list[str]) -> NDArray[np.float64]:
        """Return a C-contiguous float64 (len(texts), dim) array of unit vectors."""
        import numpy as np

        out = np.empty((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            out[row] = self._vector(text)
        return out

    def embed(self, text: str) -> NDArray[np.float64]:
        """Return the float64 (dim,) unit vector of one text."""
        return self._vector(text)

    def close(self) -> None:
        """Nothing to release."""


    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim}, model={self.model!r})"

    def _vector(self, text: str) -> NDArray[np.float64]:
        import numpy as np

        words = tokens(text) or [_EMPTY_TEXT_TOKEN]
        total = np.zeros(self.dim, dtype=np.float64)
        for word in words:
            total += _token_vector(word, self.dim)
        norm = float(np.linalg.norm(total))
        if norm == 0.0:  # vectors that cancel exactly: practically impossible, never divide by 0
            total = _token_vector(_EMPTY_TEXT_TOKEN, self.dim).copy()
            norm = float(np.linalg.norm(total))
        total /= norm
        return total
