"""Azure: both URL styles, api-key vs Entra bearer, per-model endpoint, GPT-5 temperature rule,
content filters and Azure's 429 wording."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from providers import azure
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

KEY = "azurekey0123456789abcdef"
REQ = ChatRequest("r1", "sys", "user", seed=5)


def cfg(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = {"name": "GPT-5.6 Luna", "provider": "azure", "model": "gpt-5.6-luna",
                            "temperature": 1.0, "max_tokens": 8192}
    base.update(kw)
    return ModelConfig(**base)


@pytest.mark.parametrize(
    ("base_url", "api_version", "url"),
    [
        ("https://res.openai.azure.com", "2024-10-21",
         "https://res.openai.azure.com/openai/deployments/gpt-5.6-luna/chat/completions"
         "?api-version=2024-10-21"),
        ("https://res.openai.azure.com/", None,
         "https://res.openai.azure.com/openai/v1/chat/completions"),
        ("https://res.openai.azure.com/openai/v1/", None,
         "https://res.openai.azure.com/openai/v1/chat/completions"),
        ("https://res.services.ai.azure.com/openai", "2025-04-01-preview",
         "https://res.services.ai.azure.com/openai/deployments/gpt-5.6-luna/chat/completions"
         "?api-version=2025-04-01-preview"),
    ],
)
def test_urls(base_url: str, api_version: str | None, url: str) -> None:
    config = cfg(base_url=base_url, api_version=api_version)
    http = azure.create_adapter(config, {"AZURE_OPENAI_API_KEY": KEY}).build(REQ)
    assert http.url == url
    body = orjson.loads(http.body)
    assert body["model"] == "gpt-5.6-luna"  # the v1 path routes on the deployment name
    assert body["max_completion_tokens"] == 8192 and "max_tokens" not in body
    assert "temperature" not in body and http.omitted == ("temperature",)


def test_endpoint_from_environment_and_api_key_header() -> None:
    env = {"AZURE_OPENAI_API_KEY": KEY, "AZURE_OPENAI_ENDPOINT": "https://env.openai.azure.com"}
    http = azure.create_adapter(cfg(model="gpt-4o", name="4o"), env).build(REQ)
    assert http.url.startswith("https://env.openai.azure.com/openai/v1/")
    assert http.headers["api-key"] == KEY and "Authorization" not in http.headers
    assert orjson.loads(http.body)["temperature"] == 1.0 and http.omitted == ()


def test_entra_token_is_a_bearer() -> None:
    env = {"AZURE_OPENAI_AD_TOKEN": "eyJ0eXAi.fake.token", "AZURE_OPENAI_ENDPOINT": "https://e"}
    http = azure.create_adapter(cfg(), env).build(REQ)
    assert http.headers["Authorization"] == "Bearer eyJ0eXAi.fake.token"
    assert "api-key" not in http.headers
    assert azure.required_env(cfg(), env) == ["AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT"]


def test_missing_everything_is_one_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        azure.create_adapter(cfg(), {})
    message = str(info.value)
    assert "GPT-5.6 Luna" in message
    assert "AZURE_OPENAI_API_KEY" in message and "AZURE_OPENAI_AD_TOKEN" in message
    assert "AZURE_OPENAI_ENDPOINT" in message
    assert azure.required_env(cfg(base_url="https://x"), {}) == ["AZURE_OPENAI_API_KEY"]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        # A 404's hint showed the URL: the password reached the console, ledger and report.
        ("https://apiuser:SECRETPW123@res.openai.azure.com", "without a user or password"),
        # The portal's "Target URI": the deployment path went after its query.
        ("https://res.openai.azure.com/openai/deployments/d/chat/completions"
         "?api-version=2024-10-21", "without a ?query"),
        ("not a url", "an http:// or https:// URL"),
    ],
)
def test_an_endpoint_from_the_environment_is_checked_as_a_base_url(value: str, said: str) -> None:
    env = {"AZURE_OPENAI_API_KEY": KEY, "AZURE_OPENAI_ENDPOINT": value}
    with pytest.raises(ConfigError) as info:
        azure.create_adapter(cfg(api_version="2024-10-21"), env)
    message = str(info.value)
    assert "AZURE_OPENAI_ENDPOINT" in message and said in message
    assert "SECRETPW123" not in message and "apiuser" not in message


def adapter() -> Any:
    return azure.create_adapter(cfg(base_url="https://res.openai.azure.com"),
                                {"AZURE_OPENAI_API_KEY": KEY})


def test_success_with_filter_annotations(completion: Callable[..., dict[str, Any]]) -> None:
    body = completion(prompt_filter_results=[{"prompt_index": 0, "content_filter_results": {}}])
    body["choices"][0]["content_filter_results"] = {"hate": {"filtered": False}}
    result = adapter().parse(200, {"apim-request-id": "apim-7", "x-ms-region": "East US"},
                             orjson.dumps(body))
    assert isinstance(result, Completion) and result.provider_request_id == "chatcmpl-123"


def test_output_filtered_is_refusal(completion: Callable[..., dict[str, Any]]) -> None:
    body = completion(content=None, finish_reason="content_filter")
    result = adapter().parse(200, {"apim-request-id": "apim-8"}, orjson.dumps(body))
    assert isinstance(result, Failure) and result.outcome is Outcome.REFUSAL


def test_prompt_filtered_400_is_refusal() -> None:
    body = {"error": {"message": "The response was filtered due to the prompt triggering Azure "
                      "OpenAI's content management policy.", "type": None, "param": "prompt",
                      "code": "content_filter", "status": 400,
                      "innererror": {"code": "ResponsibleAIPolicyViolation"}}}
    result = adapter().parse(400, {"apim-request-id": "apim-9"}, orjson.dumps(body))
    assert isinstance(result, Failure) and result.outcome is Outcome.REFUSAL
    assert result.provider_request_id == "apim-9"


def test_azure_429_retry_after_ms() -> None:
    body = {"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation "
                      "under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of "
                      "your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}
    headers = {"retry-after": "6", "retry-after-ms": "5500", "x-ratelimit-remaining-tokens": "0"}
    result = adapter().parse(429, headers, orjson.dumps(body))
    assert isinstance(result, Failure) and result.outcome is Outcome.RATE_LIMIT
    assert result.retry_after_s == 5.5 and not result.quota_exhausted
    no_header = adapter().parse(429, {}, orjson.dumps(body))
    assert isinstance(no_header, Failure) and no_header.retry_after_s == 6.0


def s0_429(seconds: int) -> bytes:
    return orjson.dumps({"error": {"code": "429", "message": (
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
        "2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. "
        f"Please retry after {seconds} seconds.")}})


@pytest.mark.parametrize(
    ("said", "headers", "wait"),
    [(86400, {}, "86,400"), (86400, {"retry-after": "86400"}, "86,400"),
     (6, {"retry-after": "86400"}, "86,400"), (3601, {}, "3,601")],
)
def test_a_429_asking_for_more_than_an_hour_is_a_spent_quota(
    said: int, headers: dict[str, str], wait: str
) -> None:
    """Retried as a rate limit, its wait clipped to ten minutes, a day's wait is asked again
    all day and each request given up; as a spent quota the lane pauses and says why: the
    detail begins with the wait that made it one (the words may say another, or none)."""
    result = adapter().parse(429, headers, s0_429(said))
    assert isinstance(result, Failure) and result.outcome is Outcome.RATE_LIMIT
    assert result.quota_exhausted
    assert result.retry_after_s == float(headers.get("retry-after", said))
    assert result.detail.startswith(f"asks to wait {wait} s, taken as a spent quota: HTTP 429")
    assert f"Please retry after {said} seconds." in result.detail


@pytest.mark.parametrize(
    ("said", "headers"),
    [(3599, {}), (3600, {}), (6, {"retry-after": "60"}), (6, {"retry-after": "1e308"}),
     (6, {"retry-after-ms": "2678400001"})],
)
def test_a_429_asking_for_an_hour_or_less_or_an_implausible_wait_is_a_rate_limit(
    said: int, headers: dict[str, str]
) -> None:
    result = adapter().parse(429, headers, s0_429(said))
    assert isinstance(result, Failure) and result.outcome is Outcome.RATE_LIMIT
    assert not result.quota_exhausted


def test_unsupported_parameter_is_bad_request() -> None:
    body = {"error": {"message": "Unsupported value: 'temperature' does not support 0.7 with this "
                      "model. Only the default (1) value is supported.",
                      "type": "invalid_request_error", "param": "temperature",
                      "code": "unsupported_value"}}
    result = adapter().parse(400, {}, orjson.dumps(body))
    assert isinstance(result, Failure) and result.outcome is Outcome.BAD_REQUEST
    assert not result.retryable and "unsupported_value" in result.detail
