"""The Brier score: mean squared error of stated probabilities against what happened.

Unanswered events (NaN) are left out of the mean rather than counted as wrong, so a
forecaster is scored on what it said; coverage is reported separately by the caller.
"""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt

from scoring.inputs import as_real, in_unit_range


def brier(probs: npt.ArrayLike, outcomes: npt.ArrayLike) -> float | npt.NDArray[np.float64]:
    """Mean of (p - o)^2 over the last axis, ignoring NaN (or None) in either argument.

    `outcomes` is 0/1 (or bool), one per event on its last axis, and its leading axes
    broadcast against `probs`, so one outcome vector scores many sets at once. Returns a
    float for a single set, else an array over the leading axes; a set with nothing answered
    scores NaN.
    """
    p, o = _checked(probs, outcomes)
    if p.ndim == 0:
        raise ValueError("probs must have at least one event")
    # One outcome per event: numpy would stretch a single outcome ([1]) or a scalar over
    # every event and score each set against "all happened" as if that had been given.
    if o.ndim == 0 or o.shape[-1] != p.shape[-1]:
        raise ValueError(
            f"probs {p.shape} and outcomes {o.shape} do not align: outcomes needs one "
            f"outcome per event ({p.shape[-1]} on the last axis)"
        )
    try:
        squared = (p - o) ** 2
    except ValueError as error:
        raise ValueError(f"probs {p.shape} and outcomes {o.shape} do not align") from error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN sets give NaN, by design
        score = np.nanmean(squared, axis=-1)
    return float(score) if np.ndim(score) == 0 else np.asarray(score, dtype=np.float64)


def _checked(
    probs: npt.ArrayLike, outcomes: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Probabilities in [0, 1] and outcomes in {0, 1} (NaN allowed in both), or ValueError.

    The same forecasts `dutch_books` refuses (1.5, -0.1, inf) would otherwise get a Brier
    score, and an outcome of 0.5 or 2 a number that is no Brier score at all. Rounding past
    an end (1 + 1e-12) is clipped as `dutch_books` clips it: unclipped, it scored 1 + 2e-12
    against an outcome of 0, more than any Brier score.
    """
    p = in_unit_range(as_real(probs, "probs"))  # as `dutch_books` checks and clips them
    o = as_real(outcomes, "outcomes")
    known = o[~np.isnan(o)]
    if not np.all((known == 0.0) | (known == 1.0)):
        raise ValueError("outcomes must be 0 or 1 (NaN marks an unresolved event)")
    return p, o
