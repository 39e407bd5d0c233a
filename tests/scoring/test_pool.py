"""`scoring.score_groups`: the same answers in a pool of processes as in one."""

from __future__ import annotations

import itertools

import numpy as np

from scoring import dutch_books
from scoring.pool import CHUNK_SETS, score_groups, shutdown


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
