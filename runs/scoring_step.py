"""Answers -> forecasts long table -> one exact LP per scored set, one (model, arm) at a time.

Each chunk's sets are solved through `scoring.solve_grouped` (sets sharing an incidence matrix
in one batched `dutch_books` call) and written to a part file at once, so memory is bounded by
the largest chunk, not by the campaign. The same pass computes repeated elicitation: the
profit of each set's answers averaged over the first k passes (`averaged.parquet`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.durable import commit_files, disk_full_as_os_error
from engine.frames import lists_from_flat
from runs.answered_sets import (
    FORECAST_SCHEMA,
    SET_KEY_SCHEMA,
    AnsweredSet,
    AnswerSource,
    Chunk,
    answered_sets,
    chunks,
    pass_averages,
)
from runs.memory import trim_heap
from runs.scored_from import answers_now, forget_digest, record_scored_from, rerun_command
from runs.spec import CampaignSpec
from runs.units import UnitSource
from scoring import brier, pool
from scoring.dutch_book import UncertifiedError
from scoring.grouped import SetJob, solve_grouped

__all__ = [
    "AVERAGED_SCHEMA",
    "FORECAST_SCHEMA",
    "SCORE_SCHEMA",
    "ScoredRun",
    "UncertifiedSet",
    "native_norm",
    "read_scored",
    "score_forecasts",
    "score_run",
]

SCORE_SCHEMA: dict[str, Any] = {
    **SET_KEY_SCHEMA,
    "norm": pl.String,
    "profit": pl.Float64,
    "coverage": pl.Float64,
    "events": pl.List(pl.String),
    "stakes": pl.List(pl.Float64),
    "coherent": pl.List(pl.Float64),
    "brier": pl.Float64,
    "answered": pl.Int32,
    "probs": pl.List(pl.Float64),
}
#: The scores' columns without the per-event lists: what the report's statistics read.
SLIM_COLUMNS: tuple[str, ...] = (
    *("model", "arm", "unit", "pass", "set", "cluster", "norm"),
    *("profit", "coverage", "brier", "answered"),
)
#: Profit of a set's answers averaged, event by event, over the first `k` passes.
AVERAGED_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "set": pl.String,
    "cluster": pl.String,
    "norm": pl.String,
    "k": pl.Int32,
    "profit": pl.Float64,
}


def native_norm(arm: str) -> str:
    """The metric an arm of the catalogue is scored in (`panels.arms.Arm.norm`)."""
    from panels.arms import ARMS

    return ARMS[arm].norm if arm in ARMS else "inf"


@dataclass(frozen=True)
class ScoredRun:
    """What scoring a run gives the report: the scores without their per-event lists
    (`SLIM_COLUMNS`) and the pass-averaged profits (`AVERAGED_SCHEMA`), both small."""

    scores: pl.DataFrame
    averaged: pl.DataFrame


class UncertifiedSet(UncertifiedError):
    """A set of the run's answers whose profit no solve could certify, named as the run
    knows it: scoring stops there, replacing no file, rather than write a profit not
    certified exact. `dutchbook run` and `dutchbook score` end on its `line`, where they
    ended in a traceback naming "set 1" of a batch. An `UncertifiedError` still (its gap,
    job and row kept), so a caller that caught that catches this."""

    def line(self, run_dir: Path) -> str:
        """The one line a command ends on: which set, that nothing was scored, that the
        answers are kept, and what scores them again."""
        return (
            f"the {self}; nothing was scored rather than a profit not certified exact, and the "
            f"answers are kept in {run_dir} (a resume stops here again: once a dutchbook that "
            f"certifies this set is installed, `{rerun_command(run_dir)}`, then `dutchbook "
            f"report {run_dir}`, score and report them without a call); please report it"
        )


def _uncertified_set(
    chunk: Chunk, origins: Sequence[tuple[AnsweredSet, str, bool]], error: UncertifiedError
) -> UncertifiedSet:
    """`error`, placed by its job in `origins` (each job's set, norm, and whether its rows
    are pass averages), as the model, arm, unit, set and pass of its answers."""
    where = f"model {chunk.model}, arm {chunk.arm.name}"
    if error.job is None or error.set_index is None:  # not placed: the chunk is all it knows
        return UncertifiedSet(error.says(f"a set of {where}"), gap=error.gap)
    s, norm, averaged = origins[error.job]
    row = error.set_index
    # An averaged job's row k is its first k + 2 passes (`_score_chunk`: k = 1 is pass 0).
    passes = f"passes 0 to {row + 1} averaged" if averaged else f"pass {row}"
    named = f"{where}, unit {s.unit}, set {s.name}, {passes}, {norm} norm"
    # No `job`: its index is into `_score_chunk`'s own jobs, which no caller of it gave.
    return UncertifiedSet(error.says(named), gap=error.gap)


def _list_column(name: str, values: pl.Series, lengths: np.ndarray) -> pl.Series:
    """A list column from flat values and row lengths, without a Python object per value
    (a chunk holds a million values at paper scale; nested Python lists cost ~5x more)."""
    rows = pl.Series("row", np.repeat(np.arange(lengths.size), lengths))
    return lists_from_flat(name, rows, values, lengths.size)


def _floats(parts: list[np.ndarray]) -> pl.Series:
    """Concatenated float arrays as a Series, NaN as null."""
    return pl.Series("v", np.concatenate(parts) if parts else np.empty(0)).fill_nan(None)


def _whole_by_k(chunk: Chunk, probs: np.ndarray) -> np.ndarray | None:
    """For a family, whether every statement has an answer in one of the first k passes
    (k = 1..passes); None for a set of another arm. Its profit after k passes averaged is NaN
    where not: the family is unanswered there, as the leaderboard counts a family asked in
    part (`runs.report.data.whole_families`).
    Solved on the statements answered, a family lost the constraints tying them to the
    missing one, and a dropped call read as coherence in the repeated elicitation's figures
    (sim-noisy's brisbane-2032-golds, one statement of two answered, 0.0 against 0.1111)."""
    if chunk.arm.unit_kind != "family":
        return None
    return np.asarray(np.logical_or.accumulate(np.isfinite(probs), axis=0).all(axis=1))


def _score_chunk(
    chunk: Chunk, sets: Sequence[AnsweredSet], norms: Sequence[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Scores (one row per set, pass and norm) and pass-averaged profits of one chunk."""
    jobs: list[SetJob] = []
    origins: list[tuple[AnsweredSet, str, bool]] = []  # each job's set, norm, and if averaged
    for s in sets:
        # k = 1 is pass 0 itself; k >= 2 are solved.
        averages = pass_averages(s.probs)[1:] if chunk.passes > 1 else None
        for norm in norms:
            jobs.append(SetJob(s.incidence, s.probs, norm))
            origins.append((s, norm, False))
            if averages is not None:
                jobs.append(SetJob(s.incidence, averages, norm))
                origins.append((s, norm, True))
    try:
        results = iter(solve_grouped(jobs))
    except UncertifiedError as error:
        raise _uncertified_set(chunk, origins, error) from error
    del jobs, origins
    passes = chunk.passes
    keys: dict[str, list[Any]] = {name: [] for name in ("unit", "set", "cluster", "norm")}
    events: list[str] = []
    numbers: dict[str, list[np.ndarray]] = {
        name: [] for name in ("profit", "coverage", "brier", "answered", "lengths")
    }
    flat: dict[str, list[np.ndarray]] = {"stakes": [], "coherent": [], "probs": []}
    averaged: dict[str, list[Any]] = {name: [] for name in ("unit", "set", "cluster", "norm")}
    averaged_profit: list[np.ndarray] = []
    for s in sets:
        n = len(s.events)
        answered = np.isfinite(s.probs).sum(axis=1)
        whole = _whole_by_k(chunk, s.probs) if passes > 1 else None
        briers = (
            np.where(answered > 0, brier(s.probs, s.outcomes), np.nan)
            if s.outcomes is not None
            else np.full(passes, np.nan)
        )
        for norm in norms:
            result = next(results)
            for name, value in (("unit", s.unit), ("set", s.name), ("cluster", s.cluster)):
                keys[name] += [value] * passes
            keys["norm"] += [norm] * passes
            events += list(s.events) * passes
            numbers["profit"].append(result.profit)
            numbers["coverage"].append(answered / n if n else np.zeros(passes))
            numbers["brier"].append(briers)
            numbers["answered"].append(answered)
            numbers["lengths"].append(np.full(passes, n))
            flat["stakes"].append(result.stakes.ravel())
            flat["coherent"].append(result.coherent.ravel())
            flat["probs"].append(s.probs.ravel())
            if passes > 1:
                for name, value in (
                    ("unit", s.unit),
                    ("set", s.name),
                    ("cluster", s.cluster),
                    ("norm", norm),
                ):
                    averaged[name] += [value] * passes
                by_k = np.concatenate(([result.profit[0]], next(results).profit))
                averaged_profit.append(by_k if whole is None else np.where(whole, by_k, np.nan))
    rows = len(keys["unit"])

    def joined(name: str) -> np.ndarray:
        return np.concatenate(numbers[name]) if numbers[name] else np.empty(0)

    lengths = joined("lengths").astype(np.int64)
    columns: dict[str, Any] = {
        "model": [chunk.model] * rows,
        "arm": [chunk.arm.name] * rows,
        "unit": keys["unit"],
        "pass": np.tile(np.arange(passes), rows // passes if passes else 0),
        "set": keys["set"],
        "cluster": keys["cluster"],
        "norm": keys["norm"],
        "profit": joined("profit"),
        "coverage": joined("coverage"),
        "events": _list_column("events", pl.Series("v", events, dtype=pl.String), lengths),
        "stakes": _list_column("stakes", _floats(flat["stakes"]), lengths),
        "coherent": _list_column("coherent", _floats(flat["coherent"]), lengths),
        "brier": _floats(numbers["brier"]),
        "answered": joined("answered"),
        "probs": _list_column("probs", _floats(flat["probs"]), lengths),
    }
    scores = pl.DataFrame(
        [pl.Series(name, columns[name]).cast(dtype) for name, dtype in SCORE_SCHEMA.items()]
    )
    width = len(averaged["unit"])
    means = pl.DataFrame(
        {
            "model": [chunk.model] * width,
            "arm": [chunk.arm.name] * width,
            **averaged,
            "k": np.tile(np.arange(1, passes + 1), width // passes if passes else 0),
            "profit": np.concatenate(averaged_profit) if averaged_profit else np.empty(0),
        },
        schema=AVERAGED_SCHEMA,
    )
    return (
        scores.sort(["unit", "set", "pass", "norm"], maintain_order=True),
        means.sort(["unit", "set", "norm", "k"], maintain_order=True),
    )


def _chunk_norms(chunk: Chunk, norms: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(norms) if norms else (chunk.arm.norm,)


def score_forecasts(
    spec: CampaignSpec,
    forecasts: pl.DataFrame,
    units: UnitSource,
    norms: Iterable[str] | None = None,
) -> pl.DataFrame:
    """Score a forecasts table (`FORECAST_SCHEMA`) held in memory: every set, pass and norm."""
    parts = []
    for chunk in chunks(spec):
        mine = forecasts.filter(
            (pl.col("model") == chunk.model) & (pl.col("arm") == chunk.arm.name)
        )
        sets = list(answered_sets(chunk, mine, units))
        parts.append(_score_chunk(chunk, sets, _chunk_norms(chunk, norms))[0])
    if not parts:
        return pl.DataFrame(schema=SCORE_SCHEMA)
    return pl.concat(parts)


class PartFiles:
    """Part files of one output, concatenated into the final file without loading them all."""

    def __init__(self, folder: Path, name: str, schema: dict[str, Any]) -> None:
        self.folder, self.name, self.schema = folder, name, schema
        self.paths: list[Path] = []

    # Polars can lose a write's ENOSPC ("Invalid thrift: transport error"); once the
    # scoring folder is removed the disk has room again and nothing says why, so the error
    # is judged while the part is still there (`disk_full_as_os_error`).

    def add(self, frame: pl.DataFrame) -> None:
        if frame.height:
            path = self.folder / f"{self.name}-{len(self.paths):05d}.parquet"
            with disk_full_as_os_error(self.folder):
                frame.write_parquet(path)
            self.paths.append(path)

    def finish(self) -> Path:
        """The whole output, its parts concatenated, in the folder: for `commit_files`."""
        tmp = self.folder / f"{self.name}.parquet"
        with disk_full_as_os_error(self.folder):
            if self.paths:
                pl.scan_parquet(self.paths).sink_parquet(tmp)
            else:
                pl.DataFrame(schema=self.schema).write_parquet(tmp)
        for path in self.paths:  # in the whole now: the disk holds each output once, not twice
            path.unlink()
        return tmp

    def commit(self, target: Path) -> None:
        """Make the whole output `target` (`CommitFailed` if it cannot be replaced)."""
        commit_files({target: self.finish()}, self.folder)


def score_run(spec: CampaignSpec, run_dir: Path, units: UnitSource | None = None) -> ScoredRun:
    """Write `forecasts.parquet`, `scores.parquet` and `averaged.parquet` from the kept answers.

    One (model, arm) at a time; re-running gives the same files. Returns what the report
    reads (`ScoredRun`), so nothing is written and read back.
    """
    if units is None:
        from runs.design import folder_units  # only here: callers mostly pass `units`

        units = folder_units(spec, run_dir)
    answers = answers_now(run_dir)  # before they are read: what these scores come from
    source = AnswerSource(run_dir)
    slim: list[pl.DataFrame] = []
    averaged: list[pl.DataFrame] = []
    with tempfile.TemporaryDirectory(prefix=".scoring-", dir=run_dir) as tmp:
        folder = Path(tmp)
        outputs = {
            "forecasts": PartFiles(folder, "forecasts", FORECAST_SCHEMA),
            "scores": PartFiles(folder, "scores", SCORE_SCHEMA),
            "averaged": PartFiles(folder, "averaged", AVERAGED_SCHEMA),
        }
        for chunk in chunks(spec):
            pooled = pool.pooled_calls()
            forecasts = source.forecasts(chunk.model, chunk.arm.name)
            outputs["forecasts"].add(forecasts)
            sets = list(answered_sets(chunk, forecasts, units))
            del forecasts
            scores, means = _score_chunk(chunk, sets, _chunk_norms(chunk, None))
            del sets
            outputs["scores"].add(scores)
            outputs["averaged"].add(means)
            slim.append(scores.select(SLIM_COLUMNS))
            averaged.append(means)
            del scores, means
            if pool.pooled_calls() == pooled:
                # This chunk did not need the workers (only big chunks do: horizon 4 at paper
                # scale): end them rather than keep them resident beside the chunks to come.
                pool.shutdown()
            trim_heap()  # the chunk's garbage goes back before the next chunk allocates
        pool.shutdown()
        # Every file written whole before the first is replaced, and replaced all or none: a
        # file that could not be replaced left the ones before it new beside the rest old.
        finished = {run_dir / f"{name}.parquet": part.finish() for name, part in outputs.items()}
        forget_digest(run_dir)
        commit_files(finished, folder)
    record_scored_from(run_dir, answers)
    return ScoredRun(
        scores=pl.concat(slim) if slim else pl.DataFrame(schema=SCORE_SCHEMA).select(SLIM_COLUMNS),
        averaged=pl.concat(averaged) if averaged else pl.DataFrame(schema=AVERAGED_SCHEMA),
    )


def read_scored(run_dir: Path) -> ScoredRun:
    """A scored run folder's `ScoredRun`, read from its files (only the columns it needs)."""
    averaged_path = run_dir / "averaged.parquet"
    return ScoredRun(
        scores=pl.read_parquet(run_dir / "scores.parquet", columns=list(SLIM_COLUMNS)),
        averaged=(
            pl.read_parquet(averaged_path)
            if averaged_path.exists()
            else pl.DataFrame(schema=AVERAGED_SCHEMA)
        ),
    )
