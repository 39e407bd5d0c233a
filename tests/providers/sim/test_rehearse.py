"""Rehearsal: real adapters, pointed at the simulator by `rehearse_model`, complete calls.

This is where the simulator (built from the wire reference) and the adapters (built
independently from the same reference) check each other.
"""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import aiohttp
import pytest
from promptkit import SYSTEM, single_prompt
from yarl import URL

from providers.registry import adapter_for
from providers.sim.rehearse import BASE_PATHS, rehearse_model
from providers.sim.server import SimHandle, start_sim
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

MODELS = [
    ModelConfig(name="sim-a", provider="sim", model="sim-x", extra={"personality": "noisy"}),
    ModelConfig(name="local", provider="openai", model="qwen", api_key_env="LOCAL_KEY"),
    ModelConfig(name="oss-120b", provider="groq", model="openai/gpt-oss-120b", temperature=1.0,
                max_tokens=8192, seed=1),
    ModelConfig(name="qwen3", provider="deepinfra", model="Qwen/Qwen3-235B-A22B",
                temperature=1.0, max_tokens=8192, seed=1),
    ModelConfig(name="luna", provider="azure", model="gpt-5.6-luna", temperature=1.0,
                max_tokens=8192, seed=1, api_version="2024-10-21"),
    ModelConfig(name="opus", provider="bedrock", model="us.anthropic.claude-opus-4-7-v1:0",
                temperature=1.0, max_tokens=8192, seed=1),
    ModelConfig(name="gemini", provider="vertex", model="gemini-3.5-flash", temperature=1.0,
                max_tokens=8192, seed=1),
    ModelConfig(name="maverick", provider="vertex",
                model="meta/llama-4-maverick-17b-128e-instruct-maas", temperature=1.0,
                max_tokens=8192, seed=1, location="us-east5"),
]


def test_rehearsed_configs_point_at_the_right_prefix(tmp_path: Path) -> None:
    root = "http://127.0.0.1:9999"
    for config in MODELS:
        rehearsed, env = rehearse_model(config, root + "/", tmp_path)
        assert rehearsed.base_url == root + BASE_PATHS[config.provider]
        assert rehearsed.name == config.name
    assert BASE_PATHS["groq"] == "/groq/openai/v1"
    assert BASE_PATHS["deepinfra"] == "/deepinfra/v1/openai"
    sim_cfg, _ = rehearse_model(MODELS[0], root, tmp_path)
    assert sim_cfg.model == "sim-noisy"
    _, env = rehearse_model(MODELS[1], root, tmp_path)
    assert set(env) == {"LOCAL_KEY"}
    bedrock_cfg, env = rehearse_model(MODELS[5], root, tmp_path)
    assert bedrock_cfg.region == "us-east-1" and env["AWS_REGION"] == "us-east-1"
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(env)
    _, env = rehearse_model(
        ModelConfig(name="o", provider="bedrock", model="m", extra={"bedrock_auth": "api_key"}),
        root, tmp_path)
    assert "AWS_BEARER_TOKEN_BEDROCK" in env and "AWS_ACCESS_KEY_ID" not in env
    vertex_cfg, env = rehearse_model(MODELS[7], root, tmp_path)
    assert (vertex_cfg.project, vertex_cfg.location) == ("sim-project", "us-east5")
    key_file = Path(env["GOOGLE_APPLICATION_CREDENTIALS"])
    info = json.loads(key_file.read_text())
    assert info["token_uri"] == root + "/oauth2/token" and info["type"] == "service_account"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    with pytest.raises(ConfigError):
        rehearse_model(ModelConfig(name="x", provider="nope", model="m"), root, tmp_path)


async def _call(config: ModelConfig, sim: SimHandle, workdir: Path) -> Completion | Failure:
    rehearsed, env = rehearse_model(config, sim.root_url, workdir)
    adapter = adapter_for(rehearsed, env)
    request = ChatRequest("r1", SYSTEM, single_prompt(2, frozenset({0, 1})), seed=1)
    http = await asyncio.to_thread(adapter.build, request)  # may fetch a token (blocking)
    # encoded=True: send the path bytes exactly as built (and signed); yarl would
    # otherwise decode Bedrock's `%3A` and the SigV4 signature would no longer match.
    url = URL(http.url, encoded=True)
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session,
        session.request(http.method, url, data=http.body, headers=dict(http.headers)) as resp,
    ):
        return adapter.parse(resp.status, dict(resp.headers), await resp.read())


@pytest.mark.parametrize("config", MODELS, ids=[m.name for m in MODELS])
async def test_each_real_adapter_completes_against_the_simulator(
    sim: SimHandle, tmp_path: Path, config: ModelConfig
) -> None:
    result = await _call(config, sim, tmp_path)
    assert isinstance(result, Completion), result
    assert 0.0 <= json.loads(result.text)["probability"] <= 1.0
    assert result.finish_reason is not None
    provider = config.provider
    assert sim.counts()[f"answered.{provider}"] == 1
    assert sim.counts().get("bad_request", 0) == 0 and sim.counts().get("auth_rejected", 0) == 0


async def test_decoding_the_signed_bedrock_path_in_transit_is_caught(
    sim: SimHandle, tmp_path: Path
) -> None:
    """A client that lets yarl turn `%3A` into `:` sends a path other than the one signed."""
    rehearsed, env = rehearse_model(MODELS[5], sim.root_url, tmp_path)
    adapter = adapter_for(rehearsed, env)
    http = adapter.build(ChatRequest("r1", SYSTEM, "hello", seed=1))
    assert "%3A" in http.url
    async with (
        aiohttp.ClientSession() as session,
        session.request(http.method, http.url, data=http.body,
                        headers=dict(http.headers)) as resp,
    ):
        assert resp.status == 403
        result = adapter.parse(resp.status, dict(resp.headers), await resp.read())
    assert isinstance(result, Failure) and result.outcome.value == "auth_error"


EXPECTED = {
    "rate_limit": Outcome.RATE_LIMIT,
    "rate_limit_bare": Outcome.RATE_LIMIT,
    "server_error": Outcome.PROVIDER_ERROR,
    "malformed_json": Outcome.INVALID_RESPONSE,
    "refusal": Outcome.REFUSAL,
    "output_cap": Outcome.TRUNCATED,
    "missing_routing": Outcome.MISSING_ROUTING_METADATA,
}


@pytest.mark.parametrize("config", MODELS, ids=[m.name for m in MODELS])
async def test_each_adapter_classifies_each_injected_fault(
    tmp_path: Path, config: ModelConfig
) -> None:
    """The simulator's faults, read by the real adapters, land in the intended classes."""
    wrong: dict[str, object] = {}
    for kind, outcome in EXPECTED.items():
        async with await start_sim(faults=f"{kind}=1", retry_after_s=2.0) as sim:
            result = await _call(config, sim, tmp_path)
        got = result.outcome if isinstance(result, Failure) else "completion"
        prose_refusal = kind == "refusal" and config.provider in ("groq", "deepinfra")
        if prose_refusal:
            # Groq and DeepInfra have no refusal signal: the refusal is prose, and the
            # answer parser (not the adapter) rejects it.
            assert isinstance(result, Completion) and "can't help" in result.text
            continue
        if got != outcome:
            wrong[kind] = got
            continue
        if kind == "rate_limit":
            assert isinstance(result, Failure) and result.retry_after_s == pytest.approx(2.0)
    assert not wrong, wrong


WRONG_ENV = {
    "groq": {"GROQ_API_KEY": "gsk_wrong"},
    "deepinfra": {"DEEPINFRA_API_KEY": "wrong"},
    "azure": {"AZURE_OPENAI_API_KEY": "wrong"},
    "bedrock": {"AWS_SECRET_ACCESS_KEY": "wrong/secret"},
}


@pytest.mark.parametrize("config", [m for m in MODELS if m.provider in WRONG_ENV],
                         ids=lambda m: m.name)
async def test_adapters_classify_the_simulators_auth_rejections(
    sim: SimHandle, tmp_path: Path, config: ModelConfig
) -> None:
    rehearsed, env = rehearse_model(config, sim.root_url, tmp_path)
    adapter = adapter_for(rehearsed, {**env, **WRONG_ENV[config.provider]})
    http = adapter.build(ChatRequest("r1", SYSTEM, "hello", seed=1))
    async with (
        aiohttp.ClientSession() as session,
        session.request(http.method, URL(http.url, encoded=True), data=http.body,
                        headers=dict(http.headers)) as resp,
    ):
        result = adapter.parse(resp.status, dict(resp.headers), await resp.read())
    assert isinstance(result, Failure) and result.outcome is Outcome.AUTH_ERROR
    assert not result.retryable
    assert sim.counts()["auth_rejected"] == 1
