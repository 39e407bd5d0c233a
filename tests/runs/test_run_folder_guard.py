"""A folder that is not a run's is refused in one line, and nothing is written into it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.runlock import PID_FILE
from engine.scan import ATTEMPTS, JOURNAL, RESPONSES
from engine.status import PLAN as PLAN_FILE
from runs.cli import app
from runs.design import DESIGN_FILE, SPEC_FILE
from runs.run_folder import RUN_FOLDER_MARKS
from tests.runs.run_folders import SMALL_SPEC
from tests.special_files import put_in_place

COMMANDS = ["status", "audit", "reparse", "score", "repair", "report"]


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error: ")]


def test_the_marks_are_the_names_a_run_writes() -> None:
    assert set(RUN_FOLDER_MARKS) == {
        PID_FILE, DESIGN_FILE, SPEC_FILE, PLAN_FILE, JOURNAL, ATTEMPTS, RESPONSES
    }


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


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("held_by", "kind"),
    [("fifo", "a FIFO"), ("socket", "a socket"), ("/dev/null", "a character device")],
)
def test_a_device_fifo_or_socket_is_named_as_such(
    tmp_path: Path, command: str, held_by: str, kind: str
) -> None:
    """`score /dev/zero` said "/dev/zero is a file, not a run folder", where `check` names it
    "a character device" (`panels.input_files.file_kind`)."""
    path = tmp_path / "run"
    put_in_place(path, held_by)
    result = CliRunner().invoke(app, [command, str(path)])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: {path} is {kind}, not a run folder; give the folder `dutchbook run` wrote"
    ]


@pytest.mark.parametrize("command", ["status", "audit", "reparse", "score", "report"])
def test_a_link_that_leads_to_no_folder_is_said_so(tmp_path: Path, command: str) -> None:
    """A link loop or a dangling link was "no run folder at X (a new run makes it once its
    plan is rendered)", which no run would ever do: `run --out` refuses it."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    for link in ("a", "gone"):
        result = CliRunner().invoke(app, [command, str(tmp_path / link)])
        assert result.exit_code == 2, result.output
        target = tmp_path / ("b" if link == "a" else "nowhere")
        assert _errors(result.output) == [
            f"error: {tmp_path / link} is a link to {target}, which leads to no folder; give "
            "the folder `dutchbook run` wrote"
        ]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_folder_is_said_not_to_exist(tmp_path: Path, command: str) -> None:
    """It was "no run folder at X (a new run makes it once it has checked its spec)", read
    as a run yet to start where the path was mistyped."""
    result = CliRunner().invoke(app, [command, str(tmp_path / "nope")])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: {tmp_path / 'nope'} does not exist; check the path (a new run makes its "
        "folder once it has checked its spec: one started a moment ago may not have made it "
        "yet)"
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_mistyped_folder_is_given_the_nearest_beside_it(tmp_path: Path, command: str) -> None:
    (tmp_path / "quickstart").mkdir()
    (tmp_path / "quickstrat.txt").write_text("a file, not a folder", encoding="utf-8")
    result = CliRunner().invoke(app, [command, str(tmp_path / "quickstrat")])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: {tmp_path / 'quickstrat'} does not exist; check the path; did you mean "
        f"{tmp_path / 'quickstart'}? (a new run makes its folder once it has checked its "
        "spec: one started a moment ago may not have made it yet)"
    ]


def test_a_run_that_has_only_written_its_pid_is_a_run_folder(tmp_path: Path) -> None:
    (tmp_path / PID_FILE).write_text('{"pid": 1, "host": "elsewhere"}', encoding="utf-8")
    result = CliRunner().invoke(app, ["status", str(tmp_path)])
    assert result.exit_code == 0, result.output


def test_run_refuses_a_folder_of_other_files_and_writes_nothing_there(tmp_path: Path) -> None:
    """`run --out` at a folder of the user's own files wrote its report over theirs."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    folder = tmp_path / "thesis"
    (folder / "report").mkdir(parents=True)
    (folder / "report" / "index.html").write_text("MY THESIS", encoding="utf-8")
    (folder / "scores.parquet").write_text("precious", encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(folder)])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: {folder} holds files and is not a run folder (report, scores.parquet): a run "
        "would write its report, scores and logs among them; give --out a new or empty folder "
        "(or a run folder, to resume that run)"
    ]
    assert sorted(p.name for p in folder.rglob("*")) == ["index.html", "report", "scores.parquet"]
    assert (folder / "report" / "index.html").read_text(encoding="utf-8") == "MY THESIS"


@pytest.mark.parametrize(
    "inside", [[], [".lock"], [".lock", "run.pid"], [".lock", "design.json"], ["spec.toml", "x"]]
)
def test_run_takes_an_empty_folder_or_a_runs_own(tmp_path: Path, inside: list[str]) -> None:
    """An empty folder, one a run was killed or failed in just after taking its lock or
    writing its design, or a run's own folder (to resume it) are all a run's to write in."""
    from runs.pipeline import check_run_folder

    for name in inside:
        (tmp_path / name).write_text("", encoding="utf-8")
    check_run_folder(tmp_path)  # no RunError


def test_foreign_entries_are_named_a_few_at_a_time(tmp_path: Path) -> None:
    from runs.pipeline import RunError, check_run_folder

    for name in ["e", "d", "c", "b", "a"]:
        (tmp_path / name).write_text("", encoding="utf-8")
    with pytest.raises(RunError, match=r"\(a, b, c, \.\.\.\)"):
        check_run_folder(tmp_path)
