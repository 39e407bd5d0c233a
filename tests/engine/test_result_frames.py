"""A segment's tables read by polars (`engine.scan.result_frames`, what compaction folds) equal
the line-by-line reading (`result_rows` of `read_segment`), whatever the segment holds."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import polars as pl
import pytest

from engine.journal import JournalError, JournalWriter, read_segment, segment_path
from engine.ledger import Ledger
from engine.records import AttemptRecord, ResponseRecord, attempts_frame, responses_frame
from engine.scan import result_frames, result_rows

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _attempt(i: int, outcome: str = "ok", **changes: object) -> AttemptRecord:
    fields: dict[str, object] = dict(
        request_id=f"r{i}", attempt=1 + i % 3, model="m", provider="openai",
        started_at=T0 + timedelta(seconds=i), elapsed_ms=1.5 * i, outcome=outcome,
        http_status=200 if outcome == "ok" else None, provider_request_id=None if i % 2 else "x",
        retry_after_s=None if i % 4 else 2, tokens_in=None if i % 5 == 0 else 140,
        tokens_out=6, detail="" if i % 3 else "omitted: seed [é «»]", raw_text='{"p": 0.25}',
        finish_reason=None if i % 6 == 0 else "stop",
        model_reported=None if i % 4 == 1 else "m-2026-01",
    )
    fields.update(changes)
    return AttemptRecord(**fields)  # type: ignore[arg-type]


def _response(i: int) -> ResponseRecord:
    keys = [] if i % 11 == 0 else [f"k{j}" for j in range(i % 4 + 1)]
    return ResponseRecord(
        request_id=f"r{i}", model="m", arm="families/isolated", unit=f"u{i}", pass_=i % 7,
        events=list(keys), keys=keys, raw_text="text\n“quoted”", values=[0.5] * len(keys),
        finish_reason="stop", tokens_in=None, tokens_out=3, attempts=2,
        accepted_at=T0 + timedelta(microseconds=i),
    )


def _write_segment(path: Path, n: int) -> None:
    writer = JournalWriter(path)
    for i in range(n):
        writer.append({"kind": "dispatch", "request_id": f"r{i}", "attempt": 1, "model": "m",
                       "provider": "openai", "started_at": T0.isoformat()})
        accepted = i % 3 != 1
        writer.append({
            "kind": "result",
            "attempt": _attempt(i, "ok" if accepted else "invalid_response").to_row(),
            "response": _response(i).to_row() if accepted else None,
        })
    writer.close()


def _by_rows(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    attempts, responses = result_rows(read_segment(path))
    return attempts_frame(attempts), responses_frame(responses)


def _assert_same(path: Path) -> None:
    fast, slow = result_frames(path), _by_rows(path)
    for got, want in zip(fast, slow, strict=True):
        assert got.schema == want.schema
        assert got.equals(want)


def test_equal_to_the_line_by_line_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = segment_path(tmp_path, 1)
    _write_segment(path, 60)
    _assert_same(path)
    # The writer's own lines are read by polars alone, never line by line.
    monkeypatch.setattr("engine.scan.read_segment", None)
    assert result_frames(path)[1].height == 40


def test_lines_written_before_model_reported_read_it_as_null(tmp_path: Path) -> None:
    """A journal left by a version that did not record the reported model is folded by this
    one: the column is null in those rows, either way of reading."""
    path = segment_path(tmp_path, 3)
    writer = JournalWriter(path)
    for i in range(6):
        row = _attempt(i).to_row()
        del row["model_reported"]
        writer.append({"kind": "result", "attempt": row, "response": _response(i).to_row()})
    writer.close()
    _assert_same(path)
    attempts = result_frames(path)[0]
    assert attempts.height == 6 and attempts["model_reported"].null_count() == 6


def test_torn_last_line_is_skipped_like_read_segment(tmp_path: Path) -> None:
    path = segment_path(tmp_path, 2)
    _write_segment(path, 10)
    line = orjson.dumps({"kind": "result", "attempt": _attempt(99).to_row(), "response": None})
    with path.open("ab") as f:
        f.write(line[: len(line) // 2])
    _assert_same(path)
    assert result_frames(path)[0].height == 10


def test_empty_and_missing_segments(tmp_path: Path) -> None:
    path = segment_path(tmp_path, 3)
    path.write_bytes(b"")
    _assert_same(path)
    missing = result_frames(tmp_path / "seg-00000009.jsonl")
    assert missing[0].height == 0 and missing[1].height == 0


def test_lines_written_otherwise_take_the_line_by_line_path(tmp_path: Path) -> None:
    """Spacing or key order other than the writer's, or another kind of line: still read."""
    path = segment_path(tmp_path, 4)
    _write_segment(path, 5)
    with path.open("ab") as f:
        row = _attempt(7).to_row()
        f.write(b'{"attempt": ' + orjson.dumps(row) + b', "kind": "result", "response": null}\n')
        f.write(b'{"kind":"note","text":"hand-written"}\n')
    _assert_same(path)
    assert result_frames(path)[0].height == 6


def test_corrupt_line_before_the_last_still_raises(tmp_path: Path) -> None:
    path = segment_path(tmp_path, 5)
    _write_segment(path, 3)
    data = path.read_bytes().split(b"\n")
    data[1] = data[1][:20]
    path.write_bytes(b"\n".join(data))
    with pytest.raises(JournalError):
        result_frames(path)


def test_compaction_folds_through_it(tmp_path: Path) -> None:
    """The shards a fold writes hold exactly the journal's results."""
    with Ledger.open(tmp_path / "run") as ledger:
        for i in range(30):
            ledger.record_dispatch(f"r{i}", 1, "m", "openai", T0)
            accepted = i % 4 != 0
            ledger.record_result(
                _attempt(i, "ok" if accepted else "timeout", attempt=1),
                _response(i) if accepted else None,
            )
        assert ledger.compact() == 1
    attempts = pl.read_parquet(tmp_path / "run" / "attempts")
    responses = pl.read_parquet(tmp_path / "run" / "responses")
    assert attempts.height == 30 and responses.height == 22
    assert sorted(responses["request_id"]) == sorted(f"r{i}" for i in range(30) if i % 4)


def test_awkward_values_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Escapes, control characters, astral characters, extreme floats and signed zero come
    back from the polars path exactly as the line-by-line reading gives them."""
    texts = ['{"p": 0.5}\\', "tab\there\x01\x1f", "emoji 🦆 and \u2028 and \"q\"", "", "nul\x00"]
    values = [[-0.0], [5e-324], [1.7976931348623157e308], [0.1 + 0.2], [1e-300]]
    path = segment_path(tmp_path, 6)
    writer = JournalWriter(path)
    for i, (text, vals) in enumerate(zip(texts, values, strict=True)):
        attempt = _attempt(i, raw_text=text, detail=text, tokens_in=2**53 + 1)
        response = replace(_response(i + 1), raw_text=text, keys=["k"], events=[text], values=vals)
        line = {"kind": "result", "attempt": attempt.to_row(), "response": response.to_row()}
        writer.append(line)
    writer.close()
    _assert_same(path)
    monkeypatch.setattr("engine.scan.read_segment", None)  # the polars path, nothing else
    attempts, responses = result_frames(path)
    assert attempts["raw_text"].to_list() == texts
    assert attempts["tokens_in"].to_list() == [2**53 + 1] * len(texts)
    got = [v[0] for v in responses["values"].to_list()]
    assert [(math.copysign(1, v), v) for v in got] == [
        (math.copysign(1, v[0]), v[0]) for v in values
    ]
