"""The two row types the ledger stores, and their one mapping to journal lines and Parquet.

Keeping the on-disk column names and types in one place means the journal, the shards
and every reader agree without each re-deriving them; `pass_` in Python becomes `pass`
on disk (design.md, Records) because `pass` is a keyword.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from engine.frames import frame_from_rows

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

#: Parquet/Polars schema of `attempts/` (one row per HTTP attempt).
ATTEMPT_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "attempt": pl.Int64(),
    "model": pl.String(),
    "provider": pl.String(),
    "started_at": pl.Datetime("us", "UTC"),
    "elapsed_ms": pl.Float64(),
    "outcome": pl.String(),
    "http_status": pl.Int64(),
    "provider_request_id": pl.String(),
    "retry_after_s": pl.Float64(),
    "tokens_in": pl.Int64(),
    "tokens_out": pl.Int64(),
    "detail": pl.String(),
    "raw_text": pl.String(),
    "finish_reason": pl.String(),
    "model_reported": pl.String(),
}

#: What ends the `detail` of an attempt whose reply was not in its provider's format at all
#: (`Failure.foreign`: a proxy's HTML page under HTTP 200, JSON with no choices, a body past
#: the reply limit). Such a reply is no answer of the model's, so it is not charged to the
#: request's answer-failure budget, which lasts across resumes (`engine.scan.failure_counts`
#: leaves these rows out by this mark, since the row has no column of its own for it): a
#: page that came now and then gave tiny campaigns' requests up for good.
FOREIGN_NOTE = "[not in the provider's format: not charged to the answer-failure budget]"

#: Parquet/Polars schema of `responses/` (one row per accepted query).
RESPONSE_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "model": pl.String(),
    "arm": pl.String(),
    "unit": pl.String(),
    "pass": pl.Int64(),
    "events": pl.List(pl.String()),
    "keys": pl.List(pl.String()),
    "raw_text": pl.String(),
    "values": pl.List(pl.Float64()),
    "finish_reason": pl.String(),
    "tokens_in": pl.Int64(),
    "tokens_out": pl.Int64(),
    "attempts": pl.Int64(),
    "accepted_at": pl.Datetime("us", "UTC"),
}


def utc_now() -> datetime:
    """Every ledger timestamp is timezone-aware UTC (design.md, Records)."""
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    # A naive datetime would be silently read as local time by some readers: refuse the doubt.
    if value.tzinfo is None:
        raise ValueError("ledger timestamps must be timezone-aware (UTC)")
    return value.astimezone(UTC)


#: The last second `iso_utc` spelled, as one (key, "YYYY-MM-DDTHH:MM:SS") pair: replaced whole,
#: so a thread reading it never pairs one second's key with another's text.
_last_second: list[tuple[tuple[int, ...], str]] = [((), "")]


def iso_utc(value: datetime) -> str:
    """The journal's timestamp spelling: ISO 8601, UTC offset, always microseconds.

    Exactly `value.astimezone(UTC).isoformat(timespec="microseconds")` (tested over
    sequences of instants), but the date and time to the second are spelled once per
    second: an attempt is stamped three times, mostly within one second, and `isoformat`
    took about twice as long.
    """
    if value.tzinfo is not UTC:  # the engine's own stamps (`utc_now`) need no conversion
        value = _as_utc(value)
    key = (value.year, value.month, value.day, value.hour, value.minute, value.second)
    last = _last_second[0]
    if last[0] == key:
        second = last[1]
    else:
        second = value.replace(microsecond=0, tzinfo=None).isoformat()
        _last_second[0] = (key, second)
    return f"{second}.{value.microsecond:06d}+00:00"


def parse_utc(value: str) -> datetime:
    """A timestamp the journal or a pid file spells (ISO 8601) as an aware UTC datetime;
    `ValueError` for text that is none."""
    return _as_utc(datetime.fromisoformat(value))


# The two records are slotted, not frozen: a frozen dataclass sets each field through
# `object.__setattr__`, about 1.3 µs per record of 15 fields, and two are built per attempt.
# Nothing mutates one; `dataclasses.replace` makes the changed copies.


@dataclass(slots=True)
class AttemptRecord:
    """One HTTP attempt, whatever its outcome.

    `raw_text` keeps the reply of attempts that produced one (accepted or rejected as
    `invalid_response`) so a run can be re-parsed without new calls; `finish_reason` goes
    with it. `model_reported` is the model the provider's reply says answered (a gateway's
    fallback, an alias resolved, a deployment upgraded), None where the reply names none
    (Bedrock's Converse) or there was no reply. All three are optional extensions of the
    contract fields; shards written before `model_reported` read it as null.
    """

    request_id: str
    attempt: int
    model: str
    provider: str
    started_at: datetime
    elapsed_ms: float
    outcome: str
    http_status: int | None
    provider_request_id: str | None
    retry_after_s: float | None
    tokens_in: int | None
    tokens_out: int | None
    detail: str
    raw_text: str | None = None
    finish_reason: str | None = None
    model_reported: str | None = None

    def to_row(self) -> dict[str, Any]:
        """A JSON-safe dict with on-disk column names (timestamps as ISO strings)."""
        return {
            "request_id": self.request_id,
            "attempt": self.attempt,
            "model": self.model,
            "provider": self.provider,
            "started_at": iso_utc(self.started_at),
            "elapsed_ms": float(self.elapsed_ms),
            "outcome": str(self.outcome),
            "http_status": self.http_status,
            "provider_request_id": self.provider_request_id,
            "retry_after_s": self.retry_after_s,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "detail": self.detail,
            "raw_text": self.raw_text,
            "finish_reason": self.finish_reason,
            "model_reported": self.model_reported,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AttemptRecord:
        started = row["started_at"]
        return cls(
            request_id=row["request_id"],
            attempt=int(row["attempt"]),
            model=row["model"],
            provider=row["provider"],
            started_at=parse_utc(started) if isinstance(started, str) else _as_utc(started),
            elapsed_ms=float(row["elapsed_ms"]),
            outcome=row["outcome"],
            http_status=row.get("http_status"),
            provider_request_id=row.get("provider_request_id"),
            retry_after_s=row.get("retry_after_s"),
            tokens_in=row.get("tokens_in"),
            tokens_out=row.get("tokens_out"),
            detail=row.get("detail") or "",
            raw_text=row.get("raw_text"),
            finish_reason=row.get("finish_reason"),
            model_reported=row.get("model_reported"),
        )


@dataclass(slots=True)
class ResponseRecord:
    """One accepted answer set: the raw reply and the parsed values aligned with `keys`.

    `attempts` is the number of the attempt that was accepted (attempt numbers continue
    across resumes, so it is also the count of attempts made for this request).
    """

    request_id: str
    model: str
    arm: str
    unit: str
    pass_: int
    events: list[str]
    keys: list[str]
    raw_text: str
    values: list[float]
    finish_reason: str | None
    tokens_in: int | None
    tokens_out: int | None
    attempts: int
    accepted_at: datetime

    def __post_init__(self) -> None:
        if len(self.values) != len(self.keys):
            raise ValueError(
                f"{self.request_id}: {len(self.values)} values for {len(self.keys)} keys"
            )

    def to_row(self) -> dict[str, Any]:
        """A JSON-safe dict with on-disk column names (`pass`, ISO timestamps)."""
        return {
            "request_id": self.request_id,
            "model": self.model,
            "arm": self.arm,
            "unit": self.unit,
            "pass": self.pass_,
            "events": list(self.events),
            "keys": list(self.keys),
            "raw_text": self.raw_text,
            "values": [float(v) for v in self.values],
            "finish_reason": self.finish_reason,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "attempts": self.attempts,
            "accepted_at": iso_utc(self.accepted_at),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ResponseRecord:
        accepted = row["accepted_at"]
        return cls(
            request_id=row["request_id"],
            model=row["model"],
            arm=row["arm"],
            unit=row["unit"],
            pass_=int(row["pass"]),
            events=list(row["events"]),
            keys=list(row["keys"]),
            raw_text=row["raw_text"],
            values=[float(v) for v in row["values"]],
            finish_reason=row.get("finish_reason"),
            tokens_in=row.get("tokens_in"),
            tokens_out=row.get("tokens_out"),
            attempts=int(row["attempts"]),
            accepted_at=parse_utc(accepted) if isinstance(accepted, str) else _as_utc(accepted),
        )


#: How `iso_utc` strings are parsed back (`str.to_datetime`).
ISO_FORMAT = "%Y-%m-%dT%H:%M:%S%.f%:z"


def _frame(rows: list[dict[str, Any]], schema: dict[str, pl.DataType], ts: str) -> pl.DataFrame:
    """Rows as written by `to_row` (ISO timestamps) → a frame with the on-disk schema."""
    string_schema = dict(schema)
    string_schema[ts] = pl.String()
    frame = frame_from_rows(rows, string_schema)
    parsed = pl.col(ts).str.to_datetime(time_unit="us", time_zone="UTC", format=ISO_FORMAT)
    return frame.with_columns(parsed)


def attempts_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Attempt rows (from `AttemptRecord.to_row` or journal lines) as an attempts table."""
    return _frame(rows, ATTEMPT_SCHEMA, "started_at")


def responses_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Response rows (from `ResponseRecord.to_row` or journal lines) as a responses table."""
    return _frame(rows, RESPONSE_SCHEMA, "accepted_at")


#: Journal line kinds: `dispatch` before a request is sent, `result` when it finished
#: (`engine.ledger.Ledger.record_dispatch`, `record_result`).
DISPATCH = "dispatch"
RESULT = "result"


def _json_types(dtype: PolarsDataType) -> frozenset[type]:
    """The Python types orjson reads a column's value as (timestamps are ISO text) that the
    tables built of the lines take (`attempts_frame`): a number's column takes `true` as 1,
    a text's nothing but text."""
    if isinstance(dtype, pl.List):
        return frozenset({list})
    if dtype == pl.Float64:
        return frozenset({float, int, bool})
    return frozenset({int, bool}) if dtype == pl.Int64 else frozenset({str})


@dataclass(frozen=True)
class _Shape:
    """What one part of a journal line (a dispatch line whole, or a result's `attempt` or
    `response`, as `subject` names it) must hold: `required`, the fields read by key
    (`from_row`, the readers of `engine.scan` and `engine.unresolved`), never null since the
    first version; and each field's types (`types`; `items`, a list's items'), null allowed
    but for those; `timestamp`, the field that must spell a time polars reads back
    (`ISO_FORMAT`). A field this version does not know is a later version's, which the
    writer refuses (`engine.later_format`)."""

    subject: str
    required: tuple[str, ...]
    types: dict[str, frozenset[type]]
    items: dict[str, frozenset[type]]
    timestamp: str

    @classmethod
    def of(
        cls, subject: str, required: tuple[str, ...], schema: dict[str, pl.DataType],
        timestamp: str,
    ) -> _Shape:
        lists = {k: t.inner for k, t in schema.items() if isinstance(t, pl.List) and t.inner}
        return cls(
            subject, required, {k: _json_types(t) for k, t in schema.items()},
            {k: _json_types(t) | {type(None)} for k, t in lists.items()}, timestamp,
        )  # fmt: skip


_DISPATCH_FIELDS = ("request_id", "attempt", "model", "provider", "started_at")
_SHAPES = {
    # a dispatch line's fields are the attempt's, spelled the same
    DISPATCH: _Shape.of(
        "it", _DISPATCH_FIELDS, {k: ATTEMPT_SCHEMA[k] for k in _DISPATCH_FIELDS}, "started_at"
    ),
    "attempt": _Shape.of(
        "its attempt", (*_DISPATCH_FIELDS, "elapsed_ms", "outcome"), ATTEMPT_SCHEMA, "started_at"
    ),
    "response": _Shape.of(
        "its response",
        ("request_id", "model", "arm", "unit", "pass", "events", "keys", "raw_text", "values",
         "attempts", "accepted_at"),
        RESPONSE_SCHEMA,
        "accepted_at",
    ),
}  # fmt: skip
#: The parts found fit so far, each by its fields' names and their values' types in the
#: order written: a part with the same is fit without a field's check, which took about three
#: times as long (the writer's parts have a few, by their null fields). A rotted name is in
#: its part's signature, so no such part passes for fit.
_FIT: dict[str, set[tuple[tuple[str, ...], tuple[type, ...]]]] = {name: set() for name in _SHAPES}


def journal_line_fault(record: dict[str, Any]) -> str | None:
    """What makes `record`, a line of a kind the ledger writes, unfit for its readers (a key
    or a value rotted on disk, an edit), or None; any other line, None (this version reads
    no other kind). Readers took such a line as it came: a `KeyError` in `status`, polars'
    traceback building a table, an answer silently missing from `score`. Paid where the
    journal is read, never where it is written."""
    kind = record.get("kind")
    if kind == DISPATCH:
        fault = _part_fault(record, DISPATCH)
    elif kind == RESULT:
        fault = _part_fault(record.get("attempt"), "attempt")
        if fault is None and record.get("response") is not None:
            fault = _part_fault(record["response"], "response")
    else:
        return None
    return None if fault is None else f"a {kind} line, but {fault}"


def _part_fault(part: Any, name: str) -> str | None:
    """What is wrong with one part of a line for its shape (`_SHAPES[name]`), or None."""
    shape = _SHAPES[name]
    if type(part) is not dict:
        return f"{shape.subject} is {'missing' if part is None else 'not a JSON object'}"
    signature = (tuple(part), tuple(map(type, part.values())))
    if signature not in _FIT[name]:
        if (fault := _field_fault(part, shape)) is not None:
            return fault
        _FIT[name].add(signature)
    for key, allowed in shape.items.items():  # a list's items, which no signature holds
        value = part.get(key)
        if type(value) is list and not set(map(type, value)) <= allowed:
            return f"{shape.subject} has {key} {_shown(value)}, of the wrong type"
    stamp = part[shape.timestamp]  # there and text: the checks above
    if not _is_time(stamp):
        return f"{shape.subject} has {shape.timestamp} {_shown(stamp)}, which is no time"
    return None


#: How a journal's time is spelled: `iso_utc`'s form, with any fraction and an offset within
#: a day's first 20 hours, its values checked by `datetime`: a rotted digit (month 13, hour
#: 24) passed every check above and ended in polars' traceback where a table of the lines was
#: built. Every time passed is one polars reads by `ISO_FORMAT` (tests/engine/test_journal.py
#: draws thousands); polars reads a few this refuses (a 60th second, year 0, offsets of 20 to
#: 23 hours), which no writer of the journal ever spelled.
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?[+-][01]\d:[0-5]\d", re.ASCII)


def _is_time(value: str) -> bool:
    if _TIME.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _field_fault(part: dict[str, Any], shape: _Shape) -> str | None:
    """What is wrong with a part's fields (but a list's items), or None."""
    for key in shape.required:
        if part.get(key) is None:
            return f"{shape.subject} has no {key}"
    for key, allowed in shape.types.items():
        value = part.get(key)
        if value is not None and type(value) not in allowed:
            return f"{shape.subject} has {key} {_shown(value)}, of the wrong type"
    return None


#: How much of a wrong value a fault shows.
_SHOWN = 40


def _shown(value: Any) -> str:
    """`value` as JSON, cut short: what a fault names."""
    text = orjson.dumps(value).decode()
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


#: A rejected answer is an ordinary attempt: outcome `invalid_response`, `detail`
#: "subcause: short detail" (see `engine.answers.AnswerError`), `raw_text` kept for re-parse.
InvalidAnswerRecord = AttemptRecord
