"""What a killed process leaves behind is removed by the next one that may (`runs.leftovers`).

Before, each SIGKILL during planning left the staged plan in the system's temporary folder,
each during a rehearsal the simulator's fake credentials, and each during `dutchbook score`
a `.scoring-*` folder of parts in the run folder, for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.leftovers import remove_folder_scratch, remove_orphaned_scratch, scratch_folder

SPEC = """
name = "leftovers"
seed = 4
[[models]]
name = "m"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "families/isolated"
passes = {passes}
"""


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not psutil.pid_exists(child.pid)
    return child.pid


def test_only_folders_whose_process_is_gone_are_removed(tmp_path: Path) -> None:
    me = os.getpid()
    orphan = tmp_path / f"dutchbook-plan-{dead_pid()}-abc123"
    mine = tmp_path / f"dutchbook-sim-{me}-def456"
    reused = tmp_path / f"dutchbook-plan-{me}-ghi789"  # made before this process started
    legacy = tmp_path / "dutchbook-sim-k2j4h5g6"  # named before pids were: owner unknown
    other = tmp_path / "dutchbook-report-123-x"  # not a kind this module makes
    for folder in (orphan, mine, reused, legacy, other):
        folder.mkdir()
        (folder / "part.parquet").write_bytes(b"x" * 100)
    long_before = psutil.Process(me).create_time() - 3600
    os.utime(reused, (long_before, long_before))
    removed = remove_orphaned_scratch(tmp_path)
    assert sorted(removed) == sorted([orphan, reused])
    assert not orphan.exists() and not reused.exists()
    assert mine.exists() and legacy.exists() and other.exists()


def test_a_scratch_folder_names_its_process_and_is_kept_while_it_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch_folder("plan") as made:
        assert Path(made).parent == tmp_path
        assert Path(made).name.startswith(f"dutchbook-plan-{os.getpid()}-")
        assert remove_orphaned_scratch(tmp_path) == []
        assert Path(made).exists()
    assert not Path(made).exists()


def test_a_run_removes_the_staged_plan_a_run_killed_while_planning_left(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(passes=1500), encoding="utf-8")
    exe = str(Path(sys.executable).with_name("dutchbook"))
    first = subprocess.Popen(
        [exe, "run", str(spec), "--out", str(tmp_path / "a")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    staged = scratch / "missing"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the plan's first part is staged
        found = list(scratch.glob(f"dutchbook-plan-{first.pid}-*"))
        if found and any(found[0].rglob("*.parquet")):
            staged = found[0]
            break
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert staged.exists(), "the first run never staged a plan part before it was killed"
    small = tmp_path / "small.toml"
    small.write_text(SPEC.format(passes=1), encoding="utf-8")
    second = subprocess.run(
        [exe, "run", str(small), "--out", str(tmp_path / "b")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert second.returncode == 0, second.stdout + second.stderr
    assert not staged.exists()
    assert list(scratch.glob("dutchbook-*")) == []  # and its own are gone too


def test_taking_the_folder_removes_the_parts_a_killed_score_left(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(passes=1), encoding="utf-8")
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert done.exit_code == 0, done.output
    left = [out / ".scoring-k1ll3d00", out / ".repair-k1ll3d00"]
    for folder in left:  # as a SIGKILL during `score` or `repair` leaves them
        folder.mkdir()
        (folder / "part-0.parquet").write_bytes(b"x" * 100)
    kept = out / ".scoring-notes.txt"  # a file, not a scratch folder: never removed
    kept.write_text("mine", encoding="utf-8")
    scored = CliRunner().invoke(app, ["score", str(out)])
    assert scored.exit_code == 0, scored.output
    assert not any(folder.exists() for folder in left)
    assert kept.exists()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith((".scoring", ".repair"))) == [
        kept.name
    ]


def test_remove_folder_scratch_touches_nothing_else(tmp_path: Path) -> None:
    for name in ("responses", "report", ".lock", "scoring-not-hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / ".scoring-x").mkdir()
    assert remove_folder_scratch(tmp_path) == [tmp_path / ".scoring-x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".lock",
        "report",
        "responses",
        "scoring-not-hidden",
    ]


@pytest.mark.parametrize("kind", ["plan", "sim"])
def test_a_folder_of_a_live_process_of_another_start_time_is_not_mistaken(
    tmp_path: Path, kind: str
) -> None:
    # A live child made the folder: it stays while the child lives, goes once it is dead.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = tmp_path / f"dutchbook-{kind}-{child.pid}-abcdefgh"
        folder.mkdir()
        assert remove_orphaned_scratch(tmp_path) == []
        assert folder.exists()
    finally:
        child.kill()
        child.wait()
    assert remove_orphaned_scratch(tmp_path) == [folder]
