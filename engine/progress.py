"""A live per-model table while a campaign dispatches: done/planned, rate, retries, ETA.

A sweep runs for hours; the person watching needs to see at a glance which lane is slow,
which is retrying (and why) and which has stopped, without reading logs. The display is a
rich `Live` table redrawn from the lanes' counters. When the console is not a terminal (CI,
`nohup`, redirected output) it draws no table, so logs stay clean, but writes one line of
every lane's count every `LINE_EVERY_S`: a run paced to hours by a low `tpm`, say, otherwise
said nothing between its first line and its last.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from engine.console_lines import (
    LINE_EVERY_S,
    SIGNAL_AGAIN,
    PeriodicLines,
    StopWait,
    duration,
    held_text,
    longest_stop_wait,
    stop_wait_text,
)
from engine.console_tables import keep_whole
from engine.lanes import HALTED, LaneState, LaneStats


def render(lanes: list[LaneStats]) -> Table:
    """The table for the current counters (also usable on its own, e.g. by `status`)."""
    table = Table(title="dutchbook dispatch", caption=stopping_text(lanes), expand=False)
    for column in (
        "model",
        "state",
        "done/planned",
        "rate/s",
        "in flight",
        "cap",
        "retries by cause",
        "ETA",
    ):
        table.add_column(
            column, justify="left" if column in ("model", "state", "retries by cause") else "right"
        )
    for s in lanes:
        retries = ", ".join(f"{k} {v}" for k, v in sorted(s.retries.by_cause.items())) or "-"
        gave_up = s.given_up  # as the progress line and the summary count them
        if gave_up:
            retries += f" (gave up {gave_up})"
        state = _state_text(s)
        table.add_row(
            Text(s.model),  # user text (a model name, a provider's words), never markup
            Text(state),
            f"{s.done}/{s.planned}",
            f"{s.rate_per_s:.1f}",
            str(s.in_flight),
            str(s.cap),
            retries,
            "-" if s.state in HALTED else duration(s.eta_s),
        )
    # A long model name folds as narrow as the terminal needs; done/planned is never cut
    # ("123456/3…"); a Live display cannot be printed wider than its terminal.
    keep_whole(table, text_min=None)
    return table


def stopping_text(lanes: list[LaneStats]) -> str | None:
    """While a stop waits for attempts in flight, how many and how long at most (the table's
    caption, the progress line's tail); None otherwise."""
    stop = longest_stop_wait(StopWait(wait, s.stop_wait_cut, s.in_flight) for s in lanes
                             if (wait := s.stop_wait_s) is not None)  # fmt: skip
    if stop is None:
        return None
    return f"{stop_wait_text(stop.in_flight, stop.wait_s, stop.cut)}; {SIGNAL_AGAIN}"


def _state_text(s: LaneStats) -> str:
    """The state column: the state, and why (the lane's message, or the provider's hold). A
    lane that gave requests up says "gave up" or "done in part" alone: its counts are in the
    row's other columns, and said whole the cell wrapped over five lines at 80 columns."""
    if waiting := s.batch_waiting():  # whole: the jobs' words and ages are its point
        return f"{s.state.value}: {waiting}"
    why = s.message or held_text(s.held_now_s, s.held_by)
    return f"{s.state.value}: {why[:60]}" if why else s.state_said.partition(":")[0]


#: The most lanes a progress line names one by one; more are summed up (a campaign of 1,000
#: models wrote a line of 40 KB).
LINE_LANES = 8


def progress_line(lanes: list[LaneStats], elapsed_s: float) -> str:
    """One plain line of every lane's count, rate and time left, for a log; with more than
    `LINE_LANES` lanes, their total and how many are in each state. While a stop waits for
    attempts in flight, the line ends saying so (`stopping_text`)."""
    line = _counts_line(lanes, elapsed_s)
    stopping = stopping_text(lanes)
    return line if stopping is None else f"{line} — {stopping}"


def _counts_line(lanes: list[LaneStats], elapsed_s: float) -> str:
    """`progress_line` but for a stop's wait."""
    head = f"dispatch {duration(elapsed_s)}: "
    if len(lanes) > LINE_LANES:
        done, planned = sum(s.done for s in lanes), sum(s.planned for s in lanes)
        rate = sum(s.rate_per_s for s in lanes)
        states = Counter(s.state_said.partition(":")[0] for s in lanes)
        by_state = ", ".join(f"{n:,} {state}" for state, n in sorted(states.items()))
        return (
            head + f"{len(lanes):,} models {done:,}/{planned:,} ({rate:.1f}/s, "
            f"ETA {duration(_last_to_finish_s(lanes))}; {by_state})"
        )
    return head + "; ".join(_lane_part(s) for s in lanes)


def _last_to_finish_s(lanes: list[LaneStats]) -> float | None:
    """When the last lane still asking should be done: lanes run side by side, so the
    campaign's time left is its slowest lane's, not all that is left over all the rates (a
    lane of 1,000 at 10/s beside one of 10 at 1,000/s has 100 s left, not 1). None when
    any such lane's time left is not known (its provider down, no answer yet)."""
    left = [s.eta_s for s in lanes if s.state not in HALTED]
    if any(eta is None for eta in left):
        return None
    return max((eta for eta in left if eta is not None), default=0.0)


def _lane_part(s: LaneStats) -> str:
    """One lane in a progress line: while its provider is down, for how long instead of a
    rate and a time left that a pause makes meaningless; a lane that halted, no time left."""
    if (said := s.state_said) != s.state.value:  # gave requests up: its counts are said
        return f"{s.model} {said}"
    state = "" if s.state is LaneState.RUNNING else f" {s.state.value}"
    counts = f"{s.model}{state} {s.done:,}/{s.planned:,}"
    if s.state is LaneState.PROBING:
        return f"{counts} (provider down {duration(s.paused_now_s)})"
    if s.state in HALTED:
        return counts
    if waiting := s.batch_waiting():  # not "0.0/s, ETA ?" for the hours its jobs take
        return f"{counts} {waiting}"
    held = held_text(s.held_now_s, s.held_by)
    held = f", {held}" if held else ""
    return f"{counts} ({s.rate_per_s:.1f}/s{held}, ETA {duration(s.eta_s)})"


class LiveProgress:
    """`engine.dispatch.ProgressSink` drawing with rich; a line every `line_every_s` (None:
    never) when not on a terminal."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        force: bool = False,
        line_every_s: float | None = LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console(stderr=True, emoji=False)  # names as written
        self.enabled = force or self.console.is_terminal
        self._live: Live | None = None
        self._lanes: list[LaneStats] = []
        self._line_every_s = None if self.enabled else line_every_s
        self._clock = clock
        self._lines: PeriodicLines | None = None

    def start(self, lanes: list[LaneStats]) -> None:
        self._lanes = lanes
        self._lines = PeriodicLines(self.console, self._line_every_s, self._clock)
        if self.enabled:
            self._live = Live(
                render(lanes), console=self.console, auto_refresh=False, transient=False
            )
            self._live.start()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(render(self._lanes), refresh=True)
        elif self._lines is not None:
            self._lines.offer(lambda elapsed: progress_line(self._lanes, elapsed))

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
