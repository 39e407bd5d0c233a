"""Replacing every shard at once (re-parse): a full disk leaves the old set, and nothing else."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from engine.durable import write_atomic
from engine.shards import NotAFileShard, replace_all, shard_name, visible_shards


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
