"""The registry: dispatch by provider, lazy imports, clear configuration errors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest

from providers.base import Adapter
from providers.openai_compat import OpenAICompatAdapter
from providers.registry import SIM_DEFAULT_BASE_URL, adapter_for, required_env
from providers.types import ChatRequest, ConfigError, ModelConfig

ENV = {
    "GROQ_API_KEY": "gsk_registry_test_0123",
    "DEEPINFRA_TOKEN": "di_registry_test_0123",
    "AZURE_OPENAI_API_KEY": "az_registry_test_0123",
    "AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com",
}


@pytest.mark.parametrize(
    ("provider", "url"),
    [
        ("groq", "https://api.groq.com/openai/v1/chat/completions"),
        ("deepinfra", "https://api.deepinfra.com/v1/openai/chat/completions"),
        ("azure", "https://res.openai.azure.com/openai/v1/chat/completions"),
        ("sim", SIM_DEFAULT_BASE_URL + "/chat/completions"),
    ],
)
def test_dispatch(provider: str, url: str) -> None:
    adapter = adapter_for(ModelConfig(name="m", provider=provider, model="x"), ENV)
    assert isinstance(adapter, Adapter)
    assert adapter.provider == provider
    assert adapter.build(ChatRequest("r", "s", "u")).url == url


def test_sim_needs_no_key_and_honours_base_url() -> None:
    config = ModelConfig(name="sim-a", provider="sim", model="near-coherent",
                         base_url="http://127.0.0.1:5555/sim/v1", max_tokens=64)
    adapter = adapter_for(config, {})
    http = adapter.build(ChatRequest("r", "s", "u", seed=1))
    assert http.url == "http://127.0.0.1:5555/sim/v1/chat/completions"
    assert "Authorization" not in http.headers
    assert orjson.loads(http.body)["max_completion_tokens"] == 64
    assert required_env(config, {}) == []


def test_openai_server_without_key_or_base_url() -> None:
    keyless = ModelConfig(name="local", provider="openai", model="m",
                          base_url="http://127.0.0.1:8000/v1")
    adapter = adapter_for(keyless, {})
    assert isinstance(adapter, OpenAICompatAdapter) and adapter.credential is None
    assert "Authorization" not in adapter.build(ChatRequest("r", "s", "u")).headers
    assert required_env(keyless, {}) == []
    with pytest.raises(ConfigError, match=r"'local'.*base_url"):
        adapter_for(ModelConfig(name="local", provider="openai", model="m"), {})


def test_unknown_provider() -> None:
    with pytest.raises(ConfigError, match=r"'m'.*unknown provider 'anthropic'.*groq"):
        adapter_for(ModelConfig(name="m", provider="anthropic", model="x"), ENV)
    with pytest.raises(ConfigError):
        required_env(ModelConfig(name="m", provider="nope", model="x"), ENV)


def test_required_env_per_provider() -> None:
    def needed(provider: str, env: dict[str, str], **kw: Any) -> list[str]:
        return required_env(ModelConfig(name="m", provider=provider, model="x", **kw), env)

    assert needed("groq", {}) == ["GROQ_API_KEY"]
    assert needed("deepinfra", ENV) == ["DEEPINFRA_TOKEN"]
    assert needed("azure", {}) == ["AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT"]
    assert needed("openai", {}, api_key_env="VLLM_KEY", base_url="http://h") == ["VLLM_KEY"]


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk_from_process_env_0123")
    adapter = adapter_for(ModelConfig(name="m", provider="groq", model="x"))
    assert adapter.build(ChatRequest("r", "s", "u")).headers["Authorization"].endswith("_0123")
    monkeypatch.delenv("GROQ_API_KEY")
    with pytest.raises(ConfigError, match="GROQ_API_KEY"):
        adapter_for(ModelConfig(name="m", provider="groq", model="x"))


def test_cloud_sdks_load_only_for_cloud_models() -> None:
    """A Groq-only campaign never imports botocore or google-auth (the registry is lazy)."""
    code = (
        "import sys\n"
        "from providers.registry import adapter_for\n"
        "from providers.types import ModelConfig\n"
        "adapter_for(ModelConfig(name='m', provider='groq', model='x'), {'GROQ_API_KEY': 'k'})\n"
        "print(sorted(m for m in ('botocore', 'google.auth', 'providers.bedrock',"
        " 'providers.vertex') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cloud_providers_dispatch_to_their_modules() -> None:
    bedrock = adapter_for(
        ModelConfig(name="c", provider="bedrock", model="anthropic.claude-x", region="us-east-1"),
        {"AWS_BEARER_TOKEN_BEDROCK": "ABSK_registry_fake_0123"},
    )
    assert bedrock.provider == "bedrock"
    assert "/converse" in bedrock.build(ChatRequest("r", "s", "u")).url
    vertex = adapter_for(
        ModelConfig(name="g", provider="vertex", model="gemini-x", project="p",
                    location="us-central1", api_key_env="VERTEX_TOKEN"),
        {"VERTEX_TOKEN": "ya29.registry_fake_0123"},
    )
    assert vertex.provider == "vertex"
    assert ":generateContent" in vertex.build(ChatRequest("r", "s", "u")).url


@pytest.mark.parametrize(
    ("model", "field"),
    [("gpt-5", "max_completion_tokens"), ("o3-mini", "max_completion_tokens"),
     ("meta-llama/Llama-3.1-8B-Instruct", "max_tokens"), ("gpt-4o", "max_tokens")],
)
def test_openai_server_token_field_follows_the_model(model: str, field: str) -> None:
    config = ModelConfig(name="m", provider="openai", model=model, base_url="http://h/v1",
                         max_tokens=99)
    body = orjson.loads(adapter_for(config, {}).build(ChatRequest("r", "s", "u")).body)
    assert body[field] == 99 and len({"max_tokens", "max_completion_tokens"} & set(body)) == 1
