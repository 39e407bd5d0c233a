"""Batch jobs created at a provider that `batches/jobs.jsonl` no longer knows.

The jobs file is the only record of which requests a batch job carries (`engine.batch_jobs`):
deleted, cut short, or put back from an older copy, a resume would find every request of a
job still at the provider unanswered and buy it again in a new job, without a word. The
engine's log (`logs/engine.jsonl`) keeps its own line for each job created,
`batch_job_created` with the job's key, id and line count, written before the jobs file's
`created` line (and by a resume for a recorded job it lacks, `log_unlogged`), so the log
names every job the file did and the loss can be seen: a job the log names, which the jobs
file does not, and whose lines the ledger does not all hold (each collected line's attempt
names its job, `engine.spend.BATCH_MARK`), may still be answering.

The way out is the user's (`dutchbook run --abandon-batch-jobs KEY`): put the file back, or
give such a job up, its requests then asked again. Giving one up is written to the jobs file
(`write_down`), a line that names no requests, so the job is known and not said again; so is
a job unknown to the file whose every line the ledger holds, so the ledger is searched for it
once. The log's `simulated_in_process` marks a job a simulator inside its run held: gone with
that run, it is not lost (nothing can bill it; a resume asks its lines again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from engine.batch_jobs import ABANDONED, COLLECTED, JOBS_FILE, JobRecords, fold_jobs
from engine.console_lines import plural
from engine.durable import read_record_lines
from engine.logs import EngineLog
from engine.records import FOREIGN_NOTE
from engine.retry import GAVE_UP_MARK
from engine.scan import scan_attempts
from engine.spend import BATCH_MARK

#: The engine's log, relative to the run folder, and the event each created job leaves there.
ENGINE_LOG = Path("logs") / "engine.jsonl"
CREATED = "batch_job_created"
CREATED_EVENT = f'"{CREATED}"'.encode()

#: The `collected` detail of a job whose records were lost after every line of it was.
COLLECTED_DETAIL = (
    "its records were lost from batches/jobs.jsonl after every line of it was collected"
)
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

    @property
    def lost(self) -> bool:
        """Whether the ledger lacks a line of it: it may still be answering."""
        return self.recorded < self.lines


#: How much of the log is searched at a time.
_BLOCK = 1 << 23


def _created_lines(path: Path) -> Iterator[bytes]:
    """The lines of the engine's log that name `CREATED_EVENT`, found a block at a time by
    a byte search (a paper-scale log holds hundreds of megabytes, and `status` and every
    resume look: line by line, 285 MB took 0.7 s)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        rest = b""
        while block := handle.read(_BLOCK):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            block, rest = block[:cut], block[cut:]
            at = block.find(CREATED_EVENT)
            while at != -1:
                end = block.find(b"\n", at)  # the block ends with one
                yield block[block.rfind(b"\n", 0, at) + 1 : end]
                at = block.find(CREATED_EVENT, end)
        if CREATED_EVENT in rest:
            yield rest  # a last line with no newline: whole, or torn and skipped


def _created_events(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The log's `CREATED_EVENT` lines, read (a torn or edited line skipped)."""
    for line in _created_lines(run_dir / ENGINE_LOG):
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


def _created_in_log(events: Iterable[dict[str, Any]]) -> dict[str, LostJob]:
    """Every job the engine's log says was created (`events`, its `CREATED_EVENT` lines), by
    key, but those a simulator inside the run held: they ended with it, and nothing can run or
    bill their lines (a resume asks them again, as it does when the jobs file has them)."""
    created: dict[str, LostJob] = {}
    for event in events:
        if event.get("simulated_in_process") is True:
            continue
        key, job_id, lines = event.get("job_key"), event.get("job_id"), event.get("lines")
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


#: A job id as each attempt a batch job carried names it (`engine.spend.BATCH_MARK`), up to
#: a space, a bracket or a semicolon (a Bedrock job's ARN holds colons): at the start of a
#: detail the lane wrote (a line its job never ran), or in the note that ends the detail, as
#: `engine.spend.BATCH_DETAIL` reads it (the words before it may quote a reply holding
#: "batch job ..." itself, in brackets or not).
_AT_START = "^" + re.escape(BATCH_MARK) + r"([^\s\[\];]+)"
_IN_NOTE = (
    r"\[(?:[^\[\]]*; )?" + re.escape(BATCH_MARK) + r"([^\s\[\];]+)\]"
    + rf"(?: {re.escape(FOREIGN_NOTE)})?(?: {re.escape(GAVE_UP_MARK)}[^\[\]]*\])?$"
)


def _lines_recorded(run_dir: Path, job_ids: list[str]) -> dict[str, int]:
    """Per job id, how many requests the ledger holds an attempt of that names the job: one
    pass over the attempts, whatever the number of jobs (one pattern per job took 8.6 s for
    100 jobs over a million attempts)."""
    counts = (
        scan_attempts(run_dir, ["request_id", "detail"])
        .select(
            "request_id",
            pl.coalesce(
                pl.col("detail").str.extract(_AT_START, 1),
                pl.col("detail").str.extract(_IN_NOTE, 1),
            ).alias("job_id"),
        )
        .filter(pl.col("job_id").is_in(job_ids))
        .group_by("job_id")
        .agg(pl.col("request_id").n_unique())
        .collect()
    )
    found = dict(zip(counts["job_id"].to_list(), counts["request_id"].to_list(), strict=True))
    return {job_id: int(found.get(job_id, 0)) for job_id in job_ids}


def unknown_jobs(run_dir: Path | str) -> list[LostJob]:
    """The jobs the engine's log says were created that the jobs file does not know, each
    with how many of its lines the ledger holds (`recorded`), in the order they were created."""
    run_dir = Path(run_dir)
    return _unknown(run_dir, _created_events(run_dir))


def _unknown(run_dir: Path, events: Iterable[dict[str, Any]]) -> list[LostJob]:
    """`unknown_jobs` of the log's `CREATED_EVENT` lines `events`."""
    unknown = _created_in_log(events)
    if unknown:
        for key in _known_keys(run_dir):
            unknown.pop(key, None)
    if not unknown:
        return []
    recorded = _lines_recorded(run_dir, [job.job_id for job in unknown.values()])
    return [
        LostJob(job.job_key, job.job_id, job.model, job.lines, recorded[job.job_id])
        for job in unknown.values()
    ]


def log_unlogged(run_dir: Path | str) -> int:
    """Write the engine's log's `batch_job_created` line (marked `logged_late`) of each job
    the jobs file records as created that the log does not name; how many. The lane logs a
    job before it records it, but a log write may fail (a full disk: logging never stops a
    run), and a run of an earlier version recorded first and could be killed in between:
    without its line, a job would go unnamed once the jobs file is damaged (`unknown_jobs`
    has only the log then), and its requests, given up for lost, bought again."""
    run_dir = Path(run_dir)
    return _log_unlogged(run_dir, _created_events(run_dir))


def _log_unlogged(run_dir: Path, events: Iterable[dict[str, Any]]) -> int:
    """`log_unlogged` with the log's `CREATED_EVENT` lines `events` read already."""
    created = [job for job in fold_jobs(run_dir).values() if job.job_id is not None]
    if not created:
        return 0
    logged = {event.get("job_key") for event in events}
    unlogged = [job for job in created if job.job_key not in logged]
    if unlogged:
        log = EngineLog(run_dir, console=None)
        try:
            for job in unlogged:
                log.info(
                    CREATED, model=job.model, job_key=job.job_key, job_id=job.job_id,
                    lines=len(job.requests), logged_late=True,
                    **({"simulated_in_process": True} if job.simulated_in_process else {}),
                )
        finally:
            log.close()
    return len(unlogged)


def log_unlogged_then_unknown(run_dir: Path | str) -> list[LostJob]:
    """`log_unlogged`, then `unknown_jobs`, from one read of the engine's log, as each resume
    needs them (a paper-scale log holds hundreds of megabytes, and it was searched twice).
    The same jobs as reading it again after the late lines: each of those names a job the
    jobs file records, which `unknown_jobs` leaves out."""
    run_dir = Path(run_dir)
    events = list(_created_events(run_dir))
    _log_unlogged(run_dir, events)
    return _unknown(run_dir, events)


def lost_jobs(run_dir: Path | str) -> list[LostJob]:
    """`unknown_jobs` whose lines the ledger does not all hold: they may still be answering."""
    return [job for job in unknown_jobs(run_dir) if job.lost]


def write_down(run_dir: Path | str, unknown: list[LostJob], named: frozenset[str]) -> int:
    """Record in the jobs file each job of `unknown` (`unknown_jobs`) that needs no more
    asking: collected in full (its lines are all in the ledger), or given up by the user
    (`named`, by key or id: its requests are asked again). Each becomes a line that names no
    requests (`fold_jobs` skips it) but makes the job known, so no later run or `status`
    searches the ledger for it again. Returns how many were given up."""
    records = JobRecords(run_dir)
    given_up = 0
    for job in unknown:
        if not job.lost:
            records.unknown_job(COLLECTED, job.job_key, job.job_id, COLLECTED_DETAIL)
        elif named & set(job.names()):
            records.unknown_job(ABANDONED, job.job_key, job.job_id, LOST_DETAIL)
            given_up += 1
    return given_up


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


__all__ = [
    "KEYS_SHOWN", "LOST_DETAIL", "LostJob", "log_unlogged", "log_unlogged_then_unknown",
    "lost_jobs", "lost_jobs_line", "unknown_jobs", "write_down",
]
