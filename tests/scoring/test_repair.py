"""Behaviour of `scoring.repair`: the Euclidean projection onto the coherent forecasts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import optimize

from scoring import brier, repair

Coherence = Callable[[np.ndarray, np.ndarray], bool]


@st.composite
def panel_and_probs(draw: st.DrawFn, nan: bool = False) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 8))
    m = draw(st.integers(1, 6))
    incidence = draw(hnp.arrays(np.uint8, (n, m), elements=st.integers(0, 1)))
    value = st.integers(0, 10_000).map(lambda i: i / 10_000)
    if nan:
        value = st.one_of(value, st.just(float("nan")))
    k = draw(st.integers(1, 3))
    return incidence, draw(hnp.arrays(np.float64, (k, n), elements=value))


@given(case=panel_and_probs(nan=True))
def test_repair_never_raises_the_brier_score_whatever_happens(
    case: tuple[np.ndarray, np.ndarray], is_coherent: Coherence
) -> None:
    incidence, probs = case
    repaired = repair(incidence, probs)
    assert repaired.shape == probs.shape
    assert np.array_equal(np.isnan(repaired), np.isnan(probs))
    for k, p in enumerate(probs):
        if np.isnan(p).all():
            continue
        assert is_coherent(incidence, repaired[k])
        for atom in incidence.T:  # every world that could happen
            assert brier(repaired[k], atom) <= brier(p, atom) + 1e-9


@given(case=panel_and_probs(nan=True))
def test_repair_is_the_nearest_point(case: tuple[np.ndarray, np.ndarray]) -> None:
    # Projection onto conv{M_j}: q is optimal iff (p - q).(M_j - q) <= 0 for every atom j.
    incidence, probs = case
    repaired = repair(incidence, probs)
    for p, q in zip(probs, repaired, strict=True):
        answered = ~np.isnan(p)
        if not answered.any():
            continue
        residual = (p - q)[answered]
        toward_atoms = incidence[answered].T - q[answered]
        assert (toward_atoms @ residual).max() <= 1e-9


@given(case=panel_and_probs(), data=st.data())
def test_coherent_forecasts_are_left_alone(
    case: tuple[np.ndarray, np.ndarray], data: st.DataObject
) -> None:
    incidence, _ = case
    weights = data.draw(hnp.arrays(np.float64, incidence.shape[1], elements=st.floats(0, 1)))
    assume(weights.sum() > 1e-3)
    p = incidence @ (weights / weights.sum())
    np.testing.assert_allclose(repair(incidence, p), p, atol=1e-8)


@given(case=panel_and_probs(nan=True))
def test_unanswered_events_do_not_move_the_others(case: tuple[np.ndarray, np.ndarray]) -> None:
    incidence, probs = case
    repaired = repair(incidence, probs)
    for p, q in zip(probs, repaired, strict=True):
        answered = ~np.isnan(p)
        if answered.any():
            sub = repair(incidence[answered], p[answered])
            np.testing.assert_allclose(q[answered], sub, atol=1e-7)


def test_figure_1_repair_worked_by_hand() -> None:
    # Events B1, B2, B1|B2. The coherent set is {(a, b, a + b)}; the residual
    # r = p1 + p2 - p3 is removed along its normal (1, 1, -1), so q = p - r/3 * (1, 1, -1).
    incidence = np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 1, 0]])
    p = np.array([0.4000, 0.3833, 0.8167])
    r = p[0] + p[1] - p[2]
    np.testing.assert_allclose(repair(incidence, p), p - r / 3 * np.array([1, 1, -1]), atol=1e-9)


def test_negation_worked_by_hand() -> None:
    np.testing.assert_allclose(repair(np.eye(2), [0.6, 0.6]), [0.5, 0.5], atol=1e-9)
    np.testing.assert_allclose(repair(np.eye(2), [0.9, 0.3]), [0.8, 0.2], atol=1e-9)


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        repair(np.eye(2), [0.5, 1.2])


@pytest.mark.parametrize("tiny", [6e-8, 1e-7, 3e-7])
def test_a_tiny_stated_probability_is_kept_not_rounded_to_zero(tiny: float) -> None:
    """HiGHS's QP solver rounds an atom weight below about 5e-7 to zero: a coherent forecast
    of 6e-8 came back as 0 and `repair` raised "not optimal" (hypothesis found it, with six
    events that hold in no atom beside the one that does)."""
    incidence = np.array([[1, 0]] + [[0, 0]] * 6, dtype=np.uint8)
    stated = incidence @ np.array([tiny, 1.0 - tiny])
    np.testing.assert_allclose(repair(incidence, stated), stated, rtol=0, atol=1e-15)


def test_a_tiny_coordinate_of_the_projection_is_exact() -> None:
    """A and B exclusive (a third atom is neither): stated 3e-8 and 1 sum past 1 by 3e-8, so
    the projection onto {q >= 0, q_A + q_B <= 1} takes half of it off each: (1.5e-8, 1 - 1.5e-8),
    in closed form (to 1e-12: the QP's regularisation moves a projection by about 5e-13)."""
    incidence = np.array([[1, 0, 0], [0, 1, 0]], dtype=np.uint8)
    repaired = repair(incidence, np.array([3e-8, 1.0]))
    np.testing.assert_allclose(repaired, [1.5e-8, 1.0 - 1.5e-8], rtol=0, atol=1e-12)


def test_a_nearly_coherent_set_at_the_edges_is_projected_not_refused() -> None:
    """A referee's set, probabilities within 2e-7 of 0 and 1 over eight atoms: HiGHS's
    mixture led Wolfe's steps astray and `repair` raised 'not optimal (violation 4.22e-08)'
    (a traceback from `dutchbook check --repair`). Wolfe's algorithm from the nearest atom
    finishes it. The referee's own solver (cvxpy) moved p by 4.49e-7: this is nearer."""
    events = [[1, 2, 3, 4, 7], [1, 2, 3, 5], [0, 2, 3, 5], [4], [0, 1, 2, 7]]
    incidence = np.zeros((5, 8))
    for row, atoms in enumerate(events):
        incidence[row, atoms] = 1.0
    stated = np.array([1.0, 0.9999998311045344, 1.0, 0.0, 0.3834197406572092])
    repaired = repair(incidence, stated)
    moved = repaired - stated
    # The projection's condition (no atom at an acute angle to p - q), and coherent.
    assert (-moved @ (incidence - repaired[:, np.newaxis])).max() <= 1e-15
    weights = optimize.linprog(np.zeros(8), A_eq=np.vstack([incidence, np.ones(8)]),
                               b_eq=np.append(repaired, 1.0), bounds=(0, None)).x  # fmt: skip
    np.testing.assert_allclose(incidence @ weights, repaired, atol=1e-12)
    assert np.linalg.norm(moved) < 4.49e-7


@pytest.mark.timeout(60)
def test_repeated_atoms_do_not_stall_the_solver() -> None:
    """A referee's matrix with repeated columns kept HiGHS busy for minutes, memory growing
    (1.2 GB after ten). Atoms alike on the answered events are merged first, so the answer
    is the merged matrix's, at once."""
    incidence = np.array([[1, 1, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 1]])
    stated = np.array([0.9999997279320341, 0.0, 3.318863388642208e-07])
    merged = np.unique(incidence.T, axis=0).T
    np.testing.assert_allclose(repair(incidence, stated), repair(merged, stated), atol=1e-15)
    # Atoms alike once an event is unanswered are merged too (the same stall, freed rows).
    with_gap = np.array([stated[0], np.nan, stated[2]])
    repaired = repair(incidence, with_gap)
    assert np.isnan(repaired[1]) and np.isfinite(repaired[[0, 2]]).all()


def test_a_coherent_forecast_is_returned_as_it_is() -> None:
    """Its repair was its own mixture recomputed, 1e-13 off: `dutchbook repair` showed a
    largest Brier change of +3.3e-14 where the README says repair never raises it."""
    incidence = np.array(
        [[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0]], dtype=float
    )
    weights = np.random.default_rng(2).dirichlet(np.ones(4), size=50)
    coherent = weights @ incidence.T
    np.testing.assert_array_equal(repair(incidence, coherent), coherent)
