"""The word vectors on disk (``<db>.index/words``) and the SQL that feeds them (records.TERM_NEIGHBOURS).

One file: ``MNEMWRD1``, the header's length (8 bytes, little-endian), a JSON header (the model and its
dimension, the highest insight rowid whose words it holds, the count, the CRC-32 of the word lists), the
words and their stems (``\\n``-joined UTF-8), then the float32 unit vectors, one row per word. Replaced
atomically by rename, mode 0600. A file that is missing, unreadable, damaged or of another model reads as
None: it is derived from the database's text and the embedding model, and rebuilt from them.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemon.store import derived
from mnemon.store.hotindex import _write_atomic, max_rowid

__all__ = ["WordTable", "contents_since", "max_rowid", "read", "words_path", "write"]

if TYPE_CHECKING:
    import apsw
    import numpy as np

MAGIC = b"MNEMWRD1"
# every row, forgotten ones too: a word of a forgotten memory has no posting in scope, so it is never chosen
_SQL_CONTENTS_SINCE = "SELECT rowid, content FROM insights WHERE rowid > ? ORDER BY rowid LIMIT ?"


@dataclass(frozen=True, slots=True)
class WordTable:
    model: str
    watermark: int  # the highest insight rowid whose words the table holds
    words: list[str]
    stems: list[str]
    vectors: np.ndarray  # float32, (len(words), dim), unit rows
    # each word's row, built on the first ``rows_of`` (a table read once serves a warm process's recalls)
    _row: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def rows_of(self, words: list[str]) -> list[int | None]:
        """The row of each of ``words`` in the table; None for one it does not hold."""
        if not self._row and self.words:
            self._row.update((word, k) for k, word in enumerate(self.words))
        return [self._row.get(word) for word in words]


# The last table read from each file, with what identified that file: a warm process (the command server) reads
# the table on every recall with neighbour terms, and parsing its word lists is O(words) (0.3 ms a thousand
# words; a table holds up to engine.wordvectors.WORD_TABLE_MAX). The file is only ever replaced by rename, so
# while the path names the same file (device, inode, size, modification time) with the same header bytes, the
# table read before is the table.
_READ: dict[Path, tuple[tuple[int, int, int, int], bytes, WordTable]] = {}


def words_path(db_path: Path) -> Path:
    return derived.path(db_path, "words")


def contents_since(conn: apsw.Connection, rowid: int, limit: int) -> list[tuple[Any, ...]]:
    """(rowid, content) of the first ``limit`` insight rows after ``rowid``, in rowid order."""
    return list(conn.execute(_SQL_CONTENTS_SINCE, (rowid, limit)))


def read(db_path: Path, model: str, dim: int) -> WordTable | None:
    """The table of ``model`` (vectors of ``dim``), or None when there is none readable."""
    import numpy as np

    path = words_path(db_path)
    try:
        with open(path, "rb") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                return None
            size = int.from_bytes(fh.read(8), "little")
            raw = fh.read(size)
            header = json.loads(raw.decode("utf-8"))
            if header.get("model") != model or int(header.get("dim", -1)) != dim:
                return None
            st = os.fstat(fh.fileno())
            identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            known = _READ.get(path)
            if known is not None and known[0] == identity and known[1] == raw:
                return known[2]
            count = int(header["count"])
            text = fh.read(int(header["text_bytes"]))
            if len(text) != int(header["text_bytes"]) or zlib.crc32(text) != int(header["crc"]):
                return None
            offset = fh.tell()
        words_blob, _, stems_blob = text.decode("utf-8").partition("\0")
        words = words_blob.split("\n") if count else []
        stems = stems_blob.split("\n") if count else []
        if len(words) != count or len(stems) != count:
            return None
        expected = offset + count * dim * 4
        if st.st_size != expected:  # the open file's size (fstat above), not whatever the path names by now
            return None
        vectors = (
            np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=(count, dim))
            if count else np.zeros((0, dim), dtype=np.float32)
        )  # fmt: skip
        table = WordTable(model, int(header["watermark"]), words, stems, vectors)
        _READ[path] = (identity, raw, table)
        return table
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def write(db_path: Path, table: WordTable) -> None:
    """Replace the file with ``table`` (atomically)."""
    import numpy as np

    text = ("\n".join(table.words) + "\0" + "\n".join(table.stems)).encode("utf-8")
    vectors = np.ascontiguousarray(table.vectors, dtype=np.float32)
    header = json.dumps({
        "model": table.model, "dim": int(vectors.shape[1]), "watermark": table.watermark, "count": len(table.words),
        "text_bytes": len(text), "crc": zlib.crc32(text),
    }).encode("utf-8")  # fmt: skip
    body = memoryview(vectors).cast("B") if vectors.nbytes else b""  # type: ignore[arg-type]  # (as hotindex's arrays)
    _write_atomic(words_path(db_path), [MAGIC, len(header).to_bytes(8, "little"), header, text, body])
