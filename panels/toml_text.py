"""TOML text to a table, refusing in one line what would exhaust the parser.

`tomllib` reads arrays and inline tables recursively: nested some thousand levels deep (on
purpose, or from a broken generator) they raised `RecursionError`, a traceback, from every
command that reads a spec, a family or a check file. And its memory grows with the square
of a dotted key's parts: one key of 100,000 parts, 200 KB of text, had the process killed
for want of memory (one of 10,000 parts took 400 MB). Read through `loads`, both are a
`tomllib.TOMLDecodeError`, which each of those readers already reports in one line.
`decode` turns the file's bytes into the text they read.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

#: Far more parts than any key of a spec, a family or a check file has (they use two or
#: three); tomllib's memory for a text of such keys is still a few hundred times its size.
MAX_KEY_PARTS = 32

_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
#: MAX_KEY_PARTS dots, each pair with a key part between: a key of more parts than allowed
#: (or a value that looks like one, which no real input has). It begins with a literal dot,
#: so a search only tries where there is one: 0.7 s for 52 MB of decimal numbers.
_TOO_MANY_PARTS = re.compile(
    r"\.(?:[ \t]*" + _PART + r"[ \t]*\.){" + str(MAX_KEY_PARTS - 1) + "}"
)


def decode(data: bytes) -> str:
    """A TOML input's bytes as text: UTF-8, without one leading byte order mark (U+FEFF).

    Windows editors write the mark at the start of a file saved as UTF-8; it carries no
    meaning, but `tomllib` reads it as a statement and refused the whole file at line 1,
    column 1. Dropped here, where the readers of a spec, a family and a `check` file decode,
    so a spec's kept text (frozen in its run folder, hashed for a resume) has none either.
    `UnicodeDecodeError` propagates, its byte offsets those of the file.
    """
    return data.decode("utf-8").removeprefix("\ufeff")


def loads(text: str) -> dict[str, Any]:
    """`tomllib.loads`; a `TOMLDecodeError` for nesting too deep or a key of too many parts."""
    if text.count(".") >= MAX_KEY_PARTS and _TOO_MANY_PARTS.search(text):
        raise tomllib.TOMLDecodeError(
            f"a dotted key of more than {MAX_KEY_PARTS} parts, more than any input needs"
        )
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(
            "arrays or inline tables nested too deeply to read"
        ) from None
