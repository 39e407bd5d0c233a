"""A folder that is not a run's is refused in one line, and nothing is written into it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.runlock import PID_FILE
from engine.scan import ATTEMPTS, JOURNAL, RESPONSES
from engine.status import PLAN as PLAN_FILE
from runs.cli import app
from runs.commands._run_folder import RUN_FOLDER_MARKS
from runs.design import SPEC_FILE

COMMANDS = ["status", "audit", "reparse", "score", "repair", "report"]


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error: ")]


def test_the_marks_are_the_names_a_run_writes() -> None:
    assert set(RUN_FOLDER_MARKS) == {PID_FILE, SPEC_FILE, PLAN_FILE, JOURNAL, ATTEMPTS, RESPONSES}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_folder_with_nothing_of_a_run_is_refused_and_left_as_it_was(
    tmp_path: Path, command: str
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"not a run")
    result = CliRunner().invoke(app, [command, str(folder)])
    assert result.exit_code == 2, result.output
    errors = _errors(result.output)
    assert len(errors) == 1 and "not a run folder" in errors[0], result.output
    assert sorted(p.name for p in folder.iterdir()) == ["holiday.jpg"]  # no lock, no ledger


@pytest.mark.parametrize("command", ["status", "audit", "reparse"])
def test_a_file_is_refused(tmp_path: Path, command: str) -> None:
    file = tmp_path / "spec.toml"
    file.write_text('name = "x"\n', encoding="utf-8")
    result = CliRunner().invoke(app, [command, str(file)])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: {file} is a file, not a run folder; give the folder `dutchbook run` wrote"
    ]


@pytest.mark.parametrize("command", ["status", "audit", "reparse"])
def test_a_missing_folder_is_named(tmp_path: Path, command: str) -> None:
    result = CliRunner().invoke(app, [command, str(tmp_path / "nope")])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: no run folder at {tmp_path / 'nope'} (a new run makes it once its plan is "
        "rendered)"
    ]


def test_a_run_that_has_only_written_its_pid_is_a_run_folder(tmp_path: Path) -> None:
    (tmp_path / PID_FILE).write_text('{"pid": 1, "host": "elsewhere"}', encoding="utf-8")
    result = CliRunner().invoke(app, ["status", str(tmp_path)])
    assert result.exit_code == 0, result.output
