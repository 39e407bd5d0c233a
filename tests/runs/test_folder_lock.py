"""Fault 4 of issue 9: the folder's lock is taken before anything is written.

Two runs started at once on a new folder used to race: the lock was taken after planning, so
the loser failed with a missing-file message or a polars traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.runlock import LedgerBusy, acquire_lock, read_pid, release_lock, write_pid
from engine.status import status
from runs.cli import app

SPEC = """
name = "race"
seed = 2
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


def test_a_run_on_a_folder_another_process_holds_writes_nothing_and_exits_5(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    fd = acquire_lock(out, out)  # another writer, as far as the run can tell (a different fd)
    write_pid(out)
    try:
        result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    finally:
        release_lock(fd)
    assert result.exit_code == 5, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "being written by another process (pid" in errors[0]
    assert "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == [".lock", "run.pid"]  # nothing planned


def test_two_runs_started_at_once_on_a_new_folder_one_wins_the_other_is_told(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    exe = str(Path(sys.executable).with_name("dutchbook"))
    procs = [
        subprocess.Popen(
            [exe, "run", str(spec), "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]  # fmt: skip
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    for code, stdout, stderr in results:
        assert "Traceback" not in stdout + stderr
        # Either the winner, the loser told the folder is busy, or (if the loser started
        # after the winner finished) a resume with nothing left to ask.
        assert code in (0, 5), stdout + stderr
        if code == 5:
            assert "being written by another process" in stderr
    assert 0 in [code for code, _, _ in results]
    assert not (out / "run.pid").exists()


def test_the_run_reads_as_live_while_it_scores_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Dispatch's ledger used to clear the pid file at close, so for the whole of scoring and
    # the report (minutes at paper scale) `status` said the run had stopped and a second run
    # was told the folder was busy without the pid.
    import runs.pipeline

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    seen: dict[str, object] = {}
    score_run = runs.pipeline.score_run

    def scoring(*args: object, **kwargs: object) -> object:
        seen["pid"] = read_pid(out)
        seen["state"] = status(out)["state"]
        with pytest.raises(LedgerBusy, match=rf"\(pid {os.getpid()}\)"):
            acquire_lock(out, out)  # what a second `dutchbook run` on the folder is told
        return score_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runs.pipeline, "score_run", scoring)
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 0, result.output
    info = seen["pid"]
    assert isinstance(info, dict) and info["pid"] == os.getpid() and info["alive"]
    assert seen["state"] == "live"
    assert not (out / "run.pid").exists()  # cleared once the run ended
