"""The report's figures drawn in two worker processes, warmed while the run plans (issue 12).

A campaign's phases outside dispatch run on one core, and on this 2-core machine the other
is idle then: the simulator (or a remote provider) keeps it busy during dispatch only. So
`dutchbook run` starts `FigureWorkers` first thing, before it imports the pipeline: two
spawned processes that import matplotlib and the figure modules (about 0.4 s of the report's
1.6 s, and more under load) while this process imports the rest and plans. After dispatch
one of them reads the audit (`audit`) while this process scores; once the report's
statistics are known, each draws
a share of the figures (`SHARES`: figure 1, three books of three panels, costs about as
much as the other seven together), the ones that do not show the repeated-elicitation
section while this process computes it (`runs.report.write`).

The figures are the same `runs.report_figures` calls on the same inputs as in one process,
so the files are byte-identical (tested). Spawned, not forked: by then this process holds
threads (polars' pool, the executor's own) that a fork would copy in an unknown state.
The workers ignore SIGINT, SIGTERM and SIGHUP, so a Ctrl-C, a SIGTERM or a terminal's hangup
meant for the campaign (a soft stop, then scoring and the report) does not kill them: each
reaches the whole process group (a terminal's Ctrl-C or hangup; `timeout`, `kill -TERM
-PGID`, a service manager stopping its unit), and a SIGTERM so sent used to end the workers,
so that the run, having stopped softly, failed its report. They end when told, when this
process closes them (unused ones killed at once: a run that fails early does not wait for
their imports), or when their pipe closes because this process died; told to stop, a worker
ends without the interpreter's teardown (`_exit_now`), which this process's own exit would
wait for. A worker that dies (killed, out of memory, or never started: a Python it may not
run) leaves its work to this process: every call not answered yet is made here, as without
workers, and one line on stderr says so (`_fall_back`). So does one that stops making
progress (stopped by SIGSTOP or a debugger, or blocked without using the CPU: `_Watch`),
which is killed first: a stuck worker used to keep `run` waiting after scoring for ever. A
run that ends by an exception (a Ctrl-C or SIGTERM while it waits on a worker among them)
kills its workers, which ignore SIGTERM: multiprocessing's exit joins its children, and a
worker stopped or still drawing kept the interrupted run from ending until a second signal.
The workers are a head start, never
a condition of the report: a dead one used to end `run` before it scored, when it was the
audit's, with advice (`dutchbook report`) that needed the scores it had not written. A
figure that raises raises the same error here as in one process.

`DUTCHBOOK_FIGURE_WORKERS=0` (`WORKERS_ENV`, read by `workers_wanted`) starts none: the
run reads the audit and draws the figures in its own process, as a campaign too big for
the workers does (`runs.pipeline.WORKERS_MAX_QUERIES`), the same files, and says nothing of
it (the note is for a worker that died). For a one-core machine, where two more processes
only compete, or where spawning a process is not allowed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

import psutil

from engine.housekeeping import HOUSEKEEPING_NICE, yield_cpu
from runs.signals import STOP_SIGNALS, held

if TYPE_CHECKING:
    from engine.audit import Audit
    from runs.report_figures import Figure

T = TypeVar("T")

#: The figure numbers each worker draws (`runs.report_figures.FIGURES`), one share each.
SHARES: tuple[tuple[int, ...], ...] = ((1,), (2, 3, 4, 5, 6, 7, 8))
#: The niceness of a worker's warm-up thread: on two cores, three busy processes at equal
#: priority would take a third of a core from this process's start-up and planning. Only
#: the warm-up is lowered, in its own thread (`engine.housekeeping.yield_cpu`), and not to
#: 19: a worker lowered as a whole to 19 (as before) also drew at 19, and with two nice-0
#: busy loops beside the run its report still waited after more than 3 minutes; a warm-up
#: thread at 19 that the first job must wait for kept the run 70-160 s past its report. At
#: 10 (`HOUSEKEEPING_NICE`, why there) those runs ended in 27-33 s; without the busy loops
#: it cost the benchmark's whole run 0.15-0.7 s, planning 0.09 s (`docs/performance.md`,
#: the session from 05:30 UTC).
WARM_NICENESS = HOUSEKEEPING_NICE
#: How long `close(kill=True)` waits for each killed worker to be gone (a SIGKILL takes
#: effect in milliseconds; the bound only keeps a stuck reap from holding the run).
KILLED_WAIT_S = 5.0


#: How often a wait for a worker's reply looks at the worker (`_Watch`); a reply ends the
#: wait at once, whatever this is.
POLL_S = 0.5
#: A worker stopped (SIGSTOP sent to it alone, a debugger) for this long of a wait is taken
#: for stuck; a stop as short as a debugger's look is not.
STOPPED_S = 5.0
#: A worker whose CPU time does not advance for this long of a wait is taken for stuck. A
#: worker drawing or reading the audit is on the CPU all along, however big the report
#: (figure 1, the biggest, draws in about 1 s at the benchmark's scale; a slower figure only
#: advances its CPU time for longer); at nice 10 beside busy processes its warm-up still
#: gets a share of a core each scheduling period. A worker waits on nothing but this
#: process, which is reading its pipe while it waits.
STALLED_S = 60.0
#: Where the worker cannot be looked at (psutil refused), the wait's only bound.
UNSEEN_S = 1800.0


#: The environment variable that turns the workers off: "0" starts none (`workers_wanted`).
WORKERS_ENV = "DUTCHBOOK_FIGURE_WORKERS"


def workers_wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `dutchbook run` starts its figure workers: not where `WORKERS_ENV` is "0";
    unset, empty or the number of workers (`SHARES`'s), as by default. Any other value
    raises ValueError with the line to say: a count the run cannot honour ("1", "-1",
    "two") is refused rather than read as either. False where the report draws no figures
    (`runs.figures_env.FIGURES_ENV`, whose value is checked alike, after this one's)."""
    from runs.figures_env import figures_wanted

    value = environ.get(WORKERS_ENV, "")
    if value in ("", str(len(SHARES))):
        return figures_wanted(environ)
    if value == "0":
        figures_wanted(environ)  # a value it does not understand is said all the same
        return False
    raise ValueError(
        f"{WORKERS_ENV}={value!r} is not understood: set it to 0 to draw the report in the "
        f"run's own process, or to {len(SHARES)} (or leave it unset) for the "
        f"{len(SHARES)} figure workers"
    )


#: What `_fall_back` says, once, on stderr, for a worker that died.
FELL_BACK = (
    "note: a figure worker ended before its work was done (killed, or out of memory); "
    "the report is drawn in this process instead"
)
#: What `_fall_back` says for a worker that stopped making progress (`_Watch`).
STUCK = (
    "note: a figure worker stopped making progress (stopped, or stuck) and was ended; "
    "the report is drawn in this process instead"
)


def _warm() -> None:
    """Import what drawing and the audit need, so that none of it is paid when due.

    Only a head start: without matplotlib the report says so itself (`runs.figures`), and
    a module that fails to import fails again, with its error, when it is used."""
    try:
        import runs.audit  # noqa: F401
        from runs.report_figures import FIGURES, _style, module_of

        _skip_set_docstrings()
        _style.pyplot()
        for number, _, _ in FIGURES:
            module_of(number)
    except ImportError:
        pass


def _skip_set_docstrings() -> None:
    """Spare this worker matplotlib's writing of a `set()` signature and docstring for each
    of its ~100 artist classes as `pyplot` imports them: about a third of that import, 0.13-
    0.17 s of CPU in each worker's warm-up (`docs/performance.md`, 2026-12-05 from 09:03 UTC).
    Only `help()` reads them, and nothing calls `help()` in a worker, whose process is ours
    (never the user's session, where `runs.report_figures` may be imported: they keep them).

    `Artist.set` itself reads neither; the flag `_autogenerated_signature` is still set,
    since `Artist.__init_subclass__` gives a class its own `set` only when its parent's has
    it. Nothing is changed when matplotlib's artists are imported already (too late to
    matter) or when this private hook is gone (another matplotlib): the figures are the same
    files either way (`tests/report/test_figure_workers.py` compares them byte for byte with
    those drawn in a process that writes the docstrings)."""
    if "matplotlib.artist" in sys.modules:
        return
    from matplotlib import artist

    hook = "_update_set_signature_and_docstring"
    if not isinstance(artist.Artist.__dict__.get(hook), classmethod):
        return

    def _mark_only(cls: type) -> None:
        cls.set._autogenerated_signature = True  # type: ignore[attr-defined]

    setattr(artist.Artist, hook, classmethod(_mark_only))


def _draw_share(
    run_dir: Path, summary: Mapping[str, Any], out_dir: Path, numbers: tuple[int, ...]
) -> list[Figure]:
    """One worker's share of `runs.report_figures.draw_all`, from the run folder's inputs."""
    from runs.report_figures import FigureInputs, draw_all, reads_of

    inputs = FigureInputs.from_run(run_dir, summary, reads=reads_of(numbers))
    return draw_all(inputs, out_dir, numbers)


def _run_audit(run_dir: Path) -> Audit:
    from runs.audit import run_audit

    return run_audit(run_dir)


#: What sending to a parent that has died raises (its end of the pipe closed with it).
_PARENT_GONE = (BrokenPipeError, ConnectionResetError)


def _serve(conn: Connection) -> None:
    """A worker: warm up, then make each call asked for, in order, until told to stop (None)
    or the pipe closes; an error goes back to be raised in the parent. A parent that died
    meanwhile (killed during the report) ends the worker quietly: the run's own terminal
    must not get a worker's traceback about a pipe nobody reads."""
    # The campaign's signals, sent to its whole group; held since the worker was started
    # (`FigureWorkers`), so none arrived before they were ignored.
    for sent_to_the_group in STOP_SIGNALS:
        signal.signal(sent_to_the_group, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    warm_up = threading.Thread(target=_warm_lowered, daemon=True)
    warm_up.start()
    while True:
        try:
            job = conn.recv()
        except (EOFError, *_PARENT_GONE):  # the parent is gone
            return
        if job is None:
            _exit_now()
        warm_up.join()  # the first job's imports are the warm-up's (later: already ended)
        function, args = job
        try:
            reply: tuple[str, Any] = ("ok", function(*args))
        except Exception as exc:
            reply = ("error", exc)
        try:
            _send(conn, reply)
        except _PARENT_GONE:
            return


def _exit_now() -> NoReturn:
    """End this worker at once, without the interpreter's teardown: a worker holds nothing
    to save (its replies are sent), and `dutchbook run` waits for its children at exit
    (multiprocessing joins them), so tearing down matplotlib's modules kept every campaign
    0.14-0.19 s past its report (`docs/performance.md`, the session of 2026-12-03 from 05:31)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _send(conn: Connection, reply: tuple[str, Any]) -> None:
    """Send `reply`; a result or an exception that does not pickle goes as an error with
    the traceback's text instead."""
    try:
        conn.send(reply)
    except _PARENT_GONE:
        raise
    except Exception:
        conn.send(("error", RuntimeError(traceback.format_exc())))


def _warm_lowered() -> None:
    """`_warm` in this thread at `WARM_NICENESS`; the worker's main thread, which draws,
    keeps its priority."""
    yield_cpu(WARM_NICENESS)
    _warm()


class _Watch:
    """Whether a worker awaited for a reply is stuck: stopped for `STOPPED_S`, or its CPU
    time still for `STALLED_S`, of this wait. Time counts as this process sees it, a step of
    at most two polls between looks: a Ctrl-Z of the whole group (this process stopped
    too) does not count against the worker once both go on."""

    def __init__(self, pid: int | None) -> None:
        self._process: psutil.Process | None = None
        with contextlib.suppress(psutil.Error, ValueError, TypeError):
            self._process = psutil.Process(pid)
        self._cpu: float | None = None
        self._cpu = self._look()[0]
        self._last = time.monotonic()
        self._stopped = self._still = self._unseen = 0.0

    def _look(self) -> tuple[float | None, bool]:
        """The worker's CPU seconds so far and whether it is stopped; None where unseen."""
        if self._process is None:
            return None, False
        try:
            with self._process.oneshot():
                times = self._process.cpu_times()
                status = self._process.status()
        except psutil.NoSuchProcess:  # gone: its pipe's end reads as EOF
            return self._cpu, False
        except psutil.Error:
            return None, False
        stopped = status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
        return times.user + times.system, stopped

    def stuck(self) -> bool:
        now = time.monotonic()
        step, self._last = min(now - self._last, 2 * POLL_S), now
        cpu, stopped = self._look()
        if cpu is None:
            self._unseen += step
            return self._unseen >= UNSEEN_S
        self._stopped = self._stopped + step if stopped else 0.0
        self._still = self._still + step if cpu == self._cpu else 0.0
        self._cpu = cpu
        return self._stopped >= STOPPED_S or self._still >= STALLED_S


@dataclass(frozen=True)
class Pending(Generic[T]):
    """A call sent to one worker; `result` waits for its reply (replies come in order), or
    makes the call here once the workers have died (`FigureWorkers._fall_back`)."""

    workers: FigureWorkers
    worker: int
    number: int
    function: Callable[..., T]
    args: tuple[Any, ...]

    def result(self) -> T:
        value: T = self.workers._reply(self)
        return value


@dataclass(frozen=True)
class Drawing:
    """Figures being drawn by the workers; `figures` waits for them, in the paper's order."""

    numbers: frozenset[int]
    shares: tuple[Pending[list[Figure]], ...]

    def figures(self) -> list[Figure]:
        drawn = [figure for share in self.shares for figure in share.result()]
        return sorted(drawn, key=lambda figure: figure.number)

    def joined(self, other: Drawing) -> Drawing:
        return Drawing(self.numbers | other.numbers, self.shares + other.shares)


class FigureWorkers:
    """Warmed figure workers (one per share): `audit` and `draw` use them, `close` ends
    them. Not thread-safe: one campaign's steps use them in turn."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        # Started now, not by the first worker's start: starting it unblocks SIGINT and
        # SIGTERM in this thread (CPython's own guard for that process), which would let
        # them reach the first worker before it ignores them. Started with them held, as it
        # ignores SIGINT and SIGTERM but not a hangup, which killed it when sent to the
        # group: the run's end then warned that it "died unexpectedly", and the one started
        # again printed a KeyError traceback for each semaphore of the scoring pool's.
        with held():
            resource_tracker.ensure_running()
        self._workers: list[tuple[BaseProcess, Connection]] = []
        self._sent: list[int] = []
        self._replies: list[list[tuple[str, Any]]] = []
        self._used = False
        #: Set once a worker died: every call not yet answered is made in this process.
        self._fell_back = False
        #: The answers of calls made here after the fall-back, by (worker, number).
        self._here: dict[tuple[int, int], tuple[str, Any]] = {}
        for _ in SHARES:
            parent_end, child_end = context.Pipe()
            process = context.Process(target=_serve, args=(child_end,), daemon=True,
                                      name="dutchbook-figures")  # fmt: skip
            with held():  # until the worker ignores them: a Ctrl-C in its start-up killed it
                process.start()
            child_end.close()  # the child's copy: its death then reads as EOF here
            self._workers.append((process, parent_end))
            self._sent.append(0)
            self._replies.append([])

    def audit(self, run_dir: Path) -> Pending[Audit]:
        """`runs.audit.run_audit(run_dir)` in the last worker (figure 1's draws first)."""
        return self._call(len(SHARES) - 1, _run_audit, run_dir)

    def draw(
        self, summary: Mapping[str, Any], out_dir: Path, numbers: Collection[int] | None = None
    ) -> Drawing:
        """Start drawing the figures of `draw_all` (or those `numbers`) into `out_dir`, a
        run folder's `report/`, each worker its share of them."""
        out_dir.mkdir(parents=True, exist_ok=True)
        chosen = frozenset(n for share in SHARES for n in share if numbers is None or n in numbers)
        shares = tuple(
            self._call(worker, _draw_share, out_dir.parent, dict(summary), out_dir, mine)
            for worker, share in enumerate(SHARES)
            if (mine := tuple(n for n in share if n in chosen))
        )
        return Drawing(chosen, shares)

    def _call(self, worker: int, function: Callable[..., T], *args: Any) -> Pending[T]:
        if not self._workers and not self._fell_back:
            raise RuntimeError("the figure workers were closed")
        self._used = True
        if not self._fell_back:
            try:
                self._workers[worker][1].send((function, args))
            except (BrokenPipeError, ConnectionResetError):  # its end closed: it died
                self._fall_back()
        self._sent[worker] += 1
        return Pending(self, worker, self._sent[worker] - 1, function, args)

    def _reply(self, pending: Pending[T]) -> T:
        replies = self._replies[pending.worker]
        while len(replies) <= pending.number and not self._fell_back:
            if not self._workers:
                raise RuntimeError("the figure workers were closed")
            process, conn = self._workers[pending.worker]
            try:
                if _replied(process, conn):
                    replies.append(conn.recv())
                else:
                    self._fall_back(STUCK)
            except (EOFError, ConnectionResetError):
                self._fall_back()
        if len(replies) > pending.number:
            status, value = replies[pending.number]
        else:
            status, value = self._made_here(pending)
        if status == "error":
            raise value
        result: T = value
        return result

    def _made_here(self, pending: Pending[T]) -> tuple[str, Any]:
        """`pending`'s call made in this process, once (`Drawing.figures` may be asked
        twice, as a worker's reply is)."""
        key = (pending.worker, pending.number)
        if key not in self._here:
            try:
                self._here[key] = ("ok", pending.function(*pending.args))
            except Exception as exc:
                self._here[key] = ("error", exc)
        return self._here[key]

    def _fall_back(self, said: str = FELL_BACK) -> None:
        """A worker died (or is stuck: `said` then says so): end them all and make every
        call not answered yet here.

        The others are killed and waited for, not left to finish their share: one still
        drawing would write its figures beside the same figures drawn here (a test's page
        once inlined a figure 1 being rewritten), so from now on only this process draws.
        Replies already received stand; the rest are made here, the same calls on the same
        inputs, hence the same files."""
        self.close(kill=True)
        self._fell_back = True
        with contextlib.suppress(OSError, ValueError):  # stderr closed: the report matters more
            print(said, file=sys.stderr, flush=True)

    def close(self, *, kill: bool = False) -> None:
        """End the workers: told to stop once used (they are idle; their interpreters' own
        exit takes a while, this process need not wait for it), else killed at once (one
        still importing would otherwise hold up a run that failed early; a SIGTERM it
        ignores once its handlers are set). multiprocessing reaps them (`active_children`,
        or at exit). With `kill`, every one is killed and waited for: none writes again."""
        workers, self._workers = self._workers, []
        for process, conn in workers:
            if self._used and not kill:
                with contextlib.suppress(OSError):  # already gone
                    conn.send(None)
            else:
                process.kill()
            conn.close()
        if kill:
            for process, _ in workers:
                process.join(KILLED_WAIT_S)

    def __enter__(self) -> FigureWorkers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Ended by an exception (a Ctrl-C or SIGTERM among them), the workers are killed: one
        # still drawing, or stopped, would hold this process's exit (multiprocessing joins
        # its children, and they ignore the SIGTERM it sends them first).
        if exc is None:
            self.close()
        else:
            self.close(kill=True)


def _replied(process: BaseProcess, conn: Connection) -> bool:
    """Wait until `conn` has something to read (a reply, or EOF: the worker died), True; or
    until the worker is taken for stuck (`_Watch`), False. A signal's exception (Ctrl-C, or
    SIGTERM as `runs.signals.stops_as_interrupt` raises it) ends the wait at once."""
    if conn.poll(POLL_S):  # the usual case: no need to look at the worker at all
        return True
    watch = _Watch(process.pid)
    while not conn.poll(POLL_S):
        if watch.stuck():
            return False
    return True
