"""The hot-row hint beside a vector index (``vec.hotrows``) and its certificate.

Where each vector row sat among the hot index's rows the last time recall looked many of them up by
id; a guess is checked against the ids, so a stale, torn or missing hint costs time, never a wrong
answer, and it is written outside the index's commit protocol. A certificate names the two builds a
writer checked every row against (see ``store.vectors`` and :class:`HintCertificate`).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mnemon.store.connection import FILE_MODE

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mnemon.store.vectors import VectorIndex

HINT_SUFFIX = ".hotrows"
# The hint file: int64 hot rows, one per vector row, then an optional certificate of six int64
# words: hot base build id, vector index build id (16 hex digits each, as integers), vector rows
# covered, hot base rows, a CRC-32 of everything before it, and this magic number last.
HINT_MAGIC = 0x316D657268746F68  # b"hothrem1" little-endian
_CERT_WORDS = 6


@dataclass(frozen=True, slots=True)
class HintCertificate:
    """What the writer of a hint checked: vector rows ``[0, vec_rows)`` of index ``vec_build`` sit,
    where the hint gives a row below ``hot_base_n``, at that row of hot base ``hot_base``.

    Both indexes only append (or mask) rows under one build id, and each build gets a fresh id, so
    while both ids are unchanged those positions still hold: a reader may use them without
    comparing the ids again (1M 36-byte ids gathered and compared: 50-800 ms a recall, measured).
    """

    hot_base: str
    hot_base_n: int
    vec_build: str
    vec_rows: int


def _hex_word(token: str) -> int | None:
    if len(token) != 16:
        return None
    try:
        return int(token, 16)
    except ValueError:
        return None


def _read_hint(index: VectorIndex) -> tuple[NDArray[np.int64] | None, HintCertificate | None]:
    import numpy as np

    if index._hot_rows_hint is not None:
        return index._hot_rows_hint, index._hint_certificate
    try:
        raw = np.fromfile(index._path(HINT_SUFFIX), dtype="<i8")
    except (OSError, ValueError):
        return None, None
    cert = None
    if raw.shape[0] >= _CERT_WORDS and int(raw[-1]) == HINT_MAGIC:
        words = raw[-_CERT_WORDS:].view("<u8")
        body = raw[:-_CERT_WORDS]
        # the buffer itself: no 8 MB copy at 1M rows
        crc = zlib.crc32(raw[:-2])  # type: ignore[arg-type]  # ndarray has the buffer protocol; numpy's stubs declare it for Python 3.12+ only
        if int(words[4]) == crc and int(words[2]) == body.shape[0]:
            cert = HintCertificate(f"{int(words[0]):016x}", int(words[3]), f"{int(words[1]):016x}", int(words[2]))
        raw = body
    index._hot_rows_hint, index._hint_certificate = raw, cert
    return raw, cert


def read_hot_rows_hint(index: VectorIndex) -> NDArray[np.int64] | None:
    """The hot-row hint (see module doc), or None; any length, any content: callers verify it,
    except the rows its :func:`read_hint_certificate` vouches for."""
    return _read_hint(index)[0]


def read_hint_certificate(index: VectorIndex) -> HintCertificate | None:
    """The hint's certificate when its checksum holds (callers still compare both build ids)."""
    return _read_hint(index)[1]


def write_hot_rows_hint(
    index: VectorIndex, hint: NDArray[np.int64], certificate: HintCertificate | None = None
) -> None:
    """Keep ``hint`` (vector row -> hot row, -1 unknown) for the next process, with ``certificate``
    when every row of it was checked against the ids; memory only if readonly."""
    import numpy as np

    hint = np.ascontiguousarray(hint, dtype="<i8")
    hot_word = None if certificate is None else _hex_word(certificate.hot_base)
    vec_word = None if certificate is None else _hex_word(certificate.vec_build)
    if certificate is not None and (hot_word is None or vec_word is None or certificate.vec_rows != hint.shape[0]):
        certificate = None  # not a build id this format can carry: the rows get checked instead
    index._hot_rows_hint, index._hint_certificate = hint, certificate
    if index.readonly or not index.persisted:
        return
    data = hint.tobytes()
    if certificate is not None:
        head = np.array([hot_word, vec_word, certificate.vec_rows, certificate.hot_base_n], dtype="<u8").tobytes()
        crc = zlib.crc32(head, zlib.crc32(data))  # = crc32(data + head), without joining them
        data += head + np.array([crc, HINT_MAGIC], dtype="<u8").tobytes()
    path = index._path(HINT_SUFFIX)
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a hint only saves time: an unwritable folder costs the next process a lookup

