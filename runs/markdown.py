"""Markdown for `report/report.md`: names and messages in it read as text, never as markup.

A model's or arm's name comes from the spec, a lane's stop reason from a provider (a 502's
body is often a page of HTML), and report.md is read rendered (GitHub, an editor's preview),
where `<b>` or `<img src=...>` in a name would be markup and a line break in a provider's
message would end a table. So every such string goes through `text`: the characters that
make markup are backslash-escaped (CommonMark's own escape) and line breaks become spaces.
Brackets stay as they are, since our intervals are written in them; only `](`, which would
make a link, is escaped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: `_` only where it could start or end emphasis: between two letters or digits it cannot
#: (CommonMark), so `rate_limit` stays as it is written.
_MARKUP = re.compile(r"[\\`*<>&|~]|\](?=\()|(?<![^\W_])_|_(?![^\W_])")
_LINE_BREAKS = re.compile(r"[\r\n\v\f\u2028\u2029\x85]+")


#: What makes a line a heading, quote, list item or rule when it begins one.
_BLOCK_MARK = re.compile(r"[#>+=-]|\d{1,9}[.)]")


def text(value: object, *, starts_block: bool = False) -> str:
    """`value` as Markdown that renders as exactly its characters, on one line.

    `starts_block`: the text begins a paragraph or a list item, where `# x` would be a
    heading and `1. x` a list (in a table cell or mid-sentence they are plain text, and
    `0.12` stays as written)."""
    one_line = _LINE_BREAKS.sub(" ", str(value))
    escaped = _MARKUP.sub(lambda m: "\\" + m.group(0), one_line)
    if starts_block and (mark := _BLOCK_MARK.match(escaped)):
        cut = mark.end() - 1  # escape the mark's last character: `1\.`, `\#`
        escaped = escaped[:cut] + "\\" + escaped[cut:]
    return escaped


def _numeric(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "").replace("%", "").replace("$", "").isdigit()


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GFM table's lines, every cell through `text`; a column whose first row is a
    number (after the first column) is aligned right."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(text(c) for c in cells) + " |"

    align = [
        "---:" if i and rows and _numeric(rows[0][i]) else "---" for i in range(len(header))
    ]
    return [line(header), "| " + " | ".join(align) + " |", *(line(r) for r in rows)]
