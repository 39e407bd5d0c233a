"""Behaviour of `scoring.repair`: the Euclidean projection onto the coherent forecasts."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import optimize

from scoring import brier, repair
from scoring.repair import ROUNDING_MOVE

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


def _exact_projection(incidence: np.ndarray, p: np.ndarray) -> list[Fraction]:
    """The projection of `p` onto conv{incidence's columns}, in exact rational arithmetic:
    the nearest point of each support's affine hull (its KKT system solved by Gaussian
    elimination), kept where its weights are >= 0 and no atom lies at an acute angle."""
    atoms = [[Fraction(int(v)) for v in col] for col in np.unique(incidence, axis=1).T]
    stated = [Fraction(float(v)) for v in p]
    for size in range(1, len(atoms) + 1):
        for support in itertools.combinations(atoms, size):
            # [G 1; 1' 0] [w; mu] = [A'p; 1], G the support's Gram matrix
            rows = [[_dot(u, v) for v in support] + [Fraction(1), _dot(u, stated)] for u in support]
            rows.append([Fraction(1)] * size + [Fraction(0), Fraction(1)])
            solved = _solve(rows)
            if solved is None or min(solved[:size]) < 0:
                continue
            point = [_dot(solved[:size], [a[i] for a in support]) for i in range(len(stated))]
            residual = [s - q for s, q in zip(stated, point, strict=True)]
            toward = ([a - q for a, q in zip(atom, point, strict=True)] for atom in atoms)
            if all(_dot(residual, t) <= 0 for t in toward):
                return point
    raise AssertionError("no support is optimal")


def _dot(u: list[Fraction], v: list[Fraction]) -> Fraction:
    return sum((a * b for a, b in zip(u, v, strict=True)), Fraction(0))


def _solve(rows: list[list[Fraction]]) -> list[Fraction] | None:
    """Gauss-Jordan elimination on an augmented matrix; None when it is singular."""
    size = len(rows)
    for col in range(size):
        pivot = next((r for r in range(col, size) if rows[r][col] != 0), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(size):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[r][size] / rows[r][r] for r in range(size)]


@st.composite
def near_the_coherent_set(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A small incidence (exclusive events: the simplex, or any) and a forecast 1e-10 to 1e-7
    from a coherent one on a face of the set (a few atoms weighted)."""
    n = draw(st.integers(2, 4))
    if draw(st.booleans()):
        incidence = np.eye(n, dtype=np.uint8)
    else:
        m = draw(st.integers(2, 5))
        incidence = draw(hnp.arrays(np.uint8, (n, m), elements=st.integers(0, 1)))
    weights = draw(hnp.arrays(np.float64, incidence.shape[1], elements=st.sampled_from(
        [0.0, 0.0, 1e-9, 0.1, 0.3, 1.0])))  # fmt: skip
    assume(weights.sum() > 0)
    coherent = incidence @ (weights / weights.sum())
    scale = 10.0 ** draw(st.floats(-10, -7))
    noise = draw(hnp.arrays(np.float64, n, elements=st.floats(-1, 1)))
    return incidence, np.clip(coherent + scale * noise, 0.0, 1.0)


@settings(max_examples=150, deadline=None)
@given(case=near_the_coherent_set())
def test_a_forecast_near_the_coherent_set_is_projected_exactly(
    case: tuple[np.ndarray, np.ndarray],
) -> None:
    """The optimality check's tolerance was absolute (1e-9), and its left side shrinks with
    the move: a forecast 1e-9 from the set passed with any coherent point near it (1e-9 off
    the projection, its Brier score up, repairing it again moved it)."""
    incidence, stated = case
    repaired = repair(incidence, stated)
    exact = np.array([float(v) for v in _exact_projection(incidence, stated)])
    moved = float(np.abs(exact - stated).max())
    # A forecast within the rounding of its projection comes back as it is (either answer
    # where the move is `ROUNDING_MOVE` to its own rounding: (1, 2e-12) over two atoms).
    if np.array_equal(repaired, stated):
        assert moved <= ROUNDING_MOVE + 1e-15
    else:
        assert moved >= ROUNDING_MOVE - 1e-15
        np.testing.assert_allclose(repaired, exact, rtol=0, atol=2e-15)
    for atom in np.unique(incidence, axis=1).T:
        assert brier(repaired, atom) <= brier(stated, atom) + 1e-15
    np.testing.assert_array_equal(repair(incidence, repaired), repaired)


@pytest.mark.parametrize(
    ("stated", "projection"),
    [
        ([1.0, 1e-9, 0.0, 0.0, 0.0], [1.0 - 5e-10, 5e-10, 0.0, 0.0, 0.0]),
        ([1.0, 1e-9, 1e-9, 1e-9, 1e-9], [1.0 - 8e-10, 2e-10, 2e-10, 2e-10, 2e-10]),
    ],
)
def test_exclusive_events_1e_9_from_coherent_are_projected_onto_the_simplex(
    stated: list[float], projection: list[float]
) -> None:
    """Five exclusive and exhaustive events: the projection onto the simplex takes the excess
    (1e-9, 4e-9) off the positive probabilities equally. (1, 1e-9, 0, 0, 0) came back as
    (1, 0, 0, 0, 0), its Brier score up 4e-10 were the second event to happen, and
    (1, 1e-9, 1e-9, 1e-9, 1e-9) as (1 - 5e-10, 5e-10, 0, 0, 0), moved again when repaired."""
    incidence = np.eye(5)
    repaired = repair(incidence, np.array([stated, stated]))
    np.testing.assert_allclose(repaired[0], projection, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(repaired[0], repaired[1])
    for outcome in incidence:
        assert brier(repaired[0], outcome) <= brier(np.array(stated), outcome) + 1e-16
    np.testing.assert_array_equal(repair(incidence, repaired[0]), repaired[0])


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(st.floats(1e-12, 1.0), min_size=2, max_size=8),
    tiny=st.integers(0, 7),
    lift=st.floats(0.01, 0.5),
)
def test_a_forecast_far_from_the_set_keeps_its_projections_tiny_weights(
    weights: list[float], tiny: int, lift: float
) -> None:
    """A review: stated (0.8 - w/2, 0.8 - w/2, 0.3 + w) over exclusive events, w = 1e-11,
    came back (0.5, 0.5, 0): Wolfe's algorithm stopped adding atoms at a tolerance relative to
    the move, so an atom whose weight in the projection was under about 1e-10 times the move
    was left out. A point q of the simplex lifted along its normal by `lift` projects back to
    q, however small its weights."""
    q = np.array(weights)
    q[: min(tiny, q.size - 1)] *= 1e-9  # some weights of the projection 1e-21..1e-9
    q /= q.sum()
    p = q + lift
    assume(p.max() <= 1.0)
    repaired = repair(np.eye(q.size), p)
    assert np.abs(repaired - q).max() <= 1e-13, (p, repaired, q)  # about the rounding floor


def test_the_reviewers_forecast_far_from_the_set_is_projected_exactly() -> None:
    w = 1e-11
    repaired = repair(np.eye(3), np.array([0.8 - w / 2, 0.8 - w / 2, 0.3 + w]))
    np.testing.assert_allclose(repaired, [0.5 - w / 2, 0.5 - w / 2, w], rtol=0, atol=1e-15)


def test_a_stated_negative_zero_is_repaired_to_zero() -> None:
    """A stated -0.0 came back -0.0 (a coherent set is returned as stated): `check --repair`
    printed "repaired": {"A": -0.0}."""
    coherent = repair(np.array([[1, 0], [0, 1]]), np.array([-0.0, 1.0]))
    moved = repair(np.array([[1, 0], [0, 1]]), np.array([-0.0, 0.5]))
    assert coherent.tolist() == [0.0, 1.0] and not np.signbit(coherent).any()
    assert moved == pytest.approx([0.25, 0.75]) and not np.signbit(moved).any()
