"""Answers and attempts of requests the plan does not hold are no answers of the run.

Found by a tester: a responses shard whose request id bytes were flipped read "accepted
76/76" in `status` (one answer matched no planned request, its own request's answer was
missing), with two warnings blaming `attempts/`; `dutchbook reparse` then kept the stray
answer ("accepted 77/76"), and the resume advised planning again, a dead end. A shard of
another run copied in read "accepted 136/76 (178.9%)", and a journal line written by hand
counted its answer, without a word.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from engine.scan import scan_responses
from tests.runs.quiet_campaign import invoke, retried_spec, run_quietly

SPEC = retried_spec("unplanned", 11)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unplanned")
    run_quietly(root, "unplanned", SPEC)
    return root / "run"


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path / "run")
    return tmp_path / "run"


def _copy_of_another_run(run_dir: Path) -> Path:
    """A shard of answers to requests the plan does not hold, as another run's copied in."""
    (shard,) = (run_dir / "responses").glob("*.parquet")
    foreign = run_dir / "responses" / "part-00000099.parquet"
    other = (pl.lit("other-") + pl.col("request_id")).alias("request_id")
    pl.read_parquet(shard).with_columns(other).write_parquet(foreign)
    return foreign


def test_a_reparse_leaves_out_the_answers_of_requests_the_plan_does_not_hold(
    finished: Path, run_dir: Path
) -> None:
    """It rebuilt them from their own rows and kept them ("accepted 76 -> 77", then 77/76)."""
    held = pl.read_parquet(_copy_of_another_run(run_dir)).height
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient", "--json")
    assert code == 0, said
    summary = json.loads(said)
    answered = scan_responses(finished, ["request_id"]).collect().height
    assert summary["unplanned_left_out"] == held
    assert (summary["accepted_before"], summary["accepted_after"]) == (answered, answered)
    assert summary["newly_rejected"] == 0
    planned = pl.read_parquet(run_dir / "plan.parquet", columns=["request_id"])
    ids = scan_responses(run_dir, ["request_id"]).collect()
    assert ids.height == answered and ids.join(planned, on="request_id", how="anti").is_empty()
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0 and "left out of responses/" not in said, said  # said when there were
