"""Creating HiGHS instances that stay quiet, and running them so that an exit waits for them.

The first `highspy.Highs()` of a process prints a licence banner from C++ straight to
file descriptor 1. `dutchbook check --json` and other commands print machine-readable
output there, so the first construction runs with fd 1 pointed at /dev/null (C's stdio
buffer flushed before it is restored). Later instances print nothing once `silent()`.

`run` lets go of the GIL while HiGHS solves. A daemon thread still in a solve as the
interpreter finalized ended when it took the GIL back: CPython ends such a thread with
`pthread_exit`, whose unwinding through highspy's C++ frames is `std::terminate`, and the
script's exit was an abort ("terminate called without an active exception", status 134).
Every solve goes through `run` here: as the process exits (`_close_at_exit`, an atexit
hook) solves in flight are waited for, at most `EXIT_WAIT_S`, and a daemon thread that was
running then holds its next solve for up to `DAEMON_HOLD_S`: the interpreter ends it there,
outside HiGHS, once the exit goes on. Held for good, as a first version did, it hung a
script whose later atexit hook joined that thread (a service's `stop()`) or waited for its
work (`queue.join()`); ended at once (`SystemExit`, a second version), it left such a
hook's queue waiting for ever. Past the hold the solve goes ahead, for a later hook that
waits for it. The exiting thread, and threads started after the hook ran (by a later
hook), solve at once.
"""

from __future__ import annotations

import atexit
import ctypes
import math
import os
import sys
import threading
import time
from typing import Any

import highspy

_lock = threading.Lock()
_banner_done = False
#: The process's stdout while the first instance is made with fd 1 on /dev/null, else None.
_quiet_stdout: int | None = None

#: How long an exiting process waits for the solves in flight (`_close_at_exit`): a batch of
#: this project's LPs solves in milliseconds, a repair QP within its time limit
#: (`scoring.repair.QP_TIME_LIMIT_S`); a solve still running after this aborts the exit as before.
EXIT_WAIT_S = 30.0
#: How long a daemon thread running as the process began to exit holds a new solve
#: (`_enter`): long enough for an exit with nothing left to wait for to end it there, short
#: enough that a later atexit hook waiting for that thread's work is not kept long.
DAEMON_HOLD_S = 2.0
#: Guards `_solving` and `_held`; notified as each solve ends.
_gate = threading.Condition(threading.Lock())
_solving = 0
#: The daemon threads (the objects: a thread's ident is reused by one started later) that
#: hold a new solve, alive but for the exiting one when `_close_at_exit` ran; empty before.
_held: frozenset[threading.Thread] = frozenset()
#: When their hold ends (`time.monotonic()`; infinite while the exit waits for the solves in
#: flight).
_held_until = 0.0


def _after_fork() -> None:
    """In a forked child: the locks made anew, and stdout back on fd 1. Another thread of the
    parent may have held a lock at the fork, constructing an instance or solving, and the
    child's copy stayed held: its first instance waited for ever. If that thread was making
    the first one, the child's fd 1 was /dev/null for good, and all it printed was lost. The
    other threads' solves are not in the child, and it is not exiting."""
    global _lock, _quiet_stdout, _gate, _solving, _held
    _lock = threading.Lock()
    _gate, _solving, _held = threading.Condition(threading.Lock()), 0, frozenset()
    if _quiet_stdout is not None:
        os.dup2(_quiet_stdout, 1)
        os.close(_quiet_stdout)
        _quiet_stdout = None


os.register_at_fork(after_in_child=_after_fork)


def _construct_without_banner() -> Any:
    global _quiet_stdout
    try:
        libc = ctypes.CDLL(None)
        sys.stdout.flush()
        libc.fflush(None)
        saved = os.dup(1)
    except (OSError, AttributeError, ValueError):
        return highspy.Highs()  # type: ignore[no-untyped-call]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        _quiet_stdout = saved  # before fd 1 changes, and until it is back (`_after_fork`)
        os.dup2(devnull, 1)
        highs = highspy.Highs()  # type: ignore[no-untyped-call]
        libc.fflush(None)
    finally:
        os.dup2(saved, 1)
        _quiet_stdout = None
        os.close(saved)
        os.close(devnull)
    return highs


def _enter() -> None:
    """Count a solve in; once the process is exiting, a daemon thread that was running then
    waits first, up to `_held_until`: its solve, started now, could still be running at the
    interpreter's end (`run`), where waiting here it is ended outside HiGHS."""
    global _solving
    with _gate:
        if threading.current_thread() in _held:
            while (left := _held_until - time.monotonic()) > 0:
                _gate.wait(None if left == math.inf else left)
        _solving += 1


def _leave() -> None:
    global _solving
    with _gate:
        _solving -= 1
        _gate.notify_all()


def run(highs: Any) -> Any:
    """`highs.run()`, counted in flight, so that an exiting process waits for it."""
    _enter()
    try:
        return highs.run()
    finally:
        _leave()


def _close_at_exit() -> None:
    """At exit (after the non-daemon threads are joined, before the interpreter finalizes):
    the daemon threads running now hold a new solve for `DAEMON_HOLD_S`, and the solves in
    flight end, within `EXIT_WAIT_S`. The exiting thread itself may still solve (another
    atexit hook scoring), as may threads a later hook starts."""
    global _held, _held_until
    me = threading.current_thread()
    with _gate:
        _held = frozenset(t for t in threading.enumerate() if t.daemon and t is not me)
        _held_until = math.inf  # held while the solves in flight end, then counted from there
        _gate.wait_for(lambda: _solving == 0, timeout=EXIT_WAIT_S)
        _held_until = time.monotonic() + DAEMON_HOLD_S
        _gate.notify_all()


atexit.register(_close_at_exit)


def new_highs() -> Any:
    """A silent, single-threaded HiGHS instance (typed Any: highspy lacks full stubs); solve
    it with `run`."""
    global _banner_done
    with _lock:
        if _banner_done:
            highs = highspy.Highs()  # type: ignore[no-untyped-call]
        else:
            highs = _construct_without_banner()
            _banner_done = True
    highs.silent()
    highs.setOptionValue("threads", 1)
    return highs
