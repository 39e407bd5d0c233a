"""DeepInfra: `/v1/openai` path, either token variable, `max_tokens`, estimated cost, 429s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from providers import deepinfra
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

REQ = ChatRequest("r1", "sys", "user", seed=2)
CONFIG = ModelConfig(name="Qwen3", provider="deepinfra", model="Qwen/Qwen3-235B-A22B",
                     temperature=1.0, max_tokens=8192)


@pytest.mark.parametrize(
    ("env", "used"),
    [
        ({"DEEPINFRA_API_KEY": "di-key-0123456789"}, "di-key-0123456789"),
        ({"DEEPINFRA_TOKEN": "di-token-0123456789"}, "di-token-0123456789"),
        ({"DEEPINFRA_API_KEY": "di-key-0123456789", "DEEPINFRA_TOKEN": "di-token-0123"},
         "di-key-0123456789"),
    ],
)
def test_either_variable_is_accepted(env: dict[str, str], used: str) -> None:
    http = deepinfra.create_adapter(CONFIG, env).build(REQ)
    assert http.url == "https://api.deepinfra.com/v1/openai/chat/completions"
    assert http.headers["Authorization"] == f"Bearer {used}"
    body = orjson.loads(http.body)
    assert body["max_tokens"] == 8192 and "max_completion_tokens" not in body
    assert body["model"] == "Qwen/Qwen3-235B-A22B"


def test_required_env_follows_what_is_set() -> None:
    assert deepinfra.required_env(CONFIG, {}) == ["DEEPINFRA_API_KEY"]
    assert deepinfra.required_env(CONFIG, {"DEEPINFRA_TOKEN": "x"}) == ["DEEPINFRA_TOKEN"]
    with pytest.raises(ConfigError, match=r"'Qwen3'.*DEEPINFRA_API_KEY or DEEPINFRA_TOKEN"):
        deepinfra.create_adapter(CONFIG, {})


def test_estimated_cost_becomes_cost(completion: Callable[..., dict[str, Any]]) -> None:
    body = completion(usage={"prompt_tokens": 15, "completion_tokens": 16, "total_tokens": 31,
                             "estimated_cost": 0.0000268})
    adapter = deepinfra.create_adapter(CONFIG, {"DEEPINFRA_TOKEN": "t0123456"})
    result = adapter.parse(200, {}, orjson.dumps(body))
    assert isinstance(result, Completion)
    assert result.cost_usd == pytest.approx(0.0000268)


def test_model_busy_429_and_bare_5xx() -> None:
    """"Model busy" is the model scaling up, the provider's fault (reference §6): retried as a
    provider error, which leaves the lane's concurrency alone; "Rate limited" (over the 200
    requests at once) is ours."""
    adapter = deepinfra.create_adapter(CONFIG, {"DEEPINFRA_TOKEN": "t0123456"})
    busy = adapter.parse(429, {}, b'{"error":{"message":"Model busy, retry later"}}')
    assert isinstance(busy, Failure) and busy.outcome is Outcome.PROVIDER_ERROR
    assert busy.retryable and busy.http_status == 429
    assert "Model busy" in busy.detail and busy.retry_after_s is None
    limited = adapter.parse(429, {}, b'{"error":{"message":"Rate limited"}}')
    assert isinstance(limited, Failure) and limited.outcome is Outcome.RATE_LIMIT
    crash = adapter.parse(500, {}, b'{"error":{"message":"Internal server error"}}')
    assert isinstance(crash, Failure) and crash.outcome is Outcome.PROVIDER_ERROR
    auth = adapter.parse(401, {}, b'{"detail":{"error":"Unauthorized"}}')
    assert isinstance(auth, Failure) and auth.outcome is Outcome.AUTH_ERROR
    assert "Unauthorized" in auth.detail
