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

import numpy as np
import polars as pl

from runs.report.data import THRESHOLD_SLACK, family_arm
from runs.report_figures import _style
from runs.report_figures.inputs import FAMILY_ARM_PREFIX, FigureInputs

TITLE = "Question families: arbitrage-free rate by shape"
#: The most models drawn as bars, one colour each: the palette has 10 colours, and at 32 models
#: bars of one colour stood for three or four models. More models are drawn as a table of
#: shares (a heatmap), one row each, at most `MAX_ROWS` (those first by name; all are in
#: families.csv).
MAX_BAR_MODELS = 10
MAX_ROWS = 60
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
            # A family asked in part is unanswered in that pass (the report's rate too:
            # `runs.report.data.whole_families`).
            & (pl.col("coverage") >= 1.0)
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
            (pl.col("profit") <= inputs.arbitrage_free_cents + THRESHOLD_SLACK)
            .cast(pl.Float64)
            .alias("free"),
        )
        .group_by("model", "arm", "group")
        .agg(pl.len().alias("families"), pl.col("free").mean())
        .sort("model", "arm", "group")
    )


def _left_out(inputs: FigureInputs) -> str:
    """Why no family rate is drawn: the arms were not run, or no model is scored on them."""
    ran = sorted({str(r["arm"]) for r in inputs.summary.get("rows") or []
                  if str(r["arm"]).startswith(FAMILY_ARM_PREFIX)})  # fmt: skip
    if not ran:
        return "no family arm was run (families/isolated, families/joint)"
    why = inputs.not_scored(lambda arm: arm.startswith(FAMILY_ARM_PREFIX))
    if why is not None:
        return f"the family arms ran ({', '.join(ran)}), but {why}"
    return "no scored model answered a whole family (every statement) in any pass"


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    rates = family_rates(inputs)
    if rates.height == 0:
        raise Omit(_left_out(inputs))
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
    cents = inputs.arbitrage_free_cents
    if len(models) > MAX_BAR_MODELS:
        return _draw_table(arms, groups, models, cell, path, cents)
    plt = _style.pyplot()
    fig, axes = plt.subplots(
        len(arms), 1, figsize=(_style.WIDTH, 2.6 * len(arms) + 0.8), squeeze=False, sharex=True
    )
    styles = _style.model_styles(inputs.models)
    for ax, arm in zip((a[0] for a in axes), arms, strict=True):
        _panel(ax, arm, groups, models, styles, cell)
    handles, labels = _style.legend_entries((a[0] for a in axes), models)
    legend = _style.bottom_legend(fig, handles, labels, min(len(models), 5))
    _style.tight_layout(fig, rect=(0, legend, 1, 1))
    _style.save(fig, path)
    return (
        f"Share of families on which the L1 bookie locks in at most {cents:g} (profit averaged "
        "over passes), by family shape, for statements asked one at a time and a whole family "
        "asked in one query; control families (exact probabilities known) apart on the right. "
        "The number under each group is how many families it holds. A slot left empty is a "
        "model with no scored family there: one under the coverage floor on a family arm is "
        "scored on none (a zero is drawn as 0)."
    )


def _draw_table(
    arms: Sequence[str],
    groups: Sequence[str],
    models: Sequence[str],
    cell: Mapping[tuple[str, str, str], tuple[float, int]],
    path: Path,
    cents: float,
) -> str:
    """Many models: per arm, one row per model and one column per shape, each cell the share
    written in it and shaded by it (blank where the model answered no family of the shape)."""
    shown = list(models[:MAX_ROWS])
    plt = _style.pyplot()
    fig, axes = plt.subplots(
        1, len(arms), figsize=(_style.WIDTH, 0.22 * len(shown) + 1.6), squeeze=False, sharey=True
    )
    for ax, arm in zip(axes[0], arms, strict=True):
        shares = np.array(
            [[cell.get((m, arm, g), (np.nan, 0))[0] for g in groups] for m in shown], dtype=float
        )
        image = ax.imshow(shares, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        for (row, column), value in np.ndenumerate(shares):
            if not np.isnan(value):
                colour = "black" if value > 0.6 else "white"
                ax.text(column, row, f"{value:.0%}", ha="center", va="center", fontsize=6,
                        color=colour)  # fmt: skip
        labels = _group_labels(arm, groups, cell, " ")
        ax.set_xticks(range(len(groups)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(shown)), shown, fontsize=7)
        ax.set_title(arm.removeprefix(FAMILY_ARM_PREFIX), loc="left", fontsize=9)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.6, label="arbitrage-free share")
    _style.save(fig, path)
    left_out = (
        f" Drawn: the first {MAX_ROWS} of {len(models):,} models by name; every model's "
        "shares are in families.csv."
        if len(models) > MAX_ROWS
        else ""
    )
    return (
        f"Share of families on which the L1 bookie locks in at most {cents:g} (profit averaged "
        "over passes), per model (rows) and family shape (columns), for each family arm; "
        "control families (exact probabilities known) in the last column. Blank: no family "
        "of that shape was answered." + left_out
    )


def _group_labels(
    arm: str,
    groups: Sequence[str],
    cell: Mapping[tuple[str, str, str], tuple[float, int]],
    between: str,
) -> list[str]:
    """Each group's name and how many families it holds in `arm` (models that answered
    different numbers: each number, "4/5")."""
    labels = []
    for group in groups:
        ns = {cell[k][1] for k in cell if k[1] == arm and k[2] == group}
        labels.append(f"{group}{between}(n={'/'.join(str(n) for n in sorted(ns)) if ns else 0})")
    return labels


def _panel(
    ax: Any,
    arm: str,
    groups: Sequence[str],
    models: Sequence[str],
    styles: Mapping[str, _style.ModelStyle],
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
        if not xs:  # no bar: an empty one's legend swatch was matplotlib's colour, not its
            continue
        style = styles[model]
        ax.bar(xs, hs, width=width * 0.92, color=style.colour, hatch=style.hatch or None,
               edgecolor="white" if style.hatch else None, label=model)  # fmt: skip
        for x, h in zip(xs, hs, strict=True):
            if h == 0.0:  # a zero bar is invisible: say it, so it is not read as missing
                ax.text(x, 0.01, "0", ha="center", va="bottom", fontsize=7, color=style.colour)
    ax.set_xticks(range(len(groups)), _group_labels(arm, groups, cell, "\n"), fontsize=8)
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
