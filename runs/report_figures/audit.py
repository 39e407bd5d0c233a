"""Figure 8: the audit over time, attempts per time bin by outcome, one panel per model.

Accepted attempts are pale, every other outcome (each one a retry attempt) is stacked on top
in its own colour, so a burst of rate limits or a provider outage shows where it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "The audit: attempts over time by outcome"
#: Time bins across the campaign's span.
BINS = 40
#: Fixed colours so one outcome looks the same in every report.
OUTCOME_COLOURS = {
    "ok": "#d1d5db",
    "rate_limit": "#f59e0b",
    "provider_error": "#dc2626",
    "connection_error": "#7c3aed",
    "timeout": "#2563eb",
    "interrupted": "#0f766e",
    "missing_routing_metadata": "#a16207",
    "invalid_response": "#db2777",
    "refusal": "#4b5563",
    "truncated": "#65a30d",
    "auth_error": "#111827",
    "bad_request": "#9a3412",
}


def attempts_over_time(attempts: pl.LazyFrame, bins: int = BINS) -> pl.DataFrame:
    """`model, bin, outcome, attempts` with `bin` the index of an equal slice of the run's span
    (0..bins-1) and a `start`/`width_s` per frame in its columns `t0`, `width_s`."""
    frame = attempts.select("model", "started_at", "outcome").drop_nulls("started_at").collect()
    if frame.height == 0:
        return pl.DataFrame()
    t0 = frame["started_at"].min()
    t1 = frame["started_at"].max()
    span_s = max((t1 - t0).total_seconds(), 1e-3)  # type: ignore[operator, union-attr]
    width_s = span_s / bins
    return (
        frame.with_columns(
            ((pl.col("started_at") - pl.lit(t0)).dt.total_microseconds() / 1e6 / width_s)
            .floor()
            .clip(0, bins - 1)
            .cast(pl.Int32)
            .alias("bin")
        )
        .group_by("model", "bin", "outcome")
        .agg(pl.len().alias("attempts"))
        .with_columns(pl.lit(width_s).alias("width_s"))
        .sort("model", "bin", "outcome")
    )


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    if inputs.attempts is None:
        raise Omit("the run folder has no attempts ledger")
    counts = attempts_over_time(inputs.attempts)
    if counts.height == 0:
        raise Omit("no attempt was recorded")
    models = sorted(set(counts["model"].to_list()))
    outcomes = [o for o in OUTCOME_COLOURS if o in set(counts["outcome"].to_list())]
    outcomes += sorted(set(counts["outcome"].to_list()) - set(outcomes))
    width_s = float(counts["width_s"][0])
    unit, scale = ("min", 60.0) if width_s * BINS >= 180 else ("s", 1.0)
    ncols = 1 if len(models) <= 3 else 2
    nrows = -(-len(models) // ncols)
    plt = _style.pyplot()
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(_style.WIDTH, 1.9 * nrows + 1.0), squeeze=False, sharex=True
    )
    for k, model in enumerate(models):
        _panel(
            axes[k // ncols][k % ncols],
            model,
            counts.filter(pl.col("model") == model),
            outcomes,
            width_s / scale,
        )
    for k in range(len(models), nrows * ncols):
        axes[k // ncols][k % ncols].set_axis_off()
    for ax in axes[-1]:
        ax.set_xlabel(f"time since the first attempt ({unit})")
    handles = [plt.Rectangle((0, 0), 1, 1, color=OUTCOME_COLOURS.get(o, "0.5")) for o in outcomes]
    _style.bottom_legend(fig, handles, outcomes, min(len(outcomes), 4))
    fig.tight_layout(rect=(0, 0.04 + 0.02 * (len(outcomes) // 4), 1, 1))
    _style.save(fig, path)
    return (
        "Attempts started in each slice of the campaign, by outcome, per model: accepted "
        "attempts pale, every other outcome (each one a retry attempt, counted as the audit "
        "counts them) stacked on top."
    )


def _panel(
    ax: Any, model: str, counts: pl.DataFrame, outcomes: Sequence[str], width: float
) -> None:
    bottom = np.zeros(BINS)
    x = (np.arange(BINS) + 0.5) * width
    total = int(counts["attempts"].sum())
    failed = int(counts.filter(pl.col("outcome") != "ok")["attempts"].sum())
    for outcome in outcomes:
        part = counts.filter(pl.col("outcome") == outcome)
        if part.height == 0:
            continue
        heights = np.zeros(BINS)
        heights[part["bin"].to_numpy()] = part["attempts"].to_numpy()
        ax.bar(
            x, heights, width=width * 0.95, bottom=bottom, color=OUTCOME_COLOURS.get(outcome, "0.5")
        )
        bottom += heights
    share = f" ({failed / total:.1%})" if total else ""
    ax.set_title(
        f"{model}: {total:,} attempts, {failed:,} not accepted{share}", loc="left", fontsize=9
    )
    ax.set_ylabel("attempts")
    ax.grid(axis="y", alpha=0.3)
