"""The hot index of a large import, built in a child process beside the import's last transaction.

An import ends with two long steps: the finalize (explicit edges to rows that existed, backbone
repair, effective importance, auto-prune: one write transaction) and the hot index build (token ids,
the vocabulary sort, the edge list). The build needs only what the batches committed, and the
finalize changes little of it, so a child builds the index of the batches' snapshot on the other
core while the parent finalizes; the parent then loads the child's file and catches it up by the
finalize's changes, as any reader catches up a stale index (O(delta), or a rebuild when something
does not add up). Nothing depends on the child: if it fails, is killed or is not started, the parent
builds the index itself, as before.

The child is forked before the draft is parsed and the store opened: a lean process (the parsed
draft would otherwise stay in its memory), and one that has never held a SQLite connection
(``store.connection.holds_connections()``), because a process forked while it holds one must not open
that database again: the child would inherit the parent's in-memory lock state for the file. It
loads the index modules while the parent parses, receives each committed batch's token sequences
through a pipe (so the index does not tokenise those contents again), then the database path,
and opens a read-only WAL connection of its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Below this many items the build is short and the child's fork and pipe are not worth it
# (the preparation pool's threshold: the same drafts run that pool).
ASIDE_THRESHOLD = 5_000
# The child is forked before the draft is parsed, for a draft text of at least this many bytes
# (5,000 items of a typical draft are 1.5-8 MB; a parsed draft of fewer items ends the child).
ASIDE_MIN_BYTES = 1 << 20
_POLL_SECONDS = 1.0  # how often a waiting child checks that its parent is alive


class AsideBuild:
    """A forked child that builds a store's hot index beside an import's finalize.

    ``send`` hands it a committed batch's token sequences; ``start`` names the store once every
    batch is committed (it builds the index of that snapshot); ``finish`` says the finalize is
    committed and which edge keys it deleted or replaced (it catches up and writes the file);
    ``join`` waits for it; ``cancel`` ends it without a file.
    """

    def __init__(self, process: Any, pipe: Any) -> None:
        self.process = process
        self.pipe = pipe
        self.finished = False

    @classmethod
    def fork(cls) -> AsideBuild | None:
        """A waiting child, or None (no fork on this platform, or a SQLite connection already
        open in this process)."""
        import multiprocessing

        from mnemon.store.connection import holds_connections

        if "fork" not in multiprocessing.get_all_start_methods() or holds_connections():
            return None
        context = multiprocessing.get_context("fork")
        try:
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(reader, writer, os.getpid()), daemon=True)
            process.start()
        except OSError:
            return None
        reader.close()
        return cls(process, writer)

    def send(self, sequences: Mapping[str, list[str]]) -> bool:
        """Hand the child a committed batch's token sequences (id -> sequence); False when the
        child is gone (the caller then keeps the rest for its own build)."""
        return self._send(dict(sequences))

    def start(self, db_path: Path) -> bool:
        """Every batch is committed: build the index of ``db_path`` now; False when the child is gone."""
        return self._send(str(db_path))

    def finish(self, replaced: list[tuple[str, str, str]]) -> None:
        """The finalize is committed, having deleted or replaced (at most) the rows of these edge
        keys: catch up, write the index, exit."""
        self.finished = self._send(list(replaced))
        self._close_pipe()

    def join(self) -> bool:
        """Wait for the child; True when it wrote the index."""
        self._close_pipe()
        self.process.join()
        return self.finished and self.process.exitcode == 0

    def cancel(self) -> None:
        """End the child without an index (the import failed, or it is not one the child can serve)."""
        self._close_pipe()  # the child reads the end of the pipe and exits
        self.process.join()

    def _send(self, message: object) -> bool:
        try:
            self.pipe.send(message)
            return True
        except (OSError, ValueError):  # the child is gone, or the pipe is closed
            return False

    def _close_pipe(self) -> None:
        try:
            self.pipe.close()
        except OSError:
            pass


def _child(reader: Any, writer: Any, parent: int) -> None:
    """The child's body: collect sequences until the store is named, build, wait for the
    finalize, catch up and write. Any failure exits non-zero: the parent builds instead."""
    writer.close()  # our copy of the parent's end: the pipe ends only when the parent's is closed
    try:
        import mnemon.engine.hot  # noqa: F401 -- loaded while the parent parses the draft

        sequences: dict[str, list[str]] = {}
        message = _receive(reader, parent)
        while isinstance(message, dict):
            sequences.update(message)
            message = _receive(reader, parent)
        if not isinstance(message, str):
            sys.exit(1)
        db_path = Path(message)
        from mnemon.store.connection import open_readonly

        conn = open_readonly(db_path, live=True)
        index = _batches_index(conn, db_path, sequences)
        del sequences
        replaced = _receive(reader, parent)
        if not isinstance(replaced, list):
            sys.exit(1)
        _write_caught_up(conn, db_path, index, replaced)
        conn.close()
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 -- the parent builds the index itself
        sys.exit(1)


def _receive(reader: Any, parent: int) -> object:
    """The next message; exits when the parent is gone or closed the pipe without one."""
    while not reader.poll(_POLL_SECONDS):
        if os.getppid() != parent:
            sys.exit(1)  # the parent died: nothing to build for
    try:
        return reader.recv()
    except EOFError:
        sys.exit(1)  # cancelled


def _batches_index(conn: Any, db_path: Path, sequences: Mapping[str, list[str]]) -> Any:
    """The index of what the batches committed: the store's index file caught up, or a build,
    in memory (``readonly``: nothing is written before the finalize is caught up too)."""
    from mnemon.engine.hot import open_index

    return open_index(conn, db_path, readonly=True, cached=None, edges=False, sequences=sequences)


def _write_caught_up(conn: Any, db_path: Path, index: Any, replaced: list[tuple[str, str, str]]) -> None:
    """Catch ``index`` up by the finalize, fold it into one base and write it (it was never
    written, so a delta segment or a stamp alone would describe a base nobody has)."""
    from mnemon.store import hotindex

    with hotindex.read_snapshot(conn):
        live = hotindex.fingerprint(conn)
        if index.fp != live:
            index = index.catch_up(conn, live, None, replaced)
        index.verify_edges(conn)
    if index.delta_id:
        index.merge()
    hotindex.write_index(db_path, index.header(), index.arrays())
    hotindex.remove_delta(db_path)
