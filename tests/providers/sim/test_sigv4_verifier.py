"""The simulator's SigV4 verifier against the published vectors and botocore's signer."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from simkit import botocore_signed

from providers.sim import sigv4_verifier as sigv4

KEY = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
WHEN = "20150830T123600Z"


def _headers(**values: str) -> dict[str, list[str]]:
    return {k.replace("_", "-").lower(): [v] for k, v in values.items()}


def _auth(service: str, signed: str, signature: str) -> str:
    return (f"AWS4-HMAC-SHA256 Credential={KEY}/20150830/us-east-1/{service}/aws4_request, "
            f"SignedHeaders={signed}, Signature={signature}")


def test_get_vanilla_vector() -> None:
    headers = _headers(host="example.amazonaws.com", x_amz_date=WHEN)
    canonical = sigv4.canonical_request("GET", "/", "", headers, ("host", "x-amz-date"),
                                        hashlib.sha256(b"").hexdigest())
    assert canonical == (
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
        "host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    scope = "20150830/us-east-1/service/aws4_request"
    assert sigv4.string_to_sign(WHEN, scope, canonical).endswith(
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63")
    expected = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    assert sigv4.signature(SECRET, WHEN, "us-east-1", "service", canonical) == expected
    headers["authorization"] = [_auth("service", "host;x-amz-date", expected)]
    signed = sigv4.verify("GET", "/", "", headers, b"", {KEY: SECRET}.get, service="service")
    assert signed.signed_headers == ("host", "x-amz-date")


def test_post_form_vector() -> None:
    headers = _headers(content_type="application/x-www-form-urlencoded",
                       host="example.amazonaws.com", x_amz_date=WHEN)
    expected = "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
    headers["authorization"] = [_auth("service", "content-type;host;x-amz-date", expected)]
    sigv4.verify("POST", "/", "", headers, b"Param1=value1", {KEY: SECRET}.get,
                 service="service")


def test_session_token_vector_requires_the_configured_token() -> None:
    token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
    headers = _headers(host="example.amazonaws.com", x_amz_date=WHEN, x_amz_security_token=token)
    expected = "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"
    headers["authorization"] = [_auth("service", "host;x-amz-date;x-amz-security-token",
                                      expected)]
    sigv4.verify("GET", "/", "", headers, b"", {KEY: SECRET}.get, service="service",
                 session_token=token)
    with pytest.raises(sigv4.SigV4Error) as err:
        sigv4.verify("GET", "/", "", headers, b"", {KEY: SECRET}.get, service="service")
    assert err.value.code == "UnrecognizedClientException"


def test_bedrock_vector_double_encodes_the_model_id() -> None:
    body = (b'{"messages":[{"role":"user","content":[{"text":"Hello"}]}],'
            b'"inferenceConfig":{"maxTokens":50}}')
    raw_path = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    headers = _headers(content_type="application/json",
                       host="bedrock-runtime.us-east-1.amazonaws.com", x_amz_date=WHEN)
    canonical = sigv4.canonical_request("POST", raw_path, "", headers,
                                        ("content-type", "host", "x-amz-date"),
                                        hashlib.sha256(body).hexdigest())
    assert "/model/anthropic.claude-3-haiku-20240307-v1%253A0/converse" in canonical
    assert hashlib.sha256(canonical.encode()).hexdigest() == (
        "b86d82c456ddcbf862ff3f8ea318844006b287a8f288d8267ac59f76101b4f86")
    expected = "8d9a01a7caa289db7af5749cfcadb6a4748b52b471f0602b1c6ccf0417b58d80"
    headers["authorization"] = [_auth("bedrock", "content-type;host;x-amz-date", expected)]
    sigv4.verify("POST", raw_path, "", headers, body, {KEY: SECRET}.get, service="bedrock")
    with pytest.raises(sigv4.SigV4Error) as err:
        sigv4.verify("POST", raw_path, "", headers, body + b" ", {KEY: SECRET}.get,
                     service="bedrock")
    assert err.value.code == "InvalidSignatureException" and err.value.status == 403


def test_scope_service_date_and_skew_are_checked() -> None:
    import datetime as dt

    headers = _headers(host="example.amazonaws.com", x_amz_date=WHEN)
    sig = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    headers["authorization"] = [_auth("service", "host;x-amz-date", sig)]
    with pytest.raises(sigv4.SigV4Error, match="correct service"):
        sigv4.verify("GET", "/", "", headers, b"", {KEY: SECRET}.get, service="bedrock")
    with pytest.raises(sigv4.SigV4Error, match="Signature expired"):
        sigv4.verify("GET", "/", "", headers, b"", {KEY: SECRET}.get, service="service",
                     now=dt.datetime(2015, 8, 30, 13, 0, tzinfo=dt.UTC))
    with pytest.raises(sigv4.SigV4Error) as err:
        sigv4.verify("GET", "/", "", headers, b"", lambda key: None, service="service")
    assert err.value.code == "UnrecognizedClientException"


model_ids = st.from_regex(r"[a-z]{2,8}\.[a-z0-9-]{1,20}(:[0-9])?", fullmatch=True)


@given(model=model_ids, text=st.text(max_size=40), port=st.integers(1024, 65535))
def test_botocore_signed_requests_verify_and_tampering_fails(
    model: str, text: str, port: int
) -> None:
    """botocore is the oracle: whatever it signs, the verifier must accept, byte for byte."""
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": text}]}]}).encode()
    url = f"http://127.0.0.1:{port}/bedrock/model/{quote(model, safe='')}/converse"
    headers = botocore_signed(url, body, KEY, SECRET)
    received = {k.lower(): [v] for k, v in headers.items()}
    received["host"] = [f"127.0.0.1:{port}"]
    raw_path = url.split(str(port), 1)[1]
    sigv4.verify("POST", raw_path, "", received, body, {KEY: SECRET}.get, service="bedrock")
    with pytest.raises(sigv4.SigV4Error):
        sigv4.verify("POST", raw_path, "", received, body + b"x", {KEY: SECRET}.get,
                     service="bedrock")
    with pytest.raises(sigv4.SigV4Error):
        other = dict(received, host=[f"127.0.0.1:{port + 1}"])
        sigv4.verify("POST", raw_path, "", other, body, {KEY: SECRET}.get, service="bedrock")
