"""A run folder moved, renamed or deleted while its run goes on, said in one line.

The journal is written through files the run holds open, so a folder moved mid-dispatch
keeps every answer (at its new place); the next file the run opens by its path (a journal
segment, a shard, `logs/lanes.json`) is then missing. That ended the run in a bare "No such
file or directory: .../journal/seg-00000002.jsonl", exit 2 ("bad input, nothing sent"), and
the lane states were written again into a new `logs/` at the old place, which a resume there
then refused as a folder of other files. `moved_said` turns such an error into the line
that says what happened and how to resume.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


class FolderMoved(RuntimeError):
    """The run folder no longer stands at the path the run was given."""


def _identity(folder: Path) -> tuple[int, int] | None:
    """The folder's device and inode, None where nothing stands at the path."""
    try:
        found = os.stat(folder)
    except OSError:
        return None
    return found.st_dev, found.st_ino


@contextlib.contextmanager
def moved_said(run_dir: Path) -> Iterator[None]:
    """Raise `FolderMoved` in place of an `OSError` met after `run_dir` stopped being the
    folder it was on entry (moved, renamed, deleted, or another put in its place)."""
    before = _identity(run_dir)
    try:
        yield
    except OSError as exc:
        if before is None or _identity(run_dir) == before:
            raise
        raise FolderMoved(
            f"the run folder {run_dir} was moved, renamed or deleted while the run went on "
            f"({exc.strerror or 'a file of it was missing'}): every answer it wrote is in the "
            "folder at its new place; give that place to --out (the same spec) to resume there"
        ) from exc


__all__ = ["FolderMoved", "moved_said"]
