"""No credential in any repr, exception or failure detail, whatever the reply did."""

from __future__ import annotations

import pickle

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.registry import adapter_for, required_env
from providers.secrets import MASK, Secret, first_set, redact, redact_env, secret_values
from providers.types import ChatRequest, ConfigError, Failure, ModelConfig

FAKE = {
    "GROQ_API_KEY": "gsk_LEAKCHECK_groq_0123456789",
    "DEEPINFRA_API_KEY": "LEAKCHECK-deepinfra-0123456789",
    "AZURE_OPENAI_API_KEY": "LEAKCHECKazurekey0123456789",
    "AZURE_OPENAI_AD_TOKEN": "eyJLEAKCHECK.entra.token0123",
    "AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com",
    "SERVER_KEY": "sk-LEAKCHECK-server-0123456789",
}
SECRETS = [v for k, v in FAKE.items() if k != "AZURE_OPENAI_ENDPOINT"]
CONFIGS = [
    ModelConfig(name="groq", provider="groq", model="openai/gpt-oss-120b"),
    ModelConfig(name="di", provider="deepinfra", model="openai/gpt-oss-20b"),
    ModelConfig(name="az", provider="azure", model="gpt-5.6", api_version="2024-10-21"),
    ModelConfig(name="srv", provider="openai", model="m", base_url="http://127.0.0.1:1/v1",
                api_key_env="SERVER_KEY"),
]
ENVS = [FAKE, FAKE, FAKE, FAKE]
TOKEN_ONLY = {k: v for k, v in FAKE.items() if k != "AZURE_OPENAI_API_KEY"}


def echoing_bodies(secret: str) -> list[tuple[int, bytes]]:
    """Every failure path, with replies that echo the credential back (a careless proxy)."""
    echo = f"Invalid key: Bearer {secret} (header api-key: {secret})"
    error = orjson.dumps({"error": {"message": echo, "code": echo}})
    return [
        (401, error), (403, error), (429, error), (500, error), (503, echo.encode()),
        (408, error), (400, error), (404, error), (413, error), (422, error), (498, error),
        (400, orjson.dumps({"error": {"message": echo, "code": "json_validate_failed",
                                      "failed_generation": echo}})),
        (400, orjson.dumps({"error": {"message": echo, "code": "content_filter"}})),
        (200, error),
        (200, echo.encode()),  # not JSON
        (200, orjson.dumps({"id": "x", "model": "m", "choices": [
            {"message": {"content": echo}, "finish_reason": "length"}]})),
        (200, orjson.dumps({"id": "x", "model": "m", "choices": [
            {"message": {"content": "", "refusal": echo}, "finish_reason": "stop"}]})),
        (200, orjson.dumps({"model": "m", "choices": [
            {"message": {"content": echo}, "finish_reason": "stop"}]})),
        (302, echo.encode()),
    ]


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize(
    ("config", "env"),
    [*zip(CONFIGS, ENVS, strict=True), (CONFIGS[2], TOKEN_ONLY)],
    ids=["groq", "deepinfra", "azure-key", "openai", "azure-token"],
)
def test_no_failure_path_leaks_the_key(config: ModelConfig, env: dict[str, str]) -> None:
    adapter = adapter_for(config, env)
    http = adapter.build(ChatRequest("r", "s", "u", seed=1))
    header_values = " ".join(http.headers.values())
    assert any(secret in header_values for secret in SECRETS)  # the key is really sent...
    assert_clean(repr(http) + str(http) + repr(adapter) + str(adapter))  # ...and shown nowhere
    for status, body in echoing_bodies(next(s for s in SECRETS if s in header_values)):
        result = adapter.parse(status, {"x-request-id": "rid"}, body)
        assert isinstance(result, Failure), (status, body)
        assert_clean(repr(result) + result.detail + (result.raw_text or ""))
        assert MASK in result.detail or MASK in (result.raw_text or "")


@pytest.mark.parametrize("config", CONFIGS, ids=["groq", "deepinfra", "azure", "openai"])
def test_config_errors_name_variables_not_values(config: ModelConfig) -> None:
    # Other providers' keys are set; this model's own is missing: no value may be printed.
    own = set(required_env(config, FAKE))
    env = {
        k: v for k, v in FAKE.items()
        if k not in own and not k.startswith(config.provider.upper())
    }
    with pytest.raises(ConfigError) as info:
        adapter_for(config, env)
    message = str(info.value)
    assert config.name in message and any(name in message for name in own)
    assert_clean(message + repr(info.value))
    bad = ModelConfig(**{**config.__dict__, "extra": {"token_field": "n_predict"}})
    with pytest.raises(ConfigError) as info:
        adapter_for(bad, FAKE)
    assert_clean(str(info.value))


def test_secret_views_are_masked() -> None:
    secret = Secret("sk-very-secret-value")
    assert secret.reveal() == "sk-very-secret-value"
    for view in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret])):
        assert "very-secret" not in view
    assert secret == Secret("sk-very-secret-value") and secret != Secret("other")
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_redact_helpers() -> None:
    env = {"A": "abcdef123456", "B": "abcdef", "SHORT": "us", "EMPTY": ""}
    assert secret_values(env, ["A", "B", "SHORT", "EMPTY", "MISSING"]) == (
        "abcdef123456", "abcdef", "us")
    # The longer secret is masked whole, not left as "***123456".
    assert redact_env("k=abcdef123456 j=abcdef", env, ["A", "B"]) == "k=*** j=***"
    assert redact("region us-east-1", ["us"]) == "region us-east-1"  # too short to be a key
    assert first_set(env, ["EMPTY", "B"]) == ("B", Secret("abcdef"))
    assert first_set(env, ["EMPTY"]) is None


@given(prefix=st.text(max_size=20), suffix=st.text(max_size=20),
       secret=st.text(min_size=6, max_size=30))
def test_redact_removes_every_occurrence(prefix: str, suffix: str, secret: str) -> None:
    text = prefix + secret + suffix + secret
    assert secret not in redact(text, [Secret(secret)])


def test_redact_cannot_splice_a_key_back_together() -> None:
    assert "******" not in redact("*" * 12, ["******"])
    assert "abcdefgh" not in redact("abcdabcdefghefgh", ["abcdefgh"])
