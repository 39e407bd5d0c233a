"""Batch jobs created at a provider that `batches/jobs.jsonl` no longer knows (`engine.batch_lost`):
a resume would otherwise buy their requests again without a word."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest

from engine.batch_jobs import JOBS_FILE, BatchJob, JobRecords, fold_jobs
from engine.batch_lost import (
    ENGINE_LOG,
    KEYS_SHOWN,
    LOST_DETAIL,
    LostJob,
    log_unlogged,
    lost_jobs,
    lost_jobs_line,
    unknown_jobs,
    write_down,
)
from engine.dispatch import dispatch
from engine.ledger import Ledger
from engine.records import AttemptRecord
from providers.batch import JobState, JobStatus
from providers.types import ModelConfig
from tests.engine.batch_fake import FakeBatch, Killed

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _log(run_dir: Path, *events: dict[str, object], torn: bytes = b"") -> None:
    path = run_dir / ENGINE_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps({"event": "lane_started", "model": "m"})]
    lines += [orjson.dumps({"event": "batch_job_created", "model": "m", **e}) for e in events]
    path.write_bytes(b"\n".join(lines) + b"\n" + torn)


def _created(key: str, job_id: str, lines: int) -> dict[str, object]:
    return {"job_key": key, "job_id": job_id, "lines": lines}


def _collect(
    run_dir: Path, job_id: str, request_ids: list[str],
    detail: str = "no probability in the reply [batch job {}]",
) -> None:
    """Each request's line of the job recorded as the batch lane records it."""
    with Ledger.open(run_dir) as ledger:
        for rid in request_ids:
            ledger.record_result(AttemptRecord(
                request_id=rid, attempt=1, model="m", provider="openai", started_at=T0,
                elapsed_ms=0.0, outcome="invalid_response", http_status=200,
                provider_request_id=None, retry_after_s=None, tokens_in=None, tokens_out=None,
                detail=detail.format(job_id),
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
    unknown = unknown_jobs(tmp_path)
    assert write_down(tmp_path, unknown, frozenset({"job-2"})) == 1  # by id; one unnamed
    assert [job.job_key for job in lost_jobs(tmp_path)] == ["db-m-1"]
    written = orjson.loads((tmp_path / JOBS_FILE).read_bytes().splitlines()[-1])
    assert written["event"] == "abandoned" and written["job_key"] == "db-m-2"
    assert written["detail"] == LOST_DETAIL
    assert list(fold_jobs(tmp_path)) == ["db-m-3"]  # a line that names no requests holds none


def test_a_job_collected_in_full_is_written_down_so_the_ledger_is_searched_once(
    tmp_path: Path,
) -> None:
    """A lost jobs file of a finished run left each of its jobs unknown for good, and every
    `status` and resume searched the whole ledger for them again."""
    _log(tmp_path, _created("db-m-1", "job-1", 2), _created("db-m-2", "job-2", 2))
    _collect(tmp_path, "job-1", ["r1", "r2"])
    unknown = unknown_jobs(tmp_path)
    assert [(job.job_key, job.recorded) for job in unknown] == [("db-m-1", 2), ("db-m-2", 0)]
    assert write_down(tmp_path, unknown, frozenset()) == 0
    assert [job.job_key for job in unknown_jobs(tmp_path)] == ["db-m-2"]
    written = orjson.loads((tmp_path / JOBS_FILE).read_bytes().splitlines()[-1])
    assert (written["event"], written["job_key"]) == ("collected", "db-m-1")
    assert fold_jobs(tmp_path) == {}


def test_a_simulator_inside_its_run_held_jobs_no_one_can_bill(tmp_path: Path) -> None:
    """Gone with the run whose simulator held them: nothing can run or bill their lines, and
    a resume asks them again, as it does when the jobs file has them."""
    _log(tmp_path, {**_created("db-m-1", "job-1", 2), "simulated_in_process": True},
         _created("db-m-2", "job-2", 2))  # fmt: skip
    assert [job.job_key for job in lost_jobs(tmp_path)] == ["db-m-2"]


def test_the_log_is_searched_across_its_blocks_and_a_bedrock_arn_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is read a block at a time: a line cut by a block's end is found whole. A job
    id holding colons (a Bedrock job's ARN) is counted in the ledger whole."""
    import engine.batch_lost

    arn = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc123"
    events = [_created(f"db-m-{i}", f"job-{i}", 1) for i in range(40)]
    _log(tmp_path, *events, _created("db-m-arn", arn, 2))
    _collect(tmp_path, arn, ["r1"])
    monkeypatch.setattr(engine.batch_lost, "_BLOCK", 97)  # lines longer than a block
    lost = {job.job_key: job for job in lost_jobs(tmp_path)}
    assert len(lost) == 41 and lost["db-m-arn"].recorded == 1


def test_a_reply_quoting_batch_job_does_not_name_the_job(tmp_path: Path) -> None:
    """A parse failure quotes the reply before the lane's note: the first "batch job ..." in
    the detail was taken for the job ("none'"), so a job collected in full read as lost. The
    job is the one the lane's note (the last bracket) or its own detail's start names."""
    _log(tmp_path, _created("db-m-1", "job-1", 3))
    quoted = "not_a_number: 'batch job none' is not a number [batch job {}]"
    _collect(tmp_path, "job-1", ["r1"], quoted)
    _collect(tmp_path, "job-1", ["r2"], "batch job {} expired before this line ran")
    _collect(tmp_path, "job-1", ["r3"], "x [omitted: seed; batch job {}] [gave up: 4 failures]")
    assert lost_jobs(tmp_path) == []
    # Quoted in brackets, across a line break, before the note that names the job: the note
    # at the detail's end is the job's; one quoted anywhere else names none.
    _log(tmp_path, _created("db-m-1", "job-1", 3), _created("db-m-2", "job-2", 1))
    _collect(tmp_path, "job-2", ["r4"], "no_json: 'a\n[batch job job-1] b' [batch job {}]")
    _collect(tmp_path, "job-2", ["r5"], "no_json: 'quoted [batch job {}] tail'")
    assert [(job.job_key, job.recorded) for job in unknown_jobs(tmp_path)] == [
        ("db-m-1", 3), ("db-m-2", 1)
    ]


async def test_a_kill_just_after_a_job_is_recorded_leaves_the_log_naming_it(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tester's SIGKILLs fell between a job's `created` record and its log line (4 of 4):
    the log never named the job, and once the jobs file was lost the refusal named too few
    jobs, its advice (`--abandon-batch-jobs`) buying the unnamed one's requests again."""
    real = JobRecords.created

    def recorded_then_killed(self: JobRecords, job: BatchJob, state: JobState) -> None:
        real(self, job, state)
        raise Killed("just after the created record")

    monkeypatch.setattr(JobRecords, "created", recorded_then_killed)
    model = ModelConfig(name="m", provider="sim", model="m", dispatch="batch")
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 10))
    run_dir = tmp_path / "run"
    summary = await dispatch(plan, run_dir, {"m": model}, {}, batch_clients={"m": FakeBatch()},
                             batch_poll_s=0.001, log_console=None)
    assert not summary.complete
    [job] = fold_jobs(run_dir).values()
    assert job.job_id is not None
    (run_dir / JOBS_FILE).unlink()
    assert lost_jobs(run_dir) == [LostJob(job.job_key, job.job_id, "m", 10, 0)]


def test_a_recorded_job_the_log_does_not_name_is_logged_by_a_resume(tmp_path: Path) -> None:
    """A job recorded by an earlier version (record, then log) killed in between, or whose
    log line a full disk dropped: the resume logs it, so a later loss of the jobs file still
    names it."""
    records = JobRecords(tmp_path)
    job = BatchJob("db-m-1", "m", "openai", {"r1": 1, "r2": 1})
    records.planned(job)
    records.created(job, JobState("job-1", JobStatus.RUNNING, "running"))
    records.planned(BatchJob("db-m-2", "m", "openai", {"r3": 1}))  # not created: no id
    _log(tmp_path)
    assert log_unlogged(tmp_path) == 1
    assert log_unlogged(tmp_path) == 0  # logged once
    events = [orjson.loads(line) for line in (tmp_path / ENGINE_LOG).read_bytes().splitlines()]
    assert events[-1]["logged_late"] is True
    (tmp_path / JOBS_FILE).unlink()
    assert lost_jobs(tmp_path) == [LostJob("db-m-1", "job-1", "m", 2, 0)]
