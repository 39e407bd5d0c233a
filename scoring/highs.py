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
running then starts no new one: its solve raises `SystemExit`, which ends the thread
quietly (`threading` prints nothing for it). It does not wait for the end of the process
instead: a later atexit hook may join that thread (a service's `stop()`), and a first
version that made it wait hung such a script for ever. The exiting thread, and threads
started after the hook ran (by a later hook, which joins them), still solve.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
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
#: Guards `_solving` and `_refused`; notified as each solve ends.
_gate = threading.Condition(threading.Lock())
_solving = 0
#: The daemon threads (idents) that may start no solve, alive but for the exiting one when
#: `_close_at_exit` ran; empty before.
_refused: frozenset[int] = frozenset()


def _after_fork() -> None:
    """In a forked child: the locks made anew, and stdout back on fd 1. Another thread of the
    parent may have held a lock at the fork, constructing an instance or solving, and the
    child's copy stayed held: its first instance waited for ever. If that thread was making
    the first one, the child's fd 1 was /dev/null for good, and all it printed was lost. The
    other threads' solves are not in the child, and it is not exiting."""
    global _lock, _quiet_stdout, _gate, _solving, _refused
    _lock = threading.Lock()
    _gate, _solving, _refused = threading.Condition(threading.Lock()), 0, frozenset()
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
    is ended instead (`SystemExit`, which `threading` ends a thread with silently): its solve,
    started now, could still be running at the interpreter's end (`run`)."""
    global _solving
    with _gate:
        if threading.get_ident() in _refused:
            raise SystemExit("the process is exiting: no new HiGHS solve in a daemon thread")
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
    the daemon threads running now start no new solve, and the solves in flight end, within
    `EXIT_WAIT_S`. The exiting thread itself may still solve (another atexit hook scoring),
    as may threads a later hook starts and joins."""
    global _refused
    me = threading.get_ident()
    with _gate:
        _refused = frozenset(
            t.ident for t in threading.enumerate() if t.daemon and t.ident not in (None, me)
        )
        _gate.wait_for(lambda: _solving == 0, timeout=EXIT_WAIT_S)


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
