"""A stop (a signal) that waits for attempts in flight says so, and for how long at most.

After one Ctrl-C or SIGTERM the run starts nothing more and waits for the attempts in flight,
whose answers are paid for. A provider that hung held such a stop for its `timeout_s` (a
tester's 600 s), and nothing said why: the lane said "running", its progress line "0.0/s, ETA
?", `logs/lanes.json` (what `status` reads) "running" with nothing of the stop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest
from aiohttp import web
from rich.console import Console

from engine import dispatch as dispatch_module
from engine.dispatch import dispatch
from engine.lanefile import read_lane_states
from engine.lanes import Lane, LaneState, LaneStats
from engine.ledger import Ledger
from engine.logs import EngineLog
from engine.outage import OutagePolicy
from engine.progress import progress_line, render
from engine.retry import RetryPolicy
from engine.runlock import write_pid
from engine.status import status
from providers import openai as openai_provider
from providers.types import ModelConfig
from runs.commands.status import render as render_status

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from providers.base import Adapter
    from providers.types import ChatRequest, HttpRequest
    from tests.engine.conftest import Kit, ServeAny

TIMEOUT_S = 30.0
ONCE = RetryPolicy(max_attempts=1, base_s=0.001, cap_s=0.002)
#: No cut at a provider that never answered (a wait as long as `TIMEOUT_S` is none): where
#: the cut is not under test, a stop waits for the attempt's `timeout_s`.
NO_CUT = OutagePolicy(unanswered_stop_wait_s=TIMEOUT_S)


class _Lanes:
    """A progress sink that keeps the lanes' live counters for the test to read."""

    def __init__(self) -> None:
        self.lanes: list[LaneStats] = []

    def start(self, lanes: list[LaneStats]) -> None:
        self.lanes = lanes

    def refresh(self) -> None:
        return None

    def stop(self) -> None:
        return None


def _answer() -> web.Response:
    choice = {"index": 0, "finish_reason": "stop",
              "message": {"role": "assistant", "content": '{"probability": 0.6}'}}  # fmt: skip
    return web.json_response({"id": "c1", "model": "m", "choices": [choice]})


async def _until(done: Callable[[], bool]) -> None:
    """Wait until `done()` holds, looking every hundredth of a second (under a caller's
    `asyncio.timeout`)."""
    while not done():
        await asyncio.sleep(0.01)


async def _lane_file_says_stopping(run_dir: Path) -> dict[str, object]:
    """`logs/lanes.json`'s lane once it says the stop (dispatch rewrites it every second)."""
    async with asyncio.timeout(10):
        while True:
            lane = ((read_lane_states(run_dir) or {}).get("lanes") or {}).get("m") or {}
            if lane.get("state") == "cancelled":
                return lane
            await asyncio.sleep(0.05)


def _hanging(
    released: asyncio.Event, *, seen: asyncio.Event | None = None,
    counted: list[int] | None = None,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A provider's handler that holds every request until `released` (a hung provider),
    setting `seen` and counting each in `counted[0]` as it comes."""

    async def hang(request: web.Request) -> web.Response:
        await request.read()
        if seen is not None:
            seen.set()
        if counted is not None:
            counted[0] += 1
        await released.wait()
        return _answer()

    return hang


async def test_a_stop_waiting_on_a_hung_attempt_says_so_and_keeps_its_answer(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    asked, answer = asyncio.Event(), asyncio.Event()

    hang = _hanging(answer, seen=asked)  # a provider that does not answer until told

    url = f"{await serve_any(hang)}/v1"
    config = ModelConfig(name="m", provider="openai", model="m", base_url=url, max_tokens=64,
                         concurrency=4, timeout_s=TIMEOUT_S)  # fmt: skip
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 6, grouped_every=0))
    stop, sink = asyncio.Event(), _Lanes()
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", {"m": config}, {"m": openai_provider.create_adapter(config, {})},
        progress=sink, policy=ONCE, log_console=None, stop_event=stop, parser="lenient",
        outage=NO_CUT,  # its provider never answered: no cut, the wait is to its timeout_s
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            await asyncio.wait({asyncio.ensure_future(asked.wait()), run},
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        assert asked.is_set(), run.result().lines()
        stop.set()
        lane = await _lane_file_says_stopping(tmp_path / "run")
        assert lane["reason"] == "stop requested" and lane["in_flight"] == 1
        assert 0 < lane["stop_wait_s"] <= TIMEOUT_S  # type: ignore[operator]
        line = progress_line(sink.lanes, 60.0)
        assert line.startswith("dispatch 1:00: m cancelled 0/6 — stopping: waiting for 1 attempt "
                               "in flight, up to 0:")  # fmt: skip
        assert line.endswith(" more (its timeout_s); signal again to stop at once")
        assert render(sink.lanes).caption == line.partition(" — ")[2]  # the live table's too
    finally:
        answer.set()  # failed or not: the server's teardown waits for its handlers
    summary = await asyncio.wait_for(run, 10)
    stats = summary.lanes["m"]
    assert stats.accepted == 1 and stats.state is LaneState.CANCELLED  # its answer is kept
    assert stats.stop_wait_s is None and "stopping" not in progress_line([stats], 61.0)
    assert (read_lane_states(tmp_path / "run") or {})["lanes"]["m"]["stop_wait_s"] is None


async def test_a_lane_done_before_the_stop_stays_done(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """The stop is told to every lane: one that had finished is not said "cancelled"."""
    released = asyncio.Event()  # at the end: the server's teardown waits for its handlers

    hang = _hanging(released)

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return _answer()

    url = f"{await serve_any(answer)}/v1"
    config = ModelConfig(name="m", provider="openai", model="m", base_url=url, max_tokens=64)
    hung = ModelConfig(name="h", provider="openai", model="h", max_tokens=64, timeout_s=2.0,
                       base_url=f"{await serve_any(hang)}/v1")  # fmt: skip
    rows = kit.plan_rows("m", 2, grouped_every=0) + kit.plan_rows("h", 1, grouped_every=0)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    stop = asyncio.Event()
    adapters = {c.name: openai_provider.create_adapter(c, {}) for c in (config, hung)}
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", {"m": config, "h": hung}, adapters, policy=ONCE,
        log_console=None, stop_event=stop, parser="lenient",
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            while ((read_lane_states(tmp_path / "run") or {}).get("lanes") or {}).get(
                "m", {}
            ).get("state") != "done":
                await asyncio.sleep(0.05)
        stop.set()
        summary = await asyncio.wait_for(run, 20)
    finally:
        released.set()
    assert summary.lanes["m"].state is LaneState.DONE
    assert summary.lanes["h"].state is LaneState.CANCELLED


def _model(url: str, **options: Any) -> tuple[ModelConfig, dict[str, Adapter]]:
    config = ModelConfig(name="m", provider="openai", model="m", base_url=f"{url}/v1",
                         max_tokens=64, timeout_s=TIMEOUT_S, **options)  # fmt: skip
    return config, {"m": openai_provider.create_adapter(config, {})}


def _assert_status_says_the_cut(run_dir: Path) -> None:
    """`status --json` and `status` of a live run whose stop will cut its attempt in flight
    (this process stands for the run's writer: its pid file)."""
    write_pid(run_dir)
    summary = status(run_dir)
    assert summary["state"] == "live" and summary["models"]["m"]["lane_stop_wait_cut"] is True
    assert summary["stopping"]["cut"] is True and summary["stopping"]["attempts_in_flight"] == 1
    flying = summary["models"]["m"]["lane_in_flight"]
    assert (flying, type(flying)) == (1, int)  # a count, as `in_flight` is (it read 1.0)
    console = Console(record=True, width=300, color_system=None)
    render_status(summary, console)
    said = console.export_text()
    assert "stopping: waiting for 1 attempt in flight, up to 0:0" in said
    assert (f"more (no answer yet from the provider: then cut, and asked again by the next "
            f"run); signal it again (`kill {os.getpid()}`) to stop at once") in said  # fmt: skip


async def test_a_stop_cuts_what_a_provider_that_never_answered_holds(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """A provider that has not answered once: the stop waits `unanswered_stop_wait_s`, not
    the attempt's `timeout_s`, then cuts it (the next run records it as interrupted)."""
    asked, released = asyncio.Event(), asyncio.Event()

    hang = _hanging(released, seen=asked)

    config, adapters = _model(await serve_any(hang), concurrency=4)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 6, grouped_every=0))
    stop, sink = asyncio.Event(), _Lanes()
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", {"m": config}, adapters, progress=sink, policy=ONCE,
        log_console=None, stop_event=stop, parser="lenient",
        outage=OutagePolicy(unanswered_stop_wait_s=3.0),  # time to read lanes.json and status
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            await asyncio.wait({asyncio.ensure_future(asked.wait()), run},
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            stop.set()
            stopped = time.monotonic()
            await _until(lambda: sink.lanes[0].stop_wait_s is not None)  # the loop's next turns
        assert "up to 0:02 more (no answer yet from the provider: then cut, and asked again " \
            "by the next run); signal again" in progress_line(sink.lanes, 60.0)  # fmt: skip
        lane = await _lane_file_says_stopping(tmp_path / "run")
        assert lane["stop_wait_cut"] is True and lane["cut_at_stop"] == 0  # not cut yet
        _assert_status_says_the_cut(tmp_path / "run")
        summary = await asyncio.wait_for(run, 10)
    finally:
        released.set()
    assert (read_lane_states(tmp_path / "run") or {})["lanes"]["m"]["cut_at_stop"] == 1
    assert time.monotonic() - stopped < TIMEOUT_S / 3  # its 30 s timeout is not waited out
    stats = summary.lanes["m"]
    assert stats.cut_at_stop == 1 and stats.in_flight == 0 and stats.attempts == 0
    assert stats.state is LaneState.CANCELLED
    assert stats.reason.startswith("stop requested; 1 attempt in flight cut after 0:03")
    assert Ledger.open(tmp_path / "run").interrupted_recovered == 1  # asked again next run


async def test_a_stop_waits_for_a_provider_that_answered(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """The cut is for a provider that never answered: one that did is waited for, past
    `unanswered_stop_wait_s`, and the answers in flight are kept."""
    asked, released = [0], asyncio.Event()

    async def first_then_hang(request: web.Request) -> web.Response:
        await request.read()
        asked[0] += 1
        if asked[0] > 1:
            await released.wait()
        return _answer()

    config, adapters = _model(await serve_any(first_then_hang), concurrency=1)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 6, grouped_every=0))
    stop = asyncio.Event()
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", {"m": config}, adapters, policy=ONCE, log_console=None,
        stop_event=stop, parser="lenient", outage=OutagePolicy(unanswered_stop_wait_s=0.2),
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            await _until(lambda: asked[0] >= 2)
        stop.set()
        lane = await _lane_file_says_stopping(tmp_path / "run")
        assert lane["stop_wait_cut"] is False
        await asyncio.sleep(1.0)  # past the cut a provider that never answered gets
        assert not run.done()
    finally:
        released.set()
    stats = (await asyncio.wait_for(run, 10)).lanes["m"]
    assert stats.accepted == 2 and stats.cut_at_stop == 0


async def test_a_stop_cuts_a_probe_of_a_provider_down(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """A provider that answered, then went down: the lane probes it one request at a time,
    and a probe that hung held the stop its whole `timeout_s` (a tester's 10 minutes), where
    a first request is cut after `unanswered_stop_wait_s`. A probe is cut alike."""
    asked, released = [0], asyncio.Event()

    async def answer_fail_then_hang(request: web.Request) -> web.Response:
        await request.read()
        asked[0] += 1
        if asked[0] == 1:
            return _answer()
        if asked[0] <= 3:
            return web.Response(status=500, text="down")
        await released.wait()
        return _answer()

    config, adapters = _model(await serve_any(answer_fail_then_hang), concurrency=1)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 6, grouped_every=0))
    stop = asyncio.Event()
    down_at_two = OutagePolicy(streak=2, probe_base_s=0.01, unanswered_stop_wait_s=0.2)
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", {"m": config}, adapters, log_console=None, stop_event=stop,
        policy=RetryPolicy(max_attempts=3, base_s=0.001, cap_s=0.002), parser="lenient",
        outage=down_at_two,
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            await _until(lambda: asked[0] >= 4)  # the probe, hung
            stop.set()
            stats = (await run).lanes["m"]
    finally:
        released.set()
    assert (stats.accepted, stats.pauses, stats.cut_at_stop) == (1, 1, 1), stats.message
    assert "in flight cut after 0:00, its provider down: the next run records it" in (
        stats.message
    )


class _BlockedBuild:
    """A real adapter whose `build` blocks its thread (a Vertex or Bedrock token refresh)
    until the test lets it go, saying when the first build began."""

    may_block = True

    def __init__(self, inner: Adapter) -> None:
        self.inner, self.provider, self.secrets = inner, inner.provider, inner.secrets
        self.building, self.go = threading.Event(), threading.Event()

    def build(self, req: ChatRequest) -> HttpRequest:
        self.building.set()
        self.go.wait(TIMEOUT_S)
        return self.inner.build(req)

    def parse(self, status, headers, body):  # type: ignore[no-untyped-def]
        return self.inner.parse(status, headers, body)


async def test_a_build_that_ends_after_the_stop_sends_nothing(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny
) -> None:
    """A worker whose build blocked across the stop sent its request after it: a request
    paid for after the stop, and, as nothing was in flight when the stop came, no cut: a
    hung provider held the stop for the attempt's whole `timeout_s`."""
    sent, released = [0], asyncio.Event()

    hang = _hanging(released, counted=sent)

    config, adapters = _model(await serve_any(hang), concurrency=1)
    blocked = _BlockedBuild(adapters["m"])
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 2, grouped_every=0))
    stop = asyncio.Event()
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", {"m": config}, {"m": blocked}, policy=ONCE, log_console=None,
        stop_event=stop, parser="lenient", outage=OutagePolicy(unanswered_stop_wait_s=1.0),
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            await _until(blocked.building.is_set)
            stop.set()
            await asyncio.sleep(0.2)  # the lanes are told
            blocked.go.set()
            summary = await asyncio.wait_for(asyncio.shield(run), 5)
    finally:
        blocked.go.set()
        released.set()
    assert sent[0] == 0 and summary.lanes["m"].attempts == 0
    assert summary.lanes["m"].state is LaneState.CANCELLED


async def test_a_cut_declined_says_the_wait_to_the_timeout(tmp_path: Path) -> None:
    """The provider answered before the cut was due: the stop waits for what it has in flight
    as for any provider that answered, and says so, not "no answer yet ... then cut" at 0:00."""
    config, adapters = _model("http://127.0.0.1:9", concurrency=1)
    stop = asyncio.Event()
    lane = Lane(
        config, adapters["m"], cast("Any", SimpleNamespace(disk_full=None)), cast("Any", None),
        EngineLog(tmp_path), stop_event=stop, outage=OutagePolicy(unanswered_stop_wait_s=0.05),
    )  # fmt: skip
    assert lane.stats.stop_wait_until is None  # no stop asked
    lane.stats.in_flight = 1  # an attempt in flight at a provider that has not answered
    stop.set()
    lane.on_stop()
    assert lane.stats.stop_wait_cut and (lane.stats.stop_wait_s or 0) <= 0.05
    lane._replied()  # its answer comes before the cut is due
    await asyncio.sleep(0.2)
    assert lane.stats.cut_at_stop == 0 and not lane.stats.stop_wait_cut
    assert TIMEOUT_S - 1 < (lane.stats.stop_wait_s or 0) <= TIMEOUT_S
    assert "(its timeout_s)" in progress_line([lane.stats], 1.0)


async def test_a_lane_that_fails_to_take_the_stop_is_logged_and_the_rest_are_told(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gather(return_exceptions=True)` swallowed a lane's `on_stop` that raised, and the
    lanes after it were never told."""
    asked, released = [0], asyncio.Event()

    hang = _hanging(released, counted=asked)

    url = f"{await serve_any(hang)}/v1"
    configs = {n: ModelConfig(name=n, provider="openai", model=n, base_url=url, max_tokens=64,
                              timeout_s=TIMEOUT_S) for n in ("a", "b")}  # fmt: skip
    told: list[str] = []
    on_stop = Lane.on_stop

    def first_fails(self: Lane) -> None:
        told.append(self.config.name)
        if len(told) == 1:
            raise RuntimeError("lane broke")
        on_stop(self)

    monkeypatch.setattr(Lane, "on_stop", first_fails)
    rows = kit.plan_rows("a", 1, grouped_every=0) + kit.plan_rows("b", 1, grouped_every=0)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    stop, sink = asyncio.Event(), _Lanes()
    run = asyncio.create_task(dispatch(
        plan, tmp_path / "run", configs,
        {n: openai_provider.create_adapter(c, {}) for n, c in configs.items()}, progress=sink,
        policy=ONCE, log_console=None, stop_event=stop, parser="lenient", outage=NO_CUT,
    ))  # fmt: skip
    try:
        async with asyncio.timeout(10):
            await _until(lambda: asked[0] >= 2)
            stop.set()
            await _until(lambda: len(told) >= 2)
        second = next(s for s in sink.lanes if s.model == told[1])
        assert second.stop_wait_s is not None  # told, though the first raised
    finally:
        released.set()
    await asyncio.wait_for(run, 10)
    logged = (tmp_path / "run" / "logs" / "engine.jsonl").read_text()
    assert "stop_not_told" in logged and "lane broke" in logged


async def test_a_helper_that_fails_is_logged(
    tmp_path: Path, kit: type[Kit], serve_any: ServeAny, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return _answer()

    async def broken(*_: object) -> None:
        raise RuntimeError("helper broke")

    monkeypatch.setattr(dispatch_module, "_tell_stop", broken)
    config, adapters = _model(await serve_any(answer))
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 1, grouped_every=0))
    await asyncio.wait_for(dispatch(
        plan, tmp_path / "run", {"m": config}, adapters, policy=ONCE, log_console=None,
        stop_event=asyncio.Event(), parser="lenient",
    ), 10)  # fmt: skip
    logged = (tmp_path / "run" / "logs" / "engine.jsonl").read_text()
    assert "helper_failed" in logged and "tell_stop" in logged and "helper broke" in logged
