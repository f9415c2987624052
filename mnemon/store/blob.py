"""Embedding blob encoding (contract §2.5, Decision 3).

Our stores hold little-endian float64 blobs; Go stores (``user_version = 1``) hold float32. The
store records its format, so a blob is never guessed; a blob whose length does not fit the
format decodes to "no vector". numpy is imported only when a vector is actually handled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_WIDTH = {"float64": 8, "float32": 4}


def encode(vector: NDArray[np.float64], fmt: str) -> bytes:
    import numpy as np

    dtype = "<f8" if fmt == "float64" else "<f4"
    return np.ascontiguousarray(vector, dtype=dtype).tobytes()


def decode(blob: bytes | None, fmt: str) -> NDArray[np.float64] | None:
    """Decode a blob to float64, or None when it is empty, mis-sized, not finite or no blob at all (text or a
    number in the column, a hand-edited store: np.frombuffer of a str was a TypeError)."""
    import numpy as np

    if not blob or not isinstance(blob, (bytes, bytearray, memoryview)):
        return None
    width = _WIDTH[fmt]
    if len(blob) % width:
        return None
    vector = np.frombuffer(blob, dtype="<f8" if fmt == "float64" else "<f4").astype(np.float64)
    if vector.size == 0 or not np.all(np.isfinite(vector)):
        return None
    return vector
