"""`batches/jobs.jsonl` (engine.batch_jobs): each step of a job on its own line, a line torn
by a kill skipped and never glued to the next, the fold giving each job's latest state."""

from __future__ import annotations

import re
from pathlib import Path

from engine.batch_jobs import (
    COLLECTED,
    CREATED,
    JOBS_FILE,
    PLANNED,
    UPLOADED,
    BatchJob,
    JobRecords,
    fold_jobs,
    held_ids,
    jobs_summary,
    new_job_key,
)
from providers.batch import JobState, JobStatus


def _job(key: str, ids: list[str]) -> BatchJob:
    return BatchJob(key, "m", "groq", {rid: 1 for rid in ids})


def test_steps_fold_to_the_latest_state_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    records = JobRecords(tmp_path)
    a, b = _job("db-m-a", ["r1", "r2"]), _job("db-m-b", ["r3"])
    records.planned(a)
    records.uploaded(a, "file-1")
    records.planned(b)
    with (tmp_path / JOBS_FILE).open("ab") as handle:  # a kill mid-write
        handle.write(b'{"event": "created", "job_key": "db-m-b", "job_')
    records.created(a, JobState("batch-1", JobStatus.RUNNING, "in_progress"))
    jobs = fold_jobs(tmp_path)
    assert [jobs[k].step for k in ("db-m-a", "db-m-b")] == [CREATED, PLANNED]
    assert jobs["db-m-a"].input_ref == "file-1" and jobs["db-m-a"].job_id == "batch-1"
    assert held_ids(jobs) == {"r1", "r2", "r3"}
    records.uploaded(b, "file-2")
    records.status(a, JobState("batch-1", JobStatus.EXPIRED, "expired", detail="24h"))
    records.collected(a, {"answered": 1, "absent": 1})
    jobs = fold_jobs(tmp_path)
    assert jobs["db-m-b"].step == UPLOADED and jobs["db-m-a"].step == COLLECTED
    assert held_ids(jobs) == {"r3"} and jobs["db-m-a"].counts == {"answered": 1, "absent": 1}
    summary = jobs_summary(tmp_path)["m"]
    assert summary["expired"] == {"jobs": 1, "lines": 2}
    assert summary["queued"] == {"jobs": 1, "lines": 1}


def test_job_keys_are_labels_every_provider_takes() -> None:
    keys = {new_job_key("Qwen/Qwen3-235B-A22B (batch)") for _ in range(50)}
    assert len(keys) == 50
    for key in keys:
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]{0,47}", key), key


def test_lines_at_the_provider_follow_the_collections_rule() -> None:
    """`status` and the audit count a job's lines still at the provider by the rule the
    resume's collection uses (`line_recorded`): a line whose request has an accepted
    attempt, or an attempt from the job's own number on that is not interrupted, is in the
    ledger. A copy of that rule had drifted: a line killed mid-write, then written on the
    resume as the next attempt (number 3 for a job that sent it as 2), still counted as at
    the provider."""
    import polars as pl

    from engine.batch_jobs import AtProvider, BatchJob, at_provider, line_recorded

    job = BatchJob("k", "m", "groq", {"a": 1, "b": 2, "c": 2, "d": 1, "e": 2}, input_ref="f")
    attempts = pl.LazyFrame(
        {
            "request_id": ["a", "b", "b", "c", "e", "e"],
            "attempt": [1, 1, 2, 2, 2, 3],
            "outcome": ["ok", "timeout", "interrupted", "provider_error", "interrupted",
                        "damaged_batch_result"],
        }
    )  # a accepted, c recorded, e recorded as its next attempt; b torn, d never reached
    assert at_provider({"k": job}, attempts) == AtProvider(1, 2, 1, uncreated_queries=2)
    # A job planned but never uploaded is not at the provider: nothing of it can run or be
    # billed (a stopped lane's status said "10 batch jobs still at the provider"). One
    # uploaded is, created or not: a kill after the create call leaves it running there.
    planned = BatchJob("p", "m", "groq", {"f": 1, "g": 1})
    assert at_provider({"k": job, "p": planned}, attempts) == AtProvider(1, 2, 1, 0, 2)
    assert at_provider({"p": planned}) == AtProvider(0, 0)
    uploaded = BatchJob("u", "m", "groq", {"f": 1, "g": 1}, input_ref="file-1")
    assert at_provider({"u": uploaded}) == AtProvider(1, 2, 1, 0, 2)
    # Said apart, and not as a job: "1 batch job (1 query) still at the provider, all
    # uploaded with no job id on file" was said of an input a stopped lane never made a job
    # of (it stops before a create; only a kill can cut a create's reply).
    uploaded_again = BatchJob("v", "m", "groq", {"i": 1}, input_ref="file-3")
    assert at_provider({"u": uploaded, "v": uploaded_again}).phrase() == (
        "2 batch input files (3 queries) uploaded with no batch job on file (a stop before the "
        "create, or a kill before its reply was recorded: a resume finds such a job, or "
        "creates one)"
    )
    created = BatchJob("c", "m", "groq", {"h": 1}, input_ref="file-2", job_id="batch-1")
    assert at_provider({"u": uploaded, "c": created}).phrase() == (
        "1 batch job (1 query) still at the provider, and 1 batch input file (2 queries) "
        "uploaded with no batch job on file (a stop before the create, or a kill before its "
        "reply was recorded: a resume finds such a job, or creates one)"
    )
    assert at_provider({"c": created}).phrase() == "1 batch job (1 query) still at the provider"
    assert line_recorded(2, {1: "timeout", 2: "interrupted", 3: "provider_error"}) == 3
    assert line_recorded(2, {1: "ok"}) == 1 and line_recorded(2, {1: "timeout"}) is None


def test_jobs_a_simulator_inside_its_run_held_are_not_said_at_the_provider() -> None:
    """After a stop, `status`, the audit and the next step said the jobs of `provider =
    "sim"` (or a rehearsal without --sim-url) were "still at the provider" and would be
    collected; that simulator ended with its run, and a resume asks their queries again."""
    from engine.audit import resume_line
    from engine.batch_jobs import AtProvider, BatchJob, at_provider

    gone = BatchJob("s", "m", "sim", {"h": 1, "i": 1}, input_ref="file-3", job_id="batch-3",
                    simulated_in_process=True)  # fmt: skip
    held = at_provider({"s": gone})
    assert held == AtProvider(1, 2, 0, simulator_jobs=1)
    assert held.phrase() == (
        "1 batch job (2 queries) left with the simulator of the run that planned them, which "
        "ended with it (a resume asks their queries again)"
    )
    assert resume_line(held) == (
        "Running the same command again asks only the unanswered requests, those of the 1 "
        "batch job (2 queries) left with the simulator of the run that planned them among them"
    )
    created = BatchJob("c", "m", "groq", {"h": 1}, input_ref="file-2", job_id="batch-1")
    assert at_provider({"s": gone, "c": created}).phrase() == (
        "2 batch jobs (3 queries) still at the provider, 1 of them left with the simulator of "
        "the run that planned them, which ended with it (a resume asks their queries again)"
    )


def test_simulator_jobs_are_said_with_their_own_kind_created_or_not() -> None:
    """Simulator jobs were counted across created jobs and bare input files and said with the
    created ones: "1 batch job (10 queries) still at the provider, 2 of them left with the
    simulator ..." where the 2 were input files no job had been created over."""
    from engine.batch_jobs import AtProvider, BatchJob, at_provider

    tens = [{f"{key}{n}": 1 for n in range(10)} for key in "cuvs"]
    created = BatchJob("c", "m", "groq", tens[0], input_ref="file-1", job_id="batch-1")
    files = [BatchJob(key, "m", "sim", tens[n], input_ref=f"file-{key}",
                      simulated_in_process=True) for n, key in ((1, "u"), (2, "v"))]
    held = at_provider({"c": created, "u": files[0], "v": files[1]})
    assert held == AtProvider(3, 30, 2, 2, 20, uncreated_simulator_jobs=2)
    assert held.phrase() == (
        "1 batch job (10 queries) still at the provider, and 2 batch input files (20 queries) "
        "uploaded with no batch job on file (a stop before the create, or a kill before its "
        "reply was recorded: a resume finds such a job, or creates one), 2 of them uploaded to "
        "the simulator of the run that planned them, which ended with it (a resume uploads them "
        "again)"
    )
    gone = BatchJob("s", "m", "sim", tens[3], input_ref="file-s", job_id="batch-s",
                    simulated_in_process=True)  # fmt: skip
    both = at_provider({"c": created, "s": gone, "u": files[0]})
    assert both.phrase() == (
        "2 batch jobs (20 queries) still at the provider, 1 of them left with the simulator of "
        "the run that planned them, which ended with it (a resume asks their queries again), "
        "and 1 batch input file (10 queries) uploaded with no batch job on file (a stop before "
        "the create, or a kill before its reply was recorded: a resume finds such a job, or "
        "creates one), 1 of them uploaded to the simulator of the run that planned them, which "
        "ended with it (a resume uploads them again)"
    )


def test_the_next_step_says_input_files_with_no_job_are_asked_when_created() -> None:
    """The audit's next step said a rerun "collects the 1 batch job (10 queries) still at the
    provider, and 2 batch input files (20 queries) uploaded with no batch job on file ...,
    without asking their queries again": a file no job was found over is made a job, which
    asks its queries."""
    from engine.audit import resume_line
    from engine.batch_jobs import AtProvider

    assert resume_line(AtProvider(3, 30, 2, uncreated_queries=20)) == (
        "Running the same command again collects the 1 batch job (10 queries) still at the "
        "provider, without asking their queries again, finds the job of each of the 2 batch "
        "input files (20 queries) uploaded with no batch job on file, or creates it (which "
        "asks its queries), and asks only the other unanswered requests"
    )
    assert resume_line(AtProvider(1, 4, 1, uncreated_queries=4)) == (
        "Running the same command again finds the job of the 1 batch input file (4 queries) "
        "uploaded with no batch job on file, or creates it (which asks its queries), and asks "
        "only the other unanswered requests"
    )
    # A job the run's own simulator held is asked again, not collected.
    assert resume_line(AtProvider(3, 30, 1, 2, 10)) == (
        "Running the same command again asks again the queries of the 2 batch jobs (20 "
        "queries) left with the simulator of the run that planned them, finds the job of the 1 "
        "batch input file (10 queries) uploaded with no batch job on file, or creates it (which "
        "asks its queries), and asks only the other unanswered requests"
    )
