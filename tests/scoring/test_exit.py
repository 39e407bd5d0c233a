"""A script may exit while its daemon threads score: the exit waits for their HiGHS solves.

A daemon thread inside a solve as the interpreter finalized was ended by CPython as it took
the GIL back, through highspy's C++ frames: the script aborted (status 134, "terminate called
without an active exception") instead of exiting 0 (`scoring.highs.run`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Daemon threads score in a loop; the main thread returns once one of them is in a solve
# (`highspy.Highs.run` wrapped to say so), while they keep starting new ones.
_EXITS_WHILE_DAEMONS_SOLVE = """
import sys, threading
import highspy
import numpy as np
from scoring import dutch_books, repair
from scoring.pool import score_groups

solving = threading.Event()
solve = highspy.Highs.run
def said_run(self):
    solving.set()
    return solve(self)
highspy.Highs.run = said_run

rng = np.random.default_rng(0)
incidence = (rng.uniform(size=(40, 300)) < 0.5).astype(float)
probs = rng.uniform(size=(64, 40))
calls = {
    "dutch_books": lambda: dutch_books(incidence, probs, "inf"),
    "l1": lambda: dutch_books(incidence, probs, "l1"),
    "score_groups": lambda: score_groups([(incidence, probs, "inf")] * 2, workers=1),
    "repair": lambda: repair(incidence, probs[:4]),
}
call = calls[sys.argv[1]]
def score():
    while True:
        call()
for _ in range(2):
    threading.Thread(target=score, daemon=True).start()
solving.wait()
print("returned", flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("call", ["dutch_books", "l1", "score_groups", "repair"])
def test_a_script_exits_cleanly_while_its_daemon_threads_solve(call: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXITS_WHILE_DAEMONS_SOLVE, call],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert (done.returncode, done.stdout) == (0, "returned\n"), done.stderr
    assert "terminate called" not in done.stderr


# An atexit hook registered before scoring was imported runs after scoring's own: the
# exiting thread still solves there (only other threads wait for the end).
_SOLVES_IN_A_LATER_ATEXIT_HOOK = """
import atexit
def score_at_exit():
    from scoring import dutch_books
    print(round(float(dutch_books([[1, 0], [0, 1]], [0.6, 0.6]).profit[0]), 6), flush=True)
atexit.register(score_at_exit)
import scoring
print(round(float(scoring.dutch_books([[1, 0], [0, 1]], [0.7, 0.7]).profit[0]), 6), flush=True)
"""


@pytest.mark.timeout(60)
def test_the_exiting_thread_still_solves_in_an_atexit_hook() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SOLVES_IN_A_LATER_ATEXIT_HOOK],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert (done.returncode, done.stdout.split()) == (0, ["0.2", "0.1"]), done.stderr


# A service's worker: a daemon thread that imports scoring lazily and scores from a queue,
# and a `stop()` registered at exit before scoring was imported, so it runs after scoring's
# hook and joins the worker. A first version held the worker in `scoring.highs._enter`
# until the process's end, the join waited for the worker: the script hung for ever (it
# exited at once before the exit hook existed).
_A_LATER_HOOK_JOINS_A_SCORING_DAEMON = """
import atexit, queue, threading
import numpy as np

rng = np.random.default_rng(0)
incidence = (rng.uniform(size=(14, 40)) < 0.5).astype(float)
work, stopping = queue.Queue(), threading.Event()

def loop():
    import scoring
    while not stopping.is_set():
        try:
            probs = work.get(timeout=0.01)
        except queue.Empty:
            continue
        scoring.dutch_books(incidence, probs, "l1")

worker = threading.Thread(target=loop, daemon=True)
worker.start()
def stop():
    stopping.set()
    worker.join()
    print("stopped", flush=True)
atexit.register(stop)
for _ in range(100000):
    work.put(rng.uniform(size=(50, 14)))
import scoring  # its exit hook, registered after stop's, runs first
while work.qsize() > 99990:
    pass
print("returned", flush=True)
"""

# An exit hook registered before scoring was imported scores in two threads it starts and
# joins: they are not the daemon threads that were running as the process began to exit.
_A_LATER_HOOK_SCORES_IN_THREADS = """
import atexit, threading
def final():
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        round(float(scoring.dutch_books([[1, 0], [0, 1]], [0.7, 0.7]).profit[0]), 6)))
        for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(results, flush=True)
atexit.register(final)
import scoring
scoring.dutch_books([[1, 0], [0, 1]], [0.6, 0.6])
"""


# A later exit hook waits for a daemon's queued work (`queue.join()`, a service's flush). A
# second version ended such a daemon at its next solve (`SystemExit`), its `task_done()`
# never came, and the hook waited for ever; the hold ends and the work is done.
_A_LATER_HOOK_WAITS_FOR_A_DAEMONS_WORK = """
import atexit, queue, threading
work = queue.Queue()
def worker():
    import scoring
    while True:
        p = work.get()
        scoring.dutch_books([[1, 0], [0, 1]], [p, p])
        work.task_done()
def drain():
    work.join()
    print("drained", flush=True)
atexit.register(drain)
import scoring
threading.Thread(target=worker, daemon=True).start()
for _ in range(2000):
    work.put(0.6)
print("returned", flush=True)
"""

# A later exit hook stops a scoring daemon, then scores in a thread of its own, which the
# system may give the daemon's ident: threads were held by ident, and that one's result was
# lost (a reviewer's).
_A_LATER_HOOK_SCORES_IN_A_THREAD_AFTER_A_DAEMON = """
import atexit, threading, time
stop = threading.Event()
def loop():
    import scoring
    while not stop.is_set():
        scoring.dutch_books([[1, 0], [0, 1]], [0.6, 0.6])
        time.sleep(0.001)
daemon = threading.Thread(target=loop, daemon=True)
def final():
    stop.set()
    daemon.join()
    for _ in range(3):
        out = []
        t = threading.Thread(target=lambda: out.append(
            round(float(scoring.dutch_books([[1, 0], [0, 1]], [0.7, 0.7]).profit[0]), 6)))
        t.start()
        t.join()
        print(out, flush=True)
atexit.register(final)
import scoring
daemon.start()
time.sleep(0.3)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("script", "said"),
    [
        (_A_LATER_HOOK_JOINS_A_SCORING_DAEMON, "returned\nstopped\n"),
        (_A_LATER_HOOK_SCORES_IN_THREADS, "[0.2, 0.2]\n"),
        (_A_LATER_HOOK_WAITS_FOR_A_DAEMONS_WORK, "returned\ndrained\n"),
        (_A_LATER_HOOK_SCORES_IN_A_THREAD_AFTER_A_DAEMON, "[0.2]\n" * 3),
    ],
    ids=["joins-a-daemon", "scores-in-new-threads", "waits-for-its-work", "ident-reused"],
)
def test_a_later_exit_hook_that_scores_or_joins_a_scorer_ends(script: str, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=90
    )
    assert (done.returncode, done.stdout) == (0, said), done.stderr
    assert "Traceback" not in done.stderr
