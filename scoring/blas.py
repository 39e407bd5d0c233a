"""Scoring keeps numpy's BLAS to one thread.

The products in scoring are many and small (sets x 14 events x a few hundred vertices at
most), where OpenBLAS's threads cost more than they give, and on a shared machine they
make things far worse: measured on the 2-core development machine under load, one
10,000-set horizon-1 call took 145 ms with OpenBLAS's default threads and 56 ms with one.
Scoring uses the cores through its process pool instead (`scoring.pool`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_hold = threading.Lock()
_controller: Any = None


def _get() -> Any:
    """threadpoolctl's controller, made on first use (imported then: commands that load
    scoring without scoring anything do not pay for it)."""
    global _controller
    with _lock:
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        return _controller


#: Bodies inside `one_thread` now, and the limit they share. The limit is process-wide:
#: with a limit of their own, two threads' bodies that overlapped restored out of order (the
#: first to leave put back the threads, the last put back its own "1", which stayed for
#: the rest of the process).
_holders = 0
_limit: Any = None
#: This thread's bodies inside `one_thread` now (`depth`): of all the bodies, only they
#: are in a child forked from this thread (`_forget_other_threads`).
_mine = threading.local()


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the body with BLAS limited to one thread (process-wide, restored after the last
    body that any thread runs in it ends)."""
    global _holders, _limit
    controller = _get()
    with _hold:
        if _holders == 0:
            _limit = controller.limit(limits=1, user_api="blas")
        _holders += 1
        _mine.depth = getattr(_mine, "depth", 0) + 1
    try:
        yield
    finally:
        with _hold:
            _mine.depth -= 1
            _holders -= 1
            if _holders == 0:
                _limit.restore_original_limits()
                _limit = None


def _forget_other_threads() -> None:
    """In a forked child: the state as this thread's own bodies left it, the other threads'
    gone with them.

    The locks are made anew: another thread of the parent may have held one at the fork
    (`_hold` as it set or restored the limit, `_lock` as it made the controller), and the
    child's copy stayed held, so its first scoring waited for ever. Only the forking
    thread's bodies are in the child (none, unless it forked within one); a limit the
    other threads' bodies had set is restored now, as the last of them would have, and BLAS
    has its threads back. (One that a thread was setting or restoring at the fork, half
    done, is left as the fork found it.)"""
    global _lock, _hold, _holders, _limit
    _lock, _hold = threading.Lock(), threading.Lock()
    _holders = getattr(_mine, "depth", 0)
    if _holders == 0 and _limit is not None:
        _limit.restore_original_limits()
        _limit = None


os.register_at_fork(after_in_child=_forget_other_threads)
