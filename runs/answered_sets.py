"""A campaign's answers, one (model, arm) at a time, as the sets the arm scores.

Scoring, repair and repeated elicitation all need the same thing: for every unit and
scoring set of an arm, the set's incidence matrix and the stated probabilities of each
pass. Reading them chunk by chunk (one model's answers to one arm) keeps memory bounded by
the largest chunk, whatever the number of models, arms or passes of the campaign.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from engine.console_lines import plural
from engine.scan import scan_responses
from panels.algebra import Panel
from panels.arms import ARMS, Arm
from panels.data import DataError
from runs.spec import CampaignSpec
from runs.units import UnitSource
from scoring.inputs import ROUNDING

FORECAST_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "pass": pl.Int32,
    "event": pl.String,
    "p": pl.Float64,
}


#: The columns naming one set of one pass, first in every per-set file (scores, repaired).
SET_KEY_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "pass": pl.Int32,
    "set": pl.String,
    "cluster": pl.String,
}


@dataclass(frozen=True)
class Chunk:
    """One model's part of one arm of the campaign."""

    model: str
    arm: Arm
    passes: int


@dataclass(frozen=True)
class AnsweredSet:
    """One scoring set of one unit: `probs` (passes, n), NaN where a pass left an event out."""

    unit: str
    name: str
    cluster: str
    events: tuple[str, ...]
    incidence: npt.NDArray[np.uint8]
    probs: npt.NDArray[np.float64]
    outcomes: npt.NDArray[np.float64] | None


def chunks(spec: CampaignSpec) -> list[Chunk]:
    """Every (model, arm) of the campaign, sorted by model then arm (the files' order)."""
    found = {
        (model.name, entry.name): Chunk(model.name, ARMS[entry.name], entry.passes)
        for entry in spec.arms
        for model in spec.models_for(entry)
    }
    return [found[key] for key in sorted(found)]


class AnswerSource:
    """The run folder's accepted answers, read through the plan's membership of queries."""

    def __init__(self, run_dir: Path) -> None:
        self._members = pl.scan_parquet(run_dir / "plan_members.parquet").select(
            "request_id", "model", "arm", "unit", "pass", "events"
        )
        self._answers = scan_responses(run_dir, columns=["request_id", "values"])
        self._run_dir = run_dir

    def forecasts(self, model: str, arm: str) -> pl.DataFrame:
        """`FORECAST_SCHEMA` rows of one (model, arm), sorted by unit, pass and event."""
        members = self._members.filter(
            (pl.col("model") == model) & (pl.col("arm") == arm)
        ).collect()
        # Only this chunk's answers are read (a filter the scan applies shard by shard): a
        # join against the whole ledger would hold every answer of the campaign at once.
        wanted = members["request_id"].unique().implode()
        answers = (
            self._answers.filter(pl.col("request_id").is_in(wanted))
            .collect()
            .unique("request_id", keep="first")
        )
        frame = members.join(answers, on="request_id").select(
            "request_id", "model", "arm", "unit", "pass", "events", "values"
        )
        if frame.height == 0:
            return pl.DataFrame(schema=FORECAST_SCHEMA)
        damaged = _damaged_answers(frame)
        if damaged is not None:
            from runs.damaged_files import rebuild_answers

            raise DataError(f"{model} / {arm}: {damaged}; {rebuild_answers(self._run_dir)}")
        return (
            frame.drop("request_id")
            .explode(["events", "values"])
            .rename({"events": "event", "values": "p"})
            .with_columns(pl.col("pass").cast(pl.Int32), pl.col("p").cast(pl.Float64))
            # An event answered twice in one unit and pass (never by design) keeps its mean.
            .group_by(["model", "arm", "unit", "pass", "event"])
            .agg(pl.col("p").mean())
            .select(list(FORECAST_SCHEMA))
            .sort(["unit", "pass", "event"])
        )


def _damaged_answers(frame: pl.DataFrame) -> str | None:
    """What answers of `frame` hold that no parser writes (a damaged or edited `responses/`
    shard that still reads as Parquet), or None: scoring them ended in polars' or scoring's
    traceback ("exploded columns must have matching element counts", "probs must lie in
    [0, 1]"). NaN is let through: scoring reads it as unanswered."""
    values = pl.col("values")
    out_of_range = ~pl.element().is_between(-ROUNDING, 1.0 + ROUNDING) & ~pl.element().is_nan()
    checks = (
        ("no values", values.is_null()),
        # A null inside the list (`list.any` skips it) was scored as unanswered, in silence.
        ("a null value", values.list.eval(pl.element().is_null()).list.any()),
        ("not one value per event", values.list.len() != pl.col("events").list.len()),
        ("a value outside [0, 1]", values.list.eval(out_of_range).list.any()),
    )
    for what, bad in checks:
        rows = frame.filter(bad.fill_null(False))
        if rows.height:
            more = ", ..." if rows.height > 1 else ""
            return (
                f"responses/ holds {plural(rows.height, 'answer')} no parser writes ({what}: "
                f"request {rows['request_id'][0]}{more})"
            )
    return None


class _SetCache:
    """Incidence of each (panel, set), built once: every stock-day shares its arm's panel."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, tuple[str, ...]], tuple[Panel, npt.NDArray[np.uint8]]] = {}
        self._index: dict[int, tuple[Panel, dict[str, int]]] = {}

    def index(self, panel: Panel) -> dict[str, int]:
        hit = self._index.get(id(panel))
        if hit is None or hit[0] is not panel:
            hit = (panel, {e: i for i, e in enumerate(panel.ids)})
            self._index[id(panel)] = hit
        return hit[1]

    def incidence(self, panel: Panel, events: tuple[str, ...]) -> npt.NDArray[np.uint8]:
        key = (id(panel), events)
        hit = self._cache.get(key)
        if hit is None or hit[0] is not panel:
            matrix = np.ascontiguousarray(panel.subset(list(events)).incidence, dtype=np.uint8)
            hit = (panel, matrix)
            self._cache[key] = hit
        return hit[1]


def answered_sets(
    chunk: Chunk, forecasts: pl.DataFrame, units: UnitSource
) -> Iterator[AnsweredSet]:
    """Every scoring set of every unit of the chunk's arm, answered or not, in unit order."""
    arm = chunk.arm
    by_unit = {
        str(key[0]): part
        for key, part in forecasts.partition_by("unit", as_dict=True, maintain_order=True).items()
    }
    cache = _SetCache()
    strays: list[str] = []  # answered events the data given no longer has
    for unit in units.for_arm(arm, check=False):
        panel = arm.panel(unit)
        index = cache.index(panel)
        stated = np.full((chunk.passes, len(index)), np.nan)
        part = by_unit.pop(unit.id, None)
        if part is not None:
            passes = part["pass"].to_numpy()
            cols = np.array([index.get(e, -1) for e in part["event"].to_list()], dtype=np.int64)
            keep = (cols >= 0) & (passes >= 0) & (passes < chunk.passes)
            if not keep.all():
                strays += [f"{unit.id}: {e}" for e in part.filter(~pl.Series(keep))["event"]]
            stated[passes[keep], cols[keep]] = part["p"].to_numpy()[keep]
        realised = arm.outcomes(unit)
        cluster = str(getattr(unit, "date", unit.id))
        for scoring_set in arm.scoring_sets(unit):
            events = tuple(scoring_set.event_ids)
            cols = np.array([index[e] for e in events], dtype=np.int64)
            yield AnsweredSet(
                unit=unit.id,
                name=scoring_set.name,
                cluster=cluster,
                events=events,
                incidence=cache.incidence(panel, events),
                probs=stated[:, cols],
                outcomes=(
                    None
                    if realised is None
                    else np.array([float(realised[e]) for e in events], dtype=np.float64)
                ),
            )
    if by_unit or strays:
        raise DataError(_stray_answers(chunk, sorted(by_unit), strays))


def _stray_answers(chunk: Chunk, units: list[str], events: list[str]) -> str:
    """Why answers kept in the folder cannot be scored with the data given: scoring them
    without them gave "no answers" at full coverage, and exit 0 (a family id renamed after
    the run, say)."""
    what = []
    if units:
        what.append(f"{plural(len(units), 'unit')} ({_some(units)})")
    if events:
        what.append(f"{plural(len(events), 'event')} ({_some(events)})")
    return (
        f"{chunk.model} / {chunk.arm.name}: the folder holds answers about "
        f"{' and '.join(what)} that the data given does not have: it is not the data the run "
        "was planned from (a family, statement or date renamed or removed?); score with the "
        "data the run asked about"
    )


def _some(names: list[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def pass_averages(probs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Row k: each event's answers averaged over passes 0..k that answered it (NaN if none)."""
    answered = np.isfinite(probs)
    sums = np.cumsum(np.where(answered, probs, 0.0), axis=0)
    counts = np.cumsum(answered, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
