"""Groq's OpenAI-compatible chat endpoint (GPT-OSS-120B in the paper).

Groq differs from the common shape in three ways that matter for accounting: the request id
is in the body as `x_groq.id`, its request-rate headers count per *day* (so remaining 0 on a
429 means wait for tomorrow, not a few seconds), and a 400 `json_validate_failed` (the
model's malformed JSON) or `tool_use_failed` (a tool call no request offered) is the model's
invalid response, worth a retry, rather than our bad request.
"""

from __future__ import annotations

from collections.abc import Mapping

from providers.openai_compat import ClientDialect, OpenAICompatAdapter, bearer_key_adapter
from providers.types import ModelConfig

PROVIDER = "groq"
DEFAULT_BASE_URL = "https://api.groq.com/openai/v1"
KEY_VARIABLES = ("GROQ_API_KEY",)
DIALECT = ClientDialect(
    provider=PROVIDER,
    token_field="max_completion_tokens",
    request_id_headers=("x-request-id", "x-groq-request-id"),
    requests_header_is_daily=True,
)


def key_variables(config: ModelConfig) -> tuple[str, ...]:
    """The spec's `api_key_env` if it names one, else `GROQ_API_KEY`."""
    return (config.api_key_env,) if config.api_key_env else KEY_VARIABLES


def required_env(config: ModelConfig, env: Mapping[str, str] | None = None) -> list[str]:
    return [key_variables(config)[0]]


def create_adapter(config: ModelConfig, env: Mapping[str, str]) -> OpenAICompatAdapter:
    return bearer_key_adapter(config, env, DIALECT, key_variables(config), DEFAULT_BASE_URL)
