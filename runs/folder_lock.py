"""The run folder's lock (`run_dir/.lock`): one process rewrites a run's files at a time.

`dutchbook run` holds it from before planning to the end of its report, and writes its pid
beside it. The commands that rewrite what a run writes (`score`, `repair`, `reparse`,
`report`) hold it too, without a pid file (they are not runs: `status` must not call the
folder live for them), so that none of them interleaves with a live run or with another of
them: a `score` started during dispatch and ending after the run's own scoring would
otherwise leave partial scores in place of the complete ones. A second writer is refused in
one line, exit 5, naming the live run's pid when there is one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from engine.durable import NOT_WRITABLE_ERRNOS
from engine.runlock import LedgerBusy, acquire_lock, release_lock
from runs.leftovers import remove_folder_scratch
from runs.output import mark_files_written


class FolderBusy(LedgerBusy):
    """Another process holds the run folder; the message says who and what to do."""


class FolderUnwritable(RuntimeError):
    """This process may not write in the run folder; the message says why and what to do."""


def take_folder_lock(run_dir: Path, then: str, unwritable: str) -> int:
    """The folder's lock (an open descriptor), or `FolderBusy` ending in `then`, or
    `FolderUnwritable` ending in `unwritable` when the lock file cannot be made there; the
    scratch a killed holder left in the folder is removed once the lock is held."""
    try:
        fd = acquire_lock(run_dir, run_dir)
    except LedgerBusy as exc:
        raise FolderBusy(f"{exc}; {then}") from None
    except OSError as exc:
        if exc.errno not in NOT_WRITABLE_ERRNOS:
            raise
        why = f"({exc.strerror}); {unwritable}"
        raise FolderUnwritable(f"cannot write in {run_dir} {why}") from None
    remove_folder_scratch(run_dir)
    return fd


@contextlib.contextmanager
def folder_held(run_dir: Path, command: str) -> Iterator[None]:
    """The folder's lock held for `dutchbook <command>`, on a folder the command has already
    found to be a run's (`runs.commands._run_folder`), so the lock file is all it adds.

    Its body is all the command writes: once it ends without an error, the command's files
    are written (`runs.output.mark_files_written`), and an output closed after that cut only
    what it prints (`runs.cli.output_closed`)."""
    fd = take_folder_lock(
        run_dir,
        f"let it finish, then run `dutchbook {command}` again",
        f"`dutchbook {command}` writes the run's files there (`status` and `audit` only read "
        "them): copy the folder somewhere you can write, and give it the copy",
    )
    try:
        yield
    finally:
        release_lock(fd)
    mark_files_written()  # reached only when the body ended without an error
