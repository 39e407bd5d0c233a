"""The Amazon Bedrock Converse wire: request rules, AWS error shapes, Converse replies.

Bedrock reports errors through the `x-amzn-ErrorType` header and a bare `{"message"}`
body, has no seed anywhere, and recent Claude models refuse sampling parameters; the
simulator enforces all of this so an adapter that sends what a model rejects fails here.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson
from aiohttp import web

from providers.sim.call import BadRequest, ChatCall, Finish, Reply, retry_after_value

REFUSAL_TEXT = "I can't help with that request."
_ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"

TOP_LEVEL_FIELDS = frozenset({
    "messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
    "additionalModelRequestFields", "promptVariables", "additionalModelResponseFieldPaths",
    "requestMetadata", "performanceConfig", "serviceTier", "outputConfig",
})
INFERENCE_FIELDS = frozenset({"maxTokens", "temperature", "topP", "stopSequences"})
_CLAUDE_VERSION = re.compile(
    r"claude-(?:(?:opus|sonnet|haiku|fable)-(\d)(?:-(\d))?(?![0-9])"
    r"|(\d)(?:-(\d))?-(?:opus|sonnet|haiku|instant))"
)


def claude_version(model_id: str) -> tuple[int, int] | None:
    """(major, minor) of a Claude model id such as `anthropic.claude-opus-4-7` (else None)."""
    m = _CLAUDE_VERSION.search(model_id)
    if not m:
        return None
    if m.group(1):
        return int(m.group(1)), int(m.group(2) or 0)
    return int(m.group(3)), int(m.group(4) or 0)


def aws_error(code: str, message: str, status: int,
              headers: dict[str, str] | None = None) -> web.Response:
    out = {"x-amzn-ErrorType": f"{code}:{_ERROR_NAMESPACE}",
           "x-amzn-RequestId": str(uuid.uuid4())}
    out.update(headers or {})
    return web.Response(body=orjson.dumps({"message": message}), status=status, headers=out,
                        content_type="application/json")


def _validation(message: str) -> BadRequest:
    return BadRequest(message, code="ValidationException")


def _text_blocks(blocks: Any, where: str) -> str:
    if not isinstance(blocks, list):
        raise _validation(f"1 validation error detected: Value at '{where}' failed to satisfy "
                          "constraint: Member must be a list")
    texts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            raise _validation(f"The value at {where} must contain text content blocks.")
        texts.append(block["text"])
    return "".join(texts)


def json_object(body: bytes) -> dict[str, Any]:
    """A request body that must be one JSON object, refused in AWS's words otherwise."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest("Could not parse request body into json.",
                         code="SerializationException") from None
    if not isinstance(data, dict):
        raise _validation("Malformed input request: request body must be a JSON object.")
    return data


def parse_converse_body(model_id: str, body: bytes) -> ChatCall:
    """Read a Converse body, enforcing the service model and the model's own rules."""
    data = json_object(body)
    extra = sorted(set(data) - TOP_LEVEL_FIELDS)
    if extra:
        raise _validation(f"Malformed input request: extraneous key [{extra[0]}] is not "
                          "permitted, please reformat your input and try again.")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _validation("1 validation error detected: Value null at 'messages' failed to "
                          "satisfy constraint: Member must not be null")
    user: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise _validation(f"1 validation error detected: Value at 'messages.{i + 1}.member."
                              "role' failed to satisfy constraint: Member must satisfy enum "
                              "value set: [user, assistant]")
        text = _text_blocks(message.get("content"), f"messages.{i}.content")
        if message["role"] == "user":
            user.append(text)
    system = _text_blocks(data.get("system", []), "system")
    config = data.get("inferenceConfig", {})
    if not isinstance(config, dict):
        raise _validation("inferenceConfig must be an object")
    unknown = sorted(set(config) - INFERENCE_FIELDS)
    if unknown:
        raise _validation(f"Malformed input request: extraneous key [{unknown[0]}] is not "
                          "permitted, please reformat your input and try again.")
    cap = config.get("maxTokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise _validation("1 validation error detected: Value at 'inferenceConfig.maxTokens' "
                          "failed to satisfy constraint: Member must have value greater than "
                          "or equal to 1")
    for name in ("temperature", "topP"):
        value = config.get(name)
        if value is not None and (not isinstance(value, int | float) or not 0 <= value <= 1):
            raise _validation(f"1 validation error detected: Value at 'inferenceConfig.{name}' "
                              "failed to satisfy constraint: Member must have value less than "
                              "or equal to 1")
    _model_rules(model_id, config, data.get("additionalModelRequestFields") or {})
    return ChatCall("bedrock", model_id, system, "\n".join(user), None, cap, data)


def _model_rules(model_id: str, config: dict[str, Any], fields: Any) -> None:
    """What Claude models reject (from providers-reference.md §3 quirks)."""
    version = claude_version(model_id)
    if version is None:
        return
    fields = fields if isinstance(fields, dict) else {}
    if "seed" in fields:
        raise _validation("The model returned the following errors: seed: Extra inputs are "
                          "not permitted")
    sampling: list[str] = [n for n in ("temperature", "topP") if n in config]
    sampling += [n for n in ("top_k", "temperature", "top_p") if n in fields]
    if version >= (4, 7) and sampling:
        name = {"topP": "top_p"}.get(sampling[0], sampling[0])
        raise _validation(f"The model returned the following errors: `{name}` is deprecated "
                          "for this model.")
    if version in ((4, 5),) and "temperature" in config and "topP" in config:
        raise _validation("The model returned the following errors: `temperature` and "
                          "`top_p` cannot both be specified for this model. Please use only "
                          "one.")


class BedrockDialect:
    """Bedrock Converse replies and AWS-shaped errors."""

    provider = "bedrock"

    def __init__(self) -> None:
        self._server_errors = 0

    def request_id(self) -> str:
        return str(uuid.uuid4())

    def error(self, exc: BadRequest) -> web.Response:
        code = exc.code or ("AccessDeniedException" if exc.kind == "auth" else
                            "ValidationException")
        return aws_error(code, exc.message, exc.status)

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = {}
        if retry_after_s is not None:
            headers["Retry-After"] = retry_after_value(retry_after_s)
        return aws_error("ThrottlingException",
                         "Too many requests, please wait before trying again.", 429, headers)

    def server_error(self) -> web.Response:
        self._server_errors += 1
        choice = self._server_errors % 3
        if choice == 1:
            return aws_error("InternalServerException", "The server encountered an internal "
                             "error while processing the request.", 500)
        if choice == 2:
            return aws_error("ServiceUnavailableException", "Service unavailable. Try your "
                             "request again.", 503)
        return aws_error("ModelErrorException", "The system encountered an unexpected error "
                         "during processing. Try your request again.", 424)

    def success(self, call: ChatCall, reply: Reply) -> web.Response:
        stop = {Finish.STOP: "end_turn", Finish.LENGTH: "max_tokens",
                Finish.REFUSAL: "content_filtered"}[reply.finish]
        text = REFUSAL_TEXT if reply.finish is Finish.REFUSAL else reply.text
        data = {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": stop,
            "usage": {"inputTokens": reply.tokens_in, "outputTokens": reply.tokens_out,
                      "totalTokens": reply.tokens_in + reply.tokens_out},
            "metrics": {"latencyMs": 42},
        }
        headers = {"x-amzn-RequestId": reply.request_id} if reply.routing else {}
        return web.Response(body=orjson.dumps(data), headers=headers,
                            content_type="application/json")
