"""An empty file or folder argument is refused as the usage error it is (`path_given`).

`Path("")` is ".": `dutchbook status ""` read the current folder as a run folder, `score ""`
scored it, and `run SPEC --out ""` would have written a campaign into it. (`check ""` says
so in its own words: tests/cli/test_check_bounds.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import app


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["status", ""], "DIR"),
        (["audit", ""], "DIR"),
        (["reparse", ""], "DIR"),
        (["report", ""], "DIR"),
        (["score", ""], "DIR"),
        (["repair", ""], "DIR"),
        (["score", "somewhere", "--spec", ""], "--spec"),
        (["repair", "somewhere", "--spec", ""], "--spec"),
        (["plan", ""], "SPEC"),
        (["run", ""], "SPEC"),
        (["run", "examples/quickstart.toml", "--out", ""], "--out"),
        (["serve-sim", "--counts-file", ""], "--counts-file"),
    ],
)
def test_an_empty_path_argument_is_refused_before_anything_is_read_or_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{name}': is empty: name a file or folder" in result.output
    assert os.listdir(tmp_path) == []  # nothing made in the current folder
