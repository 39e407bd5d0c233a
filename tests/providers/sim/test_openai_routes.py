"""The OpenAI-shaped routes over real HTTP: auth, parameter rules, provider flavours."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI
from promptkit import SYSTEM, single_prompt
from simkit import chat_body

from providers.sim.credentials import SimCredentials
from providers.sim.server import SIMULATED_HEADER, SimHandle

GROQ = "/groq/openai/v1/chat/completions"
DEEPINFRA = "/deepinfra/v1/openai/chat/completions"
AZURE_DEPLOYMENT = "/azure/openai/deployments/{d}/chat/completions?api-version=2024-10-21"
AZURE_V1 = "/azure/openai/v1/chat/completions"


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    async with http.post(url, data=data, headers=hdrs) as resp:
        raw = await resp.read()
        return resp.status, dict(resp.headers), json.loads(raw)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("prefix", ["/openai/v1", "/sim/v1"])
async def test_official_openai_client_completes_against_generic_routes(
    sim: SimHandle, prefix: str
) -> None:
    client = AsyncOpenAI(base_url=sim.root_url + prefix, api_key="anything", max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(
        model="sim-coherent",
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": single_prompt(7, frozenset({0, 1}))}],
        seed=3, max_completion_tokens=200,
    )
    completion = raw.parse()
    assert raw.headers[SIMULATED_HEADER] == "true"
    assert completion.model == "sim/coherent"
    assert completion.id.startswith("chatcmpl-")
    assert completion.choices[0].finish_reason == "stop"
    value = json.loads(completion.choices[0].message.content or "")["probability"]
    assert 0.0 < value < 1.0
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    await client.close()


async def test_official_openai_client_completes_against_groq(
    sim: SimHandle, creds: SimCredentials
) -> None:
    client = AsyncOpenAI(base_url=sim.root_url + "/groq/openai/v1",
                         api_key=creds.groq_api_key, max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(
        model="openai/gpt-oss-120b",
        messages=[{"role": "user", "content": single_prompt(2, frozenset({3}))}],
    )
    completion = raw.parse()
    assert "probability" in json.loads(completion.choices[0].message.content or "")
    extra = completion.model_extra or {}
    assert extra["x_groq"]["id"].startswith("req_")
    assert raw.headers["x-ratelimit-reset-tokens"].endswith("s")
    assert int(raw.headers["x-ratelimit-limit-requests"]) > 0
    with pytest.raises(openai.AuthenticationError):
        bad = AsyncOpenAI(base_url=sim.root_url + "/groq/openai/v1", api_key="gsk_wrong",
                          max_retries=0)
        await bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    await client.close()
    assert sim.counts()["answered.groq"] == 1
    assert sim.counts()["auth_rejected"] == 1


@pytest.mark.parametrize("path", [GROQ, DEEPINFRA])
async def test_bearer_providers_reject_missing_and_wrong_keys(
    sim: SimHandle, http: aiohttp.ClientSession, path: str
) -> None:
    status, _, _ = await post(http, sim.root_url + path, chat_body())
    assert status == 401
    status, _, _ = await post(http, sim.root_url + path, chat_body(), bearer("wrong"))
    assert status == 401
    assert sim.counts()["auth_rejected"] == 2
    assert "requests" in sim.counts() and not any(k.startswith("answered") for k in sim.counts())


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"n": 2}, "n"),
    ],
)
async def test_groq_rejects_unsupported_openai_options(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials,
    extra: dict[str, Any], param: str,
) -> None:
    status, _, body = await post(http, sim.root_url + GROQ, chat_body(**extra),
                                 bearer(creds.groq_api_key))
    assert status == 400
    assert body["error"]["param"] == param
    assert set(body["error"]) >= {"message", "type", "code"}
    # The same body is fine for the generic server.
    status, _, _ = await post(http, sim.root_url + "/openai/v1/chat/completions",
                              chat_body(**extra))
    assert status == 200


async def test_groq_accepts_n_equal_one_and_rejects_message_names(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    ok, _, _ = await post(http, sim.root_url + GROQ, chat_body(n=1), bearer(creds.groq_api_key))
    named = chat_body()
    named["messages"][1]["name"] = "alice"
    bad, _, _ = await post(http, sim.root_url + GROQ, named, bearer(creds.groq_api_key))
    assert (ok, bad) == (200, 400)


async def test_deepinfra_reports_estimated_cost_and_terse_429s(
    http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    from providers.sim.server import start_sim

    async with await start_sim(faults="rate_limit_bare=1") as busy:
        status, _, body = await post(http, busy.root_url + DEEPINFRA, chat_body(),
                                     bearer(creds.deepinfra_api_key))
        assert (status, body) == (429, {"error": {"message": "Rate limited"}})
    async with await start_sim() as calm:
        status, _, body = await post(http, calm.root_url + DEEPINFRA,
                                     chat_body("meta-llama/Meta-Llama-3.1-8B-Instruct"),
                                     bearer(creds.deepinfra_api_key))
        assert status == 200
        usage = body["usage"]
        assert usage["estimated_cost"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_azure_deployment_route_auth_and_metadata(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    url = sim.root_url + AZURE_DEPLOYMENT.format(d="gpt-4o-mini")
    body = {"messages": chat_body()["messages"], "temperature": 0.7}
    status, headers, data = await post(http, url, body, {"api-key": creds.azure_api_key})
    assert status == 200
    assert headers["apim-request-id"] and headers[SIMULATED_HEADER] == "true"
    assert "x-ratelimit-remaining-requests" in headers
    assert data["prompt_filter_results"][0]["content_filter_results"]
    assert data["choices"][0]["content_filter_results"]["hate"]["filtered"] is False
    status, _, _ = await post(http, url, body, bearer(creds.azure_api_key))
    assert status == 200
    status, _, data = await post(http, url, body, {"api-key": "wrong"})
    assert status == 401 and data["error"]["code"] == "401"
    status, _, _ = await post(http, url, body)
    assert status == 401
    no_version = sim.root_url + "/azure/openai/deployments/gpt-4o-mini/chat/completions"
    status, _, data = await post(http, no_version, body, {"api-key": creds.azure_api_key})
    assert status == 404 and data["error"]["code"] == "404"


@pytest.mark.parametrize("deployment", ["gpt-5.6-luna", "my-gpt-5-mini", "o3-mini"])
async def test_azure_reasoning_deployments_reject_temperature_and_max_tokens(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials, deployment: str
) -> None:
    url = sim.root_url + AZURE_DEPLOYMENT.format(d=deployment)
    key = {"api-key": creds.azure_api_key}
    messages = chat_body()["messages"]
    status, _, data = await post(http, url, {"messages": messages, "temperature": 0.7}, key)
    assert status == 400
    assert (data["error"]["code"], data["error"]["param"]) == ("unsupported_value", "temperature")
    status, _, data = await post(http, url, {"messages": messages, "max_tokens": 50}, key)
    assert (status, data["error"]["code"]) == (400, "unsupported_parameter")
    status, _, _ = await post(http, url, {"messages": messages,
                                          "max_completion_tokens": 500}, key)
    assert status == 200


async def test_azure_v1_route_takes_deployment_as_model(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    key = {"api-key": creds.azure_api_key}
    status, _, data = await post(http, sim.root_url + AZURE_V1, chat_body("gpt-4o"), key)
    assert status == 200 and data["model"].startswith("sim/")
    status, _, data = await post(http, sim.root_url + AZURE_V1,
                                 chat_body("gpt-5-chat", temperature=0.2), key)
    assert status == 400 and data["error"]["code"] == "unsupported_value"


@pytest.mark.parametrize(
    ("path", "auth", "shape"),
    [
        ("/openai/v1/chat/completions", None, "openai"),
        (GROQ, "groq", "openai"),
        (DEEPINFRA, "deepinfra", "message"),
        ("/azure/openai/v1/chat/completions", "azure", "openai"),
    ],
)
async def test_malformed_bodies_get_each_providers_400(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials,
    path: str, auth: str | None, shape: str,
) -> None:
    headers: dict[str, str] = {}
    if auth == "groq":
        headers = bearer(creds.groq_api_key)
    elif auth == "deepinfra":
        headers = bearer(creds.deepinfra_api_key)
    elif auth == "azure":
        headers = {"api-key": creds.azure_api_key}
    for body in (b"{not json", {"model": "m"}, {"messages": [{"role": "user", "content": "x"}]},
                 {"model": "m", "messages": [{"role": "user", "content": 5}]}):
        status, _, data = await post(http, sim.root_url + path, body, headers)
        assert status == 400, body
        assert isinstance(data["error"]["message"], str)
        if shape == "openai":
            assert "type" in data["error"]
    assert sim.counts()["bad_request"] == 4


async def test_tiny_output_cap_truncates_with_length(
    sim: SimHandle, http: aiohttp.ClientSession
) -> None:
    prompt = single_prompt(1, frozenset({2}))
    status, _, data = await post(http, sim.root_url + "/sim/v1/chat/completions",
                                 chat_body(user=prompt, max_completion_tokens=2))
    assert status == 200
    choice = data["choices"][0]
    assert choice["finish_reason"] == "length"
    assert len(choice["message"]["content"]) <= 8
    assert data["usage"]["completion_tokens"] <= 2


async def test_groq_refuses_raw_reasoning_with_json_mode(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    body = chat_body(reasoning_format="raw", response_format={"type": "json_object"})
    status, _, data = await post(http, sim.root_url + GROQ, body, bearer(creds.groq_api_key))
    assert status == 400 and data["error"]["param"] == "reasoning_format"
    body = chat_body(reasoning_format="hidden", response_format={"type": "json_object"})
    status, _, _ = await post(http, sim.root_url + GROQ, body, bearer(creds.groq_api_key))
    assert status == 200
