"""The searched vertex tables of `dutch_books` against scipy's independent distance LP.

A call with `TABLE_MIN_SETS` fully answered sets over a matrix without an enumerated table
(every L1 matrix, and sup-norm ones too large to enumerate) scores them from a table that
`scoring.vertex_search` found. `test_vertex_table.py` compares those answers with the
project's own batched LP (`_solve`, the same model) and with their certificates; here the
sets the table answered are compared with the `conftest` reference, which shares no code.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import scoring.dutch_book as dutch_book
from panels.families import load_families
from panels.stock import horizon_panel
from scoring import dutch_books, vertex_table

Reference = Callable[[np.ndarray, np.ndarray, str], float]


def _searched_cases() -> list[tuple[str, np.ndarray, str]]:
    """(name, matrix, norm) of each shipped shape without an enumerated table: the shipped
    families' matrices (one per shape) and the horizon-1 panel, in both norms."""
    matrices = {"horizon-1": np.asarray(horizon_panel(1).incidence, dtype=np.float64)}
    for name, family in sorted(load_families().items()):
        incidence = np.asarray(family.panel().incidence, dtype=np.float64)
        if all(m.shape != incidence.shape for m in matrices.values()):
            matrices[name] = incidence
    return [
        (name, matrix, norm)
        for name, matrix in matrices.items()
        for norm in ("inf", "l1")
        if not vertex_table.is_exact(matrix.shape, norm)
    ]


CASES = _searched_cases()


def test_the_cases_cover_both_norms() -> None:
    assert {norm for _, _, norm in CASES} == {"inf", "l1"}


@pytest.mark.parametrize(("name", "matrix", "norm"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_sets_a_searched_table_answers_match_the_independent_lp(
    name: str,
    matrix: np.ndarray,
    norm: str,
    reference_distance: Reference,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(len(name))
    probs = np.round(rng.uniform(size=(dutch_book.TABLE_MIN_SETS, matrix.shape[0])), 4)
    to_lp: set[bytes] = set()
    solve = dutch_book._solve

    def spy(incidence: np.ndarray, sets: np.ndarray, which: str) -> tuple[np.ndarray, ...]:
        to_lp.update(row.tobytes() for row in sets)
        return solve(incidence, sets, which)

    monkeypatch.setattr(dutch_book, "_solve", spy)
    assert dutch_book.uses_table(matrix.shape, norm, len(probs))
    assert vertex_table.table_for(matrix, norm) is not None
    profit = dutch_books(matrix, probs, norm).profit
    from_table = np.array([row.tobytes() not in to_lp for row in probs])
    assert from_table.mean() > 0.5  # not vacuous: most sets never reach the LP
    for k in np.flatnonzero(from_table)[::64]:
        assert abs(profit[k] - reference_distance(matrix, probs[k], norm)) <= 1e-9, k
