"""`report/` replaced whole: a report is written into a scratch folder beside it and swapped in.

Written in place, file by file, a report killed half-way (SIGKILL, a power cut, a full disk)
left `report/` holding files of two reports: new tables beside the old page, figures and
`summary.json` that disagreed, with nothing to say so. Now every file of a report is written
into `.report-<pid>` in the run folder, and only a report written whole takes `report/`'s
place, in one atomic exchange of the two folders (Linux's `renameat2(RENAME_EXCHANGE)`).
A report that fails or is killed leaves the last whole report as it was; its scratch folder
is removed by whoever takes the folder's lock next (`runs.leftovers.remove_folder_scratch`).

Files in the old `report/` that the new report does not write (a user's notes, a table an
earlier version wrote) are carried over, as writing in place kept them: linked, not copied;
a figure this report left out is not (writing in place removed it). The folder keeps its mode
and group. A link, a mount point, or a folder holding a mount is written in place, as before.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from engine.durable import is_temp_name, write_refused

#: The report's folder in a run folder.
REPORT_DIR = "report"
#: The figures' manifest in `report/` (`runs.figures.MANIFEST`, which writes it): here, where
#: the folder's layout is, so that `runs.figures` imports this module and not the reverse.
FIGURES_MANIFEST = "figures.json"
#: How a report's scratch folder is named (`is_stage`, which `runs.leftovers` asks).
STAGE_PREFIX = ".report-"

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: What says the exchange is not to be had here (another OS, an old kernel or libc, a file
#: system without it): the two folders are then swapped by two renames.
_NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})


@contextlib.contextmanager
def staged_report(run_dir: Path) -> Iterator[Path]:
    """A fresh folder to write a report into; once the block ends without an exception it
    becomes `run_dir/report` (`report_dir`), else it is removed and `report/` stays.

    `report/` is written in place, as before, where a swap cannot be had safely: a link to
    a folder elsewhere (the link would be replaced), a mount point (it cannot be renamed) or a
    folder holding one (a mount does not move with its folder's rename, and removing the old
    report would cross into it)."""
    report = report_dir(run_dir)
    if (report.exists() or report.is_symlink()) and not report.is_dir():
        # A file, or a link leading to no folder: said before the report is computed.
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(report))
    if report.is_symlink() or _holds_a_mount(report):
        yield report
        return
    if report.is_dir():
        _refuse_unless_writable(report)
    stage = run_dir / f"{STAGE_PREFIX}{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)  # a killed process's, whose pid this one has
    stage.mkdir()
    try:
        yield stage
        if report.is_dir():
            _carry_over(report, stage)
            _same_access(report, stage)  # after the writes: a read-only mode would stop them
            _swap(stage, report)  # the stage now holds the old report
        else:
            stage.rename(report)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def is_stage(name: str) -> bool:
    """Whether `name` is a report's scratch folder (`.report-<pid>`, or its `-old` twin),
    which the next holder of the folder's lock removes; not any name beginning so (a user's
    `.report-backup`)."""
    return _STAGE_NAME.fullmatch(name) is not None


_STAGE_NAME = re.compile(re.escape(STAGE_PREFIX) + r"\d+(-old)?")


def _holds_a_mount(report: Path) -> bool:
    """Whether `report` is a mount point or holds anything on another device (False when
    there is no `report`)."""
    if not report.is_dir():
        return False
    if os.path.ismount(report):
        return True
    device = report.stat().st_dev
    for top, folders, files in os.walk(report):
        for name in (*folders, *files):
            with contextlib.suppress(OSError):
                if os.lstat(os.path.join(top, name)).st_dev != device:
                    return True
    return False


def _refuse_unless_writable(report: Path) -> None:
    """A `PermissionError` naming `report/` unless this process may write in it, as writing
    in place refused such a folder: the swap needs only the run folder's write permission,
    and replaced a read-only `report/`, or one of another user's (whose old copy it then
    could not remove). Its probe is a temporary, never carried over (`_carry_over`)."""
    refused = write_refused(report)
    if isinstance(refused, PermissionError):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(report)) from None
    if refused is not None:  # a read-only mount: said as the system says it
        raise refused


def _same_access(report: Path, stage: Path) -> None:
    """The stage gets `report/`'s mode and group, which the swap would otherwise reset to
    the umask's (a folder made private became world-readable)."""
    held = report.stat()
    os.chmod(stage, stat.S_IMODE(held.st_mode))
    if stage.stat().st_gid != held.st_gid:
        with contextlib.suppress(OSError):  # a group this user is not in
            os.chown(stage, -1, held.st_gid)


def report_dir(run_dir: Path) -> Path:
    return run_dir / REPORT_DIR


def _carry_over(old: Path, new: Path) -> None:
    """Link into `new` what `old` has and `new` does not, folders whole, but a figure: one
    this report left out is not drawn, and writing in place removed its earlier file. Nor
    the figures' manifest: a report that drew none (matplotlib not installed,
    `DUTCHBOOK_FIGURES=0`) kept the last report's, which listed eight figures no longer
    there. A folder of the user's where the report writes a file is refused, as writing in
    place refused it: the swap would remove it with the old report."""
    from runs.report_figures import figure_files

    figures = figure_files() | {FIGURES_MANIFEST}
    for entry in old.iterdir():
        target = new / entry.name
        if entry.is_dir() and not entry.is_symlink() and target.is_file():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(entry))
        if (
            target.exists() or target.is_symlink() or entry.name in figures
            or is_temp_name(entry.name)
        ):  # fmt: skip
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, target)


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:  # a file system without hard links, or a link to a folder
        shutil.copy2(source, target, follow_symlinks=False)


def _swap(stage: Path, report: Path) -> None:
    """Exchange the two folders at once; where that cannot be had, by two renames (a kill
    between them leaves no `report/` until the next report, never a mixed one)."""
    if _exchange(stage, report):
        return
    old = stage.with_name(stage.name + "-old")
    shutil.rmtree(old, ignore_errors=True)
    report.rename(old)
    stage.rename(report)
    old.rename(stage)


def _exchange(first: Path, second: Path) -> bool:
    """Whether `renameat2(RENAME_EXCHANGE)` swapped the two paths; False where it is not to
    be had. No library offers it (os.rename replaces only a file or an empty folder)."""
    import ctypes  # only here: the modules naming REPORT_DIR need none of it
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(second))
