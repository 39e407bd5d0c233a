"""End to end: our built requests over real HTTP (aiohttp) to the provider simulator, for every
OpenAI-shaped provider and every fault the simulator injects, reconciled with its counts."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from providers.base import Adapter
from providers.registry import adapter_for
from providers.sim.credentials import DEFAULT_CREDENTIALS as CREDS
from providers.sim.faults import INTENDED_OUTCOME, FaultKind, FaultProfile
from providers.sim.server import start_sim
from providers.types import (
    ChatRequest,
    Completion,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)
from tests.providers.sim_client import (
    CLIENT_TIMEOUT_S,
    PROMPT,
    RETRY_AFTER_S,
    SLOW_DELAY_S,
    assert_classified,
    give_up,
    only,
)

ENV = {
    "GROQ_API_KEY": CREDS.groq_api_key,
    "DEEPINFRA_API_KEY": CREDS.deepinfra_api_key,
    "AZURE_OPENAI_API_KEY": CREDS.azure_api_key,
    "SIM_OPENAI_KEY": CREDS.openai_api_key,
}
PROVIDERS = ("sim", "openai", "groq", "deepinfra", "azure")


def config_for(provider: str, root: str, **kw: Any) -> ModelConfig:
    paths = {
        "sim": "/sim/v1",
        "openai": "/openai/v1",
        "groq": "/groq/openai/v1",
        "deepinfra": "/deepinfra/v1/openai",
        "azure": "/azure",
    }
    fields: dict[str, Any] = {
        "name": f"{provider}-model",
        "provider": provider,
        "model": "gpt-5.6-luna" if provider == "azure" else "openai/gpt-oss-120b",
        "base_url": root + paths[provider],
        "temperature": 1.0,
        "max_tokens": 512,
        "json_mode": provider != "openai",
        "api_key_env": "SIM_OPENAI_KEY" if provider == "openai" else None,
        "api_version": "2024-10-21" if provider == "azure" else None,
    }
    fields.update(kw)
    return ModelConfig(**fields)


async def exchange(
    session: aiohttp.ClientSession, adapter: Adapter, http: HttpRequest,
    timeout_s: float = CLIENT_TIMEOUT_S,
) -> Completion | Failure:
    """What the engine does around an adapter: send, read, and turn transport errors into
    connection_error / timeout failures (docs/interfaces.md)."""
    try:
        async with asyncio.timeout(timeout_s):
            async with session.request(
                http.method, http.url, headers=dict(http.headers), data=http.body
            ) as response:
                body = await response.read()
                return adapter.parse(response.status, dict(response.headers), body)
    except TimeoutError:
        return Failure(Outcome.TIMEOUT, "client timeout")
    except aiohttp.ClientError as exc:
        return Failure(Outcome.CONNECTION_ERROR, type(exc).__name__)


async def one(provider: str, faults: str | FaultProfile,
              timeout_s: float = CLIENT_TIMEOUT_S, **kw: Any) -> Completion | Failure:
    async with await start_sim(faults=faults, retry_after_s=RETRY_AFTER_S) as sim:
        adapter = adapter_for(config_for(provider, sim.root_url, **kw), ENV)
        async with aiohttp.ClientSession(trust_env=False) as session:
            return await exchange(session, adapter, adapter.build(PROMPT), timeout_s)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_clean_answer(provider: str) -> None:
    result = await one(provider, "none")
    assert isinstance(result, Completion), result
    assert orjson.loads(result.text)["probability"] is not None
    assert result.provider_request_id and result.model_reported
    assert result.tokens_in and result.tokens_out
    assert result.finish_reason == "stop"
    if provider == "deepinfra":
        assert result.cost_usd is not None and result.cost_usd > 0
    if provider == "groq":
        assert result.provider_request_id.startswith("req_")
        assert result.limits.limit_requests == 1_000_000
        assert result.limits.reset_requests_s is not None
        assert 0 < result.limits.reset_requests_s <= 86_400  # the rest of the simulated day


def expected(provider: str, kind: FaultKind) -> tuple[Outcome | None, float | None]:
    """(outcome, retry_after_s) an injected fault must be classified as; None = a completion."""
    if kind is FaultKind.RATE_LIMIT:
        return Outcome.RATE_LIMIT, RETRY_AFTER_S
    if kind is FaultKind.RATE_LIMIT_BARE:
        # Azure's 429 prose always says "Please retry after 6 seconds"; the others say nothing.
        return Outcome.RATE_LIMIT, 6.0 if provider == "azure" else None
    if kind is FaultKind.REFUSAL and provider in ("groq", "deepinfra"):
        return None, None  # their wire has no refusal signal: the refusal is the model's text
    return INTENDED_OUTCOME[kind], None


@pytest.mark.parametrize("kind", list(FaultKind), ids=lambda k: k.value)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_injected_fault_is_classified(provider: str, kind: FaultKind) -> None:
    profile = only(kind)
    result = await one(provider, profile, timeout_s=give_up(kind))
    outcome, retry_after = expected(provider, kind)
    if outcome is None:
        assert isinstance(result, Completion), result
        assert "can't help" in result.text  # kept raw; the answer parser rejects it
        return
    assert_classified(result, kind, outcome, retry_after)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_outcomes_reconcile_with_the_simulators_counts(provider: str) -> None:
    """Under a hostile mix, every fault the simulator says it injected is seen as its class."""
    async with await start_sim(faults=f"hostile,slow_delay_s={SLOW_DELAY_S}", seed=11,
                               retry_after_s=RETRY_AFTER_S) as sim:
        adapter = adapter_for(config_for(provider, sim.root_url), ENV)
        seen: Counter[Outcome | None] = Counter()
        async with aiohttp.ClientSession(trust_env=False) as session:
            for i in range(40):
                request = ChatRequest(f"r{i}", PROMPT.system, PROMPT.user, seed=i)
                result = await exchange(session, adapter, adapter.build(request))
                seen[result.outcome if isinstance(result, Failure) else None] += 1
        counts = sim.counts()
    want: Counter[Outcome | None] = Counter()
    for kind in FaultKind:
        want[expected(provider, kind)[0]] += counts.get(f"fault.{kind.value}", 0)
    want[None] += 40 - sum(counts.get(f"fault.{k.value}", 0) for k in FaultKind)
    assert +seen == +want
    assert sum(counts.get(f"fault.{k.value}", 0) for k in FaultKind) > 5  # the mix did inject


@pytest.mark.parametrize("provider", ("groq", "deepinfra", "azure"))
async def test_wrong_key_is_auth_error(provider: str) -> None:
    wrong = {name: "WRONG-" + value for name, value in ENV.items()}
    async with await start_sim() as sim:
        adapter = adapter_for(config_for(provider, sim.root_url), wrong)
        async with aiohttp.ClientSession(trust_env=False) as session:
            result = await exchange(session, adapter, adapter.build(PROMPT))
    assert isinstance(result, Failure) and result.outcome is Outcome.AUTH_ERROR
    assert result.http_status == 401 and not result.retryable
    assert all(value not in result.detail for value in wrong.values())


async def test_azure_gpt5_temperature_is_omitted_because_the_service_rejects_it() -> None:
    async with await start_sim() as sim:
        config = config_for("azure", sim.root_url, temperature=0.7)
        adapter = adapter_for(config, ENV)
        http = adapter.build(PROMPT)
        assert http.omitted == ("temperature",)
        forced_body = {**orjson.loads(http.body), "temperature": 0.7}
        forced = HttpRequest(http.method, http.url, http.headers, orjson.dumps(forced_body))
        async with aiohttp.ClientSession(trust_env=False) as session:
            ok = await exchange(session, adapter, http)
            rejected = await exchange(session, adapter, forced)
    assert isinstance(ok, Completion)
    assert isinstance(rejected, Failure) and rejected.outcome is Outcome.BAD_REQUEST
    assert "temperature" in rejected.detail


async def test_bad_requests_are_permanent() -> None:
    async with await start_sim() as sim, aiohttp.ClientSession(trust_env=False) as session:
        deepinfra = adapter_for(config_for("deepinfra", sim.root_url, max_tokens=20000), ENV)
        too_long = await exchange(session, deepinfra, deepinfra.build(PROMPT))
        azure = adapter_for(config_for("azure", sim.root_url), ENV)
        http = azure.build(PROMPT)
        no_version = HttpRequest(http.method, http.url.split("?")[0], http.headers, http.body)
        not_found = await exchange(session, azure, no_version)
    assert isinstance(too_long, Failure) and too_long.outcome is Outcome.BAD_REQUEST
    assert "max_tokens" in too_long.detail
    assert isinstance(not_found, Failure) and not_found.outcome is Outcome.BAD_REQUEST
    assert not_found.http_status == 404


@pytest.mark.parametrize("provider", ("groq", "azure"))
async def test_simulators_own_rate_limit_is_a_rate_limit_with_a_wait(provider: str) -> None:
    async with await start_sim(rate_limit_rpm=1) as sim:
        adapter = adapter_for(config_for(provider, sim.root_url), ENV)
        async with aiohttp.ClientSession(trust_env=False) as session:
            first = await exchange(session, adapter, adapter.build(PROMPT))
            second = await exchange(session, adapter, adapter.build(PROMPT))
        assert sim.counts().get("rate_limiter.429") == 1
    assert isinstance(first, Completion)
    assert isinstance(second, Failure) and second.outcome is Outcome.RATE_LIMIT
    assert second.retry_after_s is not None and second.retry_after_s > 0


async def test_groqs_429_ends_with_the_billing_link_as_groqs_own_does() -> None:
    """Groq ends its per-minute 429 with "Need more tokens? Upgrade to Dev Tier today at
    https://console.groq.com/settings/billing", words that once read as a spent quota: the
    simulator says them too, and the adapter still sees a rate limit."""
    async with await start_sim(rate_limit_rpm=1) as sim:
        adapter = adapter_for(config_for("groq", sim.root_url), ENV)
        async with aiohttp.ClientSession(trust_env=False) as session:
            await exchange(session, adapter, adapter.build(PROMPT))
            limited = await exchange(session, adapter, adapter.build(PROMPT))
    assert isinstance(limited, Failure) and limited.outcome is Outcome.RATE_LIMIT
    assert limited.detail.endswith(
        "Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing"
    )
    assert not limited.quota_exhausted


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rehearsed_configs_work_with_our_adapters(provider: str, tmp_path: Path) -> None:
    """The simulator's `rehearse_model` and our adapters agree on URLs and credentials."""
    from providers.sim.rehearse import rehearse_model

    spec_entry = ModelConfig(
        name=f"{provider}-spec", provider=provider,
        model="gpt-5.6-luna" if provider == "azure" else "openai/gpt-oss-120b",
        base_url="http://127.0.0.1:8000/v1" if provider == "openai" else None,
        api_version="2024-10-21" if provider == "azure" else None, max_tokens=512,
    )
    async with await start_sim() as sim:
        config, env = rehearse_model(spec_entry, sim.root_url, tmp_path)
        adapter = adapter_for(config, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            result = await exchange(session, adapter, adapter.build(PROMPT))
    assert isinstance(result, Completion), result
