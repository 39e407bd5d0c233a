"""Durable writes: a file is replaced whole, no temporary is left, old import paths hold."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import engine.dispatch
import engine.ledger
from engine import durable, lanefile, runlock, scan


def test_write_bytes_atomic_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "spec.toml"
    durable.write_bytes_atomic(target, b"first")
    durable.write_bytes_atomic(target, b"second", sync=False)
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


def test_write_atomic_parquet_round_trips(tmp_path: Path) -> None:
    frame = pl.DataFrame({"request_id": ["a", "b"], "value": [0.25, 0.5]})
    durable.write_atomic(frame, tmp_path / "part.parquet")
    assert pl.read_parquet(tmp_path / "part.parquet").equals(frame)
    assert not durable.temp_path(tmp_path / "part.parquet").exists()


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "lanes.json"
    durable.write_bytes_atomic(target, b"old")
    with pytest.raises(FileNotFoundError):
        durable.commit_file(durable.temp_path(target), target)  # nothing was written
    assert target.read_bytes() == b"old"


def test_a_write_that_fails_on_a_full_disk_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, `.run.pid.tmp` (say) stayed beside the target after ENOSPC.
    target = tmp_path / "run.pid"
    durable.write_bytes_atomic(target, b"old")

    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", no_room)
    with pytest.raises(OSError, match="No space left"):
        durable.write_bytes_atomic(target, b"new")
    with pytest.raises(OSError, match="No space left"):
        durable.write_atomic(pl.DataFrame({"a": [1]}), tmp_path / "part.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pid"]
    assert target.read_bytes() == b"old"


def test_is_disk_full_reads_polars_errors_and_a_folder_without_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert durable.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert durable.is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not durable.is_disk_full(OSError(errno.EACCES, "Permission denied"))
    wrapped = pl.exceptions.ComputeError(
        "parquet: File out of specification: underlying IO error: No space left on device "
        "(os error 28)"
    )
    assert durable.is_disk_full(wrapped)
    assert not durable.is_disk_full(ValueError("No space left on device (os error 28)"))
    truncated = pl.exceptions.ComputeError(
        "parquet: File out of specification: Invalid thrift: transport error"
    )
    assert not durable.is_disk_full(truncated)  # no folder: nothing says the disk is full
    assert not durable.is_disk_full(truncated, tmp_path)  # this folder's disk has room
    real_statvfs = os.statvfs

    class Full:
        f_bavail = 0

    monkeypatch.setattr(
        os, "statvfs", lambda path: Full() if path == tmp_path else real_statvfs(path)
    )
    assert durable.is_disk_full(truncated, tmp_path)
    assert not durable.is_disk_full(ValueError("Invalid thrift"), tmp_path)  # not polars'


def test_a_parquet_write_whose_enospc_polars_lost_is_a_full_disk_and_leaves_no_temporary(
    tmp_path: Path, polars_loses_enospc: Callable[[Callable[[Path], bool]], None]
) -> None:
    # polars' "Invalid thrift" passed as it was: the half-written temporary was removed
    # before anyone asked the disk, which then had room, so nothing read it as a full disk.
    target = tmp_path / "part.parquet"
    durable.write_atomic(pl.DataFrame({"a": [1]}), target)
    polars_loses_enospc(lambda path: True)
    with pytest.raises(OSError) as raised:
        durable.write_atomic(pl.DataFrame({"a": [2]}), target)
    assert raised.value.errno == errno.ENOSPC and durable.is_disk_full(raised.value)
    assert isinstance(raised.value.__cause__, pl.exceptions.ComputeError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part.parquet"]
    assert pl.read_parquet(target)["a"].to_list() == [1]


def test_a_parquet_write_failing_with_room_left_is_not_called_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise pl.exceptions.ComputeError("parquet: File out of specification: Invalid thrift")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken)
    with pytest.raises(pl.exceptions.ComputeError):
        durable.write_atomic(pl.DataFrame({"a": [1]}), tmp_path / "part.parquet")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("scan_attempts", scan),
        ("scan_responses", scan),
        ("accepted_ids", scan),
        ("attempt_counts", scan),
        ("write_pid", runlock),
        ("read_pid", runlock),
        ("clear_pid", runlock),
        ("LedgerBusy", runlock),
    ],
)
def test_ledger_names_in_the_interfaces_still_import(name: str, home: object) -> None:
    assert getattr(engine.ledger, name) is getattr(home, name)


def test_read_lane_states_still_imports_from_dispatch() -> None:
    assert engine.dispatch.read_lane_states is lanefile.read_lane_states


def test_a_write_probe_removed_by_another_process_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe gone before its own removal (another process swept it) says the folder is
    writable, where the check raised FileNotFoundError out of the command."""
    unlink = os.unlink

    def gone_first(path: str) -> None:
        unlink(path)
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)

    monkeypatch.setattr(os, "unlink", gone_first)
    assert durable.write_refused(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_write_probe_whose_close_fails_is_still_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A close that fails (EIO) is raised, and leaves no `.write-probe-*.tmp` behind; such a
    leftover would anyway be a temporary's name, never a result's."""
    close = os.close

    def failing(fd: int) -> None:
        close(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "close", failing)
    with pytest.raises(OSError, match="Input/output"):
        durable.write_refused(tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert durable.is_temp_name(".write-probe-abc123.tmp")


def test_a_folder_that_keeps_the_probe_refuses_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append-only folder (`chattr +a`) lets a file be made but not removed or replaced,
    as the run's writes do: the probe's removal refused (EPERM) escaped the check, and the
    resume called it "cannot make a run folder" (a tester's). It is a refused write."""

    def append_only(path: str) -> None:
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), path)

    monkeypatch.setattr(os, "unlink", append_only)
    refused = durable.write_refused(tmp_path)
    assert refused is not None and refused.errno == errno.EPERM


def _staged(folder: Path, names: list[str]) -> dict[Path, Path]:
    """Each target of `names` in `folder` with a written temporary holding "new"."""
    (staging := folder / ".staging").mkdir()
    for name in names:
        (staging / name).write_bytes(b"new")
    return {folder / name: staging / name for name in names}


def _busy(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    real = os.replace

    def replace(src: Path, dst: Path) -> None:
        if Path(dst) == target:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(src), str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_commit_files_puts_back_every_file_when_one_cannot_be_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file there before is put back, one that was not is removed again."""
    (tmp_path / "a").write_bytes(b"old")
    files = _staged(tmp_path, ["a", "b", "c"])
    _busy(monkeypatch, tmp_path / "c")
    with pytest.raises(durable.CommitFailed) as failed:
        durable.commit_files(files, tmp_path / ".staging")
    assert (failed.value.errno, failed.value.filename) == (errno.EBUSY, str(tmp_path / "c"))
    assert failed.value.outcome() == "nothing was replaced (kept as they were: a, b, c)"
    assert (tmp_path / "a").read_bytes() == b"old" and not (tmp_path / "b").exists()


def test_commit_files_says_a_file_it_could_not_put_back_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk without hard links: the file before could not be kept to put back."""
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"old")
    files = _staged(tmp_path, ["a", "b"])
    _busy(monkeypatch, tmp_path / "b")

    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", no_links)
    with pytest.raises(durable.CommitFailed) as failed:
        durable.commit_files(files, tmp_path / ".staging")
    assert failed.value.outcome() == "replaced: a; kept as they were: b"
    assert [(tmp_path / name).read_bytes() for name in ("a", "b")] == [b"new", b"old"]


def test_a_polars_errors_path_is_its_first_line_alone() -> None:
    """polars may follow the path of a refused write with its context stack: the one-line
    error named a path of several lines."""
    from engine.durable import FolderReadOnly

    said = "Read-only file system (os error 30): /run/x/scores.parquet\n\nThis error occurred"
    error = type("ComputeError", (Exception,), {"__module__": "polars.exceptions"})(said)
    assert FolderReadOnly("/run/x", error).where == Path("/run/x/scores.parquet")
