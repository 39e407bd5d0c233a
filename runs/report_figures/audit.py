"""Figure 8: the audit over time, attempts per time bin by outcome, one panel per model.

The data is the audit's (`engine.audit.attempt_timeline`), so a retry here is a retry in
`dutchbook audit`, `status` and the summary `run` prints: accepted attempts pale, every other
attempt stacked on top in the colour of its cause, so a burst of rate limits or a provider
outage shows where it happened.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.console_lines import plural
from engine.retry import CAUSE_LABELS, REJECTED_ON_REPARSE
from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "The audit: attempts over time by outcome"
#: The most models drawn, one panel each: a campaign of 1,000 models took 9 minutes to draw
#: this figure (matplotlib's layout compares every panel with every other) at 1,900 inches
#: tall. Beyond it, the models with the most retry attempts are drawn; audit.csv has all.
MAX_PANELS = 24
ACCEPTED = "accepted"
#: Not retries: the accepted attempt, and a reply the run accepted and a strict reparse
#: rejected (`engine.audit.classify`'s `rejected_on_reparse`: nothing was asked after it).
_NO_RETRY = (ACCEPTED, REJECTED_ON_REPARSE)
#: Characters of a panel's title per line, by the columns of panels: a title runs on past
#: its panel, and beside a second column four models named like
#: "openai/gpt-oss-120b-deployment-eu-1" wrote their titles over each other, counts unreadable.
TITLE_CHARS = {1: 100, 2: 48}
#: Fixed colours so one cause looks the same in every report; the causes in the order of the
#: audit's tables (`engine.audit.CAUSES`), which the legend follows. Replies a strict reparse
#: rejected are pale like the accepted attempts they sit on (no retry), in a blue that
#: simulated protanopia, deuteranopia and tritanopia still tell from every other entry
#: (CIEDE2000 at least 15), where the fallback grey was one of three greys. Every two entries
#: stay apart under simulated deuteranopia and protanopia (Machado et al. 2009, full
#: severity), CIE76 ΔE at least 15 (the tests ask 12): connection errors, violet before, and
#: timeouts were one blue to a deuteranope (ΔE 1.7), provider errors and missing routing
#: metadata one olive (3.8), and five more pairs were under 9 (a lime `truncated` beside
#: `rate_limit` to a protanope, 7.4). Normal vision keeps 18.7 at least, tritanopia 9.6.
OUTCOME_COLOURS = {
    ACCEPTED: "#d1d5db",
    REJECTED_ON_REPARSE: "#93c5fd",
    "rate_limit": "#f59e0b",
    "provider_error": "#dc2626",
    "connection_error": "#701a75",
    "timeout": "#2563eb",
    "interrupted": "#0f766e",
    "missing_routing_metadata": "#5b21b6",
    "damaged_batch_result": "#7f1d1d",
    "invalid_response": "#db2777",
    "refusal": "#9ca3af",
    "truncated": "#16a34a",
    "auth_error": "#111827",
    "bad_request": "#ea580c",
    "duplicate": "#0891b2",
}


def draw(inputs: FigureInputs, path: Path) -> str:
    from runs.report_figures import Omit

    timeline = inputs.timeline
    if timeline is None:
        raise Omit("the run folder has no attempts ledger")
    if timeline.height == 0:
        raise Omit("no attempt was recorded")
    t0 = timeline["start"].min()
    frame = timeline.with_columns(
        ((pl.col("start") - pl.lit(t0)).dt.total_microseconds() / 1e6).alias("t"),
        ((pl.col("end") - pl.col("start")).dt.total_microseconds() / 1e6).alias("width"),
    )
    span = float(frame["t"].max() + frame["width"].max())  # type: ignore[operator, arg-type]
    unit, scale = ("min", 60.0) if span >= 180 else ("s", 1.0)
    models, shown = _models_drawn(frame)
    seen = set(frame["outcome"].to_list())
    outcomes = [o for o in OUTCOME_COLOURS if o in seen] + sorted(seen - set(OUTCOME_COLOURS))
    ncols = 1 if len(models) <= 3 else 2
    nrows = -(-len(models) // ncols)
    plt = _style.pyplot()
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(_style.WIDTH, 1.9 * nrows + 1.0), squeeze=False, sharex=True
    )
    names = title_names(models, TITLE_CHARS[ncols])
    for k, model in enumerate(models):
        ax = axes[k // ncols][k % ncols]
        counts = _panel(ax, frame.filter(pl.col("model") == model), outcomes, scale)
        ax.set_title(panel_title(names[model], counts, TITLE_CHARS[ncols]), loc="left", fontsize=9)
    for k in range(len(models), nrows * ncols):
        axes[k // ncols][k % ncols].set_axis_off()
    for column in range(ncols):  # the lowest drawn panel of each column carries the axis
        lowest = max(
            (axes[r][column] for r in range(nrows) if r * ncols + column < len(models)),
            key=lambda ax: ax.get_subplotspec().rowspan.start,
        )
        lowest.xaxis.set_tick_params(labelbottom=True)
        lowest.set_xlabel(f"time since the first attempt ({unit})")
    handles = [plt.Rectangle((0, 0), 1, 1, color=OUTCOME_COLOURS.get(o, "0.5")) for o in outcomes]
    # The audit's words for the causes ("rate limits"), as its tables say them.
    labels = [CAUSE_LABELS.get(str(o), str(o)) for o in outcomes]
    legend = _style.bottom_legend(fig, handles, labels, min(len(outcomes), 4))
    _style.tight_layout(fig, rect=(0, legend, 1, 1))
    _style.save(fig, path)
    rejected = (
        " Except the replies the run accepted and a strict reparse rejected "
        f"({REJECTED_ON_REPARSE} in the legend, stacked just above the accepted attempts): "
        "never retried." if REJECTED_ON_REPARSE in seen else ""
    )
    return (
        f"Attempts started in each slice of the campaign ({_slice_words(frame)}), per model, "
        "by outcome: accepted attempts pale, every other attempt (one retry attempt each, as "
        "the audit counts them) stacked on top in the colour of its cause. Each panel has "
        "its own scale of attempts." + rejected + shown
    )


def _slice_words(frame: pl.DataFrame) -> str:
    """How long a slice is, in words ("3.2 s each"): the caption said "each slice" alone."""
    width = float(frame["width"].max() or 0.0)  # type: ignore[arg-type]
    if width <= 0:
        return "all at one instant"
    for unit, seconds in (("days", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0)):
        if width >= 2 * seconds:
            return f"{width / seconds:,.1f} {unit} each"
    return f"{width * 1000:,.1f} ms each" if width < 1 else f"{width:.2f} s each"


def _models_drawn(frame: pl.DataFrame) -> tuple[list[str], str]:
    """The models given a panel, by name, and what the caption adds when some are left out:
    at most `MAX_PANELS`, those with the most retry attempts (then by name)."""
    every = sorted(set(frame["model"].to_list()))
    if len(every) <= MAX_PANELS:
        return every, ""
    retries = (
        frame.group_by("model")
        .agg(pl.col("attempts").filter(~pl.col("outcome").is_in(_NO_RETRY)).sum()
             .alias("retries"))
        .sort(["retries", "model"], descending=[True, False])
    )
    drawn = sorted(retries["model"].head(MAX_PANELS).to_list())
    return drawn, (
        f" Drawn: the {MAX_PANELS} of {len(every):,} models with the most retry attempts; "
        "every model's counts are in audit.csv."
    )


#: Where `textwrap` may break a title: at whitespace, and after a hyphen.
_BREAKS = re.compile(r"\s+|(?<=-)")


def title_names(models: Sequence[str], width: int) -> dict[str, str]:
    """Each model's name as its panel's title shows it: whole, but for a name with a part
    `textwrap` cannot break (no space, no hyphen) longer than `_style.NAME_CHARS`, which ran
    into the next panel's title: those shortened together (`_style.short_names`)."""
    longest = min(width, _style.NAME_CHARS)
    cut = [m for m in models if any(len(part) > longest for part in _BREAKS.split(m))]
    return {**{m: m for m in models}, **_style.short_names(cut, longest)}


def panel_title(model: str, counts: str, width: int) -> str:
    """`model: counts` in lines of at most `width` characters (a line longer only where the
    name has one unbroken part so long: `title_names` keeps those short): the name broken at
    spaces and hyphens, each of its lines isolated for the bidi algorithm
    (`_style.isolated`)."""
    lines = _NameWrapper(width, break_long_words=False).wrap(model) or [model]
    last = len(lines[-1])
    shown = [_style.isolated(line) for line in lines]
    if last + 2 + len(counts) <= width:
        shown[-1] += f": {counts}"
    else:
        shown[-1] += ":"
        shown.append(counts)
    return "\n".join(shown)


class _NameWrapper(textwrap.TextWrapper):
    """`textwrap`'s wrapper that never breaks before a character drawn with the one before
    it (`_style.joins_previous`: a mark, a joiner, a skin tone), as names are shortened. Its
    chunks split at whitespace, and a mark written after a space (an accent shown on its
    own) began a line apart from the space it sits on; it is kept with the chunk before it."""

    def _split(self, text: str) -> list[str]:
        chunks: list[str] = []
        for chunk in super()._split(text):
            if chunks and _style.joins_previous(chunk[0]):
                chunks[-1] += chunk
            else:
                chunks.append(chunk)
        return chunks


def _panel(ax: Any, frame: pl.DataFrame, outcomes: Sequence[str], scale: float) -> str:
    """One model's bars; returns its counts, as its title says them."""
    bins = sorted(set(frame["bin"].to_list()))
    starts = dict(zip(frame["bin"].to_list(), frame["t"].to_list(), strict=True))
    # Every attempt at one instant (a lane stopped at its first reply) makes slices of no
    # width: draw them one unit of the axis wide, or the figure shows empty axes.
    width = float(frame["width"].max()) / scale or 1.0  # type: ignore[arg-type]
    index = {b: i for i, b in enumerate(bins)}
    x = np.array([starts[b] / scale + width / 2 for b in bins])
    bottom = np.zeros(len(bins))
    for outcome in outcomes:
        part = frame.filter(pl.col("outcome") == outcome)
        if part.height == 0:
            continue
        heights = np.zeros(len(bins))
        for b, n in part.select("bin", "attempts").iter_rows():
            heights[index[b]] += n
        ax.bar(
            x, heights, width=width * 0.95, bottom=bottom, color=OUTCOME_COLOURS.get(outcome, "0.5")
        )
        bottom += heights
    total = int(frame["attempts"].sum())
    retries = int(frame.filter(~pl.col("outcome").is_in(_NO_RETRY))["attempts"].sum())
    share = f" ({retries / total:.1%})" if total else ""
    ax.set_ylabel("attempts")
    ax.grid(axis="y", alpha=0.3)
    return f"{plural(total, 'attempt')}, {plural(retries, 'retry attempt')}{share}"
