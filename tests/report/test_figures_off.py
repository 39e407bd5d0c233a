"""`DUTCHBOOK_FIGURES=0`: a report written without its figures, which says so (`runs.figures`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.figure_workers import WORKERS_ENV, workers_wanted
from runs.figures_env import FIGURES_ENV, FIGURES_OFF_NOTE, figures_wanted

QUICKSTART = Path(__file__).parents[2] / "runs" / "specs" / "quickstart.toml"


@pytest.mark.parametrize(("value", "wanted"), [(None, True), ("", True), ("1", True), ("0", False)])
def test_the_figures_are_drawn_unless_the_variable_is_0(value: str | None, wanted: bool) -> None:
    environ = {} if value is None else {FIGURES_ENV: value}
    assert figures_wanted(environ) is wanted
    # No figure to draw: no worker to start for them, whatever the workers' own variable.
    assert workers_wanted(environ) is wanted
    assert workers_wanted({**environ, WORKERS_ENV: "2"}) is wanted


@pytest.mark.parametrize("value", ["yes", "2", " 0", "false", "off"])
def test_a_value_not_understood_is_refused_not_read_as_either(value: str) -> None:
    for wanted in (figures_wanted, workers_wanted):
        with pytest.raises(ValueError, match=f"{FIGURES_ENV}='{value}' is not understood"):
            wanted({FIGURES_ENV: value})
    for workers in ("0", "2"):  # the workers' own value understood: this one is still said
        with pytest.raises(ValueError, match=f"{FIGURES_ENV}='{value}' is not understood"):
            workers_wanted({FIGURES_ENV: value, WORKERS_ENV: workers})


def test_a_workers_value_not_understood_is_refused_with_the_figures_off() -> None:
    """With no figure to draw, a bad DUTCHBOOK_FIGURE_WORKERS went unsaid (a reviewer's)."""
    with pytest.raises(ValueError, match=f"{WORKERS_ENV}='bogus' is not understood"):
        workers_wanted({FIGURES_ENV: "0", WORKERS_ENV: "bogus"})


def _pngs(report: Path) -> list[str]:
    return sorted(p.name for p in report.glob("*.png"))


def test_a_report_without_figures_says_why_and_one_with_them_draws_them_again(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "copy"
    shutil.copytree(figures_run, run)
    drawn = _pngs(run / "report")
    assert len(drawn) == 8  # the run's own report drew them (tests/report/ draws figures)
    monkeypatch.setenv(FIGURES_ENV, "0")
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    report = run / "report"
    assert _pngs(report) == [] and not (report / "figures.json").exists()
    summary = orjson.loads((report / "summary.json").read_bytes())
    assert summary["figures"]["note"] == FIGURES_OFF_NOTE
    assert summary["figures"]["profit_brier"] is None  # the historical keys kept, null
    page = (report / "index.html").read_text(encoding="utf-8")
    assert "<img" not in page
    assert f"<li>Figures skipped: {FIGURES_ENV}=0; unset it to draw them.</li>" in page
    monkeypatch.delenv(FIGURES_ENV)
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert _pngs(report) == drawn
    page = (report / "index.html").read_text(encoding="utf-8")
    assert page.count("<img") == 8 and "Figures skipped" not in page


def test_a_run_without_figures_starts_no_worker_and_writes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runs.figure_workers

    started: list[object] = []
    monkeypatch.setattr(runs.figure_workers.FigureWorkers, "__enter__", started.append)
    monkeypatch.setenv(FIGURES_ENV, "0")
    monkeypatch.delenv(WORKERS_ENV, raising=False)  # the workers on, as by default
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(QUICKSTART), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert started == []
    report = out / "report"
    assert _pngs(report) == [] and (report / "leaderboard.csv").is_file()
    summary = orjson.loads((report / "summary.json").read_bytes())
    assert summary["figures"]["note"] == FIGURES_OFF_NOTE and summary["rows"]


def test_a_value_not_understood_ends_run_and_report_before_any_file_is_written(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FIGURES_ENV, "no")
    said = f"error: {FIGURES_ENV}='no' is not understood"
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(QUICKSTART), "--out", str(out)])
    assert result.exit_code == 2 and result.output.startswith(said), result.output
    assert not out.exists()
    run = tmp_path / "copy"
    shutil.copytree(figures_run, run)
    before = {p.name: p.read_bytes() for p in (run / "report").iterdir() if p.is_file()}
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 2 and result.output.startswith(said), result.output
    assert {p.name: p.read_bytes() for p in (run / "report").iterdir() if p.is_file()} == before
