"""The OpenAI-shaped batch client on canned replies: its lines, URLs, result classification,
control-plane failures and the registry's refusal of providers without batch support.

The end-to-end tests against the simulator (and the official `openai` client as the oracle
of the simulator's wire format) are in test_batch_openai_sim.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from providers.batch import UNREADABLE, BatchError, JobState, JobStatus
from providers.batch_openai import LIMITS, METADATA_KEY, OpenAIBatchClient, job_state
from providers.batch_registry import batch_client_for
from providers.registry import adapter_for
from providers.types import (
    ChatRequest,
    Completion,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)

KEY = "gsk_live_secret_value_123456"
ENV = {"GROQ_API_KEY": KEY, "AZURE_OPENAI_API_KEY": KEY, "DEEPINFRA_API_KEY": KEY}
REQ = ChatRequest("req-1", "system words", "user words", seed=11, keys=("probability",))


def groq(**kw: Any) -> ModelConfig:
    return ModelConfig(name="g", provider="groq", model="openai/gpt-oss-120b", max_tokens=300,
                       temperature=0.0, json_mode=True, **kw)


def client(config: ModelConfig) -> OpenAIBatchClient:
    made = batch_client_for(config, ENV)
    assert isinstance(made, OpenAIBatchClient)
    return made


class Canned:
    """A fetch answering from a queue of replies and keeping what it was sent."""

    def __init__(self, *replies: tuple[int, Mapping[str, str], bytes]) -> None:
        self.replies = list(replies)
        self.sent: list[HttpRequest] = []

    async def __call__(self, req: HttpRequest) -> tuple[int, Mapping[str, str], bytes]:
        self.sent.append(req)
        return self.replies.pop(0)


def ok(data: Any) -> tuple[int, Mapping[str, str], bytes]:
    return 200, {}, orjson.dumps(data)


def test_a_line_carries_the_live_body_byte_for_byte() -> None:
    config = groq(response_format="json_schema")
    line = orjson.loads(client(config).line(REQ))
    live = adapter_for(config, ENV).build(REQ)
    assert line["custom_id"] == "req-1" and line["method"] == "POST"
    assert line["url"] == "/v1/chat/completions"
    assert line["body"] == orjson.loads(live.body)
    assert line["body"]["seed"] == 11 and line["body"]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("provider", "extra", "root", "endpoint"),
    [
        ("groq", {}, "https://api.groq.com/openai/v1/files", "/v1/chat/completions"),
        ("deepinfra", {}, "https://api.deepinfra.com/v1/openai/files", "/v1/chat/completions"),
        ("azure", {"api_version": "2024-10-21"},
         "https://r.openai.azure.com/openai/files?api-version=2024-10-21", "/chat/completions"),
        ("azure", {}, "https://r.openai.azure.com/openai/v1/files", "/v1/chat/completions"),
    ],
)
def test_files_and_batches_sit_where_each_provider_keeps_them(
    provider: str, extra: dict[str, Any], root: str, endpoint: str
) -> None:
    config = ModelConfig(name="m", provider=provider, model="luna",
                         base_url="https://r.openai.azure.com" if provider == "azure" else None,
                         **extra)
    made = client(config)
    assert made.routes.url("files") == root
    assert made.routes.endpoint == endpoint
    if provider == "azure":  # the body names the deployment, as the live adapter does
        assert orjson.loads(made.line(REQ))["body"]["model"] == "luna"


def test_providers_without_batch_support_fail_in_one_line() -> None:
    config = ModelConfig(name="x", provider="nowhere", model="m")
    with pytest.raises(ConfigError, match="no batch support") as caught:
        batch_client_for(config, ENV)
    assert "\n" not in str(caught.value)


def test_rehearsal_limits_only_lower_the_documented_ones() -> None:
    made = client(groq(extra={"batch_max_lines": "500", "batch_max_jobs": "99999"}))
    assert made.limits.max_lines == 500
    assert made.limits.max_jobs_in_flight == 20  # not raised past the chosen figure
    assert made.limits.source
    with pytest.raises(ConfigError, match="batch_max_lines"):
        client(groq(extra={"batch_max_lines": "many"}))
    # "No lower than documented", past a count's limit too: the documented figure.
    huge = client(groq(extra={"batch_max_bytes": 10**13, "batch_max_lines": 2e12}))
    assert huge.limits.max_bytes == LIMITS["groq"].max_bytes
    assert huge.limits.max_lines == LIMITS["groq"].max_lines


async def test_upload_reuses_a_file_already_stored_under_the_job_key() -> None:
    made = client(groq())
    lines = [made.line(REQ)]
    size = len(lines[0]) + 1
    fetch = Canned(ok({"object": "list", "data": [
        {"id": "file-other", "filename": "job-1.jsonl", "bytes": size + 5, "status": "processed"},
        {"id": "file-same", "filename": "job-1.jsonl", "bytes": size, "status": "processed"},
    ], "has_more": False}))
    assert await made.upload(fetch, "job-1", lines) == "file-same"
    assert len(fetch.sent) == 1 and fetch.sent[0].method == "GET"


async def test_upload_sends_multipart_with_purpose_batch_and_no_key_in_the_body() -> None:
    made = client(groq())
    fetch = Canned(ok({"object": "list", "data": [], "has_more": False}), ok({"id": "file-9"}))
    assert await made.upload(fetch, "job-2", [made.line(REQ)]) == "file-9"
    sent = fetch.sent[1]
    assert sent.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert b'name="purpose"\r\n\r\nbatch\r\n' in sent.body
    assert b'filename="job-2.jsonl"' in sent.body and KEY.encode() not in sent.body


async def test_upload_goes_ahead_where_files_cannot_be_listed() -> None:
    made = client(groq())
    fetch = Canned((404, {}, b'{"error": {"message": "Unknown request URL"}}'), ok({"id": "f"}))
    assert await made.upload(fetch, "job-4", [made.line(REQ)]) == "f"
    with pytest.raises(BatchError):  # but an auth failure is not papered over
        await made.upload(Canned((401, {}, b"{}")), "job-4", [made.line(REQ)])


async def test_create_tags_the_job_and_does_not_create_twice() -> None:
    made = client(groq())
    batch = {"id": "batch_1", "status": "validating", "metadata": {METADATA_KEY: "job-3"}}
    fetch = Canned(ok({"data": [], "has_more": False}), ok(batch))
    state = await made.create(fetch, "job-3", "file-1")
    assert state.job_id == "batch_1" and state.status is JobStatus.VALIDATING
    payload = orjson.loads(fetch.sent[1].body)
    assert payload == {"input_file_id": "file-1", "endpoint": "/v1/chat/completions",
                       "completion_window": "24h", "metadata": {METADATA_KEY: "job-3"}}
    again = Canned(ok({"data": [batch], "has_more": False}))
    assert (await made.create(again, "job-3", "file-1")).job_id == "batch_1"
    assert [r.method for r in again.sent] == ["GET"]  # found it: no second POST


async def test_find_follows_the_cursor_across_pages() -> None:
    made = client(groq())
    page1 = {"data": [{"id": "b1", "status": "completed", "metadata": {}}],
             "has_more": True, "last_id": "b1"}
    page2 = {"data": [{"id": "b2", "status": "in_progress", "metadata": {METADATA_KEY: "k"}}],
             "has_more": False}
    fetch = Canned(ok(page1), ok(page2))
    found = await made.find(fetch, "k")
    assert found is not None and found.job_id == "b2" and found.status is JobStatus.RUNNING
    assert "after=b1" in fetch.sent[1].url


async def test_control_plane_failures_carry_the_status_rules_and_no_key() -> None:
    made = client(groq())
    body = orjson.dumps({"error": {"message": f"slow down {KEY}"}})
    with pytest.raises(BatchError) as caught:
        await made.poll(Canned((429, {"retry-after": "7"}, body)), "b1")
    assert caught.value.failure.outcome is Outcome.RATE_LIMIT
    assert caught.value.failure.retry_after_s == 7.0 and KEY not in caught.value.failure.detail
    for status, outcome in ((401, Outcome.AUTH_ERROR), (503, Outcome.PROVIDER_ERROR),
                            (400, Outcome.BAD_REQUEST)):
        with pytest.raises(BatchError) as caught:
            await made.poll(Canned((status, {}, b"{}")), "b1")
        assert caught.value.failure.outcome is outcome


def test_job_states_map_every_documented_status() -> None:
    words = {"validating": JobStatus.VALIDATING, "in_progress": JobStatus.RUNNING,
             "finalizing": JobStatus.FINALIZING, "completed": JobStatus.DONE,
             "failed": JobStatus.FAILED, "expired": JobStatus.EXPIRED,
             "cancelling": JobStatus.FINALIZING, "cancelled": JobStatus.CANCELLED}
    for word, status in words.items():
        assert job_state({"id": "b", "status": word}).status is status
    failed = job_state({"id": "b", "status": "failed", "errors": {"data": [
        {"code": "invalid_request", "message": "bad line", "line": 3}]}})
    assert failed.detail == "invalid_request: bad line (line 3)"


async def test_result_lines_are_classified_like_live_replies() -> None:
    made = client(groq())
    reply = {"id": "chatcmpl-1", "model": "m", "x_groq": {"id": "req_g"},
             "choices": [{"message": {"content": '{"probability": 0.6}'},
                          "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    lines = [
        {"custom_id": "a", "response": {"status_code": 200, "request_id": "r", "body": reply}},
        {"custom_id": "b", "response": {"status_code": 429, "body": {"error": {
            "message": "Rate limit reached", "code": "rate_limit_exceeded"}}}},
        {"custom_id": "c", "response": None, "error": {"code": "server_error", "message": "x"}},
        {"custom_id": "d", "response": None, "error": {"code": "batch_expired", "message": "x"}},
        {"custom_id": "e", "response": None, "error": {"code": "invalid_body", "message": "x"}},
    ]
    output = b"\n".join(orjson.dumps(line) for line in lines[:1]) + b"\n"
    errors = b"\n".join(orjson.dumps(line) for line in lines[1:]) + b"\n{torn"
    state = JobState("b1", JobStatus.DONE, "completed", output_ref="f-out", error_ref="f-err")
    fetch = Canned((200, {}, output), (200, {}, errors))
    results = {r.request_id: r.result for r in await made.results(fetch, state)}
    assert [r.url for r in fetch.sent] == [
        "https://api.groq.com/openai/v1/files/f-out/content",
        "https://api.groq.com/openai/v1/files/f-err/content"]
    assert all("Accept" not in r.headers and r.headers["Authorization"] for r in fetch.sent)
    # the expired line is the engine's to count; the torn one is said, never dropped
    assert set(results) == {"a", "b", "c", "e", UNREADABLE}
    torn = results.pop(UNREADABLE)
    assert isinstance(torn, Failure) and torn.detail == "unreadable result line: {torn"
    done = results["a"]
    assert isinstance(done, Completion) and done.provider_request_id == "req_g"
    assert done.tokens_in == 10 and done.text == '{"probability": 0.6}'
    outcomes = {k: v.outcome for k, v in results.items() if isinstance(v, Failure)}
    assert outcomes == {"b": Outcome.RATE_LIMIT, "c": Outcome.PROVIDER_ERROR,
                        "e": Outcome.BAD_REQUEST}


async def test_an_error_file_gone_keeps_the_output_lines_read() -> None:
    """The error file answering 404 (the output file read) raised, and the lane took the
    job's output for gone: every line it answered counted damaged, charged at its worst case
    and bought again. An error file gone holds no lines; the output's are kept."""
    made = client(groq())
    reply = {"id": "chatcmpl-1", "model": "m",
             "choices": [{"message": {"content": '{"probability": 0.6}'},
                          "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    output = orjson.dumps({"custom_id": "a", "response": {"status_code": 200, "body": reply}})
    state = JobState("b1", JobStatus.DONE, "completed", output_ref="f-out", error_ref="f-err")
    gone: tuple[int, Mapping[str, str], bytes] = (
        404, {}, b'{"error": {"message": "No such File object: f-err"}}')
    lines = await made.results(Canned((200, {}, output + b"\n"), gone), state)
    assert [line.request_id for line in lines] == ["a"]
    assert isinstance(lines[0].result, Completion)


async def test_an_output_file_gone_is_the_lanes_to_judge() -> None:
    """A 404 on the output file is raised as before (`engine.batch_lane`: its output gone)."""
    state = JobState("b1", JobStatus.DONE, "completed", output_ref="f-out", error_ref="f-err")
    gone: tuple[int, Mapping[str, str], bytes] = (
        404, {}, b'{"error": {"message": "No such File object: f-out"}}')
    with pytest.raises(BatchError) as raised:
        await client(groq()).results(Canned(gone, (200, {}, b"")), state)
    assert raised.value.failure.http_status == 404
