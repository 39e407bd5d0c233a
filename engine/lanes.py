"""One model's lane: its pacing, its retries, its ledger writes, its fate.

Each model gets a lane so that one slow, rate-limited or misconfigured provider never holds
up another: lanes share only the event loop, the HTTP session and the ledger. Inside a lane a
pool of workers takes plan items from the lane's own queue; every attempt waits for the
lane's hold (Retry-After, rate-limit resets), its adaptive concurrency cap, its request bucket
and its token bucket, is journalled before it is sent and after it returns, and is retried by
the policy. A lane ends when its queue is drained, or early: `stopped` after a streak of
permanent failures (bad key, unknown model, rejected parameter) and `paused` when the
provider says a quota is spent and not when it returns (one that says so within
`RetryPolicy.max_quota_wait_s` is held out). Either way the other lanes carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from engine.batch_waits import JobWait, only_waiting, waiting_text
from engine.concurrency import AdaptiveCap
from engine.console_lines import duration, lane_state_said, plural
from engine.durable import DiskFull
from engine.http import BrokenReply, HttpClient
from engine.lane_counts import GAVE_UP_KEYS, time_left_s
from engine.limits import Hold, TokenBucket, estimate_tokens, whole_per_minute
from engine.logs import SAY, EngineLog
from engine.outage import Outage, OutagePolicy, append_pause
from engine.plan import PlanItem
from engine.records import AttemptRecord, ResponseRecord
from engine.retry import (
    DUPLICATE,
    PERMANENT,
    AnswerRetry,
    RetryPolicy,
    RetryTally,
    charges_answer_budget,
    gave_up_detail,
)
from engine.settle import Sent, settle
from engine.spend import SpendCap, prices_of, worst_case_cost
from providers.base import Adapter
from providers.google_auth_tokens import TokenRefreshError
from providers.types import (
    MAX_CONCURRENCY,
    ChatRequest,
    Completion,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
    RateLimitInfo,
)

#: Concurrency when the spec gives none: polite to a real provider, plenty for a simulator.
DEFAULT_CONCURRENCY = 8
#: A lane's message while its workers wait for room in the spend cap that others hold.
WAITING_FOR_ROOM = (
    "waiting for room in the spend cap, held by attempts in flight or batch jobs not yet "
    "collected"
)
#: Threads per lane for adapters whose `build` may block. They mostly queue on the adapter's
#: own refresh lock, so a few suffice; a lane's own pool means a stuck token endpoint can
#: never take the threads other lanes (or plan reading and compaction) need.
BUILD_THREADS = 4
#: Tracebacks of an adapter's exceptions logged per lane and exception type (`Lane._send`).
TRACEBACKS_LOGGED = 3


def builds_may_block(adapter: Adapter) -> bool:
    """Whether `adapter.build` may block (token refresh, credential-chain lookup).

    Declared by the adapter (`providers.base.Adapter.may_block`); threading every build
    would cost the fast bearer-key providers throughput for nothing (see `bench.dispatch`).
    """
    return adapter.may_block


class _BuildFailed(Exception):
    """A request could not be built; `retryable` says whether to try again like a
    connection error or stop the lane."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class _Regate:
    """`Lane._attempt`'s answer when the lane went down while the attempt queued for a slot:
    nothing was sent, and the attempt goes back to the outage gate (only probes pass)."""


_REGATE = _Regate()


def _build_failed(exc: Exception) -> _BuildFailed:
    """Why a request could not be built, and whether to try again."""
    if isinstance(exc, TokenRefreshError):  # its message is written to carry no secret
        return _BuildFailed(f"credential refresh failed: {exc}", retryable=exc.retryable)
    # A credential or option error: permanent for the lane.
    return _BuildFailed(f"cannot build a request: {type(exc).__name__}: {exc}", retryable=False)


class LedgerWriter(Protocol):
    """What a lane needs from `engine.ledger.Ledger` (a protocol so tests can count calls)."""

    def record_dispatch(
        self, request_id: str, attempt: int, model: str, provider: str, started_at: datetime,
        *, batch_job: str | None = None,
    ) -> None: ...

    def record_result(self, attempt: AttemptRecord, response: ResponseRecord | None) -> bool: ...

    #: Set once a write failed for want of space (`engine.durable.DiskFull`): stop starting.
    disk_full: DiskFull | None


class LaneState(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"
    STOPPED = "stopped"  # permanent failures: nothing more will be sent this run
    PAUSED = "paused"  # quota exhausted: resume later
    PROBING = "probing"  # provider down: the lane waits, one probe at a time (engine.outage)
    CANCELLED = "cancelled"  # the caller asked the run to stop


@dataclass
class LaneStats:
    """Live counters of one lane, read by the progress display, status and the summary."""

    model: str
    provider: str
    planned: int = 0  # rows of this model in the plan
    already_accepted: int = 0  # accepted before this run started
    accepted: int = 0  # accepted in this run
    attempts: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    retries: RetryTally = field(default_factory=RetryTally)
    #: Requests left unaccepted after a permanent failure, a stopped answer or a spent quota,
    #: and those lost for good to damaged batch results (`lanes.json`'s `gave_up_permanent`).
    gave_up: int = 0
    #: Of `gave_up`: requests damaged batch results lost the line of often enough that no
    #: run asks them again (`engine.retry.lost_for_good`), this run's and earlier runs'.
    lost_to_damage: int = 0
    in_flight: int = 0
    #: Replies that came back once the disk was full, too late to be written: sent, yet not
    #: among `attempts`; the next run reads them as interrupted and asks them again.
    unkept: int = 0
    cap: int = 0
    state: LaneState = LaneState.WAITING
    #: What the terminal and `status` show about the lane's state (set by `say`).
    message: str = ""
    #: `message` without what it may begin with (the lane's name, "stopped"): why, for the audit.
    reason: str = ""
    started: float = 0.0
    finished: float = 0.0
    #: How the lane asks: "live" (one request per query) or "batch" (jobs; then `in_flight`
    #: counts lines in jobs not yet collected, `cap` the jobs it may keep in flight, and
    #: `jobs_in_flight` the jobs it has).
    dispatch: str = "live"
    jobs_in_flight: int = 0
    jobs_collected: int = 0  # batch jobs whose lines this run journalled
    #: A batch lane's created jobs not yet collected, by key, as the provider last said each
    #: and when it was polled (`engine.batch_waits`): the console says them while the lane
    #: only waits on them (`batch_waiting`), `lanes.json` when each was polled.
    batch_waits: dict[str, JobWait] = field(default_factory=dict)
    pauses: int = 0  # times the provider was down and the lane paused to probe
    paused_s: float = 0.0  # seconds spent paused (ended pauses)
    #: `time.monotonic()` when the pause going on began (0: the provider is not down).
    paused_since: float = 0.0
    #: `time.monotonic()` until which the provider asked the lane to wait (`Hold`), and what
    #: asked it ("Retry-After", "a rate-limit reset", "a spent quota"): a hold of minutes is
    #: shown, not hidden behind "running" and a falling rate.
    held_until: float = 0.0
    held_by: str = ""
    #: `time.monotonic()` when the last hold began (`held`), and the seconds the holds before
    #: it lasted: the time the hold going on has lasted is left out of the rate (`eta_s`
    #: adds what is left of it); ended ones are in it, the lane's pace.
    held_since: float = 0.0
    held_before_s: float = 0.0
    #: Requests a batch job of an earlier run holds, not asked by this live lane (the model
    #: was switched from batch to live on resume): asked when it is dispatched as batch again.
    held_by_jobs: int = 0
    #: `clock()` by which a stop (a signal) has had every attempt this lane had in flight
    #: back or timed out (`LaneControl.on_stop`); None while no stop was asked.
    stop_wait_until: float | None = None
    #: Whether that wait is cut short of `timeout_s` (the provider has not answered yet:
    #: `OutagePolicy.unanswered_stop_wait_s`), and the attempts it then cut.
    stop_wait_cut: bool = False
    cut_at_stop: int = 0
    #: The spend cap's words (`SpendCap.message`) as they stood when the cap stopped the lane
    #: (its `reason` begins with them): the dispatch says them again as they are at its end.
    cap_words: str = ""
    #: The lane's own limits (`ModelConfig.rpm`, `tpm`; None for none, and for a batch lane,
    #: which they do not pace), and what its attempts were charged against `tpm` (the tokens
    #: each reported, else its estimate) over how many: the most it may ask a second
    #: (`limit_rate_per_s`), which its time left is never counted faster than.
    rpm: float | None = None
    tpm: float | None = None
    tokens_booked: float = 0.0
    attempts_booked: int = 0
    #: What the lane's times are read on (`time.monotonic`; a test's own clock).
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @property
    def done(self) -> int:
        return self.already_accepted + self.accepted

    @property
    def given_up(self) -> int:
        """Requests this run gave up: after `max_attempts`, with their answer-failure budget
        spent (asked by no resume until it is raised), or on a permanent failure."""
        return sum(self.gave_up_counts.values())

    @property
    def gave_up_counts(self) -> dict[str, int]:
        """`given_up` by why, keyed as `lanes.json` keeps them (`GAVE_UP_KEYS`)."""
        counts = (self.retries.exhausted, self.retries.answer_budget_spent, self.gave_up)
        return dict(zip(GAVE_UP_KEYS, counts, strict=True))

    @property
    def state_said(self) -> str:
        """The state as a person reads it (`engine.console_lines.lane_state_said`): a lane
        that gave requests up is not said "done"."""
        return lane_state_said(self.state.value, self.done, self.planned, self.given_up)

    @property
    def stop_wait_s(self) -> float | None:
        """Seconds a stop may still wait for the lane's attempts in flight; None when no stop
        waits on it (none asked, or nothing of this lane in flight)."""
        if self.stop_wait_until is None or not self.in_flight:
            return None
        return max(self.stop_wait_until - self.clock(), 0.0)

    def batch_waiting(self, now: datetime | None = None) -> str:
        """While a running batch lane does nothing but wait on its jobs at the provider (and
        says nothing else), what it waits on (`engine.batch_waits.waiting_text`); else "".
        For hours the console read "running", "0.0/s" and "ETA ?", and nothing else."""
        if self.state is not LaneState.RUNNING or self.message:
            return ""
        if not only_waiting(self.batch_waits, self.jobs_in_flight):
            return ""
        return waiting_text(self.batch_waits.values(), now or datetime.now(UTC))

    def say(self, reason: str, lead: str = "") -> None:
        """Set why the lane is in its state: `message` is `reason` after `lead` (the lane's
        name, where the message is read without it, as on the terminal)."""
        self.reason, self.message = reason, lead + reason

    @property
    def elapsed_s(self) -> float:
        if not self.started:
            return 0.0
        return (self.finished or self.clock()) - self.started

    @property
    def paused_now_s(self) -> float:
        """Seconds the pause going on has lasted (0 when the provider is not down)."""
        if not self.paused_since:
            return 0.0
        return max((self.finished or self.clock()) - self.paused_since, 0.0)

    def held(self, until: float, by: str) -> None:
        """The provider holds the lane until `until` (on `clock`), as `by` asked: a hold that
        begins now, or the one going on made longer (which began when it began)."""
        now = self.clock()
        if self.held_until <= now:  # the last one ended: its time is the lane's held time
            self.held_before_s = self.held_total_s
            self.held_since = now
        self.held_until, self.held_by = until, by

    @property
    def held_now_s(self) -> float:
        """Seconds left of the provider's hold on the lane (0 when there is none)."""
        if not self.held_until or self.finished:
            return 0.0
        return max(self.held_until - self.clock(), 0.0)

    @property
    def held_so_far_s(self) -> float:
        """Seconds the hold going on has lasted (0 when there is none, or the lane ended)."""
        if not self.held_since or self.finished or self.held_until <= (now := self.clock()):
            return 0.0
        return max(now - self.held_since, 0.0)

    @property
    def held_total_s(self) -> float:
        """Seconds the provider's holds have lasted, ended ones and the one going on."""
        if not self.held_since:
            return self.held_before_s
        end = min(self.finished or self.clock(), self.held_until)
        return self.held_before_s + max(end - self.held_since, 0.0)

    @property
    def rate_per_s(self) -> float:
        """Answers this run accepted a second of the wall time they took while the provider
        was up: a three-hour outage would otherwise halve the rate, and double the time left,
        after the lane resumed. The provider's holds that ended are in it: a lane held often
        (a rate limit's resets, answers still coming back from the attempts in flight) said
        666/s where it went at 30/s, its holds left out (a tester's `flaky` rehearsal: "ETA
        0:07" for 219 s), as the pace such holds keep is the lane's. The hold going on is not
        (`held_so_far_s`): `eta_s` adds what is left of it, and with the time it had lasted in
        the rate as well it was counted twice (a lane 100 s in and half done said 200 s left
        all through a 100 s Retry-After). Once a lone long hold ends, the time left counts it
        as the lane's pace until later answers outweigh it: too long, not 20 times too short."""
        working = self.elapsed_s - self.paused_s - self.paused_now_s - self.held_so_far_s
        return self.accepted / working if working > 0 else 0.0

    def book_tokens(self, tokens: float) -> None:
        """Count one attempt's tokens against `tpm` (`limit_rate_per_s`)."""
        self.tokens_booked += tokens
        self.attempts_booked += 1

    @property
    def limit_rate_per_s(self) -> float | None:
        """Requests a second the lane's own limits allow at most: `rpm`'s, and `tpm`'s at the
        tokens its attempts took on average (as `plan`'s "needs at least" counts by them);
        None with neither (nor `tpm` alone before an attempt was counted)."""
        rates = [whole_per_minute(self.rpm) / 60.0] if self.rpm else []  # 10 of rpm 10.5
        if self.tpm and self.attempts_booked and self.tokens_booked > 0:
            rates.append(self.tpm / 60.0 * self.attempts_booked / self.tokens_booked)
        return min(rates) if rates else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the provider's hold, then the rest at `rate_per_s`, never faster than
        the lane's limits allow (`limit_rate_per_s`); 0 once done, None when not known
        (`engine.lane_counts.time_left_s`, which `status` counts by too)."""
        return time_left_s(
            self.state.value, self.planned - self.done, self.rate_per_s, self.held_now_s,
            self.limit_rate_per_s,
        )


#: A lane's reason when a signal stopped it (`LaneState.CANCELLED` is a spend cap's too).
STOP_REQUESTED = "stop requested"
#: The states in which a lane starts nothing more.
HALTED = frozenset({LaneState.STOPPED, LaneState.PAUSED, LaneState.CANCELLED})


class LaneControl:
    """When a lane starts nothing more, and how it stops: what live lanes (`Lane`) and batch
    lanes (`engine.batch_lane.BatchLane`) share. A subclass sets these attributes and names
    its provider (`provider_name`)."""

    config: ModelConfig
    stats: LaneStats
    log: EngineLog
    ledger: LedgerWriter
    stop_event: asyncio.Event | None
    spend: SpendCap | None

    @property
    def provider_name(self) -> str:
        raise NotImplementedError

    def _halts_at_the_cap(self) -> bool:
        """Whether the spend cap, once reached, halts the lane at once (a live lane: it stops
        starting attempts; a batch lane first collects the jobs it has out)."""
        return True

    def _cancel_at_the_cap(self) -> None:
        """The lane ends cancelled by the spend cap, saying why (`SpendCap.message`, kept in
        `LaneStats.cap_words`: the dispatch says them again as they are at its end)."""
        assert self.spend is not None
        self.stats.state = LaneState.CANCELLED
        self.stats.cap_words = self.spend.message()
        self.stats.say(self.stats.cap_words)

    @property
    def halted(self) -> bool:
        if self.stats.state in HALTED:
            return True
        if self.stop_event is not None and self.stop_event.is_set():
            self.stats.state = LaneState.CANCELLED
            self.stats.say(STOP_REQUESTED)
            return True
        if self.spend is not None and self.spend.reached and self._halts_at_the_cap():
            self._cancel_at_the_cap()
            return True
        if self.ledger.disk_full is not None:
            self.stats.state = LaneState.STOPPED
            self.stats.say(str(self.ledger.disk_full))
            return True
        return False

    def on_stop(self) -> None:
        """The run was asked to stop (`stop_event`, a signal): the lane says so now, not
        when a worker next looks (`halted`). A worker waiting for the slot a hung attempt
        held looked only when that attempt timed out, and until then the lane said
        "running" with nothing of the stop. How long the stop may wait for the lane's
        attempts in flight is kept beside it (`LaneStats.stop_wait_s`). A lane that is done
        stays done."""
        if self.stats.state is LaneState.DONE or not self.halted:
            return
        if (wait_s := self._stop_wait_s()) is not None:
            self.stats.stop_wait_until = self.stats.clock() + wait_s

    def _stop_wait_s(self) -> float | None:
        """The longest a stop waits for an attempt the lane has in flight (None: the stop
        waits for nothing of the lane's: a batch lane's jobs stay at their provider)."""
        return None

    def _halt(self, state: LaneState, reason: str, after_name: str = ": ") -> None:
        """Stop or pause the lane for `reason` (why, not how it ended: the state says that);
        its message names the lane first, then `after_name`."""
        if self.stats.state in (LaneState.STOPPED, LaneState.PAUSED):
            return
        self.stats.state = state
        # Redacted here, where every halt passes: a reason can quote an exception's text (a
        # request that cannot be built), and the summary prints it and lanes.json keeps it.
        reason = self.log.redact(reason)
        self.stats.say(reason, f"{self.config.name} ({self.provider_name}){after_name}")
        # The reason without the lead: "model m, reason m (p): ..." named the model twice.
        self.log.error(f"lane_{state.value}", model=self.config.name,
                       provider=self.provider_name, reason=self.stats.reason)  # fmt: skip

    async def _sleep(self, seconds: float, tick: float = 0.25) -> None:
        """Sleep, but wake early when the lane halts (a stop must not wait out a long hold)."""
        deadline = time.monotonic() + seconds
        while not self.halted and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, tick))


class Lane(LaneControl):
    """Dispatches one model's plan items (see the module docstring)."""

    #: The workers while the lane runs (`run`), and a stop's cut of them when one is due
    #: (`_stop_wait_s`).
    _workers: asyncio.Future[list[None]] | None = None
    _cut: asyncio.TimerHandle | None = None

    def __init__(
        self,
        config: ModelConfig,
        adapter: Adapter,
        ledger: LedgerWriter,
        http: HttpClient,
        log: EngineLog,
        *,
        parser: str = "strict",
        policy: RetryPolicy | None = None,
        stop_event: asyncio.Event | None = None,
        spend: SpendCap | None = None,
        outage: OutagePolicy | None = None,
        run_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.adapter = adapter
        self.ledger = ledger
        self.http = http
        self.log = log
        self.parser = parser
        self.policy = policy or RetryPolicy()
        self.stop_event = stop_event
        #: Shared by every lane: when reached, all stop starting attempts. Only priced models
        #: reserve and count spend.
        self.spend = spend
        self.prices = prices_of(config) if spend is not None else None
        self._room_waits = 0  # workers waiting for room in the spend cap (`_reserve`)
        self.stats = LaneStats(config.name, adapter.provider, rpm=config.rpm, tpm=config.tpm)
        start = config.concurrency or DEFAULT_CONCURRENCY
        if not 1 <= start <= MAX_CONCURRENCY:  # one worker per slot: see MAX_CONCURRENCY
            raise ValueError(
                f"{config.name}: concurrency {start} is not from 1 to {MAX_CONCURRENCY:,}"
            )
        self.cap = AdaptiveCap(start, start, on_change=self._cap_changed, slow_start=True)
        self.stats.cap = self.cap.limit
        self.requests = TokenBucket.per_minute(config.rpm) if config.rpm else None
        self.tokens = TokenBucket.per_minute(config.tpm) if config.tpm else None
        self.hold = Hold()
        #: Where pauses are recorded (`logs/pauses.jsonl`); None records them in the log only.
        self.run_dir = run_dir
        outage = outage or OutagePolicy()
        if config.max_down_s is not None:  # the model's spec key wins over the run's policy
            outage = replace(outage, max_down_s=config.max_down_s)
        self.outage = Outage(outage, on_pause=self._paused, on_resume=self._resumed)
        self._permanent_streak = 0
        #: The last failure settled, whose outcome goes to the outage check next: a pause
        #: quotes it, where its line said only "12 connection_error failures in a row".
        self._failing: Failure | None = None
        self.results = 0  # finished attempts, read by the dispatcher's compaction trigger
        self._build_in_thread = builds_may_block(adapter)
        self._omitted_logged = False
        self._build_pool: ThreadPoolExecutor | None = None
        #: Whether anything answered at the model's address yet: a lane whose server refuses
        #: connections from the start stops at once with the hint instead of retrying.
        self._reached = False
        #: Whether any reply was in the provider's format yet, and how many in a row were
        #: not before one was: a lane pointed at a web page stops (`RetryPolicy.foreign_streak`);
        #: after one was, such replies are a broken gateway's (`_provider_down`).
        self._recognised = False
        self._foreign_streak = 0
        self._adapter_failures: Counter[str] = Counter()  # by exception type
        #: `time.monotonic()` of the lane's last reply with the model's answer (`_replied`).
        self._replied_at = -float("inf")
        self._said_unanswered = False  # `no_answer_yet` is said once

    # -- state ---------------------------------------------------------------------------

    @property
    def provider_name(self) -> str:
        return self.adapter.provider

    def _stop_wait_s(self) -> float | None:
        """An attempt in flight ends by its `timeout_s` (each was sent before the stop); at a
        provider that has not answered yet, or is down (`_answering`), the stop waits
        `unanswered_stop_wait_s` at most (`OutagePolicy`), then cuts it (`_cut_at_stop`)."""
        cut = self.outage.policy.unanswered_stop_wait_s
        if self._answering or cut >= self.config.timeout_s or not self.stats.in_flight:
            return self.config.timeout_s
        self.stats.stop_wait_cut = True
        self._cut = asyncio.get_running_loop().call_later(cut, self._cut_at_stop)
        return cut

    def _cut_at_stop(self) -> None:
        """Cancel the lane's workers, their attempts in flight with them, unless a reply came
        meanwhile (a lane that has answered is waited for) or nothing is in flight now."""
        cut = self.stats.in_flight
        if self._answering or not cut or self._workers is None:
            self._cut_declined()
            return
        self.stats.cut_at_stop = cut
        why = "down" if self.outage.down else "not having answered once since this command started"
        self.stats.say(
            f"{STOP_REQUESTED}; {plural(cut, 'attempt')} in flight cut after "
            f"{duration(self.outage.policy.unanswered_stop_wait_s)}, its provider {why}: the "
            f"next run records {'it' if cut == 1 else 'them'} as interrupted and asks again"
        )
        self.log.warning("cut_at_stop", echo=False, model=self.config.name, attempts=cut)
        self._workers.cancel()

    @property
    def _answering(self) -> bool:
        """Whether a stop waits the attempts in flight out: the provider answered once in this
        process and is not down now. A probe of a provider down (`engine.outage`) is no more
        likely to come back than a first request: a hung one held a stop its whole
        `timeout_s` (a tester's 10 minutes), as the first request once did."""
        return self._answered_once and not self.outage.down

    def _cut_declined(self) -> None:
        """The cut was not made (the provider answered meanwhile): the stop waits for what
        is in flight until its `timeout_s` from the stop, as for a provider that answered;
        the countdown said "no answer yet ... then cut" down to 0:00, then waited on."""
        stats = self.stats
        if stats.stop_wait_cut and stats.stop_wait_until is not None:
            stats.stop_wait_cut = False
            cut_s = self.outage.policy.unanswered_stop_wait_s  # the stop was this long ago
            stats.stop_wait_until += self.config.timeout_s - cut_s

    def _cap_changed(self, old: int, new: int, why: str) -> None:
        self.stats.cap = new
        self.log.info("concurrency_changed", model=self.config.name, old=old, new=new, why=why)

    def _hold_for(self, seconds: float, by: str) -> None:
        """Hold every attempt of the lane `seconds` more, as the provider asked (`by`)."""
        self.hold.extend(seconds)
        self.stats.held(self.hold.until, by)

    def _paused(self, cause: str) -> None:
        self.stats.state = LaneState.PROBING
        self.stats.paused_since = time.monotonic()
        self.stats.say(f"provider down ({cause})")  # the state says "probing" beside it
        last: dict[str, Any] = {}
        if self._failing is not None:
            last["last_failure"] = self._failing.detail
        self.log.warning(
            "lane_paused", model=self.config.name, provider=self.adapter.provider, cause=cause,
            **last,
        )

    def _resumed(self, pause: dict[str, Any]) -> None:
        if self.stats.state is LaneState.PROBING:
            self.stats.state = LaneState.RUNNING
            self.stats.say("")
        self._record_pause(pause)
        self.log.warning("lane_resumed", model=self.config.name, **pause)

    def _record_pause(self, pause: dict[str, Any]) -> None:
        self.stats.pauses += 1
        self.stats.paused_s += float(pause["seconds"])
        self.stats.paused_since = 0.0
        if self.run_dir is not None:
            line = {"model": self.config.name, "provider": self.adapter.provider, **pause}
            append_pause(self.run_dir, line)

    # -- running -------------------------------------------------------------------------

    @property
    def workers(self) -> int:
        return self.cap.maximum

    async def run(self, queue: asyncio.Queue[PlanItem | None]) -> None:
        """Work through `queue` (ended by a `None`) until it is drained or the lane halts."""
        self.stats.state = LaneState.RUNNING
        self.stats.started = time.monotonic()
        self.log.info(
            "lane_started",
            model=self.config.name,
            provider=self.adapter.provider,
            concurrency=self.cap.limit,
            rpm=self.config.rpm,
            tpm=self.config.tpm,
        )
        self._workers = asyncio.gather(*(self._worker(queue) for _ in range(self.workers)))
        try:
            await self._workers
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.stats.cut_at_stop or (task is not None and task.cancelling()):
                raise  # cancelled from outside (a second signal), not cut by the stop
        finally:
            if self._cut is not None:
                self._cut.cancel()
            if self._build_pool is not None:  # never wait here for a build stuck in a thread
                self._build_pool.shutdown(wait=False, cancel_futures=True)
            self.stats.finished = time.monotonic()
            if self.outage.down:  # the run stopped while the provider was still down
                self._record_pause(self.outage.record(ended="lane stopped while down"))
            if self.stats.state in (LaneState.RUNNING, LaneState.PROBING):
                self.stats.state = LaneState.DONE
            self.log.info(
                "lane_finished",
                model=self.config.name,
                state=self.stats.state.value,
                accepted=self.stats.accepted,
                attempts=self.stats.attempts,
                retries=dict(self.stats.retries.by_cause),
                message=self.stats.message,
            )

    async def _worker(self, queue: asyncio.Queue[PlanItem | None]) -> None:
        while not self.halted:
            item = await queue.get()
            if item is None:
                queue.put_nowait(None)  # let the other workers see the end too
                return
            await self._ask(item)

    async def _ask(self, item: PlanItem) -> None:
        """Attempt one plan item until accepted, given up, or the lane halts."""
        attempt_no = item.prior_attempts
        answers = self._answer_retry(item)
        if answers.spent:  # earlier runs spent this request's answer budget
            self.stats.retries.answer_budget_spent += 1
            return
        tries = uncharged = refused = 0  # attempts charged, not (`_charged`); auth refusals
        while tries < self.policy.max_attempts:
            if self.halted:
                return
            estimate = self._estimate(item, answers.sent_cap)
            worst = self._worst_cost(item, answers.sent_cap)
            if not self.outage.down:  # nearly always: no gate to pass, not a probe
                probe: bool | None = False
                tried = await self._attempt(item, answers, attempt_no + 1, estimate, worst)
            else:
                async with self.outage.gate(lambda: self.halted) as probe:
                    if probe is None:
                        return
                    tried = await self._attempt(
                        item, answers, attempt_no + 1, estimate, worst, probe=probe
                    )
            if tried is None:
                return
            if isinstance(tried, _Regate):
                continue
            tries += 1
            if isinstance(tried, _BuildFailed):
                if not self._unsent(tried):
                    return
                wait = self.policy.delay(tries)
            else:
                result, sent = tried
                attempt_no = sent.attempt
                # Only an answer failure (this run's or an earlier one) changes seed or cap.
                if answers.failures and (note := answers.note()):
                    sent = replace(sent, notes=(*sent.notes, note))
                try:
                    failure, stopped = self._settle(item, result, sent, estimate, answers)
                except DiskFull:  # this reply could not be kept: a resume reads `interrupted`
                    return
                if failure is None:
                    self.outage.on_success()
                    return
                if self._provider_down(failure, probe=bool(probe)):
                    if probe and self._stopped_down(failure):
                        return
                    tries -= 1  # the provider is down (engine.outage): the gate paces
                    continue
                if stopped and answers.spent:  # out of answer attempts, this run's and earlier
                    self.stats.retries.answer_budget_spent += 1  # said by `_settle`'s warning
                    return
                refused += failure.outcome is Outcome.AUTH_ERROR
                retried = self._retryable(failure, refused)
                if not retried or self.policy.quota_pauses(failure) or stopped:
                    self.stats.gave_up += 1
                    return
                if not self._charged(failure):
                    tries, uncharged = tries - 1, uncharged + 1
                wait = self.policy.delay(tries + uncharged, failure.retry_after_s)
            if tries == self.policy.max_attempts:
                break
            await self._sleep(wait)
        self._exhausted(item, attempt_no)

    def _provider_down(self, failure: Failure, *, probe: bool) -> bool:
        """Give `failure` to the outage check (`engine.outage`): True when the provider is
        down and the failure is not charged to its request. A reply not in the provider's
        format counts as the provider failing once one of the lane's replies was in it
        (`_recognised`): a broken gateway's garbage after good replies was retried to every
        request's `max_attempts`. Before that, `_on_failure` stops the lane as pointed at
        the wrong address (`RetryPolicy.foreign_streak`). A reply too long to read is the
        model's, never the provider down: probes charge nothing, and a model that always
        rambled was probed for ever."""
        return self.outage.on_failure(
            failure.outcome, probe=probe, answered=self._answered_once,
            foreign=failure.foreign and not failure.too_long and self._recognised,
        )  # fmt: skip

    def _estimate(self, item: PlanItem, max_tokens: int | None) -> int:
        """The tokens one attempt sent with `max_tokens` is charged against a `tpm` limit (0
        without one)."""
        if self.tokens is None:
            return 0
        return estimate_tokens(item.system, item.user, max_tokens)

    def _exhausted(self, item: PlanItem, attempts: int) -> None:
        self.stats.retries.exhausted += 1
        self.log.warning("attempts_exhausted", model=self.config.name,
                         request_id=item.request_id, attempts=attempts)  # fmt: skip

    def _charged(self, failure: Failure) -> bool:
        """Whether a failed attempt counts against its request's `max_attempts`. A rate limit
        does not while the lane has had a reply with the model's answer, usable or not
        (`_replied`), within `RetryPolicy.rate_limit_grace_s`: the provider is pacing the
        lane, and a sweep throttled hard would otherwise give up requests it could have
        answered. Nor does a server that could not be reached at all (`Failure.unreachable`:
        connection refused) within that window: a local server restarting took a request's
        six attempts in six seconds, before the lane's failures in a row paused it. With no
        reply for that long (a key always refused, a server gone) it is charged, so the lane
        still ends; each reply opens one grace window, so the uncharged retries are bounded."""
        paced = failure.outcome is Outcome.RATE_LIMIT and not self.policy.quota_pauses(failure)
        if not (paced or failure.unreachable):
            return True
        return time.monotonic() - self._replied_at >= self.policy.rate_limit_grace_s

    @staticmethod
    def _retryable(failure: Failure, refused: int) -> bool:
        """Whether `failure`'s request is asked again (charged to its `max_attempts` as any
        retry is). An auth error is, once (`refused`: the request's refusals so far), before
        the lane's first answer too: a tester's Groq fake refused the key once among 28
        requests, another refused a first request while the second, in flight, was answered
        ms later, and that request was given up at once ("done in part, 27/28", exit 4)
        though the key worked. Once only: a gateway refusing one prompt every time, asked
        again to its `max_attempts`, made `RetryPolicy.permanent_streak` refusals in a row
        alone and stopped a lane of one request at a time (a reviewer's). A key refused from
        the start or revoked mid-run still stops the lane after that many refusals in a row
        (`_on_failure`), whichever requests they were. A bad request fails the same way on
        every try: never asked again."""
        return failure.retryable or (failure.outcome is Outcome.AUTH_ERROR and refused <= 1)

    def _answer_retry(self, item: PlanItem) -> AnswerRetry:
        """This request's answer-failure budget and how its retries vary seed and cap."""
        return AnswerRetry(
            base_seed=item.seed if item.seed is not None else self.config.seed,
            base_cap=self.config.max_tokens,
            temperature=self.config.temperature,
            budget=self.policy.max_answer_failures,
            failures=item.prior_answer_failures,
        )

    def _worst_cost(self, item: PlanItem, max_tokens: int | None) -> float | None:
        """What one attempt sent with `max_tokens` could cost at most,
        when a spend cap counts this model."""
        if self.spend is None or self.prices is None:
            return None
        return worst_case_cost(self.prices, self.config, item.system, item.user, max_tokens)

    async def _attempt(
        self,
        item: PlanItem,
        answers: AnswerRetry,
        attempt_no: int,
        estimate: int,
        worst: float | None,
        *,
        probe: bool = False,
    ) -> tuple[Completion | Failure, Sent] | _BuildFailed | _Regate | None:
        """One try under the concurrency cap: admission, build (with the seed and cap
        `answers` chose for this try), send.

        None when the lane halted before anything was sent; the build's failure when the
        request could not be built (nothing sent, nothing journalled); `_REGATE` when the
        provider went down while this try, not a probe, waited for its slot.
        """
        if self.hold.remaining() > 0:
            await self._sleep(self.hold.remaining())
        if not self.cap.try_acquire():  # the common case takes a slot without an await
            await self.cap.acquire()
        try:
            if self.outage.down and not probe:  # a try queued before the lane went down:
                return _REGATE  # sent anyway, each took a timeout (22 a lane, not 12 + 3)
            if not await self._admit(estimate, worst):
                return None
            chat = ChatRequest(
                item.request_id, item.system, item.user, answers.seed, tuple(item.keys),
                answers.cap,
            )
            try:
                # A pure build is a call, not a coroutine to create and await per request.
                request = (
                    await self._build_in_pool(chat)
                    if self._build_in_thread
                    else self._build_now(chat)
                )
            except _BuildFailed as exc:
                self._unreserve(worst)
                return exc
            if self.halted:  # a stop came while a build blocked (a token refresh): send
                self._unreserve(worst)  # nothing after it, where no cut would end the wait
                return None
            try:
                result, started, elapsed_ms = await self._send(request, item, attempt_no)
            except DiskFull:  # nothing was sent; `halted` now stops every lane
                self._unreserve(worst)
                return None
            except BaseException:
                self._unreserve(worst)
                raise
            if worst is not None and self.spend is not None and self.prices is not None:
                self.spend.settle(worst, self.prices.cost(result.tokens_in, result.tokens_out))
        finally:
            self.cap.release()
        sent = Sent(
            self.config.name, self.adapter.provider, attempt_no, started, elapsed_ms,
            request.omitted, request.notes,
        )
        return result, sent

    async def _admit(self, estimate: int, worst: float | None) -> bool:
        """Wait for the lane's buckets, hold and spend cap; False if the lane halted meanwhile."""
        if self.halted:
            return False
        if self.requests is not None and not await self._pace(self.requests, 1):
            return False
        if self.tokens is not None and not await self._pace(self.tokens, estimate):
            return False
        if self.hold.remaining() > 0:  # a Retry-After arrived while we queued
            await self._sleep(self.hold.remaining())
        if self.halted:  # a stop may have come while we waited for the buckets
            return False
        return worst is None or await self._reserve(worst)

    def _unsent(self, unbuilt: _BuildFailed) -> bool:
        """Account for a request that could not be built; False if the lane stops for it.

        Nothing was sent, so nothing is journalled; a transient credential failure is retried
        and counted like the connection error it is.
        """
        name, provider = self.config.name, self.adapter.provider
        if not unbuilt.retryable:
            self._halt(LaneState.STOPPED, str(unbuilt))
            return False
        self.log.warning(
            "build_failed_retrying", model=name, provider=provider, detail=str(unbuilt)
        )
        self.stats.retries.unsent += 1
        return True

    async def _pace(self, bucket: TokenBucket, amount: float, tick: float = 0.25) -> bool:
        """Wait for `bucket`; False if the lane halted meanwhile.

        Under a low rate limit a worker can wait many seconds for its turn, and a stop (Ctrl-C)
        must not wait for every queued worker's turn to come and then send anyway.
        """
        if bucket.try_acquire(amount):  # the common case: no wait, no task, no lock
            return True
        waiter = asyncio.ensure_future(bucket.acquire(amount))
        try:
            while True:
                done, _ = await asyncio.wait({waiter}, timeout=tick)
                if done:
                    waiter.result()
                    return True
                if self.halted:
                    return False
        finally:
            if not waiter.done():
                waiter.cancel()  # leaves the bucket untouched: nothing was taken yet
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter

    async def _reserve(self, worst: float) -> bool:
        """Room in the spend cap for one attempt; False (and the lane halts) once it is spent.
        While its workers wait for room others hold, the lane says so (`WAITING_FOR_ROOM`): a
        tester's live lane waited silently, "running" with no ETA, for room that batch jobs
        of an earlier run held until collected (with a real provider, hours)."""
        assert self.spend is not None
        waited = False

        def waiting() -> None:
            nonlocal waited
            waited = True
            self._room_waits += 1
            if self._room_waits == 1:
                self.stats.say(WAITING_FOR_ROOM)

        try:
            reserved = await self.spend.reserve(worst, on_wait=waiting)
        finally:
            if waited:
                self._room_waits -= 1
                if not self._room_waits and self.stats.reason == WAITING_FOR_ROOM:
                    self.stats.say("")
        if not reserved:
            return False
        if self.halted:  # stopped while waiting for room
            self.spend.release(worst)
            return False
        return True

    def _unreserve(self, worst: float | None) -> None:
        if worst is not None and self.spend is not None:
            self.spend.release(worst)

    async def _build_in_pool(self, chat: ChatRequest) -> HttpRequest:
        """The adapter's request built on the lane's own threads, for a `build` that may block.

        A Vertex token refresh or an AWS credential-chain lookup can block for many seconds;
        on the loop it would stall every lane, not just this one.
        """
        if self._build_pool is None:
            self._build_pool = ThreadPoolExecutor(
                BUILD_THREADS, thread_name_prefix=f"build-{self.config.name}"
            )
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._build_pool, self.adapter.build, chat)
        except Exception as exc:
            raise _build_failed(exc) from None

    def _build_now(self, chat: ChatRequest) -> HttpRequest:
        """The adapter's request, built here (`build` does not block)."""
        try:
            return self.adapter.build(chat)
        except Exception as exc:
            raise _build_failed(exc) from None

    async def _send(
        self, request: HttpRequest, item: PlanItem, attempt_no: int
    ) -> tuple[Completion | Failure, datetime, float]:
        started = datetime.now(UTC)
        self.ledger.record_dispatch(
            item.request_id, attempt_no, self.config.name, self.adapter.provider, started
        )
        self.stats.in_flight += 1
        t0 = time.perf_counter()
        try:
            result = await self.http.send(self.adapter, request, self.config.timeout_s)
        except Exception as exc:  # an adapter bug must not kill the lane silently
            result = Failure(Outcome.PROVIDER_ERROR, f"adapter failed: {type(exc).__name__}")
            self._log_adapter_failure(exc)
        finally:
            self.stats.in_flight -= 1
        return result, started, (time.perf_counter() - t0) * 1000.0

    def _log_adapter_failure(self, exc: Exception) -> None:
        """Where an adapter's exception came from, in the log only (redacted there): the
        attempt's detail names its type alone, and a tester's KeyErrors could not be traced
        after. The first `TRACEBACKS_LOGGED` of each type: a bug fails every attempt alike."""
        kind = type(exc).__name__
        self._adapter_failures[kind] += 1
        if self._adapter_failures[kind] <= TRACEBACKS_LOGGED:
            self.log.error("adapter_failed", echo=False, model=self.config.name,
                           error=repr(exc), traceback=traceback.format_exc())  # fmt: skip

    def _settle(
        self,
        item: PlanItem,
        result: Completion | Failure,
        sent: Sent,
        estimate: int,
        answers: AnswerRetry | None = None,
    ) -> tuple[Failure | None, bool]:
        """Journal one finished attempt (`engine.settle.settle`) and account for it: the
        failure, if any, and whether the request is not to be asked again (`answers` books an
        answer failure and says so; the reason goes into the attempt's detail)."""
        if sent.omitted and not self._omitted_logged:
            self._omitted_logged = True
            self.log.info("options_omitted", model=self.config.name, options=list(sent.omitted))
        record, response, failure = settle(item, result, sent, self.parser)
        stopped = None
        if failure is not None and answers is not None and charges_answer_budget(failure):
            stopped = answers.failed(failure.outcome, failure.raw_text, sent.attempt)
            if stopped:
                record = replace(record, detail=gave_up_detail(record.detail, stopped))
                self.log.warning("answer_retries_stopped", model=self.config.name,
                                 request_id=item.request_id, reason=stopped)
        if record.http_status is not None:
            self._reached = True
            if failure is None or not failure.foreign:
                self._recognised = True
        try:
            accepted = self.ledger.record_result(record, response)
        except DiskFull:
            self.stats.unkept += 1  # sent, yet not among `attempts`: said at the end
            raise
        self.results += 1
        self.stats.attempts += 1
        self.stats.outcomes[record.outcome] += 1
        self._correct_tokens(estimate, record.tokens_in, record.tokens_out)
        self._respect_limits(result.limits)
        if failure is not None:
            self.stats.retries.count(failure.outcome)
            self._on_failure(failure)
            if charges_answer_budget(failure):
                # The model answered, unusably: as much a reply as an accepted answer for
                # pacing. A lane whose model answered in fractions under the strict parser
                # stayed at slow start's one request at a time (1,260 replies took 40 s
                # where 420 answers took 0.3 s), and 3 server errors in a row paused it.
                self._replied()
            return failure, stopped is not None
        self._permanent_streak = 0
        self._replied()
        if accepted:
            self.stats.accepted += 1
        else:
            self.stats.retries.count(DUPLICATE)
            self.log.warning(
                "duplicate_refused", model=self.config.name, request_id=item.request_id
            )
        return None, False

    @property
    def _answered_once(self) -> bool:
        """Whether the model has answered this lane in this process (`_replied`)."""
        return self._replied_at > -math.inf

    def _replied(self) -> None:
        """A reply with the model's answer, usable or not (an answer failure): the provider
        is up and serving, so the cap grows and rate limits soon after are pacing."""
        self._replied_at = time.monotonic()
        self.cap.on_success()

    def _stopped_down(self, failure: Failure) -> bool:
        """After a failed probe: stop the lane (True) once it has been down its model's
        `max_down_s`, or once enough probes failed and its provider never answered (see
        `engine.outage`): waiting longer for an address that has never answered helps no
        one, and a run given one would otherwise never end. One that replies with errors
        only is given `unanswered_down_s` first (it may be restarting)."""
        policy = self.outage.policy
        too_long = self.outage.down_too_long
        if self._answered_once:
            if too_long:
                self._stop_down_too_long(failure)
            return too_long
        if not too_long and self.outage.probes < policy.unanswered_probes:
            return False
        if not too_long and self._reached and self.outage.down_s < policy.unanswered_down_s:
            return False
        if self._reached:
            what, check = "successful reply", "is the provider up, and the model id right?"
        elif isinstance(failure, BrokenReply):
            # The server took the connection and broke the reply: look between and at the
            # server, not whether it is up. The failure the stop line quotes as the last, so
            # one reset among timeouts keeps the timeouts' hint.
            what = "readable reply"
            check = (
                "the server takes the connections, but its replies come cut short, "
                "unreadable or reset: is a proxy between failing, what does the server's log "
                "say, and is base_url the address of the API service?"
            )
        else:
            what = "reply"
            check = (
                f"is the server up, base_url right, and timeout_s ({self.config.timeout_s:g}s) "
                "long enough?"
            )
        self._halt(
            LaneState.STOPPED,
            f"no {what} from its provider since this command started ({self.outage.cause}, "
            f"then {self.outage.probes} probes failed; the last: {failure.detail}): {check}",
        )
        return True

    def _stop_down_too_long(self, failure: Failure) -> None:
        """Stop a lane whose provider answered and then stayed down past `max_down_s`,
        saying how long, and that a resume asks the rest: the user chose to give up on it.
        The resume is said as it is typed: "`dutchbook run` on the same folder", typed so,
        was refused for want of its spec."""
        folder = "DIR" if self.run_dir is None else str(self.run_dir)
        self._halt(
            LaneState.STOPPED,
            f"after its provider was down {duration(self.outage.down_s)}, past its "
            f"max_down_s of {self.outage.policy.max_down_s:g}s ({self.outage.cause}, then "
            f"{plural(self.outage.probes, 'probe')} failed; the last: {failure.detail}); "
            f"`dutchbook run SPEC --out {folder}` resumes it",
            after_name=" stopped ",
        )

    def _correct_tokens(self, estimate: int, tokens_in: int | None, tokens_out: int | None) -> None:
        if self.tokens is None:
            return
        if tokens_in is not None and tokens_out is not None:
            self.tokens.adjust(tokens_in + tokens_out - estimate)
            self.stats.book_tokens(tokens_in + tokens_out)
        else:
            self.stats.book_tokens(estimate)

    def _respect_limits(self, limits: RateLimitInfo) -> None:
        """A provider saying "0 remaining until reset" holds the lane until the reset."""
        if limits.remaining_requests != 0 and limits.remaining_tokens != 0:  # the common case
            return
        waits = []
        if limits.remaining_requests == 0 and limits.reset_requests_s:
            waits.append(limits.reset_requests_s)
        if limits.remaining_tokens == 0 and limits.reset_tokens_s:
            waits.append(limits.reset_tokens_s)
        if waits:
            wait = min(max(waits), self.policy.max_retry_after_s)
            self._hold_for(wait, "a rate-limit reset")
            self.log.info("limit_reset_wait", model=self.config.name, seconds=round(wait, 3))

    def _foreign_reason(self, failure: Failure) -> str:
        """Why a lane whose first replies were all not in its provider's format stops. A
        model that answered in this folder before (a resume) had the right base_url then:
        what changed is more likely in front of the server (a tester's resume behind a
        gateway broken between runs was asked to check its base_url)."""
        first = (
            f"its first {self._foreign_streak} replies were not in the provider's format "
            f"(the last: {failure.detail})"
        )
        if not self.stats.already_accepted:
            return f"{first}; is its base_url the API's address?"
        return (
            f"{first}, though it answered {plural(self.stats.already_accepted, 'request')} "
            "in this folder before: is something in front of it now (a gateway, a proxy, a "
            "sign-in page), or has its base_url changed?"
        )

    def _quota_paused(self, failure: Failure) -> bool:
        """A spent quota: pause the lane until a resume (True), or, when the provider said
        when it returns (`RetryPolicy.quota_pauses`), hold the lane that long and carry on.
        Its concurrency is left alone: what ran out is the quota, not the parallelism."""
        if self.policy.quota_pauses(failure):
            self._halt(
                LaneState.PAUSED,
                f"quota exhausted, lane paused until a later resume: {failure.detail}",
            )
            return True
        wait = failure.retry_after_s or 0.0
        # Each request in flight as the quota ran out meets it: the file keeps every one,
        # the console says the lane's hold once (not again while that hold lasts).
        held = self.stats.held_by == "a spent quota" and self.hold.remaining() > 0
        self._hold_for(wait, "a spent quota")
        self.log.warning("quota_wait", echo=not held, model=self.config.name,
                         seconds=round(wait, 3), detail=failure.detail)  # fmt: skip
        return False

    def _warn_permanent(self, failure: Failure) -> None:
        """Warn of a failure of `PERMANENT`'s, the lane's `_permanent_streak`-th in a row. An
        auth error is said as a refusal and its count in a row, not as a "permanent failure:
        ... outcome auth_error ..., streak 1", though it was asked again and answered (whether
        it is asked again, `_retryable`, is decided after this, and it is the first time only)."""
        name, streak, limit = self.config.name, self._permanent_streak, self.policy.permanent_streak
        said: dict[str, Any] = {}
        if failure.outcome is Outcome.AUTH_ERROR:
            refused = f"{name}: authentication refused ({failure.detail})"
            said[SAY] = (
                f"{refused}; {streak} in a row, the lane stops at {limit}"
                if streak < limit
                else f"{refused}, {streak} in a row: the lane stops"
            )
        self.log.warning(
            "permanent_failure", model=name, provider=self.adapter.provider,
            outcome=failure.outcome.value, http_status=failure.http_status,
            detail=failure.detail, streak=streak, **said,
        )  # fmt: skip

    def _on_failure(self, failure: Failure) -> None:
        self._failing = failure  # the outage check comes next: a pause quotes it
        name, provider = self.config.name, self.adapter.provider
        if failure.unreachable and not self._reached:
            self._halt(LaneState.STOPPED, failure.detail)
            return
        if not self._reached and not self._said_unanswered:
            # Said at once: a lane whose server never replies is otherwise silent until it
            # pauses, minutes of timeouts later. (A first reply that is an error, say the
            # demo's injected 429, is not this: the server is there.)
            self._said_unanswered = True
            self.log.warning("no_answer_yet", model=name, provider=provider,
                             outcome=failure.outcome.value, detail=failure.detail)  # fmt: skip
        if failure.foreign and not self._recognised:
            self._foreign_streak += 1
            if self._foreign_streak >= self.policy.foreign_streak:
                reason = self._foreign_reason(failure)
                self._halt(LaneState.STOPPED, reason, after_name=" stopped: ")
            return
        if failure.outcome is Outcome.RATE_LIMIT and not failure.quota_exhausted:
            self.cap.on_rate_limit()
            if failure.retry_after_s:
                wait = min(failure.retry_after_s, self.policy.max_retry_after_s)
                self._hold_for(wait, "Retry-After")
        if failure.quota_exhausted and self._quota_paused(failure):
            return
        if failure.stale_credential:  # the adapter dropped a refused token: not the lane's key
            self.log.info("credential_refused_renewing", model=name, detail=failure.detail)
            return
        if failure.outcome in PERMANENT:
            self._permanent_streak += 1
            self._warn_permanent(failure)
            if self._permanent_streak >= self.policy.permanent_streak:
                status = f"HTTP {failure.http_status}" if failure.http_status else "no status"
                self._halt(
                    LaneState.STOPPED,
                    f"after {self._permanent_streak} {failure.outcome.value} failures in a "
                    f"row ({status}): {failure.detail}",
                    after_name=" stopped ",
                )
        else:
            self._permanent_streak = 0
