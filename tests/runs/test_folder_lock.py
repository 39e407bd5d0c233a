"""Fault 4 of issue 9: the folder's lock is taken before anything is written.

Two runs started at once on a new folder used to race: the lock was taken after planning, so
the loser failed with a missing-file message or a polars traceback.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from engine.runlock import LedgerBusy, acquire_lock, read_pid, release_lock, write_pid
from engine.status import status
from runs.cli import app
from runs.commands.status import BUSY_NOTE
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents

SPEC = SMALL_SPEC


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
    from runs.scoring_step import score_run  # what runs.pipeline imported and calls

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    seen: dict[str, object] = {}

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


def test_a_resume_refused_before_dispatch_leaves_the_died_runs_pid_file(
    finished: Path, tmp_path: Path
) -> None:
    # A tester's SIGKILLed batch run read "died (pid N on host), 8 batch jobs ... still at the
    # provider"; a resume refused for a changed design cleared the pid file on its way out,
    # and the folder then read "stopped", its lanes "running when the run stopped".
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=30)
    died = {"pid": gone.pid, "create_time": 0.0, "host": socket.gethostname(),
            "started_at": "2025-01-01T00:00:00+00:00"}  # fmt: skip
    (out / "run.pid").write_bytes(orjson.dumps(died))
    assert status(out)["state"] == "died"
    changed = tmp_path / "changed.toml"
    changed.write_text(SPEC.replace("seed = 2", "seed = 3"), encoding="utf-8")
    refused = CliRunner().invoke(app, ["run", str(changed), "--out", str(out)])
    assert refused.exit_code == 2 and "design" in refused.output, refused.output
    assert (out / "run.pid").read_bytes() == orjson.dumps(died)
    assert status(out)["state"] == "died"
    # The same design resumes: its ledger takes the died run over, and the pid file is
    # this run's to clear.
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    resumed = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert resumed.exit_code == 0, resumed.output
    assert not (out / "run.pid").exists() and status(out)["state"] == "finished"


@pytest.fixture(scope="module")
def finished(
    finished_runs: FinishedRuns, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return finished_runs.finish(tmp_path_factory.mktemp("finished"), SPEC)


def _contents(folder: Path) -> dict[str, bytes]:
    return folder_contents(folder, skip=frozenset({".lock", "run.pid"}))


def _invoke_while_live(out: Path, command: str) -> Result:
    """`dutchbook <command> out` while a live run holds the folder, as far as the command can
    tell (the lock on a different descriptor, the run's pid file: this process's)."""
    fd = acquire_lock(out, out)
    write_pid(out)
    try:
        return CliRunner().invoke(app, [command, str(out)])
    finally:
        release_lock(fd)
        (out / "run.pid").unlink()


@pytest.mark.parametrize("command", ["score", "repair", "reparse", "report"])
def test_a_command_that_rewrites_a_run_refuses_a_folder_a_live_run_holds(
    finished: Path, tmp_path: Path, command: str
) -> None:
    # Before, each ran beside the live run: a `score` started during dispatch and ending after
    # the run's own scoring left partial scores in place of the complete ones.
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    before = _contents(out)
    result = _invoke_while_live(out, command)
    assert result.exit_code == 5, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert f"being written by another process (pid {os.getpid()})" in errors[0]
    assert f"then run `dutchbook {command}` again" in errors[0]
    assert _contents(out) == before
    again = CliRunner().invoke(app, [command, str(out)])  # the folder free again: it runs
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("command", ["score", "repair"])
def test_a_live_run_is_said_before_what_the_folders_own_spec_lacks(
    finished: Path, tmp_path: Path, command: str
) -> None:
    """A run started from a spec with a relative [data] path, scored without --spec while it
    ran: the frozen copy cannot resolve the path, and that was said (exit 2, "give that spec
    with --spec") where every other writer says the folder is busy (exit 5)."""
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    spec = out / "spec.toml"
    spec.write_text(spec.read_text().replace("[data]\n", '[data]\nfamilies = "fams"\n'))
    result = _invoke_while_live(out, command)
    assert result.exit_code == 5, result.output
    assert f"being written by another process (pid {os.getpid()})" in result.output
    assert "--spec" not in result.output
    # The run over, the spec's missing path is what is said.
    after = CliRunner().invoke(app, [command, str(out)])
    assert after.exit_code == 2 and "give that spec with --spec" in after.output, after.output


def test_while_score_holds_the_folder_a_run_is_refused_and_status_says_not_live(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runs.scoring_step

    out = tmp_path / "out"
    shutil.copytree(finished, out)
    seen: dict[str, object] = {}
    score_run = runs.scoring_step.score_run

    def scoring(*args: object, **kwargs: object) -> object:
        with pytest.raises(LedgerBusy, match=r"being written by another process$"):
            acquire_lock(out, out)  # what `dutchbook run` on the folder is told (no pid)
        seen["pid"] = read_pid(out)
        seen["state"] = status(out)["state"]
        # The command says the folder is being written, where it read as idle (and a reparse
        # so held was advised to be run again, while it ran).
        shown = CliRunner().invoke(app, ["status", str(out), "--json"])
        seen["warnings"] = orjson.loads(shown.stdout)["warnings"]
        return score_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runs.scoring_step, "score_run", scoring)
    result = CliRunner().invoke(app, ["score", str(out)])
    assert result.exit_code == 0, result.output
    assert seen == {"pid": None, "state": "finished", "warnings": [BUSY_NOTE]}
    idle = CliRunner().invoke(app, ["status", str(out), "--json"])
    assert orjson.loads(idle.stdout)["warnings"] == []
    fd = acquire_lock(out, out)  # released when the command ended
    release_lock(fd)


@pytest.mark.parametrize(
    ("command", "module", "work"),
    [
        ("score", "runs.scoring_step", "score_run"),
        ("repair", "runs.repair_step", "repair_run"),
        ("reparse", "runs.commands.reparse", "run_reparse"),
        ("report", "runs.commands.report", "build_report"),
    ],
)
def test_ctrl_c_ends_a_folder_command_in_one_line_and_frees_the_folder(
    finished: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    module: str,
    work: str,
) -> None:
    # Before, typer turned Ctrl-C into exit 130 without a word.
    out = tmp_path / "out"
    shutil.copytree(finished, out)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), work, interrupted)
    result = CliRunner().invoke(app, [command, str(out)])
    assert result.exit_code == 130, result.output
    assert result.output.strip().splitlines() == [
        "interrupted — run the same command again to finish"
    ]
    release_lock(acquire_lock(out, out))  # the folder's lock went with the command


def test_report_on_a_folder_a_run_is_still_planning_says_it_is_being_written(
    tmp_path: Path,
) -> None:
    """`report` on a folder whose run had not scored yet said "no scores.parquet yet; run the
    campaign (or resume it) first", sending its user to a second `run` the lock refuses."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "spec.toml").write_text(SPEC, encoding="utf-8")
    fd = acquire_lock(out, out)  # the run, as far as `report` can tell
    write_pid(out)
    try:
        held = CliRunner().invoke(app, ["report", str(out)])
    finally:
        release_lock(fd)
    assert held.exit_code == 5, held.output
    assert "being written by another process (pid" in held.output
    assert "run the campaign" not in held.output
    (out / "run.pid").unlink()
    idle = CliRunner().invoke(app, ["report", str(out)])  # no run holds it: what it lacks
    assert idle.exit_code == 2 and "no scores.parquet yet" in idle.output, idle.output
    # A resume may be refused (a lenient run reparsed strict): `score` is always open.
    assert f"`dutchbook score {out}` scores the answers it holds" in idle.output.replace(
        "\n", ""
    )


def test_report_advises_score_with_the_spec_where_the_folders_own_cannot_be_used(
    tmp_path: Path,
) -> None:
    """A run of a spec whose families folder is relative to it (as `local.toml`'s is), not
    scored: `report` advised `dutchbook score DIR`, which refuses without `--spec`."""
    families = Path(__file__).resolve().parents[2] / "runs" / "specs" / "local-families"
    started = tmp_path / "campaign"
    shutil.copytree(families, started / "fams")
    spec = started / "spec.toml"
    spec.write_text(
        'name = "fam"\nseed = 1\n[data]\nfamilies = "fams"\n[[models]]\nname = "m"\n'
        'provider = "sim"\nmodel = "sim-coherent"\n[[arms]]\nname = "families/joint"\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    ran = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    (out / "scores.parquet").unlink()  # as if stopped before it scored
    advised = CliRunner().invoke(app, ["report", str(out)])
    assert advised.exit_code == 2, advised.output
    said = " ".join(advised.output.split())
    assert f"`dutchbook score {out} --spec <the spec it was started with>` scores" in said
    bare = CliRunner().invoke(app, ["score", str(out)])
    assert bare.exit_code == 2 and "give that spec with --spec" in bare.output, bare.output
    scored = CliRunner().invoke(app, ["score", str(out), "--spec", str(spec)])
    assert scored.exit_code == 0, scored.output
    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
    # Every advice to score or repair (status's stale scores, a stale repair) is the same.
    from runs.scored_from import rerun_command

    for command in ("score", "repair"):
        assert rerun_command(out, command) == (
            f"dutchbook {command} {out} --spec <the spec it was started with>"
        )


def test_status_says_a_new_run_is_live_and_planning_while_it_renders_its_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tester polling `status` on a new run's folder was told "no run folder at ..." (exit
    2) for as long as the run rendered its prompts (17 s for a big quickstart, minutes at
    paper scale): the run made its folder, and took its lock, only once it had planned."""
    import runs.pipeline

    estimate = runs.pipeline._estimate
    out = tmp_path / "out"
    seen: dict[str, Result] = {}

    def planning(*args: Any, **kwargs: Any) -> Any:
        seen["human"] = CliRunner().invoke(app, ["status", str(out)])
        seen["json"] = CliRunner().invoke(app, ["status", "--json", str(out)])
        return estimate(*args, **kwargs)

    monkeypatch.setattr(runs.pipeline, "_estimate", planning)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 0, result.output
    human, as_json = seen["human"], seen["json"]
    assert human.exit_code == 0, human.output
    said = " ".join(human.output.split())  # a long temporary path wraps the line
    assert ": live (pid" in said and "planning" in said, human.output
    assert as_json.exit_code == 0, as_json.output
    summary = orjson.loads(as_json.output)
    assert summary["state"] == "live" and summary["planning"] is True
    finished = CliRunner().invoke(app, ["status", "--json", str(out)])
    assert orjson.loads(finished.output)["planning"] is False


def test_a_new_run_refused_after_planning_leaves_no_folder(tmp_path: Path) -> None:
    """Its folder, made and locked before the plan is rendered, goes again with the run that
    wrote nothing into it (over --max-cost: "nothing was sent"), as a mistyped --out must not
    leave a folder behind; a folder that was there before the run stays."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.replace('model = "sim-coherent"', 'model = "sim-coherent"\nprice_in = 1e6'),
        encoding="utf-8",
    )
    (tmp_path / "kept").mkdir()
    cases = (
        (tmp_path / "new", tmp_path / "new"),
        (tmp_path / "empty", None),
        # the parents it made went too: `a` and `a/b` stayed behind `a/b/c` (a review's)
        (tmp_path / "a" / "b" / "c", tmp_path / "a"),
        (tmp_path / "kept" / "d" / "e", tmp_path / "kept" / "d"),
    )
    for out, made in cases:
        if made is None:
            out.mkdir()
        result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--max-cost", "1"])
        assert result.exit_code == 2 and "nothing was sent" in result.output, result.output
        assert out.exists() is (made is None)
        if made is None:
            assert list(out.iterdir()) == []
        else:
            assert not made.exists() and made.parent.is_dir()


def test_a_folder_taken_away_while_its_lock_was_taken_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that wrote nothing takes the folder it made away as it lets go; another run,
    which had made it too and was taking its lock, ended in a FileNotFoundError traceback (a
    review's, with a delay put in)."""
    import runs.folder_lock
    import runs.pipeline

    lock = runs.folder_lock.take_folder_lock
    out = tmp_path / "new"
    taken_away: list[Path] = []

    def folder_gone_once(run_dir: Path, *args: Any) -> int:
        if not taken_away:
            taken_away.append(run_dir)
            run_dir.rmdir()
            raise FileNotFoundError(2, "No such file or directory", str(run_dir / ".lock"))
        return lock(run_dir, *args)

    monkeypatch.setattr(runs.pipeline, "lock_folder", folder_gone_once)
    hold = runs.pipeline.take_folder_lock(out)
    try:
        assert taken_away == [out] and (out / ".lock").exists() and (out / "run.pid").exists()
    finally:
        hold.release(out)
    assert not out.exists()  # it wrote nothing: taken away again, by the run that made it


@pytest.mark.parametrize("fails", ["write_pid", "_estimate"])
@pytest.mark.parametrize("there", [False, True])
def test_a_new_run_on_a_full_disk_leaves_no_folder_and_says_nothing_was_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str, there: bool
) -> None:
    """A new run on a disk already full (its pid file the first write to fail) left the folder
    it made holding only `.lock`, and said "nothing written was lost; ... run the same command
    again to resume", of a run that had started nothing; one whose disk filled while it
    planned took the folder away but said the same. A folder that was there stays, empty."""
    import errno

    import runs.pipeline
    from engine.durable import DiskFull

    out = tmp_path / "new"

    def full(*args: object, **kwargs: object) -> None:
        error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if fails == "write_pid":
            raise error  # `take_folder_lock` says it as `DiskFull`
        raise DiskFull(out / "plan.parquet", error)  # as planning's writes raise it

    monkeypatch.setattr(runs.pipeline, fails, full)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    if there:
        out.mkdir()
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 6, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: disk full: no space left for ")
    assert errors[0].endswith(
        "; nothing was started; free some space and run the same command again"
    ), result.output
    assert out.exists() is there
    if there:
        assert list(out.iterdir()) == []
