"""Fault profiles and injection: what a client observes must reconcile with `counts()`."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import aiohttp
import pytest
from simkit import bedrock_url, chat_body, converse_body, signed_with
from yarl import URL

from providers.sim.credentials import DEFAULT_CREDENTIALS as CREDS
from providers.sim.faults import (
    ALL_KINDS,
    PROFILES,
    FaultInjector,
    FaultKind,
    FaultProfile,
    expected_failures,
    parse_faults,
)
from providers.sim.server import SimHandle, start_sim


def test_expected_failures_map_every_counter_to_its_outcome() -> None:
    counts = {
        "requests": 100, "answered.sim": 80, "fault.rate_limit": 2, "fault.rate_limit_bare": 1,
        "rate_limiter.429": 4, "fault.server_error": 3, "fault.connection_reset": 1,
        "fault.truncated_body": 2, "fault.slow": 1, "fault.malformed_json": 1,
        "fault.output_cap": 1, "fault.missing_routing": 1, "fault.refusal": 1,
        "auth_rejected": 1, "bad_request": 1, "tokens_issued": 9,
    }
    assert expected_failures(counts) == {
        "rate_limit": 7, "provider_error": 3, "connection_error": 3, "timeout": 1,
        "invalid_response": 1, "truncated": 1, "missing_routing_metadata": 1, "refusal": 1,
        "auth_error": 1, "bad_request": 1,
    }
    assert expected_failures({"requests": 5}) == {}


def test_the_quickstart_profile_is_light() -> None:
    light = parse_faults("light")
    assert 0 < sum(light.rates.values()) <= 0.05
    assert {FaultKind.SERVER_ERROR, FaultKind.MALFORMED_JSON} <= set(light.rates)
    assert any(k in light.rates for k in (FaultKind.RATE_LIMIT, FaultKind.RATE_LIMIT_BARE))


def test_named_profiles_and_explicit_rates_parse() -> None:
    assert parse_faults("none").rates == {}
    assert parse_faults("flaky") is not None and parse_faults("hostile").rates
    explicit = parse_faults("rate_limit=0.05,server_error=0.02,slow_delay_s=0.5")
    assert explicit.rates == {FaultKind.RATE_LIMIT: 0.05, FaultKind.SERVER_ERROR: 0.02}
    assert explicit.slow_delay_s == 0.5
    layered = parse_faults("flaky,server_error=0.2")  # a named profile's rate is overridden
    assert layered.rates[FaultKind.SERVER_ERROR] == 0.2
    assert layered.rates[FaultKind.RATE_LIMIT] == PROFILES["flaky"].rates[FaultKind.RATE_LIMIT]


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("stormy", "unknown fault profile"),
        ("rate_limt=0.1", "unknown fault kind"),
        ("rate_limit=lots", "not a number"),
        ("rate_limit=0.7,server_error=0.7", "sum to <= 1"),
        ("rate_limit=-0.1", ">= 0"),
        # NaN compares false with everything: the sum check alone let these through, and
        # `hostile` with it injected rate limits only
        ("server_error=nan", "'server_error' must be >= 0 and <= 1, not nan"),
        ("hostile,server_error=nan", "'server_error' must be >= 0 and <= 1, not nan"),
        ("batch_expire=nan", "'batch_expire' must be >= 0 and <= 1, not nan"),
        ("server_error=inf", "'server_error' must be >= 0 and <= 1, not inf"),
        ("slow=1.5", "'slow' must be >= 0 and <= 1, not 1.5"),
        ("slow_delay_s=nan", "must be finite and >= 0"),
        ("batch_seconds=inf", "must be finite and >= 0"),
        # which of the two was meant cannot be told
        ("server_error=0.5,server_error=0.9", "'server_error' is given twice"),
        ("flaky,slow_delay_s=1,slow_delay_s=2", "'slow_delay_s' is given twice"),
        # a later profile replaced every rate before it without a word: the user's 0.5 went
        ("light,server_error=0.5,hostile", "profile 'hostile' comes after "
                                           "'light,server_error=0.5': a profile name may only"),
        ("flaky,none", "profile 'none' comes after 'flaky'"),
        ("flaky,hostile", "profile 'hostile' comes after 'flaky'"),
        ("server_error=0.1,flaky", "profile 'flaky' comes after 'server_error=0.1'"),
    ],
)
def test_bad_fault_specs_fail_loudly(spec: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_faults(spec)


def test_injection_is_deterministic_per_seed_and_honours_rates() -> None:
    profile = FaultProfile("t", {FaultKind.RATE_LIMIT: 0.2, FaultKind.SERVER_ERROR: 0.1})
    first = [FaultInjector(profile, seed=4).draw() for _ in range(1)]
    a, b, c = FaultInjector(profile, 4), FaultInjector(profile, 4), FaultInjector(profile, 5)
    seq_a = [a.draw() for _ in range(3000)]
    assert seq_a == [b.draw() for _ in range(3000)]
    assert seq_a != [c.draw() for _ in range(3000)]
    assert first[0] == seq_a[0]
    assert a.counts == Counter(k for k in seq_a if k is not None)
    assert abs(a.counts[FaultKind.RATE_LIMIT] / 3000 - 0.2) < 0.03
    assert abs(a.counts[FaultKind.SERVER_ERROR] / 3000 - 0.1) < 0.03


async def _observe(http: aiohttp.ClientSession, url: str, timeout: float) -> str:
    """Classify what the client saw, the way an adapter plus the engine would."""
    try:
        async with http.post(url, json=chat_body(user="Q"),
                             timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            raw = await resp.read()
            if resp.status == 429:
                return "rate_limit" if "retry-after" in resp.headers else "rate_limit_bare"
            if resp.status >= 500:
                return "server_error"
            try:
                data = json.loads(raw)
            except ValueError:
                return "malformed_json"
            if "id" not in data or "model" not in data:
                return "missing_routing"
            choice = data["choices"][0]
            if choice["message"].get("refusal"):
                return "refusal"
            if choice["finish_reason"] == "length":
                return "output_cap"
            return "ok"
    except TimeoutError:
        return "slow"
    except aiohttp.ServerDisconnectedError:
        return "connection_reset"
    except aiohttp.ClientPayloadError:
        return "truncated_body"


async def test_every_fault_kind_is_observed_exactly_as_counted() -> None:
    rates = ",".join(f"{k.value}=0.06" for k in ALL_KINDS if k is not FaultKind.SLOW)
    # A clean reply takes milliseconds: 2 s leaves a loaded machine room (at 0.75 s a late
    # clean reply would count as a slow fault), and a slow reply comes half a second after
    # the client gives up, whatever the load.
    give_up_s = 2.0
    spec = rates + f",slow=0.02,slow_delay_s={give_up_s + 0.5}"
    sim = await start_sim(faults=spec, seed=11, retry_after_s=0.5)
    connector = aiohttp.TCPConnector(force_close=True)  # no reuse of connections we broke
    try:
        async with aiohttp.ClientSession(connector=connector) as http:
            seen = Counter([await _observe(http, sim.root_url + "/sim/v1/chat/completions",
                                          give_up_s)
                            for _ in range(150)])
        counts = sim.counts()
    finally:
        await sim.stop()
    injected = {k.value: counts.get(f"fault.{k.value}", 0) for k in ALL_KINDS}
    assert all(n >= 1 for n in injected.values()), injected
    assert {k: seen[k] for k in injected} == injected
    assert seen["ok"] == counts["answered.sim"] == 150 - sum(injected.values())
    assert counts["requests"] == 150


async def test_fault_sequence_repeats_for_the_same_seed() -> None:
    async def run() -> list[str]:
        sim = await start_sim(faults="rate_limit=0.3,server_error=0.3", seed=3)
        try:
            async with aiohttp.ClientSession() as http:
                return [await _observe(http, sim.root_url + "/sim/v1/chat/completions", 2.0)
                        for _ in range(20)]
        finally:
            await sim.stop()

    assert await run() == await run()


# ----- each provider's own shape of each fault -------------------------------------------
async def _send(http: aiohttp.ClientSession, sim: SimHandle, provider: str
                ) -> tuple[int, dict[str, str], bytes]:
    root = sim.root_url
    body: Any = chat_body(user="Q")
    headers: dict[str, str] = {}
    url = root + {
        "openai": "/openai/v1/chat/completions",
        "groq": "/groq/openai/v1/chat/completions",
        "deepinfra": "/deepinfra/v1/openai/chat/completions",
        "azure": "/azure/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
        "vertex-openai": "/vertex/v1/projects/p/locations/l/endpoints/openapi/chat/completions",
        "gemini": "/vertex/v1/projects/p/locations/l/publishers/google/models/g:generateContent",
        "bedrock": "",
    }[provider]
    if provider == "groq":
        headers["Authorization"] = f"Bearer {CREDS.groq_api_key}"
    elif provider == "deepinfra":
        headers["Authorization"] = f"Bearer {CREDS.deepinfra_api_key}"
    elif provider == "azure":
        headers["api-key"] = CREDS.azure_api_key
    elif provider in ("vertex-openai", "gemini"):
        token, _ = sim.state.tokens.issue()
        headers["Authorization"] = f"Bearer {token}"
        if provider == "gemini":
            body = {"contents": [{"role": "user", "parts": [{"text": "Q"}]}]}
    data = json.dumps(body).encode()
    target: str | URL = url
    if provider == "bedrock":
        url = bedrock_url(root, "anthropic.claude-3-haiku-20240307-v1:0")
        data = json.dumps(converse_body("Q")).encode()
        headers = signed_with(CREDS, url, data)
        target = URL(url, encoded=True)
    headers.setdefault("Content-Type", "application/json")
    async with http.post(target, data=data, headers=headers) as resp:
        return resp.status, dict(resp.headers), await resp.read()


PROVIDERS = ["openai", "groq", "deepinfra", "azure", "vertex-openai", "gemini", "bedrock"]


def _refused(provider: str, data: dict[str, Any]) -> bool:
    if provider == "bedrock":
        return bool(data["stopReason"] == "content_filtered")
    if provider == "gemini":
        return bool(data["candidates"][0]["finishReason"] == "SAFETY")
    choice = data["choices"][0]
    if provider == "azure":
        return bool(choice["finish_reason"] == "content_filter")
    if provider in ("groq", "deepinfra"):  # no refusal field: the model says it in prose
        return "can't help" in choice["message"]["content"]
    return bool(choice["message"]["refusal"])


def _truncated(provider: str, data: dict[str, Any]) -> bool:
    if provider == "bedrock":
        return bool(data["stopReason"] == "max_tokens")
    if provider == "gemini":
        return bool(data["candidates"][0]["finishReason"] == "MAX_TOKENS")
    return bool(data["choices"][0]["finish_reason"] == "length")


def _has_routing(provider: str, headers: dict[str, str], data: dict[str, Any]) -> bool:
    if provider == "bedrock":
        return "x-amzn-RequestId" in headers
    if provider == "gemini":
        return "responseId" in data and "modelVersion" in data
    if provider == "groq":
        return "x_groq" in data and "id" in data
    return "id" in data and "model" in data


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_provider_speaks_each_fault_in_its_own_shape(provider: str) -> None:
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=2)) as http:
        for kind in ("rate_limit", "rate_limit_bare", "server_error", "refusal", "output_cap",
                     "missing_routing", "malformed_json", "none"):
            spec = "none" if kind == "none" else f"{kind}=1"
            async with await start_sim(faults=spec, retry_after_s=2.0) as sim:
                status, headers, raw = await _send(http, sim, provider)
                counts = sim.counts()
            assert counts.get(f"fault.{kind}", 0) == (0 if kind == "none" else 1)
            if kind.startswith("rate_limit"):
                assert status == 429
                assert ("Retry-After" in headers) == (kind == "rate_limit")
                if provider == "azure" and kind == "rate_limit":
                    assert headers["retry-after-ms"] == "2000"
                continue
            if kind == "server_error":
                assert status >= 500 or (provider == "bedrock" and status == 424)
                continue
            assert status == 200
            if kind == "malformed_json":
                with pytest.raises(ValueError):
                    json.loads(raw)
                continue
            data = json.loads(raw)
            assert _refused(provider, data) == (kind == "refusal")
            assert _truncated(provider, data) == (kind == "output_cap")
            assert _has_routing(provider, headers, data) == (kind != "missing_routing")


async def test_connection_faults_are_seen_as_such() -> None:
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        for kind, error in (("connection_reset", aiohttp.ServerDisconnectedError),
                            ("truncated_body", aiohttp.ClientPayloadError)):
            async with await start_sim(faults=f"{kind}=1") as sim:
                for provider in PROVIDERS:
                    with pytest.raises(error):
                        await _send(http, sim, provider)
                assert sim.counts()[f"fault.{kind}"] == len(PROVIDERS)


async def test_slow_fault_outlasts_a_client_timeout() -> None:
    async with await start_sim(faults="slow=1,slow_delay_s=1.0") as sim:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(asyncio.TimeoutError):
                async with http.post(sim.root_url + "/sim/v1/chat/completions",
                                     json=chat_body(),
                                     timeout=aiohttp.ClientTimeout(total=0.3)):
                    pass
        assert sim.counts()["fault.slow"] == 1
