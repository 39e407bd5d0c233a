"""A shard present twice in a run folder is counted once by `status` and the audit, and said.

Found by a tester: a responses shard moved aside, `dutchbook reparse`, the old shard put
back: `status` said "accepted 56/28 (200%)" and the audit doubled every retry. A copied
attempts shard doubled the attempts the same way. The scores read one copy of each answer,
the older: `score`, `repair`, `report` and a resume now refuse such a folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl

from engine.scan import Repeats, repeated_rows
from runs.audit import run_audit
from tests.runs.quiet_campaign import (
    campaign_fixtures,
    invoke,
    retried_spec,
    scoring_commands,
)

SPEC = retried_spec("repeated", 9)


finished, run_dir = campaign_fixtures("repeated", SPEC)


def _counts(run_dir: Path) -> tuple[int, int, int, int]:
    summary = json.loads(invoke("status", str(run_dir), "--json")[1])
    return (summary["planned"], summary["accepted"], summary["attempts"], summary["retries"])


def test_a_responses_shard_put_back_after_a_reparse_counts_once(
    finished: Path, run_dir: Path, tmp_path: Path
) -> None:
    before, audited = _counts(finished), run_audit(finished).totals
    assert before[0] == before[1] == 28 and before[3] > 0  # finished, with retries
    assert repeated_rows(finished) == Repeats()
    (old,) = (run_dir / "responses").glob("*.parquet")
    aside = tmp_path / old.name
    old.rename(aside)
    assert invoke("reparse", str(run_dir), "--parser", "lenient")[0] == 0
    aside.rename(old)  # put back beside the shard the reparse wrote
    assert len(list((run_dir / "responses").glob("*.parquet"))) == 2
    assert _counts(run_dir) == before  # not 56/28 and twice the retries
    found = run_audit(run_dir)
    assert found.totals == audited and found.sentence == run_audit(finished).sentence
    assert found.repeats.answers == 28 and found.repeats.attempts == 0
    code, said = invoke("status", str(run_dir))
    assert code == 0 and "28/28 (100%)" in said, said
    for command in ("status", "audit"):
        lines = [line for line in invoke(command, str(run_dir))[1].splitlines()
                 if "copies of ones already there" in line]  # fmt: skip
        assert len(lines) == 1 and lines[0].removeprefix("warning: ").startswith(
            "28 answers in responses/ are copies"
        ), lines
        assert old.name in lines[0]


def test_a_copied_attempts_shard_counts_once(finished: Path, run_dir: Path) -> None:
    (shard,) = (run_dir / "attempts").glob("*.parquet")
    shutil.copy(shard, shard.with_name("part-99999999.parquet"))
    assert _counts(run_dir) == _counts(finished)
    assert run_audit(run_dir).totals == run_audit(finished).totals
    summary = json.loads(invoke("status", str(run_dir), "--json")[1])
    attempts = summary["attempts"]
    assert summary["attempts_repeated"] == attempts and summary["answers_repeated"] == 0
    assert any(f"{attempts} attempts in attempts/ are copies" in w for w in summary["warnings"])


def test_answers_held_twice_are_refused_by_every_command_that_scores(
    finished: Path, run_dir: Path, tmp_path: Path
) -> None:
    """Scoring read the copy in the lowest-numbered shard, the old one put back after a
    reparse: `score`, `repair` and `report` scored its values, exit 0, where the reparse had
    replaced them. Each now refuses in the line `status` warns with, naming the shards, and
    leaves its files; a resume, which ends by scoring, refuses before it asks anything."""
    (old,) = (run_dir / "responses").glob("*.parquet")
    aside = tmp_path / old.name
    old.rename(aside)
    assert invoke("reparse", str(run_dir), "--parser", "lenient")[0] == 0
    (new,) = (run_dir / "responses").glob("*.parquet")
    # Put back with other values: the answers as they were before a reparse that changed them.
    stale = pl.read_parquet(aside)
    stale.with_columns(pl.col("values").list.eval(pl.element() * 0 + 0.5)).write_parquet(old)
    copies = (
        f"28 answers in responses/ are copies of ones already there (in responses/{old.name} "
        f"and responses/{new.name}: a shard copied, or one put back after a reparse)"
    )
    warnings = json.loads(invoke("status", str(run_dir), "--json")[1])["warnings"]
    assert [w for w in warnings if w.startswith(copies)], warnings  # the same words
    outputs = ["scores.parquet", "forecasts.parquet", "averaged.parquet", "report/summary.json"]
    kept = {name: (run_dir / name).read_bytes() for name in outputs}
    attempts = invoke("status", str(run_dir), "--json")[1]
    spec = finished.parent / "repeated.toml"
    for args, then in scoring_commands(run_dir, spec):
        code, said = invoke(*args)
        assert (code, said) == (
            2,
            f"error: {run_dir}: {copies}, and which copy of each would be read is not known; "
            f"move each shard that does not belong out of the folder, then {then}\n",
        )
    assert {name: (run_dir / name).read_bytes() for name in outputs} == kept
    assert not (run_dir / "repaired.parquet").exists()
    assert invoke("status", str(run_dir), "--json")[1] == attempts  # the resume sent nothing
    old.unlink()  # the shard that does not belong taken out: scored from the reparse's
    assert invoke("score", str(run_dir))[0] == 0
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    assert forecasts.equals(pl.read_parquet(finished / "forecasts.parquet"))
