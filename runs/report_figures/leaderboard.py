"""Figure 2: the model leaderboard on the baseline arm, mean profit and mean Brier score with
their 95% date-clustered intervals, most coherent first (the paper's Figure 2)."""

from __future__ import annotations

import math
from pathlib import Path

from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "Model leaderboard: incoherence and accuracy"


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    base = [r for r in inputs.rows if r["arm"] == inputs.baseline_arm]
    if not base:
        raise Omit(f"no model was scored on the {inputs.baseline_arm} arm")
    base.sort(key=lambda r: (r["profit"]["mean"], r["model"]))
    plt = _style.pyplot()
    shown = _style.short_names(r["model"] for r in base)  # tick labels: the panels keep room
    names = [shown[r["model"]] for r in base]
    y = list(range(len(base)))
    briered = [
        (i, iv) for i, r in enumerate(base) if (iv := _style.interval(r.get("brier"))) is not None
    ]
    # Without outcomes (unresolved arms) there is no Brier panel at all, not an empty one.
    ncols = 2 if briered else 1
    fig, axes = plt.subplots(
        1,
        ncols,
        figsize=(_style.WIDTH if briered else _style.WIDTH * 0.6, max(2.4, 0.38 * len(base) + 1.3)),
        sharey=True,
        squeeze=False,
    )
    ax_p = axes[0][0]
    profits = [r["profit"] for r in base]
    ax_p.errorbar(
        [iv["mean"] for iv in profits],
        y,
        xerr=_style.errors(profits),
        fmt="o",
        color="C0",
        capsize=3,
    )
    if _style.use_log([iv["mean"] for iv in profits]):
        _style.log_x_axis(ax_p)
        ax_p.set_xlim(left=min(iv["mean"] for iv in profits) / 3)
    ax_p.set_xlabel("mean profit per unit stake")
    ax_p.set_title("Incoherence (lower is better)")
    if briered:
        ax_b = axes[0][1]
        ivs = [iv for _, iv in briered]
        ax_b.errorbar(
            [iv["mean"] for iv in ivs],
            [i for i, _ in briered],
            xerr=_style.errors(ivs),
            fmt="s",
            color="C1",
            capsize=3,
        )
        ax_b.set_title("Accuracy: Brier score (lower is better)")
        ax_b.set_xlabel("mean Brier score")
        ax_b.grid(axis="x", alpha=0.3)
    ax_p.set_yticks(y, names)
    ax_p.set_ylim(len(base) - 0.5, -0.5)
    ax_p.grid(axis="x", alpha=0.3)
    _style.tight_layout(fig)
    _style.save(fig, path)
    return (
        f"Mean arbitrage profit per unit stake and mean Brier score of each model on the "
        f"{inputs.baseline_arm} arm, "
        f"{_intervals_said(profits + [iv for _, iv in briered])}; models ordered from most to "
        "least coherent."
        + ("" if briered else " No outcome is known, so there is no Brier score.")
    )


def _intervals_said(ivs: list[dict[str, float | None]]) -> str:
    """What the caption says of the intervals drawn (profit's and Brier's): a real model's
    two-stock, one-date run drew bare points under a caption that promised intervals."""
    drawn = sum(1 for iv in ivs if not any(math.isnan(e) for e in _one(iv)))
    if drawn == len(ivs):
        return "with 95% date-clustered bootstrap intervals"
    if not drawn:
        return "without intervals (fewer than two dates with scores give none)"
    return (
        "with 95% date-clustered bootstrap intervals (none where fewer than two dates have "
        "scores)"
    )


def _one(iv: dict[str, float | None]) -> list[float]:
    """An interval's two error-bar lengths (`_style.errors` of it alone; NaN: none)."""
    lower, upper = _style.errors([iv])
    return [lower[0], upper[0]]
