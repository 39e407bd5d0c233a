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


def _new_lock() -> None:
    """In a forked child: the lock made anew. Another thread of the parent may have held it
    at the fork, constructing an instance, and the child's copy stayed held: its first
    instance waited for ever."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock)


def _construct_without_banner() -> Any:
    try:
        libc = ctypes.CDLL(None)
        sys.stdout.flush()
        libc.fflush(None)
        saved = os.dup(1)
    except (OSError, AttributeError, ValueError):
        return highspy.Highs()  # type: ignore[no-untyped-call]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highs = highspy.Highs()  # type: ignore[no-untyped-call]
        libc.fflush(None)
    finally:
        os.dup2(saved, 1)
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
