"""Figure 7: repeated elicitation (the paper's Figure 4, panel C): mean profit after averaging
each event's answers over the first k passes, k = 1..passes, with 95% date-clustered
intervals; the dashed line is the mean profit of single passes, which by convexity the
averaged forecast can never exceed."""

from __future__ import annotations

from pathlib import Path

from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "Repeated elicitation: averaging k passes"


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
    fig, axes = plt.subplots(1, len(arms), figsize=(_style.WIDTH, 3.4), squeeze=False, sharey=False)
    styles = _style.model_styles(sorted({c["model"] for c in cells}))
    for ax, arm in zip(axes[0], arms, strict=True):
        for cell in (c for c in cells if c["arm"] == arm):
            points = [(b["k"], iv) for b in cell["by_k"] if (iv := _style.interval(b))]
            colour, marker = styles[cell["model"]]
            ks = [k for k, _ in points]
            ivs = [iv for _, iv in points]
            ax.errorbar(
                ks,
                [iv["mean"] for iv in ivs],
                yerr=_style.errors(ivs),
                fmt=marker + "-",
                color=colour,
                capsize=3,
                label=cell["model"],
            )
            single = cell.get("single_pass_mean")
            if single is not None:
                ax.axhline(single, color=colour, linestyle="--", linewidth=0.9, alpha=0.8)
        ax.set_xticks(range(1, max(c["passes"] for c in cells if c["arm"] == arm) + 1))
        ax.set_xlabel("passes averaged (k)")
        ax.set_title(arm, loc="left")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean profit per unit stake")
    axes[0][0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    _style.save(fig, path)
    return (
        "Mean profit per unit stake after averaging each event's answers over the first k "
        "passes, then solving, with 95% date-clustered intervals. Dashed: the mean profit of "
        "single passes, which the averaged forecast can never exceed (the profit is convex)."
    )
