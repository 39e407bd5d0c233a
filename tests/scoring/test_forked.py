"""A child forked while another thread of its parent held one of scoring's locks scores too.

`test_pool.py` forks while a thread scores, as a caller would; which lock that thread holds at
a fork is chance there. Here a thread holds each lock for certain as the child is forked.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# The child uses every holder of a lock: a new table (and its `_single` product), a new HiGHS
# instance, BLAS's limit and its controller. faulthandler ends a stuck child and says where.
_FORKED_WITH_LOCKS_HELD = """
import faulthandler, os, sys, threading
import numpy as np
from scoring import blas, highs, pool, vertex_table
rng = np.random.default_rng(1)
def scored(rows):
    matrix = (rng.uniform(size=(rows, rows + 2)) < 0.5).astype(np.uint8)
    table = vertex_table.table_for(matrix.astype(float), "inf")
    assert table is not None
    table.vertices(rng.uniform(size=(2, rows)))
    highs.new_highs()
    pool.score_groups([(matrix, rng.uniform(size=(2, rows)), "inf")], workers=1)
scored(5)
single = vars(vertex_table.VertexTable)["_single"]
locks = [blas._lock, blas._hold, highs._lock, highs._gate, vertex_table._lock]
locks.append(getattr(single, "lock", None))
held, done = threading.Event(), threading.Event()
def hold():
    for lock in filter(None, locks):
        lock.acquire()
    held.set()
    done.wait()
    for lock in filter(None, locks):
        lock.release()  # the parent's exit takes `highs._gate` (its atexit hook)
holder = threading.Thread(target=hold)
holder.start()
held.wait()
child = os.fork()
if child == 0:
    faulthandler.dump_traceback_later(int(sys.argv[1]), exit=True)
    with blas.one_thread():
        scored(6)
    os._exit(0)
code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
done.set()
holder.join()
print(code, flush=True)
"""


@pytest.mark.timeout(60)
def test_a_child_forked_while_another_thread_holds_scorings_locks_scores() -> None:
    """Each lock a fork copied held (the other thread, which would release it, is not in the
    child) stopped the child's scoring for ever."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_WITH_LOCKS_HELD, "10"],
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"], done.stderr


# The first HiGHS instance is made with fd 1 on /dev/null (`scoring.highs`); this one waits
# there until the child is forked, as a slow construction would.
_FORKED_WHILE_STDOUT_IS_QUIET = """
import os, threading
import highspy
from scoring import highs
made = highspy.Highs
quiet, forked = threading.Event(), threading.Event()
def slow_highs():
    quiet.set()
    forked.wait()
    return made()
highspy.Highs = slow_highs
maker = threading.Thread(target=highs.new_highs)
maker.start()
quiet.wait()
child = os.fork()
if child == 0:
    os.write(1, b"child\\n")
    os._exit(0)
os.waitpid(child, 0)
forked.set()
maker.join()
os.write(1, b"parent\\n")
"""


def test_a_child_forked_while_the_first_highs_is_made_keeps_its_stdout() -> None:
    """A child forked while another thread made the process's first HiGHS instance, its
    stdout on /dev/null to keep HiGHS's banner off it, had it there for good: everything it
    printed was lost."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_WHILE_STDOUT_IS_QUIET],
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["child", "parent"], done.stderr
