"""Figure 5: linked against dispersed event sets (the paper's Figures 5 and 6).

Both kinds of set hold four marginals and four joint events; a linked set's joint events
decompose one marginal, a dispersed set's are spread over all four. Per model and per kind
(two assets, two days): the mean profit of each, and the paired difference linked - dispersed
on the same units with its 95% date-clustered interval, as the summary gives it
(`linked_vs_dispersed`, computed by `runs.report.data`), or computed the same way from the
scores for a summary written before that key.
As in the paper, panels (A) and (B) show one set of each kind (the bins each event covers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import polars as pl

from engine.console_lines import plural
from runs.report.data import linked_differences
from runs.report.wording import difference_text
from runs.report_figures import _style
from runs.report_figures.books import draw_events
from runs.report_figures.inputs import FigureInputs

TITLE = "Linked against dispersed event sets"
KINDS = (("assets", "two assets (the paper's Figure 5)"),
         ("days", "two days (the paper's Figure 6)"))  # not this page's figures 5 and 6


@dataclass(frozen=True)
class LinkedCell:
    model: str
    kind: str
    linked: Mapping[str, float] | None
    dispersed: Mapping[str, float] | None
    #: The summary's paired difference, linked - dispersed: `mean`, `lo`, `hi` (ends null where
    #: one date gives no interval); None where there is none.
    difference: Mapping[str, float | None] | None
    units: int


def linked_cells(inputs: FigureInputs) -> list[LinkedCell]:
    """One cell per (model, kind) that has linked or dispersed rows in the summary, with the
    summary's paired difference (`linked_vs_dispersed`, `runs.report.data`): computed once,
    there, for the tables and the page as for this figure."""
    rows = {(r["model"], r["arm"]): r["profit"] for r in inputs.rows}
    models = sorted({m for m, arm in rows if arm.startswith(("linked (", "dispersed ("))})
    pairs = {(e["model"], e["kind"]): e for e in _differences(inputs)}
    out = []
    for model in models:
        for kind, _ in KINDS:
            linked = rows.get((model, f"linked ({kind})"))
            dispersed = rows.get((model, f"dispersed ({kind})"))
            if linked is None and dispersed is None:
                continue
            pair = pairs.get((model, kind))
            diff = None if pair is None else {k: pair.get(k) for k in ("mean", "lo", "hi")}
            out.append(LinkedCell(model, kind, linked, dispersed, diff,
                                  0 if pair is None else int(pair["units"])))  # fmt: skip
    return out


def _differences(inputs: FigureInputs) -> Sequence[Mapping[str, Any]]:
    """The summary's `linked_vs_dispersed`, or, from a summary written before that key (the
    public `draw_all(FigureInputs.from_run(run, summary))` of an older report), the same
    computed from the scores: read from the summary alone, the figure lost them."""
    if "linked_vs_dispersed" in inputs.summary:
        return list(inputs.summary["linked_vs_dispersed"] or [])
    if inputs.scores is None:
        return []
    scored = {(str(r["model"]), str(r["arm"])) for r in inputs.rows}
    # Only the two arms' scores are read (a paper-scale scores table is not loaded whole).
    scores = inputs.scores.filter(pl.col("arm").is_in(["linked", "dispersed"])).collect()
    return linked_differences(scores, scored, inputs.seed, inputs.reps)


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    cells = linked_cells(inputs)
    if not cells:
        why = inputs.not_scored(lambda arm: arm.startswith(("linked", "dispersed")))
        raise Omit(
            f"the linked or dispersed arms ran, but {why}" if why is not None
            else "neither the linked nor the dispersed arm was run"
        )  # fmt: skip
    plt = _style.pyplot()
    kinds = [(k, t) for k, t in KINDS if any(c.kind == k for c in cells)]
    models = sorted({c.model for c in cells})
    height = max(3.2, 1.0 + 1.1 * len(models) + 1.2)
    fig, axes = plt.subplots(
        len(kinds), 3, figsize=(_style.WIDTH + 2, height * len(kinds)), squeeze=False,
        width_ratios=[1, 1, 1.5],
    )  # fmt: skip
    for row, (kind, title) in zip(axes, kinds, strict=True):
        dispersed, linked = _examples(kind)
        draw_events(row[0], dispersed)
        row[0].set_title(f"(A) a dispersed set, {kind}", loc="left", fontsize=9)
        draw_events(row[1], linked)
        row[1].set_title(f"(B) a linked set, {kind}", loc="left", fontsize=9)
        _panel(row[2], [c for c in cells if c.kind == kind], f"(C) {title}")
    _style.tight_layout(fig)
    _style.save(fig, path)
    lines = [
        f"{c.model}, {c.kind}: linked - dispersed {difference_text(c.difference, 5)} "
        f"over {plural(c.units, 'unit')}"
        for c in cells
        if c.difference is not None
    ]
    return (
        "Mean profit per unit stake of linked and dispersed sets (four marginals and four joint "
        "events each: a linked set's joint events split one marginal, a dispersed set's are "
        "spread over all four), with 95% date-clustered intervals. "
        + ("; ".join(lines) + "." if lines else "")
    )


def _examples(kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The first dispersed and the first linked set of a kind, from the catalogue."""
    from panels.stock import dispersed_sets, linked_sets

    which = cast(Literal["assets", "days"], kind)
    return next(iter(dispersed_sets(which).values())), next(iter(linked_sets(which).values()))


#: The share of panel (C)'s width kept clear of bars, on the right, for the differences'
#: words: drawn at its right edge, they ran over a bar reaching it.
WORDS_SHARE = 0.4


def _panel(ax: Any, cells: list[LinkedCell], title: str) -> None:
    y = 0.0
    reach = 0.0  # the farthest a bar or its interval goes
    ticks, labels = [], []
    names = _style.short_names(cell.model for cell in cells)  # tick labels: as every figure's
    for cell in cells:
        for style, iv, colour in (
            ("dispersed", cell.dispersed, "#94a3b8"),
            ("linked", cell.linked, "#7c3aed"),
        ):
            if iv is not None:
                hi = iv.get("hi")  # None where one date gives no interval
                reach = max(reach, iv["mean"], hi if hi is not None and np.isfinite(hi) else 0.0)
                ax.barh(y, iv["mean"], color=colour, height=0.8)
                ax.errorbar(
                    [iv["mean"]], [y], xerr=_style.errors([iv]), fmt="none", ecolor="0.2", capsize=3
                )
            ticks.append(y)
            labels.append(f"{names[cell.model]}\n{style}" if style == "dispersed" else style)
            y += 1.0
        if cell.difference is not None:
            ax.text(
                0.98,
                y - 1.5,
                "Δ " + difference_text(cell.difference, 4, gap="\n"),  # two lines: a narrow panel
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="center",
                fontsize=8,
            )
        y += 0.6
    ax.set_yticks(ticks, labels, fontsize=8)
    if reach > 0 and any(cell.difference is not None for cell in cells):
        ax.set_xlim(0, reach / (1 - WORDS_SHARE))
    ax.set_ylim(y - 1.1, -0.6)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("mean profit per unit stake")
    ax.set_title(title, loc="left")
