"""`scoring.score_groups`: the same answers in a pool of processes as in one."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from panels.stock import horizon_panel
from runs.signals import EXIT_INTERRUPTED, INTERRUPTED
from scoring import dutch_books, pool
from scoring.dutch_book import DutchBookResult
from scoring.pool import CHUNK_SETS, Group, score_groups, shutdown

if TYPE_CHECKING:
    from _typeshed import TraceFunction

ROOT = Path(__file__).resolve().parents[2]


def horizon1() -> np.ndarray:
    bins = range(4)
    events = [s for size in (1, 2, 3) for s in itertools.combinations(bins, size)]
    return np.array([[b in s for b in bins] for s in events], dtype=np.float64)


def test_pool_results_are_identical_to_one_process() -> None:
    rng = np.random.default_rng(5)
    h1 = horizon1()
    big = np.round(rng.uniform(size=(CHUNK_SETS + 700, 14)), 4)  # two chunks, vertex table
    big[::13, 2] = np.nan
    small = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.uint8)
    groups = [
        (h1, big, "inf"),
        (small, np.round(rng.uniform(size=(40, 2)), 4), "l1"),
        (h1, big[:300], "l1"),
        (small, np.empty((0, 2)), "inf"),
    ]
    alone = score_groups(groups, workers=1)
    try:
        pooled = score_groups(groups, workers=2)
        # The pool is kept: a second call reuses its workers (their tables cached) alike.
        again = score_groups(list(reversed(groups)), workers=2)[::-1]
    finally:
        shutdown()
    assert len(alone) == len(pooled) == len(again) == len(groups)
    for one, many, (incidence, probs, norm) in zip(alone, pooled, groups, strict=True):
        assert one.norm == many.norm == norm
        for field in ("profit", "stakes", "coherent"):
            np.testing.assert_array_equal(getattr(one, field), getattr(many, field))
        # and each group's answers are the dutch_books answers, to 1e-9
        direct = dutch_books(incidence, probs, norm)
        np.testing.assert_allclose(one.profit, direct.profit, atol=1e-9, rtol=0)
    for one, later in zip(alone, again, strict=True):
        for field in ("profit", "stakes", "coherent"):
            np.testing.assert_array_equal(getattr(one, field), getattr(later, field))


def _two_and_three_chunks() -> tuple[list[Group], list[Group]]:
    rng = np.random.default_rng(7)
    h1 = horizon1()
    two: list[Group] = [(h1, np.round(rng.uniform(size=(CHUNK_SETS + 10, 14)), 4), "inf")]
    three: list[Group] = [(h1, np.round(rng.uniform(size=(2 * CHUNK_SETS + 10, 14)), 4), "inf")]
    return two, three


def _gated(gate: threading.Event, entered: threading.Event) -> type[ProcessPoolExecutor]:
    """A pool whose `map` in the thread named "held" waits for `gate` once it holds the pool."""

    class Gated(ProcessPoolExecutor):
        def map(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            if threading.current_thread().name == "held":
                entered.set()
                assert gate.wait(60), "the other call never finished"
            return super().map(*args, **kwargs)

    return Gated


@contextlib.contextmanager
def _call_held(
    monkeypatch: pytest.MonkeyPatch, groups: list[Group], out: list[object]
) -> Iterator[threading.Event]:
    """A `score_groups(groups, workers=4)` call in a thread named "held", into `out`, held
    once it holds the pool until the yielded gate is set (set at the end, the pool then shut
    down, whatever the body did)."""
    gate, entered = threading.Event(), threading.Event()
    monkeypatch.setattr(pool, "ProcessPoolExecutor", _gated(gate, entered))

    def run() -> None:
        try:
            out.append(score_groups(groups, workers=4))
        except Exception as error:  # reported by the test, not lost in the thread
            out.append(error)

    thread = threading.Thread(target=run, name="held")
    try:
        thread.start()
        assert entered.wait(60)
        yield gate
        gate.set()
        thread.join(60)
    finally:
        gate.set()
        shutdown()


def test_calls_from_threads_share_the_pool_whatever_size_each_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call whose pool would be sized otherwise (two chunks against three) no longer ends
    the pool another thread's call is about to map on ("cannot schedule new futures after
    shutdown"); both give one process's bits."""
    two, three = _two_and_three_chunks()
    alone = [score_groups(g, workers=1)[0] for g in (two, three)]
    out: list[object] = []
    with _call_held(monkeypatch, two, out):
        other = score_groups(three, workers=4)[0]  # while "held" holds a pool of 2
    assert len(out) == 1 and isinstance(out[0], list), out
    for one, many in ((alone[0], out[0][0]), (alone[1], other)):
        for field in ("profit", "stakes", "coherent"):
            np.testing.assert_array_equal(getattr(one, field), getattr(many, field))


def test_shutdown_while_another_thread_maps_ends_the_pool_after_that_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    two, _ = _two_and_three_chunks()
    out: list[object] = []
    with _call_held(monkeypatch, two, out):
        in_use = pool._pool
        assert in_use is not None
        shutdown()  # as the scoring step ends idle workers between its chunks
        assert pool._pool is None
    assert len(out) == 1 and isinstance(out[0], list), out
    np.testing.assert_array_equal(out[0][0].profit, score_groups(two, workers=1)[0].profit)
    # ended by its last call: its workers are gone and nothing holds it
    assert not pool._users and in_use._shutdown_thread


def _workers() -> set[int]:
    assert pool._pool is not None
    return set(pool._pool._processes)


def _assert_same(one: DutchBookResult, other: DutchBookResult) -> None:
    for field in ("profit", "stakes", "coherent"):
        np.testing.assert_array_equal(getattr(one, field), getattr(other, field))


def _wait_until_started(pids: set[int]) -> None:
    """Until each worker has let Ctrl-C through (Linux: /proc; it is held from its spawn until
    its initializer set its handler), 10 s at most: one worker may have scored both chunks
    while the other still imports."""
    deadline = time.monotonic() + 10.0
    for pid in pids:
        status = Path(f"/proc/{pid}/status")
        while status.exists() and time.monotonic() < deadline:
            held = next(line for line in status.read_text().splitlines() if "SigBlk" in line)
            if not int(held.split()[1], 16) & (1 << (signal.SIGINT - 1)):
                break
            time.sleep(0.02)


#: What reaches the workers when sent to the process group: a terminal's Ctrl-C and hangup,
#: `timeout`'s SIGTERM (and `kill -TERM -PGID`'s, a service manager's).
GROUP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.mark.parametrize("sent", GROUP_SIGNALS, ids=lambda sig: sig.name)
def test_a_stop_signal_while_the_pool_is_idle_leaves_its_workers_alive(
    sent: signal.Signals,
) -> None:
    """A terminal's Ctrl-C reaches the workers too (one process group), and so do `timeout`'s
    SIGTERM and a hangup: idle, they ended, and the next pooled call failed with
    BrokenProcessPool (Ctrl-C) or ran on new workers. Sent here to the workers only."""
    two, _ = _two_and_three_chunks()
    alone = score_groups(two, workers=1)[0]
    try:
        score_groups(two, workers=2)
        workers = _workers()
        _wait_until_started(workers)
        for pid in workers:
            os.kill(pid, sent)
        time.sleep(0.3)  # time for a worker that did not ignore it to end
        _assert_same(alone, score_groups(two, workers=2)[0])
        assert _workers() == workers  # the same workers: none ended
    finally:
        shutdown()


def _interrupted_as_spawned(signum: signal.Signals, sent: list[int]) -> type[ProcessPoolExecutor]:
    """A pool that sends each worker it spawns `signum` at once (Python starting), into `sent`."""

    class Interrupted(ProcessPoolExecutor):
        def _adjust_process_count(self) -> None:
            before = set(self._processes)
            super()._adjust_process_count()
            for pid in set(self._processes) - before:
                os.kill(pid, signum)
                sent.append(pid)

    return Interrupted


@pytest.mark.parametrize("signum", GROUP_SIGNALS, ids=lambda sig: sig.name)
def test_a_stop_signal_as_a_worker_starts_leaves_it_alive(
    monkeypatch: pytest.MonkeyPatch, signum: signal.Signals
) -> None:
    """A worker spawned while Ctrl-Cs came (a terminal's, as a call started the pool or replaced
    a broken one) died of one that landed before its initializer ignored it (Python starting,
    numpy importing), and the call failed with BrokenProcessPool; a SIGTERM or hangup so sent
    killed it too. Workers start with them held, and ignore the one that came once they let it
    through."""
    two, _ = _two_and_three_chunks()
    alone = score_groups(two, workers=1)[0]
    sent: list[int] = []
    monkeypatch.setattr(pool, "ProcessPoolExecutor", _interrupted_as_spawned(signum, sent))
    try:
        _assert_same(alone, score_groups(two, workers=2)[0])
        assert sent and _workers() == set(sent)  # none ended, none replaced
    finally:
        shutdown()


def _chunk_with_ctrl_c_at(step: int | None) -> int:
    """`_score_in_worker` of a chunk of no sets in this process, a SIGINT raised before its
    `step`th bytecode in the pool's code (a trace of opcodes); the bytecodes run."""
    chunk = (horizon1(), np.empty((0, 14)), "inf")
    seen = 0

    def each_opcode(frame: FrameType, event: str, _arg: object) -> TraceFunction:
        nonlocal seen
        if event == "opcode":
            if seen == step:
                signal.raise_signal(signal.SIGINT)  # its handler runs here, as Python's would
            seen += 1
        return each_opcode

    def in_the_pool(frame: FrameType, _event: str, _arg: object) -> TraceFunction | None:
        if frame.f_globals.get("__name__") != pool.__name__:
            return None
        frame.f_trace_opcodes = True
        return each_opcode

    sys.settrace(in_the_pool)
    try:
        pool._score_in_worker(chunk, None)
    except KeyboardInterrupt:
        pass  # the chunk's result, where the Ctrl-C landed within it
    finally:
        sys.settrace(None)
    return seen


def test_a_ctrl_c_landing_anywhere_in_a_chunk_leaves_the_worker_ignoring_the_next() -> None:
    """A worker set Python's Ctrl-C handler for each chunk and SIG_IGN back after it: a Ctrl-C
    that landed as the chunk ended (before SIG_IGN was back) left Python's handler set, and the
    next Ctrl-C, between chunks, ended the worker (BrokenProcessPool, under the load of a full
    test run once in six). A worker's chunk runs here with a Ctrl-C at each of its steps in
    turn, each followed by one between chunks, which must do nothing."""
    # What a worker's start sets, put back after (a SIGTERM left ignored here was inherited by
    # every later test's subprocess, which then ignored it).
    before = {sig: signal.getsignal(sig) for sig in pool._STOPS}
    try:
        pool._handle_stops()  # as in a worker
        steps = _chunk_with_ctrl_c_at(None)
        assert steps >= 4
        for step in range(steps):
            _chunk_with_ctrl_c_at(step)
            try:
                signal.raise_signal(signal.SIGINT)  # between chunks
            except KeyboardInterrupt:
                pytest.fail(f"a Ctrl-C at step {step} of {steps} left the worker interruptible")
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_pool_whose_worker_died_between_calls_is_replaced_and_the_call_runs() -> None:
    two, _ = _two_and_three_chunks()
    alone = score_groups(two, workers=1)[0]
    try:
        score_groups(two, workers=2)
        workers = _workers()
        os.kill(min(workers), signal.SIGKILL)  # as the kernel's out-of-memory killer would
        time.sleep(0.3)
        _assert_same(alone, score_groups(two, workers=2)[0])
        assert not _workers() & workers
    finally:
        shutdown()


def test_a_ctrl_c_during_a_pooled_call_stops_its_chunks_and_the_next_call_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kept as it was: in a chunk, a worker stops at a Ctrl-C (the caller gets the
    KeyboardInterrupt at once, not after the call's work) and lives on for the next call."""
    rng = np.random.default_rng(1)
    matrix = (rng.uniform(size=(60, 64)) < 0.5).astype(np.uint8)
    probs = rng.uniform(size=(64 * 120, 60))
    groups: list[Group] = [(matrix, probs, "l1")]
    small: list[Group] = [(matrix, probs[:128], "l1")]
    monkeypatch.setattr(pool, "CHUNK_SETS", 64)  # 120 LP chunks of about 0.1 s each
    alone = score_groups(small, workers=1)[0]
    done = threading.Event()

    def interrupt_workers() -> None:
        time.sleep(0.5)
        while not done.wait(0.05):  # until the call ends: a worker between chunks ignores it
            for pid in _workers():
                os.kill(pid, signal.SIGINT)

    try:
        score_groups(small, workers=2)  # the workers started
        thread = threading.Thread(target=interrupt_workers)
        thread.start()
        start = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                score_groups(groups, workers=2)
        finally:
            done.set()
            thread.join()
        assert time.monotonic() - start < 3.0  # the whole call takes about 6 s of CPU
        _assert_same(alone, score_groups(small, workers=2)[0])
    finally:
        shutdown()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_group_over_no_events_gets_what_dutch_books_gives(workers: int) -> None:
    """An incidence of 0 events (as `dutch_books` takes it: profits NaN) failed with
    ZeroDivisionError where the group was cut into chunks by its matrix's size."""
    none = np.zeros((0, 4))
    groups: list[Group] = [(none, np.zeros((2, 0)), "inf"), (none, np.zeros((3, 0)), "l1")]
    try:
        got = score_groups(groups, workers=workers)
    finally:
        shutdown()
    for (incidence, probs, norm), result in zip(groups, got, strict=True):
        direct = dutch_books(incidence, probs, norm)
        assert result.norm == norm
        for field in ("profit", "stakes", "coherent"):
            np.testing.assert_array_equal(getattr(result, field), getattr(direct, field))


def test_coherent_sets_score_zero_in_the_pool_as_in_one_process(
    coherent_mixtures: Callable[[np.ndarray, int, int], np.ndarray],
) -> None:
    """Coherent sets whose mixtures weigh an atom near HiGHS's tolerance (1e-10) scored up to
    3.7e-10, from the vertex table (horizon 1) and the LP (horizon 2) alike, in the workers as
    in one process; each chunk's `dutch_books` call now decides them: 0."""
    h1, h2 = horizon1(), horizon_panel(2).incidence
    groups: list[Group] = [
        (h1, coherent_mixtures(h1, 300, 0), "inf"),
        (h2, coherent_mixtures(h2, 24, 2), "l1"),
    ]
    alone = score_groups(groups, workers=1)
    try:
        pooled = score_groups(groups, workers=2)
    finally:
        shutdown()
    for one, many in zip(alone, pooled, strict=True):
        assert (one.profit == 0.0).all(), one.profit.max()
        _assert_same(one, many)


def test_a_ctrl_c_as_the_call_holds_it_leaves_this_threads_mask_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C waiting as the call held Ctrl-C for its submits raised inside that one call
    (CPython checks signals once the mask is set), before the mask to put back was returned:
    this thread kept Ctrl-C held for good, and every process it started after inherited it."""
    rng = np.random.default_rng(1)
    matrix = (rng.uniform(size=(60, 64)) < 0.5).astype(np.uint8)
    small: list[Group] = [(matrix, rng.uniform(size=(128, 60)), "l1")]
    monkeypatch.setattr(pool, "CHUNK_SETS", 64)
    real = signal.pthread_sigmask

    def landing(how: int, mask: Any) -> set[int | signal.Signals]:
        before = real(how, mask)
        # The call's holds, not the resource tracker's (SIGINT and SIGTERM, as it starts).
        if how == signal.SIG_BLOCK and set(mask) == set(pool._STOPS):
            raise KeyboardInterrupt  # as a Ctrl-C pending while the mask was set
        return before

    before = real(signal.SIG_BLOCK, ())
    try:
        monkeypatch.setattr(signal, "pthread_sigmask", landing)
        with pytest.raises(KeyboardInterrupt):
            score_groups(small, workers=2)
        assert real(signal.SIG_BLOCK, ()) == before
    finally:
        real(signal.SIG_SETMASK, before)
        monkeypatch.undo()
        shutdown()


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP], ids=lambda sig: sig.name)
def test_a_sigterm_or_hangup_within_a_chunk_leaves_the_call_and_its_workers_alone(
    monkeypatch: pytest.MonkeyPatch, sent: signal.Signals
) -> None:
    """Sent to the group (`timeout`, a closing terminal), they killed the workers in their
    chunks. The parent decides what they do (under `nohup` a hangup does nothing): sent here
    to the workers only, the call runs to its end on the same workers, with the same bits."""
    rng = np.random.default_rng(1)
    matrix = (rng.uniform(size=(60, 64)) < 0.5).astype(np.uint8)
    groups: list[Group] = [(matrix, rng.uniform(size=(64 * 16, 60)), "l1")]
    monkeypatch.setattr(pool, "CHUNK_SETS", 64)  # 16 LP chunks of about 0.1 s each
    alone = score_groups(groups, workers=1)[0]
    done = threading.Event()
    signalled: set[int] = set()

    def signal_workers() -> None:
        while not done.wait(0.05):
            for pid in _workers():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sent)
                    signalled.add(pid)

    try:
        score_groups(groups[:1], workers=2)  # the workers started
        workers = _workers()
        _wait_until_started(workers)
        thread = threading.Thread(target=signal_workers)
        thread.start()
        try:
            pooled = score_groups(groups, workers=2)[0]
        finally:
            done.set()
            thread.join()
        assert signalled, "no signal was sent: the test shows nothing"
        _assert_same(alone, pooled)
        assert _workers() == workers
    finally:
        shutdown()


def _ended(pid: int) -> bool:
    """Whether process `pid` has exited, reaped or not (Linux: /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _ended_within(pid: int | None, seconds: float) -> bool:
    """Whether process `pid` exits within `seconds`. Read from /proc, not from the process's
    `exitcode`: the pool's manager thread joins the same workers, and when its `waitpid`
    reaps one first, ours fails with ECHILD and `exitcode` reads None until that thread
    next holds the GIL (a dead worker taken for a live one in 1 of 9 such joins here)."""
    assert pid is not None
    deadline = time.monotonic() + seconds
    while not _ended(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="reads a worker's end from /proc")
def test_a_worker_its_pool_terminates_is_killed_though_it_ignores_sigterm() -> None:
    """A pool with a dead worker terminates the others (its queues' locks may be held by the
    dead one) and joins them: workers that ignore SIGTERM would be waited for for ever."""
    two, _ = _two_and_three_chunks()
    try:
        score_groups(two, workers=2)
        assert pool._pool is not None
        processes = list(pool._pool._processes.values())
        _wait_until_started({p.pid for p in processes if p.pid is not None})
        for process in processes:
            process.terminate()
        lived = [process for process in processes if not _ended_within(process.pid, 10.0)]
        for process in lived:  # ended here, or the pool's join below would wait for ever
            process.kill()
            process.join()
        assert not lived, "a worker its pool terminated lived on"
    finally:
        shutdown()


#: A pooled call of 200 LP chunks (about 10 s of CPU) as a command makes it: SIGTERM and
#: a hangup raise KeyboardInterrupt (`runs.signals`), said in one line, exit 130.
_GROUP_CALL = """
import signal, sys
for sig in (signal.SIGTERM, signal.SIGHUP):  # as a terminal's shell starts a command
    signal.signal(sig, signal.SIG_DFL)
import numpy as np
from runs.signals import exit_interrupted, stops_as_interrupt
from scoring import pool
rng = np.random.default_rng(1)
matrix = (rng.uniform(size=(60, 64)) < 0.5).astype(np.uint8)
pool.CHUNK_SETS = 64
try:
    with stops_as_interrupt():
        pool.score_groups([(matrix, rng.uniform(size=(64 * 200, 60)), "l1")], workers=2)
except KeyboardInterrupt:
    exit_interrupted()
print("the call ended before the signal")
"""


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (Linux: /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":  # pgrp; a zombie has ended
                found.append(int(stat.parent.name))
    return found


def _busy_workers(parent: int) -> bool:
    """Whether `parent` has two pool workers that have started (their Ctrl-C handler set), one
    of which has used CPU time in chunks (Linux: /proc). Not both: one may have started late,
    under load, and its share of the chunks be done before it has used that much."""
    started, busy = 0, 0
    for pid in _group(parent):
        with contextlib.suppress(OSError, StopIteration):
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            caught = next(line for line in status if line.startswith("SigCgt"))
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            worker = int(stat[1]) == parent and "spawn_main" in Path(
                f"/proc/{pid}/cmdline"
            ).read_text("utf-8", "replace")
            cpu_s = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
            if worker and int(caught.split()[1], 16) & (1 << (signal.SIGINT - 1)):
                started += 1
                busy += cpu_s > 1.5  # its start-up takes about 1 s, and chunks follow
    return started >= 2 and busy >= 1


@pytest.mark.timeout(180)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes in /proc")
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP], ids=lambda sig: sig.name)
def test_a_sigterm_or_hangup_to_the_group_during_a_pooled_call_ends_it_in_one_line(
    sent: signal.Signals,
) -> None:
    """`timeout` (SIGTERM) or a hangup sent to the group of a command scoring in the pool: it
    killed the workers, and the command's line came with the pool's own traceback
    (InvalidStateError from its thread); a hangup killed multiprocessing's resource tracker
    too, whose "died unexpectedly" warning and a KeyError traceback per semaphore followed.
    Now: the line alone, exit 130, and no process of the group left."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _GROUP_CALL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, signalled here, not this process's
    )
    try:
        deadline = time.monotonic() + 60.0
        while not _busy_workers(proc.pid) and proc.poll() is None:
            assert time.monotonic() < deadline, "the pool's workers never got busy"
            time.sleep(0.05)
        os.killpg(proc.pid, sent)
        out, err = proc.communicate(timeout=60)
        assert (proc.returncode, out, err) == (EXIT_INTERRUPTED, "", INTERRUPTED + "\n")
        deadline = time.monotonic() + 10.0
        while _group(proc.pid) and time.monotonic() < deadline:  # the tracker ends after it
            time.sleep(0.05)
        assert not _group(proc.pid)
    finally:
        for pid in _group(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


#: A process that starts the pool, says its workers' pids and is killed (`kill -9`), its
#: workers idle (a chunk's work is the same: the parent's death is looked for beside it).
_KILLED_PARENT = """
import os, signal
import numpy as np
from scoring import pool
rng = np.random.default_rng(1)
matrix = (rng.uniform(size=(60, 64)) < 0.5).astype(np.uint8)
pool.CHUNK_SETS = 64
pool.score_groups([(matrix, rng.uniform(size=(128, 60)), "l1")], workers=2)
assert pool._pool is not None
print(*pool._pool._processes, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie has: nothing may reap an orphan's at once)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes in /proc")
def test_workers_end_once_the_pools_process_is_killed() -> None:
    """A second SIGTERM or hangup to the group as the command exits kills it at their default
    (as `kill -9` or the out-of-memory killer does); its workers, which ignore them and wait
    on a queue they hold both ends of, were left running for good."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PARENT], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    workers = [int(pid) for pid in proc.stdout.readline().split()]
    try:
        assert proc.wait(60) == -signal.SIGKILL and len(workers) == 2
        deadline = time.monotonic() + 10.0  # each looks every PARENT_POLL_S (0.5 s)
        while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in workers), "a worker outlived its pool's process"
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_FORKED_CHILD = """
import os, signal, sys
import numpy as np
from scoring import pool
rng = np.random.default_rng(1)
matrix = (rng.uniform(size=(60, 64)) < 0.5).astype(np.uint8)
pool.CHUNK_SETS = 64
groups = [(matrix, rng.uniform(size=(128, 60)), "l1")]
first = pool.score_groups(groups, workers=2)
assert pool._pool is not None
parents = set(pool._pool._processes)
child = os.fork()
if child == 0:
    signal.alarm(30)  # a child stuck on the parent's pool ends here, not in the test's timeout
    again = pool.score_groups(groups, workers=2)
    assert pool._pool is not None and not set(pool._pool._processes) & parents
    assert np.array_equal(again.pop().profit, first[0].profit)
    sys.exit(0)  # at exit the child ends its own pool, and only that
_, status = os.waitpid(child, 0)
later = pool.score_groups(groups, workers=2)
assert np.array_equal(later.pop().profit, first[0].profit)
print(os.waitstatus_to_exitcode(status), set(pool._pool._processes) == parents, flush=True)
"""


@pytest.mark.timeout(120)
def test_a_forked_child_scores_on_a_pool_of_its_own_and_leaves_the_parents() -> None:
    """A child forked once the parent had used the pool inherited it, whose workers and
    management thread are the parent's: its pooled call queued chunks nobody took, for ever.
    Its exit then printed "AssertionError: can only join a child process" (multiprocessing's
    exit function joined the parent's workers, which it still counted as its children)."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_CHILD], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    # The child ended by itself (not by its alarm: -SIGALRM), and the parent's workers are
    # the same ones before and after it: the child never ended them.
    assert done.stdout.split() == ["0", "True"], done.stderr
    assert done.stderr == ""  # the child's and the parent's: neither printed anything


_FORKED_WHILE_SCORING = """
import os, signal, sys, threading, time
import numpy as np
from scoring import pool
rng = np.random.default_rng(1)
matrix = (rng.uniform(size=(6, 8)) < 0.5).astype(np.uint8)
groups = [(matrix, rng.uniform(size=(2, 6)), "inf")]
pool.score_groups(groups, workers=1)
stop = threading.Event()
def score_until_stopped():
    while not stop.is_set():
        pool.score_groups(groups, workers=1)
scorer = threading.Thread(target=score_until_stopped)
scorer.start()
children = []
for _ in range(int(sys.argv[1])):
    time.sleep(0.01)
    child = os.fork()
    if child == 0:
        signal.alarm(int(sys.argv[2]))  # a child stuck on a lock copied held ends here
        pool.score_groups(groups, workers=1)
        os._exit(0)
    children.append(child)
stop.set()
scorer.join()  # not left in HiGHS as the interpreter ends: that aborted the process
codes = [os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) for child in children]
print(sum(code != 0 for code in codes), "of", len(codes), flush=True)
"""


@pytest.mark.timeout(120)
def test_children_forked_while_another_thread_scores_in_process_score_too() -> None:
    """A child forked while another thread of its parent was scoring in this process copied
    the scoring package's locks as that thread held them, and its own scoring waited on them
    for ever (about one child in four: `scoring.blas.one_thread`'s, held around its limit)."""
    children, alarm_s = 40, 5
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_WHILE_SCORING, str(children), str(alarm_s)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "of", str(children)], done.stderr  # none hung


def _three_chunks(monkeypatch: pytest.MonkeyPatch) -> list[Group]:
    """A small group cut into three chunks (16 sets each)."""
    monkeypatch.setattr(pool, "CHUNK_SETS", 16)
    rng = np.random.default_rng(3)
    return [(horizon1(), np.round(rng.uniform(size=(48, 14)), 4), "inf")]


@pytest.mark.parametrize(
    "workers", [0, -1, True, False, 1.5, 2.0, "2", np.float64(2), np.True_], ids=repr
)
def test_workers_other_than_a_whole_number_from_1_are_refused_by_name(
    workers: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1.5, "2" and np.float64(2) failed deep in ProcessPoolExecutor with a TypeError, and 0,
    -1 and True were taken as one process, unsaid."""
    calls = pool.pooled_calls()
    with pytest.raises(ValueError, match=r"^workers must be a whole number of processes"):
        score_groups(_three_chunks(monkeypatch), workers=workers)  # type: ignore[arg-type]
    assert pool.pooled_calls() == calls  # refused before anything ran


def test_workers_past_the_chunks_start_no_more_processes_than_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An explicit count is honoured past the cores (a caller may know them better than
    `os.cpu_count()`), but no more processes start than there are chunks; a numpy integer is
    a whole number too."""
    groups = _three_chunks(monkeypatch)
    alone = score_groups(groups, workers=1)[0]
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    calls = pool.pooled_calls()
    try:
        _assert_same(alone, score_groups(groups, workers=np.int64(10**6))[0])  # type: ignore[arg-type]
        assert pool._pool_size == 3 and pool.pooled_calls() == calls + 1
    finally:
        shutdown()


def test_groups_given_by_a_generator_are_scored_as_a_list_of_them_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A generator was read whole and every group solved, then refused: "zip() argument 2 is
    longer than argument 1"."""
    matrix, probs, _ = _three_chunks(monkeypatch)[0]
    groups: list[Group] = [(matrix, probs, "inf"), (matrix, np.asarray(probs)[:5], "l1")]
    listed = score_groups(groups, workers=1)
    generated = score_groups((group for group in groups), workers=1)
    assert [result.norm for result in generated] == ["inf", "l1"]
    for one, other in zip(listed, generated, strict=True):
        _assert_same(one, other)


# A script's pooled call at its top level, without the guard: a spawned worker runs the
# script's top level again as it starts. Guarded, the same script scores.
_POOLED_AT_TOP_LEVEL = """
import numpy as np
from scoring.pool import score_groups
rng = np.random.default_rng(0)
incidence = (rng.uniform(size=(6, 8)) < 0.5).astype(float)
groups = [(incidence, rng.uniform(size=(4, 6)), "inf")] * 2
print(len(score_groups(groups, workers=2)), flush=True)
"""


def _run_script(path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path.write_text(text)
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=90, env=env
    )


@pytest.mark.timeout(120)
def test_a_script_pooling_without_the_main_guard_is_told_to_add_it_in_one_error(
    tmp_path: Path,
) -> None:
    """Each spawned worker's start ran the script's pooled call again, which multiprocessing
    refused with a RuntimeError traceback per worker, and the script's call failed with two
    BrokenProcessPool tracebacks (it retried): hundreds of lines, the guard named only in
    multiprocessing's text among them."""
    done = _run_script(tmp_path / "unguarded.py", _POOLED_AT_TOP_LEVEL)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("Traceback") == 1, done.stderr
    assert done.stderr.splitlines()[-1] == f"RuntimeError: {pool.UNGUARDED_MAIN_SAYS}"
    assert 'if __name__ == "__main__":' in pool.UNGUARDED_MAIN_SAYS
    guarded = _POOLED_AT_TOP_LEVEL.replace("\nprint(", '\nif __name__ == "__main__":\n    print(')
    done = _run_script(tmp_path / "guarded.py", guarded)
    assert (done.returncode, done.stdout, done.stderr) == (0, "2\n", "")
