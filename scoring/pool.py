"""Scoring many groups of answer sets on every core, with the results of one process.

`score_groups` takes groups of sets that share an incidence matrix and norm (as a run's
scoring step collects them) and returns one `DutchBookResult` per group. Each group is
cut into chunks of at most `CHUNK_SETS` sets at fixed places, and every chunk is one
`dutch_books` call: in this process, or in a pool of worker processes (one HiGHS each)
when the work is big enough to pay for them. The chunks, and so the calls, are the same
either way, and a call's answer depends only on its own inputs (vertex tables are
enumerated, or searched from a fixed seed; the parent builds them once and sends them
with the chunks that use them), so the pooled results are identical to the
single-process ones, bit for bit.

Workers are spawned rather than forked: the caller may hold threads (an event loop,
polars' pool) that a fork would copy in an unknown state. A spawned worker runs the
caller's `__main__` again as it starts; a pooled call made there (a script without
`if __name__ == "__main__":`) is refused in one RuntimeError (`UNGUARDED_MAIN_SAYS`).
Spawning one costs about a second (an interpreter, numpy and HiGHS), so the pool is kept
for the process's life and later calls reuse its workers (`shutdown` ends it; it also
ends at exit). Calls may
come from several threads at once: they share the pool, which is never ended or resized
under a call mapping on it. A forked child starts a pool of its own (`_forget_inherited`).
Workers ignore a Ctrl-C as they start and between chunks (a
terminal's goes to the whole process group, and ended them) and stop at one within a chunk.
They ignore SIGTERM and a hangup (`_handle_stops`), which reach them the same way; a pool
that must end them forcibly kills them (`_KILLED_BY_TERMINATE`), and they end themselves
once the pool's process is gone (`_watch_parent`).
"""

from __future__ import annotations

import atexit
import operator
import os
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import process, resource_tracker
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.process import BaseProcess
from types import FrameType

import numpy as np
import numpy.typing as npt

from scoring import vertex_table
from scoring.dutch_book import DutchBookResult, UncertifiedError, dutch_books, uses_table
from scoring.inputs import FloatArray, as_incidence, as_probs

#: Sets per chunk at most: large enough for the vertex table and the LP's batches to
#: pay off; a chunk of a big matrix is cut smaller, to about CHUNK_WORK entries of M
#: over its sets (horizon 4: 63 sets), so that its sets spread over the cores.
CHUNK_SETS = 4096
CHUNK_WORK = 4_000_000
#: Work (sets x events x atoms, summed) below which a pool costs more than it saves:
#: starting a worker takes about a second (an interpreter, numpy and HiGHS), and horizon
#: 4 is solved at about 2.5 ms a set (about 1,000 sets here) in one process.
POOL_MIN_WORK = 60_000_000

Group = tuple[npt.ArrayLike, npt.ArrayLike, str]
_Chunk = tuple[FloatArray, FloatArray, str]


def _chunks(groups: Iterable[Group]) -> tuple[list[_Chunk], list[int]]:
    """Fixed cut points (by the matrix's size only); also the chunk count of each group (one
    at least: a group of no sets is one chunk of none). `groups` is read once."""
    chunks: list[_Chunk] = []
    counts: list[int] = []
    for incidence, probs, norm in groups:
        matrix = as_incidence(incidence)
        sets, _ = as_probs(probs, matrix.shape[0])
        # A matrix of no events has no entries (its sets' profits are NaN, as dutch_books says).
        size = int(np.clip(CHUNK_WORK // max(matrix.size, 1), 16, CHUNK_SETS))
        starts = range(0, max(len(sets), 1), size)
        chunks.extend((matrix, sets[s : s + size], norm) for s in starts)
        counts.append(len(starts))
    return chunks, counts


def _score(chunk: _Chunk) -> DutchBookResult:
    incidence, probs, norm = chunk
    return dutch_books(incidence, probs, norm)


def _in_order(results: Iterable[DutchBookResult]) -> list[DutchBookResult]:
    """The chunks' results, in their order; a set no solve certified is placed by its chunk
    (`UncertifiedError.placed`), which its `dutch_books` call, given that chunk alone, could
    not say."""
    done: list[DutchBookResult] = []
    try:
        for result in results:
            done.append(result)
    except UncertifiedError as error:
        raise error.placed(len(done), error.set_index) from error
    return done


def _in_group(
    error: UncertifiedError, chunks: Sequence[_Chunk], counts: list[int]
) -> UncertifiedError:
    """`error`, placed by its chunk (`_in_order`), placed by its group instead: the group's
    index among those given, and the set's row in the group's probabilities."""
    assert error.job is not None
    first = 0
    for group, count in enumerate(counts):
        if error.job < first + count:
            if error.set_index is None:
                return error.placed(group, None)
            before = sum(chunks[c][1].shape[0] for c in range(first, error.job))
            return error.placed(group, before + error.set_index)
        first += count
    raise AssertionError(f"chunk {error.job} is in none of {len(counts)} groups")


#: What the workers start with held (`_mapped`), as `runs.signals.STOP_SIGNALS` (not imported:
#: scoring does not depend on the CLI): what a terminal, `timeout` or a service manager sends
#: to the whole process group.
_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _KilledByTerminate(SpawnProcess):
    """A worker that `terminate` kills: the pool terminates its live workers when another
    died (a broken pool: its queues' locks may be held by the dead one, so they may never
    read the sentinel that ends them), and joins them; the workers ignore SIGTERM, and the
    join waited for ever."""

    def terminate(self) -> None:
        self.kill()


class _SpawnKilledByTerminate(SpawnContext):
    Process = _KilledByTerminate


#: The pool's context: spawned workers, killed when the pool terminates them.
_KILLED_BY_TERMINATE = _SpawnKilledByTerminate()

#: A worker's exit status when its start, which runs the caller's `__main__` again (spawned),
#: made a pooled call there (`_refuse_in_a_starting_worker`).
_EXIT_UNGUARDED_MAIN = 86
#: How long a broken pool's caller waits for its workers' exit statuses (being killed, they
#: end at once) to tell whether an unguarded `__main__` broke it (`_unguarded_main`).
WORKER_END_WAIT_S = 5.0
#: What a pooled call from a script without the guard raises, once, in the caller.
UNGUARDED_MAIN_SAYS = (
    "score_groups' worker processes are spawned, and each runs the calling script's top-level "
    "code again as it starts, which made a pooled call there too: put the script's calls under "
    '`if __name__ == "__main__":`'
)


def _refuse_in_a_starting_worker() -> None:
    """In a worker of this module's pool that is starting (running the caller's `__main__`
    again, as a spawned process does), a pooled call ends the worker with
    `_EXIT_UNGUARDED_MAIN`, silently: multiprocessing refused the call's own spawn with a
    RuntimeError whose traceback every worker printed, and the caller's call failed with
    BrokenProcessPool's, twice (its retry); the caller now says it once (`_unguarded_main`)."""
    me = process.current_process()
    starting = getattr(me, "_inheriting", False)  # set by multiprocessing while it starts
    if starting and me.name.startswith(f"{_KilledByTerminate.__name__}-"):
        os._exit(_EXIT_UNGUARDED_MAIN)


def _unguarded_main(pool: ProcessPoolExecutor) -> bool:
    """Whether `pool` broke because a worker ended at its start as one does whose caller's
    `__main__` made a pooled call unguarded (`_refuse_in_a_starting_worker`)."""
    workers = list((pool._processes or {}).values())
    deadline = time.monotonic() + WORKER_END_WAIT_S
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    return any(worker.exitcode == _EXIT_UNGUARDED_MAIN for worker in workers)


#: Whether this worker is in a chunk: a Ctrl-C stops the chunk then, and is ignored otherwise.
_in_chunk = False


def _ctrl_c(_signum: int, _frame: FrameType | None) -> None:
    """A worker's Ctrl-C handler, set once: a KeyboardInterrupt within a chunk, nothing between
    chunks. It clears `_in_chunk` as it raises, so a second Ctrl-C as the chunk unwinds does
    nothing either."""
    global _in_chunk
    if _in_chunk:
        _in_chunk = False
        raise KeyboardInterrupt


#: How often a worker looks whether its parent is still there (`_watch_parent`).
PARENT_POLL_S = 0.5


def _watch_parent(parent: int) -> None:
    """End this worker once its parent is gone: killed (`kill -9`, out of memory, or a second
    SIGTERM or hangup as it exits, which it then takes at their default). A worker waits for
    chunks on a queue whose writing end it holds itself, so the parent's death never reached
    it; ignoring SIGTERM and a hangup, it outlived the group's signal that killed the parent,
    for good, and held the command's stdout and stderr open (a caller reading them to their
    end waited for ever)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)  # nobody is waiting for its chunks, and nothing of it is to be kept


def _worker_start(parent: int) -> None:
    """A worker's start: its stop signals handled (`_handle_stops`), and a thread that ends it
    once `parent` (the pool's process) is gone (`_watch_parent`)."""
    _handle_stops()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _handle_stops() -> None:
    """A worker ignores Ctrl-C between chunks: a terminal's Ctrl-C goes to the whole process
    group, and it ended idle workers, so the parent's next pooled call failed
    (BrokenProcessPool). The parent decides what a Ctrl-C does.

    SIGTERM and a hangup are ignored at all times: `timeout`, `kill -TERM -PGID`, a service
    manager or a closing terminal send them to the whole group too, and they killed the
    workers, idle or in a chunk (the interrupted command printed the pool's own traceback,
    InvalidStateError, under its line). The parent stops on them (`runs.signals`), and its
    pool's shutdown waits for the chunks in flight, as it does after a Ctrl-C that landed
    between chunks. Unlike Ctrl-C they do not stop a chunk: under `nohup` the parent ignores
    a hangup, and a worker that stopped its chunk on one would interrupt the command.

    One handler for the worker's life (`_ctrl_c`): Python's own was set for each chunk and
    SIG_IGN put back after it, and a Ctrl-C that landed as a chunk ended, before SIG_IGN was
    back, left Python's set, so the next one ended the idle worker. The worker starts with
    the three held (`_mapped`); they are let through once handled, and a Ctrl-C that came
    while the worker started lands now, between chunks."""
    signal.signal(signal.SIGINT, _ctrl_c)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one held meanwhile is dropped here
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)


def _score_in_worker(chunk: _Chunk, table: vertex_table.VertexTable | None) -> DutchBookResult:
    """`_score` in a worker, with the parent's vertex table installed first if it sent one.

    Within a chunk a Ctrl-C stops it at once, as it would in the parent: the worker lives
    (its KeyboardInterrupt is the chunk's result) and is idle when the parent, stopped by
    the same Ctrl-C, next calls or exits."""
    global _in_chunk
    _in_chunk = True
    try:
        if table is not None:
            vertex_table.install({vertex_table.key_of(table.incidence, table.norm): table})
        return _score(chunk)
    finally:
        _in_chunk = False


def _held_mask() -> set[int | signal.Signals]:
    """This thread's signal mask, read without changing it: a Ctrl-C that lands as it is read
    raises before there is anything to put back (blocking first would have left Ctrl-C held
    in this thread for good, the mask to restore never returned)."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, ())


def _work(chunks: Sequence[_Chunk]) -> int:
    return sum(probs.shape[0] * incidence.size for incidence, probs, _ in chunks)


def _tables(chunks: Sequence[_Chunk]) -> list[vertex_table.VertexTable | None]:
    """The vertex table each chunk will use (None: the LP), built here once, not per worker."""
    tables: list[vertex_table.VertexTable | None] = []
    for incidence, probs, norm in chunks:
        table = None
        complete = int((~np.isnan(probs).any(axis=1)).sum())
        # No sets or no events: dutch_books answers without solving (a table of no rows).
        if probs.size and uses_table(incidence.shape, norm, complete):
            table = vertex_table.table_for(incidence, norm)
        tables.append(table)
    return tables


_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_pool_size = 0
_pooled_calls = 0
#: Calls mapping on each pool now, by pool. Calls may come from several threads at once
#: (the report's and a run's scoring may share a process), and a pool one of them maps on
#: must not end under it ("cannot schedule new futures after shutdown"): a resize leaves
#: it alone, and a pool `shutdown` retired while in use is ended by its last call.
_users: dict[ProcessPoolExecutor, int] = {}


def _acquire(workers: int) -> ProcessPoolExecutor:
    """The process's pool, started on first use, held by the caller until `_release`.

    An idle pool of another size is replaced by one of `workers`; one that other calls
    are mapping on is shared as it is (its size sets only how many chunks run at once, not
    their results)."""
    global _pool, _pool_size
    with _lock:
        if _pool is not None and _pool_size != workers and not _users.get(_pool):
            _pool.shutdown()
            _pool = None
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=_KILLED_BY_TERMINATE,
                initializer=_worker_start,
                initargs=(os.getpid(),),
            )
            _pool_size = workers
        _users[_pool] = _users.get(_pool, 0) + 1
        return _pool


def _release(pool: ProcessPoolExecutor, broken: bool = False) -> None:
    """A call is done with `pool`; a broken pool is retired (the next call starts afresh),
    and a retired one is ended once no call maps on it."""
    global _pool
    with _lock:
        _users[pool] -= 1
        if broken and pool is _pool:
            _pool = None
        if _users[pool] > 0:
            return
        del _users[pool]
        if pool is _pool:
            return
    pool.shutdown()


def shutdown() -> None:
    """End the pool's workers (the next pooled call starts new ones); calls that other
    threads are making on it finish first, and its workers end after the last of them."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
        if pool is None or pool in _users:
            return
    pool.shutdown()


atexit.register(shutdown)


#: The pools a forked child inherited (`_forget_inherited`), kept referenced for its life.
_inherited: list[ProcessPoolExecutor] = []


def _forget_inherited() -> None:
    """In a forked child: no pool, so its first pooled call starts its own.

    The parent's pool, copied by the fork, is the parent's: its workers read the parent's
    queues and its management thread did not cross, so a call mapping on it here queued
    chunks nobody took, for ever. It is left alone, not shut down (its workers serve the
    parent), and kept referenced: collecting it would take its lock, which a parent thread
    may have held at the fork, and wake the parent's management thread. The module's lock
    is made anew for the same reason, and no call of the child maps on a pool yet.

    The parent's workers are no children of this process either: multiprocessing, which
    still listed them as its children here, joined them as the child exited and printed
    "AssertionError: can only join a child process". They are taken off its list, and only
    they (`_KilledByTerminate`: any pool's of this module, one shutting down at the fork as
    well); the parent's other children are multiprocessing's to manage."""
    global _lock, _pool, _pool_size
    _inherited.extend(filter(None, [_pool, *_users]))
    children: set[BaseProcess] = process._children  # type: ignore[attr-defined]
    children.difference_update([p for p in children if isinstance(p, _KilledByTerminate)])
    _lock = threading.Lock()
    _pool, _pool_size = None, 0
    _users.clear()


os.register_at_fork(after_in_child=_forget_inherited)


def pooled_calls() -> int:
    """How many calls so far went to the pool: a caller that sees no new one over a stretch
    of its work knows the workers sat idle there (and may `shutdown` them)."""
    return _pooled_calls


def _pooled(chunks: Sequence[_Chunk], workers: int) -> list[DutchBookResult]:
    global _pooled_calls
    _refuse_in_a_starting_worker()
    with _lock:
        _pooled_calls += 1  # once a call, its retry on new workers included
    tables = _tables(chunks)
    try:
        return _mapped(chunks, tables, workers)
    except BrokenProcessPool:
        # A worker died, here or since the last call (killed, out of memory): the pool is
        # retired, and the chunks, which have no side effects, run once more on new workers.
        return _mapped(chunks, tables, workers)


def _start_tracker() -> None:
    """Start multiprocessing's resource tracker, if it is not running, with the stop signals
    held: it inherits the mask, and it ignores SIGINT and SIGTERM but not a hangup, which
    killed it when sent to the group; the pool's end then warned that it "died unexpectedly"
    and the relaunched one printed a KeyError traceback for each of the pool's semaphores.
    Started before the pool is made or maps, which would start it otherwise: unheld (its
    queues' locks register with it), or within `_mapped`'s hold, which starting it breaks
    (CPython lets SIGINT and SIGTERM through in this thread once it has started it)."""
    held = _held_mask()
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _mapped(
    chunks: Sequence[_Chunk], tables: list[vertex_table.VertexTable | None], workers: int
) -> list[DutchBookResult]:
    _start_tracker()
    pool = _acquire(min(workers, len(chunks)))
    broken = False
    try:
        held = _held_mask()
        try:
            # The stop signals held in this thread while map submits every chunk, which may
            # spawn workers: a worker inherits them held (through fork and exec) until
            # `_handle_stops` handles them. Starting Python and numpy takes a worker about a
            # second, and a Ctrl-C, SIGTERM or hangup then killed it (sent to the group, it
            # reaches every worker; a pool replaced while they came spawned new workers into
            # them). This guards the workers, not the parent's timing: another thread of
            # this process may take one meanwhile, as before.
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
            results = pool.map(_score_in_worker, chunks, tables)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return _in_order(results)
    except BrokenProcessPool:
        broken = True
        if _unguarded_main(pool):
            raise RuntimeError(UNGUARDED_MAIN_SAYS) from None
        raise
    finally:
        _release(pool, broken)


def default_workers(chunks: Sequence[_Chunk]) -> int:
    """All cores when the work is big and splits into several chunks, else one."""
    if len(chunks) < 2 or _work(chunks) < POOL_MIN_WORK:
        return 1
    return max(1, min(len(chunks), os.cpu_count() or 1))


def _processes(workers: int | None, chunks: Sequence[_Chunk]) -> int:
    """How many processes score `chunks` for `score_groups(workers=...)`: `default_workers`
    for None, else `workers` as asked (a caller may know its cores better than
    `os.cpu_count()`: a container's quota, say), no more than the chunks (`_mapped`).
    Anything but None or a whole number from 1 (a numpy integer too) is a ValueError: 1.5,
    "2" or np.float64(2) failed deep in the pool with a TypeError, and 0, -1 or True were
    taken as one process, unsaid."""
    if workers is None:
        return default_workers(chunks)
    try:
        count = None if isinstance(workers, bool) else operator.index(workers)
    except TypeError:
        count = None
    if count is None or count < 1:
        raise ValueError(
            f"workers must be a whole number of processes, 1 or more (or None to choose by "
            f"the work), got {workers!r}"
        )
    return count


def score_groups(groups: Iterable[Group], workers: int | None = None) -> list[DutchBookResult]:
    """`dutch_books` of each (incidence, probs, norm) group, optionally on several cores.

    `workers=None` chooses (one process for small work); 1 forces this process; more are at
    most that many processes, and no more than the chunks (`_processes`). A set
    no solve certifies raises `UncertifiedError` placed by its group (`job`) and its row
    there, whichever process solved it. `groups` may be any iterable (a generator too): it is
    read once, into the chunks, and only they are kept.
    """
    chunks, counts = _chunks(groups)
    workers = _processes(workers, chunks)
    try:
        if workers <= 1 or len(chunks) < 2:
            results = _in_order(map(_score, chunks))
        else:
            results = _pooled(chunks, workers)
    except UncertifiedError as error:
        raise _in_group(error, chunks, counts) from error
    out: list[DutchBookResult] = []
    position = 0
    for count in counts:
        # The group's norm from its first chunk: `groups` was read once, by `_chunks` (a
        # generator given was solved whole, then "zip() argument 2 is longer").
        norm = chunks[position][2]
        parts = results[position : position + count]
        position += count
        out.append(
            DutchBookResult(
                profit=np.concatenate([p.profit for p in parts]),
                stakes=np.vstack([p.stakes for p in parts]),
                coherent=np.vstack([p.coherent for p in parts]),
                norm=norm,
            )
        )
    return out
