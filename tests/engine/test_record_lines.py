"""Best-effort record files (pauses, phase timings): one JSON line each, a torn line skipped on
reading, a write that cannot happen skipped without stopping the run."""

from __future__ import annotations

from pathlib import Path

from engine.durable import append_record_line, read_record_lines


def test_lines_read_back_in_order_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "records.jsonl"
    assert read_record_lines(path) == []
    append_record_line(path, {"n": 1})
    append_record_line(path, {"n": 2})
    with path.open("ab") as handle:
        handle.write(b'{"n": 3')  # a kill mid-write
    assert read_record_lines(path) == [{"n": 1}, {"n": 2}]


def test_a_write_that_cannot_happen_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    append_record_line(blocker / "records.jsonl", {"n": 1})  # no exception
    assert blocker.read_text() == "a file where the folder should be"


def test_iso_utc_spells_every_aware_instant_alike_and_refuses_naive() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    import pytest

    from engine.records import iso_utc

    stamp = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    assert iso_utc(stamp) == "2026-03-01T12:00:00.000000+00:00"
    assert iso_utc(stamp.astimezone(timezone(timedelta(hours=2)))) == iso_utc(stamp)
    with pytest.raises(ValueError):
        iso_utc(stamp.replace(tzinfo=None))
