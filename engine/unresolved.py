"""Attempts sent and not resolved: the journal's `dispatch` lines that have no result yet.

A lane journals a `dispatch` line before it sends a request and a `result` line when the
attempt ends. Between the two the attempt is in flight; if the writer dies then (kill -9, a
crash), its request was sent (and may be paid for) but nothing records how it ended, until
the next `Ledger.open` records each such attempt as `interrupted`
(`engine.ledger.Ledger._recover_interrupted`, with `pending_dispatches` and
`interrupted_attempt` here: one reading for the ledger and its readers).

`status` and `audit` read the folder before that happens. Counting only the recorded
attempts, a tester's died run read "11 attempts, 0 retries" and "every attempt was accepted"
with 16 requests sent and unresolved, and after the resume the same folder said "16 retry
attempts ... interrupted dispatches (16)". So readers count them as what they are: in flight
while the run is live, and, once its writer is gone, as the `interrupted` attempts the next
run will record (`as_interrupted`), so the numbers do not jump at the resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from engine.journal import read_journal
from engine.records import ATTEMPT_SCHEMA, AttemptRecord, attempts_frame, parse_utc
from engine.runlock import LEDGER_CLOSED, read_pid
from engine.scan import ATTEMPTS, DISPATCH, JOURNAL, RESULT, scan_shards
from engine.shards import list_shards

#: The detail of an attempt recorded `interrupted`: sent, and no result before its writer died.
INTERRUPTED_DETAIL = "interrupted: dispatched but no result before the process stopped"
#: The dispatch line's field naming the batch job whose result line it is
#: (`engine.ledger.Ledger.record_dispatch`): such an attempt was not sent alone, and its
#: answer stays with the job, which a resume collects without sending the request again.
BATCH_JOB = "batch_job"
#: The columns of `unresolved_dispatches`: the `batch_job` of a batch line (None for a live
#: attempt) is kept, so a reader shows the detail the resume records (`interrupted_attempt`).
COLUMNS = ("request_id", "attempt", "model", "provider", "started_at", BATCH_JOB)


def pending_dispatches(
    journal_dir: Path, attempts_dir: Path, skip_segment: int | None = None
) -> dict[tuple[str, int], dict[str, Any]]:
    """(request_id, attempt) -> dispatch line, for the journal's dispatch lines with no
    result line and no attempt row in the shards (`skip_segment`: the reader's own live
    segment, which `Ledger.open` leaves out).

    The journal is read before the shards are listed, as `engine.scan`'s readers do: a
    segment compacted in between has its results in a shard, so a finished attempt is
    never taken for one in flight; a result written after the read is (a live run's
    snapshot)."""
    dispatched: dict[tuple[str, int], dict[str, Any]] = {}
    finished: set[tuple[str, int]] = set()
    for segment_id, record in read_journal(journal_dir):
        kind = record.get("kind")
        if segment_id == skip_segment:
            continue
        if kind == DISPATCH:
            dispatched[(str(record["request_id"]), int(record["attempt"]))] = record
        elif kind == RESULT and isinstance(record.get("attempt"), dict):
            row = record["attempt"]
            finished.add((str(row["request_id"]), int(row["attempt"])))
    pending = {key: line for key, line in dispatched.items() if key not in finished}
    shards = [path for _, path in list_shards(attempts_dir)]
    if pending and shards:
        known = (
            scan_shards(shards, ATTEMPT_SCHEMA)
            .filter(pl.col("request_id").is_in(sorted({rid for rid, _ in pending})))
            .select("request_id", "attempt")
            .collect()
        )
        for rid, attempt in known.iter_rows():
            pending.pop((rid, attempt), None)
    return dict(sorted(pending.items()))


def interrupted_attempt(request_id: str, attempt: int, line: dict[str, Any]) -> AttemptRecord:
    """The `interrupted` attempt recorded for dispatch `line` (sent, no result)."""
    job = line.get(BATCH_JOB)
    detail = (
        f"interrupted: batch job {job}'s line for this request was being recorded when the "
        "process stopped; its answer is collected from the job, the request not sent again"
        if job else INTERRUPTED_DETAIL
    )
    return AttemptRecord(
        request_id=request_id, attempt=attempt, model=line["model"], provider=line["provider"],
        started_at=datetime.fromisoformat(line["started_at"]), elapsed_ms=0.0,
        outcome="interrupted", http_status=None, provider_request_id=None,
        retry_after_s=None, tokens_in=None, tokens_out=None, detail=detail,
    )  # fmt: skip


def unresolved_dispatches(run_dir: Path | str) -> list[dict[str, Any]]:
    """The dispatch lines of the journal with no result line and no attempt row in the
    shards (`pending_dispatches`), oldest first: `request_id, attempt, model, provider,
    started_at` (ISO text), `batch_job` (the job of a batch line, else None)."""
    run_dir = Path(run_dir)
    pending = pending_dispatches(run_dir / JOURNAL, run_dir / ATTEMPTS)
    return [
        {key: line.get(key) for key in COLUMNS} | {"request_id": rid, "attempt": attempt}
        for (rid, attempt), line in pending.items()
    ]


def as_interrupted(unresolved: list[dict[str, Any]]) -> pl.DataFrame:
    """The attempt rows the next `Ledger.open` records for `unresolved` (ATTEMPT_SCHEMA)."""
    return attempts_frame(
        [
            interrupted_attempt(line["request_id"], line["attempt"], line).to_row()
            for line in unresolved
        ]
    )


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


@dataclass(frozen=True)
class Unresolved:
    """How `audit` and `status` count the journal's attempts sent and not resolved."""

    #: A live run's: in flight (`Audit.in_flight`).
    in_flight: int = 0
    #: A died run's: read in as `interrupted` attempts (`Audit.interrupted_unrecorded`).
    interrupted: int = 0
    #: Per model, the requests a live run's in-flight attempts are the first of.
    first_asked: dict[str, int] = field(default_factory=dict)
    #: Of `interrupted`, the batch lines (being recorded from their job's results).
    interrupted_batch: int = 0


def interrupted_note(attempts: int, batch: int) -> str:
    """`status`'s and the audit's sentence for a died run's `attempts` sent and not resolved,
    `batch` of them batch lines. A batch line was not sent alone: it was being recorded from
    its job's results, and the resume collects its answer from the job without sending the
    request again (`interrupted_attempt`); said as an in-flight dispatch, it read as one
    asked again. "When the run ended", not "died": a run a full disk stopped leaves them too
    (a tester's)."""
    counted = "counted as interrupted dispatches, as the next run of this folder records them"
    live = attempts - batch
    parts = []
    if live:
        were = f"{live:,} attempts were" if live != 1 else "1 attempt was"
        parts.append(f"{were} in flight when the run ended: {counted}")
    if batch:
        lines = "1 batch line was" if batch == 1 else f"{batch:,} batch lines were"
        whose = "its job's" if batch == 1 else "their jobs'"
        parts.append(
            f"{lines} being recorded from {whose} results when the run ended: counted as "
            f"{'an interrupted attempt' if batch == 1 else 'interrupted attempts'}, as the "
            f"next run of this folder records {'it' if batch == 1 else 'them'}; "
            f"{'its answer is' if batch == 1 else 'their answers are'} collected from "
            f"{'its job' if batch == 1 else 'their jobs'}, the "
            f"{'request' if batch == 1 else 'requests'} not sent again"
        )
    return "; ".join(parts)


def with_unresolved(
    run_dir: Path, attempts: pl.LazyFrame, responses: pl.LazyFrame
) -> tuple[pl.LazyFrame, Unresolved]:
    """`attempts` (the ledger's scan) with the journal's attempts sent and not resolved.

    Counting only the recorded attempts, a died run read "every attempt was accepted" and,
    after a resume that sent nothing new, "16 retry attempts ... interrupted dispatches
    (16)". With no live writer (`read_pid`) they are read in as the `interrupted` attempts
    the next `Ledger.open` records (`as_interrupted`), before `classify`, so every count is
    the one the folder reads after the resume. A live run's are in flight, no attempts yet:
    counted apart, with the requests they are the first attempt of (asked, so no longer
    "not attempted"). Read after the scan, so that an attempt a live run resolves in between
    is never counted twice, in flight and recorded."""
    lines = unresolved_dispatches(run_dir)
    if not lines:
        return attempts, Unresolved()
    died, live = _died_and_live(lines, read_pid(run_dir))
    unresolved = Unresolved(
        in_flight=len(live),
        first_asked=_first_asked(live, attempts, responses) if live else {},
        interrupted=len(died),
        interrupted_batch=sum(1 for line in died if line.get(BATCH_JOB)),
    )
    if died:
        # A handful of rows beside the streamed scan, in its narrowed columns and types.
        schema = attempts.collect_schema()
        rows = as_interrupted(died).select(schema.names()).cast(schema)
        attempts = pl.concat([attempts, rows.lazy()])
    return attempts, unresolved


def _died_and_live(
    lines: list[dict[str, Any]], writer: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`lines` split into a died run's and the live writer's (`read_pid`; none alive: all
    died). A resume's own ledger records the died run's as interrupted only once it opens:
    until then every line was called in flight, and `status` polled through a resume's start
    read 1,231 attempts where it had read 1,270 (a hostile pass). A line sent before the
    writer's start is the died run's, compared in whole seconds: a writer may stamp a line
    with a time it took just before its ledger opened and wrote its start (both are stamped
    to the microsecond), and such a line is its own. A live writer whose ledger is closed
    (`engine.runlock.mark_ledger_closed`: a run scoring after its dispatch) has nothing in
    flight: its run's closing audit said "1 attempt in flight" of an attempt its stop cut."""
    if not (writer and writer.get("alive")) or writer.get(LEDGER_CLOSED):
        return lines, []
    since = _moment(writer.get("started_at"))
    if since is None:
        return [], lines  # a pid file without its start: as before, all in flight
    died: list[dict[str, Any]] = []
    live: list[dict[str, Any]] = []
    for line in lines:
        sent = _moment(line.get("started_at"))
        # A batch line carries its job's planned time, which an earlier run may have set:
        # while a writer lives, it is the live run collecting that job.
        older = sent is not None and sent < since and not line.get(BATCH_JOB)
        (died if older else live).append(line)
    return died, live


def _moment(text: Any) -> datetime | None:
    """An ISO time's whole second (`engine.records.parse_utc`), None where it is not one."""
    try:
        return parse_utc(str(text)).replace(microsecond=0)
    except ValueError:
        return None


def _first_asked(
    lines: list[dict[str, Any]], attempts: pl.LazyFrame, responses: pl.LazyFrame
) -> dict[str, int]:
    """Per model, the requests of `lines` with no attempt and no answer recorded."""
    ids = sorted({str(line["request_id"]) for line in lines})
    wanted = pl.col("request_id").is_in(ids)
    asked = pl.LazyFrame(
        {"request_id": [str(line["request_id"]) for line in lines],
         "model": [str(line["model"]) for line in lines]}
    ).unique("request_id")  # fmt: skip
    first = (
        asked.join(attempts.filter(wanted).select("request_id"), on="request_id", how="anti")
        .join(responses.filter(wanted).select("request_id"), on="request_id", how="anti")
        .group_by("model")
        .len()
        .collect()
    )
    return {str(m): int(n) for m, n in first.iter_rows()}
