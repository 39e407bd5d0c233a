"""A reply with the model's answer is a reply, usable or not (an answer failure).

A model that answered in fractions under the strict parser, every reply an answer failure,
never had a "successful" reply: its lane stayed at slow start's one request at a time for the
whole run, and three server errors in a row paused it as if its provider had never answered
(`OutagePolicy.unanswered_streak`), where a lane with answers pauses after twelve. And the
retry that follows a truncation, sent with a doubled cap, is reserved at that cap.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web

from engine.dispatch import DispatchSummary, dispatch
from engine.outage import read_pauses
from engine.retry import RetryPolicy
from tests.engine.test_foreign_replies import _dispatch

if TYPE_CHECKING:
    from tests.engine.conftest import Kit, ServeAny

#: One answer failure per request: each is asked once, then given up.
ONCE = RetryPolicy(max_attempts=1, max_answer_failures=1, base_s=0.001, cap_s=0.002)


def _empty_answer(number: int) -> web.Response:
    """A chat completion in the format whose answer is empty: an `invalid_response`."""
    choice = {"index": 0, "message": {"role": "assistant", "content": ""},
              "finish_reason": "stop"}  # fmt: skip
    return web.json_response({"id": f"c{number}", "model": "m", "choices": [choice]})


async def test_answer_failures_let_the_lane_leave_slow_start(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    in_flight, peak, count = [0], [0], [0]

    async def handler(request: web.Request) -> web.Response:
        await request.read()
        count[0] += 1
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.02)  # long enough for requests to overlap where the cap allows
        in_flight[0] -= 1
        return _empty_answer(count[0])

    url = f"{await serve_any(handler)}/v1"
    summary = await _dispatch(tmp_path, kit, url, 60, ONCE, concurrency=8)
    assert summary.lanes["m"].retries.answer_budget_spent == 60, summary.lines()
    assert peak[0] == 8  # 1 before: never past slow start's first step


async def test_server_errors_between_answer_failures_pause_no_lane_after_three(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """One request at a time: an answer failure, three HTTP 500s in a row, answer failures."""
    count = [0]

    async def handler(request: web.Request) -> web.Response:
        await request.read()
        count[0] += 1
        if 2 <= count[0] <= 4:
            return web.json_response({"error": {"message": "busy"}}, status=500)
        return _empty_answer(count[0])

    url = f"{await serve_any(handler)}/v1"
    policy = RetryPolicy(max_attempts=8, max_answer_failures=1, base_s=0.001, cap_s=0.002)
    summary = await _dispatch(tmp_path, kit, url, 6, policy, concurrency=1)
    assert summary.lanes["m"].retries.answer_budget_spent == 6, summary.lines()
    assert count[0] == 9  # six answers and the three errors, no probe
    assert read_pauses(tmp_path / "run") == []


async def _cut_off(serve_any: ServeAny, caps: list[int]) -> str:
    """A server whose every reply is cut at its output cap, using all of it; `caps` gets
    each request's `max_tokens`."""

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        caps.append(int(body["max_tokens"]))
        choice = {"index": 0, "message": {"role": "assistant", "content": "0."},
                  "finish_reason": "length"}  # fmt: skip
        usage = {"prompt_tokens": 0, "completion_tokens": caps[-1]}
        return web.json_response({"id": "c", "model": "m", "choices": [choice], "usage": usage})

    return await serve_any(handler)


async def _one_request_cut_off(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny, caps: list[int], attempts: int,
    budget_usd: float | None = None, **model: Any,
) -> DispatchSummary:
    """One request of an OpenAI-format model (`max_tokens` 1,000, `model`'s other keys) to
    `_cut_off`'s server, with `attempts` attempts and as many answer failures allowed."""
    from providers import openai as openai_provider
    from providers.types import ModelConfig

    config = ModelConfig(
        name="m", provider="openai", model="m", base_url=f"{await _cut_off(serve_any, caps)}/v1",
        max_tokens=1000, concurrency=1, **model,
    )  # fmt: skip
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 1, grouped_every=0))
    policy = RetryPolicy(max_attempts=attempts, max_answer_failures=attempts, base_s=0.001,
                         cap_s=0.002)  # fmt: skip
    return await dispatch(
        plan, tmp_path / "run", {"m": config}, {"m": openai_provider.create_adapter(config, {})},
        policy=policy, budget_usd=budget_usd, log_console=None,
    )  # fmt: skip


async def test_a_retry_with_a_doubled_cap_is_reserved_at_that_cap(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """Every reply cut at its cap: the retry after a truncation doubles the cap, and the
    spend cap reserved it at the spec's. At $1 an attempt of 1,000 tokens and a cap of $2.50,
    the second attempt (2,000 tokens, $2) was sent and $3.00 spent; now it does not fit."""

    caps: list[int] = []
    summary = await _one_request_cut_off(
        tmp_path, kit, serve_any, caps, attempts=3, budget_usd=2.5,
        price_in_per_mtok=0.0, price_out_per_mtok=1000.0,
    )  # fmt: skip
    assert caps == [1000]  # 2000 would be $1.00 + $2.00 > $2.50
    assert summary.spend is not None and summary.spend.spent_usd == 1.0
    assert summary.spend_cap_reached


async def test_a_retry_with_a_doubled_cap_is_paced_at_that_cap(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `tpm` twin of the spend cap's: the retry after a truncation is sent with twice the
    output cap, and the tokens bucket was charged the spec's cap for it (half its worst)."""
    from engine.limits import TokenBucket

    caps: list[int] = []
    charged: list[float] = []
    take = TokenBucket.try_acquire

    def recording(bucket: TokenBucket, amount: float = 1.0) -> bool:
        if amount != 1:  # the requests bucket takes one a request; the tokens bucket more
            charged.append(amount)
        return take(bucket, amount)

    monkeypatch.setattr(TokenBucket, "try_acquire", recording)
    await _one_request_cut_off(tmp_path, kit, serve_any, caps, attempts=2, rpm=10_000,
                               tpm=1_000_000)  # fmt: skip
    assert caps == [1000, 2000]
    assert len(charged) == 2 and charged[1] - charged[0] == 1000, charged
