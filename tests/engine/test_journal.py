"""The journal: one JSON object per line, torn last lines skipped, corruption elsewhere reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.journal import (
    JournalError,
    JournalWriter,
    list_segments,
    read_journal,
    read_segment,
    segment_path,
)
from engine.records import iso_utc
from tests.engine.conftest import T0, attempt_row, response_row


def _dispatch_line() -> dict[str, Any]:
    """A dispatch line as the ledger writes it (`Ledger.record_dispatch`)."""
    return {"kind": "dispatch", "request_id": "r1", "attempt": 1, "model": "m",
            "provider": "sim", "started_at": iso_utc(T0)}  # fmt: skip


def _result_line(**attempt: Any) -> dict[str, Any]:
    """A result line with its answer as the ledger writes it (`Ledger.record_result`), its
    attempt's fields changed by `attempt`."""
    return {"kind": "result", "attempt": attempt_row("r1", 1, "m", "ok").to_row() | attempt,
            "response": response_row("r1", 1, "m").to_row()}  # fmt: skip


def test_lines_round_trip_in_order(tmp_path: Path) -> None:
    writer = JournalWriter(segment_path(tmp_path, 1))
    records = [_dispatch_line() | {"n": i, "text": "é\n{}"} for i in range(5)]
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


def _wrong(line: dict[str, Any], part: str = "", **changes: Any) -> bytes:
    """`line` with `changes` to its `part` (to the line itself: "")."""
    if not part:
        return orjson.dumps(line | changes)
    return orjson.dumps(line | {part: line[part] | changes})


def _rotted(line: dict[str, Any], old: bytes, new: bytes) -> bytes:
    """`line` with its first `old` turned `new`, as one byte rotted on disk leaves it."""
    return orjson.dumps(line).replace(old, new, 1)


@pytest.mark.parametrize(
    ("line", "fault"),
    [
        (b'{"kind":"result"}', "a result line, but its attempt is missing"),
        (b'{"kind":"result","attempt":"x"}', "a result line, but its attempt is not a JSON object"),
        (_wrong(_result_line(), "attempt", attempt="x"),
         'a result line, but its attempt has attempt "x", of the wrong type'),
        (_rotted(_result_line(), b'"request_id"', b'"request_ie"'),
         "a result line, but its attempt has no request_id"),
        (_wrong(_result_line(), "response", values=["x"]),
         'a result line, but its response has values ["x"], of the wrong type'),
        (_wrong(_result_line(), "response", unit=None),
         "a result line, but its response has no unit"),
        (b'{"kind":"dispatch"}', "a dispatch line, but it has no request_id"),
        (b'{"kind":"dispatch","request_id":5,"attempt":"x"}',
         "a dispatch line, but it has no model"),
        (_wrong(_dispatch_line(), attempt="x"),
         'a dispatch line, but it has attempt "x", of the wrong type'),
        (_rotted(_dispatch_line(), b'"request_id"', b'"request_ie"'),
         "a dispatch line, but it has no request_id"),
        # a digit rotted in a time: polars' traceback where a table of the lines was built
        (_rotted(_dispatch_line(), b"T21:", b"T24:"),
         'a dispatch line, but it has started_at "2026-03-02T24:00:00.000000+00:00"'
         ', which is no time'),
        (_rotted(_result_line(), b"-03-", b"-13-"),
         'a result line, but its attempt has started_at "2026-13-02T21:00:10.000000+00:00"'
         ', which is no time'),
        (_wrong(_result_line(), "response", accepted_at="2026-12-01 00:00:00+00:00"),
         'a result line, but its response has accepted_at "2026-12-01 00:00:00+00:00"'
         ', which is no time'),
    ],
)  # fmt: skip
def test_a_line_without_what_its_readers_take_is_corrupt(
    tmp_path: Path, line: bytes, fault: str
) -> None:
    """Valid JSON of the wrong shape: `status` and `audit` ended in a KeyError's traceback
    or polars' (building a table of it), `score` and a resume said an answer was missing
    and sent the user to `reparse`, which said a later version had written the folder.
    The line's neighbours are whole lines of the same kinds, read before and after it."""
    path = segment_path(tmp_path, 1)
    whole = [orjson.dumps(_dispatch_line()), orjson.dumps(_result_line())]
    path.write_bytes(b"\n".join([*whole, line, *whole]) + b"\n")
    with pytest.raises(JournalError) as info:
        list(read_segment(path))
    assert str(info.value) == (
        f"{path}: line 3 of 5 is corrupt ({fault}); mend or delete that line and run again "
        "(a deleted result is asked again)"
    )


def test_a_last_line_of_the_wrong_shape_is_no_torn_line(tmp_path: Path) -> None:
    """A kill mid-write leaves a line that does not parse; one that parses is whole."""
    path = segment_path(tmp_path, 1)
    path.write_bytes(orjson.dumps(_dispatch_line()) + b'\n{"kind":"dispatch"}\n')
    with pytest.raises(JournalError, match="line 2 of 2 is corrupt"):
        list(read_segment(path))


def test_lines_of_every_version_and_kind_read_as_they_are(tmp_path: Path) -> None:
    """What the ledger writes, with its null fields; an earlier version's result line,
    without the field added since (`model_reported`); a later version's, with a field this
    one does not know (the writer refuses it: `engine.later_format`); a batch line's
    dispatch; lines of no kind this version writes."""
    earlier = _result_line()
    del earlier["attempt"]["model_reported"]
    lines = [
        _dispatch_line(),
        _dispatch_line() | {"batch_job": "job-1"},
        # null where the writer may leave it; `true` and an int where a table takes them
        _result_line(http_status=None, tokens_in=None, detail=None, elapsed_ms=5, tokens_out=True),
        _result_line() | {"response": None},
        earlier,
        _result_line(later_field=[1, "x"]),
        _result_line() | {"response": response_row("r1", 1, "m").to_row() | {"values": [None]}},
        {"kind": "note", "text": "x"},
        {"n": 1},
    ]
    path = segment_path(tmp_path, 1)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    assert list(read_segment(path)) == lines


def test_every_time_the_check_passes_is_one_polars_reads() -> None:
    """The line check stands in for polars' `ISO_FORMAT` read: a spelling it passed that
    polars cannot read would end a command in polars' traceback again. Spellings one to
    three characters away from a written time, each passed one read back by polars."""
    import random

    import polars as pl

    from engine.records import ISO_FORMAT, _is_time

    written = iso_utc(T0)
    draw = random.Random(20261207)
    spellings = {written}
    for _ in range(20_000):
        chars = list(written)
        for _ in range(draw.randint(1, 3)):
            at = draw.randrange(len(chars))
            char = draw.choice("0123456789+-:.TZ ")
            if draw.random() < 0.6:
                chars[at] = char
            else:
                chars.insert(at, char)
        spellings.add("".join(chars))
    passed = [spelling for spelling in spellings if _is_time(spelling)]
    read = pl.Series(passed).str.to_datetime(
        time_unit="us", time_zone="UTC", format=ISO_FORMAT, strict=False
    )
    assert read.null_count() == 0
    assert written in passed and 100 < len(passed) < len(spellings) / 2
