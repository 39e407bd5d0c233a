"""A run folder moved, renamed or deleted mid-run (`runs.folder_moved`): it ended in a bare
"No such file or directory: .../journal/seg-00000002.jsonl", exit 2 ("nothing sent"), and
`logs/lanes.json` was written again into a new folder at the old place, which a resume there
then refused as a folder of other files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import runs.pipeline as pipeline
from engine.dispatch import dispatch
from engine.lanefile import write_lane_states
from runs.cli import app
from runs.folder_moved import FolderMoved, moved_said
from tests.runs.run_folders import SMALL_SPEC


def test_an_error_after_the_folder_moved_says_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "out"
    run_dir.mkdir()
    with pytest.raises(FolderMoved) as caught, moved_said(run_dir):
        run_dir.rename(tmp_path / "elsewhere")
        (run_dir / "journal" / "seg-00000002.jsonl").open("rb")
    assert str(caught.value) == (
        f"the run folder {run_dir} was moved, renamed or deleted while the run went on (No such "
        "file or directory): every answer it wrote is in the folder at its new place; give that "
        "place to --out (the same spec) to resume there"
    )


def test_an_error_in_a_folder_still_in_place_is_its_own(tmp_path: Path) -> None:
    run_dir = tmp_path / "out"
    run_dir.mkdir()
    with pytest.raises(FileNotFoundError), moved_said(run_dir):
        (run_dir / "missing").open("rb")
    # Another folder put in its place is not the run's.
    with pytest.raises(FolderMoved), moved_said(run_dir):
        run_dir.rename(tmp_path / "elsewhere")
        run_dir.mkdir()
        (run_dir / "missing").open("rb")


def test_the_lane_states_never_make_the_run_folder_again(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_lane_states(tmp_path / "gone", [])
    assert not (tmp_path / "gone").exists()


def test_a_run_whose_folder_is_moved_mid_run_says_where_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    out, moved = tmp_path / "out", tmp_path / "moved"
    sent = dispatch

    async def then_moved(*args: Any, **kwargs: Any) -> Any:
        summary = await sent(*args, **kwargs)
        out.rename(moved)
        return summary

    monkeypatch.setattr(pipeline, "dispatch", then_moved)
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 4, result.output
    assert f"error: the run folder {out} was moved, renamed or deleted" in result.output
    assert not out.exists()  # nothing made again at the old place
    monkeypatch.setattr(pipeline, "dispatch", sent)
    resumed = CliRunner().invoke(app, ["run", str(spec), "--out", str(moved)])
    assert resumed.exit_code == 0, resumed.output
    assert "0 answers accepted" in resumed.output  # every answer was kept at the new place
