"""A thread for housekeeping that gives the CPU to the work that cannot wait.

Compaction folds the journal into Parquet beside the event loop. Nothing waits for a fold
(the journal already holds every result durably), but on a busy machine its CPU is taken
from what does wait: the event loop that sends and settles requests, and a model server on
the same machine (a local llama.cpp, or the simulator of `bench.whole_run`). So the fold runs
in its own thread at a low priority (nice 10; Linux only, where a priority is per thread)
and takes mostly CPU that the loop and the server leave idle.

Why 10 and not the lowest, 19: a fold must still keep pace when no CPU is idle, or its
segments (and the fold's memory) grow for as long as every core is busy. A fold costs 11-14
µs of CPU a result in place and the event loop about 175, so a fold thread sharing a core
with the loop needs about 8% of it. The scheduler's weights give nice 10 about 10% against a
nice-0 thread (110 against 1,024) and nice 19 about 1.4% (15), which would fall behind.

Measured with the whole run of `bench.whole_run` (46,500 queries, the simulator on the same
two cores), alternating rounds: at nice 19, dispatch 8.20 s against 8.66 s, 8.26 against
8.54 and 8.92 against 9.46 at normal priority (medians of 5, 5 and 8), shorter in 18 of 23
pairs and as long in one; later that day, the machine a third slower, nice 10, nice 19 and
normal priority 12.58, 12.56 and 12.78 s (medians of 6; nice 10 shorter than normal in 5 of
the 6). With two nice-0 busy loops beside the run as well (no idle CPU at all), nice 19
fell behind: the whole journal (38 MB) stayed unfolded and dispatch took 46.7 s against
24.2 at normal priority; nice 10 kept at most 7.7-8.8 MB unfolded (normal: 5.6-5.8) and its
dispatch took 27.0, 22.5, 21.9 and 21.5 s against 24.2, 24.3, 21.6 and 21.6. The folds' own
wall time grows (3.7 s at nice 10 against 1.8 in the first set), which nothing waits for.
(An earlier session had measured nice 19 as no faster, with fewer pairs.)

A lowered thread that holds the ledger's lock or the GIL delays the event loop until it
runs again; it then has the event loop's core to itself (the loop is blocked waiting), so
that wait is short unless other processes keep every core busy.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

#: The nice value of a housekeeping thread (why 10: the module docstring).
HOUSEKEEPING_NICE = 10


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
    """One worker thread at a low priority, for work nobody waits on (`yield_cpu`)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=yield_cpu)
