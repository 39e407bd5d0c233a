"""From a spec's `[[models]]` entry to the adapter that speaks its provider's wire format.

The registry is the one place that knows which module serves which provider; everything else
holds an `Adapter`. Provider modules are imported only when a model uses them, so a campaign
on Groq alone never loads botocore or google-auth, and a missing optional module fails only
the models that need it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol, cast

from providers.base import Adapter
from providers.constrained import RESPONSE_FORMATS
from providers.openai_compat import ClientDialect, OpenAICompatAdapter, chat_url, token_field
from providers.types import PROVIDERS, ConfigError, ModelConfig

#: Where a `provider = "sim"` config with no `base_url` goes (`dutchbook serve-sim`'s port); a
#: run gives each one its simulator's (a spec's `base_url` is refused, `runs.spec`).
SIM_DEFAULT_BASE_URL = "http://127.0.0.1:8765/sim/v1"
#: The simulator ignores constraints (its forecasters answer in shape anyway), so it takes every
#: form: a local spec rehearses unchanged.
_SIM_DIALECT = ClientDialect(
    provider="sim",
    token_field="max_completion_tokens",
    response_formats=frozenset(RESPONSE_FORMATS),
)


class ProviderModule(Protocol):
    """What each `providers.<name>` module offers the registry (docs/interfaces.md)."""

    def create_adapter(self, config: ModelConfig, env: Mapping[str, str]) -> Adapter: ...

    def required_env(self, config: ModelConfig, env: Mapping[str, str]) -> list[str]: ...


def _module(config: ModelConfig) -> ProviderModule:
    if config.provider not in PROVIDERS:
        raise ConfigError(
            f"model {config.name!r}: unknown provider {config.provider!r};"
            f" known: {', '.join(PROVIDERS)}"
        )
    try:
        module = importlib.import_module(f"providers.{config.provider}")
    except ImportError as exc:
        raise ConfigError(
            f"model {config.name!r}: provider {config.provider!r} is unavailable ({exc.name})"
        ) from None
    if not hasattr(module, "create_adapter"):
        raise ConfigError(
            f"model {config.name!r}: provider module providers.{config.provider}"
            " has no create_adapter"
        )
    return cast(ProviderModule, module)


def _sim_adapter(config: ModelConfig) -> Adapter:
    """The simulator's keyless OpenAI-compatible route: rehearsals without any credential."""
    return OpenAICompatAdapter(
        provider="sim",
        config=config,
        url=chat_url(config.base_url or SIM_DEFAULT_BASE_URL),
        dialect=replace(_SIM_DIALECT, token_field=token_field(config, _SIM_DIALECT.token_field)),
    )


def adapter_for(config: ModelConfig, env: Mapping[str, str] | None = None) -> Adapter:
    """The adapter for one model; `ConfigError` names the model and what is missing.

    `env` defaults to `os.environ`. Only credential *names* ever appear in messages.
    """
    environment = os.environ if env is None else env
    if config.provider == "sim":
        return _sim_adapter(config)
    return _module(config).create_adapter(config, environment)


def required_env(config: ModelConfig, env: Mapping[str, str] | None = None) -> list[str]:
    """Environment variables this model needs (for spec validation before any call).

    Where there are alternatives (DeepInfra's two names, Azure's key or token) the ones set in
    `env` (default `os.environ`) are listed, else the preferred ones.
    """
    environment = os.environ if env is None else env
    if config.provider == "sim":
        return []
    module = _module(config)
    if not hasattr(module, "required_env"):
        return []
    return list(module.required_env(config, environment))
