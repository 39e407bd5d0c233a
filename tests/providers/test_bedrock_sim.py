"""End to end: Bedrock requests over real HTTP to the provider simulator, which verifies our
SigV4 signature (its own HMAC code, not botocore) or the Bedrock API key, enforces Converse
and Claude's parameter rules, and injects every fault it knows; reconciled with its counts."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yarl

from providers.base import Adapter
from providers.registry import adapter_for
from providers.sigv4_signer import AwsCredentials, signed_headers
from providers.sim.credentials import DEFAULT_CREDENTIALS, SimCredentials
from providers.sim.faults import FaultKind, FaultProfile
from providers.sim.rehearse import rehearse_model
from providers.sim.server import start_sim
from providers.types import ChatRequest, Completion, Failure, HttpRequest, ModelConfig, Outcome
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

HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
OPUS_47 = "us.anthropic.claude-opus-4-7-v1:0"


def model(model_id: str = HAIKU, **kw: Any) -> ModelConfig:
    fields: dict[str, Any] = {"name": "claude", "provider": "bedrock", "model": model_id,
                              "temperature": 1.0, "max_tokens": 512}
    fields.update(kw)
    return ModelConfig(**fields)


async def exchange(session: aiohttp.ClientSession, adapter: Adapter, http: HttpRequest,
                   *, verbatim: bool = True,
                   timeout_s: float = CLIENT_TIMEOUT_S) -> Completion | Failure:
    """What the engine does around an adapter. The URL is sent verbatim (`encoded=True`):
    yarl would otherwise decode `%3A` in the model id and break the signature."""
    url: str | yarl.URL = yarl.URL(http.url, encoded=True) if verbatim else http.url
    try:
        async with asyncio.timeout(timeout_s):
            async with session.request(http.method, url, headers=dict(http.headers),
                                       data=http.body) as response:
                body = await response.read()
                return adapter.parse(response.status, dict(response.headers), body)
    except TimeoutError:
        return Failure(Outcome.TIMEOUT, "client timeout")
    except aiohttp.ClientError as exc:
        return Failure(Outcome.CONNECTION_ERROR, type(exc).__name__)


async def one(config: ModelConfig, tmp_path: Path, faults: str | FaultProfile = "none",
              credentials: SimCredentials = DEFAULT_CREDENTIALS,
              request: ChatRequest = PROMPT,
              timeout_s: float = CLIENT_TIMEOUT_S) -> Completion | Failure:
    async with await start_sim(faults=faults, retry_after_s=RETRY_AFTER_S,
                               credentials=credentials) as sim:
        rehearsed, env = rehearse_model(config, sim.root_url, tmp_path, credentials)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            return await exchange(session, adapter, adapter.build(request),
                                  timeout_s=timeout_s)


@pytest.mark.parametrize("auth", ["sigv4", "api_key"])
async def test_clean_answer(auth: str, tmp_path: Path) -> None:
    result = await one(model(extra={"bedrock_auth": auth}), tmp_path)
    assert isinstance(result, Completion), result
    assert 0 <= orjson.loads(result.text)["probability"] <= 1
    assert result.finish_reason == "end_turn"
    assert result.provider_request_id and result.tokens_in and result.tokens_out


async def test_session_credentials_are_signed_and_verified(tmp_path: Path) -> None:
    creds = SimCredentials(aws_session_token="FwoGZXIvYXdzSIMULATEDsessiontoken00000")
    assert isinstance(await one(model(), tmp_path, credentials=creds), Completion)


async def test_an_unencoded_url_breaks_the_signature(tmp_path: Path) -> None:
    """Why the engine must send `HttpRequest.url` verbatim: yarl turns `%3A` into `:`."""
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            good = await exchange(session, adapter, adapter.build(PROMPT))
            bad = await exchange(session, adapter, adapter.build(PROMPT), verbatim=False)
    assert isinstance(good, Completion)
    assert isinstance(bad, Failure) and bad.outcome is Outcome.AUTH_ERROR
    assert "signature" in bad.detail.lower()


@pytest.mark.parametrize("kind", list(FaultKind), ids=lambda k: k.value)
async def test_every_injected_fault_is_classified(kind: FaultKind, tmp_path: Path) -> None:
    profile = only(kind)
    result = await one(model(), tmp_path, profile, timeout_s=give_up(kind))
    outcome, retry_after = intended(kind)
    assert_classified(result, kind, outcome, retry_after)


async def test_outcomes_reconcile_with_the_simulators_counts(tmp_path: Path) -> None:
    async with await start_sim(faults=f"hostile,slow_delay_s={SLOW_DELAY_S}", seed=5,
                               retry_after_s=RETRY_AFTER_S) as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        seen: Counter[Outcome | None] = Counter()
        async with aiohttp.ClientSession(trust_env=False) as session:
            for i in range(40):
                request = ChatRequest(f"r{i}", PROMPT.system, PROMPT.user, seed=i)
                result = await exchange(session, adapter, adapter.build(request))
                seen[result.outcome if isinstance(result, Failure) else None] += 1
        counts = sim.counts()
    injected = {kind: counts.get(f"fault.{kind.value}", 0) for kind in FaultKind}
    want: Counter[Outcome | None] = Counter()
    for kind, n in injected.items():
        want[intended(kind)[0]] += n
    want[None] += 40 - sum(injected.values())
    assert +seen == +want
    assert sum(injected.values()) > 5


@pytest.mark.parametrize("field", ["aws_secret_access_key", "aws_access_key_id",
                                   "bedrock_api_key"])
async def test_wrong_credentials_are_auth_errors(field: str, tmp_path: Path) -> None:
    auth = "api_key" if field == "bedrock_api_key" else "sigv4"
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(model(extra={"bedrock_auth": auth}), sim.root_url,
                                        tmp_path)
        name = {"aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
                "aws_access_key_id": "AWS_ACCESS_KEY_ID",
                "bedrock_api_key": "AWS_BEARER_TOKEN_BEDROCK"}[field]
        env[name] = "WRONG" + env[name]
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            result = await exchange(session, adapter, adapter.build(PROMPT))
    assert isinstance(result, Failure) and result.outcome is Outcome.AUTH_ERROR
    assert result.http_status == 403 and not result.retryable
    for value in env.values():
        assert value not in result.detail


async def test_recent_claude_temperature_is_omitted_because_the_service_rejects_it(
    tmp_path: Path,
) -> None:
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(model(OPUS_47), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        http = adapter.build(PROMPT)
        assert set(http.omitted) == {"temperature", "seed"}
        # The same body with temperature put back, signed the way the adapter signs.
        body = orjson.loads(http.body)
        body["inferenceConfig"]["temperature"] = 1.0
        raw = orjson.dumps(body)
        headers = signed_headers(
            "POST", http.url, {"Content-Type": "application/json"}, raw,
            AwsCredentials(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]),
            region="us-east-1", service="bedrock")
        async with aiohttp.ClientSession(trust_env=False) as session:
            ok = await exchange(session, adapter, http)
            rejected = await exchange(session, adapter,
                                      HttpRequest("POST", http.url, headers, raw))
    assert isinstance(ok, Completion), ok
    assert isinstance(rejected, Failure) and rejected.outcome is Outcome.BAD_REQUEST
    assert "temperature" in rejected.detail and not rejected.retryable


async def test_the_simulators_own_rate_limit(tmp_path: Path) -> None:
    async with await start_sim(rate_limit_rpm=1) as sim:
        rehearsed, env = rehearse_model(model(), sim.root_url, tmp_path)
        adapter = adapter_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            first = await exchange(session, adapter, adapter.build(PROMPT))
            second = await exchange(session, adapter, adapter.build(PROMPT))
    assert isinstance(first, Completion)
    assert isinstance(second, Failure) and second.outcome is Outcome.RATE_LIMIT
