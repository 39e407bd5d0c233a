"""Group answer sets by incidence matrix and norm, solve each group in one `dutch_books` call.

Every stock-day's horizon-1 panel has the same incidence matrix, so thousands of sets from
different models, units and passes share one batched LP; solving them group by group is
what makes scoring a campaign cheap. Callers hand in sets in any order and get each set's
result back in that order. The groups go to `scoring.pool.score_groups` (one `dutch_books`
call per chunk, on every core when the work is big enough).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scoring.dutch_book import NORMS, DutchBookResult, UncertifiedError
from scoring.inputs import FloatArray, as_incidence, as_real, in_unit_range, incidence_array
from scoring.pool import score_groups


@dataclass(frozen=True)
class SetJob:
    """K answer sets over one incidence matrix: `probs` (K, n), NaN = unanswered."""

    incidence: npt.NDArray[np.uint8]
    probs: npt.NDArray[np.float64]
    norm: str = "inf"


def solve_grouped(jobs: Iterable[SetJob], workers: int | None = None) -> list[DutchBookResult]:
    """`dutch_books` for every job, the jobs sharing (norm, incidence) solved as one group.

    Returns one `DutchBookResult` per job, rows in the order of that job's `probs`.
    `workers` is passed to `score_groups` (None: every core for big work, else one). A set
    no solve certifies raises `UncertifiedError` placed by its job (`job`, its index in
    `jobs`) and its row in that job's `probs`. `jobs` may be any iterable (a generator too),
    read once.
    """
    jobs = list(jobs)  # the jobs are read twice: checked, then grouped (a generator was once)
    checked = _checked(jobs)
    groups: dict[tuple[str, tuple[int, ...], bytes], list[int]] = {}
    for index, (job, (key, matrix, _)) in enumerate(zip(jobs, checked, strict=True)):
        groups.setdefault((job.norm, matrix.shape, key), []).append(index)
    members = list(groups.values())
    try:
        solved = score_groups(
            [
                (checked[g[0]][1], np.vstack([checked[i][2] for i in g]), jobs[g[0]].norm)
                for g in members
            ],
            workers=workers,
        )
    except UncertifiedError as error:
        raise _in_job(error, members, checked) from error
    results: list[DutchBookResult | None] = [None] * len(jobs)
    for group, result in zip(members, solved, strict=True):
        offset = 0
        for i in group:
            k = checked[i][2].shape[0]
            part = slice(offset, offset + k)
            results[i] = DutchBookResult(
                profit=result.profit[part],
                stakes=result.stakes[part],
                coherent=result.coherent[part],
                norm=result.norm,
            )
            offset += k
    return [r for r in results if r is not None]


def _in_job(
    error: UncertifiedError,
    members: list[list[int]],
    checked: list[tuple[bytes, FloatArray, npt.NDArray[np.float64]]],
) -> UncertifiedError:
    """`error`, placed by its group (`score_groups`), placed by its job instead: the job's
    index and the set's row in that job's probabilities, the group's rows being its jobs'
    in turn; not placed (`job` None) where its row is not known."""
    assert error.job is not None
    group = members[error.job]
    row = error.set_index
    if row is None:
        return UncertifiedError(error.says("a set"), gap=error.gap)  # its group means nothing here
    for i in group:
        k = checked[i][2].shape[0]
        if row < k:
            return error.placed(i, row)
        row -= k
    raise AssertionError(f"row {error.set_index} is past group {error.job}'s sets")


def _checked(jobs: Sequence[SetJob]) -> list[tuple[bytes, FloatArray, npt.NDArray[np.float64]]]:
    """Each job's grouping key, checked incidence and (K, n) probs; or a ValueError naming it.

    Grouping by the matrix cast to uint8 alone let an invalid one (a NaN entry, a 256) join
    the group of the valid matrix it cast to and be scored as that one, unchecked. Each
    distinct matrix is checked once (a campaign's thousands of jobs share a few); the
    probabilities' shape and values, and the norm, are checked here (values outside [0, 1]
    and an unknown norm were refused by the group's `dutch_books` call, naming no job).
    """
    matrices: dict[tuple[str, tuple[int, ...], bytes], tuple[bytes, FloatArray]] = {}
    out = []
    for index, job in enumerate(jobs):
        if not isinstance(job, SetJob):  # its .incidence was an AttributeError, naming no job
            raise ValueError(f"set job {index}: got a {type(job).__name__}, not a SetJob")
        try:
            if job.norm not in NORMS:  # else the group's `dutch_books` call said so, unnamed
                raise ValueError(f"norm must be one of {NORMS}, got {job.norm!r}")
            raw = incidence_array(job.incidence)  # a masked entry refused, not its mask dropped
            seen = (raw.dtype.str, raw.shape, raw.tobytes())
            if seen not in matrices:
                matrix = as_incidence(raw)
                matrices[seen] = (matrix.astype(np.uint8).tobytes(), matrix)
            key, matrix = matrices[seen]
            probs = np.atleast_2d(as_real(job.probs, "probs"))  # a masked array's mask kept
            if probs.ndim != 2 or probs.shape[1] != matrix.shape[0]:
                raise ValueError(
                    f"probs of shape {np.shape(job.probs)} do not fit an incidence of "
                    f"{matrix.shape[0]} events"
                )
            probs = in_unit_range(probs)  # here, not in the group's call: the error names the job
        except ValueError as error:
            raise ValueError(f"set job {index}: {error}") from error
        out.append((key, matrix, probs))
    return out
