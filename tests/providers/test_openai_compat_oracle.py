"""Oracle: the official `openai` client, sent to a capture server on 127.0.0.1, must produce the
same request (path, query, auth header, JSON body) as our adapters for the same arguments; and
its response types must read our canned replies the way our parser does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import openai
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

from providers.base import Adapter
from providers.openai_compat import ClientDialect, parse_reply
from providers.registry import adapter_for
from providers.types import ChatRequest, Completion, Failure, HttpRequest, ModelConfig

if TYPE_CHECKING:
    from tests.providers.conftest import CaptureServer

KEYS = {
    "GROQ_API_KEY": "gsk_fake_groq_key_0123456789",
    "DEEPINFRA_TOKEN": "fake-deepinfra-token-0123456789",
    "AZURE_OPENAI_API_KEY": "fakeazurekey0123456789abcdef",
    "MY_SERVER_KEY": "sk-fake-server-key-0123456789",
}
REQ = ChatRequest(request_id="r1", system="You are a forecaster.", user="P(up)? JSON.", seed=42)
MESSAGES: list[Any] = [
    {"role": "system", "content": REQ.system},
    {"role": "user", "content": REQ.user},
]


async def send(http: HttpRequest) -> None:
    """Send one built request over real HTTP (the capture server records it)."""
    async with aiohttp.ClientSession(trust_env=False) as session, session.request(
        http.method, http.url, headers=dict(http.headers), data=http.body
    ) as response:
        assert response.status == 200


async def ours_and_theirs(
    capture_server: CaptureServer, adapter: Adapter, call: Callable[[], Any]
) -> tuple[Any, Any, HttpRequest]:
    http = adapter.build(REQ)
    await send(http)
    await call()
    assert len(capture_server.requests) == 2
    return capture_server.requests[0], capture_server.requests[1], http


def same(ours: Any, theirs: Any) -> None:
    assert ours.method == theirs.method == "POST"
    assert ours.path == theirs.path
    assert ours.query == theirs.query
    assert ours.json() == theirs.json()


@pytest.mark.parametrize(
    ("provider", "model", "token_kw"),
    [
        ("groq", "openai/gpt-oss-120b", "max_completion_tokens"),
        ("deepinfra", "Qwen/Qwen3-235B-A22B-Instruct-2507", "max_tokens"),
        ("openai", "meta-llama/Llama-3.1-8B-Instruct", "max_tokens"),
    ],
)
async def test_bearer_providers_match_the_openai_client(
    capture_server: CaptureServer, provider: str, model: str, token_kw: str
) -> None:
    base = capture_server.root_url + "/v1"
    config = ModelConfig(
        name="m", provider=provider, model=model, base_url=base, temperature=1.0,
        max_tokens=8192, seed=7, reasoning_effort="low", json_mode=True,
        api_key_env="MY_SERVER_KEY" if provider == "openai" else None,
    )
    key = {"groq": "GROQ_API_KEY", "deepinfra": "DEEPINFRA_TOKEN", "openai": "MY_SERVER_KEY"}
    client = openai.AsyncOpenAI(base_url=base, api_key=KEYS[key[provider]], max_retries=0)
    kwargs: dict[str, Any] = {token_kw: 8192}
    ours, theirs, http = await ours_and_theirs(
        capture_server,
        adapter_for(config, KEYS),
        lambda: client.chat.completions.create(
            model=model, messages=MESSAGES, temperature=1.0, seed=42, reasoning_effort="low",
            response_format={"type": "json_object"}, **kwargs,
        ),
    )
    same(ours, theirs)
    assert ours.headers["Authorization"] == theirs.headers["Authorization"]
    assert http.omitted == ()


async def test_azure_deployment_url_matches_the_azure_client(capture_server: CaptureServer) -> None:
    config = ModelConfig(
        name="GPT-5.6 Luna", provider="azure", model="gpt-5.6-luna",
        base_url=capture_server.root_url, api_version="2024-10-21", temperature=1.0,
        max_tokens=8192, seed=3, json_mode=True,
    )
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=capture_server.root_url, api_key=KEYS["AZURE_OPENAI_API_KEY"],
        api_version="2024-10-21", max_retries=0,
    )
    ours, theirs, http = await ours_and_theirs(
        capture_server,
        adapter_for(config, KEYS),
        # Temperature is what the GPT-5 family rejects: the client is called without it.
        lambda: client.chat.completions.create(
            model="gpt-5.6-luna", messages=MESSAGES, max_completion_tokens=8192, seed=42,
            response_format={"type": "json_object"},
        ),
    )
    same(ours, theirs)
    assert theirs.path == "/openai/deployments/gpt-5.6-luna/chat/completions"
    assert theirs.query == {"api-version": "2024-10-21"}
    assert ours.headers["api-key"] == theirs.headers["api-key"] == KEYS["AZURE_OPENAI_API_KEY"]
    assert "Authorization" not in ours.headers
    assert http.omitted == ("temperature",)


async def test_azure_entra_token_matches_the_azure_client(capture_server: CaptureServer) -> None:
    env = {"AZURE_OPENAI_AD_TOKEN": "eyJfake.entra.token0123", "AZURE_OPENAI_ENDPOINT":
           capture_server.root_url}
    config = ModelConfig(name="gpt-4o", provider="azure", model="gpt-4o", api_version="2024-10-21",
                         temperature=0.5)
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=capture_server.root_url, azure_ad_token=env["AZURE_OPENAI_AD_TOKEN"],
        api_version="2024-10-21", max_retries=0,
    )
    ours, theirs, http = await ours_and_theirs(
        capture_server,
        adapter_for(config, env),
        lambda: client.chat.completions.create(
            model="gpt-4o", messages=MESSAGES, temperature=0.5, seed=42
        ),
    )
    same(ours, theirs)
    assert ours.headers["Authorization"] == theirs.headers["Authorization"]
    assert "api-key" not in ours.headers
    assert http.omitted == ()


async def test_azure_v1_path_matches_the_openai_client(capture_server: CaptureServer) -> None:
    config = ModelConfig(name="luna", provider="azure", model="gpt-5.6-luna",
                         base_url=capture_server.root_url, max_tokens=100)
    client = openai.AsyncOpenAI(base_url=capture_server.root_url + "/openai/v1",
                                api_key=KEYS["AZURE_OPENAI_API_KEY"], max_retries=0)
    ours, theirs, _ = await ours_and_theirs(
        capture_server,
        adapter_for(config, KEYS),
        lambda: client.chat.completions.create(
            model="gpt-5.6-luna", messages=MESSAGES, max_completion_tokens=100, seed=42
        ),
    )
    same(ours, theirs)
    assert ours.path == "/openai/v1/chat/completions" and ours.query == {}


# ------------------------------------------------------------------- replies: openai types


finish = st.sampled_from(["stop", "length", "content_filter", "tool_calls"])
text = st.none() | st.text(max_size=30)


@given(content=text, finish_reason=finish, prompt=st.integers(0, 10**6),
       completion=st.integers(0, 10**6), rid=st.text(min_size=1, max_size=12),
       model=st.text(min_size=1, max_size=12))
def test_parser_agrees_with_openai_types(
    content: str | None, finish_reason: str, prompt: int, completion: int, rid: str, model: str
) -> None:
    body = {
        "id": rid, "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }
    oracle = ChatCompletion.model_validate(body)
    result = parse_reply(200, {}, orjson.dumps(body), ClientDialect(provider="openai"))
    choice = oracle.choices[0]
    tokens = (oracle.usage.prompt_tokens, oracle.usage.completion_tokens) if oracle.usage else ()
    if isinstance(result, Completion):
        assert result.text == choice.message.content
        assert result.finish_reason == choice.finish_reason
        assert result.finish_reason not in ("length", "content_filter")
        assert (result.tokens_in, result.tokens_out) == tokens
        assert (result.provider_request_id, result.model_reported) == (oracle.id, oracle.model)
    else:
        assert isinstance(result, Failure)
        assert (result.tokens_in, result.tokens_out) == tokens
        assert result.raw_text == choice.message.content
        # Only a non-stop finish or empty content makes a 200 with id and model a failure.
        assert choice.finish_reason in ("length", "content_filter") or not (
            choice.message.content or ""
        ).strip()
