"""Vertex adapter: Gemini `generateContent` and the OpenAI-compatible MaaS endpoint; request
building, every finishReason and google.rpc status on canned replies (providers-reference §4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.google_auth_tokens import TokenCache
from providers.openai_compat import ClientDialect, build_body
from providers.types import ChatRequest, Completion, ConfigError, Failure, ModelConfig, Outcome
from providers.vertex import (
    VertexAdapter,
    default_base_url,
    required_env,
    uses_openai_endpoint,
)

REQ = ChatRequest(request_id="r1", system="You forecast.", user="P(up)?", seed=7)
TOKEN = "ya29.a0AfB_test_access_token_000000000000"
MAVERICK = "meta/llama-4-maverick-17b-128e-instruct-maas"


class StaticCredentials:
    """A google-auth-like credential that always holds one long-lived token."""

    quota_project_id: str | None = None

    def __init__(self, token: str = TOKEN) -> None:
        self.token: str | None = token
        self.expiry: datetime | None = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)

    def refresh(self, request: Any) -> None:
        raise AssertionError("a fresh token must not be refreshed")


def cfg(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = {
        "name": "gemini", "provider": "vertex", "model": "gemini-3.5-flash",
        "project": "my-proj", "location": "us-central1",
    }
    base.update(kw)
    return ModelConfig(**base)


def adapter(env: dict[str, str] | None = None, creds: Any = None, **kw: Any) -> VertexAdapter:
    tokens = TokenCache(creds or StaticCredentials(), request_factory=lambda: None)
    return VertexAdapter(cfg(**kw), env or {}, tokens=tokens)


def gemini(text: str | None = '{"probability": 0.4}', finish: str | None = "STOP",
           **extra: Any) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": "Let me think.", "thought": True}]
    if text is not None:
        parts.append({"text": text})
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 9,
                          "thoughtsTokenCount": 30, "totalTokenCount": 59},
        "modelVersion": "gemini-3.5-flash-001",
        "responseId": "resp-abc123",
    }
    body.update(extra)
    return body


def parse(body: Any, status: int = 200, a: VertexAdapter | None = None,
          headers: dict[str, str] | None = None) -> Completion | Failure:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return (a or adapter()).parse(status, headers or {}, raw)


def failed(*args: Any, **kw: Any) -> Failure:
    result = parse(*args, **kw)
    assert isinstance(result, Failure), result
    return result


def rpc(status: str, code: int, message: str = "Something happened.") -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


# ----------------------------------------------------------------------------- building


def test_gemini_request() -> None:
    request = adapter(temperature=1.0, max_tokens=8192, json_mode=True).build(REQ)
    assert request.url == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/my-proj/locations/"
        "us-central1/publishers/google/models/gemini-3.5-flash:generateContent"
    )
    assert orjson.loads(request.body) == {
        "contents": [{"role": "user", "parts": [{"text": "P(up)?"}]}],
        "systemInstruction": {"parts": [{"text": "You forecast."}]},
        "generationConfig": {"temperature": 1.0, "maxOutputTokens": 8192, "seed": 7,
                             "responseMimeType": "application/json"},
    }
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.omitted == ()
    assert TOKEN not in repr(request)


@pytest.mark.parametrize("spelling", ["gemini-2.5-flash", "google/gemini-2.5-flash",
                                      "publishers/google/models/gemini-2.5-flash"])
def test_model_id_spellings(spelling: str) -> None:
    assert adapter(model=spelling).url.endswith("/publishers/google/models/"
                                                "gemini-2.5-flash:generateContent")


def test_model_seed_is_the_fallback_for_the_request_seed() -> None:
    body = orjson.loads(adapter(seed=99).build(ChatRequest("r", "s", "u")).body)
    assert body["generationConfig"] == {"seed": 99}
    body = orjson.loads(adapter(seed=99).build(REQ).body)
    assert body["generationConfig"] == {"seed": 7}


def test_global_location_uses_the_global_host() -> None:
    assert default_base_url("global") == "https://aiplatform.googleapis.com"
    url = adapter(location="global").build(REQ).url
    assert url.startswith("https://aiplatform.googleapis.com/v1/projects/my-proj/locations/global/")


@pytest.mark.parametrize("location", ["us", "eu"])
def test_a_multi_region_uses_its_rep_host(location: str) -> None:
    """`us` and `eu` were sent to `us-aiplatform.googleapis.com`, not the documented host
    (google-genai's client, the oracle here, picks the same)."""
    host = f"https://aiplatform.{location}.rep.googleapis.com"
    assert default_base_url(location) == host
    url = adapter(location=location).build(REQ).url
    assert url.startswith(f"{host}/v1/projects/my-proj/locations/{location}/publishers/")
    # The oracle is the client's private module: a release that moves it skips this part.
    client = pytest.importorskip("google.genai._api_client")
    oracle = client.BaseApiClient(vertexai=True, project="my-proj", location=location,
                                  credentials=_NoCredentials())
    assert oracle._http_options.base_url == f"{host}/"


class _NoCredentials:
    """Credentials the oracle client is built with and never asks."""

    token = "t"
    expired = False
    valid = True


def test_project_and_location_from_env_and_base_url_override() -> None:
    env = {"GOOGLE_CLOUD_PROJECT": "env-proj", "GOOGLE_CLOUD_LOCATION": "europe-west4"}
    a = adapter(env, project=None, location=None, base_url="http://127.0.0.1:9/vertex/",
                api_version="v1beta1")
    assert a.url == (
        "http://127.0.0.1:9/vertex/v1beta1/projects/env-proj/locations/europe-west4/"
        "publishers/google/models/gemini-3.5-flash:generateContent"
    )


@pytest.mark.parametrize("missing", ["project", "location"])
def test_missing_project_or_location_is_a_config_error(missing: str) -> None:
    with pytest.raises(ConfigError, match=r"'gemini'.*GOOGLE_CLOUD_" + missing.upper()):
        adapter(**{missing: None})


@pytest.mark.parametrize(
    ("model", "effort", "thinking", "omitted"),
    [
        ("gemini-3.5-flash", "low", {"thinkingLevel": "LOW"}, ()),
        ("gemini-3-pro-preview", "high", {"thinkingLevel": "HIGH"}, ()),
        ("gemini-3.5-flash", "none", None, ("reasoning_effort",)),
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}, ()),
        ("gemini-2.5-flash", "medium", {"thinkingBudget": 8192}, ()),
        ("gemini-2.5-pro", "none", None, ("reasoning_effort",)),
        ("gemini-2.0-flash-001", "high", None, ("reasoning_effort",)),
        ("gemini-3.5-flash", "default", None, ()),
    ],
)
def test_reasoning_effort_maps_to_thinking_config(model: str, effort: str, thinking: Any,
                                                  omitted: tuple[str, ...]) -> None:
    request = adapter(model=model, reasoning_effort=effort).build(REQ)
    config = orjson.loads(request.body).get("generationConfig", {})
    assert config.get("thinkingConfig") == thinking
    assert request.omitted == omitted


def test_a_thinking_budget_that_fills_the_output_cap_is_refused() -> None:
    """Gemini 2.5's thinking tokens share maxOutputTokens: "medium" (8,192) beside a
    max_tokens of 256 was sent, and a reply could end before any answer text."""
    with pytest.raises(ConfigError) as refused:
        adapter(model="gemini-2.5-flash", reasoning_effort="medium", max_tokens=256)
    assert str(refused.value) == (
        "model 'gemini': reasoning_effort 'medium' gives gemini-2.5-flash a thinking budget "
        "of 8,192 tokens, which shares max_tokens (256): replies could end before any answer; "
        "raise max_tokens above the budget and the answer's length, or lower reasoning_effort"
    )
    with pytest.raises(ConfigError, match="budget of 1,024 tokens"):
        adapter(model="gemini-2.5-flash", reasoning_effort="low", max_tokens=1024)
    roomy = adapter(model="gemini-2.5-flash", reasoning_effort="low", max_tokens=2048)
    thinking = orjson.loads(roomy.build(REQ).body)["generationConfig"]["thinkingConfig"]
    assert thinking == {"thinkingBudget": 1024}
    adapter(model="gemini-2.5-flash", reasoning_effort="none", max_tokens=64)  # thinking off


def test_unknown_effort_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="reasoning_effort"):
        adapter(reasoning_effort="extreme")


def test_endpoint_choice() -> None:
    assert uses_openai_endpoint(cfg(model=MAVERICK))
    assert not uses_openai_endpoint(cfg())
    assert uses_openai_endpoint(cfg(model="qwen/qwen3-235b", extra={"endpoint": "openai"}))
    assert not uses_openai_endpoint(cfg(model=MAVERICK, extra={"endpoint": "gemini"}))
    with pytest.raises(ConfigError, match=r"endpoint must be .openai. or .gemini."):
        uses_openai_endpoint(cfg(extra={"endpoint": "grpc"}))


def test_openai_endpoint_request_reuses_the_shared_builder() -> None:
    a = adapter(model=MAVERICK, location="us-east5", temperature=1.0, max_tokens=8192,
                reasoning_effort="high")
    request = a.build(REQ)
    assert request.url == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/my-proj/locations/us-east5/"
        "endpoints/openapi/chat/completions"
    )
    expected, _ = build_body(cfg(model=MAVERICK, temperature=1.0, max_tokens=8192), REQ,
                             ClientDialect(provider="vertex", token_field="max_tokens"))
    assert orjson.loads(request.body) == expected
    assert expected["model"] == MAVERICK and expected["seed"] == 7
    assert request.omitted == ("reasoning_effort",)
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_quota_project_header() -> None:
    creds = StaticCredentials()
    creds.quota_project_id = "billing-proj"
    assert adapter(creds=creds).build(REQ).headers["x-goog-user-project"] == "billing-proj"


def test_access_token_from_a_named_variable() -> None:
    a = VertexAdapter(cfg(api_key_env="VERTEX_TOKEN"), {"VERTEX_TOKEN": "ya29.fromenv0000"})
    assert a.build(REQ).headers["Authorization"] == "Bearer ya29.fromenv0000"
    with pytest.raises(ConfigError, match="VERTEX_TOKEN"):
        VertexAdapter(cfg(api_key_env="VERTEX_TOKEN"), {})


def test_required_env(tmp_path: Path) -> None:
    assert required_env(cfg(), {"HOME": str(tmp_path)}) == ["GOOGLE_APPLICATION_CREDENTIALS"]
    adc = tmp_path / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir()
    adc.write_text("{}")
    assert required_env(cfg(), {"CLOUDSDK_CONFIG": str(adc.parent)}) == []
    assert required_env(cfg(project=None, location=None, api_key_env="T"), {}) == [
        "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "T",
    ]


# ----------------------------------------------------------------------------- Gemini replies


def test_completion_skips_thoughts_and_counts_them_as_output() -> None:
    result = parse(gemini())
    assert isinstance(result, Completion)
    assert result.text == '{"probability": 0.4}'
    assert result.finish_reason == "STOP"
    assert (result.tokens_in, result.tokens_out) == (20, 39)
    assert result.provider_request_id == "resp-abc123"
    assert result.model_reported == "gemini-3.5-flash-001"


@pytest.mark.parametrize(
    ("finish", "outcome"),
    [
        ("MAX_TOKENS", Outcome.TRUNCATED),
        ("SAFETY", Outcome.REFUSAL),
        ("PROHIBITED_CONTENT", Outcome.REFUSAL),
        ("BLOCKLIST", Outcome.REFUSAL),
        ("SPII", Outcome.REFUSAL),
        ("RECITATION", Outcome.REFUSAL),
        ("MALFORMED_FUNCTION_CALL", Outcome.INVALID_RESPONSE),
        ("OTHER", Outcome.INVALID_RESPONSE),
    ],
)
def test_finish_reasons(finish: str, outcome: Outcome) -> None:
    failure = failed(gemini(text='{"probab', finish=finish))
    assert failure.outcome is outcome
    assert finish in failure.detail
    assert failure.raw_text == '{"probab'
    assert failure.provider_request_id == "resp-abc123"
    assert (failure.tokens_in, failure.tokens_out) == (20, 39)
    assert failure.finish_reason == finish  # recorded as sent, as docs/providers.md says


@pytest.mark.parametrize(
    ("finish", "outcome"),
    [
        ("IMAGE_SAFETY", Outcome.REFUSAL),
        ("IMAGE_PROHIBITED_CONTENT", Outcome.REFUSAL),
        ("IMAGE_RECITATION", Outcome.REFUSAL),
        ("IMAGE_OTHER", Outcome.INVALID_RESPONSE),
        ("NO_IMAGE", Outcome.INVALID_RESPONSE),
        ("SOME_REASON_ADDED_NEXT_YEAR", Outcome.INVALID_RESPONSE),
    ],
)
def test_a_finish_reason_other_than_stop_is_never_an_answer(finish: str, outcome: Outcome) -> None:
    """The reply's text is whole and parseable, yet generation ended for a reason that is not
    STOP: the IMAGE_* family the Gemini API added after the rest, and one no release of this
    adapter knows yet, which says what it was so the failure can be read."""
    failure = failed(gemini(finish=finish))
    assert failure.outcome is outcome
    assert f"finishReason={finish}" in failure.detail
    assert failure.raw_text == '{"probability": 0.4}' and failure.finish_reason == finish


def test_max_tokens_with_only_thoughts_is_truncated() -> None:
    assert failed(gemini(text=None, finish="MAX_TOKENS")).outcome is Outcome.TRUNCATED


@pytest.mark.parametrize(
    "reason",
    ["SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "OTHER", "IMAGE_SAFETY", "MODEL_ARMOR",
     "JAILBREAK", "BLOCKED_REASON_UNSPECIFIED"],
)
def test_blocked_prompt_is_a_refusal(reason: str) -> None:
    body = gemini()
    del body["candidates"]
    body["promptFeedback"] = {"blockReason": reason, "blockReasonMessage": "blocked"}
    failure = failed(body)
    assert failure.outcome is Outcome.REFUSAL
    assert reason in failure.detail


def test_no_candidates_without_a_block_reason_is_invalid() -> None:
    assert failed(gemini(candidates=[])).outcome is Outcome.INVALID_RESPONSE


@pytest.mark.parametrize("field", ["responseId", "modelVersion"])
def test_missing_routing_metadata(field: str) -> None:
    body = gemini()
    del body[field]
    failure = failed(body)
    assert failure.outcome is Outcome.MISSING_ROUTING_METADATA
    assert field in failure.detail


@pytest.mark.parametrize("raw", [b'{"candidates": [{"content": {"par', b"", b"<html/>"])
def test_unparseable_bodies_are_invalid(raw: bytes) -> None:
    assert failed(raw).outcome is Outcome.INVALID_RESPONSE


def test_stop_without_text_is_invalid() -> None:
    assert failed(gemini(text=None)).outcome is Outcome.INVALID_RESPONSE


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "code", "outcome"),
    [
        ("RESOURCE_EXHAUSTED", 429, Outcome.RATE_LIMIT),
        ("RESOURCE_EXHAUSTED", 503, Outcome.RATE_LIMIT),
        ("UNAVAILABLE", 503, Outcome.PROVIDER_ERROR),
        ("INTERNAL", 500, Outcome.PROVIDER_ERROR),
        ("UNKNOWN", 500, Outcome.PROVIDER_ERROR),
        ("CANCELLED", 499, Outcome.PROVIDER_ERROR),
        ("DEADLINE_EXCEEDED", 504, Outcome.TIMEOUT),
        ("UNAUTHENTICATED", 401, Outcome.AUTH_ERROR),
        ("PERMISSION_DENIED", 403, Outcome.AUTH_ERROR),
        ("INVALID_ARGUMENT", 400, Outcome.BAD_REQUEST),
        ("FAILED_PRECONDITION", 400, Outcome.BAD_REQUEST),
        ("NOT_FOUND", 404, Outcome.BAD_REQUEST),
    ],
)
@pytest.mark.parametrize("model", ["gemini-3.5-flash", MAVERICK])
def test_rpc_statuses(status: str, code: int, outcome: Outcome, model: str) -> None:
    failure = failed(rpc(status, code), status=code, a=adapter(model=model))
    assert failure.outcome is outcome
    assert failure.detail.endswith(f"{status}: Something happened.")
    assert failure.detail.startswith("credential") is (outcome is Outcome.AUTH_ERROR)
    assert failure.http_status == code


def test_list_wrapped_envelope() -> None:
    failure = failed([rpc("RESOURCE_EXHAUSTED", 429)], status=429)
    assert failure.outcome is Outcome.RATE_LIMIT


def test_error_envelope_inside_a_200_is_not_a_completion() -> None:
    assert failed(rpc("RESOURCE_EXHAUSTED", 429), status=200).outcome is Outcome.RATE_LIMIT
    codeless = {"error": {"code": 429, "message": "Resource exhausted."}}
    assert failed(codeless, status=200).outcome is Outcome.RATE_LIMIT


@pytest.mark.parametrize(
    ("message", "quota"),
    [
        ("Resource exhausted. Please try again later. Please refer to "
         "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.",
         False),
        ("Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per"
         "_project_per_base_model with base model: gemini-3.5-flash.", False),
        ("Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_day.", True),
    ],
)
def test_daily_quota_is_flagged(message: str, quota: bool) -> None:
    failure = failed(rpc("RESOURCE_EXHAUSTED", 429, message), status=429)
    assert failure.quota_exhausted is quota
    assert failure.retry_after_s is None


def test_retry_hints_in_headers_and_prose() -> None:
    hinted = failed(rpc("RESOURCE_EXHAUSTED", 429), status=429, headers={"retry-after": "7"})
    assert hinted.retry_after_s == 7.0
    prose = failed(rpc("UNAVAILABLE", 503, "Overloaded. Please retry after 4 seconds."), status=503)
    assert prose.retry_after_s == 4.0


def retry_info(delay: Any, message: str = "Resource exhausted.") -> dict[str, Any]:
    """A 429 whose `details` carry google.rpc.RetryInfo, beside the QuotaFailure Google sends."""
    body = rpc("RESOURCE_EXHAUSTED", 429, message)
    body["error"]["details"] = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generate_content_requests_per_minute"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
    ]
    return body


@pytest.mark.parametrize(("delay", "seconds"), [("37s", 37.0), ("1.5s", 1.5), ("0.000001s", 1e-6)])
def test_retry_info_gives_the_wait(delay: str, seconds: float) -> None:
    assert failed(retry_info(delay), status=429).retry_after_s == seconds
    assert failed([retry_info(delay)], status=429).retry_after_s == seconds


def test_the_longest_stated_wait_wins() -> None:
    """A Retry-After header (a gateway's; Google documents none), RetryInfo and the prose may
    all state a wait: coming back at the shortest only meets the limit again."""
    header = {"retry-after": "60"}
    assert failed(retry_info("37s"), status=429, headers=header).retry_after_s == 60.0
    assert failed(retry_info("90s"), status=429, headers=header).retry_after_s == 90.0
    finer = retry_info("58s", "You exceeded your quota. Please retry in 58.934310785s.")
    assert failed(finer, status=429).retry_after_s == 58.934310785


@pytest.mark.parametrize(
    ("delay", "said"),
    [("86400s", "asks to wait 86,400 s, taken as a spent quota: "), ("3600s", ""), ("3599s", ""),
     ("31536000000s", "")],
)
def test_a_retry_delay_of_more_than_an_hour_is_a_spent_quota(delay: str, said: str) -> None:
    """As Azure's "Please retry after 86400 seconds" (test_azure): the message says nothing
    of a day, the wait does, and the detail says so; an hour is an hourly window's, and a
    thousand years no quota's."""
    failure = failed(retry_info(delay), status=429)
    assert failure.outcome is Outcome.RATE_LIMIT
    assert failure.quota_exhausted is bool(said)
    assert failure.detail == f"{said}RESOURCE_EXHAUSTED: Resource exhausted."


@pytest.mark.parametrize(
    "delay",
    ["-5s", "garbage", "37", "", "nans", "infs", "1e400s", "999999999999999s", 37, None,
     {"seconds": 37}, "31536000000s"],
)
def test_a_retry_delay_that_is_no_duration_is_ignored(delay: Any) -> None:
    failure = failed(retry_info(delay), status=429)
    assert failure.outcome is Outcome.RATE_LIMIT
    assert failure.retry_after_s is None


@pytest.mark.parametrize("details", [None, "x", [None, 3, "s"], [{"@type": 5}], {"a": 1}])
def test_malformed_details_are_ignored(details: Any) -> None:
    body = rpc("RESOURCE_EXHAUSTED", 429)
    body["error"]["details"] = details
    assert failed(body, status=429).retry_after_s is None


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(429, Outcome.RATE_LIMIT), (502, Outcome.PROVIDER_ERROR), (504, Outcome.TIMEOUT),
     (401, Outcome.AUTH_ERROR), (404, Outcome.BAD_REQUEST)],
)
def test_envelope_free_errors_fall_back_on_status(status: int, outcome: Outcome) -> None:
    failure = failed(b"<html>gateway says no</html>", status=status)
    assert failure.outcome is outcome
    assert "gateway says no" in failure.detail


# ----------------------------------------------------------------------------- OpenAI endpoint


def test_openai_endpoint_reply(completion: Any) -> None:
    a = adapter(model=MAVERICK)
    result = parse(completion(model=MAVERICK, id="chatcmpl-v1"), a=a)
    assert isinstance(result, Completion)
    assert result.model_reported == MAVERICK
    assert result.provider_request_id == "chatcmpl-v1"
    truncated = failed(completion(finish_reason="length"), a=a)
    assert truncated.outcome is Outcome.TRUNCATED
    missing = failed(completion(model=None), a=a)
    assert missing.outcome is Outcome.MISSING_ROUTING_METADATA
    openai_error = {"error": {"message": "rate limited", "type": "rate_limit", "code": 429}}
    assert failed(openai_error, status=429, a=a).outcome is Outcome.RATE_LIMIT


# ----------------------------------------------------------------------------- secrets


def test_echoed_tokens_never_reach_the_failure_detail() -> None:
    a = adapter()
    a.build(REQ)  # the adapter learns the token it sent
    echoed = rpc("UNAUTHENTICATED", 401, f"Request had invalid authentication: Bearer {TOKEN}")
    failure = failed(echoed, status=401, a=a)
    assert failure.outcome is Outcome.AUTH_ERROR
    assert TOKEN not in failure.detail and "***" in failure.detail
    assert TOKEN not in repr(failure) and TOKEN not in repr(a)


# ----------------------------------------------------------------------------- robustness

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["candidates", "content", "parts", "text", "thought", "finishReason",
                         "responseId", "modelVersion", "usageMetadata", "promptFeedback",
                         "blockReason", "error", "status", "code", "message", "choices", "id",
                         "model", "details", "@type", "retryDelay"]),
        inner, max_size=4),
    max_leaves=14,
)


@given(status=st.sampled_from([200, 400, 401, 429, 499, 500, 503, 504, 302]), body=_json,
       model=st.sampled_from(["gemini-3.5-flash", MAVERICK]))
def test_parse_never_raises_and_only_a_200_completes(status: int, body: Any, model: str) -> None:
    result = parse(orjson.dumps(body), status=status, a=adapter(model=model))
    assert isinstance(result, Completion | Failure)
    if isinstance(result, Completion):
        assert status == 200 and result.text.strip() and result.provider_request_id


@pytest.mark.parametrize("body", [b"<html><body>Sign in</body></html>", b"[1, 2]"])
def test_a_reply_that_is_not_a_json_object_is_foreign(body: bytes) -> None:
    """A page (a proxy's sign-in, say) where Gemini's reply belongs is not in the provider's
    format: its lane stops after ten in a row rather than re-asking every query
    (`Failure.foreign`, `engine.lanes`). A reply in the format that lacks an answer is not."""
    failure = adapter().parse(200, {}, body)
    assert isinstance(failure, Failure) and failure.outcome is Outcome.INVALID_RESPONSE
    assert failure.foreign
    empty = adapter().parse(200, {}, orjson.dumps(gemini(text=None)))
    assert isinstance(empty, Failure) and not empty.foreign


def test_a_token_sum_past_a_count_is_unknown() -> None:
    """Output tokens are the candidates' and the thoughts' sum: each within a count, the sum
    need not be (a reviewer's two of 2**63-1 summed past Int64, and the shard stored null)."""
    usage = {"promptTokenCount": 20, "candidatesTokenCount": 10**12, "thoughtsTokenCount": 1}
    result = parse(gemini(usageMetadata=usage))
    assert isinstance(result, Completion) and (result.tokens_in, result.tokens_out) == (20, None)
