"""Whether a configured API root (`base_url`, or the variable `base_url_env` names) can be
used as one: checked when a spec is read and when an adapter takes a root from the
environment, so a mistyped URL is one line before any request rather than a lane of
failed attempts, and no credential written into a URL reaches a log or the ledger."""

from __future__ import annotations

import ipaddress
import unicodedata
from collections.abc import Mapping
from urllib.parse import urlsplit

from providers.types import ConfigError, ModelConfig


def base_url_problem(url: str) -> str | None:
    """What is wrong with `url` as an API root, or None when it can be used."""
    if not url.startswith(("http://", "https://")):
        return "an http:// or https:// URL"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError as error:
        return f"a well-formed http:// or https:// URL ({error})"
    if not parts.hostname or any(c.isspace() for c in parts.netloc):
        return "an http:// or https:// URL naming a host"
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
        # urlsplit drops a tab or line break where it stands: the requests went elsewhere.
        return "an http:// or https:// URL without spaces or control characters"
    if "@" in parts.netloc:
        return "a URL without a user or password (a key is read from api_key_env, never a URL)"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "the API root, without a ?query or #fragment (paths are added to it)"
    return None


#: The providers whose every request carries the user's credentials (a key, a token or a
#: signature); `openai`'s carries one where `api_key_env` names it.
KEYED_PROVIDERS = frozenset({"groq", "deepinfra", "azure", "bedrock", "vertex"})


def sends_credentials(config: ModelConfig) -> bool:
    """Whether the model's requests carry the user's credentials (`KEYED_PROVIDERS`)."""
    return config.provider in KEYED_PROVIDERS or config.api_key_env is not None


#: Why a keyed model's root may not be http:// to another host, as its refusals say it.
IN_CLEAR = (
    "over http:// its credentials would go unencrypted to another host (http:// is for a "
    "test server on this machine's loopback: 127.0.0.1, ::1, localhost)"
)


def in_clear_to_another_host(url: str) -> bool:
    """Whether requests to `url` would travel unencrypted (http://) to a host other than this
    machine's loopback: a provider's key sent there can be read on the way, and a spec shared
    with its user could name any host (`runs.pipeline.check_credentials` refuses it)."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return False
    host = (parts.hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: not this machine's loopback
        return True


def root_from_env(config: ModelConfig, env: Mapping[str, str], variable: str) -> str | None:
    """The API root the environment's `variable` holds (surrounding whitespace dropped: a
    Windows `.env` file's "\r"), checked as a spec's `base_url` is; None when unset. A
    `ConfigError` names the variable, never the value, which may hold a credential.

    Where the model's requests carry a key (Azure's always, an `openai` model's when
    `api_key_env` names one), a root over http:// to another host than this machine's
    loopback is refused too, as a spec's `base_url` is (`runs.pipeline.check_credentials`):
    an `AZURE_OPENAI_ENDPOINT` mistyped http:// sent the key in clear."""
    root = (env.get(variable) or "").strip()
    where = f"model {config.name!r} ({config.provider})"
    if root and (problem := base_url_problem(root)) is not None:
        raise ConfigError(f"{where}: {variable} must be {problem}")
    if sends_credentials(config) and in_clear_to_another_host(root):
        raise ConfigError(f"{where}: {variable} must be an https:// URL; {IN_CLEAR}")
    return root or None


def on_domain(url: str | None, domain: str) -> bool:
    """Whether `url`'s host is `domain` or under it (`us-aiplatform.googleapis.com` is on
    `googleapis.com`): a provider's own endpoint, not a simulator or a gateway in front."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    return host == domain or host.endswith(f".{domain}")
