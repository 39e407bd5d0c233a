"""A run folder whose disk turns read-only while a command runs (ext4's `errors=remount-ro`
after a file-system error): every write fails with EROFS from then on.

Before, `dutchbook run` ended in a traceback of 95-121 lines, exit 1, in every phase (each
lane "crashed", the ledger's close raised from its fsync, and the pid file's removal on the
way out replaced whatever error came first). Now every lane stops as on a full disk, the run
ends in one line naming the file, exit 7, and once the folder is writable again the same
command resumes. `score`, `repair`, `report` and `reparse` end so too.

The read-only disk is simulated in this process (no mount needed): once `ReadOnlyDisk.on`,
every call that writes under the folder fails as the kernel's would, polars' Parquet writes
in polars' words.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import os
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner, Result

import engine.durable
import engine.lanefile
import engine.ledger
import engine.mountinfo
import runs.pipeline
import runs.scoring_step
from engine.batch_jobs import JOBS_FILE, BatchJob, JobRecords
from engine.durable import READ_ONLY_SAVED, DiskFull, FolderReadOnly
from engine.runlock import PID_FILE, clear_pid, put_back_pid, write_pid
from engine.scan import scan_responses
from runs.cli import app
from runs.commands._errors import (
    EXIT_READ_ONLY,
    EXIT_USER_ERROR,
    READ_ONLY_HINT,
    READ_ONLY_KEPT,
)
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns

#: What the folder holds once the run is done: SMALL_SPEC's queries.
PLANNED = 28


class ReadOnlyDisk:
    """The folder `root`'s disk, which turns read-only at `turn()`, or at the first write of
    a path holding `turn_at`, until `mend()`. With `descriptors` False, `root` is a folder
    mounted read-only on its own: a descriptor's write or flush (which names no file, and
    whose file was opened before) is left alone, every other file's too."""

    def __init__(
        self, root: Path, monkeypatch: pytest.MonkeyPatch, turn_at: str | None = None,
        *, descriptors: bool = True,
    ) -> None:
        self.root, self.turn_at, self.on, self.refusals = str(root), turn_at, False, 0
        real = {name: getattr(os, name) for name in ("open", "write", "fsync", "replace",
                "rename", "unlink", "mkdir", "rmdir", "link")}  # fmt: skip
        real_open, real_parquet = builtins.open, pl.DataFrame.write_parquet
        writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

        def guarded(name: str, hit: Callable[..., bool]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                if hit(*args, **kwargs):
                    raise self._refused(args[0] if name not in ("write", "fsync") else None)
                return real[name](*args, **kwargs)

            return call

        def mine(path: Any, *_: Any, dir_fd: int | None = None, **__: Any) -> bool:
            if dir_fd is None:
                return self._hit(path)
            try:  # a path in the folder `dir_fd` holds (shutil.rmtree's), if it can be told
                return self._hit(os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path))
            except OSError:
                return self.on

        for name in ("replace", "rename", "unlink", "mkdir", "rmdir", "link"):
            monkeypatch.setattr(os, name, guarded(name, mine))
        monkeypatch.setattr(os, "open", guarded(
            "open", lambda path, flags, *_, **kw: bool(flags & writes) and mine(path, **kw)
        ))  # fmt: skip
        if descriptors:
            monkeypatch.setattr(os, "write", guarded("write", lambda fd, *_: self.on and fd > 2))
            monkeypatch.setattr(os, "fsync", guarded("fsync", lambda *_: self.on))

        def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if set(mode) & set("wax+") and self._hit(file):
                raise self._refused(file)
            return real_open(file, mode, *args, **kwargs)

        def write_parquet(frame: pl.DataFrame, file: Any, *args: Any, **kwargs: Any) -> Any:
            if self._hit(file):  # polars' own words, with no error number
                self.refusals += 1
                raise OSError(f"Read-only file system (os error {errno.EROFS}): {file}")
            return real_parquet(frame, file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)

    def _hit(self, path: Any) -> bool:
        """Whether a write of `path` is refused: under the folder, once read-only."""
        if not isinstance(path, str | Path | bytes):
            return False
        if not os.path.abspath(os.fsdecode(path)).startswith(self.root):  # "." given, too
            return False
        if self.turn_at is not None and self.turn_at in os.fsdecode(path):
            self.turn_at = None
            self.turn()
        return self.on

    def _refused(self, path: Any) -> OSError:
        """The kernel's EROFS: a descriptor's write or flush names no file (`path` None)."""
        self.refusals += 1
        return OSError(errno.EROFS, os.strerror(errno.EROFS), path and os.fsdecode(path))

    def turn(self) -> None:
        self.on = True

    def mend(self) -> None:
        self.on = False

    def turning_at(self, owner: Any, name: str, after: int = 0) -> None:
        """Turn read-only as `owner.name` is called for the `after`+1th time (before it),
        once: a resume once mended writes on."""
        real, calls = getattr(owner, name), [0]

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] == after + 1:
                self.turn()
            return real(*args, **kwargs)

        setattr(owner, name, call)


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReadOnlyDisk:
    return ReadOnlyDisk(tmp_path / "out", monkeypatch)


def _run(tmp_path: Path) -> Result:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    return CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "out")])


def _one_read_only_line(result: Result, *, asks: bool = True) -> str:
    """The one line of a folder turned read-only; `asks` (a run's): with the answers a
    resume asks and pays for again, which the commands asking nothing leave out."""
    assert result.exit_code == EXIT_READ_ONLY, result.output
    assert "Traceback" not in result.output and result.exception is not None
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    line = errors[0]
    assert "became read-only" in line and READ_ONLY_SAVED in line, line
    assert (READ_ONLY_KEPT in line) == asks and ("pays again" in line) == asks, line
    assert "make it writable again (remount it) and run the same command again" in line, line
    return line


def _resumes(tmp_path: Path, disk: ReadOnlyDisk) -> None:
    """Writable again, the same command finishes the run with every query answered."""
    disk.mend()
    again = _run(tmp_path)
    assert again.exit_code == 0, again.output
    out = tmp_path / "out"
    assert scan_responses(out).collect().height == PLANNED
    assert (out / "report" / "index.html").is_file() and not list(out.glob(".*-*"))


@pytest.mark.parametrize("after", [0, 5])
def test_a_folder_turned_read_only_in_dispatch_stops_every_lane_in_one_line(
    tmp_path: Path, disk: ReadOnlyDisk, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    """At the first journal line (a dispatch) or a later one (a result): each lane "crashed"
    with OSError(30), then the ledger's close and the pid file's removal raised."""
    ledger = engine.ledger.Ledger
    monkeypatch.setattr(ledger, "record_dispatch", ledger.record_dispatch)  # put back after
    disk.turning_at(engine.ledger.Ledger, "record_dispatch", after=after)
    result = _run(tmp_path)
    line = _one_read_only_line(result)
    assert "to resume" in line and str(tmp_path / "out" / "journal") in line  # the file
    assert "crashed" not in result.output and disk.refusals
    # the dispatch's own line too: not a full disk's "every answer written ... is kept"
    assert "every answer written before it is kept" not in result.output, result.output
    assert (tmp_path / "out" / PID_FILE).exists()  # its removal refused: a died run's
    _resumes(tmp_path, disk)


def test_a_folder_turned_read_only_at_the_closing_compaction_keeps_the_journal(
    tmp_path: Path, disk: ReadOnlyDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fold into shards, then the segment's last fsync: chained tracebacks before."""
    monkeypatch.setattr(engine.ledger.Ledger, "close", engine.ledger.Ledger.close)
    disk.turning_at(engine.ledger.Ledger, "close")
    _one_read_only_line(_run(tmp_path))
    assert list((tmp_path / "out" / "journal").glob("seg-*.jsonl"))
    _resumes(tmp_path, disk)


@pytest.mark.parametrize("phase", ["score_run", "write_report_folder"])
def test_a_folder_turned_read_only_in_scoring_or_the_report_ends_in_one_line(
    tmp_path: Path, disk: ReadOnlyDisk, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    monkeypatch.setattr(runs.pipeline, phase, getattr(runs.pipeline, phase))
    disk.turning_at(runs.pipeline, phase)
    line = _one_read_only_line(_run(tmp_path))
    assert str(tmp_path / "out") in line
    _resumes(tmp_path, disk)


@pytest.mark.parametrize(
    ("command", "turn_at"),
    [("score", ".scoring-"), ("repair", ".repair-"), ("report", ".report-"),
     ("reparse", "responses")],
)
def test_the_commands_that_rewrite_a_folder_end_in_the_read_only_line(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    command: str, turn_at: str,
) -> None:
    """Turned read-only at the command's first write of its own, past its checks that the
    folder may be written (a folder read-only before the command is refused, exit 2)."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    disk = ReadOnlyDisk(out, monkeypatch, turn_at=turn_at)
    result = CliRunner().invoke(app, [command, str(out)])
    line = _one_read_only_line(result, asks=False)
    assert "to resume" not in line and disk.refusals
    disk.mend()
    again = CliRunner().invoke(app, [command, str(out)])
    assert again.exit_code == 0, again.output


def test_the_pid_file_left_on_a_read_only_disk_raises_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`FolderHold.release` clears it in a `finally`: its OSError replaced the run's error."""
    write_pid(tmp_path)
    ours = (tmp_path / PID_FILE).read_bytes()
    disk = ReadOnlyDisk(tmp_path, monkeypatch)
    disk.turn()
    clear_pid(tmp_path)
    put_back_pid(tmp_path, b"{}")
    assert (tmp_path / PID_FILE).read_bytes() == ours and disk.refusals


def test_a_report_folder_mounted_read_only_on_its_own_is_the_users_to_mend(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only bind mount over `report/` alone (the run folder's own disk writable),
    made while the run dispatched: the run's report ended in a traceback, exit 1, where
    `dutchbook report` says it in one line, exit 2, with the ordinary read-only hint."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    phase = "write_report_folder"
    monkeypatch.setattr(runs.pipeline, phase, getattr(runs.pipeline, phase))
    # past the run's own check at its start that its folders may be written
    ReadOnlyDisk(out / "report", monkeypatch).turning_at(runs.pipeline, phase)
    result = _run(tmp_path)
    assert result.exit_code == EXIT_USER_ERROR, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert str(out / "report") in errors[0] and READ_ONLY_HINT in errors[0], errors[0]


def _aborting_at_fsync_of(disk: ReadOnlyDisk, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """ext4 aborted between a write of the file `name` and its fsync: the fsync fails with
    EIO (naming no file, as a descriptor's does), the disk read-only from then on."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(name):
            disk.turn()
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file")
def test_an_eio_from_a_folder_turned_read_only_is_its_read_only_line(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reparse`'s begun line, fsync'd as the disk aborted: "error: [Errno 5] Input/output
    error", exit 2, no file named; the folder refusing writes as read-only says why."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    disk = ReadOnlyDisk(out, monkeypatch)
    _aborting_at_fsync_of(disk, "reparses.jsonl", monkeypatch)
    line = _one_read_only_line(CliRunner().invoke(app, ["reparse", str(out)]), asks=False)
    assert str(out / "logs" / "reparses.jsonl") in line, line


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file")
def test_an_eio_of_the_batch_jobs_file_on_a_folder_turned_read_only_is_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = JobRecords(tmp_path)
    job = BatchJob(job_key="k", model="m", provider="p", requests={"r": 1})
    records.planned(job)
    disk = ReadOnlyDisk(tmp_path, monkeypatch)
    _aborting_at_fsync_of(disk, "jobs.jsonl", monkeypatch)
    with pytest.raises(FolderReadOnly) as raised:
        records.planned(job)
    assert raised.value.where == tmp_path / JOBS_FILE


def test_a_bare_eio_stays_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing disk, the folder still writable: not a folder turned read-only."""
    records = JobRecords(tmp_path)
    job = BatchJob(job_key="k", model="m", provider="p", requests={"r": 1})

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as raised:
        records.planned(job)
    assert raised.value.errno == errno.EIO and not isinstance(raised.value, DiskFull)


@pytest.mark.parametrize("part", ["responses", "attempts"])
def test_a_shard_folder_mounted_read_only_on_its_own_is_the_users_to_mend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part: str
) -> None:
    """A read-only bind mount over `responses/` (or `attempts/`) alone, made while the run
    dispatched: compaction asked whether the disk refused the write without the folder, so
    the run said its folder became read-only (exit 7), where the folder's own disk was
    writable: the user's to mend, exit 2, with the ordinary read-only hint."""
    monkeypatch.setattr(engine.ledger.Ledger, "compact", engine.ledger.Ledger.compact)
    disk = ReadOnlyDisk(tmp_path / "out" / part, monkeypatch, descriptors=False)
    disk.turning_at(engine.ledger.Ledger, "compact")
    result = _run(tmp_path)
    assert result.exit_code == EXIT_USER_ERROR, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert str(tmp_path / "out" / part) in errors[0] and READ_ONLY_HINT in errors[0], errors[0]


def test_a_command_given_the_folder_as_dot_names_the_file_in_full(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`score .` from inside the folder, turned read-only at the swap, said "scores.parquet
    could not be written": the file named as the folder was given, "." joined."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    monkeypatch.chdir(out)
    swap = "commit_files"
    monkeypatch.setattr(runs.scoring_step, swap, getattr(runs.scoring_step, swap))
    ReadOnlyDisk(out, monkeypatch).turning_at(runs.scoring_step, swap)
    line = _one_read_only_line(CliRunner().invoke(app, ["score", "."]), asks=False)
    assert f"read-only: {out}{os.sep}" in line and ".parquet could not be written" in line, line


def test_a_write_failed_in_planning_names_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A buffered write's error names no file: turned read-only as planning wrote its
    design, the run said ".../out could not be written", the folder."""
    disk = ReadOnlyDisk(tmp_path / "out", monkeypatch)
    real = Path.write_bytes

    def write_bytes(path: Path, data: Any) -> int:
        if disk.on and str(path).startswith(disk.root):  # opened, then its write refused
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    phase = "_design_and_plan"
    monkeypatch.setattr(runs.pipeline, phase, getattr(runs.pipeline, phase))
    disk.turning_at(runs.pipeline, phase)
    line = _one_read_only_line(_run(tmp_path))
    assert f"{tmp_path / 'out' / '.design.json.tmp'} could not be written" in line, line


def _exited(out: Path, disk: ReadOnlyDisk) -> None:
    """The run (this process, in-process) as a process that has exited: its pid file, left
    on the read-only disk, names a process started at another time."""
    disk.mend()
    info = orjson.loads((out / PID_FILE).read_bytes())
    (out / PID_FILE).write_bytes(orjson.dumps({**info, "create_time": 0.0}))
    disk.turn()


def test_status_of_a_run_stopped_by_its_folder_turning_read_only_says_so(
    tmp_path: Path, disk: ReadOnlyDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its run.pid cannot be removed, so `status` said the run "died", and nothing of the
    read-only folder nor of what resumes it. `state` stays "died" (a contract); `read_only`
    and the header and a warning say why, and what to do."""
    ledger = engine.ledger.Ledger
    monkeypatch.setattr(ledger, "record_dispatch", ledger.record_dispatch)  # put back after
    disk.turning_at(engine.ledger.Ledger, "record_dispatch", after=5)
    _one_read_only_line(_run(tmp_path))
    out = tmp_path / "out"
    _exited(out, disk)
    said = CliRunner().invoke(app, ["status", str(out), "--json"])
    assert said.exit_code == 0, said.output
    summary = orjson.loads(said.output)
    assert summary["state"] == "died" and summary["read_only"] is True
    _says_it_hedged(out, summary)
    text = " ".join(CliRunner().invoke(app, ["status", str(out)]).output.split())  # unwrapped
    assert text.startswith(f"{out}: died or stopped, folder read-only (pid "), text
    assert "when the run died" not in text, text
    disk.mend()  # writable again: a run that died, as before, and no probe left behind
    summary = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    assert summary["state"] == "died" and summary["read_only"] is False
    assert not list(out.glob(".write-probe-*"))


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_logs_folder_refused_alone_mid_run_is_said_once_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """logs/ alone mounted read-only (or made unwritable) while the run dispatched:
    `logs/lanes.json` stood still with not a word (exit 0; `status` then showed its lanes
    as they were), and one not this user's to write stopped its rewriting for good, the
    live display's refresh with it, then failed the dispatch's close. Logs are not answers:
    the run goes on, answers every query, and says so once."""
    logs = tmp_path / "out" / "logs"
    refused: list[Path] = []
    real = engine.durable.write_bytes_atomic

    def write(target: Path, data: bytes, **kwargs: Any) -> None:
        if refused and target.parent == logs:
            refused.append(target)
            raise OSError(code, os.strerror(code), str(target))
        real(target, data, **kwargs)

    monkeypatch.setattr(engine.lanefile, "write_bytes_atomic", write)
    ledger = engine.ledger.Ledger
    real_dispatch = ledger.record_dispatch

    def record_dispatch(self: Any, *args: Any, **kwargs: Any) -> Any:
        refused.append(logs)  # from the first query sent on
        return real_dispatch(self, *args, **kwargs)

    monkeypatch.setattr(ledger, "record_dispatch", record_dispatch)
    result = _run(tmp_path)
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if "could not be written" in line]
    assert len(said) == 1 and str(logs / "lanes.json") in said[0], result.output
    assert "the run goes on and keeps its answers" in said[0], said
    assert len(refused) > 2  # asked again at the end, said once
    assert scan_responses(tmp_path / "out").collect().height == PLANNED


def test_a_run_folder_turned_read_only_says_its_own_line_not_the_logs_one(
    tmp_path: Path, disk: ReadOnlyDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole folder's disk refuses, logs/ with it: the logs' line is not said besides."""
    monkeypatch.setattr(engine.lanefile, "turned_read_only", lambda folder: disk.on)
    ledger = engine.ledger.Ledger
    monkeypatch.setattr(ledger, "record_dispatch", ledger.record_dispatch)  # put back after
    disk.turning_at(engine.ledger.Ledger, "record_dispatch", after=5)
    result = _run(tmp_path)
    _one_read_only_line(result)
    assert "the run goes on" not in result.output, result.output


def test_status_says_lanes_the_run_went_on_without_are_as_of_their_last_write(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """A finished run whose logs/lanes.json was last written long before its last attempt
    (its logs/ refused it): its lane said "running when the run stopped". The run is made
    to have begun before that write, as a run its lanes' file lags must have (a file older
    than the run is an earlier run's, `lanes_of_earlier_run`)."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    fresh = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    assert fresh["lanes_stale"] is False and not fresh["warnings"], fresh["warnings"]
    lanes = out / "logs" / "lanes.json"
    states = orjson.loads(lanes.read_bytes())
    last = datetime.fromisoformat(fresh["last_attempt_at"])
    written = last - timedelta(minutes=2)
    _began_at(out, last - timedelta(minutes=5))
    states["updated_at"] = written.isoformat(timespec="seconds")
    for lane in states["lanes"].values():
        lane["state"] = "running"
    lanes.write_bytes(orjson.dumps(states))
    summary = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    assert summary["state"] == "finished" and summary["lanes_stale"] is True
    assert "logs/lanes.json was last written at" in summary["warnings"][0], summary["warnings"]
    wide = {"COLUMNS": "200"}  # the lane's words on one line of its column
    text = " ".join(CliRunner().invoke(app, ["status", str(out)], env=wide).output.split())
    assert f"running as of {written.strftime('%H:%M:%S')} UTC" in text, text
    assert "when the run stopped" not in text, text
    assert summary["lanes_of_earlier_run"] is None


def _began_at(out: Path, began: datetime) -> None:
    """Rewrite `out`'s logs/phases.jsonl (one run's) as of a run that began at `began`."""
    phases = out / "logs" / "phases.jsonl"
    lines = [orjson.loads(line) for line in phases.read_bytes().splitlines()]
    for line in lines:
        line["started"] = began.isoformat()
        if line["phase"] == "plan":
            line["at"] = began.isoformat()
    phases.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def _says_it_hedged(out: Path, summary: dict[str, Any]) -> None:
    """The first warning says what `status` knows: the folder cannot be written (the error),
    what a disk turned read-only leaves, and what resumes it; not why the run ended."""
    first = summary["warnings"][0]
    assert first.startswith(f"{out} cannot be written ({os.strerror(errno.EROFS)}); "), first
    assert "a run stopped by its disk turning read-only leaves its run.pid behind" in first, first
    assert "make it writable again (remount it) and run the same command again" in first, first
    copied = "(a copy on a read-only disk: copy it somewhere writable and resume that)"
    assert first.endswith(copied), first


def test_status_of_a_killed_run_whose_folder_is_read_only_since_does_not_say_why(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed with kill -9 (its run.pid left), its folder copied to a read-only disk
    since: `status` said the run "could not remove its run.pid when it stopped" and the
    header "stopped, folder read-only", a cause it cannot know. Now it says what it knows."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    write_pid(out)  # as the killed run left it: a process started at another time
    info = orjson.loads((out / PID_FILE).read_bytes())
    (out / PID_FILE).write_bytes(orjson.dumps({**info, "create_time": 0.0}))
    ReadOnlyDisk(out, monkeypatch).turn()
    said = CliRunner().invoke(app, ["status", str(out), "--json"])
    assert said.exit_code == 0, said.output
    summary = orjson.loads(said.output)
    assert summary["state"] == "died" and summary["read_only"] is True, summary
    _says_it_hedged(out, summary)
    assert not any("could not remove" in line for line in summary["warnings"]), summary
    text = " ".join(CliRunner().invoke(app, ["status", str(out)]).output.split())  # unwrapped
    assert text.startswith(f"{out}: died or stopped, folder read-only (pid "), text


def test_status_of_a_run_live_elsewhere_read_through_a_read_only_mount_is_no_read_only_stop(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run live on another host, its folder read here through a read-only mount: its pid
    is not this host's, so "died", but its lock is held. `status` said "stopped, folder
    read-only" and to resume it (a tester's): it is no read-only stop, and nothing is
    probed (the lock's holder here stands for the other host's run)."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    write_pid(out)
    info = orjson.loads((out / PID_FILE).read_bytes())
    (out / PID_FILE).write_bytes(orjson.dumps({**info, "host": "another-host"}))
    lock = os.open(out / ".lock", os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        ReadOnlyDisk(out, monkeypatch).turn()
        summary = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    finally:
        os.close(lock)
    assert summary["state"] == "died" and summary["read_only"] is False, summary
    assert not any("to resume" in line for line in summary["warnings"]), summary
    assert summary["warnings"][0].startswith("run.pid names host another-host, "), summary


def test_status_of_a_run_of_another_host_is_not_probed_though_its_lock_is_not_seen(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flock is not seen across hosts on every network file system (sshfs, NFS with
    `local_lock`): a run live on another host, its lock not seen here, read through a
    read-only mount, was said stopped by a read-only disk and to be resumed (a reviewer's).
    A run.pid of another host is not probed."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    write_pid(out)
    info = orjson.loads((out / PID_FILE).read_bytes())
    (out / PID_FILE).write_bytes(orjson.dumps({**info, "host": "another-host"}))
    ReadOnlyDisk(out, monkeypatch).turn()
    summary = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    assert summary["state"] == "died" and summary["read_only"] is False, summary
    assert not any("to resume" in line for line in summary["warnings"]), summary


@pytest.mark.parametrize(("super_says", "read_only"), [(True, True), (False, False), (None, False)])
def test_status_of_another_users_died_run_on_an_emergency_read_only_disk_says_so(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    super_says: bool | None, read_only: bool,
) -> None:
    """ext4 turned read-only by an error (`errors=remount-ro`, `emergency_ro` in its super
    options) leaves `statvfs` reading writable, and a user other than the run's owner gets
    EACCES from the write probe before EROFS: `status` said "died", no word of the read-only
    disk. The mount's super options (`engine.mountinfo.super_read_only`) say it now; where
    they say writable, or cannot be read (not Linux), the EACCES is no read-only disk."""
    out = tmp_path / "out"
    finished_runs.copy_to(out, SMALL_SPEC)
    write_pid(out)  # as the stopped run left it: a process started at another time
    info = orjson.loads((out / PID_FILE).read_bytes())
    (out / PID_FILE).write_bytes(orjson.dumps({**info, "create_time": 0.0}))
    real_mkstemp = tempfile.mkstemp

    def another_users(
        suffix: str | None = None, prefix: str | None = None, dir: str | None = None,
        text: bool = False,
    ) -> tuple[int, str]:
        if dir is not None and Path(dir) == out:  # the write probe's, as the kernel refuses it
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(out))
        return real_mkstemp(suffix, prefix, dir, text)

    monkeypatch.setattr(tempfile, "mkstemp", another_users)
    asked: list[Path] = []

    def super_read_only(folder: Path) -> bool | None:
        asked.append(folder)
        return super_says

    monkeypatch.setattr(engine.mountinfo, "super_read_only", super_read_only)
    summary = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    assert asked, "the mount's super options were never asked: the test proves nothing"
    assert summary["state"] == "died" and summary["read_only"] is read_only, summary
    if read_only:
        _says_it_hedged(out, summary)
        text = " ".join(CliRunner().invoke(app, ["status", str(out)]).output.split())
        assert text.startswith(f"{out}: died or stopped, folder read-only (pid "), text
    else:
        assert not any("cannot be written" in line for line in summary["warnings"]), summary
