"""Worked examples of the two sources, reproduced through the public API.

The paper is ../shared/reference/dutch-books-paper.txt, the family benchmark
../shared/reference/family-benchmark.md; line numbers below are theirs. Examples the
other test files already reproduce (Figure 1 on its three events, the 5e-5 rounding bound,
a dogmatic forecast, two assets' marginals, convexity, duality) are not repeated here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from panels.families import Family, family_from_mapping
from panels.stock import horizon_panel
from scoring import dutch_books, stats

IntArray = np.ndarray
Rule = Callable[[IntArray], bool]


def test_paper_figure_1_book_wins_0_01113_in_every_atom_of_the_horizon_one_panel() -> None:
    """Paper lines 56-68 (Figure 1): stated 0.4000, 0.3833 and 0.8167 for -1<=z<0, 0<=z<1
    and -1<=z<1; 'buying one third unit each of events 4 and 7 and selling one third unit of
    event 5 yields profit 0.01113 on every atom' (events numbered in the horizon-1 panel)."""
    panel = horizon_panel(1)
    probs = np.full(len(panel), np.nan)
    events = [3, 6, 4]  # events 4, 7 and 5, counted from 1
    probs[events] = [0.4000, 0.3833, 0.8167]
    result = dutch_books(panel.incidence, probs)
    np.testing.assert_allclose(result.stakes[0, events], [1 / 3, 1 / 3, -1 / 3], atol=1e-9)
    book = result.stakes[0, events]
    payoff = book @ panel.incidence[events] - book @ probs[events]
    assert payoff.shape == (4,)  # the four return bins
    assert [round(float(x), 5) for x in payoff] == [0.01113] * 4
    assert round(float(result.profit[0]), 5) == 0.01113


def test_paper_counts_105_pairwise_comparisons_of_15_models() -> None:
    """Paper line 106: 'of the 105 possible pairwise model comparisons' (15 models)."""
    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(5), 2)
    models = {f"model-{k:02d}": rng.uniform(size=10) for k in range(15)}
    pairs = stats.pairwise_differences(models, clusters, reps=200, seed=0)
    assert len(pairs) == 105


# -- the family benchmark's six shapes (family-benchmark.md lines 12-19) ------------------
def _family(
    shape: str, variables: list[str], formulas: list[str], constraints: list[str]
) -> Family:
    return family_from_mapping(
        {
            "id": f"example-{shape}",
            "title": f"The benchmark's {shape} example",
            "shape": shape,
            "variables": variables,
            "constraints": constraints,
            "statements": [
                {"id": f"s{k}", "text": f"Statement {k}.", "formula": formula}
                for k, formula in enumerate(formulas)
            ],
        }
    )


CHAIN = ["v0", "v1", "v2", "v3"]
TEAMS = ["t1", "t2", "t3", "t4", "t5", "other"]

#: Each shape's example as the table gives it, and its coherence rule, on answers in
#: ten-thousandths (four decimals, as the models are asked for them).
SHAPES: dict[str, tuple[Family, Rule]] = {
    # "A's market cap exceeds B's" / "B's is at least A's": P(A) + P(not A) = 1
    "negation": (
        _family("negation", ["a"], ["a", "not a"], []),
        lambda k: bool(k[0] + k[1] == 10_000),
    ),
    # above 50k / 100k / 150k / 250k: non-increasing in the threshold
    "threshold": (
        _family("threshold", CHAIN, CHAIN, ["v1 -> v0", "v2 -> v1", "v3 -> v2"]),
        lambda k: bool(np.all(np.diff(k) <= 0)),
    ),
    # by 2030 / 2035 / 2040 / 2050: non-decreasing in the deadline
    "deadline": (
        _family("deadline", CHAIN, CHAIN, ["v0 -> v1", "v1 -> v2", "v2 -> v3"]),
        lambda k: bool(np.all(np.diff(k) >= 0)),
    ),
    # five named teams / anyone else: sums to 1
    "partition": (
        _family("partition", TEAMS, TEAMS, [f"exactly_one({', '.join(TEAMS)})"]),
        lambda k: bool(k.sum() == 10_000),
    ),
    # A, B, A and B, A or B: P(A and B) <= min, P(A or B) >= max, P(A)+P(B) = the other two
    "conjunction": (
        _family("conjunction", ["a", "b"], ["a", "b", "a and b", "a or b"], []),
        lambda k: bool(
            k[2] <= min(k[0], k[1]) and k[3] >= max(k[0], k[1]) and k[0] + k[1] == k[2] + k[3]
        ),
    ),
    # an event vs. the same event with an added detail: the detailed one no more likely
    "story": (
        _family("story", ["e", "d"], ["e", "e and d"], []),
        lambda k: bool(k[1] <= k[0]),
    ),
}


def _keeping_the_rule(shape: str, rng: np.random.Generator, n: int) -> IntArray:
    """Answers in ten-thousandths that keep the shape's rule, drawn at random (a chain's
    within 2e-4 of each other, so that moving one by 1e-4 often breaks the order)."""
    if shape == "negation":
        a = int(rng.integers(0, 10_001))
        return np.array([a, 10_000 - a])
    if shape in ("threshold", "deadline", "story"):  # close together, so a move can break it
        low = int(rng.integers(0, 9_998))
        k = np.sort(rng.integers(low, low + 3, size=n))
        return k if shape == "deadline" else k[::-1].copy()
    if shape == "partition":
        cuts = np.sort(rng.integers(0, 10_001, size=n - 1))
        return np.diff(np.concatenate(([0], cuts, [10_000])))
    while True:  # conjunction: A, B, A and B at most both, A or B what the equation leaves
        a, b = (int(x) for x in rng.integers(0, 10_001, size=2))
        both = int(rng.integers(0, min(a, b) + 1))
        if a + b - both <= 10_000:
            return np.array([a, b, both, a + b - both])


@pytest.mark.parametrize("shape", list(SHAPES))
def test_family_benchmark_shape_rule_is_exactly_where_the_l1_bookie_wins_nothing(
    shape: str,
) -> None:
    """family-benchmark.md lines 12-19: each shape's coherence rule. The L1 bookie (lines
    33-37) must win nothing exactly where the rule holds: on answers that keep it, and on
    the same answers moved by 1e-4 in one statement, most of which break it."""
    family, rule = SHAPES[shape]
    incidence = family.panel().incidence
    n = incidence.shape[0]
    rng = np.random.default_rng(len(shape))
    answers = []
    for _ in range(150):
        kept = _keeping_the_rule(shape, rng, n)
        moved = kept.copy()
        moved[rng.integers(n)] += rng.choice([-1, 1])
        answers += [kept, np.clip(moved, 0, 10_000)]
    profit = dutch_books(incidence, np.array(answers) / 10_000, "l1").profit
    holds = np.array([rule(k) for k in answers])
    assert holds.sum() >= 150 and (~holds).sum() >= 25  # both sides are reached
    np.testing.assert_array_equal(profit == 0.0, holds)
    assert profit[~holds].min() >= 1e-4 - 1e-9  # a broken rule costs the bookie's 1e-4


#: Each shape's rule broken by five cents, with its L1 distance worked by hand.
FIVE_CENTS = {
    "negation": [0.55, 0.50],  # 1.05 - 1: sell both contracts
    "threshold": [0.60, 0.65, 0.30, 0.10],  # 0.65 - 0.60: 100k above 50k
    "deadline": [0.20, 0.50, 0.45, 0.80],  # 0.50 - 0.45: by 2035 above by 2040
    "partition": [0.30, 0.20, 0.15, 0.15, 0.10, 0.15],  # 1.05 - 1
    "conjunction": [0.50, 0.40, 0.20, 0.75],  # 0.5 + 0.4 - (0.2 + 0.75)
    "story": [0.30, 0.35],  # the detailed version five cents likelier
}


@pytest.mark.parametrize("shape", list(FIVE_CENTS))
def test_family_benchmark_rule_broken_by_five_cents_gives_an_l1_profit_of_five_cents(
    shape: str,
) -> None:
    """family-benchmark.md lines 14-19 with numbers plugged in: each answer set breaks its
    shape's rule by exactly 0.05 (by hand: moving one statement by 0.05 makes it coherent,
    and the broken (in)equality's terms must together move at least that), so the L1
    distance of lines 33-37 is 0.05, and its book stakes at most 1 of each contract."""
    family, rule = SHAPES[shape]
    probs = np.array(FIVE_CENTS[shape])
    assert not rule(np.round(probs * 10_000).astype(int))
    result = dutch_books(family.panel().incidence, probs, "l1")
    assert abs(float(result.profit[0]) - 0.05) <= 1e-12
    assert np.abs(result.stakes[0]).max() <= 1.0 + 1e-12
    assert abs(float(np.abs(result.coherent[0] - probs).sum()) - 0.05) <= 1e-12


def test_family_benchmark_negation_and_partition_l1_is_the_rules_gap() -> None:
    """family-benchmark.md lines 14, 17 and 33-37: for a negation pair and a partition the
    coherent answers are the rule's equality, so the L1 distance is how far the sum is from
    1 (each answer can absorb the gap within [0, 1])."""
    rng = np.random.default_rng(11)
    for shape in ("negation", "partition"):
        family, _ = SHAPES[shape]
        probs = rng.integers(0, 10_001, size=(200, family.panel().incidence.shape[0])) / 10_000
        profit = dutch_books(family.panel().incidence, probs, "l1").profit
        np.testing.assert_allclose(profit, np.abs(probs.sum(axis=1) - 1.0), atol=1e-9, rtol=0)
