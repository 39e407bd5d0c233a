"""A folder a later version wrote to is refused by the writer before it writes anything.

An earlier version's writer folding a later one's journal, or rewriting its shards, drops the
columns it does not know (0.2.0 added `attempts.model_reported`; 0.1's resume dropped it
without a word). `Ledger.open` now names the file and the columns instead."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import polars as pl
import pytest

from engine.durable import write_atomic
from engine.journal import segment_path
from engine.later_format import LaterFormat
from engine.ledger import Ledger
from engine.records import AttemptRecord, ResponseRecord, attempts_frame, responses_frame
from engine.shards import shard_name


def _attempt(rid: str) -> AttemptRecord:
    return AttemptRecord(
        request_id=rid, attempt=1, model="m", provider="sim",
        started_at=datetime(2026, 12, 5, tzinfo=UTC), elapsed_ms=1.0, outcome="ok",
        http_status=200, provider_request_id=None, retry_after_s=None, tokens_in=1,
        tokens_out=1, detail="", model_reported="m",
    )


def _response(rid: str) -> ResponseRecord:
    return ResponseRecord(
        request_id=rid, model="m", arm="baseline", unit="u", pass_=0, events=["A"],
        keys=["A"], raw_text='{"A": 0.5}', values=[0.5], finish_reason="stop", tokens_in=1,
        tokens_out=1, attempts=1, accepted_at=datetime(2026, 12, 5, tzinfo=UTC),
    )


def _later_attempts(run: Path) -> Path:
    path = run / "attempts" / shard_name(1)
    write_atomic(attempts_frame([_attempt("r1").to_row()]).with_columns(cost=pl.lit(1.0)), path)
    return path


def _later_responses(run: Path) -> Path:
    path = run / "responses" / shard_name(1)
    frame = responses_frame([_response("r1").to_row()]).with_columns(judge=pl.lit("x"))
    write_atomic(frame, path)
    return path


def _later_journal(run: Path) -> Path:
    path = segment_path(run / "journal", 1)
    row = {**_attempt("r1").to_row(), "cost": 1.0}
    line = {"kind": "result", "attempt": row, "response": _response("r1").to_row()}
    path.write_bytes(orjson.dumps(line) + b"\n")
    return path


@pytest.mark.parametrize(
    ("put", "column"),
    [(_later_attempts, "cost"), (_later_responses, "judge"), (_later_journal, "cost")],
    ids=["attempt-shard", "response-shard", "journal-line"],
)
def test_a_writer_refuses_a_folder_a_later_version_wrote_to(
    tmp_path: Path, put: object, column: str
) -> None:
    run = tmp_path / "run"
    for name in ("attempts", "responses", "journal"):
        (run / name).mkdir(parents=True)
    written = put(run)  # type: ignore[operator]
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(LaterFormat) as refused:
        Ledger.open(run, pid_file=False)
    said = str(refused.value)
    assert said.startswith(f"{written} holds {column}, which this dutchbook does not know")
    assert "use that version (or a later one)" in said
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before, "nothing folded, rewritten or added"
    # The lock was let go: once the later version's records are gone, this version opens it.
    written.unlink()
    Ledger.open(run, pid_file=False).close()
