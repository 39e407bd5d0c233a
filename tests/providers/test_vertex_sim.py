"""End to end: Vertex requests over real HTTP to the provider simulator. google-auth fetches
tokens from the simulator's OAuth endpoint with the simulated service-account file (the
simulator verifies the RS256 JWT grant), the Gemini and OpenAI-compatible routes insist on
those tokens, and every injected fault is classified and reconciled with the counts."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yarl
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from providers.base import Adapter
from providers.google_auth_tokens import TokenCache, TokenRefreshError, load_credentials
from providers.registry import adapter_for
from providers.sim.credentials import SimCredentials
from providers.sim.faults import FaultKind, FaultProfile
from providers.sim.rehearse import rehearse_model
from providers.sim.server import start_sim
from providers.types import ChatRequest, Completion, Failure, HttpRequest, ModelConfig, Outcome
from providers.vertex import VertexAdapter
from tests.providers.sim_client import (
    CLIENT_TIMEOUT_S,
    PROMPT,
    RETRY_AFTER_S,
    SLOW_DELAY_S,
    assert_classified,
    give_up,
    intended,
    only,
)

GEMINI = "gemini-3.5-flash"
MAVERICK = "meta/llama-4-maverick-17b-128e-instruct-maas"
MODELS = (GEMINI, MAVERICK)


def model(model_id: str = GEMINI, **kw: Any) -> ModelConfig:
    fields: dict[str, Any] = {"name": "vertex-model", "provider": "vertex", "model": model_id,
                              "temperature": 1.0, "max_tokens": 512,
                              "json_mode": model_id == GEMINI}
    fields.update(kw)
    return ModelConfig(**fields)


async def exchange(session: aiohttp.ClientSession, adapter: Adapter,
                   http: HttpRequest, timeout_s: float = CLIENT_TIMEOUT_S) -> Completion | Failure:
    try:
        async with asyncio.timeout(timeout_s):
            async with session.request(http.method, yarl.URL(http.url, encoded=True),
                                       headers=dict(http.headers), data=http.body) as response:
                body = await response.read()
                return adapter.parse(response.status, dict(response.headers), body)
    except TimeoutError:
        return Failure(Outcome.TIMEOUT, "client timeout")
    except aiohttp.ClientError as exc:
        return Failure(Outcome.CONNECTION_ERROR, type(exc).__name__)


async def build(adapter: Adapter, request: ChatRequest = PROMPT) -> HttpRequest:
    """`build` may block on a token refresh: run it in a thread, as the engine may."""
    return await asyncio.to_thread(adapter.build, request)


async def one(config: ModelConfig, tmp_path: Path,
              faults: str | FaultProfile = "none",
              timeout_s: float = CLIENT_TIMEOUT_S) -> Completion | Failure:
    async with await start_sim(faults=faults, retry_after_s=RETRY_AFTER_S) as sim:
        rehearsed, env = rehearse_model(config, sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            return await exchange(session, adapter, await build(adapter), timeout_s)


@pytest.mark.parametrize("model_id", MODELS)
async def test_clean_answer_with_a_token_from_the_simulators_oauth_endpoint(
    model_id: str, tmp_path: Path
) -> None:
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(model(model_id), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        results = []
        async with aiohttp.ClientSession(trust_env=False) as session:
            for seed in range(3):
                request = ChatRequest(f"r{seed}", PROMPT.system, PROMPT.user, seed=seed)
                results.append(await exchange(session, adapter, await build(adapter, request)))
        counts = sim.counts()
    for result in results:
        assert isinstance(result, Completion), result
        assert 0 <= orjson.loads(result.text)["probability"] <= 1
        assert result.provider_request_id and result.model_reported
        assert result.tokens_in and result.tokens_out
    assert counts["tokens_issued"] == 1  # one grant, cached across requests
    assert counts.get("oauth.rejected", 0) == 0


async def test_short_lived_tokens_are_reused_for_most_of_their_life(tmp_path: Path) -> None:
    """A token living less than the refresh margin (120 s against 300) is kept until a quarter
    of its life is left: every build fetching a new one made each request wait on the token
    endpoint."""
    async with await start_sim(token_ttl_s=120) as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            first = await build(adapter)
            second = await build(adapter)
            answers = [await exchange(session, adapter, h) for h in (first, second)]
        assert sim.counts()["tokens_issued"] == 1
    assert first.headers["Authorization"] == second.headers["Authorization"]
    assert all(isinstance(a, Completion) for a in answers)


async def test_an_expired_token_is_refused_and_a_refreshed_one_accepted(tmp_path: Path) -> None:
    async with await start_sim(token_ttl_s=1) as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path)
        credentials, _ = load_credentials(env, "m")
        cache = TokenCache(credentials, margin_s=0.0)  # use a token until its last second
        adapter = VertexAdapter(rehearsed, env, tokens=cache)
        async with aiohttp.ClientSession(trust_env=False) as session:
            stale = await build(adapter)
            await asyncio.sleep(1.1)
            refused = await exchange(session, adapter, stale)
            fresh = await build(adapter)
            accepted = await exchange(session, adapter, fresh)
        assert sim.counts()["tokens_issued"] == 2
    assert isinstance(refused, Failure) and refused.outcome is Outcome.AUTH_ERROR
    assert refused.http_status == 401 and refused.stale_credential  # asked again, fresh token
    assert isinstance(accepted, Completion)
    assert stale.headers["Authorization"].removeprefix("Bearer ") not in refused.detail


async def test_a_service_account_the_simulator_does_not_trust(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    stranger = SimCredentials(sa_private_key_pem=pem)
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path, stranger)
        adapter = adapter_for(rehearsed, env)
        with pytest.raises(TokenRefreshError) as caught:
            await build(adapter)
        assert sim.counts()["oauth.rejected"] == 1
    assert caught.value.retryable is False
    assert pem.splitlines()[1] not in str(caught.value)


@pytest.mark.parametrize("kind", list(FaultKind), ids=lambda k: k.value)
@pytest.mark.parametrize("model_id", MODELS, ids=["gemini", "maverick"])
async def test_every_injected_fault_is_classified(model_id: str, kind: FaultKind,
                                                  tmp_path: Path) -> None:
    profile = only(kind)
    result = await one(model(model_id), tmp_path, profile, timeout_s=give_up(kind))
    outcome, retry_after = intended(kind)
    assert_classified(result, kind, outcome, retry_after)


@pytest.mark.parametrize("model_id", MODELS, ids=["gemini", "maverick"])
async def test_outcomes_reconcile_with_the_simulators_counts(model_id: str,
                                                             tmp_path: Path) -> None:
    async with await start_sim(faults=f"hostile,slow_delay_s={SLOW_DELAY_S}", seed=3,
                               retry_after_s=RETRY_AFTER_S) as sim:
        rehearsed, env = rehearse_model(model(model_id), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        seen: Counter[Outcome | None] = Counter()
        async with aiohttp.ClientSession(trust_env=False) as session:
            for i in range(40):
                request = ChatRequest(f"r{i}", PROMPT.system, PROMPT.user, seed=i)
                result = await exchange(session, adapter, await build(adapter, request))
                seen[result.outcome if isinstance(result, Failure) else None] += 1
        counts = sim.counts()
    injected = {kind: counts.get(f"fault.{kind.value}", 0) for kind in FaultKind}
    want: Counter[Outcome | None] = Counter()
    for kind, n in injected.items():
        want[intended(kind)[0]] += n
    want[None] += 40 - sum(injected.values())
    assert +seen == +want
    assert sum(injected.values()) > 5


async def test_rejected_parameters_are_bad_requests(tmp_path: Path) -> None:
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(model(temperature=3.0), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            result = await exchange(session, adapter, await build(adapter))
    assert isinstance(result, Failure) and result.outcome is Outcome.BAD_REQUEST
    assert result.http_status == 400 and "temperature" in result.detail


async def test_the_simulators_own_rate_limit(tmp_path: Path) -> None:
    async with await start_sim(rate_limit_rpm=1) as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            first = await exchange(session, adapter, await build(adapter))
            second = await exchange(session, adapter, await build(adapter))
    assert isinstance(first, Completion)
    assert isinstance(second, Failure) and second.outcome is Outcome.RATE_LIMIT

