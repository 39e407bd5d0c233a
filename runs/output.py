"""The commands' standard output, whose failed writes say that the output failed.

`dutchbook run SPEC > file` with `file` on a full disk (or `> /dev/full`) fails on a print,
not on a write to the run folder. Without this, the run's own full-disk handling
(`engine.durable.disk_full_raised`) read the print's ENOSPC as the run folder's and said
"no space left for out/<name>", on a disk with room. A print through `stdout_console`
raises `OutputFull` instead: not an `OSError`, so no folder's handler takes it for its own,
and `runs.cli.main` ends the command in one line that names the output (exit 6).

Kept free of rich at import: `runs.cli` imports it while handling an error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

#: What a write fails with for want of room: a full disk or device, a quota, a size limit.
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

#: How the messages name the standard output.
STDOUT_NAME = "the output (stdout)"


#: Whether the running command's run-folder files are all written (`mark_files_written`):
#: its output closing then cut only what it prints after (`runs.cli.output_closed`).
_files_written = False


#: What the folder needs next once the running command's files are written, where it
#: needs more than they are (`mark_next_step`), for `runs.cli.output_closed` to say.
_next_step: str | None = None


def mark_files_written(written: bool = True) -> None:
    """Record that the running command has written all it writes to its run folder (or, with
    `written=False`, that a command is starting and has written nothing yet, nor said what
    the folder needs next)."""
    global _files_written, _next_step
    _files_written = written
    if not written:
        _next_step = None


def files_written() -> bool:
    """Whether the running command has written all it writes (`mark_files_written`)."""
    return _files_written


def mark_next_step(step: str | None) -> None:
    """Record what the folder needs after the running command, in the words it prints
    (`reparse`: the scores still read the answers before it, run `dutchbook score DIR`);
    None, nothing. An output cut after the command's files were written said "nothing to
    run again", though the folder needed `score`, which the cut line was the one to say."""
    global _next_step
    _next_step = step


def next_step() -> str | None:
    """What the folder needs after the running command (`mark_next_step`), or None."""
    return _next_step


class OutputFull(Exception):
    """A write to the command's standard output found no room (`error` says why)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(f"a write to {STDOUT_NAME} failed: {error.strerror or error}")
        self.error = error


class OutputClosed(Exception):
    """The standard output's reader went away (`dutchbook status DIR | head -1`), or it is
    not open for writing (`1</dev/null`: `reader_gone` False), which ended every command in
    a traceback.

    Not a `BrokenPipeError`: rich ends a print that meets one in `SystemExit(1)` without a
    word (`Console.on_broken_pipe`), before `runs.cli.output_closed` can end a command that
    only reads in exit 0, as `head` users expect."""

    def __init__(self, error: OSError) -> None:
        #: Its reader went away (a broken pipe), rather than a stdout it may not write.
        self.reader_gone = isinstance(error, BrokenPipeError)
        what = "the reader of" if self.reader_gone else "no writing to"
        super().__init__(f"{what} {STDOUT_NAME}: {error.strerror or error}")
        self.error = error


#: What can cut a command's printing once its work is done: stdout's reader gone or not open
#: for writing (`OutputClosed`), or no room left in it (`OutputFull`).
OutputCut = OutputClosed | OutputFull


class _Stdout:
    """`sys.stdout`, looked up at each call (a test's runner swaps it), whose writes that
    find no room raise `OutputFull`, and those that find no reader `OutputClosed`; any
    other error as it was. Everything else (isatty, encoding, fileno) is the stream's own."""

    def __init__(self) -> None:
        #: Whether text written through it reached the standard output (`reached_stdout`).
        self.reached = False
        self._unflushed = False  # written since the last flush: buffered, not yet out

    def write(self, text: str) -> int:
        if not text:
            # Rich writes "" as a capture ends (`runs.report.write`, before the report's
            # files are marked written): on a stdout not open for writing even that fails,
            # and a report written in full ended as one stopped part-way.
            return 0
        try:
            written = sys.stdout.write(text)
        except OSError as exc:
            raise output_error(exc) from exc
        self._unflushed = True
        return written

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except OSError as exc:
            raise output_error(exc) from exc
        # Out only now: a pipe's stdout holds a line in its buffer until the flush fails.
        self.reached = self.reached or self._unflushed
        self._unflushed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stdout, name)


def output_error(exc: OSError) -> Exception:
    """What a failed write to the standard output is to a command: `OutputClosed` for a
    reader gone, or for a stdout not open for writing (EBADF: `1</dev/null`), `OutputFull`
    for no room, else the error itself."""
    if isinstance(exc, BrokenPipeError) or exc.errno == errno.EBADF:
        return OutputClosed(exc)
    return OutputFull(exc) if exc.errno in NO_ROOM_ERRNOS else exc


def stdout_to_null() -> None:
    """Point the standard output at /dev/null once a write to it failed (its reader gone, no
    room, not open for writing): what is still buffered for it would fail again at exit, in
    a traceback of Python's own."""
    with contextlib.suppress(OSError, ValueError):  # ValueError: no file (a test's buffer)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def print_text(text: str) -> None:
    """`text` and a newline on the standard output, as `typer.echo` prints it, but a write
    that finds no room raises `OutputFull`: the `--json` objects of `status`, `audit` and
    `plan`, printed by `typer.echo` through a stream of click's own, ended in "a write
    failed" where their tables say "a write to the output (stdout) failed"."""
    out = _Stdout()
    out.write(text + "\n")
    out.flush()


def say(line: str) -> None:
    """`line` on the standard error, or nowhere where it cannot be written (closed with
    `2>&-`, full as `/dev/full`, its reader gone): for a warning, or a closing line whose
    exit status says the same. Written with `typer.echo`, such a line ended a command that
    had done its work in exit 6 (exit 1 on a pipe whose reader had left): a run the spend
    cap stopped, exit 3, read as a full disk; with no stderr, Python's print wrote to stdout."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(f"{line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # ValueError: a stream already closed
        return


def warn(line: str) -> None:
    """"warning: `line`" on the standard error, or nowhere (`say`): a warning is advice,
    and a command that could do its work ended on one."""
    say(f"warning: {line}")


def stdout_is_stderr() -> bool:
    """Whether the standard output and error are the same file, by device and inode (a
    terminal both write to, `> log 2>&1`): a line meant for both is then said once. A
    stream with no file of its own (a test runner's buffer) is one only with itself."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return sys.stdout is sys.stderr
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def reached_stdout(console: Console) -> bool:
    """Whether anything `console` printed reached the standard output: False only for a
    `stdout_console` none of whose prints did (`serve-sim | true`, its reader gone before
    its first line, which `| head -1` reads), True for any other (nothing known of it)."""
    out = console.file
    return not isinstance(out, _Stdout) or out.reached


def stdout_console(**options: Any) -> Console:
    """A rich `Console` on the standard output, as `Console(**options)` makes one, whose
    writes that find no room raise `OutputFull`. Emoji codes are off unless asked: a model
    named `ft:gpt-4o-mini:acme:cat:x` (a fine-tune's id) printed with a cat in it."""
    from rich.console import Console

    options.setdefault("emoji", False)
    return Console(file=_Stdout(), **options)  # type: ignore[arg-type]
