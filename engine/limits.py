"""Request-rate and token-rate pacing for one lane.

Why a hand-written bucket rather than asyncio-throttle: `asyncio_throttle.Throttler` counts
whole tasks in a sliding window and polls (`retry_interval`, 10 ms by default). That fits
neither job here. Spread evenly (rate 1 per period) its polling lag loses about 5% of a
600 rpm budget and more as the rate grows, below the 95%-of-limit target; left as one window
of `rpm` it bursts a whole minute's budget at once, which a token-bucket provider answers with
429s. It cannot take a weighted acquire (a token-rate limit charges an estimate of the call's
tokens), cannot be corrected after the call from reported usage, and cannot be held shut until
a provider's reset time. `TokenBucket` does all four with exact sleeps and FIFO order.

Safety margin: a bucket of capacity `c` (one unit at least) refilled at `r` per second admits
fewer than `c + r * 60` units in any half-open 60-second window, so a refill rate of
`(floor(limit) * (1 - margin) - c + 1) / 60` keeps this lane at or under `limit` per minute
whatever window algorithm the provider uses (fewer than `floor(limit) + 1` whole requests),
with `margin` (2%) to spare for requests bunched up in transit.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable


def whole_per_minute(limit: float) -> int:
    """The whole requests a minute a per-minute `limit` allows: 10 of 10.5 (a lane's bucket
    paces a request limit by it, and `plan`'s floor and a lane's time left count by it)."""
    return math.floor(limit)


class TokenBucket:
    """A continuously refilled bucket; `acquire(n)` waits in FIFO order until `n` are there.

    The level may go negative: an acquire larger than the capacity is let through once the
    bucket is full and leaves a debt, and `adjust` books the difference between an estimate
    and the reported usage. Debts are paid by later callers waiting longer, so the long-run
    rate is exact even when single calls are bigger than the burst.

    A refund reaches a caller already asleep only when it wakes, and the level never rises
    above the capacity: under a tpm limit with callers queued, a lane is in effect paced by
    each call's prompt and `max_tokens` (measured on 2026-12-04: 4 of 28 calls in the first
    minute at tpm 8,000 and max_tokens 2,048, where a re-look every second let 15 through).
    That is what Azure counts on arrival, and kept so (`docs/performance.md`).
    """

    def __init__(
        self,
        rate_per_s: float,
        capacity: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_per_s <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate_per_s = rate_per_s
        self.capacity = capacity
        self._clock = clock
        self._level = capacity
        self._stamp = clock()
        self._hold_until = 0.0
        self._lock = asyncio.Lock()
        self._queued = 0  # callers inside `acquire`: `try_acquire` must not overtake them

    @classmethod
    def per_minute(
        cls,
        limit: float,
        burst_s: float = 0.1,
        margin: float = 0.02,
        clock: Callable[[], float] = time.monotonic,
    ) -> TokenBucket:
        """A bucket that never admits more than `limit` in any 60 s (see module docstring).

        The burst is `burst_s` worth of budget (at least one unit), so a late wake-up of the
        event loop does not waste budget at high rates; `margin` keeps a little of the limit
        unused so that requests bunched up in transit still arrive under it.
        """
        if limit <= 1:
            raise ValueError(f"a per-minute limit must exceed 1, got {limit}")
        # At least one unit: a bucket holding less (a quarter of a limit under 4) takes a
        # unit at less than one, so the bound below held no more (rpm 2 let 3 through in a
        # minute, and 2.46 a minute in the long run).
        capacity = max(1.0, min(limit * burst_s / 60.0, limit / 4))
        # Whole units: fewer than `usable + 1` in any minute is at most `floor(limit)` (10.5
        # let 11 through, when 2% of it is under one unit), the margin kept below that.
        usable = whole_per_minute(limit) * (1.0 - margin)
        return cls((usable - capacity + 1.0) / 60.0, capacity, clock)

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate_per_s)
            self._stamp = now

    @property
    def level(self) -> float:
        self._refill(self._clock())
        return self._level

    def try_take(self, amount: float, now: float) -> float:
        """Take `amount` at time `now` and return 0, or return the seconds to wait first.

        The clock is a parameter so the pacing rule can be checked without sleeping.
        """
        self._refill(now)
        wait = self._hold_until - now
        if wait > 0:
            return wait
        need = min(amount, self.capacity)
        if self._level >= need:
            self._level -= amount
            return 0.0
        return max((need - self._level) / self.rate_per_s, 1e-6)

    def try_acquire(self, amount: float = 1.0) -> bool:
        """Take `amount` now if nobody waits and it is there (`acquire` without the wait)."""
        return not self._queued and self.try_take(amount, self._clock()) == 0

    async def acquire(self, amount: float = 1.0) -> None:
        """Wait (FIFO among callers) until `amount`, clipped to the capacity, can be taken."""
        self._queued += 1
        try:
            async with self._lock:
                while (wait := self.try_take(amount, self._clock())) > 0:
                    await asyncio.sleep(wait)
        finally:
            self._queued -= 1

    def adjust(self, extra: float) -> None:
        """Charge `extra` more (or refund, if negative) after the fact: usage correction."""
        self._refill(self._clock())
        self._level = min(self.capacity, self._level - extra)

    def hold(self, seconds: float) -> None:
        """Admit nothing for `seconds` from now and start again empty (a provider's reset)."""
        now = self._clock()
        self._hold_until = max(self._hold_until, now + seconds)
        self._level = min(self._level, 0.0)
        self._stamp = max(self._stamp, self._hold_until)


class Hold:
    """A lane-wide pause (Retry-After) that every attempt waits out before it is sent."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.until = 0.0

    def extend(self, seconds: float) -> None:
        self.until = max(self.until, self._clock() + seconds)

    def remaining(self) -> float:
        return max(0.0, self.until - self._clock())

    async def wait(self) -> None:
        while (left := self.remaining()) > 0:
            await asyncio.sleep(left)


def estimate_tokens(
    system: str, user: str, max_tokens: int | None, default_output: int = 256
) -> int:
    """Tokens one call may use, before it is made: prompt characters / 4 plus the output cap.

    Four characters per token is the usual English estimate; the bucket is corrected from the
    usage the provider reports, so the estimate only needs to be right on average.
    """
    return (len(system) + len(user)) // 4 + (max_tokens if max_tokens else default_output)
