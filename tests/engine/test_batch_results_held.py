"""A batch lane holds at most `RESULTS_HELD` jobs' results in memory at once.

A results file of a paper-scale job is 100-200 MB, read whole and split into lines; jobs that
ended together (Bedrock allows 20 in flight) were all downloaded and held at once, and a
tester's single 400 MB file took the run to 0.99 GB.

The overlap is made, not hoped for: no job ends before all ten are created, so they end
together and a lane without the limit downloads them all at once, and the first download
waits (boundedly) until a second one starts, so a lane with the limit reaches it however
slow the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import engine.batch_lane as batch_lane
from engine.dispatch import dispatch
from engine.retry import RetryPolicy
from providers.types import ModelConfig
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from providers.batch import Fetch, JobState, LineResult
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
JOBS = 10
#: How long the first download waits for a second to start: far past any machine's delay
#: between two jobs ending together, yet a failing lane fails in seconds, not at the timeout.
OVERLAP_WAIT_S = 10.0


async def test_jobs_ending_together_hold_two_results_at_a_time(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, peak, started = [0], [0], [0]
    second = asyncio.Event()  # a second download started while the first was held
    results = FakeBatch.results

    async def downloading(self: FakeBatch, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        held[0] += 1  # from the download until its lines are journalled (`_collect`)
        peak[0] = max(peak[0], held[0])
        started[0] += 1
        if held[0] >= 2:
            second.set()
        if started[0] == 1:  # the first waits for a second: a lane holding one at a time
            with contextlib.suppress(TimeoutError):  # never starts it (a peak of 1, below)
                await asyncio.wait_for(second.wait(), OVERLAP_WAIT_S)
        # Each takes a while, as on a slow link: a lane without the limit starts them all.
        await asyncio.sleep(0.02)
        return await results(self, fetch, state)

    collect = batch_lane.BatchLane._collect

    def collected(self: batch_lane.BatchLane, *args: Any) -> Any:
        try:
            return collect(self, *args)
        finally:
            held[0] -= 1

    def ending_together(method: str) -> None:
        """No job ends before the last is created: from then on each ends at its next poll."""
        if method == "create" and fake.calls["create"] == JOBS:
            fake.polls_to_finish = 0

    monkeypatch.setattr(FakeBatch, "results", downloading)
    monkeypatch.setattr(batch_lane.BatchLane, "_collect", collected)
    rows = kit.plan_rows(MODEL, 20 * JOBS)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, max_lines=20, max_jobs_in_flight=JOBS),
                     polls_to_finish=10**9, on_call=ending_together)  # fmt: skip
    summary = await dispatch(
        plan, tmp_path / "run", {MODEL: ModelConfig(name=MODEL, provider="sim", model="m",
                                                    dispatch="batch")},
        {}, batch_clients={MODEL: fake}, policy=RetryPolicy(max_attempts=6, base_s=0.001,
                                                            cap_s=0.002),
        batch_poll_s=0.001, log_console=None,
    )  # fmt: skip
    assert summary.complete, summary.lines()
    assert len(fake.jobs) == JOBS and held[0] == 0
    assert peak[0] == batch_lane.RESULTS_HELD == 2
