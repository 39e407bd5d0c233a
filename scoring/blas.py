"""Scoring keeps numpy's BLAS to one thread.

The products in scoring are many and small (sets x 14 events x a few hundred vertices at
most), where OpenBLAS's threads cost more than they give, and on a shared machine they
make things far worse: measured on the 2-core development machine under load, one
10,000-set horizon-1 call took 145 ms with OpenBLAS's default threads and 56 ms with one.
Scoring uses the cores through its process pool instead (`scoring.pool`).
"""

from __future__ import annotations

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
    try:
        yield
    finally:
        with _hold:
            _holders -= 1
            if _holders == 0:
                _limit.restore_original_limits()
                _limit = None
