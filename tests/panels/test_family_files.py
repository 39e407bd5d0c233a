"""The 37 shipped question families: they load, their logic is the shape's, controls are exact.

Exact answers are recomputed here by enumerating each control's own random experiment
(dice, coins, cards), written independently of the files; and the exact vectors must be
coherent on the family's panel (some distribution over its atoms reproduces them).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from panels.families import FAMILIES_DIR, SHAPES, Family, load_families

SHAPE_LIST = list(SHAPES)


@cache
def shipped() -> dict[str, Family]:
    return load_families(FAMILIES_DIR)


def test_counts_and_shapes() -> None:
    fams = shipped()
    files = sorted(FAMILIES_DIR.glob("*.toml"))
    assert len(files) == len(fams) == 37
    future = [f for f in fams.values() if not f.control]
    controls = [f for f in fams.values() if f.control]
    assert (len(future), len(controls)) == (28, 9)
    assert {f.shape for f in future} == set(SHAPES)
    assert {f.shape for f in controls} == set(SHAPES)
    for f in fams.values():
        assert len(set(f.ids)) == len(f.ids)
        assert f.path is not None and f.path.stem.endswith(f.id)


def _rows(f: Family) -> np.ndarray:
    return np.asarray(f.panel().incidence, dtype=int)


@pytest.mark.parametrize("fid", sorted(shipped()))
def test_panel_has_the_shapes_logic(fid: str) -> None:
    f = shipped()[fid]
    m = _rows(f)
    n = m.shape[0]
    assert (m.sum(axis=1) > 0).all(), "a statement that can never be true"
    assert (m.sum(axis=1) < m.shape[1]).all(), "a statement that is always true"
    if f.shape == "negation":
        assert n % 2 == 0
        for i in range(0, n, 2):
            assert (m[i] + m[i + 1] == 1).all(), f"{f.ids[i]} and its negation"
    elif f.shape in ("threshold", "story"):
        # Higher threshold / more detail implies the previous statement, and is narrower.
        for i in range(n - 1):
            assert (m[i + 1] <= m[i]).all() and (m[i + 1] != m[i]).any()
    elif f.shape == "deadline":
        for i in range(n - 1):
            assert (m[i] <= m[i + 1]).all() and (m[i + 1] != m[i]).any()
    elif f.shape == "partition":
        assert (m.sum(axis=0) == 1).all(), "not exactly one option per world"
    elif f.shape == "conjunction":
        assert n == 4
        assert (m[2] == (m[0] & m[1])).all() and (m[3] == (m[0] | m[1])).all()
        assert (m[0] != m[1]).any()
    else:  # pragma: no cover - load_family rejects unknown shapes
        pytest.fail(f.shape)


YEAR = re.compile(r"\b(20[2-9]\d)\b")


@pytest.mark.parametrize("fid", sorted(k for k, f in shipped().items() if not f.control))
def test_future_families_are_unresolved(fid: str) -> None:
    f = shipped()[fid]
    for s in f.statements:
        assert s.exact is None
        years = [int(y) for y in YEAR.findall(s.text)]
        assert years and any(2027 <= y <= 2050 for y in years), s.id
        assert all(y >= 2027 for y in years), s.id


# -- the controls' own random experiments ------------------------------------------------
DICE2 = list(itertools.product(range(1, 7), repeat=2))
DIE = list(range(1, 7))
COINS5 = list(itertools.product((0, 1), repeat=5))
COINS3 = list(itertools.product((0, 1), repeat=3))
DECK = [(rank, suit) for rank in range(1, 14) for suit in "HDCS"]  # 1 ace, 11-13 faces
TWO_CARDS = list(itertools.permutations(DECK, 2))


def _ace(card: tuple[int, str]) -> bool:
    return card[0] == 1


def _sum_at_least(k: int) -> Callable[[tuple[int, ...]], bool]:
    return lambda w: w[0] + w[1] >= k


def _head_by(k: int) -> Callable[[tuple[int, ...]], bool]:
    return lambda w: 1 in w[:k]


CONTROLS: dict[str, tuple[Sequence[Any], dict[str, Callable[[Any], bool]]]] = {
    "two-dice-sum-threshold": (DICE2, {
        f"sum-at-least-{k}": _sum_at_least(k) for k in (4, 6, 7, 10, 12)
    }),
    "coin-first-head-deadline": (COINS5, {
        f"head-by-toss-{k}": _head_by(k) for k in (1, 2, 3, 4, 5)
    }),
    "one-die-partition": (DIE, {
        "one": lambda w: w == 1, "two": lambda w: w == 2,
        "three-or-four": lambda w: w in (3, 4), "five-or-six": lambda w: w >= 5,
    }),
    "card-rank-partition": (DECK, {
        "ace": _ace, "face": lambda c: c[0] > 10, "number": lambda c: 1 < c[0] <= 10,
    }),
    "two-dice-negation": (DICE2, {
        "sum-seven": lambda w: sum(w) == 7, "sum-not-seven": lambda w: sum(w) != 7,
        "some-six": lambda w: 6 in w, "no-six": lambda w: 6 not in w,
    }),
    "card-heart-face-conjunction": (DECK, {
        "heart": lambda c: c[1] == "H", "face": lambda c: c[0] > 10,
        "heart-and-face": lambda c: c[1] == "H" and c[0] > 10,
        "heart-or-face": lambda c: c[1] == "H" or c[0] > 10,
    }),
    "two-dice-conjunction": (DICE2, {
        "first-even": lambda w: w[0] % 2 == 0, "sum-at-least-9": lambda w: sum(w) >= 9,
        "both": lambda w: w[0] % 2 == 0 and sum(w) >= 9,
        "either": lambda w: w[0] % 2 == 0 or sum(w) >= 9,
    }),
    "three-coins-story": (COINS3, {
        "plain": lambda w: sum(w) >= 2,
        "detailed": lambda w: sum(w) >= 2 and w[0] == 1,
        "more-detailed": lambda w: sum(w) == 2 and w[0] == 1,
    }),
    "two-cards-aces-negation": (TWO_CARDS, {
        "some-ace": lambda p: _ace(p[0]) or _ace(p[1]),
        "no-ace": lambda p: not (_ace(p[0]) or _ace(p[1])),
        "both-aces": lambda p: _ace(p[0]) and _ace(p[1]),
        "not-both-aces": lambda p: not (_ace(p[0]) and _ace(p[1])),
    }),
}  # fmt: skip


def test_every_control_has_an_experiment() -> None:
    assert set(CONTROLS) == {k for k, f in shipped().items() if f.control}


@pytest.mark.parametrize("fid", sorted(CONTROLS))
def test_control_exact_values_by_enumeration(fid: str) -> None:
    f = shipped()[fid]
    worlds, predicates = CONTROLS[fid]
    assert set(predicates) == set(f.ids)
    for s in f.statements:
        assert s.exact is not None
        counted = Fraction(sum(1 for w in worlds if predicates[s.id](w)), len(worlds))
        assert s.exact == pytest.approx(float(counted), abs=1e-12), s.id
    # The experiment's joint behaviour must respect the family's constraints: every world of
    # the experiment maps to a truth assignment that is a column of the panel.
    columns = {tuple(col) for col in _rows(f).T}
    for w in worlds:
        assert tuple(int(predicates[i](w)) for i in f.ids) in columns


@pytest.mark.parametrize("fid", sorted(CONTROLS))
def test_control_exact_values_are_coherent(fid: str) -> None:
    f = shipped()[fid]
    m = _rows(f).astype(float)
    p = np.array([f.exact[i] for i in f.ids])
    k = m.shape[1]
    result = linprog(
        np.zeros(k), A_eq=np.vstack([m, np.ones((1, k))]), b_eq=np.append(p, 1.0),
        bounds=[(0, None)] * k, method="highs",
    )  # fmt: skip
    assert result.status == 0, "no distribution over the atoms gives the exact answers"
