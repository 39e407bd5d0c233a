"""Bedrock, Vertex and the OAuth token endpoint over real HTTP, with real client libraries."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import aiohttp
import pytest
import urllib3
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from google.auth.transport.urllib3 import Request as GoogleRequest
from google.oauth2 import service_account
from simkit import CLOUD_SCOPE, bedrock_url, botocore_signed, converse_body, signed_with
from yarl import URL

from providers.sim.credentials import SimCredentials
from providers.sim.server import SIMULATED_HEADER, SimHandle, start_sim

HAIKU3 = "anthropic.claude-3-haiku-20240307-v1:0"
OPUS47 = "us.anthropic.claude-opus-4-7-v1:0"
SONNET45 = "anthropic.claude-sonnet-4-5-20250929-v1:0"


async def converse(
    http: aiohttp.ClientSession, sim: SimHandle, creds: SimCredentials, model: str,
    body: dict[str, Any] | bytes, *, secret: str | None = None, key: str | None = None,
) -> tuple[int, dict[str, str], Any]:
    url = bedrock_url(sim.root_url, model)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = botocore_signed(url, data, key or creds.aws_access_key_id,
                              secret or creds.aws_secret_access_key)
    async with http.post(URL(url, encoded=True), data=data, headers=headers) as resp:
        return resp.status, dict(resp.headers), json.loads(await resp.read())


async def test_botocore_signed_converse_is_accepted(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    status, headers, data = await converse(http, sim, creds, HAIKU3, converse_body(
        inferenceConfig={"maxTokens": 300, "temperature": 1.0}))
    assert status == 200, data
    assert headers["x-amzn-RequestId"] and headers[SIMULATED_HEADER] == "true"
    assert data["stopReason"] == "end_turn"
    assert data["output"]["message"]["content"][0]["text"].startswith("{")
    assert set(data["usage"]) == {"inputTokens", "outputTokens", "totalTokens"}
    assert "latencyMs" in data["metrics"]
    assert sim.counts()["answered.bedrock"] == 1


async def test_bad_signature_and_unknown_key_get_aws_403s(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    status, headers, data = await converse(http, sim, creds, HAIKU3, converse_body(),
                                           secret="not-the-secret")
    assert status == 403
    assert headers["x-amzn-ErrorType"].startswith("InvalidSignatureException:")
    assert "signature we calculated does not match" in data["message"]
    status, headers, _ = await converse(http, sim, creds, HAIKU3, converse_body(),
                                        key="AKIAUNKNOWN000000000")
    assert status == 403
    assert headers["x-amzn-ErrorType"].startswith("UnrecognizedClientException")
    async with http.post(bedrock_url(sim.root_url, HAIKU3), json=converse_body()) as resp:
        assert resp.status == 403
        assert resp.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationToken")
    assert sim.counts()["auth_rejected"] == 3


async def test_signing_the_decoded_model_id_is_rejected(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    """Signing `...v1:0` but sending `...v1%3A0` (a classic adapter bug) fails as on AWS."""
    body = json.dumps(converse_body()).encode()
    signed_url = f"{sim.root_url}/bedrock/model/{HAIKU3}/converse"
    headers = signed_with(creds, signed_url, body)
    async with http.post(URL(bedrock_url(sim.root_url, HAIKU3), encoded=True), data=body,
                         headers=headers) as resp:
        assert resp.status == 403
        assert resp.headers["x-amzn-ErrorType"].startswith("InvalidSignatureException")


async def test_bedrock_api_key_bearer(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    url = bedrock_url(sim.root_url, HAIKU3)
    ok = {"Authorization": f"Bearer {creds.bedrock_api_key}"}
    async with http.post(URL(url, encoded=True), json=converse_body(), headers=ok) as resp:
        assert resp.status == 200
    bad = {"Authorization": "Bearer ABSKwrong"}
    async with http.post(URL(url, encoded=True), json=converse_body(), headers=bad) as resp:
        assert resp.status == 403
        assert "x-amzn-ErrorType" in resp.headers


@pytest.mark.parametrize(
    ("model", "body", "needle"),
    [
        (HAIKU3, converse_body(seed=7), "extraneous key [seed]"),
        (HAIKU3, converse_body(inferenceConfig={"maxTokens": 10, "seed": 1}), "[seed]"),
        (HAIKU3, converse_body(additionalModelRequestFields={"seed": 1}), "seed"),
        (OPUS47, converse_body(inferenceConfig={"temperature": 1.0}), "deprecated"),
        ("anthropic.claude-opus-5-v1:0", converse_body(inferenceConfig={"topP": 0.9}),
         "deprecated"),
        (SONNET45, converse_body(inferenceConfig={"temperature": 0.5, "topP": 0.9}),
         "cannot both be specified"),
        (HAIKU3, converse_body(inferenceConfig={"maxTokens": 0}), "maxTokens"),
        (HAIKU3, {"system": [{"text": "x"}]}, "messages"),
        (HAIKU3, b"{oops", "parse"),
    ],
)
async def test_bedrock_validation_exceptions(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials,
    model: str, body: dict[str, Any] | bytes, needle: str,
) -> None:
    status, headers, data = await converse(http, sim, creds, model, body)
    assert status == 400
    assert headers["x-amzn-ErrorType"].split(":")[0] in (
        "ValidationException", "SerializationException")
    assert needle in data["message"]


async def test_bedrock_accepts_what_models_allow_and_signals_max_tokens(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    status, _, _ = await converse(http, sim, creds, OPUS47, converse_body(
        inferenceConfig={"maxTokens": 500}))
    assert status == 200
    status, _, _ = await converse(http, sim, creds, SONNET45, converse_body(
        inferenceConfig={"temperature": 0.5}))
    assert status == 200
    status, _, data = await converse(http, sim, creds, HAIKU3, converse_body(
        inferenceConfig={"maxTokens": 1}))
    assert (status, data["stopReason"]) == (200, "max_tokens")


# ----- Vertex and OAuth ----------------------------------------------------------------
def _google_credentials(sim: SimHandle, creds: SimCredentials) -> Any:
    info = creds.service_account_info(sim.root_url + "/oauth2/token")
    return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
        info, scopes=[CLOUD_SCOPE])


async def _fetch_token(sim: SimHandle, creds: SimCredentials) -> str:
    credentials = _google_credentials(sim, creds)
    request = GoogleRequest(urllib3.PoolManager(retries=False))  # type: ignore[no-untyped-call]
    await asyncio.to_thread(credentials.refresh, request)
    assert credentials.token and credentials.expiry is not None
    return str(credentials.token)


def gemini_url(sim: SimHandle, model: str = "gemini-3.5-flash", version: str = "v1") -> str:
    return (f"{sim.root_url}/vertex/{version}/projects/sim-project/locations/us-central1/"
            f"publishers/google/models/{model}:generateContent")


def gemini_body(**config: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}],
                            "systemInstruction": {"parts": [{"text": "sys"}]}}
    if config:
        body["generationConfig"] = config
    return body


async def test_google_auth_fetches_a_token_and_gemini_accepts_it(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    token = await _fetch_token(sim, creds)
    assert sim.counts()["tokens_issued"] == 1
    auth = {"Authorization": f"Bearer {token}"}
    for version in ("v1", "v1beta1"):
        async with http.post(gemini_url(sim, version=version), headers=auth,
                             json=gemini_body(temperature=1.0, seed=5, maxOutputTokens=500,
                                              responseMimeType="application/json")) as resp:
            data = await resp.json()
            assert resp.status == 200, data
            assert resp.headers[SIMULATED_HEADER] == "true"
    candidate = data["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert candidate["content"]["parts"][0]["text"]
    assert data["modelVersion"].startswith("sim/") and data["responseId"]
    usage = data["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]


async def test_vertex_openai_endpoint_with_issued_token(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    token = await _fetch_token(sim, creds)
    url = (f"{sim.root_url}/vertex/v1/projects/p/locations/us-east5/endpoints/openapi/"
           "chat/completions")
    body = {"model": "meta/llama-4-maverick-17b-128e-instruct-maas",
            "messages": [{"role": "user", "content": "hello"}]}
    async with http.post(url, json=body, headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"]
    async with http.post(url, json=body, headers={"Authorization": "Bearer ya29.forged"}) as r:
        assert r.status == 401
        assert (await r.json())["error"]["status"] == "UNAUTHENTICATED"


async def test_vertex_rejects_foreign_and_expired_tokens(
    http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    async with await start_sim(token_ttl_s=0.2) as sim:
        # The token store on a fake clock: with a real one, a loaded machine could let the
        # 0.2 s token lapse before its first use.
        now = [time.time()]
        sim.state.tokens.clock = lambda: now[0]
        token = await _fetch_token(sim, creds)
        async with http.post(gemini_url(sim), json=gemini_body(),
                             headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 200
        now[0] += 0.25
        async with http.post(gemini_url(sim), json=gemini_body(),
                             headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 401
            error = (await resp.json())["error"]
            assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
        async with http.post(gemini_url(sim), json=gemini_body()) as resp:
            assert resp.status == 401


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (gemini_body(temprature=1.0), 'Unknown name "temprature"'),
        ({**gemini_body(), "seed": 3}, 'Unknown name "seed"'),
        ({"contents": []}, "at least one parts"),
        (gemini_body(temperature=3.0), "temperature"),
        (gemini_body(maxOutputTokens=0), "max_output_tokens"),
    ],
)
async def test_gemini_rejects_unknown_fields_and_bad_values(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials,
    body: dict[str, Any], needle: str,
) -> None:
    token = await _fetch_token(sim, creds)
    async with http.post(gemini_url(sim), json=body,
                         headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
        assert needle in error["message"]


async def test_gemini_accepts_snake_case_and_signals_max_tokens(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    token = await _fetch_token(sim, creds)
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generation_config": {"max_output_tokens": 1}}
    async with http.post(gemini_url(sim), json=body,
                         headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200
        assert (await resp.json())["candidates"][0]["finishReason"] == "MAX_TOKENS"


def _jwt(claims: dict[str, Any], key: rsa.RSAPrivateKey) -> str:
    def enc(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    head = enc({"alg": "RS256", "typ": "JWT"}) + "." + enc(claims)
    sig = key.sign(head.encode(), padding.PKCS1v15(), hashes.SHA256())
    return head + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


async def test_token_endpoint_rejects_bad_grants(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    own = serialization.load_pem_private_key(creds.sa_private_key_pem.encode(), None)
    assert isinstance(own, rsa.RSAPrivateKey)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    now = int(time.time())
    good = {"iss": creds.sa_client_email, "scope": CLOUD_SCOPE,
            "aud": sim.root_url + "/oauth2/token", "iat": now, "exp": now + 3600}
    grant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    cases = [
        ({"grant_type": grant, "assertion": _jwt(good, stranger)}, "invalid_grant"),
        ({"grant_type": grant, "assertion": _jwt({**good, "exp": now - 10}, own)},
         "invalid_grant"),
        ({"grant_type": grant, "assertion": _jwt({**good, "aud": "https://x"}, own)},
         "invalid_grant"),
        ({"grant_type": grant, "assertion": _jwt({**good, "iss": "a@b.c"}, own)},
         "invalid_grant"),
        ({"grant_type": "password", "assertion": _jwt(good, own)}, "unsupported_grant_type"),
        ({"grant_type": grant, "assertion": "not.a.jwt"}, "invalid_grant"),
    ]
    for form, error in cases:
        async with http.post(sim.root_url + "/oauth2/token", data=form) as resp:
            assert resp.status == 400, form
            assert (await resp.json())["error"] == error
    async with http.post(sim.root_url + "/oauth2/token",
                         data={"grant_type": grant, "assertion": _jwt(good, own)}) as resp:
        data = await resp.json()
        assert resp.status == 200
        assert data["token_type"] == "Bearer" and data["expires_in"] == 3600
    counts = sim.counts()
    assert (counts["oauth.rejected"], counts["tokens_issued"]) == (len(cases), 1)


async def test_a_client_blocking_its_own_loop_is_still_served(
    sim: SimHandle, creds: SimCredentials
) -> None:
    """google-auth refreshes synchronously; the simulator, on its own loop, still answers."""
    credentials = _google_credentials(sim, creds)
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=2.0))
    credentials.refresh(GoogleRequest(pool))  # type: ignore[no-untyped-call]  # blocks this loop
    assert credentials.token and sim.counts()["tokens_issued"] == 1


async def test_inference_profile_arns_route_and_keep_their_model_rules(
    sim: SimHandle, http: aiohttp.ClientSession, creds: SimCredentials
) -> None:
    arn = ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
           "us.anthropic.claude-opus-4-7-v1:0")
    status, _, _ = await converse(http, sim, creds, arn, converse_body())
    assert status == 200
    status, _, data = await converse(http, sim, creds, arn, converse_body(
        inferenceConfig={"temperature": 1.0}))
    assert status == 400 and "deprecated" in data["message"]
