"""Group answer sets by incidence matrix and norm, solve each group in one `dutch_books` call.

Every stock-day's horizon-1 panel has the same incidence matrix, so thousands of sets from
different models, units and passes share one batched LP; solving them group by group is
what makes scoring a campaign cheap. Callers hand in sets in any order and get each set's
result back in that order. The groups go to `scoring.pool.score_groups` (one `dutch_books`
call per chunk, on every core when the work is big enough).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scoring.dutch_book import DutchBookResult
from scoring.pool import score_groups


@dataclass(frozen=True)
class SetJob:
    """K answer sets over one incidence matrix: `probs` (K, n), NaN = unanswered."""

    incidence: npt.NDArray[np.uint8]
    probs: npt.NDArray[np.float64]
    norm: str = "inf"


def solve_grouped(jobs: Sequence[SetJob], workers: int | None = None) -> list[DutchBookResult]:
    """`dutch_books` for every job, the jobs sharing (norm, incidence) solved as one group.

    Returns one `DutchBookResult` per job, rows in the order of that job's `probs`.
    `workers` is passed to `score_groups` (None: every core for big work, else one).
    """
    groups: dict[tuple[str, tuple[int, ...], bytes], list[int]] = {}
    for index, job in enumerate(jobs):
        matrix = np.ascontiguousarray(job.incidence, dtype=np.uint8)
        groups.setdefault((job.norm, matrix.shape, matrix.tobytes()), []).append(index)
    members = list(groups.values())
    solved = score_groups(
        [
            (
                jobs[group[0]].incidence,
                np.vstack([np.atleast_2d(jobs[i].probs) for i in group]),
                jobs[group[0]].norm,
            )
            for group in members
        ],
        workers=workers,
    )
    results: list[DutchBookResult | None] = [None] * len(jobs)
    for group, result in zip(members, solved, strict=True):
        offset = 0
        for i in group:
            k = np.atleast_2d(jobs[i].probs).shape[0]
            part = slice(offset, offset + k)
            results[i] = DutchBookResult(
                profit=result.profit[part],
                stakes=result.stakes[part],
                coherent=result.coherent[part],
                norm=result.norm,
            )
            offset += k
    return [r for r in results if r is not None]
