"""Durable file writes: the one place a file is made whole-or-absent on disk.

Every file a run writes whole (shards, the plan, scores, `spec.toml`, `run.pid`,
`logs/lanes.json`) goes through here: write a hidden temporary beside the target, flush it,
rename it over the target (atomic on POSIX), then flush the folder so the rename itself
survives a power cut. A reader therefore sees the old file or the new one, never half.

Append-only files (the journal) are not written here; they use `fsync_path`/`fsync_dir`.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine import mountinfo

if TYPE_CHECKING:
    import polars as pl

#: What a write fails with when the device (or the user's quota) has no room left.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


#: How polars words a write that failed for want of space: it raises its own error types,
#: with the operating system's message and number in the text, not an `OSError`.
_POLARS_DISK_FULL = tuple(
    text for code in sorted(DISK_FULL_ERRNOS) for text in (os.strerror(code), f"(os error {code})")
)


def is_disk_full(exc: BaseException, folder: Path | None = None) -> bool:
    """ENOSPC or EDQUOT, as an `OSError` or inside a polars error (a Parquet write); given
    the `folder` written to, also any polars error while its disk has no room left: polars
    can lose a write's ENOSPC and fail only on reading the truncated file back."""
    if isinstance(exc, OSError):
        return exc.errno in DISK_FULL_ERRNOS
    if not type(exc).__module__.startswith("polars"):
        return False
    if any(text in str(exc) for text in _POLARS_DISK_FULL):
        return True
    return folder is not None and has_no_room(folder)


def has_no_room(folder: Path) -> bool:
    """Whether the disk holding `folder` has no block left for this process (False when that
    cannot be read)."""
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


#: What making a file fails with where this process may not write: a read-only mount, or a
#: folder of another user's.
NOT_WRITABLE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def why_unwritable(folder: Path) -> str | None:
    """Why this process may not make files in the existing `folder` (the system's words), or
    None when it may: a check before long work whose first write would find out too late."""
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    return os.strerror(errno.EROFS if mounted_read_only(folder) else errno.EACCES)


def mounted_read_only(folder: Path) -> bool:
    """Whether the file system holding `folder` is mounted read-only now: `statvfs` says so,
    or the mount's super options do (`engine.mountinfo.super_read_only`: ext4 turned
    read-only by an error, `emergency_ro`, reads writable to `statvfs`). False when
    `statvfs` cannot read the folder (gone: mountinfo could not place it either), or neither
    says so."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return True
    except OSError:
        return False
    return mountinfo.super_read_only(folder) is True


#: How a write refused by a read-only file system is worded where its error carries no
#: number (polars' own `OSError`: "Read-only file system (os error 30): PATH").
_READ_ONLY_TEXTS = (os.strerror(errno.EROFS), f"(os error {errno.EROFS})")


def is_read_only(exc: BaseException, folder: Path | None = None) -> bool:
    """EROFS, as an `OSError` or in polars' words; given the run `folder`, only while the
    file system holding it refuses writes as read-only now (`turned_read_only`). A folder
    read-only before a command began is refused at its start (exit 2); one that turns so
    while it runs (ext4's `errors=remount-ro` after a file-system error) fails its next
    write with EROFS. Given `folder`, EROFS from a part of it mounted read-only on its own
    (the folder's own disk writable) is left to the caller, which refuses that as the
    user's to mend; and EIO counts while the folder refuses writes as read-only: ext4
    aborting between a write and its fsync fails the fsync with EIO, not EROFS. A bare EIO
    (the folder still writable) is a failing disk, left as it was."""
    errno_of = getattr(exc, "errno", None)
    if folder is not None and _is_io_error(exc):
        return turned_read_only(folder)
    if errno_of is not None:
        refused = isinstance(exc, OSError) and errno_of == errno.EROFS
    else:
        worded = isinstance(exc, OSError) or type(exc).__module__.startswith("polars")
        refused = worded and any(text in str(exc) for text in _READ_ONLY_TEXTS)
    return refused and (folder is None or turned_read_only(folder))


def _is_io_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.EIO


def turned_read_only(folder: Path) -> bool:
    """Whether the file system holding `folder` refuses writes as read-only now: its mount
    says so (`mounted_read_only`, its super options included), or making a file there fails
    with EROFS (`write_refused`). ext4 turned read-only by a file-system error
    (`errors=remount-ro`) may keep its mount's flags as they were: `statvfs` said writable
    while every write failed, and a user other than the folder's owner is refused EACCES
    before EROFS, so only the super options (`emergency_ro`) tell them."""
    if mounted_read_only(folder):
        return True
    try:
        refused = write_refused(folder)
    except OSError:
        return False
    return refused is not None and refused.errno == errno.EROFS


def disk_refused(exc: BaseException, folder: Path | None = None) -> bool:
    """Whether `exc` is a write the disk refused mid-run: full (`is_disk_full`) or turned
    read-only (`is_read_only`). Either stops a run the same way, keeping what it wrote."""
    return is_disk_full(exc, folder) or is_read_only(exc, folder)


def stops_the_run(exc: BaseException, folder: Path) -> bool:
    """Whether `exc`, a failed write or flush of a file the run keeps appending to in its
    `folder` (the journal, the batch jobs' records), stops the run as a refused disk: full
    or read-only wherever it was refused (`disk_refused`), or an EIO while `folder` refuses
    writes as read-only (`is_read_only` given the folder): ext4's abort fails the fsync of
    a write with EIO, not EROFS (a segment's close raised a traceback out of
    `Ledger.close`, a reviewer's)."""
    return disk_refused(exc) or is_read_only(exc, folder)


def write_refused(folder: Path) -> OSError | None:
    """The error making a file in the existing `folder` fails with where this process may not
    write there (one of `NOT_WRITABLE_ERRNOS`), or None when it may. A hidden temporary
    (`is_temp_name`: no reader takes it for a result) is made and removed: the write itself
    is asked, where `os.access` guesses from the mode. Any other error is raised. The probe
    is removed whatever its close does, and one another process removed first is no error; a
    probe left all the same (an append-only folder refuses the removal) is swept with the
    shards' temporaries (`engine.shards.remove_temp_files`) or passed over by name."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix=".write-probe-", suffix=".tmp", dir=folder)
    except OSError as exc:
        if exc.errno not in NOT_WRITABLE_ERRNOS:
            raise
        return exc
    try:
        os.close(fd)
    finally:  # no `return` in here: it would swallow the close's error
        kept = _remove_probe(name)
    return kept


def _remove_probe(name: str) -> OSError | None:
    """Remove `write_refused`'s probe: None once gone (or gone before), else the refusal of
    a folder where a file may be made but nothing may leave (append-only: the run replaces
    files there, so it is refused as a write; a tester's)."""
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in NOT_WRITABLE_ERRNOS:
            raise
        return exc
    return None


class DiskFull(RuntimeError):
    """A run folder's write failed for want of space: the run stops starting attempts and
    keeps everything already written; freeing space and running again resumes."""

    #: The error number whose words stand in for an error that carries none (polars').
    ERRNO = errno.ENOSPC
    #: Set where the run that met it kept nothing in its folder (`runs.pipeline.FolderHold`
    #: took its lock file, and the folder it made, away): nothing was started to resume.
    nothing_kept: bool = False

    def __init__(self, where: Path | str, error: BaseException, note: str = "") -> None:
        filename = getattr(error, "filename", None) or _path_in_words(error)
        # In full: a folder given as "." named its file "scores.parquet" alone.
        self.where = Path(os.path.abspath(filename or where))
        reason = getattr(error, "strerror", None) or os.strerror(self.ERRNO)
        # `note` says what `where` is when it is not the run folder (the user frees space
        # where the message points: a folder they never named needs saying why it is used).
        super().__init__(self.words(reason) + (f": {note}" if note else ""))

    def words(self, reason: str) -> str:
        """What failed, in the user's words (the message before any note)."""
        return f"disk full: no space left for {self.where} ({reason})"


def _path_in_words(error: BaseException) -> str | None:
    """The path polars' own error names after the system's words ("Read-only file system
    (os error 30): PATH"), its only record of the file it failed on; None if none."""
    words, said, path = str(error).partition("): ")
    # Its first line only: polars may follow it with its context stack.
    path = path.strip().split("\n", 1)[0].strip()
    return path or None if said and "(os error " in words else None


#: What a folder turned read-only kept. Not "every answer written is kept", as a full disk's
#: words say: a file-system error that remounts the disk read-only can drop the writes it had
#: not yet saved (a tester's journal lost its last lines once the disk was checked).
READ_ONLY_SAVED = (
    "what the disk saved is kept, but a file-system error can drop its last unsaved writes"
)


class FolderReadOnly(DiskFull):
    """A run folder's write failed because its file system turned read-only while the
    command ran (`is_read_only`). A `DiskFull` so that every handler of a full disk stops
    the same way (no attempt started, every lane stopped, what was written kept, the journal
    left for the next run to fold); only its words, and the exit status the commands give
    it, differ: remounting the folder writable, not freeing space, is what resumes."""

    ERRNO = errno.EROFS

    def words(self, reason: str) -> str:
        return f"the folder became read-only: {self.where} could not be written ({reason})"


def disk_refusal(where: Path | str, error: BaseException, note: str = "") -> DiskFull:
    """The `DiskFull` (or `FolderReadOnly`, for EROFS) that `error`, a write `disk_refused`
    says the disk refused, stands for: an EIO it let through is the folder turned
    read-only (`is_read_only`, given the folder)."""
    kind = FolderReadOnly if is_read_only(error) or _is_io_error(error) else DiskFull
    return kind(where, error, note)


@contextlib.contextmanager
def disk_full_raised(
    where: Path | str, folder: Path | None = None, note: str = ""
) -> Iterator[None]:
    """Re-raise, as `DiskFull(where, ..., note)`, any error that says the disk is full
    (`is_disk_full`, with `folder` for polars' lost ENOSPC), and as `FolderReadOnly` one
    that says it turned read-only (`is_read_only`, with `folder`); everything else as it
    was."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:
        if not disk_refused(exc, folder):
            raise
        raise disk_refusal(where, exc, note) from exc


def fsync_path(path: Path) -> None:
    """Flush a file's bytes, or a directory's entries, to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        named(exc, path)
        raise
    finally:
        os.close(fd)


def named(exc: OSError, path: Path) -> None:
    """Give `exc` the file it failed on where it names none (a write or flush of a
    descriptor): the one-line error of a refused write says which file it was."""
    if exc.filename is None:
        exc.filename = str(path)


def fsync_dir(directory: Path) -> None:
    """Make a rename/unlink inside `directory` durable (POSIX needs the directory fsync'd)."""
    fsync_path(directory)


def temp_path(target: Path) -> Path:
    """The hidden temporary a write of `target` goes through (`.name.tmp`, same folder)."""
    return target.with_name(f".{target.name}.tmp")


def is_temp_name(name: str) -> bool:
    """Whether `name` is such a temporary's (`temp_path`): a write's own, never a result."""
    return name.startswith(".") and name.endswith(".tmp")


def commit_file(tmp: Path, target: Path, *, sync: bool = True) -> None:
    """Make a fully written temporary file `target`: fsync, rename, fsync the folder.

    `sync=False` keeps the rename's atomicity (a reader never sees half a file) but skips
    both flushes: for files rewritten every second whose loss to a power cut is harmless.
    """
    if sync:
        fsync_path(tmp)
    os.replace(tmp, target)
    if sync:
        fsync_dir(target.parent)


class CommitFailed(OSError):
    """`commit_files` could not make every target new: the error (its number and words, so a
    full disk is still read as one) of the `target` it failed on, with the targets left new
    (`replaced`: none where each was put back) and those as they were (`kept`)."""

    def __init__(
        self, error: OSError, target: Path, replaced: list[Path], kept: list[Path]
    ) -> None:
        super().__init__(error.errno, error.strerror or str(error), str(target))
        self.replaced, self.kept = replaced, kept

    def outcome(self) -> str:
        """What the failure left: "nothing was replaced (kept as they were: a, b)", or which
        were replaced and which kept, by name."""
        kept = ", ".join(path.name for path in self.kept)
        if not self.replaced:
            return f"nothing was replaced (kept as they were: {kept})"
        replaced = ", ".join(path.name for path in self.replaced)
        return f"replaced: {replaced}; kept as they were: {kept}"


def commit_files(files: Mapping[Path, Path], aside: Path) -> None:
    """Make each fully written temporary (`files`: target -> temporary) its target, as
    `commit_file` does, all or none: each target's file before is linked into the folder
    `aside` (on the same disk, removed by the caller) before it is replaced, and when a later
    replace fails every target done is put back (one that was not there, removed) before
    `CommitFailed` is raised. Done one at a time, a file mounted read-only over the second of
    three ("Device or resource busy") left the first new beside the others' old (a
    tester's). A target that cannot be linked aside (a disk without hard links) is replaced
    all the same, and said `replaced` should a later one fail."""
    done: list[tuple[Path, Path | None]] = []
    for target, tmp in files.items():
        before = _linked_aside(target, aside)
        try:
            commit_file(tmp, target)
        except OSError as exc:
            if not tmp.exists():  # replaced: the flush of its folder failed
                done.append((target, before))
            left = _put_back(done)
            raise CommitFailed(exc, target, left, [t for t in files if t not in left]) from exc
        done.append((target, before))


#: What `_linked_aside` gives for a target with no file yet: putting it back removes it.
_NOTHING_BEFORE = Path()


def _linked_aside(target: Path, aside: Path) -> Path | None:
    """A hard link to `target`'s file in `aside`, to put it back by; `_NOTHING_BEFORE` where
    there is none, None where it cannot be linked."""
    link = aside / f"{target.name}.before"
    try:
        os.link(target, link, follow_symlinks=False)
    except FileNotFoundError:
        return _NOTHING_BEFORE
    except (OSError, NotImplementedError):  # no hard links there, or none to a link
        return None
    return link


def _put_back(done: list[tuple[Path, Path | None]]) -> list[Path]:
    """Undo `commit_files`'s replaces of `done` (each target with `_linked_aside`'s link),
    the last first; the targets that stay new, in `done`'s order."""
    left = []
    for target, before in reversed(done):
        try:
            if before is None:
                left.append(target)
            elif before is _NOTHING_BEFORE:
                target.unlink(missing_ok=True)
            else:
                os.replace(before, target)
        except OSError:
            left.append(target)
    for folder in {target.parent for target, _ in done}:
        with contextlib.suppress(OSError):  # put back already; a flush that fails is no error
            fsync_dir(folder)
    return left[::-1]


def write_bytes_atomic(target: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace `target` with `data`, all or nothing (see `commit_file` for `sync`)."""
    tmp = temp_path(target)
    with _removed_on_failure(tmp):
        try:
            tmp.write_bytes(data)
        except OSError as exc:  # a buffered write's or close's error names no file
            named(exc, tmp)
            raise
        commit_file(tmp, target, sync=sync)


def write_atomic(frame: pl.DataFrame, target: Path) -> None:
    """Write `frame` as the Parquet file `target`, durably: all there or absent (see
    `written_whole` for a full disk)."""
    with written_whole(target) as tmp:
        frame.write_parquet(tmp)


@contextlib.contextmanager
def written_whole(target: Path) -> Iterator[Path]:
    """The temporary (`temp_path`) to write `target` in, inside the `with`; at its end made
    `target` (`commit_file`). A failure leaves neither, and a polars failure for want of
    space is raised as an `OSError` (ENOSPC or EDQUOT), the error every writer's handler
    knows (`Ledger.compact` among them)."""
    tmp = temp_path(target)
    # The temporary is removed only after the failure is judged (`with` leaves the inner
    # manager first): when polars lost the ENOSPC, only a disk with no room says why, and
    # removing the half-written temporary gives the disk its room back.
    with _removed_on_failure(tmp), disk_full_as_os_error(tmp.parent):
        yield tmp
        commit_file(tmp, target)


@contextlib.contextmanager
def disk_full_as_os_error(folder: Path) -> Iterator[None]:
    """Re-raise a polars error that `is_disk_full` reads as such (given `folder`) as the
    `OSError` it stands for: ENOSPC, or EDQUOT when polars' text names that. Judged inside
    the write, while what it half wrote still fills the disk: removed, it frees the room
    that said why."""
    try:
        yield
    except OSError:
        raise
    except Exception as exc:
        if not is_disk_full(exc, folder):
            raise
        text = str(exc)
        code = next(
            (c for c in sorted(DISK_FULL_ERRNOS) if f"(os error {c})" in text), errno.ENOSPC
        )
        raise OSError(code, os.strerror(code)) from exc


@contextlib.contextmanager
def _removed_on_failure(tmp: Path) -> Iterator[None]:
    """A failed write (a full disk, say) leaves no half-written temporary behind."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def append_record_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line to a best-effort record file (pauses, phase timings).

    Such a record never stops a run: a full disk or a read-only folder skips the line. The
    ledger's own journal is not written this way (it must be durable and say so when not).
    """
    with contextlib.suppress(OSError):
        _append_line(path, record, sync=False)


def append_record_line_durably(path: Path, record: dict[str, Any]) -> None:
    """`append_record_line` for a record that must be on disk before what it announces is
    done (a reparse's begun line): fsync'd, with its folder when the file is new, and an
    OSError raised, not skipped."""
    _append_line(path, record, sync=True)


def _append_line(path: Path, record: dict[str, Any], *, sync: bool) -> None:
    """One line, one `os.write` on an append-only descriptor (a kill leaves at most a torn
    last line), fsync'd with the folder when new if `sync`."""
    data = orjson.dumps(record) + b"\n"
    fresh = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # A last line a kill tore has no newline: written on after it, the new line would be
        # one damaged line with it, and `read_record_lines` would skip both.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    except OSError as exc:  # a descriptor's error names no file: the line says which
        named(exc, path)
        raise
    finally:
        os.close(fd)
    if sync and fresh:
        fsync_dir(path.parent)


def read_record_lines(path: Path) -> list[dict[str, Any]]:
    """Every record (JSON object) line of a file, oldest first; none if it is absent, a torn
    or damaged line skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    records = []
    for line in data.splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):  # a line torn by a kill
            record = orjson.loads(line)
            if isinstance(record, dict):  # a damaged line may still parse (`7`, `[]`)
                records.append(record)
    return records


def record_number(value: object) -> float | None:
    """A number read from a record file (`read_record_lines`, `logs/lanes.json`), or None
    where a line edited by hand or damaged on disk holds something else ("abc", true, NaN)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
