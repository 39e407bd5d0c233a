"""Batch dispatch (issue 13), engine side, against a FAKE batch provider (tests/engine/
batch_fake.py): jobs cut by the limits, every line an attempt through the ledger, failed and
expired lines retried by cause in the next job, and exactly once across a stop at every step
boundary of a job (before and after upload, create, find, poll, results, and in the middle
of collecting), each followed by a resume."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
import polars as pl
import pytest

import engine.batch_lane as batch_lane
from engine.audit import audit
from engine.batch_jobs import COLLECTED, JOBS_FILE, PLANNED, fold_jobs, jobs_summary
from engine.dispatch import DispatchSummary, dispatch
from engine.durable import read_record_lines
from engine.records import FOREIGN_NOTE
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from engine.settle import settle
from providers.types import ModelConfig
from tests.engine.batch_fake import FakeBatch, Killed

if TYPE_CHECKING:
    from providers.base import Adapter
    from providers.sim.server import SimHandle
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
POLICY = RetryPolicy(max_attempts=6, base_s=0.001, cap_s=0.002)


def _config(**kw: Any) -> ModelConfig:
    return ModelConfig(name=MODEL, provider="sim", model="m", dispatch="batch", **kw)


async def _run(plan: Path, run_dir: Path, fake: FakeBatch) -> DispatchSummary:
    return await dispatch(
        plan, run_dir, {MODEL: _config()}, {}, batch_clients={MODEL: fake},
        policy=POLICY, batch_poll_s=0.001, log_console=None,
    )


def _check_exactly_once(run_dir: Path, fake: FakeBatch, ids: set[str]) -> None:
    responses = scan_responses(run_dir, ["request_id"]).collect()["request_id"].to_list()
    assert sorted(responses) == sorted(ids), "every query accepted exactly once"
    # Paid once: no request's answer was produced by the provider twice.
    assert max(fake.answered.values()) == 1
    assert set(fake.answered) == ids
    # Every line uploaded carried its prompt (a retry's is read back from the plan).
    assert all(orjson.loads(line)["user"] for _, lines in fake.inputs.values() for line in lines)
    # No job created twice under one key (a crash between create and its record).
    keys = [job.key for job in fake.jobs.values()]
    assert len(keys) == len(set(keys))
    # Attempts numbered 1..n without a gap, per request.
    attempts = scan_attempts(run_dir, ["request_id", "attempt"]).collect()
    numbers = attempts.group_by("request_id").agg(pl.col("attempt").sort())
    for rid, got in numbers.iter_rows():
        assert got == list(range(1, len(got) + 1)), rid
    # No request in two live jobs, ever: replay the records in order.
    live: dict[str, set[str]] = {}
    for record in read_record_lines(run_dir / JOBS_FILE):
        if record["event"] == PLANNED:
            carried = set(record["requests"])
            for other in live.values():
                assert not carried & other
            live[record["job_key"]] = carried
        elif record["event"] == COLLECTED:
            live.pop(record["job_key"], None)
    assert not live, "every job collected at the end"
    assert _most_live(run_dir) <= fake.limits.max_jobs_in_flight


def _most_live(run_dir: Path) -> int:
    live, most = 0, 0
    for record in read_record_lines(run_dir / JOBS_FILE):
        live += {PLANNED: 1, COLLECTED: -1}.get(record["event"], 0)
        most = max(most, live)
    return most


async def test_batch_faults_become_retries_by_cause(tmp_path: Path, kit: type[Kit]) -> None:
    rows = kit.plan_rows(MODEL, 150)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(faults={1: "expire", 2: "fail", 3: "error_lines", 4: "garbage"},
                     transient={2, 7, 11})
    summary = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    ids = {r["request_id"] for r in rows}
    _check_exactly_once(run_dir, fake, ids)
    collected = summary.lanes[MODEL].jobs_collected
    assert collected == len(fake.jobs) and f"through {collected} batch jobs" in summary.lines()[1]
    # Jobs by the limits: at most 40 lines each (the first three full), at most 3 in flight.
    jobs = list(fold_jobs(run_dir).values())
    assert [len(j.requests) for j in jobs[:3]] == [40, 40, 40]
    assert max(len(j.requests) for j in jobs) == 40
    assert _most_live(run_dir) <= 3  # max_jobs_in_flight
    # Every failed line is a retry attempt under the cause the fault makes it.
    report = audit(run_dir)
    causes = report.totals.retries_by_cause
    assert causes.get("timeout", 0) == fake.injected["expired_lines"] == 20
    assert causes.get("provider_error", 0) == 40 + fake.injected["error_lines"]
    assert causes.get("invalid_response", 0) == fake.injected["garbage_lines"]
    assert report.totals.retry_attempts == sum(causes.values())
    assert summary.retry_attempts == report.totals.retry_attempts
    assert fake.injected["control_rate_limit"] == 3  # waited out, not recorded as attempts
    # The ledger says which job each answer came from.
    detail = scan_attempts(run_dir, ["detail"]).collect()["detail"].to_list()
    assert all("batch job job-" in d for d in detail)
    groups = jobs_summary(run_dir)[MODEL]
    assert groups["expired"] == {"jobs": 1, "lines": 40}
    assert groups["failed"] == {"jobs": 1, "lines": 40}
    assert groups["done"]["lines"] == sum(len(j.requests) for j in fold_jobs(run_dir).values()) - 80


STEPS = [
    ("upload", 1, "before"), ("upload", 1, "after"), ("upload", 2, "after"),
    ("create", 1, "before"), ("create", 1, "after"), ("create", 3, "after"),
    ("find", 2, "before"), ("poll", 1, "after"), ("poll", 4, "before"),
    ("results", 1, "before"), ("results", 1, "after"), ("results", 2, "after"),
]


@pytest.mark.parametrize("step", STEPS, ids=lambda s: f"{s[0]}{s[1]}-{s[2]}")
async def test_stop_at_each_step_then_resume_is_exactly_once(
    tmp_path: Path, kit: type[Kit], step: tuple[str, int, str]
) -> None:
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(faults={2: "expire", 3: "error_lines"}, kill_at=step)
    first = await _run(plan, run_dir, fake)
    assert not first.complete
    assert "Killed" in first.lanes[MODEL].message
    second = await _run(plan, run_dir, fake)
    assert second.complete, second.lines()
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})


@pytest.mark.parametrize("nth", [1, 17, 39])
async def test_stop_in_the_middle_of_collecting(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    """Killed between a line's dispatch and result lines: the lines written are not written
    again, the torn one is recorded interrupted and its answer kept as the next attempt."""
    rows = kit.plan_rows(MODEL, 60)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(faults={1: "error_lines"})
    real = settle  # what engine.batch_lane imported and calls
    calls = Counter[str]()

    def dying(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == nth:
            raise Killed("mid-collection")
        return real(*args, **kw)

    monkeypatch.setattr(batch_lane, "settle", dying)
    first = await _run(plan, run_dir, fake)
    assert not first.complete
    monkeypatch.setattr(batch_lane, "settle", real)
    second = await _run(plan, run_dir, fake)
    assert second.complete, second.lines()
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})
    outcomes = scan_attempts(run_dir, ["outcome"]).collect()["outcome"].to_list()
    assert outcomes.count("interrupted") == 1
    assert second.interrupted_recovered == 1


async def test_a_line_torn_by_a_kill_is_said_collected_not_asked_again(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume's warning said a batch line torn by a kill "is asked again", as of a live
    attempt: it is not (its answer is collected from the job, the request not sent again)."""
    rows = kit.plan_rows(MODEL, 20)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch()

    def dying(*args: Any, **kw: Any) -> Any:
        raise Killed("mid-collection")

    monkeypatch.setattr(batch_lane, "settle", dying)
    await _run(plan, run_dir, fake)
    monkeypatch.setattr(batch_lane, "settle", settle)
    second = await _run(plan, run_dir, fake)
    assert second.complete and max(fake.ran.values()) == 1 and len(fake.jobs) == 1
    events = [orjson.loads(line) for line in (run_dir / "logs" / "engine.jsonl").read_bytes()
              .splitlines()]
    [said] = [e["say"] for e in events if e["event"] == "interrupted_recovered"]
    assert said == (
        "1 batch line was being recorded from its job's results when an earlier run of this "
        "folder stopped: it is recorded as interrupted, and its answer is collected from its "
        "batch job, still at the provider, without sending its request again")
    assert (second.interrupted_recovered, second.interrupted_batch) == (1, 1)
    torn = scan_attempts(run_dir, ["outcome", "detail"]).collect().filter(
        pl.col("outcome") == "interrupted")
    assert torn["detail"].to_list() == [
        "interrupted: batch job job-1's line for this request was being recorded when the "
        "process stopped; its answer is collected from the job, the request not sent again"]


def test_the_interrupted_line_tells_live_attempts_from_batch_lines() -> None:
    from engine.dispatch import interrupted_sentence

    assert interrupted_sentence(3, 0).endswith("their requests are asked again")
    assert interrupted_sentence(3, 1).endswith(
        "they are recorded as interrupted; the 2 live attempts' requests are asked again, and "
        "the 1 batch line's answer is collected from its batch job, still at the provider, "
        "without sending its request again")


async def test_auth_error_on_upload_stops_the_lane_with_one_line(
    tmp_path: Path, kit: type[Kit]
) -> None:
    from providers.batch import BatchError
    from providers.types import Failure, Outcome

    class Refused(FakeBatch):
        async def upload(self, fetch: Any, job_key: str, lines: Any) -> str:
            raise BatchError(Failure(Outcome.AUTH_ERROR, "invalid api key", http_status=401))

    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 10))
    summary = await _run(plan, tmp_path / "run", Refused())
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped"
    assert "batch upload failed (auth_error, HTTP 401): invalid api key" in lane.message
    assert summary.attempts == 0


@pytest.mark.parametrize("slow", [None, ("upload", 1), ("create", 1)],
                         ids=["as-cut", "upload1-slow", "create1-slow"])
async def test_fallback_live_asks_failed_lines_live(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, slow: tuple[str, int] | None
) -> None:
    """`batch_fallback_live`: a failed job's lines are asked live (the simulator), each the
    request's next attempt; nothing goes into a second job. The two jobs are the same size:
    the fault falls on the job created first, which the lane does not order (with a slow first
    upload or create the job cut second is; CI's load could do the same)."""
    rows = kit.plan_rows(MODEL, 80)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    live_config, adapter = kit.sim_model(MODEL, sim.root_url)
    config = replace(live_config, dispatch="batch", batch_fallback_live=True)
    fake = FakeBatch(faults={1: "fail"}, delays={slow: 0.2} if slow else {})
    summary = await dispatch(
        plan, run_dir, {MODEL: config}, {MODEL: adapter}, batch_clients={MODEL: fake},
        policy=POLICY, batch_poll_s=0.001, log_console=None,
    )
    assert summary.complete, summary.lines()
    assert len(fake.jobs) == 2  # 40 + 40 lines; the failed job's 40 went live
    attempts = scan_attempts(run_dir, ["request_id", "attempt", "provider", "outcome"]).collect()
    live = attempts.filter(pl.col("provider") == "openai")
    assert live.height == 40 and set(live["attempt"].to_list()) == {2}
    assert set(live["outcome"].to_list()) == {"ok"}
    failed = attempts.filter(pl.col("outcome") == "provider_error")
    assert failed.height == 40 and set(failed["attempt"].to_list()) == {1}


async def test_live_lane_skips_requests_a_live_job_holds(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A model switched from batch to live on resume leaves the requests of its uncollected
    jobs to those jobs (asking them live too could pay twice)."""
    rows = kit.plan_rows(MODEL, 50)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    await _run(plan, run_dir, FakeBatch(kill_at=("poll", 1, "before")))
    held = {rid for j in fold_jobs(run_dir).values() if j.live for rid in j.requests}
    assert len(held) >= 40  # the first job (40 lines) at least, not collected
    config, adapter = kit.sim_model(MODEL, sim.root_url)
    summary = await dispatch(plan, run_dir, {MODEL: config}, {MODEL: adapter},
                             policy=POLICY, log_console=None)
    asked = set(scan_attempts(run_dir, ["request_id"]).collect()["request_id"].to_list())
    assert summary.unaccepted == len(held) and not asked & held
    assert len(asked) == 50 - len(held)
    # Said, not left to a closing line that sent its user round for ever: the lane's line
    # and the summary name the requests held, and what asks them.
    assert summary.held_by_jobs == {MODEL: len(held)}
    line = next(x for x in summary.lines() if x.startswith(f"  {MODEL}:"))
    assert f"{len(held)} requests held by batch jobs of an earlier run, asked when the model is " \
        "dispatched as batch again" in line
    assert line.startswith(f"  {MODEL}: waiting, {50 - len(held)}/50 done"), line


async def test_a_live_lane_counts_answers_a_held_job_already_gave_as_accepted(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A job killed before its "collected" line holds requests already answered: switched
    to live, the lane said "8 requests held ... asked when dispatched as batch again" of 8
    answered ones, and the run ended incomplete."""
    rows = kit.plan_rows(MODEL, 30)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    assert (await _run(plan, run_dir, FakeBatch())).complete
    jobs = run_dir / JOBS_FILE
    kept = [line for line in jobs.read_bytes().splitlines(keepends=True)
            if orjson.loads(line)["event"] != COLLECTED]  # fmt: skip
    jobs.write_bytes(b"".join(kept))
    config, adapter = kit.sim_model(MODEL, sim.root_url)
    summary = await dispatch(plan, run_dir, {MODEL: config}, {MODEL: adapter},
                             policy=POLICY, log_console=None)  # fmt: skip
    assert summary.complete and summary.held_by_jobs == {}, summary.lines()
    assert summary.lanes[MODEL].already_accepted == 30


async def test_status_shows_jobs_by_where_they_stand(tmp_path: Path, kit: type[Kit]) -> None:
    from io import StringIO

    from rich.console import Console

    from engine.status import status
    from runs.commands.status import render

    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(faults={1: "expire"}, kill_at=("poll", 5, "before"))
    await _run(plan, run_dir, fake)
    jobs = status(run_dir)["batch_jobs"][MODEL]
    standing = {g: v for g, v in jobs.items() if v["jobs"]}
    assert sum(v["lines"] for g, v in standing.items() if g not in ("done", "expired")) > 0
    assert sum(v["jobs"] for v in jobs.values()) == len(fold_jobs(run_dir))
    await _run(plan, run_dir, fake)
    jobs = status(run_dir)["batch_jobs"][MODEL]
    assert jobs["expired"] == {"jobs": 1, "lines": 40}
    assert jobs["queued"]["jobs"] == jobs["running"]["jobs"] == jobs["collecting"]["jobs"] == 0
    assert jobs["done"]["lines"] == 100 - 40 + fake.injected["expired_lines"]
    out = StringIO()
    render(status(run_dir), Console(file=out, width=200))
    text = out.getvalue()
    assert "batch jobs (jobs / lines)" in text and "1 / 40" in text
    from engine.lanefile import read_lane_states

    lane = (read_lane_states(run_dir) or {})["lanes"][MODEL]
    assert (lane["dispatch"], lane["concurrency_cap"], lane["jobs_in_flight"]) == ("batch", 3, 0)


async def test_spend_cap_holds_whole_jobs_at_their_worst(tmp_path: Path, kit: type[Kit]) -> None:
    """A job reserves its worst case (every line at its output cap, at the batch prices)
    before it is planned, and settles what its lines reportedly cost; once the next job
    could pass the cap, none is planned, and a resume without the cap finishes exactly once."""
    rows = kit.plan_rows(MODEL, 150)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    config = _config(max_tokens=100, batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, max_jobs_in_flight=1))
    capped = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=0.009,
    )
    assert capped.spend_cap_reached and capped.lanes[MODEL].state.value == "cancelled"
    assert capped.spend is not None
    spent = capped.spend.spent_usd
    assert 0 < spent <= 0.009
    # What the cap counted is what the ledger's usage costs at the batch prices.
    usage = scan_attempts(run_dir, ["tokens_in", "tokens_out"]).collect().sum()
    assert spent == pytest.approx((usage["tokens_in"].item() + usage["tokens_out"].item()) / 1e6)
    assert 0 < capped.accepted < 150
    assert all(not job.live for job in fold_jobs(run_dir).values())
    finished = await _run(plan, run_dir, fake)
    assert finished.complete
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})


async def test_no_remainder_below_the_providers_floor(tmp_path: Path, kit: type[Kit]) -> None:
    """With a floor of 15 lines per job and 40 at most, 50 queries are cut 35 + 15 (a 40 + 10
    cut would strand 10 below the floor)."""
    rows = kit.plan_rows(MODEL, 50)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(limits_=replace(FakeBatch().limits, min_lines=15, max_jobs_in_flight=1))
    summary = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    assert sorted(len(j.requests) for j in fold_jobs(run_dir).values()) == [15, 35]
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})


@pytest.mark.parametrize(
    ("left", "said"),
    [(10, "10 queries wait: fewer than sim's minimum of 15 lines per job"),
     (1, "1 query waits: fewer than sim's minimum of 15 lines per job")],  # not "1 queries"
)  # fmt: skip
async def test_leftover_below_the_floor_waits_and_says_why(
    tmp_path: Path, kit: type[Kit], left: int, said: str
) -> None:
    rows = kit.plan_rows(MODEL, left)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, min_lines=15))
    summary = await _run(plan, tmp_path / "run", fake)
    assert summary.unaccepted == left and not fake.jobs
    assert said in summary.lanes[MODEL].message
    assert summary.lanes[MODEL].state.value == "stopped"  # it read "done, 0/10 done"


async def test_leftover_below_the_floor_goes_live_saying_so(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """With `batch_fallback = "live"` the lines below the provider's smallest job were asked
    live at live prices without a word (planned and capped at batch prices)."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 10))
    live_config, adapter = kit.sim_model(MODEL, sim.root_url)
    config = replace(live_config, dispatch="batch", batch_fallback_live=True)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, min_lines=15))
    console = io.StringIO()
    summary = await dispatch(
        plan, tmp_path / "run", {MODEL: config}, {MODEL: adapter}, batch_clients={MODEL: fake},
        policy=POLICY, batch_poll_s=0.001, log_console=console,
    )  # fmt: skip
    assert summary.complete and not fake.jobs, summary.lines()
    assert (
        f"dutchbook warning: {MODEL}: 10 queries asked live at live prices (batch_fallback = "
        "\"live\"): fewer than sim's minimum of 15 lines per batch job"
    ) in console.getvalue().splitlines()


async def test_a_resumed_job_counts_its_lines_once(tmp_path: Path, kit: type[Kit]) -> None:
    """The lines of a job re-attached on resume are counted by the lane when it collects
    them, never also as accepted-before by the plan reader (which may reach them after)."""
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=("poll", 3, "before"))
    first = await _run(plan, run_dir, fake)
    assert first.accepted < 100
    second = await dispatch(
        plan, run_dir, {MODEL: _config()}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, batch_rows=5,
    )
    lane = second.lanes[MODEL]
    assert (lane.already_accepted, lane.accepted) == (first.accepted, 100 - first.accepted)
    assert second.complete and lane.done == 100


async def test_limits_that_allow_no_valid_job_stop_the_lane(tmp_path: Path, kit: type[Kit]) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    fake = FakeBatch(limits_=replace(FakeBatch().limits, max_lines=12, min_lines=100))
    summary = await _run(plan, tmp_path / "run", fake)
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped" and not fake.jobs and summary.attempts == 0
    assert "jobs of at most 12 lines cannot reach the provider's minimum of 100" in lane.message


async def test_no_valid_job_stops_the_lane_with_a_live_fallback_too(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """The fallback lane shares the batch lane's stats: started on a lane halted already,
    it said RUNNING, then DONE ("m: done, 0/28"), and the audit named no stopped lane."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    live_config, adapter = kit.sim_model(MODEL, sim.root_url)
    config = replace(live_config, dispatch="batch", batch_fallback_live=True)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, max_lines=12, min_lines=100))
    summary = await dispatch(
        plan, tmp_path / "run", {MODEL: config}, {MODEL: adapter}, batch_clients={MODEL: fake},
        policy=POLICY, batch_poll_s=0.001, log_console=None,
    )  # fmt: skip
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped" and summary.attempts == 0, summary.lines()
    assert "cannot reach the provider's minimum of 100" in lane.message


async def test_budgets_of_a_line_that_always_fails_hold_as_live(
    tmp_path: Path, kit: type[Kit],
) -> None:
    """A request whose line is never a usable answer is asked at most max_answer_failures
    times, each retry with the next seed; one whose line always errs, max_attempts times."""
    from providers.batch import LineResult
    from providers.types import Completion, Failure, Outcome

    rows = kit.plan_rows(MODEL, 30)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    bad, erring = rows[4]["request_id"], rows[7]["request_id"]
    seeds: list[int] = []

    class Stubborn(FakeBatch):
        async def results(self, fetch: Any, state: Any) -> Any:
            lines = await super().results(fetch, state)
            out = []
            for line in lines:
                if line.request_id == bad:
                    job = self.jobs[state.job_id]
                    sent = next(x for x in self._lines(job) if x["custom_id"] == bad)
                    seeds.append(int(sent["seed"]))  # type: ignore[call-overload]
                    line = LineResult(bad, Completion("no idea", "stop", 5, 2, None, "fake"))
                elif line.request_id == erring:
                    line = LineResult(erring, Failure(Outcome.PROVIDER_ERROR, "500 line"))
                out.append(line)
            return out

    fake = Stubborn()
    summary = await _run(plan, tmp_path / "run", fake)
    attempts = scan_attempts(tmp_path / "run", ["request_id", "attempt", "outcome", "detail"])
    frame = attempts.collect()
    mine = frame.filter(pl.col("request_id") == bad).sort("attempt")
    assert mine["outcome"].to_list() == ["invalid_response"] * POLICY.max_answer_failures
    assert "gave up: 3 answer failures" in mine["detail"][-1]
    assert seeds == [seeds[0] + k for k in range(3)]  # each retry asks with the next seed
    errs = frame.filter(pl.col("request_id") == erring)
    assert errs["outcome"].to_list() == ["provider_error"] * POLICY.max_attempts
    retries = summary.lanes[MODEL].retries
    assert summary.unaccepted == 2 and retries.exhausted == 1  # the erring line
    assert retries.answer_budget_spent == 1  # the bad one: its answer budget, not attempts


async def test_a_line_not_in_the_providers_format_spends_attempts_not_the_answer_budget(
    tmp_path: Path, kit: type[Kit],
) -> None:
    """As live (`tests/engine/test_foreign_replies.py`): a line whose body is not the
    provider's reply at all is no answer of the model's, so it is asked max_attempts times,
    not max_answer_failures, and its attempts say why."""
    from providers.batch import LineResult
    from providers.types import Failure, Outcome

    rows = kit.plan_rows(MODEL, 12)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    odd = rows[3]["request_id"]

    class Odd(FakeBatch):
        async def results(self, fetch: Any, state: Any) -> Any:
            page = Failure(Outcome.INVALID_RESPONSE, "reply has no choices", foreign=True)
            lines = await super().results(fetch, state)
            return [LineResult(odd, page) if x.request_id == odd else x for x in lines]

    summary = await _run(plan, tmp_path / "run", Odd())
    frame = scan_attempts(tmp_path / "run", ["request_id", "outcome", "detail"]).collect()
    mine = frame.filter(pl.col("request_id") == odd)
    assert mine["outcome"].to_list() == ["invalid_response"] * POLICY.max_attempts
    assert all(detail.endswith(FOREIGN_NOTE) for detail in mine["detail"])
    retries = summary.lanes[MODEL].retries
    assert retries.exhausted == 1 and retries.answer_budget_spent == 0


async def test_jobs_are_cut_by_bytes_too(tmp_path: Path, kit: type[Kit]) -> None:
    rows = kit.plan_rows(MODEL, 60)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(limits_=replace(FakeBatch().limits, max_bytes=1000))
    summary = await _run(plan, tmp_path / "run", fake)
    assert summary.complete
    sizes = [sum(len(line) + 1 for line in lines) for _, lines in fake.inputs.values()]
    longest = max(len(line) + 1 for _, lines in fake.inputs.values() for line in lines)
    assert max(sizes) <= 1000 and len(sizes) >= 60 * 60 // 1000
    assert all(size > 1000 - longest for size in sizes[:-1])  # each full but the last


async def test_a_stop_request_leaves_jobs_to_the_next_run(tmp_path: Path, kit: type[Kit]) -> None:
    """Ctrl-C (the dispatch's stop event) stops polling and planning; the jobs stay with the
    provider, recorded, and the next run collects them: nothing asked twice."""
    import asyncio

    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    stop = asyncio.Event()
    fake = FakeBatch(polls_to_finish=1000)
    fake.on_call = lambda method: stop.set() if method == "poll" else None
    first = await dispatch(
        plan, run_dir, {MODEL: _config()}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, stop_event=stop,
    )
    assert first.lanes[MODEL].state.value == "cancelled" and first.attempts == 0
    live = [j for j in fold_jobs(run_dir).values() if j.live]
    assert any(j.job_id for j in live)  # created, polled once, left running
    fake.polls_to_finish, fake.on_call = 2, None
    second = await _run(plan, run_dir, fake)
    assert second.complete
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})


async def test_a_lines_words_echoing_the_clients_credential_reach_the_ledger_masked(
    tmp_path: Path, kit: type[Kit],
) -> None:
    """A line's error is the server's words (Vertex's status object, Bedrock's record error),
    which not every batch client redacts: a reviewer's Bedrock line quoting a session token
    reached `attempts/` as it was. The batch lane masks every line with the client's
    credentials, its answer's text and request id too."""
    from providers.batch import LineResult
    from providers.secrets import Secret
    from providers.types import Completion, Failure, Outcome

    token = "FwoGZXIvYXdzEJr-SESSION-TOKEN-VALUE"
    rows = kit.plan_rows(MODEL, 6)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    erring = rows[1]["request_id"]

    class Echoing(FakeBatch):
        echoed = False

        def secrets(self) -> tuple[Secret, ...]:
            return (Secret(token),)

        async def results(self, fetch: Any, state: Any) -> Any:
            out = []
            for line in await super().results(fetch, state):
                if line.request_id == erring and not self.echoed:
                    self.echoed = True
                    line = LineResult(erring, Failure(
                        Outcome.PROVIDER_ERROR, f"batch record error 400: bad token {token}",
                        provider_request_id=token))
                elif isinstance(line.result, Completion):
                    line = LineResult(line.request_id, replace(
                        line.result, provider_request_id=f"rid-{token}"))
                out.append(line)
            return out

    fake = Echoing()
    summary = await _run(plan, tmp_path / "run", fake)
    assert summary.complete
    attempts = scan_attempts(tmp_path / "run").collect()
    kept = " ".join(str(v) for row in attempts.iter_rows() for v in row)
    assert token not in kept and "bad token ***" in kept and "rid-***" in kept


async def test_a_create_whose_reply_was_lost_is_found_not_made_again(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider made the job but its reply was lost (a 502 from a proxy): the retried
    create made a second job under the same key (Vertex's create is a bare POST), never
    recorded, which ran and billed its lines."""
    from providers.batch import BatchError
    from providers.types import Failure, Outcome

    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch()
    made = FakeBatch.create

    async def reply_lost(self: FakeBatch, fetch: Any, job_key: str, input_ref: str) -> Any:
        state = await made(self, fetch, job_key, input_ref)
        if self.calls["create"] in (1, 3):
            raise BatchError(Failure(Outcome.PROVIDER_ERROR, "502 bad gateway", http_status=502))
        return state

    monkeypatch.setattr(FakeBatch, "create", reply_lost)
    summary = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})
    assert len(fake.jobs) == len(fold_jobs(run_dir)) == 3


@pytest.mark.parametrize("killed_at", [("upload", 1, "before"), ("create", 1, "before")])
async def test_a_resumed_job_not_yet_created_waits_for_the_spend_cap(
    tmp_path: Path, kit: type[Kit], killed_at: tuple[str, int, str]
) -> None:
    """Jobs planned (or uploaded) but not created when a run was killed were created by the
    resume whatever its --max-cost: a cap of $0.0001 ended "$0.0008 of $0.0001". Nothing of
    such a job runs or bills before it is created, so it reserves its worst case first."""
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=killed_at)
    config = _config(max_tokens=100, batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    first = await _run(plan, run_dir, fake)
    assert not first.complete and not fake.jobs
    capped = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=0.000001,
    )
    assert capped.spend_cap_reached and not fake.jobs, capped.lines()
    assert capped.spend is not None and capped.spend.spent_usd == 0
    finished = await _run(plan, run_dir, fake)
    assert finished.complete, finished.lines()
    _check_exactly_once(run_dir, fake, {r["request_id"] for r in rows})


async def test_a_resume_says_which_batch_jobs_it_collected(tmp_path: Path, kit: type[Kit]) -> None:
    """"100/100 done through 2 batch jobs" after a resume, where a third, collected by the
    first run, carried some of them: "through 2 batch jobs this run, 30 answered before", in
    the words of a first run's "through 3 batch jobs" (it said "(2 batch jobs collected this
    run)")."""
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=("results", 2, "before"))
    first = await _run(plan, run_dir, fake)
    assert 0 < first.accepted < 100 and first.lanes[MODEL].jobs_collected == 1
    second = await _run(plan, run_dir, fake)
    assert second.complete, second.lines()
    collected = second.lanes[MODEL].jobs_collected
    assert collected == len(fake.jobs) - 1
    already = second.lanes[MODEL].already_accepted
    assert f"100/100 done through {collected} batch jobs this run, {already} answered before" in (
        second.lines()[1])
    third = await _run(plan, run_dir, fake)  # nothing left: no "(0 batch jobs collected ...)"
    assert third.lines()[1] == f"  {MODEL}: done, 100/100 done", third.lines()


async def test_a_control_call_that_keeps_failing_is_said_until_it_works(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create failing for minutes (27 tries) showed the lane "running" in `status` and
    nothing else once the console's warnings stopped."""
    rows = kit.plan_rows(MODEL, 30)  # one job
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(transient={1, 2, 3, 4})
    said: list[str] = []
    failed = batch_lane.BatchLane._control_failed

    async def spy(self: batch_lane.BatchLane, what: str, failure: Any, tries: int) -> None:
        await failed(self, what, failure, tries)
        said.append(self.stats.message)

    monkeypatch.setattr(batch_lane.BatchLane, "_control_failed", spy)
    summary = await _run(plan, tmp_path / "run", fake)
    assert summary.complete, summary.lines()
    assert said[:2] == ["", ""]
    assert [s.split(" (")[0] for s in said[2:]] == [
        "batch upload failing, 3 tries so far", "batch upload failing, 4 tries so far"
    ]
    assert "(the last: rate_limit, HTTP 429: 429 slow down); trying again in " in said[3]
    assert summary.lanes[MODEL].message == ""  # it worked again: nothing left said


async def _killed_with_one_job_created(
    tmp_path: Path, kit: type[Kit], queries: int
) -> tuple[Path, Path, FakeBatch, ModelConfig]:
    """A run of `queries` killed with its first job (40 lines) created and running and the
    next not: the plan, the folder, the fake (its jobs now finishing at the second poll) and
    a config with batch prices of $1 a million tokens either way."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, queries))
    run_dir = tmp_path / "run"
    # Job 1 stays running until the kill: at 1 ms polls it could otherwise finish and be
    # collected before job 2's create on a loaded machine (CI once saw 40 accepted here).
    fake = FakeBatch(kill_at=("create", 2, "before"), polls_to_finish=1000)
    first = await _run(plan, run_dir, fake)
    assert first.accepted == 0 and len(fake.jobs) == 1
    fake.polls_to_finish = 2
    config = _config(max_tokens=100, batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    return plan, run_dir, fake, config


async def test_a_capped_resume_collects_the_jobs_already_created(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Killed with one job created and the next not: a resume under a cap with no room for
    the second halted the lane at once, and cancelled the first, which had run and been
    billed, uncollected (and the same command did the same again)."""
    plan, run_dir, fake, config = await _killed_with_one_job_created(tmp_path, kit, 100)
    capped = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=0.000001,
    )
    lane = capped.lanes[MODEL]
    assert capped.accepted == 40 and len(fake.jobs) == 1, capped.lines()
    assert lane.state.value == "cancelled" and "spend cap" in lane.message, lane.message
    assert [job.collected for job in fold_jobs(run_dir).values()].count(True) == 1


async def test_a_capped_resume_counts_the_jobs_already_created_before_cutting_more(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Killed with one job created and running: a resume under a cap with room for the next
    job's worst case alone, but not beside the first's, cut and created it all the same, as
    if the cap were empty (a tester's run ended at $0.1037 of $0.06). The created job holds
    its worst case first; once it is collected, what it cost leaves no room for the next."""
    from engine.spend import Prices, worst_case_cost

    plan, run_dir, fake, config = await _killed_with_one_job_created(tmp_path, kit, 80)
    prices = Prices(1.0, 1.0)
    rows = pl.read_parquet(plan).to_dicts()  # two jobs of 40 lines
    worst = {r["request_id"]: worst_case_cost(prices, config, r["system"], r["user"]) for r in rows}
    (created,) = [job for job in fold_jobs(run_dir).values() if job.job_id is not None]
    rest = sum(cost for rid, cost in worst.items() if rid not in created.requests)
    # Room for the rest at their worst, not for the created job's worst beside them; what that
    # job really costs (a few tokens a line) is more than the slack left.
    slack = 1e-9
    capped = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=rest + slack,
    )
    assert len(fake.jobs) == 1, capped.lines()  # nothing new was created
    assert capped.accepted == len(created.requests) and capped.spend_cap_reached
    assert capped.spend is not None and slack < capped.spend.spent_usd <= rest + slack
    assert capped.lanes[MODEL].state.value == "cancelled", capped.lines()


async def test_a_capped_resume_with_a_job_not_created_before_one_created_ends(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Killed with its first job's create unrecorded (a lost reply, a create retried) and its
    second created: a resume under a cap with room for either job's worst case, not both,
    waited for room for the first before it had started the second, whose collection was
    what would make that room: it never ended, a Ctrl-C neither (a reviewer's)."""
    from engine.spend import Prices, worst_case_cost

    rows = kit.plan_rows(MODEL, 80)  # two jobs of 40 lines
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(polls_to_finish=1000)
    # Killed once both jobs are recorded created, whatever the order of the lane's steps: by
    # call count (the third poll) a loaded machine could poll the first job three times
    # before it had created the second (CI did).
    fake.kill_if = lambda method: (
        method == "poll" and "job-2" in fake.jobs and fake.jobs["job-2"].polls >= 1
    )
    await _run(plan, run_dir, fake)
    jobs = list(fold_jobs(run_dir).values())
    assert len(jobs) == 2 and all(job.job_id for job in jobs)
    path = run_dir / JOBS_FILE
    kept = [line for line in path.read_bytes().splitlines(keepends=True)
            if not (orjson.loads(line)["job_key"] == jobs[0].job_key
                    and orjson.loads(line)["event"] in ("created", "status"))]  # fmt: skip
    path.write_bytes(b"".join(kept))
    fake.polls_to_finish = 2
    config = _config(max_tokens=100, batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    prices = Prices(1.0, 1.0)
    worst = [sum(worst_case_cost(prices, config, r["system"], r["user"]) for r in rows
                 if r["request_id"] in job.requests) for job in jobs]  # fmt: skip
    summary = await asyncio.wait_for(dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=max(worst) * 1.01,
    ), timeout=30)  # fmt: skip
    assert summary.accepted >= 40 and len(fake.jobs) == 2, summary.lines()  # none made twice
    assert summary.spend is not None and summary.spend.spent_usd <= max(worst) * 1.01


LIVE_BESIDE = "live-beside"


class _KilledWithAJob(NamedTuple):
    plan: Path
    run_dir: Path
    fake: FakeBatch
    config: ModelConfig  # the batch model's, priced
    live: ModelConfig  # a priced live model beside it, `LIVE_BESIDE`
    adapter: Adapter
    held: float  # the created job's worst case


async def _killed_with_a_job(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, live_rows: int
) -> _KilledWithAJob:
    """A folder whose first run, of the batch model alone, was killed with its one job of 40
    lines created at the fake provider; the plan holds `live_rows` for `LIVE_BESIDE` too."""
    from engine.spend import Prices, worst_case_cost

    plan = kit.write_plan(
        tmp_path / "plan.parquet", kit.plan_rows(MODEL, 40) + kit.plan_rows(LIVE_BESIDE, live_rows)
    )
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=("poll", 1, "before"), polls_to_finish=1000)
    first = await _run(plan, run_dir, fake)
    assert first.accepted == 0 and len(fake.jobs) == 1, first.lines()
    config = _config(max_tokens=100, batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    live, adapter = kit.sim_model(LIVE_BESIDE, sim.root_url, price_in_per_mtok=1.0,
                                  price_out_per_mtok=1.0)  # fmt: skip
    held = sum(worst_case_cost(Prices(1.0, 1.0), config, r["system"], r["user"])
               for r in pl.read_parquet(plan).filter(pl.col("model") == MODEL).to_dicts())
    return _KilledWithAJob(plan, run_dir, fake, config, live, adapter, held)


async def test_a_capped_resume_holds_created_jobs_before_any_lane_reserves(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live model beside a batch model whose killed run left a job created: the job's hold
    landed only once the batch lane had read the jobs file and the plan, by when the live
    lane had spent the room it needs from the same cap, which the job's cost then passed (a
    reviewer's trace: "spend cap reached: $0.0098 of $0.0086"). The batch lane's reading is
    made slow here: while it reads, any lane reserving has the cap to itself."""
    from engine.spend import SpendCap

    live_name = LIVE_BESIDE
    plan, run_dir, fake, config, live, adapter, held = await _killed_with_a_job(
        tmp_path, kit, sim, live_rows=400
    )
    fake.polls_to_finish = 2
    budget = held * 1.01  # room for the job at its worst, and no more than a live attempt
    order: list[str] = []
    reserve, hold, read = SpendCap.reserve, SpendCap.hold, batch_lane.BatchLane._resumable

    async def reserving(self: SpendCap, worst: float, *args: Any) -> bool:
        order.append("reserve")
        return await reserve(self, worst, *args)

    def holding(self: SpendCap, worst: float) -> None:
        order.append("hold")
        hold(self, worst)

    async def slow(self: batch_lane.BatchLane) -> Any:
        """Reads once a lane reserving beside it (if any) has reached the cap."""
        assert self.spend is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 0.3
        while loop.time() < deadline and not order:
            await asyncio.sleep(0.01)
        deadline = loop.time() + 10
        while order and not self.spend.reached and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return await read(self)

    monkeypatch.setattr(SpendCap, "reserve", reserving)
    monkeypatch.setattr(SpendCap, "hold", holding)
    monkeypatch.setattr(batch_lane.BatchLane, "_resumable", slow)
    capped = await dispatch(
        plan, run_dir, {MODEL: config, live_name: live}, {live_name: adapter},
        batch_clients={MODEL: fake}, policy=POLICY, batch_poll_s=0.001, log_console=None,
        budget_usd=budget,
    )
    assert capped.lanes[MODEL].accepted == 40 and len(fake.jobs) == 1, capped.lines()
    assert capped.spend is not None and capped.spend.spent_usd <= budget, capped.lines()
    assert order[0] == "hold", order[:5]


async def test_the_progress_display_is_up_while_created_jobs_are_read_for_their_holds(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the holds' reading (`BatchLane.hold_created`, seconds for a paper-scale
    folder's jobs) ran before the progress display started, the console saying nothing."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 40))
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=("poll", 1, "before"), polls_to_finish=1000)
    await _run(plan, run_dir, fake)  # its one job created, then the run killed
    fake.polls_to_finish = 2
    order: list[str] = []
    read = batch_lane.BatchLane._resumable

    async def reading(self: batch_lane.BatchLane) -> Any:
        order.append("read")
        return await read(self)

    class Sink:
        def start(self, lanes: list[Any]) -> None:
            order.append("start")

        def refresh(self) -> None:
            pass

        def stop(self) -> None:
            order.append("stop")

    monkeypatch.setattr(batch_lane.BatchLane, "_resumable", reading)
    config = _config(batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    summary = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=100.0, progress=Sink(),
    )  # fmt: skip
    assert summary.lanes[MODEL].accepted == 40, summary.lines()
    assert order == ["start", "read", "stop"]


async def test_a_batch_lane_halted_at_its_start_keeps_its_created_jobs_room_and_ends(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A capped resume whose batch lane halts as it starts (limits that allow no valid job)
    cancelled the task of the job an earlier run created before its first step, so its hold
    was never freed: a live model beside it, which the hold left no room, waited for ever.
    The job runs and bills at the provider all the same: its room stays taken (a tester's
    live lane spent it once freed, and the job's bill passed the cap), and the live lane
    ends at once, cancelled by the cap, saying why."""

    live_name = LIVE_BESIDE
    plan, run_dir, fake, config, live, adapter, held = await _killed_with_a_job(
        tmp_path, kit, sim, live_rows=10
    )
    fake.limits_ = replace(fake.limits_, min_lines=50)  # above its 40 lines a job
    capped = await asyncio.wait_for(dispatch(
        plan, run_dir, {MODEL: config, live_name: live}, {live_name: adapter},
        batch_clients={MODEL: fake}, policy=POLICY, batch_poll_s=0.001, log_console=None,
        budget_usd=held * 1.01,  # no room for a live attempt beside the job's worst case
    ), timeout=20)  # fmt: skip
    assert capped.lanes[live_name].accepted == 0, capped.lines()
    assert capped.lanes[live_name].state.value == "cancelled", capped.lines()
    assert "more held by batch jobs not yet collected" in capped.lanes[live_name].message
    assert capped.lanes[MODEL].state.value == "stopped", capped.lines()
    assert capped.spend is not None and capped.spend.committed_usd == pytest.approx(held)


async def test_a_batch_lane_halted_with_a_job_at_the_provider_keeps_its_room_taken(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tester: a capped resume's batch lane halted (its key refused at a poll) with a job an
    earlier run created still running at the provider; the job's hold was freed, a live lane
    beside it spent the room, and once the job was collected the ledger held $0.0170 against
    the capped run's $0.0128. The room stays taken: spend, the job's included, within it."""
    from engine.spend import recorded_spend
    from providers.batch import BatchError
    from providers.types import Failure, Outcome

    live_name = LIVE_BESIDE
    plan, run_dir, fake, config, live, adapter, held = await _killed_with_a_job(
        tmp_path, kit, sim, live_rows=400
    )
    models = {MODEL: config, live_name: live}
    budget = held * 1.5

    async def refused(self: FakeBatch, fetch: Any, job_id: str) -> Any:
        self.jobs[job_id].polls += 1  # the job runs on at the provider
        raise BatchError(Failure(Outcome.AUTH_ERROR, "401 key expired", http_status=401))

    with monkeypatch.context() as patched:
        patched.setattr(FakeBatch, "poll", refused)
        capped = await asyncio.wait_for(dispatch(
            plan, run_dir, models, {live_name: adapter}, batch_clients={MODEL: fake},
            policy=POLICY, batch_poll_s=0.001, log_console=None, budget_usd=budget,
        ), timeout=60)  # fmt: skip
    assert capped.lanes[MODEL].state.value == "stopped", capped.lines()
    fake.polls_to_finish = 1  # the key mended: the job, which ran, is collected
    await _run(plan, run_dir, fake)
    assert recorded_spend(run_dir, models) <= budget, capped.lines()
    assert capped.spend is not None and capped.spend.committed_usd == pytest.approx(held)


async def test_a_live_lane_waiting_for_room_batch_jobs_hold_says_so(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A tester: a live lane whose room in the cap an earlier run's created batch job held
    waited silently, "running" with no ETA (with a real provider, for hours). While it
    waits its line says why; once the job is collected and its room freed, it asks."""
    from engine.lanes import WAITING_FOR_ROOM

    live_name = LIVE_BESIDE
    plan, run_dir, fake, config, live, adapter, held = await _killed_with_a_job(
        tmp_path, kit, sim, live_rows=10
    )
    fake.kill_at, fake.polls_to_finish = None, 10  # collected after ten polls
    said: set[str] = set()

    class Sink:
        def start(self, lanes: list[Any]) -> None:
            self.lanes = lanes

        def refresh(self) -> None:
            said.update(s.message for s in self.lanes if s.model == live_name)

        def stop(self) -> None:
            pass

    summary = await asyncio.wait_for(dispatch(
        plan, run_dir, {MODEL: config, live_name: live}, {live_name: adapter},
        batch_clients={MODEL: fake}, policy=POLICY, batch_poll_s=0.02, log_console=None,
        budget_usd=held * 1.01, progress=Sink(),
    ), timeout=60)  # fmt: skip
    assert WAITING_FOR_ROOM in said, said
    assert summary.lanes[live_name].accepted == 10, summary.lines()
    assert summary.lanes[live_name].message == "", summary.lines()


async def test_a_ctrl_c_with_a_created_job_out_does_not_read_as_the_cap_reached(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A review: a stop (Ctrl-C) ended the batch lane's created job, whose room was then kept
    taken, and the live lane waiting for that room read the cap reached: "spend cap reached
    ... raise --max-cost" after an interrupt, where a resume under the same cap carries on.
    Stopping, the room is freed: no lane asks any more."""

    live_name = LIVE_BESIDE
    plan, run_dir, fake, config, live, adapter, held = await _killed_with_a_job(
        tmp_path, kit, sim, live_rows=10
    )
    fake.kill_at = None
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.5, stop.set)
    stopped = await asyncio.wait_for(dispatch(
        plan, run_dir, {MODEL: config, live_name: live}, {live_name: adapter},
        batch_clients={MODEL: fake}, policy=POLICY, batch_poll_s=0.01, log_console=None,
        budget_usd=held * 1.01, stop_event=stop,
    ), timeout=20)  # fmt: skip
    assert stopped.spend is not None and not stopped.spend.reached, stopped.lines()
    assert "spend: $0.0000 of the $0.0086 cap" in stopped.lines(), stopped.lines()


async def test_a_batch_model_asked_live_on_a_capped_resume_keeps_its_jobs_room_taken(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """A tester switched a batch model to `dispatch = "live"` on a capped resume while jobs
    an earlier run created were at the provider: nothing held their room, a live lane spent
    it ($0.0147 of a $0.0200 cap), and collected later they brought the folder to $0.0294.
    Their worst case stays taken for the whole dispatch."""

    live_name = LIVE_BESIDE
    plan, run_dir, _, _, live, adapter, held = await _killed_with_a_job(
        tmp_path, kit, sim, live_rows=400
    )
    asked_live, asked_live_adapter = kit.sim_model(
        MODEL, sim.root_url, price_in_per_mtok=1.0, price_out_per_mtok=1.0,
        batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0,
    )  # fmt: skip
    asked_live = replace(asked_live, max_tokens=100)  # the output cap its job was priced at
    budget = held * 1.2
    capped = await asyncio.wait_for(dispatch(
        plan, run_dir, {MODEL: asked_live, live_name: live},
        {MODEL: asked_live_adapter, live_name: adapter}, policy=POLICY, log_console=None,
        budget_usd=budget,
    ), timeout=60)  # fmt: skip
    assert capped.spend is not None
    assert capped.spend.spent_usd <= budget - held + 1e-12, capped.lines()
    assert capped.spend.committed_usd == pytest.approx(held)
    assert capped.lanes[live_name].state.value == "cancelled", capped.lines()
    assert "more held by batch jobs not yet collected" in "\n".join(capped.lines())


async def test_a_capped_resume_prices_created_jobs_from_their_prompts_lengths(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capped resume read the prompts of every request its created jobs hold, to price
    their holds (a paper-scale folder: hundreds of thousands of prompts, hundreds of MB at
    once). It reads their lengths now, in polars, and holds the same dollars to the bit."""
    from engine.plan import plan_items
    from engine.spend import Prices, SpendCap, worst_case_cost

    rows = kit.plan_rows(MODEL, 40)  # one job
    texts = [("", "plain"), (None, "a null system"),
             ("é composed, e\u0301 decomposed", "天气 and a rain cloud 🌧️, ẞ"),
             ("S" * 75, "U" * 20_001)]  # fmt: skip
    for row, (system, user) in zip(rows, texts * 10, strict=True):
        row["system"], row["user"] = system, f"{user} {row['request_id']}"
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=("poll", 1, "before"))
    await _run(plan, run_dir, fake)
    (created,) = fold_jobs(run_dir).values()
    assert created.job_id is not None
    config = _config(max_tokens=100, batch_price_in_per_mtok=0.15, batch_price_out_per_mtok=0.6)
    by_id = {r["request_id"]: r for r in rows}
    expected = sum(
        worst_case_cost(Prices(0.15, 0.6), config, by_id[rid]["system"] or "", by_id[rid]["user"])
        for rid in created.requests
    )
    held: list[float] = []
    read: list[int] = []
    hold = SpendCap.hold

    def holding(self: SpendCap, worst: float) -> None:
        held.append(worst)
        hold(self, worst)

    def reading(*args: Any) -> Any:
        out = plan_items(*args)
        read.extend(len(item.system) + len(item.user) for item in out)
        return out

    monkeypatch.setattr(SpendCap, "hold", holding)
    monkeypatch.setattr(batch_lane, "plan_items", reading)
    capped = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=1.0,
    )
    assert capped.complete, capped.lines()
    assert len(read) == 40 and sum(read) == 0, "no prompt of the uploaded job read"
    assert held == [expected]


async def test_a_cap_without_room_for_a_job_says_the_job_and_batch_max_lines(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A job's lines are reserved together: a cap with room for one line but not a job of
    five said "the next attempt could cost ... a lower max_tokens reserves less", where
    batch_max_lines is what fits (two lines a job got answers under the same cap)."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    config = _config(max_tokens=100, batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0)
    capped = await dispatch(
        plan, tmp_path / "run", {MODEL: config}, {}, batch_clients={MODEL: FakeBatch()},
        policy=POLICY, batch_poll_s=0.001, log_console=None, budget_usd=0.000001,
    )  # fmt: skip
    message = capped.lanes[MODEL].message
    assert "the next batch job of 30 lines could cost up to $" in message, message
    assert "a lower max_tokens or batch_max_lines reserves less" in message, message


async def test_a_resumed_job_not_created_is_reserved_with_its_prompts(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Its prompts are read back from the plan before it is reserved: without them its worst
    case was its output alone, which the cap below holds, and it was created."""
    rows = kit.plan_rows(MODEL, 30)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    fake = FakeBatch(kill_at=("create", 1, "before"))
    await _run(plan, run_dir, fake)
    config = _config(max_tokens=100, batch_price_in_per_mtok=1_000_000.0,
                     batch_price_out_per_mtok=0.0)  # fmt: skip
    capped = await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake}, policy=POLICY,
        batch_poll_s=0.001, log_console=None, budget_usd=0.5,
    )
    assert capped.spend_cap_reached and not fake.jobs, capped.lines()


async def test_a_stop_while_a_call_fails_keeps_the_stops_reason(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another job's 401 stopped the lane while this one's call was failing: the failing
    call's "batch upload failing, 3 tries so far" took the stop's place in the summary."""
    from engine.lanes import LaneState

    rows = kit.plan_rows(MODEL, 30)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(transient={1, 2, 3, 4})
    failed = batch_lane.BatchLane._control_failed

    async def stopping(self: batch_lane.BatchLane, what: str, failure: Any, tries: int) -> None:
        if tries == 3:  # as if another job's call had been refused meanwhile
            self._halt(LaneState.STOPPED, "batch poll failed (auth_error, HTTP 401): no key")
        await failed(self, what, failure, tries)

    monkeypatch.setattr(batch_lane.BatchLane, "_control_failed", stopping)
    summary = await _run(plan, tmp_path / "run", fake)
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped"
    assert lane.message.endswith("batch poll failed (auth_error, HTTP 401): no key"), lane.message
