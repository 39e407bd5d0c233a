"""The simulator's own request-rate limit: a sliding one-minute window per model.

Unlike injected faults, these 429s are earned: a client that ignores Retry-After or
overshoots its configured rpm gets them, so the engine's lanes can be tested against a
limit that behaves like a provider's. They are counted apart from injected faults.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 60.0


class SlidingWindowLimiter:
    """Admit at most `rpm` requests in any `window_s` span, per key."""

    def __init__(
        self, rpm: float, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rpm <= 0:
            raise ValueError("rpm must be positive")
        self.limit = max(1, math.floor(rpm * window_s / WINDOW_S))
        self.window_s = window_s
        self._clock = clock
        self._stamps: dict[str, deque[float]] = {}

    def admit(self, key: str) -> float | None:
        """Record and admit a request (None), or return the seconds until one would be admitted."""
        now = self._clock()
        stamps = self._stamps.setdefault(key, deque())
        while stamps and stamps[0] <= now - self.window_s:
            stamps.popleft()
        if len(stamps) >= self.limit:
            return max(0.001, stamps[0] + self.window_s - now)
        stamps.append(now)
        return None

    def remaining(self, key: str) -> int:
        """Requests still admissible right now (for x-ratelimit-remaining headers)."""
        now = self._clock()
        stamps = self._stamps.get(key, deque())
        live = sum(1 for s in stamps if s > now - self.window_s)
        return max(0, self.limit - live)
