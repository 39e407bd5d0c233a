"""A set no solve certifies (`scoring.dutch_book.UncertifiedError`) is named by the job it
came in and its row there, through `score_groups` and `solve_grouped`, from this process
and from a pool's worker alike: it said "set 3" of one chunk of one group, which named
nothing a caller knew (a run ended in that traceback, `runs.scoring_step.UncertifiedSet`)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pytest

from scoring import dutch_book, pool
from scoring.dutch_book import UncertifiedError
from scoring.grouped import SetJob, solve_grouped
from scoring.pool import Group, score_groups, shutdown
from tests.scoring.test_pool import horizon1

#: The first probability of a set the faked solve cannot certify (no random draw is it).
MARKED = 0.123456789
GAP = 2.5e-6
#: The faked `_solve_certified`, as source: a pool's worker defines it as it starts
#: (`_UncertainWorkers`), where a test's patch of this process never reaches. It raises, as
#: the real one does, for the first set of the call whose first probability is MARKED.
UNCERTAIN = f"""
def uncertain(matrix, sets, norm):
    marked = np.flatnonzero(sets[:, 0] == {MARKED!r})
    if marked.size:
        k = int(marked[0])
        raise d.UncertifiedError(
            d._uncertified_says(f"set {{k}}", {GAP!r}), set_index=k, gap={GAP!r}
        )
    return real(matrix, sets, norm)
"""
#: What a worker runs as it starts: the pool's own start, then the faked solve put in place.
WORKER_START = f"""
import numpy as np
import scoring.dutch_book as d
from scoring.pool import _worker_start
_worker_start(parent)
real = d._solve_certified
{UNCERTAIN}
d._solve_certified = uncertain
"""


class _UncertainWorkers(ProcessPoolExecutor):
    """The pool's executor, its workers started with the faked solve (`WORKER_START`)."""

    def __init__(self, *args: Any, initargs: tuple[int], **kwargs: Any) -> None:
        kwargs["initializer"] = exec
        super().__init__(*args, initargs=(WORKER_START, {"parent": initargs[0]}), **kwargs)


@pytest.fixture(params=["this process", "the pool"])
def uncertain(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """The faked solve where the sets are solved; the workers to ask `score_groups` for.
    Chunks of 16 sets, so that a group of 40 is three chunks and the marked set is in a
    later one."""
    monkeypatch.setattr(pool, "CHUNK_SETS", 16)
    if request.param == "this process":
        names = {"np": np, "d": dutch_book, "real": dutch_book._solve_certified}
        exec(UNCERTAIN, names)
        monkeypatch.setattr(dutch_book, "_solve_certified", names["uncertain"])
        yield 1
        return
    shutdown()  # a pool an earlier test started has workers without the fake
    monkeypatch.setattr(pool, "ProcessPoolExecutor", _UncertainWorkers)
    try:
        yield 2
    finally:
        shutdown()


def _sets(count: int, marked: int | None = None, seed: int = 0) -> np.ndarray:
    """`count` random sets over horizon 1's 14 events; the `marked`th's first probability
    MARKED."""
    probs = np.random.default_rng(seed).uniform(0.0, 1.0, (count, 14))
    if marked is not None:
        probs[marked, 0] = MARKED
    return probs


def test_score_groups_names_the_group_and_its_row(uncertain: int) -> None:
    groups: list[Group] = [
        (horizon1(), _sets(10, seed=1), "l1"),
        (horizon1(), _sets(40, marked=35), "inf"),
    ]
    with pytest.raises(UncertifiedError) as raised:
        score_groups(groups, workers=uncertain)
    error = raised.value
    assert (error.job, error.set_index, error.gap) == (1, 35, GAP)
    assert str(error) == "Dutch-book LP for set 35 of job 1 could not be certified " + (
        "(duality gap 2.5e-06 > 1e-09)"
    )


def test_solve_grouped_names_the_job_and_its_row(uncertain: int) -> None:
    """Jobs 0 and 2 share a group (same matrix, same norm): the marked set is row 40 of it,
    row 35 of job 2."""
    jobs = [
        SetJob(horizon1().astype(np.uint8), _sets(5, seed=2), "inf"),
        SetJob(horizon1().astype(np.uint8), _sets(10, seed=1), "l1"),
        SetJob(horizon1().astype(np.uint8), _sets(40, marked=35), "inf"),
    ]
    with pytest.raises(UncertifiedError) as raised:
        solve_grouped(jobs, workers=uncertain)
    assert (raised.value.job, raised.value.set_index) == (2, 35)


def test_an_uncertified_error_keeps_its_place_pickled() -> None:
    """What a worker sends back is the error pickled: its place goes with its message."""
    error = UncertifiedError("Dutch-book LP for set 3 ...", set_index=3, gap=GAP).placed(2, 7)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again)) == (UncertifiedError, str(error))
    assert (again.job, again.set_index, again.gap) == (2, 7, GAP)
