"""Console tables never cut a figure or a name (`engine.console_tables`).

Found by a hostile run: with a DeepInfra-style model name, an 80-column console (any file
or pipe) showed the run's closing leaderboard as "0.05…", `audit` as "137,4…" tokens, and
`status` two such models both as "meta-llama/…".
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from engine.console_tables import TEXT_MIN_WIDTH, print_whole
from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC, finish_run

LONG_NAME = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
FIGURES = ["137,439", "3,798", "0.05926", "[0.05769, 0.06083]", "365,100/365,100 (100%)"]


def usage_table() -> Table:
    table = Table(title="usage")
    table.add_column("model")
    for header in ("tokens in", "tokens out", "profit", "95% CI", "done/planned"):
        table.add_column(header, justify="right")
    table.add_row(Text(LONG_NAME), *FIGURES)
    table.add_row(Text("short"), "1", "2", "0.1", "[0.0, 0.2]", "1/1 (100%)")
    return table


def printed(table: Table, width: int, whole: bool = True) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    if whole:
        print_whole(console, table)
    else:
        console.print(table)
    return console.export_text()


def first_column(text: str, index: int = 1) -> str:
    """The first (or `index`th) column's cells of a printed table, joined (a folded name
    rejoined)."""
    return "".join(line.split("│")[index].strip() for line in text.splitlines() if "│" in line)


def test_rich_alone_cuts_the_figures_beside_a_long_name() -> None:
    """The fault itself, so that the next test is known to face it."""
    assert "…" in printed(usage_table(), 80, whole=False)


@pytest.mark.parametrize("width", [80, 60, 40])
def test_figures_stay_whole_and_the_name_folds(width: int) -> None:
    text = printed(usage_table(), width)
    assert "…" not in text
    for figure in FIGURES:
        assert figure in text
    assert LONG_NAME in first_column(text)
    # The name column folds, never below the floor; a console too narrow even for that
    # gets wider lines (the terminal wraps them), not cut ones.
    name_width = max(len(line.split("│")[1]) - 2 for line in text.splitlines() if "│" in line)
    assert name_width >= TEXT_MIN_WIDTH


def test_a_table_that_fits_is_printed_as_rich_prints_it() -> None:
    assert printed(usage_table(), 160) == printed(usage_table(), 160, whole=False)


def test_the_commands_show_a_long_named_model_whole(tmp_path: Path) -> None:
    """The run's closing tables (two long names: too wide side by side, so the models are
    ranked down the page), `status` and `audit`, each at the 80 columns of a pipe."""
    second = f'[[models]]\nname = "{LONG_NAME}-B"\nprovider = "sim"\nmodel = "sim-noisy"\n'
    spec = SMALL_SPEC.replace('name = "m"', f'name = "{LONG_NAME}"').replace(
        "[[arms]]", second + "[[arms]]"
    )
    out = finish_run(tmp_path, spec)
    runner = CliRunner()
    ran = runner.invoke(app, ["report", str(out)])
    assert ran.exit_code == 0, ran.output
    outputs = {"report": ran.output}
    for command in ("status", "audit"):
        result = runner.invoke(app, [command, str(out)])
        assert result.exit_code == 0, result.output
        outputs[command] = result.output
    for command, output in outputs.items():
        assert "…" not in output, command
        assert LONG_NAME in output or LONG_NAME in first_column(output), command


def test_the_live_dispatch_table_keeps_progress_whole_in_80_columns() -> None:
    """The live table cannot be printed wider than its terminal: its names fold as narrow
    as it takes, and a lane's done/planned (shown as "123456/3…" before) stays whole."""
    from engine.lanes import LaneStats
    from engine.progress import render

    busy = LaneStats(model=LONG_NAME, provider="deepinfra")
    busy.planned, busy.accepted, busy.in_flight, busy.cap = 345_500, 123_456, 256, 256
    busy.retries.by_cause.update({"rate_limit": 1234, "provider_error": 567})
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(render([busy]))
    text = console.export_text()
    assert "…" not in text and "123456/345500" in text
    assert "rate_limit 1234" in first_column(text, 7).replace(",", ", ")
    assert LONG_NAME in first_column(text)
    assert max(len(line) for line in text.splitlines()) <= 80
