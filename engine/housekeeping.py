"""A thread for housekeeping that gives the CPU to the work that cannot wait.

Compaction folds the journal into Parquet beside the event loop. Nothing waits for a fold
(the journal already holds every result durably), but on a busy machine its CPU is taken
from what does wait: the event loop that sends and settles requests, and a model server on
the same machine (a local llama.cpp, or the simulator of `bench.whole_run`). So the fold runs
in its own thread at the lowest priority (nice 19, Linux only: there a priority is per
thread), and takes only CPU that the loop and the server leave idle. Measured with the
whole run of `bench.whole_run` (46,500 queries, the simulator on the same two cores), three
sets of alternating rounds: dispatch 8.20 s against 8.66 s, 8.26 against 8.54 and 8.92
against 9.46 (medians), shorter in 18 of the 23 pairs and as long in one; the folds
themselves took 3-7 s of wall time instead of about 1.3, which nothing waits for. (An
earlier session had measured this as no faster, with fewer pairs on a noisier machine.)

A low-priority thread that holds the ledger's lock or the GIL delays the event loop until it
runs again; it then has the event loop's core to itself (the loop is blocked waiting), so
that wait is short unless other processes saturate every core.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

#: The nice value of a housekeeping thread: the lowest priority there is.
HOUSEKEEPING_NICE = 19


def yield_cpu(nice: int = HOUSEKEEPING_NICE) -> None:
    """Lower the calling thread's priority to `nice` (never raise it); Linux only.

    Elsewhere `setpriority` on a thread id is not per thread (or names another process), so
    the thread keeps its priority. Refused (a sandbox without the call) is no error: the
    fold then simply competes as before.
    """
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, thread) < nice:
            os.setpriority(os.PRIO_PROCESS, thread, nice)


def housekeeping_thread(name: str) -> ThreadPoolExecutor:
    """One worker thread at the lowest priority, for work nobody waits on (`yield_cpu`)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=yield_cpu)
