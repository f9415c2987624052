"""Per-item preparation of an import: the work that depends only on an item's text (§3.15).

For each draft item: the extracted entities (§4.3 paths 1-6 and the dictionary), the words the
index-aware path would admit if known, the §4.1 token sequence (its set for the causal overlap;
the sequence itself for the hot index the import builds at its end, which then need not tokenise
the text again), whether the text has a causal keyword (§4.6) and which causal sub-type keywords
it has. The import then only resolves the entities against its known set and compares token sets.

Large drafts (``PARALLEL_THRESHOLD`` items and more) are prepared ahead in a small pool of forked
worker processes, chunk by chunk, while the import writes; smaller drafts (and any platform or
situation where the pool cannot start or breaks) are prepared in process, lazily, with the same
functions, so the results are identical either way.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from mnemon import entities, linking
from mnemon.text import token_sequence

PARALLEL_THRESHOLD = 5_000  # drafts with fewer items never start a pool
PARALLEL_WORKERS = 2
PARALLEL_CHUNK = 2_000  # items per task (the first tasks smaller: ``block_starts``)
# Tasks in flight or done ahead of the block the import reads: their results wait in this process,
# so the whole draft submitted at once held every prepared item (about 2 KB each: 2 GB at 1M).
PARALLEL_AHEAD = 8

# (extracted entities, index-aware candidate words, token sequence, causal keyword, sub-type flags)
Prepared = tuple[list[str], list[str], list[str], bool, int]

_SUB_TYPE_NAMES = tuple(name for name, _ in linking._SUB_TYPES)
_SUB_TYPE_PATTERNS = tuple(pattern for _, pattern in linking._SUB_TYPES)


def sub_type_flags(text: str) -> int:
    """Bit k set when the k-th §4.6 sub-type pattern (prevents, enables, causes) matches ``text``."""
    flags = 0
    for bit, pattern in enumerate(_SUB_TYPE_PATTERNS):
        if pattern.search(text):
            flags |= 1 << bit
    return flags


def sub_type(flags_a: int, flags_b: int) -> str:
    """linking.causal_sub_type(a, b) from the two texts' flags.

    The texts are joined with a newline there, and no keyword can span that seam (nor does the
    newline change a word boundary), so a pattern matches the joined text iff it matches one side.
    """
    both = flags_a | flags_b
    for bit, name in enumerate(_SUB_TYPE_NAMES):
        if both >> bit & 1:
            return name
    return linking._DEFAULT_SUB_TYPE


def prepare_one(text: str) -> Prepared:
    return (
        entities.extract_entities(text),
        entities.entity_candidates(text),
        token_sequence(text),
        linking.CAUSAL_PATTERN.search(text) is not None,
        sub_type_flags(text),
    )


def prepare_texts(texts: list[str]) -> list[Prepared]:
    return [prepare_one(t) for t in texts]


def _die_with_parent(parent: int) -> None:
    """A pool worker's initializer: end with the import that forked it. Each worker holds a copy of the
    pool's queues, so a parent killed with SIGKILL left it waiting on them for ever (2 processes, 55-135 MB
    each, one holding the store's files open). Linux's PR_SET_PDEATHSIG kills it with its parent; a parent
    gone before the call is checked once after it. Elsewhere (no prctl) nothing changes."""
    import signal

    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(0)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _fork_context() -> Any:
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context("fork")


def block_starts(n: int, chunk: int) -> list[int]:
    """Where each block of ``n`` items starts, and ``n``: ``chunk`` items a block, the first ones an
    eighth, a quarter and half of it. The import waits for its first block while the pool forks
    and prepares it (0.14 s for 2,000 items at 10k); a small one is ready at once, and the pool
    runs ahead of the import from then on."""
    starts, size = [0], max(1, chunk // 8)
    while starts[-1] < n:
        starts.append(min(n, starts[-1] + size))
        size = min(chunk, 2 * size)
    return starts


class Preparer:
    """``get(i)``: the prepared item ``i`` of ``texts``, from the pool when one runs, else in process."""

    def __init__(self, texts: list[str], *, threshold: int | None = None, chunk: int | None = None) -> None:
        threshold = PARALLEL_THRESHOLD if threshold is None else threshold
        self.texts = texts
        self.chunk = max(1, PARALLEL_CHUNK if chunk is None else chunk)
        self.starts = block_starts(len(texts), self.chunk)
        self.done: dict[int, list[Prepared]] = {}
        self.futures: list[Any] = []
        self.submitted = 0  # blocks whose task was submitted (or that never get one)
        self.pool: Any = None
        if len(texts) >= threshold and threshold >= 0:
            self._start()

    def _start(self) -> None:
        try:
            from concurrent.futures import ProcessPoolExecutor

            context = _fork_context()
            if context is None:
                return
            workers = max(1, min(PARALLEL_WORKERS, os.cpu_count() or 1))
            self.pool = ProcessPoolExecutor(
                max_workers=workers, mp_context=context, initializer=_die_with_parent, initargs=(os.getpid(),)
            )
            self.futures = [None] * (len(self.starts) - 1)  # one per block, submitted ahead
            self._submit_ahead(0)
        except Exception:  # noqa: BLE001 -- no pool: everything is prepared in process
            self.close()
            self.futures = []

    def _submit_ahead(self, block: int) -> None:
        """Submit the tasks of the blocks up to ``PARALLEL_AHEAD`` after ``block`` (each once)."""
        end = min(len(self.futures), block + 1 + PARALLEL_AHEAD)
        while self.pool is not None and self.submitted < end:
            k = self.submitted
            if self.futures[k] is None:
                self.futures[k] = self.pool.submit(prepare_texts, self.texts[self.starts[k] : self.starts[k + 1]])
            self.submitted += 1

    def get(self, index: int) -> Prepared:
        block = bisect.bisect_right(self.starts, index) - 1
        rows = self.done.get(block)
        if rows is None:
            rows = None
            try:
                self._submit_ahead(block)
            except Exception:  # noqa: BLE001 -- a broken pool: prepare the rest in process
                self.close()
                self.futures = []
            future = self.futures[block] if block < len(self.futures) else None
            if future is not None:
                self.futures[block] = None  # its rows live in ``done`` now
                try:
                    rows = future.result()
                except Exception:  # noqa: BLE001 -- a broken pool: prepare the rest in process
                    self.close()
                    self.futures = []
                    rows = None
            if rows is None:
                rows = prepare_texts(self.texts[self.starts[block] : self.starts[block + 1]])
            self.done = {block: rows}  # items are asked for in draft order
        return rows[index - self.starts[block]]

    def close(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            try:
                pool.shutdown(wait=False, cancel_futures=True)
            except Exception:  # noqa: BLE001
                pass
