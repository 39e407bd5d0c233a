"""Groq: URL, bearer key, field names, body request id, daily request counter, JSON failures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from providers import groq
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

KEY = "gsk_test_groq_key_abcdef0123456789"
ENV = {"GROQ_API_KEY": KEY}
REQ = ChatRequest("r1", "sys", "user", seed=9)
CONFIG = ModelConfig(name="GPT-OSS-120B", provider="groq", model="openai/gpt-oss-120b",
                     temperature=1.0, max_tokens=8192, reasoning_effort="medium", json_mode=True)
GROQ_HEADERS = {
    "x-ratelimit-limit-requests": "14400",
    "x-ratelimit-remaining-requests": "14370",
    "x-ratelimit-limit-tokens": "18000",
    "x-ratelimit-remaining-tokens": "17997",
    "x-ratelimit-reset-requests": "2m59.56s",
    "x-ratelimit-reset-tokens": "7.66s",
}


def test_request_shape() -> None:
    http = groq.create_adapter(CONFIG, ENV).build(REQ)
    assert http.method == "POST"
    assert http.url == "https://api.groq.com/openai/v1/chat/completions"
    assert http.headers["Authorization"] == f"Bearer {KEY}"
    body = orjson.loads(http.body)
    assert body["max_completion_tokens"] == 8192 and "max_tokens" not in body
    assert body["reasoning_effort"] == "medium"
    assert body["response_format"] == {"type": "json_object"}
    assert body["seed"] == 9 and body["temperature"] == 1.0
    assert http.omitted == ()


@pytest.mark.parametrize(
    ("model", "effort", "accepted"),
    [("qwen/qwen3-32b", "low", "'none', 'default'"),
     ("openai/gpt-oss-120b", "none", "'low', 'medium', 'high'")],
)
def test_a_reasoning_effort_the_model_refuses_is_a_config_error(
    model: str, effort: str, accepted: str
) -> None:
    """Groq answers every such request 400 (reference §1): said before anything is sent,
    naming what the model takes, as Bedrock and Vertex say of an effort they cannot map."""
    config = ModelConfig(name="q", provider="groq", model=model, reasoning_effort=effort)
    with pytest.raises(ConfigError, match=rf"'q'.*reasoning_effort '{effort}'.*{accepted}"):
        groq.create_adapter(config, ENV)


@pytest.mark.parametrize("effort", ["none", "default"])
def test_qwen3_takes_none_and_default(effort: str) -> None:
    config = ModelConfig(name="q", provider="groq", model="qwen/qwen3-32b",
                         reasoning_effort=effort)
    http = groq.create_adapter(config, ENV).build(REQ)
    assert orjson.loads(http.body)["reasoning_effort"] == effort and http.omitted == ()


def test_base_url_override_and_named_key_variable() -> None:
    config = ModelConfig(name="g", provider="groq", model="llama-3.3-70b-versatile",
                         base_url="http://127.0.0.1:9/groq/openai/v1/", api_key_env="MY_GROQ",
                         reasoning_effort="low")
    http = groq.create_adapter(config, {"MY_GROQ": "gsk_other_key_0123"}).build(REQ)
    assert http.url == "http://127.0.0.1:9/groq/openai/v1/chat/completions"
    assert http.headers["Authorization"] == "Bearer gsk_other_key_0123"
    assert http.omitted == ("reasoning_effort",)  # only gpt-oss and qwen3 take it
    assert groq.required_env(config) == ["MY_GROQ"]


def test_missing_key_names_model_and_variable() -> None:
    with pytest.raises(ConfigError) as info:
        groq.create_adapter(CONFIG, {"GROQ_API_KEY": ""})
    assert "GPT-OSS-120B" in str(info.value) and "GROQ_API_KEY" in str(info.value)
    assert groq.required_env(CONFIG) == ["GROQ_API_KEY"]


def test_success_reads_x_groq_id_and_limits(completion: Callable[..., dict[str, Any]]) -> None:
    body = completion(id="chatcmpl-abc", x_groq={"id": "req_01jx"},
                      usage={"prompt_tokens": 30, "completion_tokens": 12, "queue_time": 0.01,
                             "completion_tokens_details": {"reasoning_tokens": 8}})
    result = groq.create_adapter(CONFIG, ENV).parse(200, GROQ_HEADERS, orjson.dumps(body))
    assert isinstance(result, Completion)
    assert result.provider_request_id == "req_01jx"
    assert (result.tokens_in, result.tokens_out) == (30, 12)
    assert result.limits.reset_requests_s == pytest.approx(179.56)
    assert result.limits.reset_tokens_s == pytest.approx(7.66)
    assert result.limits.remaining_requests == 14370


def parse(status: int, body: Any, headers: dict[str, str] | None = None) -> Failure:
    result = groq.create_adapter(CONFIG, ENV).parse(status, headers or {}, orjson.dumps(body))
    assert isinstance(result, Failure)
    return result


def test_tpm_429_waits_from_header() -> None:
    body = {"error": {"message": "Rate limit reached for model `openai/gpt-oss-120b` in "
                      "organization `org_x` service tier `on_demand` on tokens per minute (TPM): "
                      "Limit 15000, Used 11972, Requested 4351. Please try again in 5.289s.",
                      "type": "tokens", "code": "rate_limit_exceeded"}}
    result = parse(429, body, {**GROQ_HEADERS, "retry-after": "6"})
    assert result.outcome is Outcome.RATE_LIMIT
    assert result.retry_after_s == 6.0  # the header wins over the prose
    assert not result.quota_exhausted
    assert result.limits.limit_tokens == 18000


def test_the_upgrade_hint_of_a_per_minute_429_is_no_spent_quota() -> None:
    """Groq's per-minute 429s end with a link to its billing page (as sent: elizaOS/eliza#4040,
    ago19800/HomeMind#29); that read as a spent quota, which skipped the lane's concurrency cut."""
    body = {"error": {"message": "Rate limit reached for model `llama-3.3-70b-versatile` in "
                      "organization `org_x` service tier `on_demand` on tokens per minute (TPM): "
                      "Limit 12000, Used 4437, Requested 9854. Please try again in 11.455s. Need "
                      "more tokens? Upgrade to Dev Tier today at "
                      "https://console.groq.com/settings/billing",
                      "type": "tokens", "code": "rate_limit_exceeded"}}
    result = parse(429, body, {**GROQ_HEADERS, "retry-after": "12"})
    assert result.outcome is Outcome.RATE_LIMIT and not result.quota_exhausted
    assert result.retry_after_s == 12.0


def test_daily_quota_spent_is_flagged() -> None:
    headers = {**GROQ_HEADERS, "x-ratelimit-remaining-requests": "0", "retry-after": "3600"}
    body = {"error": {"message": "Rate limit reached ... on requests per day (RPD): Limit 14400, "
                      "Used 14400, Requested 1.", "type": "requests",
                      "code": "rate_limit_exceeded"}}
    result = parse(429, body, headers)
    assert result.quota_exhausted and result.retry_after_s == 3600.0


@pytest.mark.parametrize("retry_after", [None, "5"])
def test_a_spent_day_waits_for_the_request_counters_reset(retry_after: str | None) -> None:
    """The daily counter at 0 is what is spent: capacity returns at its reset (2m59.56s),
    which is the quota's stated wait even when retry-after names a shorter one."""
    headers = {**GROQ_HEADERS, "x-ratelimit-remaining-requests": "0"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    body = {"error": {"message": "Rate limit reached on requests per day (RPD): Limit 14400, "
                      "Used 14400, Requested 1.", "code": "rate_limit_exceeded"}}
    result = parse(429, body, headers)
    assert result.quota_exhausted and result.retry_after_s == pytest.approx(179.56)


def test_a_spent_token_day_states_its_wait_in_the_message() -> None:
    body = {"error": {"message": "Rate limit reached for model `x` on tokens per day (TPD): "
                      "Limit 100000, Used 99658, Requested 1153. Please try again in 11m39.216s.",
                      "type": "tokens", "code": "rate_limit_exceeded"}}
    result = parse(429, body, GROQ_HEADERS)  # the token headers count a minute, not the day
    assert result.quota_exhausted and result.retry_after_s == pytest.approx(699.216)


def test_json_validate_failed_is_retryable_invalid_response() -> None:
    body = {"error": {"message": "Failed to generate JSON. Please adjust your prompt.",
                      "type": "invalid_request_error", "code": "json_validate_failed",
                      "failed_generation": "{\"probability\": 0.4,"}}
    result = parse(400, body)
    assert result.outcome is Outcome.INVALID_RESPONSE and result.retryable
    assert result.raw_text == "{\"probability\": 0.4,"


def test_an_unasked_tool_call_is_a_retryable_invalid_response() -> None:
    """gpt-oss-120b on Groq calls tools no request offered; Groq answers 400 tool_use_failed
    (as sent: BerriAI/litellm#21242). That was a bad request: never asked again, and three in
    a row stopped the lane."""
    generation = '{"name": "repo_browser.open_file", "arguments": {"path": "analysis"}}'
    body = {"error": {"message": "Tool choice is none, but model called a tool",
                      "type": "invalid_request_error", "code": "tool_use_failed",
                      "failed_generation": generation}}
    result = parse(400, body)
    assert result.outcome is Outcome.INVALID_RESPONSE and result.retryable
    assert result.raw_text == generation


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(498, Outcome.RATE_LIMIT), (503, Outcome.PROVIDER_ERROR), (413, Outcome.BAD_REQUEST),
     (422, Outcome.BAD_REQUEST), (404, Outcome.BAD_REQUEST), (401, Outcome.AUTH_ERROR)],
)
def test_groq_statuses(status: int, outcome: Outcome) -> None:
    assert parse(status, {"error": {"message": "x", "code": "c"}}).outcome is outcome
