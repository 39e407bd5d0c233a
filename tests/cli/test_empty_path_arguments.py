"""An empty file or folder argument is refused as the usage error it is (`path_given`).

`Path("")` is ".": `dutchbook status ""` read the current folder as a run folder, `score ""`
scored it, and `run SPEC --out ""` would have written a campaign into it. (`check ""` says
so in its own words: tests/cli/test_check_bounds.py.)"""

from __future__ import annotations

import errno
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


def test_help_still_names_the_type_path() -> None:
    """typer shows a parser's name as the type: `<path_given>` read as a typo in `--help`."""
    for command in ("status", "run", "serve-sim"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert "<path>" in result.output and "path_given" not in result.output, command


def test_a_folder_that_may_not_be_read_is_refused_as_before_a_counts_file_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """click's `Path` type refused an existing path that may not be read; the parser that
    replaced it does so too (simulated: this suite may run as root, whom permissions do not
    stop). A counts file is only written, so it is not asked to be readable."""
    import runs.commands._errors as errors

    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.R_OK)
    result = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert f"Invalid value for 'DIR': Path '{tmp_path}' is not readable (see" in result.output
    assert errors.path_to_write(str(tmp_path / "counts.json")) == tmp_path / "counts.json"


@pytest.mark.parametrize("error", [errno.EACCES, errno.ENAMETOOLONG])
def test_a_path_that_cannot_be_looked_at_is_left_to_the_command(
    monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    """`Path.exists` raises where `os.stat` fails otherwise than "no such file": a name too
    long, a folder above that may not be entered. The parser then ended `status` in a
    traceback or the CLI's general line; the command says it, as before the parser."""
    import runs.commands._errors as errors

    def refused(path: object, *args: object, **kwargs: object) -> os.stat_result:
        raise OSError(error, os.strerror(error), str(path))

    monkeypatch.setattr(os, "stat", refused)
    assert errors.path_given("locked/run") == Path("locked/run")
