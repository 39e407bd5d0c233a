"""`status` says when the scores and the report are of answers the folder no longer holds.

A reparse (or a run killed before it scored) left the last `scores.parquet` and `report/`
standing: neither `status` nor `audit` said they were out of date; only `report` refused.
And once `score` had run, `report/` still showed the old scores with nothing to say so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from engine.durable import append_record_line_durably
from engine.reparse import REPARSES_FILE
from runs.cli import app
from runs.commands.status import REPARSE_UNFINISHED
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents


def _warnings(run_dir: Path) -> list[str]:
    shown = CliRunner().invoke(app, ["status", str(run_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    return list(orjson.loads(shown.stdout)["warnings"])


def _header(run_dir: Path) -> tuple[str, dict[str, object]]:
    """The human view's first line, and `--json`'s `state`, `outputs_gap`, `scored` and
    `reported`."""
    shown = CliRunner().invoke(app, ["status", str(run_dir)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    summary = orjson.loads(CliRunner().invoke(app, ["status", str(run_dir), "--json"]).stdout)
    keys = ("state", "outputs_gap", "scored", "reported")
    return shown.stdout.splitlines()[0], {key: summary[key] for key in keys}


def _ran(finished_runs: FinishedRuns, tmp_path: Path, model: str) -> Path:
    """A strict run of `model` (a simulator's) on two stock-days, one answer failure allowed
    (a copy of the session's run of it: these tests are of what the folder says after)."""
    spec = SMALL_SPEC.replace('model = "sim-coherent"', f'model = "{model}"')
    return finished_runs.run(tmp_path, 'parser = "strict"\nmax_answer_failures = 1\n' + spec)[0]


def test_a_reparse_leaves_scores_then_report_out_of_date_until_each_is_written(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    run_dir = _ran(finished_runs, tmp_path, "sim-fraction")
    assert _warnings(run_dir) == []
    reparsed = CliRunner().invoke(app, ["reparse", str(run_dir), "--parser", "lenient"])
    assert reparsed.exit_code == 0, reparsed.output
    assert _warnings(run_dir) == [
        f"scores.parquet and report/ are out of date ({run_dir}: its answers changed after it "
        "was scored (a `dutchbook reparse`, or a resumed run that did not finish)): `dutchbook "
        f"score {run_dir}`, then `dutchbook report {run_dir}`, write them again"
    ]
    assert _header(run_dir)[0] == f"{run_dir}: answered, scores out of date"
    scored = CliRunner().invoke(app, ["score", str(run_dir)])
    assert scored.exit_code == 0, scored.output
    assert _warnings(run_dir) == [
        f"report/ is out of date ({run_dir}: its scores changed after it was written): "
        f"`dutchbook report {run_dir}` writes it again"
    ]
    assert _header(run_dir)[0] == f"{run_dir}: answered, report out of date"
    reported = CliRunner().invoke(app, ["report", str(run_dir)])
    assert reported.exit_code == 0, reported.output
    assert _warnings(run_dir) == []
    again = CliRunner().invoke(app, ["score", str(run_dir)])  # the same answers, the same bytes
    assert again.exit_code == 0, again.output
    assert _warnings(run_dir) == []


@pytest.mark.parametrize("ended", ["finished", "died"])
def test_a_finished_folder_never_scored_says_so(
    finished_runs: FinishedRuns, tmp_path: Path, ended: str
) -> None:
    """A run whose disk filled once its dispatch was done (exit 6) left every answer and no
    scores: `status` said "finished", nothing more, and only `report` refused the folder. So
    did one killed then (SIGKILL: "died", a tester's), where a run stopped there by a signal
    was said to be unscored."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    for name in ("scores.parquet", "forecasts.parquet", "averaged.parquet", "scored-from.json"):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "report")
    if ended == "died":  # the pid file of a process that is gone
        (run_dir / "run.pid").write_bytes(orjson.dumps({"pid": 2**22 + 7, "create_time": 1.0}))
    shown = CliRunner().invoke(app, ["status", str(run_dir), "--json"])
    assert orjson.loads(shown.stdout)["state"] == ended
    assert _warnings(run_dir) == [
        f"not scored yet ({run_dir} has no scores.parquet): `dutchbook score {run_dir}`, then "
        f"`dutchbook report {run_dir}`, write the scores and the report"
    ]
    for command in ("score", "report"):
        assert CliRunner().invoke(app, [command, str(run_dir)]).exit_code == 0
    assert _warnings(run_dir) == []


def test_a_report_naming_a_reparse_unfinished_that_finished_since_is_out_of_date(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """Written while a reparse was unfinished, the report says "answers read by an unknown
    parser: ... did not finish; run it again"; that reparse run again, the answers and so the
    scores were the same, and nothing said the report still said so."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    reparsed = CliRunner().invoke(app, ["reparse", str(run_dir), "--parser", "lenient"])
    assert reparsed.exit_code == 0, reparsed.output
    for command in ("score", "report"):
        assert CliRunner().invoke(app, [command, str(run_dir)]).exit_code == 0
    assert _warnings(run_dir) == []
    summary_path = run_dir / "report" / "summary.json"
    summary = orjson.loads(summary_path.read_bytes())
    at = summary["provenance"]["parser_from"].removeprefix("dutchbook reparse at ")
    summary["provenance"].update(  # as the report written before that reparse finished said
        parser="unknown",
        parser_from=f"dutchbook reparse at {at} to lenient did not finish; run it again",
    )
    summary_path.write_bytes(orjson.dumps(summary))
    assert _warnings(run_dir) == [
        f"report/ is out of date ({run_dir}: it says answers read by an unknown parser: "
        f"dutchbook reparse at {at} to lenient did not finish; run it again, where now answers "
        f"read by the lenient parser (dutchbook reparse at {at})): `dutchbook report {run_dir}` "
        "writes it again"
    ]
    assert CliRunner().invoke(app, ["report", str(run_dir)]).exit_code == 0
    assert _warnings(run_dir) == []


def test_scores_with_no_report_are_said_with_the_command_that_writes_it(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """A run stopped while it wrote its report (a stop there leaves none: it is moved in
    whole), or `score` run by hand, read "finished" with no word of a report never written."""
    import shutil

    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    shutil.rmtree(run_dir / "report")
    assert _warnings(run_dir) == [
        f"no report of these scores yet ({run_dir / 'report'} is not written): `dutchbook "
        f"report {run_dir}` writes it"
    ]
    assert CliRunner().invoke(app, ["report", str(run_dir)]).exit_code == 0
    assert _warnings(run_dir) == []


@pytest.mark.parametrize(
    ("removed", "said", "scored"),
    [
        (("scores.parquet", "report"), "answered, not scored", False),
        (("report",), "answered, report not written", True),
        ((), "finished", True),
    ],
)
def test_the_header_of_a_folder_answered_and_not_scored_or_reported_says_so(
    finished_runs: FinishedRuns, tmp_path: Path, removed: tuple[str, ...], said: str, scored: bool
) -> None:
    """A run stopped (SIGTERM, a full disk) while it scored or wrote its report read
    "<folder>: finished" and then "warning: not scored yet": the header said the whole run
    was done. `--json` keeps the state (its vocabulary is documented) and adds the gap."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    for name in removed:
        shutil.rmtree(run_dir / name) if name == "report" else (run_dir / name).unlink()
    gap = None if said == "finished" else said.removeprefix("answered, ")
    assert _header(run_dir) == (
        f"{run_dir}: {said}",
        {"state": "finished", "outputs_gap": gap, "scored": scored, "reported": not removed},
    )


def test_a_damaged_scores_file_is_said_damaged_not_changed(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """Hashed, a truncated scores.parquet read as scores changed since the report, and
    `status` sent its user to `report`, which then failed on the same file."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    scores = run_dir / "scores.parquet"
    scores.write_bytes(scores.read_bytes()[:200])
    assert _warnings(run_dir) == [
        f"{scores} is damaged (its footer does not read): `dutchbook score {run_dir}` writes "
        f"it again, then `dutchbook report {run_dir}`"
    ]


def test_a_report_whose_summary_is_lost_is_said_unmatched(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """With its summary.json damaged or gone, a report could not be compared with the
    scores, and `status` said nothing of it however stale it was."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    summary = run_dir / "report" / "summary.json"
    summary.write_bytes(b"\x00garbage")
    said = (
        f"report/ cannot be matched to the scores ({run_dir}: its summary.json %s): "
        f"`dutchbook report {run_dir}` writes it again"
    )
    assert _warnings(run_dir) == [said % "does not read"]
    summary.unlink()
    assert _warnings(run_dir) == [said % "is missing"]
    reported = CliRunner().invoke(app, ["report", str(run_dir)])
    assert reported.exit_code == 0, reported.output
    assert _warnings(run_dir) == []


def test_a_lost_plan_is_said_with_what_makes_it_again(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """Its plan deleted, a finished run read "stopped", with no planned counts and no word
    why; the audit and the report counted only the requests found asked."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    (run_dir / "plan.parquet").unlink()
    lost = (
        f"{run_dir / 'plan.parquet'} is missing, so what the run planned is not counted: resume "
        f"with `dutchbook run SPEC --out {run_dir}` (the spec the folder was run with), which "
        "plans it again from the folder's frozen spec and files, to the same request ids, so "
        "nothing answered is asked again"
    )
    assert lost in _warnings(run_dir)
    audited = CliRunner().invoke(app, ["audit", str(run_dir), "--json"])
    assert audited.exit_code == 0 and f"warning: {lost}" in audited.stderr, audited.output
    assert orjson.loads(audited.stdout)["warnings"] == [lost]  # one object, the warning in it
    reported = CliRunner().invoke(app, ["report", str(run_dir)])
    assert reported.exit_code == 2 and f"error: {lost}" in reported.output, reported.output
    resumed = CliRunner().invoke(app, ["run", str(run_dir / "spec.toml"), "--out", str(run_dir)])
    assert resumed.exit_code == 0, resumed.output
    assert (run_dir / "plan.parquet").is_file() and _warnings(run_dir) == []


def test_lost_plan_members_are_said_with_the_mend_and_refused_before_a_resume_plans(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """`plan_members.parquet` removed, `plan.parquet` left: `status` and `audit` said nothing,
    a resume asked what it had left, then ended "No such file or directory", exit 2, on every
    rerun, and `score` called it "not a planned run folder"; the mend (remove the plan too,
    then resume) was never said."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    (run_dir / "plan_members.parquet").unlink()
    lost = (
        f"{run_dir / 'plan_members.parquet'} is missing while {run_dir / 'plan.parquet'} is "
        f"there, and every reader of the plan needs both: remove {run_dir / 'plan.parquet'} "
        f"too, then resume with `dutchbook run SPEC --out {run_dir}` (the spec the folder was "
        "run with), which plans both again from the folder's frozen spec and files, to the "
        "same request ids, so nothing answered is asked again"
    )
    assert lost in _warnings(run_dir)
    audited = CliRunner().invoke(app, ["audit", str(run_dir)])
    assert audited.exit_code == 0 and f"warning: {lost}" in audited.stderr, audited.output
    before = folder_contents(run_dir)
    spec = str(run_dir / "spec.toml")
    for args in (["run", spec, "--out", str(run_dir)], ["score", str(run_dir)]):
        refused = CliRunner().invoke(app, args)
        assert refused.exit_code == 2, refused.output
        assert refused.output.replace("\n", "") == f"error: {lost}", refused.output
    assert folder_contents(run_dir) == before  # nothing planned, sent or scored
    (run_dir / "plan.parquet").unlink()  # the mend said
    resumed = CliRunner().invoke(app, ["run", spec, "--out", str(run_dir)])
    assert resumed.exit_code == 0, resumed.output
    assert (run_dir / "plan_members.parquet").is_file() and _warnings(run_dir) == []


def test_answers_lost_from_responses_send_to_the_reparse_alone(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """With responses/ gone, a second warning sent the user to `score`, which refuses until
    the reparse the first names has rebuilt the answers."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    for shard in (run_dir / "responses").glob("*.parquet"):
        shard.unlink()
    warnings = _warnings(run_dir)
    assert len(warnings) == 1 and "`dutchbook reparse" in warnings[0], warnings
    assert "dutchbook score" not in warnings[0], warnings


def test_a_reparse_unfinished_leaves_scored_and_reported_uncompared(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """A reparse killed after its begun line: `--json` said `scored: true, reported: true`
    and the header "finished", where the answers are the old parser's or the new one's and
    the scores cannot be said of either; the reparse's own line says to run it again."""
    run_dir = _ran(finished_runs, tmp_path, "sim-coherent")
    append_record_line_durably(run_dir / REPARSES_FILE, {
        "at": "2026-01-01T00:00:00+00:00", "parser": "lenient", "begun": True,
        "accepted_before": 1, "accepted_after": 1,
    })  # fmt: skip
    assert _header(run_dir) == (
        f"{run_dir}: answered, {REPARSE_UNFINISHED}",
        {"state": "finished", "outputs_gap": REPARSE_UNFINISHED, "scored": None,
         "reported": None},
    )  # fmt: skip
    assert any("did not finish" in line for line in _warnings(run_dir))
