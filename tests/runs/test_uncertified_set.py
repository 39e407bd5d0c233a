"""A set of a run's answers whose profit no solve certifies (`scoring.dutch_book.
UncertifiedError`) ends `dutchbook run` and `dutchbook score` in one line, exit 1, naming the
set as the run knows it (model, arm, unit, set, pass), saying that the answers are kept and
what scores them again. Both ended in a traceback naming "set 1" of a batch, the run
"answered, not scored"."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from panels.arms import ARMS
from runs.answered_sets import AnsweredSet, Chunk, pass_averages
from runs.cli import app
from runs.scoring_step import UncertifiedSet, _score_chunk
from scoring import dutch_book
from scoring.dutch_book import UncertifiedError
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents
from tests.scoring.test_pool import horizon1

GAP = 2.5e-6
#: What stays as it was whatever scoring does: the answers, their attempts and journal.
KEPT = ("responses", "attempts", "journal")


def _uncertain(
    monkeypatch: pytest.MonkeyPatch, pick: Callable[[np.ndarray], int | None]
) -> list[np.ndarray]:
    """The solve raising, as the real one does, for the set of a call's `sets` that `pick`
    gives the row of (None: none); the sets it raised for, as it raised."""
    real = dutch_book._solve_certified
    raised: list[np.ndarray] = []

    def uncertain(matrix: np.ndarray, sets: np.ndarray, norm: str) -> object:
        k = pick(sets)
        if k is not None:
            raised.append(sets[k].copy())
            says = dutch_book._uncertified_says(f"set {k}", GAP)
            raise UncertifiedError(says, set_index=k, gap=GAP)
        return real(matrix, sets, norm)

    monkeypatch.setattr(dutch_book, "_solve_certified", uncertain)
    return raised


def _set(unit: str, probs: np.ndarray) -> AnsweredSet:
    events = tuple(f"e{i}" for i in range(probs.shape[1]))
    return AnsweredSet(unit, "h1", "2021-07-13", events, horizon1().astype(np.uint8), probs, None)


@pytest.mark.parametrize(
    ("averaged", "named"), [(False, "pass 2"), (True, "passes 0 to 1 averaged")]
)
def test_the_set_is_named_by_unit_set_and_pass(
    monkeypatch: pytest.MonkeyPatch, averaged: bool, named: str
) -> None:
    """Each set of a chunk of three passes is two jobs, its passes and their running
    averages: the one raised for, in the second set, is named as the run knows it."""
    rng = np.random.default_rng(0)
    sets = [_set(unit, rng.uniform(0.0, 1.0, (3, 14))) for unit in ("d:PG", "d:UNH")]
    target = pass_averages(sets[1].probs)[1] if averaged else sets[1].probs[2]
    _uncertain(monkeypatch, lambda call: _row_of(call, target))
    with pytest.raises(UncertifiedSet) as raised:
        _score_chunk(Chunk("m", ARMS["baseline"], 3), sets, ("inf",))
    assert str(raised.value) == (
        f"Dutch-book LP for model m, arm baseline, unit d:UNH, set h1, {named}, inf norm "
        "could not be certified (duality gap 2.5e-06 > 1e-09)"
    )
    # Still the error `score_run` and `score_forecasts` raised before it was named.
    assert isinstance(raised.value, UncertifiedError) and raised.value.gap == GAP


def _row_of(sets: np.ndarray, target: np.ndarray) -> int | None:
    rows = [k for k, row in enumerate(sets) if np.array_equal(row, target)]
    return rows[0] if rows else None


def _last_once() -> Callable[[np.ndarray], int | None]:
    """The last set of the first call (row 1 of the run's two, not the first of a batch)."""
    calls: list[int] = []

    def pick(sets: np.ndarray) -> int | None:
        calls.append(len(sets))
        return len(sets) - 1 if len(calls) == 1 else None

    return pick


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def _named_by(line: str, run_dir: Path, raised: np.ndarray) -> None:
    """`line` names the scored set whose stated probabilities are `raised`, and says that
    the answers are kept and what scores them again."""
    scores = pl.read_parquet(run_dir / "scores.parquet")
    rows = [r for r in scores.iter_rows(named=True) if np.array_equal(r["probs"], raised)]
    assert len(rows) == 1, rows  # the two units' answers differ: the set is known
    row = rows[0]
    said = (
        f"error: the Dutch-book LP for model {row['model']}, arm {row['arm']}, unit "
        f"{row['unit']}, set {row['set']}, pass {row['pass']}, {row['norm']} norm could not "
        "be certified (duality gap 2.5e-06 > 1e-09); nothing was scored"
    )
    assert line.startswith(said), line
    assert f"the answers are kept in {run_dir} (a resume stops here again" in line
    assert f"is installed, `dutchbook score {run_dir}`, then `dutchbook report" in line


def test_a_run_ends_in_one_line_and_scores_once_the_solve_certifies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    run = ["run", str(spec), "--out", str(tmp_path / "out")]
    raised = _uncertain(monkeypatch, _last_once())
    result = CliRunner().invoke(app, run)
    assert result.exit_code == 1, result.output
    line = _one_error_line(result.stderr)
    out = tmp_path / "out"
    assert not (out / "scores.parquet").exists()
    kept = {name: folder_contents(out / name) for name in KEPT}
    assert pl.read_parquet(out / "responses").height == 28  # every answer is there
    monkeypatch.undo()
    again = CliRunner().invoke(app, run)
    assert again.exit_code == 0, again.output
    assert {name: folder_contents(out / name) for name in KEPT if name != "journal"} == {
        name: kept[name] for name in KEPT if name != "journal"
    }  # nothing asked again
    assert re.search(r"0 attempts", again.stdout), again.stdout
    _named_by(line, out, raised[0])


def test_score_ends_in_one_line_leaving_the_folder_as_it_was(
    finished_runs: FinishedRuns, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run_dir = finished_runs.finish(tmp_path, SMALL_SPEC)
    before = folder_contents(run_dir)
    raised = _uncertain(monkeypatch, _last_once())
    result = CliRunner().invoke(app, ["score", str(run_dir)])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result.stderr)
    assert folder_contents(run_dir) == before
    _named_by(line, run_dir, raised[0])
