"""Answers and attempts of requests the plan does not hold are no answers of the run.

Found by a tester: a responses shard whose request id bytes were flipped read "accepted
76/76" in `status` (one answer matched no planned request, its own request's answer was
missing), with two warnings blaming `attempts/`; `dutchbook reparse` then kept the stray
answer ("accepted 77/76"), and the resume advised planning again, a dead end. A shard of
another run copied in read "accepted 136/76 (178.9%)", and a journal line written by hand
counted its answer, without a word. Each is now counted apart, said in one line naming
its files, and left out by a reparse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from engine.audit import unplanned_rows_line
from engine.scan import Unplanned, scan_responses
from runs.audit import run_audit
from tests.runs.quiet_campaign import (
    campaign_fixtures,
    invoke,
    retried_spec,
    scoring_commands,
)

SPEC = retried_spec("unplanned", 11)
NOT_HELD = "plan.parquet does not hold"


finished, run_dir = campaign_fixtures("unplanned", SPEC)


def _status(run_dir: Path) -> dict[str, Any]:
    code, said = invoke("status", str(run_dir), "--json")
    assert code == 0, said
    summary: dict[str, Any] = json.loads(said)
    return summary


def _said_once(run_dir: Path, start: str) -> str:
    """The one warning of `status` and the one note of `audit` saying `start`, the same."""
    warnings = [w for w in _status(run_dir)["warnings"] if NOT_HELD in w]
    notes = [n for n in run_audit(run_dir).notes() if NOT_HELD in n]
    assert len(warnings) == 1 and warnings[0].startswith(start), warnings
    assert notes == [f"{warnings[0]}."]
    return str(warnings[0])


def _copy_of_another_run(run_dir: Path) -> Path:
    """A shard of answers to requests the plan does not hold, as another run's copied in."""
    (shard,) = (run_dir / "responses").glob("*.parquet")
    foreign = run_dir / "responses" / "part-00000099.parquet"
    other = (pl.lit("other-") + pl.col("request_id")).alias("request_id")
    pl.read_parquet(shard).with_columns(other).write_parquet(foreign)
    return foreign


def test_a_reparse_leaves_out_the_answers_of_requests_the_plan_does_not_hold(
    finished: Path, run_dir: Path
) -> None:
    """It rebuilt them from their own rows and kept them ("accepted 76 -> 77", then 77/76)."""
    held = pl.read_parquet(_copy_of_another_run(run_dir)).height
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient", "--json")
    assert code == 0, said
    summary = json.loads(said)
    answered = scan_responses(finished, ["request_id"]).collect().height
    # Counted once, as left out: not also as requests skipped for want of a plan row.
    assert (summary["unplanned_left_out"], summary["skipped_without_keys"]) == (held, 0)
    assert (summary["accepted_before"], summary["accepted_after"]) == (answered, answered)
    assert summary["newly_rejected"] == 0
    planned = pl.read_parquet(run_dir / "plan.parquet", columns=["request_id"])
    ids = scan_responses(run_dir, ["request_id"]).collect()
    assert ids.height == answered and ids.join(planned, on="request_id", how="anti").is_empty()
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0 and "left out of responses/" not in said, said  # said when there were


def test_an_answer_whose_id_was_damaged_is_not_counted_and_a_reparse_mends_it(
    finished: Path, run_dir: Path
) -> None:
    """Its request's answer is the one missing; the answer itself, of no planned request, is
    said once (not an answer "with no attempt in attempts/"), and not counted."""
    before = _status(finished)
    (shard,) = (run_dir / "responses").glob("*.parquet")
    answers = pl.read_parquet(shard)
    damaged = answers["request_id"][3]
    flipped = damaged[:-1] + ("0" if damaged[-1] != "0" else "1")
    answers.with_columns(pl.col("request_id").replace(damaged, flipped)).write_parquet(shard)
    summary = _status(run_dir)
    planned = before["planned"]
    assert (summary["accepted"], summary["answers_unplanned"]) == (planned - 1, 1)
    assert (summary["answers_missing"], summary["answers_unrecorded"]) == (1, 0)
    audited = run_audit(run_dir)
    assert (audited.totals.accepted, audited.to_dict()["answers_unplanned"]) == (planned - 1, 1)
    line = _said_once(run_dir, f"1 answer in responses/ is for a request {NOT_HELD}")
    assert f"(in responses/{shard.name}:" in line
    assert f"`dutchbook reparse {run_dir} --parser lenient`" in line
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0, said
    assert "1 answer of requests plan.parquet does not hold" in said, said
    assert "skipped" not in said, said
    mended = _status(run_dir)
    assert (mended["accepted"], mended["answers_unplanned"], mended["answers_missing"]) == (
        planned, 0, 0,
    )
    assert (mended["attempts"], mended["retries"]) == (before["attempts"], before["retries"])
    assert not [w for w in mended["warnings"] if "responses/" in w], mended["warnings"]


def test_another_runs_shard_is_not_counted(finished: Path, run_dir: Path) -> None:
    held = pl.read_parquet(_copy_of_another_run(run_dir)).height
    before, summary = _status(finished), _status(run_dir)
    assert summary["accepted"] == before["accepted"] == before["planned"]  # not twice
    assert summary["models"] == before["models"]
    assert (summary["answers_unplanned"], summary["answers_repeated"]) == (held, 0)
    assert run_audit(run_dir).totals == run_audit(finished).totals
    line = _said_once(run_dir, f"{held} answers in responses/ are for requests {NOT_HELD}")
    assert "(in responses/part-00000099.parquet:" in line
    # Not also "scores.parquet ... out of date": it sent its user to `score`, which refuses.
    assert not [w for w in summary["warnings"] if "out of date" in w], summary["warnings"]


def test_a_journal_result_line_of_an_unknown_request_is_said_and_moved_out_whole(
    finished: Path, run_dir: Path
) -> None:
    """A result line written by hand into the journal counted its answer ("accepted 14/76"),
    without a word. Its answer and attempt are said; a reparse folds its attempt into a
    shard of its own and leaves its answer out (its `ok` attempt then no answer lost), and
    that shard, holding nothing else, is the one to move out: the folder is as it was."""
    (attempts,) = (run_dir / "attempts").glob("*.parquet")
    (responses,) = (run_dir / "responses").glob("*.parquet")
    attempt = pl.read_parquet(attempts).filter(pl.col("outcome") == "ok").head(1).to_dicts()[0]
    answer = pl.read_parquet(responses).filter(
        pl.col("request_id") == attempt["request_id"]
    ).to_dicts()[0]
    attempt["request_id"] = answer["request_id"] = "written-by-hand"
    attempt["started_at"] = attempt["started_at"].isoformat()
    answer["accepted_at"] = answer["accepted_at"].isoformat()
    segment = run_dir / "journal" / "seg-00000099.jsonl"
    segment.write_bytes(
        orjson.dumps({"kind": "result", "attempt": attempt, "response": answer}) + b"\n"
    )
    before = _status(finished)
    summary = _status(run_dir)
    assert (summary["accepted"], summary["attempts"]) == (before["accepted"], before["attempts"])
    assert (summary["answers_unplanned"], summary["attempts_unplanned"]) == (1, 1)
    line = _said_once(
        run_dir,
        f"1 answer in the journal and 1 attempt in the journal are for requests {NOT_HELD}",
    )
    assert "(in journal/seg-00000099.jsonl:" in line
    assert invoke("reparse", str(run_dir), "--parser", "lenient")[0] == 0
    summary = _status(run_dir)
    assert (summary["answers_unplanned"], summary["attempts_unplanned"]) == (0, 1)
    assert (summary["accepted"], summary["answers_missing"]) == (before["accepted"], 0)
    (folded,) = [p for p in (run_dir / "attempts").glob("*.parquet") if p != attempts]
    line = _said_once(run_dir, f"1 attempt in attempts/ is for a request {NOT_HELD}")
    assert f"move attempts/{folded.name} out of the folder" in line
    folded.unlink()
    assert not [w for w in _status(run_dir)["warnings"] if NOT_HELD in w]


def test_another_runs_answers_are_refused_by_what_scores_and_a_reparse_mends_it(
    finished: Path, run_dir: Path
) -> None:
    """`score`, `repair`, `report` and a resume refuse in the line `status` warns with,
    naming the reparse that leaves them out, never a plan to make again (the plan's
    checksums vouch for it: the resume said "remove plan_members.parquet and plan.parquet",
    and the plan made again was removed again). After the reparse the resume asks nothing
    and the scores are the run's."""
    held = pl.read_parquet(foreign := _copy_of_another_run(run_dir)).height
    before = _status(finished)
    spec = finished.parent / "unplanned.toml"
    kept = (run_dir / "scores.parquet").read_bytes()
    for args, then in scoring_commands(run_dir, spec):
        code, said = invoke(*args)
        assert (code, said) == (
            2,
            f"error: {run_dir}: {held} answers in responses/ are for requests {NOT_HELD} (in "
            f"responses/{foreign.name}: a shard of another run copied in, a request id damaged "
            "on disk, or a line written by hand), and scoring would read them as this run's; "
            f"`dutchbook reparse {run_dir} --parser lenient` rebuilds responses/ from the "
            f"plan's requests alone, without them, then {then}\n",
        )
    assert (run_dir / "scores.parquet").read_bytes() == kept
    assert not (run_dir / "repaired.parquet").exists()
    assert _status(run_dir)["attempts"] == before["attempts"]  # the resume asked nothing
    assert invoke("reparse", str(run_dir), "--parser", "lenient")[0] == 0
    code, said = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 0, said
    assert _status(run_dir)["attempts"] == before["attempts"]
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    assert forecasts.equals(pl.read_parquet(finished / "forecasts.parquet"))


def test_unplanned_rows_are_said_where_they_are() -> None:
    """Answers in a journal segment and a shard both are said to be in either, where the
    line said "in responses/" of answers a journal line held."""
    seg, part = "journal/seg-00000007.jsonl", "responses/part-00000003.parquet"
    both = Unplanned(answers=3, answer_files=(seg, part))
    line = unplanned_rows_line(both, "out", "lenient")
    assert line is not None
    assert line.startswith(f"3 answers in responses/ or the journal are for requests {NOT_HELD}")
