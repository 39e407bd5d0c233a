"""The batch contract: what the engine asks of a provider's batch API (issue 13).

A model with `dispatch = "batch"` sends its pending queries as jobs: one input file of
request lines, a job created over it, polled until it ends, then its result lines read back.
Each provider's `BatchClient` speaks its own API (OpenAI-shaped files and batches for Groq,
DeepInfra and Azure; S3 plus model invocation jobs for Bedrock; Cloud Storage plus batch
prediction jobs for Vertex). The engine owns the HTTP session, the timeouts, the retries of
control-plane calls, the job records in the run folder and the ledger: a client only builds
requests, sends them through the `Fetch` it is handed, and reads the replies.

Why the client gets a `Fetch` instead of being pure like `Adapter`: some steps take several
requests whose number depends on earlier replies (listing an output prefix, then reading
each object), and each provider's sequence differs. Why the engine still records each step:
exactly once across crashes needs the job's input reference written down before the job is
created, and the job id written down as soon as it is known (`engine.batch`).

Result lines are classified by the model's live `Adapter.parse` wherever the line carries
the live reply body, so a batch answer and a live answer of the same text get the same
outcome, and the answer parser, the ledger rows and the audit are unchanged. A line that
names no request the client can read (torn, not JSON, no id, an id it never wrote) is not
dropped: it comes back as `unreadable_line`, so the engine can say that a job's results
were damaged rather than take the requests it lost for lines the job never ran.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from providers.base import body_excerpt, short
from providers.secrets import Secret, redact
from providers.types import ChatRequest, Completion, Failure, HttpRequest, Outcome

#: Sends one request and returns the raw reply, or a transport failure (timeout, refused).
Fetch = Callable[[HttpRequest], Awaitable["tuple[int, Mapping[str, str], bytes] | Failure"]]


class JobStatus(StrEnum):
    """A job's state, normalised across providers (each client maps its own words)."""

    VALIDATING = "validating"
    QUEUED = "queued"
    RUNNING = "running"
    FINALIZING = "finalizing"
    DONE = "done"
    #: Ended with only part of its lines answered (Bedrock `PartiallyCompleted`, Vertex
    #: `JOB_STATE_PARTIALLY_SUCCEEDED`); its results are read like a done job's.
    PARTIAL = "partial"
    EXPIRED = "expired"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: States after which a job changes no more: its results (if any) can be read.
FINAL: frozenset[JobStatus] = frozenset(
    {JobStatus.DONE, JobStatus.PARTIAL, JobStatus.EXPIRED, JobStatus.FAILED, JobStatus.CANCELLED}
)


@dataclass(frozen=True)
class BatchLimits:
    """One provider's documented job limits, and where they were read."""

    max_lines: int
    max_bytes: int
    max_jobs_in_flight: int
    #: The completion window asked for (`"24h"`), as the provider spells it.
    completion_window: str
    #: Fewest lines a job may hold (Bedrock has a floor); smaller remainders go live or wait.
    min_lines: int = 1
    source: str = ""

    @property
    def least_max_lines(self) -> int:
        """The fewest lines a job may be capped at (`batch_max_lines`) for every count of
        queries from `min_lines` up to be cut into jobs of `min_lines` to that many, as
        `engine.batch_lane` cuts them: k jobs hold k * min_lines to k * cap lines, and
        those ranges meet only while cap >= 2 * min_lines - 1. Below it, a count between
        the cap and two floors (101 to 199 at 100 a job, or 224 after two jobs of 100)
        leaves a remainder below the floor whatever the cut."""
        return max(1, 2 * self.min_lines - 1)

    def least_max_bytes(self, sizes: Sequence[int]) -> int:
        """The fewest bytes a job may be capped at (`batch_max_bytes`) for lines of `sizes`
        bytes each (newline aside) to be cut into jobs of `min_lines` up, none left below it,
        whatever their order (lines asked again come first): every `min(len(sizes),
        max_lines, least_max_lines)` of them must fit one job, as jobs that many lines long
        cut them (`least_max_lines`), so the longest that many, each with its newline. 0
        where there is no floor, or fewer lines than it (no job is cut of them)."""
        if self.min_lines <= 1 or len(sizes) < self.min_lines:
            return 0
        most = min(len(sizes), self.max_lines, self.least_max_lines)
        return sum(size + 1 for size in heapq.nlargest(most, sizes))

    def stranded(self, queries: int) -> int:
        """How many of `queries` fresh lines are left below `min_lines` when `engine.batch_lane`
        cuts them into jobs of at most `max_lines` (by lines; the byte limit aside): jobs of
        `max_lines` while the plan is read, each leaving at least a floor's worth behind, so
        `rest` is left at its end; then one job of it, or two of which the second holds the
        floor, unless it is more than a job and less than two floors. 0 for a cap of at least
        `least_max_lines`; every line where fewer than the floor are asked, or no job is valid."""
        floor, cap = self.min_lines, self.max_lines
        if floor <= 1 or queries <= 0:
            return 0
        if queries < floor or cap < floor:
            return queries
        rest = queries if queries < cap + floor else floor + (queries - cap - floor) % cap
        return rest - cap if cap < rest < 2 * floor else 0


@dataclass(frozen=True)
class JobState:
    """What the provider says of one job."""

    job_id: str
    status: JobStatus
    #: The provider's own word for the state (`in_progress`, `InProgress`, `JOB_STATE_RUNNING`).
    provider_status: str
    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    #: Where results are read from (an output file id, an S3 or gs:// prefix), once known.
    output_ref: str | None = None
    error_ref: str | None = None
    #: Why a job failed or expired, in the provider's words (redacted by the engine).
    detail: str = ""


@dataclass(frozen=True)
class LineResult:
    """One request's result line: its completion or its failure, classified."""

    request_id: str
    result: Completion | Failure


#: The `request_id` of a result line that names no request the client can read: the engine
#: counts such lines (a damaged result file) and never settles them as a request's attempt.
UNREADABLE = ""


def unreadable_line(raw: bytes, secrets: Sequence[Secret] = ()) -> LineResult:
    """A result line that names no request (torn, not JSON, no id), with how it began."""
    excerpt = body_excerpt(raw, 80)
    return LineResult(UNREADABLE, Failure(
        Outcome.PROVIDER_ERROR, short(redact(f"unreadable result line: {excerpt}", secrets))))


class BatchError(Exception):
    """A control-plane call failed (upload, create, poll, read); `failure` says how, so the
    engine can wait and retry a rate limit or a 5xx and stop on an auth or request error."""

    def __init__(self, failure: Failure, read: Sequence[LineResult] = ()) -> None:
        super().__init__(failure.detail)
        self.failure = failure
        #: Result lines read before it: a job's other result objects, where one answered
        #: 404 (`providers.batch_cloud.read_objects`), kept by the engine.
        self.read = tuple(read)


class BatchClient(Protocol):
    """One model's batch API. Every method raises `BatchError` on a failed call."""

    @property
    def provider(self) -> str: ...

    @property
    def limits(self) -> BatchLimits: ...

    def secrets(self) -> tuple[Secret, ...]:
        """Credential values held now, masked by the engine wherever it writes text."""
        ...

    def line(self, req: ChatRequest) -> bytes:
        """One input-file line (JSON, no newline) carrying `req.request_id` as its key."""
        ...

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        """Store the input file; return its reference (a file id, an s3:// or gs:// URI).

        `job_key` is the engine's name for the job (unique in the run, safe as a file name
        and a label); uploading the same key twice must not create two jobs.
        """
        ...

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        """Create the job over an uploaded input, tagged with `job_key` so `find` sees it."""
        ...

    async def find(self, fetch: Fetch, job_key: str) -> JobState | None:
        """The job tagged `job_key`, if one was created (a crash may have lost the reply)."""
        ...

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        """The job's state now."""
        ...

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        """Every result line of an ended job (answers and per-line errors alike), and each
        line naming no request it can read as `unreadable_line` (blank lines are no lines).
        Requests of the job with no line at all (an expired job's unfinished lines) are
        absent: the engine counts those itself from the job's record."""
        ...


__all__ = [
    "FINAL",
    "UNREADABLE",
    "BatchClient",
    "BatchError",
    "BatchLimits",
    "Fetch",
    "JobState",
    "JobStatus",
    "LineResult",
    "unreadable_line",
]
