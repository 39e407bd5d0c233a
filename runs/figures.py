"""The report's figures, drawn from `summary.json`'s shape alone (so they can be redrawn).

- `profit_brier.png` (the paper's Figure 2): each scored model's mean baseline profit and mean
  Brier score with their 95% date-clustered intervals, side by side, most coherent first.
- `arms.png` (the paper's Figure 4): mean profit of every sup-norm arm with its interval, one
  marker per model. Family arms are left out: their L1 profit is on another scale.

matplotlib is optional: without it the report says so in one line and carries on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BASELINE_ARM = "baseline"
#: Beyond 20 models colours repeat, so the marker changes with them.
_MARKERS = ("o", "s", "^", "D")


def write_figures(summary: Mapping[str, Any], out_dir: Path) -> dict[str, str | None]:
    """Draw both figures into `out_dir`; returns their paths (None when not drawn) and a note."""
    result: dict[str, str | None] = {"profit_brier": None, "arms": None, "note": None}
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt  # noqa: F401
    except ImportError:
        result["note"] = "figures skipped: matplotlib is not installed (make install adds it)"
        return result
    rows = [r for r in summary.get("rows", []) if r.get("scored") and r.get("profit")]
    baseline_arm = str(summary.get("baseline_arm", BASELINE_ARM))
    base = [r for r in rows if r["arm"] == baseline_arm]
    if base:
        path = out_dir / "profit_brier.png"
        _profit_brier(base, path)
        result["profit_brier"] = str(path)
    arms = [r for r in rows if r.get("norm") == "inf"]
    if arms:
        path = out_dir / "arms.png"
        _arms(arms, baseline_arm, path)
        result["arms"] = str(path)
    if result["profit_brier"] is None and result["arms"] is None:
        result["note"] = "figures skipped: no scored model on a sup-norm arm"
    return result


def _errors(ivs: Sequence[Mapping[str, float]]) -> list[list[float]]:
    """Asymmetric error-bar lengths (matplotlib wants distances, not bounds)."""
    return [
        [max(iv["mean"] - iv["lo"], 0.0) for iv in ivs],
        [max(iv["hi"] - iv["mean"], 0.0) for iv in ivs],
    ]


def _use_log(values: Sequence[float]) -> bool:
    """Log scale when models span two decades or more (the paper's profits span ~100x)."""
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) and bool(positive) and max(positive) / min(positive) >= 100


def _profit_brier(base: Sequence[Mapping[str, Any]], path: Path) -> None:
    import matplotlib.pyplot as plt

    base = sorted(base, key=lambda r: (r["profit"]["mean"], r["model"]))
    names = [r["model"] for r in base]
    y = list(range(len(base)))
    height = max(2.5, 0.4 * len(base) + 1.2)
    fig, (ax_p, ax_b) = plt.subplots(1, 2, figsize=(10, height), sharey=True)
    profits = [r["profit"] for r in base]
    ax_p.errorbar(
        [iv["mean"] for iv in profits], y, xerr=_errors(profits), fmt="o", color="C0", capsize=3
    )
    if _use_log([iv["lo"] for iv in profits]):
        ax_p.set_xscale("log")
    ax_p.set_xlabel("mean profit per unit stake (baseline)")
    ax_p.set_title("Incoherence")
    briered = [(i, r["brier"]) for i, r in enumerate(base) if r.get("brier")]
    if briered:
        ivs = [iv for _, iv in briered]
        ax_b.errorbar(
            [iv["mean"] for iv in ivs],
            [i for i, _ in briered],
            xerr=_errors(ivs),
            fmt="s",
            color="C1",
            capsize=3,
        )
    else:
        ax_b.text(
            0.5, 0.5, "no outcomes: Brier not available", ha="center", transform=ax_b.transAxes
        )
    ax_b.set_xlabel("mean Brier score (baseline)")
    ax_b.set_title("Accuracy")
    ax_p.set_yticks(y, names)
    ax_p.invert_yaxis()
    for ax in (ax_p, ax_b):
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Mean profit and Brier score per model, 95% date-clustered intervals")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _arms(rows: Sequence[Mapping[str, Any]], baseline_arm: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    arms = sorted({r["arm"] for r in rows}, key=lambda a: (a != baseline_arm, a))
    models = sorted({r["model"] for r in rows})
    cell = {(r["model"], r["arm"]): r["profit"] for r in rows}
    height = max(2.5, 0.22 * len(arms) * max(1.0, math.sqrt(len(models))) + 1.5)
    colours = plt.get_cmap("tab20" if len(models) > 10 else "tab10")
    fig, ax = plt.subplots(figsize=(9, height))
    spread = 0.7
    step = spread / max(len(models), 1)
    for j, model in enumerate(models):
        ivs, ys = [], []
        for i, arm in enumerate(arms):
            iv = cell.get((model, arm))
            if iv is not None:
                ivs.append(iv)
                ys.append(i - spread / 2 + step * (j + 0.5))
        if ivs:
            ax.errorbar(
                [iv["mean"] for iv in ivs],
                ys,
                xerr=_errors(ivs),
                fmt=_MARKERS[(j // 20) % len(_MARKERS)],
                markersize=4,
                capsize=2,
                label=model,
                color=colours(j % 20 if len(models) > 10 else j % 10),
            )
    if _use_log([iv["lo"] for iv in cell.values()]):
        ax.set_xscale("log")
    ax.set_yticks(range(len(arms)), arms)
    ax.invert_yaxis()
    for i in range(1, len(arms)):
        ax.axhline(i - 0.5, color="0.85", linewidth=0.6)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("mean profit per unit stake (95% date-clustered interval)")
    ax.set_title("Incoherence by elicitation arm")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
