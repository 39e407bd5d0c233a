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


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the body with BLAS limited to one thread (process-wide, restored after)."""
    with _get().limit(limits=1, user_api="blas"):
        yield
