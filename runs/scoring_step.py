"""Answers -> forecasts long table -> one exact LP per scored set.

Sets sharing an incidence matrix (every stock-day's horizon-1 panel, say) are solved in one
batched `dutch_books` call, whatever model, unit or pass they come from.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.durable import write_atomic
from engine.scan import scan_responses
from panels.arms import ARMS
from runs.spec import CampaignSpec
from runs.units import UnitSource
from scoring import brier, dutch_books

FORECAST_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "pass": pl.Int32,
    "event": pl.String,
    "p": pl.Float64,
}
SCORE_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "pass": pl.Int32,
    "set": pl.String,
    "cluster": pl.String,
    "norm": pl.String,
    "profit": pl.Float64,
    "coverage": pl.Float64,
    "events": pl.List(pl.String),
    "stakes": pl.List(pl.Float64),
    "coherent": pl.List(pl.Float64),
    "brier": pl.Float64,
    "answered": pl.Int32,
}
FAMILY_ARM_PREFIX = "families/"


def native_norm(arm: str) -> str:
    """The paper's arms use its sup-norm metric; the family benchmark uses L1."""
    return "l1" if arm.startswith(FAMILY_ARM_PREFIX) else "inf"


def build_forecasts(run_dir: Path) -> pl.DataFrame:
    """Every arm's answers as a long table, through the plan's membership of shared queries."""
    members = pl.scan_parquet(run_dir / "plan_members.parquet").select(
        "request_id", "model", "arm", "unit", "pass", "events"
    )
    answers = (
        scan_responses(run_dir).select("request_id", "values").unique("request_id", keep="first")
    )
    frame = members.join(answers, on="request_id", how="inner").collect()
    if frame.height == 0:
        return pl.DataFrame(schema=FORECAST_SCHEMA)
    long = (
        frame.explode(["events", "values"])
        .rename({"events": "event", "values": "p"})
        .with_columns(pl.col("pass").cast(pl.Int32), pl.col("p").cast(pl.Float64))
        # An event answered twice in one unit and pass (never by design) keeps its mean.
        .group_by(["model", "arm", "unit", "pass", "event"], maintain_order=True)
        .agg(pl.col("p").mean())
    )
    return long.select(list(FORECAST_SCHEMA)).sort(["model", "arm", "unit", "pass", "event"])


@dataclass
class _Batch:
    incidence: np.ndarray
    rows: list[np.ndarray]
    meta: list[dict[str, Any]]


def score_forecasts(
    spec: CampaignSpec,
    forecasts: pl.DataFrame,
    units: UnitSource,
    norms: Iterable[str] | None = None,
) -> pl.DataFrame:
    lookup: dict[tuple[str, str, str, int], dict[str, float]] = defaultdict(dict)
    for model, arm, unit, pass_, event, p in forecasts.iter_rows():
        lookup[(model, arm, unit, pass_)][event] = p
    batches: dict[tuple[str, tuple[int, ...], bytes], _Batch] = {}
    for entry in spec.arms:
        arm = ARMS[entry.name]
        arm_norms = tuple(norms) if norms else (native_norm(arm.name),)
        models = [m.name for m in spec.models_for(entry)]
        for unit in units.for_arm(arm):
            panel = arm.panel(unit)
            outcomes = arm.outcomes(unit)
            cluster = str(getattr(unit, "date", unit.id))
            for scoring_set in arm.scoring_sets(unit):
                sub = panel.subset(list(scoring_set.event_ids))
                ids = list(sub.ids)
                incidence = np.ascontiguousarray(sub.incidence, dtype=np.uint8)
                for norm in arm_norms:
                    key = (norm, incidence.shape, incidence.tobytes())
                    batch = batches.setdefault(key, _Batch(incidence, [], []))
                    for model in models:
                        for pass_index in range(entry.passes):
                            answers = lookup.get((model, arm.name, unit.id, pass_index), {})
                            probs = np.array([answers.get(e, np.nan) for e in ids], dtype=float)
                            outcome_vec = (
                                np.array([float(outcomes[e]) for e in ids])
                                if outcomes is not None
                                else None
                            )
                            batch.rows.append(probs)
                            batch.meta.append(
                                {
                                    "model": model,
                                    "arm": arm.name,
                                    "unit": unit.id,
                                    "pass": pass_index,
                                    "set": scoring_set.name,
                                    "cluster": cluster,
                                    "norm": norm,
                                    "events": ids,
                                    "answered": int(np.isfinite(probs).sum()),
                                    "outcomes": outcome_vec,
                                }
                            )
    records: list[dict[str, Any]] = []
    for (norm, _, _), batch in batches.items():
        probs = np.vstack(batch.rows)
        result = dutch_books(batch.incidence, probs, norm=norm)
        for k, meta in enumerate(batch.meta):
            outcome_vec = meta.pop("outcomes")
            n = len(meta["events"])
            answered = meta["answered"]
            records.append(
                {
                    **meta,
                    "profit": float(result.profit[k]),
                    "coverage": answered / n if n else 0.0,
                    "stakes": [_finite_or_none(v) for v in result.stakes[k]],
                    "coherent": [_finite_or_none(v) for v in result.coherent[k]],
                    "brier": float(brier(probs[k], outcome_vec))
                    if outcome_vec is not None and answered
                    else None,
                }
            )
    if not records:
        return pl.DataFrame(schema=SCORE_SCHEMA)
    return pl.DataFrame(records, schema=SCORE_SCHEMA).sort(
        ["model", "arm", "unit", "set", "pass", "norm"]
    )


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def score_run(spec: CampaignSpec, run_dir: Path, units: UnitSource | None = None) -> pl.DataFrame:
    """Write `forecasts.parquet` and `scores.parquet`; re-running gives the same files."""
    units = units or UnitSource.from_spec(spec)
    forecasts = build_forecasts(run_dir)
    write_atomic(forecasts, run_dir / "forecasts.parquet")
    scores = score_forecasts(spec, forecasts, units)
    write_atomic(scores, run_dir / "scores.parquet")
    return scores
