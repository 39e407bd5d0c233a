"""A lane whose replies are not in its provider's format at all stops (`Failure.foreign`).

A base_url pointing at a web page (a proxy's, a model server's web UI) answered every request
with HTML under HTTP 200: each was an `invalid_response`, re-asked up to the answer budget,
so a campaign of 3,100 queries spent 4,958 attempts and 79 s (and printed 3,289 warnings)
before it was killed by hand. Now the lane stops after `RetryPolicy.foreign_streak` such
replies in a row, naming what came back, unless one reply was in the format before. After
one was, such replies are a broken gateway's: a streak of them pauses the lane as a provider
down does (`engine.outage`), which probes instead of charging each request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest
from aiohttp import web

from engine.dispatch import dispatch, read_lane_states
from engine.lanes import LaneState
from engine.ledger import Ledger
from engine.outage import OutagePolicy, read_pauses
from engine.records import FOREIGN_NOTE, AttemptRecord
from engine.retry import ANSWER_FAILURE_CAUSES, RetryPolicy
from engine.scan import failure_counts, scan_attempts
from providers import openai as openai_provider
from providers.types import Failure, ModelConfig

if TYPE_CHECKING:
    from tests.engine.conftest import Kit, ServeAny

FAST = RetryPolicy(max_attempts=3, base_s=0.001, cap_s=0.002, max_retry_after_s=0.01)
#: Probes a few hundredths of a second apart: a streak of foreign replies after good ones
#: pauses the lane (`engine.outage`), and the default backoff's 2, 4, 8 s would slow the tests.
QUICK_PROBES = OutagePolicy(probe_base_s=0.01, probe_cap_s=0.05)
#: A torn body under HTTP 200 (a broken gateway's, as a tester's fake server sent it).
TORN = '{"choices": [ {"message": '
PAGE = "<html><body>Welcome to nginx!</body></html>"
Reply = Callable[[int], web.Response]


def _completion(number: int) -> web.Response:
    """An OpenAI-shaped chat completion answering the plan's single-key questions."""
    content = '{"probability": 0.4}'
    return web.json_response(
        {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content},
                 "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
    )  # fmt: skip


def _pages_after_one(number: int) -> web.Response:
    """A completion, then 15 pages in a row (more than the foreign streak), then completions."""
    if 2 <= number <= 16:
        return web.Response(text=PAGE, content_type="text/html")
    return _completion(number)


@pytest.fixture
def serve(serve_any: ServeAny) -> Callable[[Reply], Awaitable[str]]:
    """`serve_any` (conftest) answering the n-th request with `reply(n)`; returns base_url."""

    async def start(reply: Reply) -> str:
        count = [0]

        async def handler(request: web.Request) -> web.Response:
            await request.read()
            count[0] += 1
            return reply(count[0])

        return f"{await serve_any(handler)}/v1"

    return start


async def _dispatch(
    tmp_path: Path, kit: type[Kit], base_url: str, n: int, policy: RetryPolicy = FAST,
    concurrency: int = 2, max_down_s: float | None = None,
) -> Any:
    config = ModelConfig(
        name="m", provider="openai", model="m", base_url=base_url, max_tokens=64,
        concurrency=concurrency, max_down_s=max_down_s,
    )
    adapter = openai_provider.create_adapter(config, {})
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", n, grouped_every=0))
    return await dispatch(
        plan, tmp_path / "run", {"m": config}, {"m": adapter}, policy=policy,
        outage=QUICK_PROBES, log_console=None,
    )  # fmt: skip


async def test_a_web_page_at_base_url_stops_the_lane_naming_it(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    url = await serve(lambda n: web.Response(text=PAGE, content_type="text/html"))
    summary = await _dispatch(tmp_path, kit, url, 200)
    lane = summary.lanes["m"]
    assert lane.state is LaneState.STOPPED
    assert "its first 10 replies were not in the provider's format" in lane.message
    assert "Welcome to nginx" in lane.message and "base_url" in lane.message
    # The terminal's message names the lane; the reason kept for the audit does not.
    assert lane.message == f"m (openai) stopped: {lane.reason}"
    assert lane.reason.startswith("its first 10 replies")
    saved = read_lane_states(tmp_path / "run")
    assert saved is not None and saved["lanes"]["m"]["reason"] == lane.reason
    attempts = scan_attempts(tmp_path / "run").collect()
    # The streak, plus what was in flight when it ended (concurrency 2): not 3 x 200.
    assert 10 <= attempts.height <= 12, attempts.height
    assert set(attempts["outcome"]) == {"invalid_response"}


async def test_a_resume_whose_replies_turned_foreign_asks_whats_in_front(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    """A model that answered in this folder before and whose replies are now all web pages:
    its base_url was right then, so the stop asks what stands in front of the server now (a
    tester's resume behind a gateway broken between runs was asked to check its base_url)."""
    first = await _dispatch(tmp_path, kit, await serve(_completion), 20)
    assert first.lanes["m"].accepted == 20
    pages = await serve(lambda n: web.Response(text=PAGE, content_type="text/html"))
    summary = await _dispatch(tmp_path, kit, pages, 200)  # the same 20, then 180 more
    lane = summary.lanes["m"]
    assert lane.state is LaneState.STOPPED
    assert lane.reason.startswith("its first 10 replies were not in the provider's format")
    assert lane.reason.endswith(
        ", though it answered 20 requests in this folder before: is something in front of it "
        "now (a gateway, a proxy, a sign-in page), or has its base_url changed?"
    )


async def test_json_that_is_not_a_chat_completion_is_foreign_too(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    url = await serve(lambda n: web.json_response({"status": "ok", "version": "1.2"}))
    summary = await _dispatch(tmp_path, kit, url, 50)
    assert summary.lanes["m"].state is LaneState.STOPPED
    assert "reply has no choices" in summary.lanes["m"].message


async def test_after_one_reply_in_the_format_foreign_replies_never_stop_the_lane(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    """A real provider's odd reply now and then never stops its lane: one in the format
    first, then more pages in a row than the streak, then completions again. Every query is
    answered (its budgets wide enough that no request gives up among the pages)."""

    url = await serve(_pages_after_one)
    wide = RetryPolicy(max_attempts=20, max_answer_failures=20, base_s=0.001, cap_s=0.002)
    summary = await _dispatch(tmp_path, kit, url, 40, wide)
    assert summary.lanes["m"].state is LaneState.DONE, summary.lines()
    attempts = scan_attempts(tmp_path / "run").collect()
    assert (attempts["outcome"] == "invalid_response").sum() == 15
    assert summary.complete


def test_the_adapters_mark_only_replies_outside_their_format_as_foreign() -> None:
    config = ModelConfig(name="m", provider="openai", model="m", base_url="http://h/v1")
    adapter = openai_provider.create_adapter(config, {})
    page = adapter.parse(200, {}, PAGE.encode())
    choice = b'{"message": {"content": ""}, "finish_reason": "stop"}'
    empty = adapter.parse(200, {}, b'{"id": "x", "model": "m", "choices": [' + choice + b"]}")
    assert isinstance(page, Failure) and page.foreign
    # An empty answer is the model's, in the format: retried, never a reason to stop.
    assert isinstance(empty, Failure) and empty.outcome.value == "invalid_response"
    assert not empty.foreign


async def test_foreign_replies_spend_no_answer_failure_budget(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    """That budget lasts across resumes and is for the model's answers: a proxy's page now
    and then must not give a request up for good. With a budget of one, the 15 pages (two or
    more fall on some request at concurrency 2) give no request up, and each page's attempt
    says why it was not charged."""

    url = await serve(_pages_after_one)
    tight = RetryPolicy(max_attempts=20, max_answer_failures=1, base_s=0.001, cap_s=0.002)
    summary = await _dispatch(tmp_path, kit, url, 40, tight)
    assert summary.complete, summary.lines()
    assert summary.lanes["m"].retries.answer_budget_spent == 0
    attempts = scan_attempts(tmp_path / "run").collect()
    pages = attempts.filter(pl.col("outcome") == "invalid_response")
    assert pages.height == 15
    assert all(detail.endswith(FOREIGN_NOTE) for detail in pages["detail"])
    assert not any("gave up" in detail for detail in attempts["detail"])


async def test_the_budget_across_resumes_counts_answers_not_foreign_replies(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    """`failure_counts`, which a resume starts each request's budget from, counts an empty
    answer (the model's, in the format) and leaves out pages and JSON with no choices, in
    the shards and in a journal not yet compacted alike."""
    empty = {"id": "e", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}
    ]}  # fmt: skip

    def reply(number: int) -> web.Response:
        if number in (2, 3, 4):
            return web.Response(text=PAGE, content_type="text/html")
        if number == 5:
            return web.json_response({"status": "ok"})
        if number == 6:
            return web.json_response(empty)
        return _completion(number)

    url = await serve(reply)
    wide = RetryPolicy(max_attempts=20, max_answer_failures=5, base_s=0.001, cap_s=0.002)
    await _dispatch(tmp_path, kit, url, 10, wide)
    run = tmp_path / "run"
    attempts = scan_attempts(run).collect()
    failed = attempts.filter(pl.col("outcome") == "invalid_response")
    assert failed.height == 5
    ids = attempts["request_id"].unique().to_list()
    assert sum(failure_counts(run, ids, ANSWER_FAILURE_CAUSES).values()) == 1
    # The same rows read from a journal: written again by a ledger, not yet compacted.
    again = tmp_path / "journal-only"
    with Ledger(again) as ledger:
        for row in failed.iter_rows(named=True):
            ledger.record_result(AttemptRecord.from_row(row), None)
        assert sum(failure_counts(again, ids, ANSWER_FAILURE_CAUSES).values()) == 1


def _torn_between(first: int, last: int) -> Reply:
    """Completions, torn bodies for requests `first` to `last`, then completions again."""

    def reply(number: int) -> web.Response:
        if first <= number <= last:
            return web.Response(text=TORN, content_type="application/json")
        return _completion(number)

    return reply


async def test_a_streak_of_foreign_replies_after_good_ones_pauses_and_probes(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    """15 answers, then a gateway's torn bodies under HTTP 200: each request was asked
    `max_attempts` times (a tester's: 105 attempts for 15 answers, 15 requests given up),
    where a streak of 5xx pauses the lane. The streak pauses it now: it probes one request
    at a time, charges none, and finishes once the provider answers again."""
    url = await serve(_torn_between(16, 75))
    default = RetryPolicy(base_s=0.001, cap_s=0.002)  # six attempts a request
    summary = await _dispatch(tmp_path, kit, url, 40, default, concurrency=4)
    lane = summary.lanes["m"]
    assert summary.complete and lane.state is LaneState.DONE, summary.lines()
    assert lane.retries.exhausted == 0 and lane.pauses == 1
    [pause] = read_pauses(tmp_path / "run")
    assert pause["cause"].startswith("12 replies not in the provider's format in a row")
    assert pause["ended"] == "provider answered" and pause["probes"] >= 1
    # The streak and what was in flight as it ended were charged (a reply in the format
    # coming back late may restart it once); the rest were probes, one at a time.
    attempts = scan_attempts(tmp_path / "run").collect()
    assert (attempts["outcome"] == "invalid_response").sum() == 60
    assert pause["probes"] >= 60 - 2 * 12


async def test_a_streak_of_foreign_replies_that_never_ends_stops_at_max_down_s(
    tmp_path: Path, kit: type[Kit], serve: Any
) -> None:
    """As a provider down past its model's `max_down_s` stops its lane: in one line saying
    how long, what the streak was and what came last."""
    url = await serve(_torn_between(6, 10**9))
    default = RetryPolicy(base_s=0.001, cap_s=0.002)
    summary = await _dispatch(tmp_path, kit, url, 40, default, concurrency=4, max_down_s=0.3)
    lane = summary.lanes["m"]
    assert lane.state is LaneState.STOPPED and not summary.complete, summary.lines()
    assert lane.message.startswith("m (openai) stopped after its provider was down 0:0")
    assert "past its max_down_s of 0.3s (12 replies not in the provider's format" in lane.message
    assert "unparseable body" in lane.message, lane.message
    assert lane.retries.exhausted == 0
    [pause] = read_pauses(tmp_path / "run")
    assert pause["ended"] == "lane stopped while down"


async def test_replies_too_long_after_good_ones_are_the_models_not_an_outage(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """A reply longer than `MAX_REPLY_BYTES` is foreign (not read, so not in the format),
    but it is the model's (a rambling answer), not a broken gateway's: a streak of them
    paused the lane as a provider down, whose probes charge nothing, so a model that always
    rambled was probed for ever. Each is charged to its request, as before the pause rule."""
    from engine.http import MAX_REPLY_BYTES

    count = [0]

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        count[0] += 1
        if not 2 <= count[0] <= 31:
            return _completion(count[0])
        reply = web.StreamResponse(headers={"Content-Type": "application/json"})
        reply.content_length = MAX_REPLY_BYTES + 1  # declared: the engine reads no further
        await reply.prepare(request)
        await reply.write(b'{"id": "chatcmpl-long", "choices": [')
        return reply

    url = f"{await serve_any(handler)}/v1"
    summary = await _dispatch(tmp_path, kit, url, 20, concurrency=1)
    lane = summary.lanes["m"]
    assert lane.pauses == 0 and read_pauses(tmp_path / "run") == [], summary.lines()
    assert lane.retries.exhausted == 10, summary.lines()  # 30 replies, 3 attempts each
