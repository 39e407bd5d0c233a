"""A live per-model table while a campaign dispatches: done/planned, rate, retries, ETA.

A sweep runs for hours; the person watching needs to see at a glance which lane is slow,
which is retrying (and why) and which has stopped, without reading logs. The display is a
rich `Live` table redrawn from the lanes' counters; it draws nothing when the console is not
a terminal (CI, redirected output), so logs stay clean there.
"""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from engine.console_tables import keep_whole
from engine.lanes import LaneStats


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def render(lanes: list[LaneStats]) -> Table:
    """The table for the current counters (also usable on its own, e.g. by `status`)."""
    table = Table(title="dutchbook dispatch", expand=False)
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
        gave_up = s.retries.exhausted + s.retries.answer_budget_spent
        if gave_up:
            retries += f" (gave up {gave_up})"
        state = s.state.value if not s.message else f"{s.state.value}: {s.message[:60]}"
        table.add_row(
            Text(s.model),  # user text (a model name, a provider's words), never markup
            Text(state),
            f"{s.done}/{s.planned}",
            f"{s.rate_per_s:.1f}",
            str(s.in_flight),
            str(s.cap),
            retries,
            _duration(s.eta_s),
        )
    # A long model name folds as narrow as the terminal needs; done/planned is never cut
    # ("123456/3…"); a Live display cannot be printed wider than its terminal.
    keep_whole(table, text_min=None)
    return table


class LiveProgress:
    """`engine.dispatch.ProgressSink` drawing with rich; inert when not on a terminal."""

    def __init__(self, console: Console | None = None, *, force: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = force or self.console.is_terminal
        self._live: Live | None = None
        self._lanes: list[LaneStats] = []

    def start(self, lanes: list[LaneStats]) -> None:
        self._lanes = lanes
        if self.enabled:
            self._live = Live(
                render(lanes), console=self.console, auto_refresh=False, transient=False
            )
            self._live.start()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(render(self._lanes), refresh=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
