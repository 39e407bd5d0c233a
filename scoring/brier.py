"""The Brier score: mean squared error of stated probabilities against what happened.

Unanswered events (NaN) are left out of the mean rather than counted as wrong, so a
forecaster is scored on what it said; coverage is reported separately by the caller.
"""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt


def brier(probs: npt.ArrayLike, outcomes: npt.ArrayLike) -> float | npt.NDArray[np.float64]:
    """Mean of (p - o)^2 over the last axis, ignoring NaN in either argument.

    `outcomes` is 0/1 (or bool) and broadcasts against `probs`, so one outcome vector
    scores many sets at once. Returns a float for a single set, else an array over the
    leading axes; a set with nothing answered scores NaN.
    """
    p = np.asarray(probs, dtype=np.float64)
    o = np.asarray(outcomes, dtype=np.float64)
    if p.ndim == 0:
        raise ValueError("probs must have at least one event")
    try:
        squared = (p - o) ** 2
    except ValueError as error:
        raise ValueError(f"probs {p.shape} and outcomes {o.shape} do not align") from error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN sets give NaN, by design
        score = np.nanmean(squared, axis=-1)
    return float(score) if np.ndim(score) == 0 else np.asarray(score, dtype=np.float64)
