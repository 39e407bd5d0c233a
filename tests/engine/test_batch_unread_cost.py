"""Lines a batch job ran (the provider billed them) whose result the run cannot read are
charged, not counted at $0. A tester's proxy dropped a line of each result file: the
simulator ran 31 lines, the audit priced the 26 accepted ones, and the spend cap settled each
job's reservation down to the lines it could read, forgetting the lost ones too. The spend
cap now keeps a lost line's reserved worst case (its prompt and whole output cap), and the
audit and a resume's spend count it so too, the audit saying it is an upper bound.

The batch provider is the engine's fake (tests/engine/batch_fake.py), labelled as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from engine.audit import Audit, audit
from engine.dispatch import DispatchSummary, dispatch
from engine.retry import RetryPolicy
from engine.scan import scan_attempts
from engine.spend import Prices, batch_prices_of, maybe_ran, recorded_spend, worst_case_cost_of
from providers.batch import JobStatus
from providers.types import Failure, ModelConfig, Outcome
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from providers.batch import Fetch, JobState, LineResult
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
POLICY = RetryPolicy(max_attempts=6, base_s=0.001, cap_s=0.002)
PRICED = ModelConfig(
    name=MODEL, provider="sim", model="m", dispatch="batch", max_tokens=300,
    price_in_per_mtok=10.0, price_out_per_mtok=10.0,
    batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=2.0,
)  # fmt: skip
DAMAGED = Outcome.DAMAGED_BATCH_RESULT.value


@dataclass
class Dropping(FakeBatch):
    """The first job's results lack their first `dropped` lines, though every line ran."""

    dropped: int = 2
    _first: bool = True

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        if self._first and state.status is JobStatus.DONE:
            self._first = False
            return lines[self.dropped :]
        return lines


def _chars(plan: Path, ids: list[str]) -> list[int]:
    frame = pl.read_parquet(plan).filter(pl.col("request_id").is_in(ids))
    return [len(s or "") + len(u or "") for s, u in frame.select("system", "user").iter_rows()]


def _plan_in(run_dir: Path, kit: type[Kit], rows: list[dict[str, Any]]) -> Path:
    """The plan of `rows`, written in `run_dir` (made here), where the readers of a lost
    line's worst case (a resume's spend, the audit) look for it."""
    run_dir.mkdir()
    return kit.write_plan(run_dir / "plan.parquet", rows)


def _prices() -> Prices:
    """The priced fake model's batch prices."""
    prices = batch_prices_of(PRICED)
    assert prices is not None
    return prices


def _audited(run_dir: Path) -> Audit:
    """The audit of `run_dir` at the priced fake model's batch prices and output cap."""
    return audit(run_dir, batch_prices={MODEL: _prices()}, output_caps={MODEL: PRICED.max_tokens})


async def _priced_run(
    plan: Path, run_dir: Path, fake: FakeBatch, budget_usd: float | None = 100.0
) -> DispatchSummary:
    """The priced fake model's campaign of `plan` into `run_dir`, under a spend cap of
    `budget_usd` (None: no cap)."""
    return await dispatch(
        plan, run_dir, {MODEL: PRICED}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=budget_usd,
    )


def _reported(run_dir: Path) -> float:
    attempts = scan_attempts(run_dir, ["tokens_in", "tokens_out"]).collect()
    return _prices().cost(int(attempts["tokens_in"].sum()), int(attempts["tokens_out"].sum()))


async def test_lines_lost_from_results_keep_their_worst_case_in_the_spend_cap(
    tmp_path: Path, kit: type[Kit]
) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = Dropping()
    done = await _priced_run(plan, run_dir, fake)
    assert done.complete and done.spend is not None
    lost = scan_attempts(run_dir, ["request_id", "outcome"]).collect().filter(
        pl.col("outcome") == DAMAGED
    )["request_id"].to_list()
    assert len(lost) == 2 and sum(fake.ran.values()) == 32  # 30 lines, then the 2 lost again
    worst = math.fsum(worst_case_cost_of(_prices(), PRICED, n) for n in _chars(plan, lost))
    assert worst > 0
    assert done.spend.spent_now_usd == pytest.approx(_reported(run_dir) + worst, rel=1e-9)


@dataclass
class LosingExpired(FakeBatch):
    """Its first job expires having run half its lines, and its results lack the first."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        return lines[1:] if state.status is JobStatus.EXPIRED else lines


async def test_an_expired_job_that_lost_a_line_it_ran_keeps_its_dearest_unread_worst_case(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Which of the 16 requests without a line is the one that ran cannot be told: the cap
    keeps the dearest of their worst cases, one line's, not 16 and not none."""
    rows = kit.plan_rows(MODEL, 30)
    rows[-1]["user"] = "x" * 5000  # one prompt far longer: the dearest of the unread
    run_dir = tmp_path / "run"
    plan = _plan_in(run_dir, kit, rows)
    done = await _priced_run(plan, run_dir, LosingExpired(faults={1: "expire"}))
    assert done.complete and done.spend is not None
    chars = _chars(plan, [r["request_id"] for r in rows])
    dearest = worst_case_cost_of(_prices(), PRICED, max(chars))
    spent = done.spend.spent_now_usd
    assert spent == pytest.approx(_reported(run_dir) + dearest, rel=1e-9)
    # A resume's cap starts where this run's ended, and the audit counts the same line.
    assert recorded_spend(run_dir, {MODEL: PRICED}) == pytest.approx(spent, rel=1e-9)
    row = _audited(run_dir).by_model[MODEL]
    assert row.cost_usd == pytest.approx(spent, rel=1e-9)
    assert row.billed_unread == 1
    assert row.billed_unread_usd == pytest.approx(dearest, rel=1e-9)


async def test_the_audit_and_a_resume_count_lines_billed_with_no_readable_result(
    tmp_path: Path, kit: type[Kit]
) -> None:
    run_dir = tmp_path / "run"
    plan = _plan_in(run_dir, kit, kit.plan_rows(MODEL, 30))
    done = await _priced_run(plan, run_dir, Dropping(), budget_usd=None)
    assert done.complete
    lost = scan_attempts(run_dir, ["request_id", "outcome"]).collect().filter(
        pl.col("outcome") == DAMAGED
    )["request_id"].to_list()
    assert len(lost) == 2
    worst = math.fsum(worst_case_cost_of(_prices(), PRICED, n) for n in _chars(plan, lost))
    report = _audited(run_dir)
    row = report.by_model[MODEL]
    assert row.cost_usd == pytest.approx(_reported(run_dir) + worst, rel=1e-9)
    assert row.billed_unread == 2
    assert row.billed_unread_usd == pytest.approx(worst, rel=1e-9)
    assert report.to_dict()["totals"]["billed_unread"] == 2
    assert report.to_dict()["totals"]["billed_unread_cost_usd"] == pytest.approx(worst)
    [said] = [n for n in report.notes() if "no readable result" in n]
    assert said.startswith("fake-batch: 2 batch lines the provider ran (billed) have no "
                           "readable result, counted in its cost at up to $")
    assert "an upper bound" in said
    # A resume's spend cap starts from the same count.
    assert recorded_spend(run_dir, {MODEL: PRICED}) == pytest.approx(row.cost_usd, rel=1e-9)


def test_lines_an_earlier_version_said_lost_are_counted_too(tmp_path: Path) -> None:
    """A folder written before the tag (`engine.spend.maybe_ran_tag`) says such a line in
    words alone: a tester's resume of one under `--max-cost` counted its 4 lost lines at $0
    and ran on past what they had cost. Those words name the count, the closing note the
    job: the dearest `lost` of the job's lines are counted, as for a tagged one."""
    from engine.spend import maybe_ran, unread_lines

    old = ("batch job job-7 expired before this line ran (or it ran, billed, and its line is "
           "lost: the results hold 2 lines fewer than it ran, while the provider counted 5 of "
           "5 lines completed) [batch job job-7]")  # fmt: skip
    assert maybe_ran(old) == ("job-7", 2)
    assert maybe_ran(old.replace("or it ran", "it never ran")) is None
    attempts = pl.LazyFrame(
        {"request_id": ["a", "b", "c"], "model": [MODEL] * 3, "outcome": ["timeout"] * 3,
         "tokens_in": [None] * 3, "tokens_out": [None] * 3, "detail": [old] * 3},
        schema={"request_id": pl.String, "model": pl.String, "outcome": pl.String,
                "tokens_in": pl.Int64, "tokens_out": pl.Int64, "detail": pl.String},
    )  # fmt: skip
    found = unread_lines(attempts, tmp_path / "no-plan.parquet")[MODEL]
    assert found.lines == 2 and [lost for lost, _ in found.maybe] == [2]


@dataclass
class ErrorFileGone(FakeBatch):
    """Its first job answers every third line with an error line, which the provider counts
    failed (20 of 30 completed and 10 failed), and its error file answers 404: its results
    hold the 20 answers and none of the error lines (`providers.batch_openai`'s `results`)."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        if state.job_id != "job-1":
            return lines
        return [line for line in lines if not isinstance(line.result, Failure)]


async def test_requests_counted_failed_whose_error_file_is_gone_are_absent_not_billed(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A tester's job of 8 completed and 2 failed whose error file answered 404 read as 2
    lines billed and lost: `damaged_batch_result`, charged at their worst case, and given up
    after two such jobs. The provider does not bill its failed lines: they are asked again as
    ordinary failures, nothing said damaged, and nothing charged for them."""
    run_dir = tmp_path / "run"
    plan = _plan_in(run_dir, kit, kit.plan_rows(MODEL, 30))
    fake = ErrorFileGone(faults={1: "error_lines"})
    done = await _priced_run(plan, run_dir, fake)
    assert done.complete and done.spend is not None
    attempts = scan_attempts(run_dir, ["request_id", "attempt", "outcome"]).collect()
    assert attempts.filter(pl.col("outcome") == DAMAGED).height == 0
    first = attempts.filter(pl.col("attempt") == 1)
    assert first.filter(pl.col("outcome") == Outcome.PROVIDER_ERROR.value).height == 10
    assert sorted(fake.ran.values()) == [1] * 20 + [2] * 10  # the 10 asked again once
    assert done.spend.spent_now_usd == pytest.approx(_reported(run_dir), rel=1e-9)
    row = _audited(run_dir).by_model[MODEL]
    assert row.billed_unread == 0 and row.lost_to_damage == 0


@dataclass
class ErrorFileGoneAndAnswerLost(ErrorFileGone):
    """`ErrorFileGone`, its output file short of its first answer too."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        return lines[1:] if state.job_id == "job-1" else lines


async def test_requests_counted_failed_beside_a_lost_answer_are_not_charged_as_damage(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """20 completed and 10 failed, the error file gone (404) and the output short of one
    answer: the 11 requests without a line were each charged at their worst case as
    `damaged_batch_result`, though the provider billed only the lost answer. Which of the 11
    it was cannot be told: each is asked again as a line the job may have run, and the
    dearest one worst case is charged, in the spend cap, a resume's and the audit."""
    run_dir = tmp_path / "run"
    plan = _plan_in(run_dir, kit, kit.plan_rows(MODEL, 30))
    fake = ErrorFileGoneAndAnswerLost(faults={1: "error_lines"})
    done = await _priced_run(plan, run_dir, fake)
    assert done.complete and done.spend is not None
    attempts = scan_attempts(run_dir, ["request_id", "attempt", "outcome", "detail"]).collect()
    assert attempts.filter(pl.col("outcome") == DAMAGED).height == 0
    first = attempts.filter(pl.col("attempt") == 1)
    absent = first.filter(pl.col("outcome") == Outcome.PROVIDER_ERROR.value)
    assert absent.height == 11
    assert {maybe_ran(d) for d in absent["detail"]} == {("job-1", 1)}
    assert sorted(fake.ran.values()) == [1] * 19 + [2] * 11  # the 11 asked again once
    chars = _chars(plan, absent["request_id"].to_list())
    dearest = worst_case_cost_of(_prices(), PRICED, max(chars))
    spent = done.spend.spent_now_usd
    assert spent == pytest.approx(_reported(run_dir) + dearest, rel=1e-9)
    assert recorded_spend(run_dir, {MODEL: PRICED}) == pytest.approx(spent, rel=1e-9)
    row = _audited(run_dir).by_model[MODEL]
    assert (row.billed_unread, row.lost_to_damage) == (1, 0)
    assert row.billed_unread_usd == pytest.approx(dearest, rel=1e-9)
