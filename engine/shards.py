"""Parquet shards of the ledger: atomic writes, naming, and whole-table replacement.

A shard is `part-<id>.parquet` where `<id>` is the journal segment it was folded from (or
a fresh id for a re-parse), so redoing an interrupted compaction rewrites the same file
rather than adding a second copy. Shards are written by `engine.durable.write_atomic`
(hidden temp name, fsync, rename), so a reader never sees half a shard.

Replacing every response shard at once (re-parse) cannot be one rename, so it goes
through an intent file: write the new shard under a temp name, write
`.replace-intent.json` naming the new shard and the old ones, rename the new shard into
place (the commit point), delete the old ones, delete the intent. Readers that find an
intent whose new shard exists ignore the old shards it lists; `settle_replacement`
finishes (or abandons, if the new shard never landed) an interrupted replacement.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

import orjson
import polars as pl

from engine.durable import (
    fsync_dir,
    is_temp_name,
    temp_path,
    write_atomic,
    write_bytes_atomic,
    written_whole,
)
from engine.journal import numbered_files

_PART = re.compile(r"^part-(\d{8})\.parquet$")
INTENT_NAME = ".replace-intent.json"


def shard_name(shard_id: int) -> str:
    return f"part-{shard_id:08d}.parquet"


def shard_id(name: str) -> int | None:
    """The id in a shard's name (`shard_name`'s inverse), None for any other name."""
    match = _PART.match(name)
    return int(match.group(1)) if match else None


class NotAFileShard(Exception):
    """A shard's name held by a device, a FIFO, a socket (a link to /dev/zero, say) or a
    folder: polars read a device as an empty file and ended in its traceback naming no file,
    waited forever on a FIFO, deaf to a signal, and read a folder as a shard of no rows (the
    audit then said every answer had lost its attempt, naming no file). `runs.damaged_files`
    names it as damage."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path, self.kind = path, kind


def file_kind(mode: int) -> str | None:
    """What a file of status `mode` is when it is no regular file: "a folder", "a FIFO", "a
    character device", "a block device", "a socket" or "a special file"; None for a regular
    file. The forced twin of `panels.input_files.file_kind` (the import contracts keep
    `engine` and `panels` apart): change both, tests/engine/test_shards.py holds them alike."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def special_file(path: Path) -> str | None:
    """What `path` is when it is neither a regular file nor a folder, symlinks followed ("a
    FIFO", "a character device", ...: `file_kind`); None otherwise, or when there is nothing
    there. Asked of the file's status alone: opening a FIFO waits for a writer."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISDIR(mode) else file_kind(mode)


def list_shards(directory: Path) -> list[tuple[int, Path]]:
    """Committed shards in `directory`, by id (temp files never match). Raises
    `NotAFileShard` for one that is a device, a FIFO, a socket or a folder: every reader and
    the writer list the shards here before anything opens them."""
    shards = numbered_files(directory, _PART)
    for _, path in shards:
        if (kind := _not_a_shard(path)) is not None:
            raise NotAFileShard(path, kind)
    return shards


def _not_a_shard(path: Path) -> str | None:
    """What stands under a shard's name when it is no regular file (`file_kind`: a folder, a
    FIFO, a device, ...), or "a link in a loop" (the readers' `stat` raised ELOOP, a traceback
    from `score`, `repair` and a resume); None for a file, or nothing there. One `stat`."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "a link in a loop" if exc.errno == errno.ELOOP else None
    return file_kind(mode)


def max_shard_id(*directories: Path) -> int:
    ids = [shard_id for d in directories for shard_id, _ in list_shards(d)]
    return max(ids, default=0)


def remove_temp_files(directory: Path) -> None:
    """Drop temp shards a killed writer left behind (never visible to readers anyway)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if is_temp_name(name):
            (directory / name).unlink(missing_ok=True)


def _read_intent(directory: Path) -> dict[str, object] | None:
    try:
        data = (directory / INTENT_NAME).read_bytes()
    except FileNotFoundError:
        return None
    try:
        intent = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None  # torn intent: written before the commit rename, so the old set stands
    return intent if isinstance(intent, dict) else None


def visible_shards(directory: Path) -> list[Path]:
    """The shards a reader should union now, honouring a committed replacement."""
    shards = list_shards(directory)
    intent = _read_intent(directory)
    if intent is not None:
        new_name = str(intent.get("new"))
        if (directory / new_name).exists():
            retired = {str(name) for name in intent.get("old", [])}  # type: ignore[attr-defined]
            return [p for _, p in shards if p.name not in retired]
    return [p for _, p in shards]


def replace_all(directory: Path, frame: pl.DataFrame, new_id: int) -> Path:
    """Atomically make `frame` the only shard of `directory` (see module docstring)."""
    old = [p.name for _, p in list_shards(directory)]
    new_name = shard_name(new_id)
    if new_name in old:
        raise ValueError(f"shard id {new_id} already used in {directory}")
    # Both files through the durable writer: a write a full disk cut short leaves no
    # temporary (of up to the whole table) in the folder, not even until the next open.
    with written_whole(directory / new_name) as tmp:
        frame.write_parquet(tmp)
        write_bytes_atomic(directory / INTENT_NAME, orjson.dumps({"new": new_name, "old": old}))
    # Leaving the `with` renamed the new shard into place: the commit point.
    settle_replacement(directory)
    return directory / new_name


def settle_replacement(directory: Path) -> None:
    """Finish a committed replacement, or abandon one whose new shard never landed."""
    intent = _read_intent(directory)
    if intent is None:
        (directory / INTENT_NAME).unlink(missing_ok=True)
        temp_path(directory / INTENT_NAME).unlink(missing_ok=True)
        return
    new_name = str(intent.get("new"))
    if (directory / new_name).exists():
        for name in intent.get("old", []):  # type: ignore[attr-defined]
            (directory / str(name)).unlink(missing_ok=True)
        fsync_dir(directory)
    (directory / INTENT_NAME).unlink(missing_ok=True)
    fsync_dir(directory)


def add_missing_columns(
    directory: Path,
    schema: dict[str, pl.DataType],
    columns: Mapping[Path, Sequence[str]] | None = None,
) -> None:
    """Rewrite each shard of `directory` that lacks a column of `schema` with that column
    null (whole, under its own name: `write_atomic`). A folder an
    earlier version wrote, resumed by this one, held shards of two schemas side by side, and
    a reader's plain `pl.scan_parquet("attempts/*.parquet")` (the README's) failed on it,
    while pandas and DuckDB dropped the new column without a word. Called by the writer
    alone (`Ledger.open`), before it folds anything: a kill part-way leaves shards of both
    schemas, which every reader of ours takes (`engine.scan.scan_shards`), and the next open
    goes on. A column this version does not know (a later one's) is kept, after its own:
    `engine.later_format` refuses such a folder first, and this keeps nothing from being
    dropped should it ever come here. `columns`: each shard's columns, where the caller has
    read the footers already (`Ledger.open`, through that refusal)."""
    for _, path in list_shards(directory):
        present = columns[path] if columns is not None else list(pl.read_parquet_schema(path))
        missing = [name for name in schema if name not in present]
        if not missing:
            continue
        frame = pl.read_parquet(path).with_columns(
            pl.lit(None, dtype=schema[name]).alias(name) for name in missing
        )
        later = [name for name in present if name not in schema]
        write_atomic(frame.select([*schema, *later]), path)
