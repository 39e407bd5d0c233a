"""A report is never drawn from scores of answers that have changed since (`runs.scored_from`).

Found by a hostile run: `dutchbook reparse --parser lenient` accepted a model's 28 answers,
and a `dutchbook report` before `dutchbook score` showed that model with coverage 100% beside
"no answers" in one leaderboard row.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

from runs.cli import app
from runs.commands.status import SCORES_STALE
from runs.scored_from import SCORED_FROM
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns

#: A model whose fractions ("11/36") the strict parser rejects and the lenient one accepts.
SPEC = """
name = "fractions"
seed = 1
parser = "strict"
[data]
stock_days = 2
[[models]]
name = "fractions"
provider = "sim"
model = "sim-fraction"
[[arms]]
name = "baseline"
"""


def test_a_report_after_a_reparse_waits_for_the_scores(tmp_path: Path) -> None:
    runner = CliRunner()
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    ran = runner.invoke(app, ["run", str(spec), "--out", str(out)])
    assert ran.exit_code == 4, ran.output  # every answer rejected: incomplete
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0  # scores match answers

    reparsed = runner.invoke(app, ["reparse", str(out), "--parser", "lenient"])
    assert reparsed.exit_code == 0, reparsed.output
    assert "accepted 0 → 28" in reparsed.output
    assert f"run `dutchbook score {out}`, then `dutchbook report {out}`" in reparsed.output

    stale = runner.invoke(app, ["report", str(out)])
    assert stale.exit_code == 2
    assert "its answers changed after it was scored" in stale.output
    assert f"run `dutchbook score {out}` first" in stale.output

    assert runner.invoke(app, ["score", str(out)]).exit_code == 0
    fresh = runner.invoke(app, ["report", str(out)])
    assert fresh.exit_code == 0, fresh.output
    row = (out / "report" / "leaderboard.csv").read_text().splitlines()[1].split(",")
    assert row[:5] == ["fractions", "baseline", "inf", "scored", "1.0"]


def test_a_folder_scored_before_the_record_is_reported_as_before(tmp_path: Path) -> None:
    runner = CliRunner()
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('"strict"', '"lenient"'), encoding="utf-8")
    out = tmp_path / "run"
    assert runner.invoke(app, ["run", str(spec), "--out", str(out)]).exit_code == 0
    (out / SCORED_FROM).unlink()
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0


def test_a_reparse_that_changes_no_answer_leaves_the_scores_standing(tmp_path: Path) -> None:
    """A re-parse writes the answers into a new shard even when none changed: its scores
    still hold, and the report is not refused for it."""
    runner = CliRunner()
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('"strict"', '"lenient"'), encoding="utf-8")
    out = tmp_path / "run"
    assert runner.invoke(app, ["run", str(spec), "--out", str(out)]).exit_code == 0
    before = (out / SCORED_FROM).read_text()
    reparsed = runner.invoke(app, ["reparse", str(out), "--parser", "lenient"])
    assert reparsed.exit_code == 0 and "unchanged 28" in reparsed.output, reparsed.output
    assert "dutchbook score" not in reparsed.output
    assert (out / SCORED_FROM).read_text() != before  # the new shard, recorded
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0


def test_a_record_edited_by_hand_with_a_list_for_a_shard_name_is_passed_over() -> None:
    """A record's response entry whose name is a list (a hand edit) raised TypeError
    (unhashable type: 'list') from the gone-answers guard; like a name that is no shard's, it
    is passed over, and the entries beside it are read."""
    from runs.scored_from import _named_shards

    named, sizes = _named_shards({"responses": [[["x"], 5], ["part-00000000.parquet", 7]]})
    assert named == {"part-00000000.parquet": 0}
    assert sizes == {"part-00000000.parquet": 7}


def test_status_and_score_of_a_record_with_a_list_for_a_shard_name_end_normally(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """The same hand edit, through the commands: `status` and `score` of a finished folder
    ended in a traceback (TypeError: unhashable type: 'list'). `status` now reads the record
    as one naming a shard the folder does not hold (its scores out of date, as for any name
    that is no shard's), and `score` writes the scores and the record again."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    record = orjson.loads((out / SCORED_FROM).read_bytes())
    record["responses"] = [[["x"], 5], *record["responses"]]
    (out / SCORED_FROM).write_bytes(orjson.dumps(record))
    runner = CliRunner()
    said = runner.invoke(app, ["status", str(out), "--json"])
    assert said.exit_code == 0 and said.exception is None, said.output
    summary = orjson.loads(said.output)
    assert summary["state"] == "finished" and summary["outputs_gap"] == SCORES_STALE, summary
    scored = runner.invoke(app, ["score", str(out)])
    assert scored.exit_code == 0 and scored.exception is None, scored.output
    assert "Traceback" not in said.output + scored.output
    again = orjson.loads(runner.invoke(app, ["status", str(out), "--json"]).output)
    assert again["scored"] is True and again["outputs_gap"] is None, again
