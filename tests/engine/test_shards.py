"""Replacing every shard at once (re-parse): a full disk leaves the old set, and nothing else."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from engine.durable import write_atomic
from engine.shards import NotAFileShard, replace_all, shard_name, special_file, visible_shards
from engine.shards import file_kind as engine_file_kind
from panels.input_files import file_kind as panels_file_kind
from tests.special_files import put_in_place


def _ids(*request_ids: str) -> pl.DataFrame:
    return pl.DataFrame({"request_id": list(request_ids)})


@pytest.mark.parametrize("cut_short", ["shard", "intent"])
def test_a_replacement_the_disk_cuts_short_leaves_no_temporary(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    polars_loses_enospc: Callable[[Callable[[Path], bool]], None],
    cut_short: str,
) -> None:
    # `dutchbook reparse` on a full disk left `responses/.part-00000003.parquet.tmp` (and,
    # when the intent found no room, its temporary too) until the ledger's next open.
    write_atomic(_ids("a", "b"), tmp_path / shard_name(1))
    if cut_short == "shard":
        polars_loses_enospc(lambda path: path.parent == tmp_path)
    else:
        real_write_bytes = Path.write_bytes

        def half_then_no_room(path: Path, data: bytes) -> int:
            real_write_bytes(path, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(Path, "write_bytes", half_then_no_room)
    with pytest.raises(OSError) as raised:
        replace_all(tmp_path, _ids("z"), 2)
    assert raised.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == [shard_name(1)]
    assert visible_shards(tmp_path) == [tmp_path / shard_name(1)]


def test_a_replacement_leaves_the_new_shard_alone(tmp_path: Path) -> None:
    write_atomic(_ids("a", "b"), tmp_path / shard_name(1))
    assert replace_all(tmp_path, _ids("z"), 2) == tmp_path / shard_name(2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [shard_name(2)]
    assert pl.read_parquet(tmp_path / shard_name(2))["request_id"].to_list() == ["z"]


@pytest.mark.parametrize("kind", ["a FIFO", "a character device"])
def test_a_shard_that_is_no_regular_file_is_refused_naming_it(tmp_path: Path, kind: str) -> None:
    # polars read a link to /dev/null as an empty file (its traceback naming no file) and
    # waited forever on a FIFO; the listing says which shard it is before anything opens it.
    write_atomic(_ids("a"), tmp_path / shard_name(1))
    odd = tmp_path / shard_name(2)
    if kind == "a FIFO":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/null")
    with pytest.raises(NotAFileShard, match=f"{odd} is {kind}, not a regular file"):
        visible_shards(tmp_path)
    odd.unlink()
    assert visible_shards(tmp_path) == [tmp_path / shard_name(1)]


_MODES = [stat.S_IFREG, stat.S_IFDIR, stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK,
          stat.S_IFLNK, 0]  # fmt: skip


@pytest.mark.parametrize("mode", _MODES)
def test_the_engine_and_panels_name_every_type_of_file_alike(mode: int) -> None:
    # Forced twins (the import contracts keep engine and panels apart): a shard's refusal and
    # a family's, a data file's or a design file's name a FIFO, a device... in one wording.
    assert engine_file_kind(mode | 0o644) == panels_file_kind(mode | 0o644)


@pytest.mark.parametrize("held_by", ["file", "folder", "fifo", "/dev/null", "socket"])
def test_special_file_is_the_kind_of_anything_but_a_file_or_a_folder(
    tmp_path: Path, held_by: str
) -> None:
    path = tmp_path / "x"
    put_in_place(path, held_by)
    kind = panels_file_kind(path.stat().st_mode)
    assert special_file(path) == (None if held_by == "folder" else kind)
    assert kind == {"file": None, "folder": "a folder", "fifo": "a FIFO",
                    "/dev/null": "a character device", "socket": "a socket"}[held_by]  # fmt: skip


def test_a_writer_opening_an_earlier_versions_folder_gives_its_shards_the_new_columns(
    tmp_path: Path,
) -> None:
    """An earlier version's folder resumed by this one held attempt shards without
    `model_reported` beside shards with it: the README's `pl.scan_parquet("attempts/*")`
    failed ("extra column in file outside of expected schema") and pandas and DuckDB
    dropped the column. The writer's open rewrites the older shards, the column null."""
    from datetime import UTC, datetime

    from engine.ledger import Ledger
    from engine.records import ATTEMPT_SCHEMA, AttemptRecord, attempts_frame

    def rows(first: int, reported: str | None) -> pl.DataFrame:
        return attempts_frame([AttemptRecord(
            request_id=f"r{i}", attempt=1, model="m", provider="sim",
            started_at=datetime(2026, 12, 5, tzinfo=UTC), elapsed_ms=1.0, outcome="ok",
            http_status=200, provider_request_id=None, retry_after_s=None, tokens_in=1,
            tokens_out=1, detail="", model_reported=reported,
        ).to_row() for i in range(first, first + 3)])

    attempts = tmp_path / "run" / "attempts"
    attempts.mkdir(parents=True)
    write_atomic(rows(0, None).drop("model_reported"), attempts / shard_name(1))  # earlier
    write_atomic(rows(3, "m-1"), attempts / shard_name(2))
    with pytest.raises(pl.exceptions.SchemaError):
        pl.scan_parquet(attempts / "*.parquet").collect()
    Ledger.open(tmp_path / "run", pid_file=False).close()
    read = pl.scan_parquet(attempts / "*.parquet").collect()  # as the README reads it
    assert read.height == 6 and read.columns == list(ATTEMPT_SCHEMA)
    assert read.sort("request_id")["model_reported"].to_list() == [None] * 3 + ["m-1"] * 3
    # A column of a later version is kept, after this version's own (`Ledger.open` refuses
    # such a folder first: engine.later_format; nothing is dropped should one come here).
    from engine.shards import add_missing_columns

    other = tmp_path / "other"
    other.mkdir()
    write_atomic(rows(0, None).drop("model_reported").with_columns(later=pl.lit("x")),
                 other / shard_name(1))  # fmt: skip
    add_missing_columns(other, ATTEMPT_SCHEMA)
    assert list(pl.read_parquet_schema(other / shard_name(1))) == [*ATTEMPT_SCHEMA, "later"]
