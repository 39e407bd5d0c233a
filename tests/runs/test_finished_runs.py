"""The session's finished runs (`tests.runs.run_folders.FinishedRuns`): a copy is the folder a
run at the copy's place leaves, naming its own place, never the cache's."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from runs.cli import app
from tests.runs.run_folders import (
    NAMES_ITS_FOLDER,
    SMALL_SPEC,
    FinishedRuns,
    _names_itself_once,
    folder_contents,
)


def test_a_copy_is_the_cached_folder_naming_its_own_place(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    first = finished_runs.finish(tmp_path / "a", SMALL_SPEC)
    second, code = finished_runs.run(tmp_path / "b", SMALL_SPEC)
    assert code == 0 and first == tmp_path / "a" / "out" and second == tmp_path / "b" / "out"
    assert (tmp_path / "b" / "spec.toml").read_text("utf-8") == SMALL_SPEC  # as run_spec's
    log = str(NAMES_ITS_FOLDER)
    mine, theirs = folder_contents(first), folder_contents(second)
    assert {k: v for k, v in mine.items() if k != log} == {
        k: v for k, v in theirs.items() if k != log
    }
    assert mine[log].replace(str(first).encode(), str(second).encode()) == theirs[log]
    assert str(first).encode() in mine[log] and b"finished-runs" not in mine[log]
    shown = CliRunner().invoke(app, ["status", str(second), "--json"])
    assert shown.exit_code == 0 and orjson.loads(shown.stdout)["state"] == "finished"


def test_a_folder_naming_itself_outside_the_engine_log_is_not_cached(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / NAMES_ITS_FOLDER).write_text(str(tmp_path), "utf-8")
    _names_itself_once(tmp_path)  # the line a copy rewrites
    (tmp_path / "links.json").write_text(f'["{tmp_path}/report"]', "utf-8")
    with pytest.raises(AssertionError, match=r"\['links.json'\] name the folder"):
        _names_itself_once(tmp_path)
