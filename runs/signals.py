"""How `dutchbook` ends on SIGTERM and a hangup (SIGHUP), and what it does with a terminal
that hung up.

Outside dispatch (while a command imports, plans, scores or draws) both end the command as
Ctrl-C does: `KeyboardInterrupt`, which each command turns into one line and exit 130. By
default either signal killed the process without a word. During dispatch
`runs.pipeline.StopSignals` takes over and stops softly, keeping what is in flight.
Standard library only: `runs.cli` installs this before any command is imported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

#: Exit status after an interrupt: what a shell reports for a command killed by SIGINT.
EXIT_INTERRUPTED = 130
#: What an interrupted command says; a command adds what running it again does.
INTERRUPTED = "interrupted — run the same command again"
#: What an interrupted `dutchbook run` says once its folder holds a run, which running it
#: again resumes (tests and scripts look for it); before, `INTERRUPTED`. On stderr, as every
#: command's interrupt line, and as the last line of stdout too, unless stdout is stderr's
#: open file (a terminal, `2>&1`: said once; `runs.commands.run._end_interrupted`).
INTERRUPTED_MESSAGE = f"{INTERRUPTED} to resume"
#: Whether this process has said it was interrupted (`mark_interrupt_said`). typer turns a
#: Ctrl-C that lands in its own frames (between a command's end and the exit) into exit 130
#: without a word; `runs.cli.main` says the line then, unless a command already did.
_interrupt_said = False
#: Whether `stops_as_interrupt`'s handler raised `KeyboardInterrupt` that no command has said
#: yet: raised inside a finalizer (a weak reference's callback, an event loop's `__del__`),
#: Python prints "Exception ignored in" and drops it, and the run scored, reported and exited
#: 0 after a SIGTERM. `raise_if_stop_pending` raises it again where a command looks.
_stop_pending = False


def mark_interrupt_said() -> None:
    """Record that the interrupt's line was written (each place that writes it calls this)."""
    global _interrupt_said, _stop_pending
    _interrupt_said = True
    _stop_pending = False


def raise_if_stop_pending() -> None:
    """`KeyboardInterrupt` if a stop signal's was raised and dropped (`_stop_pending`): for
    the steps of a command between which a stop may land (after planning, around scoring and
    the report)."""
    global _stop_pending
    if _stop_pending:
        _stop_pending = False
        raise KeyboardInterrupt


def say_interrupted() -> None:
    """Write the interrupt's line to stderr (where stderr is still there), unless this process
    already said it."""
    if _interrupt_said:
        return
    mark_interrupt_said()
    with contextlib.suppress(OSError):
        sys.stderr.write(INTERRUPTED + "\n")
        sys.stderr.flush()


def exit_interrupted() -> NoReturn:
    """The interrupt's line (`say_interrupted`) and exit 130."""
    say_interrupted()
    raise SystemExit(EXIT_INTERRUPTED)


#: What stops a command: Ctrl-C, `kill`/`timeout`/a service manager, a terminal closing.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_signals_to_catch() -> tuple[signal.Signals, ...]:
    """The stop signals a command catches: Ctrl-C always; SIGTERM and a hangup unless they
    were ignored when it started (a hangup under `nohup`: the user asked that it not stop
    the command)."""
    return tuple(
        sig for sig in STOP_SIGNALS
        if sig == signal.SIGINT or signal.getsignal(sig) != signal.SIG_IGN
    )  # fmt: skip


def python_raises(sig: signal.Signals) -> bool:
    """Whether Python's own handler already raises `KeyboardInterrupt` for `sig`: Ctrl-C's,
    except where it started ignored (a script's background job), when Python installs none
    and a `kill -INT` goes unheard unless a handler is put in place."""
    return sig == signal.SIGINT and signal.getsignal(sig) is signal.default_int_handler


@contextlib.contextmanager
def held(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Hold `signals` back while the block runs (this thread's signal mask); one that came
    meanwhile is delivered, and its handler run, as soon as the block ends.

    For imports of compiled modules: orjson's module initialisation crashed the process
    (SIGSEGV, no message) when a Ctrl-C's `KeyboardInterrupt` was raised inside it, 30 ms
    into `dutchbook run`. A process started inside the block starts with them held too
    (the mask is inherited), which the figure workers use to ignore them before any can
    arrive. Where the platform has no signal masks, the block runs as is.

    The mask is this thread's: a signal sent to the process may still be taken by another
    thread that does not hold it, and its handler then runs at once. A command's modules
    are imported before it starts any thread, so there the hold is whole."""
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def deferred(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Note `signals` while the block runs, and deliver them to their own handlers once it
    ends: for code that runs Python callbacks from C which swallow exceptions. llama.cpp's
    vocabulary load logs through a ctypes callback, and a Ctrl-C (or SIGTERM, SIGHUP) whose
    `KeyboardInterrupt` was raised inside it was dropped without a word: `plan` printed the
    whole plan and `run` dispatched on. A mask (`held`) is not enough there, as another
    thread may take the signal while the main thread runs the callback. Outside the main
    thread, where handlers cannot be set, the block runs as is."""
    caught: list[int] = []

    def note(signum: int, frame: object) -> None:
        caught.append(signum)

    try:
        before = {sig: signal.signal(sig, note) for sig in signals}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


def terminal_fds() -> tuple[int, ...]:
    """Of stdout and stderr, those that are a terminal now (a hung-up one no longer says so)."""
    return tuple(fd for fd in (1, 2) if os.isatty(fd))


def leave_terminal(fds: tuple[int, ...]) -> None:
    """Point `fds` (stdout and stderr where they were the terminal) at /dev/null: after a
    hangup a write to the terminal fails, and the command's last line must not."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # flushing into a hung-up terminal fails
            stream.flush()
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            for fd in fds:
                os.dup2(null, fd)
        finally:
            os.close(null)


@contextlib.contextmanager
def stops_as_interrupt() -> Iterator[None]:
    """SIGTERM and a hangup raise `KeyboardInterrupt`, as Ctrl-C does, until the block ends
    (see the module docstring). Nothing paid for is in flight outside dispatch, and each
    step there is safe to stop anywhere: a resume redoes it. A signal ignored when the
    command started (a hangup under `nohup`) stays ignored, except Ctrl-C, which dispatch
    catches always (`stop_signals_to_catch`): a script's background job starts with it
    ignored, and a `kill -INT` from that script went unheard until dispatch began."""
    fds = terminal_fds()

    def interrupt(signum: int, frame: object) -> None:
        global _stop_pending
        if signum == signal.SIGHUP:
            leave_terminal(fds)
        _stop_pending = True  # until said: raised inside a finalizer, it would be dropped
        raise KeyboardInterrupt

    previous: dict[signal.Signals, Any] = {}
    for sig in stop_signals_to_catch():
        if python_raises(sig):
            continue
        try:
            previous[sig] = signal.signal(sig, interrupt)
        except ValueError:  # not the main thread: leave the signals as they are
            continue
    global _stop_pending
    hook = sys.unraisablehook

    def quiet_when_pending(unraisable: Any) -> None:
        """A dropped stop's "Exception ignored ... KeyboardInterrupt" traceback is not said:
        the command ends on its own line (`raise_if_stop_pending`)."""
        if not (_stop_pending and unraisable.exc_type is KeyboardInterrupt):
            hook(unraisable)

    sys.unraisablehook = quiet_when_pending
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, before in previous.items():
            signal.signal(sig, before if before is not None else signal.SIG_DFL)
        # The block's stops end with it: reached the command, caught inside it, or dropped
        # after the command's last look (`raise_if_stop_pending`), its work then done.
        _stop_pending = False


__all__ = [
    "EXIT_INTERRUPTED",
    "INTERRUPTED",
    "INTERRUPTED_MESSAGE",
    "STOP_SIGNALS",
    "exit_interrupted",
    "held",
    "leave_terminal",
    "mark_interrupt_said",
    "python_raises",
    "raise_if_stop_pending",
    "say_interrupted",
    "stops_as_interrupt",
    "terminal_fds",
]
