"""Settling an attempt is a pure function: no lane, no ledger, no network."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.plan import PlanItem
from engine.settle import Sent, settle, with_omitted
from providers.types import Completion, Failure, Outcome

T0 = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 21, 0, 5, tzinfo=UTC)
ITEM = PlanItem(
    request_id="r1", model="m", arm="grouped", unit="2025-09-12:AAPL", events=["e1", "e2"],
    keys=["Q01", "Q02"], pass_=1, seed=7, system="s", user="u", prior_attempts=2,
)
SENT = Sent("m", "groq", 3, T0, 12.5, omitted=("temperature",))


def completion(text: str, finish: str | None = "stop") -> Completion:
    return Completion(text, finish, 40, 9, "req-1", "model-x")


def test_an_answer_that_parses_is_accepted() -> None:
    reply = completion('{"Q02": 0.5, "Q01": 0.25}')
    attempt, response, failure = settle(ITEM, reply, SENT, now=NOW)
    assert failure is None and response is not None
    assert response.values == [0.25, 0.5] and response.keys == ["Q01", "Q02"]
    assert (response.attempts, response.accepted_at, response.pass_) == (3, NOW, 1)
    assert (attempt.outcome, attempt.http_status, attempt.attempt) == ("ok", 200, 3)
    assert (attempt.model, attempt.provider, attempt.started_at) == ("m", "groq", T0)
    assert attempt.raw_text == '{"Q02": 0.5, "Q01": 0.25}' and attempt.finish_reason == "stop"
    assert attempt.detail == "omitted: temperature"
    assert (attempt.tokens_in, attempt.tokens_out, attempt.provider_request_id) == (40, 9, "req-1")


@pytest.mark.parametrize(
    ("finish", "outcome"),
    [("stop", Outcome.INVALID_RESPONSE), ("length", Outcome.TRUNCATED),
     ("MAX_TOKENS", Outcome.TRUNCATED), (None, Outcome.INVALID_RESPONSE)],
)
def test_an_answer_that_does_not_parse_is_a_failure_kept_for_reparse(
    finish: str | None, outcome: Outcome
) -> None:
    attempt, response, failure = settle(ITEM, completion('{"Q01": 0.2', finish), SENT)
    assert response is None and failure is not None
    assert failure.outcome is outcome and failure.detail.startswith("not_json")
    assert attempt.outcome == outcome.value and attempt.http_status == 200
    assert attempt.raw_text == '{"Q01": 0.2' and attempt.finish_reason == finish
    assert attempt.detail == f"{failure.detail} [omitted: temperature]"
    assert attempt.retry_after_s is None and attempt.tokens_out == 9


def test_a_failure_becomes_its_attempt() -> None:
    failed = Failure(
        Outcome.RATE_LIMIT, "HTTP 429: slow down", http_status=429, retry_after_s=2.0,
        provider_request_id="req-9", tokens_in=None, raw_text="slow down",
    )
    attempt, response, failure = settle(ITEM, failed, Sent("m", "groq", 1, T0, 3.0))
    assert failure is failed and response is None
    assert (attempt.outcome, attempt.http_status, attempt.retry_after_s) == ("rate_limit", 429, 2.0)
    assert (attempt.detail, attempt.raw_text, attempt.finish_reason) == (
        "HTTP 429: slow down", "slow down", None)
    assert attempt.provider_request_id == "req-9" and attempt.elapsed_ms == 3.0


def test_the_strict_parser_refuses_what_the_lenient_one_reads() -> None:
    text = 'Sure! {"Q01": 0.25, "Q02": 0.5}'
    assert settle(ITEM, completion(text), SENT, "strict")[2] is not None
    assert settle(ITEM, completion(text), SENT, "lenient")[2] is None


@given(st.one_of(
    st.text(max_size=40).map(completion),
    st.sampled_from([o for o in Outcome if o is not Outcome.OK]).map(lambda o: Failure(o, "x")),
))
def test_accepted_exactly_when_there_is_no_failure(result: Completion | Failure) -> None:
    attempt, response, failure = settle(ITEM, result, SENT)
    assert (response is None) == (failure is not None)
    assert (attempt.outcome == "ok") == (failure is None)


def test_with_omitted() -> None:
    assert with_omitted("", ()) == ""
    assert with_omitted("bad", ("seed", "temperature")) == "bad [omitted: seed, temperature]"
