"""Planning counts its queries as it renders them (`runs.planning_progress`): `dutchbook plan`
and `dutchbook run` showed a spinner or nothing for the seconds a large plan takes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import ClassVar

import pytest
from rich.console import Console
from typer.testing import CliRunner

import runs.commands.plan as plan_command
import runs.pipeline as pipeline
import runs.planner as planner
from engine.console_lines import LINE_EVERY_S
from runs.cli import app
from runs.planner import estimate, queries_before_sharing, write_plan
from runs.planning_progress import PlanningProgress
from runs.spec import load_spec
from runs.units import UnitSource

# Two arms sharing some queries (linked asks two-asset's questions), two models.
SPEC = (
    'name = "counted"\nseed = 3\n[data]\nstock_days = 2\n'
    '[[models]]\nname = "a"\nprovider = "sim"\nmodel = "sim-coherent"\n'
    '[[models]]\nname = "b"\nprovider = "sim"\nmodel = "sim-noisy"\n'
    '[[arms]]\nname = "baseline"\npasses = 2\n'
    '[[arms]]\nname = "two-asset"\nmodels = ["a"]\n'
    '[[arms]]\nname = "linked"\nmodels = ["a"]\n'
)


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC, encoding="utf-8")
    return path


class Recorder(PlanningProgress):
    """Keeps every (rendered, total) it is given."""

    seen: ClassVar[list[tuple[int, int]]] = []

    def update(self, rendered: int, total: int) -> None:
        Recorder.seen.append((rendered, total))
        super().update(rendered, total)


def test_estimate_counts_every_query_it_renders_up_to_the_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(_spec(tmp_path))
    units = UnitSource.from_spec(spec)
    monkeypatch.setattr(planner, "PROGRESS_EVERY", 7)
    seen: list[tuple[int, int]] = []
    lines = estimate(spec, units, progress=lambda done, total: seen.append((done, total)))
    total = queries_before_sharing(spec, units)
    members = sum(line.queries + line.shared for line in lines)
    assert total == members > 7 * 3  # every arm's view of every query, shared ones included
    assert all(t == total for _, t in seen)
    counts = [done for done, _ in seen]
    assert counts[:-1] == list(range(7, total + 1, 7))  # every PROGRESS_EVERY, in order
    assert counts[-1] == total  # and once at the end
    assert lines == estimate(spec, units)  # counting changes nothing counted


def _drawn(name: str, rendered: int, total: int) -> str:
    """The last line drawn for this count, on an 80-column terminal (a default one)."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    with PlanningProgress(console, name) as shown:
        shown.update(rendered, total)
        shown._progress.refresh()
        assert shown.last == (rendered, total)
    return out.getvalue().split("\r")[-3]


def test_the_bar_shows_the_count_and_total_and_the_name_as_text() -> None:
    drawn = _drawn("[b]x", 5_000, 409_100)
    assert "planning [b]x: queries" in drawn  # the name is not read as markup
    assert "5000/409100" in drawn


def test_a_long_name_gives_way_to_the_count_on_80_columns() -> None:
    drawn = _drawn("a-campaign-named-at-great-length-" * 3, 195_000, 465_000)
    assert "planning a-campaign-named" in drawn
    assert "…" in drawn  # cut short, while the count and both times are whole
    assert "195000/465000 0:00:00 -:--:--" in drawn


def test_nothing_is_drawn_off_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=120)
    with PlanningProgress(console, "quiet") as shown:
        assert not shown.enabled
        shown.update(10, 20)
    assert out.getvalue() == ""
    assert shown.last == (10, 20)


def test_off_a_terminal_a_plain_line_comes_each_minute() -> None:
    """Planning 15 million queries took two minutes without a word in a log."""
    now = [50.0]
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=80)
    with PlanningProgress(console, "big", clock=lambda: now[0]) as shown:
        shown.update(1_000, 15_500_000)
        now[0] += LINE_EVERY_S
        shown.update(2_000, 15_500_000)
        shown.update(3_000, 15_500_000)  # the next line is a minute away
        now[0] += LINE_EVERY_S + 1
        shown.update(4_000, 15_500_000)
    assert out.getvalue().splitlines() == [
        "planning big 1:00: 2,000/15,500,000 queries rendered",
        "planning big 2:01: 4,000/15,500,000 queries rendered",
    ]
    quiet = io.StringIO()
    with PlanningProgress(Console(file=quiet), "q", lines=False, clock=lambda: now[0]) as shown:
        now[0] += 10 * LINE_EVERY_S
        shown.update(1, 2)
    assert quiet.getvalue() == ""


def test_a_planning_line_the_output_refuses_is_dropped_and_planning_goes_on() -> None:
    class Full(io.StringIO):
        writes = 0

        def write(self, text: str) -> int:
            self.writes += 1
            raise OSError(28, "No space left on device")

    now = [0.0]
    full = Full()
    with PlanningProgress(Console(file=full), "x", clock=lambda: now[0]) as shown:
        for rendered in range(1, 4):
            now[0] += LINE_EVERY_S
            shown.update(rendered, 3)  # raises nothing
    assert full.writes == 1 and shown.last == (3, 3)


def test_plan_command_counts_to_the_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec_path = _spec(tmp_path)
    Recorder.seen = []
    monkeypatch.setattr(plan_command, "PlanningProgress", Recorder)
    result = CliRunner().invoke(app, ["plan", str(spec_path), "--json"])
    assert result.exit_code == 0, result.output
    spec = load_spec(spec_path)
    total = queries_before_sharing(spec, UnitSource.from_spec(spec))
    assert Recorder.seen[-1] == (total, total)


def test_a_new_run_counts_its_planning_and_writes_the_same_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_path = _spec(tmp_path)
    spec = load_spec(spec_path)
    units = UnitSource.from_spec(spec)
    Recorder.seen = []
    monkeypatch.setattr(pipeline, "PlanningProgress", Recorder)
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    staged = planner.PlanWriter(tmp_path / "staging")
    lines = pipeline._estimate(spec, units, staged, tmp_path / "run", console, True)
    total = queries_before_sharing(spec, units)
    assert Recorder.seen[-1] == (total, total)
    staged.commit(tmp_path / "staged")
    expected = write_plan(spec, tmp_path / "direct", units)
    assert (tmp_path / "staged" / "plan.parquet").read_bytes() == expected.read_bytes()
    assert lines == estimate(spec, units)


def test_ctrl_c_while_planning_ends_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, `plan` ended a Ctrl-C with exit 130 and an empty line."""

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan_command, "estimate", interrupted)
    result = CliRunner().invoke(app, ["plan", str(_spec(tmp_path))])
    assert result.exit_code == 130, result.output
    assert result.output.strip().splitlines() == [
        "interrupted — run the same command again to finish"
    ]
