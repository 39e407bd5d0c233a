"""An adaptive cap on requests in flight for one lane (AIMD).

Why adaptive: a provider's real capacity (shared account limits, load) is not known in
advance, and a fixed cap either wastes it or triggers rate-limit storms. The cap is started at one
request in flight and doubled per clean answer up to its configured value (slow start: a lane
with a bad key learns so from one request, not from a whole burst of them), cut by a
factor on a rate-limit episode (one cut per cooldown, so a burst of 429s from the same
moment counts once) and grown by one after a cap's worth of clean answers. Every change is
reported through `on_change` so the logs show why the lane slowed down.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable


class AdaptiveCap:
    """A semaphore whose limit moves between `minimum` and `maximum`."""

    def __init__(
        self,
        initial: int,
        maximum: int | None = None,
        *,
        minimum: int = 1,
        decrease: float = 0.5,
        cooldown_s: float = 2.0,
        on_change: Callable[[int, int, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        slow_start: bool = False,
    ) -> None:
        if initial < 1:
            raise ValueError("the concurrency cap must be at least 1")
        self.maximum = max(initial, maximum or initial)
        self.minimum = max(1, min(minimum, initial))
        self.limit = 1 if slow_start else initial
        self._target = initial if slow_start else 0
        self.in_use = 0
        self._decrease = decrease
        self._cooldown_s = cooldown_s
        self._last_cut = float("-inf")
        self._clean = 0
        self._on_change = on_change
        self._clock = clock
        self._waiters: deque[asyncio.Future[None]] = deque()

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody queues for one, without waiting."""
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            elif future in self._waiters:  # `_wake` may have dropped it already, cancelled
                self._waiters.remove(future)
            raise

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_use < self.limit:
            future = self._waiters.popleft()
            if not future.done():
                self.in_use += 1
                future.set_result(None)

    def _set(self, new: int, why: str) -> None:
        old, self.limit = self.limit, new
        if self._on_change is not None and new != old:
            self._on_change(old, new, why)
        self._wake()

    def on_rate_limit(self) -> None:
        """Cut the cap, at most once per cooldown (one episode, one cut)."""
        self._clean = 0
        self._target = 0  # slow start ends at the first sign of the provider's limit
        now = self._clock()
        if now - self._last_cut < self._cooldown_s:
            return
        self._last_cut = now
        self._set(max(self.minimum, int(self.limit * self._decrease)), "rate_limit")

    def on_success(self) -> None:
        """Double while slow-starting, then grow by one after `limit` clean answers in a row."""
        if self.limit < self._target:
            self._set(min(self._target, self.limit * 2), "slow_start")
            return
        if self.limit >= self.maximum:
            return
        self._clean += 1
        if self._clean >= self.limit:
            self._clean = 0
            self._set(self.limit + 1, "clean")
