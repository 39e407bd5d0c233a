"""Bedrock Converse adapter: request building, credentials, and every stop reason and error
type on canned replies (wire shapes from providers-reference §3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers import bedrock
from providers.base import DETAIL_LIMIT
from providers.bedrock import BedrockAdapter, create_adapter, options_omitted, required_env
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome

KEYS = {
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
}
REQ = ChatRequest(request_id="r1", system="You forecast.", user="P(up)?", seed=7)
RID = {"x-amzn-RequestId": "4b1c7f0e-1111-2222-3333-444455556666"}


def cfg(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = {
        "name": "claude", "provider": "bedrock",
        "model": "anthropic.claude-3-haiku-20240307-v1:0", "region": "us-east-1",
    }
    base.update(kw)
    return ModelConfig(**base)


def adapter(env: dict[str, str] | None = None, **kw: Any) -> BedrockAdapter:
    return BedrockAdapter(cfg(**kw), KEYS if env is None else env)


def converse(text: str | None = '{"probability": 0.4}', stop: str | None = "end_turn",
             **extra: Any) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"reasoningContent": {"reasoningText": {"text": "thinking...", "signature": "s"}}},
    ]
    if text is not None:
        content.append({"text": text})
    body: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": content}},
        "usage": {"inputTokens": 12, "outputTokens": 40, "totalTokens": 52},
        "metrics": {"latencyMs": 812},
    }
    if stop is not None:
        body["stopReason"] = stop
    body.update(extra)
    return body


def parse(body: Any, status: int = 200, headers: dict[str, str] | None = None,
          a: BedrockAdapter | None = None) -> Completion | Failure:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return (a or adapter()).parse(status, RID if headers is None else headers, raw)


def failed(*args: Any, **kw: Any) -> Failure:
    result = parse(*args, **kw)
    assert isinstance(result, Failure), result
    return result


# ----------------------------------------------------------------------------- building


def test_body_and_url_follow_converse() -> None:
    request = adapter(max_tokens=8192, temperature=1.0).build(REQ)
    assert request.method == "POST"
    assert request.url == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
        "anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    )
    assert orjson.loads(request.body) == {
        "messages": [{"role": "user", "content": [{"text": "P(up)?"}]}],
        "system": [{"text": "You forecast."}],
        "inferenceConfig": {"maxTokens": 8192, "temperature": 1.0},
    }
    assert request.omitted == ("seed",)  # Converse has nowhere to put a seed
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"
    )
    assert "/us-east-1/bedrock/aws4_request" in request.headers["Authorization"]


def test_arn_model_ids_are_fully_encoded() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-opus-5"
    request = adapter(model=arn).build(REQ)
    assert request.url.endswith(
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
        "%2Fus.anthropic.claude-opus-5/converse"
    )


def test_base_url_override_keeps_prefix() -> None:
    request = adapter(base_url="http://127.0.0.1:9/bedrock/").build(REQ)
    assert request.url.startswith("http://127.0.0.1:9/bedrock/model/anthropic.")


@pytest.mark.parametrize(
    ("model", "drops_temperature"),
    [
        ("anthropic.claude-3-haiku-20240307-v1:0", False),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", False),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", False),
        ("anthropic.claude-opus-4-20250514-v1:0", False),
        ("anthropic.claude-opus-4-1-20250805-v1:0", False),
        ("us.anthropic.claude-opus-4-7-v1:0", True),
        ("global.anthropic.claude-opus-4-8-v1:0", True),
        ("anthropic.claude-opus-4-10-v1:0", True),
        ("us.anthropic.claude-sonnet-5-v1:0", True),
        ("anthropic.claude-fable-5-20260101-v1:0", True),
        ("anthropic.claude-opus-5-v1:0", True),
        ("meta.llama3-70b-instruct-v1:0", False),
    ],
)
def test_rule_table_drops_temperature_on_recent_claude(model: str, drops_temperature: bool) -> None:
    assert ("temperature" in options_omitted(model)) is drops_temperature
    request = adapter(model=model, temperature=1.0, max_tokens=100).build(REQ)
    body = orjson.loads(request.body)
    assert ("temperature" in body["inferenceConfig"]) is not drops_temperature
    assert ("temperature" in request.omitted) is drops_temperature
    assert "seed" in request.omitted and "seed" not in request.body.decode()


PROFILE_ARN = (
    "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5"
)


def test_an_inference_profile_arn_follows_the_rules_of_its_base_model() -> None:
    """An application inference profile's ARN says nothing of its model: Opus 4.7 behind one
    was sent a temperature and refused every request ("`temperature` is deprecated")."""
    request = adapter(model=PROFILE_ARN, extra={"base_model": "anthropic.claude-opus-4-7"},
                      temperature=1.0, max_tokens=100).build(REQ)
    assert "temperature" not in orjson.loads(request.body)["inferenceConfig"]
    assert "temperature" in request.omitted
    thinking = adapter(model=PROFILE_ARN, extra={"base_model": "anthropic.claude-opus-4-7"},
                       reasoning_effort="high").build(REQ)
    assert orjson.loads(thinking.body)["additionalModelRequestFields"]["thinking"] == {
        "type": "adaptive"
    }
    plain = adapter(model=PROFILE_ARN, temperature=1.0, max_tokens=100).build(REQ)
    assert orjson.loads(plain.body)["inferenceConfig"]["temperature"] == 1.0


def test_nothing_recorded_as_omitted_when_not_asked_for() -> None:
    request = adapter(model="us.anthropic.claude-opus-4-7-v1:0").build(
        ChatRequest(request_id="r", system="s", user="u"))
    assert request.omitted == ()
    assert "inferenceConfig" not in orjson.loads(request.body)


def test_json_mode_is_omitted_and_recorded() -> None:
    request = adapter(json_mode=True).build(REQ)
    assert "json_mode" in request.omitted
    assert "outputConfig" not in orjson.loads(request.body)


def test_reasoning_effort_adaptive_on_recent_claude() -> None:
    request = adapter(model="us.anthropic.claude-sonnet-4-6", reasoning_effort="high",
                      temperature=1.0).build(REQ)
    body = orjson.loads(request.body)
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
    }
    assert "temperature" in request.omitted  # thinking forbids changing it


def test_reasoning_effort_budget_on_older_claude() -> None:
    request = adapter(model="anthropic.claude-3-7-sonnet-20250219-v1:0",
                      reasoning_effort="medium", max_tokens=8192).build(REQ)
    body = orjson.loads(request.body)
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 4096},
    }
    for cap in (1000, None):
        with pytest.raises(ConfigError, match="max_tokens"):
            adapter(model="anthropic.claude-3-7-sonnet-20250219-v1:0", reasoning_effort="low",
                    max_tokens=cap)
    capped = adapter(model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                     reasoning_effort="high", max_tokens=2048).build(REQ)
    assert orjson.loads(capped.body)["additionalModelRequestFields"]["thinking"] == {
        "type": "enabled", "budget_tokens": 2047,
    }


def test_reasoning_effort_on_a_model_without_thinking_is_omitted() -> None:
    request = adapter(model="meta.llama3-70b-instruct-v1:0", reasoning_effort="high").build(REQ)
    assert "reasoning_effort" in request.omitted
    assert "additionalModelRequestFields" not in orjson.loads(request.body)


def test_bearer_api_key_takes_precedence_and_is_not_signed() -> None:
    env = {**KEYS, "AWS_BEARER_TOKEN_BEDROCK": "ABSKbedrockapikey000000"}
    request = adapter(env).build(REQ)
    assert request.headers["Authorization"] == "Bearer ABSKbedrockapikey000000"
    assert "X-Amz-Date" not in request.headers
    assert "ABSK" not in repr(adapter(env)) and "ABSK" not in repr(request)


def test_api_key_from_the_variable_the_spec_names() -> None:
    named = adapter({"MY_BEDROCK_KEY": "ABSKnamedkey0000"}, api_key_env="MY_BEDROCK_KEY")
    request = named.build(REQ)
    assert request.headers["Authorization"] == "Bearer ABSKnamedkey0000"
    assert required_env(cfg(api_key_env="MY_BEDROCK_KEY"), {}) == ["MY_BEDROCK_KEY"]
    with pytest.raises(ConfigError, match="MY_BEDROCK_KEY"):
        adapter(KEYS, api_key_env="MY_BEDROCK_KEY")


def test_session_token_is_sent_and_signed() -> None:
    env = {**KEYS, "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEXAMPLEsessiontoken"}
    request = adapter(env).build(REQ)
    assert request.headers["X-Amz-Security-Token"] == "FwoGZXIvYXdzEXAMPLEsessiontoken"
    assert "x-amz-security-token" in request.headers["Authorization"]


def test_region_from_env_and_missing_region() -> None:
    config = cfg(region=None)
    request = BedrockAdapter(config, {**KEYS, "AWS_DEFAULT_REGION": "eu-west-3"}).build(REQ)
    assert request.url.startswith("https://bedrock-runtime.eu-west-3.amazonaws.com/")
    assert "/eu-west-3/bedrock/aws4_request" in request.headers["Authorization"]
    first = BedrockAdapter(config, {**KEYS, "AWS_REGION": "us-west-2",
                                    "AWS_DEFAULT_REGION": "eu-west-3"})
    assert "us-west-2" in first.url
    with pytest.raises(ConfigError, match=r"'claude'.*AWS_REGION"):
        create_adapter(config, KEYS)


def test_half_a_key_pair_is_a_config_error_naming_the_missing_variable() -> None:
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY"):
        adapter({"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"})


def test_shared_credentials_file_through_botocore_chain(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never probe the network
    creds = tmp_path / "credentials"
    creds.write_text(
        "[default]\naws_access_key_id = AKIADEFAULT000000000\n"
        "aws_secret_access_key = defaultsecret\n\n"
        "[research]\naws_access_key_id = AKIARESEARCH00000000\n"
        "aws_secret_access_key = researchsecret\naws_session_token = researchtoken\n"
    )
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(creds), "AWS_PROFILE": "research",
           "AWS_CONFIG_FILE": str(tmp_path / "missing-config")}
    request = adapter(env).build(REQ)
    assert "Credential=AKIARESEARCH00000000/" in request.headers["Authorization"]
    assert request.headers["X-Amz-Security-Token"] == "researchtoken"
    assert required_env(cfg(), env) == []


def test_required_env() -> None:
    assert required_env(cfg(region=None), KEYS) == ["AWS_REGION", *bedrock.KEY_ENVS]
    assert required_env(cfg(), {"AWS_BEARER_TOKEN_BEDROCK": "x"}) == ["AWS_BEARER_TOKEN_BEDROCK"]
    bare = {"AWS_DEFAULT_REGION": "eu-west-3", "HOME": "/nonexistent"}
    assert required_env(cfg(region=None), bare) == ["AWS_DEFAULT_REGION", *bedrock.KEY_ENVS]


# ----------------------------------------------------------------------------- replies


def test_completion_joins_text_and_skips_reasoning() -> None:
    result = parse(converse(text='{"probability": 0.4}'))
    assert isinstance(result, Completion)
    assert result.text == '{"probability": 0.4}'
    assert result.finish_reason == "end_turn"
    assert (result.tokens_in, result.tokens_out) == (12, 40)
    assert result.provider_request_id == RID["x-amzn-RequestId"]


def test_stop_sequence_is_success() -> None:
    assert isinstance(parse(converse(stop="stop_sequence")), Completion)


@pytest.mark.parametrize(
    ("stop", "outcome"),
    [
        ("max_tokens", Outcome.TRUNCATED),
        ("model_context_window_exceeded", Outcome.TRUNCATED),
        ("content_filtered", Outcome.REFUSAL),
        ("guardrail_intervened", Outcome.REFUSAL),
        ("malformed_model_output", Outcome.INVALID_RESPONSE),
        ("malformed_tool_use", Outcome.INVALID_RESPONSE),
        ("tool_use", Outcome.INVALID_RESPONSE),
    ],
)
def test_stop_reasons(stop: str, outcome: Outcome) -> None:
    failure = failed(converse(text='{"probability": 0.', stop=stop))
    assert failure.outcome is outcome
    assert stop in failure.detail
    assert failure.raw_text == '{"probability": 0.'
    assert (failure.tokens_in, failure.tokens_out) == (12, 40)
    assert failure.provider_request_id == RID["x-amzn-RequestId"]
    assert failure.finish_reason == stop  # recorded as sent, as docs/providers.md says


def test_missing_request_id_is_missing_routing_metadata() -> None:
    failure = failed(converse(), headers={})
    assert failure.outcome is Outcome.MISSING_ROUTING_METADATA
    assert failure.retryable


@pytest.mark.parametrize(
    "body",
    [b'{"output": {"message": {"role": "assist', b"<html>502</html>", b"[]",
     orjson.dumps({"output": {}, "stopReason": "end_turn"}),
     orjson.dumps(converse(stop=None)),
     orjson.dumps(converse(text=None)),
     orjson.dumps(converse(text="  "))],
)
def test_unusable_envelopes_are_invalid_response(body: bytes) -> None:
    assert failed(body).outcome is Outcome.INVALID_RESPONSE


def _error(code: str, status: int, message: str, *, where: str) -> tuple[dict[str, str], bytes]:
    headers = dict(RID)
    payload: dict[str, Any] = {"message": message}
    if where == "header":
        headers["x-amzn-ErrorType"] = f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    else:
        payload["__type"] = f"com.amazon.coral.service#{code}"
    return headers, orjson.dumps(payload)


@pytest.mark.parametrize("where", ["header", "body"])
@pytest.mark.parametrize(
    ("code", "status", "outcome"),
    [
        ("ThrottlingException", 429, Outcome.RATE_LIMIT),
        ("ModelNotReadyException", 429, Outcome.PROVIDER_ERROR),
        ("ServiceUnavailableException", 503, Outcome.PROVIDER_ERROR),
        ("InternalServerException", 500, Outcome.PROVIDER_ERROR),
        ("ModelErrorException", 424, Outcome.PROVIDER_ERROR),
        ("ModelTimeoutException", 408, Outcome.TIMEOUT),
        ("AccessDeniedException", 403, Outcome.AUTH_ERROR),
        ("UnrecognizedClientException", 403, Outcome.AUTH_ERROR),
        ("ExpiredTokenException", 403, Outcome.AUTH_ERROR),
        ("InvalidSignatureException", 403, Outcome.AUTH_ERROR),
        ("ValidationException", 400, Outcome.BAD_REQUEST),
        ("ResourceNotFoundException", 404, Outcome.BAD_REQUEST),
        ("ServiceQuotaExceededException", 400, Outcome.RATE_LIMIT),
    ],
)
def test_error_types(code: str, status: int, outcome: Outcome, where: str) -> None:
    headers, body = _error(code, status, "The thing went wrong.", where=where)
    failure = failed(body, status=status, headers=headers)
    assert failure.outcome is outcome
    assert failure.detail.endswith(f"{code}: The thing went wrong.")
    # An auth failure opens with where the refused credentials came from.
    source = "AWS credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: "
    hinted = failure.detail.startswith(source)
    assert hinted is (outcome is Outcome.AUTH_ERROR)
    assert failure.http_status == status
    assert failure.provider_request_id == RID["x-amzn-RequestId"]
    assert failure.quota_exhausted is (code == "ServiceQuotaExceededException")


def test_the_error_code_decides_not_the_status() -> None:
    """ModelNotReady arrives as a 429 yet is a provider fault, not our rate."""
    headers, body = _error("ModelNotReadyException", 429, "Model is not ready", where="header")
    assert failed(body, status=429, headers=headers).outcome is Outcome.PROVIDER_ERROR


@pytest.mark.parametrize(
    ("message", "quota"),
    [
        ("Too many requests, please wait before trying again.", False),
        ("Too many tokens, please wait before trying again.", False),
        ("You have exceeded your daily token quota for this model.", True),
        ("Tokens per day limit reached", True),
    ],
)
def test_throttling_quota_messages(message: str, quota: bool) -> None:
    headers, body = _error("ThrottlingException", 429, message, where="header")
    failure = failed(body, status=429, headers=headers)
    assert failure.outcome is Outcome.RATE_LIMIT
    assert failure.quota_exhausted is quota
    assert failure.retry_after_s is None  # Bedrock sends no wait hint


def test_retry_after_is_read_when_a_gateway_sends_one() -> None:
    headers, body = _error("ThrottlingException", 429, "slow down", where="header")
    failure = failed(body, status=429, headers={**headers, "Retry-After": "3"})
    assert failure.retry_after_s == 3.0


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(429, Outcome.RATE_LIMIT), (502, Outcome.PROVIDER_ERROR), (504, Outcome.PROVIDER_ERROR),
     (408, Outcome.TIMEOUT), (403, Outcome.AUTH_ERROR), (400, Outcome.BAD_REQUEST)],
)
def test_codeless_errors_fall_back_on_status(status: int, outcome: Outcome) -> None:
    failure = failed(b"<html>upstream trouble</html>", status=status, headers={})
    assert failure.outcome is outcome
    assert "upstream trouble" in failure.detail


# ----------------------------------------------------------------------------- secrets


def test_secrets_never_reach_details_reprs_or_errors() -> None:
    """AWS echoes the canonical request (session token included) on a signature mismatch."""
    token = "FwoGZXIvYXdzEXAMPLEsessiontoken0123456789"
    env = {**KEYS, "AWS_SESSION_TOKEN": token}
    a = adapter(env)
    request = a.build(REQ)
    secrets = [*KEYS.values(), token]
    message = (
        "The request signature we calculated does not match the signature you provided. "
        "The Canonical String for this request should have been 'POST\n/model/x/converse\n\n"
        f"host:bedrock-runtime.us-east-1.amazonaws.com\nx-amz-security-token:{token}\n' "
        f"Credential={KEYS['AWS_ACCESS_KEY_ID']} secret {KEYS['AWS_SECRET_ACCESS_KEY']}"
    )
    headers, body = _error("InvalidSignatureException", 403, message, where="header")
    failure = failed(body, status=403, headers=headers, a=a)
    assert failure.outcome is Outcome.AUTH_ERROR
    stray = _error("AccessDeniedException", 403, "key AKIAOTHERKEY00000000 is not allowed",
                   where="header")
    other = failed(stray[1], status=403, headers=stray[0], a=a)
    assert "AKIAOTHERKEY00000000" not in other.detail
    with pytest.raises(ConfigError) as half:
        adapter({"AWS_ACCESS_KEY_ID": KEYS["AWS_ACCESS_KEY_ID"]})
    printable = [failure.detail, repr(failure), repr(a), str(a), repr(vars(a)), repr(request),
                 str(half.value), repr(a._credentials and vars(a._credentials))]
    for text in printable:
        for secret in secrets:
            assert secret not in text, text
    bearer = adapter({"AWS_BEARER_TOKEN_BEDROCK": "ABSKbedrockapikey0123456789"})
    echoed = failed(orjson.dumps({"message": "bad key ABSKbedrockapikey0123456789"}),
                    status=403, headers={}, a=bearer)
    assert "ABSKbedrockapikey0123456789" not in echoed.detail
    assert "ABSKbedrockapikey0123456789" not in repr(vars(bearer))


# ----------------------------------------------------------------------------- robustness

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["output", "message", "content", "text", "stopReason", "usage",
                         "inputTokens", "__type", "message", "Message", "code"]),
        inner, max_size=4),
    max_leaves=12,
)


@given(status=st.sampled_from([200, 400, 403, 408, 424, 429, 500, 503, 299, 302]),
       body=_json, error_type=st.one_of(st.none(), st.text(max_size=30)),
       request_id=st.booleans())
def test_parse_never_raises_and_only_a_200_completes(status: int, body: Any,
                                                      error_type: str | None,
                                                      request_id: bool) -> None:
    headers = dict(RID) if request_id else {}
    if error_type is not None:
        headers["x-amzn-ErrorType"] = error_type
    result = parse(orjson.dumps(body), status=status, headers=headers)
    assert isinstance(result, Completion | Failure)
    if isinstance(result, Completion):
        assert status == 200 and request_id and result.text.strip()


def test_a_failures_detail_quoting_the_stop_reason_is_one_clean_line() -> None:
    """The stop reason is the server's text: ESC and U+202E reached the detail raw."""
    failure = failed(converse(text="", stop="end\u202eturn\x1b[2K" + "x" * 2000))
    assert failure.detail.startswith("no text content (stopReason=endturn[2Kxxx")
    assert "\x1b" not in failure.detail and "\u202e" not in failure.detail
    assert len(failure.detail) <= DETAIL_LIMIT
