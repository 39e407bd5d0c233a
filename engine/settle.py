"""Settling one finished attempt: from what came back to what the ledger records.

`settle` is pure: given the plan item, the adapter's result and what was sent, it returns the
attempt record, the accepted response (if the reply parsed) and the failure (if any). The
lane then journals them and does the accounting (`engine.lanes.Lane._settle`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from engine.answers import AnswerError, parse_answer
from engine.plan import PlanItem
from engine.records import FOREIGN_NOTE, AttemptRecord, ResponseRecord
from providers.types import Completion, Failure, Outcome

#: Finish reasons that mean "the output cap cut the answer off" across providers.
CUT_OFF = frozenset({"length", "max_tokens", "MAX_TOKENS"})
#: Read once: an enum member's `.value` is a property lookup, and nearly every attempt is ok.
_OK = Outcome.OK.value


@dataclass(slots=True)  # not frozen, like the records (`engine.records`): one per attempt
class Sent:
    """What one attempt was: whose, which try, when, how long, and the options left out."""

    model: str
    provider: str
    attempt: int
    started: datetime
    elapsed_ms: float
    omitted: tuple[str, ...] = ()
    #: What else was done to the request (a folded system prompt, a retry's new seed or cap).
    notes: tuple[str, ...] = ()


def with_omitted(detail: str, omitted: tuple[str, ...], notes: tuple[str, ...] = ()) -> str:
    """An attempt's detail naming the options left out of its request (`omitted: a, b`) and
    what else was done to it (`[system folded into user turn; retry with seed 8]`)."""
    if not omitted and not notes:  # nearly every attempt
        return detail
    parts = [detail] if detail else []
    if omitted:
        note = "omitted: " + ", ".join(omitted)
        parts.append(f"[{note}]" if detail else note)
    if notes:
        parts.append("[" + "; ".join(notes) + "]")
    return " ".join(parts)


def settle(
    item: PlanItem,
    result: Completion | Failure,
    sent: Sent,
    parser: str = "strict",
    now: datetime | None = None,
) -> tuple[AttemptRecord, ResponseRecord | None, Failure | None]:
    """The attempt record, the accepted response or None, and the failure or None.

    A completion whose text does not parse under `parser` becomes a failure (`truncated` when
    the output cap cut it off, else `invalid_response`) that keeps the reply for re-parse.
    Options the adapter left out (`sent.omitted`) and what else was done to the request
    (`sent.notes`) are named in the attempt's `detail`, so the ledger says what each answer
    was asked with. `finish_reason` is recorded as the server sent it, failures included.
    `now` stamps an acceptance (default: now).
    """
    response: ResponseRecord | None = None
    raw_text: str | None
    if isinstance(result, Completion):
        response, failure = _read_answer(item, result, sent.attempt, parser, now)
        raw_text, finish_reason = result.text, result.finish_reason
        model_reported = result.model_reported
    else:
        failure, raw_text, finish_reason = result, result.raw_text, result.finish_reason
        model_reported = None
    reply = failure or result
    detail = with_omitted(failure.detail if failure else "", sent.omitted, sent.notes)
    if failure is not None and failure.foreign:
        detail = f"{detail} {FOREIGN_NOTE}" if detail else FOREIGN_NOTE
    attempt = AttemptRecord(
        request_id=item.request_id,
        attempt=sent.attempt,
        model=sent.model,
        provider=sent.provider,
        started_at=sent.started,
        elapsed_ms=sent.elapsed_ms,
        outcome=failure.outcome.value if failure else _OK,
        http_status=failure.http_status if failure else 200,
        provider_request_id=reply.provider_request_id,
        retry_after_s=failure.retry_after_s if failure else None,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
        detail=detail,
        raw_text=raw_text,
        finish_reason=finish_reason,
        model_reported=model_reported,
    )
    return attempt, response, failure


def _read_answer(
    item: PlanItem, result: Completion, attempt: int, parser: str, now: datetime | None
) -> tuple[ResponseRecord | None, Failure | None]:
    """The response a completion's answer makes, or the failure its text is."""
    try:
        parsed = parse_answer(result.text, item.keys, parser)
    except AnswerError as exc:
        cut = result.finish_reason in CUT_OFF
        return None, Failure(
            Outcome.TRUNCATED if cut else Outcome.INVALID_RESPONSE,
            f"{exc.subcause}: {exc.detail}",
            http_status=200,
            provider_request_id=result.provider_request_id,
            limits=result.limits,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            raw_text=result.text,
            finish_reason=result.finish_reason,
        )
    return ResponseRecord(
        request_id=item.request_id,
        model=item.model,
        arm=item.arm,
        unit=item.unit,
        pass_=item.pass_,
        events=item.events,
        keys=item.keys,
        raw_text=result.text,
        values=[parsed[k] for k in item.keys],
        finish_reason=result.finish_reason,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        attempts=attempt,
        accepted_at=now or datetime.now(UTC),
    ), None
