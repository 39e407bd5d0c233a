"""Figure 3: assets and horizons (the paper's Figure 3).

(A) two assets: mean profit of one asset's 14 marginals (A, B), of both assets' marginals,
and of the marginals with the 16 joint cells, beside the same model's baseline;
(B) horizons: at each horizon h, the profit of each day's marginals (d1..dh), of all the
marginals, and of the whole panel with the joint events across days.
One row of panels per model that ran these arms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "Assets and horizons: joint events add incoherence"
TWO_ASSET = "two-asset"
_ASSET_SETS = (
    ("A", "asset A alone"),
    ("B", "asset B alone"),
    ("marginals", "both marginals"),
    ("full", "with joint cells"),
)


def _cells(inputs: FigureInputs) -> dict[str, dict[str, Mapping[str, float]]]:
    """model -> row label -> profit interval, for the baseline, two-asset and horizon rows."""
    out: dict[str, dict[str, Mapping[str, float]]] = {}
    for r in inputs.rows:
        label = str(r["arm"])
        if label == inputs.baseline_arm or label.startswith((TWO_ASSET + " ", "horizon/")):
            out.setdefault(str(r["model"]), {})[label] = r["profit"]
    return out


def _horizons(cells: Mapping[str, Any]) -> list[int]:
    return sorted({int(k.split(" ")[0].split("/")[1]) for k in cells if k.startswith("horizon/")})


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    cells = _cells(inputs)
    models = [
        m for m, c in cells.items() if any(k.startswith((TWO_ASSET + " ", "horizon/")) for k in c)
    ]
    if not models:
        why = inputs.not_scored(lambda arm: arm.startswith((TWO_ASSET, "horizon/")))
        raise Omit(
            f"the two-asset or horizon arms ran, but {why}" if why is not None
            else "neither the two-asset arm nor a horizon arm was run"
        )  # fmt: skip
    has_assets = any(any(k.startswith(TWO_ASSET + " ") for k in cells[m]) for m in models)
    has_days = any(_horizons(cells[m]) for m in models)
    plt = _style.pyplot()
    ncols = int(has_assets) + int(has_days)
    fig, axes = plt.subplots(
        len(models),
        ncols,
        figsize=(_style.WIDTH + (1.5 if ncols == 2 else 0), 3.2 * len(models)),
        squeeze=False,
        width_ratios=[1, 2.0] if ncols == 2 else [1],
    )
    for row, model in enumerate(models):
        col = 0
        if has_assets:
            _assets(axes[row][col], model, cells[model], inputs.baseline_arm)
            col += 1
        if has_days:
            _days(axes[row][col], model, cells[model], inputs.baseline_arm)
    _style.tight_layout(fig)
    _style.save(fig, path)
    # Said only where a line is drawn: a model without a scored baseline has none.
    dashed = any(inputs.baseline_arm in cells[m] for m in models)
    return (
        "Mean profit per unit stake with 95% date-clustered intervals"
        + ("; the dashed line is the same model's baseline arm" if dashed else "")
        + ". (A) Two assets asked in "
        "one prompt: each asset's marginals alone, both together, and with the 16 joint cells. "
        "(B) Longer horizons: each day's marginals (d1...), all the marginals (all), and the whole "
        "panel with the joint events across days (joint); compare within a horizon, since "
        "each horizon's prompt differs (the paper's footnote 3). The tables name these rows "
        "two-asset A, B, marginals and full, and horizon/h d1..., marginals and full."
    )


def _bars(
    ax: Any,
    labels: Sequence[str],
    ivs: Sequence[Mapping[str, float] | None],
    colours: Sequence[str],
) -> None:
    xs = [i for i, iv in enumerate(ivs) if iv is not None]
    present = [iv for iv in ivs if iv is not None]
    ax.bar(xs, [iv["mean"] for iv in present], color=[colours[i] for i in xs], width=0.7)
    ax.errorbar(
        xs,
        [iv["mean"] for iv in present],
        yerr=_style.errors(present),
        fmt="none",
        ecolor="0.2",
        capsize=3,
    )
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylabel("mean profit per unit stake")


def _baseline_line(ax: Any, cells: Mapping[str, Mapping[str, float]], baseline: str) -> None:
    iv = cells.get(baseline)
    if iv is not None:
        # Said in the caption, not a legend: a legend's box, wherever put, hid bars or their
        # intervals in some panel (lower right, the short bars a reader compares).
        ax.axhline(iv["mean"], color="0.4", linestyle="--", linewidth=1)


def _not_run(ax: Any, why: str) -> None:
    """A panel another model's row has and this one's does not: said in its slot, which would
    otherwise be left blank (the rows keep their columns aligned)."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=9, color="0.4",
            transform=ax.transAxes)  # fmt: skip


def _assets(ax: Any, model: str, cells: Mapping[str, Mapping[str, float]], baseline: str) -> None:
    ivs = [cells.get(f"{TWO_ASSET} {key}") for key, _ in _ASSET_SETS]
    if not any(ivs):
        _not_run(ax, f"(A) two assets: the two-asset arm\nwas not run for {model}")
        return
    _bars(
        ax,
        [label.replace(" ", "\n", 1) for _, label in _ASSET_SETS],
        ivs,
        ["#93c5fd", "#93c5fd", "#3b82f6", "#1e3a8a"],
    )
    _baseline_line(ax, cells, baseline)
    # The name on a line of its own: a long one ran into panel (B)'s title beside it.
    ax.set_title(f"(A) two assets\n{_style.isolated(_style.short_name(model))}", loc="left")


def _days(ax: Any, model: str, cells: Mapping[str, Mapping[str, float]], baseline: str) -> None:
    horizons = _horizons(cells)
    if not horizons:
        _not_run(ax, f"(B) horizons: no horizon arm\nwas run for {model}")
        return
    labels: list[str] = []
    ivs: list[Mapping[str, float] | None] = []
    colours: list[str] = []
    groups: list[tuple[int, float]] = []
    for h in horizons:
        first = len(labels)
        for key, label, colour in [
            *((f"d{d}", f"d{d}", "#fcd34d") for d in range(1, h + 1)),
            ("marginals", "all", "#f59e0b"),
            ("full", "joint", "#92400e"),
        ]:
            labels.append(label)
            ivs.append(cells.get(f"horizon/{h} {key}"))
            colours.append(colour)
        groups.append((h, (first + len(labels) - 1) / 2))
        labels.append("")
        ivs.append(None)
        colours.append("none")
    _bars(ax, labels[:-1], ivs[:-1], colours[:-1])
    for h, centre in groups:  # the horizon under its group of bars
        ax.annotate(f"horizon {h}", xy=(centre, 0), xycoords=("data", "axes fraction"),
                    xytext=(0, -24), textcoords="offset points", ha="center", va="top",
                    fontsize=9)  # fmt: skip
    _baseline_line(ax, cells, baseline)
    name = _style.isolated(_style.short_name(model))
    ax.set_title(f"(B) horizons — {name}: each day, all marginals, with joint events", loc="left")
