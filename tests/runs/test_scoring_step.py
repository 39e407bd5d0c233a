"""Scoring a run one (model, arm) at a time, `dutchbook score` and `dutchbook repair`.

One small campaign on the simulator (simulated forecasters) is run once; every check
recomputes what it expects on its own, set by set, from the kept answers and the panels.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from panels.arms import ARMS
from runs.answered_sets import pass_averages
from runs.cli import app
from runs.scoring_step import read_scored
from runs.spec import load_spec
from runs.units import UnitSource
from scoring import brier, dutch_books
from scoring.grouped import SetJob, solve_grouped
from tests.runs.quiet_campaign import run_quietly
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns

SPEC = """
name = "chunks"
seed = 5
parser = "lenient"

[data]
stock_days = 2

[[models]]
name = "coherent"
provider = "sim"
model = "sim-coherent"

[[models]]
name = "noisy"
provider = "sim"
model = "sim-noisy"

[[arms]]
name = "baseline"
passes = 3

[[arms]]
name = "horizon/2"
passes = 2
models = ["noisy"]

[[arms]]
name = "two-asset"
models = ["coherent"]

[[arms]]
name = "families/joint"
passes = 2
models = ["noisy"]
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_quietly(tmp_path_factory.mktemp("chunks"), "chunks", SPEC)


def _sets(run_dir: Path) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """Every scored set rebuilt independently: probs per pass from forecasts.parquet, the
    incidence from the arm's panel."""
    spec = load_spec(run_dir / "spec.toml")
    units = UnitSource.from_spec(spec)
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    stated = {(m, a, u, p, e): v for m, a, u, p, e, v in forecasts.iter_rows()}
    out: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for entry in spec.arms:
        arm = ARMS[entry.name]
        for model in spec.models_for(entry):
            for unit in units.for_arm(arm):
                outcomes = arm.outcomes(unit)
                for s in arm.scoring_sets(unit):
                    ids = list(s.event_ids)
                    probs = np.array(
                        [
                            [stated.get((model.name, arm.name, unit.id, p, e), np.nan) for e in ids]
                            for p in range(entry.passes)
                        ]
                    )
                    out[(model.name, arm.name, unit.id, s.name)] = {
                        "incidence": arm.panel(unit).subset(ids).incidence,
                        "probs": probs,
                        "norm": arm.norm,
                        "outcomes": None if outcomes is None else [outcomes[e] for e in ids],
                    }
    return out


def test_solve_grouped_gives_each_job_what_dutch_books_gives_it_alone() -> None:
    rng = np.random.default_rng(0)
    pair = np.array([[1, 0], [0, 1]], dtype=np.uint8)
    three = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, 1]], dtype=np.uint8)
    jobs = [
        SetJob(pair, rng.uniform(size=(3, 2)), "inf"),
        SetJob(three, rng.uniform(size=(2, 4)), "l1"),
        SetJob(pair, rng.uniform(size=(1, 2)), "l1"),
        SetJob(three, rng.uniform(size=(4, 4)), "inf"),
        SetJob(pair, np.array([[0.3, np.nan]]), "inf"),
    ]
    for job, got in zip(jobs, solve_grouped(jobs), strict=True):
        alone = dutch_books(job.incidence, job.probs, norm=job.norm)
        assert got.norm == job.norm and got.profit.shape == alone.profit.shape
        np.testing.assert_allclose(got.profit, alone.profit, atol=1e-9)


def test_every_set_of_the_run_scores_as_when_solved_alone(campaign: Path) -> None:
    scores = pl.read_parquet(campaign / "scores.parquet")
    expected = _sets(campaign)
    assert scores.select("model", "arm", "unit", "set").unique().height == len(expected)
    for row in scores.iter_rows(named=True):
        s = expected[(row["model"], row["arm"], row["unit"], row["set"])]
        probs = s["probs"][row["pass"]]
        assert row["norm"] == s["norm"]
        assert row["probs"] == [None if np.isnan(v) else v for v in probs]
        alone = dutch_books(s["incidence"], probs, norm=s["norm"]).profit[0]
        if np.isnan(alone):
            assert row["answered"] == 0 and np.isnan(row["profit"])
            continue
        assert row["profit"] == pytest.approx(alone, abs=1e-9)
        if s["outcomes"] is not None:
            assert row["brier"] == pytest.approx(brier(probs, np.array(s["outcomes"], float)))
    # the file is in the documented order, one (model, arm) after another
    keys = ["model", "arm", "unit", "set", "pass", "norm"]
    assert scores.select(keys).equals(scores.select(keys).sort(keys))


def test_averaging_over_passes_never_raises_profit_on_any_set_of_the_run(campaign: Path) -> None:
    """The paper's convexity fact, on every multi-pass set of a campaign: the profit of the
    answers averaged over the first k passes is at most the mean of those passes' profits."""
    averaged = pl.read_parquet(campaign / "averaged.parquet")
    scores = pl.read_parquet(campaign / "scores.parquet")
    single = {
        (m, a, u, s, p): v
        for m, a, u, s, p, v in scores.select(
            "model", "arm", "unit", "set", "pass", "profit"
        ).iter_rows()
    }
    expected = _sets(campaign)
    checked = 0
    for row in averaged.iter_rows(named=True):
        key = (row["model"], row["arm"], row["unit"], row["set"])
        s = expected[key]
        k = row["k"]
        first_k = s["probs"][:k]
        if not np.isfinite(first_k).any():
            continue
        alone = dutch_books(s["incidence"], pass_averages(first_k)[-1], norm=s["norm"])
        assert row["profit"] == pytest.approx(alone.profit[0], abs=1e-9)
        if np.isfinite(first_k).all():  # every pass answered every event: plain means
            mean_single = np.mean([single[(*key, p)] for p in range(k)])
            assert row["profit"] <= mean_single + 1e-9
            checked += 1
    assert checked > 50  # baseline, horizon/2 and the families all contribute
    assert set(averaged["arm"]) == {"baseline", "horizon/2", "families/joint"}


def test_dutchbook_score_rebuilds_the_files_without_a_call(campaign: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(campaign, copy)
    before = {n: pl.read_parquet(copy / n) for n in ("forecasts.parquet", "scores.parquet")}
    attempts = len(list((copy / "attempts").glob("*")))
    for name in ("forecasts.parquet", "scores.parquet", "averaged.parquet"):
        (copy / name).unlink()
    result = CliRunner().invoke(app, ["score", str(copy)])
    assert result.exit_code == 0, result.output
    assert "answered sets" in result.output
    for name, frame in before.items():
        assert pl.read_parquet(copy / name).equals(frame), name
    assert len(list((copy / "attempts").glob("*"))) == attempts
    again = read_scored(copy)
    assert again.scores.height == before["scores.parquet"].height
    assert again.averaged.equals(pl.read_parquet(campaign / "averaged.parquet"))


def test_score_refuses_a_folder_that_was_never_planned(tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text('name = "x"\n', encoding="utf-8")  # a run killed early
    result = CliRunner().invoke(app, ["score", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a planned run folder" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["score", "repair"])
def test_a_spec_given_beside_a_folder_must_be_its_design(
    campaign: Path, tmp_path: Path, command: str
) -> None:
    """`score --spec` with fewer stock-days rescored a folder as the smaller design (430
    answered sets where it has 670), written over its scores without a word. Its data files
    may live elsewhere (what --spec is for); its design may not differ."""
    copy = tmp_path / "run"
    shutil.copytree(campaign, copy)
    before = (copy / "scores.parquet").read_bytes()
    frozen = (copy / "spec.toml").read_text(encoding="utf-8")
    other = tmp_path / "other.toml"
    other.write_text(frozen.replace("passes = 3", "passes = 2"), encoding="utf-8")
    refused = CliRunner().invoke(app, [command, str(copy), "--spec", str(other)])
    assert refused.exit_code == 2
    assert f"{other} is not the design {copy} was run with; changed: arms" in (
        " ".join(refused.output.split())
    )
    assert (copy / "scores.parquet").read_bytes() == before
    assert not (copy / "repaired.parquet").exists()
    # An operational change (how hard to retry) is the same design.
    same = tmp_path / "same.toml"
    same.write_text("max_attempts = 3\n" + frozen, encoding="utf-8")
    assert CliRunner().invoke(app, [command, str(copy), "--spec", str(same)]).exit_code == 0
    (copy / "spec.toml").write_text("broken [", encoding="utf-8")
    damaged = CliRunner().invoke(app, [command, str(copy), "--spec", str(same)])
    assert damaged.exit_code == 2 and "is damaged" in damaged.output
    assert "Traceback" not in damaged.output


def test_repair_never_raises_the_brier_score_on_any_set_of_the_run(
    campaign: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(campaign, copy)
    result = CliRunner().invoke(app, ["repair", str(copy)])
    assert result.exit_code == 0, result.output
    repaired = pl.read_parquet(copy / "repaired.parquet")
    scores = pl.read_parquet(copy / "scores.parquet").filter(pl.col("answered") > 0)
    assert repaired.height == scores.height  # every answered set, each pass
    expected = _sets(copy)
    with_outcomes = repaired.filter(pl.col("brier_change").is_not_null())
    assert with_outcomes.height > 0
    assert with_outcomes["brier_change"].max() <= 0.0  # type: ignore[operator]
    for row in repaired.iter_rows(named=True):
        s = expected[(row["model"], row["arm"], row["unit"], row["set"])]
        stated = np.array([np.nan if v is None else v for v in row["stated"]])
        fixed = np.array([np.nan if v is None else v for v in row["repaired"]])
        np.testing.assert_array_equal(stated, s["probs"][row["pass"]])
        # the repair is coherent (no Dutch book against it) and no farther than any
        # coherent forecast the LP found
        assert dutch_books(s["incidence"], fixed, norm="inf").profit[0] <= 1e-7
        if s["outcomes"] is not None:
            o = np.array(s["outcomes"], float)
            assert row["brier_change"] == pytest.approx(brier(fixed, o) - brier(stated, o))
    assert "Brier change" in result.output


def test_a_full_disk_while_scoring_ends_in_one_line(
    campaign: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import runs.scoring_step

    def no_room(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "scores.parquet"))

    monkeypatch.setattr(runs.scoring_step, "score_run", no_room)
    result = CliRunner().invoke(app, ["score", str(campaign)])
    assert result.exit_code == 6  # as `dutchbook run`'s (it was 2, a user error's, before)
    assert "disk full" in result.output and "Traceback" not in result.output


def test_workers_end_after_chunks_that_did_not_need_them_and_scores_are_unchanged(
    campaign: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scoring ends the pool's workers after a chunk that did not use them (and at its end),
    so they are not resident beside later chunks; the files equal one process's, exactly."""
    import runs.scoring_step
    from scoring import pool

    spec = load_spec(campaign / "spec.toml")
    alone = tmp_path / "alone"
    shutil.copytree(campaign, alone)
    monkeypatch.setattr(pool, "default_workers", lambda chunks: 1)
    runs.scoring_step.score_run(spec, alone)

    mixed = tmp_path / "mixed"
    shutil.copytree(campaign, mixed)
    # Calls of three or more LP chunks go to two workers, smaller ones stay here: a mix.
    monkeypatch.setattr(pool, "default_workers", lambda chunks: 2 if len(chunks) >= 3 else 1)
    ended: list[int] = []  # pooled calls so far, at each shutdown that ended live workers
    shutdown = pool.shutdown

    def recording_shutdown() -> None:
        if pool._pool is not None:
            ended.append(pool.pooled_calls())
        shutdown()

    monkeypatch.setattr(pool, "shutdown", recording_shutdown)
    before = pool.pooled_calls()
    runs.scoring_step.score_run(spec, mixed)
    assert pool.pooled_calls() > before, "no chunk went to the pool: the test shows nothing"
    # Ended between chunks (pooled calls came after the first end), and at the end.
    assert ended and ended[0] < pool.pooled_calls()
    assert pool._pool is None
    for name in ("forecasts.parquet", "scores.parquet", "averaged.parquet"):
        assert pl.read_parquet(mixed / name).equals(pl.read_parquet(alone / name)), name


def test_dutchbook_score_counts_one_model_and_one_arm_in_the_singular(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """It said "(1 models, 1 arms)"."""
    out = finished_runs.finish(tmp_path, SMALL_SPEC)
    result = CliRunner().invoke(app, ["score", str(out)])
    assert result.exit_code == 0, result.output
    assert "(1 model, 1 arm):" in result.output


def test_a_brier_rise_within_the_projections_rounding_is_written_as_none() -> None:
    """A stated (0.3, 0.70000001) moved 5e-9 by its repair, and its Brier rose 1.2e-13 (the
    true gain about -1e-17): the change, never positive by the projection's geometry, read
    +1.2e-13. The repair is now the projection to its rounding (the rise is gone); a rise
    within `BRIER_ROUNDING` is still written as 0, a larger one would be a fault, left seen."""
    from runs.repair_step import BRIER_ROUNDING, _never_above_zero
    from scoring import repair

    worlds = np.array([[1.0, 0.0], [0.0, 1.0]])
    stated = np.array([0.3, 0.7 + 1e-8])
    fixed = repair(worlds, stated[None, :])[0]
    raw = float(brier(fixed, worlds[:, 1]) - brier(stated, worlds[:, 1]))
    assert raw <= 1e-15  # the projection's own float rounding at most
    assert BRIER_ROUNDING >= 1.2e-13 and _never_above_zero(1.2e-13) == 0.0
    assert _never_above_zero(-0.01) == -0.01 and _never_above_zero(1e-9) == 1e-9
