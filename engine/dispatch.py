"""Dispatch a plan: stream its rows, skip what is accepted, and ask the rest through lanes.

This is the engine's entry point (`dispatch`). It owns what spans lanes: the one HTTP
session, the ledger (opened here, so recovery of interrupted attempts happens before any new
dispatch), periodic compaction, the progress display, the log, and the summary.

Plans stream: each lane reads the plan file in row slices of `batch_rows` (Polars pushes the
slice down to the Parquet reader), first only `request_id` and `model`, asks the ledger which
of those ids are accepted (a search of its shards: the campaign's accepted ids are never held
in memory), and reads the full rows only for the ones it still has to ask. A lane reads on
its own, so a lane whose queue is full (a slow provider) never stops another lane's reading.
Memory is therefore bounded by the batch size and queue length, not by the plan's length
or by how much of it is already answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, Protocol

import polars as pl
from rich.console import Console

from engine.batch_jobs import JobRecords, fold_jobs, held_ids
from engine.batch_lane import BatchLane, created_jobs_worst
from engine.console_lines import plural
from engine.durable import READ_ONLY_SAVED, FolderReadOnly
from engine.housekeeping import housekeeping_thread
from engine.http import HttpClient
from engine.lanefile import LaneFileWriter, read_lane_states
from engine.lanes import DEFAULT_CONCURRENCY, Lane, LaneState, LaneStats
from engine.ledger import Ledger
from engine.logs import EngineLog
from engine.open_files import connection_cap, raise_open_files_limit
from engine.outage import OutagePolicy
from engine.plan import PlanItem, plan_counts, plan_items, plan_spans, read_pending, read_rows
from engine.progress import LiveProgress
from engine.retry import ANSWER_FAILURE_CAUSES, CAUSE_LABELS, RetryPolicy
from engine.scan import attempt_counts, failure_counts, lost_to_damage
from engine.spend import SPEND_CAP_REACHED, SpendCap, dollars, recorded_spend, unpriced
from providers.base import Adapter
from providers.batch import BatchClient
from providers.secrets import Secret
from providers.types import ModelConfig

#: `read_lane_states` is named by docs/interfaces.md as `engine.dispatch`'s; it lives in
#: `engine.lanefile` (so `status` reads lanes.json without importing the dispatcher).
__all__ = ["DispatchSummary", "ProgressSink", "dispatch", "read_lane_states"]



class ProgressSink(Protocol):
    """What `dispatch` drives; `engine.progress.LiveProgress` is the rich implementation."""

    def start(self, lanes: list[LaneStats]) -> None: ...

    def refresh(self) -> None: ...

    def stop(self) -> None: ...


def _lane_line(name: str, s: LaneStats, cap_said: str | None = None) -> str:
    """The summary's line of one lane (`DispatchSummary.lines`): its state and counts, each
    count said only where it is not zero, and why it halted (`_reason_said`: `cap_said`, the
    spend line's words where the cap was reached)."""
    # In the audit's words ("rate limits 2"), not the ledger's codes ("rate_limit 2").
    causes = sorted(s.retries.by_cause.items())
    retries = ", ".join(f"{CAUSE_LABELS.get(k, k)} {v}" for k, v in causes)
    # A lane that asked all it may while batch jobs of an earlier run hold the rest
    # is not done ("done, 74/224 done — 150 requests held ...").
    waiting = s.held_by_jobs and s.state is LaneState.DONE
    # Not "done" of a lane that gave requests up: "gave up", or "done in part".
    state = "waiting" if waiting else s.state_said.partition(":")[0]
    return (
        f"  {name}: {state}, {s.done:,}/{s.planned:,} done"
        + (_batch_jobs_said(s) if s.dispatch == "batch" else "")
        + (f", retry attempts: {retries}" if retries else "")
        + (
            f", {plural(s.retries.unsent, 'credential failure')} before sending"
            if s.retries.unsent
            else ""
        )
        + (
            f", {s.retries.exhausted} gave up after max attempts"
            if s.retries.exhausted
            else ""
        )
        + (
            f", {s.retries.answer_budget_spent} gave up with their answer-failure "
            "budget spent"
            if s.retries.answer_budget_spent
            else ""
        )
        + (
            f", {s.lost_to_damage} given up for good, lost twice to damaged batch "
            "results"
            if s.lost_to_damage
            else ""
        )
        + (
            f", paused {s.pauses}x for {s.paused_s:.0f}s while its provider was down"
            if s.pauses
            else ""
        )
        + (f" — {_reason_said(s, cap_said)}" if s.message else "")
        + (
            f" — {plural(s.held_by_jobs, 'request')} held by batch jobs of an earlier "
            "run, asked when the model is dispatched as batch again"
            if s.held_by_jobs
            else ""
        )
    )


def _reason_said(s: LaneStats, cap_said: str | None) -> str:
    """Why the lane halted, as its summary line says it: a lane the spend cap stopped says
    "spend cap reached" (`SPEND_CAP_REACHED`), what followed the cap's words kept (a batch
    lane's jobs not yet collected), and leaves the figures to the summary's spend line
    (`cap_said`, the cap's words at the dispatch's end, which the lane's reason quotes once
    the dispatch ends: `_cap_said_at_the_end`). A run the cap stopped said the same figures
    on each lane's line, on the spend line and again in its closing line. `lanes.json` and
    the audit keep the whole reason."""
    if cap_said and s.reason.startswith(cap_said) and s.message.endswith(s.reason):
        lead = s.message[: len(s.message) - len(s.reason)]  # its name, where it has one
        return f"{lead}{SPEND_CAP_REACHED}{s.reason[len(cap_said):]}"
    return s.message


def _batch_jobs_said(stats: LaneStats) -> str:
    """The batch jobs behind a lane's "done": all of them in a first run; on a resume, the
    answers earlier runs collected came through jobs this run never counted ("112/112 done
    through 3 batch jobs", where six carried them). Said in the same words either way: "(2
    batch jobs collected this run)" in one folder beside "through 3 batch jobs" in another
    read as two different things."""
    jobs = plural(stats.jobs_collected, "batch job")
    if not stats.already_accepted:
        return f" through {jobs}"
    if not stats.jobs_collected:
        return ""
    return f" through {jobs} this run, {stats.already_accepted:,} answered before"


@dataclass
class DispatchSummary:
    """What one dispatch did, per lane and in total."""

    lanes: dict[str, LaneStats]
    #: Plan rows whose model has no entry in `models` (not asked, not counted as planned).
    unconfigured: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    compactions: int = 0
    interrupted_recovered: int = 0
    #: Of those, batch lines being recorded from their job's results: not sent again.
    interrupted_batch: int = 0
    #: The running spend cap (`budget_usd`), None when the dispatch had none.
    spend: SpendCap | None = None
    #: Models whose spend the cap could not count (no prices in their config).
    unpriced: list[str] = field(default_factory=list)
    #: Why the run stopped when a write failed for want of space, or because the folder
    #: turned read-only (resumable), else None.
    disk_full: str | None = None
    #: `disk_full` is the folder turned read-only (`engine.durable.FolderReadOnly`), not a
    #: full disk: what resumes it is making it writable again, not freeing space.
    read_only: bool = False

    @property
    def spend_cap_reached(self) -> bool:
        return self.spend is not None and self.spend.reached

    @property
    def planned(self) -> int:
        return sum(s.planned for s in self.lanes.values())

    @property
    def already_accepted(self) -> int:
        return sum(s.already_accepted for s in self.lanes.values())

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.lanes.values())

    @property
    def unaccepted(self) -> int:
        return self.planned - self.already_accepted - self.accepted

    @property
    def held_by_jobs(self) -> dict[str, int]:
        """Per live model, the requests batch jobs of an earlier run hold (not asked now)."""
        return {
            name: s.held_by_jobs
            for name, s in self.lanes.items()
            if s.held_by_jobs  # set on live lanes only (`_Run._held`)
        }

    @property
    def attempts(self) -> int:
        return sum(s.attempts for s in self.lanes.values())

    @property
    def answer_budget_spent(self) -> int:
        """Unanswered requests whose answer-failure budget is spent: a resume asks them
        again only once the spec's `max_answer_failures` is raised."""
        return sum(s.retries.answer_budget_spent for s in self.lanes.values())

    @property
    def lost_to_damage(self) -> int:
        """Unanswered requests damaged batch results lost for good (`LaneStats.lost_to_damage`):
        no resume asks them again."""
        return sum(s.lost_to_damage for s in self.lanes.values())

    @property
    def unkept(self) -> int:
        """Replies that came back once the disk was full, not written (`LaneStats.unkept`)."""
        return sum(s.unkept for s in self.lanes.values())

    @property
    def retry_attempts(self) -> int:
        """Attempts of this dispatch that were not accepted (`engine.audit`'s definition)."""
        return sum(s.retries.total for s in self.lanes.values())

    @property
    def complete(self) -> bool:
        return self.unaccepted == 0

    def halted(self) -> dict[str, str]:
        """Lanes that ended early (stopped, paused, cancelled) and why."""
        return {
            name: f"{s.state.value}: {s.message}"
            for name, s in self.lanes.items()
            if s.state in (LaneState.STOPPED, LaneState.PAUSED, LaneState.CANCELLED)
        }

    def _kept(self) -> str:
        """What the refused write left: a folder turned read-only may have dropped its
        last unsaved writes (a tester's 147 answers), a full disk none."""
        return READ_ONLY_SAVED if self.read_only else "every answer written before it is kept"

    def lines(self) -> list[str]:
        """A few human lines: totals, then one per lane that did not simply finish."""
        out = [
            f"{plural(self.accepted, 'answer')} accepted in {self.elapsed_s:.1f}s "
            f"({self.already_accepted:,} already accepted, {self.unaccepted:,} still unanswered, "
            f"{plural(self.attempts, 'attempt')}, {plural(self.retry_attempts, 'retry attempt')})"
        ]
        spend = self.spend
        cap_said = spend.message() if spend is not None and spend.reached else None  # below
        out.extend(_lane_line(name, s, cap_said) for name, s in self.lanes.items())
        for name, rows in self.unconfigured.items():
            out.append(f"  {name}: {plural(rows, 'plan row')} skipped (model not configured)")
        if self.disk_full is not None:
            out.append(f"{self.disk_full}; {self._kept()}" + (
                f"; {plural(self.unkept, 'reply', 'replies')} to attempts sent before it could "
                f"not be written: the next run counts {'it' if self.unkept == 1 else 'them'} "
                "as interrupted and asks again"
                if self.unkept else ""
            ))
        if self.spend is not None:
            cap = self.spend
            out.append(
                cap.message()
                if cap.reached
                else f"spend: {dollars(cap.spent_usd)} of the {dollars(cap.budget_usd)} cap"
                + cap.committed_words()
            )
            if self.unpriced:
                out.append(
                    f"  not counted toward the cap (no prices in the spec): "
                    f"{', '.join(self.unpriced)}"
                )
        return out


#: A live lane or a batch lane: the dispatcher feeds and drives both the same way.
AnyLane = Lane | BatchLane


@dataclass
class _Reading:
    """How far a lane's feeder has read its stretch of the plan (`_feed`): the rows from
    `offset` (to `end`, None: the plan's end) are not read yet, nor those of them answered
    before counted in `LaneStats.already_accepted`; `done` once it read to the end."""

    offset: int = 0
    end: int | None = None
    done: bool = False


async def _feed(
    lane: AnyLane,
    plan_path: Path,
    run_dir: Path,
    ledger: Ledger,
    queue: asyncio.Queue[PlanItem | None],
    batch_rows: int,
    has_history: bool,
    held: frozenset[str],
    reading: _Reading,
    lost: frozenset[str] = frozenset(),
) -> None:
    """Stream the plan into one lane's queue, skipping accepted rows and rows `held` by a
    live batch job (`engine.batch_jobs`); `None` marks the end. `reading` starts at the
    stretch of the plan holding the lane's rows (`plan_spans`; without one, the whole plan),
    and says how far it was read when the lane stops. Rows `lost` to damaged batch results
    for good (`engine.scan.lost_to_damage`) are given up unasked, by a batch lane or a live
    one: each loss was billed, and a resume bought them a third time."""
    name = lane.config.name
    offset, end = reading.offset, reading.end
    try:
        while not lane.halted and (end is None or offset < end):
            height, mine, positions, ids = await asyncio.to_thread(
                read_pending, plan_path, offset, batch_rows, name, ledger, held
            )
            if height == 0:
                reading.done = True
                break
            lane.stats.already_accepted += mine - len(ids)
            reading.offset = offset + height  # counted, whether or not its rows are queued
            # Counted for the whole slice before any row is queued: a lane that halts part
            # of the way through it has given them up all the same.
            gone = lost.intersection(ids)
            _give_up_lost(lane.stats, len(gone))
            if ids:
                frame = await asyncio.to_thread(
                    read_rows, plan_path, offset, batch_rows, positions
                )
                prior: dict[str, int] = {}
                failed: dict[str, int] = {}
                if has_history:
                    prior = await asyncio.to_thread(attempt_counts, run_dir, ids)
                    failed = await asyncio.to_thread(
                        failure_counts, run_dir, ids, ANSWER_FAILURE_CAUSES
                    )
                for item in plan_items(frame, prior, failed):
                    if item.request_id in gone:
                        continue
                    await queue.put(item)
                    if lane.halted:
                        break
            offset += height
    except BaseException:
        # Reading failed or the lane is being torn down: workers may be gone, so make room
        # for the end marker by dropping queued items (they stay unaccepted for a resume).
        while True:
            try:
                queue.put_nowait(None)
                break
            except asyncio.QueueFull:
                queue.get_nowait()
        raise
    reading.done = reading.done or (end is not None and offset >= end)
    # Normal end: wait for room like any item, so nothing queued is ever dropped.
    await queue.put(None)


def _accepted_unread(
    plan_path: Path, ledger: Ledger, name: str, batch_rows: int, held: frozenset[str],
    reading: _Reading, lost: frozenset[str] = frozenset(),
) -> tuple[int, int]:
    """Of the rows of model `name` a feeder did not read (`reading`), those answered already
    and those unanswered `lost` for good, read as `_feed` reads them: only their ids, a
    slice at a time."""
    offset, end, accepted, gone = reading.offset, reading.end, 0, 0
    while end is None or offset < end:
        height, mine, _, ids = read_pending(plan_path, offset, batch_rows, name, ledger, held)
        if height == 0:
            break
        accepted += mine - len(ids)
        gone += len(lost.intersection(ids))
        offset += height
    return accepted, gone


def _give_up_lost(stats: LaneStats, gone: int) -> None:
    """Count `gone` unanswered requests lost for good to damaged batch results as given up
    (`engine.scan.lost_to_damage`)."""
    stats.gave_up += gone
    stats.lost_to_damage += gone


async def _run_lane(
    lane: AnyLane, plan_path: Path, run_dir: Path, ledger: Ledger, batch_rows: int,
    has_history: bool, held: frozenset[str] = frozenset(), span: tuple[int, int] | None = None,
    lost: frozenset[str] = frozenset(),
) -> None:
    queue: asyncio.Queue[PlanItem | None] = asyncio.Queue(maxsize=2 * lane.workers + 16)
    reading = _Reading(*span) if span is not None else _Reading()
    feeder = asyncio.create_task(
        _feed(lane, plan_path, run_dir, ledger, queue, batch_rows, has_history, held, reading,
              lost)
    )
    try:
        await lane.run(queue)
    finally:
        if not feeder.done():
            feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        if feeder.done() and not feeder.cancelled() and feeder.exception() is not None:
            raise feeder.exception()  # type: ignore[misc]
    if not reading.done and has_history:
        # The lane stopped before its feeder read its rows (a stop, the spend cap, a bad key):
        # the answers of earlier runs among the rest are counted too (a folder without any
        # has none to count: its stop is not held up by reading the plan through, 0.5-3 s at
        # the paper's scale). A Ctrl-C while the cap read the ledger, before any lane read a
        # row, said "0 already accepted" of a folder holding 6 of 10 answers, and "10 still
        # unanswered". A read that fails (the folder moved) leaves the count short, as before,
        # not the lane crashed: it is the summary's.
        # The requests lost for good among them are given up too (`_feed`).
        with contextlib.suppress(OSError, pl.exceptions.PolarsError):
            accepted, gone = await asyncio.to_thread(
                _accepted_unread, plan_path, ledger, lane.config.name, batch_rows, held,
                reading, lost,
            )
            lane.stats.already_accepted += accepted
            _give_up_lost(lane.stats, gone)


# --------------------------------------------------------------------------- compaction


class _Compactor:
    """Folds the journal into shards every `every_n` results or `every_s` seconds, in a
    thread of low priority (`engine.housekeeping`): nothing waits for a fold."""

    def __init__(
        self, ledger: Ledger, lanes: list[AnyLane], every_s: float, every_n: int, log: EngineLog
    ) -> None:
        self.ledger, self.lanes, self.every_s, self.every_n = ledger, lanes, every_s, every_n
        self.log = log
        self.count = 0

    async def run(self, done: asyncio.Event) -> None:
        last_results, last_time = 0, time.monotonic()
        thread = housekeeping_thread("dutchbook-compact")
        loop = asyncio.get_running_loop()
        try:
            while not done.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), timeout=min(0.2, self.every_s))
                results = sum(lane.results for lane in self.lanes)
                due = results - last_results >= self.every_n or (
                    results > last_results and time.monotonic() - last_time >= self.every_s
                )
                if due and not done.is_set():
                    t0 = time.perf_counter()
                    folded = await loop.run_in_executor(thread, self.ledger.compact)
                    self.count += 1
                    self.log.debug(
                        "compacted",
                        segments=folded,
                        ms=round((time.perf_counter() - t0) * 1000, 1),
                    )
                    last_results, last_time = results, time.monotonic()
        finally:
            # A fold still running when cancelled finishes on its own; the ledger's close
            # waits for it (its compaction lock), so nothing is left half done.
            thread.shutdown(wait=False)


async def _refresh(
    progress: ProgressSink | None,
    lane_file: LaneFileWriter,
    lanes: list[LaneStats],
    done: asyncio.Event,
    every_s: float = 0.25,
    write_every_s: float = 1.0,
) -> None:
    last_write = 0.0
    while not done.is_set():
        if progress is not None:
            progress.refresh()
        if time.monotonic() - last_write >= write_every_s:
            await asyncio.to_thread(lane_file.write, lanes)
            last_write = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=every_s)


async def _tell_stop(
    stop_event: asyncio.Event | None, lanes: list[AnyLane], done: asyncio.Event, log: EngineLog
) -> None:
    """Tell every lane when the run is asked to stop (`LaneControl.on_stop`), as it is
    asked: the lanes' table, progress lines and `logs/lanes.json` say it from then on. One
    lane's failure to take it is logged, and the lanes after it are still told."""
    if stop_event is None:
        return
    waits = [asyncio.ensure_future(stop_event.wait()), asyncio.ensure_future(done.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    if stop_event.is_set() and not done.is_set():
        for lane in lanes:
            try:
                lane.on_stop()
            except Exception as exc:  # the lane still stops: its workers look at `halted`
                log.error("stop_not_told", echo=False, model=lane.config.name, error=repr(exc))


def _secrets_of(
    extra: Iterable[str], adapters: Mapping[str, Adapter],
    clients: Mapping[str, BatchClient] | None = None,
) -> Callable[[], list[str | Secret]]:
    """What the log masks at each event: `extra`, and the credentials each adapter and batch
    client declares now (`secrets()`: an OAuth token or AWS session token issued mid-run
    included)."""
    fixed: list[str | Secret] = list(extra)
    holders: list[Adapter | BatchClient] = [*adapters.values(), *(clients or {}).values()]

    def current() -> list[str | Secret]:
        return fixed + [s for holder in holders for s in holder.secrets()]

    return current


def _as_sink(progress: ProgressSink | Console | bool | None) -> ProgressSink | None:
    """`dispatch(progress=...)` takes a sink, a rich Console to draw on, True, or None."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return LiveProgress()
    if isinstance(progress, Console):
        return LiveProgress(progress)
    return progress


# --------------------------------------------------------------------------- entry point

#: The youngest generation's collection threshold while lanes run (Python's default: 700).
DISPATCH_GC_THRESHOLD = 20_000


@contextlib.contextmanager
def _quiet_gc() -> Iterator[None]:
    """Less cyclic garbage collection while lanes run; the settings are restored after.

    With hundreds of requests in flight, every young-generation collection (each 700
    container allocations) found their state alive and promoted it, and the older
    collections then walked it again, with everything the process held before dispatch
    (imports, the spec, planning's objects): about 8% of the dispatch's CPU time (15,500
    family queries at concurrency 256, measured). So what exists when dispatch starts is
    frozen (never walked; still freed by reference counting, and a cycle among it is
    collected once unfrozen) and the young generation collected every 20,000 allocations.
    """
    _gc_users.append(gc.get_threshold())
    if len(_gc_users) == 1:  # dispatches overlapping in one process: the first sets, the
        gc.freeze()  # last one out restores
        gc.set_threshold(max(_gc_users[0][0], DISPATCH_GC_THRESHOLD), *_gc_users[0][1:])
    try:
        yield
    finally:
        thresholds = _gc_users.pop()
        if not _gc_users:
            gc.set_threshold(*thresholds)
            gc.unfreeze()


#: The collector's settings when each running dispatch entered `_quiet_gc`.
_gc_users: list[tuple[int, int, int]] = []


def _connections(
    models: Mapping[str, ModelConfig], counts: Mapping[str, int], log: EngineLog
) -> int:
    """The connection pool's size: 0 (unbounded; each lane's concurrency bounds it) unless the
    lanes together ask for more connections than the open-file limit allows
    (`engine.open_files`), which is first raised as far as the system allows."""
    wanted = sum(
        config.concurrency or DEFAULT_CONCURRENCY
        for name, config in models.items()
        if counts.get(name, 0) > 0
    )
    limit = raise_open_files_limit()
    cap = connection_cap(wanted, limit)
    if cap is None:
        return 0
    log.warning(
        "connections_capped", concurrency=wanted, connections=cap, open_files_limit=limit,
        say=f"the models' concurrency asks {plural(wanted, 'request')} at once, but the "
        f"open-file limit ({limit:,}) leaves room for {plural(cap, 'connection')}: requests "
        "beyond wait for a "
        "connection; raise `ulimit -n` to send them all at once",
    )  # fmt: skip
    return cap


def interrupted_sentence(attempts: int, batch: int) -> str:
    """The resume's line for `attempts` recorded `interrupted`, `batch` of them batch lines.

    A live attempt's request is asked again. A batch line was not sent alone: it was being
    recorded from its job's results when the run stopped, and the job, not yet collected, is
    still at the provider, so its answer is collected from there and its request is not sent
    again (a resume after a kill mid-collection used to say it was asked again).
    """
    live = attempts - batch
    stopped = "when an earlier run of this folder stopped"
    if not batch:
        if live == 1:
            return (f"1 attempt was in flight {stopped} without its reply: it is recorded as "
                    "interrupted, and its request is asked again")
        return (f"{live:,} attempts were in flight {stopped} without their replies: they are "
                "recorded as interrupted, and their requests are asked again")
    one = batch == 1
    collected = (f"collected from {'its batch job' if one else 'their batch jobs'}, still at "
                 f"the provider, without sending {'its request' if one else 'the requests'} "
                 "again")
    if not live:
        if one:
            return (f"1 batch line was being recorded from its job's results {stopped}: it is "
                    f"recorded as interrupted, and its answer is {collected}")
        return (f"{batch:,} batch lines were being recorded from their jobs' results "
                f"{stopped}: they are recorded as interrupted, and their answers are "
                f"{collected}")
    asked = ("the 1 live attempt's request is asked again" if live == 1
             else f"the {live:,} live attempts' requests are asked again")
    answers = "the 1 batch line's answer is" if one else f"the {batch:,} batch lines' answers are"
    return (f"{attempts:,} attempts were in flight {stopped}: they are recorded as interrupted; "
            f"{asked}, and {answers} {collected}")


async def dispatch(
    plan_path: Path | str,
    run_dir: Path | str,
    models: Mapping[str, ModelConfig],
    adapters: Mapping[str, Adapter],
    parser: str = "strict",
    progress: ProgressSink | Console | bool | None = None,
    *,
    max_attempts: int = 6,
    max_answer_failures: int = 3,
    stop_event: asyncio.Event | None = None,
    policy: RetryPolicy | None = None,
    batch_rows: int = 10_000,
    compact_every_s: float = 10.0,
    compact_every_n: int = 5_000,
    log_console: IO[str] | Literal["stderr"] | None = "stderr",
    secrets: Iterable[str] = (),
    fsync: bool = False,
    budget_usd: float | None = None,
    outage: OutagePolicy | None = None,
    batch_clients: Mapping[str, BatchClient] | None = None,
    batch_poll_s: float | None = None,
    batch_abandon: frozenset[str] = frozenset(),
    batch_simulated_here: frozenset[str] = frozenset(),
    on_ledger_open: Callable[[], None] | None = None,
) -> DispatchSummary:
    """Ask every unaccepted plan row of the configured models; see the module docstring.

    `models` and `adapters` are keyed by model name (the plan's `model` column). Rows of
    models not in `models` are left alone and reported as unconfigured. `stop_event`, when
    set, stops every lane from starting new attempts; attempts in flight are finished and
    recorded. `budget_usd` is a running spend cap over the reported usage of priced models,
    this run's and the ledger's earlier attempts alike (`engine.spend`): once the next attempt
    could pass it, no lane starts another. Models with `dispatch = "batch"` are asked through
    jobs (`engine.batch_lane.BatchLane`) with the client of `batch_clients` of their name,
    polled every `batch_poll_s` (default `engine.batch_lane.poll_interval`); they need an
    adapter only to fall back live. `batch_abandon` names batch jobs (ids or keys) to give up if
    their provider answers 404 for them (`dutchbook run --abandon-batch-jobs`);
    `batch_simulated_here` names batch models whose provider is a simulator this process
    started, whose jobs an earlier process recorded ended with that process's simulator
    (given up at their 404 unasked, `BatchLane.simulated_here`). `on_ledger_open` is called
    once the ledger is open, a died run's unresolved attempts recorded as interrupted
    (`runs.pipeline.FolderHold`: before then a run leaves a died run's pid file). Raises
    `engine.ledger.LedgerBusy` if another process is writing this run. The journal is folded
    into shards every `compact_every_n` results or `compact_every_s` seconds: a fold holds its
    segment's rows as Python objects for a moment, and the resident memory that leaves behind
    grows with the segment (a fifth of the paper's sweep peaked at 503 MB folding every 20,000
    or 30 s, 432 MB every 5,000 or 10 s, no slower). (Long only by its keyword options; the work
    is in `_Run`.)
    """
    plan_path, run_dir = Path(plan_path), Path(run_dir)
    policy = policy or RetryPolicy(
        max_attempts=max_attempts, max_answer_failures=min(max_answer_failures, max_attempts)
    )
    clients = dict(batch_clients or {})
    _check_lanes(models, adapters, clients)
    t0 = time.monotonic()
    console = sys.stderr if log_console == "stderr" else log_console  # bound at call time
    log = EngineLog(run_dir, console=console, secrets=_secrets_of(secrets, adapters, clients))
    counts = plan_counts(plan_path)
    ledger = Ledger.open(run_dir, fsync=fsync)
    if on_ledger_open is not None:
        on_ledger_open()
    summary = DispatchSummary(
        lanes={}, unconfigured={str(name): n for name, n in counts.items() if name not in models}
    )
    summary.interrupted_recovered = ledger.interrupted_recovered
    summary.interrupted_batch = ledger.interrupted_batch
    if ledger.interrupted_recovered:
        n, batch = ledger.interrupted_recovered, ledger.interrupted_batch
        log.warning("interrupted_recovered", attempts=n, batch_lines=batch,
                    say=interrupted_sentence(n, batch))
    run = _Run(
        plan_path, run_dir, ledger, log, _as_sink(progress), batch_rows,
        has_history=any((run_dir / "attempts").glob("*.parquet")),
        compact_every=(compact_every_s, compact_every_n), spans=plan_spans(plan_path),
        stop_event=stop_event,
    )
    try:
        spend = await _spend_cap(run, models, budget_usd, summary)
        with _quiet_gc():
            connections = _connections(models, counts, log)
            async with HttpClient(max_connections=connections) as http:

                def live(name: str) -> Lane:
                    return Lane(
                        models[name], adapters[name], ledger, http, log, parser=parser,
                        policy=policy, stop_event=stop_event, spend=spend, outage=outage,
                        run_dir=run_dir,
                    )

                records = JobRecords(run_dir)
                lanes: list[AnyLane] = [
                    BatchLane(
                        models[name], clients[name], ledger, http, log, run_dir=run_dir,
                        plan_path=plan_path, records=records, parser=parser, policy=policy,
                        stop_event=stop_event, poll_s=batch_poll_s, spend=spend,
                        abandon=batch_abandon, simulated_here=name in batch_simulated_here,
                        fallback=live(name) if models[name].batch_fallback_live else None,
                    )
                    if models[name].dispatch == "batch"
                    else live(name)
                    for name in models
                    if counts.get(name, 0) > 0
                ]
                summary.compactions = await run.drive(lanes, counts, summary, parser)
    finally:
        run.close(summary, t0)
    return summary


def _check_lanes(
    models: Mapping[str, ModelConfig], adapters: Mapping[str, Adapter],
    clients: Mapping[str, BatchClient],
) -> None:
    """Every model has what its lane needs: an adapter to ask live (a batch model only when
    it may fall back live), a batch client to ask in jobs."""
    for name, config in models.items():
        if config.dispatch not in ("live", "batch"):
            raise ValueError(f"{name}: dispatch must be 'live' or 'batch', not {config.dispatch!r}")
    batch = {n for n, c in models.items() if c.dispatch == "batch"}
    need_adapter = [
        n for n, c in models.items() if n not in batch or c.batch_fallback_live
    ]
    missing = [name for name in need_adapter if name not in adapters]
    if missing:
        raise ValueError(f"no adapter for model(s): {', '.join(sorted(missing))}")
    no_client = sorted(batch - set(clients))
    if no_client:
        raise ValueError(f"no batch client for model(s): {', '.join(no_client)}")


@dataclass
class _Run:
    """What one dispatch's lanes share, and the helpers that run beside them."""

    plan_path: Path
    run_dir: Path
    ledger: Ledger
    log: EngineLog
    sink: ProgressSink | None
    batch_rows: int
    has_history: bool
    compact_every: tuple[float, int]
    #: Per model, the stretch of the plan its lane reads (`engine.plan.plan_spans`).
    spans: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: Set when the run is asked to stop (`dispatch`'s `stop_event`).
    stop_event: asyncio.Event | None = None
    #: `logs/lanes.json`, each second and at the end.
    lane_file: LaneFileWriter = field(init=False)

    def __post_init__(self) -> None:
        self.lane_file = LaneFileWriter(self.run_dir, self.log)

    async def drive(
        self, lanes: list[AnyLane], counts: Mapping[str, int], summary: DispatchSummary,
        parser: str,
    ) -> int:
        """Run every lane to its end beside compaction and the progress refresh; a lane that
        crashed is marked stopped with the error. Returns how many compactions ran."""
        held = await asyncio.to_thread(self._held, lanes)
        # Read from the damaged attempts alone (never a frame of the plan's ids), and only
        # where an earlier run left attempts.
        lost = await asyncio.to_thread(lost_to_damage, self.run_dir) if self.has_history else (
            frozenset()
        )
        for lane in lanes:
            lane.stats.planned = counts[lane.config.name]
            summary.lanes[lane.config.name] = lane.stats
        self.log.info(
            "dispatch_started",
            plan=str(self.plan_path),
            lanes=[ln.config.name for ln in lanes],
            planned=summary.planned,
            parser=parser,
        )
        stats = [lane.stats for lane in lanes]
        if self.sink is not None:  # before the holds' reading: a paper-scale folder's takes seconds
            self.sink.start(stats)
        await self._hold_created(lanes)
        done = asyncio.Event()
        compactor = _Compactor(self.ledger, lanes, *self.compact_every, self.log)
        helpers = [
            asyncio.create_task(compactor.run(done), name="compaction"),
            asyncio.create_task(_refresh(self.sink, self.lane_file, stats, done), name="refresh"),
            asyncio.create_task(
                _tell_stop(self.stop_event, lanes, done, self.log), name="tell_stop"
            ),
        ]
        try:
            results = await asyncio.gather(
                *(
                    _run_lane(
                        lane, self.plan_path, self.run_dir, self.ledger, self.batch_rows,
                        self.has_history, held.get(lane.config.name, frozenset()),
                        self.spans.get(lane.config.name), lost,
                    )
                    for lane in lanes
                ),
                return_exceptions=True,
            )
        finally:
            done.set()
            await asyncio.gather(*helpers, return_exceptions=True)
            self._helpers_failed(helpers)
            if self.sink is not None:
                self.sink.refresh()
                self.sink.stop()
        for lane, outcome in zip(lanes, results, strict=True):
            if isinstance(outcome, BaseException):
                lane.stats.state = LaneState.STOPPED
                lane.stats.say(
                    self.log.redact(f"internal error: {type(outcome).__name__}: {outcome}")
                )
                # A run folder moved mid-run fails every lane's next journal line: the caller
                # says that in its one line (`runs.folder_moved`), so these stay in the log.
                self.log.error("lane_crashed", model=lane.config.name, error=repr(outcome),
                               echo=self.run_dir.is_dir())  # fmt: skip
        return compactor.count

    def _helpers_failed(self, helpers: list[asyncio.Task[None]]) -> None:
        """Log what `drive`'s helpers (compaction, `logs/lanes.json`, telling the lanes of a
        stop) ended by raising: the dispatch goes on without them, but their failure was
        swallowed by `gather` and left nothing to trace."""
        for task in helpers:
            if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
                self.log.error("helper_failed", echo=False, helper=task.get_name(),
                               error=repr(exc))  # fmt: skip

    async def _hold_created(self, lanes: list[AnyLane]) -> None:
        """Under a spend cap, the batch jobs earlier runs created hold their worst case before
        any lane reserves: they run and bill whatever this run decides. A lane whose reading
        failed tries again when it runs, and crashes alone, as it did before. Those of a model
        asked live now (its `dispatch` switched on a resume) stay taken for the whole dispatch
        (`created_jobs_worst`): a tester's resume spent their room live ($0.0147 of $0.0200),
        and collected later they brought the folder to $0.0294."""
        try:
            await asyncio.gather(
                *(ln.hold_created() for ln in lanes if isinstance(ln, BatchLane)),
                return_exceptions=True,
            )
            live = [ln for ln in lanes if not isinstance(ln, BatchLane) and ln.spend is not None]
            jobs = await asyncio.to_thread(fold_jobs, self.run_dir) if live else {}
            for lane in live:  # a batch model asked live now: nothing collects its jobs
                assert lane.spend is not None
                worst = await asyncio.to_thread(
                    created_jobs_worst, jobs, self.plan_path, lane.config
                )
                if worst:
                    lane.spend.commit(worst, held=False)
        except BaseException:  # cancelled (a second Ctrl-C): the display ends as `drive`'s does
            if self.sink is not None:
                self.sink.stop()
            raise

    def _held(self, lanes: list[AnyLane]) -> dict[str, frozenset[str]]:
        """Per model, the requests a batch job not yet collected holds: never asked by the
        feeder (a model switched from batch to live on resume leaves them to that job). A
        live lane counts those already answered (a kill before the job's "collected" line)
        as accepted before, and the others as held (`LaneStats.held_by_jobs`): it said "8
        requests held ... asked when dispatched as batch again" of 8 answered ones."""
        jobs = fold_jobs(self.run_dir)
        held = {ln.config.name: frozenset(held_ids(jobs, ln.config.name)) for ln in lanes}
        for lane in lanes:
            ids = held[lane.config.name]
            if not ids or not isinstance(lane, Lane):
                continue
            answered = int(self.ledger.accepted_series(pl.Series(sorted(ids))).sum())
            lane.stats.already_accepted += answered
            lane.stats.held_by_jobs = len(ids) - answered
            if lane.stats.held_by_jobs:
                self.log.warning(
                    "held_by_batch_jobs", model=lane.config.name,
                    requests=lane.stats.held_by_jobs,
                    hint="asked when the model is dispatched as batch again",
                )  # fmt: skip
        return held

    def close(self, summary: DispatchSummary, t0: float) -> None:
        """Close the ledger, write the lanes' last states, log the summary, close the log."""
        self.ledger.close()
        if self.ledger.disk_full is not None:
            summary.disk_full = str(self.ledger.disk_full)
            summary.read_only = isinstance(self.ledger.disk_full, FolderReadOnly)
            # The summary carries it, and the caller says it (the CLI: one line, exit 6).
            self.log.error("disk_full", echo=False, detail=summary.disk_full)
        _cap_said_at_the_end(summary)
        self.lane_file.write(list(summary.lanes.values()))
        summary.elapsed_s = time.monotonic() - t0
        for line in summary.lines():
            self.log.info("summary", line=line)
        for name, why in summary.halted().items():
            if summary.lanes[name].state is LaneState.CANCELLED:  # a stopped or paused lane
                # said why when it stopped (`lane_stopped`, `lane_paused`): not twice. Kept
                # off the console: the caller asked for it (a signal, the spend cap) and says
                # so in its own line, and the summary's lane lines say it again; a Ctrl-C of
                # a 15-model sweep printed 15 warnings before them.
                self.log.warning("lane_halted", echo=False, model=name, reason=why)
        self.log.close()


def _cap_said_at_the_end(summary: DispatchSummary) -> None:
    """Every lane the spend cap stopped says the cap as it is at the dispatch's end, as the
    spend line does (`SpendCap.message`), in the summary and in `lanes.json` (`status`, the
    audit), what followed them kept (a batch lane's jobs not yet collected): each said them
    as they stood when it stopped (`LaneStats.cap_words`), and a lane stopped first quoted
    less than the spend the run ended with."""
    if summary.spend is None:
        return
    for s in summary.lanes.values():
        if s.cap_words and s.reason.startswith(s.cap_words) and s.message.endswith(s.reason):
            lead = s.message[: len(s.message) - len(s.reason)]  # its name, where it has one
            s.say(summary.spend.message() + s.reason[len(s.cap_words) :], lead)


async def _spend_cap(
    run: _Run, models: Mapping[str, ModelConfig], budget_usd: float | None,
    summary: DispatchSummary,
) -> SpendCap | None:
    """The running spend cap, counting what the ledger's earlier attempts already spent."""
    if budget_usd is None:
        return None
    before = await asyncio.to_thread(recorded_spend, run.run_dir, models)
    spend = summary.spend = SpendCap(budget_usd, before)
    summary.unpriced = unpriced(models.values())
    run.log.info("spend_cap", budget_usd=budget_usd, spent_before_usd=round(before, 6))
    if summary.unpriced:
        # Kept off the console: the summary's "not counted toward the cap" line says it, and
        # the raw event before it ("spend not counted: models a and b") said it twice.
        run.log.warning("spend_not_counted", echo=False, models=summary.unpriced)
    return spend
