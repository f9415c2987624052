"""mnemon.heap: freed heap pages go back to the system between an import's phases."""

from __future__ import annotations

import sys

import pytest

from mnemon.heap import release_free_memory


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_blocks_below_a_live_one_are_returned() -> None:
    """200 MB of 2 KB blocks freed under a block still alive stay with the allocator (free()
    can only shrink the heap's top); release_free_memory hands their pages back, unless the next
    phase is said to reuse more than is free."""
    blocks = [bytes(2048) for _ in range(100_000)]
    pin = bytes(2048)  # above them: the heap's top stays in use
    del blocks
    before = _rss_mib()
    release_free_memory(400 << 20)  # more than is free: kept for reuse
    assert _rss_mib() > before - 50
    release_free_memory(64 << 20)
    release_free_memory(64 << 20)  # (a second call is as harmless)
    assert _rss_mib() < before - 100
    assert len(pin) == 2048
