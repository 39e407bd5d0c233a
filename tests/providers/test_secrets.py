"""No credential in any repr, exception or failure detail, whatever the reply did."""

from __future__ import annotations

import base64
import json
import pickle
import re
import string
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.base import DETAIL_LIMIT, short
from providers.registry import adapter_for, required_env
from providers.secrets import (
    _SHAPES,
    CUT_MARK,
    MASK,
    MIN_CUT_HEAD,
    MIN_SECRET_LENGTH,
    Secret,
    _mask_shape,
    first_set,
    looks_like_credential,
    redact,
    redact_failure,
    redact_result,
)
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

FAKE = {
    "GROQ_API_KEY": "gsk_LEAKCHECK_groq_0123456789",
    "DEEPINFRA_API_KEY": "LEAKCHECK-deepinfra-0123456789",
    "AZURE_OPENAI_API_KEY": "LEAKCHECKazurekey0123456789",
    "AZURE_OPENAI_AD_TOKEN": "eyJLEAKCHECK.entra.token0123",
    "AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com",
    "SERVER_KEY": "sk-LEAKCHECK-server-0123456789",
}
SECRETS = [v for k, v in FAKE.items() if k != "AZURE_OPENAI_ENDPOINT"]
CONFIGS = [
    ModelConfig(name="groq", provider="groq", model="openai/gpt-oss-120b"),
    ModelConfig(name="di", provider="deepinfra", model="openai/gpt-oss-20b"),
    ModelConfig(name="az", provider="azure", model="gpt-5.6", api_version="2024-10-21"),
    ModelConfig(name="srv", provider="openai", model="m", base_url="http://127.0.0.1:1/v1",
                api_key_env="SERVER_KEY"),
]
ENVS = [FAKE, FAKE, FAKE, FAKE]
TOKEN_ONLY = {k: v for k, v in FAKE.items() if k != "AZURE_OPENAI_API_KEY"}


def echoing_bodies(secret: str) -> list[tuple[int, bytes]]:
    """Every failure path, with replies that echo the credential back (a careless proxy)."""
    echo = f"Invalid key: Bearer {secret} (header api-key: {secret})"
    error = orjson.dumps({"error": {"message": echo, "code": echo}})
    return [
        (401, error), (403, error), (429, error), (500, error), (503, echo.encode()),
        (408, error), (400, error), (404, error), (413, error), (422, error), (498, error),
        (400, orjson.dumps({"error": {"message": echo, "code": "json_validate_failed",
                                      "failed_generation": echo}})),
        (400, orjson.dumps({"error": {"message": echo, "code": "content_filter"}})),
        (200, error),
        (200, echo.encode()),  # not JSON
        (200, orjson.dumps({"id": "x", "model": "m", "choices": [
            {"message": {"content": echo}, "finish_reason": "length"}]})),
        (200, orjson.dumps({"id": "x", "model": "m", "choices": [
            {"message": {"content": "", "refusal": echo}, "finish_reason": "stop"}]})),
        (200, orjson.dumps({"model": "m", "choices": [
            {"message": {"content": echo}, "finish_reason": "stop"}]})),
        (302, echo.encode()),
    ]


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize(
    ("config", "env"),
    [*zip(CONFIGS, ENVS, strict=True), (CONFIGS[2], TOKEN_ONLY)],
    ids=["groq", "deepinfra", "azure-key", "openai", "azure-token"],
)
def test_no_failure_path_leaks_the_key(config: ModelConfig, env: dict[str, str]) -> None:
    adapter = adapter_for(config, env)
    http = adapter.build(ChatRequest("r", "s", "u", seed=1))
    header_values = " ".join(http.headers.values())
    assert any(secret in header_values for secret in SECRETS)  # the key is really sent...
    assert_clean(repr(http) + str(http) + repr(adapter) + str(adapter))  # ...and shown nowhere
    for status, body in echoing_bodies(next(s for s in SECRETS if s in header_values)):
        result = adapter.parse(status, {"x-request-id": "rid"}, body)
        assert isinstance(result, Failure), (status, body)
        assert_clean(repr(result) + result.detail + (result.raw_text or ""))
        assert MASK in result.detail or MASK in (result.raw_text or "")


@pytest.mark.parametrize(
    ("config", "env"), list(zip(CONFIGS, ENVS, strict=True)),
    ids=["groq", "deepinfra", "azure-key", "openai"],
)
def test_a_key_cut_by_the_details_length_limit_leaves_no_head(
    config: ModelConfig, env: dict[str, str]
) -> None:
    """A detail is cut to `DETAIL_LIMIT` before the adapter redacts it: a key the body echoed
    across the cut was no longer the key's value, and its head (all but its last character,
    at worst) reached the ledger."""
    adapter = adapter_for(config, env)
    sent = adapter.build(ChatRequest("r", "s", "u", seed=1)).headers.values()
    secret = next(s for s in SECRETS if s in " ".join(sent))
    for filler in range(DETAIL_LIMIT - len(secret) - 20, DETAIL_LIMIT):
        body = orjson.dumps({"error": {"message": "x" * filler + " " + secret + " tail" * 80}})
        result = adapter.parse(401, {}, body)
        assert isinstance(result, Failure) and result.detail.endswith("…")
        assert secret[:MIN_CUT_HEAD] not in result.detail, filler


def _answer_echoing(provider: str, echo: str) -> tuple[dict[str, str], bytes]:
    """A reply of 200 in `provider`'s format whose answer text is `echo`."""
    if provider == "bedrock":
        return {"x-amzn-RequestId": "rid"}, orjson.dumps({
            "output": {"message": {"role": "assistant", "content": [{"text": echo}]}},
            "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1}})
    if provider == "vertex":
        return {}, orjson.dumps({"candidates": [{"content": {"role": "model", "parts": [
            {"text": echo}]}, "finishReason": "STOP"}], "responseId": "rid", "modelVersion": "g",
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}})
    return {"x-request-id": "rid"}, orjson.dumps({"id": "x", "model": "m", "choices": [
        {"message": {"content": echo}, "finish_reason": "stop"}]})


_KEYED = [
    *zip(CONFIGS, ENVS, strict=True),
    (ModelConfig(name="v", provider="vertex", model="gemini-2.5-flash", api_key_env="TOKEN",
                 project="p", location="us-central1"), {"TOKEN": "LEAKCHECKvertextoken0123"}),
    (ModelConfig(name="b", provider="bedrock", model="anthropic.claude-3-haiku-20240307-v1:0",
                 region="us-east-1"), {"AWS_BEARER_TOKEN_BEDROCK": "LEAKCHECKbedrockkey0123"}),
]


@pytest.mark.parametrize(("config", "env"), _KEYED,
                         ids=["groq", "deepinfra", "azure", "openai", "vertex", "bedrock"])
def test_an_answer_echoing_the_key_is_kept_masked(config: ModelConfig, env: dict[str, str]) -> None:
    """A reply of 200 whose text holds the key (a proxy echoing the request, a model shown
    it) reaches the ledger as the answer's raw text: the key must be masked there too."""
    adapter = adapter_for(config, env)
    sent = " ".join(adapter.build(ChatRequest("r", "s", "u", seed=1)).headers.values())
    key = next(s.reveal() for s in adapter.secrets() if s.reveal() in sent)
    headers, body = _answer_echoing(config.provider, f"I was sent {key}. Probability: 0.4")
    result = adapter.parse(200, headers, body)
    assert isinstance(result, Completion), result
    assert key not in result.text and result.text == f"I was sent {MASK}. Probability: 0.4"
    plain = adapter.parse(200, *_answer_echoing(config.provider, "Probability: 0.4"))
    assert isinstance(plain, Completion) and plain.text == "Probability: 0.4"


_FRAGMENTS = st.sampled_from([
    "Bearer ", "bEaReR\t", "sk-", "gsk_", "AKIA", "asia", "ABSK", "ya29.", "AIza", "?key=",
    "&API_KEY=", "&api-key=", "?access_token=", "&SIG=", "?token=", "&AUTH=", "&password=",
    "?Secret=", "-----BEGIN RSA PRIVATE KEY-----",
    "0123456789abcdefGHIJKLMNOP", "=", " ", "\n", "x",
])


@given(text=st.lists(_FRAGMENTS, max_size=8).map("".join))
def test_the_anchor_check_skips_no_credential_shape(text: str) -> None:
    """`redact` skips the shapes' pattern for text holding none of their anchors: the same
    text as always running it."""
    assert redact(text) == _SHAPES.sub(_mask_shape, text)


@pytest.mark.parametrize("config", CONFIGS, ids=["groq", "deepinfra", "azure", "openai"])
def test_config_errors_name_variables_not_values(config: ModelConfig) -> None:
    # Other providers' keys are set; this model's own is missing: no value may be printed.
    own = set(required_env(config, FAKE))
    env = {
        k: v for k, v in FAKE.items()
        if k not in own and not k.startswith(config.provider.upper())
    }
    with pytest.raises(ConfigError) as info:
        adapter_for(config, env)
    message = str(info.value)
    assert config.name in message and any(name in message for name in own)
    assert_clean(message + repr(info.value))
    bad = ModelConfig(**{**config.__dict__, "extra": {"token_field": "n_predict"}})
    with pytest.raises(ConfigError) as info:
        adapter_for(bad, FAKE)
    assert_clean(str(info.value))


def test_secret_views_are_masked() -> None:
    secret = Secret("sk-very-secret-value")
    assert secret.reveal() == "sk-very-secret-value"
    for view in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret])):
        assert "very-secret" not in view
    assert secret == Secret("sk-very-secret-value") and secret != Secret("other")
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_redact_helpers() -> None:
    env = {"A": "abcdef123456", "B": "abcdef", "SHORT": "us", "EMPTY": ""}
    # The longer secret is masked whole, not left as "***123456".
    assert redact("k=abcdef123456 j=abcdef", ["abcdef", Secret("abcdef123456")]) == "k=*** j=***"
    assert redact("region us-east-1", ["us"]) == "region us-east-1"  # too short to be a key
    assert first_set(env, ["EMPTY", "B"]) == ("B", Secret("abcdef"))
    assert first_set(env, ["EMPTY"]) is None


@pytest.mark.parametrize(("config", "env"), _KEYED,
                         ids=["groq", "deepinfra", "azure", "openai", "vertex", "bedrock"])
def test_a_key_with_a_line_end_or_spaces_around_it_is_sent_without_them(
    config: ModelConfig, env: dict[str, str]
) -> None:
    """A key read from a Windows `.env` file ends in "\r": every attempt failed before it was
    sent ("adapter failed: ValueError"), counted as a provider outage."""
    adapter = adapter_for(config, {name: f"  {value}\r\n" for name, value in env.items()})
    sent = adapter.build(ChatRequest("r", "s", "u", seed=1)).headers
    assert not any(c in value for value in sent.values() for c in "\r\n")
    assert any(key in " ".join(sent.values()) for key in env.values())


@pytest.mark.parametrize(("config", "env"), _KEYED,
                         ids=["groq", "deepinfra", "azure", "openai", "vertex", "bedrock"])
def test_a_key_holding_a_control_character_is_refused_by_its_name_alone(
    config: ModelConfig, env: dict[str, str]
) -> None:
    """Every provider's key or token: Bedrock's and Vertex's were only stripped, and sent a
    carriage return inside a header."""
    name = next(n for n in required_env(config, env) if n in env and "ENDPOINT" not in n)
    value = env[name]
    with pytest.raises(ConfigError) as info:
        adapter_for(config, {**env, name: f"{value[:6]}\r\n{value[6:]}"})
    assert f"{name} holds a control character" in str(info.value)
    assert value[:6] not in str(info.value)


def test_aws_access_keys_holding_a_control_character_are_refused() -> None:
    config = ModelConfig(name="b", provider="bedrock", model="meta.llama3-70b-instruct-v1:0",
                         region="us-east-1")
    keys = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG\r/bPxRfiCYEXAMPLEKEY"}
    with pytest.raises(ConfigError) as info:
        adapter_for(config, keys)
    assert "AWS_SECRET_ACCESS_KEY holds a control character" in str(info.value)


@given(prefix=st.text(max_size=20), suffix=st.text(max_size=20),
       secret=st.text(min_size=6, max_size=30))
def test_redact_removes_every_occurrence(prefix: str, suffix: str, secret: str) -> None:
    text = prefix + secret + suffix + secret
    assert secret not in redact(text, [Secret(secret)])


def test_redact_cannot_splice_a_key_back_together() -> None:
    assert "******" not in redact("*" * 12, ["******"])
    assert "abcdefgh" not in redact("abcdabcdefghefgh", ["abcdefgh"])


# Every provider's credential shapes (made up, realistic in form). Masked by shape: found with
# no value given. Masked by value: shapes only their provider knows, declared by the adapter.
BY_SHAPE = {
    "openai key": "sk-proj-Abc123_def456-GHI789jkl012MNO345",
    "groq key": "gsk_4Qm2ZxT9bV7nK1pL8sD3fG6hJ0wE5rYu",
    "bearer header": "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "aws access key id": "AKIAIOSFODNN7EXAMPLE",
    "aws temporary key id": "ASIAQNZGKIQY3EXAMPLE",
    "bedrock api key": "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlLWtleQ==",
    "google oauth token": "ya29.a0AfB_byC1x2y3z4-EXAMPLE_token.value",
    "google api key": "AIzaSyA1234567890abcdefghijKLMNOPQRS",
    "key in a url": "https://example.invalid/v1/models?key=s3cr3tv4lu3&alt=json",
    "service-account private key": (
        "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n"
        "-----END PRIVATE KEY-----\\n"
    ),
    "private key cut off": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3",
}
BY_VALUE = {
    "deepinfra key": "x7Gq2LmN9pR4sT6vW8yZ1aB3cD5eF0hJ",
    "azure key": "0123456789abcdef0123456789abcdef",
    "aws secret access key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "aws session token": "IQoJb3JpZ2luX2VjEHYaCXVzLWVhc3QtMSJHMEUCIQD+example//token==",
    "entra token": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJleGFtcGxlIn0.c2ln",
}


def _secret_part(text: str) -> str:
    """What must disappear: the credential, not the words around it."""
    for marker in ("Bearer ", "?key="):
        if marker in text:
            return text.split(marker, 1)[1].split("&", 1)[0]
    return text


@pytest.mark.parametrize("shape", sorted(BY_SHAPE))
def test_redact_masks_every_credential_shape_unasked(shape: str) -> None:
    text = f"upstream said: {BY_SHAPE[shape]} (request 42)"
    cleaned = redact(text)
    assert _secret_part(BY_SHAPE[shape]).strip("\\n") not in cleaned
    assert MASK in cleaned and cleaned.startswith("upstream said: ")


@pytest.mark.parametrize("shape", sorted(BY_VALUE))
def test_redact_masks_declared_values(shape: str) -> None:
    value = BY_VALUE[shape]
    text = f'{{"error": "denied for {value}", "again": "{value}"}}'
    assert value not in redact(text, [Secret(value)])
    assert redact(text, [Secret(value)]).count(MASK) == 2


def test_redact_leaves_ordinary_text_alone() -> None:
    for text in (
        "HTTP 500 upstream busy",
        "Missing Bearer token",
        'Invalid JSON: {"Q01": 0.25, "Q02": 0.5}',
        "model anthropic.claude-3-haiku-20240307-v1:0 in us-east-1",
    ):
        assert redact(text) == text


def test_redact_failure_masks_detail_and_raw_text() -> None:
    key = BY_VALUE["azure key"]
    failure = Failure(Outcome.AUTH_ERROR, f"bad key {key}", raw_text=f"echo {key}")
    cleaned = redact_failure(failure, [Secret(key)])
    assert key not in cleaned.detail + (cleaned.raw_text or "")
    assert cleaned.outcome is Outcome.AUTH_ERROR


def test_every_adapter_declares_the_credentials_it_holds() -> None:
    for config, env in zip(CONFIGS, ENVS, strict=True):
        adapter = adapter_for(config, env)
        sent = " ".join(adapter.build(ChatRequest("r", "s", "u", seed=1)).headers.values())
        declared = [s.reveal() for s in adapter.secrets()]
        assert declared and all(value in sent for value in declared), config.name
        assert adapter.may_block is False
    aws = {
        "AWS_ACCESS_KEY_ID": BY_SHAPE["aws temporary key id"],
        "AWS_SECRET_ACCESS_KEY": BY_VALUE["aws secret access key"],
        "AWS_SESSION_TOKEN": BY_VALUE["aws session token"],
        "AWS_REGION": "us-east-1",
    }
    bedrock = adapter_for(
        ModelConfig(name="b", provider="bedrock", model="anthropic.claude-3-haiku-20240307-v1:0"),
        aws,
    )
    assert bedrock.may_block is True
    bedrock.build(ChatRequest("r", "s", "u", seed=1))
    held = {s.reveal() for s in bedrock.secrets()}
    assert held == {aws["AWS_ACCESS_KEY_ID"], aws["AWS_SECRET_ACCESS_KEY"],
                    aws["AWS_SESSION_TOKEN"]}
    token = BY_SHAPE["google oauth token"]
    vertex = adapter_for(
        ModelConfig(name="v", provider="vertex", model="gemini-2.5-flash", api_key_env="TOKEN",
                    project="p", location="us-central1"),
        {"TOKEN": token},
    )
    assert vertex.may_block is True
    assert [s.reveal() for s in vertex.secrets()] == [token]
    assert token in " ".join(vertex.build(ChatRequest("r", "s", "u", seed=1)).headers.values())


def _echoing_ids(
    provider: str, key: str, finish: str, text: str
) -> tuple[dict[str, str], bytes]:
    """A reply of 200 in `provider`'s format whose request id, reported model and finish
    reason all echo `key` (a proxy copying the request's header into its own)."""
    if provider == "bedrock":
        return {"x-amzn-RequestId": key}, orjson.dumps({
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": finish, "usage": {"inputTokens": 1, "outputTokens": 1}})
    if provider == "vertex":
        return {}, orjson.dumps({"candidates": [{"content": {"role": "model", "parts": [
            {"text": text}]}, "finishReason": finish}], "responseId": key, "modelVersion": key,
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}})
    return {"x-request-id": key}, orjson.dumps({"id": key, "model": key, "choices": [
        {"message": {"content": text}, "finish_reason": finish}]})


@pytest.mark.parametrize(("config", "env"), _KEYED,
                         ids=["groq", "deepinfra", "azure", "openai", "vertex", "bedrock"])
@pytest.mark.parametrize("ending", ["answer", "failure"])
def test_a_request_id_model_or_finish_reason_echoing_the_key_is_masked(
    config: ModelConfig, env: dict[str, str], ending: str
) -> None:
    """The ledger keeps a reply's request id, reported model and finish reason as well as
    its text: a tester's server put the key in `x-request-id` (and in `finish_reason`), and
    it reached `attempts/` unmasked while the detail beside it was masked."""
    adapter = adapter_for(config, env)
    sent = " ".join(adapter.build(ChatRequest("r", "s", "u", seed=1)).headers.values())
    key = next(s.reveal() for s in adapter.secrets() if s.reveal() in sent)
    stop = {"bedrock": "end_turn", "vertex": "STOP"}.get(config.provider, "stop")
    finish = stop if ending == "answer" else f"weird {key}"
    text = "0.4" if ending == "answer" else ""  # no text: a failure, with its finish reason
    result = adapter.parse(200, *_echoing_ids(config.provider, key, finish, text))
    assert isinstance(result, Completion if ending == "answer" else Failure), result
    fields = [result.provider_request_id, result.finish_reason]
    if isinstance(result, Completion):
        fields.append(result.model_reported)
    assert not any(key in (field or "") for field in fields), result
    assert MASK in (result.provider_request_id or "")


def test_redact_failure_and_result_leave_clean_replies_as_they_are() -> None:
    """Nothing to mask, nothing copied (every reply is redacted on the event loop)."""
    failure = Failure(Outcome.TRUNCATED, "cut", provider_request_id="rid", finish_reason="length")
    assert redact_failure(failure, [Secret("a-key-0123456789")]) is failure
    completion = Completion("0.4", "stop", 1, 1, "rid", "m")
    assert redact_result(completion, [Secret("a-key-0123456789")]) is completion


@pytest.mark.parametrize("key", ["AKIAABCDEFGHIJKLMNOP", "AKIAIOSFODNN7EXAMPLE"])
@pytest.mark.parametrize("suffix", ["-x", ".v2", "_old", ""])
def test_an_aws_key_id_with_a_suffix_is_a_credential_letters_alone_or_not(
    key: str, suffix: str
) -> None:
    """A key pasted with a suffix after it: "AKIAABCDEFGHIJKLMNOP-x" passed (a `-` after
    read as inside a word) where "AKIAIOSFODNN7EXAMPLE-x" was refused. A name before it
    ("lab-AKIA...") is a name: neither is refused."""
    assert looks_like_credential(f"{key}{suffix}")
    assert looks_like_credential(f"ours: {key}{suffix}, kept")
    assert not looks_like_credential(f"lab-{key}")
    assert not looks_like_credential(f"lab.{key}")


BEDROCK_KEY = "ABSKQmVkcm9ja0FQSUtleS1h159+abc/def/ghiJKL=="


def test_a_bedrock_key_echoed_url_encoded_in_a_failure_is_masked_whole() -> None:
    """A tester's gateway quoted the key in a URL of its 500 message: its head was masked by
    shape and "***%2Babc%2Fdef%2FghiJKL%3D%3D" reached the ledger's detail."""
    config = ModelConfig(name="b", provider="bedrock", region="us-east-1",
                         model="anthropic.claude-3-haiku-20240307-v1:0")
    adapter = adapter_for(config, {"AWS_BEARER_TOKEN_BEDROCK": BEDROCK_KEY})
    for url in (f"https://gw/x?token={quote(BEDROCK_KEY, safe='')}",
                f"https://gw/keys/{quote(BEDROCK_KEY, safe='')}/check"):
        body = orjson.dumps({"message": f"upstream GET {url} failed"})
        result = adapter.parse(500, {}, body)
        assert isinstance(result, Failure)
        assert "abc" not in result.detail and "%2F" not in result.detail, result.detail
        assert "upstream GET https://gw/" in result.detail and MASK in result.detail


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


_ENCODINGS = {
    "quote": lambda key: quote(key, safe=""),
    "quote lower hex": lambda key: _lower_hex(quote(key, safe="")),
    "quote_plus": lambda key: quote_plus(key, safe=""),
    "quote_plus lower hex": lambda key: _lower_hex(quote_plus(key, safe="")),
    "json": lambda key: json.dumps(key)[1:-1],
    "json escaping /": lambda key: json.dumps(key)[1:-1].replace("/", "\\/"),
}
_KEYS = [BEDROCK_KEY, "x7Gq2 LmN9pR4+sT6/vW8=é", BY_VALUE["aws secret access key"]]


@pytest.mark.parametrize("encoding", sorted(_ENCODINGS))
@pytest.mark.parametrize("key", _KEYS, ids=["bedrock", "spaced", "aws"])
def test_a_key_echoed_percent_encoded_or_json_escaped_is_masked(encoding: str, key: str) -> None:
    encoded = _ENCODINGS[encoding](key)
    text = f"upstream said: /v1/{encoded}/x (request 42)"
    assert redact(text, [Secret(key)]) == f"upstream said: /v1/{MASK}/x (request 42)"


@given(before=st.text(max_size=7), after=st.text(max_size=7),
       key=st.text(st.characters(codec="utf-8"), min_size=MIN_SECRET_LENGTH, max_size=40))
def test_a_key_echoed_inside_base64_is_masked_at_every_alignment(
    before: str, after: str, key: str
) -> None:
    """A key inside `Basic base64("user:" + key)` was kept whole, base64-encoded: the whole
    base64 run holding it is masked, whatever comes before the key (three alignments)."""
    encoded = base64.b64encode(f"{before}{key}{after}".encode()).decode()
    redacted = redact(f"Authorization: Basic {encoded}\n", [Secret(key)])
    assert encoded not in redacted and redacted.endswith(f" {MASK}\n")


def test_a_basic_credential_holding_the_key_is_masked_in_a_reply() -> None:
    basic = base64.b64encode(f"user:{BEDROCK_KEY}".encode()).decode()
    completion = Completion(f"sent Basic {basic}, p = 0.4", "stop", 1, 1, "rid", "m")
    result = redact_result(completion, [Secret(BEDROCK_KEY)])
    assert isinstance(result, Completion) and result.text == f"sent Basic {MASK}, p = 0.4"


@pytest.mark.parametrize("name", ["token", "TOKEN", "auth", "password", "secret"])
def test_a_token_password_or_secret_in_a_query_string_is_masked_unasked(name: str) -> None:
    text = f"GET https://gw/x?a=1&{name}=s3cr3tv4lu3&alt=json failed"
    assert redact(text) == f"GET https://gw/x?a=1&{name}={MASK}&alt=json failed"


#: A tester's DeepInfra-style key holding `+`, `/` and `=`: echoed as `quote(key)` (which
#: leaves `/` alone) or by Go's PathEscape (which leaves `+` and `=`), it was kept whole.
SLASHED_KEY = "Xq7+Hk2/PmXw9RtLb4NvC8Jd/Y3FgS6aB=="


def test_a_key_percent_encoded_the_common_way_is_masked_in_the_ledger() -> None:
    """`quote(key)` and Go's PathEscape leave some of `+/=` as they are; neither form was
    one of the key's encoded forms, and ~21% of random 40-character keys leaked."""
    for echoed in (quote(SLASHED_KEY), "Xq7%2BHk2/PmXw9RtLb4NvC8Jd/Y3FgS6aB%3D%3D"):
        failure = Failure(Outcome.PROVIDER_ERROR, f"upstream GET /keys/{echoed}/check: 500")
        result = redact_result(failure, [Secret(SLASHED_KEY)])
        assert isinstance(result, Failure)
        assert result.detail == f"upstream GET /keys/{MASK}/check: 500"


_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")


_ALNUM = st.text(st.sampled_from(string.ascii_letters + string.digits), min_size=1, max_size=6)


@given(parts=st.lists(st.tuples(_ALNUM, st.sampled_from("+/=")), min_size=3, max_size=8),
       safe=st.sets(st.sampled_from("+/=")), lower=st.lists(st.booleans(), max_size=16))
def test_a_key_percent_encoded_by_any_encoder_is_masked(
    parts: list[tuple[str, str]], safe: set[str], lower: list[bool]
) -> None:
    """Whatever of `+/=` an encoder leaves alone, and each escape's hex in either case."""
    key = "".join(text + char for text, char in parts)
    cases = iter(lower)
    encoded = _HEX_ESCAPE.sub(
        lambda m: m[0].lower() if next(cases, False) else m[0], quote(key, safe="".join(safe))
    )
    assert redact(f"GET /v1/{encoded} failed", [Secret(key)]) == f"GET /v1/{MASK} failed"


_CUT_FORMS: dict[str, Callable[[str], str]] = {
    "base64 of user:key": lambda key: base64.b64encode(f"user:{key}".encode()).decode(),
    "quote": quote,
    "quote, nothing safe": lambda key: quote(key, safe=""),
    "json escaping /": lambda key: json.dumps(key)[1:-1].replace("/", "\\/"),
}


@pytest.mark.parametrize("form", sorted(_CUT_FORMS))
def test_an_encoded_key_cut_at_the_detail_limit_leaves_no_head(form: str) -> None:
    """`short` cuts a detail before it is redacted, and only the key's own head was masked
    at the cut: the base64 of `user:key` so cut left 31 of a key's 35 characters to read,
    "Xq7%2BHk2%2FPmXw9RtLb4NvC8Jd%2FY3FgS6aB%…" 33. Every cut leaving more of the form than
    `MIN_CUT_HEAD` + 1 of the key's characters (an escape cut in two too) is masked whole;
    another key's form cut so is kept."""
    encode = _CUT_FORMS[form]
    encoded = encode(SLASHED_KEY)
    other = encode(SLASHED_KEY[::-1])
    for kept in range(len(encode(SLASHED_KEY[: MIN_CUT_HEAD + 1]).rstrip("=")), len(encoded)):
        filler = "x" * (DETAIL_LIMIT - 2 - kept)
        detail = redact(short(f"{filler} {encoded} tail"), [Secret(SLASHED_KEY)])
        assert detail == f"{filler} {MASK}{CUT_MARK}", kept
        cut = short(f"{filler} {other} tail")
        assert redact(cut, [Secret(SLASHED_KEY)]) == cut
