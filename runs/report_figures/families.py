"""Figure 6: the question-family benchmark, arbitrage-free rate by shape, statements asked one
at a time (isolated) against a whole family in one query (joint); control families, whose
exact probabilities are known, apart on the right.

A family is arbitrage-free when the L1 bookie locks in at most `arbitrage_free_cents`
(5 cents); its profit is first averaged over passes. Each bar says over how many families.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from runs.report.data import family_arm
from runs.report_figures import _style
from runs.report_figures.inputs import FAMILY_ARM_PREFIX, FigureInputs

TITLE = "Question families: arbitrage-free rate by shape"
SHAPES = ("negation", "threshold", "deadline", "partition", "conjunction", "story")
CONTROLS = "controls"


def family_rates(inputs: FigureInputs) -> pl.DataFrame:
    """`model, arm, group, families, free` (share arbitrage-free) per shape or `controls`."""
    scored = inputs.scored_scores()
    if scored is None:
        return pl.DataFrame()
    per_family = (
        scored.filter(
            family_arm()
            & (pl.col("norm") == "l1")
            & pl.col("profit").is_not_nan()
        )
        .group_by("model", "arm", "unit")
        .agg(pl.col("profit").mean())
        .collect()
    )
    if per_family.height == 0:
        return per_family
    info = inputs.families
    groups = [
        CONTROLS
        if (f := info.get(str(u))) is not None and f.control
        else (f.shape if f is not None else "unknown")
        for u in per_family["unit"]
    ]
    return (
        per_family.with_columns(
            pl.Series("group", groups, dtype=pl.String),
            (pl.col("profit") <= inputs.arbitrage_free_cents).cast(pl.Float64).alias("free"),
        )
        .group_by("model", "arm", "group")
        .agg(pl.len().alias("families"), pl.col("free").mean())
        .sort("model", "arm", "group")
    )


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    rates = family_rates(inputs)
    if rates.height == 0:
        raise Omit("no family arm was run (families/isolated, families/joint)")
    present = set(rates["group"].to_list())
    groups = [s for s in SHAPES if s in present]
    groups += sorted(present - set(SHAPES) - {CONTROLS})
    if CONTROLS in present:
        groups.append(CONTROLS)
    arms = sorted(set(rates["arm"].to_list()))
    models = sorted(set(rates["model"].to_list()))
    cell = {
        (m, a, g): (f, n)
        for m, a, g, n, f in rates.select("model", "arm", "group", "families", "free").iter_rows()
    }
    plt = _style.pyplot()
    fig, axes = plt.subplots(
        len(arms), 1, figsize=(_style.WIDTH, 2.6 * len(arms) + 0.8), squeeze=False, sharex=True
    )
    styles = _style.model_styles(models)
    for ax, arm in zip((a[0] for a in axes), arms, strict=True):
        _panel(ax, arm, groups, models, styles, cell)
    handles, labels = axes[0][0].get_legend_handles_labels()
    legend = _style.bottom_legend(fig, handles, labels, min(len(models), 5))
    _style.tight_layout(fig, rect=(0, legend, 1, 1))
    _style.save(fig, path)
    cents = inputs.arbitrage_free_cents
    return (
        f"Share of families on which the L1 bookie locks in at most {cents:g} (profit averaged "
        "over passes), by family shape, for statements asked one at a time and a whole family "
        "asked in one query; control families (exact probabilities known) apart on the right. "
        "The number under each group is how many families it holds."
    )


def _panel(
    ax: Any,
    arm: str,
    groups: Sequence[str],
    models: Sequence[str],
    styles: Mapping[str, tuple[Any, str]],
    cell: Mapping[tuple[str, str, str], tuple[float, int]],
) -> None:
    width = 0.8 / max(len(models), 1)
    for j, model in enumerate(models):
        xs, hs = [], []
        for i, group in enumerate(groups):
            value = cell.get((model, arm, group))
            if value is not None:
                xs.append(i - 0.4 + width * (j + 0.5))
                hs.append(value[0])
        ax.bar(xs, hs, width=width * 0.92, color=styles[model][0], label=model)
        for x, h in zip(xs, hs, strict=True):
            if h == 0.0:  # a zero bar is invisible: say it, so it is not read as missing
                ax.text(x, 0.01, "0", ha="center", va="bottom", fontsize=7, color=styles[model][0])
    counts = []
    for group in groups:
        ns = {cell[k][1] for k in cell if k[1] == arm and k[2] == group}
        counts.append("/".join(str(n) for n in sorted(ns)) if ns else "0")
    ax.set_xticks(
        range(len(groups)),
        [f"{g}\n(n={n})" for g, n in zip(groups, counts, strict=True)],
        fontsize=8,
    )
    if groups and groups[-1] == CONTROLS:
        ax.axvline(len(groups) - 1.5, color="0.3", linewidth=0.9, linestyle=":")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("arbitrage-free share")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(
        arm.removeprefix(FAMILY_ARM_PREFIX)
        + (
            ": one statement per query"
            if arm.endswith("isolated")
            else ": the whole family in one query"
            if arm.endswith("joint")
            else ""
        ),
        loc="left",
    )
