"""The ledger: every attempt and every accepted answer, exactly once, surviving kill -9.

Layout of a run folder (design.md, "The ledger"):

- `journal/seg-<id>.jsonl`: JSON lines not yet compacted. A `dispatch` line is written
  before a request is sent; a `result` line (the attempt and, if accepted, the response,
  in ONE line) when it finished. A line is one `os.write` on an append-only descriptor.
- `attempts/part-<id>.parquet`, `responses/part-<id>.parquet`: the journal folded into
  Parquet, one shard per journal segment.
- `run.pid`: who is writing; `journal/.lock`: an flock held by the one writer, so two
  processes can never append to the same ledger (both in `engine.runlock`).

Readers that must not take the lock (status, reparse, scoring, the report) use
`engine.scan`; this module is the writer.

Durability: `record_result` returns once its line is in the kernel (flushed, not
fsync'd by default): it survives the process dying, including kill -9, but not a power
cut. `Ledger.open(..., fsync=True)` fsyncs every line instead. Measured on this machine
(ext4 on a virtual disk): a dispatch line plus a result line cost about 23 µs flushed and
about 455 µs fsync'd, i.e. fsync per line would cap one writer near 2,000 answers a second
and take most of the engine's time budget; the default is flush.

Crash safety of compaction: a segment is sealed (writers move to a new one, carrying the
still-unanswered dispatch lines over), folded into shards named after the segment (temp
file, fsync, rename), then deleted. A kill between any two steps leaves either the segment
alone, or the segment and (some of) its shards: readers deduplicate attempts on
`(request_id, attempt)` and responses on `request_id`, and the next open redoes the fold,
overwriting the same shard names. Nothing is lost, nothing counted twice.

Resume: the plan minus what is accepted. The writer does not hold the accepted ids of a
campaign in memory (a million of them cost 21 MB as a sorted byte array, 190 MB as a set):
it asks the response shards, one pushed-down `is_in` scan of their `request_id` column per
batch of ids (`Ledger.accepted_series`), and keeps in memory only what this process accepted
and has not yet folded into a shard. Measured on a resumed 1,000,000-row plan with 998,000
answers: peak RSS 128 -> 133 MB from a 10,000-row plan (was 137 -> 159 MB holding the ids),
at about 35 ms per 10,000-row plan slice per million answers searched (that resume took
4.9-5.4 s instead of 3.7 s). A dispatch with no result line anywhere becomes one `interrupted`
attempt when the ledger is opened (written as a result line, so opening twice writes it
once).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from engine.durable import (
    DiskFull,
    disk_refusal,
    disk_refused,
    fsync_dir,
    stops_the_run,
    write_atomic,
)
from engine.journal import (
    JournalWriter,
    list_segments,
    segment_path,
)
from engine.later_format import refuse_later_records
from engine.records import (
    ATTEMPT_SCHEMA,
    RESPONSE_SCHEMA,
    AttemptRecord,
    ResponseRecord,
    iso_utc,
)
from engine.retry import DUPLICATE_REFUSED
from engine.runlock import (
    LOCK_FILE,
    PID_FILE,
    LedgerBusy,
    acquire_lock,
    clear_pid,
    mark_ledger_closed,
    names_this_process,
    read_pid,
    release_lock,
    write_pid,
)
from engine.scan import (
    ATTEMPTS,
    DISPATCH,
    JOURNAL,
    RESPONSES,
    RESULT,
    accepted_ids,
    attempt_counts,
    found_among,
    result_frames,
    scan_attempts,
    scan_ledger,
    scan_responses,
)
from engine.shards import (
    add_missing_columns,
    max_shard_id,
    remove_temp_files,
    replace_all,
    settle_replacement,
    shard_name,
    visible_shards,
)
from engine.unresolved import BATCH_JOB, interrupted_attempt, pending_dispatches

#: Named by docs/interfaces.md as `engine.ledger`'s: the readers live in `engine.scan` and
#: the pid file and lock in `engine.runlock`; these names are kept importable from here.
__all__ = [
    "ATTEMPTS",
    "JOURNAL",
    "LOCK_FILE",
    "PID_FILE",
    "RESPONSES",
    "Ledger",
    "LedgerBusy",
    "accepted_ids",
    "attempt_counts",
    "clear_pid",
    "read_pid",
    "scan_attempts",
    "scan_ledger",
    "scan_responses",
    "write_pid",
]

#: Test hooks (crash tests): pause between compaction steps / inside each journal line.
COMPACT_PAUSE_ENV = "DUTCHBOOK_TEST_COMPACT_PAUSE_S"
SPLIT_WRITE_ENV = "DUTCHBOOK_TEST_SPLIT_WRITE_S"

#: The absence cache's smallest bound (see `Ledger.accepted_series`); it also grows to
#: `ABSENT_CACHE_BATCHES` times the largest batch asked about, so that the ids of a plan
#: slice in flight are not evicted (each eviction of one later accepted costs a search).
ABSENT_CACHE_MIN = 1 << 16
ABSENT_CACHE_BATCHES = 4


def _env_seconds(name: str) -> float | None:
    value = os.environ.get(name)
    if not value:
        return None
    seconds = float(value)
    return seconds if seconds > 0 else None


# --------------------------------------------------------------------------- the writer


class Ledger:
    """The one writer of a run's journal and shards (see the module docstring)."""

    def __init__(
        self, run_dir: Path | str, *, fsync: bool = False, pid_file: bool = True
    ) -> None:
        """Open (creating if needed) and recover a run's ledger; same as `Ledger.open`."""
        self.run_dir = Path(run_dir)
        self._journal_dir = self.run_dir / JOURNAL
        self._attempts_dir = self.run_dir / ATTEMPTS
        self._responses_dir = self.run_dir / RESPONSES
        self._fsync = fsync
        self._lock = threading.Lock()
        self._compact_lock = threading.Lock()
        self._lock_fd: int | None = None
        #: Whether this ledger wrote the pid file, and so clears it at close (`_start`).
        self._clears_pid = False
        self._writer: JournalWriter | None = None
        self._carried = 0
        self._segment_id = 0
        self._inflight: dict[tuple[str, int], dict[str, Any]] = {}
        #: Ids this process accepted, by the journal segment holding them, until that
        #: segment is folded into a shard (then the shards answer for them).
        self._recent: dict[int, set[str]] = {}
        #: Ids found accepted nowhere, so `record_result` need not search again; see
        #: `accepted_series` for why it can never claim an accepted id is absent.
        self._absent: dict[str, None] = {}
        self._absent_max = ABSENT_CACHE_MIN
        #: Folds so far: a search that a fold overlapped is not cached (see `_fold`).
        self._folds = 0
        self._pause_s = _env_seconds(COMPACT_PAUSE_ENV)
        self._split_s = _env_seconds(SPLIT_WRITE_ENV)
        #: How many `interrupted` attempts this open recorded (for logs and tests), and how
        #: many of them were batch lines (`record_dispatch`'s `batch_job`): their requests
        #: are not sent again, their answers are collected from their jobs.
        self.interrupted_recovered = 0
        self.interrupted_batch = 0
        #: Set when a write failed for want of space, or because the folder turned read-only
        #: (`engine.durable.FolderReadOnly`); every lane stops starting attempts.
        self.disk_full: DiskFull | None = None
        self._start(pid_file)

    @classmethod
    def open(
        cls, run_dir: Path | str, *, fsync: bool = False, pid_file: bool = True
    ) -> Ledger:
        """Open (creating if needed) and recover a run's ledger; writes `run.pid` unless told not
        (`pid_file=False`, the reparse's: a command that is no run writes none, so a dead run's
        pid file stays as it was).

        Raises `LedgerBusy` if another live process has it open.
        """
        return cls(run_dir, fsync=fsync, pid_file=pid_file)

    # -- lifecycle --------------------------------------------------------------------

    def _start(self, pid_file: bool) -> None:
        for directory in (self._journal_dir, self._attempts_dir, self._responses_dir):
            directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = acquire_lock(self.run_dir, self._journal_dir)
        # A pid file naming this process already is its caller's (`dutchbook run` writes one
        # with the folder's lock and holds both through scoring and the report): the ledger
        # leaves it for that caller to clear, so the run still reads as live after dispatch.
        self._clears_pid = pid_file and not names_this_process(read_pid(self.run_dir))
        if self._clears_pid:
            write_pid(self.run_dir)
        elif pid_file:  # the caller's, closed by an earlier ledger of this process
            mark_ledger_closed(self.run_dir, False)
        try:
            self._recover()
        except BaseException:
            # e.g. a corrupt journal line: report it, but leave the run openable once fixed.
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            self._release()
            raise

    def _release(self) -> None:
        """Clear the pid file if this ledger wrote it, then let go of the lock (in that order:
        the lock's next holder writes its own)."""
        if self._clears_pid:
            clear_pid(self.run_dir)
        else:  # the caller's pid file, held on past this ledger (`dutchbook run`'s)
            mark_ledger_closed(self.run_dir, True)
        if self._lock_fd is not None:
            release_lock(self._lock_fd)
            self._lock_fd = None

    def _recover(self) -> None:
        for directory in (self._attempts_dir, self._responses_dir):
            remove_temp_files(directory)
            settle_replacement(directory)
        # A later version's records are refused before anything is folded or rewritten; an
        # earlier version's shards get the columns added since (`model_reported`), before this
        # open folds shards of the new schema beside them.
        columns = refuse_later_records(self._journal_dir, self._attempts_dir, self._responses_dir)
        add_missing_columns(self._attempts_dir, ATTEMPT_SCHEMA, columns)
        segments = list_segments(self._journal_dir)
        last_segment = max((sid for sid, _ in segments), default=0)
        self._segment_id = max(last_segment, max_shard_id(self._attempts_dir, self._responses_dir))
        self._open_segment(carry=[])
        self._recover_interrupted()
        self.compact()

    def _open_segment(self, carry: list[dict[str, Any]]) -> None:
        """Start a fresh segment (never append after a possibly torn line)."""
        self._segment_id += 1
        self._writer = JournalWriter(
            segment_path(self._journal_dir, self._segment_id),
            fsync=self._fsync,
            split_pause_s=self._split_s,
        )
        for line in carry:
            self._writer.append(line)
        self._carried = len(carry)

    def _recover_interrupted(self) -> None:
        """Dispatches with no result anywhere become one `interrupted` attempt each
        (`engine.unresolved`, which `status` and `audit` read the same way)."""
        pending = pending_dispatches(
            self._journal_dir, self._attempts_dir, skip_segment=self._segment_id
        )
        for (rid, attempt), line in pending.items():
            lost = interrupted_attempt(rid, attempt, line)
            self._append({"kind": RESULT, "attempt": lost.to_row(), "response": None})
            self.interrupted_recovered += 1
            self.interrupted_batch += int(BATCH_JOB in line)

    def close(self) -> None:
        """Compact everything, release the lock and the pid file. Idempotent.

        With the disk full, or turned read-only, compaction is skipped: the journal holds
        every result durably and the next open folds it; the segment's last flush and the
        pid file's removal, refused too, are let go (`_close_segment`, `_release`).
        """
        if self._writer is None:
            return
        with contextlib.suppress(DiskFull):
            self.compact()
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is not None:
                self._close_segment(writer)
        self._release()

    def _close_segment(self, writer: JournalWriter) -> None:
        """Close the open segment (removed if empty). A disk that refuses its last flush
        (full, or turned read-only since the last line) is remembered in `disk_full` as any
        refused write is, not raised: the lines were written, and a close raising here
        replaced the error that stopped the run with a traceback of its own."""
        try:
            writer.close()
            if writer.lines == 0:
                writer.path.unlink(missing_ok=True)
        except OSError as exc:
            if not stops_the_run(exc, self.run_dir):
                raise
            if self.disk_full is None:
                self.disk_full = disk_refusal(self._journal_dir, exc)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------

    def accepted_series(self, request_ids: pl.Series) -> pl.Series:
        """Which of `request_ids` (String) are accepted, as a Boolean series; exact.

        Searches the shards (`found_among`) and this process's unfolded acceptances, in
        that order of snapshot: `_recent` is copied first and the shards listed after, and
        a fold writes its shard before it drops its ids from `_recent`, so an id accepted
        before the call is seen in one or the other. The ids found absent are cached for
        `record_result`, unless a fold ran meanwhile (then the search is redone): an id
        accepted during the search is then still in `_recent`, whose fold evicts it from
        the cache, so the cache never holds an accepted id once `_recent` has let go of it.
        """
        ids = request_ids.cast(pl.String).rename("request_id")
        while True:
            with self._lock:
                folds = self._folds
                recent = set().union(*self._recent.values())
            found = found_among(visible_shards(self._responses_dir), ids)
            accepted = ids.is_in(found.implode())
            if recent:
                accepted = accepted | ids.is_in(pl.Series(list(recent), dtype=pl.String).implode())
            with self._lock:
                if self._folds != folds:
                    continue
                self._absent_max = max(self._absent_max, ABSENT_CACHE_BATCHES * len(ids))
                for rid in ids.filter(~accepted).to_list():
                    self._absent[rid] = None
                self._trim_absent()
            return accepted

    def _trim_absent(self) -> None:
        """Drop the oldest cached absences past the bound (held `_lock`): mostly requests
        given up on; one accepted later costs a search, never a wrong answer."""
        excess = len(self._absent) - self._absent_max
        if excess > 0:
            for rid in list(itertools.islice(self._absent, excess)):
                del self._absent[rid]

    def _already_accepted(self, request_id: str) -> bool:
        """Exact, held `_lock` (so no fold can drop the id from `_recent` meanwhile)."""
        for ids in self._recent.values():
            if request_id in ids:
                return True
        if request_id in self._absent:
            return False
        found = found_among(
            visible_shards(self._responses_dir), pl.Series([request_id], dtype=pl.String)
        )
        return not found.is_empty()

    # -- writing ----------------------------------------------------------------------

    def _append(self, line: dict[str, Any]) -> None:
        with self._lock:
            if self._writer is None:
                raise RuntimeError("ledger is closed")
            self._write(line)

    def _write(self, line: dict[str, Any]) -> None:
        """One journal line (the lock held); a full disk becomes `DiskFull`, a folder turned
        read-only its `FolderReadOnly`, remembered."""
        assert self._writer is not None
        try:
            self._writer.append(line)
        except OSError as exc:
            if not stops_the_run(exc, self.run_dir):
                raise
            self.disk_full = disk_refusal(self._journal_dir, exc)
            raise self.disk_full from exc

    def record_dispatch(
        self, request_id: str, attempt: int, model: str, provider: str, started_at: datetime,
        *, batch_job: str | None = None,
    ) -> None:
        """Journal that an attempt is about to be sent (so a crash shows it as interrupted);
        `batch_job`: the attempt is a line of that batch job, about to be recorded from its
        results (a crash leaves the answer with the job, which a resume collects)."""
        line: dict[str, Any] = {
            "kind": DISPATCH,
            "request_id": request_id,
            "attempt": int(attempt),
            "model": model,
            "provider": provider,
            "started_at": iso_utc(started_at),
        }
        if batch_job is not None:
            line[BATCH_JOB] = batch_job
        with self._lock:
            if self._writer is None:
                raise RuntimeError("ledger is closed")
            self._write(line)
            self._inflight[(request_id, int(attempt))] = line

    def record_result(self, attempt: AttemptRecord, response: ResponseRecord | None) -> bool:
        """Journal one finished attempt (and its accepted answer) in one flushed line.

        Returns False when `response` was refused because its request was already
        accepted (the attempt itself is still recorded: it happened and may have cost
        money); True otherwise.
        """
        if not math.isfinite(attempt.elapsed_ms):
            attempt = replace(attempt, elapsed_ms=0.0)
        accepted = True
        if response is not None:
            if response.request_id != attempt.request_id:
                raise ValueError(
                    f"response for {response.request_id} recorded with attempt of "
                    f"{attempt.request_id}"
                )
            if attempt.raw_text is None:
                # The attempts table is the archive of raw replies that re-parse reads.
                attempt = replace(
                    attempt, raw_text=response.raw_text, finish_reason=response.finish_reason
                )
        key = (attempt.request_id, attempt.attempt)
        with self._lock:
            if self._writer is None:
                raise RuntimeError("ledger is closed")
            if response is not None and self._already_accepted(response.request_id):
                accepted = False
                response = None
                attempt = replace(
                    attempt,
                    detail=(attempt.detail + "; " if attempt.detail else "") + DUPLICATE_REFUSED,
                )
            line = {
                "kind": RESULT,
                "attempt": attempt.to_row(),
                "response": None if response is None else response.to_row(),
            }
            self._write(line)
            self._inflight.pop(key, None)
            if response is not None:
                recent = self._recent.get(self._segment_id)
                if recent is None:
                    recent = self._recent[self._segment_id] = set()
                recent.add(response.request_id)
                self._absent.pop(response.request_id, None)
        return accepted

    # -- re-parse ---------------------------------------------------------------------

    def replace_responses(self, frame: pl.DataFrame) -> Path:
        """Make `frame` the whole responses table (used by re-parse; see `engine.shards`).

        The journal is compacted first and must then hold no results, so no accepted
        answer can live outside the replaced shards; the new shard takes a fresh id that
        no segment will reuse.
        """
        missing = set(RESPONSE_SCHEMA) - set(frame.columns)
        if missing:
            raise ValueError(f"responses frame lacks {sorted(missing)}")
        if frame["request_id"].n_unique() != frame.height:
            raise ValueError("responses frame has a request_id twice")
        self.compact()
        with self._compact_lock, self._lock:
            if self._writer is None:
                raise RuntimeError("ledger is closed")
            if self._writer.lines > self._carried:
                raise RuntimeError("results arrived while replacing responses; not replacing")
            self._segment_id += 1
            new_id = self._segment_id
            path = replace_all(
                self._responses_dir,
                frame.select(list(RESPONSE_SCHEMA)).cast(pl.Schema(RESPONSE_SCHEMA)),
                new_id,
            )
            # Re-parse may accept what was refused before: forget every cached absence.
            self._recent.clear()
            self._absent.clear()
            self._folds += 1
        return path

    # -- compaction -------------------------------------------------------------------

    def _pause(self) -> None:
        if self._pause_s is not None:
            time.sleep(self._pause_s)

    def compact(self) -> int:
        """Fold every sealed journal segment into shards; returns how many were folded.

        Writers keep appending to a fresh segment meanwhile (this may run in a thread).
        Raises `DiskFull` (and remembers it) when a shard cannot be written for want of
        space, `FolderReadOnly` when the folder turned read-only; the segment it was folding
        stays, so nothing is lost.
        """
        try:
            return self._compact()
        except OSError as exc:
            # Given the folder: `responses/` or `attempts/` mounted read-only on its own (the
            # folder's own disk writable) is the user's to mend, not the folder turned so.
            if not disk_refused(exc, self.run_dir):
                raise
            self.disk_full = disk_refusal(self.run_dir, exc)
            raise self.disk_full from exc

    def _compact(self) -> int:
        with self._compact_lock:
            with self._lock:
                if self._writer is None:
                    raise RuntimeError("ledger is closed")
                sealed = None
                if self._writer.lines > self._carried:
                    sealed = self._writer
                    try:
                        self._open_segment(carry=list(self._inflight.values()))
                    except BaseException:
                        sealed.close()
                        raise
                live = self._segment_id
            if sealed is not None:
                # Its fsync (3-15 ms for a 5,000-result segment here) outside `_lock`: every
                # journal line of the event loop waited for it. Nothing writes to it any more.
                sealed.close()
            folded = 0
            for segment_id, path in list_segments(self._journal_dir):
                if segment_id >= live:
                    continue
                self._fold(segment_id, path)
                folded += 1
            return folded

    def _fold(self, segment_id: int, path: Path) -> None:
        attempts, responses = result_frames(path)
        self._pause()
        if attempts.height:
            write_atomic(attempts, self._attempts_dir / shard_name(segment_id))
        self._pause()
        if responses.height:
            write_atomic(responses, self._responses_dir / shard_name(segment_id))
        with self._lock:
            # The shard now answers for these ids. Evicting them from the absence cache
            # too undoes a search that raced with their acceptance (`accepted_series`).
            for rid in self._recent.pop(segment_id, ()):
                self._absent.pop(rid, None)
            self._folds += 1
        self._pause()
        path.unlink(missing_ok=True)
        fsync_dir(self._journal_dir)
        self._pause()
