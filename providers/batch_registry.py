"""From a spec's `[[models]]` entry to the batch client that speaks its provider's batch API.

Like `providers.registry` for live adapters, this is the one place that knows which module
serves which provider's batch API (issue 13); modules are imported only when a model uses
them. Each module offers `create_batch_client(config, env) -> BatchClient`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Protocol, cast

from providers.batch import BatchClient
from providers.types import ConfigError, ModelConfig

#: Provider -> the module whose `create_batch_client` serves it.
BATCH_MODULES: dict[str, str] = {
    "sim": "providers.batch_openai",
    "openai": "providers.batch_openai",
    "groq": "providers.batch_openai",
    "deepinfra": "providers.batch_openai",
    "azure": "providers.batch_openai",
    "bedrock": "providers.batch_bedrock",
    "vertex": "providers.batch_vertex",
}


class BatchModule(Protocol):
    def create_batch_client(self, config: ModelConfig, env: Mapping[str, str]) -> BatchClient: ...


def batch_client_for(config: ModelConfig, env: Mapping[str, str] | None = None) -> BatchClient:
    """The batch client for one model; `ConfigError` (one line) when its provider has none.

    `env` defaults to `os.environ`; credentials are found as for the live adapter.
    """
    name = BATCH_MODULES.get(config.provider)
    if name is None:
        supported = ", ".join(sorted(BATCH_MODULES))
        raise ConfigError(
            f"model {config.name!r}: provider {config.provider!r} has no batch support here"
            f" (batch works with {supported}); set dispatch = \"live\""
        )
    try:
        module = cast(BatchModule, importlib.import_module(name))
    except ImportError as exc:
        raise ConfigError(
            f"model {config.name!r}: batch for {config.provider!r} is unavailable ({exc.name})"
        ) from None
    return module.create_batch_client(config, os.environ if env is None else env)
