"""Behaviour of `scoring.brier`."""

from __future__ import annotations

import numpy as np
import pytest

from scoring import brier, dutch_books


def test_mean_squared_error_of_one_set() -> None:
    assert brier([0.9, 0.2], [1, 0]) == pytest.approx((0.01 + 0.04) / 2)


def test_unanswered_events_are_left_out_not_counted_wrong() -> None:
    assert brier([0.9, np.nan, 0.2], [1, 1, 0]) == pytest.approx(0.025)
    assert np.isnan(brier([np.nan, np.nan], [1, 0]))


def test_vectorised_over_leading_axes_with_broadcast_outcomes() -> None:
    probs = np.array([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [np.nan, 1.0]]])
    scores = brier(probs, np.array([1, 0]))
    assert isinstance(scores, np.ndarray) and scores.shape == (2, 2)
    np.testing.assert_allclose(scores, [[0.0, 0.25], [1.0, 1.0]])


def test_one_outcome_vector_per_set() -> None:
    scores = brier([[1.0, 0.0], [1.0, 0.0]], [[1, 0], [0, 1]])
    np.testing.assert_allclose(scores, [0.0, 1.0])


def test_misaligned_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="do not align"):
        brier([0.5, 0.5, 0.5], [1, 0])


@pytest.mark.parametrize("outcomes", [[1], 1, np.array(0), [[1], [0]]])
def test_one_outcome_is_not_stretched_over_every_event(outcomes: object) -> None:
    # numpy broadcast a single outcome over all three events: 0.46, a score against "every
    # event happened", given no such outcomes.
    with pytest.raises(ValueError, match=r"one outcome per event \(3 on the last axis\)"):
        brier([0.2, 0.3, 0.5], outcomes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("probs", "outcomes", "message"),
    [
        # `dutch_books` refuses these forecasts; brier scored them (1.5 -> 1.145).
        ([1.5, 0.8], [0, 1], r"probs must lie in \[0, 1\]"),
        ([-0.5, 0.8], [0, 1], r"probs must lie in \[0, 1\]"),
        ([np.inf, 0.8], [0, 1], r"probs must lie in \[0, 1\]"),
        # an outcome either happened or not: 0.5 or 2 gave a number that is no Brier score
        ([0.2, 0.8], [0.5, 1], "outcomes must be 0 or 1"),
        ([0.2, 0.8], [2, 1], "outcomes must be 0 or 1"),
        (np.array([0.2 + 0.5j, 0.8]), [0, 1], "probs must be real"),
        # read as counts since 1970 and as the numbers strings spell: 1970-01-02 was a 1
        ([0.2, 0.8], np.array(["1970-01-02", "1970-01-01"], dtype="datetime64[D]"), "outcomes"),
        (np.array([0, 1], dtype="timedelta64[D]"), [0, 1], "probs must be real"),
        ([0.2, 0.8], ["1", "0"], "outcomes must be real"),
        ([0.2, 0.8], [1, b"0"], "outcomes must be real"),
    ],
)
def test_probabilities_and_outcomes_out_of_range_are_rejected(
    probs: object, outcomes: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        brier(probs, outcomes)  # type: ignore[arg-type]


def test_rounding_past_one_and_unresolved_outcomes_still_score() -> None:
    assert brier([1.0 + 1e-15, 0.0], [1, 0]) == pytest.approx(0.0)
    assert brier([0.2, 0.8], [np.nan, True]) == pytest.approx(0.04)


@pytest.mark.parametrize(("stated", "clipped"), [(1.0 + 1e-12, 1.0), (-1e-12, 0.0)])
def test_rounding_within_tolerance_is_clipped_as_dutch_books_clips_it(
    stated: float, clipped: float
) -> None:
    # Unclipped, 1 + 1e-12 against an outcome of 0 scored 1 + 2e-12, more than any Brier
    # score; `dutch_books` clips it to 1 (`scoring.inputs.ROUNDING`).
    for outcome in (0, 1):
        assert brier([stated], [outcome]) == (clipped - outcome) ** 2
    book = dutch_books(np.array([[1.0, 0.0], [0.0, 1.0]]), [stated, 1.0 - clipped])
    assert book.profit[0] == 0.0


@pytest.mark.parametrize("stated", [1.0 + 2e-12, -2e-12])
def test_past_the_tolerance_brier_refuses_what_dutch_books_refuses(stated: float) -> None:
    with pytest.raises(ValueError) as from_dutch_books:
        dutch_books(np.array([[1.0, 0.0], [0.0, 1.0]]), [stated, 0.5])
    with pytest.raises(ValueError) as from_brier:
        brier([stated, 0.5], [1, 0])
    assert str(from_brier.value) == str(from_dutch_books.value)
    assert str(from_brier.value) == "probs must lie in [0, 1] (NaN marks an unanswered event)"
