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
