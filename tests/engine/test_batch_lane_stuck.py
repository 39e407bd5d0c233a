"""Batch lanes that could not end before (against the FAKE provider, tests/engine/batch_fake.py):
a job the provider no longer knows (HTTP 404) stops the lane with its ids and both ways out,
and is given up only when the user names it (`--abandon-batch-jobs`), recorded; jobs that
always fail are not resubmitted without end; a stopped or cancelled lane says how many of its
jobs are still at the provider."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest

from engine.batch_jobs import ABANDONED, JOBS_FILE, BatchJob, fold_jobs, jobs_summary
from engine.batch_lane import FAILED_JOB_STREAK, GONE_WITH_SIMULATOR
from engine.dispatch import DispatchSummary, dispatch
from engine.durable import read_record_lines
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from providers.batch import BatchError, Fetch, JobState, LineResult
from providers.types import Failure, ModelConfig, Outcome
from runs.pipeline import RunError, check_abandon
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from providers.sim.server import SimHandle
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
POLICY = RetryPolicy(max_attempts=6, base_s=0.001, cap_s=0.002)


class Forgetful(FakeBatch):
    """A provider that may forget its jobs (restarted, or asked under another account)."""

    forgotten: frozenset[str] = frozenset()

    def forget(self) -> None:
        """Every job so far is unknown from now on (kept only so new ids never reuse theirs)."""
        self.forgotten = frozenset(self.jobs)

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        if job_id in self.forgotten:
            await self._enter("poll", fetch)
            raise BatchError(Failure(Outcome.BAD_REQUEST,
                                     f"No batch found with id '{job_id}'.", http_status=404))
        return await super().poll(fetch, job_id)


async def _run(
    plan: Path, run_dir: Path, fake: FakeBatch, **kw: Any
) -> DispatchSummary:
    config = ModelConfig(name=MODEL, provider="sim", model="m", dispatch="batch")
    return await dispatch(
        plan, run_dir, {MODEL: config}, {}, batch_clients={MODEL: fake},
        policy=POLICY, batch_poll_s=0.001, log_console=None, **kw,
    )


def _uncollected(run_dir: Path) -> dict[str, BatchJob]:
    """The created jobs a kill left uncollected, by id."""
    return {j.job_id: j for j in fold_jobs(run_dir).values() if j.live and j.job_id}


async def _dispatched_until_killed(
    tmp_path: Path, kit: type[Kit], fake: FakeBatch, rows: int
) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A plan of `rows` queries dispatched to `fake` until the kill its `kill_at` sets."""
    planned = kit.plan_rows(MODEL, rows)
    plan = kit.write_plan(tmp_path / "plan.parquet", planned)
    run_dir = tmp_path / "run"
    await _run(plan, run_dir, fake)
    return plan, run_dir, planned


async def test_a_job_the_provider_forgot_waits_for_the_user_then_is_abandoned(
    tmp_path: Path, kit: type[Kit]
) -> None:
    # Killed with its three jobs created, none collected (placed by state, not by a count).
    fake = Forgetful(polls_to_finish=1000)
    fake.kill_if = lambda method: method == "poll" and len(fake.jobs) == 3
    plan, run_dir, rows = await _dispatched_until_killed(tmp_path, kit, fake, 100)
    lost = _uncollected(run_dir)
    assert len(lost) == 3, "the kill left created jobs uncollected"
    held = {rid for job in lost.values() for rid in job.requests}
    fake.forget()
    fake.polls_to_finish = 2
    # job-1's poll is the slowest: the line named the jobs in the order their 404s came
    # ("job-2,job-3,job-1"), another each time the same folder was run.
    fake.arrived.clear()
    fake.delays[("poll", 1)] = 0.2

    # Asked again without a word from the user: never re-sent, the rest done, one clear line.
    stuck = await _run(plan, run_dir, fake)
    lane = stuck.lanes[MODEL]
    assert lane.state.value == "stopped" and stuck.unaccepted == len(held)
    ids = ",".join(sorted(lost))
    assert "\n" not in lane.message
    assert "404" in lane.message and "No batch found" in lane.message
    assert f"--abandon-batch-jobs {ids}" in lane.message
    assert "other credentials" in lane.message  # the case where asking again pays twice
    assert not held & set(scan_attempts(run_dir, ["request_id"]).collect()["request_id"])

    # Named by the user: recorded abandoned, each line a failed attempt, then asked again.
    done = await _run(plan, run_dir, fake, batch_abandon=frozenset(lost))
    assert done.complete, done.lines()
    events = [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == ABANDONED]
    assert sorted(r["job_id"] for r in events) == sorted(lost)
    assert all("No batch found" in r["detail"] for r in events)
    attempts = scan_attempts(run_dir, ["request_id", "attempt", "outcome", "detail"]).collect()
    gone = attempts.filter(pl.col("request_id").is_in(list(held)))
    assert gone.filter(pl.col("attempt") == 1)["outcome"].unique().to_list() == ["provider_error"]
    assert gone.filter(pl.col("attempt") == 1)["detail"].str.contains("abandoned").all()
    responses = scan_responses(run_dir, ["request_id"]).collect()["request_id"].to_list()
    assert sorted(responses) == sorted(r["request_id"] for r in rows)
    assert max(fake.answered.values()) == 1  # the forgotten jobs never ran: nothing paid twice
    assert jobs_summary(run_dir)[MODEL]["abandoned"] == {"jobs": len(lost), "lines": len(held)}


async def test_jobs_of_a_simulator_that_ended_with_its_run_are_given_up_unasked(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """The simulator a run starts inside itself holds its batch jobs; stopped, the jobs end
    with it, and the next run's own simulator answers 404 for each: a resumed rehearsal
    stopped on them (exit 4), its way out a flag naming every job. Given up at once now,
    saying why, and their lines asked again; nothing is paid twice."""
    here = frozenset({MODEL})
    fake = Forgetful(kill_at=("poll", 1, "before"))
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    await _run(plan, run_dir, fake, batch_simulated_here=here)
    lost = _uncollected(run_dir)
    assert lost, "the kill left created jobs uncollected"
    fake.forget()  # the earlier run's simulator, gone with it
    done = await _run(plan, run_dir, fake, batch_simulated_here=here)
    assert done.complete, done.lines()
    events = [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == ABANDONED]
    assert sorted(r["job_id"] for r in events) == sorted(lost)
    assert all(r["detail"].startswith(GONE_WITH_SIMULATOR) for r in events)
    held = {rid for job in lost.values() for rid in job.requests}
    attempts = scan_attempts(run_dir, ["request_id", "attempt", "detail"]).collect()
    first = attempts.filter(pl.col("request_id").is_in(list(held)) & (pl.col("attempt") == 1))
    assert first.height == len(held)
    assert first["detail"].str.contains("no provider ran this line, asked again").all()
    assert not first["detail"].str.contains("by the user").any()
    responses = scan_responses(run_dir, ["request_id"]).collect()["request_id"].to_list()
    assert sorted(responses) == sorted(r["request_id"] for r in rows)
    assert max(fake.answered.values()) == 1


async def test_lost_jobs_beside_a_leftover_below_the_floor_still_say_the_way_out(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A lane whose leftover waits below the provider's smallest job ended "stopped" with the
    leftover's words, and the lost jobs' stop line, naming --abandon-batch-jobs, was lost."""
    fake = Forgetful(kill_at=("poll", 1, "before"))
    plan, run_dir, _ = await _dispatched_until_killed(tmp_path, kit, fake, 100)
    lost = _uncollected(run_dir)
    assert lost
    fake.forget()
    fake.limits_ = replace(fake.limits_, min_lines=25)  # what is left cannot make a job
    stuck = await _run(plan, run_dir, fake)
    lane = stuck.lanes[MODEL]
    assert lane.state.value == "stopped"
    assert f"--abandon-batch-jobs {','.join(sorted(lost))}" in lane.message, lane.message


async def test_a_job_this_process_planned_is_not_given_up_unasked(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Its own simulator answering 404 for a job this very process planned is no simulator
    that ended with an earlier run: left to the user, as any other 404."""
    fake = Forgetful()
    fake.on_call = lambda method: fake.forget() if method == "poll" else None
    rows = kit.plan_rows(MODEL, 30)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    stuck = await _run(plan, run_dir, fake, batch_simulated_here=frozenset({MODEL}))
    lane = stuck.lanes[MODEL]
    assert lane.state.value == "stopped" and "--abandon-batch-jobs" in lane.message
    assert not [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == ABANDONED]


async def test_jobs_an_external_simulator_made_are_not_given_up_unasked(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Planned against a simulator running as a separate process (--sim-url), which may
    still hold them: a resume on a simulator of its own leaves them to the user, as a real
    provider's."""
    fake = Forgetful(kill_at=("poll", 1, "before"))
    plan, run_dir, _ = await _dispatched_until_killed(tmp_path, kit, fake, 100)
    lost = _uncollected(run_dir)
    fake.forget()
    stuck = await _run(plan, run_dir, fake, batch_simulated_here=frozenset({MODEL}))
    lane = stuck.lanes[MODEL]
    assert lane.state.value == "stopped" and "--abandon-batch-jobs" in lane.message
    assert not [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == ABANDONED]
    assert lost


class OutputGone(Forgetful):
    """A provider that still knows its jobs but no longer has their results (expired)."""

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        return await FakeBatch.poll(self, fetch, job_id)

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        if state.job_id in self.forgotten:
            await self._enter("results", fetch)
            raise BatchError(Failure(Outcome.BAD_REQUEST, "File not found.", http_status=404))
        return await super().results(fetch, state)


async def test_a_job_whose_result_file_is_gone_is_collected_as_damaged_results(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A 404 for the result file of a job the provider still knows, ended: its lines ran and
    were billed. It was reported as jobs the provider no longer knew, and `--abandon-batch-jobs`
    with their ids was taken, recording every line a `provider_error` at $0 and buying all of
    them again. Now each line is a damaged result (asked again once, then given up for good),
    the job is collected, not abandoned, and the lane ends done."""
    fake = OutputGone(kill_at=("poll", 1, "before"))
    plan, run_dir, _ = await _dispatched_until_killed(tmp_path, kit, fake, 100)
    jobs = _uncollected(run_dir)
    fake.forget()
    summary = await _run(plan, run_dir, fake, batch_abandon=frozenset(jobs))
    lane = summary.lanes[MODEL]
    assert summary.complete and lane.state.value == "done", lane.message
    assert "404" not in lane.message
    assert not [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == ABANDONED]
    attempts = scan_attempts(run_dir, ["request_id", "outcome", "detail"]).collect()
    damaged = attempts.filter(pl.col("outcome") == Outcome.DAMAGED_BATCH_RESULT.value)
    assert damaged.height == sum(len(job.requests) for job in jobs.values())
    assert all("no result file: the provider answers 404 (not found) for it (File not found.)"
               in detail for detail in damaged["detail"])
    held = {rid for job in jobs.values() for rid in job.requests}
    assert {fake.ran[rid] for rid in held} == {2}  # ran in the job, then once more


class ResultObjectGone(FakeBatch):
    """Its first job's results are two objects, the second answering 404: the first one's
    lines come with the 404 (`providers.batch_cloud.read_objects`, Bedrock's and Vertex's)."""

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        lines = list(await super().results(fetch, state))
        if state.job_id != "job-1":
            return lines
        gone = Failure(Outcome.BAD_REQUEST, "read batch output: NoSuchKey (1 of 2 result "
                       "objects)", http_status=404)
        raise BatchError(gone, read=lines[: len(lines) // 2])


async def test_a_result_object_gone_keeps_the_lines_of_the_objects_read(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A job's results in two objects, one gone (404): the lines of the one read were
    discarded, and every line of the job was a damaged result, charged and bought again. The
    lines read are taken; only the requests without one are damaged results (the single
    result file's rule), asked again once."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 30))
    run_dir = tmp_path / "run"
    fake = ResultObjectGone()
    summary = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    first = scan_attempts(run_dir, ["attempt", "outcome", "detail"]).collect().filter(
        pl.col("attempt") == 1)
    assert first.filter(pl.col("outcome") == Outcome.OK.value).height == 15
    damaged = first.filter(pl.col("outcome") == Outcome.DAMAGED_BATCH_RESULT.value)
    assert damaged.height == 15
    assert all("a result file missing: the provider answers 404 (not found) for it (read batch "
               "output: NoSuchKey (1 of 2 result objects))" in d for d in damaged["detail"])
    assert sorted(fake.ran.values()) == [1] * 15 + [2] * 15


class LosesInputs(FakeBatch):
    """A provider that loses uploaded input files (deleted before a job was made of them)."""

    lost_files: frozenset[str] = frozenset()
    always_404: bool = False

    def lose_inputs(self) -> None:
        self.lost_files = frozenset(ref for ref, _ in self.inputs.values())

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        if job_key in self.inputs and self.inputs[job_key][0] in self.lost_files:
            await self._enter("upload", fetch)
            self.inputs[job_key] = (f"file-again-{len(self.inputs)}", list(lines))
            return self.inputs[job_key][0]
        return await super().upload(fetch, job_key, lines)

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        if self.always_404 or input_ref in self.lost_files:
            await self._enter("create", fetch)
            raise BatchError(Failure(Outcome.BAD_REQUEST, f"File {input_ref} not found.",
                                     http_status=404))
        return await super().create(fetch, job_key, input_ref)


async def test_a_job_whose_uploaded_input_is_gone_is_uploaded_again(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Killed after the upload, before the job was made; the provider then lost the file:
    creating the job answered 404 on every resume, with no way out. No job was made of that
    input (`find` found none), so its lines are uploaded again, the same lines, and the job
    made of them: nothing is paid twice."""
    fake = LosesInputs(kill_at=("find", 1, "before"))  # uploaded and recorded, nothing made
    plan, run_dir, _ = await _dispatched_until_killed(tmp_path, kit, fake, 40)
    (sent_first,) = [lines for _, lines in fake.inputs.values()]
    fake.lose_inputs()
    summary = await _run(plan, run_dir, fake)
    assert summary.complete, summary.lines()
    assert fake.calls["upload"] == 2 and fake.calls["create"] == 2 and len(fake.jobs) == 1
    (job,) = fake.jobs.values()
    assert job.input_ref.startswith("file-again") and fake.inputs[job.key][1] == sent_first
    assert max(fake.answered.values()) == 1
    uploads = [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == "uploaded"]
    assert [r["input_ref"] for r in uploads] == ["file-1", job.input_ref]


async def test_a_create_that_404s_after_a_fresh_upload_stops_the_lane(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A 404 that uploading again does not cure (a model the provider does not know) stops
    the lane in the provider's words, once, instead of uploading for ever."""
    fake = LosesInputs()
    fake.always_404 = True
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 20))
    lane = (await _run(plan, tmp_path / "run", fake)).lanes[MODEL]
    assert lane.state.value == "stopped" and fake.calls["upload"] == 2
    assert "though the job's input was uploaded again: File file-" in lane.message


async def test_abandon_keeps_a_job_the_provider_still_knows(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Naming a job only permits giving it up on a 404: one still known is collected."""
    fake = Forgetful(kill_at=("poll", 1, "before"))
    plan, run_dir, _ = await _dispatched_until_killed(tmp_path, kit, fake, 60)
    named = frozenset(_uncollected(run_dir))
    summary = await _run(plan, run_dir, fake, batch_abandon=named)
    assert summary.complete
    assert not [r for r in read_record_lines(run_dir / JOBS_FILE) if r["event"] == ABANDONED]
    assert max(fake.ran.values()) == 1


def test_abandon_names_only_this_folders_live_jobs(tmp_path: Path, kit: type[Kit]) -> None:
    rows = kit.plan_rows(MODEL, 50)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    asyncio.run(_run(plan, run_dir, FakeBatch(kill_at=("poll", 1, "before"))))
    job = next(j for j in fold_jobs(run_dir).values() if j.job_id)
    assert check_abandon(run_dir, [f"{job.job_id}, "]) == {job.job_id}
    assert check_abandon(run_dir, []) == frozenset()
    with pytest.raises(RunError, match="--abandon-batch-jobs: batch_typo is not a batch job"):
        check_abandon(run_dir, [f"{job.job_id},batch_typo"])
    # "aaa, bbb is not a batch job": several read as one name
    with pytest.raises(RunError, match=r"batch_typo and bbb are not batch jobs of .*\(the "
                                       "folder's job ids are in the run's last stop line"):
        check_abandon(run_dir, ["bbb,batch_typo"])
    for empty in ([""], [" , ", ""]):  # a key meant and none given: not accepted silently
        with pytest.raises(RunError, match="--abandon-batch-jobs names no job"):
            check_abandon(run_dir, empty)


async def test_jobs_that_always_fail_stop_the_lane_in_the_providers_words(
    tmp_path: Path, kit: type[Kit]
) -> None:
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(faults={n: "fail" for n in range(1, 200)})
    summary = await _run(plan, tmp_path / "run", fake)
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped", summary.lines()
    assert f"stopped after {FAILED_JOB_STREAK} batch jobs in a row failed" in lane.message
    assert "input failed validation" in lane.message and "\n" not in lane.message
    # The jobs in flight when it stopped are all it made (3 at a time), not 15 and more.
    assert len(fake.jobs) <= FAILED_JOB_STREAK + fake.limits.max_jobs_in_flight
    assert f"{MODEL}: stopped, 0/100 done" in summary.lines()[1]


async def test_a_job_that_answers_breaks_the_failed_streak(
    tmp_path: Path, kit: type[Kit]
) -> None:
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    fake = FakeBatch(faults={1: "fail", 2: "fail"},
                     limits_=FakeBatch().limits.__class__(
                         max_lines=20, max_bytes=1 << 20, max_jobs_in_flight=1,
                         completion_window="24h"))
    summary = await _run(plan, tmp_path / "run", fake)
    assert summary.complete, summary.lines()


async def test_a_stopped_run_says_how_many_jobs_are_still_at_the_provider(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Ctrl-C leaves the jobs running at the provider: the lane's line says so (they may be
    billed) and that running the same command again collects them."""
    rows = kit.plan_rows(MODEL, 100)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    stop = asyncio.Event()
    fake = FakeBatch(polls_to_finish=1000)
    fake.on_call = lambda method: stop.set() if method == "poll" else None
    summary = await _run(plan, tmp_path / "run", fake, stop_event=stop)
    lane = summary.lanes[MODEL]
    open_jobs = [j for j in fold_jobs(tmp_path / "run").values() if j.live and j.job_id]
    assert lane.state.value == "cancelled" and open_jobs
    jobs = f"{len(open_jobs)} batch job" + ("s" if len(open_jobs) != 1 else "")
    assert (f"stop requested; {jobs} not yet collected from the "
            "provider (they may still run and be billed") in summary.lines()[1]


async def test_a_lost_job_stops_a_lane_with_a_live_fallback_too(
    tmp_path: Path, kit: type[Kit], sim: SimHandle,
) -> None:
    """A live fallback lane shares the batch lane's counters and ends DONE: the lost job must
    still stop the lane (Bedrock's rehearsal said `done, 12/112` with 100 lines lost)."""
    rows = kit.plan_rows(MODEL, 50)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    live_config, adapter = kit.sim_model(MODEL, sim.root_url)
    config = replace(live_config, dispatch="batch", batch_fallback_live=True)
    fake = Forgetful(kill_at=("poll", 1, "before"))

    async def run() -> DispatchSummary:
        return await dispatch(plan, run_dir, {MODEL: config}, {MODEL: adapter},
                              batch_clients={MODEL: fake}, policy=POLICY, batch_poll_s=0.001,
                              log_console=None)

    await run()
    # The jobs created before the kill: both, or on a loaded machine only the first.
    lost = sorted(_uncollected(run_dir))
    held = {rid for job in _uncollected(run_dir).values() for rid in job.requests}
    assert lost
    fake.forget()
    summary = await run()
    lane = summary.lanes[MODEL]
    assert lane.state.value == "stopped", summary.lines()
    assert f"--abandon-batch-jobs {','.join(lost)} " in lane.message
    assert summary.unaccepted == len(held)  # the rest went live or into a new job


@pytest.mark.parametrize("full_at", ["planned", "created", "collected"])
async def test_a_full_disk_under_the_jobs_file_stops_the_lane_as_disk_full(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch, full_at: str
) -> None:
    """A step of the jobs file that finds no room stops the lane, said as the disk being
    full, and the run with it (exit 6): the lane read "done" beside the disk-full exit."""
    import errno

    import engine.batch_jobs
    import engine.durable

    real = engine.durable.append_record_line_durably
    calls: dict[str, int] = {}

    def append(path: Path, record: dict[str, Any]) -> None:
        calls[record["event"]] = calls.get(record["event"], 0) + 1
        if record["event"] == full_at and calls[full_at] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, record)

    monkeypatch.setattr(engine.batch_jobs, "append_record_line_durably", append)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 100))  # 3 jobs
    summary = await _run(plan, tmp_path / "run", FakeBatch())
    lane = summary.lanes[MODEL]
    assert summary.disk_full is not None and "disk full" in summary.disk_full
    assert lane.state.value == "stopped", (lane.state, lane.message)
    assert "disk full" in lane.message and JOBS_FILE.name in lane.message
    assert not summary.complete


class SlowToReplyToCreates(FakeBatch):
    """Each create makes its job at once and replies once a stop is asked (the third create
    asks it, as a Ctrl-C would), the first at once, the others `reply_s` later."""

    reply_s = 0.2
    stop: asyncio.Event | None = None

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        assert self.stop is not None
        state = await super().create(fetch, job_key, input_ref)
        if len(self.jobs) == 3:
            self.stop.set()
        await self.stop.wait()
        await asyncio.sleep(0 if state.job_id == "job-1" else self.reply_s)
        return state


async def test_creates_answered_during_a_stop_are_recorded(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Ctrl-C while three creates waited for their replies: the first reply was recorded, the
    lane, its job then waiting to be polled, ended, and cut the other two creates, whose
    replies came back moments later. The lane said "1 batch job not yet collected" beside
    the audit's "3 batch jobs (28 queries) still at the provider, 2 of them uploaded with no
    job id on file". A create in flight is waited for now, and its reply recorded."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 28))
    run_dir = tmp_path / "run"
    stop = asyncio.Event()
    fake = SlowToReplyToCreates(limits_=replace(FakeBatch().limits, max_lines=10))
    fake.stop = stop
    summary = await _run(plan, run_dir, fake, stop_event=stop)
    lane = summary.lanes[MODEL]
    assert lane.state.value == "cancelled" and len(fake.jobs) == 3
    assert sorted(j.job_id or "" for j in fold_jobs(run_dir).values()) == sorted(fake.jobs)
    assert "stop requested; 3 batch jobs not yet collected" in lane.message


class UploadNeverAnswers(FakeBatch):
    """Each upload waits for a reply that never comes (a large file on a slow link); the
    first asks a stop, as a Ctrl-C would, `stop_after_s` into it."""

    stop_after_s = 0.1
    stop: asyncio.Event | None = None

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        assert self.stop is not None
        asyncio.get_running_loop().call_later(self.stop_after_s, self.stop.set)
        await asyncio.Event().wait()  # never set
        return await super().upload(fetch, job_key, lines)


async def test_a_stop_cuts_an_upload_in_flight_at_once(tmp_path: Path, kit: type[Kit]) -> None:
    """Ctrl-C while a job's upload was in flight waited for its reply: held 30 s by a tester,
    the stop took 30 s (a large upload, minutes). The lane's loop woke only when a job's task
    ended. It wakes at the stop now and cuts the upload: the job is left planned, not
    uploaded, for a resume to upload again."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 10))
    run_dir = tmp_path / "run"
    stop = asyncio.Event()
    fake = UploadNeverAnswers()
    fake.stop = stop
    started = time.monotonic()
    summary = await asyncio.wait_for(_run(plan, run_dir, fake, stop_event=stop), timeout=10)
    took = time.monotonic() - started
    assert took < fake.stop_after_s + 2, took
    lane = summary.lanes[MODEL]
    assert lane.state.value == "cancelled", lane.message
    jobs = list(fold_jobs(run_dir).values())
    assert jobs and all(j.input_ref is None and j.job_id is None for j in jobs)
    assert not fake.inputs and not fake.jobs
