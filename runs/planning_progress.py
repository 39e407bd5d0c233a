"""A count of the queries rendered so far while a campaign is planned, against their total.

Planning renders every prompt: the paper's campaign (402,100 arm views rendered from the
embedded data) takes about 16 s here, and a user watching `dutchbook plan` or the start of
`dutchbook run` saw a spinner or nothing at all for that long, with no way to tell a slow
plan from a stuck one. `runs.planner.estimate` reports its count every
`runs.planner.PROGRESS_EVERY` queries; this draws it as a rich progress bar (count, total,
time left), transient so the terminal keeps only what follows. Like dispatch's table
(`engine.progress`) it draws nothing when the console is not a terminal, so redirected output
and logs stay clean; there it writes one plain line a minute instead (`LINE_EVERY_S`, as
dispatch does), since planning 15 million queries took two minutes without a word.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column

from engine.console_lines import LINE_EVERY_S, PeriodicLines, duration


class PlanningProgress:
    """`with PlanningProgress(console, name) as shown: estimate(..., progress=shown.update)`."""

    def __init__(
        self,
        console: Console,
        name: str,
        *,
        enabled: bool | None = None,
        lines: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = console.is_terminal if enabled is None else enabled
        self._name = name
        # Plain lines: never while the bar is drawn, nor without `lines`.
        every = None if self.enabled or not lines else LINE_EVERY_S
        self._lines = PeriodicLines(console, every, clock)
        self._progress = Progress(
            # The campaign's name is the user's text: never read as rich markup.
            # A long name is what gives way, never the count or the times: all of it fits
            # 80 columns (the name cut to 28, then 12 + 13 + 7 + 7 and four spaces).
            TextColumn(
                "{task.description}",
                markup=False,
                table_column=Column(no_wrap=True, overflow="ellipsis", max_width=28),
            ),
            BarColumn(bar_width=12),
            MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=13)),
            TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
            TimeRemainingColumn(table_column=Column(no_wrap=True, min_width=7)),
            console=console,
            transient=True,
            disable=not self.enabled,
        )
        self._task: TaskID = self._progress.add_task(
            f"planning {name}: queries", total=None, start=False
        )
        #: The last (rendered, total) reported, for a caller that wants the figures.
        self.last: tuple[int, int] | None = None

    def __enter__(self) -> PlanningProgress:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    def update(self, rendered: int, total: int) -> None:
        """`rendered` of `total` arm views of the queries (shared ones counted per arm)."""
        if self.last is None:
            self._progress.start_task(self._task)
        self.last = (rendered, total)
        self._progress.update(self._task, completed=rendered, total=total)
        self._lines.offer(
            lambda elapsed: f"planning {self._name} {duration(elapsed)}: "
            f"{rendered:,}/{total:,} queries rendered"
        )
