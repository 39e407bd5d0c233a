"""Batched Dutch-book LPs against a per-set `scipy.optimize.linprog` loop.

Both methods score the same random answer sets (uniform in [0, 1], 4 decimals, as a
model would state them) and must agree to 1e-9 on every set they both solved; the
ratio of sets per second is the figure issues 2 and 12 set targets for (issue 12:
>= 100x at horizon 1, where the vertex table answers, and >= 10x at horizon 4).
"""

from __future__ import annotations

import itertools
import os
import resource
import time

import numpy as np
import numpy.typing as npt

from scoring import dutch_books, vertex_table
from scoring.dutch_book import uses_table
from scoring.pool import score_groups, shutdown

FloatArray = npt.NDArray[np.float64]

#: Longest the slow baseline may run per panel; past it, its rate comes from a prefix.
BASELINE_BUDGET_S = 120.0
AGREEMENT = 1e-9


def horizon1_incidence() -> FloatArray:
    """The 14 nonempty proper unions of the 4 return bins over the 4 bins (derived)."""
    bins = range(4)
    events = [s for size in (1, 2, 3) for s in itertools.combinations(bins, size)]
    return np.array([[1.0 if b in s else 0.0 for b in bins] for s in events])


def horizon4_incidence() -> tuple[FloatArray, str]:
    """The paper's horizon-4 panel from `panels`, or a same-sized stand-in if absent."""
    try:
        from panels.stock import horizon_panel

        return np.asarray(horizon_panel(4).incidence, dtype=np.float64), "panels.stock h=4"
    except ImportError:
        pass
    # Stand-in: per-day unions of bins, pairwise up/down products, 4-day up/down patterns.
    atoms = list(itertools.product(range(4), repeat=4))
    h1 = horizon1_incidence()
    rows = [[h1[e, atom[d]] for atom in atoms] for d in range(4) for e in range(14)]
    for d1, d2 in itertools.combinations(range(4), 2):
        for u1, u2 in itertools.product((0, 1), repeat=2):
            rows.append([float((a[d1] >= 2) == u1 and (a[d2] >= 2) == u2) for a in atoms])
    for pattern in itertools.product((0, 1), repeat=4):
        rows.append([float(all((a[d] >= 2) == pattern[d] for d in range(4))) for a in atoms])
    return np.array(rows), "stand-in (panels.stock missing)"


def linprog_profit(incidence: FloatArray, p: FloatArray) -> float:
    """Paper eq. 1 solved directly, one set per call: max t s.t. b.(M_j - p) >= t, |b|_1 <= 1."""
    # Imported here: the pool's spawned workers re-import this module as __main__, and
    # scipy would add its import time to their start-up, which a user's pool does not pay.
    from scipy.optimize import linprog

    n, m = incidence.shape
    payoff = incidence - p[:, np.newaxis]  # (n, m): contract i's net payoff in atom j
    # variables: b+ (n), b- (n), t; minimise -t
    cost = np.zeros(2 * n + 1)
    cost[-1] = -1.0
    a_ub = np.hstack((-payoff.T, payoff.T, np.ones((m, 1))))
    a_ub = np.vstack((a_ub, np.concatenate((np.ones(2 * n), [0.0]))))
    b_ub = np.concatenate((np.zeros(m), [1.0]))
    bounds = [(0, None)] * (2 * n) + [(None, None)]
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0:
        raise RuntimeError(f"linprog failed: {result.message}")
    return float(-result.fun)


def compare(name: str, incidence: FloatArray, n_sets: int, seed: int, rounds: int = 5) -> float:
    """Time both methods on the same sets, check agreement, print a line; return the ratio.

    The machine is shared, so the two methods take turns on `rounds` slices of the sets
    (each slice scored by one `dutch_books` call, then by the linprog loop): a burst of
    load from elsewhere then hits both rather than skewing the ratio. Both run on one
    thread, so their CPU times are printed too: a ratio of those moves less with load
    (the wall-clock ratio has read 222x under load where the quiet one was 37.6x).
    """
    rng = np.random.default_rng(seed)
    probs = np.round(rng.uniform(0.0, 1.0, size=(n_sets, incidence.shape[0])), 4)
    # The vertex table of a small matrix (built once per matrix and process) and
    # first-call imports and allocations are not in the rate; the build is printed.
    per_call = n_sets // rounds
    start = time.perf_counter()
    table = None
    if uses_table(incidence.shape, "inf", per_call):
        table = vertex_table.table_for(incidence, "inf")
    warm_s = time.perf_counter() - start
    dutch_books(incidence, probs[:per_call])

    batched = np.empty(n_sets)
    baseline: list[float] = []
    batched_s = baseline_s = batched_cpu = baseline_cpu = 0.0
    budget_per_round = BASELINE_BUDGET_S / rounds
    for chunk in np.array_split(np.arange(n_sets), rounds):
        start, cpu = time.perf_counter(), time.process_time()
        batched[chunk] = dutch_books(incidence, probs[chunk]).profit
        batched_s += time.perf_counter() - start
        batched_cpu += time.process_time() - cpu

        start, cpu = time.perf_counter(), time.process_time()
        for k in chunk:
            baseline.append(linprog_profit(incidence, probs[k]))
            if time.perf_counter() - start > budget_per_round:
                break
        baseline_s += time.perf_counter() - start
        baseline_cpu += time.process_time() - cpu
        if len(baseline) < chunk[-1] + 1:
            break  # the slow loop ran out of budget: keep the sets both methods saw
    done = len(baseline)
    solved_batched = min(n_sets, int(chunk[-1]) + 1)

    worst = float(np.max(np.abs(batched[:done] - np.array(baseline))))
    if worst > AGREEMENT:
        raise AssertionError(f"{name}: methods disagree by {worst:.3g} > {AGREEMENT:g}")

    fast = solved_batched / batched_s
    slow = done / baseline_s
    cpu_ratio = (solved_batched / batched_cpu) / (done / baseline_cpu)
    note = ""
    if done < n_sets:
        note = f" (linprog loop stopped after {done} sets at its time budget; rate from those)"
    path = (
        f"{'exact ' if table.exact else ''}vertex table of {len(table.stakes)} vertices, "
        f"built once in {warm_s:.2f} s"
        if table is not None
        else "batched LP (no vertex table for this matrix)"
    )
    print(
        f"{name} [{path}]: {n_sets} sets x {incidence.shape[0]} events x "
        f"{incidence.shape[1]} atoms | "
        f"dutch_books {fast:,.0f} sets/s | linprog loop {slow:,.0f} sets/s | "
        f"ratio {fast / slow:.1f}x (CPU time {cpu_ratio:.1f}x) | max |diff| {worst:.1e} "
        f"on {done} sets{note}"
    )
    return fast / slow


def pool_speedup(incidence: FloatArray, n_sets: int, seed: int, rounds: int = 3) -> float:
    """`score_groups` on every core against one process, same sets, turns interleaved.

    The pool is kept for the process's life, so the first pooled call pays for spawning
    its workers (an interpreter, numpy and HiGHS each) and later ones do not: both are
    printed, the first against the first one-process turn, the rest as medians. Results
    must be identical. Also printed: the CPU time the workers used over all pooled turns
    (read when they exit) against this process's over the one-process turns: the pool's
    own cost in work, which a loaded machine does not distort as it does the wall clock
    (with the kernel's autogroup scheduling, a session's processes share one CPU share,
    so two workers cannot take more than one process would while others are busy).
    Returns the warm ratio.
    """
    rng = np.random.default_rng(seed)
    probs = np.round(rng.uniform(0.0, 1.0, size=(n_sets, incidence.shape[0])), 4)
    groups = [(incidence, probs, "inf")]
    workers = os.cpu_count() or 1
    one_s: list[float] = []
    pool_s: list[float] = []
    shutdown()  # the first pooled turn starts its workers
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    one_cpu = 0.0
    for _ in range(rounds):
        start, cpu = time.perf_counter(), time.process_time()
        alone = score_groups(groups, workers=1)[0]
        one_s.append(time.perf_counter() - start)
        one_cpu += time.process_time() - cpu
        start = time.perf_counter()
        pooled = score_groups(groups, workers=workers)[0]
        pool_s.append(time.perf_counter() - start)
        for field in ("profit", "stakes", "coherent"):
            if not np.array_equal(getattr(alone, field), getattr(pooled, field), equal_nan=True):
                raise AssertionError(f"pooled {field} differ from one process")
    shutdown()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    pool_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    cold = one_s[0] / pool_s[0]
    warm = float(np.median(one_s[1:]) / np.median(pool_s[1:]))
    print(
        f"pool (horizon 4, {n_sets} sets, {workers} workers vs 1 process, {rounds} interleaved "
        f"turns, results identical): first call {pool_s[0]:.2f} s vs {one_s[0]:.2f} s = "
        f"{cold:.2f}x (worker start-up included) | later calls, pool kept: median "
        f"{np.median(pool_s[1:]):.2f} s vs {np.median(one_s[1:]):.2f} s = {warm:.2f}x | "
        f"CPU: workers {pool_cpu:.1f} s (start-up included) vs one process {one_cpu:.1f} s"
    )
    return warm


def main() -> None:
    h4, source = horizon4_incidence()
    print(
        f"bench.lp: norm=inf, random probs U[0,1] rounded to 4 dp, methods alternating "
        f"over 5 slices; horizon 4 from {source}"
    )
    compare("horizon 1", horizon1_incidence(), 10_000, seed=1)
    compare("horizon 4", h4, 1_000, seed=4)
    pool_speedup(h4, 1_000, seed=5)


if __name__ == "__main__":
    main()
