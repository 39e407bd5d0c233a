"""SigV4: the AWS test-suite vectors and the Bedrock vectors pass through the exact signing path
the Bedrock adapter uses, and what the adapter sends equals botocore's own `SigV4Auth`
signature for the same request at the same frozen time (the oracle).

Expected values are the published ones (providers-reference §7), not computed here.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import given
from hypothesis import strategies as st

from providers.bedrock import BedrockAdapter
from providers.sigv4_signer import AwsCredentials, canonical_request, signed_headers
from providers.types import ChatRequest, ModelConfig

KEY = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SUITE_TOKEN = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
BEDROCK_TOKEN = "AQoDYXdzEPT//////////wEXAMPLEtoken"
VECTOR_TIME = datetime(2015, 8, 30, 12, 36, 0, tzinfo=UTC)
CREDS = AwsCredentials(KEY, SECRET)
BEDROCK_URL = (
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "anthropic.claude-3-haiku-20240307-v1%3A0/converse"
)
BEDROCK_BODY = (
    b'{"messages":[{"role":"user","content":[{"text":"Hello"}]}],'
    b'"inferenceConfig":{"maxTokens":50}}'
)


def frozen() -> datetime:
    return VECTOR_TIME


def suite(method: str, url: str, headers: dict[str, str], body: bytes, creds: AwsCredentials,
          service: str = "service") -> dict[str, str]:
    return signed_headers(method, url, headers, body, creds, region="us-east-1",
                          service=service, clock=frozen)


def signature_of(authorization: str) -> str:
    return authorization.rsplit("Signature=", 1)[1]


def test_get_vanilla() -> None:
    headers = suite("GET", "https://example.amazonaws.com/", {}, b"", CREDS)
    creq, sts = canonical_request("GET", "https://example.amazonaws.com/", {}, b"", CREDS,
                                  region="us-east-1", service="service", clock=frozen)
    assert creq == (
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
        "host;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert sts == (
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
    )
    assert headers["X-Amz-Date"] == "20150830T123600Z"
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


def test_post_x_www_form_urlencoded() -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    creq, sts = canonical_request("POST", "https://example.amazonaws.com/", form, b"Param1=value1",
                                  CREDS, region="us-east-1", service="service", clock=frozen)
    assert creq == (
        "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\n"
        "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
        "content-type;host;x-amz-date\n"
        "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
    )
    assert sts.endswith("42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281")
    headers = suite("POST", "https://example.amazonaws.com/", form, b"Param1=value1", CREDS)
    assert signature_of(headers["Authorization"]) == (
        "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
    )


def test_get_vanilla_with_session_token() -> None:
    headers = suite("GET", "https://example.amazonaws.com/", {}, b"",
                    AwsCredentials(KEY, SECRET, SUITE_TOKEN))
    assert headers["X-Amz-Security-Token"] == SUITE_TOKEN
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in headers["Authorization"]
    assert signature_of(headers["Authorization"]) == (
        "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"
    )


def test_bedrock_vector_canonical_request_double_encodes_the_path() -> None:
    assert hashlib.sha256(BEDROCK_BODY).hexdigest() == (
        "8345cd660ca9ce072bc7eeeb4e0d21c465e9542f650463bedb63a2ec7445d617"
    )
    creq, sts = canonical_request("POST", BEDROCK_URL, {"Content-Type": "application/json"},
                                  BEDROCK_BODY, CREDS, region="us-east-1", service="bedrock",
                                  clock=frozen)
    assert creq.split("\n")[1] == "/model/anthropic.claude-3-haiku-20240307-v1%253A0/converse"
    assert hashlib.sha256(creq.encode()).hexdigest() == (
        "b86d82c456ddcbf862ff3f8ea318844006b287a8f288d8267ac59f76101b4f86"
    )
    assert sts.split("\n")[2] == "20150830/us-east-1/bedrock/aws4_request"


def _vector_adapter(env: dict[str, str]) -> BedrockAdapter:
    config = ModelConfig(name="haiku", provider="bedrock",
                         model="anthropic.claude-3-haiku-20240307-v1:0", max_tokens=50,
                         region="us-east-1")
    return BedrockAdapter(config, env, clock=frozen)


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (None, "8d9a01a7caa289db7af5749cfcadb6a4748b52b471f0602b1c6ccf0417b58d80"),
        (BEDROCK_TOKEN, "8499eda6405f823153bc1054e556079bd493059d2443d42aed29dbbcdb015ea2"),
    ],
)
def test_bedrock_vector_through_the_adapter(token: str | None, expected: str) -> None:
    env = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
    if token:
        env["AWS_SESSION_TOKEN"] = token
    request = _vector_adapter(env).build(ChatRequest(request_id="r", system="", user="Hello"))
    assert request.url == BEDROCK_URL
    assert request.body == BEDROCK_BODY
    signed = "content-type;host;x-amz-date" + (";x-amz-security-token" if token else "")
    assert request.headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/aws4_request, "
        f"SignedHeaders={signed}, Signature={expected}"
    )
    assert request.headers.get("X-Amz-Security-Token") == token


def botocore_authorization(url: str, body: bytes, creds: AwsCredentials, region: str,
                           when: datetime) -> dict[str, str]:
    """botocore's own SigV4Auth, with its wall clock patched to `when`."""
    request = AWSRequest(method="POST", url=url, headers={"Content-Type": "application/json"},
                         data=body)
    signer = SigV4Auth(Credentials(creds.access_key, creds.secret_key, creds.token),
                       "bedrock", region)
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        signer.add_auth(request)
    return dict(request.headers.items())


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_model = st.sampled_from([
    "anthropic.claude-3-haiku-20240307-v1:0",
    "us.anthropic.claude-opus-4-7-v1:0",
    "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-5",
    "meta.llama3-70b-instruct-v1:0",
])


@given(
    model=_model,
    system=_text,
    user=_text,
    region=st.sampled_from(["us-east-1", "eu-west-3", "ap-southeast-2"]),
    token=st.one_of(st.none(), st.text("ABCDEFabcdef0123456789/+=", min_size=16, max_size=64)),
    when=st.datetimes(min_value=datetime(2015, 1, 1), max_value=datetime(2035, 1, 1),
                      timezones=st.just(UTC)),
    base=st.sampled_from([None, "http://127.0.0.1:8765/bedrock", "https://gw.example.com:8443/x"]),
)
def test_adapter_signature_equals_botocore(model: str, system: str, user: str, region: str,
                                           token: str | None, when: datetime,
                                           base: str | None) -> None:
    creds = AwsCredentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                           token)
    env = {"AWS_ACCESS_KEY_ID": creds.access_key, "AWS_SECRET_ACCESS_KEY": creds.secret_key}
    if token:
        env["AWS_SESSION_TOKEN"] = token
    when = when.replace(microsecond=0)
    config = ModelConfig(name="m", provider="bedrock", model=model, region=region,
                         base_url=base, max_tokens=64, temperature=1.0)
    request = BedrockAdapter(config, env, clock=lambda: when).build(
        ChatRequest(request_id="r", system=system, user=user, seed=3))
    oracle = botocore_authorization(request.url, request.body, creds, region, when)
    assert request.headers["Authorization"] == oracle["Authorization"]
    assert request.headers["X-Amz-Date"] == oracle["X-Amz-Date"]
    assert request.headers.get("X-Amz-Security-Token") == oracle.get("X-Amz-Security-Token")


def test_a_changed_byte_changes_the_signature() -> None:
    """The oracle comparison above would be vacuous if the body were not covered."""
    env = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
    request = _vector_adapter(env).build(ChatRequest(request_id="r", system="", user="Hello"))
    tampered = botocore_authorization(request.url, request.body.replace(b"Hello", b"Hellp"),
                                      CREDS, "us-east-1", VECTOR_TIME)
    assert tampered["Authorization"] != request.headers["Authorization"]


def test_credentials_repr_is_masked() -> None:
    creds = AwsCredentials(KEY, SECRET, BEDROCK_TOKEN)
    for view in (repr(creds), str(creds), f"{creds}"):
        assert KEY not in view and SECRET not in view and BEDROCK_TOKEN not in view
