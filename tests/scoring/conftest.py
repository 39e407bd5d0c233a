"""Independent reference computations for the scoring tests.

Everything here uses scipy's `linprog` on the *distance* (dual) form of the Dutch-book
LP, written out separately from `scoring`, so agreement is evidence rather than echo.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from scipy.optimize import linprog

FloatArray = npt.NDArray[np.float64]


def distance_to_coherent(incidence: FloatArray, p: FloatArray, norm: str) -> float:
    """min over distributions pi of ||M pi - p|| in `norm`, answered rows only (scipy)."""
    answered = ~np.isnan(p)
    m_a = np.asarray(incidence, dtype=np.float64)[answered]
    p_a = p[answered]
    n, m = m_a.shape
    gaps = 1 if norm == "inf" else n
    # variables: pi (m), gap (1 or n); minimise the total gap
    cost = np.concatenate((np.zeros(m), np.ones(gaps)))
    gap_cols = -np.ones((n, 1)) if norm == "inf" else -np.eye(n)
    a_ub = np.vstack((np.hstack((m_a, gap_cols)), np.hstack((-m_a, gap_cols))))
    b_ub = np.concatenate((p_a, -p_a))
    a_eq = np.concatenate((np.ones(m), np.zeros(gaps)))[np.newaxis, :]
    result = linprog(
        cost,
        A_ub=a_ub,
        b_ub=b_ub,
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(0, None)] * (m + gaps),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    assert result.status == 0, result.message
    return float(result.fun)


@pytest.fixture(scope="session")
def reference_distance() -> Callable[[FloatArray, FloatArray, str], float]:
    return distance_to_coherent


@pytest.fixture(scope="session")
def is_coherent() -> Callable[[FloatArray, FloatArray], bool]:
    """True when q (on its non-NaN rows) equals M pi for some distribution pi, to 1e-9."""

    def check(incidence: FloatArray, q: FloatArray) -> bool:
        return distance_to_coherent(incidence, q, "inf") <= 1e-9

    return check


def tiny_weight_mixtures(incidence: FloatArray, count: int, seed: int) -> FloatArray:
    """`count` coherent sets, each M pi for a sparse mixture pi that gives one atom a weight
    between 1e-12 and 1e-9: probabilities that close to a face of the coherent set are within
    HiGHS's tolerances (absolute, 1e-10), which took one of 1e-10 for 0."""
    rng = np.random.default_rng(seed)
    m = np.shape(incidence)[1]
    weights = rng.dirichlet(np.full(m, 0.3), size=count) * (rng.random((count, m)) < 0.4)
    tiny = 10.0 ** rng.uniform(-12, -9, size=count)
    weights[np.arange(count), rng.integers(m, size=count)] += tiny
    weights /= weights.sum(axis=1, keepdims=True)
    sets: FloatArray = weights @ np.asarray(incidence, dtype=np.float64).T
    return sets


@pytest.fixture(scope="session")
def coherent_mixtures() -> Callable[[FloatArray, int, int], FloatArray]:
    return tiny_weight_mixtures
