"""Simulated forecasters on the question families: read from the prompt text alone.

The strongest checks render every shipped family through the real arms (`panels.arms`),
answer with each personality, parse the replies with the engine's parser and score them with
the Dutch-book LP (L1 norm, the family benchmark's metric). The property tests pin each
structural rule of `providers.sim.family_beliefs` on sentences the shipped families do not
contain, so the rules are not fitted to those 37 files.
"""

from __future__ import annotations

import json
import random
from fractions import Fraction
from functools import cache
from itertools import product

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.answers import AnswerError, parse_answer
from panels.arms import ARMS
from panels.families import FAMILIES_DIR, Family, load_families
from panels.units import FamilyUnit
from providers.sim import family_beliefs as fb
from providers.sim.forecasters import answer
from scoring import dutch_books

SEED = 11


@cache
def _families() -> tuple[Family, ...]:
    return tuple(sorted(load_families(FAMILIES_DIR).values(), key=lambda f: f.id))


def _answers(family: Family, arm: str, personality: str, seed: int = SEED) -> dict[str, float]:
    mode = "lenient" if personality == "fraction" else "strict"
    values: dict[str, float] = {}
    for query in ARMS[arm].queries(FamilyUnit(family), 0, seed):
        reply = answer(f"sim-{personality}", query.system, query.user, seed)
        parsed = parse_answer(reply, query.keys, mode=mode)
        values.update({e: parsed[k] for e, k in zip(query.events, query.keys, strict=True)})
    return values


def _profit(family: Family, values: dict[str, float]) -> float:
    panel = family.panel()
    probs = np.array([values[e] for e in panel.ids])
    return float(dutch_books(panel.incidence, probs, norm="l1").profit[0])


@cache
def _profits(arm: str, personality: str) -> dict[str, float]:
    return {f.id: _profit(f, _answers(f, arm, personality)) for f in _families()}


# ---- the shipped families through the real arms ------------------------------------------
def test_all_shipped_families_are_rendered() -> None:
    families = _families()
    assert len(families) >= 37
    assert {f.shape for f in families} == {
        "negation",
        "threshold",
        "deadline",
        "partition",
        "conjunction",
        "story",
    }


def test_coherent_joint_answers_are_coherent_on_nearly_every_family() -> None:
    profits = _profits("families/joint", "coherent")
    failing = {fid: p for fid, p in profits.items() if p > 0.01}
    share = 1 - len(failing) / len(profits)
    # Measured: every shipped family (37/37) at L1 profit <= 0.0002 (four-decimal rounding).
    assert share >= 0.9, failing
    assert max(profits.values()) <= 0.001, failing


def test_noisy_joint_answers_are_clearly_less_coherent() -> None:
    coherent = np.mean(list(_profits("families/joint", "coherent").values()))
    noisy = list(_profits("families/joint", "noisy").values())
    assert np.mean(noisy) > 0.01 and np.mean(noisy) > 20 * coherent
    assert sum(p > 0.01 for p in noisy) >= len(noisy) // 3


def test_isolated_partitions_expose_a_coherent_forecaster_that_cannot_see_them() -> None:
    """Asked one at a time, alternatives need not sum to one; everything the sentence itself
    shows (thresholds, deadlines, complements, added detail, chance) stays coherent."""
    profits = _profits("families/isolated", "coherent")
    by_shape: dict[str, list[float]] = {}
    for family in _families():
        by_shape.setdefault(family.shape, []).append(profits[family.id])
    future_partitions = [
        profits[f.id] for f in _families() if f.shape == "partition" and not f.control
    ]
    assert min(future_partitions) > 0.05
    for shape in ("negation", "threshold", "deadline", "story"):
        assert max(by_shape[shape]) <= 0.001, (shape, by_shape[shape])


def test_same_statement_same_coherent_answer_alone_and_jointly() -> None:
    """Beliefs are functions of the sentence; only cross-statement structure (alternatives,
    "A and B" of two others) may move a joint answer away from the isolated one."""
    compared = 0
    for family in _families():
        if family.shape in ("partition", "conjunction"):
            continue
        alone = _answers(family, "families/isolated", "coherent")
        joint = _answers(family, "families/joint", "coherent")
        assert alone == joint, family.id
        compared += 1
    assert compared >= 20


@pytest.mark.parametrize("arm", ["families/isolated", "families/joint"])
def test_controls_are_answered_exactly(arm: str) -> None:
    controls = [f for f in _families() if f.control]
    assert len(controls) >= 9
    for family in controls:
        readable = {s.id for s in family.statements if fb.exact_probability(s.text) is not None}
        assert readable == {s.id for s in family.statements}, family.id  # all shipped parse
        values = _answers(family, arm, "coherent")
        for event, exact in family.exact.items():
            assert abs(values[event] - exact) <= 5e-5, (family.id, event)
        fractions = _answers(family, arm, "fraction")
        for event, exact in family.exact.items():
            assert abs(fractions[event] - exact) <= 1e-12, (family.id, event)


def test_fraction_answers_need_the_lenient_parser_on_families() -> None:
    family = next(f for f in _families() if f.id == "two-dice-negation")
    query = ARMS["families/joint"].queries(FamilyUnit(family), 0, SEED)[0]
    reply = answer("sim-fraction", query.system, query.user, SEED)
    assert "11/36" in reply and "25/36" in reply
    with pytest.raises(AnswerError):
        parse_answer(reply, query.keys, mode="strict")


def test_answers_are_deterministic_per_seed() -> None:
    family = next(f for f in _families() if f.id == "world-cup-2030")
    query = ARMS["families/joint"].queries(FamilyUnit(family), 0, SEED)[0]
    for personality in ("coherent", "noisy", "anchored", "framing", "fraction"):
        model = f"sim-{personality}"
        assert answer(model, query.system, query.user, 3) == answer(
            model, query.system, query.user, 3
        )
    coherent = {answer("sim-coherent", query.system, query.user, s) for s in range(4)}
    noisy = {answer("sim-noisy", query.system, query.user, s) for s in range(4)}
    assert len(coherent) == 1 and len(noisy) == 4


@pytest.mark.parametrize("personality", ["anchored", "framing"])
def test_other_personalities_answer_every_family_prompt_strictly(personality: str) -> None:
    for family in _families()[:12]:
        values = _answers(family, "families/joint", personality)
        assert set(values) == {s.id for s in family.statements}
        assert all(0.0 <= v <= 1.0 for v in values.values())


# ---- the structural rules, on sentences the families do not contain ----------------------
SUBJECTS = [
    "the price of one ounce of platinum",
    "the population of Lagos",
    "the number of registered electric buses in Chile",
    "the Nikkei 225 index",
    "global lithium production in tonnes",
]
YEARS = st.integers(2027, 2099)


@given(
    st.sampled_from(SUBJECTS),
    st.floats(0.01, 1e7),
    st.floats(0.01, 1e7),
    st.sampled_from(["above", "more than", "at least"]),
    YEARS,
)
def test_thresholds_are_monotone_and_complements_add_to_one(
    subject: str, low: float, high: float, up: str, year: int
) -> None:
    low, high = sorted((round(low, 2), round(high, 2)))

    def said(word: str, value: float) -> str:
        return f"At the end of {year}, {subject} is {word} {value:,} units."

    assert fb.statement_belief(said(up, low)) >= fb.statement_belief(said(up, high))
    assert fb.statement_belief(said("below", low)) <= fb.statement_belief(said("below", high))
    total = fb.statement_belief(said("below", low)) + fb.statement_belief(said("at least", low))
    assert abs(total - 1.0) < 1e-9


@given(st.sampled_from(SUBJECTS), YEARS, YEARS)
def test_deadlines_are_non_decreasing_in_the_year(subject: str, y1: int, y2: int) -> None:
    early, late = sorted((y1, y2))

    def said(year: int) -> str:
        return f"Regulators approve a new standard for {subject} on or before 31 December {year}."

    assert fb.statement_belief(said(early)) <= fb.statement_belief(said(late))
    negated = said(early).replace("Regulators approve", "Regulators do not approve")
    assert abs(fb.statement_belief(negated) + fb.statement_belief(said(early)) - 1) < 1e-9


@given(
    st.sampled_from(SUBJECTS),
    YEARS,
    st.lists(
        st.sampled_from(
            [
                ", after a long court case",
                " by a consortium of three firms",
                ", and the decision is unanimous",
                " that surprises most analysts",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_added_detail_is_never_more_likely(subject: str, year: int, details: list[str]) -> None:
    text = f"A treaty on {subject} enters into force on or before 31 December {year}"
    previous = fb.statement_belief(text + ".")
    for detail in details:
        text += detail
        current = fb.statement_belief(text + ".")
        assert current <= previous + 1e-12
        previous = current


@given(st.sampled_from(SUBJECTS), st.sampled_from(SUBJECTS), YEARS)
def test_conjunctions_and_disjunctions_respect_their_parts(a: str, b: str, year: int) -> None:
    part_a = f"{a} doubles by {year}".capitalize()
    part_b = f"{b} halves by {year}".capitalize()
    pa, pb = fb.statement_belief(part_a), fb.statement_belief(part_b)
    both = fb.statement_belief(f"Both of the following happen: {part_a}, and {part_b}.")
    either = fb.statement_belief(f"At least one of the following happens: {part_a}, or {part_b}.")
    assert max(0.0, pa + pb - 1) - 1e-12 <= both <= min(pa, pb) + 1e-12
    assert abs(pa + pb - both - either) < 1e-9
    texts = [part_a, part_b, f"{a} doubles and {b} halves, both by {year}."]
    joint = fb.joint_beliefs(texts)
    assert joint[:2] == [pa, pb]
    assert abs(joint[2] - fb.conjunction(pa, pb)) < 1e-12


NAMES = ["Kenya", "Norway", "Chile", "Vietnam", "Ghana", "Peru", "Austria", "Canada"]


@given(
    st.lists(st.sampled_from(NAMES), min_size=2, max_size=6, unique=True),
    st.sampled_from(["the 2041 Ocean Rowing Cup", "the 2039 Robotics Olympiad"]),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_joint_alternatives_sum_to_one(
    names: list[str], event: str, listed: bool, rnd: random.Random
) -> None:
    texts = [f"{n} wins {event}." for n in names]
    if listed:
        texts.append(f"A team other than {', '.join(names[:-1])} and {names[-1]} wins {event}.")
    else:
        texts.append(f"Anyone else wins {event}.")
    rnd.shuffle(texts)
    assert abs(sum(fb.joint_beliefs(texts)) - 1.0) < 1e-9
    assert sum(fb.statement_belief(t) for t in texts) != pytest.approx(1.0, abs=1e-6)


def _dice_truth(n_dice: int, rel: str, k: int) -> Fraction:
    ops = {
        "at least": int.__ge__,
        "at most": int.__le__,
        "more than": int.__gt__,
        "less than": int.__lt__,
        "exactly": int.__eq__,
    }
    rolls = list(product(range(1, 7), repeat=n_dice))
    return Fraction(sum(ops[rel](sum(r), k) for r in rolls), len(rolls))


@given(
    st.sampled_from([2, 3]),
    st.sampled_from(["at least", "at most", "more than", "less than", "exactly"]),
    st.integers(1, 19),
)
def test_dice_sums_are_counted_exactly(n: int, rel: str, k: int) -> None:
    word = {2: "Two", 3: "Three"}[n]
    amount = {2: "two", 3: "three"}[n]
    text = f"{word} fair six-sided dice are rolled once. The sum of the {amount} dice is {rel} {k}."
    assert fb.exact_probability(text) == _dice_truth(n, rel, k)
    assert fb.exact_probability(text.replace(f"is {rel}", "is")) == _dice_truth(n, "exactly", k)


def test_a_few_chance_statements_by_hand() -> None:
    assert fb.exact_probability(
        "Two fair six-sided dice are rolled once. The sum of the two dice is 7."
    ) == Fraction(6, 36)
    assert fb.exact_probability(
        "A fair coin is tossed four times. Exactly two of the tosses are heads."
    ) == Fraction(3, 8)
    assert fb.exact_probability(
        "One card is drawn at random from a well-shuffled standard 52-card deck. "
        "It is a spade, or an ace (or both)."
    ) == Fraction(16, 52)
    assert fb.exact_probability(
        "Two cards are drawn at random, without replacement, from a well-shuffled standard "
        "52-card deck. Exactly one of them is an ace."
    ) == Fraction(2 * 4 * 48, 52 * 51)
    # Beyond the reader: a belief instead, never a wrong exact value.
    assert fb.exact_probability("Two fair six-sided dice are rolled once. They match.") is None


@given(st.lists(st.text(max_size=120), min_size=1, max_size=6))
def test_any_statements_get_probabilities(texts: list[str]) -> None:
    values = fb.joint_beliefs(texts)
    assert len(values) == len(texts) and all(0.0 <= v <= 1.0 for v in values)
    user = "Assign a probability to each of these labeled forecast events:\n" + "\n".join(
        f"Q{i + 1:02d}: {' '.join(t.split())}" for i, t in enumerate(texts)
    )
    reply = json.loads(answer("sim-coherent", "sys", user, 0))
    assert all(0.0 <= v <= 1.0 for v in reply.values())
