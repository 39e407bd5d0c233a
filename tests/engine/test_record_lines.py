"""Best-effort record files (pauses, phase timings): one JSON line each, a torn line skipped on
reading, a write that cannot happen skipped without stopping the run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from engine.durable import append_record_line, append_record_line_durably, read_record_lines
from engine.records import iso_utc


def test_lines_read_back_in_order_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "records.jsonl"
    assert read_record_lines(path) == []
    append_record_line(path, {"n": 1})
    append_record_line(path, {"n": 2})
    with path.open("ab") as handle:
        handle.write(b'{"n": 3')  # a kill mid-write
    assert read_record_lines(path) == [{"n": 1}, {"n": 2}]


def test_a_line_written_after_a_torn_one_is_read(tmp_path: Path) -> None:
    """Appended onto the torn line, the next record made one damaged line with it, and both
    were skipped: a reparse's begun line so lost read as no reparse at all."""
    path = tmp_path / "logs" / "records.jsonl"
    for append in (append_record_line, append_record_line_durably):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b'{"n": 1}\n{"n": 2')  # a kill mid-write
        append(path, {"n": 3})
        assert read_record_lines(path) == [{"n": 1}, {"n": 3}]
        path.unlink()
        append(path, {"n": 4})  # a new file: no newline before its first line
        assert path.read_bytes() == b'{"n":4}\n'


def test_a_durable_line_that_cannot_be_written_raises(tmp_path: Path) -> None:
    import pytest

    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(OSError):
        append_record_line_durably(blocker / "records.jsonl", {"n": 1})


def test_a_write_that_cannot_happen_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the folder should be")
    append_record_line(blocker / "records.jsonl", {"n": 1})  # no exception
    assert blocker.read_text() == "a file where the folder should be"


def test_iso_utc_spells_every_aware_instant_alike_and_refuses_naive() -> None:
    import pytest

    stamp = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    assert iso_utc(stamp) == "2026-03-01T12:00:00.000000+00:00"
    assert iso_utc(stamp.astimezone(timezone(timedelta(hours=2)))) == iso_utc(stamp)
    with pytest.raises(ValueError):
        iso_utc(stamp.replace(tzinfo=None))



_ZONES = st.one_of(
    st.just(UTC),
    st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23)).map(timezone),
)
_STEPS = st.lists(
    st.one_of(
        st.integers(-2_000_000, 2_000_000).map(lambda us: timedelta(microseconds=us)),
        st.integers(-400, 400).map(lambda days: timedelta(days=days)),
    ),
    max_size=20,
)


@given(
    start=st.datetimes(datetime(100, 1, 1), datetime(9900, 12, 31), timezones=_ZONES),
    steps=_STEPS,
)
def test_iso_utc_is_isoformat_of_the_utc_instant_in_any_order(
    start: datetime, steps: list[timedelta]
) -> None:
    """`iso_utc` spells each second once and reuses it: over any sequence of instants (the
    same second again, the next microsecond, another day, another offset) every string must
    equal `isoformat` of the instant in UTC, byte for byte, as the journal always wrote it."""
    stamps = [start]
    for step in steps:
        stamps.append(stamps[-1] + step)
    for stamp in stamps:
        assert iso_utc(stamp) == stamp.astimezone(UTC).isoformat(timespec="microseconds")
