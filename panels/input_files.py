"""Reading a file a user names (a spec, a family, a `dutchbook check` input), bounded.

`Path.read_bytes` reads until the end of the file, and some paths have none: given
`/dev/zero` or `/dev/urandom`, `dutchbook check`, `plan` and `run` read until memory ran out,
with no word. A device is refused by its type; anything else (a file, a pipe such as
`<(generate-forecasts)`) is read up to a limit, so a file far larger than any real input
ends in one line rather than minutes of parsing.
"""

from __future__ import annotations

import codecs
import os
import select
import stat
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO, TypeVar

#: A campaign spec or a family file: a few kilobytes in practice.
TEXT_INPUT_MAX_BYTES = 16 * 2**20
#: A `dutchbook check` input, which may list up to 1,000,000 atoms by hand per event.
CHECK_INPUT_MAX_BYTES = 512 * 2**20


class InputFileError(ValueError):
    """The path cannot be read as an input file (the message leaves out the path)."""


def file_kind(mode: int) -> str | None:
    """What a file of status `mode` (`os.stat`'s or `os.fstat`'s `st_mode`) is when it is no
    regular file: "a folder", "a FIFO", "a character device", "a block device", "a socket" or
    "a special file"; None for a regular file. Every refusal of a file by its type in
    `panels` and `runs` words it from here (`panels.data.not_a_file`,
    `panels.families.refuse_a_pipe`, `read_input_file`, `runs.design`,
    `runs.commands._run_folder`).

    Twin: `engine.shards.file_kind`, which `engine.shards.special_file` asks (the import
    contracts keep `engine` and `panels` apart); tests/engine/test_shards.py holds the two
    alike for every type of file."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_input_file(path: Path, limit: int) -> bytes:
    """The whole file, at most `limit` bytes; `InputFileError` for a device, a folder, a
    socket or a larger file ("is a character device, not a file": `file_kind`).

    Anything but a file or a pipe is refused from its status before it is opened (opening a
    device may wait, a terminal's, or do something, a tape's), and again from the opened
    file's, in case it was swapped in between. A pipe is read (`<(generate-forecasts)`);
    a FIFO nothing was written to yet is waited on, the wait said (`_open_saying_a_wait`).
    A larger file is refused by its size before anything is read (`_refuse_by_size`).
    `FileNotFoundError` and other `OSError`s propagate, as from `Path.read_bytes`, for each
    caller to word.
    """
    mode = path.stat().st_mode
    _refuse_unless_readable(mode)
    with _open_saying_a_wait(path, fifo=stat.S_ISFIFO(mode)) as handle:
        status = os.fstat(handle.fileno())
        _refuse_unless_readable(status.st_mode)
        _refuse_by_size(status, 0, limit)
        return _within(handle.read(limit + 1), limit)


def read_input_stream(stream: BinaryIO, limit: int) -> bytes:
    """An open stream to its end, at most `limit` bytes: standard input, which
    `dutchbook check -` reads. Refused as `read_input_file` refuses a file: a terminal
    (nothing piped in: the command would wait for typing, unsaid), any other device, a
    larger input. A stream with no descriptor (a test's) is read as it is. The null device is
    read, as the empty input it is (`_null_device`)."""
    if stream.isatty():
        raise InputFileError("standard input is a terminal: pipe or redirect the input in")
    try:
        status = os.fstat(stream.fileno())
    except (OSError, ValueError):  # io.UnsupportedOperation is both: no descriptor
        status = None
    if status is not None and not _null_device(status):
        _refuse_unless_readable(status.st_mode)
        _refuse_by_size(status, stream.tell() if stat.S_ISREG(status.st_mode) else 0, limit)
    return _within(stream.read(limit + 1), limit)


def _null_device(status: os.stat_result) -> bool:
    """Whether `status` (an open file's) is the null device's: standard input given
    `< /dev/null`, as a service's or `ssh -n`'s is. It reads as empty, and `check -` said
    "-: is a character device, not a file" where an empty file or pipe is read and refused
    for what it lacks; the user had asked for standard input, not named a device."""
    if not stat.S_ISCHR(status.st_mode):
        return False
    try:
        null = os.stat(os.devnull)
    except OSError:  # no /dev/null here (a bare chroot): nothing is it
        return False
    return stat.S_ISCHR(null.st_mode) and null.st_rdev == status.st_rdev


def _within(data: bytes, limit: int) -> bytes:
    """`data`, read as `limit + 1` bytes at most, unless it went past `limit`."""
    _refuse_larger(len(data), limit)
    return data


def _refuse_by_size(status: os.stat_result, position: int, limit: int) -> None:
    """Refuse a regular file (`status`, an open file's) with more than `limit` bytes from
    `position` on, by its size, before reading it: a sparse file of 20 GB (`truncate -s`) was
    read to the limit (512 MiB for `check`, in memory) before it was refused. A pipe's or
    FIFO's size is unknown, and its read stays bounded by the limit (`_within`), as the
    file's does should it grow after this look."""
    if stat.S_ISREG(status.st_mode):
        _refuse_larger(status.st_size - position, limit)


def _refuse_larger(size: int, limit: int) -> None:
    if size > limit:
        raise InputFileError(f"larger than {limit // 2**20} MiB, far more than any input needs")


#: Seconds a FIFO is waited on for input before the wait is said (`read_input_file`).
FIFO_WAIT_SAID_AFTER = 2.0


def not_utf8(error: UnicodeDecodeError) -> str:
    """What a reader says of an input that is not UTF-8 (decoding raised `error`): a spec, a
    family file, a returns table. The family file's reader called it "not valid TOML
    ('utf-8' codec can't decode ...)", and a UTF-16 returns table was read as columns named
    "\ufffd\ufffdd a t e" (a tester's), where the spec's reader said what to do."""
    return f"not UTF-8 text ({error.reason} at byte {error.start}); save it as UTF-8"


#: How much of a text table `check_utf8_head` reads: its header and first rows.
UTF8_HEAD_BYTES = 64 * 2**10


def check_utf8_head(path: Path) -> None:
    """Raise `UnicodeDecodeError` where the first `UTF8_HEAD_BYTES` of the file at `path` are
    not UTF-8 (a character cut by the end of that read passes): polars reads a UTF-16 CSV's
    header into columns of replacement characters, then says its columns are missing. A bad
    byte further on is polars' own "invalid utf-8 sequence"."""
    with path.open("rb") as file:
        head = file.read(UTF8_HEAD_BYTES)
    codecs.getincrementaldecoder("utf-8")().decode(head, final=False)


def _open_saying_a_wait(path: Path, *, fifo: bool) -> BinaryIO:
    """`path` opened to read; a FIFO once it has input (or its writer has come and gone).

    Opened as a file is, a FIFO waits in `open` until a writer opens it, for ever if none
    comes: `mkfifo f; dutchbook check f` hung without a word, and Ctrl-C did not end it
    where polars was imported (`plan`, `run`), as polars' SIGINT handler restarts the call
    (SA_RESTART). So a FIFO is opened without waiting and polled: `poll` is never restarted,
    so Ctrl-C ends the wait, and after `FIFO_WAIT_SAID_AFTER` seconds the wait is said once
    on stderr and goes on, as a writer may be on its way (a generator started after the
    command; `<(...)`'s is there at once). Linux's `poll` reports nothing on a FIFO no
    writer has opened yet; elsewhere the open waits for the writer as before, said alike.
    Said here, though `panels` prints nothing else, because every command that reads a
    user's file (`check`, a spec to `plan` or `run`) waits in this call."""
    if not fifo:
        return path.open("rb")
    if not sys.platform.startswith("linux"):
        return _open_with_a_timer(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # at once, with a writer or not
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # not swapped since: else the caller refuses
            waiting = select.poll()
            waiting.register(fd, select.POLLIN)
            if not waiting.poll(FIFO_WAIT_SAID_AFTER * 1000):
                _say_the_wait(path)
                waiting.poll()
        os.set_blocking(fd, True)  # read to the end: a writer slower than the pipe is waited on
        return open(fd, "rb")  # owns `fd` from here; closed by the caller's `with`
    except BaseException:
        os.close(fd)
        raise


def _open_with_a_timer(path: Path) -> BinaryIO:
    """A FIFO opened as a file is, the wait for its writer said after
    `FIFO_WAIT_SAID_AFTER` seconds (where `poll` does not tell a FIFO without a writer)."""
    timer = threading.Timer(FIFO_WAIT_SAID_AFTER, _say_the_wait, args=(path,))
    timer.daemon = True  # a wait ended by Ctrl-C leaves no thread to join
    timer.start()
    try:
        return path.open("rb")
    finally:
        timer.cancel()


def _say_the_wait(path: Path) -> None:
    sys.stderr.write(
        f"note: {path} is a FIFO with nothing written to it yet: waiting for input (Ctrl-C "
        "to stop)\n"
    )
    sys.stderr.flush()


def _refuse_unless_readable(mode: int) -> None:
    if not stat.S_ISFIFO(mode) and (kind := file_kind(mode)) is not None:
        raise InputFileError(f"is {kind}, not a file")


def has_control(text: str) -> bool:
    """A control character (C0, DEL, C1) or a Unicode line or paragraph separator: what a
    name shown in messages, tables and logs may not hold (an escape sequence would reach the
    terminal; a line break would split a one-line message)."""
    return control_character(text) is not None


def control_character(text: str) -> str | None:
    """The first character of `text` that `has_control` refuses, named as `U+000A, a control
    character` or `U+2028 LINE SEPARATOR`, or None: for a message that says which one."""
    for c in text:
        if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0:  # C0, DEL, C1: Unicode names none of them
            return f"U+{ord(c):04X}, a control character"
        if c in "\u2028\u2029":
            return _named(c)
    return None


#: Characters drawn as another in a table's font, and that other: spaces that do not break
#: or are narrower, hyphen-like dashes, and the fullwidth forms of ASCII (U+FF01..U+FF5E).
#: Only these: Unicode's compatibility folding (NFKC) also took "x2" and "x²", "fi" and "ﬁ",
#: which are drawn apart, as one name.
_DRAWN_ALIKE = str.maketrans(
    {
        **dict.fromkeys("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                        "\u2009\u200a\u202f\u205f\u3000", " "),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2212\ufe63", "-"),
        **{chr(code): chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)},
    }
)


def composed(text: str) -> str:
    """`text` as a reader sees it, which a new design's names and ids are compared in
    (`runs.spec.check_one_form`, `panels.families.check_one_form`): Unicode's composed form
    (NFC), with the characters of `_DRAWN_ALIKE` made the ones they are drawn as. "café"
    written with U+00E9, or with "e" and U+0301 COMBINING ACUTE ACCENT, is one text drawn
    alike in every table and figure, but two strings, so two models (or statements) so named
    ran as two under headings no reader could tell apart; so were "q 1" and "q" + U+00A0
    NO-BREAK SPACE + "1", "q-1" and "q" + U+2011 + "1", and "q1" and a fullwidth "q１"."""
    return unicodedata.normalize("NFC", text.translate(_DRAWN_ALIKE))


_T = TypeVar("_T")


def form_clash(items: Iterable[_T], text: Callable[[_T], str]) -> tuple[_T, _T] | None:
    """The first two of `items` whose `text` differs as written but not `composed`: one name
    in two Unicode forms (model names, family ids, a family's statement ids)."""
    seen: dict[str, _T] = {}
    for item in items:
        other = seen.setdefault(composed(text(item)), item)
        if text(other) != text(item):
            return other, item
    return None


def right_to_left(text: str) -> bool:
    """Whether `text` holds a right-to-left letter (Hebrew, Arabic, ...): set inside a line
    of ours, such a name takes the neutral characters and numbers beside it into its
    right-to-left run wherever the line is laid out by Unicode's bidirectional algorithm (a
    browser, matplotlib), and "name: 24 requests" reads "24 :name requests"."""
    return any(unicodedata.bidirectional(c) in ("R", "AL") for c in text)


#: The longest id (a family's, a statement's, a `check` event's): like a model name
#: (`runs.spec.MODEL_NAME_MAX`) it labels table rows and figure panels (5,000 characters
#: were taken and printed whole).
ID_MAX = 100

#: Zero-width non-joiner and joiner: free text may hold them between two visible characters.
_JOINERS = frozenset("\u200c\u200d")
#: Characters outside category Cf that draw nothing either (Unicode's default-ignorable and
#: blank ones): the combining grapheme joiner, Khmer's inherent vowels, Mongolian variation
#: selectors, Hangul fillers, the braille blank. "m1" + U+3164 read as "m1" in a table.
_BLANKS = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0"
)


def _variation_selector(c: str) -> bool:
    return 0xFE00 <= ord(c) <= 0xFE0F or 0xE0100 <= ord(c) <= 0xE01EF


def invisible_character(text: str, *, joiners_in_words: bool = False) -> str | None:
    """The first Unicode format character (category Cf) in `text`, named as `U+200B ZERO
    WIDTH SPACE`, or None: what an id or a name shown in tables may not hold.

    Format characters draw nothing (zero-width spaces and joiners, the byte order mark, a soft
    hyphen) or reorder what follows (bidi overrides and isolates), so "m1" and "m1" + U+200B
    read as one model in every table while counting as two. An id or a name refuses them all,
    a joiner in an emoji sequence too: no id needs one. `joiners_in_words=True` is for free
    text (a family's title, a model's `about`): a joiner (U+200C, U+200D) between two
    letters, marks or symbols passes, as Persian and Indic words and emoji sequences such as
    U+1F469 U+200D U+1F4BB (woman technologist) use them; at an end or beside a space, a
    digit or punctuation it is refused. Tag characters (U+E0020..U+E007F, which spell the
    flags of England or Scotland but also hide text) are refused everywhere. So are the
    blank characters outside Cf (`_BLANKS`: U+3164 HANGUL FILLER, U+2800 BRAILLE PATTERN
    BLANK, ...), and variation selectors, which free text keeps after a visible character
    (U+2764 U+FE0F, a red heart).
    """
    for i, c in enumerate(text):
        if unicodedata.category(c) == "Cf" or c in _BLANKS:
            if joiners_in_words and c in _JOINERS and _between_visible(text, i):
                continue
        elif _variation_selector(c):  # free text: after what it varies (an emoji's U+FE0F)
            if joiners_in_words and i > 0 and _visible(text[i - 1]):
                continue
        else:
            continue
        return _named(c)
    return None


def without_invisible(text: str) -> str:
    """`text` without the characters `invisible_character` names in either mode (format
    characters, `_BLANKS`, variation selectors): what a reader sees, so free text that may
    keep a joiner or a selector is compared as it reads ("a" + U+200D + "b" and "ab")."""
    return "".join(
        c for c in text
        if unicodedata.category(c) != "Cf" and c not in _BLANKS and not _variation_selector(c)
    )


def _named(c: str) -> str:
    return f"U+{ord(c):04X} {unicodedata.name(c, 'FORMAT CHARACTER')}"


#: Unicode's bidirectional controls (property Bidi_Control): the embeddings and overrides
#: U+202A..U+202E, the isolates U+2066..U+2069, the marks U+200E, U+200F and U+061C.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def bidi_control(text: str) -> str | None:
    """The first bidirectional control in `text`, named as `U+202E RIGHT-TO-LEFT OVERRIDE`,
    or None: such a character reorders what follows it on screen, so a text holding one is
    displayed other than it reads (and than a model is sent it). Free text that may be
    right-to-left needs none: Unicode's algorithm orders its letters by itself."""
    return next((_named(c) for c in text if c in _BIDI_CONTROLS), None)


def _visible(c: str) -> bool:
    category = unicodedata.category(c)
    return category[0] in "LMN" or category in ("So", "Sk", "Sm")


def _between_visible(text: str, i: int) -> bool:
    if i == 0 or i == len(text) - 1:
        return False
    before, after = unicodedata.category(text[i - 1]), unicodedata.category(text[i + 1])
    return (before[0] in "LM" or before in ("So", "Sk")) and (after[0] in "LM" or after == "So")
