"""Batch jobs created at a provider that `batches/jobs.jsonl` no longer knows.

The jobs file is the only record of which requests a batch job carries (`engine.batch_jobs`):
deleted, cut short, or put back from an older copy, a resume would find every request of a
job still at the provider unanswered and buy it again in a new job, without a word. The
engine's log (`logs/engine.jsonl`) keeps its own line for each job created,
`batch_job_created` with the job's key, id and line count, so the loss can be seen: a job the
log names, which the jobs file does not, and whose lines the ledger does not all hold (each
collected line's attempt names its job, `engine.spend.BATCH_MARK`), may still be answering.

The way out is the user's (`dutchbook run --abandon-batch-jobs KEY`): put the file back, or
give such a job up, its requests then asked again. Giving one up is written to the jobs file
(`record_given_up`), a line that names no requests, so the job is known and not said again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl

from engine.batch_jobs import JOBS_FILE, JobRecords
from engine.console_lines import plural
from engine.durable import read_record_lines
from engine.scan import scan_attempts
from engine.spend import BATCH_MARK

#: The engine's log, relative to the run folder, and the event each created job leaves there.
ENGINE_LOG = Path("logs") / "engine.jsonl"
CREATED_EVENT = b'"batch_job_created"'

#: The `abandoned` detail of a job given up because its records were lost.
LOST_DETAIL = (
    "its records were lost from batches/jobs.jsonl; given up by the user "
    "(--abandon-batch-jobs), its requests asked again"
)


@dataclass(frozen=True)
class LostJob:
    """A created job, named by the engine's log, that the jobs file does not know."""

    job_key: str
    job_id: str
    model: str
    lines: int
    #: How many of its lines the ledger holds (a job collected in full is not lost).
    recorded: int = 0

    def names(self) -> tuple[str, str]:
        return self.job_key, self.job_id


def _created_in_log(run_dir: Path) -> dict[str, LostJob]:
    """Every job the engine's log says was created, by key (a torn or edited line skipped)."""
    created: dict[str, LostJob] = {}
    try:
        handle = (run_dir / ENGINE_LOG).open("rb")
    except FileNotFoundError:
        return created
    with handle:
        for line in handle:  # line by line: a paper-scale log is too big to hold whole
            if CREATED_EVENT not in line:
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            key, job_id = event.get("job_key"), event.get("job_id")
            lines = event.get("lines")
            if isinstance(key, str) and isinstance(job_id, str) and isinstance(lines, int):
                created[key] = LostJob(key, job_id, str(event.get("model", "")), lines)
    return created


def _known_keys(run_dir: Path) -> set[str]:
    """Every job key the jobs file names in any of its lines."""
    return {
        key
        for record in read_record_lines(run_dir / JOBS_FILE)
        if isinstance(key := record.get("job_key"), str)
    }


def _lines_recorded(run_dir: Path, job_ids: list[str]) -> dict[str, int]:
    """Per job id, how many requests the ledger holds an attempt of that names the job."""
    patterns = {
        job_id: rf"{re.escape(BATCH_MARK + job_id)}(?:[\s\];:]|$)" for job_id in job_ids
    }
    detail = pl.col("detail").fill_null("")
    counts = (
        scan_attempts(run_dir, ["request_id", "detail"])
        .select(
            pl.col("request_id").filter(detail.str.contains(pattern)).n_unique().alias(job_id)
            for job_id, pattern in patterns.items()
        )
        .collect()
    )
    return {job_id: int(counts[job_id][0]) for job_id in job_ids}


def lost_jobs(run_dir: Path | str) -> list[LostJob]:
    """The jobs the engine's log says were created that the jobs file does not know and
    whose lines the ledger does not all hold, in the order they were created."""
    run_dir = Path(run_dir)
    unknown = _created_in_log(run_dir)
    if unknown:
        for key in _known_keys(run_dir):
            unknown.pop(key, None)
    if not unknown:
        return []
    recorded = _lines_recorded(run_dir, [job.job_id for job in unknown.values()])
    return [
        LostJob(job.job_key, job.job_id, job.model, job.lines, recorded[job.job_id])
        for job in unknown.values()
        if recorded[job.job_id] < job.lines
    ]


#: Past this many lost jobs, a line names a few and says where every key is.
KEYS_SHOWN = 10


def lost_jobs_line(run_dir: Path, lost: list[LostJob]) -> str:
    """What a refusal (or `status`) says of `lost`: which jobs, why it matters, the ways out
    (the flag spelled with every key, or, past `KEYS_SHOWN`, where to find them)."""
    keys = [job.job_key for job in lost]
    if len(keys) <= KEYS_SHOWN:
        named, flag = ", ".join(keys), f"--abandon-batch-jobs {','.join(keys)}"
    else:
        named = f"{', '.join(keys[:5])} and {len(keys) - 5:,} more"
        flag = (
            "--abandon-batch-jobs KEY,KEY,... (every key: `dutchbook status "
            f"{run_dir} --json`, lost_batch_jobs)"
        )
    lines = sum(job.lines - job.recorded for job in lost)
    return (
        f"{run_dir / ENGINE_LOG} names {plural(len(lost), 'batch job')} created at the "
        f"provider that {run_dir / JOBS_FILE} does not know ({named}; {lines:,} lines "
        "not in the ledger): their answers may still be there, and asking their requests again "
        "would pay for them twice. Put the jobs file back from a copy, or give the jobs up "
        f"(their requests are asked again) by running again with {flag}"
    )


def record_given_up(run_dir: Path | str, lost: list[LostJob], named: frozenset[str]) -> None:
    """Write down that the user gave up each job of `lost` that `named` names (by key or id),
    so that no later run says it again (`_known_keys`)."""
    records = JobRecords(run_dir)
    for job in lost:
        if named & set(job.names()):
            records.given_up_unknown(job.job_key, job.job_id, LOST_DETAIL)


__all__ = [
    "KEYS_SHOWN", "LOST_DETAIL", "LostJob", "lost_jobs", "lost_jobs_line", "record_given_up",
]
