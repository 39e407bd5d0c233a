"""Figure 7: repeated elicitation (the paper's Figure 4, panel C): mean profit after averaging
each event's answers over the first k passes, k = 1..passes, with 95% date-clustered
intervals (family-clustered, in L1, for question families); the dashed line is the mean
profit of single passes, which by convexity the average of all passes can never exceed when
every pass answered the same events (an average of fewer passes is bounded only by the mean of
those passes, and an average over passes that left different events unanswered holds events a
single pass lacked, so either may land on either side)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "Repeated elicitation: averaging k passes"
#: Up to this many passes each k is a marker with its interval's error bar and its own tick;
#: beyond, the curve is a line in a shaded band of its intervals, with a few integer ticks
#: (hundreds of error bars and tick labels drew a solid block and took seconds).
MANY_PASSES = 20
#: Panels (arms) per row: the paper's sweep scores ten arms with several passes, and ten
#: panels side by side left each too narrow for its labels (matplotlib's tight layout gave
#: up, with a warning on the run's stderr).
PANELS_PER_ROW = 3
#: The height of one row of panels (inches).
ROW_HEIGHT = 3.4


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    cells = [
        r
        for r in (inputs.summary.get("repeated_elicitation") or [])
        if any(_style.interval(b) is not None for b in r.get("by_k", []))
    ]
    if not cells:
        raise Omit("no arm was scored with two or more passes")
    plt = _style.pyplot()
    arms = sorted({c["arm"] for c in cells})
    columns = min(len(arms), PANELS_PER_ROW)
    rows = -(-len(arms) // columns)
    fig, grid = plt.subplots(
        rows, columns, figsize=(_style.WIDTH, ROW_HEIGHT * rows), squeeze=False, sharey=False
    )
    axes = [ax for row in grid for ax in row]
    for unused in axes[len(arms):]:
        unused.set_visible(False)
    styles = _style.model_styles(inputs.models)
    dodged = False
    for ax, arm in zip(axes[: len(arms)], arms, strict=True):
        drawn = sorted((c for c in cells if c["arm"] == arm), key=lambda c: str(c["model"]))
        for position, cell in enumerate(drawn):
            points = [(b["k"], iv) for b in cell["by_k"] if (iv := _style.interval(b))]
            colour, marker, _ = styles[cell["model"]]
            many = cell["passes"] > MANY_PASSES
            shift = 0.0 if many else _dodge(position, len(drawn))
            dodged |= shift != 0.0
            _curve(ax, points, colour, marker, cell["model"], many, shift)
            single = cell.get("single_pass_mean")
            if single is not None:
                ax.axhline(single, color=colour, linestyle="--", linewidth=0.9, alpha=0.8)
        passes = max(c["passes"] for c in cells if c["arm"] == arm)
        if passes <= MANY_PASSES:
            ax.set_xticks(range(1, passes + 1))
        else:  # a label per k would print hundreds of them on top of one another
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("passes averaged (k)")
        ax.set_title(arm, loc="left")
        ax.grid(alpha=0.3)
    metric, clusters = _words(inputs.summary.get("rows") or [], set(arms))
    for row in grid:
        row[0].set_ylabel(f"mean {metric}")
    models = sorted({c["model"] for c in cells})
    handles, labels = _style.legend_entries(axes, models)
    legend = _style.bottom_legend(fig, handles, labels, min(len(labels), 4))
    _style.tight_layout(fig, rect=(0, legend, 1, 1))
    _style.save(fig, path)
    return (
        f"Mean {metric} after averaging each event's answers over the first k passes, then "
        f"solving, with 95% {clusters} intervals. Dashed: the mean profit of single passes, "
        "which the average of all passes can never exceed when every pass answered the same "
        "questions (the profit is convex); an average of fewer passes, or over passes that "
        "left different questions unanswered, may land on either side of it."
        + (" The models' markers at one k are set a few points apart, so that none hides "
           "another." if dodged else "")
    )


def _words(rows: Sequence[Mapping[str, Any]], arms: set[str]) -> tuple[str, str]:
    """The profit's metric and the intervals' clusters for the arms drawn, from the norms the
    summary's rows give them: the family benchmark's arms are scored in L1 and resampled by
    family, the paper's per unit stake and by date."""
    norms = {r.get("norm") for r in rows if r.get("arm") in arms}
    if norms == {"l1"}:
        return "L1 profit", "family-clustered"
    if "l1" in norms:
        return "profit (question families' in L1)", "date- or family-clustered"
    return "profit per unit stake", "date-clustered"


#: How far apart, in points of the page (not passes: a panel of 20 passes drew a shift of
#: 0.04 pass on one pixel), the markers of the models drawn at one k are set at most.
DODGE_POINTS = 4.0


def _dodge(position: int, count: int) -> float:
    """The shift, in points, of the `position`-th model's curve: side by side, centred on k,
    so that two models at one value (two coherent ones at 0) do not draw one marker on the
    other (a referee saw one model's markers hidden whole under another's)."""
    step = min(DODGE_POINTS, 30.0 / max(count, 1))
    return (position - (count - 1) / 2) * step


def _curve(
    ax: Any,
    points: Sequence[tuple[int, Mapping[str, float]]],
    colour: Any,
    marker: str,
    label: str,
    many: bool,
    shift: float = 0.0,
) -> None:
    from matplotlib.transforms import offset_copy

    moved = offset_copy(ax.transData, fig=ax.figure, x=shift, y=0.0, units="points")
    ks = [k for k, _ in points]
    ivs = [iv for _, iv in points]
    means = [iv["mean"] for iv in ivs]
    if not many:
        ax.errorbar(
            ks, means, yerr=_style.errors(ivs), fmt=marker + "-", color=colour, capsize=3,
            label=label, transform=moved,
        )  # fmt: skip
        # Drawn through an offset transform, the curve is no data to autoscaling: say its
        # extent (k, each end of each interval, its mean where none is drawn) in data
        # coordinates. An unknown end (a single date) left the k axis beginning at 0 and the
        # last pass's markers cut in half.
        ax.update_datalim([(k, _style.known_end(iv, end))
                           for k, iv in zip(ks, ivs, strict=True)
                           for end in ("lo", "hi")])  # fmt: skip
        ax.autoscale_view()
        return
    ax.plot(ks, means, "-", color=colour, linewidth=1.2, label=label)
    lo = [iv["lo"] for iv in ivs]
    hi = [iv["hi"] for iv in ivs]
    ax.fill_between(ks, lo, hi, color=colour, alpha=0.2, linewidth=0)

