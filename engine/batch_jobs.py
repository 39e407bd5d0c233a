"""`batches/jobs.jsonl`: every batch job of a run, one line per step, so a kill loses none.

A batch job (issue 13) is in the provider's hands for hours, far longer than one process may
live, and paying for its lines twice is the failure to avoid. So each step is written down
here before the next one is taken, one JSON line per step, appended and fsync'd (a job has
a handful of steps, so the flush costs nothing that matters):

- `planned`: the job's key (`job_key`, its name at the provider), model, provider, and the
  attempt number each request it carries will have: written BEFORE the input is uploaded;
- `uploaded`: the input's reference (`input_ref`), once the upload returned;
- `created`: the provider's job id, as soon as the create (or a `find` after a crash) said it;
- `status`: the job's state whenever it changed (`JobState` fields);
- `abandoned`: the provider answered 404 for the job and the user named it to
  `dutchbook run --abandon-batch-jobs` (its `detail` says what the provider said): its lines
  are then journalled as failed attempts and asked again, and a `collected` line follows;
- `collected`: every line of the ended job is in the ledger; the job holds nothing more.

`fold_jobs` reads the lines back (a line torn by a kill is skipped: the step it named is then
redone, which every step allows) into each job's current state. A job not yet collected is
*live*: its requests are never put into another job (`held_ids`).
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from engine.console_lines import plural
from engine.durable import (
    append_record_line_durably,
    disk_refusal,
    read_record_lines,
    stops_the_run,
)
from providers.batch import FINAL, JobState, JobStatus
from providers.types import Outcome

#: The job records of a run, relative to the run folder.
JOBS_FILE = Path("batches") / "jobs.jsonl"

PLANNED, UPLOADED, CREATED, STATUS, COLLECTED = (
    "planned", "uploaded", "created", "status", "collected",
)
ABANDONED = "abandoned"


def new_job_key(model: str) -> str:
    """A fresh job name: lowercase letters, digits and dashes, at most 48 characters, so it
    is a valid file name, Bedrock job name and Vertex label; random so that two run folders
    sharing a provider account never find each other's jobs."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")[:28] or "model"
    return f"db-{slug}-{secrets.token_hex(6)}"


@dataclass
class BatchJob:
    """One job's state, folded from its record lines."""

    job_key: str
    model: str
    provider: str
    #: Request id -> the attempt number its line in this job has.
    requests: dict[str, int]
    planned_at: str = ""
    #: When its `created` line was written (ISO, UTC): how long it has been at the provider
    #: (`engine.batch_waits`); "" while not created.
    created_at: str = ""
    input_ref: str | None = None
    job_id: str | None = None
    status: JobStatus | None = None
    provider_status: str = ""
    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    output_ref: str | None = None
    error_ref: str | None = None
    detail: str = ""
    collected: bool = False
    #: Why the user abandoned the job (the provider's 404), once recorded; "" while not.
    abandoned: str = ""
    #: Planned by a lane whose provider was a simulator inside its own process (`dutchbook
    #: run`'s for `provider = "sim"` or a rehearsal without --sim-url), which ends with it.
    simulated_in_process: bool = False
    #: What collecting wrote (lines answered, failed, absent), once collected.
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        """Holds its requests: not collected (a job ended but unread still holds them)."""
        return not self.collected

    @property
    def ended(self) -> bool:
        return self.status in FINAL

    @property
    def step(self) -> str:
        """Where the job stands: the last step taken."""
        if self.collected:
            return COLLECTED
        if self.job_id is not None:
            return CREATED
        if self.input_ref is not None:
            return UPLOADED
        return PLANNED

    def state(self) -> JobState | None:
        """The provider's last word on the job, as a `JobState`, once it was created."""
        if self.job_id is None or self.status is None:
            return None
        return JobState(
            job_id=self.job_id, status=self.status, provider_status=self.provider_status,
            total=self.total, completed=self.completed, failed=self.failed,
            output_ref=self.output_ref, error_ref=self.error_ref, detail=self.detail,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class JobRecords:
    """The writer of `batches/jobs.jsonl` (one per dispatch; lanes share it)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / JOBS_FILE

    def _append(self, record: dict[str, Any]) -> str:
        """One line, fsync'd (`engine.durable.append_record_line_durably`): a kill leaves at
        most a torn last line; a full disk raises `DiskFull`, a folder turned read-only its
        `FolderReadOnly` (the step is then not taken).
        Returns the line's time (`at`)."""
        at = _now()
        try:
            append_record_line_durably(self.path, {"at": at, **record})
        except OSError as exc:
            if stops_the_run(exc, self.run_dir):
                raise disk_refusal(self.path, exc) from exc
            raise
        return at

    def planned(self, job: BatchJob) -> None:
        self._append({
            "event": PLANNED, "job_key": job.job_key, "model": job.model,
            "provider": job.provider, "requests": job.requests,
            **({"simulated_in_process": True} if job.simulated_in_process else {}),
        })

    def uploaded(self, job: BatchJob, input_ref: str) -> None:
        job.input_ref = input_ref
        self._append({"event": UPLOADED, "job_key": job.job_key, "input_ref": input_ref})

    def created(self, job: BatchJob, state: JobState) -> None:
        _apply_state(job, state)
        job.created_at = self._append(
            {"event": CREATED, "job_key": job.job_key, **_state_fields(state)})

    def status(self, job: BatchJob, state: JobState) -> None:
        _apply_state(job, state)
        self._append({"event": STATUS, "job_key": job.job_key, **_state_fields(state)})

    def abandoned(self, job: BatchJob, detail: str) -> None:
        job.abandoned = detail or "not found"
        self._append({"event": ABANDONED, "job_key": job.job_key, "job_id": job.job_id,
                      "detail": job.abandoned})

    def unknown_job(self, event: str, job_key: str, job_id: str, detail: str) -> None:
        """An `abandoned` (given up by the user) or `collected` (every line in the ledger)
        line for a job this file holds no `planned` line of, its records lost
        (`engine.batch_lost`). `fold_jobs` skips it (it names no requests); it is there so the
        job is known."""
        if event not in (ABANDONED, COLLECTED):
            raise ValueError(f"a lost job is written down as abandoned or collected, not {event}")
        self._append({"event": event, "job_key": job_key, "job_id": job_id, "detail": detail})

    def collected(self, job: BatchJob, counts: Mapping[str, int]) -> None:
        job.collected, job.counts = True, dict(counts)
        self._append({"event": COLLECTED, "job_key": job.job_key, "counts": dict(counts)})


def _state_fields(state: JobState) -> dict[str, Any]:
    return {
        "job_id": state.job_id, "status": state.status.value,
        "provider_status": state.provider_status, "total": state.total,
        "completed": state.completed, "failed": state.failed,
        "output_ref": state.output_ref, "error_ref": state.error_ref, "detail": state.detail,
    }


def _apply_state(job: BatchJob, state: JobState) -> None:
    job.job_id, job.status, job.provider_status = state.job_id, state.status, state.provider_status
    job.total, job.completed, job.failed = state.total, state.completed, state.failed
    job.output_ref, job.error_ref, job.detail = state.output_ref, state.error_ref, state.detail


def fold_jobs(run_dir: Path | str) -> dict[str, BatchJob]:
    """Every job of the run by key, in planning order, each in its latest state."""
    lines = read_record_lines(Path(run_dir) / JOBS_FILE)
    jobs: dict[str, BatchJob] = {}
    for record in lines:
        event, key = record.get("event"), record.get("job_key")
        if event == PLANNED and isinstance(key, str):
            jobs[key] = BatchJob(
                job_key=key, model=str(record["model"]), provider=str(record["provider"]),
                requests={str(k): int(v) for k, v in record["requests"].items()},
                planned_at=str(record.get("at", "")),
                simulated_in_process=record.get("simulated_in_process") is True,
            )
            continue
        job = jobs.get(key) if isinstance(key, str) else None
        if job is None:
            continue
        if event == UPLOADED:
            job.input_ref = str(record["input_ref"])
        elif event in (CREATED, STATUS):
            _apply_state(job, _state_of(record))
            if event == CREATED and not job.created_at:
                job.created_at = str(record.get("at", ""))
        elif event == ABANDONED:
            job.abandoned = str(record.get("detail") or "not found")
        elif event == COLLECTED:
            job.collected = True
            job.counts = {str(k): int(v) for k, v in (record.get("counts") or {}).items()}
    return jobs


def _state_of(record: Mapping[str, Any]) -> JobState:
    return JobState(
        job_id=str(record["job_id"]), status=JobStatus(record["status"]),
        provider_status=str(record.get("provider_status") or ""),
        total=record.get("total"), completed=record.get("completed"),
        failed=record.get("failed"), output_ref=record.get("output_ref"),
        error_ref=record.get("error_ref"), detail=str(record.get("detail") or ""),
    )


def still_at_provider(job: BatchJob) -> bool:
    """Whether the job's lines are in the provider's hands: uploaded, not collected (an ended
    job's results are still to be read), nor abandoned (`at_provider`)."""
    return job.live and not job.abandoned and job.input_ref is not None


def held_ids(jobs: Mapping[str, BatchJob], model: str | None = None) -> set[str]:
    """Request ids carried by a live job (of `model`, when given): not to be asked again."""
    return {
        rid
        for job in jobs.values()
        if job.live and (model is None or job.model == model)
        for rid in job.requests
    }


#: How `dutchbook status` groups jobs: by where they stand ("abandoned": given up by the
#: user after the provider answered 404 for it, its lines asked again).
STATUS_GROUPS = ("queued", "running", "done", "expired", "failed", "collecting", "abandoned")


def status_group(job: BatchJob) -> str:
    """The job's group in `dutchbook status` (a collected job by how it ended)."""
    if job.abandoned:  # its last status is what the provider said before it forgot the job
        return "abandoned"
    status = job.status
    if status is None or status in (JobStatus.VALIDATING, JobStatus.QUEUED):
        return "queued"
    if status in (JobStatus.RUNNING, JobStatus.FINALIZING):
        return "running"
    if not job.collected:
        return "collecting"
    if status in (JobStatus.DONE, JobStatus.PARTIAL):
        return "done"
    if status is JobStatus.EXPIRED:
        return "expired"
    return "failed"


@dataclass(frozen=True)
class AtProvider:
    """A run's batch jobs not yet collected (nor abandoned): still in the provider's hands,
    their queries asked and not to be asked again; a resume collects them. `status` and the
    audit said of such a folder "not started", "0 of 28 requests attempted" and "running the
    same command again asks only the unanswered requests"."""

    jobs: int = 0
    queries: int = 0
    #: Of `jobs`, those uploaded with no job id on file: a stop (or a kill) before the create,
    #: or a kill before its reply was recorded. A resume finds each, or creates it.
    uncreated_jobs: int = 0
    #: Of `jobs`, those a simulator inside the run that planned them held
    #: (`BatchJob.simulated_in_process`): it ended with that run, and a resume asks their
    #: queries again (they were said "still at the provider").
    simulator_jobs: int = 0
    #: Of `queries`, those of the `uncreated_jobs`.
    uncreated_queries: int = 0
    #: Of `simulator_jobs`, those of the `uncreated_jobs`: their input files went with that
    #: simulator, and a resume uploads them again to create their jobs.
    uncreated_simulator_jobs: int = 0

    def __bool__(self) -> bool:
        return self.jobs > 0

    def counted(self) -> str:
        """`3 batch jobs (28 queries)`."""
        return f"{plural(self.jobs, 'batch job')} ({self._queries(self.queries)})"

    def phrase(self) -> str:
        """`3 batch jobs (28 queries) still at the provider`, and apart from them the input
        files uploaded with no job id on file: a lane stops before it creates a job, and only
        a kill between a create and its record leaves a job there unrecorded. Counted among
        the jobs, a lane stopped by damaged results said "1 batch job (1 query) still at the
        provider, all uploaded with no job id on file" where no job had been made."""
        counted = self.counted()
        if self.jobs and self.simulator_jobs == self.jobs:
            return (
                f"{counted} left with the simulator of the run that planned them, which ended "
                "with it (a resume asks their queries again)"
            )
        created = self.jobs - self.uncreated_jobs
        queries = self._queries(self.queries - self.uncreated_queries)
        said = [f"{plural(created, 'batch job')} ({queries}) still at the provider"] * bool(created)
        # At most `created`: a summary written before `uncreated_simulator_jobs` lacks it.
        if created_simulated := min(self.simulator_jobs - self.uncreated_simulator_jobs, created):
            said[0] += (f", {created_simulated:,} of them left with the simulator of the run "
                        "that planned them, which ended with it (a resume asks their queries "
                        "again)")
        if self.uncreated_jobs:
            said.append(
                f"{plural(self.uncreated_jobs, 'batch input file')} "
                f"({self._queries(self.uncreated_queries)}) uploaded with no batch job on file "
                "(a stop before the create, or a kill before its reply was recorded: a resume "
                "finds such a job, or creates one)"
            )
        if self.uncreated_simulator_jobs:  # counted with the files, said with them
            said[-1] += (f", {self.uncreated_simulator_jobs:,} of them uploaded to the simulator "
                         "of the run that planned them, which ended with it (a resume uploads "
                         "them again)")
        return ", and ".join(said)

    @staticmethod
    def _queries(count: int) -> str:
        return plural(count, "query", "queries")


def line_recorded(attempt: int, outcomes: Mapping[int, str]) -> int | None:
    """The attempt the ledger holds a batch job's line as, the job having sent its request as
    `attempt` (`outcomes`: the request's recorded attempts, number -> outcome): its last
    attempt once one was accepted; else its latest attempt from `attempt` on that is not
    `interrupted` (a kill between a line's two journal lines leaves it `interrupted`, and the
    line is then written as the next attempt); None while the line is not recorded. The one
    rule of the resume's collection (`engine.batch_lane`) and of `at_provider`."""
    if Outcome.OK.value in outcomes.values():
        return max(outcomes)
    written = [a for a, o in outcomes.items() if a >= attempt and o != Outcome.INTERRUPTED.value]
    return max(written) if written else None


def at_provider(
    jobs: Mapping[str, BatchJob], attempts: pl.LazyFrame | None = None
) -> AtProvider:
    """The jobs of `jobs` (`fold_jobs`) still at the provider, and the queries they hold.

    A job killed mid-collection has some of its lines in the ledger already: `attempts` (the
    ledger's `request_id, attempt, outcome`) leaves those out, by the rule the resume's
    collection uses (`line_recorded`). Counting every line of the job, a status read "1 batch
    job (560 queries) still at the provider" beside 294 of them accepted. A job planned but
    never uploaded is not at the provider (nothing of it can run, nor be billed: the next run
    uploads it): counted, a stopped lane's status said "10 batch jobs (96 queries) still at
    the provider" where most had no input uploaded. An uploaded one is counted, created or
    not: a kill between the create call and its record leaves a job running there with no id
    on file (the resume finds it)."""
    live = [job for job in jobs.values() if still_at_provider(job)]
    uncreated = sum(job.job_id is None for job in live)
    simulated = sum(job.simulated_in_process for job in live)
    gone_uploads = sum(job.simulated_in_process and job.job_id is None for job in live)
    if attempts is None or not live:
        return AtProvider(
            len(live), sum(len(job.requests) for job in live), uncreated, simulated,
            sum(len(job.requests) for job in live if job.job_id is None), gone_uploads,
        )
    ids = [rid for job in live for rid in job.requests]
    recorded: dict[str, dict[int, str]] = {}
    for rid, number, outcome in (
        attempts.select("request_id", "attempt", pl.col("outcome").cast(pl.String))
        .filter(pl.col("request_id").is_in(ids))
        .collect()
        .iter_rows()
    ):
        recorded.setdefault(rid, {})[int(number)] = outcome
    left = Counter(
        job.job_id is None
        for job in live
        for rid, attempt in job.requests.items()
        if line_recorded(attempt, recorded.get(rid, {})) is None
    )
    return AtProvider(len(live), left.total(), uncreated, simulated, left[True], gone_uploads)


def jobs_summary(
    run_dir: Path | str, jobs: Mapping[str, BatchJob] | None = None
) -> dict[str, dict[str, dict[str, int]]]:
    """Per model, per group (`STATUS_GROUPS`): how many jobs and how many lines they carry
    (of `jobs`, the run's `fold_jobs` when the caller has them)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for job in (fold_jobs(run_dir) if jobs is None else jobs).values():
        groups = out.setdefault(job.model, {g: {"jobs": 0, "lines": 0} for g in STATUS_GROUPS})
        group = groups[status_group(job)]
        group["jobs"] += 1
        group["lines"] += len(job.requests)
    return out


__all__ = [
    "ABANDONED",
    "JOBS_FILE",
    "STATUS_GROUPS",
    "AtProvider",
    "BatchJob",
    "JobRecords",
    "at_provider",
    "fold_jobs",
    "held_ids",
    "jobs_summary",
    "line_recorded",
    "new_job_key",
    "status_group",
    "still_at_provider",
]
