"""Any OpenAI-compatible chat server: OpenAI itself, vLLM, llama.cpp, Ollama, gateways.

The server is the user's, so nothing is assumed: `base_url` is required and a key is sent
only when the spec names the variable holding it (`api_key_env`); local servers need none.
The output cap goes out as `max_tokens`, the spelling every such server understands, except
for OpenAI's reasoning models (gpt-5, o-series), which reject it and need
`max_completion_tokens`; `extra.token_field` overrides either choice. `extra.base_url_env`
names a variable whose value, when set, replaces `base_url` (a local server started on a free
port; the spec stays the same, so a resume is the same campaign).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from providers.constrained import RESPONSE_FORMATS
from providers.openai_compat import (
    OPENAI_REASONING,
    ClientDialect,
    OpenAICompatAdapter,
    chat_url,
    token_field,
)
from providers.secrets import first_set
from providers.types import ConfigError, ModelConfig
from providers.urls import root_from_env

PROVIDER = "openai"
#: The server is the user's: any constrained-output form may be what it takes.
DIALECT = ClientDialect(
    provider=PROVIDER, token_field="max_tokens", response_formats=frozenset(RESPONSE_FORMATS)
)
#: Models that reject `max_tokens` (OpenAI reasoning models) get `max_completion_tokens`.
_COMPLETION_TOKENS_MODELS = re.compile(OPENAI_REASONING, re.IGNORECASE)


def default_token_field(config: ModelConfig) -> str:
    """`max_completion_tokens` for OpenAI reasoning models, else `max_tokens`."""
    if _COMPLETION_TOKENS_MODELS.search(config.model):
        return "max_completion_tokens"
    return DIALECT.token_field


def required_env(config: ModelConfig, env: Mapping[str, str] | None = None) -> list[str]:
    return [config.api_key_env] if config.api_key_env else []


def base_url(config: ModelConfig, env: Mapping[str, str]) -> str | None:
    """The server's API root: the variable named by `base_url_env` when it is set (a local
    server on a port chosen at start), else the spec's `base_url`."""
    variable = config.extra.get("base_url_env")
    return (root_from_env(config, env, variable) if variable else None) or config.base_url


def create_adapter(config: ModelConfig, env: Mapping[str, str]) -> OpenAICompatAdapter:
    root = base_url(config, env)
    if not root:
        raise ConfigError(
            f"model {config.name!r} (openai): set base_url to the server's API root,"
            " e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1",
            key="base_url",
        )
    credential = None
    # A keyless server asking for a key says so only in its own words: name the spec key.
    hint = "no key was sent (set api_key_env to the variable holding the server's key)"
    if config.api_key_env:
        found = first_set(env, (config.api_key_env,))
        if found is None:
            raise ConfigError(f"model {config.name!r} (openai): set {config.api_key_env}")
        credential, hint = found[1], f"credential from {config.api_key_env}"
    return OpenAICompatAdapter(
        provider=PROVIDER,
        config=config,
        url=chat_url(root),
        dialect=replace(DIALECT, token_field=token_field(config, default_token_field(config))),
        credential=credential,
        auth_hint=hint,
    )
