"""A resume's `batch_max_lines` below Bedrock's 199 (`runs.spec.check_batch_floor`), judged by
the queries the folder has left to ask: refused where they would leave some waiting below
Bedrock's floor of 100 lines a job, in one line, and taken where they cut cleanly into jobs.
Refused on every resume before, whatever was left, though only 199 lines a job cut every
count and a resume has one count to cut."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from engine.batch_jobs import fold_jobs
from engine.ledger import Ledger
from runs.design import SPEC_FILE, freeze_design
from runs.pipeline import run_campaign
from runs.planner import write_plan
from runs.rehearsal import mark_folder
from runs.spec import SpecError, load_spec
from runs.units import UnitSource
from tests.engine.conftest import attempt_row, response_row

#: 16 days of data: 224 queries, the count a tester's jobs of 100 left 24 of waiting.
SPEC = """
name = "floor"
seed = 3
sim_faults = "batch_seconds=0"
[data]
stock_days = 16
[[models]]
name = "claude"
provider = "bedrock"
model = "us.anthropic.claude-sonnet-5-v1:0"
region = "us-east-1"
dispatch = "batch"
batch_bucket = "s3://dutchbook-rehearsal/batch"
batch_role_arn = "arn:aws:iam::123456789012:role/dutchbook-batch"
batch_max_lines = {cap}
[[arms]]
name = "baseline"
"""
PLANNED = 224


def _folder(tmp_path: Path, answered: int) -> tuple[Path, Path]:
    """A rehearsal's run folder planned at 199 lines a job with `answered` of its queries
    answered, and the spec resuming it at 100."""
    first, resume = tmp_path / "first.toml", tmp_path / "resume.toml"
    first.write_text(SPEC.format(cap=199), encoding="utf-8")
    resume.write_text(SPEC.format(cap=100), encoding="utf-8")
    out = tmp_path / "out"
    spec = load_spec(first)
    freeze_design(spec, out)
    mark_folder(out, rehearse=True)  # a rehearsal's folder, as the resumes below rehearse
    write_plan(spec, out, UnitSource.from_spec(spec))
    ids = pl.read_parquet(out / "plan.parquet", columns=["request_id"])["request_id"]
    assert len(ids) == PLANNED
    with Ledger.open(out) as ledger:
        for rid in ids.to_list()[:answered]:
            ledger.record_result(attempt_row(rid, 1, "claude", "ok", provider="bedrock"),
                                 response_row(rid, 1, "claude"))  # fmt: skip
    return resume, out


def _run(spec: Path, out: Path) -> object:
    console = Console(file=io.StringIO(), width=400)
    return asyncio.run(run_campaign(spec, out, rehearse=True, console=console, progress=False))


def test_a_resume_whose_queries_left_would_strand_some_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """224 left at 100 a job: two jobs of 100 and 24 waiting for ever."""
    spec, out = _folder(tmp_path, answered=0)
    frozen = (out / SPEC_FILE).read_bytes()
    with pytest.raises(SpecError) as info:
        _run(spec, out)
    said = str(info.value)
    assert info.value.key == "models[0].batch_max_lines" and "\n" not in said
    assert ("at least 199 (or left out) for a bedrock batch model, not 100: bedrock's jobs "
            "hold at least 100 lines, and the 224 queries its folder has left to ask cannot be "
            "cut into jobs of 100 lines: 24 would wait for ever") in said
    assert (out / SPEC_FILE).read_bytes() == frozen  # refused before the change was recorded
    assert fold_jobs(out) == {}


@pytest.mark.timeout(180)
def test_a_resume_whose_queries_left_cut_cleanly_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """24 answered, 200 left: two jobs of 100, none waiting."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = _folder(tmp_path, answered=PLANNED - 200)
    result = _run(spec, out)
    summary = getattr(result, "summary", None)
    assert summary is not None and summary.complete, summary
    assert sorted(len(job.requests) for job in fold_jobs(out).values()) == [100, 100]


def _byte_refusal(said: str) -> int:
    """The least `batch_max_bytes` a refusal names."""
    found = re.search(r"models\[0\]\.batch_max_bytes: at least (\d+) \(or left out\)", said)
    assert found is not None, said
    return int(found.group(1))


@pytest.mark.timeout(180)
def test_a_byte_cap_that_cuts_jobs_below_the_floor_is_refused_before_any_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`batch_max_bytes = 50000` cut these 224 Bedrock queries into jobs of 21 lines, each
    refused at creation ("the job needs at least 100 records"), three in a row stopping the
    lane after the run had started; `plan` said nothing. Both refuse it now, once the prompts
    are rendered and before anything is written, naming the least cap, which is taken."""
    from typer.testing import CliRunner

    from runs.cli import app

    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    path, out = tmp_path / "spec.toml", tmp_path / "out"
    path.write_text(SPEC.format(cap="199\nbatch_max_bytes = 50000"), encoding="utf-8")
    least = 0
    for args in (["plan", str(path)], ["run", str(path), "--rehearse", "--out", str(out)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        least = _byte_refusal(said)
        assert (f"for a bedrock batch model, not 50000: bedrock's jobs hold at least 100 lines, "
                f"and at 50000 bytes a job holds as few as 20 of the lines of its 224 planned "
                f"queries; at {least} it holds any 199 of them") in said, said
    assert not out.exists()
    path.write_text(SPEC.format(cap=f"199\nbatch_max_bytes = {least - 1}"), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        _run(path, out)
    assert _byte_refusal(str(info.value)) == least and not out.exists()
    path.write_text(SPEC.format(cap=f"199\nbatch_max_bytes = {least}"), encoding="utf-8")
    summary = getattr(_run(path, out), "summary", None)
    assert summary is not None and summary.complete, summary
    assert sorted(len(job.requests) for job in fold_jobs(out).values()) == [100, 124]


def test_a_resume_whose_byte_cap_cuts_its_lines_left_below_the_floor_is_refused(
    tmp_path: Path,
) -> None:
    """Judged by the lines its folder has left to ask, before the design is frozen."""
    spec, out = _folder(tmp_path, answered=24)
    spec.write_text(SPEC.format(cap="199\nbatch_max_bytes = 50000"), encoding="utf-8")
    frozen = (out / SPEC_FILE).read_bytes()
    with pytest.raises(SpecError) as info:
        _run(spec, out)
    said = str(info.value)
    assert info.value.key == "models[0].batch_max_bytes" and "\n" not in said
    assert "of the lines of the 200 queries its folder has left to ask; at " in said
    assert (out / SPEC_FILE).read_bytes() == frozen  # refused before the change was recorded
    assert fold_jobs(out) == {}
