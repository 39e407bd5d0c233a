"""A run folder this process may not write in (a read-only mount, another user's folder).

Before, `score`, `repair`, `reparse` and a resumed `run` on a folder on a read-only mount
ended in a traceback from the folder's lock file, `report` in "error: [Errno 30] ...", and a
new `run` under a read-only parent planned first and only then failed. The commands that
only read a folder (`status`, `audit`) work on it as before.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import runs.folder_lock
import runs.pipeline
from engine.durable import why_unwritable
from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents

SPEC = SMALL_SPEC
WRITERS = ["score", "repair", "reparse", "report"]


@pytest.fixture(scope="module")
def finished(
    finished_runs: FinishedRuns, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return finished_runs.finish(tmp_path_factory.mktemp("finished"), SPEC)


def _one_error(output: str) -> str:
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in output, output
    return errors[0]


@pytest.mark.parametrize("command", WRITERS)
def test_a_command_that_writes_a_run_refuses_a_folder_it_cannot_write_in_one_line(
    finished: Path, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    before = folder_contents(out)

    def read_only(run_dir: Path, lock_dir: Path) -> int:  # what os.open says on such a mount
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(lock_dir / ".lock"))

    monkeypatch.setattr(runs.folder_lock, "acquire_lock", read_only)
    result = CliRunner().invoke(app, [command, str(out)])
    assert result.exit_code == 2, result.output
    assert _one_error(result.output) == (
        f"error: cannot write in {out} (Read-only file system); `dutchbook {command}` writes "
        "the run's files there (`status` and `audit` only read them): copy the folder "
        "somewhere you can write, and give it the copy"
    )
    assert folder_contents(out) == before
    for reader in ("status", "audit"):  # they take no lock: they work on it as before
        assert CliRunner().invoke(app, [reader, str(out)]).exit_code == 0


def test_other_errors_of_the_lock_file_are_not_taken_for_an_unwritable_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def too_many(run_dir: Path, lock_dir: Path) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(runs.folder_lock, "acquire_lock", too_many)
    with pytest.raises(OSError, match="Too many open files"):
        runs.folder_lock.take_folder_lock(tmp_path, "then", "unwritable")


@pytest.mark.parametrize(
    ("out", "of"),
    [("run", ""), ("new/deeper", ", a parent of {out}")],
)
def test_a_run_refuses_before_planning_a_folder_it_cannot_write_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str, of: str
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    target = root / out
    shut = target if target.is_dir() else root  # the nearest folder that exists

    def unwritable(folder: Path) -> str | None:
        return os.strerror(errno.EACCES) if folder == shut else None

    def no_planning(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("planned a run whose folder it could not write in")

    monkeypatch.setattr(runs.pipeline, "why_unwritable", unwritable)
    monkeypatch.setattr(runs.pipeline, "_estimate", no_planning)
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(target)])
    assert result.exit_code == 2, result.output
    assert _one_error(result.output) == (
        f"error: cannot write in {shut} (Permission denied){of.format(out=target)}; give --out "
        "a folder you can write in"
    )
    assert sorted(p.name for p in root.rglob("*")) == ["run"]


def test_why_unwritable_says_a_read_only_mount_from_a_folder_of_someone_elses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert why_unwritable(tmp_path) is None

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert why_unwritable(tmp_path) == "Permission denied"
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    assert why_unwritable(tmp_path) == "Read-only file system"


@pytest.fixture
def read_only_copy(finished: Path, tmp_path: Path) -> Iterator[Path]:
    """The finished run on a real read-only mount (a tmpfs remounted read-only), where this
    process may mount one; skipped elsewhere."""
    mount = tmp_path / f"ro-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        shutil.copytree(finished, mount / "out")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield mount / "out"
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_on_a_real_read_only_mount_every_command_ends_in_one_line(
    read_only_copy: Path, tmp_path: Path
) -> None:
    out = read_only_copy
    for command in WRITERS:
        result = CliRunner().invoke(app, [command, str(out)])
        assert result.exit_code == 2, result.output
        assert "(Read-only file system)" in _one_error(result.output)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    for target in (out, out / "new"):
        result = CliRunner().invoke(app, ["run", str(spec), "--out", str(target)])
        assert result.exit_code == 2, result.output
        assert "(Read-only file system)" in _one_error(result.output)
    for reader in ("status", "audit"):
        assert CliRunner().invoke(app, [reader, str(out)]).exit_code == 0
