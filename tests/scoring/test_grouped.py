"""`scoring.grouped.solve_grouped`: jobs grouped by matrix and norm, each checked as its own."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from panels.stock import horizon_panel
from scoring import dutch_books
from scoring.grouped import SetJob, solve_grouped

NEGATION = np.array([[1, 0], [0, 1]], dtype=np.uint8)


@pytest.mark.parametrize("bad", [np.nan, 256.0])
def test_an_invalid_matrix_is_refused_even_beside_the_valid_one_it_casts_to(bad: float) -> None:
    """Grouped by the matrix cast to uint8, [[1, 0], [nan, 1]] joined the negation's group
    and was scored as the negation (profit 0.1), never checked."""
    invalid = np.array([[1.0, 0.0], [bad, 1.0]])
    jobs = [SetJob(NEGATION, np.array([[0.6, 0.6]])), SetJob(invalid, np.array([[0.6, 0.6]]))]
    with pytest.raises(ValueError, match="set job 1: incidence entries must all be 0 or 1"):
        solve_grouped(jobs, workers=1)


def test_probabilities_that_do_not_fit_their_matrix_name_the_job() -> None:
    """numpy's vstack message ('all the input array dimensions ...') named neither."""
    jobs = [SetJob(NEGATION, np.array([[0.6, 0.6]])), SetJob(NEGATION, np.array([[0.6] * 3]))]
    with pytest.raises(ValueError, match=r"set job 1: probs of shape \(1, 3\) do not fit"):
        solve_grouped(jobs, workers=1)


def test_each_job_gets_its_rows_as_dutch_books_gives_them() -> None:
    partition = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 0]], dtype=np.uint8)
    jobs = [
        SetJob(NEGATION, np.array([0.6, 0.6])),
        SetJob(partition, np.array([[0.2, 0.7, 0.95], [0.1, np.nan, 0.5]])),
        SetJob(NEGATION.astype(bool), np.array([[0.3, 0.3], [0.5, 0.5]])),
        SetJob(NEGATION, np.array([[0.9, 0.3]]), "l1"),
    ]
    results = solve_grouped(jobs, workers=1)
    negations = dutch_books(NEGATION, [[0.6, 0.6], [0.3, 0.3], [0.5, 0.5]])
    np.testing.assert_array_equal(results[0].profit, negations.profit[:1])
    np.testing.assert_array_equal(results[2].profit, negations.profit[1:])
    np.testing.assert_array_equal(results[1].profit, dutch_books(partition, jobs[1].probs).profit)
    assert results[3].norm == "l1" and abs(results[3].profit[0] - 0.2) <= 1e-12


def test_jobs_given_by_a_generator_are_solved_as_a_list_of_them_is() -> None:
    """A generator was read whole and solved, then refused: "zip() argument 2 is longer than
    argument 1"."""
    jobs = [SetJob(NEGATION, np.array([0.6, 0.6])), SetJob(NEGATION, np.array([0.3, 0.3]), "l1")]
    listed = solve_grouped(jobs, workers=1)
    for one, other in zip(listed, solve_grouped(iter(jobs), workers=1), strict=True):
        assert one.norm == other.norm
        np.testing.assert_array_equal(one.profit, other.profit)


def test_masked_entries_of_a_job_are_unanswered_as_dutch_books_reads_them() -> None:
    """`np.atleast_2d` dropped the mask: the hidden 0.6 was scored as an answer (0.1)."""
    probs = np.ma.masked_array([[0.6, 0.6]], mask=[[False, True]])
    (result,) = solve_grouped([SetJob(NEGATION, probs)], workers=1)
    assert result.profit[0] == dutch_books(NEGATION, probs).profit[0] == 0.0


def test_a_job_whose_probs_are_not_numbers_is_named() -> None:
    """numpy read a date as its count of days since 1970: 1970-01-01 was a probability of 0."""
    dates = np.array([["1970-01-01", "1970-01-02"]], dtype="datetime64[D]")
    jobs = [SetJob(NEGATION, np.array([[0.5, 0.5]])), SetJob(NEGATION, dates)]
    with pytest.raises(ValueError, match=r"^set job 1: probs must be real numbers"):
        solve_grouped(jobs, workers=1)


def test_a_job_over_no_events_gets_what_dutch_books_gives() -> None:
    probs = np.zeros((2, 0))
    (result,) = solve_grouped([SetJob(np.zeros((0, 4), dtype=np.uint8), probs)], workers=1)
    assert result.profit.shape == (2,) and np.isnan(result.profit).all()
    assert result.stakes.shape == result.coherent.shape == (2, 0)


def test_probabilities_out_of_range_name_the_job() -> None:
    jobs = [SetJob(NEGATION, np.array([[0.5, 0.5]])), SetJob(NEGATION, np.array([[1.5, 0.2]]))]
    with pytest.raises(ValueError, match=r"^set job 1: probs must lie in \[0, 1\]"):
        solve_grouped(jobs, workers=1)


def test_coherent_jobs_score_zero(
    coherent_mixtures: Callable[[np.ndarray, int, int], np.ndarray],
) -> None:
    """Coherent sets whose mixtures weigh an atom near HiGHS's tolerance (1e-10) scored up to
    3.5e-10; the grouped calls are `dutch_books`', which now decides them: 0."""
    h2 = horizon_panel(2).incidence.astype(np.uint8)
    partition = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 0]], dtype=np.uint8)
    jobs = [
        SetJob(h2, coherent_mixtures(h2, 12, 2), "l1"),
        SetJob(partition, coherent_mixtures(partition, 40, 5)),
        SetJob(h2, coherent_mixtures(h2, 12, 3)),
    ]
    for result in solve_grouped(jobs, workers=1):
        assert (result.profit == 0.0).all(), result.profit.max()


@pytest.mark.parametrize(
    ("incidence", "message"),
    [
        ([[1, 0], [1]], r"^set job 1: incidence must be a 2-D \(events x atoms\) 0/1 matrix: "),
        (
            np.ma.masked_array(NEGATION, mask=[[False, False], [False, True]]),
            r"^set job 1: incidence\[1, 1\] is masked: every entry must be 0 or 1",
        ),
    ],
)
def test_a_ragged_or_masked_matrix_names_the_job(incidence: object, message: str) -> None:
    """numpy's message for a ragged list named no argument; a masked entry's mask was dropped
    (np.asarray) and the 1 it hid scored, beside the plain matrix it then equalled."""
    probs = np.array([[0.6, 0.6]])
    jobs = [SetJob(NEGATION, probs), SetJob(incidence, probs)]  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        solve_grouped(jobs, workers=1)


def test_an_unknown_norm_or_a_job_that_is_no_set_job_names_the_job() -> None:
    """The group's `dutch_books` call said "norm must be one of ..." naming no job, and an item
    that is no SetJob was an AttributeError ('tuple' object has no attribute 'incidence')."""
    probs = np.array([[0.6, 0.6]])
    with pytest.raises(ValueError, match=r"^set job 1: norm must be one of .*, got 'L1'"):
        solve_grouped([SetJob(NEGATION, probs), SetJob(NEGATION, probs, "L1")], workers=1)
    with pytest.raises(ValueError, match=r"^set job 1: got a tuple, not a SetJob"):
        solve_grouped([SetJob(NEGATION, probs), (NEGATION, probs)], workers=1)  # type: ignore[list-item]
