"""Is the folder a user named a run folder? Asked before a command reads or locks it.

`status`, `audit` and `reparse` read a ledger that may legitimately be empty (a run that has
just started), so given any folder at all they answered with zeros, and `reparse`, which
takes the folder's lock and opens the ledger, also left `.lock`, `journal/`, `attempts/` and
`responses/` behind in it. A mistyped path (the parent `runs/`, a home folder) then looked
like a run in which nothing had failed. A folder counts as a run folder when `dutchbook run`
has written anything of its own into it: the pid file (its first write), the frozen spec,
the plan, or the ledger. A run folder with a device, FIFO or socket among its files is
refused too (`runs.damaged_files.special_files_report`): a read of it never ended.
"""

from __future__ import annotations

import os
from pathlib import Path

from panels.input_files import file_kind
from runs.commands._errors import fail
from runs.damaged_files import special_files_report
from runs.plan_checksums import plan_damage_unless_written
from runs.run_folder import RUN_FOLDER_MARKS, has_run_marks


def require_run_folder(run_dir: Path) -> None:
    """Exit with one line (status 2) unless `run_dir` is a folder `dutchbook run` wrote."""
    try:
        _require_run_folder(run_dir)
    except OSError as exc:  # a name too long, a folder it may not look in: not ENOENT
        # A file of the folder it may not read (its plan, hashed here) is named, not the folder.
        fail(f"cannot look at {exc.filename or run_dir}: {exc.strerror or exc}")


def _nearest_folder(run_dir: Path) -> str:
    """"; did you mean X?" for the folder beside a missing `run_dir` whose name is nearest
    its own (out/quickstart for out/quickstrat), else "" (none near, or its parent cannot
    be listed)."""
    import difflib

    try:
        with os.scandir(run_dir.parent) as entries:
            names = [entry.name for entry in entries if entry.is_dir()]
    except OSError:
        return ""
    near = difflib.get_close_matches(run_dir.name, names, n=1)
    return f"; did you mean {run_dir.parent / near[0]}?" if near else ""


def _require_run_folder(run_dir: Path) -> None:
    if not run_dir.exists() and run_dir.is_symlink():  # a link loop, or to nothing
        fail(
            f"{run_dir} is a link to {os.readlink(run_dir)}, which leads to no folder; give "
            "the folder `dutchbook run` wrote"
        )
    if not run_dir.exists():
        # A new run makes its folder once its spec and credentials are checked, before it
        # plans: a `status` asked in its first moments finds nothing there yet. Said last:
        # "no run folder at out/quickstrat (a new run makes it ...)" read as a run to wait
        # for, where the path was mistyped.
        fail(
            f"{run_dir} does not exist; check the path{_nearest_folder(run_dir)} (a new run "
            "makes its folder once it has checked its spec: one started a moment ago may "
            "not have made it yet)"
        )
    if not run_dir.is_dir():
        # `file_kind` names a device, a FIFO, a socket: /dev/zero was called "a file" here
        # where `check` said "a character device".
        kind = file_kind(run_dir.stat().st_mode) or "a file"
        fail(f"{run_dir} is {kind}, not a run folder; give the folder `dutchbook run` wrote")
    if not has_run_marks(run_dir):
        fail(
            f"{run_dir} is not a run folder (it has no {', '.join(RUN_FOLDER_MARKS)}); "
            "give the folder `dutchbook run` wrote"
        )
    from runs.folder_writes import dangling_folder  # engine's scans: not at import

    if (dangling := dangling_folder(run_dir)) is not None:
        fail(dangling)
    if (damaged := special_files_report(run_dir)) is not None:
        fail(damaged)  # a FIFO among its files: the read would never end
    if (damaged := plan_damage_unless_written(run_dir)) is not None:
        fail(damaged)  # counts and coverage against a plan that is not the run's
