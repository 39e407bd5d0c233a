"""Batch jobs the provider keeps running (against the FAKE provider, tests/engine/batch_fake.py):
a tester's run whose three jobs the provider kept answering `in_progress` read, in `status`,
only "3 batch jobs (28 queries) still at the provider", the lane "running", its ETA "?", with
no job id, no word of the provider's, no count and no age; its console said nothing but
"workhorse 0/28 (0.0/s, ETA ?)" each minute. Each job is now said with the provider's word,
its lines done as last polled, its time there and its last poll; the console says what a
lane only waiting on its jobs waits on."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from engine.batch_jobs import JOBS_FILE, BatchJob, JobRecords, fold_jobs
from engine.batch_waits import JobWait, parse_time, waiting_text
from engine.dispatch import dispatch
from engine.durable import read_record_lines
from engine.lanes import LaneStats
from engine.progress import progress_line
from engine.progress import render as live_table
from engine.retry import RetryPolicy
from engine.status import status
from providers.batch import Fetch, JobState, JobStatus
from providers.types import ModelConfig
from runs.commands.status import render
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
#: What the stuck provider says of a job, poll after poll: Bedrock's words, two of them one
#: normalised state (queued), then running with 3 lines done, for ever.
WORDS = (("Submitted", JobStatus.QUEUED, 0), ("Scheduled", JobStatus.QUEUED, 0),
         ("InProgress", JobStatus.RUNNING, 3))


class Stuck(FakeBatch):
    """A provider whose jobs never end: `WORDS` poll by poll, then the last of them."""

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        await self._enter("poll", fetch)
        job = self.jobs[job_id]
        job.polls += 1
        word, state, done = WORDS[min(job.polls, len(WORDS)) - 1]
        return JobState(job_id, state, word, total=len(self._lines(job)), completed=done,
                        failed=0)


class Watching:
    """A progress sink that only keeps the lanes (the test reads them as polls arrive)."""

    lanes: list[LaneStats]

    def start(self, lanes: list[LaneStats]) -> None:
        self.lanes = lanes

    def refresh(self) -> None:
        pass

    def stop(self) -> None:
        pass


async def _stuck_run(tmp_path: Path, kit: type[Kit]) -> tuple[Path, Stuck, dict[str, Any]]:
    """60 queries in two jobs (40 and 20 lines) the provider never ends, stopped after many
    polls; what the console would have said once both were running (`seen`)."""
    run_dir, stop, sink, seen = tmp_path / "run", asyncio.Event(), Watching(), {}
    run_dir.mkdir()
    plan = kit.write_plan(run_dir / "plan.parquet", kit.plan_rows(MODEL, 60))
    fake = Stuck()

    def on_call(method: str) -> None:
        if method != "poll":
            return
        # Once both jobs were answered InProgress: by state, not by a count a loaded
        # machine's timing decides (the second job may be created late).
        settled = len(fake.jobs) == 2 and all(j.polls >= len(WORDS) for j in fake.jobs.values())
        if settled and "waiting" not in seen:
            [lane] = sink.lanes
            oldest = min(filter(None, (parse_time(j.created_at)
                                       for j in fold_jobs(run_dir).values())))
            seen["waiting"] = lane.batch_waiting(now=oldest + timedelta(seconds=250))
            seen["line"] = progress_line(sink.lanes, 60.0)
            out = StringIO()
            Console(file=out, width=400).print(live_table(sink.lanes))
            seen["table"] = out.getvalue()
        if "waiting" in seen and fake.calls["poll"] >= 20:
            stop.set()

    fake.on_call = on_call
    await dispatch(
        plan, run_dir, {MODEL: ModelConfig(name=MODEL, provider="sim", model="m",
                                           dispatch="batch")},
        {}, batch_clients={MODEL: fake}, policy=RetryPolicy(max_attempts=3, base_s=0.001),
        batch_poll_s=0.001, log_console=None, stop_event=stop, progress=sink,
    )
    return run_dir, fake, seen


async def test_a_lane_waiting_on_its_jobs_says_what_it_waits_on(
    tmp_path: Path, kit: type[Kit]
) -> None:
    _, fake, seen = await _stuck_run(tmp_path, kit)
    waiting = ("waiting on 2 batch jobs at the provider (InProgress, 6/60 lines done, "
               "oldest 4:10)")
    assert seen["waiting"] == waiting
    # The minutely line and the live table say it, not "0.0/s, ETA ?" or "running" alone.
    assert seen["line"].startswith(f"dispatch 1:00: {MODEL} 0/60 waiting on 2 batch jobs at "
                                   "the provider (InProgress, 6/60 lines done, oldest ")
    assert "running: waiting on 2 batch jobs at the provider (InProgress" in seen["table"]
    assert fake.calls["poll"] >= 20


async def test_polls_record_the_providers_word_once_per_change(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """Each job's `status` lines: one per change of what the provider said, its own word
    among it (Scheduled, still queued, was not written), none for the polls that changed
    nothing; `status` reads each job back with its last poll's time (`lanes.json`)."""
    run_dir, fake, _ = await _stuck_run(tmp_path, kit)
    lines = read_record_lines(run_dir / JOBS_FILE)
    for job_id in fake.jobs:
        said = [(r["provider_status"], r["completed"]) for r in lines
                if r["event"] in ("created", "status") and r["job_id"] == job_id]
        assert said[1:] == [("Submitted", 0), ("Scheduled", 0), ("InProgress", 3)]
    assert fake.calls["poll"] >= 20  # many polls, three lines a job
    summary = status(run_dir)
    entries = summary["batch_jobs_at_provider"]
    created = {r["job_id"]: r["at"] for r in lines if r["event"] == "created"}
    assert [e["job_id"] for e in entries] == sorted(created, key=created.__getitem__)
    for entry in entries:
        assert (entry["provider_status"], entry["status"], entry["completed"]) == (
            "InProgress", "running", 3)
        assert entry["total"] == len(fake._lines(fake.jobs[entry["job_id"]]))
        assert parse_time(entry["created_at"]) == parse_time(created[entry["job_id"]])
        assert entry["last_polled_at"] is not None and entry["at_provider_s"] >= 0
    out = StringIO()
    render(summary, Console(file=out, width=400))
    text = out.getvalue()
    assert "batch jobs at the provider, longest there first:" in text
    assert "  job-1 [fake-batch]: InProgress, 3/40 lines done, at the provider 0:0" in text
    assert "last polled " in text and " UTC (0:0" in text


def test_status_names_a_few_jobs_and_counts_the_rest(tmp_path: Path, kit: type[Kit]) -> None:
    """A paper-scale lane keeps 20 jobs in flight: `status` names five, oldest first, then
    "and 15 more"; `--json` has every one. A job no lane polled says so."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rows = kit.plan_rows(MODEL, 40)
    kit.write_plan(run_dir / "plan.parquet", rows)
    records = JobRecords(run_dir)
    for n in range(20):
        job = BatchJob(f"db-key-{n:02d}", MODEL, "groq",
                       {rows[2 * n]["request_id"]: 1, rows[2 * n + 1]["request_id"]: 1})
        records.planned(job)
        records.uploaded(job, f"file-{n}")
        records.created(job, JobState(f"batch_{n:02d}", JobStatus.RUNNING, "in_progress",
                                      total=2, completed=n % 2, failed=0))
    summary = status(run_dir)
    assert len(summary["batch_jobs_at_provider"]) == 20
    out = StringIO()
    render(summary, Console(file=out, width=400))
    said = [line for line in out.getvalue().splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in said[:5]] == [f"batch_{n:02d}" for n in range(5)]
    assert said[1].startswith("  batch_01 [fake-batch]: in_progress, 1/2 lines done, at the "
                              "provider 0:0")
    assert said[0].endswith("not polled by a run on file")
    assert said[5] == "  and 15 more (`dutchbook status --json` lists each)"
    assert len(said) == 6


def test_waiting_text_counts_the_providers_words_apart() -> None:
    created = parse_time("2026-01-01T00:00:00+00:00")
    assert created is not None

    def wait(n: int, word: str, done: int | None, failed: int = 0) -> JobWait:
        return JobWait(f"k{n}", f"b{n}", MODEL, word, "running", False, done, failed, 10,
                       created + timedelta(minutes=n))

    waits = [wait(0, "in_progress", 4, 1), wait(1, "validating", 0), wait(2, "in_progress", 6)]
    now = created + timedelta(minutes=10)
    assert waiting_text(waits, now) == (
        "waiting on 3 batch jobs at the provider (in_progress 2, validating 1, 10/30 lines "
        "done, 1 failed, oldest 10:00)")
    assert waiting_text([wait(0, "queued", None)], now) == (
        "waiting on 1 batch job at the provider (queued, ?/10 lines done, oldest 10:00)")
