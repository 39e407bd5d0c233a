"""Repeated elicitation (the paper's Figure 4C): the profit of each set's answers averaged,
event by event, over the first k passes, k = 1..passes.

Scoring computes those profits (`averaged.parquet`, `runs.scoring_step.AVERAGED_SCHEMA`);
this module only does their statistics: per report row (model, arm label), the profit after
k passes averaged over sets per unit, then over units, with the date-clustered bootstrap. By
convexity of the profit in the stated probabilities, the k-pass average's profit is never
above the mean of those k passes' own profits when they answered the same events;
`single_pass_mean` is over every pass, so only the average of all passes is bounded by it (a
referee saw k = 1 above it, rightly), and only where no pass left an event unanswered that
another answered (the averaged set then holds more events: a referee saw both cells rise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from runs.answered_sets import pass_averages
from runs.report.data import (
    LEVEL,
    SET_LABEL,
    ArmRow,
    arm_model_rank,
    native_scores,
    pair_unit,
)
from scoring import stats
from scoring.grouped import SetJob, solve_grouped

#: `incidence_for(arm, unit, set, events) -> (n_events, n_atoms) 0/1 matrix` of one scoring
#: set, rows in the order of `events` (the scores row's `events` column).
IncidenceFor = Callable[[str, str, str, Sequence[str]], npt.NDArray[Any]]


def repeated_section(
    averaged: pl.DataFrame, rows: Sequence[ArmRow], seed: int, reps: int
) -> list[dict[str, Any]]:
    """The summary's `repeated_elicitation` list from pass-averaged profits.

    One entry per scored (model, arm row) with at least two passes: `model, arm, passes,
    units, single_pass_mean` (the row's profit mean), `by_k` ([{k, mean, lo, hi}]); by arm,
    then by model name (`arm_model_rank`).
    """
    scored = {(r.model, r.arm): r for r in rows if r.scored and r.profit is not None}
    if averaged.height == 0:
        return []
    per_unit = (
        native_scores(averaged)
        .with_columns(pair_unit())  # both orders of a two-asset pair are one unit, as above
        .with_columns(SET_LABEL.alias("arm"))
        .group_by(["model", "arm", "unit", "cluster", "k"], maintain_order=True)
        .agg(pl.col("profit").drop_nans().mean())
    )
    out: list[dict[str, Any]] = []
    for (model, arm), group in per_unit.group_by(["model", "arm"], maintain_order=True):
        row = scored.get((str(model), str(arm)))
        passes = int(group["k"].max())  # type: ignore[arg-type]
        if row is None or passes < 2:
            continue
        answered = group.filter(pl.col("profit").is_not_null() & pl.col("profit").is_not_nan())
        out.append(
            {
                "model": str(model),
                "arm": str(arm),
                "passes": passes,
                "units": int(answered["unit"].n_unique()),
                "single_pass_mean": row.profit.mean if row.profit else None,
                "by_k": _by_k(answered, passes, seed, reps),
            }
        )
    return sorted(out, key=arm_model_rank)


def _by_k(answered: pl.DataFrame, passes: int, seed: int, reps: int) -> list[dict[str, Any]]:
    """{k, mean, lo, hi} for k = 1..passes (None where no unit has a profit after k passes).

    Every k is resampled with the same seed, so `stats.cluster_bootstrap_means` draws the
    resampled dates once for all of them (one draw per k cost seconds at 300 passes).
    """
    at_k = {
        int(k): part
        for (k,), part in answered.partition_by("k", as_dict=True, maintain_order=True).items()
    }
    present = [k for k in range(1, passes + 1) if k in at_k]
    intervals = stats.cluster_bootstrap_means(
        [(at_k[k]["profit"].to_numpy(), at_k[k]["cluster"].to_numpy()) for k in present],
        reps=reps,
        seed=seed,
        level=LEVEL,
    )
    found = dict(zip(present, intervals, strict=True))
    return [
        {"k": k, "mean": iv.mean, "lo": iv.lo, "hi": iv.hi}
        if (iv := found.get(k)) is not None
        else {"k": k, "mean": None, "lo": None, "hi": None}
        for k in range(1, passes + 1)
    ]


def averaged_from_forecasts(
    scores: pl.DataFrame, forecasts: pl.DataFrame, incidence_for: IncidenceFor
) -> pl.DataFrame:
    """Pass-averaged profits from forecasts held in memory (scoring writes them for a run).

    For callers that have forecasts and an incidence lookup but no scored run folder.
    """
    from runs.scoring_step import AVERAGED_SCHEMA

    stated = {
        (m, a, u, int(p), e): v
        for m, a, u, p, e, v in forecasts.select(
            "model", "arm", "unit", "pass", "event", "p"
        ).iter_rows()
    }
    native = native_scores(scores)
    meta: list[tuple[Any, ...]] = []
    jobs: list[SetJob] = []
    for (model, arm), group in native.group_by(["model", "arm"], maintain_order=True):
        passes = sorted(int(p) for p in group["pass"].unique())
        if len(passes) < 2:
            continue
        sets = group.unique(["unit", "set"], keep="first", maintain_order=True)
        for unit, set_name, cluster, norm, events in sets.select(
            "unit", "set", "cluster", "norm", "events"
        ).iter_rows():
            ids = list(events)
            probs = np.array(
                [[stated.get((model, arm, unit, p, e), np.nan) for e in ids] for p in passes]
            )
            incidence = np.asarray(incidence_for(str(arm), unit, set_name, ids), dtype=np.uint8)
            jobs.append(SetJob(incidence, pass_averages(probs), norm))
            meta.append((model, arm, unit, set_name, cluster, norm))
    records = [
        (*m, k, float(profit))
        for m, result in zip(meta, solve_grouped(jobs), strict=True)
        for k, profit in enumerate(result.profit, start=1)
    ]
    return pl.DataFrame(records, schema=AVERAGED_SCHEMA, orient="row")


def repeated_elicitation(
    scores: pl.DataFrame,
    forecasts: pl.DataFrame,
    incidence_for: IncidenceFor,
    rows: Sequence[ArmRow],
    seed: int,
    reps: int,
) -> list[dict[str, Any]]:
    """`repeated_section` from forecasts and an incidence lookup (see `averaged_from_forecasts`)."""
    return repeated_section(
        averaged_from_forecasts(scores, forecasts, incidence_for), rows, seed, reps
    )


def incidence_from_units(units: Any) -> IncidenceFor:
    """An `incidence_for` callback over a campaign's `runs.units.UnitSource`."""
    from panels.arms import ARMS

    by_id: dict[str, dict[str, Any]] = {}
    cache: dict[tuple[str, str, str, tuple[str, ...]], npt.NDArray[Any]] = {}

    def incidence_for(arm: str, unit: str, set_name: str, events: Sequence[str]) -> Any:
        key = (arm, unit, set_name, tuple(events))
        if key not in cache:
            spec_arm = ARMS[arm]
            if arm not in by_id:
                by_id[arm] = {u.id: u for u in units.for_arm(spec_arm, check=False)}
            panel = spec_arm.panel(by_id[arm][unit]).subset(list(events))
            cache[key] = np.asarray(panel.incidence, dtype=np.uint8)
        return cache[key]

    return incidence_for
