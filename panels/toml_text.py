"""TOML text to a table, refusing in one line what would exhaust the parser.

`tomllib` reads arrays and inline tables recursively: nested some thousand levels deep (on
purpose, or from a broken generator) they raised `RecursionError`, a traceback, from every
command that reads a spec, a family or a check file. And its memory grows with the square
of a dotted key's parts: one key of 100,000 parts, 200 KB of text, had the process killed
for want of memory (one of 10,000 parts took 400 MB). Read through `loads`, both are a
`tomllib.TOMLDecodeError`, which each of those readers already reports in one line.
So is an integer too long for Python to read or write (`tomllib` keeps any integer): one of
more than 4,300 decimal digits was a `ValueError` from `int()`, a traceback that advised
`sys.set_int_max_str_digits()`, and a hexadecimal one as long converted and then failed
wherever it was printed. Shorter integers are read as `tomllib` reads them, whatever their
size: TOML's own limit is 64 bits, but seeds of 64 bits and more (`secrets.randbits(64)`,
numpy's 128-bit entropy) are ordinary, and run folders written before hold them. A reader
that takes a number as a float does so through `finite`, and each key keeps its own bound.
`decode` turns the file's bytes into the text they read.
"""

from __future__ import annotations

import json
import math
import re
import sys
import tomllib
from collections.abc import Iterator
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


#: Bits of the longest integer an input may hold: its decimal digits (about 4,200) within
#: the 4,300 Python converts to text, so any integer read can be printed in a message.
MAX_INT_BITS = 14_000
_TOO_LONG = "an integer of more than 4,000 digits, longer than any input needs"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


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
    """`tomllib.loads`; a `TOMLDecodeError` for nesting too deep, a key of too many parts or
    an integer too long to print (`MAX_INT_BITS`)."""
    if text.count(".") >= MAX_KEY_PARTS and _TOO_MANY_PARTS.search(text):
        raise tomllib.TOMLDecodeError(
            f"a dotted key of more than {MAX_KEY_PARTS} parts, more than any input needs"
        )
    try:
        table = tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(
            "arrays or inline tables nested too deeply to read"
        ) from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as error:  # int() of a decimal integer of more digits than it converts
        raise tomllib.TOMLDecodeError(_too_many_digits(text, error)) from None
    _refuse_too_long(table)
    return table


#: A TOML text's strings (multi-line first: `"""` is not an empty string then a quote) and
#: its comments: what follows a `#` outside a string. A multi-line string may end in up to
#: two quotes of its own before its delimiter.
_STRING_OR_COMMENT = re.compile(
    r'"""(?:\\.|[^\\])*?"{3,5}'
    r"|'''.*?'{3,5}"
    r'|"(?:\\.|[^"\\\n])*"'
    r"|'[^'\n]*'"
    r"|#[^\n]*",
    re.DOTALL,
)


def comments(text: str) -> Iterator[tuple[int, str]]:
    """Each comment of a TOML text that `loads` read: its line (from 1) and its words after
    the `#`. A `#` inside a string (a key, a value, a URL's fragment) begins none."""
    for match in _STRING_OR_COMMENT.finditer(text):
        if match.group().startswith("#"):
            yield text.count("\n", 0, match.start()) + 1, match.group()[1:]


def finite(value: float) -> float | None:
    """A number read from a file as a finite float, or None: infinite, not a number, or an
    integer too big for a float (`float()` raised `OverflowError`, a traceback wherever a
    reader took a spec's or check file's number without this)."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _too_many_digits(text: str, error: ValueError) -> str:
    """What `tomllib` could not convert, with the line of the first integer that long."""
    limit = sys.get_int_max_str_digits()
    if not limit or "integer string conversion" not in str(error):
        return " ".join(str(error).split())
    found = re.search(rf"(?<![0-9_])[0-9](?:_?[0-9]){{{limit},}}", text)
    line = f"line {text.count(chr(10), 0, found.start()) + 1}: " if found else ""
    return f"{line}an integer of more than {limit:,} digits, longer than any input needs"


def _refuse_too_long(table: dict[str, Any]) -> None:
    """Every integer within `MAX_INT_BITS`, walked without recursion (an array may be nested
    as deep as `tomllib` reads); a longer one (hexadecimal, octal or binary: a decimal one
    that long already failed to convert) is named by its key path."""
    pending: list[tuple[str, dict[str, Any] | list[Any]]] = [("", table)]
    while pending:
        where, container = pending.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in items:
            if isinstance(item, dict | list):
                pending.append((_key_path(where, key), item))
            elif type(item) is int and item.bit_length() > MAX_INT_BITS:
                raise tomllib.TOMLDecodeError(f"{_key_path(where, key)}: {_TOO_LONG}")


def _key_path(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    part = key if _BARE_KEY.fullmatch(key) else json.dumps(key)
    return f"{where}.{part}" if where else part
