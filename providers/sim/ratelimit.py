"""The simulator's own rate limits: sliding one-minute windows per model.

Unlike injected faults, these 429s are earned: a client that ignores Retry-After or
overshoots its configured rpm (or tpm) gets them, so the engine's lanes can be tested
against limits that behave like a provider's. They are counted apart from injected faults.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 60.0


class SlidingWindowLimiter:
    """At most `per_minute` units (requests, or tokens) in any `window_s` span, per key.

    With a shorter `window_s` the capacity scales down proportionally, so tests can see a
    window slide without waiting a minute. A single request costing more than the whole
    capacity is admitted only into an empty window, so it can never be starved forever.
    """

    def __init__(
        self,
        per_minute: float,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute <= 0:
            raise ValueError("the limit must be positive")
        self.limit = max(1, math.floor(per_minute * window_s / WINDOW_S))
        self.window_s = window_s
        self._clock = clock
        self._spent: dict[str, deque[tuple[float, int]]] = {}
        self._totals: dict[str, int] = {}

    def _expire(self, key: str, now: float) -> deque[tuple[float, int]]:
        spent = self._spent.setdefault(key, deque())
        while spent and spent[0][0] <= now - self.window_s:
            _, cost = spent.popleft()
            self._totals[key] -= cost
        return spent

    def check(self, key: str, cost: int = 1) -> float | None:
        """None if `cost` fits now, else the seconds until it would (nothing is recorded)."""
        now = self._clock()
        spent = self._expire(key, now)
        total = self._totals.setdefault(key, 0)
        if not spent or total + cost <= self.limit:
            return None
        # Wait until enough of the oldest entries have left the window.
        freed = total
        for stamp, entry in spent:
            freed -= entry
            if freed + cost <= self.limit:
                return max(0.001, stamp + self.window_s - now)
        return max(0.001, spent[-1][0] + self.window_s - now)

    def record(self, key: str, cost: int = 1) -> None:
        now = self._clock()
        self._expire(key, now).append((now, cost))
        self._totals[key] = self._totals.get(key, 0) + cost

    def admit(self, key: str, cost: int = 1) -> float | None:
        """Check and, if it fits, record in one step; returns the wait as `check` does."""
        wait = self.check(key, cost)
        if wait is None:
            self.record(key, cost)
        return wait

    def remaining(self, key: str) -> int:
        """Units still admissible right now (for x-ratelimit-remaining headers)."""
        self._expire(key, self._clock())
        return max(0, self.limit - self._totals.get(key, 0))
