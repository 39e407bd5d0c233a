"""A usage error (no such option or command, a bad or missing value) ends in one line and
exit 2, as every other error does: typer printed the usage and a box of five lines."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runs.cli import app


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["score", "out", "--norm", "l2"],
         "error: No such option: --norm (see 'dutchbook score --help')"),
        (["frobnicate"], "error: No such command 'frobnicate' (see 'dutchbook --help')"),
        (["--bogus"], "error: No such option: --bogus (see 'dutchbook --help')"),
        (["status"], "error: Missing argument 'DIR' (see 'dutchbook status --help')"),
        # The parser's own errors came without the command: they named 'dutchbook --help'.
        (["run", "spec.toml", "--out"],
         "error: Option '--out' requires an argument (see 'dutchbook run --help')"),
        (["status", "x", "--json=1"],
         "error: Option '--json' does not take a value (see 'dutchbook status --help')"),
        # Suggested by meaning, not spelling: "--budget" drew "Possible options: --out".
        (["run", "spec.toml", "--budget", "5"],
         "error: No such option: --budget (Possible options: --max-cost) "
         "(see 'dutchbook run --help')"),
        (["plan", "spec.toml", "--budget", "5"],  # a command without it suggests nothing
         "error: No such option: --budget (see 'dutchbook plan --help')"),
        # Compared with their dashes, every option was near: "--bogus" drew "--out".
        (["run", "spec.toml", "--bogus", "x"],
         "error: No such option: --bogus (see 'dutchbook run --help')"),
        (["run", "spec.toml", "--max-cots", "5"],  # a typo is still suggested for
         "error: No such option: --max-cots (Possible options: --max-cost) "
         "(see 'dutchbook run --help')"),
        (["status", "x", "--jsn"],
         "error: No such option: --jsn (Possible options: --json) "
         "(see 'dutchbook status --help')"),
        (["serve-sim", "--port", "99999"],
         "error: Invalid value for '--port': 99999 is not in the range 0<=x<=65535 "
         "(see 'dutchbook serve-sim --help')"),
    ],
)
def test_a_usage_error_is_one_line(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, args, prog_name="dutchbook", env={"COLUMNS": "80"})
    assert result.exit_code == 2
    assert result.output.splitlines() == [said]


def test_no_arguments_still_show_the_help() -> None:
    """(Exit 2, as click gives it since 8.2, before and after.)"""
    result = CliRunner().invoke(app, [], prog_name="dutchbook")
    assert "Usage: dutchbook [OPTIONS] COMMAND" in result.output
    assert "error:" not in result.output
