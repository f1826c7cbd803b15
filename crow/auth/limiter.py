"""Token buckets: each key gets `burst` requests at once, refilled at `per_minute`.

In memory, so exactly one process must hold them for a deployment: the ChatStore
deployment (one replica, never autoscaled) does, and every Ingress replica asks it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

MAX_BUCKETS = 100_000  # beyond this the fullest (idle) buckets are dropped: they'd be full anyway


class TokenBuckets:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, name: str, *, per_minute: float, burst: int) -> float:
        """Take one token from bucket `name`: 0.0 when allowed, else the seconds to wait."""
        rate = per_minute / 60.0
        with self._lock:
            now = self._clock()
            tokens, at = self._buckets.get(name, (float(burst), now))
            tokens = min(float(burst), tokens + (now - at) * rate)
            if tokens >= 1.0:
                self._buckets[name] = (tokens - 1.0, now)
                if len(self._buckets) > MAX_BUCKETS:
                    self._forget_full(now, rate, burst)
                return 0.0
            self._buckets[name] = (tokens, now)
            return (1.0 - tokens) / rate if rate > 0 else float("inf")

    def _forget_full(self, now: float, rate: float, burst: int) -> None:
        full = [n for n, (t, at) in self._buckets.items() if t + (now - at) * rate >= burst]
        for name in full:
            del self._buckets[name]
