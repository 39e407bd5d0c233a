"""Figure 4: every elicitation arm against the baseline (the paper's Figure 4, panels A, B, D):
the paired difference in mean profit (arm - baseline) on the same stock-days, with its 95%
date-clustered interval, one marker per model. Panel C, repeated elicitation, is figure 7.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs
from scoring.stats import excludes_zero

TITLE = "Elicitation arms against the baseline"
#: The paper's panels, in its order, with its letters: (C), repeated elicitation, is figure 7,
#: so the letters skip it on purpose. An arm in none of them goes to "other".
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("(A) information", ("statistics", "instructions", "identity", "headline")),
    ("(B) several events per query", ("complement-pairs", "relation-poor-pairs", "full-panel")),
    ("(D) irrelevant context", ("red-herring/",)),
    ("unresolved outcomes", ("unresolved/",)),
)


def group_of(arm: str) -> str:
    for name, members in GROUPS:
        if any(arm == m or (m.endswith("/") and arm.startswith(m)) for m in members):
            return name
    return "other"


def paired_rows(inputs: FigureInputs) -> list[Mapping[str, Any]]:
    """Rows of single-set arms with a paired difference against the baseline.

    Row labels with a space are one kind of set of a multi-set arm (`horizon/2 d1`); they are
    figure 3's, not comparisons of elicitation on the same question.
    """
    return [
        r
        for r in inputs.rows
        if " " not in r["arm"] and _style.interval(r.get("vs_baseline")) is not None
    ]


#: Models a row of the legend holds.
LEGEND_COLUMNS = 4


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    rows = paired_rows(inputs)
    if not rows:
        # The horizon and two-asset arms ran on the baseline's stock-days are paired with
        # it in the table too, but drawn in figure 3 (linked and dispersed: figure 5): "no
        # arm ... was run on the same stock-days" was untrue beside them.
        if not any(r["arm"] == inputs.baseline_arm for r in inputs.rows):
            raise Omit(
                f"the {inputs.baseline_arm} arm was not run (or not scored): nothing to pair "
                "the other arms with"
            )
        raise Omit(
            f"no elicitation arm other than {inputs.baseline_arm} was run on the same "
            "stock-days (nothing to pair; the horizon and two-asset arms are figure 3's, "
            "linked and dispersed figure 5's)"
        )
    order = [name for name, _ in GROUPS] + ["other"]
    groups: dict[str, list[str]] = {}
    for r in rows:
        arms = groups.setdefault(group_of(r["arm"]), [])
        if r["arm"] not in arms:
            arms.append(r["arm"])
    panels = [(g, sorted(groups[g])) for g in order if g in groups]
    models = sorted({r["model"] for r in rows})
    styles = _style.model_styles(inputs.models)
    cell = {(r["model"], r["arm"]): _style.interval(r["vs_baseline"]) for r in rows}
    plt = _style.pyplot()
    heights = [len(arms) + 1.0 for _, arms in panels]
    # The legend's rows get room of their own: 30 models' 8 rows were drawn over a panel of
    # one arm.
    legend_rows = -(-len(models) // LEGEND_COLUMNS)
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(_style.WIDTH, 0.42 * sum(heights) + 1.2 + 0.2 * max(legend_rows - 2, 0)),
        squeeze=False,
        height_ratios=heights,
    )
    for ax, (name, arms) in zip((a[0] for a in axes), panels, strict=True):
        _panel(ax, name, arms, models, styles, cell)
    _, labels = _style.legend_entries((a[0] for a in axes), models)
    legend = 0.0
    if len(models) > 1:
        legend = _style.bottom_legend(
            fig, _swatches(labels, styles), labels, min(len(models), LEGEND_COLUMNS)
        )
    axes[-1][0].set_xlabel(f"mean profit, arm minus {inputs.baseline_arm} (paired by stock-day)")
    _style.tight_layout(fig, rect=(0, legend, 1, 1))
    _style.save(fig, path)
    return (
        f"Paired difference in mean profit per unit stake between each arm and the "
        f"{inputs.baseline_arm} arm on the same stock-days (right of zero: the arm is less "
        "coherent), with 95% date-clustered intervals; a filled marker's interval excludes zero."
        + _letters_said(name for name, _ in panels)
    )


def _swatches(labels: Sequence[str], styles: Mapping[str, _style.ModelStyle]) -> list[Any]:
    """Each model's legend marker, always filled: a drawn handle is filled or hollow as that
    model's first point excludes zero or not, which a reader would take as said of the model
    (the caption says what filled means, point by point)."""
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], marker=styles[m].marker, color=styles[m].colour, linestyle="none",
               markersize=5)
        for m in labels
    ]


def _letters_said(drawn: Iterable[str]) -> str:
    """The caption's word on the letters, which are the paper's (`GROUPS`): a reader saw
    (A), (B), (D) and looked for (C). A panel whose arms were not run is left out with its
    letter."""
    if not any(name.startswith("(") for name in drawn):
        return ""
    return (
        " Panels are lettered as in the paper's Figure 4: its panel (C), repeated elicitation, "
        "is figure 7."
    )


def _panel(
    ax: Any,
    name: str,
    arms: Sequence[str],
    models: Sequence[str],
    styles: Mapping[str, _style.ModelStyle],
    cell: Mapping[tuple[str, str], Mapping[str, float] | None],
) -> None:
    spread = 0.6
    step = spread / max(len(models), 1)
    labelled: set[str] = set()
    for j, model in enumerate(models):
        colour, marker, _ = styles[model]
        for i, arm in enumerate(arms):
            iv = cell.get((model, arm))
            if iv is None:
                continue
            y = i - spread / 2 + step * (j + 0.5)
            significant = excludes_zero(iv["lo"], iv["hi"])
            ax.errorbar(
                [iv["mean"]],
                [y],
                xerr=_style.errors([iv]),
                fmt=marker,
                color=colour,
                markerfacecolor=colour if significant else "white",
                capsize=2,
                markersize=5,
                label=None if model in labelled else model,
            )
            labelled.add(model)
    ax.axvline(0.0, color="0.3", linewidth=0.9)
    ax.set_yticks(range(len(arms)), arms)
    ax.set_ylim(len(arms) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(name, loc="left")
