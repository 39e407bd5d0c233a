"""The vertex-table fast path of `dutch_books` agrees with the LP, set by set, to 1e-9.

A call with enough fully answered sets (`dutch_book.uses_table`) scores them from a
table of the LP's vertices (`scoring.vertex_table`); these tests compare every such call
with the batched LP alone (`_solve`) and with scipy's independent distance LP, on the
shipped small panels and on random matrices, in both norms, with unanswered events
mixed in. The exact (enumerated) sup-norm tables are also checked on their own: their
best vertex is the LP's optimum on random and adversarial sets (ties, degenerate faces,
probabilities 0 and 1, coherent sets), with no certificate or LP to fall back on.
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
    gap = dutch_book._from_table(table, matrix, complete, norm)[3]
    return float(np.mean(gap <= 1e-9))


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
    size = dutch_book.EXACT_TABLE_MIN_SETS if norm == "inf" else dutch_book.TABLE_MIN_SETS
    probs = sets_for(incidence, size, seed=seed)
    check_against_lp(incidence, probs, norm, None)


def test_large_panels_get_no_table() -> None:
    incidence = np.asarray(horizon_panel(2).incidence, dtype=np.float64)
    assert vertex_table.table_for(incidence, "inf") is None


@pytest.mark.parametrize("norm", NORMS)
def test_table_is_the_same_in_every_build(norm: str) -> None:
    first = vertex_table.build(horizon1(), norm)
    second = vertex_table.build(horizon1(), norm)
    assert first is not None and second is not None
    assert first.exact == (norm == "inf")
    np.testing.assert_array_equal(first.stakes, second.stakes)
    np.testing.assert_array_equal(first.gain, second.gain)
    np.testing.assert_array_equal(first.start, second.start)


# -- the exact (enumerated) sup-norm tables on their own -----------------------------
def adversarial_sets(incidence: np.ndarray, seed: int) -> np.ndarray:
    """Sets that stress ties and degeneracy: equal values, 0/1 answers, coherent sets at
    atoms and mixtures, sure-loss partitions, near-boundary values and uniform noise."""
    rng = np.random.default_rng(seed)
    n, m = incidence.shape
    levels = np.linspace(0.0, 1.0, 11)[:, np.newaxis] * np.ones((1, n))  # every event equal
    zero_one = rng.integers(0, 2, size=(200, n)).astype(float)
    atoms = incidence.T.copy()  # coherent: a point mass on one atom
    mixtures = rng.dirichlet(np.full(m, 0.3), size=100) @ incidence.T  # coherent, exact
    pairs = (atoms[:, np.newaxis, :] + atoms[np.newaxis, :, :]).reshape(-1, n) / 2
    # Overpriced/underpriced partitions: everything shifted up or down from a coherent set.
    shifted = np.clip(mixtures[:50] + rng.choice([-0.3, 0.3], size=(50, 1)), 0.0, 1.0)
    edges = np.clip(rng.choice([0.0, 1e-4, 0.5, 0.9999, 1.0], size=(200, n)), 0.0, 1.0)
    uniform = np.round(rng.uniform(size=(300, n)), 4)
    return np.vstack((levels, zero_one, atoms, mixtures, pairs, shifted, edges, uniform))


def table_profit(table: vertex_table.VertexTable, probs: np.ndarray) -> np.ndarray:
    """The exact table's own answer: the best vertex in double precision, no certificate."""
    return np.asarray((table.floor[np.newaxis, :] - probs @ table.stakes.T).max(axis=1))


def exact_table(incidence: np.ndarray) -> vertex_table.VertexTable:
    table = vertex_table.build(np.asarray(incidence, dtype=np.float64), "inf")
    assert table is not None and table.exact
    return table


def test_exact_table_vertices_are_books_within_the_budget() -> None:
    table = exact_table(horizon1())
    assert len(table.stakes) == len(np.unique(table.stakes, axis=0))  # no vertex twice
    assert not table.stakes[0].any() and table.floor[0] == 0.0  # b = 0 first
    assert np.all(np.abs(table.stakes).sum(axis=1) <= 1.0 + 1e-12)
    np.testing.assert_array_equal(table.floor, (table.stakes @ horizon1()).min(axis=1))
    assert np.all(np.diff(table.start) >= 1)  # every vertex has a basis


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_table_optimum_is_the_lps_on_hard_sets(
    seed: int, reference_distance: Reference
) -> None:
    """Completeness: a missing vertex would make the table's best fall short of the LP."""
    matrix = horizon1()
    table = exact_table(matrix)
    probs = adversarial_sets(matrix, seed)
    ours = table_profit(table, probs)
    lp_profit, _, _, gap = dutch_book._solve(matrix, probs, "inf")
    assert np.all(gap <= 1e-9)
    np.testing.assert_allclose(ours, lp_profit, atol=1e-9, rtol=0)
    for k in range(0, len(probs), 7):
        assert abs(ours[k] - reference_distance(matrix, probs[k], "inf")) <= 1e-9


@settings(max_examples=25, deadline=None)
@given(
    incidence=st.integers(1, 7).flatmap(
        lambda n: st.integers(1, 6).flatmap(
            lambda m: hnp.arrays(np.uint8, (n, m), elements=st.integers(0, 1))
        )
    ),
    seed=st.integers(0, 2**16),
)
def test_exact_tables_of_random_matrices_reach_the_lp_optimum(
    incidence: np.ndarray, seed: int
) -> None:
    matrix = np.asarray(incidence, dtype=np.float64)
    table = exact_table(matrix)
    probs = adversarial_sets(matrix, seed)
    lp_profit, _, _, gap = dutch_book._solve(matrix, probs, "inf")
    assert np.all(gap <= 1e-9)
    np.testing.assert_allclose(table_profit(table, probs), lp_profit, atol=1e-9, rtol=0)
    # and through dutch_books (table, face certificates, LP for what they miss)
    check_against_lp(matrix, probs, "inf", None)


@pytest.mark.parametrize("seed", [2, 3])
def test_exact_table_books_and_forecasts_certify_hard_sets(seed: int) -> None:
    """Through `dutch_books`: every hard set's book pays the LP's profit in every atom and
    its forecast is a mixture of atoms exactly that far from p (what `_certify` checks),
    and the sets the table answered are most of them (not a vacuous fall-back)."""
    matrix = horizon1()
    probs = adversarial_sets(matrix, seed)
    assert dutch_book.uses_table(matrix.shape, "inf", len(probs))
    check_against_lp(matrix, probs, "inf", None)
    table = exact_table(matrix)
    gap = dutch_book._from_table(table, matrix, probs, "inf")[3]
    coherent = table_profit(table, probs) <= 1e-12
    assert coherent.sum() > 100  # atoms, mixtures, pairs (and 0/1 sets that happen to be)
    assert np.mean(gap[~coherent] <= 1e-9) > 0.99
    assert np.all(gap[coherent] <= 1e-9)  # the b = 0 vertex's face: the unique mixture


def test_exact_table_answers_uniform_sets_without_the_lp() -> None:
    """The fast route's first pass (a dual on each vertex's face) certifies every set."""
    matrix = horizon1()
    table = exact_table(matrix)
    probs = np.round(np.random.default_rng(9).uniform(size=(3000, 14)), 4)
    vertices = table.vertices(probs)
    weights = table.weights(vertices, probs)
    gap = dutch_book._certify(matrix, probs, weights, table.stakes[vertices], "inf")[3]
    assert np.all(gap <= 1e-9)


def test_sets_missing_the_same_events_use_the_smaller_matrixs_table(
    monkeypatch: pytest.MonkeyPatch, reference_distance: Reference
) -> None:
    """A set that left events unanswered is the LP of the other events' rows, so enough
    sets sharing that pattern are scored from that smaller matrix's exact table; the
    answers (NaN where unanswered) match the LP alone and scipy."""
    matrix = horizon1()
    rng = np.random.default_rng(12)
    size = dutch_book.EXACT_TABLE_MIN_SETS
    probs = np.round(rng.uniform(size=(2 * size + 70, 14)), 4)
    probs[:size, [2, 9]] = np.nan  # one shared pattern
    probs[size : 2 * size, 0] = np.nan  # another
    scattered = np.arange(2 * size, 2 * size + 30)
    probs[scattered, rng.integers(14, size=30)] = np.nan  # too few per pattern
    # (the last 40 sets answer everything: too few for the full matrix's table either)
    expected = dutch_book._solve(matrix, probs, "inf")
    sent_to_lp: list[int] = []
    solve = dutch_book._solve

    def counting(incidence: np.ndarray, sets: np.ndarray, norm: str) -> tuple[np.ndarray, ...]:
        sent_to_lp.append(len(sets))
        return solve(incidence, sets, norm)

    monkeypatch.setattr(dutch_book, "_solve", counting)
    fast = dutch_books(matrix, probs, "inf")
    assert sum(sent_to_lp) <= 70  # only the scattered and the complete ones
    np.testing.assert_allclose(fast.profit, expected[0], atol=1e-9, rtol=0)
    assert np.array_equal(np.isnan(fast.stakes), np.isnan(probs))
    assert np.array_equal(np.isnan(fast.coherent), np.isnan(probs))
    check_against_lp(matrix, probs, "inf", None)
    for k in range(0, len(probs), 37):
        assert abs(fast.profit[k] - reference_distance(matrix, probs[k], "inf")) <= 1e-9


def test_the_exact_table_decides_coherent_sets_without_the_lp(
    monkeypatch: pytest.MonkeyPatch,
    coherent_mixtures: Callable[[np.ndarray, int, int], np.ndarray],
) -> None:
    """The first pass's single-precision vertex left coherent horizon-1 sets with an atom's
    weight near 1e-10 as far from their own mixture (certified, so kept: profits up to
    6e-10), and they then needed the LP one set at a time to be scored 0. The table's
    double-precision pass takes them to b = 0, whose face rebuilds p from the atoms."""

    def no_lp(*args: object) -> tuple[np.ndarray, ...]:
        raise AssertionError("a set went to the LP")

    monkeypatch.setattr(dutch_book, "_solve", no_lp)
    monkeypatch.setattr(dutch_book, "_solve_lone", no_lp)
    matrix = horizon1()
    probs = coherent_mixtures(matrix, 2000, 1)
    assert (dutch_books(matrix, probs, "inf").profit == 0.0).all()
