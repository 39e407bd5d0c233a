"""The simulator's own rate limit: a sliding window it enforces, counted apart from faults."""

from __future__ import annotations

import aiohttp
from simkit import chat_body

from providers.sim.ratelimit import SlidingWindowLimiter
from providers.sim.server import start_sim


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_window_admits_rpm_then_says_how_long_to_wait() -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(3, clock=clock)
    assert [limiter.admit("m") for _ in range(3)] == [None, None, None]
    clock.now += 20
    wait = limiter.admit("m")
    assert wait is not None and abs(wait - 40.0) < 1e-9
    assert limiter.admit("other") is None  # each model has its own window
    clock.now += 40.001
    assert limiter.remaining("m") == 3
    assert limiter.admit("m") is None


def test_window_slides_rather_than_resetting() -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(2, clock=clock)
    limiter.admit("m")
    clock.now += 30
    limiter.admit("m")
    clock.now += 31  # the first has left the window, the second has not
    assert limiter.admit("m") is None
    assert limiter.admit("m") is not None


async def test_server_enforces_rpm_with_retry_after_and_counts_it_apart() -> None:
    async with await start_sim(rate_limit_rpm=5, faults="none") as sim:
        async with aiohttp.ClientSession() as http:
            statuses = []
            for _ in range(8):
                async with http.post(sim.root_url + "/sim/v1/chat/completions",
                                     json=chat_body("sim-a")) as resp:
                    statuses.append(resp.status)
                    if resp.status == 429:
                        retry_after = float(resp.headers["Retry-After"])
                        assert 0 < retry_after <= 60
            async with http.post(sim.root_url + "/sim/v1/chat/completions",
                                 json=chat_body("sim-b")) as resp:
                other_model = resp.status
        counts = sim.counts()
    assert statuses == [200] * 5 + [429] * 3
    assert other_model == 200
    assert counts["rate_limiter.429"] == 3
    assert counts["answered.sim"] == 6
    assert not any(key.startswith("fault.") for key in counts)


def test_token_window_weighs_each_request_by_its_cost() -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(100, clock=clock)
    assert limiter.admit("m", 60) is None
    clock.now += 10
    assert limiter.admit("m", 30) is None
    clock.now += 10
    wait = limiter.check("m", 30)  # 90 spent: needs the first entry (60) to leave
    assert wait is not None and abs(wait - 40.0) < 1e-9
    assert limiter.check("m", 10) is None and limiter.remaining("m") == 10
    clock.now += 40.001
    assert limiter.admit("m", 30) is None


def test_a_request_larger_than_the_window_is_admitted_only_alone() -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(50, clock=clock)
    assert limiter.admit("m", 80) is None  # an empty window takes it rather than starve it
    assert limiter.admit("m", 1) is not None
    clock.now += 61
    assert limiter.admit("m", 1) is None
    assert limiter.admit("m", 80) is not None


async def test_server_enforces_tokens_per_minute_and_rpm_together() -> None:
    async with await start_sim(rate_limit_tpm=20, rate_limit_rpm=100) as sim:
        async with aiohttp.ClientSession() as http:
            statuses = []
            for _ in range(4):
                async with http.post(sim.root_url + "/sim/v1/chat/completions",
                                     json=chat_body("sim-a")) as resp:
                    body = await resp.json()
                    statuses.append(resp.status)
                    if resp.status == 200:
                        assert body["usage"]["total_tokens"] <= 10
        counts = sim.counts()
    assert statuses[:2] == [200, 200] and 429 in statuses
    assert counts["rate_limiter.tpm_429"] == counts["rate_limiter.429"] == statuses.count(429)
