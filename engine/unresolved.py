"""Attempts sent and not resolved: the journal's `dispatch` lines that have no result yet.

A lane journals a `dispatch` line before it sends a request and a `result` line when the
attempt ends. Between the two the attempt is in flight; if the writer dies then (kill -9, a
crash), its request was sent (and may be paid for) but nothing records how it ended, until
the next `Ledger.open` records each such attempt as `interrupted`
(`engine.ledger.Ledger._recover_interrupted`, whose reading this mirrors).

`status` and `audit` read the folder before that happens. Counting only the recorded
attempts, a tester's died run read "11 attempts, 0 retries" and "every attempt was accepted"
with 16 requests sent and unresolved, and after the resume the same folder said "16 retry
attempts ... interrupted dispatches (16)". So readers count them as what they are: in flight
while the run is live, and, once its writer is gone, as the `interrupted` attempts the next
run will record (`as_interrupted`), so the numbers do not jump at the resume.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from engine.journal import read_journal
from engine.ledger import INTERRUPTED_DETAIL  # the words the next open records them with
from engine.records import ATTEMPT_SCHEMA, AttemptRecord, attempts_frame
from engine.scan import ATTEMPTS, DISPATCH, JOURNAL, RESULT
from engine.shards import list_shards

#: The columns of `unresolved_dispatches`.
COLUMNS = ("request_id", "attempt", "model", "provider", "started_at")


def unresolved_dispatches(run_dir: Path | str) -> list[dict[str, Any]]:
    """The dispatch lines of the journal with no result line and no attempt row in the
    shards, oldest first: `request_id, attempt, model, provider, started_at` (ISO text).

    The journal is read before the shards are listed, as `engine.scan`'s readers do: a
    segment compacted in between has its results in a shard, so a finished attempt is
    never taken for one in flight; a result written after the read is (a live run's
    snapshot)."""
    run_dir = Path(run_dir)
    dispatched: dict[tuple[str, int], dict[str, Any]] = {}
    finished: set[tuple[str, int]] = set()
    for _, record in read_journal(run_dir / JOURNAL):
        kind = record.get("kind")
        if kind == DISPATCH:
            dispatched[(str(record["request_id"]), int(record["attempt"]))] = record
        elif kind == RESULT and isinstance(record.get("attempt"), dict):
            row = record["attempt"]
            finished.add((str(row["request_id"]), int(row["attempt"])))
    pending = {key: line for key, line in dispatched.items() if key not in finished}
    shards = [path for _, path in list_shards(run_dir / ATTEMPTS)]
    if pending and shards:
        known = (
            pl.scan_parquet(shards, schema=ATTEMPT_SCHEMA)
            .filter(pl.col("request_id").is_in(sorted({rid for rid, _ in pending})))
            .select("request_id", "attempt")
            .collect()
        )
        for rid, attempt in known.iter_rows():
            pending.pop((rid, attempt), None)
    return [
        {key: line.get(key) for key in COLUMNS} | {"request_id": rid, "attempt": attempt}
        for (rid, attempt), line in sorted(pending.items())
    ]


def as_interrupted(unresolved: list[dict[str, Any]]) -> pl.DataFrame:
    """The attempt rows the next `Ledger.open` records for `unresolved` (ATTEMPT_SCHEMA)."""
    return attempts_frame(
        [
            AttemptRecord(
                request_id=line["request_id"], attempt=line["attempt"], model=line["model"],
                provider=line["provider"], started_at=datetime.fromisoformat(line["started_at"]),
                elapsed_ms=0.0, outcome="interrupted", http_status=None,
                provider_request_id=None, retry_after_s=None, tokens_in=None, tokens_out=None,
                detail=INTERRUPTED_DETAIL,
            ).to_row()
            for line in unresolved
        ]
    )  # fmt: skip


def in_flight_sentence(sentence: str, in_flight: int, attempted: int, requests: int) -> str:
    """The audit sentence of a live run with `in_flight` attempts sent and not resolved:
    "every attempt was accepted" is not known of those, so it is said of the finished ones."""
    if not in_flight:
        return sentence
    flying = f"{in_flight:,} attempt{'s' if in_flight != 1 else ''} in flight"
    if sentence.startswith("No retry attempts"):
        return (
            f"No retry attempts so far: every attempt that finished was accepted ({attempted:,} "
            f"of {requests:,} request{'s' if requests != 1 else ''} attempted so far, {flying})."
        )
    return f"{sentence.rstrip('.')}; {flying}."
