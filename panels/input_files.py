"""Reading a file a user names (a spec, a family, a `dutchbook check` input), bounded.

`Path.read_bytes` reads until the end of the file, and some paths have none: given
`/dev/zero` or `/dev/urandom`, `dutchbook check`, `plan` and `run` read until memory ran out,
with no word. A device is refused by its type; anything else (a file, a pipe such as
`<(generate-forecasts)`) is read up to a limit, so a file far larger than any real input
ends in one line rather than minutes of parsing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: A campaign spec or a family file: a few kilobytes in practice.
TEXT_INPUT_MAX_BYTES = 16 * 2**20
#: A `dutchbook check` input, which may list up to 1,000,000 atoms by hand per event.
CHECK_INPUT_MAX_BYTES = 512 * 2**20


class InputFileError(ValueError):
    """The path cannot be read as an input file (the message leaves out the path)."""


def read_input_file(path: Path, limit: int) -> bytes:
    """The whole file, at most `limit` bytes; `InputFileError` for a device or a larger file.

    `FileNotFoundError`, `IsADirectoryError` and other `OSError`s propagate, as from
    `Path.read_bytes`, for each caller to word.
    """
    with path.open("rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise InputFileError("is a device, not a file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputFileError(f"larger than {limit // 2**20} MiB, far more than any input needs")
    return data


def has_control(text: str) -> bool:
    """A control character (C0, DEL, C1) or a Unicode line or paragraph separator: what a
    name shown in messages, tables and logs may not hold (an escape sequence would reach the
    terminal; a line break would split a one-line message)."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in text)
