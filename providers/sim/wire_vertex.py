"""The Vertex AI Gemini `generateContent` wire and google.rpc error envelopes.

Google's JSON front end rejects unknown field names (camelCase or snake_case both map
to the proto), signals safety blocks through `finishReason`, and reports every error as
`{"error": {"code", "message", "status"}}`; the simulator does the same.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import orjson
from aiohttp import web

from providers.sim.call import BadRequest, ChatCall, Finish, Reply, retry_after_value

VERTEX_UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

TOP_LEVEL_FIELDS = frozenset({
    "contents", "systemInstruction", "generationConfig", "safetySettings", "tools",
    "toolConfig", "labels", "cachedContent", "modelArmorConfig",
})
GENERATION_FIELDS = frozenset({
    "temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences",
    "presencePenalty", "frequencyPenalty", "seed", "responseMimeType", "responseSchema",
    "responseJsonSchema", "thinkingConfig", "responseLogprobs", "logprobs", "mediaResolution",
    "responseModalities", "speechConfig", "audioTimestamp", "routingConfig",
})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def google_error(status: int, message: str,
                 headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"code": status, "message": message,
                      "status": STATUS_NAMES.get(status, "UNKNOWN")}}
    return web.Response(body=orjson.dumps(body), status=status, headers=headers,
                        content_type="application/json")


def _unknown(name: str, where: str | None) -> BadRequest:
    at = f" at '{where}'" if where else ""
    return BadRequest(f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find '
                      "field.")


def _normalise(obj: dict[str, Any], allowed: frozenset[str], where: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        camel = _camel(key)
        if camel not in allowed:
            raise _unknown(key, where)
        out[camel] = value
    return out


def _parts_text(content: Any, where: str) -> tuple[str | None, str]:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        raise BadRequest(f"Invalid value at '{where}': parts must be a list.")
    texts = []
    for part in content["parts"]:
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            raise BadRequest(f"Invalid value at '{where}.parts': only text parts are simulated.")
        texts.append(part["text"])
    role = content.get("role")
    return (role if isinstance(role, str) else None), "".join(texts)


def parse_generate_body(model: str, body: bytes) -> ChatCall:
    """Read a generateContent body; unknown fields and bad values get INVALID_ARGUMENT."""
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest("Invalid JSON payload received. Unexpected token.") from None
    if not isinstance(raw, dict):
        raise BadRequest("Invalid JSON payload received. Expected an object.")
    data = _normalise(raw, TOP_LEVEL_FIELDS, None)
    contents = data.get("contents")
    if not isinstance(contents, list) or not contents:
        raise BadRequest("Unable to submit request because it must include at least one parts "
                         "field, which describes the prompt input.")
    user: list[str] = []
    for i, content in enumerate(contents):
        role, text = _parts_text(content, f"contents[{i}]")
        if role not in (None, "user", "model"):
            raise BadRequest(f"Please use a valid role: user, model. (contents[{i}].role)")
        if role != "model":
            user.append(text)
    system = ""
    if "systemInstruction" in data:
        _, system = _parts_text(data["systemInstruction"], "system_instruction")
    config_raw = data.get("generationConfig", {})
    if not isinstance(config_raw, dict):
        raise BadRequest("Invalid value at 'generation_config': expected an object.")
    config = _normalise(config_raw, GENERATION_FIELDS, "generation_config")
    cap = config.get("maxOutputTokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise BadRequest("Unable to submit request because max_output_tokens must be a positive "
                         "integer.")
    temperature = config.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or not 0 <= temperature <= 2
    ):
        raise BadRequest("Unable to submit request because it has a temperature value of "
                         f"{temperature} but the supported range is from 0 (inclusive) to 2.0001 "
                         "(exclusive). Update the value and try again.")
    seed = config.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise BadRequest(f"Invalid value at 'generation_config.seed' (TYPE_INT32), {seed!r}")
    mime = config.get("responseMimeType")
    if mime is not None and mime not in ("text/plain", "application/json", "text/x.enum"):
        raise BadRequest(f"Unable to submit request because it has a response_mime_type with "
                         f"unsupported value {mime!r}.")
    return ChatCall("vertex", model, system, "\n".join(user), seed, cap, data)


class VertexDialect:
    """Gemini replies and google.rpc errors."""

    provider = "vertex"

    def __init__(self) -> None:
        self._server_errors = 0

    def request_id(self) -> str:
        return "sim-" + uuid.uuid4().hex[:20]

    def error(self, exc: BadRequest) -> web.Response:
        return google_error(exc.status, exc.message)

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = {}
        if retry_after_s is not None:
            headers["Retry-After"] = retry_after_value(retry_after_s)
        return google_error(429, "Resource exhausted. Please try again later. Please refer to "
                            "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 "
                            "for more details.", headers)

    def server_error(self) -> web.Response:
        self._server_errors += 1
        if self._server_errors % 2:
            return google_error(503, "The service is currently unavailable.")
        return google_error(500, "Internal error encountered.")

    def success(self, call: ChatCall, reply: Reply) -> web.Response:
        candidate: dict[str, Any] = {"index": 0}
        if reply.finish is Finish.REFUSAL:
            candidate["finishReason"] = "SAFETY"
            candidate["safetyRatings"] = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                                           "probability": "HIGH", "blocked": True}]
        else:
            candidate["content"] = {"role": "model", "parts": [{"text": reply.text}]}
            candidate["finishReason"] = "MAX_TOKENS" if reply.finish is Finish.LENGTH else "STOP"
        data: dict[str, Any] = {
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": reply.tokens_in,
                              "candidatesTokenCount": reply.tokens_out,
                              "totalTokenCount": reply.tokens_in + reply.tokens_out},
            "createTime": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
        }
        if reply.routing:
            data["modelVersion"] = reply.model_label
            data["responseId"] = reply.request_id
        del call
        return web.Response(body=orjson.dumps(data), content_type="application/json")
