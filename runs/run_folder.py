"""What makes a folder a run's: the names `dutchbook run` writes into it, first to last; and
which folder a `dutchbook run` writes (`run_folder_of`, from its spec; `ResolvedFolder`, as the
run itself resolved it).

Commands that read a run (`status`, `audit`, `reparse`, ...) refuse a folder with none of
them (a mistyped path would otherwise read as a run in which nothing failed), and `run`
refuses to start a new campaign in a folder that holds other files (it would write its
`report/`, `scores.parquet` and logs over or among them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: What `dutchbook run` writes into a folder, first to last; any one of them makes it a run's:
#: the pid file (its first write), the design and the frozen spec, the plan, or the ledger.
RUN_FOLDER_MARKS = (
    "run.pid",
    "design.json",
    "spec.toml",
    "plan.parquet",
    "journal",
    "attempts",
    "responses",
)

#: The folder lock, taken before the pid file is written: a run killed between the two
#: leaves only it.
_LOCK_NAME = ".lock"


def has_run_marks(folder: Path) -> bool:
    """Whether `folder` holds anything `dutchbook run` writes (see `RUN_FOLDER_MARKS`)."""
    return any((folder / mark).exists() for mark in RUN_FOLDER_MARKS)


def foreign_entries(folder: Path, most: int = 3) -> list[str]:
    """Up to `most` names in an existing `folder` that is not a run's, sorted; empty when
    the folder is a run's, or holds nothing but the lock a killed run left."""
    if has_run_marks(folder):
        return []
    names = sorted(p.name for p in folder.iterdir() if p.name != _LOCK_NAME)
    return names[:most] + (["..."] if len(names) > most else [])


def run_folder_of(spec: Path, out: Path | None) -> Path | None:
    """The folder `dutchbook run SPEC [--out OUT]` writes (`out/<name>` without --out), or
    None when the spec's name cannot be read (the campaign then says what is wrong)."""
    if out is not None:
        return out
    from runs.spec import SpecError, read_spec_table

    try:  # read as `dutchbook run` reads it: bounded, a device refused, nesting guarded
        name = read_spec_table(spec)[0].get("name")
    except SpecError:
        return None
    return Path("out") / name if isinstance(name, str) and name else None


@dataclass
class ResolvedFolder:
    """The folder a `dutchbook run` writes, set as soon as it is known (`--out`, or once
    `runs.pipeline.run_campaign` has read the spec's name), for the command to name when the
    run stops before it returns. Not found by reading the spec again (`run_folder_of`): a
    FIFO or `<(...)` spec has nothing left to read a second time, and a FIFO's open blocks
    until another writer comes. None: not known yet."""

    path: Path | None = None
