"""`report/` is replaced whole or left as it was (`runs.report_folder`).

A tester's SIGKILL while the report was written left `report/` with files of two reports,
new tables beside the old page; the next `report` or `run` rewrote them, but until then
nothing said the folder was mixed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import runs.report_folder
import runs.report_page
from runs.cli import app
from runs.folder_lock import folder_held
from runs.report_folder import STAGE_PREFIX, staged_report
from tests.runs.run_folders import SMALL_SPEC, finish_run, folder_contents


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finish_run(tmp_path_factory.mktemp("report-folder"), SMALL_SPEC)


def _scratch(run: Path) -> list[str]:
    return [p.name for p in run.iterdir() if p.name.startswith(STAGE_PREFIX)]


def test_a_report_that_fails_half_way_leaves_the_last_one_whole(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page fails last, after every table and figure was written: `report/` is the
    earlier report to the byte, and no scratch folder is left."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    # An earlier report's table, told apart from the one this report writes.
    (run / "report" / "leaderboard.txt").write_text("the earlier report's", encoding="utf-8")
    before = folder_contents(run / "report")

    def no_room(*args: object, **kwargs: object) -> Path:
        raise OSError(28, "No space left on device", str(run / "report" / "index.html"))

    monkeypatch.setattr(runs.report_page, "write_page", no_room)
    failed = CliRunner().invoke(app, ["report", str(run)])
    assert failed.exit_code != 0
    assert folder_contents(run / "report") == before
    assert _scratch(run) == []


@pytest.mark.parametrize("exchange", [True, False], ids=["exchanged", "two-renames"])
def test_a_whole_report_takes_the_folders_place_keeping_files_of_the_users(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    """Every file is new (a stale table is replaced), a file the report does not write is
    carried over as writing in place kept it, and the figures' paths name `report/`; alike
    where the two folders cannot be exchanged at once."""
    if not exchange:
        monkeypatch.setattr(runs.report_folder, "_exchange", lambda *paths: False)
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    report = run / "report"
    (report / "leaderboard.txt").write_text("stale", encoding="utf-8")
    (report / "notes.txt").write_text("mine", encoding="utf-8")
    (report / "drafts").mkdir()
    (report / "drafts" / "a.md").write_text("draft", encoding="utf-8")
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert f"report: {report / 'index.html'}" in done.output.replace("\n", "")
    assert (report / "leaderboard.txt").read_text(encoding="utf-8") != "stale"
    assert (report / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert (report / "drafts" / "a.md").read_text(encoding="utf-8") == "draft"
    assert (report / "index.html").is_file()
    summary = orjson.loads((report / "summary.json").read_bytes())
    paths = [v for v in summary["figures"].values() if isinstance(v, str) and v.endswith(".png")]
    assert paths and all(p.startswith("report/") and (run / p).is_file() for p in paths)
    assert _scratch(run) == []


def test_a_first_report_makes_the_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with staged_report(run) as out:
        (out / "summary.json").write_bytes(b"{}")
    assert (run / "report" / "summary.json").read_bytes() == b"{}"
    assert _scratch(run) == []


def test_a_killed_reports_scratch_goes_when_the_lock_is_next_taken(
    finished: Path, tmp_path: Path
) -> None:
    """SIGKILL runs no cleanup: the next holder of the folder's lock removes the scratch."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    left = run / f"{STAGE_PREFIX}99999"
    left.mkdir()
    (left / "summary.json").write_bytes(b"{")
    with folder_held(run, "report"):
        assert _scratch(run) == []
    assert (run / "report" / "summary.json").read_bytes() != b"{"


def test_a_report_folder_linked_elsewhere_is_written_through_the_link(
    finished: Path, tmp_path: Path
) -> None:
    """`report` a symbolic link to a folder of the user's choosing stays the link."""
    run = tmp_path / "run"
    shutil.copytree(finished, run, ignore=shutil.ignore_patterns("report"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "report").symlink_to(elsewhere, target_is_directory=True)
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert (run / "report").is_symlink() and (elsewhere / "index.html").is_file()
    assert _scratch(run) == []
