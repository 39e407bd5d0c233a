"""The simulator's object stores and cloud batch jobs, without any HTTP (issue 13).

S3 and Cloud Storage are both modelled as one in-memory map of (bucket, key) -> bytes; the
S3- and GCS-shaped routes only render it in their wire formats. A `CloudJob` is one Bedrock
model invocation job or Vertex batch prediction job in compressed time: it validates for
the first quarter of `seconds`, runs until `seconds`, and is then finished exactly once (its
lines answered, its output objects written) by whoever looks at it first.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from providers.sim.faults import BatchFaultKind, FaultKind


@dataclass
class ObjectStore:
    """Objects by bucket and key, as both S3 and Cloud Storage would keep them.

    `unclaimed` holds the JSONL files clients uploaded that no job has read yet: their
    number is the gauge `batch.input_files_without_batch` (a crash between upload and create
    leaves one behind, as on the OpenAI-shaped routes).
    """

    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    unclaimed: set[tuple[str, str]] = field(default_factory=set)

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.objects[(bucket, key)] = body

    def upload(self, bucket: str, key: str, body: bytes, counts: Any) -> None:
        """A client's upload: stored, and counted as an input no job has claimed yet."""
        fresh = (bucket, key) not in self.objects
        self.put(bucket, key, body)
        if fresh and key.endswith(".jsonl"):
            self.unclaimed.add((bucket, key))
            counts["batch.input_files_without_batch"] += 1

    def claim(self, bucket: str, key: str, counts: Any) -> None:
        """A job was created over this input."""
        if (bucket, key) in self.unclaimed:
            self.unclaimed.discard((bucket, key))
            counts["batch.input_files_without_batch"] -= 1

    def get(self, bucket: str, key: str) -> bytes | None:
        return self.objects.get((bucket, key))

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Keys of `bucket` starting with `prefix`, in lexicographic order (as both list)."""
        return sorted(k for b, k in self.objects if b == bucket and k.startswith(prefix))


class Phase(StrEnum):
    """Where a job is in its compressed life."""

    VALIDATING = "validating"
    RUNNING = "running"
    ENDED = "ended"


class Ending(StrEnum):
    """How a finished job ended."""

    DONE = "done"
    EXPIRED = "expired"  # part of the lines were answered
    INVALID = "invalid"  # failed validation: no line ran


@dataclass
class CloudJob:
    """One simulated batch job of either cloud."""

    provider: str
    job_id: str
    name: str
    model: str
    input_bucket: str
    input_key: str
    output_bucket: str
    output_prefix: str
    created: float
    seconds: float
    token: str | None = None
    fault: str | None = None
    ending: Ending | None = None
    output_key: str | None = None
    message: str = ""
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def phase(self, now: float) -> Phase:
        elapsed = now - self.created
        if self.ending is not None or elapsed >= self.seconds:
            return Phase.ENDED
        return Phase.VALIDATING if elapsed < self.seconds / 4 else Phase.RUNNING


#: Finishes a job: answers its lines and writes its output (the routes know each wire).
Finisher = Callable[[CloudJob], None]


@dataclass
class CloudJobs:
    """Every simulated cloud batch job, by id, finished lazily when first seen ended."""

    clock: Callable[[], float] = time.monotonic
    jobs: dict[str, CloudJob] = field(default_factory=dict)

    def new_id(self, length: int = 12) -> str:
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        return "".join(secrets.choice(alphabet) for _ in range(length))

    def add(self, job: CloudJob, store: ObjectStore, counts: Any) -> CloudJob:
        """Keep a created job: its input is claimed, the job (and a create delay) counted."""
        self.jobs[job.job_id] = job
        store.claim(job.input_bucket, job.input_key, counts)
        count_job(counts, job)
        return job

    def find(self, provider: str, job_id: str) -> CloudJob | None:
        """The job whose id (an ARN or a resource name) ends in `/<job_id>`."""
        return next((j for j in self.jobs.values() if j.provider == provider
                     and j.job_id.endswith("/" + job_id.rsplit("/", 1)[-1])), None)

    def seen(self, job: CloudJob, finish: Finisher) -> Phase:
        """The job's phase now, after finishing it if its time is up."""
        phase = job.phase(self.clock())
        if phase is Phase.ENDED and job.ending is None:
            finish(job)
        return phase

    def by_token(self, provider: str, token: str) -> CloudJob | None:
        return next((j for j in self.jobs.values()
                     if j.provider == provider and j.token == token), None)

    def of(self, provider: str) -> list[CloudJob]:
        return sorted((j for j in self.jobs.values() if j.provider == provider),
                      key=lambda j: j.created)


def count_line(counts: Any, provider: str, fault: FaultKind | BatchFaultKind | None,
               ok: bool) -> None:
    """Count one batch line and its fault (`ok`: the line carries a reply). A
    missing-routing draw is inert on a cloud batch line (the job, not a reply header, routes
    it): counted as inert, never as a fault the client should have seen."""
    counts["batch.lines_run"] += 1
    counts[f"batch.lines_run.{provider}"] += 1
    if fault == FaultKind.MISSING_ROUTING:
        counts[f"batch.inert.{fault.value}"] += 1
        fault = None
    if fault is None:
        if ok:
            counts[f"answered.{provider}"] += 1
        return
    count_fault(counts, provider, fault)


def line_fault(kind: FaultKind | BatchFaultKind | None) -> FaultKind | None:
    """The live fault a line's answer carries (`batch_line_error` is the job's own)."""
    return kind if isinstance(kind, FaultKind) else None


def count_job(counts: Any, job: CloudJob) -> None:
    """Count a created job (and a create-delay fault, which acts at once)."""
    counts["batch.jobs_created"] += 1
    counts[f"batch.jobs_created.{job.provider}"] += 1
    if job.fault == BatchFaultKind.CREATE_DELAY:
        count_fault(counts, job.provider, BatchFaultKind.CREATE_DELAY)


def count_fault(counts: Any, provider: str, kind: FaultKind | BatchFaultKind) -> None:
    counts[f"fault.{kind.value}"] += 1
    counts[f"fault_by_provider.{provider}.{kind.value}"] += 1


def count_end(counts: Any, job: CloudJob, ran: int) -> None:
    """Count how a job ended, its injected job fault, and the lines it never ran."""
    if job.fault in (BatchFaultKind.EXPIRE, BatchFaultKind.INVALID):
        count_fault(counts, job.provider, BatchFaultKind(job.fault))
    word = {Ending.DONE: "completed", Ending.EXPIRED: "expired", Ending.INVALID: "failed"}
    assert job.ending is not None
    counts[f"batch.jobs.{word[job.ending]}"] += 1
    if job.ending is Ending.EXPIRED:
        counts["batch.lines_unrun"] += job.total - ran


def jsonl_input(body: bytes, member: str) -> list[dict[str, Any]] | None:
    """Each line of an uploaded batch input, or None when any line is not a JSON object
    with the object `member` (`modelInput` for Bedrock, `request` for Vertex): the job then
    fails validation, as the real services fail a malformed file."""
    out = []
    for raw in body.splitlines():
        if raw.strip():
            try:
                item = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return None
            if not isinstance(item, dict) or not isinstance(item.get(member), dict):
                return None
            out.append(item)
    return out
