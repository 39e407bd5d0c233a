"""The bound `runs.spec.check_batch_floor` holds a Bedrock batch model's `batch_max_lines` to
(`providers.batch.BatchLimits.least_max_lines`, 2 * floor - 1): at it, the batch lane cuts
every count of queries from the floor up into jobs within the provider's limits, nothing
left waiting; one line fewer, a count strands a remainder below the floor."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from engine.batch_jobs import fold_jobs
from engine.batch_lane import line_sizes
from engine.dispatch import dispatch
from providers.batch import BatchLimits
from providers.types import ModelConfig
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

FLOOR = 5
LIMITS = replace(FakeBatch().limits, min_lines=FLOOR, max_lines=2 * FLOOR - 1)


async def _job_sizes(
    tmp_path: Path, kit: type[Kit], queries: int, limits: BatchLimits
) -> list[int]:
    """The sizes of the jobs a lane cut `queries` into; every query answered, or none of
    what it left waiting."""
    config = ModelConfig(name="m", provider="sim", model="m", dispatch="batch")
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", queries))
    run_dir = tmp_path / f"run-{queries}-{limits.max_lines}"
    summary = await dispatch(plan, run_dir, {"m": config}, {},
                             batch_clients={"m": FakeBatch(limits_=limits)},
                             batch_poll_s=0.001, log_console=None)  # fmt: skip
    sizes = sorted(len(job.requests) for job in fold_jobs(run_dir).values())
    assert summary.unaccepted == queries - sum(sizes)
    return sizes


def test_the_least_cap_is_twice_the_floor_less_one() -> None:
    assert LIMITS.least_max_lines == 2 * FLOOR - 1
    assert replace(LIMITS, min_lines=100).least_max_lines == 199
    assert replace(LIMITS, min_lines=1).least_max_lines == 1


async def test_at_the_least_cap_every_count_is_cut_into_valid_jobs(
    tmp_path: Path, kit: type[Kit]
) -> None:
    for queries in range(FLOOR, 5 * FLOOR):
        sizes = await _job_sizes(tmp_path, kit, queries, LIMITS)
        assert sum(sizes) == queries, (queries, sizes)
        assert all(FLOOR <= size <= LIMITS.max_lines for size in sizes), (queries, sizes)


@pytest.mark.parametrize(
    ("cap", "queries"),
    [(2 * FLOOR - 2, 2 * FLOOR - 1), (FLOOR, 2 * FLOOR + 2)],  # the second: 224 at 100..100
)
async def test_below_it_a_count_strands_a_remainder(
    tmp_path: Path, kit: type[Kit], cap: int, queries: int
) -> None:
    sizes = await _job_sizes(tmp_path, kit, queries, replace(LIMITS, max_lines=cap))
    assert 0 < queries - sum(sizes) < FLOOR


@pytest.mark.parametrize("cap", [FLOOR, FLOOR + 2, 2 * FLOOR - 2])
async def test_what_a_cap_strands_is_foretold_from_the_count(
    tmp_path: Path, kit: type[Kit], cap: int
) -> None:
    """`BatchLimits.stranded`, which a resume's `check_batch_floor` asks of the queries it has
    left, says what the lane leaves waiting for every count, to the line."""
    limits = replace(LIMITS, max_lines=cap)
    for queries in range(1, 5 * FLOOR):
        sizes = await _job_sizes(tmp_path, kit, queries, limits)
        assert limits.stranded(queries) == queries - sum(sizes), (queries, sizes)
    assert not any(LIMITS.stranded(queries) for queries in range(FLOOR, 50 * FLOOR))


async def test_at_the_least_byte_cap_every_count_is_cut_into_valid_jobs(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """`batch_max_bytes = 50000` cut a rehearsal's Bedrock lines into jobs of 21, below the
    floor; at `BatchLimits.least_max_bytes` of the lines (what `runs.spec.check_batch_bytes`
    asks) every job holds the floor, and none is left below it: a job cut at the byte limit
    while the plan was read left fewer than the floor behind, which waited for ever when the
    plan ended there (10 queries: a job of 9 cut by bytes, and 1 left waiting)."""
    config = ModelConfig(name="m", provider="sim", model="m", dispatch="batch")
    for queries in range(FLOOR, 5 * FLOOR):
        plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", queries))
        limits = replace(LIMITS, max_lines=1000)
        sizes = line_sizes(tmp_path / "none", plan, config, FakeBatch(limits_=limits), 3)
        assert len(sizes) == queries
        limits = replace(limits, max_bytes=limits.least_max_bytes(sizes))
        got = await _job_sizes(tmp_path, kit, queries, limits)
        assert sum(got) == queries, (queries, got, limits.max_bytes)
        assert all(size >= FLOOR for size in got), (queries, got)


async def test_a_leftover_that_waits_is_said_once_in_words(tmp_path: Path, kit: type[Kit]) -> None:
    """The lane's line said "3 queries wait: fewer than sim's minimum of 5 lines per job
    ...", and the console said it again raw: "dutchbook warning: batch leftover: model m,
    lines 3, min lines 5"."""
    config = ModelConfig(name="m", provider="sim", model="m", dispatch="batch")
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("m", 3))
    console = io.StringIO()
    summary = await dispatch(plan, tmp_path / "run", {"m": config}, {},
                             batch_clients={"m": FakeBatch(limits_=LIMITS)},
                             batch_poll_s=0.001, log_console=console)  # fmt: skip
    assert "3 queries wait: fewer than sim's minimum of 5 lines" in summary.lanes["m"].message
    assert "leftover" not in console.getvalue()
    logged = (tmp_path / "run" / "logs" / "engine.jsonl").read_text("utf-8")
    assert '"event":"batch_leftover"' in logged  # the log keeps it
