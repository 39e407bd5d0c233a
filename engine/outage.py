"""A provider that is down: pause the lane as a whole and probe, instead of burning attempts.

A lane that sees only connection errors, timeouts or 5xx replies for a while (`OutagePolicy`:
at least `streak` of them in a row, no success or other reply in between)
is DOWN (the streak is lane-wide, so it is reached long before any one request could spend
its attempts on the outage). Replies not in the provider's format (`Failure.foreign`: an HTML
page or a torn body under HTTP 200) count in the streak once a reply of the lane was in the
format: the provider's gateway is broken, as a 502 says it is, and a streak of them after
good replies was only retried, each request sent `max_attempts` times to a broken gateway.
Before any reply was in the format they are not the provider failing but base_url not being
the API's, and `engine.lanes` stops the lane (`RetryPolicy.foreign_streak`). An answer in the
format the parser rejects is the model's (an `invalid_response` of the paper's Appendix C),
never an outage. While it is down:

- no worker starts an attempt except ONE probe at a time, sent after a backoff that doubles
  from `probe_base_s` up to `probe_cap_s`; every other worker waits;
- a failed probe, or any failure seen while down, is not charged to its request's attempt
  budget (the provider is down, not the request bad); it is still journalled, because it
  happened and may have cost money;
- the first success ends the pause and the lane resumes at once.

A lane whose provider has not answered once in this process pauses after `unanswered_streak`
(3) such failures rather than 12 (its slow-start cap of 1 sends them one at a time), and does
not probe for ever: after `unanswered_probes` failed probes it stops, saying so
(`engine.lanes`), when nothing replied at all (connection errors, timeouts: an address where
a server takes connections and never answers, or a model slower than `timeout_s`), or when
the replies were only errors (a gateway's 5xx) and the lane has been down for
`unanswered_down_s`. Without this, a run given such an address never ended, and one given a
server that never answers took 44 minutes to stop. A provider that did answer and then went
down is probed until it comes back, however long that takes: a paid provider's outage ends.

A model's spec may set `max_down_s` (`OutagePolicy.max_down_s`; opt-in, for a local server
its user started and left running unattended overnight, which may be gone for good): the
probe backoff is then cut short so that a probe goes once the lane has been down that long,
and if that probe fails the lane stops (`engine.lanes`, the path an unanswered provider's stop
takes), its line naming how long it was down and that `dutchbook run` on the same folder
resumes it. A lane whose provider never answered stops then too, if its own rule above has
not stopped it first. (Batch lanes do not pause, so the key is for live ones.)

Each pause is recorded when it ends (and, if the run stops while it lasts, when the lane
stops): one line in `logs/pauses.jsonl` (`model, provider, started_at, ended_at, seconds,
probes, cause, ended`), an event in `logs/engine.jsonl` (`lane_paused`, `lane_probe_failed`,
`lane_resumed`), and the lane's `pauses` / `paused_s` in `logs/lanes.json`.
`read_pauses(run_dir)` reads them back for `status` and the audit.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.durable import append_record_line, read_record_lines
from providers.types import Outcome

#: Outcomes that say the provider itself is unreachable or failing (not the request).
OUTAGE_OUTCOMES: frozenset[Outcome] = frozenset(
    {Outcome.CONNECTION_ERROR, Outcome.TIMEOUT, Outcome.PROVIDER_ERROR}
)
#: What a pause's cause calls a streak whose last failure was a reply not in the provider's
#: format: not "invalid_response failures", which reads as the model's unusable answers.
FOREIGN_FAILURES = "replies not in the provider's format"
PAUSES_FILE = Path("logs") / "pauses.jsonl"


@dataclass(frozen=True)
class OutagePolicy:
    """When a lane counts its provider as down, and how it probes."""

    #: Outage-type failures in a row, lane-wide, with no success or other reply between,
    #: before the lane pauses. Under the simulator's `hostile` profile (about 15% of
    #: replies are outage-type) twelve in a row by chance is a one-in-10^10 event; a lane of 8
    #: workers reaches twelve before any request can spend its 8 attempts.
    streak: int = 12
    #: ... and the first of them at least this long ago (0: the streak alone decides).
    after_s: float = 0.0
    #: Wait before the first probe; doubles after each failed probe, up to `probe_cap_s`.
    probe_base_s: float = 2.0
    probe_cap_s: float = 60.0
    #: Failed probes after which a lane whose provider never answered stops (2 + 4 + 8 s of
    #: backoff by default, plus the probes' own timeouts).
    unanswered_probes: int = 3
    #: The streak that pauses a lane that has had no reply with the model's answer (usable
    #: or not) yet in this process.
    #: Its cap is still at slow start's 1, so its failures come one at a time: against a
    #: server that takes connections and never answers, 12 timeouts of 120 s in a row took
    #: 24 minutes before the lane even paused.
    unanswered_streak: int = 3
    #: ... and a lane whose provider replies, but only with errors (a gateway's 502 from the
    #: first request), stops only after it has been down this long: a provider restarting
    #: as a run starts should not lose its lane for the night.
    unanswered_down_s: float = 300.0
    #: The longest a stop (a signal) waits for an attempt in flight at a provider that has
    #: not answered once in this process, before it cuts it: the next run records it as
    #: interrupted and asks it again. Nothing says that reply is coming (a tester's hung
    #: server held a stop its 600 s `timeout_s`), and what a cut may waste is one request
    #: per lane, as such a lane sends one at a time (slow start). 30 s leaves a stop under
    #: systemd's default 90 s before SIGKILL the time to compact, score and report; a
    #: provider that answered is waited for its whole `timeout_s`: its answers come back.
    #: A provider down (paused, probed one request at a time) is cut alike.
    unanswered_stop_wait_s: float = 30.0
    #: Seconds a lane may be down before it stops, at the first probe that fails from then
    #: on (a model's spec key `max_down_s`); None: a provider that answered is probed until
    #: it comes back.
    max_down_s: float | None = None

    def __post_init__(self) -> None:
        if (self.streak < 1 or self.after_s < 0 or self.probe_base_s < 0
                or self.unanswered_probes < 1 or self.unanswered_streak < 1
                or not self.unanswered_down_s >= 0 or not self.unanswered_stop_wait_s >= 0
                or not (self.max_down_s is None or self.max_down_s > 0)):
            raise ValueError(
                "outage policy: streak >= 1, after_s >= 0, probe_base_s >= 0, "
                "unanswered_probes >= 1, unanswered_streak >= 1, unanswered_down_s >= 0, "
                "unanswered_stop_wait_s >= 0, "
                "max_down_s None or > 0"
            )


class _Pass(contextlib.AbstractAsyncContextManager[bool]):
    """`Outage.gate` while the provider is up: lets the attempt through, not as a probe."""

    async def __aenter__(self) -> bool:
        return False

    async def __aexit__(self, *exc: object) -> None:
        return None


_PASS = _Pass()


class Outage:
    """One lane's view of its provider: up, or down and being probed (see the module doc)."""

    def __init__(
        self,
        policy: OutagePolicy,
        *,
        on_pause: Callable[[str], None],
        on_resume: Callable[[dict[str, Any]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self._on_pause, self._on_resume, self._clock = on_pause, on_resume, clock
        self._streak = 0
        self._streak_since = 0.0
        self._up = asyncio.Event()
        self._up.set()
        self._probe = asyncio.Lock()
        self._next_wait = policy.probe_base_s
        self._started_at: datetime | None = None
        self._started = 0.0
        self.probes = 0
        self.cause = ""

    @property
    def down(self) -> bool:
        return not self._up.is_set()

    @property
    def down_s(self) -> float:
        """Seconds the lane has been down (0 while it is up)."""
        return self._clock() - self._started if self.down else 0.0

    @property
    def down_too_long(self) -> bool:
        """Whether the lane has been down its policy's `max_down_s` (never without one)."""
        limit = self.policy.max_down_s
        return limit is not None and self.down and self.down_s >= limit

    def _probe_wait(self) -> float:
        """The wait before the next probe: the backoff, cut short at `max_down_s` so that a
        probe goes as the lane has been down that long (the backoff's 60 s, or a doubling
        wait's last step, would otherwise keep the lane up to a minute past it)."""
        limit = self.policy.max_down_s
        if limit is None:
            return self._next_wait
        return max(min(self._next_wait, limit - self.down_s), 0.0)

    # -- gate -----------------------------------------------------------------------------

    def gate(self, halted: Callable[[], bool]) -> contextlib.AbstractAsyncContextManager[Any]:
        """Around one attempt: passes at once while up; while down, only one probe at a
        time passes, after the probe backoff, and the others wait for the lane to come up.
        Yields True when the attempt is a probe, False otherwise (None: halted while waiting).

        While up (nearly always) it is one shared context that yields False: a generator-based
        context per attempt cost microseconds a request for nothing.
        """
        return _PASS if not self.down else self._gate(halted)

    @contextlib.asynccontextmanager
    async def _gate(self, halted: Callable[[], bool]) -> Any:
        while self.down:
            if halted():
                yield None
                return
            if self._probe.locked():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._up.wait(), timeout=0.25)
                continue
            async with self._probe:
                if not self.down:
                    break
                if not await self._sleep(self._probe_wait(), halted):
                    yield None
                    return
                self.probes += 1
                yield True
                return
        yield False

    async def _sleep(self, seconds: float, halted: Callable[[], bool]) -> bool:
        """Sleep up to `seconds`, waking early if the lane comes up; False if it halted."""
        end = self._clock() + seconds
        while (left := end - self._clock()) > 0:
            if halted():
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), timeout=min(left, 0.25))
            if not self.down:
                return True
        return not halted()

    # -- results --------------------------------------------------------------------------

    def on_success(self) -> None:
        self._streak = 0
        if self.down:
            self._resume("provider answered")

    def on_failure(
        self, outcome: Outcome, *, probe: bool, answered: bool = True, foreign: bool = False
    ) -> bool:
        """Note a failed attempt; True when it must not be charged to its request.
        `answered`: whether the provider has answered the lane once in this process (if
        not, `unanswered_streak` failures pause it). `foreign`: a reply not in the provider's
        format where replies were in it before (see the module doc): outage-type whatever
        its outcome, which is `invalid_response` as a model's unusable answer's is."""
        if not foreign and outcome not in OUTAGE_OUTCOMES:
            # A 429 or a bad answer is the provider talking: it is up (the probe got through).
            self._streak = 0
            if self.down:
                self._resume(f"provider replied ({outcome.value})")
            return False
        if self.down:
            if probe:
                self._next_wait = min(self._next_wait * 2, self.policy.probe_cap_s)
            return True
        now = self._clock()
        if self._streak == 0:
            self._streak_since = now
        self._streak += 1
        streak = self.policy.streak if answered else self.policy.unanswered_streak
        if self._streak >= streak and now - self._streak_since >= self.policy.after_s:
            self._pause(FOREIGN_FAILURES if foreign else f"{outcome.value} failures")
            return True
        return False

    def _pause(self, failures: str) -> None:
        """Pause the lane; `failures` names the last of the streak ("timeout failures")."""
        self._up.clear()
        self._next_wait = self.policy.probe_base_s
        self._started = self._clock()
        self._started_at = datetime.now(UTC)
        self.probes = 0
        self.cause = (
            f"{self._streak} {failures} in a row over "
            f"{self._started - self._streak_since:.0f}s"
        )
        self._on_pause(self.cause)

    def _resume(self, why: str) -> None:
        self._up.set()
        self._on_resume(self.record(ended=why))
        self._streak = 0

    def record(self, *, ended: str) -> dict[str, Any]:
        """The pause so far as a `logs/pauses.jsonl` line."""
        return {
            "started_at": self._started_at.isoformat() if self._started_at else None,
            "ended_at": datetime.now(UTC).isoformat(),
            "seconds": round(self._clock() - self._started, 3),
            "probes": self.probes,
            "cause": self.cause,
            "ended": ended,
        }


def append_pause(run_dir: Path, line: dict[str, Any]) -> None:
    """One pause, appended to `logs/pauses.jsonl` (a full disk skips it; it is a record)."""
    append_record_line(run_dir / PAUSES_FILE, line)


def read_pauses(run_dir: Path | str) -> list[dict[str, Any]]:
    """Every recorded pause of a run folder, oldest first (none if the file is absent)."""
    return read_record_lines(Path(run_dir) / PAUSES_FILE)
