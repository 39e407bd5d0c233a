"""Scratch folders a killed `dutchbook` process leaves behind, removed by the next one that may.

A process killed with SIGKILL (or by a power cut) runs no cleanup, and each kill would leave
one more of these for good:
- in the run folder, scoring's and repair's part folders (`.scoring-*`, `.repair-*`; at paper
  scale they hold every chunk's parts), and a report being written (`.report-*`). Only a
  holder of the folder's lock writes them, so whoever takes the lock next removes any it
  finds (`remove_folder_scratch`).
- in the system's temporary folder, a new folder's staged plan (`dutchbook-plan-*`, as large
  as the plan) and a rehearsal's fake credentials (`dutchbook-sim-*`). They are named with the
  creating process's pid (`scratch_folder`), and a run removes those whose process is gone
  (`remove_orphaned_scratch`). Folders named before the pid was part of the name are left:
  nothing says whether their process is alive.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psutil

#: The scratch folders inside a run folder (`runs.scoring_step`, `runs.repair_step`); a
#: report's is named by `runs.report_folder.is_stage`.
FOLDER_SCRATCH = (".scoring-", ".repair-")
#: The kinds of scratch folder made in the system's temporary folder.
SYSTEM_SCRATCH = ("plan", "sim")
#: A process started this long after a folder was last changed did not make it (pid reuse).
_CLOCK_SLACK_S = 1.0


def scratch_folder(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for `kind` (one of `SYSTEM_SCRATCH`) naming this process's pid."""
    return tempfile.TemporaryDirectory(prefix=f"dutchbook-{kind}-{os.getpid()}-")


def remove_folder_scratch(run_dir: Path) -> list[Path]:
    """Remove the scratch folders in `run_dir`; call only with the folder's lock held."""
    from runs.report_folder import is_stage

    removed = []
    for path in sorted(run_dir.iterdir()):
        if path.is_dir() and (path.name.startswith(FOLDER_SCRATCH) or is_stage(path.name)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_orphaned_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders under `root` (the system's temporary folder) whose process
    is gone; those of live processes, of other users and of unknown owners stay."""
    root = root or Path(tempfile.gettempdir())
    removed = []
    for kind in SYSTEM_SCRATCH:
        for path in root.glob(f"dutchbook-{kind}-*-*"):
            pid = _owner(path.name, kind)
            if pid is None or _owner_alive(pid, path):
                continue
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed


def _owner(name: str, kind: str) -> int | None:
    pid, sep, _ = name.removeprefix(f"dutchbook-{kind}-").partition("-")
    return int(pid) if sep and pid.isdigit() else None


def _owner_alive(pid: int, path: Path) -> bool:
    """Whether `pid` is a live process that started before `path` last changed (a process
    started later only reuses the pid of the one that made it)."""
    try:
        started = float(psutil.Process(pid).create_time())
        changed = path.stat().st_mtime
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, OSError):
        return True  # another user's process, or a folder gone meanwhile: leave it
    return started <= changed + _CLOCK_SLACK_S
