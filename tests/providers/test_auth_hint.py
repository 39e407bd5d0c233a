"""An auth failure names where the refused credential came from: the lane stops on three of
them with that detail, and "Invalid API Key" alone does not say which variable to fix."""

from __future__ import annotations

import orjson
import pytest

from providers.registry import adapter_for
from providers.types import Failure, ModelConfig, Outcome

OPENAI_401 = orjson.dumps({"error": {"message": "Invalid API Key", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}})
BEDROCK_403 = orjson.dumps({"message": "The security token included in the request is invalid."})
VERTEX_401 = orjson.dumps({"error": {"code": 401, "message": "Request had invalid authentication "
                                     "credentials.", "status": "UNAUTHENTICATED"}})
AZURE = {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com"}
CASES = [
    ("groq", "openai/gpt-oss-120b", {"GROQ_API_KEY": "gsk_0123456789abcdef"}, None,
     OPENAI_401, {}, "credential from GROQ_API_KEY: "),
    ("deepinfra", "openai/gpt-oss-20b", {"DEEPINFRA_TOKEN": "di-0123456789abcdef"}, None,
     OPENAI_401, {}, "credential from DEEPINFRA_TOKEN: "),
    ("groq", "openai/gpt-oss-120b", {"MY_GROQ": "gsk_0123456789abcdef"}, "MY_GROQ",
     OPENAI_401, {}, "credential from MY_GROQ: "),
    ("azure", "gpt-5.6", {**AZURE, "AZURE_OPENAI_API_KEY": "0123456789abcdef"}, None,
     OPENAI_401, {}, "credential from AZURE_OPENAI_API_KEY: "),
    ("azure", "gpt-5.6", {**AZURE, "AZURE_OPENAI_AD_TOKEN": "eyJ0123456789abcdef"}, None,
     OPENAI_401, {}, "credential from AZURE_OPENAI_AD_TOKEN: "),
    ("openai", "m", {"SERVER_KEY": "sk-0123456789abcdef"}, "SERVER_KEY",
     OPENAI_401, {}, "credential from SERVER_KEY: "),
    ("openai", "m", {}, None, OPENAI_401, {}, "no key was sent (set api_key_env"),
    ("bedrock", "anthropic.claude-3-haiku-20240307-v1:0",
     {"AWS_REGION": "us-east-1", "AWS_BEARER_TOKEN_BEDROCK": "ABSK0123456789abcdef"}, None,
     BEDROCK_403, {"x-amzn-ErrorType": "UnrecognizedClientException"},
     "credential from AWS_BEARER_TOKEN_BEDROCK: "),
    ("bedrock", "anthropic.claude-3-haiku-20240307-v1:0",
     {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA0123456789ABCDEF",
      "AWS_SECRET_ACCESS_KEY": "secret0123456789", "AWS_SESSION_TOKEN": "token0123456789"},
     None, BEDROCK_403, {"x-amzn-ErrorType": "ExpiredTokenException"},
     "AWS credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN: "),
    ("vertex", "gemini-3.5-flash", {"VERTEX_TOKEN": "ya29.0123456789abcdef"}, "VERTEX_TOKEN",
     VERTEX_401, {}, "credential from VERTEX_TOKEN: "),
]


@pytest.mark.parametrize(
    ("provider", "model", "env", "key_env", "body", "headers", "opening"), CASES,
    ids=[f"{case[0]}-{next(iter(case[2]), 'keyless')}-{case[3]}" for case in CASES],
)
def test_an_auth_failure_names_the_credentials_source(
    provider: str, model: str, env: dict[str, str], key_env: str | None, body: bytes,
    headers: dict[str, str], opening: str,
) -> None:
    config = ModelConfig(name="m", provider=provider, model=model, api_key_env=key_env,
                         base_url="http://127.0.0.1:1/v1" if provider == "openai" else None,
                         project="p", location="us-east5")
    status = 403 if provider == "bedrock" else 401
    result = adapter_for(config, env).parse(status, headers, body)
    assert isinstance(result, Failure) and result.outcome is Outcome.AUTH_ERROR
    assert result.detail.startswith(opening), result.detail


def test_other_failures_carry_no_hint() -> None:
    config = ModelConfig(name="m", provider="groq", model="openai/gpt-oss-120b")
    adapter = adapter_for(config, {"GROQ_API_KEY": "gsk_0123456789abcdef"})
    result = adapter.parse(400, {}, orjson.dumps({"error": {"message": "bad"}}))
    assert isinstance(result, Failure) and not result.detail.startswith("credential")
