"""Freed heap memory given back to the operating system between the phases of a bulk import.

An import's phases free hundreds of megabytes in small blocks (SQLite's page cache when it
shrinks to the sort cache, the draft's items once written), which the C allocator keeps for
reuse. The next phase's large buffers (an index sort's runs, the hot index's arrays) are fresh
mappings beside them, so the peak was the sum. glibc's ``malloc_trim`` returns the free pages;
on a 100k import, two calls took 13 ms and lowered the peak from 863 to 753 MiB. Pages handed
back are faulted in again when reused, which costs system time: on a 10k import, whose next
phases reuse what the last freed, trimming anyway cost 1 % of its CPU for 2 MiB of peak. So the
allocator is asked first (``mallinfo2``) and trimmed only when it holds more than the caller's
next phase will allocate. Elsewhere (macOS, musl) there is no such call and this does nothing.
"""

from __future__ import annotations

import sys
from typing import Any

_libc: Any = None
_looked_up = False


def release_free_memory(reused: int) -> None:
    """Return the allocator's free pages to the system when it holds more than ``reused`` bytes,
    about what the caller's next phase allocates (that much would be reused, and each page handed
    back costs a fault when it is); best effort, a no-op without glibc."""
    libc = _glibc()
    if libc is None:
        return
    if libc.mallinfo2 is not None and _free_bytes(libc) <= reused:
        return
    libc.malloc_trim(0)


class _Glibc:
    """The two glibc calls, bound once (``mallinfo2`` is glibc 2.33 and later: without it, trim)."""

    def __init__(self, malloc_trim: Any, mallinfo2: Any) -> None:
        self.malloc_trim = malloc_trim
        self.mallinfo2 = mallinfo2


def _glibc() -> _Glibc | None:
    global _libc, _looked_up
    if not _looked_up:
        _looked_up = True
        if sys.platform.startswith("linux"):
            import ctypes  # (here: every command imports the store, few ever trim)

            try:  # the process's own symbols: the C library it runs on (find_library runs ldconfig)
                process = ctypes.CDLL(None)
                trim = process.malloc_trim
            except (OSError, AttributeError):  # not glibc: nothing to call
                return None
            info = getattr(process, "mallinfo2", None)
            if info is not None:
                info.restype = _mallinfo2_type()
            _libc = _Glibc(trim, info)
    return _libc


def _mallinfo2_type() -> Any:
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )]

    return MallInfo2


def _free_bytes(libc: _Glibc) -> int:
    """Bytes the allocator holds free (in its main and thread arenas, small blocks included)."""
    info = libc.mallinfo2()
    return int(info.fordblks) + int(info.fsmblks)
