"""A plan changed on disk since it was written is refused, never asked
(`runs.plan_checksums`).

A tester zeroed 100 bytes of a finished run's `plan.parquet`: polars read it without a word,
444 request ids now held NUL bytes, and the resume paid again for 444 answered queries, exit
0; `status` then read "accepted 1,874/1,430 (131%)".
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from engine.scan import scan_attempts
from runs.cli import app
from runs.plan_checksums import CHECKSUMS_FILE, PLAN_FILES, file_sha256
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns


def _zero_bytes(path: Path) -> None:
    """A stretch of the file zeroed (a bad sector)."""
    data = bytearray(path.read_bytes())
    data[200:260] = bytes(60)
    path.write_bytes(bytes(data))


def _one_id_changed(path: Path) -> None:
    """Damage polars reads without a word: a valid file whose first id holds a NUL byte."""
    plan = pl.read_parquet(path)
    ids = plan["request_id"].to_list()
    plan.with_columns(pl.Series("request_id", ["\x00" + ids[0][1:], *ids[1:]])).write_parquet(path)


@pytest.fixture(scope="module")
def finished(
    finished_runs: FinishedRuns, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return finished_runs.finish(tmp_path_factory.mktemp("plan-checksums"), SMALL_SPEC)


def test_a_run_keeps_its_plan_files_checksums(finished: Path) -> None:
    kept = orjson.loads((finished / CHECKSUMS_FILE).read_bytes())
    assert kept["sha256"] == {name: file_sha256(finished / name) for name in PLAN_FILES}


@pytest.mark.parametrize(
    ("name", "damage"),
    [(name, damage) for name in PLAN_FILES for damage in (_zero_bytes, _one_id_changed)],
)
def test_a_damaged_plan_is_refused_by_a_resume_and_by_the_folder_commands(
    finished: Path, tmp_path: Path, name: str, damage: Callable[[Path], None]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    damage(run / name)
    attempts = scan_attempts(run).collect().height
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    runner = CliRunner()
    resumed = runner.invoke(app, ["run", str(spec), "--out", str(run)])
    assert resumed.exit_code == 2, resumed.output
    assert f"{run / name} is damaged: not what was written" in resumed.output
    assert "Traceback" not in resumed.output
    assert scan_attempts(run).collect().height == attempts  # nothing asked, nothing paid
    for command in ("status", "audit", "score", "report"):
        said = runner.invoke(app, [command, str(run)])
        assert said.exit_code == 2 and "is damaged: not what was written" in said.output, command
    # The advice: remove the plan's files and run again; the same ids, nothing asked again.
    for plan_file in PLAN_FILES:
        (run / plan_file).unlink()
    again = runner.invoke(app, ["run", str(spec), "--out", str(run)])
    assert again.exit_code == 0, again.output
    assert scan_attempts(run).collect().height == attempts
    assert file_sha256(run / "plan.parquet") == file_sha256(finished / "plan.parquet")
    assert runner.invoke(app, ["status", str(run)]).exit_code == 0


def test_a_folder_planned_before_checksums_were_kept_is_not_checked(
    finished: Path, tmp_path: Path
) -> None:
    """Nothing to check against: a changed plan there reads as before (polars' own errors
    aside), not as a checksum's refusal."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / CHECKSUMS_FILE).unlink()
    _one_id_changed(run / "plan.parquet")
    said = CliRunner().invoke(app, ["status", str(run)])
    # The answer the changed plan no longer holds is said as such, not the plan as damaged.
    assert said.exit_code == 0 and CHECKSUMS_FILE not in said.output, said.output
    assert "1 answer in responses/ and 1 attempt in attempts/ are for requests" in said.output


def test_damaged_checksums_are_said_in_one_line(finished: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    for kept in (b"{not json", b'{"format": "dutchbook.plan-checksums/9", "sha256": {}}'):
        (run / CHECKSUMS_FILE).write_bytes(kept)
        said = CliRunner().invoke(app, ["status", str(run)])
        assert said.exit_code == 2 and f"{run / CHECKSUMS_FILE} is damaged" in said.output


def test_the_checksums_are_kept_before_either_plan_file_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checksums, then the members, then the plan: a kill at any step leaves a folder with no
    plan (planned again on resume) or one whose files match their checksums. A plan's
    members committed before the checksums of a plan made again could read as damaged."""
    import engine.durable
    import runs.planner
    from runs.planner import write_plan
    from runs.spec import load_spec

    steps: list[str] = []
    import runs.plan_checksums

    commit, record = engine.durable.commit_file, runs.plan_checksums.record_checksums

    def committing(tmp: Path, target: Path, **kwargs: Any) -> None:
        if target.name in PLAN_FILES:
            steps.append(target.name)
        commit(tmp, target, **kwargs)

    def recording(run_dir: Path, sums: dict[str, str]) -> None:
        assert not any((run_dir / name).exists() for name in PLAN_FILES)
        steps.append(CHECKSUMS_FILE)
        record(run_dir, sums)

    monkeypatch.setattr(engine.durable, "commit_file", committing)
    monkeypatch.setattr(runs.planner, "record_checksums", recording)
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    write_plan(load_spec(spec), tmp_path / "run")
    assert steps == [CHECKSUMS_FILE, "plan_members.parquet", "plan.parquet"]
    kept = orjson.loads((tmp_path / "run" / CHECKSUMS_FILE).read_bytes())["sha256"]
    assert kept == {name: file_sha256(tmp_path / "run" / name) for name in PLAN_FILES}


def test_a_plan_that_does_not_hold_the_answers_is_refused_by_a_resume(
    finished: Path, tmp_path: Path
) -> None:
    """In a folder planned before checksums were kept, or planned again by a dutchbook that
    renders a prompt differently, a plan without the answers' ids would ask their queries
    again under new ids: the resume is refused, and nothing is asked."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / CHECKSUMS_FILE).unlink()
    _one_id_changed(run / "plan.parquet")
    attempts = scan_attempts(run).collect().height
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    resumed = CliRunner().invoke(app, ["run", str(spec), "--out", str(run)])
    assert resumed.exit_code == 2, resumed.output
    assert f"1 accepted answer is for requests {run / 'plan.parquet'} does not hold" in (
        resumed.output
    )
    assert "remove plan_members.parquet and plan.parquet, then resume" in resumed.output
    assert scan_attempts(run).collect().height == attempts


def test_a_plan_made_again_to_other_ids_is_removed_and_the_advice_works(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan files removed, then a resume under a dutchbook rendering other ids: refused, and
    the plan it made is removed again (left, it was the folder's plan for every later
    resume, refused alike, and `score` rescored the run against it to nothing). The same
    dutchbook as the folder's then plans the same ids, and asks nothing."""
    import runs.planner

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    for name in PLAN_FILES:
        (run / name).unlink()
    (run / "plan-estimate.json").unlink()  # rendered again, as a new version would
    attempts = scan_attempts(run).collect().height
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    same = runs.planner.request_id
    monkeypatch.setattr(runs.planner, "request_id", lambda *a: "other-" + same(*a))
    refused = CliRunner().invoke(app, ["run", str(spec), "--out", str(run)])
    assert refused.exit_code == 2, refused.output
    assert "the plan just made was removed again; resume" in refused.output
    assert not any((run / name).exists() for name in (*PLAN_FILES, CHECKSUMS_FILE))
    monkeypatch.setattr(runs.planner, "request_id", same)
    again = CliRunner().invoke(app, ["run", str(spec), "--out", str(run)])
    assert again.exit_code == 0, again.output
    assert scan_attempts(run).collect().height == attempts
    assert file_sha256(run / "plan.parquet") == file_sha256(finished / "plan.parquet")


def test_a_resume_refuses_a_damaged_plan_before_rendering_a_prompt(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan with a row less no longer matches its saved estimate, which a resume would
    render every prompt again to replace (seconds at paper scale) before it refused."""
    import runs.pipeline

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    plan = pl.read_parquet(run / "plan.parquet")
    plan.head(plan.height - 1).write_parquet(run / "plan.parquet")

    def rendering(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("rendered the prompts before refusing")

    monkeypatch.setattr(runs.pipeline, "_estimate", rendering)
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    refused = CliRunner().invoke(app, ["run", str(spec), "--out", str(run)])
    assert refused.exit_code == 2 and "is damaged: not what was written" in refused.output


def test_a_plan_another_run_is_committing_is_said_busy_not_damaged(
    finished: Path, tmp_path: Path
) -> None:
    """The plan's files are checked before the folder is locked: a resume racing a run that
    was committing its plan read "damaged" where the folder was only busy."""
    from engine.runlock import acquire_lock, release_lock, write_pid

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    _zero_bytes(run / "plan.parquet")  # as half committed, to the checksums' eyes
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    fd = acquire_lock(run, run)  # the other run, as far as this one can tell
    write_pid(run)
    try:
        busy = CliRunner().invoke(app, ["run", str(spec), "--out", str(run)])
    finally:
        release_lock(fd)
        (run / "run.pid").unlink()
    assert busy.exit_code == 5, busy.output
    assert "damaged" not in busy.output
    refused = CliRunner().invoke(app, ["run", str(spec), "--out", str(run)])  # no writer now
    assert refused.exit_code == 2 and "is damaged" in refused.output, refused.output
    # A pid file naming a live process is no writer without the lock (a copy of a live
    # run's folder): the folder commands still refuse its damaged plan.
    write_pid(run)
    try:
        for command in ("status", "score", "report"):
            said = CliRunner().invoke(app, [command, str(run)])
            assert said.exit_code == 2 and "is damaged" in said.output, (command, said.output)
    finally:
        (run / "run.pid").unlink()
