"""Append-only JSON-lines journal in numbered segments.

The journal is the ledger's point of durability: a line is written with a single
`os.write` on an `O_APPEND` descriptor, so a kill -9 of the writer can leave at most one
partial line, and only at the end of the segment being written. Segments exist so that
compaction can seal one (writers move to the next) and delete it once its rows are in
Parquet, without ever rewriting a file that is being appended to.

One write per line, even when a result line and the next dispatch line are written in the
same event-loop step (issue 12): perf's CPU samples put the `write` calls at about 1.5% of
dispatch's CPU (under 1 µs a line into the page cache), and carrying result lines into the
next dispatch line's write saved nothing measurable. py-spy puts about 9% of the lane
workers' samples in `_write_all`, but most of those are time off the CPU that it counts as
running. So a result line stays on disk when `record_result` returns.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from engine.durable import fsync_dir, named

_SEGMENT = re.compile(r"^seg-(\d{8})\.jsonl$")


class JournalError(RuntimeError):
    """A journal the writer cannot take: a line other than a segment's last one that cannot be
    parsed (real corruption), or records of a later version (`engine.later_format`)."""


def segment_path(journal_dir: Path, segment_id: int) -> Path:
    return journal_dir / f"seg-{segment_id:08d}.jsonl"


def list_segments(journal_dir: Path) -> list[tuple[int, Path]]:
    """Segments present now, oldest first."""
    return numbered_files(journal_dir, _SEGMENT)


def numbered_files(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    """Files in `directory` whose whole name matches `pattern`, by the number its first group
    captures (segments here, shards in `engine.shards`); none if the folder is absent."""
    found: list[tuple[int, Path]] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return found
    for name in names:
        match = pattern.match(name)
        if match:
            found.append((int(match.group(1)), directory / name))
    found.sort()
    return found


class JournalWriter:
    """Appends one JSON object per line to one segment.

    `fsync=False` (the default) makes a line durable against the process dying (kill -9,
    crash) the moment `append` returns: it is in the kernel's page cache. `fsync=True`
    also survives power loss, at the cost of one disk flush per line (see the ledger's
    docstring for the measured cost).

    `split_pause_s` is a test hook: it writes each line in two halves with a pause in
    between so crash tests can kill the process in the middle of a line.
    """

    def __init__(
        self, path: Path, *, fsync: bool = False, split_pause_s: float | None = None
    ) -> None:
        self.path = path
        self._fsync = fsync
        self._split_pause_s = split_pause_s
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        fsync_dir(path.parent)
        self.lines = 0

    def append(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            raise RuntimeError(f"journal segment {self.path.name} is closed")
        data = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
        try:
            if self._split_pause_s is not None and len(data) > 1:
                half = len(data) // 2
                _write_all(self._fd, data[:half])
                time.sleep(self._split_pause_s)
                _write_all(self._fd, data[half:])
            else:
                _write_all(self._fd, data)
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            # A write that failed part-way (a full disk) must not leave a torn line that a
            # later, successful line would put in the middle of the segment: cut it off.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            named(exc, self.path)
            raise
        self._size += len(data)
        self.lines += 1

    def close(self) -> None:
        """Flush the segment and close it; closed even when the flush fails (a disk turned
        read-only), whose error is then raised."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError as exc:
                named(exc, self.path)
                raise
            finally:
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)  # a regular file takes a line whole: no view to slice
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            written = os.write(fd, view)
            view = view[written:]


#: What to do about a bad line a crash cannot have left (a disk fault, an edit): deleting it
#: loses only that line (a result line's request has a dispatch line left, so it is asked
#: again as `interrupted`; a dispatch line's result stands alone).
_MEND = "; mend or delete that line and run again (a deleted result is asked again)"


def read_segment(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the records of one segment, skipping a torn last line.

    A last line that does not parse is what a kill during a write leaves (or what a reader
    sees while the writer is mid-line): it is skipped. A bad line anywhere else cannot come
    from a crash, so it raises `JournalError` naming the file and line.
    A segment deleted by a concurrent compaction reads as empty (its rows are in shards).
    A line of a kind the ledger writes that parses but lacks what its readers take from it,
    or holds a value of the wrong type (`engine.records.journal_line_fault`), raises the same
    way, last or not: no kill leaves a line that parses.
    """
    # Here, not at the top: `engine.records` imports polars, and the commands import this
    # module for `JournalError` when they say any error (`runs.commands._errors`).
    from engine.records import journal_line_fault

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    last = len(lines) - 1
    for number, line in enumerate(lines):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if number == last:
                return
            raise JournalError(
                f"{path}: line {number + 1} of {len(lines)} is corrupt ({exc}); "
                f"only the last line of a segment may be torn{_MEND}"
            ) from exc
        if not isinstance(record, dict):
            if number == last:
                return
            raise JournalError(f"{path}: line {number + 1} is not a JSON object{_MEND}")
        if (fault := journal_line_fault(record)) is not None:
            raise JournalError(
                f"{path}: line {number + 1} of {len(lines)} is corrupt ({fault}){_MEND}"
            )
        yield record


def read_journal(journal_dir: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every record of every segment, oldest segment first, tagged with its segment id."""
    for segment_id, path in list_segments(journal_dir):
        for record in read_segment(path):
            yield segment_id, record
