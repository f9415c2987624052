"""Per-token request rate limits for the gateway: one token bucket per token name (stdlib only).

A bucket holds up to ``burst`` requests and refills at ``rate`` per second; a request that finds it
empty is answered 429 with the seconds until the next one fits. The clock is monotonic, so a
wall-clock step neither floods nor starves a token. ``rate`` 0 turns the limit off.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class RateLimiter:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens left, when counted)
        self._lock = threading.Lock()

    def admit(self, name: str) -> float:
        """0.0 when the request may run (and is counted); else the seconds to wait before retrying."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            now = self.clock()
            left, then = self._buckets.get(name, (float(self.burst), now))
            left = min(float(self.burst), left + (now - then) * self.rate)
            if left >= 1.0:
                self._buckets[name] = (left - 1.0, now)
                return 0.0
            self._buckets[name] = (left, now)
            return (1.0 - left) / self.rate


def retry_after(seconds: float) -> str:
    """A Retry-After header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
