"""One-line errors for users: a message and a non-zero exit, never a traceback.

Every command goes through `user_errors`: the kinds of error a user can cause (a bad spec,
family, data file or journal, a file that is not UTF-8, missing credentials) are always turned
into one line and exit 2, plus whatever else a command lists. User text (file names, keys,
model names such as `[/x]`) is printed literally, never read as Rich markup.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from engine.durable import READ_ONLY_SAVED
from runs.output import say
from runs.signals import EXIT_INTERRUPTED, INTERRUPTED, mark_interrupt_said

if TYPE_CHECKING:
    from engine.durable import DiskFull


class _StderrConsole(Console):
    """A console on stderr whose reader's going drops the line. Rich's own handling of the
    broken pipe points *stdout* at /dev/null and exits 1, so `fail` with stderr's reader
    gone (`2>&1 | true`) ended a user error (2) in exit 1."""

    def on_broken_pipe(self) -> None:
        # Rich keeps what it could not write and would write it before the next line: the
        # line is dropped, the console left as it was for a stderr that may come back.
        del self._buffer[:]


_stderr = _StderrConsole(stderr=True, highlight=False, emoji=False)  # ":cat:" as written

#: Exit status of a user error: nothing was sent, fix the input and run again.
EXIT_USER_ERROR = 2
#: Exit status when the disk filled up (every command; `dutchbook run` documents it).
EXIT_DISK_FULL = 6
#: Exit status when the folder's file system turned read-only while the command ran (every
#: command; a folder read-only before it began is refused as a user error, exit 2).
EXIT_READ_ONLY = 7
#: What a user is told to do after a write that found no room (`dutchbook run` adds "to resume").
NO_ROOM_HINT = "free some space and run the same command again"
#: What a user is told to do after the folder turned read-only (`dutchbook run` adds "to
#: resume").
MADE_READ_ONLY_HINT = "make it writable again (remount it) and run the same command again"
#: What a folder turned read-only kept (`engine.durable.READ_ONLY_SAVED`): not "nothing
#: written was lost", as a full disk's line says, so a resume asks again, and pays again, for
#: the answers its last unsaved writes held.
READ_ONLY_KEPT = f"{READ_ONLY_SAVED}: a resume asks again (and pays again) for any answer they held"
#: What a user is told to do about a file or folder this user may not write (or read).
NO_ACCESS_HINT = "give it the access it lacks, then run the same command again"
#: What a user is told to do about a file where a folder goes, or a folder where a file goes.
IN_THE_WAY_HINT = "move or remove it, then run the same command again"
#: What a user is told to do about a part of a run folder mounted read-only.
READ_ONLY_HINT = "copy the run folder somewhere you can write, and give it the copy"


def link_to_no_folder(path: Path) -> str:
    """What `path`, a link leading to no folder (to nothing, to a file, or in a loop), is
    where a folder goes."""
    return f"a link to {os.readlink(path)}, which leads to no folder, where a folder goes"
#: Exit status when another process holds the run folder (`runs.folder_lock`): nothing done.
EXIT_BUSY = 5
#: Exit status when no solve could certify a set's profit (`scoring.dutch_book.
#: UncertifiedError`): `check`, and `run` and `score`, which write no scores then and keep
#: the answers. 1, as its traceback ended them before it was said in one line.
EXIT_UNCERTIFIED = 1


def fail(message: str, code: int = EXIT_USER_ERROR) -> NoReturn:
    """Print `error: <message>` on stderr (the message literally) and exit with `code`."""
    line = Text("error: ", style="red")
    line.append(message)
    # A line stderr cannot take (full, closed, its reader gone) is dropped: its failure read
    # as a full disk's (exit 6) or stdout's reader gone (exit 1), where `code` says it all.
    with contextlib.suppress(OSError, ValueError):
        _stderr.print(line, soft_wrap=True)
    raise typer.Exit(code)


def common_user_errors() -> tuple[type[BaseException], ...]:
    """The errors a user's own input can cause, shared by every command.

    Imported here, when an error is being handled, so that a command's start-up pays nothing
    for modules it may never touch.
    """
    from engine.journal import JournalError
    from panels.data import DataError
    from panels.families import FamilyError
    from panels.formula import FormulaError
    from providers.types import ConfigError
    from runs.folder_lock import FolderUnwritable
    from runs.spec import SpecError

    return (
        FolderUnwritable,
        SpecError,
        FamilyError,
        FormulaError,
        DataError,
        ConfigError,
        JournalError,
        UnicodeDecodeError,
        # A file where a run folder's folder goes (`responses`, `journal`, ...) or the
        # reverse: one line naming it (`_in_the_way`), where reparse, score, repair and a
        # resume ended in a traceback.
        NotADirectoryError,
        IsADirectoryError,
        FileExistsError,
    )


@contextlib.contextmanager
def user_errors(*kinds: type[BaseException], folder: Path | None = None) -> Iterator[None]:
    """Turn the common user errors and the listed kinds into a one-line message and exit 2;
    with the run `folder`, a read of a damaged Parquet file of it as well, naming the file."""
    try:
        yield
    except typer.Exit:
        raise
    except BaseException as exc:
        if not isinstance(exc, Exception):
            from runs.damaged_files import polars_panic

            if not polars_panic(exc):  # a damaged Parquet file can make polars panic
                raise  # Ctrl-C, an exit: no error of the command's
        from runs.folder_lock import FolderBusy

        if isinstance(exc, FolderBusy):  # another process holds the run folder
            fail(str(exc), EXIT_BUSY)
        if folder is not None and isinstance(exc, PermissionError):
            from runs.damaged_files import damage_report

            # polars' own: its message cuts the file's path short; the folder's files say it
            if (message := damage_report(folder, exc)) is not None:
                fail(message)
        if isinstance(exc, (*kinds, *common_user_errors())) or _part_read_only(exc):
            fail(_describe(exc))
        if folder is not None:
            from runs.damaged_files import damage_report

            message = damage_report(folder, exc)
            if message is not None:
                fail(message)
        raise


@contextlib.contextmanager
def interrupt_says_rerun() -> Iterator[None]:
    """Ctrl-C ends the command in one line and exit 130, saying to run it again (typer alone
    exits 130 without a word): the command writes its files again from the kept answers, so
    a second run finishes what the first began."""
    try:
        yield
    except KeyboardInterrupt:
        say(f"{INTERRUPTED} to finish")  # exit 130 kept where stderr cannot take it
        mark_interrupt_said()
        raise typer.Exit(EXIT_INTERRUPTED) from None


@contextlib.contextmanager
def disk_full_says(run_dir: Path) -> Iterator[None]:
    """A full disk ends the command in one line and exit 6, however the write that failed
    reported it (an `OSError`, polars' own error, or `DiskFull`): files are replaced whole,
    so what the folder held before is still there. A folder turned read-only meanwhile
    (`engine.durable.FolderReadOnly`) ends it the same way, in its words and exit 7."""
    from engine.durable import DiskFull, disk_full_raised

    try:
        with disk_full_raised(run_dir, folder=run_dir):
            yield
    except DiskFull as exc:
        fail(*disk_refused_says(exc))


def disk_refused_says(
    refusal: DiskFull | str, read_only: bool = False, *, resumes: bool = False
) -> tuple[str, int]:
    """The line (after `error: `) and the exit status for a write the disk refused: full
    (exit 6) or the folder turned read-only (`read_only`, or a `FolderReadOnly`: exit 7).
    `refusal` is the error or its words (a dispatch's summary keeps them); `resumes` (a
    `dutchbook run`'s) says that running again resumes the run, and, for a folder turned
    read-only, that it asks again for the answers the disk's last unsaved writes held."""
    from engine.durable import DiskFull, FolderReadOnly

    read_only = read_only or isinstance(refusal, FolderReadOnly)
    hint, status = (MADE_READ_ONLY_HINT, EXIT_READ_ONLY) if read_only else (
        NO_ROOM_HINT, EXIT_DISK_FULL
    )
    if isinstance(refusal, DiskFull) and refusal.nothing_kept:  # its new folder taken away
        return f"{refusal}; nothing was started; {hint}", status
    to_resume = " to resume" if resumes else ""
    if read_only:  # the commands that ask nothing (`score`, `report`...) pay for nothing
        kept = READ_ONLY_KEPT if resumes else READ_ONLY_SAVED
        return f"{refusal}; {kept}; {hint}{to_resume}", status
    kept = "; nothing written was lost" if resumes else ""
    return f"{refusal}{kept}; {hint}{to_resume}", status


def _part_read_only(exc: BaseException) -> bool:
    """Whether `exc` is a write refused by a read-only file system that reached a command's
    one-line errors as it was: the commands that write a run folder make one of the folder's
    own disk turned read-only a `FolderReadOnly` (exit 7) first, so this is a part of the
    folder mounted read-only on its own (a bind mount over `report/`, made while `run`
    dispatched), the user's to mend, as `report` says it (exit 2), not a traceback."""
    from engine.durable import is_read_only

    return is_read_only(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, PermissionError) and exc.errno is None:
        # polars' own ("Permission denied (os error 13): .../responses/.part-2.parquet.tmp"),
        # which names its path in its message: what to do, as for any other denied path
        return f"{exc}{_NO_ACCESS}"
    if getattr(exc, "errno", None) is None and _part_read_only(exc):
        # polars' own ("Read-only file system (os error 30): .../responses/.part-1.parquet.tmp")
        return f"{exc} ({READ_ONLY_HINT})"
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        # "Is a directory: report/index.html", not "[Errno 21] Is a directory: '...'"
        second = f" -> {exc.filename2}" if exc.filename2 is not None else ""
        return f"{exc.strerror}: {exc.filename}{second}{_in_the_way(exc)}{_left(exc)}"
    return str(exc)


def _left(exc: OSError) -> str:
    """What a failed swap of several files left (`engine.durable.CommitFailed.outcome`),
    after its error; nothing for any other error."""
    from engine.durable import CommitFailed

    return f"; {exc.outcome()}" if isinstance(exc, CommitFailed) else ""


#: What `_describe` adds to a path this user may not write (or read).
_NO_ACCESS = f" (this user may not use it, or the folder it is in: {NO_ACCESS_HINT})"


def _in_the_way(exc: OSError) -> str:
    """What to do when a file stands where a folder goes, or a folder where a file goes
    (say, a file named `report` in a run folder): which one, and to move it."""
    names = [n for n in (exc.filename2, exc.filename) if isinstance(n, str)]
    if exc.errno == errno.EISDIR:
        found = next((Path(n) for n in names if Path(n).is_dir()), None)
        what = "a folder where a file goes"
    elif exc.errno in (errno.EEXIST, errno.ENOTDIR):
        # ENOTDIR names the whole path: the file in the way is one of its parents.
        paths = [p for n in names for p in (Path(n), *Path(n).parents)]
        found = next(
            (p for p in paths if (p.exists() or p.is_symlink()) and not p.is_dir()), None
        )
        what = "a file where a folder goes"
        if found is not None and found.is_symlink():  # dangling, a loop, or to a file
            what = link_to_no_folder(found)
    elif exc.errno in (errno.EACCES, errno.EPERM):
        return _NO_ACCESS
    elif exc.errno == errno.EROFS:  # a part of the folder mounted read-only: nothing changed
        return f" ({READ_ONLY_HINT})"
    else:
        return ""
    if found is None:
        return ""
    return f" ({found} is {what}: {IN_THE_WAY_HINT})"


def path_given(value: str) -> Path:
    """A file or folder argument to read (`typer`'s `parser=`), as typed. Refused as usage
    errors: an empty one (`Path("")` is ".", so `status ""` read the current folder and `run
    SPEC --out ""` would have written a campaign into it), and, as click's own `Path` type
    did before this parser replaced it, one that exists and may not be read."""
    path = path_to_write(value)
    try:
        os.stat(path)
    except OSError:  # not there, or not to be looked at: the command says which, in its words
        return path
    if not os.access(path, os.R_OK):
        raise typer.BadParameter(f"Path {value!r} is not readable.")
    return path


def path_to_write(value: str) -> Path:
    """`path_given` for a file only written (`serve-sim --counts-file`): empty refused, and
    one that may be written but not read let through (click's type refused it)."""
    if not value:
        raise typer.BadParameter("is empty: name a file or folder")
    return Path(value)


# typer shows a parser's name as the value's type in `--help`: `<path>`, as click's showed.
path_given.__name__ = path_to_write.__name__ = "path"
