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
