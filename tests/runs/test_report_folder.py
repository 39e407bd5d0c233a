"""`report/` is replaced whole or left as it was (`runs.report_folder`).

A tester's SIGKILL while the report was written left `report/` with files of two reports,
new tables beside the old page; the next `report` or `run` rewrote them, but until then
nothing said the folder was mixed.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

import runs.report_folder
import runs.report_page
from runs.cli import app
from runs.folder_lock import folder_held
from runs.report_folder import STAGE_PREFIX, staged_report
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents


@pytest.fixture(scope="module")
def finished(
    finished_runs: FinishedRuns, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return finished_runs.finish(tmp_path_factory.mktemp("report-folder"), SMALL_SPEC)


def _scratch(run: Path) -> list[str]:
    return [p.name for p in run.iterdir() if p.name.startswith(STAGE_PREFIX)]


@pytest.mark.figures
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


@pytest.mark.figures
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


@pytest.mark.figures
def test_a_report_folder_linked_elsewhere_is_written_through_the_link(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report` a symbolic link to a folder of the user's choosing stays the link. Written
    in place so, a report that draws no figure (`DUTCHBOOK_FIGURES=0`, or no matplotlib)
    kept the last report's figures and their manifest, and its page showed them under a
    summary that said none was drawn (a reviewer's)."""
    from runs.figures_env import FIGURES_ENV, FIGURES_OFF_NOTE

    run = tmp_path / "run"
    shutil.copytree(finished, run, ignore=shutil.ignore_patterns("report"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "report").symlink_to(elsewhere, target_is_directory=True)
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert (run / "report").is_symlink() and (elsewhere / "index.html").is_file()
    assert _scratch(run) == []
    assert list(elsewhere.glob("*.png")) and (elsewhere / "figures.json").is_file()
    (elsewhere / "notes.txt").write_text("mine", encoding="utf-8")
    monkeypatch.setenv(FIGURES_ENV, "0")
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert list(elsewhere.glob("*.png")) == [] and not (elsewhere / "figures.json").exists()
    assert (elsewhere / "notes.txt").read_text(encoding="utf-8") == "mine"
    summary = orjson.loads((elsewhere / "summary.json").read_bytes())
    assert summary["figures"]["note"] == FIGURES_OFF_NOTE
    page = (elsewhere / "index.html").read_text(encoding="utf-8")
    assert "<img" not in page and "Figures skipped" in page


@pytest.mark.figures
def test_the_folder_keeps_its_mode_and_a_figure_left_out_stays_out(
    finished: Path, tmp_path: Path
) -> None:
    """A private report folder became world-readable (the scratch folder's umask mode), and
    a figure this report leaves out came back from the old report (writing in place removed
    it: `runs.report_figures.draw_all`)."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    report = run / "report"
    report.chmod(0o2750)
    left_out = report / "fig7_repeated.png"  # this one-pass run draws no figure 7
    left_out.write_bytes(b"\x89PNG\r\n\x1a\n")  # an earlier report's figure 7
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert stat.S_IMODE(report.stat().st_mode) == 0o2750
    assert not left_out.exists() and (report / "fig1_books.png").is_file()


def test_only_a_reports_own_scratch_is_removed(finished: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    shutil.copytree(run / "report", run / ".report-backup")  # the user's
    (run / f"{STAGE_PREFIX}12345-old").mkdir()  # a killed two-rename swap's
    with folder_held(run, "report"):
        pass
    assert (run / ".report-backup" / "summary.json").is_file()
    assert not (run / f"{STAGE_PREFIX}12345-old").exists()


@pytest.mark.figures
def test_a_report_folder_holding_a_mount_is_written_in_place(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount does not move with its folder's rename, and the old report's removal would
    cross into it (a tester's tmpfs at report/archive was emptied)."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    archive = run / "report" / "archive"
    archive.mkdir()
    (archive / "data.txt").write_text("kept", encoding="utf-8")
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == archive or real(p))
    real_lstat = os.lstat

    def on_another_device(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        got = real_lstat(path, *args, **kwargs)
        if Path(path) != archive:
            return got
        fields = list(got)
        fields[stat.ST_DEV] += 1
        return os.stat_result(fields)

    monkeypatch.setattr(os, "lstat", on_another_device)
    inode = (run / "report").stat().st_ino
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert (run / "report").stat().st_ino == inode  # the same folder: written in place
    assert (archive / "data.txt").read_text(encoding="utf-8") == "kept"
    assert _scratch(run) == []


def test_the_users_tmp_files_are_kept_and_only_a_writes_own_left_behind(
    finished: Path, tmp_path: Path
) -> None:
    """Every name ending in .tmp was left out of the carry-over: a user's `draft.tmp` and
    `work.tmp/` were deleted; only a write's own hidden temporary (`.name.tmp`) is."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    report = run / "report"
    (report / "draft.tmp").write_text("mine", encoding="utf-8")
    (report / "work.tmp").mkdir()
    (report / "work.tmp" / "a").write_text("mine", encoding="utf-8")
    (report / ".summary.json.tmp").write_text("{", encoding="utf-8")  # a killed write's
    done = CliRunner().invoke(app, ["report", str(run)])
    assert done.exit_code == 0, done.output
    assert (report / "draft.tmp").read_text(encoding="utf-8") == "mine"
    assert (report / "work.tmp" / "a").read_text(encoding="utf-8") == "mine"
    assert not (report / ".summary.json.tmp").exists()


def test_a_report_folder_it_may_not_write_is_refused_naming_it(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing in place refused a read-only `report/` (or another user's); the swap needs
    only the run folder's permission, and replaced it. Refused before anything is written,
    naming `report/`, not a scratch file."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    report = run / "report"
    before = folder_contents(report)
    mkstemp = tempfile.mkstemp

    def denied(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("dir") == report:
            raise PermissionError(13, "Permission denied", str(report / ".write-probe-x.tmp"))
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", denied)  # as for a user without write access there
    refused = CliRunner().invoke(app, ["report", str(run)])
    assert refused.exit_code == 2, refused.output
    assert f"error: Permission denied: {report} (" in refused.output.replace("\n", "")
    assert folder_contents(report) == before and _scratch(run) == []


@pytest.mark.parametrize("target", ["nowhere", "report", "a-file"])
def test_a_report_link_leading_to_no_folder_is_named_in_one_line(
    finished: Path, tmp_path: Path, target: str
) -> None:
    """A dangling link, a loop, or a link to a file ended with a bare "File exists:
    DIR/report", after the report was computed."""
    run = tmp_path / "run"
    shutil.copytree(finished, run, ignore=shutil.ignore_patterns("report"))
    (run / "a-file").write_text("notes", encoding="utf-8")
    (run / "report").symlink_to(target)
    refused = CliRunner().invoke(app, ["report", str(run)])
    assert refused.exit_code == 2, refused.output
    assert refused.output.replace("\n", "") == (
        f"error: File exists: {run / 'report'} ({run / 'report'} is a link to {target}, which "
        "leads to no folder, where a folder goes: move or remove it, then run the same "
        "command again)"
    )
    assert _scratch(run) == [] and (run / "report").is_symlink()
