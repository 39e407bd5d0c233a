"""A whole campaign on the local simulator: plan, dispatch, score, report, resume.

The forecasters here are the simulator's (labelled simulated); no real provider is involved.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from engine.scan import scan_attempts, scan_responses
from runs.pipeline import RunError, run_campaign
from runs.planner import estimate, summarise
from runs.spec import load_spec
from tests.runs.coin_family import coin_family

SPEC = """
name = "tiny"
seed = 11
parser = "lenient"

[data]
stock_days = 2
families = "{families}"

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
passes = 2

[[arms]]
name = "full-panel"

[[arms]]
name = "two-asset"
models = ["coherent"]

[[arms]]
name = "horizon/2"
models = ["coherent"]

[[arms]]
name = "linked"
models = ["coherent"]

[[arms]]
name = "families/isolated"
"""

FAMILY = coin_family("coin-negation")


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    families = tmp_path / "families"
    families.mkdir()
    (families / "coin.toml").write_text(FAMILY, encoding="utf-8")
    path = tmp_path / "tiny.toml"
    path.write_text(SPEC.format(families=families.as_posix()), encoding="utf-8")
    return path


def run(spec_path: Path, out: Path) -> None:
    console = Console(file=open(out.parent / "console.txt", "a"), width=200)  # noqa: SIM115
    asyncio.run(run_campaign(spec_path, out, console=console, progress=False))


def test_linked_sets_are_scored_on_answers_other_arms_already_bought(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    summary = summarise(estimate(spec))
    by_arm = summary["by_arm"]
    # 2 stock-days = one date, two role orders; every linked question is a two-asset or
    # horizon-2 question word for word, so it costs nothing more.
    assert by_arm["linked"]["queries"] == 0
    assert by_arm["linked"]["shared"] == 44 * 2
    assert by_arm["baseline"]["queries"] == 14 * 2 * 2 * 2  # events x units x passes x models
    assert by_arm["two-asset"]["queries"] == 44 * 2
    assert by_arm["horizon/2"]["queries"] == 52 * 2


def test_a_campaign_runs_scores_and_resumes_without_paying_twice(
    spec_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    run(spec_path, out)
    plan = pl.read_parquet(out / "plan.parquet")
    responses = scan_responses(out).collect()
    assert plan["request_id"].n_unique() == plan.height
    assert set(responses["request_id"]) == set(plan["request_id"])  # every query answered once
    attempts_before = scan_attempts(out).collect().height

    scores = pl.read_parquet(out / "scores.parquet")
    forecasts = pl.read_parquet(out / "forecasts.parquet")
    assert forecasts.columns == ["model", "arm", "unit", "pass", "event", "p"]
    assert {
        "model",
        "arm",
        "unit",
        "pass",
        "norm",
        "profit",
        "coverage",
        "stakes",
        "coherent",
    } <= set(scores.columns)
    # linked sets are scored although no linked query was sent
    linked = scores.filter(pl.col("arm") == "linked")
    assert linked.height > 0 and linked["coverage"].min() == 1.0
    # every stake vector earns at least the profit on every atom (checked via scoring) and the
    # simulated personalities differ the way they should: noisy is less coherent than coherent
    base = scores.filter((pl.col("arm") == "baseline") & (pl.col("norm") == "inf"))
    mean = {m: float(cast(float, g["profit"].mean())) for (m,), g in base.group_by("model")}
    assert mean["noisy"] > mean["coherent"]
    fam = scores.filter(pl.col("arm") == "families/isolated")
    assert set(fam["norm"]) == {"l1"} and fam.height == 2  # one family, two models
    assert (out / "report" / "summary.json").exists()

    run(spec_path, out)  # resume: nothing left to ask
    assert scan_attempts(out).collect().height == attempts_before
    again = pl.read_parquet(out / "scores.parquet")
    assert np.allclose(again["profit"].to_numpy(), scores["profit"].to_numpy(), equal_nan=True)


def test_a_different_spec_will_not_resume_into_the_same_folder(
    spec_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "spec.toml").write_text("name = 'other'\n")
    with pytest.raises(RunError, match=r"different design; changed: .*name"):
        run(spec_path, out)
