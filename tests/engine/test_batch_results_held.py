"""A batch lane holds at most `RESULTS_HELD` jobs' results in memory at once.

A results file of a paper-scale job is 100-200 MB, read whole and split into lines; jobs that
ended together (Bedrock allows 20 in flight) were all downloaded and held at once, and a
tester's single 400 MB file took the run to 0.99 GB.
"""

from __future__ import annotations

import asyncio
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


async def test_jobs_ending_together_hold_two_results_at_a_time(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, peak = [0], [0]
    results = FakeBatch.results

    async def downloading(self: FakeBatch, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        held[0] += 1  # from the download until its lines are journalled (`_collect`)
        peak[0] = max(peak[0], held[0])
        await asyncio.sleep(0.02)  # a slow link: the others' downloads would start meanwhile
        return await results(self, fetch, state)

    collect = batch_lane.BatchLane._collect

    def collected(self: batch_lane.BatchLane, *args: Any) -> Any:
        try:
            return collect(self, *args)
        finally:
            held[0] -= 1

    monkeypatch.setattr(FakeBatch, "results", downloading)
    monkeypatch.setattr(batch_lane.BatchLane, "_collect", collected)
    rows = kit.plan_rows(MODEL, 200)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, max_lines=20, max_jobs_in_flight=10))
    summary = await dispatch(
        plan, tmp_path / "run", {MODEL: ModelConfig(name=MODEL, provider="sim", model="m",
                                                    dispatch="batch")},
        {}, batch_clients={MODEL: fake}, policy=RetryPolicy(max_attempts=6, base_s=0.001,
                                                            cap_s=0.002),
        batch_poll_s=0.001, log_console=None,
    )  # fmt: skip
    assert summary.complete, summary.lines()
    assert len(fake.jobs) == 10 and held[0] == 0
    assert peak[0] == batch_lane.RESULTS_HELD == 2
