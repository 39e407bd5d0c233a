"""DeepInfra's OpenAI-compatible endpoint (GPT-OSS-20B, Qwen3, DeepSeek, Mistral in the paper).

Its path is `/v1/openai`, not `/v1`; it documents `max_tokens` (not `max_completion_tokens`);
it reports the call's price as `usage.estimated_cost`, which we keep as `cost_usd`; and a 429
"Model busy" is autoscaling, a provider-side fault rather than our rate (a provider error,
retried without cutting the lane's concurrency), where its 429 "Rate limited" is ours.
"""

from __future__ import annotations

from collections.abc import Mapping

from providers.openai_compat import ClientDialect, OpenAICompatAdapter, bearer_key_adapter
from providers.secrets import first_set
from providers.types import ModelConfig

PROVIDER = "deepinfra"
DEFAULT_BASE_URL = "https://api.deepinfra.com/v1/openai"
KEY_VARIABLES = ("DEEPINFRA_API_KEY", "DEEPINFRA_TOKEN")
DIALECT = ClientDialect(provider=PROVIDER, token_field="max_tokens", busy_429=r"model busy")


def key_variables(config: ModelConfig) -> tuple[str, ...]:
    """The spec's `api_key_env` if it names one, else `DEEPINFRA_API_KEY`/`DEEPINFRA_TOKEN`."""
    return (config.api_key_env,) if config.api_key_env else KEY_VARIABLES


def required_env(config: ModelConfig, env: Mapping[str, str] | None = None) -> list[str]:
    names = key_variables(config)
    found = first_set(env or {}, names)
    return [found[0] if found else names[0]]


def create_adapter(config: ModelConfig, env: Mapping[str, str]) -> OpenAICompatAdapter:
    return bearer_key_adapter(config, env, DIALECT, key_variables(config), DEFAULT_BASE_URL)
