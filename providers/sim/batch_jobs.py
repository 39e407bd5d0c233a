"""The simulator's OpenAI-shaped files and batch jobs, in memory, in compressed time.

A job lives `batch_seconds` (the fault profile's setting) instead of up to a day: validating
for the first fifth, running until nine tenths, finalizing, then completed. Nothing runs in
the background: each time a job is looked at, the lines its elapsed time covers are answered
(by the caller's `Answer`, the pipeline's forecasters), so `request_counts` grow as they would
and a job that expires has exactly the lines it reached. Batch faults (`BatchFaultKind`) are
drawn per job at creation and per line as it runs; every one is counted where it takes effect.

Objects are rendered as OpenAI's File and Batch objects (the `openai` client parses them in
the tests), and each provider (`groq`, `azure`, ...) has its own namespace of files and jobs.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from providers.sim.faults import BatchFaultKind, FaultInjector, FaultKind

#: Answers one line's body under an optional line fault: (status, headers, reply body).
Answer = Callable[[bytes, FaultKind | None], tuple[int, dict[str, str], bytes]]

MAX_FILE_BYTES = 200_000_000
MAX_LINES = 50_000
VALIDATING_SHARE = 0.2
RUNNING_UNTIL = 0.9
#: An expiring job (`batch_expire`) ends once it has reached this share of its lines.
EXPIRE_AT = 0.5
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
LINE_ERROR_MESSAGE = "The server had an error processing this request (simulated)."


class InvalidRequest(Exception):
    """A files or batches request the provider would refuse with a 400 or 404."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass
class SimFile:
    id: str
    provider: str
    filename: str
    purpose: str
    content: bytes
    created_at: int
    has_batch: bool = False

    def render(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.content),
                "created_at": self.created_at, "filename": self.filename,
                "purpose": self.purpose, "status": "processed", "status_details": None}


@dataclass
class SimJob:
    id: str
    provider: str
    input_file_id: str
    endpoint: str
    window: str
    metadata: dict[str, str]
    started: float
    #: (custom_id, body bytes) per input line, or the reasons the input is invalid.
    lines: list[tuple[str, bytes]]
    invalid: list[dict[str, Any]]
    fault: BatchFaultKind | None
    answer: Answer
    status: str = "validating"
    done: int = 0
    failed: int = 0
    output: list[bytes] = field(default_factory=list)
    errors: list[bytes] = field(default_factory=list)
    stamps: dict[str, int] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def parse_input(
    content: bytes, endpoint: str
) -> tuple[list[tuple[str, bytes]], list[dict[str, Any]]]:
    """The input file's lines, or validation errors as OpenAI's `errors.data` items."""
    lines: list[tuple[str, bytes]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.splitlines(), start=1):
        if not raw.strip():
            continue
        problem, item = _check_line(raw, endpoint, seen)
        if problem is not None:
            errors.append({"code": "invalid_request", "message": problem, "param": None,
                           "line": number})
            continue
        seen.add(item["custom_id"])
        lines.append((item["custom_id"], orjson.dumps(item["body"])))
    if len(lines) > MAX_LINES:
        errors.append({"code": "too_many_requests", "message": f"more than {MAX_LINES} requests",
                       "param": None, "line": None})
    if not lines and not errors:
        errors.append({"code": "empty_file", "message": "The input file is empty.",
                       "param": None, "line": None})
    return lines, errors


def _check_line(raw: bytes, endpoint: str, seen: set[str]) -> tuple[str | None, Any]:
    try:
        item = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "line is not valid JSON", None
    if not isinstance(item, dict):
        return "line is not a JSON object", None
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "custom_id is required", None
    if custom_id in seen:
        return f"duplicate custom_id {custom_id!r}", None
    if item.get("method") != "POST":
        return "method must be POST", None
    if item.get("url") != endpoint:
        return f"url {item.get('url')!r} does not match the batch endpoint {endpoint!r}", None
    if not isinstance(item.get("body"), dict):
        return "body must be a JSON object", None
    return None, item


class BatchStore:
    """Files and jobs of every provider route, and the counts they feed."""

    def __init__(self, counts: Counter[str], faults: FaultInjector) -> None:
        self.counts = counts
        self.faults = faults
        self.files: dict[str, SimFile] = {}
        self.jobs: dict[str, SimJob] = {}

    # ----- files ---------------------------------------------------------------------
    def add_file(self, provider: str, filename: str, purpose: str, content: bytes) -> SimFile:
        if len(content) > MAX_FILE_BYTES:
            raise InvalidRequest("File is too large.")
        stored = SimFile(new_id("file-"), provider, filename, purpose, content, int(time.time()))
        self.files[stored.id] = stored
        if purpose == "batch":
            self.counts["batch.files_uploaded"] += 1
            self.counts[f"batch.files_uploaded.{provider}"] += 1
            # A gauge: input files no job has been created over yet (a kill-test helper
            # watches it to find the window between upload and create).
            self.counts["batch.input_files_without_batch"] += 1
        return stored

    def file(self, provider: str, file_id: str) -> SimFile:
        found = self.files.get(file_id)
        if found is None or found.provider != provider:
            raise InvalidRequest(f"No such File object: {file_id}", 404)
        return found

    def list_files(self, provider: str, purpose: str | None) -> list[SimFile]:
        chosen = [f for f in self.files.values()
                  if f.provider == provider and (purpose is None or f.purpose == purpose)]
        return chosen[::-1]  # newest first

    # ----- jobs ----------------------------------------------------------------------
    def create(self, provider: str, payload: Any, answer: Answer) -> SimJob:
        input_id, endpoint, window, metadata = _create_fields(payload)
        source = self.file(provider, input_id)
        if source.purpose != "batch":
            raise InvalidRequest(f"File {input_id} was not uploaded with purpose batch")
        lines, invalid = parse_input(source.content, endpoint)
        fault = self.faults.draw_job()
        job = SimJob(new_id("batch_"), provider, input_id, endpoint, window, metadata,
                     time.monotonic(), lines, invalid, fault, answer)
        job.stamps["created_at"] = int(time.time())
        job.stamps["expires_at"] = job.stamps["created_at"] + 86_400
        self.jobs[job.id] = job
        if not source.has_batch:
            source.has_batch = True
            self.counts["batch.input_files_without_batch"] -= 1
        self.counts["batch.jobs_created"] += 1
        self.counts[f"batch.jobs_created.{provider}"] += 1
        if fault is BatchFaultKind.CREATE_DELAY:
            self._count_fault(provider, fault)
        return job

    def job(self, provider: str, job_id: str) -> SimJob:
        found = self.jobs.get(job_id)
        if found is None or found.provider != provider:
            raise InvalidRequest(f"No batch found with id '{job_id}'.", 404)
        return found

    def list_jobs(self, provider: str) -> list[SimJob]:
        return [j for j in reversed(self.jobs.values()) if j.provider == provider]

    def cancel(self, job: SimJob) -> None:
        if job.status in ("validating", "in_progress"):
            self._finish(job, "cancelled", "batch_cancelled")

    def _count_fault(self, provider: str, kind: FaultKind | BatchFaultKind) -> None:
        self.counts[f"fault.{kind.value}"] += 1
        self.counts[f"fault_by_provider.{provider}.{kind.value}"] += 1

    # ----- compressed time -----------------------------------------------------------
    def advance(self, job: SimJob, batch_seconds: float) -> None:
        """Bring a job up to now: answer the lines its elapsed time covers, end it on time."""
        if job.status in ("completed", "failed", "expired", "cancelled"):
            return
        progress = (time.monotonic() - job.started) / batch_seconds if batch_seconds else 1.0
        if progress < VALIDATING_SHARE:
            return
        if job.invalid or job.fault is BatchFaultKind.INVALID:
            self._fail_validation(job)
            return
        self._stamp(job, "in_progress_at")
        job.status = "in_progress"
        share = min(1.0, (progress - VALIDATING_SHARE) / (RUNNING_UNTIL - VALIDATING_SHARE))
        if job.fault is BatchFaultKind.EXPIRE and share >= EXPIRE_AT:
            self._run_until(job, int(len(job.lines) * EXPIRE_AT))
            self._count_fault(job.provider, BatchFaultKind.EXPIRE)
            self._finish(job, "expired", "batch_expired")
            return
        self._run_until(job, int(len(job.lines) * share))
        if progress >= RUNNING_UNTIL:
            job.status = "finalizing"
            self._stamp(job, "finalizing_at")
        if progress >= 1.0:
            self._finish(job, "completed", None)

    def _fail_validation(self, job: SimJob) -> None:
        if not job.invalid:  # the injected fault: an input no real check would refuse
            self._count_fault(job.provider, BatchFaultKind.INVALID)
            job.invalid = [{"code": "invalid_request", "param": None, "line": 1,
                            "message": "simulated validation failure (batch_invalid)"}]
        job.status = "failed"
        self._stamp(job, "failed_at")
        self.counts["batch.jobs.failed"] += 1

    def _stamp(self, job: SimJob, name: str) -> None:
        job.stamps.setdefault(name, int(time.time()))

    def _run_until(self, job: SimJob, target: int) -> None:
        while job.done + job.failed < target:
            custom_id, body = job.lines[job.done + job.failed]
            self._run_line(job, custom_id, body)

    def _run_line(self, job: SimJob, custom_id: str, body: bytes) -> None:
        kind = self.faults.draw_line()
        self.counts["batch.lines_run"] += 1
        self.counts[f"batch.lines_run.{job.provider}"] += 1
        if kind is not None:
            self._count_fault(job.provider, kind)
        if kind is BatchFaultKind.LINE_ERROR:
            job.failed += 1
            job.errors.append(_error_line(custom_id, "server_error", LINE_ERROR_MESSAGE))
            return
        status, headers, reply = job.answer(body, kind if isinstance(kind, FaultKind) else None)
        if kind is None and 200 <= status < 300:
            self.counts[f"answered.{job.provider}"] += 1
        line = _response_line(custom_id, status, headers, reply)
        if 200 <= status < 300:
            job.done += 1
            job.output.append(line)
        else:
            job.failed += 1
            job.errors.append(line)

    def _finish(self, job: SimJob, status: str, unrun_code: str | None) -> None:
        """End a job: lines it never reached go to the error file with `unrun_code`."""
        if unrun_code is not None:
            for custom_id, _ in job.lines[job.done + job.failed:]:
                job.errors.append(_error_line(custom_id, unrun_code, EXPIRED_MESSAGE
                                              if unrun_code == "batch_expired"
                                              else "The batch was cancelled."))
                self.counts["batch.lines_unrun"] += 1
        job.status = status
        self._stamp(job, f"{status}_at")
        job.output_file_id = self._result_file(job, "output", job.output)
        job.error_file_id = self._result_file(job, "error", job.errors)
        # The result files hold the lines now: a long rehearsal keeps one copy, not three.
        job.output, job.errors = [], []
        job.lines = [(custom_id, b"") for custom_id, _ in job.lines]
        self.counts[f"batch.jobs.{status}"] += 1

    def _result_file(self, job: SimJob, kind: str, lines: list[bytes]) -> str | None:
        if not lines:
            return None
        content = b"".join(line + b"\n" for line in lines)
        stored = SimFile(new_id("file-"), job.provider, f"{job.id}_{kind}.jsonl",
                         "batch_output", content, int(time.time()))
        self.files[stored.id] = stored
        return stored.id


def _create_fields(payload: Any) -> tuple[str, str, str, dict[str, str]]:
    if not isinstance(payload, dict):
        raise InvalidRequest("the request body must be a JSON object")
    input_id, endpoint = payload.get("input_file_id"), payload.get("endpoint")
    window, metadata = payload.get("completion_window"), payload.get("metadata") or {}
    if not isinstance(input_id, str) or not input_id:
        raise InvalidRequest("input_file_id is required")
    if endpoint not in ("/v1/chat/completions", "/chat/completions"):
        raise InvalidRequest(f"endpoint {endpoint!r} is not supported")
    if window != "24h":
        raise InvalidRequest(f"completion_window {window!r} is not supported; use '24h'")
    if not isinstance(metadata, dict) or len(metadata) > 16 or not all(
        isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
        for k, v in metadata.items()
    ):
        raise InvalidRequest("metadata must be at most 16 string pairs (keys 64, values 512)")
    return input_id, str(endpoint), window, metadata


def _response_line(custom_id: str, status: int, headers: dict[str, str], reply: bytes) -> bytes:
    try:
        body: Any = orjson.loads(reply)
    except orjson.JSONDecodeError:
        body = reply.decode("utf-8", errors="replace")
    request_id = next((v for k, v in headers.items()
                       if k.lower() in ("x-request-id", "apim-request-id")), uuid.uuid4().hex)
    return orjson.dumps({"id": new_id("batch_req_"), "custom_id": custom_id,
                         "response": {"status_code": status, "request_id": request_id,
                                      "body": body},
                         "error": None})


def _error_line(custom_id: str, code: str, message: str) -> bytes:
    return orjson.dumps({"id": new_id("batch_req_"), "custom_id": custom_id, "response": None,
                         "error": {"code": code, "message": message}})


def render_job(job: SimJob) -> dict[str, Any]:
    """OpenAI's Batch object."""
    stamps = job.stamps
    return {
        "id": job.id, "object": "batch", "endpoint": job.endpoint,
        "errors": {"object": "list", "data": job.invalid} if job.invalid and
        job.status == "failed" else None,
        "input_file_id": job.input_file_id, "completion_window": job.window,
        "status": job.status, "output_file_id": job.output_file_id,
        "error_file_id": job.error_file_id,
        **{name: stamps.get(name) for name in (
            "created_at", "in_progress_at", "expires_at", "finalizing_at", "completed_at",
            "failed_at", "expired_at", "cancelling_at", "cancelled_at")},
        "request_counts": {"total": len(job.lines), "completed": job.done, "failed": job.failed},
        "metadata": job.metadata,
    }


def page(items: Iterable[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    """One page of a list, newest first, cursor `after` = the last id of the previous page."""
    rows = list(items)
    if after is not None:
        ids = [row["id"] for row in rows]
        rows = rows[ids.index(after) + 1:] if after in ids else []
    chosen = rows[:limit]
    return {"object": "list", "data": chosen,
            "first_id": chosen[0]["id"] if chosen else None,
            "last_id": chosen[-1]["id"] if chosen else None,
            "has_more": len(rows) > limit}
