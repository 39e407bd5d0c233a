"""The report's eight figures, each a counterpart of one of the paper's.

Every figure module has `TITLE` and `draw(inputs, path) -> caption`; a figure whose arms were
not run raises `Omit` with one line saying why, and nothing is drawn (the page never shows an
empty chart). `draw_all` draws what it can into `report/` and returns one `Figure` per slot,
drawn or not, in the paper's order.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runs.report_figures import _style
from runs.report_figures.inputs import FAMILIES, TIMELINE, FigureInputs

#: (number, key, module): the file is `figure_file(number, key)`.
FIGURES: tuple[tuple[int, str, str], ...] = (
    (1, "books", "books"),
    (2, "leaderboard", "leaderboard"),
    (3, "horizons", "horizons"),
    (4, "arms", "arms"),
    (5, "linked", "linked"),
    (6, "families", "families"),
    (7, "repeated", "repeated"),
    (8, "audit", "audit"),
)


def figure_file(number: int, key: str) -> str:
    """A figure's file name in `report/`: `fig{number}_{key}.png`."""
    return f"fig{number}_{key}.png"


def figure_files() -> frozenset[str]:
    """Every figure's file name in `report/` (`figure_file`), drawn or not."""
    return frozenset(figure_file(number, key) for number, key, _ in FIGURES)


#: The figures that read more of the run folder than its scores and forecasts, and what
#: (`FigureInputs.from_run`'s `reads`).
FIGURE_READS: dict[int, frozenset[str]] = {6: frozenset({FAMILIES}), 8: frozenset({TIMELINE})}

#: The figures that show the summary's repeated-elicitation section (the others read its
#: rows and settings only, so figure workers may draw them before it is computed).
SHOW_REPEATED: frozenset[int] = frozenset({7})


class Omit(Exception):
    """A figure with nothing to show; the message says why, in one line."""


#: matplotlib's warning for a character no font it was given has (drawn as a box).
_MISSING_GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from font")


@contextlib.contextmanager
def missing_glyphs() -> Iterator[set[str]]:
    """The characters drawn as boxes while the block runs, for its caller to say so once.
    matplotlib's own warnings about them are not shown: a model named in Chinese printed
    32 lines of them, each with a line of its source, under a run's leaderboard. Other
    warnings are shown as they would have been."""
    found: set[str] = set()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.filterwarnings(
                "always", message=_MISSING_GLYPH.pattern, category=UserWarning
            )
            yield found
    finally:  # a figure left out (`Omit`), or failing, keeps its other warnings too
        _sort_warnings(caught, found)


def _sort_warnings(caught: list[warnings.WarningMessage], found: set[str]) -> None:
    """The missing characters into `found`; any other warning issued again, as it was."""
    for warning in caught:
        match = _MISSING_GLYPH.match(str(warning.message))
        if match is not None and issubclass(warning.category, UserWarning):
            found.add(chr(int(match[1])))
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )


def boxes_caption(caption: str | None, found: Collection[str]) -> str | None:
    """`caption` with a sentence naming the characters drawn as boxes, if any."""
    if not found:
        return caption
    said = f"No installed font has {' '.join(sorted(found))}: drawn as boxes here."
    return f"{caption} {said}" if caption else said


@dataclass(frozen=True)
class Figure:
    number: int
    key: str
    title: str
    #: The PNG written, or None when the figure was left out.
    path: Path | None
    caption: str | None = None
    #: Why the figure was left out (None when drawn).
    omitted: str | None = None
    #: The characters of its text no installed font has, drawn as boxes.
    missing_glyphs: str = ""

    def to_json(self, relative_to: Path | None = None) -> dict[str, Any]:
        path = self.path
        if path is not None and relative_to is not None:
            path = path.relative_to(relative_to)
        return {
            "number": self.number,
            "key": self.key,
            "title": self.title,
            "path": None if path is None else str(path),
            "caption": self.caption,
            "omitted": self.omitted,
            "missing_glyphs": self.missing_glyphs,
        }


def reads_of(numbers: Collection[int]) -> frozenset[str]:
    """What `FigureInputs.from_run` must read for these figures (`FIGURE_READS`)."""
    return frozenset().union(*(FIGURE_READS.get(n, frozenset()) for n in numbers))


def module_of(number: int) -> Any:
    """The module that draws figure `number` (imported on first use)."""
    name = next(module for n, _, module in FIGURES if n == number)
    return importlib.import_module(f"runs.report_figures.{name}")


def draw_all(
    inputs: FigureInputs, out_dir: Path, numbers: Collection[int] | None = None
) -> list[Figure]:
    """Draw every figure (or those `numbers`) into `out_dir`; a stale PNG of a figure now
    left out is removed. Each names the report's simulated forecasters under it, if any."""
    from runs.report.models import simulated_note  # `runs.report` imports this package

    out_dir.mkdir(parents=True, exist_ok=True)
    # Under every figure of the report; each name its own bidi run, as figures draw names.
    note = simulated_note(inputs.simulated, inputs.simulated_in_part, show=_style.isolated)
    figures = []
    for number, key, _ in FIGURES:
        if numbers is not None and number not in numbers:
            continue
        module = module_of(number)
        path = out_dir / figure_file(number, key)
        try:
            with missing_glyphs() as boxes, _style.footer(note):
                caption = module.draw(inputs, path)
        except Omit as why:
            path.unlink(missing_ok=True)
            figures.append(Figure(number, key, module.TITLE, None, omitted=str(why)))
            continue
        figures.append(
            Figure(number, key, module.TITLE, path, caption=boxes_caption(caption, boxes),
                   missing_glyphs="".join(sorted(boxes)))
        )  # fmt: skip
    return figures


__all__ = [
    "FIGURES",
    "FIGURE_READS",
    "SHOW_REPEATED",
    "Figure",
    "FigureInputs",
    "Omit",
    "draw_all",
    "figure_file",
    "figure_files",
    "module_of",
    "reads_of",
]
