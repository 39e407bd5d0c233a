"""The vertex-table fast path of `dutch_books` agrees with the LP, set by set, to 1e-9.

A call with at least `TABLE_MIN_SETS` fully answered sets scores them from a table of
the LP's vertices (`scoring.vertex_table`); these tests compare every such call with the
batched LP alone (`_solve`) and with scipy's independent distance LP, on the shipped
small panels and on random matrices, in both norms, with unanswered events mixed in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import scoring.dutch_book as dutch_book
from panels.families import load_families
from panels.stock import horizon_panel
from scoring import dutch_books, vertex_table

Reference = Callable[[np.ndarray, np.ndarray, str], float]
NORMS = ("inf", "l1")


def sets_for(incidence: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Uniform, coherent and near-coherent sets at 4 decimals, a few with NaN."""
    rng = np.random.default_rng(seed)
    n, m = incidence.shape
    uniform = np.round(rng.uniform(size=(k - k // 4, n)), 4)
    weights = rng.dirichlet(np.ones(m), size=k // 4)
    coherent = weights @ incidence.T
    coherent[1::2] = np.round(
        np.clip(coherent[1::2] + rng.normal(scale=0.02, size=coherent[1::2].shape), 0, 1), 4
    )
    probs = np.vstack((uniform, coherent))
    probs[::29, rng.integers(n)] = np.nan
    return probs


def check_against_lp(
    incidence: np.ndarray, probs: np.ndarray, norm: str, reference: Reference | None
) -> float:
    """Fast path vs LP alone (every set) and scipy (a sample); returns the table's share."""
    matrix = np.asarray(incidence, dtype=np.float64)
    fast = dutch_books(matrix, probs, norm)
    lp_profit, _, _, lp_gap = dutch_book._solve(matrix, probs, norm)
    answered = ~np.isnan(probs)
    solved = np.isfinite(lp_profit) & (lp_gap <= 1e-9)
    np.testing.assert_allclose(fast.profit[solved], lp_profit[solved], atol=1e-9, rtol=0)
    assert np.array_equal(np.isnan(fast.profit), ~answered.any(axis=1))
    assert np.array_equal(np.isnan(fast.stakes), ~answered)
    assert np.array_equal(np.isnan(fast.coherent), ~answered)
    # Every answer is its own certificate: the book pays `profit` in every atom and the
    # forecast (a mixture of atoms by construction) is `profit` away from p.
    p = np.where(answered, probs, 0.0)
    book = np.where(answered, fast.stakes, 0.0)
    budget = np.abs(book).sum(axis=1) if norm == "inf" else np.abs(book).max(axis=1)
    assert np.all(budget <= 1 + 1e-9)
    worst = (book @ matrix).min(axis=1) - (book * p).sum(axis=1)
    has = answered.any(axis=1)
    assert np.all(worst[has] >= fast.profit[has] - 1e-9)
    gap = np.where(answered, np.abs(fast.coherent - p), 0.0)
    distance = gap.max(axis=1) if norm == "inf" else gap.sum(axis=1)
    np.testing.assert_allclose(distance[has], fast.profit[has], atol=1e-9, rtol=0)
    if reference is not None:
        for k in range(0, len(probs), max(1, len(probs) // 25)):
            if has[k]:
                assert abs(fast.profit[k] - reference(matrix, probs[k], norm)) <= 1e-9
    table = vertex_table.table_for(matrix, norm)
    if table is None:
        return 0.0
    complete = probs[~np.isnan(probs).any(axis=1)]
    vertices = table.vertices(complete)
    weights = table.weights(vertices, complete, bases=table.gain.shape[1])
    certified = dutch_book._certify(matrix, complete, weights, table.stakes[vertices], norm)[3]
    return float(np.mean(certified <= 1e-9))


def horizon1() -> np.ndarray:
    bins = range(4)
    events = [s for size in (1, 2, 3) for s in itertools.combinations(bins, size)]
    return np.array([[b in s for b in bins] for s in events], dtype=np.float64)


@pytest.mark.parametrize("norm", NORMS)
def test_horizon1_panel_uses_the_table_and_matches_the_lp(
    norm: str, reference_distance: Reference
) -> None:
    incidence = np.asarray(horizon_panel(1).incidence, dtype=np.float64)
    assert np.array_equal(incidence[np.lexsort(incidence.T)], horizon1()[np.lexsort(horizon1().T)])
    share = check_against_lp(
        incidence, sets_for(incidence, 1200, seed=11), norm, reference_distance
    )
    # Not vacuous: most sets really are answered from the table.
    assert share > (0.9 if norm == "inf" else 0.5)


def family_panels() -> list[tuple[str, np.ndarray]]:
    """One shipped family panel of each shape (the shapes are what the table depends on)."""
    seen: dict[tuple[int, int], tuple[str, np.ndarray]] = {}
    for name, family in sorted(load_families().items()):
        incidence = np.asarray(family.panel().incidence, dtype=np.float64)
        seen.setdefault(incidence.shape, (name, incidence))
    return list(seen.values())


@pytest.mark.parametrize("norm", NORMS)
def test_shipped_family_panels_match_the_lp(norm: str) -> None:
    for index, (_, incidence) in enumerate(family_panels()):
        probs = sets_for(incidence, dutch_book.TABLE_MIN_SETS + 40, seed=index)
        check_against_lp(incidence, probs, norm, None)


@settings(max_examples=12, deadline=None)
@given(
    incidence=st.integers(1, 7).flatmap(
        lambda n: st.integers(1, 5).flatmap(
            lambda m: hnp.arrays(np.uint8, (n, m), elements=st.integers(0, 1))
        )
    ),
    norm=st.sampled_from(NORMS),
    seed=st.integers(0, 2**16),
)
def test_random_matrices_match_the_lp(incidence: np.ndarray, norm: str, seed: int) -> None:
    probs = sets_for(incidence, dutch_book.TABLE_MIN_SETS, seed=seed)
    check_against_lp(incidence, probs, norm, None)


def test_large_panels_get_no_table() -> None:
    incidence = np.asarray(horizon_panel(2).incidence, dtype=np.float64)
    assert vertex_table.table_for(incidence, "inf") is None


def test_table_is_the_same_in_every_build() -> None:
    first = vertex_table.build(horizon1(), "inf")
    second = vertex_table.build(horizon1(), "inf")
    assert first is not None and second is not None
    np.testing.assert_array_equal(first.stakes, second.stakes)
    np.testing.assert_array_equal(first.gain, second.gain)
