"""A batch job whose result files are damaged (engine.batch_results), against the FAKE batch
provider (tests/engine/batch_fake.py): lines cut short and a line for an id never sent, while
the provider counted every line completed. A tester's proxy got no word of it and the lost
requests bought again, 8 times each when every download was damaged. Now the damage is said
(console and log), the lost requests' attempts say what the results held, counted apart
(`damaged_batch_result`), each is asked again once at most, and damaged jobs in a row stop
the lane."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl
import pytest

from engine import batch_lane
from engine.audit import audit
from engine.batch_results import DAMAGED_JOB_STREAK, damage_sentence, sort_lines
from engine.dispatch import DispatchSummary, dispatch
from engine.http import HttpClient
from engine.retry import RetryPolicy
from engine.scan import scan_attempts
from engine.settle import settle
from engine.spend import maybe_ran
from engine.status import status
from providers.batch import UNREADABLE, JobState, JobStatus, LineResult
from providers.types import Completion, Failure, HttpRequest, ModelConfig, Outcome
from tests.engine.batch_fake import FakeBatch, Killed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from providers.batch import Fetch
    from providers.sim.server import SimHandle
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
POLICY = RetryPolicy(max_attempts=8, base_s=0.001, cap_s=0.002)
DAMAGED = Outcome.DAMAGED_BATCH_RESULT.value


@dataclass
class Damaging(FakeBatch):
    """Every job's first two lines come back cut short and one line for an id never sent is
    added: in the first job's results only, or in every job's (`every`)."""

    every: bool = False
    damaged: int = 0
    together: int = 0
    _asked: int = 0
    _all_asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        self._asked += 1
        if self._asked <= self.together:  # held until `together` jobs asked for their results
            if self._asked == self.together:
                self._all_asked.set()
            await self._all_asked.wait()
        if self.damaged and not self.every:
            return lines
        self.damaged += 1
        cut = Failure(Outcome.PROVIDER_ERROR, 'unreadable result line: {"custom_id": "ab')
        lines[:2] = [LineResult(UNREADABLE, cut)] * 2
        return [*lines, LineResult("never-sent-0", lines[-1].result)]


async def _run(plan: Path, run_dir: Path, fake: FakeBatch) -> tuple[DispatchSummary, str]:
    console = io.StringIO()
    summary = await dispatch(
        plan, run_dir, {MODEL: ModelConfig(name=MODEL, provider="sim", model="m",
                                           dispatch="batch")},
        {}, batch_clients={MODEL: fake}, policy=POLICY, batch_poll_s=0.001,
        log_console=console,
    )
    return summary, console.getvalue()


def _attempts(run_dir: Path) -> pl.DataFrame:
    return scan_attempts(run_dir, ["request_id", "attempt", "outcome", "detail"]).collect()


def _events(run_dir: Path, name: str) -> list[dict[str, Any]]:
    lines = (run_dir / "logs" / "engine.jsonl").read_bytes().splitlines()
    return [e for e in map(orjson.loads, lines) if e["event"] == name]


async def test_damaged_results_are_said_and_their_requests_asked_again_once(
    tmp_path: Path, kit: type[Kit]
) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = Damaging()
    summary, console = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    said = ("batch job job-1 returned 2 unreadable result lines and 1 line for a request id "
            "never sent (never-sent-0), while the provider counted 30 of 30 lines completed; 2 "
            "requests of the job have no readable line, though the provider ran them (billed): "
            "2 to be asked again once")
    assert said in console
    [event] = _events(run_dir, "batch_results_damaged")
    assert (event["unreadable"], event["foreign"], event["missing"]) == (2, 1, 2)
    lost = _attempts(run_dir).filter(pl.col("outcome") == DAMAGED)
    assert lost.height == 2 and set(lost["attempt"]) == {1}
    assert all("batch job job-1 ended (done) and its results hold no readable line for this "
               "request: 2 unreadable result lines" in d for d in lost["detail"])
    # Asked again once each, in a second job, and counted apart by the audit.
    assert sorted(fake.ran.values()) == [1] * 28 + [2, 2]
    assert audit(run_dir).totals.retries_by_cause[DAMAGED] == 2


@dataclass
class LosingExpired(FakeBatch):
    """Its first job expires having run half its lines (the provider counts them completed),
    and its results hold all of them but the last."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        return lines[:-1] if state.job_id == "job-1" else lines


async def test_an_expired_job_whose_results_lost_a_line_it_ran_says_so(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """An expired job with 15 of 30 lines completed and 14 in its results: the lost line was
    read as one never run ("expired before this line ran"), nothing said, and bought again.
    Which request it was cannot be told from the 16 without a line: each is asked again as
    a line never run, and its detail and the console say that one of them ran."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = LosingExpired(faults={1: "expire"})
    summary, console = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    said = ("batch job job-1 returned 1 line fewer than it ran, while the provider counted 15 "
            "of 30 lines completed; the job expired before running every line, so which of its "
            "16 requests without a readable line ran (billed) cannot be told: each is asked "
            "again as a line never run")
    assert said in console, console
    [event] = _events(run_dir, "batch_results_damaged")
    assert event["missing"] == 16
    first = _attempts(run_dir).filter(pl.col("attempt") == 1)
    unrun = first.filter(pl.col("outcome") == "timeout")
    assert unrun.height == 16 and first.filter(pl.col("outcome") == "ok").height == 14
    assert all(d.startswith("batch job job-1 expired before this line ran (or it ran, billed, "
                            "and its line is lost: the results hold 1 line fewer than it ran")
               for d in unrun["detail"])
    # What the spend cap, a resume's and the audit read: the job and how many lines it lost.
    assert {maybe_ran(d) for d in unrun["detail"]} == {("job-1", 1)}, unrun["detail"][0]
    assert sorted(fake.ran.values()) == [1] * 29 + [2]  # the lost one's line ran twice


@dataclass
class ErringAndLosing(FakeBatch):
    """Its first job expires having run half its lines (15 of 30), one of them an error line:
    the provider counts 14 completed and 1 failed, as every provider counts its successes
    alone; its results hold the error line and 13 of the 14 answers."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        if state.job_id != "job-1":
            return lines
        error = Failure(Outcome.PROVIDER_ERROR, "line error: 500 internal", http_status=500)
        return [LineResult(lines[0].request_id, error), *lines[1:-1]]

    def _state(self, job: Any) -> JobState:
        state = super()._state(job)
        if job.job_id != "job-1" or state.completed is None or not state.completed:
            return state
        return replace(state, completed=state.completed - 1, failed=1)


async def test_an_error_line_does_not_hide_an_answer_line_lost_beside_it(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """14 readable lines against 14 counted completed read as nothing lost, though the error
    line is one the provider counted failed: the lost answer's request was taken as never run
    ("expired before this line ran"), nothing said, and bought again. Answers are compared
    with the answers counted."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    summary, console = await _run(plan, run_dir, ErringAndLosing(faults={1: "expire"}))
    assert summary.complete, summary.lines()
    said = ("batch job job-1 returned 1 line fewer than it ran, while the provider counted 14 "
            "of 30 lines completed and 1 failed; the job expired before running every line, so "
            "which of its 16 requests without a readable line ran (billed) cannot be told")
    assert said in console, console
    [event] = _events(run_dir, "batch_results_damaged")
    assert event["missing"] == 16
    unrun = _attempts(run_dir).filter(pl.col("outcome") == "timeout")
    assert unrun.height == 16
    assert all("(or it ran, billed, and its line is lost" in d for d in unrun["detail"])


def test_a_refused_reply_counts_completed_and_an_error_line_does_not() -> None:
    """A reply the adapter refused (a refusal, with its 200) is a line the provider counted
    completed; an error line is one it counted failed: 2 completed and 1 failed read as the
    answer, the refusal and the error hold every completed line, and without the refusal one
    is lost (the error line stood in for it)."""
    expired = JobState("j", JobStatus.EXPIRED, "expired", total=5, completed=2, failed=1)
    answer = LineResult("a", Completion("{}", "stop", 1, 1, None, "fake"))
    refusal = LineResult("b", Failure(Outcome.REFUSAL, "refused", http_status=200))
    error = LineResult("c", Failure(Outcome.PROVIDER_ERROR, "500 line", http_status=500))
    sent = ["a", "b", "c", "d", "e"]
    assert sort_lines(sent, [answer, refusal, error], expired).lost == 0
    assert sort_lines(sent, [answer, error], expired).lost == 1


def test_lines_counted_failed_without_an_error_line_are_absent_and_a_gone_file_loses_all() -> None:
    """8 completed and 2 failed, the error file gone (404): the 2 lines counted failed are
    absent, not billed and lost; an answer missing beside them is lost; and where the result
    file itself is gone, every request of the job lost its line."""
    done = JobState("j", JobStatus.DONE, "completed", total=10, completed=8, failed=2)
    sent = [f"r{i}" for i in range(10)]
    answers = [LineResult(rid, Completion("{}", "stop", 1, 1, None, "fake")) for rid in sent[:8]]
    whole = sort_lines(sent, answers, done)
    assert (whole.missing, whole.lost, whole.damaged) == (2, 0, False)
    short = sort_lines(sent, answers[1:], done)
    assert (short.missing, short.lost, short.damaged) == (3, 1, True)
    gone = sort_lines(sent, [], done, gone="404 not found")
    assert (gone.missing, gone.lost, gone.damaged) == (10, 10, True)


def test_requests_counted_failed_beside_damage_are_said_unbilled() -> None:
    """8 completed and 2 failed, the error file gone (404): beside a lost answer, or a line
    for an id never sent, the requests counted failed were said billed and lost ("though the
    provider ran them (billed)") and charged so. Which are which is said where it is known."""
    done = JobState("j", JobStatus.DONE, "completed", total=10, completed=8, failed=2)
    sent = [f"r{i}" for i in range(10)]
    answers = [LineResult(rid, Completion("{}", "stop", 1, 1, None, "fake")) for rid in sent[:8]]
    short = sort_lines(sent, answers[1:], done)
    assert (short.missing, short.lost, short.unbilled) == (3, 1, 2)
    assert damage_sentence("job-1", short, 0, 0) == (
        "batch job job-1 returned 1 line fewer than it ran, while the provider counted 8 of 10 "
        "lines completed and 2 failed; of its 3 requests without a readable line the provider "
        "counted 2 failed (not billed, the error lines missing) and 1 completed (billed, its "
        "line lost), and which is which cannot be told: each is asked again as an ordinary "
        "failure")
    foreign = sort_lines(sent, [*answers, LineResult("never-sent", answers[0].result)], done)
    assert (foreign.missing, foreign.lost, foreign.unbilled, foreign.damaged) == (2, 0, 2, True)
    assert damage_sentence("job-1", foreign, 0, 0, stopping=True).endswith(
        "; the provider counted its 2 requests without a readable line failed (not billed, the "
        "error lines missing): each is asked again as an ordinary failure, but not now, as the "
        "lane stops")


@dataclass
class ForeignExpired(FakeBatch):
    """Its first job expires having run half its lines, every one in its results, beside a
    line for an id it never sent."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        extra = [LineResult("never-sent-0", lines[-1].result)] if state.job_id == "job-1" else []
        return lines + extra


async def test_an_expired_job_damaged_with_nothing_lost_says_its_lines_never_ran(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Results damaged by a foreign line only, every line the provider counted there: the
    requests without a line never ran, and nothing says they may have (a reviewer's)."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    summary, console = await _run(plan, run_dir, ForeignExpired(faults={1: "expire"}))
    assert summary.complete, summary.lines()
    said = ("the job expired before running every line, and its 15 requests without a "
            "readable line are asked again as lines never run")
    assert said in console and "billed" not in console, console
    unrun = _attempts(run_dir).filter(pl.col("outcome") == "timeout")
    assert unrun.height == 15
    assert all(d == "batch job job-1 expired before this line ran [batch job job-1]"
               for d in unrun["detail"])


async def test_an_expired_job_whose_results_hold_every_line_it_ran_is_not_damaged(
    tmp_path: Path, kit: type[Kit]
) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    summary, console = await _run(plan, run_dir, FakeBatch(faults={1: "expire"}))
    assert summary.complete and "returned" not in console, console
    assert _events(run_dir, "batch_results_damaged") == []
    unrun = _attempts(run_dir).filter(pl.col("outcome") == "timeout")
    assert unrun.height == 15
    said = "batch job job-1 expired before this line ran [batch job job-1]"
    assert all(d == said for d in unrun["detail"])


async def test_a_request_lost_twice_is_not_bought_a_third_time(
    tmp_path: Path, kit: type[Kit]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = kit.write_plan(run_dir / "plan.parquet", kit.plan_rows(MODEL, 10))  # for status
    fake = Damaging(every=True, limits_=replace(FakeBatch().limits, max_jobs_in_flight=1))
    summary, console = await _run(plan, run_dir, fake)
    assert max(fake.ran.values()) == 2 and len(fake.jobs) == 2
    assert summary.unaccepted == 2 and summary.lanes[MODEL].gave_up == 2
    again = _attempts(run_dir).filter((pl.col("outcome") == DAMAGED) & (pl.col("attempt") == 2))
    assert again.height == 2
    assert all("damaged in an earlier job's results too, so it is not asked again" in d
               for d in again["detail"])
    assert "2 not asked again (damaged in an earlier job's results too)" in console
    # Nothing is left that a run asks: the folder is finished, not "stopped" beside the
    # lane's "done in part".
    assert summary.lines()[1].startswith(f"  {MODEL}: done in part, 8/10 done")
    assert status(run_dir)["state"] == "finished"


@pytest.mark.parametrize("resumed_as", ["batch", "live"])
async def test_a_resume_does_not_buy_a_request_lost_twice_a_third_time(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, resumed_as: str
) -> None:
    """The job holding the second damaged line collected, the run ended; the same command
    again fed the two requests to the lane, which bought each a third time (the lane looked
    at its answer-failure budget alone). A model switched to live on the resume asked them
    live. Each loss was billed: no run asks them again, and the resume says so."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 10))
    run_dir = tmp_path / "run"
    fake = Damaging(every=True, limits_=replace(FakeBatch().limits, max_jobs_in_flight=1))
    await _run(plan, run_dir, fake)
    before = _attempts(run_dir).height
    again = FakeBatch()
    if resumed_as == "batch":
        summary, _ = await _run(plan, run_dir, again)
    else:
        config, adapter = kit.sim_model(MODEL, sim.root_url)
        summary = await dispatch(plan, run_dir, {MODEL: config}, {MODEL: adapter},
                                 policy=POLICY, log_console=None)
    assert not again.ran and _attempts(run_dir).height == before
    lane = summary.lanes[MODEL]
    assert (lane.gave_up, lane.lost_to_damage, summary.unaccepted) == (2, 2, 2)
    assert summary.lost_to_damage == 2
    assert ("done in part, 8/10 done, 2 given up for good, lost twice to damaged batch "
            "results") in summary.lines()[1]
    # The audit and status count them given up for good, not as asked by a rerun.
    report = audit(run_dir)
    assert (report.totals.given_up_total, report.totals.lost_to_damage) == (2, 2)
    assert (f"{MODEL}: 2 requests given up for good: damaged batch results lost their lines "
            "twice, each loss billed, and no run asks them again.") in report.notes()
    assert status(run_dir)["pending_failures"]["lost_to_damage"] == 2


async def test_a_resume_stopped_before_reading_counts_its_requests_lost_twice(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A lane that stops before its feeder reads the plan (a Ctrl-C, the spend cap) gave up
    the requests lost twice among the rows it never read, yet counted only those it read:
    its line and the run's closing line said nothing of them (a reviewer's)."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 10))
    run_dir = tmp_path / "run"
    fake = Damaging(every=True, limits_=replace(FakeBatch().limits, max_jobs_in_flight=1))
    await _run(plan, run_dir, fake)
    before = _attempts(run_dir).height
    config, adapter = kit.sim_model(MODEL, sim.root_url)
    stop = asyncio.Event()
    stop.set()
    summary = await dispatch(plan, run_dir, {MODEL: config}, {MODEL: adapter},
                             policy=POLICY, log_console=None, stop_event=stop)
    assert _attempts(run_dir).height == before
    lane = summary.lanes[MODEL]
    assert (lane.already_accepted, lane.gave_up, lane.lost_to_damage) == (8, 2, 2)
    assert summary.lost_to_damage == summary.unaccepted == 2


async def test_damaged_jobs_in_a_row_stop_the_lane(tmp_path: Path, kit: type[Kit]) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 100))
    run_dir = tmp_path / "run"
    fake = Damaging(every=True, limits_=replace(FakeBatch().limits, max_lines=10,
                                                   max_jobs_in_flight=1))
    summary, console = await _run(plan, run_dir, fake)
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped" and len(fake.jobs) == DAMAGED_JOB_STREAK
    assert (f"after {DAMAGED_JOB_STREAK} batch jobs in a row returned damaged results (the "
            "last, job-3: 2 unreadable result lines") in lane.message
    assert max(fake.ran.values()) <= 2
    assert console.count("returned 2 unreadable result lines") == DAMAGED_JOB_STREAK
    assert "2 not asked again, as the lane stops" in console


async def test_requests_said_to_be_asked_again_that_a_later_stop_left_unasked_are_said(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three damaged jobs at once: the first two said their lost requests were "asked again
    once", the third stopped the lane, and none was asked (the referee's 6 requests, 3
    creates). Each job's line now says "to be asked again", and the lane's end says those it
    did not ask. The three jobs' results come back together, as they did for the referee: a
    job whose results came back on their own could free its room for the lost requests'
    second job before the third was collected, and that is another case."""
    # Three jobs' results held at once (a lane holds two by default: `RESULTS_HELD`).
    monkeypatch.setattr(batch_lane, "RESULTS_HELD", DAMAGED_JOB_STREAK)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = Damaging(every=True, together=DAMAGED_JOB_STREAK,
                    limits_=replace(FakeBatch().limits, max_lines=10))
    summary, console = await _run(plan, run_dir, fake)
    assert summary.lanes[MODEL].state.value == "stopped"
    assert len(fake.jobs) == DAMAGED_JOB_STREAK and max(fake.ran.values()) == 1
    assert console.count("2 to be asked again once") == 2
    assert console.count("2 not asked again, as the lane stops") == 1
    assert ("4 requests damaged batch results lost, to be asked again once, were not asked "
            "again: the lane ended first") in console
    [event] = _events(run_dir, "batch_damaged_not_asked")
    assert event["requests"] == 4


async def test_damage_is_said_before_a_kill_and_the_resume_takes_the_lines_it_now_reads(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the damaged attempts were written: the damage was in the ledger but said
    nowhere, and the resume, whose download held those lines intact, bought them again in a
    second job. The damage is said before the attempts are written, and the resume takes the
    lines it can now read from the same job."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 10))
    run_dir = tmp_path / "run"
    fake, calls = Damaging(), Counter[str]()

    def dying(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:  # the two damaged attempts written, then the kill
            raise Killed("mid-collection")
        return settle(*args, **kw)

    monkeypatch.setattr(batch_lane, "settle", dying)
    await _run(plan, run_dir, fake)
    monkeypatch.setattr(batch_lane, "settle", settle)
    assert _attempts(run_dir).filter(pl.col("outcome") == DAMAGED).height == 2
    [event] = _events(run_dir, "batch_results_damaged")
    assert event["missing"] == 2
    summary, _ = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    assert len(fake.jobs) == 1 and max(fake.ran.values()) == 1
    attempts = _attempts(run_dir)
    lost = set(attempts.filter(pl.col("outcome") == DAMAGED)["request_id"])
    taken = attempts.filter(pl.col("request_id").is_in(list(lost)) & (pl.col("attempt") == 2))
    assert taken.height == 2 and set(taken["outcome"]) == {"ok"}


async def test_lines_missing_from_a_job_counted_complete_are_damage(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """No unreadable line, but fewer lines than the provider counted completed: the
    missing requests ran and were billed, and that is said too."""

    @dataclass
    class Dropping(FakeBatch):
        async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
            lines = list(await super().results(fetch, state))
            return lines[1:] if state.job_id == "job-1" else lines

    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 20))
    run_dir = tmp_path / "run"
    summary, console = await _run(plan, run_dir, Dropping())
    assert summary.complete
    assert ("batch job job-1 returned 1 line fewer than it ran, while the provider counted 20 "
            "of 20 lines completed; 1 request of the job has no readable line") in console
    assert _attempts(run_dir).filter(pl.col("outcome") == DAMAGED).height == 1


@dataclass
class Repeating(FakeBatch):
    """Every answer line of the first job comes after an error line for the same request."""

    repeated: int = 0

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        if self.repeated:
            return lines
        self.repeated = len(lines)
        error = Failure(Outcome.PROVIDER_ERROR, "line error: 500 internal", http_status=500)
        return [line for answer in lines for line in (LineResult(answer.request_id, error),
                                                       answer)]


async def test_a_second_line_for_a_request_is_said_and_its_answer_kept(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """The first line of a request was taken: an error line before its answer line threw the
    answer away (the request bought again in the next job), and nothing was said."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = Repeating()
    summary, console = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    assert len(fake.jobs) == 1 and sorted(fake.ran.values()) == [1] * 30  # nothing bought again
    assert set(_attempts(run_dir)["outcome"]) == {"ok"}
    assert ("batch job job-1 returned 30 second lines for requests it already had a line for ("
            in console)
    assert "every request of the job has its line, so none is asked again" in console
    [event] = _events(run_dir, "batch_results_damaged")
    assert (event["repeated"], event["missing"]) == (30, 0)


@dataclass
class DamagingFirstAlone(Damaging):
    """Every job's results damaged (`Damaging(every=True)`): the first job ends once the
    others are created, and its results come back alone; the others' come back once the job
    of the first one's lost requests is being uploaded, an upload that ends only once the
    last damaged results are back (as the lane stops)."""

    uploading: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        while job_id == "job-1" and len(self.jobs) < DAMAGED_JOB_STREAK:
            await asyncio.sleep(0.001)
        return await super().poll(fetch, job_id)

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        if state.job_id != "job-1":
            await self.uploading.wait()
        lines = await super().results(fetch, state)
        if self.damaged == DAMAGED_JOB_STREAK:
            self.stopping.set()
        return lines

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        if len(self.inputs) == DAMAGED_JOB_STREAK:  # the lost requests' job
            self.uploading.set()
            await self.stopping.wait()
            await self.looked(fetch)
        return await super().upload(fetch, job_key, lines)

    async def looked(self, fetch: Fetch) -> None:
        """What the upload does once the last results are back, before it uploads."""


async def test_requests_of_a_job_planned_but_not_sent_when_damage_stops_the_lane_are_said(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first damaged job's results came back alone: its 2 lost requests went into a job
    of their own, not yet created when the third damaged job stopped the lane. The lane's end
    said "2 requests ... were not asked again", leaving out those 2 (the job planning them
    took them off its list), though none of the 4 was asked."""
    monkeypatch.setattr(batch_lane, "RESULTS_HELD", DAMAGED_JOB_STREAK)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = DamagingFirstAlone(every=True, limits_=replace(FakeBatch().limits, max_lines=10))
    summary, console = await _run(plan, run_dir, fake)
    assert summary.lanes[MODEL].state.value == "stopped"
    assert len(fake.jobs) == DAMAGED_JOB_STREAK and max(fake.ran.values()) == 1
    assert console.count("2 to be asked again once") == 2
    assert ("4 requests damaged batch results lost, to be asked again once, were not asked "
            "again: the lane ended first") in console


@dataclass
class PostingAfterTheStop(DamagingFirstAlone):
    """`DamagingFirstAlone`, whose upload of the first job's lost requests looked first (as
    Groq's client looks for its file by name) and posts its file once the third damaged
    job's results are back, as the lane stops."""

    async def looked(self, fetch: Fetch) -> None:
        await fetch(HttpRequest("POST", "http://127.0.0.1:9/files", {}, b"input"))


async def test_a_lane_stopping_for_damage_uploads_nothing_more(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third damaged job stopped the lane while the job of the first one's lost requests
    was being uploaded: its client's next request (the file itself) was still sent, and the
    provider held an input no job was made of."""
    sent: list[str] = []

    async def fetch(self: HttpClient, request: HttpRequest, *args: Any, **kw: Any) -> Failure:
        sent.append(request.method)
        return Failure(Outcome.CONNECTION_ERROR, "not sent anywhere in this test")

    monkeypatch.setattr(HttpClient, "fetch", fetch)
    monkeypatch.setattr(batch_lane, "RESULTS_HELD", DAMAGED_JOB_STREAK)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    fake = PostingAfterTheStop(every=True, limits_=replace(FakeBatch().limits, max_lines=10))
    summary, _ = await _run(plan, tmp_path / "run", fake)
    assert summary.lanes[MODEL].state.value == "stopped"
    assert sent == [] and len(fake.inputs) == DAMAGED_JOB_STREAK


@dataclass
class ExpiredAfterAll(LosingExpired):
    """Its first job runs every line and is then said expired, the provider counting every
    line completed; its results hold all of them but the last (`LosingExpired`'s)."""

    def _state(self, job: Any) -> JobState:
        state = super()._state(job)
        if job.job_id != "job-1" or state.status is not JobStatus.DONE:
            return state
        return replace(state, status=JobStatus.EXPIRED, provider_status="expired")


async def test_an_expired_job_counted_wholly_completed_says_it_ran_every_line(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """An expired job whose provider counted 30 of 30 lines completed, 29 in its results, was
    said to have "expired before running every line", which of its request without a line
    ran "cannot be told": it ran every line, so the one without a line ran (billed) and lost
    it. That request is asked again as a line never run, and its line charged."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = ExpiredAfterAll()
    summary, console = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    said = ("batch job job-1 returned 1 line fewer than it ran, while the provider counted 30 "
            "of 30 lines completed; the job expired after running every line (the provider "
            "counted every one completed), so its 1 request without a readable line ran "
            "(billed) and lost its line: it is asked again as a line never run")
    assert said in console, console
    assert "before running every line" not in console and "cannot be told" not in console
    unrun = _attempts(run_dir).filter(pl.col("outcome") == "timeout")
    assert unrun.height == 1 and {maybe_ran(d) for d in unrun["detail"]} == {("job-1", 1)}
    assert sorted(fake.ran.values()) == [1] * 29 + [2]
