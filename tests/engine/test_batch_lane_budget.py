"""A request whose answer-failure budget (`max_answer_failures`) earlier runs spent is not
asked again by a resumed batch lane, as the live lane does not ask it (`Lane._ask`) and as a
resume's count of the lines it cuts (`engine.batch_lane.lines_to_cut`) leaves it out. The
lane applied the budget only to a failure of its own run: a kill while a job was collected,
after the line that spent the budget was journalled, bought that line once more in a new
job; so did lowering `max_answer_failures` on a resume while an abandoned job held it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest

from engine.batch_jobs import BatchJob, JobRecords, fold_jobs
from engine.batch_lane import lines_to_cut
from engine.dispatch import DispatchSummary, dispatch
from engine.retry import RetryPolicy
from engine.scan import scan_attempts
from providers.batch import LineResult
from providers.types import Completion, ModelConfig
from tests.engine.batch_fake import FakeBatch, Killed

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from providers.batch import Fetch, JobState
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
POLICY = RetryPolicy(max_attempts=6, base_s=0.001, cap_s=0.002)


class Unusable(FakeBatch):
    """Every line of `bad`'s requests comes back as a reply with no probability in it: an
    answer failure each time, charged to the request's answer budget."""

    bad: frozenset[str] = frozenset()

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = await super().results(fetch, state)
        unusable = Completion("no idea", "stop", 5, 2, None, "fake")
        return [LineResult(x.request_id, unusable) if x.request_id in self.bad else x
                for x in lines]  # fmt: skip


async def _run(
    plan: Path, run_dir: Path, fake: FakeBatch, policy: RetryPolicy = POLICY
) -> DispatchSummary:
    config = ModelConfig(name=MODEL, provider="sim", model="m", dispatch="batch")
    return await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=policy,
        batch_poll_s=0.001, log_console=None,
    )


def _outcomes(run_dir: Path, rid: str) -> list[str]:
    frame = scan_attempts(run_dir, ["request_id", "attempt", "outcome"]).collect()
    return frame.filter(pl.col("request_id") == rid).sort("attempt")["outcome"].to_list()


async def test_a_kill_after_the_line_that_spent_the_budget_is_not_asked_again(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed while the job holding a request's last answer attempt was collected, after
    that line was journalled: the resume collects the job again, finds the line recorded,
    and gives the request up (its budget spent) instead of cutting it into a fourth job."""
    rows = kit.plan_rows(MODEL, 12)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    bad = rows[4]["request_id"]
    fake = Unusable()
    fake.bad = frozenset({bad})
    collected = JobRecords.collected
    budget = POLICY.max_answer_failures

    def dying(self: JobRecords, job: BatchJob, counts: Mapping[str, int]) -> None:
        if bad in job.requests and _outcomes(run_dir, bad).count("invalid_response") == budget:
            raise Killed("collecting the job that spent the budget, its lines journalled")
        collected(self, job, counts)

    monkeypatch.setattr(JobRecords, "collected", dying)
    first = await _run(plan, run_dir, fake)
    assert not first.complete and "Killed" in first.lanes[MODEL].message
    assert fake.ran[bad] == budget and len(fake.jobs) == budget
    monkeypatch.setattr(JobRecords, "collected", collected)
    assert lines_to_cut(run_dir, plan, MODEL, budget) == 0  # the job still holds it
    second = await _run(plan, run_dir, fake)
    assert fake.ran[bad] == budget and len(fake.jobs) == budget, "asked once too many"
    assert _outcomes(run_dir, bad) == ["invalid_response"] * budget
    retries = second.lanes[MODEL].retries
    assert retries.answer_budget_spent == 1 and second.lanes[MODEL].gave_up == 0
    assert all(job.collected for job in fold_jobs(run_dir).values())


async def test_a_budget_lowered_on_a_resume_holds_for_an_abandoned_jobs_request(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A request with one answer failure, held with six others by a job the user abandons
    on a resume that lowers `max_answer_failures` to 1: its budget is spent, so the lane
    gives it up, as the resume's count does, and asks only the six others again."""
    rows = kit.plan_rows(MODEL, 12)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    bad = rows[4]["request_id"]  # in the half of the first job that runs before it expires
    fake = Unusable(faults={1: "expire"},
                    kill_if=lambda method: method == "poll" and len(fake.jobs) == 2)
    fake.bad = frozenset({bad})
    first = await _run(plan, run_dir, fake)  # killed with the second job out
    assert not first.complete and _outcomes(run_dir, bad) == ["invalid_response"]
    [job] = [j for j in fold_jobs(run_dir).values() if not j.collected]
    assert bad in job.requests and len(job.requests) == 7 and job.job_id is not None
    del fake.jobs[job.job_id]  # the provider lost it: a poll would answer 404
    assert lines_to_cut(run_dir, plan, MODEL, 1) == 0  # not abandoned yet: held
    JobRecords(run_dir).abandoned(job, "not found")
    assert lines_to_cut(run_dir, plan, MODEL, 1) == 6  # not the one whose budget is spent
    lowered = RetryPolicy(max_attempts=6, max_answer_failures=1, base_s=0.001, cap_s=0.002)
    second = await _run(plan, run_dir, fake, lowered)
    assert second.unaccepted == 1, second.lines()
    assert fake.ran[bad] == 1, "asked again though its budget was spent"
    assert [len(j.requests) for j in list(fold_jobs(run_dir).values())[2:]] == [6]
    assert _outcomes(run_dir, bad) == ["invalid_response", "provider_error"]
    assert second.lanes[MODEL].retries.answer_budget_spent == 1
