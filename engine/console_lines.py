"""A plain progress line for a console that is not a terminal (dispatch's and planning's),
written so it can never stop the work it reports on, and the durations such lines show.

The lines go to the command's own output, which may be a pipe its reader closed (`run ... |
head`) or a file on a full disk. Printed through rich, a closed pipe became `SystemExit`
inside the event loop and ended a run mid-dispatch with a page of tracebacks; a full disk
stopped the task that also keeps `logs/lanes.json` current. A line that cannot be written is
dropped, and the caller writes no more; the command's own next print says what failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rich.console import Console

#: How often a console that is not a terminal gets a plain progress line (a step shorter
#: than this gets none).
LINE_EVERY_S = 60.0


def duration(seconds: float | None) -> str:
    """`m:ss`, or `h:mm:ss` from an hour on; `?` when not known."""
    if seconds is None:
        return "?"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and its noun in agreement: '1 request', '2,000 requests', '1 query', '3 queries'
    (`many`: the plural when it is not `word` + "s"). Here, not in `engine.audit`, so that
    the modules `engine.audit` itself imports can use it."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


#: A provider's hold shorter than this is not shown: Groq's sub-second Retry-After would
#: flicker "held 0:00" in and out of the table.
HOLD_SHOWN_FROM_S = 1.0


def held_text(held_s: float | None, by: str | None) -> str:
    """`held 4:59 more by Retry-After` while a provider holds a lane; "" otherwise."""
    if not held_s or held_s < HOLD_SHOWN_FROM_S:
        return ""
    return f"held {duration(held_s)} more by {by or 'the provider'}"


class StopWait(NamedTuple):
    """A stop's wait for attempts in flight: how long at most, whether it then cuts them
    (`stop_wait_text`'s `cut`), and how many."""

    wait_s: float
    cut: bool
    in_flight: int


def longest_stop_wait(waits: Iterable[StopWait]) -> StopWait | None:
    """The lanes' stop waits as one (dispatch's lines and table, `dutchbook status`): the
    longest, which says why the stop ends (its `cut`), with every lane's attempts in flight;
    None when no lane's stop waits."""
    waits = list(waits)
    if not waits:
        return None
    longest = max(waits)
    return longest._replace(in_flight=sum(w.in_flight for w in waits))


def stop_wait_text(in_flight: int, wait_s: float | None, cut: bool = False) -> str:
    """What a run a stop waits on says (dispatch's table and lines, `dutchbook status`): the
    attempts in flight it waits for, and how long at most: an attempt sent before the stop
    ends by its `timeout_s`, and a hung provider held a stop that long without a word. `cut`:
    the wait is cut short, the provider not having answered yet
    (`engine.outage.OutagePolicy.unanswered_stop_wait_s`)."""
    its = "its" if in_flight == 1 else "their"
    why = (
        "no answer yet from the provider: then cut, and asked again by the next run"
        if cut else f"{its} timeout_s"
    )  # fmt: skip
    return (
        f"stopping: waiting for {plural(in_flight, 'attempt')} in flight, up to "
        f"{duration(wait_s)} more ({why})"
    )


#: What dispatch's table and lines add to `stop_wait_text`: the run's own signal handler
#: (`runs.pipeline.StopSignals`) cancels at the second.
SIGNAL_AGAIN = "signal again to stop at once"


def lane_state_said(state: str, answered: int, planned: int | None, gave_up: int | None) -> str:
    """A lane's state as dispatch's table and progress line, and `dutchbook status`, say it.

    "done" is a lane that asks nothing more this run; one that gave every request up (each
    reply refused, a bad key) read "done" beside "56 gave up", which a user reads as success.
    Such a lane says how much it answered: "gave up: none of 56 answered", or "done in part:
    44 of 56 answered, 12 gave up". `answered` counts earlier runs' answers too; `gave_up`, the
    requests given up this run (None: not known, a `lanes.json` older than the count). The
    state itself (`logs/lanes.json`, `status --json`'s `lane_state`) stays "done"."""
    if state != "done" or not gave_up or planned is None:
        return state
    if not answered:
        return f"gave up: none of {planned:,} answered"
    return f"done in part: {answered:,} of {planned:,} answered, {gave_up:,} gave up"


def write_line(console: Console, line: str) -> bool:
    """Write `line` and a line break to the console's file, flushed; False when that failed."""
    try:
        console.file.write(line + "\n")
        console.file.flush()
    except Exception:  # any failure here is the output's, never the work's
        return False
    return True


class PeriodicLines:
    """Plain lines to `console`, one each `every_s` at most, counted from when it is made;
    none once one could not be written (`write_line`). `every_s` None: never a line."""

    def __init__(
        self,
        console: Console,
        every_s: float | None = LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._console, self._every_s, self._clock = console, every_s, clock
        self.started = clock()
        self._due = None if every_s is None else self.started + every_s

    def offer(self, line_at: Callable[[float], str]) -> None:
        """Write `line_at(seconds since started)` if a line is due."""
        if self._due is None or self._every_s is None:
            return
        now = self._clock()
        if now < self._due:
            return
        written = write_line(self._console, line_at(now - self.started))
        self._due = now + self._every_s if written else None
