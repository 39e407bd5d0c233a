"""A resume of the same design reads its plan's estimate back instead of rendering every
prompt again (issue 9: 21-46 s per resume of the paper's sweep), and prints the same counts.

The forecaster is the simulator's (labelled simulated); no real provider is involved.
"""

from __future__ import annotations

import asyncio
import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

import runs.planner as planner
from runs.pipeline import run_campaign
from runs.plan_estimate import ESTIMATE_FILE, plan_counts
from runs.planner import estimate, summarise
from runs.spec import load_spec
from tests.runs.run_folders import FinishedRuns

SPEC = """
name = "estimate"
seed = 3
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
price_in = {price}
price_out = 2.0
[[models]]
name = "n"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
passes = 2
[[arms]]
name = "two-asset"
[[arms]]
name = "linked"
"""


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many queries the planner rendered (estimate and write_plan both go through it)."""
    return counted_renders(monkeypatch)


def counted_renders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The planner's renders counted while `monkeypatch` holds: a list of the one count."""
    count = [0]
    real = planner.iter_queries

    def counting(*args: Any, **kwargs: Any) -> Iterator[planner.PlannedQuery]:
        for pq in real(*args, **kwargs):
            count[0] += 1
            yield pq

    monkeypatch.setattr(planner, "iter_queries", counting)
    return count


def run(spec_path: Path, out: Path) -> str:
    text = io.StringIO()
    console = Console(file=text, width=200)
    asyncio.run(run_campaign(spec_path, out, console=console, progress=False))
    return text.getvalue()


def planned_line(output: str) -> str:
    return next(line for line in output.splitlines() if "queries planned" in line)


def write_spec(tmp_path: Path, price: float) -> Path:
    path = tmp_path / "estimate.toml"
    path.write_text(SPEC.format(price=price), encoding="utf-8")
    return path


def first_run(folder: Path) -> None:
    """The run at price 1.0 into `folder/run`, its output and how many queries it rendered
    kept beside it."""
    with pytest.MonkeyPatch.context() as patch:
        rendered = counted_renders(patch)
        output = run(write_spec(folder, 1.0), folder / "run")
    (folder / "output.txt").write_text(output, encoding="utf-8")
    (folder / "renders.txt").write_text(str(rendered[0]), encoding="utf-8")


@pytest.fixture(scope="module")
def finished(finished_runs: FinishedRuns) -> tuple[Path, Path, str, int]:
    """A finished run at price 1.0 (its spec, folder and output) and how many queries it
    rendered, which tests copy: made once a session, for every worker (`first_run`)."""
    folder = finished_runs.made("resume-estimate-first-run", first_run)
    output = (folder / "output.txt").read_text(encoding="utf-8")
    rendered = int((folder / "renders.txt").read_text(encoding="utf-8"))
    return folder / "estimate.toml", folder / "run", output, rendered


def test_a_resume_reads_the_saved_estimate_and_renders_nothing(
    tmp_path: Path, renders: list[int], finished: tuple[Path, Path, str, int]
) -> None:
    spec_path, out, first = finished[0], tmp_path / "run", finished[2]
    shutil.copytree(finished[1], out)  # the module's first run, which rendered its prompts
    assert finished[3] > 0 and (out / ESTIMATE_FILE).exists()
    lines = estimate(load_spec(spec_path))
    rendered = summarise(lines)
    renders[0] = 0

    again = run(spec_path, out)
    assert renders[0] == 0  # neither the estimate nor the plan rendered a prompt
    assert planned_line(again) == planned_line(first).replace("planned", "planned (resuming)")
    assert f"{rendered['total']['queries']:,} queries planned" in planned_line(again)
    # the saved counts are the plan's own, arm by arm (shared queries under their first arm)
    expected = {(line.model, line.arm): line.queries for line in lines if line.queries}
    assert plan_counts(out / "plan.parquet") == expected
    assert rendered["by_arm"]["linked"]["shared"] > 0  # sharing is part of what is compared


def test_a_resume_at_new_prices_reprices_the_saved_tokens(
    tmp_path: Path, finished: tuple[Path, Path, str, int]
) -> None:
    from runs.plan_estimate import resumed_estimate

    out = tmp_path / "run"
    shutil.copytree(finished[1], out)
    spec = load_spec(write_spec(tmp_path, 5.0))  # prices are operational: may change
    saved = resumed_estimate(spec, out)
    assert saved is not None
    assert summarise(saved) == summarise(estimate(spec))  # the same figures, priced anew


def test_an_estimate_that_disagrees_with_the_plan_is_rendered_again(
    tmp_path: Path, renders: list[int], finished: tuple[Path, Path, str, int]
) -> None:
    spec_path, out, first = finished[0], tmp_path / "run", finished[2]
    shutil.copytree(finished[1], out)
    record = orjson.loads((out / ESTIMATE_FILE).read_bytes())
    record["lines"][0]["queries"] += 1  # not what plan.parquet holds
    (out / ESTIMATE_FILE).write_bytes(orjson.dumps(record))
    renders[0] = 0
    again = run(spec_path, out)
    assert renders[0] > 0  # counted again from the prompts
    assert planned_line(again) == planned_line(first).replace("planned", "planned (resuming)")
    # and the estimate is saved again, now agreeing with the plan
    fixed = orjson.loads((out / ESTIMATE_FILE).read_bytes())
    assert fixed["lines"][0]["queries"] == record["lines"][0]["queries"] - 1


def test_the_plan_files_do_not_depend_on_how_many_rows_a_part_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts are a memory bound only (`planner.BATCH_ROWS`): many small parts merge into the
    same plan and members files, row for row, as one part holding everything."""
    import polars as pl
    from polars.testing import assert_frame_equal

    spec = load_spec(write_spec(tmp_path, 1.0))
    written = {}
    for rows in (7, 1_000_000):
        monkeypatch.setattr(planner, "BATCH_ROWS", rows)
        out = tmp_path / f"parts-{rows}"
        planner.write_plan(spec, out)
        written[rows] = [pl.read_parquet(out / name) for name in ("plan.parquet",
                                                                  "plan_members.parquet")]
    assert written[7][0].height > 7 * 3  # several parts of each file were merged
    for small, whole in zip(written[7], written[1_000_000], strict=True):
        assert_frame_equal(small, whole)
