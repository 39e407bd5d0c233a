"""Azure OpenAI (GPT-5.6 Luna, Sol and Terra in the paper).

Two URL styles exist and both are in use: the classic deployment URL with an `api-version`
query, and the v1 path (GA 2025) whose body `model` is the deployment name. A spec picks the
classic style by giving `api_version`; otherwise the v1 path is used. Keys go in the `api-key`
header (not `Authorization`); an Entra ID token goes as a bearer instead. Reasoning
deployments reject `temperature`, which `REJECTED_OPTIONS` omits and records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import quote, urlencode

from providers.openai_compat import ClientDialect, OpenAICompatAdapter, token_field
from providers.secrets import first_set
from providers.types import ConfigError, ModelConfig
from providers.urls import root_from_env

PROVIDER = "azure"
KEY_VARIABLE = "AZURE_OPENAI_API_KEY"
TOKEN_VARIABLE = "AZURE_OPENAI_AD_TOKEN"
ENDPOINT_VARIABLE = "AZURE_OPENAI_ENDPOINT"
DIALECT = ClientDialect(
    provider=PROVIDER,
    token_field="max_completion_tokens",
    request_id_headers=("apim-request-id", "x-request-id", "x-ms-request-id"),
)


def deployment(config: ModelConfig) -> str:
    """The deployment name: `extra.deployment`, else the model id (the common convention)."""
    return config.extra.get("deployment") or config.model


def endpoint(config: ModelConfig, env: Mapping[str, str]) -> str | None:
    """The resource endpoint, per model (`base_url`) or shared (`AZURE_OPENAI_ENDPOINT`).

    The variable's value is checked as a spec's `base_url` is (`providers.urls`): a
    user:password written into it reached the console, the ledger and the report in a 404's
    hint, and a pasted "Target URI" (its path and `?api-version`) was sent with the
    deployment path appended after the query."""
    value = config.base_url or root_from_env(config, env, ENDPOINT_VARIABLE)
    return value.rstrip("/") if value else None


def chat_url(config: ModelConfig, root: str) -> str:
    """Deployment URL with `api-version` when the spec gives one, else the v1 path.

    A `base_url` that already ends in `/openai/v1` (as Azure's portal shows it) is accepted.
    """
    name = quote(deployment(config), safe="")
    if config.api_version:
        query = urlencode({"api-version": config.api_version})
        base = root.removesuffix("/openai")
        return f"{base}/openai/deployments/{name}/chat/completions?{query}"
    if root.endswith("/openai/v1"):
        return f"{root}/chat/completions"
    return f"{root.removesuffix('/openai')}/openai/v1/chat/completions"


def credential_variables(config: ModelConfig) -> tuple[str, str]:
    """(api-key variable, bearer-token variable); `api_key_env` renames the first."""
    return (config.api_key_env or KEY_VARIABLE, TOKEN_VARIABLE)


def required_env(config: ModelConfig, env: Mapping[str, str] | None = None) -> list[str]:
    env = env or {}
    key_name, token_name = credential_variables(config)
    names = [token_name if not env.get(key_name) and env.get(token_name) else key_name]
    if not config.base_url:
        names.append(ENDPOINT_VARIABLE)
    return names


def create_adapter(config: ModelConfig, env: Mapping[str, str]) -> OpenAICompatAdapter:
    key_name, token_name = credential_variables(config)
    problems = []
    found = first_set(env, (key_name, token_name))
    if found is None:
        problems.append(f"set {key_name} (or {token_name} for an Entra ID token)")
    root = endpoint(config, env)
    if root is None:
        problems.append(f"set base_url or {ENDPOINT_VARIABLE}")
    if found is None or root is None:
        raise ConfigError(f"model {config.name!r} (azure): {'; '.join(problems)}")
    name, secret = found
    is_key = name == key_name
    return OpenAICompatAdapter(
        provider=PROVIDER,
        config=config,
        url=chat_url(config, root),
        dialect=replace(DIALECT, token_field=token_field(config, DIALECT.token_field)),
        credential=secret,
        auth_header="api-key" if is_key else "Authorization",
        bearer=not is_key,
        model_field=deployment(config),
        auth_hint=f"credential from {name}",
    )
