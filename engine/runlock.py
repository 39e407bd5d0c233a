"""Who writes a run: the pid file (`run.pid`) and the writer's lock (`journal/.lock`).

The lock is an flock held by the one writer for as long as its ledger is open, so two
processes can never append to the same journal; the kernel drops it when the process dies,
however it dies. The pid file says who holds it (pid, start time, host), for `status` and for
the one-line error a second writer gets; it is advisory, the lock is what excludes.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

from engine.durable import write_bytes_atomic
from engine.records import utc_now

PID_FILE = "run.pid"
LOCK_FILE = ".lock"
#: The pid file's mark that its live writer's ledger is closed (`mark_ledger_closed`).
LEDGER_CLOSED = "ledger_closed"

#: Where a pid file left in place is said, at INFO, for a developer who configures logging
#: (nothing of the project's does, so it is dropped): the run's own log is in the run folder,
#: on the disk that refused the removal, and the console's one line is the error's.
_log = logging.getLogger(__name__)


class LedgerBusy(RuntimeError):
    """Another live process holds this run's ledger."""


#: How long a busy lock whose holder has no live pid on file is tried again: a holder writes
#: its pid just after taking the lock and clears it just before letting go, so a pid-less busy
#: lock is usually a run starting (its pid appears) or ending (the lock comes free).
LOCK_GRACE_S = 0.5
_GRACE_STEP_S = 0.05


def acquire_lock(run_dir: Path, lock_dir: Path) -> int:
    """Take the writer's lock in `lock_dir` (an open descriptor), or raise `LedgerBusy`
    naming the holder's pid (when it is on file and alive; see `LOCK_GRACE_S`)."""
    path = lock_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + LOCK_GRACE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _still_at(fd, path):
                return fd
            # The holder removed the lock file as it let go (a run that wrote nothing takes
            # its `.lock` away): locked, this one is no one's; the path's file is the lock.
            os.close(fd)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            continue
        except BlockingIOError:
            info = read_pid(run_dir)
            holder = info if info is not None and info["alive"] else None
            # This process's own pid file (a run opening its ledger after writing it) is no
            # other holder: a reader's `lock_held` probe took the lock for an instant.
            if (holder is None or names_this_process(holder)) and time.monotonic() < deadline:
                time.sleep(_GRACE_STEP_S)
                continue
        os.close(fd)
        raise LedgerBusy(
            f"{run_dir} is being written by another process"
            + (f" (pid {holder['pid']})" if holder else "")
        ) from None


def _still_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the one at `path` (not removed or replaced)."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def lock_held(lock_dir: Path) -> bool:
    """Whether a process holds the lock in `lock_dir` now (a writer is at work), found
    without waiting or making the lock file; False where it is free, or cannot be looked
    at (then nothing is known of a writer)."""
    try:
        fd = os.open(lock_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        # Shared: two readers probing at once do not see each other as a writer; a writer's
        # exclusive lock refuses it all the same.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def release_lock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def write_pid(run_dir: Path | str) -> None:
    """Record this process as the run's writer (pid plus start time, to survive pid reuse)."""
    run_dir = Path(run_dir)
    me = psutil.Process()
    info = {
        "pid": me.pid,
        "create_time": me.create_time(),
        "host": socket.gethostname(),
        "started_at": utc_now().isoformat(),
    }
    # Not fsync'd: a power cut ends the process too, and a stale pid file reads as not alive.
    write_bytes_atomic(run_dir / PID_FILE, orjson.dumps(info), sync=False)


def read_pid(run_dir: Path | str) -> dict[str, Any] | None:
    """The pid file's contents plus `alive: bool`, or None if no run ever wrote one."""
    try:
        info = orjson.loads((Path(run_dir) / PID_FILE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):  # none, or no record
        return None
    if not isinstance(info, dict):
        return None
    info["alive"] = _pid_alive(info)
    return info


def names_this_process(info: dict[str, Any] | None) -> bool:
    """Whether a pid file's contents (`read_pid`) name this very process."""
    return info is not None and info.get("pid") == os.getpid() and bool(info.get("alive"))


def clear_pid(run_dir: Path | str) -> None:
    """Remove the pid file if it is ours (a clean exit). Best effort: it runs on the way out,
    in a `finally` as often as not, and a removal the disk refuses (turned read-only) raised
    over the error that ended the run; the file left names a process that has exited by the
    time anyone reads it, which reads as a died run's."""
    try:
        if names_this_process(read_pid(run_dir)):
            (Path(run_dir) / PID_FILE).unlink(missing_ok=True)
    except OSError as exc:
        _log.info("pid file left in place: %s", exc)


def mark_ledger_closed(run_dir: Path | str, closed: bool) -> None:
    """Say in this process's pid file whether its ledger is closed. `dutchbook run` holds the
    pid file through scoring and the report, after dispatch closed the ledger: an attempt it
    sent and never resolved (cut at a stop, its reply unkept on a full disk) is then in
    flight no more, and `engine.unresolved` counts it as the next run will record it, not as
    in flight. Best effort: a pid file not written (a full disk) leaves the attempt called in
    flight until this process exits."""
    info = read_pid(run_dir)
    if info is None or not names_this_process(info) or bool(info.get(LEDGER_CLOSED)) == closed:
        return
    del info["alive"]
    if closed:
        info[LEDGER_CLOSED] = True
    else:
        del info[LEDGER_CLOSED]
    with contextlib.suppress(OSError):
        write_bytes_atomic(Path(run_dir) / PID_FILE, orjson.dumps(info), sync=False)


def found_pid(run_dir: Path | str) -> bytes | None:
    """The pid file as it is before this process writes its own (None: there is none, or it
    names this very process), for `put_back_pid`."""
    try:
        found = (Path(run_dir) / PID_FILE).read_bytes()
    except FileNotFoundError:
        return None
    return None if names_this_process(read_pid(run_dir)) else found


def put_back_pid(run_dir: Path | str, found: bytes | None) -> None:
    """Put the pid file `found_pid` read back in place of this process's (or, none found,
    clear it): a run that did nothing to the folder leaves a died run's pid file, which is
    what says it died. A write that fails (a full disk) leaves this process's, which reads
    as a died run's all the same once it has exited."""
    if found is None:
        clear_pid(run_dir)
    else:
        try:
            if names_this_process(read_pid(run_dir)):
                write_bytes_atomic(Path(run_dir) / PID_FILE, found, sync=False)
        except OSError as exc:
            _log.info("pid file not put back: %s", exc)


def names_another_host(info: dict[str, Any] | None) -> bool:
    """Whether a pid file's contents (`read_pid`) name a host other than this one, whose
    processes cannot be seen from here."""
    return info is not None and info.get("host") not in (None, socket.gethostname())


def _pid_alive(info: dict[str, Any]) -> bool:
    if names_another_host(info):
        return False  # cannot tell across hosts; status reports the host
    try:
        proc = psutil.Process(int(info["pid"]))
        same = abs(proc.create_time() - float(info.get("create_time", 0.0))) < 1.0
        return bool(same and proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


