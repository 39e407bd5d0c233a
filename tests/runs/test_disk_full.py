"""Fault 3 of issue 9: a full disk stops the run cleanly, keeps every answer written, and a
resume once there is space again loses nothing and pays for nothing twice.

Needs a small tmpfs (mounting one needs root); skipped, saying so, where it cannot be had.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from engine.scan import scan_attempts, scan_responses
from runs.design import freeze_design
from runs.planner import write_plan
from runs.spec import load_spec
from runs.units import UnitSource
from tests.runs.run_folders import FinishedRuns

SPEC = """
name = "full"
seed = 4
[data]
stock_days = 4
[[models]]
name = "a"
provider = "sim"
model = "sim-coherent"
[[models]]
name = "b"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
passes = 3
"""
#: Dispatched and scored on a small disk: SPEC on two stock-days and one pass (two lanes
#: still), 56 requests. SPEC's 336 filled the disks at the same writes, each disk's room
#: sized to its campaign, for six times the dispatch and a larger report to draw.
DISPATCHED = SPEC.replace("stock_days = 4", "stock_days = 2").replace("passes = 3", "passes = 1")
PLANNED = 14 * 2 * 1 * 2


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not root'})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A ballast file leaving about `leave` bytes free."""
    ballast = disk / "ballast"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with ballast.open("wb") as handle:
        handle.write(b"\0" * max(free - leave, 0))
    return ballast


def dutchbook(*args: str, tmpdir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command in its own process; `tmpdir` becomes its TMPDIR (the system's temporary
    folder, where a new run stages its plan)."""
    exe = str(Path(sys.executable).with_name("dutchbook"))
    env = None if tmpdir is None else dict(os.environ, TMPDIR=str(tmpdir))
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=180, check=False, env=env
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    # Nothing else on stderr: the engine's log echoed the full disk there too, just before
    # the error line ("dutchbook error: disk full: detail ..."), two lines saying one thing.
    assert result.stderr.strip().splitlines() == errors, result.stderr
    return errors[0]


def test_a_full_disk_mid_dispatch_stops_keeps_answers_and_resumes_without_loss(
    tmp_path: Path,
) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(DISPATCHED, encoding="utf-8")
    with small_tmpfs(tmp_path / "disk", "8m") as disk:
        out = disk / "run"
        spec = load_spec(spec_path)
        freeze_design(spec, out)  # planned as `run` would, so the disk fills during dispatch
        write_plan(spec, out, UnitSource.from_spec(spec))
        ballast = fill(disk, leave=40 * 1024)  # room for about a third of the answers

        result = dutchbook("run", str(spec_path), "--out", str(out))
        assert result.returncode == 6, result.stdout + result.stderr
        line = one_error_line(result)
        assert "disk full: no space left for" in line and str(out) in line and "resume" in line
        assert not (out / "run.pid").exists()
        kept = scan_responses(out).collect().height
        assert 0 < kept < PLANNED
        assert dutchbook("status", str(out)).returncode == 0  # the journal reads cleanly
        # The replies the full disk left unwritten are said: the summary's attempts and
        # they are what the audit counts (a tester's: "7 attempts", then 10 more interrupted).
        said = re.search(r"(\d+) attempts?, \d+ retry attempts?\)", result.stdout)
        unkept = re.search(r"; (\d+) repl(?:y|ies) to attempts sent before it could not be "
                           r"written: the next run counts (?:it|them) as interrupted",
                           result.stdout + result.stderr)  # fmt: skip
        assert said is not None, result.stdout
        audit = json.loads(dutchbook("audit", str(out), "--json").stdout)
        unsaid = audit["totals"]["attempts"] - int(said[1])
        assert (int(unkept[1]) if unkept else 0) == unsaid, result.stdout + result.stderr

        ballast.unlink()
        result = dutchbook("run", str(spec_path), "--out", str(out))
        assert result.returncode == 0, result.stdout + result.stderr
        responses = scan_responses(out).collect()
        assert responses.height == responses["request_id"].n_unique() == PLANNED
        oks = scan_attempts(out).collect().filter(pl.col("outcome") == "ok")
        assert oks.height == oks["request_id"].n_unique() == PLANNED  # none paid for twice
        assert not (out / "run.pid").exists()


def test_a_disk_too_full_to_plan_says_so_and_leaves_no_pid_file(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        fill(disk, leave=12 * 1024)
        out = disk / "run"
        result = dutchbook("run", str(spec_path), "--out", str(out))
        assert result.returncode == 6, result.stdout + result.stderr
        line = one_error_line(result)
        assert "disk full: no space left for" in line and str(out) in line
        assert not (out / "run.pid").exists()


def test_a_full_temporary_folder_while_planning_is_named_with_tmpdir(tmp_path: Path) -> None:
    # A new run stages its plan in the system's temporary folder before it goes into the run
    # folder. When that one filled, the message named the run folder (on a disk with room),
    # so freeing space where it pointed could not help.
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    with small_tmpfs(tmp_path / "scratch", "1m") as scratch:
        fill(scratch, leave=4 * 1024)
        result = dutchbook("run", str(spec_path), "--out", str(out), tmpdir=scratch)
        assert result.returncode == 6, result.stdout + result.stderr
        line = one_error_line(result)
        assert f"no space left for {scratch}/" in line, line
        assert "TMPDIR" in line and str(out) not in line, line
        assert not (out / "run.pid").exists()
        assert [p.name for p in scratch.iterdir()] == ["ballast"]  # the staging is removed
    # Nothing was sent, so nothing is lost; resuming after a full disk is tested above.
    assert not (out / "journal").exists()


@pytest.fixture(scope="module")
def finished_run(
    finished_runs: FinishedRuns, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """The spec and a finished run of it, on an ordinary disk: three tests start from one
    (a run takes seconds; the session's, copied), each on its own copy on its own small disk."""
    root = tmp_path_factory.mktemp("finished")
    return root / "spec.toml", finished_runs.finish(root, DISPATCHED)


def _finished_run_on(disk: Path, finished: tuple[Path, Path]) -> Path:
    out = disk / "run"
    shutil.copytree(finished[1], out)
    return out


def _scratch_left(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".") and p.name != ".lock")


# The room left fills as scoring writes a part of its scores (8 KB), and as it writes the
# forecasts made of its parts (28 KB).
@pytest.mark.parametrize("leave_kb", [8, 28])
def test_a_disk_that_fills_after_dispatch_ends_the_run_in_one_line(
    tmp_path: Path, leave_kb: int, finished_run: tuple[Path, Path]
) -> None:
    # Scoring and the report write through polars, which reports ENOSPC as its own error (or
    # loses it and fails reading the truncated part back): each ended in a traceback, exit 1.
    spec_path = finished_run[0]
    with small_tmpfs(tmp_path / "disk", "8m") as disk:
        out = _finished_run_on(disk, finished_run)
        for derived in ("scores.parquet", "forecasts.parquet", "averaged.parquet"):
            (out / derived).unlink()
        ballast = fill(disk, leave=leave_kb * 1024)
        result = dutchbook("run", str(spec_path), "--out", str(out))
        assert result.returncode == 6, result.stdout + result.stderr
        assert "disk full: no space left for" in one_error_line(result)
        assert not (out / "run.pid").exists() and _scratch_left(out) == []
        ballast.unlink()
        result = dutchbook("run", str(spec_path), "--out", str(out))
        assert result.returncode == 0, result.stdout + result.stderr
        assert (out / "scores.parquet").exists() and (out / "report" / "index.html").exists()


def test_the_folder_commands_on_a_full_disk_end_in_one_line(
    tmp_path: Path, finished_run: tuple[Path, Path]
) -> None:
    # score and repair exited 2 (a user error's status), or with polars' traceback; reparse
    # and report with a traceback.
    commands = ("score", "repair", "reparse", "report")
    with small_tmpfs(tmp_path / "disk", "8m") as disk:
        out = _finished_run_on(disk, finished_run)
        ballast = fill(disk, leave=0)
        for command in commands:
            result = dutchbook(command, str(out))
            assert result.returncode == 6, (command, result.stdout + result.stderr)
            line = one_error_line(result)
            assert "disk full: no space left for" in line, line
            assert "free some space and run the same command again" in line, line
            assert _scratch_left(out) == [], command
        ballast.unlink()
        for command in commands:
            again = dutchbook(command, str(out))
            assert again.returncode == 0, (command, again.stdout + again.stderr)
