"""Checking and normalising what callers hand to the scoring functions.

Every public scoring function accepts an incidence matrix and stated probabilities in
the same loose forms (lists, ints, one set or many); converting and validating them in
one place keeps the error messages identical and the solvers free of defensive code.
"""

from __future__ import annotations

import decimal
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
#: Float error tolerated (and clipped) at the ends of [0, 1].
ROUNDING = 1e-12
#: numpy's kinds of real numbers: bool, signed and unsigned integers, floats. Not datetime64
#: or timedelta64 (numpy reads them as counts since 1970, and calls timedelta64 an integer).
REAL_KINDS = "biuf"


def as_incidence(incidence: npt.ArrayLike) -> FloatArray:
    """Return the (n events, m atoms) 0/1 matrix as floats, or raise ValueError.

    An all-zero row (an event that holds in no atom) is allowed: its only coherent
    probability is 0, which the LPs handle without special cases.
    """
    matrix = incidence_array(incidence)
    if matrix.ndim != 2:
        raise ValueError(
            f"incidence must be a 2-D (events x atoms) matrix, got shape {matrix.shape}"
        )
    if matrix.shape[1] == 0:
        raise ValueError("incidence must have at least one atom (column)")
    # Complex entries would be cast to their real parts, the imaginary ones dropped unseen,
    # and timedelta64 ones (an integer kind to numpy) to their counts.
    if matrix.dtype.kind not in REAL_KINDS:
        raise ValueError(f"incidence must be numeric 0/1, got dtype {matrix.dtype}")
    as_float = matrix.astype(np.float64)
    if not np.all((as_float == 0.0) | (as_float == 1.0)):
        raise ValueError("incidence entries must all be 0 or 1")
    return as_float


def incidence_array(incidence: npt.ArrayLike) -> npt.NDArray[Any]:
    """`incidence` as numpy reads it, or ValueError naming it: numpy's own error for a ragged
    list ("setting an array element with a sequence") named no argument. A masked entry is
    refused: `np.asarray` drops the mask and scored the 0 or 1 it hid, and a matrix's entry,
    unlike a probability (`as_real`: unanswered), has no "not given" to be."""
    if np.ma.isMaskedArray(incidence) and np.ma.getmaskarray(incidence).any():
        at = ", ".join(str(i) for i in np.argwhere(np.ma.getmaskarray(incidence))[0])
        raise ValueError(
            f"incidence[{at}] is masked: every entry must be 0 or 1 (a masked entry means "
            "unanswered only in probs)"
        )
    try:
        return np.asarray(incidence)
    except (TypeError, ValueError) as error:
        raise ValueError(f"incidence must be a 2-D (events x atoms) 0/1 matrix: {error}") from error


def as_real(values: npt.ArrayLike, name: str) -> FloatArray:
    """Return `values` as floats, or raise ValueError naming `name`.

    numpy would cast complex numbers to their real parts (a warning at most), datetime64 and
    timedelta64 values to their counts since 1970 (a date read as a probability of 0), and
    strings to the numbers they spell; its own errors (a ragged list, a dict) name no
    argument. Only real numbers are read (`REAL_KINDS`; in a list, Python's and numpy's
    numbers and `Decimal`), and None, which numpy reads as NaN: a value not given, as the
    scores' null is (an unanswered event, an unresolved outcome, a value left out). A masked
    array's masked entries are NaN: `np.asarray` drops the mask and would read the values it
    hid as answers.
    """
    try:
        array = np.asarray(values)
        if array.dtype == object:
            _only_numbers(array, name)
        elif array.dtype.kind not in REAL_KINDS:
            raise TypeError(f"got dtype {array.dtype}")
        if np.ma.isMaskedArray(values):
            return np.where(np.ma.getmaskarray(values), np.nan, array.astype(np.float64))
        return array.astype(np.float64)
    except (TypeError, ValueError, OverflowError) as error:  # OverflowError: 10**400
        raise ValueError(f"{name} must be real numbers: {error}") from error


def _only_numbers(array: npt.NDArray[np.object_], name: str) -> None:
    """TypeError naming the first item of `array` (numpy's objects: a list mixing kinds) that
    is neither a real number nor None (`as_real`)."""
    for index, item in np.ndenumerate(array):
        real = isinstance(item, (numbers.Real, decimal.Decimal))
        if not (real or item is None):
            at = ", ".join(str(i) for i in index)
            raise TypeError(f"{name}[{at}] is {item!r}, a {type(item).__name__}")


def in_unit_range(probs: FloatArray) -> FloatArray:
    """`probs` clipped to [0, 1], or ValueError unless every stated probability (NaN:
    unanswered, kept) lies in [0, 1] give or take `ROUNDING`: a forecast computed as M @ pi
    may pass 1 by an ulp, which is clipped as only rounding. Every scoring function that
    takes probabilities checks them here, so they accept, clip and refuse the same values."""
    answered = probs[~np.isnan(probs)]
    if answered.size and (np.any(answered < -ROUNDING) or np.any(answered > 1.0 + ROUNDING)):
        raise ValueError("probs must lie in [0, 1] (NaN marks an unanswered event)")
    return np.clip(probs, 0.0, 1.0)


def as_probs(probs: npt.ArrayLike, n_events: int) -> tuple[FloatArray, bool]:
    """Return probabilities as a (K, n) float matrix and whether the input was 1-D.

    NaN marks an unanswered event and is kept; anything else outside [0, 1] is an error.
    """
    array = as_real(probs, "probs")
    one_set = array.ndim == 1
    if one_set:
        array = array[np.newaxis, :]
    if array.ndim != 2:
        raise ValueError(f"probs must be (n,) or (K, n), got shape {np.shape(probs)}")
    if array.shape[1] != n_events:
        raise ValueError(
            f"probs has {array.shape[1]} events per set but incidence has {n_events} rows"
        )
    return in_unit_range(array), one_set
