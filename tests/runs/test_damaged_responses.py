"""A damaged answers file (`responses/part-*.parquet`) is named first, with the remedy that
works: move it aside and `dutchbook reparse`, which rebuilds the answers without a call.

Found by a hostile tester: with the responses shard truncated, `report` said the answers
"changed after it was scored ... run `dutchbook score` first" (its size had changed), and
`score` then named the damaged file with "no command writes it again: restore it from a
copy, or run the spec into a new folder", that is, pay for every answer again, though every
reply was kept in `attempts/`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from runs.audit import run_audit
from tests.runs.quiet_campaign import campaign_fixtures, invoke, retried_spec

SPEC = retried_spec("damaged-answers", 6)


finished, run_dir = campaign_fixtures("damaged", SPEC, "damaged-answers")


def _error_line(output: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    return errors[0]


def _scores(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "scores.parquet").sort("arm", "unit", "pass", "set")


def test_the_damage_is_named_first_with_a_remedy_that_works(
    finished: Path, run_dir: Path
) -> None:
    (shard,) = (run_dir / "responses").glob("*.parquet")
    shard.write_bytes(shard.read_bytes()[:3000])
    remedy = (
        f"move it aside (rename it to {shard.name}.damaged, say), then `dutchbook reparse "
        f"{run_dir} --parser lenient` rebuilds the answers from the replies kept in "
        "attempts/, without a call"
    )
    for command in ("report", "score", "audit"):
        code, said = invoke(command, str(run_dir))
        assert code == 2, said
        line = _error_line(said)
        assert line.startswith(f"error: damaged file in the run folder: {shard} (parquet"), line
        assert remedy in line and "changed after it was scored" not in line, line
    # The remedy, as the line says it.
    shard.rename(shard.with_name(f"{shard.name}.damaged"))
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0 and "accepted 0 → 28" in said, said
    assert invoke("score", str(run_dir))[0] == 0
    code, said = invoke("report", str(run_dir))
    assert code == 0, said
    # The same answers, so the same scores, and the same audit: nothing was asked again.
    assert _scores(run_dir).equals(_scores(finished))
    assert run_audit(run_dir).sentence == run_audit(finished).sentence


def test_with_the_replies_damaged_too_no_reparse_is_offered(run_dir: Path) -> None:
    """The answers are rebuilt from the replies in attempts/: with those damaged as well, the
    line does not send the user to a reparse that would fail on them."""
    for folder in ("responses", "attempts"):
        (shard,) = (run_dir / folder).glob("*.parquet")
        shard.write_bytes(shard.read_bytes()[:3000])
    code, said = invoke("score", str(run_dir))
    assert code == 2, said
    line = _error_line(said)
    assert line.startswith("error: damaged files in the run folder: "), line
    assert "dutchbook reparse" not in line and line.count("restore it from a copy") == 2, line


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda values: [1.5, *values[1:]], "a value outside [0, 1]"),
        (lambda values: [float("inf"), *values[1:]], "a value outside [0, 1]"),
        (lambda values: values[:-1], "not one value per event"),
        (lambda values: None, "no values"),
        (lambda values: [None, *values[1:]], "a null value"),  # scored as unanswered before
    ],
)
def test_an_answer_no_parser_writes_is_one_line_and_a_reparse_rebuilds_it(
    finished: Path,
    run_dir: Path,
    damage: Callable[[list[float]], list[float | None] | None],
    said: str,
) -> None:
    """A shard that reads whole but holds an answer no parser writes (edited, or written by
    another tool) ended score and repair in a traceback: scoring's "probs must lie in [0, 1]"
    for 1.5 or inf, polars' "exploded columns must have matching element counts" for a list
    of the wrong length. Each is one line naming the request, with the reparse that rebuilds
    the answers; nothing is written."""
    (shard,) = (run_dir / "responses").glob("*.parquet")
    answers = pl.read_parquet(shard)
    request = answers["request_id"][0]
    column = answers["values"].to_list()
    column[0] = damage(column[0])
    answers.with_columns(pl.Series("values", column, dtype=pl.List(pl.Float64))).write_parquet(
        shard
    )
    scores = (run_dir / "scores.parquet").read_bytes()
    for command in ("score", "repair"):
        code, output = invoke(command, str(run_dir))
        assert code == 2, output
        line = _error_line(output)
        assert f"({said}: request {request})" in line, line
        assert f"`dutchbook reparse {run_dir} --parser lenient` rebuilds the answers" in line
    assert (run_dir / "scores.parquet").read_bytes() == scores
    assert not (run_dir / "repaired.parquet").exists()
    assert invoke("reparse", str(run_dir), "--parser", "lenient")[0] == 0
    assert invoke("score", str(run_dir))[0] == 0
    assert _scores(run_dir).equals(_scores(finished))
