"""Creating HiGHS instances that stay quiet.

The first `highspy.Highs()` of a process prints a licence banner from C++ straight to
file descriptor 1. `dutchbook check --json` and other commands print machine-readable
output there, so the first construction runs with fd 1 pointed at /dev/null (C's stdio
buffer flushed before it is restored). Later instances print nothing once `silent()`.
"""

from __future__ import annotations

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


def _after_fork() -> None:
    """In a forked child: the lock made anew, and stdout back on fd 1. Another thread of the
    parent may have held the lock at the fork, constructing an instance, and the child's copy
    stayed held: its first instance waited for ever. If that thread was making the first one,
    the child's fd 1 was /dev/null for good, and all it printed was lost."""
    global _lock, _quiet_stdout
    _lock = threading.Lock()
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


def new_highs() -> Any:
    """A silent, single-threaded HiGHS instance (typed Any: highspy lacks full stubs)."""
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
