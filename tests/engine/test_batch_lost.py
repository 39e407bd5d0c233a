"""Batch jobs created at a provider that `batches/jobs.jsonl` no longer knows (`engine.batch_lost`):
a resume would otherwise buy their requests again without a word."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson

from engine.batch_jobs import JOBS_FILE, BatchJob, JobRecords, fold_jobs
from engine.batch_lost import (
    ENGINE_LOG,
    KEYS_SHOWN,
    LOST_DETAIL,
    LostJob,
    lost_jobs,
    lost_jobs_line,
    record_given_up,
)
from engine.ledger import Ledger
from engine.records import AttemptRecord

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _log(run_dir: Path, *events: dict[str, object], torn: bytes = b"") -> None:
    path = run_dir / ENGINE_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps({"event": "lane_started", "model": "m"})]
    lines += [orjson.dumps({"event": "batch_job_created", "model": "m", **e}) for e in events]
    path.write_bytes(b"\n".join(lines) + b"\n" + torn)


def _created(key: str, job_id: str, lines: int) -> dict[str, object]:
    return {"job_key": key, "job_id": job_id, "lines": lines}


def _collect(run_dir: Path, job_id: str, request_ids: list[str]) -> None:
    """Each request's line of the job recorded as the batch lane records it."""
    with Ledger.open(run_dir) as ledger:
        for rid in request_ids:
            ledger.record_result(AttemptRecord(
                request_id=rid, attempt=1, model="m", provider="openai", started_at=T0,
                elapsed_ms=0.0, outcome="invalid_response", http_status=200,
                provider_request_id=None, retry_after_s=None, tokens_in=None, tokens_out=None,
                detail=f"no probability in the reply [batch job {job_id}]",
            ), None)


def test_no_log_and_no_jobs_file_lose_nothing(tmp_path: Path) -> None:
    assert lost_jobs(tmp_path) == []


def test_a_created_job_the_jobs_file_does_not_know_is_lost(tmp_path: Path) -> None:
    _log(tmp_path, _created("db-m-1", "job-1", 3), torn=b'{"event": "batch_job_cre')
    assert lost_jobs(tmp_path) == [LostJob("db-m-1", "job-1", "m", 3, 0)]
    said = lost_jobs_line(tmp_path, lost_jobs(tmp_path))
    assert "1 batch job created at the provider" in said and "db-m-1" in said
    assert "3 lines not in the ledger" in said and said.endswith("--abandon-batch-jobs db-m-1")


def test_a_long_list_of_lost_jobs_says_where_every_key_is(tmp_path: Path) -> None:
    """Ten keys are spelled in the flag whole; past that, a line naming five and "6 more"
    left the user no way to name the sixth."""
    _log(tmp_path, *(_created(f"db-m-{i}", f"job-{i}", 1) for i in range(11)))
    lost = lost_jobs(tmp_path)
    assert len(lost) == 11
    ten = lost_jobs_line(tmp_path, lost[:KEYS_SHOWN])
    assert ten.endswith("--abandon-batch-jobs " + ",".join(f"db-m-{i}" for i in range(10)))
    eleven = lost_jobs_line(tmp_path, lost)
    assert "db-m-4 and 6 more" in eleven and "db-m-5" not in eleven
    assert f"dutchbook status {tmp_path} --json`, lost_batch_jobs" in eleven


def test_a_job_the_jobs_file_knows_is_not_lost(tmp_path: Path) -> None:
    _log(tmp_path, _created("db-m-1", "job-1", 3), _created("db-m-2", "job-2", 2))
    JobRecords(tmp_path).planned(BatchJob("db-m-1", "m", "openai", {"r1": 1, "r2": 1, "r3": 1}))
    assert [job.job_key for job in lost_jobs(tmp_path)] == ["db-m-2"]


def test_a_job_whose_every_line_is_in_the_ledger_is_not_lost(tmp_path: Path) -> None:
    """Collected in full before its records went: nothing of it is at the provider. A job
    whose id another's begins with counts none of that other's lines."""
    _log(tmp_path, _created("db-m-1", "job-1", 3), _created("db-m-10", "job-10", 2))
    _collect(tmp_path, "job-1", ["r1", "r2", "r3"])
    _collect(tmp_path, "job-10", ["r4"])
    assert lost_jobs(tmp_path) == [LostJob("db-m-10", "job-10", "m", 2, 1)]
    _collect(tmp_path, "job-10", ["r5"])
    assert lost_jobs(tmp_path) == []


def test_a_job_given_up_is_written_down_and_not_lost_again(tmp_path: Path) -> None:
    _log(tmp_path, _created("db-m-1", "job-1", 3), _created("db-m-2", "job-2", 2))
    JobRecords(tmp_path).planned(BatchJob("db-m-3", "m", "openai", {"r9": 1}))
    lost = lost_jobs(tmp_path)
    record_given_up(tmp_path, lost, frozenset({"job-2"}))  # by its id; the other unnamed
    assert [job.job_key for job in lost_jobs(tmp_path)] == ["db-m-1"]
    written = orjson.loads((tmp_path / JOBS_FILE).read_bytes().splitlines()[-1])
    assert written["event"] == "abandoned" and written["job_key"] == "db-m-2"
    assert written["detail"] == LOST_DETAIL
    assert list(fold_jobs(tmp_path)) == ["db-m-3"]  # a line that names no requests holds none
