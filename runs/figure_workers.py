"""The report's figures drawn in two worker processes, warmed while the run plans (issue 12).

A campaign's phases outside dispatch run on one core, and on this 2-core machine the other
is idle then: the simulator (or a remote provider) keeps it busy during dispatch only. So
`dutchbook run` starts `FigureWorkers` first thing: two spawned processes that import
matplotlib and the figure modules (about 0.4 s of the report's 1.6 s, and more under load)
while this process imports the rest and plans. After scoring, each draws a share of the
figures (`SHARES`: figure 1, three books of three panels, costs about as much as the other
seven together) while this one writes the tables.

The figures are the same `runs.report_figures` calls on the same inputs as in one process,
so the files are byte-identical (tested). Spawned, not forked: by then this process holds
threads (polars' pool, the executor's own) that a fork would copy in an unknown state.
The workers ignore SIGINT, so a Ctrl-C meant for the campaign (a soft stop, then scoring
and the report) does not kill them; they end when told, when this process closes them
(unused ones at once: a run that fails early does not wait for their imports), or when
their pipe closes because this process died. A worker that dies (killed, out of memory)
fails the report with `FigureWorkerDied`, one line saying so; a figure that raises raises
the same error here as in one process. Either way the run folder keeps its answers and
scores, and `dutchbook report DIR` draws the report again.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runs.report_figures import Figure

#: The figure numbers each worker draws (`runs.report_figures.FIGURES`), one share each.
SHARES: tuple[tuple[int, ...], ...] = ((1,), (2, 3, 4, 5, 6, 7, 8))


class FigureWorkerDied(RuntimeError):
    """A figure worker ended before its figures were drawn (killed, out of memory)."""


def _warm() -> None:
    """Import what drawing needs, so that none of it is paid when the figures are due.

    Only a head start: without matplotlib the report says so itself (`runs.figures`), and
    a module that fails to import fails again, with its error, when its figure is drawn."""
    try:
        from runs.report_figures import FIGURES, _style, module_of

        _style.pyplot()
        for number, _, _ in FIGURES:
            module_of(number)
    except ImportError:
        pass


def _draw_share(
    run_dir: Path, summary: Mapping[str, Any], out_dir: Path, numbers: tuple[int, ...]
) -> list[Figure]:
    """One worker's share of `runs.report_figures.draw_all`, from the run folder's inputs."""
    from runs.report_figures import FigureInputs, draw_all

    return draw_all(FigureInputs.from_run(run_dir, summary), out_dir, numbers)


def _serve(conn: Connection) -> None:
    """A worker: warm up, then draw each share asked for until told to stop (None) or the
    pipe closes; an error goes back to be raised in the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the campaign's Ctrl-C is not ours
    _warm()
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone
            return
        if job is None:
            return
        try:
            conn.send(("ok", _draw_share(*job)))
        except Exception as exc:
            try:
                conn.send(("error", exc))
            except Exception:  # an exception that does not pickle: its text, then
                conn.send(("error", RuntimeError(traceback.format_exc())))


#: The workers' niceness while they warm up beside this process: on two cores, three busy
#: processes at equal priority would take a third of a core from its start-up and planning.
WARM_NICENESS = 19


def _lower_priority(process: BaseProcess) -> None:
    """Lower a worker's priority (`WARM_NICENESS`) as soon as it exists: before its
    interpreter's own start-up, not after."""
    if process.pid is not None and hasattr(os, "setpriority"):
        with contextlib.suppress(OSError):  # gone already, or not allowed: only slower
            os.setpriority(os.PRIO_PROCESS, process.pid, WARM_NICENESS)


class FigureWorkers:
    """Warmed figure workers (one per share): `draw` uses them, `close` ends them."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._workers: list[tuple[BaseProcess, Connection]] = []
        self._used = False
        for _ in SHARES:
            parent_end, child_end = context.Pipe()
            process = context.Process(target=_serve, args=(child_end,), daemon=True,
                                      name="dutchbook-figures")  # fmt: skip
            process.start()
            _lower_priority(process)
            child_end.close()  # the child's copy: its death then reads as EOF here
            self._workers.append((process, parent_end))

    def draw(self, summary: Mapping[str, Any], out_dir: Path) -> list[Figure]:
        """Every figure of `draw_all` into `out_dir` (a run folder's `report/`), in order."""
        if not self._workers:
            raise RuntimeError("the figure workers were closed")
        self._used = True
        run_dir = out_dir.parent
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            for (_, conn), numbers in zip(self._workers, SHARES, strict=True):
                conn.send((run_dir, dict(summary), out_dir, numbers))
            replies = [conn.recv() for _, conn in self._workers]
        except (EOFError, BrokenPipeError, ConnectionResetError):  # a worker's end closed
            self.close()
            raise FigureWorkerDied(
                f"a figure worker died before drawing the report's figures; the run's answers "
                f"and scores are kept: `dutchbook report {run_dir}` draws the report again"
            ) from None
        figures: list[Figure] = []
        for status, value in replies:
            if status == "error":
                raise value
            figures.extend(value)
        return sorted(figures, key=lambda figure: figure.number)

    def close(self) -> None:
        """End the workers, without waiting: told to stop once used (they are idle; their
        interpreters' own exit takes a while, this process need not wait for it), else
        terminated at once (one still importing would otherwise hold up a run that failed
        early). multiprocessing reaps them (`active_children`, or at exit)."""
        workers, self._workers = self._workers, []
        for process, conn in workers:
            if self._used:
                with contextlib.suppress(OSError):  # already gone
                    conn.send(None)
            else:
                process.terminate()
            conn.close()

    def __enter__(self) -> FigureWorkers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
