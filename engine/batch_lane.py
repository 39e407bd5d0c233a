"""One batch model's lane: its pending queries sent as jobs, exactly once across kills.

A model with `dispatch = "batch"` (issue 13) gets a `BatchLane` instead of a `Lane`. It takes
the same plan items (the dispatcher's feeder skips what is accepted), cuts them into jobs by
the client's `BatchLimits`, and takes each job through its steps, writing each one down in
`batches/jobs.jsonl` (`engine.batch_jobs`) before taking the next:

    planned -> upload -> uploaded -> create (or find, after a crash) -> created -> poll ...
    -> results -> every line journalled through the ledger -> collected

Each result line becomes one attempt exactly as a live reply would (`engine.settle.settle`:
the same parser, the same outcomes, the same answer-failure budget), numbered after the
request's earlier attempts. A request the job ran no line for (an expired job's unfinished
lines, a failed job) becomes a failed attempt too (`TIMEOUT` for an expired job, else
`PROVIDER_ERROR`), so it counts as a retry by its cause, and goes into the next job, or to a
live lane when the model allows it (`batch_fallback_live`).

On resume, jobs not yet collected are taken up where their records stop (upload again under
the same key; `find` before `create`; poll; collect only the lines not yet in the ledger),
and their requests are never put into another job meanwhile. Control-plane failures (rate
limits, 5xx, connection errors) are waited out; an auth or request error stops the lane with
one line, like a live lane's.

A job the provider answers 404 for when polled is *lost*: the provider dropped it, or the
user now asks another account, key or region, under which it may still run and be billed. The
lane cannot tell which, so it never asks the job's lines again on its own: it goes on with the
rest and then stops with one line naming the lost jobs and both ways out. A job the user names
to `dutchbook run --abandon-batch-jobs` is, once the provider answers 404 for it, recorded
`abandoned` and its lines journalled as failed attempts and asked again. After
`FAILED_JOB_STREAK` jobs in a row failed with no line run (an input the provider refuses
fails every job the same way) the lane stops with the provider's words instead of submitting
more. Damaged results (unreadable lines, lines for ids never sent, fewer lines than the
provider counted run: `engine.batch_results`) are said in one line; the requests they lost
are asked again once at most, and `DAMAGED_JOB_STREAK` damaged jobs in a row stop the lane;
so are those of an ended job whose result file alone the provider answers 404 for: its lines
ran and were billed. A line billed with no readable result keeps its worst case against the
spend cap (`_charged`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import polars as pl

from engine.batch_jobs import (
    BatchJob,
    JobRecords,
    fold_jobs,
    held_ids,
    line_recorded,
    new_job_key,
)
from engine.batch_results import (
    DAMAGED_JOB_STREAK,
    JobLines,
    damage_sentence,
    damaged_failure,
    sort_lines,
    streak_message,
)
from engine.batch_waits import JobWait
from engine.console_lines import plural
from engine.durable import DiskFull
from engine.http import HttpClient
from engine.lanes import HALTED, Lane, LaneControl, LaneState, LaneStats, LedgerWriter
from engine.logs import EngineLog
from engine.plan import PLAN_COLUMNS, PlanItem, plan_items
from engine.retry import (
    ANSWER_FAILURE_CAUSES,
    DUPLICATE,
    PERMANENT,
    AnswerRetry,
    RetryPolicy,
    charges_answer_budget,
    gave_up_detail,
    lost_for_good,
)
from engine.scan import (
    attempt_counts,
    failure_counts,
    lost_to_damage,
    scan_attempts,
    scan_responses,
)
from engine.settle import Sent, settle
from engine.spend import (
    BATCH_MARK,
    SpendCap,
    batch_prices_of,
    maybe_ran,
    maybe_ran_tag,
    prices_of,
    prompt_chars,
    worst_case_cost_of,
)
from providers.batch import (
    FINAL,
    BatchClient,
    BatchError,
    BatchLimits,
    Fetch,
    JobState,
    JobStatus,
    LineResult,
)
from providers.secrets import redact, redact_failure, redact_result
from providers.types import ChatRequest, Completion, Failure, HttpRequest, ModelConfig, Outcome

#: Seconds between polls of a job, unless the dispatch says otherwise (the simulator's
#: compressed time wants a fraction of a second; a real provider's jobs take hours).
POLL_ENV = "DUTCHBOOK_BATCH_POLL_S"
DEFAULT_POLL_S = 30.0
#: Polls slow down by this factor per unchanged poll, up to this many times the first wait.
POLL_GROWTH, POLL_MAX_FACTOR = 1.5, 10.0
#: Test hook (kill rehearsals): seconds to wait between an upload's record and the create, so
#: a SIGKILL can land in that window on purpose.
UPLOAD_PAUSE_ENV = "DUTCHBOOK_TEST_BATCH_UPLOAD_PAUSE_S"
#: Jobs failed in a row, no line run, before the lane stops: what fails validation once
#: fails again (the simulator's `batch_invalid=1.0` made 96 such jobs before giving up), and
#: a transient refusal seldom hits three jobs in a row.
FAILED_JOB_STREAK = 3
#: The flag of `dutchbook run` that abandons lost jobs (named in the lane's stop line).
ABANDON_FLAG = "--abandon-batch-jobs"
#: How a job recorded by an earlier process whose own simulator held it is abandoned (and
#: known to be, from its record, after a kill): that simulator ended with its process.
GONE_WITH_SIMULATOR = (
    "was held by the simulator inside an earlier `dutchbook run`, which ended with it"
)

#: The detail's words of a line an ended job may have run, billed, and lost (`_absent`),
#: which its tag (`engine.spend.maybe_ran_tag`) follows: the tag, not the words, is read.
BILLED_MAYBE = "or it ran, billed"

T = TypeVar("T")
_INTERRUPTED, _DAMAGED = Outcome.INTERRUPTED.value, Outcome.DAMAGED_BATCH_RESULT.value


#: Failed tries of one control call after which the lane's message says so (`_call`).
SAID_AFTER = 3
#: Jobs of a lane whose results are in memory at once: a results file of a paper-scale job
#: is 100-200 MB, read whole and split into lines, and 20 jobs ending together (Bedrock's
#: quota of jobs in flight) would have held them all; a 400 MB file took the run to 0.99 GB.
RESULTS_HELD = 2


def poll_interval(explicit: float | None = None) -> float:
    """The first wait between polls: the dispatch's, else `DUTCHBOOK_BATCH_POLL_S`, else 30 s."""
    if explicit is not None:
        return explicit
    value = os.environ.get(POLL_ENV)
    return float(value) if value else DEFAULT_POLL_S


class _Halted(Exception):
    """The lane halted (stop, pause, disk full) while a job step waited."""


class _Unknown(Exception):
    """The provider answered 404 for a job it created: see `BatchLane._lost_job`."""

    def __init__(self, failure: Failure, what: str) -> None:
        super().__init__(failure.detail)
        self.failure = failure
        # "poll" (the job is unknown), "results" (its output is gone: collected as damaged
        # results, `BatchLane._ended`) or "create" (the input it was to be made of is gone)
        self.what = what
        #: Of "results", the lines of the result objects read beside the one gone
        #: (`providers.batch.BatchError.read`).
        self.read: Sequence[LineResult] = ()


@dataclass
class _Entry:
    """One request in this lane's hands: its plan row, its answer budget, its tries so far."""

    item: PlanItem
    answers: AnswerRetry
    tries: int = 0
    #: The answer-failure rule stopped it (a repeat at temperature 0, or its budget spent).
    stopped: bool = False
    #: Its prompt's length (`engine.spend.prompt_chars`) where a resume did not read the texts
    #: (a job already uploaded), or kept when its job's upload dropped them
    #: (`_forget_prompts`): what its worst case is priced from (`BatchLane._worst`), at its
    #: reservation and for a line the provider billed whose result cannot be read (`_charged`).
    chars: int | None = None


class _Buffer:
    """Lines waiting for a job, oldest first, and their size in bytes (kept as lines come and
    go: summing a 50,000-line buffer on every item would be quadratic)."""

    def __init__(self) -> None:
        self._lines: deque[tuple[_Entry, bytes]] = deque()
        self.size = 0

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[tuple[_Entry, bytes]]:
        return iter(self._lines)

    def __getitem__(self, index: int) -> tuple[_Entry, bytes]:
        return self._lines[index]

    def append(self, pair: tuple[_Entry, bytes]) -> None:
        self._lines.append(pair)
        self.size += len(pair[1]) + 1

    def appendleft(self, pair: tuple[_Entry, bytes]) -> None:
        self._lines.appendleft(pair)
        self.size += len(pair[1]) + 1

    def popleft(self) -> tuple[_Entry, bytes]:
        pair = self._lines.popleft()
        self.size -= len(pair[1]) + 1
        return pair


def absent_failure(state: JobState | None, job: BatchJob) -> Failure:
    """The failed attempt of a request its ended job ran no line for."""
    jid = job.job_id or job.job_key
    status = state.status if state is not None else None
    said = f": {state.detail}" if state is not None and state.detail else ""
    if job.abandoned.startswith(GONE_WITH_SIMULATOR):
        return Failure(Outcome.PROVIDER_ERROR, f"{BATCH_MARK}{jid} {job.abandoned}: no provider "
                       "ran this line, asked again")
    if job.abandoned:
        return Failure(Outcome.PROVIDER_ERROR, f"{BATCH_MARK}{jid} abandoned by the user "
                       f"({ABANDON_FLAG}) after the provider answered 404: {job.abandoned}")
    if status is JobStatus.EXPIRED:
        return Failure(Outcome.TIMEOUT, f"{BATCH_MARK}{jid} expired before this line ran{said}")
    if status is JobStatus.FAILED:
        return Failure(Outcome.PROVIDER_ERROR, f"{BATCH_MARK}{jid} failed{said}")
    if status is JobStatus.CANCELLED:
        return Failure(Outcome.PROVIDER_ERROR, f"{BATCH_MARK}{jid} was cancelled{said}")
    word = status.value if status is not None else "unknown"
    return Failure(
        Outcome.PROVIDER_ERROR, f"{BATCH_MARK}{jid} ended ({word}) with no line for this request"
    )


class BatchLane(LaneControl):
    """Dispatches one batch model's plan items as jobs (see the module docstring)."""

    def __init__(
        self,
        config: ModelConfig,
        client: BatchClient,
        ledger: LedgerWriter,
        http: HttpClient,
        log: EngineLog,
        *,
        run_dir: Path,
        plan_path: Path,
        records: JobRecords,
        parser: str = "strict",
        policy: RetryPolicy | None = None,
        stop_event: asyncio.Event | None = None,
        poll_s: float | None = None,
        fallback: Lane | None = None,
        spend: SpendCap | None = None,
        abandon: frozenset[str] = frozenset(),
        simulated_here: bool = False,
    ) -> None:
        """(Long only by the lane's state, each field with why it is kept.)"""
        self.config, self.client, self.ledger, self.http, self.log = (
            config, client, ledger, http, log,
        )
        self.run_dir, self.plan_path, self.records = run_dir, plan_path, records
        self.parser = parser
        self.policy = policy or RetryPolicy()
        self.stop_event = stop_event
        self.poll_s = poll_interval(poll_s)
        self.limits: BatchLimits = client.limits
        #: Lines buffered before a job is cut while the plan is still read: a full job, plus
        #: the provider's floor when it has one, so the lines left behind can make a job.
        floor = self.limits.min_lines if self.limits.min_lines > 1 else 0
        self._full = self.limits.max_lines + floor
        self.stats = LaneStats(model=config.name, provider=client.provider, dispatch="batch")
        self.stats.cap = self.limits.max_jobs_in_flight
        #: A live lane for lines a job could not answer, when the model allows it.
        self.fallback = fallback
        if fallback is not None:
            fallback.stats = self.stats  # one lane in the summary, whichever way it asked
        self.results = 0  # finished attempts, read by the dispatcher's compaction trigger
        #: The dispatch's running spend cap, shared with every lane; a job reserves its worst
        #: case before it is planned and settles what its lines reportedly cost.
        self.spend = spend
        self.prices = (batch_prices_of(config) or prices_of(config)) if spend else None
        self._reserved: dict[str, float] = {}
        #: Jobs from earlier runs as `hold_created` read them before any lane started (under a
        #: spend cap), for `_resume_jobs`; None: not read yet.
        self._resumed: list[tuple[BatchJob, dict[str, _Entry]]] | None = None
        #: Jobs of this lane by key, and the requests that live jobs hold (never re-sent).
        self.jobs: dict[str, BatchJob] = {}
        self.held: set[str] = set()
        self._reached = False
        self._fetch: Fetch = self._send
        #: Job ids or keys the user said to abandon if the provider answers 404 for them.
        self.abandon = abandon
        #: The provider is a simulator this process started: a job an earlier process
        #: planned with a simulator inside itself ended with it, so a 404 for one is
        #: abandoned unasked (a resumed rehearsal stopped on them, exit 4). Not one of an
        #: external simulator (--sim-url), which may still hold it, nor one planned here.
        self.simulated_here = simulated_here
        self._planned_here: set[str] = set()
        #: Jobs the provider answers 404 for, not abandoned: job key -> what it said.
        self.lost: dict[str, str] = {}
        #: Ended jobs whose result file the provider answers 404 for: job key -> what it said
        #: (read by `_collect`: their lines ran and were billed, and are damaged results).
        self._output_gone: dict[str, str] = {}
        self._failed_streak = 0
        #: Jobs' results held until journalled, `RESULTS_HELD` at a time (`_ended`, `_job`).
        self._downloads = asyncio.Semaphore(RESULTS_HELD)
        self._downloading: set[str] = set()
        #: The lane's message while a control call keeps failing (`_call`), else None.
        self._failing: str | None = None
        self._damaged_streak = 0  # damaged jobs in a row (`engine.batch_results`)
        #: Requests damaged results lost, said to be asked again, not yet in a job created.
        self._queued_again: set[str] = set()
        #: Job tasks in a create call, whose reply is recorded: a stop waits for them
        #: (`_let_records_land`).
        self._recording: set[asyncio.Task[object]] = set()

    # -- state (halting and sleeping: `engine.lanes.LaneControl`) -----------------------

    workers = 1  # the dispatcher's queue length for this lane; jobs bound the rest

    def _halts_at_the_cap(self) -> bool:
        """The cap, reached by any lane, stops this one cutting jobs; the jobs it has out
        are collected first (`_drive`): they ran and were billed."""
        return False

    @property
    def _capped(self) -> bool:
        """The spend cap has no room left (`SpendCap.reached`, never cleared): no job more."""
        return self.spend is not None and self.spend.reached

    @property
    def provider_name(self) -> str:
        return self.client.provider

    async def _send(self, request: HttpRequest) -> tuple[int, Mapping[str, str], bytes] | Failure:
        """One call of the batch API; a transport failure redacted (`HttpClient.send`). Its
        timeout bounds each wait for the server, not the whole call: an upload or a download
        of a job's file takes as long as the link needs (`HttpClient.fetch`'s `idle`).

        Nothing is sent once the lane halts: a client's step can take several requests (an
        upload looks for its file by name, then posts it), and a lane stopped by damaged
        results between the two still uploaded a job's input, which no job was made of."""
        if self.halted:
            raise _Halted
        reply = await self.http.fetch(request, self.config.timeout_s, idle=True)
        return redact_failure(reply, self.client.secrets()) if isinstance(reply, Failure) else reply

    def _redact(self, text: str) -> str:
        return redact(text, self.client.secrets())

    # -- running -------------------------------------------------------------------------

    async def run(self, queue: asyncio.Queue[PlanItem | None]) -> None:
        """Send `queue`'s items (ended by a `None`) as jobs, after re-attaching to live ones."""
        self.stats.state, self.stats.started = LaneState.RUNNING, time.monotonic()
        self.log.info("lane_started", model=self.config.name, provider=self.client.provider,
                      dispatch="batch", max_lines=self.limits.max_lines,
                      max_jobs_in_flight=self.limits.max_jobs_in_flight)
        if self.limits.max_lines < self.limits.min_lines:  # no job can be valid
            self._halt(LaneState.STOPPED, (
                f"jobs of at most {plural(self.limits.max_lines, 'line')} cannot reach the "
                f"provider's minimum of {plural(self.limits.min_lines, 'line')} per job (raise "
                "batch_max_lines)"))
        live_queue: asyncio.Queue[PlanItem | None] = asyncio.Queue()
        # Not for a lane halted already: the fallback's run would say it RUNNING, then DONE
        # (a lane no job could be valid for read "done, 0/28" and the audit said nothing).
        live_task = (
            asyncio.create_task(self.fallback.run(live_queue))
            if self.fallback and not self.halted else None
        )  # fmt: skip
        try:
            await self._drive(queue, live_queue)
        except DiskFull as exc:  # a job's first record (`planned`) found no room
            self._out_of_room(exc)
        finally:
            if live_task is not None:
                live_queue.put_nowait(None)
                await asyncio.gather(live_task, return_exceptions=True)
            self.stats.finished = time.monotonic()
            self.stats.in_flight = self.stats.jobs_in_flight = 0
            # DONE too: a live fallback lane shares these stats and says DONE when its queue ends.
            if self.lost and self.stats.state in (LaneState.RUNNING, LaneState.DONE):
                self._halt(LaneState.STOPPED, self._lost_message())
            if self.stats.state in (LaneState.RUNNING, LaneState.PROBING):
                self.stats.state = LaneState.DONE
            await self._say_unasked()
            self._say_open_jobs()
            self.log.info("lane_finished", model=self.config.name, state=self.stats.state.value,
                          accepted=self.stats.accepted, attempts=self.stats.attempts,
                          retries=dict(self.stats.retries.by_cause), message=self.stats.message)

    async def _drive(
        self, queue: asyncio.Queue[PlanItem | None], live: asyncio.Queue[PlanItem | None]
    ) -> None:
        """The lane's one loop: keep up to `max_jobs_in_flight` jobs going, each cut from the
        buffer when it is full (or the plan is read to its end), until nothing is left.

        Once the spend cap has no room for a job, none more is cut, and the lane ends, said
        cancelled by the cap, when the jobs already at the provider are collected: their lines
        ran and were billed (halting at once left them to a resume, which under the same cap
        halted again before collecting them)."""
        tasks = await self._resume_jobs()
        buffer = _Buffer()
        getter: asyncio.Task[PlanItem | None] | None = None
        feeding = True
        # Wakes the wait below when the lane halts: it woke only when a job's task ended, so
        # a stop waited for an upload in flight to answer (minutes for a large one).
        halting = asyncio.create_task(self._sleep(math.inf))
        try:
            while not self.halted:
                while (not self._capped and len(tasks) < self.limits.max_jobs_in_flight
                       and self._ready(buffer, feeding)):  # fmt: skip
                    lines = self._cut(buffer, feeding)
                    worst = await self._reserve(entry for entry, _ in lines)
                    if worst is None:  # the spend cap is reached: these lines stay unasked
                        break
                    tasks.add(self._start(lines, worst))
                if self._capped and not tasks:
                    self._cancel_at_the_cap()
                    return
                if not feeding and not tasks and len(buffer) < self.limits.min_lines:
                    self._leftover(buffer, live)
                    return
                if feeding and getter is None and len(buffer) < self._full and not self._capped:
                    getter = asyncio.create_task(queue.get())
                waits: set[asyncio.Future[object]] = {*tasks, halting}  # type: ignore[arg-type]
                if getter is not None:
                    waits.add(getter)  # type: ignore[arg-type]
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if getter is not None and getter in done:
                    item, getter = getter.result(), None
                    if item is None:
                        feeding = False
                    else:
                        self._take(item, buffer)
                for job_task in [t for t in tasks if t in done]:
                    tasks.discard(job_task)
                    for entry in job_task.result():
                        self._requeue(entry, buffer, live)
            await self._let_records_land(tasks)
        finally:
            halting.cancel()
            if getter is not None:
                getter.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # A job task cancelled before its first step never ran `_job`'s `finally`: its
            # room stayed held, and a live lane beside this one (halted at its start) waited
            # for it for ever.
            for key in list(self._reserved):
                self._unreserve(self.jobs[key])

    async def _let_records_land(self, tasks: set[asyncio.Task[list[_Entry]]]) -> None:
        """The lane halted: its jobs' tasks are cut, but those waiting for the reply of a
        create, which is recorded first (each then ends at its next step). Cut too, a Ctrl-C
        while three creates were in flight recorded one, the others' replies coming back
        moments later, and the lane said "1 batch job not yet collected" where three were at
        the provider. An upload is cut: it makes nothing that runs or bills (a resume finds the
        file or uploads it again), and a large one could hold the stop for minutes. A second
        signal cancels this wait as the rest."""
        for task in tasks:
            if task not in self._recording:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @contextlib.contextmanager
    def _reply_recorded(self) -> Iterator[None]:
        """The current job task's call is one whose reply a stop waits for (`_recording`)."""
        task = asyncio.current_task()
        assert task is not None
        self._recording.add(task)
        try:
            yield
        finally:
            self._recording.discard(task)

    async def hold_created(self) -> None:
        """Under a spend cap, read this model's jobs from earlier runs and hold the worst case
        of each one created (`SpendCap.hold`): the dispatcher awaits this of every batch lane
        before any lane starts. Its lines run and bill whatever this run decides (a resume cut
        new jobs as if the cap were empty, and passed it once the earlier ones were in); held
        only once this lane had read the jobs file and the plan, a live lane beside it had
        reserved the same room meanwhile ("spend cap reached: $0.0098 of $0.0086")."""
        if self.spend is None or self.prices is None or self._resumed is not None:
            return
        self._resumed = await self._resumable()
        for job, entries in self._resumed:
            if job.job_id is not None:
                self._reserved[job.job_key] = held = self._worst(entries.values())
                self.spend.hold(held)

    async def _resume_jobs(self) -> set[asyncio.Task[list[_Entry]]]:
        """Tasks taking this model's jobs from earlier runs on, each with room in the spend
        cap: a job created holds its worst case before any lane starts (`hold_created`); one
        not created waits for room, and stays planned (or uploaded) for a later run when the
        cap has none."""
        tasks: set[asyncio.Task[list[_Entry]]] = set()
        await self.hold_created()  # a no-op once the dispatcher has (or without a cap)
        resumed = self._resumed if self._resumed is not None else await self._resumable()
        self._resumed = None
        for job, entries in resumed:
            # Started here, before any wait for room: the room a job not created waits for
            # is what these free as they are collected (awaited first, it waited for ever).
            if job.job_id is not None:
                tasks.add(asyncio.create_task(self._job(job, entries, lines=None)))
        for job, entries in resumed:
            if job.job_id is None:  # nothing of it runs, nor bills, before it is created
                reserved = await self._reserve(entries.values())
                if reserved is None:
                    continue
                self._reserved[job.job_key] = reserved
                tasks.add(asyncio.create_task(self._job(job, entries, lines=None)))
        return tasks

    def _ready(self, buffer: _Buffer, feeding: bool) -> bool:
        """A job can be cut now: the buffer is full, or the plan is read and it holds enough.
        Full by bytes while the plan is read means a job's worth and, under a floor, the
        floor's worth behind it, as `_full` keeps by lines: cut at the byte limit alone, a
        job left fewer than the floor behind, which the plan's end could strand there."""
        if not buffer:
            return False
        if len(buffer) >= self._full:
            return True
        floor = self.limits.min_lines
        if buffer.size >= self.limits.max_bytes:
            return not feeding or floor <= 1 or len(buffer) - self._fits(buffer) >= floor
        return not feeding and len(buffer) >= floor

    def _fits(self, buffer: _Buffer) -> int:
        """How many lines from the buffer's front one job holds: within the line and byte
        limits, and at least the first (a line longer than the byte limit goes alone)."""
        count = size = 0
        for _, line in buffer:
            if count == self.limits.max_lines or (
                count and size + len(line) + 1 > self.limits.max_bytes
            ):  # fmt: skip
                break
            count, size = count + 1, size + len(line) + 1
        return count

    def _cut(
        self, buffer: _Buffer, feeding: bool = True
    ) -> list[tuple[_Entry, bytes]]:
        """The next job's lines: from the front, within the line and byte limits. Once the
        plan is read, a cut that would leave fewer than the provider's minimum behind leaves
        exactly the minimum instead (Bedrock's floor: no remainder stranded too small),
        whichever limit ends the job: a byte limit of `BatchLimits.least_max_bytes` or more
        lets the minimum left behind make one job."""
        most = self._fits(buffer)
        floor = self.limits.min_lines
        if not feeding and floor > 1 and 0 < len(buffer) - most < floor <= len(buffer) - floor:
            most = len(buffer) - floor
        return [buffer.popleft() for _ in range(most)]

    def _take(self, item: PlanItem, buffer: _Buffer) -> None:
        """A fresh plan item into the buffer, unless a live job holds it or its budget is spent
        (the feeder gives up those damaged results lost for good: `engine.dispatch._feed`)."""
        if item.request_id in self.held:
            return  # a job from an earlier run carries it: its result comes from there
        entry = self._entry(item)
        if entry.answers.spent:  # earlier runs spent this request's answer budget
            self.stats.retries.answer_budget_spent += 1
            return
        buffer.append((entry, self._line(entry)))

    def _entry(self, item: PlanItem) -> _Entry:
        """A request's entry, its answer budget carried on from earlier runs (as live)."""
        return _Entry(item, _answers(item, self.config, self.policy.max_answer_failures))

    def _line(self, entry: _Entry) -> bytes:
        return _line_of(self.client, entry.item, entry.answers)

    def _requeue(
        self, entry: _Entry, buffer: _Buffer,
        live: asyncio.Queue[PlanItem | None],
    ) -> None:
        """A line to ask again: live when allowed, else at the front of the next job."""
        if self.fallback is not None:
            self._to_live(entry, live)
        else:
            buffer.appendleft((entry, self._line(entry)))

    def _to_live(self, entry: _Entry, live: asyncio.Queue[PlanItem | None]) -> None:
        entry.item.prior_answer_failures = entry.answers.failures
        live.put_nowait(entry.item)

    def _leftover(
        self, buffer: _Buffer, live: asyncio.Queue[PlanItem | None]
    ) -> None:
        """Fewer lines than the provider's smallest job: live when allowed, else they wait."""
        if not buffer:
            return
        waiting = len(buffer)
        if self.fallback is not None:
            for entry, _ in buffer:
                self._to_live(entry, live)
            # Said: live is dearer than batch, and these lines were planned and capped at
            # batch prices (a Bedrock model with 42 queries went live without a word).
            self.log.warning(
                "batch_leftover_live", model=self.config.name, lines=waiting,
                min_lines=self.limits.min_lines,
                say=(f"{self.config.name}: {plural(waiting, 'query', 'queries')} asked live "
                     f"at live prices (batch_fallback = \"live\"): fewer than "
                     f"{self.client.provider}'s minimum of "
                     f"{plural(self.limits.min_lines, 'line')} per batch job"),
            )
            return
        # Stopped, not done: it read "done, 0/42 done" with every query unasked. Not when
        # jobs are lost: their stop line, which names the way out, is said at the end.
        if not self.lost:
            self.stats.state = LaneState.STOPPED
        self.stats.say(
            f"{plural(waiting, 'query', 'queries')} {'waits' if waiting == 1 else 'wait'}: "
            f"fewer than {self.client.provider}'s minimum of "
            f"{plural(self.limits.min_lines, 'line')} per job (batch_fallback = \"live\" would "
            f"ask {'it' if waiting == 1 else 'them'} live)"
        )
        # Off the console: the lane's line above says it in words, and the console said it
        # again raw ("batch leftover: model m, lines 24, min lines 100").
        self.log.warning("batch_leftover", model=self.config.name, lines=len(buffer),
                         min_lines=self.limits.min_lines, echo=False)

    # -- one job -------------------------------------------------------------------------

    async def _reserve(self, entries: Iterable[_Entry]) -> float | None:
        """Room in the spend cap for a whole job at its worst (every line at its output
        cap, at the batch prices, else the live ones); None once the cap is reached."""
        if self.spend is None or self.prices is None:
            return 0.0
        chosen = list(entries)
        worst = self._worst(chosen)
        # Said as a job: a cap with room for one line but not five said "the next attempt",
        # where fewer lines a job (batch_max_lines) is what fits.
        what = (f"batch job of {plural(len(chosen), 'line')}",
                "each line's prompt and whole output cap: a lower max_tokens or "
                "batch_max_lines reserves less")  # fmt: skip
        if await self.spend.reserve(worst, what):
            return worst
        return None  # the cap is reached: `_drive` cuts no more jobs, ends once those out are in

    def _worst(self, entries: Iterable[_Entry]) -> float:
        """What a job of `entries` could cost at most: every line's prompt and whole output
        cap, at the lane's prices (`_reserve`)."""
        assert self.prices is not None
        return sum(
            worst_case_cost_of(self.prices, self.config, _chars(e), e.answers.sent_cap)
            for e in entries
        )

    def _start(self, lines: list[tuple[_Entry, bytes]], worst: float) -> asyncio.Task[list[_Entry]]:
        """Plan a job over `lines` (recorded before anything is sent) and start its task."""
        requests = {entry.item.request_id: entry.item.prior_attempts + 1 for entry, _ in lines}
        clash = self.held.intersection(requests)
        if clash:  # cannot happen by construction; never send a held request twice
            raise RuntimeError(f"requests already held by a live job: {sorted(clash)[:3]}")
        job = BatchJob(new_job_key(self.config.name), self.config.name, self.client.provider,
                       requests, planned_at=datetime.now(UTC).isoformat(),
                       simulated_in_process=self.simulated_here)  # fmt: skip
        self._planned_here.add(job.job_key)
        self.records.planned(job)
        self.jobs[job.job_key] = job
        self.held.update(requests)
        entries = {entry.item.request_id: entry for entry, _ in lines}
        payload = [line for _, line in lines]
        self._reserved[job.job_key] = worst
        return asyncio.create_task(self._job(job, entries, lines=payload))

    async def _job(
        self, job: BatchJob, entries: dict[str, _Entry], lines: list[bytes] | None
    ) -> list[_Entry]:
        """Take one job from wherever its records stop to collected; returns the entries to
        ask again. Returns nothing when the lane halts meanwhile (the job stays live)."""
        self.stats.in_flight += len(job.requests)
        self.stats.jobs_in_flight += 1
        try:
            if job.input_ref is None:
                if lines is None:  # a resumed job planned but not uploaded: same lines again
                    lines = [self._line(entries[rid]) for rid in job.requests if rid in entries]
                await self._upload(job, lines)
                await asyncio.sleep(float(os.environ.get(UPLOAD_PAUSE_ENV) or 0))
            lines = None  # uploaded: the provider holds the lines now, not this process
            _forget_prompts(entries.values())
            ended = await self._ended_uploading_again(job, entries)
            if ended is None:  # lost: it keeps its lines until the user decides
                self.stats.batch_waits.pop(job.job_key, None)
                return []
            state, found = ended
            again = self._collect(job, state, found, entries)
            self.stats.batch_waits.pop(job.job_key, None)  # collected: waited on no more
            self._count_failed(job, state)
            if again:  # asked again: their prompts are read back from the plan
                await asyncio.to_thread(self._restore_prompts, again)
            return again
        except _Halted:
            return []
        except DiskFull as exc:  # a step of the jobs file found no room: the job stays live
            self._out_of_room(exc)
            return []
        finally:
            if job.job_key in self._downloading:
                self._downloading.discard(job.job_key)
                self._downloads.release()
            self._unreserve(job)
            self.stats.in_flight -= len(job.requests)
            self.stats.jobs_in_flight -= 1

    def _out_of_room(self, exc: DiskFull) -> None:
        """A write of the jobs file found the disk full: said as the ledger's own would be, so
        that every lane stops starting work (`halted`) and the run ends as disk full. This
        lane read "done" beside it, or "internal error" when the first step of a job failed."""
        if self.ledger.disk_full is None:
            self.ledger.disk_full = exc
        self.log.error("disk_full", model=self.config.name, detail=str(exc), echo=False)
        if self.stats.state not in HALTED:
            self.stats.state = LaneState.STOPPED
            self.stats.say(str(self.ledger.disk_full))

    def _unreserve(self, job: BatchJob) -> None:
        """A job this run reserved for left the lane uncollected (a resume counts what it cost
        when it collects it): its room kept taken if it was created (`SpendCap.commit`), as it
        runs and bills whatever this lane does; freed if it was never created, abandoned, or
        its simulator ends with this process, or when the dispatch is stopping (a Ctrl-C: no
        lane asks any more, and a live lane waiting for that room read the cap reached)."""
        worst = self._reserved.pop(job.job_key, None)
        if worst is None or self.spend is None or self.prices is None:
            return
        stopping = self.stop_event is not None and self.stop_event.is_set()
        if _may_bill(job) and not stopping:
            self.spend.commit(worst)
        else:
            self.spend.release(worst)

    def _restore_prompts(self, entries: list[_Entry]) -> None:
        ids = [e.item.request_id for e in entries]
        frame = (
            pl.scan_parquet(self.plan_path)
            .filter((pl.col("model") == self.config.name) & pl.col("request_id").is_in(ids))
            .select("request_id", "system", "user")
            .collect()
        )
        texts = {rid: (system, user) for rid, system, user in frame.iter_rows()}
        for entry in entries:
            entry.item.system, entry.item.user = texts[entry.item.request_id]

    async def _ended(self, job: BatchJob) -> tuple[JobState, Sequence[LineResult]] | None:
        """The job's last state and its result lines, once it ended (or was abandoned); None
        when the provider answers 404 for it and the user has not abandoned it."""
        if job.abandoned:  # a kill came between its `abandoned` and `collected` records
            return _abandoned_state(job), ()
        try:
            state = job.state()
            if state is None:
                state = await self._create(job)
            state = await self._until_final(job, state)
            ended = state
            await self._downloads.acquire()  # released by `_job` once the lines are journalled
            self._downloading.add(job.job_key)
            found = await self._call("results", lambda: self.client.results(self._fetch, ended))
        except _Unknown as exc:
            if exc.what == "create":
                raise  # `_ended_uploading_again` decides
            if exc.what == "results":  # the job is known and ended: only its output is gone
                self._output_gone[job.job_key] = self._redact(exc.failure.detail)
                return ended, exc.read  # the lines of its other result objects, if any
            return self._lost_job(job, exc.failure)
        return state, found

    async def _ended_uploading_again(
        self, job: BatchJob, entries: dict[str, _Entry]
    ) -> tuple[JobState, Sequence[LineResult]] | None:
        """`_ended`, uploading the job's lines once more when the provider answers 404 to
        creating it: `find` had found no job of its key, so nothing was made from the input
        it lost (say, deleted between a kill after the upload and the resume) and nothing
        is paid twice. A second 404 (a model or endpoint it does not know) stops the lane
        with the provider's words."""
        for uploaded_again in (False, True):
            try:
                return await self._ended(job)
            except _Unknown as exc:
                if uploaded_again:
                    self._halt(LaneState.STOPPED, (
                        "batch create failed (HTTP 404) though the job's input was uploaded "
                        f"again: {self._redact(exc.failure.detail)}"))
                    return None
                await self._upload_again(job, entries, self._redact(exc.failure.detail))
        return None

    async def _upload_again(self, job: BatchJob, entries: dict[str, _Entry], why: str) -> None:
        mine = [entries[rid] for rid in job.requests if rid in entries]
        await asyncio.to_thread(self._restore_prompts, mine)
        lines = [self._line(entry) for entry in mine]
        await self._upload(job, lines)
        self.log.warning("batch_input_uploaded_again", model=self.config.name,
                         job_key=job.job_key, lines=len(lines), why=why)
        _forget_prompts(mine)

    async def _upload(self, job: BatchJob, lines: list[bytes]) -> None:
        """The job's lines to the provider, and where they went (`uploaded`) to its record."""
        ref = await self._call("upload", lambda: self.client.upload(
            self._fetch, job.job_key, lines))
        self.records.uploaded(job, ref)

    def _lost_job(
        self, job: BatchJob, failure: Failure
    ) -> tuple[JobState, Sequence[LineResult]] | None:
        """A job the provider answers 404 for when polled (one whose result file alone is
        gone is collected as damaged results, `_ended`). Abandoned (its lines asked again)
        only when the user named it: a 404 may mean the provider dropped it (no line ran), or
        that it is asked under other credentials, account or region, where it may still run
        and be billed; asking its lines again on a guess could pay for them twice."""
        detail = self._redact(failure.detail)
        gone = (self.simulated_here and job.simulated_in_process
                and job.job_key not in self._planned_here)  # fmt: skip
        if gone:
            detail = f"{GONE_WITH_SIMULATOR} ({detail})"
        if {job.job_id, job.job_key} & self.abandon or gone:
            self.records.abandoned(job, detail)
            self.log.warning("batch_job_abandoned", model=self.config.name, job_key=job.job_key,
                             job_id=job.job_id, lines=len(job.requests), detail=detail)
            return _abandoned_state(job), ()
        self.lost[job.job_key] = detail
        self.log.error("batch_job_unknown", model=self.config.name, job_key=job.job_key,
                       job_id=job.job_id, lines=len(job.requests), detail=detail)
        return None

    def _lost_message(self) -> str:
        """The stop line of a lane with lost jobs: which, what a 404 means, both ways out."""
        # By id, not by whose 404 came first (a race between the jobs' polls): the same
        # folder's line, and the --abandon-batch-jobs it names, read the same on every run.
        jobs = sorted((self.jobs[key] for key in self.lost), key=lambda j: j.job_id or j.job_key)
        ids = ",".join(job.job_id or job.job_key for job in jobs)
        lines = sum(len(job.requests) for job in jobs)
        said = self.lost[jobs[0].job_key]
        return (
            f"the provider answers 404 (not found) for {plural(len(jobs), 'batch job')} of this "
            f"run folder, {ids}, holding {plural(lines, 'query', 'queries')} ({said}); if they "
            "were created under other "
            "credentials, another account or region, switch back and run again (they may still "
            "run and be billed there); if the provider dropped them, run again with "
            f"{ABANDON_FLAG} {ids} to ask their queries again"
        )

    def _count_failed(self, job: BatchJob, state: JobState) -> None:
        """Stop after `FAILED_JOB_STREAK` jobs in a row failed with no line run, saying why
        in the provider's words (as a live lane stops after permanent failures in a row)."""
        if state.status is not JobStatus.FAILED or job.counts.get("answered", 0):
            self._failed_streak = 0
            return
        self._failed_streak += 1
        if self._failed_streak >= FAILED_JOB_STREAK:
            self._halt(LaneState.STOPPED, (
                f"after {self._failed_streak} batch jobs in a row failed with no line run "
                f"(the last, {job.job_id}: {state.provider_status or state.status.value}): "
                f"{state.detail or 'the provider gave no reason'}"), after_name=" stopped ")

    async def _say_unasked(self) -> None:
        """Requests damaged results lost, said to be asked again once, that the lane ended
        before asking (a later job's damage stopped it, or a stop, pause or spend cap): said
        too, so the console's earlier line is not left promising what did not happen."""
        if not self._queued_again:
            return
        recorded = await asyncio.to_thread(_recorded, self.run_dir, sorted(self._queued_again))
        unasked = sum(1 for o in recorded.values() if o and o[max(o)] == _DAMAGED)
        if not unasked:
            return
        one = unasked == 1
        self.log.warning(
            "batch_damaged_not_asked", model=self.config.name, requests=unasked,
            say=(f"{plural(unasked, 'request')} damaged batch results lost, to be asked again "
                 f"once, {'was' if one else 'were'} not asked again: the lane ended first "
                 f"(running the same command again asks {'it' if one else 'them'})"),
        )

    def _say_open_jobs(self) -> None:
        """A halted lane's line says how many of its jobs are still at the provider: they
        may still run and be billed, and only a resume collects their answers. Those of a
        simulator inside this run end with it, and a resume asks their queries again."""
        open_jobs = sum(
            1 for job in self.jobs.values()
            if job.live and job.job_id is not None and job.job_key not in self.lost
        )
        if not open_jobs or self.stats.state not in HALTED:
            return
        jobs = plural(open_jobs, "batch job")
        if self.simulated_here:
            tail = (f"; {jobs} not yet collected, held by the simulator inside this run, which "
                    "ends with it (running the same command again asks their queries again)")
        else:
            tail = (f"; {jobs} not yet collected from the provider (they may still run and be "
                    "billed; running the same command again collects them)")
        self.stats.message += tail
        self.stats.reason += tail

    async def _create(self, job: BatchJob) -> JobState:
        """The job's id: `find` first (a crash may have lost a create's reply), else create,
        and `find` again before each create retried: a create whose reply was lost (a 502
        from a proxy, a reset) may have made the job, and Vertex's create, unlike Bedrock's
        (a client token) and OpenAI's (which looks first), made a second one, never
        recorded, that ran and billed its lines."""
        assert job.input_ref is not None
        ref = job.input_ref
        state = await self._call("find", lambda: self.client.find(self._fetch, job.job_key))
        if state is None:
            tried = False

            async def create() -> JobState:
                nonlocal tried
                if tried and (made := await self.client.find(self._fetch, job.job_key)):
                    return made
                tried = True
                return await self.client.create(self._fetch, job.job_key, ref)

            with self._reply_recorded():
                state = await self._call("create", create)
        state = replace(state, detail=self._redact(state.detail))
        # The log's line first, the record second: a kill between them then leaves a job the
        # log names and the jobs file knows by its key (its `planned` line), which a resume
        # finds at the provider by that key. The other way round, a kill left the job out of
        # the log for good, and `engine.batch_lost`, which has only the log to name a job by
        # once the jobs file is damaged, named too few (a job given up for lost is bought
        # again). A line the log failed to write is written by a resume (`log_unlogged`).
        self.log.info("batch_job_created", model=self.config.name, job_key=job.job_key,
                      job_id=state.job_id, lines=len(job.requests),
                      **({"simulated_in_process": True} if job.simulated_in_process else {}))
        self.records.created(job, state)
        # Asked again now, not when the job was planned: a stop before its create (another
        # job's damage) left them unasked, and `_say_unasked` did not count them.
        self._queued_again.difference_update(job.requests)
        return state

    async def _until_final(self, job: BatchJob, state: JobState) -> JobState:
        """Poll until the job ends, slowing down while nothing changes; records each change,
        the provider's own word and counts among it (`_changed`), and keeps what each poll
        said in the lane's stats (`LaneStats.batch_waits`: the console and `status` say it)."""
        wait = self.poll_s
        self._waits(job, state)
        while state.status not in FINAL:
            await self._sleep(wait)
            if self.halted:
                raise _Halted
            new = await self._call(
                "poll", lambda jid=state.job_id: self.client.poll(self._fetch, jid)  # type: ignore[misc]
            )
            new = replace(new, detail=self._redact(new.detail))
            if _changed(state, new):
                self.records.status(job, new)
                wait = self.poll_s
            else:
                wait = min(wait * POLL_GROWTH, self.poll_s * POLL_MAX_FACTOR)
            state = new
            self._waits(job, state, polled=True)
        return state

    def _waits(self, job: BatchJob, state: JobState, *, polled: bool = False) -> None:
        """What the provider last said of `job` (`state`), in the lane's stats; `polled`: it
        said it just now (else the time of the last poll, if any, stands)."""
        before = self.stats.batch_waits.get(job.job_key)
        at = datetime.now(UTC) if polled else (before.polled_at if before else None)
        if (said := JobWait.of(job, state, at)) is not None:
            self.stats.batch_waits[job.job_key] = said

    async def _call(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """One control-plane call, retried while the failure is transient (rate limit, 5xx,
        connection); an auth or request error stops the lane with one line. A job outlives
        a control plane's bad hour, so the retries do not end; from the `SAID_AFTER`th try
        the lane's message (`status`' lane column) says what keeps failing, until it works:
        a create failing for minutes showed the lane "running" and nothing else."""
        tries = 0
        while True:
            if self.halted:
                raise _Halted
            try:
                result = await call()
            except BatchError as exc:
                tries += 1
                try:
                    await self._control_failed(what, exc.failure, tries)
                except _Unknown as gone:  # with the result objects read beside one gone
                    gone.read = exc.read
                    raise
                continue
            self._reached = True
            if tries >= SAID_AFTER and self.stats.message == self._failing:
                self.stats.say("")  # this call, said failing, works again: the lane runs
            return result

    async def _control_failed(self, what: str, failure: Failure, tries: int) -> None:
        name = self.config.name
        detail = self._redact(failure.detail)
        status = f"HTTP {failure.http_status}" if failure.http_status else "no status"
        if failure.http_status == 404 and what in ("poll", "results", "create"):
            raise _Unknown(failure, what)  # the job, or its output, is gone: `_lost_job` decides
        if failure.outcome in PERMANENT or (failure.unreachable and not self._reached):
            self._halt(LaneState.STOPPED, f"batch {what} failed "
                       f"({failure.outcome.value}, {status}): {detail}")
            raise _Halted
        if self.policy.quota_pauses(failure):
            self._halt(LaneState.PAUSED, "batch quota exhausted, lane paused until a later "
                       f"resume: {detail}")
            raise _Halted
        wait = self.policy.delay(min(tries, 10), failure.retry_after_s)
        if failure.quota_exhausted:  # the wait it stated, past the Retry-After clip
            wait = max(wait, failure.retry_after_s or 0.0)
        self.log.warning("batch_call_retry", model=name, call=what,
                         outcome=failure.outcome.value, http_status=failure.http_status,
                         detail=detail, tries=tries, wait_s=round(wait, 3))
        if tries >= SAID_AFTER and self.stats.state not in HALTED:  # never over a stop's why
            self.stats.say(f"batch {what} failing, {tries} tries so far (the last: "
                           f"{failure.outcome.value}, {status}: {detail}); trying again in "
                           f"{wait:.0f}s")
            self._failing = self.stats.message
        await self._sleep(wait)

    # -- collecting ----------------------------------------------------------------------

    def _collect(
        self, job: BatchJob, state: JobState, found: Sequence[LineResult],
        entries: dict[str, _Entry],
    ) -> list[_Entry]:
        """Journal every line of an ended job not yet in the ledger, mark it collected, and
        return the entries to ask again (failed, retryable, attempts left).

        A line is already in the ledger when its request has an accepted attempt, or an
        attempt of the job's number or later that is not `interrupted` (a kill between the
        two journal lines of a line: the answer is then written as the next attempt, so it is
        neither lost nor paid for again), unless that attempt is `damaged_batch_result` and
        the results, downloaded again after a kill, now hold the request's line: that line is
        taken, not bought in another job. Damaged results (`engine.batch_results`) are said
        in one line before any attempt is written (a kill mid-collection cannot leave them
        unsaid); a request they lost is asked again once, not twice.
        """
        lines = sort_lines(job.requests, found, state, self._output_gone.pop(job.job_key, ""))
        recorded = _recorded(self.run_dir, list(job.requests))
        stopping = self._say_damage(job, lines, self._foresee(job, state, lines, recorded, entries))
        counts = {"answered": 0, "failed": 0, "absent": 0, "already": 0}
        again: list[_Entry] = []
        cost: list[float] = []
        unrun: list[float] = []  # worst cases of lines an ended job may have run and lost
        for rid, entry, outcomes, number in _lines_of(job, recorded, entries, lines):
            if number is not None:
                counts["already"] += 1
                failure = self._already(entry, outcomes, number)
            else:
                counts["answered" if rid in lines.lines else "absent"] += 1
                result = lines.lines.get(rid) or self._absent(state, job, lines, outcomes)
                self._charged(entry, result, cost, unrun)  # before `_settle` moves its cap on
                sent = self._sent(entry, job, job.requests[rid], outcomes)
                failure = self._settle(entry, result, sent, job.job_id or job.job_key)
                counts["failed"] += failure is not None
                if failure is not None:  # this attempt among the request's, as recorded now
                    outcomes = {**outcomes, entry.item.prior_attempts: failure.outcome.value}
            if failure is None:
                continue
            if self._again(entry, failure, outcomes):
                again.append(entry)
                if failure.outcome is Outcome.DAMAGED_BATCH_RESULT and not stopping:
                    self._queued_again.add(rid)
        self.records.collected(job, counts)
        # Of the lines a job may have run and lost (expired, failed or cancelled, or beside
        # lines it counted failed: `_absent`), which did cannot be told: its `lost` dearest
        # are charged, a bound the bill cannot pass.
        self._spent(job, math.fsum([*cost, *sorted(unrun, reverse=True)[: lines.lost]]))
        self.stats.jobs_collected += 1
        self.held.difference_update(job.requests)
        self.log.info("batch_job_collected", model=self.config.name, job_key=job.job_key,
                      job_id=job.job_id, status=state.status.value, **counts)
        return [] if stopping else again  # a lane stopping buys nothing again

    def _foresee(
        self, job: BatchJob, state: JobState, lines: JobLines,
        recorded: dict[str, dict[int, str]], entries: dict[str, _Entry],
    ) -> Counter[str]:
        """What `_collect` will do with the requests damaged results lost, worked out before
        any attempt is written: asked again (once), or given up (lost twice)."""
        out = Counter[str]()
        for rid, entry, outcomes, number in _lines_of(job, recorded, entries, lines):
            if number is None and rid in lines.lines:
                continue
            if number is None:  # journalled now, as the attempt after the recorded ones
                failure = self._absent(state, job, lines, outcomes)
                outcomes = {**outcomes, max([0, *outcomes]) + 1: failure.outcome.value}
                tries = entry.tries + 1
            elif Outcome.OK.value in outcomes.values():
                continue
            else:
                failure, tries = _as_failure(outcomes[number]), entry.tries
            if failure.outcome is not Outcome.DAMAGED_BATCH_RESULT:
                continue
            why = self._not_again(entry, failure, tries, outcomes)
            if why == "damaged":
                out["given_up"] += 1
            elif why is None:
                out["again"] += 1
        return out

    def _already(self, entry: _Entry, outcomes: dict[int, str], number: int) -> Failure | None:
        """A line the ledger already has (as attempt `number`, see `_collect`): None if
        accepted, else a failure standing for the recorded one, for the retry decision."""
        entry.item.prior_attempts = max(outcomes)
        if Outcome.OK.value in outcomes.values():  # accepted before this run
            self.stats.already_accepted += 1
            return None
        return _as_failure(outcomes[number])

    def _sent(self, entry: _Entry, job: BatchJob, attempt: int, outcomes: dict[int, str]) -> Sent:
        """How a line of `job` is journalled: numbered after the request's recorded attempts,
        started when the job was planned, elapsed until now."""
        number = max(attempt, max(outcomes, default=0) + 1)
        started = datetime.fromisoformat(job.planned_at) if job.planned_at else datetime.now(UTC)
        elapsed_ms = (datetime.now(UTC) - started).total_seconds() * 1000.0
        notes = tuple(n for n in (entry.answers.note(), f"{BATCH_MARK}{job.job_id}") if n)
        return Sent(self.config.name, self.client.provider, number, started, elapsed_ms,
                    notes=notes)

    @staticmethod
    def _absent(state: JobState, job: BatchJob, lines: JobLines,
                outcomes: dict[int, str]) -> Failure:
        """The attempt of a request with no readable line: `damaged_batch_result` when the
        job's results were damaged (and it ran to its end), else `absent_failure`'s, saying
        when the line may have run all the same (`JobLines.unrun`), as where the provider
        counted some such requests failed, not billed (`JobLines.unbilled`)."""
        if lines.damaged and not lines.unrun and not lines.unbilled:
            before = Outcome.DAMAGED_BATCH_RESULT.value in outcomes.values()
            return damaged_failure(state, job.job_id or job.job_key, lines, before)
        failure = absent_failure(state, job)
        if not lines.lost:  # every line the provider counted is there: this one never ran
            return failure
        tag = maybe_ran_tag(job.job_id or job.job_key, lines.lost)
        return replace(failure, detail=f"{failure.detail} ({BILLED_MAYBE}, and its line "
                                       f"is lost: the results hold {lines.held}) {tag}")

    def _say_damage(self, job: BatchJob, lines: JobLines, spoilt: Counter[str]) -> bool:
        """One line (console and log) for a job whose results were damaged, `spoilt` what
        collecting it will do with the requests they lost; True when it is the
        `DAMAGED_JOB_STREAK`th such job in a row that lost requests (the lane stops), or the
        lane has halted already: nothing is asked again."""
        if not lines.damaged:
            self._damaged_streak = 0
            return False
        jid = job.job_id or job.job_key
        self._damaged_streak = self._damaged_streak + 1 if lines.missing else 0
        streak = self._damaged_streak >= DAMAGED_JOB_STREAK
        stopping = streak or self.halted  # halted already: nothing is bought again either
        self.log.warning(
            "batch_results_damaged", model=self.config.name, job_key=job.job_key, job_id=jid,
            unreadable=lines.unreadable, unreadable_example=lines.example,
            foreign=lines.foreign, foreign_ids=lines.foreign_ids, repeated=lines.repeated,
            repeated_ids=lines.repeated_ids, missing=lines.missing,
            asked_again=0 if stopping else spoilt["again"],
            not_asked_again=spoilt["given_up"] + (spoilt["again"] if stopping else 0),
            say=damage_sentence(jid, lines, spoilt["again"], spoilt["given_up"], stopping),
        )
        if streak:
            self._halt(LaneState.STOPPED, streak_message(self._damaged_streak, jid, lines),
                       after_name=" stopped ")
        return stopping

    def _charged(
        self, entry: _Entry, result: Completion | Failure, cost: list[float], unrun: list[float]
    ) -> None:
        """What a line journalled now costs against the spend cap, added to `cost`: its
        reported tokens, or, for a line the provider ran and billed whose result cannot be
        read (`damaged_batch_result`: its tokens unknown), the worst case it was reserved at,
        its prompt and whole output cap, as a cap must never be passed. A line an ended job
        may have run and lost (`JobLines.lost` of an unrun job, or of one with unbilled
        lines: its detail's tag, `engine.spend.maybe_ran`, which a resume's cap and the audit
        read) goes to `unrun` at its worst."""
        if self.prices is None:
            return
        if not isinstance(result, Failure) or result.tokens_in or result.tokens_out:
            cost.append(self.prices.cost(result.tokens_in, result.tokens_out))
        elif result.outcome is Outcome.DAMAGED_BATCH_RESULT:
            cost.append(self._worst([entry]))
        elif maybe_ran(result.detail) is not None:
            unrun.append(self._worst([entry]))

    def _spent(self, job: BatchJob, cost: float) -> None:
        """What a collected job's lines reportedly cost, against the spend cap."""
        if self.spend is None or self.prices is None:
            return
        # Every job this lane collects holds room first (`_reserve`, or `hold` for one an
        # earlier run created), so its worst case is known here.
        self.spend.settle(self._reserved.pop(job.job_key), cost)

    def _settle(
        self, entry: _Entry, result: Completion | Failure, sent: Sent, job_id: str
    ) -> Failure | None:
        """Journal one line of job `job_id` as an attempt (dispatch line, naming the job,
        then result line, as live) and account for it; the failure, if any."""
        item = entry.item
        self.ledger.record_dispatch(item.request_id, sent.attempt, sent.model, sent.provider,
                                    sent.started, batch_job=job_id)
        # Every line through one redaction with the client's credentials: a line's error is
        # the server's words (Vertex's status object, Bedrock's record error), which the batch
        # clients do not all redact, and a session token is masked only by its value.
        result = redact_result(result, self.client.secrets())
        record, response, failure = settle(item, result, sent, self.parser)
        if failure is not None and charges_answer_budget(failure):
            stopped = entry.answers.failed(failure.outcome, failure.raw_text, sent.attempt)
            if stopped:
                record = replace(record, detail=gave_up_detail(record.detail, stopped))
                entry.stopped = True
                self.log.warning("answer_retries_stopped", model=self.config.name,
                                 request_id=item.request_id, reason=stopped)
        accepted = self.ledger.record_result(record, response)
        item.prior_attempts = sent.attempt
        entry.tries += 1
        self.results += 1
        self.stats.attempts += 1
        self.stats.outcomes[record.outcome] += 1
        if failure is not None:
            self.stats.retries.count(failure.outcome)
            return failure
        if accepted:
            self.stats.accepted += 1
        else:
            self.stats.retries.count(DUPLICATE)
        return None

    def _again(self, entry: _Entry, failure: Failure, outcomes: dict[int, str]) -> bool:
        """Whether a failed request (`outcomes`: its attempts, this one included) is asked
        again in this dispatch (`_given_up`'s rule)."""
        why = self._not_again(entry, failure, entry.tries, outcomes)
        if why == "budget":
            self.stats.retries.answer_budget_spent += 1
        elif why in ("gave_up", "damaged"):
            self.stats.gave_up += 1
            self.stats.lost_to_damage += why == "damaged"
        elif why == "exhausted":
            self.stats.retries.exhausted += 1
        return why is None

    def _not_again(
        self, entry: _Entry, failure: Failure, tries: int, outcomes: dict[int, str]
    ) -> str | None:
        """Why a request failed after `tries` tries is not asked again (see `_again`)."""
        return _given_up(self.policy, failure, tries, outcomes, stopped=entry.stopped,
                         spent=entry.answers.spent)

    # -- resume --------------------------------------------------------------------------

    async def _resumable(self) -> list[tuple[BatchJob, dict[str, _Entry]]]:
        """This model's live jobs from earlier runs, with the plan items they carry."""
        jobs = await asyncio.to_thread(fold_jobs, self.run_dir)
        mine = {k: j for k, j in jobs.items() if j.model == self.config.name and j.live}
        self.jobs.update(mine)
        self.held = held_ids(mine)
        if not mine:
            return []
        # The prompts of a job not uploaded (its lines are made again); of the others only
        # their lengths, which price a job's worst case under a spend cap (`_worst`): a
        # created job holds it, one not created reserves it before it is created.
        unsent = {rid for job in mine.values() if job.input_ref is None for rid in job.requests}
        items, chars = await asyncio.to_thread(
            _read_items, self.plan_path, self.config.name, self.run_dir, sorted(self.held), unsent
        )
        entries = {item.request_id: self._entry(item) for item in items}
        for item, length in zip(items, chars, strict=True):
            entries[item.request_id].chars = length
        self.log.info("batch_jobs_resumed", model=self.config.name, jobs=len(mine),
                      lines=len(self.held))
        return [
            (job, {rid: entries[rid] for rid in job.requests if rid in entries})
            for job in mine.values()
        ]


def _read_items(
    plan_path: Path, model: str, run_dir: Path, ids: list[str], texts: set[str] | None = None
) -> tuple[list[PlanItem], list[int | None]]:
    """The plan rows of `ids` as work items, with their attempts and answer failures so far;
    the prompts only of those in `texts` (all when None): a job already uploaded needs none.
    Beside them, each item's prompt length where its texts were left out, else None.

    The lengths are computed in polars, in a streaming pass (`engine.spend.prompt_chars`): a
    capped resume priced its created jobs from their texts, read into Python at once. For
    200,000 held lines of 1,500 characters (row groups of 2,000 rows, as the planner writes)
    this step peaked 770 MB over its start so, 205 MB now, the entries themselves."""
    keep = pl.lit(True) if texts is None else pl.col("request_id").is_in(list(texts))
    texts_of = ("system", "user")
    frame = (
        pl.scan_parquet(plan_path)
        .select(*PLAN_COLUMNS)
        .filter((pl.col("model") == model) & pl.col("request_id").is_in(ids))
        .with_columns(
            *(pl.when(keep).then(pl.col(c)).otherwise(pl.lit("")).alias(c) for c in texts_of),
            pl.when(keep).then(None).otherwise(prompt_chars()).alias("_chars"),
        )
        .collect(engine="streaming")
    )
    prior = attempt_counts(run_dir, ids)
    failed = failure_counts(run_dir, ids, ANSWER_FAILURE_CAUSES)
    return plan_items(frame, prior, failed), frame.get_column("_chars").to_list()


def created_jobs_worst(
    jobs: Mapping[str, BatchJob], plan_path: Path, config: ModelConfig
) -> float:
    """The worst case of the lines of `config`'s batch jobs that an earlier run created and
    no run collected, at the batch prices (else the live ones) and the model's output cap:
    what they may bill while this dispatch asks that model live (its `dispatch` switched to
    "live" on a resume), which no lane collects, so a spend cap keeps it taken
    (`engine.dispatch`). 0 when there are none or the model is not priced. `jobs`: the run
    folder's, folded once for every live lane (`engine.batch_jobs.fold_jobs`)."""
    prices = batch_prices_of(config) or prices_of(config)
    ids = sorted(
        rid for job in jobs.values() if job.model == config.name and _may_bill(job)
        for rid in job.requests
    )  # fmt: skip
    if prices is None or not ids:
        return 0.0
    chars = (
        pl.scan_parquet(plan_path)
        .filter((pl.col("model") == config.name) & pl.col("request_id").is_in(ids))
        .select(prompt_chars().alias("chars"))
        .collect(engine="streaming")["chars"]
    )
    return sum(worst_case_cost_of(prices, config, int(n)) for n in chars)


def lines_to_cut(
    run_dir: Path, plan_path: Path, model: str, answer_budget: int, *,
    simulated_here: bool = False, fallback_live: bool = False,
    max_attempts: int = RetryPolicy.max_attempts,
) -> int:
    """How many of `model`'s plan rows a batch lane dispatching `run_dir` now would cut into
    new jobs: those the ledger has no answer for, that no job it re-attaches to holds (each
    job not yet collected, as `engine.dispatch` leaves them out, but those it asks again:
    `asked_again`, unless `fallback_live` asks them live, and of those only the lines the
    lane does not give up at once, `max_attempts` being the policy's: see
    `_given_up_at_once`), whose answer-failure budget (`answer_budget`, the policy's)
    earlier runs did not spend (`BatchLane._take`), and whose lines damaged results did not
    lose for good (`engine.scan.lost_to_damage`: the feed gives them up unasked).
    `simulated_here`: the lane's provider is a simulator this process starts
    (`BatchLane.simulated_here`). Lines a job fails and asks again are not foreseen. Read
    before dispatch, which reads the ledger again as it feeds the lane, so `runs.pipeline`
    asks it only of a model whose `batch_max_lines` could leave some of them waiting
    (`BatchLimits.stranded`)."""
    return len(_to_cut(run_dir, plan_path, model, answer_budget, simulated_here=simulated_here,
                       fallback_live=fallback_live, max_attempts=max_attempts))


def line_sizes(
    run_dir: Path, plan_path: Path, config: ModelConfig, client: BatchClient, answer_budget: int,
    *, simulated_here: bool = False, max_attempts: int = RetryPolicy.max_attempts,
) -> list[int]:
    """The bytes (newline aside) of each line a batch lane dispatching `run_dir` now would cut
    into new jobs (`lines_to_cut`'s rows, `simulated_here` and `max_attempts` as there), as
    `client` writes them: its seed moved on by the answer failures of earlier runs, as the
    lane's. For
    `runs.pipeline`, of a model whose `batch_max_bytes` could cut a job below its provider's
    floor (`BatchLimits.least_max_bytes`); lines asked again later (a new seed, a doubled
    output cap: a few bytes more) are not foreseen."""
    failed = _to_cut(run_dir, plan_path, config.name, answer_budget, simulated_here=simulated_here,
                     fallback_live=config.batch_fallback_live, max_attempts=max_attempts)
    if not failed:
        return []
    frame = (
        pl.scan_parquet(plan_path)
        .filter(pl.col("model") == config.name)
        .filter(pl.col("request_id").is_in(pl.Series(sorted(failed), dtype=pl.String).implode()))
        .select(PLAN_COLUMNS)
        .collect()
    )
    return [len(next_line(client, config, item, answer_budget))
            for item in plan_items(frame, {}, failed)]  # fmt: skip


def asked_again(job: BatchJob, simulated_here: bool) -> bool:
    """Whether a resumed lane gives a job not yet collected up at once and asks its lines
    again (`BatchLane._ended`, `_lost_job`), rather than re-attaching to it: one recorded
    abandoned (a kill before its `collected` line), or one created by a simulator inside an
    earlier run when this lane's is inside its own (`simulated_here`): that simulator ended
    with its run, and this one answers 404 for it. A job not created yet is created under
    its own key (its lines stay in it); a 404 for any other is the user's to decide."""
    gone = simulated_here and job.simulated_in_process and job.job_id is not None
    return job.live and (bool(job.abandoned) or gone)


def next_line(
    client: BatchClient, config: ModelConfig, item: PlanItem, answer_budget: int
) -> bytes:
    """The input line a batch lane of `config` would send `item` as next, as `client` writes
    it: its seed moved on by its answer failures in earlier runs (`AnswerRetry`)."""
    return _line_of(client, item, _answers(item, config, answer_budget))


def _to_cut(
    run_dir: Path, plan_path: Path, model: str, answer_budget: int, *,
    simulated_here: bool, fallback_live: bool, max_attempts: int,
) -> dict[str, int]:
    """`lines_to_cut`'s requests, each with its answer failures in earlier runs."""
    ids = (
        pl.scan_parquet(plan_path).filter(pl.col("model") == model).select("request_id")
        .collect()["request_id"]
    )  # fmt: skip
    jobs = fold_jobs(run_dir)
    given_up: set[str] = set()
    if not fallback_live:  # their lines go back into the lane's next jobs (`_requeue`)
        again = [job for job in jobs.values()
                 if job.model == model and asked_again(job, simulated_here)]  # fmt: skip
        given_up = _given_up_at_once(run_dir, again, RetryPolicy(max_attempts=max_attempts))
        jobs = {key: job for key, job in jobs.items() if not asked_again(job, simulated_here)}
    held = held_ids(jobs, model) | given_up
    if held:
        ids = ids.filter(~ids.is_in(pl.Series(sorted(held), dtype=pl.String).implode()))
    answered = (
        scan_responses(run_dir, ["request_id"])
        .filter(pl.col("request_id").is_in(ids.implode()))
        .collect()["request_id"]
    )
    lost = lost_to_damage(run_dir, model)  # the resume gives them up unasked (`engine.dispatch`)
    left = [rid for rid in ids.filter(~ids.is_in(answered.implode())).to_list()
            if rid not in lost]  # fmt: skip
    if not left:
        return {}
    failed = failure_counts(run_dir, left, ANSWER_FAILURE_CAUSES)
    return {
        rid: failed.get(rid, 0) for rid in left if failed.get(rid, 0) < answer_budget
    }


def _given_up(
    policy: RetryPolicy, failure: Failure, tries: int, outcomes: dict[int, str], *,
    stopped: bool = False, spent: bool = False,
) -> str | None:
    """Why a request whose attempt failed with `failure`, after `tries` tries in this
    dispatch (`outcomes`: its attempts, this one included), is not asked again in it, else
    None: the lane's one rule (`BatchLane._again`, `_foresee`; as `Lane._ask` decides), which
    a resume's count foresees (`_given_up_at_once`, `_to_cut`). "damaged": damaged results
    lost its line a second time (`_damaged_twice`), whatever else holds; "budget": its
    answer-failure budget is `spent`, by this run's failures or by earlier runs' (a line
    journalled before a kill, a budget lowered on a resume), as the live lane asks no
    request whose budget is spent; "gave_up": a permanent failure, a spent quota or a
    stopped answer (`stopped`); "exhausted": `max_attempts` tries (per dispatch: a resume
    asks such a request again)."""
    if _damaged_twice(failure, outcomes):  # each loss was paid for: not bought a third time
        return "damaged"
    if spent:  # not only once this run's failure spent it: earlier runs' count (`_take`)
        return "budget"
    if not failure.retryable or policy.quota_pauses(failure) or stopped:
        return "gave_up"
    if tries >= policy.max_attempts:
        return "exhausted"
    return None


def _given_up_at_once(run_dir: Path, jobs: list[BatchJob], policy: RetryPolicy) -> set[str]:
    """The requests of `jobs`, which a resumed lane gives up and asks again (`asked_again`),
    that it does not ask again in this dispatch, by the lane's rule (`_given_up`).
    Collecting such a job journals each line as an attempt no line ran for
    (`BatchLane._collect`, `absent_failure`), its request's first try of the dispatch,
    given up at `max_attempts = 1`; a line a kill left journalled is taken as recorded, no
    try of this dispatch (`BatchLane._already`), given up if it was a permanent failure or
    the second line damaged results lost. Counted as asked again, these lines made a resume
    refused as stranding lines below Bedrock's floor that it would never cut. A request
    whose answer-failure budget is spent is left out by `_to_cut` itself."""
    if not jobs:
        return set()
    recorded = _recorded(run_dir, sorted({rid for job in jobs for rid in job.requests}))
    out: set[str] = set()
    for job in jobs:
        absent = absent_failure(_abandoned_state(job), job)
        for rid, attempt in job.requests.items():
            outcomes = recorded.get(rid, {})
            number = line_recorded(attempt, outcomes)
            if number is None:  # journalled now, after the recorded attempts (`_foresee`)
                failure, tries = absent, 1
                outcomes = {**outcomes, max([0, *outcomes]) + 1: absent.outcome.value}
            else:
                failure, tries = _as_failure(outcomes[number]), 0
            if _given_up(policy, failure, tries, outcomes) is not None:
                out.add(rid)
    return out


def _answers(item: PlanItem, config: ModelConfig, budget: int) -> AnswerRetry:
    """A request's answer budget, carried on from earlier runs (as live): its seed and cap."""
    return AnswerRetry(
        base_seed=item.seed if item.seed is not None else config.seed,
        base_cap=config.max_tokens, temperature=config.temperature,
        budget=budget, failures=item.prior_answer_failures,
    )


def _line_of(client: BatchClient, item: PlanItem, answers: AnswerRetry) -> bytes:
    """The input line `client` writes for `item` asked with `answers`' seed and cap."""
    chat = ChatRequest(item.request_id, item.system, item.user, answers.seed,
                       tuple(item.keys), answers.cap)  # fmt: skip
    return client.line(chat)


def _changed(before: JobState, after: JobState) -> bool:
    """Whether a poll's answer is worth a line of the jobs file: the job's state, the
    provider's own word for it (Bedrock's Submitted and Scheduled are both queued; Vertex's
    PENDING and PAUSED, Bedrock's InProgress and Stopping, likewise alike), or its counts.
    An unchanged poll writes nothing, so the file stays a few lines a job over a day."""
    fields = ("status", "provider_status", "total", "completed", "failed")
    return any(getattr(before, name) != getattr(after, name) for name in fields)


def _may_bill(job: BatchJob) -> bool:
    """Whether a job not collected runs and bills at its provider whatever this process does:
    created, not abandoned, and not one whose simulator ended with the process that ran it."""
    return (job.live and job.job_id is not None and not job.abandoned
            and not job.simulated_in_process)  # fmt: skip


def _chars(entry: _Entry) -> int:
    """The entry's prompt length, as `engine.spend.worst_case_cost` counts it: read from the
    plan where its texts were not (`_Entry.chars`), else of its texts."""
    if entry.chars is not None:
        return entry.chars
    return len(entry.item.system) + len(entry.item.user)


def _abandoned_state(job: BatchJob) -> JobState:
    """An abandoned job's end, as collecting reads it: no line of it ran."""
    return JobState(job.job_id or job.job_key, JobStatus.CANCELLED, "abandoned",
                    total=len(job.requests), completed=0, detail=job.abandoned)


def _forget_prompts(entries: Iterable[_Entry]) -> None:
    """A job's prompts are dropped once it is uploaded (a campaign's in-flight jobs would
    otherwise hold every prompt they carry: Groq's 20 jobs of 50,000 lines are the whole
    paper); the few asked again are read back from the plan."""
    for entry in entries:
        entry.chars = _chars(entry)  # still priced if its line is billed and lost (`_charged`)
        entry.item.system = entry.item.user = ""


def _recorded(run_dir: Path, ids: list[str]) -> dict[str, dict[int, str]]:
    """The attempts the ledger already has of `ids`: request -> attempt -> outcome."""
    if not ids:
        return {}
    frame = (
        scan_attempts(run_dir, ["request_id", "attempt", "outcome"])
        .filter(pl.col("request_id").is_in(ids))
        .collect()
    )
    out: dict[str, dict[int, str]] = {}
    for rid, attempt, outcome in frame.iter_rows():
        out.setdefault(rid, {})[int(attempt)] = str(outcome)
    return out


def _lines_of(
    job: BatchJob, recorded: dict[str, dict[int, str]], entries: dict[str, _Entry],
    lines: JobLines,
) -> Iterator[tuple[str, _Entry, dict[int, str], int | None]]:
    """The job's requests still in the plan, each with its recorded attempts and the attempt
    the ledger holds the job's line as (None: journal it now; see `BatchLane._collect`)."""
    for rid, attempt in job.requests.items():
        entry = entries.get(rid)
        if entry is None:  # not in the plan any more (a changed plan): nothing to write
            continue
        outcomes = recorded.get(rid, {})
        number = line_recorded(attempt, outcomes)
        if (number == attempt and outcomes[number] == _DAMAGED and rid in lines.lines
                and Outcome.OK.value not in outcomes.values()):  # fmt: skip
            number = None  # downloaded again after a kill, its line is readable now: taken
        yield rid, entry, outcomes, number


def _damaged_twice(failure: Failure, outcomes: dict[int, str]) -> bool:
    """A request whose line damaged results lost twice (`outcomes`: its attempts, this one
    included): not asked again, as each time pays for it (`engine.batch_results`)."""
    damaged = Outcome.DAMAGED_BATCH_RESULT
    return failure.outcome is damaged and lost_for_good(
        list(outcomes.values()).count(damaged.value)
    )


def _as_failure(outcome: str) -> Failure:
    """A failure standing for an attempt already in the ledger (for the retry decision)."""
    try:
        kind = Outcome(outcome)
    except ValueError:
        kind = Outcome.PROVIDER_ERROR
    return Failure(kind, "recorded before a restart")


__all__ = [
    "ABANDON_FLAG",
    "FAILED_JOB_STREAK",
    "BatchLane",
    "absent_failure",
    "asked_again",
    "line_sizes",
    "lines_to_cut",
    "next_line",
    "poll_interval",
]
