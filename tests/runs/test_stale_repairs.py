"""`repaired.parquet` of answers the folder no longer holds is said, with the repair to run
again (`runs.scored_from.stale_repairs`).

A tester repaired a lenient run, reparsed it strict and scored it: every command exited 0,
and `repaired.parquet` still held 39 repaired sets of answers strict had rejected.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.scored_from import REPAIRED_FROM
from tests.runs.run_folders import FinishedRuns

#: Answers in fractions: lenient takes them, strict rejects them.
FRACTIONS_SPEC = """
name = "fractions"
seed = 5
parser = "lenient"
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-fraction"
[[arms]]
name = "baseline"
"""
STALE = "repaired.parquet was computed from answers the folder no longer holds"


@pytest.fixture
def repaired(finished_runs: FinishedRuns, tmp_path: Path) -> Path:
    """The lenient run of answers in fractions, repaired: the test's own copy of the
    session's run of it (`tests/runs/conftest.py`), repaired here (a fraction of a second)."""
    run = finished_runs.finish(tmp_path, FRACTIONS_SPEC)
    done = CliRunner().invoke(app, ["repair", str(run)])
    assert done.exit_code == 0, done.output
    return run


def _warnings(run: Path) -> list[str]:
    said = CliRunner().invoke(app, ["status", str(run), "--json"])
    assert said.exit_code == 0, said.output
    return list(orjson.loads(said.stdout)["warnings"])


def test_repairs_of_answers_a_reparse_changed_are_said_until_repaired_again(
    repaired: Path,
) -> None:
    run = repaired
    assert (run / REPAIRED_FROM).is_file() and not any(STALE in w for w in _warnings(run))
    strict = CliRunner().invoke(app, ["reparse", str(run), "--parser", "strict"])
    assert strict.exit_code == 0, strict.output
    said = strict.output.replace("\n", "")
    assert STALE in said and f"`dutchbook repair {run}` writes it again" in said
    assert any(STALE in w for w in _warnings(run))
    scored = CliRunner().invoke(app, ["score", str(run)])
    assert scored.exit_code == 0 and STALE in scored.stderr.replace("\n", ""), scored.output
    report = CliRunner().invoke(app, ["report", str(run)])
    assert report.exit_code == 0 and STALE in report.output.replace("\n", ""), report.output
    again = CliRunner().invoke(app, ["repair", str(run)])
    assert again.exit_code == 0, again.output
    assert not any(STALE in w for w in _warnings(run))


def test_a_reparse_that_changes_no_answer_leaves_the_repairs_current(
    repaired: Path,
) -> None:
    """It writes the same answers into a new shard: the repairs are still of them."""
    run = repaired
    same = CliRunner().invoke(app, ["reparse", str(run), "--parser", "lenient"])
    assert same.exit_code == 0, same.output
    assert STALE not in same.output.replace("\n", "")
    assert not any(STALE in w for w in _warnings(run))


def test_a_reparse_back_to_the_repaired_answers_makes_the_repairs_current_again(
    repaired: Path,
) -> None:
    """Strict, then lenient again: the answers are those repaired (in a new shard), as the
    reparse said of the scores in the same output, and then warned the repairs were not."""
    run = repaired
    strict = CliRunner().invoke(app, ["reparse", str(run), "--parser", "strict"])
    assert strict.exit_code == 0 and STALE in strict.output.replace("\n", ""), strict.output
    back = CliRunner().invoke(app, ["reparse", str(run), "--parser", "lenient"])
    assert back.exit_code == 0, back.output
    assert "again those the scores were computed from" in back.output.replace("\n", "")
    assert STALE not in back.output.replace("\n", "")
    assert not any(STALE in w for w in _warnings(run))


def test_a_repair_killed_as_it_writes_leaves_the_old_repairs_said_stale(
    repaired: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record was removed before the new file was written: a kill between the two left
    the old repairs with no record, and after a reparse nothing said they were stale."""
    from runs import scoring_step

    run = repaired
    strict = CliRunner().invoke(app, ["reparse", str(run), "--parser", "strict"])
    assert strict.exit_code == 0, strict.output

    def killed(self: object, target: Path) -> None:
        raise KeyboardInterrupt  # stands for the kill, as the new file is being put in place

    monkeypatch.setattr(scoring_step.PartFiles, "commit", killed)
    CliRunner().invoke(app, ["repair", str(run)])
    monkeypatch.undo()
    assert (run / REPAIRED_FROM).is_file()
    assert any(STALE in w for w in _warnings(run))


def test_a_damaged_record_of_the_repairs_is_said(repaired: Path) -> None:
    """Read as no record (a folder repaired before records), it silenced the warning."""
    run = repaired
    (run / REPAIRED_FROM).write_text("{garbage", encoding="utf-8")
    assert (
        f"{run / REPAIRED_FROM} is damaged, so {run / 'repaired.parquet'} cannot be matched to "
        f"the answers: `dutchbook repair {run}` writes both again"
    ) in _warnings(run)
