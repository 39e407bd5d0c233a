"""Printing a console table whose numbers and names are never cut.

rich fits a table to the terminal (80 columns when the output is a file or a pipe) by
shrinking columns and ending what no longer fits with "…". With a long model name (a
DeepInfra id such as `meta-llama/Llama-3.3-70B-Instruct`) it kept the name whole and cut
the figures beside it: the run's closing leaderboard read "0.05…" for a profit, `audit`
"137,4…" for 137,439 tokens, `status` showed two such models both as "meta-llama/…", and
the live dispatch table (`engine.progress`) a lane's progress as "123456/3…".

`print_whole` prints a table with its right-aligned columns (figures) at their full width
and its left-aligned ones (names, free text) wrapped, a word longer than the column folded
onto the next line, never below `TEXT_MIN_WIDTH`. A terminal too narrow even for that gets
the table at the width it needs, for the terminal to wrap: nothing is cut. The live table
cannot be printed wider than its terminal; `keep_whole(table, text_min=None)` keeps its
figures whole and folds its names as narrow as it takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table

#: The narrowest a text column (model names, messages) is folded to.
TEXT_MIN_WIDTH = 12
#: What a column adds to a table's width besides its text: a space either side and a rule.
COLUMN_FRAME = 3


def _width(cell: RenderableType) -> int:
    """The widest line of a cell (a table's cells are strings or `Text` here)."""
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((cell_len(line) for line in text.split("\n")), default=0)


def _words(header: RenderableType) -> list[int]:
    text = header.plain if isinstance(header, Text) else str(header)
    return [cell_len(word) for word in text.split()] or [0]


def natural_width(table: Table) -> int:
    """The width of `table` with no column wrapped or shrunk."""
    return 1 + sum(
        max([_width(column.header), *(_width(cell) for cell in column.cells)]) + COLUMN_FRAME
        for column in table.columns
    )


def keep_whole(table: Table, text_min: int | None = TEXT_MIN_WIDTH) -> int:
    """Set `table`'s columns as the module says; the width the table needs at the least.
    Figures' headers go a word a line (a header is wrapped as its column is). `text_min`
    None lets text columns fold as narrow as the console needs (a table that cannot be
    printed wider: figures first)."""
    need = 1  # the left edge
    for column in table.columns:
        widest = max((_width(cell) for cell in column.cells), default=0)
        if column.justify == "right":
            if isinstance(column.header, str):  # a figure's header: a word a line
                column.header = column.header.replace(" ", "\n")
            least = max(widest, _width(column.header))
            column.no_wrap = True
        else:
            least = min(max([widest, *_words(column.header)]), text_min or 1)
            column.no_wrap = False
        column.overflow = "fold"
        column.min_width = least if column.no_wrap or text_min else None
        need += least + COLUMN_FRAME
    return need


def print_whole(console: Console, table: Table) -> None:
    """Print `table` with nothing cut (see the module docstring); a table that fits is
    printed as it is."""
    if natural_width(table) <= console.width:
        console.print(table)
        return
    need = keep_whole(table)
    narrow = console.width  # rich never prints wider than its console: widen it a moment
    console.width = max(narrow, need)
    try:
        console.print(table, crop=False)
    finally:
        console.width = narrow


__all__ = ["TEXT_MIN_WIDTH", "keep_whole", "natural_width", "print_whole"]
