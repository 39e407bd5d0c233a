"""Many samples' resampled sums at once equal numpy's one at a time, bit for bit (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

from scoring import resampled_sums as module
from scoring.resampled_sums import resampled_sums


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 37, 64, 127, 128, 129, 200, 257, 900])
def test_every_row_sum_is_numpys_to_the_bit(n: int) -> None:
    """Each side of numpy's block sizes (8 and 128), magnitudes far apart and signed zeros,
    where the order of additions shows in the last bits; several blocks of rows."""
    rng = np.random.default_rng(n)
    values = rng.normal(size=(5, n)) * 10.0 ** rng.integers(-8, 9, size=(5, n))
    values[0] = -0.0  # all negative zeros: numpy's sum is +0.0
    values[1, ::3] = 0.0
    picks = rng.integers(0, n, size=(2_500, n))
    expected = np.stack([row[picks].sum(axis=1) for row in values])
    got = resampled_sums(values, picks)
    assert got.tobytes() == expected.tobytes()  # bit for bit, the signs of zeros included
    assert module._EXACT


def test_a_numpy_that_sums_in_another_order_is_used_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the emulated order ever disagreed with numpy's, numpy's own sums are returned (and
    used from then on): the check compares the first rows of every call."""
    monkeypatch.setattr(module, "_EXACT", True)
    monkeypatch.setattr(module, "_pairwise", lambda column, first, count: column(0) * 0.0 + 1.0)
    rng = np.random.default_rng(0)
    values = rng.random((3, 20))
    picks = rng.integers(0, 20, size=(100, 20))
    expected = np.stack([row[picks].sum(axis=1) for row in values])
    assert np.array_equal(resampled_sums(values, picks), expected)
    assert module._EXACT is False
