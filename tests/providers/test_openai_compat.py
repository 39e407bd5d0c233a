"""The shared chat-completions builder and classifier, on canned bodies for every outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.openai_compat import (
    REJECTED_OPTIONS,
    ClientDialect,
    build_body,
    chat_url,
    omitted_options,
    parse_reply,
    token_field,
)
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

Build = Callable[..., dict[str, Any]]
PLAIN = ClientDialect(provider="openai", token_field="max_tokens")
GROQ = ClientDialect(provider="groq", requests_header_is_daily=True)
REQ = ChatRequest(request_id="r1", system="You forecast.", user="P(up)?", seed=11)


def cfg(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = {"name": "m", "provider": "openai", "model": "llama-3"}
    base.update(kw)
    return ModelConfig(**base)


def reply(body: Any, status: int = 200, headers: dict[str, str] | None = None,
          dialect: ClientDialect = PLAIN) -> Completion | Failure:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return parse_reply(status, headers or {}, raw, dialect)


def failure(*args: Any, **kw: Any) -> Failure:
    result = reply(*args, **kw)
    assert isinstance(result, Failure), result
    return result


# ----------------------------------------------------------------------------- bodies


def test_body_carries_every_option_under_the_dialects_names() -> None:
    config = cfg(temperature=1.0, max_tokens=8192, seed=3, reasoning_effort="low", json_mode=True)
    body, omitted = build_body(config, REQ, PLAIN)
    assert body == {
        "model": "llama-3",
        "messages": [
            {"role": "system", "content": "You forecast."},
            {"role": "user", "content": "P(up)?"},
        ],
        "temperature": 1.0,
        "max_tokens": 8192,
        "seed": 11,  # the request's seed wins over the model default
        "reasoning_effort": "low",
        "response_format": {"type": "json_object"},
    }
    assert omitted == ()
    body, _ = build_body(config, REQ, GROQ)
    assert body["max_completion_tokens"] == 8192 and "max_tokens" not in body


def test_unset_options_are_not_sent_and_empty_system_is_dropped() -> None:
    body, omitted = build_body(cfg(seed=5), ChatRequest("r", "", "Q"), PLAIN)
    assert body == {"model": "llama-3", "messages": [{"role": "user", "content": "Q"}], "seed": 5}
    assert omitted == ()


@pytest.mark.parametrize(
    ("provider", "model", "name", "dropped"),
    [
        ("azure", "gpt-5.6-luna", "luna", ("temperature",)),
        ("azure", "o3-mini", "o3", ("temperature",)),
        ("azure", "luna", "GPT-5.6 Luna", ("temperature",)),  # matched by display name
        ("azure", "gpt-4o", "gpt-4o", ()),
        ("openai", "gpt-5", "x", ("temperature",)),
        ("openai", "meta-llama/Llama-3.1-8B-Instruct", "x", ()),
        ("groq", "llama-3.3-70b-versatile", "x", ("reasoning_effort",)),
        ("groq", "openai/gpt-oss-120b", "x", ()),
        ("groq", "qwen/qwen3-32b", "x", ()),
        ("deepinfra", "openai/gpt-oss-20b", "x", ()),
    ],
)
def test_rejected_options_are_omitted_and_recorded(
    provider: str, model: str, name: str, dropped: tuple[str, ...]
) -> None:
    config = cfg(provider=provider, model=model, name=name, temperature=1.0,
                 reasoning_effort="medium", max_tokens=100)
    body, omitted = build_body(config, REQ, ClientDialect(provider=provider))
    assert omitted == dropped
    for option in dropped:
        assert option not in body
    for option in {"temperature", "reasoning_effort"} - set(dropped):
        assert option in body


def test_rules_are_data_and_omit_only_what_was_asked() -> None:
    assert all(rule.provider and rule.reason for rule in REJECTED_OPTIONS)
    # No temperature asked: nothing is recorded as omitted even for a GPT-5 deployment.
    _, omitted = build_body(
        cfg(provider="azure", model="gpt-5"), REQ, ClientDialect(provider="azure")
    )
    assert omitted == ()
    assert omitted_options("bedrock", ("gpt-5",)) == ()


def test_token_field_override_and_url() -> None:
    assert token_field(cfg(extra={"token_field": "max_completion_tokens"}), "max_tokens") == (
        "max_completion_tokens"
    )
    with pytest.raises(ConfigError, match="token_field"):
        token_field(cfg(extra={"token_field": "n_predict"}), "max_tokens")
    assert chat_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert chat_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


@given(
    system=st.text(), user=st.text(min_size=1), seed=st.none() | st.integers(-(2**63), 2**63 - 1)
)
def test_body_bytes_round_trip_any_text(system: str, user: str, seed: int | None) -> None:
    body, _ = build_body(cfg(), ChatRequest("r", system, user, seed), PLAIN)
    decoded = orjson.loads(orjson.dumps(body))
    assert decoded["messages"][-1]["content"] == user
    assert decoded.get("seed") == seed
    if system:
        assert decoded["messages"][0] == {"role": "system", "content": system}
    else:
        assert len(decoded["messages"]) == 1


# ----------------------------------------------------------------------------- success


def test_ok_reply(completion: Build) -> None:
    result = reply(completion(usage={"prompt_tokens": 10, "completion_tokens": 4,
                                          "estimated_cost": 2.5e-05}),
                   headers={"x-ratelimit-remaining-tokens": "900"})
    assert isinstance(result, Completion)
    assert result.text == '{"probability": 0.4}'
    assert (result.tokens_in, result.tokens_out) == (10, 4)
    assert result.provider_request_id == "chatcmpl-123"
    assert result.model_reported == "test-model"
    assert result.finish_reason == "stop"
    assert result.cost_usd == pytest.approx(2.5e-05)
    assert result.limits.remaining_tokens == 900


def test_groq_body_request_id_and_content_parts(completion: Build) -> None:
    body = completion(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                           x_groq={"id": "req_01abc"})
    result = reply(body, dialect=GROQ)
    assert isinstance(result, Completion)
    assert result.provider_request_id == "req_01abc"
    assert result.text == "ab"


def test_header_request_id_when_body_has_only_routing_id(completion: Build) -> None:
    dialect = ClientDialect(
        provider="azure", request_id_headers=("apim-request-id", "x-request-id")
    )
    result = reply(completion(id="chatcmpl-9"), headers={"APIM-Request-Id": "apim-1"},
                   dialect=dialect)
    assert isinstance(result, Completion) and result.provider_request_id == "chatcmpl-9"
    fail = failure({"error": {"message": "boom"}}, 500, {"apim-request-id": "apim-2"},
                   dialect=dialect)
    assert fail.provider_request_id == "apim-2"


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (429, {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
         Outcome.RATE_LIMIT),
        (498, {"error": {"message": "capacity", "code": "capacity_exceeded"}}, Outcome.RATE_LIMIT),
        (429, {"error": {"message": "Model busy, retry later"}}, Outcome.RATE_LIMIT),
        (401, {"detail": {"error": "Unauthorized"}}, Outcome.AUTH_ERROR),
        (500, {"error": {"message": "internal"}}, Outcome.PROVIDER_ERROR),
        (502, b"<html>Bad Gateway</html>", Outcome.PROVIDER_ERROR),
        (503, b"", Outcome.PROVIDER_ERROR),
        (424, {"error": {"message": "failed dependency"}}, Outcome.PROVIDER_ERROR),
        (408, {"error": {"message": "timeout"}}, Outcome.TIMEOUT),
        (401, {"error": {"message": "Invalid API Key", "code": "invalid_api_key"}},
         Outcome.AUTH_ERROR),
        (403, {"error": {"message": "forbidden"}}, Outcome.AUTH_ERROR),
        (400, {"error": {"message": "Unsupported value: 'temperature'", "code": "unsupported_value",
                         "param": "temperature", "type": "invalid_request_error"}},
         Outcome.BAD_REQUEST),
        (404, {"error": {"message": "model not found"}}, Outcome.BAD_REQUEST),
        (413, {"error": {"message": "Request too large on tokens per minute"}},
         Outcome.BAD_REQUEST),
        (422, {"detail": "unprocessable"}, Outcome.BAD_REQUEST),
        (400, {"error": {"message": "Failed to generate JSON", "code": "json_validate_failed",
                         "failed_generation": "{\"probability\": 0.4"}},
         Outcome.INVALID_RESPONSE),
        (400, {"error": {"message": "The response was filtered", "code": "content_filter",
                         "param": "prompt", "status": 400}}, Outcome.REFUSAL),
    ],
)
def test_error_statuses(status: int, body: Any, outcome: Outcome) -> None:
    result = failure(body, status)
    assert result.outcome is outcome
    assert result.http_status == status
    assert result.detail.startswith(f"HTTP {status}")


def test_a_detail_carries_no_terminal_control_characters() -> None:
    """A tester's 400 carried ESC [31m and ESC [2K: the detail reached the console, `status`,
    `audit` and report.md raw, recolouring and erasing lines."""
    message = "bad \x1b[31mrequest\x1b[0m\x1b[2K \x07bell\x9b2J end"
    result = failure({"error": {"message": message}}, 400, dialect=GROQ)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in result.detail)
    assert "bad [31mrequest[0m[2K bell2J end" in result.detail


def test_json_validate_failed_keeps_the_generation() -> None:
    result = failure({"error": {"message": "Failed", "code": "json_validate_failed",
                                "failed_generation": "{oops"}}, 400)
    assert result.raw_text == "{oops" and result.retryable


def test_rate_limit_wait_from_headers_then_message() -> None:
    assert failure({"error": {"message": "x"}}, 429, {"retry-after": "2"}).retry_after_s == 2.0
    assert failure({"error": {"message": "x"}}, 429,
                   {"retry-after-ms": "1500", "retry-after": "2"}).retry_after_s == 1.5
    groq = {"error": {"message": "Rate limit reached for model `x` on tokens per minute (TPM): "
                      "Limit 15000, Used 11972, Requested 4351. Please try again in 5.289s.",
                      "type": "tokens", "code": "rate_limit_exceeded"}}
    result = failure(groq, 429)
    assert result.retry_after_s == pytest.approx(5.289)
    assert not result.quota_exhausted
    bare = failure({"error": {"message": "Rate limited"}}, 429)
    assert bare.retry_after_s is None and bare.outcome is Outcome.RATE_LIMIT


@pytest.mark.parametrize(
    ("message", "headers", "dialect", "exhausted"),
    [
        ("Rate limit reached on requests per day (RPD): Limit 1000, Used 1000", {}, GROQ, True),
        ("You exceeded your current quota, please check your plan and billing details.", {},
         PLAIN, True),
        # an account without billing (BerriAI/litellm#2743): no wait within the minute helps
        ("Your account is not active, please check your billing details on our website.", {},
         PLAIN, True),
        ("Rate limit reached on tokens per minute (TPM)", {"x-ratelimit-remaining-requests": "0"},
         GROQ, True),  # Groq's request counter is per day
        ("Rate limit reached on tokens per minute (TPM)", {"x-ratelimit-remaining-requests": "0"},
         PLAIN, False),  # elsewhere a request counter at 0 is a burst
        ("Requests ... have exceeded token rate limit of your current OpenAI S0 pricing tier. "
         "Please retry after 6 seconds.", {"x-ratelimit-remaining-requests": "3"}, GROQ, False),
    ],
)
def test_quota_exhausted(message: str, headers: dict[str, str], dialect: ClientDialect,
                         exhausted: bool) -> None:
    result = failure({"error": {"message": message}}, 429, headers, dialect=dialect)
    assert result.outcome is Outcome.RATE_LIMIT
    assert result.quota_exhausted is exhausted


def test_error_in_a_200_body() -> None:
    limited = failure({"error": {"message": "Rate limit exceeded, try again in 3s"}})
    assert limited.outcome is Outcome.RATE_LIMIT and limited.retry_after_s == 3.0
    assert limited.http_status == 200
    broken = failure({"error": {"message": "upstream model crashed"}})
    assert broken.outcome is Outcome.PROVIDER_ERROR
    assert failure({"error": "Too many requests"}).outcome is Outcome.RATE_LIMIT
    assert not limited.quota_exhausted


def test_an_error_in_a_200_body_asking_for_a_day_is_a_spent_quota() -> None:
    """As a 429 asking for a day is (test_azure): a gateway's 200 with the same words."""
    day = failure({"error": {"message": "Rate limit exceeded. Please retry after 86400 seconds."}})
    assert day.outcome is Outcome.RATE_LIMIT and day.quota_exhausted
    assert day.retry_after_s == 86400.0
    assert day.detail.startswith("asks to wait 86,400 s, taken as a spent quota: error in 200")


def test_truncated_keeps_partial_text_and_tokens(completion: Build) -> None:
    result = failure(completion(content='{"probab', finish_reason="length",
                                     usage={"prompt_tokens": 9, "completion_tokens": 8192}))
    assert result.outcome is Outcome.TRUNCATED
    assert result.raw_text == '{"probab' and result.tokens_out == 8192
    assert result.provider_request_id == "chatcmpl-123"


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"prompt_tokens": 1e30, "completion_tokens": 5}, (None, 5)),
        ({"prompt_tokens": float(2**64), "completion_tokens": "7"}, (None, 7)),  # orjson's read
        ({"prompt_tokens": -5, "completion_tokens": -7.0}, (None, None)),
        ({"prompt_tokens": "²", "completion_tokens": " 3 "}, (None, 3)),
        ({"prompt_tokens": 10**12, "completion_tokens": 0}, (10**12, 0)),  # COUNT_LIMIT
        ({"prompt_tokens": 10**12 + 1, "completion_tokens": "9" * 5000}, (None, None)),
    ],
)
def test_a_token_count_that_is_not_a_count_is_unknown(
    completion: Build, usage: dict[str, Any], tokens: tuple[int | None, int | None]
) -> None:
    """A usage of 1e30 (or any integer past 2**64, which orjson reads as a float) crashed the
    lane when its journal line was written; a negative one lowered the run's token counts;
    "²" passes `str.isdigit` and then `int` raised, as it does for 5,000 digits. Each is
    unknown instead."""
    result = reply(completion(usage=usage))
    assert isinstance(result, Completion) and (result.tokens_in, result.tokens_out) == tokens
    orjson.dumps({"tokens_in": result.tokens_in})  # what the journal line does with it


@pytest.mark.parametrize(("cost", "kept"), [(0.25, 0.25), (0, 0.0), (-100.0, None), (1e400, None)])
def test_a_cost_below_zero_or_not_finite_is_unknown(
    completion: Build, cost: float, kept: float | None
) -> None:
    result = reply(completion(usage={"prompt_tokens": 1, "completion_tokens": 1,
                                     "estimated_cost": cost}))  # fmt: skip
    assert isinstance(result, Completion) and result.cost_usd == kept


def test_a_detail_carries_no_text_reordering_or_hidden_characters() -> None:
    """A tester's 400 with U+202E (right-to-left override) printed the rest of its `lane
    stopped` line reversed; zero-width characters hide what is there."""
    message = "all good \u202e\u200b[OK] tsol yek \u2066x\u2069 \ufeffend\u061c"
    result = failure({"error": {"message": message}}, 400, dialect=GROQ)
    assert "all good [OK] tsol yek x end" in result.detail


@pytest.mark.parametrize(
    "kw",
    [
        {"content": None, "finish_reason": "content_filter"},
        {"content": "", "refusal": "I can't help with that."},
        {"content": "partial", "finish_reason": "content_filter"},
    ],
)
def test_refusals(kw: dict[str, Any], completion: Build) -> None:
    assert failure(completion(**kw)).outcome is Outcome.REFUSAL


@pytest.mark.parametrize(
    "body",
    [
        {"id": "x", "model": "m", "choices": [{"message": {"content": None}}]},
        {"id": "x", "model": "m", "choices": [{"message": {"content": "  \n"}}]},
        {"id": "x", "model": "m", "choices": []},
        {"id": "x", "model": "m", "choices": [{"finish_reason": "stop"}]},
        {"id": "x", "model": "m"},
        b'{"id": "chatcmpl-1", "choices": [{"message": {"content": "{\\"p',  # cut mid-body
        b"<html>oops</html>",
        b"",
        b"[1, 2]",
    ],
)
def test_invalid_responses(body: Any) -> None:
    result = failure(body)
    assert result.outcome is Outcome.INVALID_RESPONSE
    assert result.retryable


@pytest.mark.parametrize("drop", ["id", "model"])
def test_missing_routing_metadata(drop: str, completion: Build) -> None:
    body = completion(**{drop: None})
    result = failure(body)
    assert result.outcome is Outcome.MISSING_ROUTING_METADATA
    assert drop in result.detail
    assert result.raw_text == '{"probability": 0.4}'  # the answer is kept for the audit
    # Groq's body request id stands in for `id`.
    groq = completion(id=None, x_groq={"id": "req_1"})
    assert isinstance(reply(groq, dialect=GROQ), Completion)
    # A dialect may expect less (a local server that sends no model).
    lax = ClientDialect(provider="openai", required_fields=("id",))
    assert isinstance(reply(completion(model=None), dialect=lax), Completion)


def test_long_error_text_is_trimmed() -> None:
    result = failure({"error": {"message": "x" * 10_000}}, 500)
    assert len(result.detail) <= 300


@given(status=st.integers(100, 599), body=st.binary(max_size=200))
def test_any_reply_classifies_without_raising(status: int, body: bytes) -> None:
    result = parse_reply(status, {"retry-after": "nonsense"}, body, GROQ)
    assert isinstance(result, Completion | Failure)
    if status != 200 and not 200 <= status < 300:
        assert isinstance(result, Failure) and result.http_status == status


@given(
    data=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda children: st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["id", "model", "choices", "message", "content",
                                           "finish_reason", "usage", "error", "x_groq",
                                           "prompt_tokens", "refusal"]), children, max_size=5),
        max_leaves=20,
    )
)
def test_hostile_json_envelopes_never_raise(data: Any) -> None:
    raw = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS) if data == data else b"null"
    result = parse_reply(200, {}, raw, GROQ)
    if isinstance(result, Completion):
        assert result.text.strip()


# ----------------------------------------------------------------------------- per-request costs


@given(st.text(), st.text(), st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)))
def test_encoded_body_is_what_json_dumps_makes(system: str, user: str, seed: int | None) -> None:
    """One shared encoder writes exactly the bytes `json.dumps` with the same options did."""
    import json

    from providers.openai_compat import encode

    body, _ = build_body(cfg(temperature=0.7), ChatRequest("r", system, user, seed), PLAIN)
    expected = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert encode(body) == expected.encode()


def test_built_requests_share_read_only_headers() -> None:
    """Headers are made once per adapter: equal to `headers()`, and no caller can change
    the next request's by editing one request's."""
    from providers.openai import create_adapter

    adapter = create_adapter(cfg(base_url="http://127.0.0.1:9/v1", api_key_env="K"), {"K": "sk-1"})
    first, second = adapter.build(REQ), adapter.build(REQ)
    assert first.headers == adapter.headers()
    assert first.headers["Authorization"] == "Bearer sk-1"
    assert second.headers is first.headers
    with pytest.raises(TypeError):
        first.headers["Authorization"] = "changed"  # type: ignore[index]


def test_omitted_options_answer_is_cached_and_unchanged() -> None:
    names = ("gpt-5-mini", "luna")
    assert omitted_options("openai", names) == ("temperature",)
    hits = omitted_options.cache_info().hits
    assert omitted_options("openai", names) == ("temperature",)
    assert omitted_options.cache_info().hits == hits + 1


_HEADER_VALUES = st.sampled_from(["", " ", "7", "1.5", "-1", "2m59.56s", "120ms", "soon", "req-7"])
_HEADER_NAMES = st.sampled_from([
    "X-Request-Id", "x-request-id", "APIM-Request-Id", "Retry-After", "retry-after-ms",
    "x-ratelimit-remaining-requests", "X-RateLimit-Reset-Tokens", "x-ratelimit-limit-tokens",
    "Content-Type", "Date",
])
#: Replies: keyword arguments of the `completion` builder, or a body as it is.
_REPLY_BODIES = st.sampled_from([
    {},
    {"id": ""},
    {"id": None, "x_groq": {"id": "req_01"}},
    {"model": None},
    {"finish_reason": "length"},
    {"content": ""},
    {"error": {"message": "Rate limit reached, try again in 1.5s", "code": "rate_limit"}},
    {"error": "boom"},
    {"detail": [{"loc": ["body", "x"], "msg": "bad"}]},
    [],
    "not json",
])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # a pure builder
@given(
    st.sampled_from([200, 201, 400, 401, 404, 408, 429, 498, 500, 503]),
    st.dictionaries(_HEADER_NAMES, _HEADER_VALUES, max_size=6),
    _REPLY_BODIES,
)
def test_every_reply_carries_what_its_headers_say(
    completion: Build, status: int, headers: dict[str, str], body: Any
) -> None:
    """Header readings are made lazily (a plain success reads only the limits): whatever the
    reply, its limits, request id and wait are what the headers say, read case-insensitively."""
    from providers.base import Headers
    from providers.headers import rate_limit_info, retry_after_seconds

    dialect = ClientDialect(provider="azure",
                            request_id_headers=("apim-request-id", "x-request-id"))
    if isinstance(body, dict) and "error" not in body and "detail" not in body:
        body = completion(**body)
    raw = body.encode() if isinstance(body, str) else orjson.dumps(body)
    result = parse_reply(status, headers, raw, dialect)
    view = Headers(headers)
    assert result.limits == rate_limit_info(view)
    header_id = view.get_first("apim-request-id", "x-request-id")
    data = body if isinstance(body, dict) else {}
    body_id = (data.get("x_groq") or {}).get("id") or data.get("id") or None
    if isinstance(result, Completion):
        assert result.provider_request_id == (body_id or header_id)
        return
    assert result.provider_request_id in {body_id or header_id, header_id}
    hinted = retry_after_seconds(view)
    if hinted is not None:
        assert result.retry_after_s == hinted
