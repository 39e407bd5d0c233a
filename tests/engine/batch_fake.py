"""A FAKE batch provider for engine tests: an in-process `BatchClient` with no HTTP.

It keeps what a provider keeps (uploaded inputs by key, jobs by id, each tagged with the
engine's job key) across the engine's restarts, so a test can stop the engine at any step
(`kill_at` by call count, `kill_if` by state) and start it again against the same
"provider". It also counts what a provider would bill: every line it ran, per request
(`ran`). Faults by the order jobs are created: `expire` (half its lines run, then it
expires), `fail` (fails validation, no line runs), `error_lines` (every third line comes
back as a 500 error line), `garbage` (every third answer is not JSON). Control-plane faults:
`transient` lists call numbers that raise a retryable `BatchError` (a 429) before doing
anything.

Timing: `delays` holds a call back (`await asyncio.sleep`) before it does anything, by method
and call number, as a slow link or a loaded machine would; a race a loaded CI machine hit
once is reproduced at will. `DELAY_ENV` sets it for every fake of a test run, so a whole test
file can be run under one delay without editing it (`delays_from`).

Nothing here talks to a network; the answers are fixed numbers, not a forecaster.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import orjson

from providers.batch import (
    BatchError,
    BatchLimits,
    Fetch,
    JobState,
    JobStatus,
    LineResult,
)
from providers.secrets import Secret
from providers.types import ChatRequest, Completion, Failure, Outcome

#: Delays for every fake of a test run: "method:n=seconds" pairs, comma-separated; n is the
#: call's number by arrival, 0 for every call ("upload:2=0.2,poll:0=0.05").
DELAY_ENV = "DUTCHBOOK_TEST_FAKE_DELAY"


def delays_from(text: str) -> dict[tuple[str, int], float]:
    """`DELAY_ENV`'s value as `FakeBatch.delays`."""
    delays: dict[tuple[str, int], float] = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        call, _, seconds = pair.partition("=")
        method, _, n = call.partition(":")
        delays[(method.strip(), int(n or 0))] = float(seconds)
    return delays


class Killed(BaseException):
    """Stands for SIGKILL inside one test process: nothing after it runs in the lane."""


@dataclass
class _Job:
    job_id: str
    key: str
    input_ref: str
    fault: str
    polls: int = 0
    status: JobStatus = JobStatus.VALIDATING


@dataclass
class FakeBatch:
    """A fake provider's batch API and its state (see the module docstring)."""

    limits_: BatchLimits = field(default_factory=lambda: BatchLimits(
        max_lines=40, max_bytes=1 << 20, max_jobs_in_flight=3, completion_window="24h",
        source="test fake"))
    faults: dict[int, str] = field(default_factory=dict)
    transient: set[int] = field(default_factory=set)
    #: (method, n, "before"|"after"): raise `Killed` at the n-th call of method.
    kill_at: tuple[str, int, str] | None = None
    #: Raise `Killed` at the first call (by method name) for which this holds, before the
    #: call does anything: a kill placed by state, not by a call count that timing decides.
    kill_if: Callable[[str], bool] | None = None
    #: (method, n) -> seconds the n-th call of method (by arrival; n = 0: every call) waits
    #: before it does anything, even the kill checks: a test holds one step back to place
    #: the lane's other steps in an order a loaded machine could make.
    delays: dict[tuple[str, int], float] = field(
        default_factory=lambda: delays_from(os.environ.get(DELAY_ENV, "")))
    arrived: Counter[str] = field(default_factory=Counter)
    polls_to_finish: int = 2
    inputs: dict[str, tuple[str, list[bytes]]] = field(default_factory=dict)
    jobs: dict[str, _Job] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    ran: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    total_calls: int = 0
    on_call: Callable[[str], None] | None = None
    #: The `fetch` of the lane a kill stopped: that lane's later calls are refused (its other
    #: jobs' tasks must not go on as if the process had lived); a resumed lane has its own.
    killed_lane: Fetch | None = None

    @property
    def provider(self) -> str:
        return "sim"

    @property
    def limits(self) -> BatchLimits:
        return self.limits_

    def secrets(self) -> tuple[Secret, ...]:
        return ()

    def line(self, req: ChatRequest) -> bytes:
        return orjson.dumps({"custom_id": req.request_id, "keys": list(req.keys),
                             "seed": req.seed, "user": req.user})

    async def _enter(self, method: str, fetch: Fetch) -> None:
        self.arrived[method] += 1
        wait = self.delays.get((method, self.arrived[method]), self.delays.get((method, 0)))
        if wait:
            await asyncio.sleep(wait)
        if fetch is self.killed_lane:
            raise Killed(f"{method} after the kill")
        self.total_calls += 1
        self.calls[method] += 1
        if self.on_call is not None:
            self.on_call(method)
        if self.kill_if is not None and self.kill_if(method):
            self.kill_if, self.killed_lane = None, fetch
            raise Killed(f"{method} #{self.calls[method]} by kill_if")
        if self.total_calls in self.transient:
            self.injected["control_rate_limit"] += 1
            raise BatchError(Failure(Outcome.RATE_LIMIT, "429 slow down", http_status=429,
                                     retry_after_s=0.01))
        self._maybe_kill(method, "before", fetch)

    def _maybe_kill(self, method: str, when: str, fetch: Fetch) -> None:
        if self.kill_at == (method, self.calls[method], when):
            self.kill_at = None
            self.killed_lane = fetch
            raise Killed(f"{method} #{self.calls[method]} {when}")

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        await self._enter("upload", fetch)
        if job_key not in self.inputs:  # idempotent per key
            self.inputs[job_key] = (f"file-{len(self.inputs) + 1}", list(lines))
        self._maybe_kill("upload", "after", fetch)
        return self.inputs[job_key][0]

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        await self._enter("create", fetch)
        number = len(self.jobs) + 1
        job = _Job(f"job-{number}", job_key, input_ref, self.faults.get(number, ""))
        self.jobs[job.job_id] = job
        self._maybe_kill("create", "after", fetch)
        return self._state(job)

    async def find(self, fetch: Fetch, job_key: str) -> JobState | None:
        await self._enter("find", fetch)
        for job in self.jobs.values():
            if job.key == job_key:
                return self._state(job)
        return None

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        await self._enter("poll", fetch)
        job = self.jobs[job_id]
        job.polls += 1
        if job.status not in (JobStatus.DONE, JobStatus.EXPIRED, JobStatus.FAILED):
            if job.fault == "fail":
                job.status = JobStatus.FAILED
                self.injected["job_failed"] += 1
            elif job.polls < self.polls_to_finish:
                job.status = JobStatus.RUNNING
            else:
                job.status = JobStatus.EXPIRED if job.fault == "expire" else JobStatus.DONE
                self._run(job)
        self._maybe_kill("poll", "after", fetch)
        return self._state(job)

    def _lines(self, job: _Job) -> list[dict[str, object]]:
        key = next(k for k, (ref, _) in self.inputs.items() if ref == job.input_ref)
        return [orjson.loads(line) for line in self.inputs[key][1]]

    def _run(self, job: _Job) -> None:
        """The lines this job runs (billed), once, when it ends."""
        lines = self._lines(job)
        if job.fault == "expire":
            lines = lines[: len(lines) // 2]
            self.injected["expired_lines"] += len(self._lines(job)) - len(lines)
        for i, line in enumerate(lines):
            rid = str(line["custom_id"])
            self.ran[rid] += 1
            if job.fault == "error_lines" and i % 3 == 0:
                self.injected["error_lines"] += 1
            elif job.fault == "garbage" and i % 3 == 0:
                self.injected["garbage_lines"] += 1
            else:
                self.answered[rid] += 1

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        await self._enter("results", fetch)
        job = self.jobs[state.job_id]
        out: list[LineResult] = []
        if job.status is JobStatus.FAILED:
            return out
        lines = self._lines(job)
        if job.fault == "expire":
            lines = lines[: len(lines) // 2]
        for i, line in enumerate(lines):
            rid, keys = str(line["custom_id"]), list(line["keys"])  # type: ignore[call-overload]
            result: Completion | Failure
            if job.fault == "error_lines" and i % 3 == 0:
                result = Failure(Outcome.PROVIDER_ERROR, "line error: 500 internal",
                                 http_status=500)
            elif job.fault == "garbage" and i % 3 == 0:
                result = Completion("I think so", "stop", 10, 3, None, "fake")
            else:
                text = orjson.dumps({k: 0.25 for k in keys}).decode()
                result = Completion(text, "stop", 10, 5, None, "fake")
            out.append(LineResult(rid, result))
        self._maybe_kill("results", "after", fetch)
        return out

    def _state(self, job: _Job) -> JobState:
        n = len(self._lines(job))
        # An expired job counts the lines it ran (`_run`: the first half), as providers do:
        # its replies completed, its error lines (every third, `error_lines`) failed.
        ran = {JobStatus.DONE: n, JobStatus.EXPIRED: n // 2}.get(job.status, 0)
        errors = (ran + 2) // 3 if job.fault == "error_lines" else 0
        return JobState(job.job_id, job.status, job.status.value, total=n,
                        completed=ran - errors, failed=errors,
                        detail="input failed validation" if job.status is JobStatus.FAILED
                        else "")
