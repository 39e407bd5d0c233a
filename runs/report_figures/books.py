"""Figure 1: the campaign's three most profitable Dutch books, drawn as the paper's Figure 1.

For each book: the events asked (which return bins each covers), the probabilities the model
stated, the nearest coherent forecast, and the bookie's stakes (buy > 0, sell < 0); the
binding events (those staked) are highlighted. Books are taken from the sup-norm arms, whose
profit is per unit of total stake as in the paper; the family benchmark's L1 books are on
another scale and are drawn only when a campaign has nothing else. Their events are
statements, not return bins, so such a figure has no bins panel (`panels`): the statements
label the rows of the probabilities.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.console_lines import plural
from runs.report.data import family_arm
from runs.report_figures import _style
from runs.report_figures.inputs import FigureInputs

TITLE = "The three most profitable Dutch books"
#: Above this many events a book shows only its binding events (a horizon-4 panel has 248).
MAX_EVENTS_SHOWN = 16
#: A stake smaller than this is the LP's zero.
STAKE_EPS = 1e-9
_CLAUSE = re.compile(r"^([A-Za-z]\w*):B([0-3](?:\|B[0-3])*)$")
BIN_LABELS = ("B0\nz<-1", "B1\n-1≤z<0", "B2\n0≤z<1", "B3\nz≥1")


@dataclass(frozen=True)
class Book:
    """One scored set's Dutch book, with the model's stated probabilities."""

    model: str
    arm: str
    unit: str
    pass_: int
    set_name: str
    norm: str
    profit: float
    events: list[str]
    stated: list[float]
    coherent: list[float]
    stakes: list[float]

    @property
    def binding(self) -> list[bool]:
        return [abs(s) > STAKE_EPS for s in self.stakes]


def top_books(inputs: FigureInputs, count: int = 3) -> list[Book]:
    """The `count` most profitable books, at most one per (model, arm, unit).

    Horizon panels nest (a day's 14 events inside the full panel), so one unit would otherwise
    fill the figure with the same book seen through ever larger sets.
    """
    scored = inputs.scored_scores()
    if scored is None or inputs.forecasts is None:
        return []
    scores = scored.filter(
        pl.col("profit").is_not_null() & pl.col("profit").is_not_nan() & (pl.col("profit") > 0)
    )
    native = scores.filter(~family_arm() & (pl.col("norm") == "inf"))
    picked = _best(native, count)
    if picked.height == 0:
        picked = _best(scores.filter(pl.col("norm") == "l1"), count)
    books = []
    for row in picked.iter_rows(named=True):
        stated = _stated(inputs.forecasts, row)
        books.append(
            Book(
                model=row["model"],
                arm=row["arm"],
                unit=row["unit"],
                pass_=int(row["pass"]),
                set_name=row["set"],
                norm=row["norm"],
                profit=float(row["profit"]),
                events=list(row["events"]),
                stated=[stated.get(e, float("nan")) for e in row["events"]],
                coherent=[_num(v) for v in row["coherent"]],
                stakes=[_num(v) if v is not None else 0.0 for v in row["stakes"]],
            )
        )
    return books


def _best(scores: pl.LazyFrame, count: int) -> pl.DataFrame:
    """The best set of each of the `count` best (model, arm, unit), with its book.

    Ranked on the scalar columns alone; only the chosen rows' lists (events, stakes,
    coherent) are then read, so a paper-scale scores table is never held whole.
    """
    key = ["model", "arm", "unit", "set", "pass"]
    chosen = (
        scores.select(*key, "profit")
        .sort(["profit", *key], descending=[True] + [False] * len(key))
        .unique(["model", "arm", "unit"], keep="first", maintain_order=True)
        .head(count)
        .collect()
    )
    if chosen.height == 0:
        return chosen
    columns = [*key, "norm", "profit", "events", "stakes", "coherent"]
    rows = scores.join(chosen.lazy().select(key), on=key, how="semi").select(columns)
    return (
        rows.collect()
        .unique(key, keep="first")
        .sort(["profit", *key], descending=[True] + [False] * len(key))
    )


def _stated(forecasts: pl.LazyFrame, row: dict[str, object]) -> dict[str, float]:
    frame = forecasts.filter(
        (pl.col("model") == row["model"])
        & (pl.col("arm") == row["arm"])
        & (pl.col("unit") == row["unit"])
        & (pl.col("pass") == row["pass"])
    ).collect()
    return {str(e): float(p) for e, p in frame.select("event", "p").iter_rows()}


def _num(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def bin_grid(events: Sequence[str]) -> tuple[list[str], np.ndarray] | None:
    """Which (factor, bin) cells each event covers, when every event is a conjunction of bin
    sets (`d1:B0|B1`, `A:B3&B:B2`); None for events of another kind (family statements)."""
    parsed: list[dict[str, set[int]]] = []
    for event in events:
        cells: dict[str, set[int]] = {}
        for clause in event.split("&"):
            match = _CLAUSE.match(clause)
            if match is None:
                return None
            cells[match.group(1)] = {int(b) for b in match.group(2).split("|B")}
        parsed.append(cells)
    factors = sorted({f for cells in parsed for f in cells})
    grid = np.zeros((len(events), 4 * len(factors)), dtype=float)
    for i, cells in enumerate(parsed):
        for j, factor in enumerate(factors):
            for b in cells.get(factor, ()):
                grid[i, 4 * j + b] = 1.0
    return factors, grid


def _bin_ticks(factors: Sequence[str]) -> list[str]:
    """One factor: the bins with their ranges; several: factor and bin name only."""
    if len(factors) == 1:
        return list(BIN_LABELS)
    return [f"{f}\nB{b}" for f in factors for b in range(4)]


def draw_events(ax: Any, events: Sequence[str]) -> None:
    """The paper's left panel: one row per event, shaded where it covers a return bin (left
    blank, labels only, for events that are not sets of bins)."""
    cells = bin_grid(events)
    if cells is None:
        ax.set_xticks([])
    else:
        factors, matrix = cells
        ax.imshow(
            np.ma.masked_equal(matrix, 0.0),
            aspect="auto",
            cmap="Blues",
            vmin=0.0,
            vmax=1.4,
            extent=(-0.5, matrix.shape[1] - 0.5, len(events) - 0.5, -0.5),
            zorder=1,
        )
        ax.set_xticks(range(matrix.shape[1]), _bin_ticks(factors), fontsize=7)
        for j in range(1, len(factors)):
            ax.axvline(4 * j - 0.5, color="0.3", linewidth=0.8)
        ax.set_xlim(-0.5, matrix.shape[1] - 0.5)
    ax.set_yticks(range(len(events)), list(events), fontsize=8)
    ax.set_ylim(len(events) - 0.5, -0.5)


#: The figure's panels, left to right, when some book's events are return bins.
WITH_BINS = ("bins", "stated", "stakes")
#: ... and when none is (the family benchmark's statements).
WITHOUT_BINS = ("stated", "stakes")


def panels(books: Sequence[Book]) -> tuple[str, ...]:
    """The figure's panels: the bins panel only when some book's events are sets of return
    bins; for statements it would be an empty box beside their labels."""
    return WITH_BINS if any(bin_grid(book.events) is not None for book in books) else WITHOUT_BINS


def caption(shown: tuple[str, ...]) -> str:
    """The figure's caption for its panels (`panels`)."""
    events = (
        "the events asked (shaded: the return bins each event covers), "
        if "bins" in shown
        else "the statements asked, "
    )
    return (
        f"Each row is one scored set: {events}the probabilities the model stated (bars) "
        "beside the nearest coherent forecast (diamonds), and the bookie's stakes (buy > 0, "
        "sell < 0). The binding events, those the bookie stakes, are highlighted; the profit "
        "is what the stakes win in every outcome"
        + (", per unit of total stake." if "bins" in shown else ".")
        + _which_sets(shown)
    )


def _which_sets(shown: tuple[str, ...]) -> str:
    """Which sets the books were ranked among: the title's "three most profitable" read as
    all of the campaign's, while the family benchmark's L1 books, on another scale, are
    drawn only when no stock-return set has a book (`top_books`)."""
    if "bins" in shown:
        return (
            " The books are the most profitable of the stock-return arms' sets alone; the "
            "question-family sets, in the L1 metric, are on another scale and not ranked "
            "with them."
        )
    return (
        " No stock-return set had a book, so these are the most profitable of the "
        "question-family sets, in the L1 metric."
    )


def draw(inputs: FigureInputs, path: Path) -> str:
    """Draw the figure; returns its caption. Raises `Omit` when there is no book to draw."""
    from runs.report_figures import Omit

    books = top_books(inputs)
    if not books:
        why = inputs.not_scored(lambda arm: True, "on any arm")
        if why is not None:  # the sets of models under the floor are not scored sets
            raise Omit(f"{why}: there is no Dutch book to draw")
        raise Omit("no scored set had a positive arbitrage profit: there is no Dutch book to draw")
    plt = _style.pyplot()
    shown = panels(books)
    rows = [_shown(book) for book in books]
    heights = [max(len(idx), 3) * 0.22 + 1.3 for idx in rows]
    widths = [1.1, 1.0, 1.0] if "bins" in shown else [1.0, 1.0]
    fig = plt.figure(figsize=(_style.WIDTH + len(shown) - 1, sum(heights)))
    grid = fig.add_gridspec(len(books), len(shown), height_ratios=heights, width_ratios=widths)
    # 28 characters: with the rank and the arm, a title stops short of the next panel's.
    names = _style.short_names((book.model for book in books), 28)
    for row, (book, idx) in enumerate(zip(books, rows, strict=True)):
        _draw_book(fig, grid, row, book, idx, rank=row + 1, bins="bins" in shown,
                   name=names[book.model])  # fmt: skip
    _style.tight_layout(fig, h_pad=2.0)
    _style.save(fig, path)
    return caption(shown) + _fewer_said(books)


def _fewer_said(books: Sequence[Book], count: int = 3) -> str:
    """Why fewer than `count` books are drawn under a title that promises three (a real
    model's two-unit run drew two, without a word)."""
    if len(books) >= count:
        return ""
    where = " of the stock-return arms" if books[0].norm == "inf" else ""
    drawn = "Only one book is" if len(books) == 1 else f"Only {len(books)} books are"
    return f" {drawn} drawn: no other model, arm and unit{where} had a positive profit."


def _shown(book: Book) -> list[int]:
    """The rows a book shows: every event of a small set; of a larger one its binding events,
    at most `MAX_EVENTS_SHOWN` of them, those with the largest stakes (in the L1 metric
    every statement of a family can bind: a family of 20,000 drew 20,000 rows, and took its
    report five minutes and 4 GB)."""
    if len(book.events) <= MAX_EVENTS_SHOWN:
        return list(range(len(book.events)))
    binding = [i for i, b in enumerate(book.binding) if b]
    if len(binding) <= MAX_EVENTS_SHOWN:
        return binding
    largest = sorted(binding, key=lambda i: -abs(book.stakes[i]))[:MAX_EVENTS_SHOWN]
    return sorted(largest)


def _draw_book(
    fig: Any, grid: Any, row: int, book: Book, idx: list[int], rank: int, bins: bool, name: str
) -> None:
    events = [book.events[i] for i in idx]
    binding = [book.binding[i] for i in idx]
    y = np.arange(len(idx))
    ax_e = fig.add_subplot(grid[row, 0]) if bins else None
    ax_p = fig.add_subplot(grid[row, 1 if bins else 0], sharey=ax_e)
    ax_s = fig.add_subplot(grid[row, 2 if bins else 1], sharey=ax_p)
    labelled = ax_p if ax_e is None else ax_e  # the panel whose rows carry the event names
    highlight = "#fde68a"
    for ax in (a for a in (ax_e, ax_p, ax_s) if a is not None):
        for i, b in enumerate(binding):
            if b:
                ax.axhspan(i - 0.5, i + 0.5, color=highlight, zorder=0)
    if ax_e is None:
        ax_p.set_yticks(range(len(events)), events, fontsize=8)
        ax_p.set_ylim(len(events) - 0.5, -0.5)
    else:
        draw_events(ax_e, events)
    for label, b in zip(labelled.get_yticklabels(), binding, strict=True):
        if b:
            label.set_fontweight("bold")
    # The pass as scores.parquet numbers it (from 0): "pass 1" of a one-pass run was looked
    # for there in vain.
    where = f"{_style.isolated(book.unit)} · pass {book.pass_}"  # a family's id
    if (staked := sum(1 for b in book.binding if b)) > len(idx):  # `_shown` left some out
        where += f" · the {len(idx)} largest of {staked:,} stakes"
    if book.set_name not in {"h1", "family"}:
        where += f" · set {book.set_name}"
    title = f"#{rank} {_style.isolated(name)} · {book.arm}\n{where}"
    labelled.set_title(title, loc="left", fontsize=9)
    stated = np.array([book.stated[i] for i in idx])
    coherent = np.array([book.coherent[i] for i in idx])
    ax_p.barh(y, stated, color="#60a5fa", height=0.6, zorder=2, label="stated")
    ax_p.scatter(coherent, y, marker="D", color="black", s=16, zorder=3, label="coherent")
    for i, (p, c) in enumerate(zip(stated, coherent, strict=True)):
        if np.isfinite(p):
            x = max(p, c if np.isfinite(c) else p) + 0.04
            ax_p.text(x, i, f"{p:.2g}", va="center", fontsize=7, zorder=4)
    ax_p.set_xlim(0, 1.15)
    if ax_e is None:  # its title names the book: the panel's own name goes below
        ax_p.set_xlabel("stated (bars), nearest coherent (◆)", fontsize=8)
    else:
        ax_p.set_title("stated (bars),\nnearest coherent (◆)", fontsize=9)
        ax_p.tick_params(labelleft=False)
    stakes = np.array([book.stakes[i] for i in idx])
    ax_s.barh(y, stakes, color=np.where(stakes >= 0, "#16a34a", "#dc2626"), height=0.6, zorder=2)
    ax_s.axvline(0, color="0.3", linewidth=0.8)
    lim = max(float(np.abs(stakes).max()) if stakes.size else 0.0, 0.05) * 1.35
    ax_s.set_xlim(-lim, lim)
    for i, s in enumerate(stakes):
        if abs(s) > STAKE_EPS:
            ax_s.text(s, i, f" {s:+.2g} ", va="center", ha="left" if s > 0 else "right", fontsize=7)
    unit = "per unit of total stake" if book.norm == "inf" else "(L1 metric)"
    ax_s.set_title(f"bookie's stakes (buy > 0)\nprofit {book.profit:.4g} {unit}", fontsize=9)
    ax_s.tick_params(labelleft=False)
    if len(idx) < len(book.events):
        note = f"{plural(len(idx), 'binding event')} of {len(book.events)} shown"
        if ax_e is None:
            ax_p.set_xlabel(f"{ax_p.get_xlabel()}\n{note}", fontsize=8)
        else:
            ax_e.set_xlabel(note, fontsize=8)
