"""The journal: one JSON object per line, torn last lines skipped, corruption elsewhere reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.journal import (
    JournalError,
    JournalWriter,
    list_segments,
    read_journal,
    read_segment,
    segment_path,
)


def test_lines_round_trip_in_order(tmp_path: Path) -> None:
    writer = JournalWriter(segment_path(tmp_path, 1))
    records = [{"kind": "dispatch", "n": i, "text": "é\n{}"} for i in range(5)]
    for record in records:
        writer.append(record)
    writer.close()
    assert list(read_segment(segment_path(tmp_path, 1))) == records
    assert segment_path(tmp_path, 1).read_bytes().count(b"\n") == 5


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = segment_path(tmp_path, 3)
    writer = JournalWriter(path)
    writer.append({"n": 1})
    writer.append({"n": 2})
    writer.close()
    with path.open("ab") as handle:
        handle.write(b'{"n": 3, "te')
    assert list(read_segment(path)) == [{"n": 1}, {"n": 2}]


def test_torn_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = segment_path(tmp_path, 1)
    path.write_bytes(b'{"n": 1}\n{"n": 2, "x\n{"n": 3}\n')
    with pytest.raises(JournalError, match="line 2 of 3"):
        list(read_segment(path))


def test_split_writes_leave_a_readable_prefix(tmp_path: Path) -> None:
    """The crash-test hook writes each line in two halves; both halves land in order."""
    path = segment_path(tmp_path, 1)
    writer = JournalWriter(path, split_pause_s=0.001)
    writer.append({"n": 1, "pad": "x" * 100})
    writer.close()
    assert list(read_segment(path)) == [{"n": 1, "pad": "x" * 100}]


def test_segments_listed_oldest_first_and_missing_read_empty(tmp_path: Path) -> None:
    for sid in (10, 2, 7):
        JournalWriter(segment_path(tmp_path, sid)).append({"sid": sid})
    (tmp_path / "seg-junk.jsonl").write_text("not a segment")
    assert [sid for sid, _ in list_segments(tmp_path)] == [2, 7, 10]
    assert [sid for sid, _ in read_journal(tmp_path)] == [2, 7, 10]
    assert list(read_segment(tmp_path / "seg-99999999.jsonl")) == []
    assert list_segments(tmp_path / "absent") == []


def test_fsync_mode_writes_the_same_bytes(tmp_path: Path) -> None:
    a, b = segment_path(tmp_path, 1), segment_path(tmp_path, 2)
    for path, fsync in ((a, False), (b, True)):
        writer = JournalWriter(path, fsync=fsync)
        writer.append({"k": [1, 2.5, None]})
        writer.close()
    assert a.read_bytes() == b.read_bytes()


def test_a_line_cut_short_by_a_full_disk_is_removed(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import errno
    import os

    from engine.journal import JournalWriter, read_segment

    path = tmp_path / "seg-00000001.jsonl"
    writer = JournalWriter(path)
    writer.append({"n": 1})
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        writer.append({"n": 2, "text": "x" * 100})
    monkeypatch.setattr(os, "write", real_write)
    writer.append({"n": 3})  # space is back: the next line follows a whole one
    writer.close()
    assert [r["n"] for r in read_segment(path)] == [1, 3]
