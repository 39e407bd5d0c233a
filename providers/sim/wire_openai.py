"""The OpenAI chat-completions wire and its provider flavours.

Groq, DeepInfra, Azure and Vertex's open-model endpoint all speak this shape, but each
adds its own headers, usage fields, error wording and parameter rules (from
`shared/providers-reference.md`). Keeping the flavours in one module makes their
differences visible side by side.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from providers.sim.call import BadRequest, ChatCall, Finish, Reply, retry_after_value

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(
                part.get("text"), str
            ):
                parts.append(part["text"])
            else:
                raise BadRequest(f"'{where}.content' parts must be text parts", param=where)
        return "".join(parts)
    raise BadRequest(f"'{where}.content' must be a string or a list of text parts", param=where)


def parse_chat_body(provider: str, body: bytes, model_override: str | None = None) -> ChatCall:
    """Read a chat-completions body; missing or mistyped fields raise `BadRequest`."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.)",
            code="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object", code="invalid_json")
    model = model_override if model_override is not None else data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("you must provide a model parameter", param="model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is a required property", param="messages")
    system: list[str] = []
    user: list[str] = []
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"'{where}' must be an object with a 'role'", param=where)
        text = _content_text(message.get("content"), where)
        role = message["role"]
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            user.append(text)
        elif role != "assistant":
            raise BadRequest(f"'{where}.role' {role!r} is not supported", param=f"{where}.role")
    cap: int | None = None
    for name in ("max_completion_tokens", "max_tokens"):
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise BadRequest(f"'{name}' must be a positive integer", param=name)
        cap = value if cap is None else min(cap, value)
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise BadRequest("'seed' must be an integer", param="seed")
    temperature = data.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or not 0.0 <= float(temperature) <= 2.0
    ):
        raise BadRequest("'temperature' must be a number between 0 and 2", param="temperature")
    return ChatCall(provider, model, "\n".join(system), "\n".join(user), seed, cap, data)


def _envelope(reply: Reply, call: ChatCall, *, refusal_field: bool) -> dict[str, Any]:
    content: str | None = reply.text
    refusal: str | None = None
    finish = "length" if reply.finish is Finish.LENGTH else "stop"
    if reply.finish is Finish.REFUSAL:
        if refusal_field:
            content, refusal = None, REFUSAL_TEXT
        else:
            content = REFUSAL_TEXT
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal_field:
        message["refusal"] = refusal
    out: dict[str, Any] = {
        "object": "chat.completion",
        "created": int(time.time()),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": reply.tokens_in,
            "completion_tokens": reply.tokens_out,
            "total_tokens": reply.tokens_in + reply.tokens_out,
        },
    }
    if reply.routing:
        out = {"id": reply.request_id, **out, "model": reply.model_label}
    return out


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, headers=headers, content_type="application/json"
    )


class OpenAIDialect:
    """Generic OpenAI-compatible server (vLLM, gateways) and the auth-free `sim` provider."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def request_id(self) -> str:
        return "chatcmpl-" + uuid.uuid4().hex[:24]

    def headers(self, reply: Reply | None = None) -> dict[str, str]:
        del reply
        return {}

    def error(self, exc: BadRequest) -> web.Response:
        err_type = "invalid_request_error"
        if exc.kind == "auth" and self.provider != "groq":
            err_type = "authentication_error"
        body = {"error": {"message": exc.message, "type": err_type, "param": exc.param,
                          "code": exc.code}}
        return json_response(body, exc.status, self.headers())

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = self.headers()
        if retry_after_s is not None:
            headers["retry-after"] = retry_after_value(retry_after_s)
        body = {"error": {"message": "Rate limit reached for requests. Please try again later.",
                          "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
        return json_response(body, 429, headers)

    def server_error(self) -> web.Response:
        body = {"error": {"message": "The server had an error while processing your request. "
                          "Sorry about that!", "type": "server_error", "param": None,
                          "code": None}}
        return json_response(body, 500, self.headers())

    def validate(self, call: ChatCall) -> None:
        """Provider-specific parameter rules; the generic server accepts everything."""
        del call

    def success(self, call: ChatCall, reply: Reply) -> web.Response:
        return json_response(_envelope(reply, call, refusal_field=True), 200,
                             self.headers(reply))


class GroqDialect(OpenAIDialect):
    """Groq: strict about unsupported OpenAI options, generous with rate-limit headers."""

    #: A paid tier's daily request allowance: a rehearsal of a paper-scale campaign must not
    #: stall on the free tier's 14,400 (tests that need the limit set it low).
    DAY_LIMIT = 1_000_000
    DAY_S = 86_400.0

    def __init__(
        self,
        day_limit: int = DAY_LIMIT,
        day_s: float = DAY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("groq")
        self.day_limit = day_limit
        self.day_s = day_s
        self.minute_tokens = 18000
        self.used_today = 0
        self._clock = clock  # a parameter so a test can end the day without sleeping
        self.day_started = clock()

    def _roll_day(self) -> float:
        """Start a new day when the old one is over; seconds left in the current day."""
        now = self._clock()
        if now - self.day_started >= self.day_s:
            self.day_started, self.used_today = now, 0
        return self.day_s - (now - self.day_started)

    def request_id(self) -> str:
        return "req_" + uuid.uuid4().hex[:26]

    def headers(self, reply: Reply | None = None) -> dict[str, str]:
        """Groq sends these on every reply: requests per day, tokens per minute."""
        spent = 0
        day_left = self._roll_day()
        if reply is not None:
            self.used_today += 1
            spent = reply.tokens_in + reply.tokens_out
        return {
            "x-ratelimit-limit-requests": str(self.day_limit),
            "x-ratelimit-remaining-requests": str(max(0, self.day_limit - self.used_today)),
            "x-ratelimit-limit-tokens": str(self.minute_tokens),
            "x-ratelimit-remaining-tokens": str(max(0, self.minute_tokens - spent)),
            # The requests counter is per day: its reset is when this day ends, truthfully.
            "x-ratelimit-reset-requests": _go_duration(day_left),
            "x-ratelimit-reset-tokens": "7.66s",
        }

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = self.headers()
        if retry_after_s is not None:
            headers["retry-after"] = retry_after_value(retry_after_s)
            wait = f"{retry_after_s:.3f}s"
        else:
            wait = "a moment"
        # Groq's own 429 ends with the link to its billing page, even for a per-minute limit;
        # a quota reading of "billing" once mistook that for a spent quota.
        body = {"error": {
            "message": "Rate limit reached for model on requests per minute (RPM): Limit 30, "
                       f"Used 30, Requested 1. Please try again in {wait}. Need more tokens? "
                       "Upgrade to Dev Tier today at https://console.groq.com/settings/billing",
            "type": "requests", "code": "rate_limit_exceeded"}}
        return json_response(body, 429, headers)

    def server_error(self) -> web.Response:
        body = {"error": {"message": "Service Unavailable", "type": "internal_server_error",
                          "code": "service_unavailable"}}
        return json_response(body, 503, self.headers())

    def validate(self, call: ChatCall) -> None:
        body = call.extra
        for name in ("logprobs", "logit_bias", "top_logprobs"):
            if body.get(name) not in (None, False):
                raise BadRequest(f"'{name}' is not supported", param=name,
                                 code="invalid_request_error")
        n = body.get("n")
        if n is not None and n != 1:
            raise BadRequest("'n' : number must be at most 1", param="n",
                             code="invalid_request_error")
        for i, message in enumerate(body.get("messages", [])):
            if isinstance(message, dict) and "name" in message:
                raise BadRequest(f"'messages.{i}' : property 'name' is unsupported",
                                 param=f"messages.{i}.name", code="invalid_request_error")
        fmt = body.get("response_format")
        if body.get("reasoning_format") == "raw" and isinstance(fmt, dict) and fmt.get(
            "type", "text"
        ) != "text":
            raise BadRequest("`response_format` json mode cannot be combined with "
                             "reasoning_format raw", param="reasoning_format")

    def success(self, call: ChatCall, reply: Reply) -> web.Response:
        data = _envelope(reply, call, refusal_field=False)
        data["system_fingerprint"] = "fp_sim"
        data["usage"].update({"queue_time": 0.001, "prompt_time": 0.002,
                              "completion_time": 0.01, "total_time": 0.013})
        if reply.routing:
            data["x_groq"] = {"id": reply.request_id}
        return json_response(data, 200, self.headers(reply))


class DeepInfraDialect(OpenAIDialect):
    """DeepInfra: `/v1/openai`, `usage.estimated_cost`, terse 429 bodies, no limit headers."""

    PRICE_IN_PER_TOKEN = 0.09e-6
    PRICE_OUT_PER_TOKEN = 0.45e-6

    def __init__(self) -> None:
        super().__init__("deepinfra")

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = {}
        if retry_after_s is not None:
            headers["retry-after"] = retry_after_value(retry_after_s)
        # Over its 200 requests at once (reference §2); its "Model busy" 429 is its own
        # capacity, a provider error, not the rate limit this fault stands for.
        return json_response({"error": {"message": "Rate limited"}}, 429, headers)

    def server_error(self) -> web.Response:
        return json_response({"error": {"message": "Internal server error"}}, 500)

    def error(self, exc: BadRequest) -> web.Response:
        if exc.kind == "auth":
            return json_response({"detail": {"error": "Unauthorized"}}, exc.status)
        return json_response({"error": {"message": exc.message}}, exc.status)

    def validate(self, call: ChatCall) -> None:
        cap = call.extra.get("max_tokens")
        if isinstance(cap, int) and cap > 16384:
            raise BadRequest("max_tokens must be at most 16384", param="max_tokens")

    def success(self, call: ChatCall, reply: Reply) -> web.Response:
        data = _envelope(reply, call, refusal_field=False)
        data["usage"]["estimated_cost"] = round(
            reply.tokens_in * self.PRICE_IN_PER_TOKEN + reply.tokens_out * self.PRICE_OUT_PER_TOKEN,
            10,
        )
        return json_response(data, 200)


_REASONING_DEPLOYMENT = re.compile(r"(gpt-5|(^|[^a-z])o[134](-|$))", re.IGNORECASE)


class AzureDialect(OpenAIDialect):
    """Azure OpenAI: content-filter annotations, apim ids, ms retry hints, GPT-5 rules."""

    def __init__(self) -> None:
        super().__init__("azure")

    def headers(self, reply: Reply | None = None) -> dict[str, str]:
        return {
            "apim-request-id": str(uuid.uuid4()),
            "x-request-id": str(uuid.uuid4()),
            "x-ms-region": "Sim Central",
            "x-ratelimit-remaining-requests": "99",
            "x-ratelimit-remaining-tokens": "99000",
        }

    def error(self, exc: BadRequest) -> web.Response:
        if exc.kind == "auth":
            body: dict[str, Any] = {"error": {"code": "401", "message": exc.message}}
        elif exc.kind == "not_found":
            body = {"error": {"code": "404", "message": exc.message}}
        else:
            body = {"error": {"message": exc.message, "type": "invalid_request_error",
                              "param": exc.param, "code": exc.code}}
        return json_response(body, exc.status, self.headers())

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = self.headers()
        headers["x-ratelimit-remaining-requests"] = "0"
        wait = 6.0 if retry_after_s is None else retry_after_s
        if retry_after_s is not None:
            headers["retry-after"] = str(max(1, int(-(-retry_after_s // 1))))
            headers["retry-after-ms"] = str(round(retry_after_s * 1000))
        body = {"error": {"code": "429", "message": (
            "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
            "2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier. "
            f"Please retry after {max(1, int(-(-wait // 1)))} seconds.")}}
        return json_response(body, 429, headers)

    def server_error(self) -> web.Response:
        body = {"error": {"code": "InternalServerError", "message": "The server had an error "
                          "processing your request. Sorry about that!"}}
        return json_response(body, 500, self.headers())

    def validate(self, call: ChatCall) -> None:
        body = call.extra
        if not _REASONING_DEPLOYMENT.search(call.model):
            return
        temperature = body.get("temperature")
        if temperature is not None and float(temperature) != 1.0:
            raise BadRequest(
                f"Unsupported value: 'temperature' does not support {temperature} with this "
                "model. Only the default (1) value is supported.",
                param="temperature", code="unsupported_value")
        for name in ("top_p", "presence_penalty", "frequency_penalty", "logprobs",
                     "top_logprobs", "logit_bias", "max_tokens"):
            if body.get(name) is not None:
                hint = " Use 'max_completion_tokens' instead." if name == "max_tokens" else ""
                raise BadRequest(
                    f"Unsupported parameter: '{name}' is not supported with this model.{hint}",
                    param=name, code="unsupported_parameter")

    def success(self, call: ChatCall, reply: Reply) -> web.Response:
        data = _envelope(reply, call, refusal_field=True)
        filtered = reply.finish is Finish.REFUSAL
        if filtered:
            data["choices"][0]["finish_reason"] = "content_filter"
            data["choices"][0]["message"]["content"] = None
        safe = {"filtered": False, "severity": "safe"}
        data["choices"][0]["content_filter_results"] = {
            "hate": safe, "self_harm": safe, "sexual": safe,
            "violence": {"filtered": filtered, "severity": "medium" if filtered else "safe"},
        }
        data["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": {
            "hate": safe, "self_harm": safe, "sexual": safe, "violence": safe}}]
        data["usage"]["completion_tokens_details"] = {"reasoning_tokens": 0}
        return json_response(data, 200, self.headers(reply))


class VertexOpenAIDialect(OpenAIDialect):
    """Vertex's OpenAI-compatible endpoint: OpenAI bodies, google.rpc errors."""

    def __init__(self) -> None:
        super().__init__("vertex")

    def error(self, exc: BadRequest) -> web.Response:
        status = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND"}.get(exc.status, "INVALID_ARGUMENT")
        return json_response({"error": {"code": exc.status, "message": exc.message,
                                        "status": status}}, exc.status)

    def rate_limited(self, retry_after_s: float | None) -> web.Response:
        headers = {}
        if retry_after_s is not None:
            headers["retry-after"] = retry_after_value(retry_after_s)
        return json_response({"error": {"code": 429, "message": (
            "Resource exhausted. Please try again later. Please refer to "
            "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more "
            "details."), "status": "RESOURCE_EXHAUSTED"}}, 429, headers)

    def server_error(self) -> web.Response:
        return json_response({"error": {"code": 503, "message": "The service is currently "
                                        "unavailable.", "status": "UNAVAILABLE"}}, 503)


def _go_duration(seconds: float) -> str:
    """Groq's duration format: "2m59.56s", "7.66s", "1h2m3s"."""
    hours, rest = divmod(max(seconds, 0.0), 3600.0)
    minutes, secs = divmod(rest, 60.0)
    text = f"{secs:.2f}s"
    if minutes or hours:
        text = f"{int(minutes)}m" + text
    if hours:
        text = f"{int(hours)}h" + text
    return text
