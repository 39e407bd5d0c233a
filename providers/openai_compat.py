"""The OpenAI chat-completions shape shared by OpenAI-compatible servers, Groq, DeepInfra, Azure
and Vertex's open-model endpoint: one body builder and one reply classifier.

Providers differ only in small ways (the name of the output-token cap, where the request id
lives, whether a 429 means "per day"), so each states its differences as a `ClientDialect` and
options a model is known to reject are data in `REJECTED_OPTIONS`, not branches in code.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from providers.base import (
    DETAIL_LIMIT,
    Headers,
    as_float,
    as_int,
    body_excerpt,
    load_json,
    short,
    status_outcome,
    with_auth_hint,
)
from providers.body_template import BodyTemplate, shape, template
from providers.constrained import constraint_fields, fold_system
from providers.headers import (
    rate_limit_info,
    retry_after_seconds,
    spent_by_wait,
    wait_from_message,
)
from providers.secrets import Secret, first_set, redact_result
from providers.types import (
    TOKEN_FIELDS,
    ChatRequest,
    Completion,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)


@dataclass(frozen=True)
class ClientDialect:
    """How one provider's flavour of the OpenAI shape differs from the others."""

    provider: str
    #: Body field for the output-token cap (`max_tokens` is deprecated on OpenAI/Groq/Azure).
    token_field: str = "max_completion_tokens"
    #: Response headers that may carry a request id, tried in order after the body's `id`.
    request_id_headers: tuple[str, ...] = ("x-request-id",)
    #: A 200 lacking these top-level body fields is `missing_routing_metadata`.
    required_fields: tuple[str, ...] = ("id", "model")
    #: The provider's `x-ratelimit-*-requests` window is a day (Groq): remaining 0 on a 429
    #: means the daily quota is spent rather than a short burst limit.
    requests_header_is_daily: bool = False
    #: Constrained-output forms the server takes (`providers.constrained`); a model asking for
    #: another has it left out and recorded rather than sent to fail. Hosted OpenAI-shaped APIs
    #: take OpenAI's `json_schema`; a generic OpenAI-compatible server may take any of them.
    response_formats: frozenset[str] = frozenset({"json_schema"})
    #: A 429 whose message matches this (case-insensitive) is the provider short of capacity,
    #: not our rate: a provider error, retried without cutting the lane's concurrency, which
    #: would only slow the lane once the model is back (DeepInfra's "Model busy").
    busy_429: str | None = None


@dataclass(frozen=True)
class OptionRule:
    """A model (by provider and id pattern) that rejects an option: omit it and record why.

    The rule applies when any of the model's names matches `model_pattern` and none matches
    `except_pattern` (for "every model but these" rules).
    """

    provider: str
    model_pattern: str
    option: str
    reason: str
    except_pattern: str | None = None

    def applies(self, provider: str, model_names: tuple[str, ...]) -> bool:
        if self.provider != provider:
            return False
        pattern = re.compile(self.model_pattern, re.IGNORECASE)
        if not any(pattern.search(name) for name in model_names):
            return False
        if self.except_pattern is None:
            return True
        exempt = re.compile(self.except_pattern, re.IGNORECASE)
        return not any(exempt.search(name) for name in model_names)


#: OpenAI's reasoning models (o-series, GPT-5), under any org prefix: they take only the
#: default temperature and `max_completion_tokens`, never `max_tokens`.
OPENAI_REASONING = r"^(?:[\w.-]+/)?(?:gpt-5|o1|o3|o4)"
#: Options known to be rejected (400) by a model; sources in ../shared/providers-reference.md
#: (§1 Groq, §5 Azure reasoning models) and the paper's Appendix C.
REJECTED_OPTIONS: tuple[OptionRule, ...] = (
    OptionRule("azure", OPENAI_REASONING, "temperature",
               "Azure reasoning models (o-series, GPT-5) accept only the default temperature"),
    OptionRule("openai", OPENAI_REASONING, "temperature",
               "OpenAI reasoning models accept only the default temperature"),
    OptionRule("groq", r".", "reasoning_effort",
               "Groq accepts reasoning_effort only on gpt-oss and qwen3 models",
               except_pattern=r"gpt-oss|qwen3"),
)


@dataclass(frozen=True)
class ValueRule:
    """A model (by provider and id pattern) that takes an option only with these values.

    Another value is a `ConfigError` naming them, before anything is sent, as Bedrock and
    Vertex say of an effort they cannot map: the model takes the option, so leaving it out
    (`OptionRule`) would run it at its default rather than what the spec asked, and sending
    it has every request answered 400.
    """

    provider: str
    model_pattern: str
    option: str
    values: tuple[str, ...]

    def refuses(self, provider: str, model_names: tuple[str, ...], value: object) -> bool:
        if self.provider != provider or value is None or value in self.values:
            return False
        pattern = re.compile(self.model_pattern, re.IGNORECASE)
        return any(pattern.search(name) for name in model_names)


#: Option values a model is known to refuse (400); sources in ../shared/providers-reference.md
#: (§1 Groq: gpt-oss takes low|medium|high, qwen3 none|default).
ACCEPTED_VALUES: tuple[ValueRule, ...] = (
    ValueRule("groq", r"qwen3", "reasoning_effort", ("none", "default")),
    ValueRule("groq", r"gpt-oss", "reasoning_effort", ("low", "medium", "high")),
)


def check_values(config: ModelConfig, provider: str) -> None:
    """Raise `ConfigError` for an option value the model refuses (`ACCEPTED_VALUES`)."""
    names = rule_model_names(config)
    for rule in ACCEPTED_VALUES:
        value = getattr(config, rule.option)
        if rule.refuses(provider, names, value):
            accepted = ", ".join(repr(v) for v in rule.values)
            raise ConfigError(
                f"model {config.name!r} ({provider}): {rule.option} {value!r} is not one "
                f"this model takes ({accepted})",
                key=rule.option,
            )


@functools.lru_cache(maxsize=256)
def omitted_options(
    provider: str, model_names: tuple[str, ...], rules: tuple[OptionRule, ...] = REJECTED_OPTIONS
) -> tuple[str, ...]:
    """Names of the options this provider/model pair rejects, in rule order.

    Cached: the answer depends only on its arguments, and every request of a model asks it
    (matching the rules' patterns cost several microseconds a request).
    """
    seen: list[str] = []
    for rule in rules:
        if rule.option not in seen and rule.applies(provider, model_names):
            seen.append(rule.option)
    return tuple(seen)


def rule_model_names(config: ModelConfig) -> tuple[str, ...]:
    """Names matched against `REJECTED_OPTIONS`: the model id, the spec's display name, and the
    `base_model` extra. An Azure deployment id may say nothing of the model behind it, so a
    model named "GPT-5.6 Luna" is treated as GPT-5 family even if deployed as `luna`."""
    names = [config.model, config.name]
    base_model = config.extra.get("base_model")
    if base_model:
        names.append(base_model)
    return tuple(names)


def build_body(
    config: ModelConfig, req: ChatRequest, dialect: ClientDialect, model_field: str | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The chat-completions body and the options left out because the model rejects them.

    A per-request seed (`ChatRequest.seed`, different per pass) and output cap (a retry's)
    win over the model's defaults. With `fold_system` the system message opens the user turn
    (`request_notes` says so for the ledger). Constrained output is generated from the
    request's keys in the form `config.response_format` names, if the dialect takes it.
    """
    messages: list[dict[str, str]] = []
    if config.fold_system:
        messages.append({"role": "user", "content": fold_system(req.system, req.user)})
    else:
        if req.system:
            messages.append({"role": "system", "content": req.system})
        messages.append({"role": "user", "content": req.user})
    wanted: dict[str, Any] = {}
    if config.temperature is not None:
        wanted["temperature"] = config.temperature
    cap = req.cap(config)
    if cap is not None:
        wanted[dialect.token_field] = cap
    seed = req.seed if req.seed is not None else config.seed
    if seed is not None:
        wanted["seed"] = seed
    if config.reasoning_effort is not None:
        wanted["reasoning_effort"] = config.reasoning_effort
    if config.json_mode:
        wanted["response_format"] = {"type": "json_object"}
    rejected = set(omitted_options(dialect.provider, rule_model_names(config)))
    if config.response_format and req.keys:
        fields = constraint_fields(config.response_format, req.keys)
        if config.response_format not in dialect.response_formats:
            rejected.update(fields)
        wanted.update(fields)
    body: dict[str, Any] = {"model": model_field or config.model, "messages": messages}
    omitted: list[str] = []
    for key, value in wanted.items():
        if key in rejected:
            omitted.append(key)
        else:
            body[key] = value
    return body, tuple(omitted)


def request_notes(config: ModelConfig, req: ChatRequest) -> tuple[str, ...]:
    """What `build_body` did to the messages that the attempt should record."""
    if config.fold_system and req.system:
        return ("system folded into user turn",)
    return ()


def token_field(config: ModelConfig, default: str) -> str:
    """The output-cap field name: the provider's default, or `extra.token_field` for servers
    that only know the other spelling (older vLLM, llama.cpp and Ollama know `max_tokens`)."""
    chosen = config.extra.get("token_field", default)
    if chosen not in TOKEN_FIELDS:
        raise ConfigError(
            f"model {config.name!r}: token_field must be one of {', '.join(TOKEN_FIELDS)}",
            key="token_field",
        )
    return chosen


def chat_url(base_url: str) -> str:
    """`{base}/chat/completions`, accepting a base that already ends with that path."""
    base = base_url.rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


def encode(body: Mapping[str, Any]) -> bytes:
    """A request body's bytes (compact JSON, UTF-8, floats in shortest round-trip form).

    The standard library, not orjson: with orjson 3.13 each body encoded left about 3 KB
    behind in a long dispatch (RSS 236 -> 254 MB over 5,400 requests of a rehearsal, and
    growing with the campaign; 233 -> 238 MB and flat with `json`, same campaign, same
    session), which is what made a paper-scale dispatch grow past 600 MB (issue 9). The
    cost is a few microseconds per request, nothing beside the request itself.
    """
    return _ENCODER.encode(body).encode()


#: What `json.dumps(..., ensure_ascii=False, separators=(",", ":"), allow_nan=False)` makes
#: for every body; one encoder instead of one built per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
#: Body templates an adapter keeps (one per request shape; shapes differ by answer keys only
#: under constrained output).
_TEMPLATES = 256


@dataclass(frozen=True, repr=False)
class OpenAICompatAdapter:
    """An adapter for one model behind an OpenAI-shaped chat-completions URL.

    `auth_header` is the header name and `credential` its value (a `Secret`, or None for
    keyless local servers); `bearer` prefixes the value with `Bearer `.
    """

    provider: str
    config: ModelConfig
    url: str
    dialect: ClientDialect
    credential: Secret | None = None
    auth_header: str = "Authorization"
    bearer: bool = True
    model_field: str | None = None
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    #: Where the credential came from, opening an auth failure's detail (`with_auth_hint`).
    auth_hint: str | None = None

    #: Building is pure: the engine builds on its event loop.
    may_block = False

    def secrets(self) -> tuple[Secret, ...]:
        return () if self.credential is None else (self.credential,)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(provider={self.provider!r}, model={self.config.model!r}, "
            f"url={self.url!r}, credential={'***' if self.credential else None})"
        )

    def headers(self) -> dict[str, str]:
        """Request headers, the credential (if any) included."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self.extra_headers)
        if self.credential is not None:
            value = self.credential.reveal()
            headers[self.auth_header] = f"Bearer {value}" if self.bearer else value
        return headers

    @functools.cached_property
    def _sent_headers(self) -> Mapping[str, str]:
        """`headers()` once per adapter, read-only: the same for every request it builds
        (the credential is fixed for the adapter's life). A multidict proxy because aiohttp
        copies any other mapping into one on every request (about 1 µs)."""
        return CIMultiDictProxy(CIMultiDict(self.headers()))

    @functools.cached_property
    def _templates(self) -> dict[tuple[object, ...], BodyTemplate | None]:
        """Body templates by request shape (`providers.body_template`); None for a shape that
        has none."""
        return {}

    def _template(self, req: ChatRequest) -> BodyTemplate | None:
        key = shape(req, bool(self.config.response_format))
        if key is None:
            return None
        templates = self._templates
        try:
            return templates[key]
        except KeyError:
            if len(templates) >= _TEMPLATES:  # answer keys vary by question: stay bounded
                templates.clear()
            made = templates[key] = template(req, self._body, _ENCODER.encode)
            return made

    def _body(self, req: ChatRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        return build_body(self.config, req, self.dialect, self.model_field)

    def build(self, req: ChatRequest) -> HttpRequest:
        notes = request_notes(self.config, req)
        body_template = self._template(req)
        if body_template is None:
            body, omitted = self._body(req)
            return HttpRequest("POST", self.url, self._sent_headers, encode(body), omitted, notes)
        return HttpRequest(
            "POST", self.url, self._sent_headers, body_template.render(req),
            body_template.omitted, notes,
        )

    def parse(self, status: int, headers: Mapping[str, str], body: bytes) -> Completion | Failure:
        result = parse_reply(status, headers, body, self.dialect)
        if isinstance(result, Failure) and result.http_status in (404, 405, 501):
            # The URL is the likely culprit: say which one, and for a user's own server how
            # such a URL usually goes wrong.
            hint = ""
            if result.http_status == 501:
                hint = (
                    "; that server does not implement this request: is base_url the model's "
                    "server?"
                )
            elif self.provider == "openai":
                hint = "; does base_url end in /v1?"
            # The server's own text is cut to leave room: a web server's HTML error page
            # filled the whole detail and cut the URL and the hint off.
            said = f" (POST {self.url}{hint})"
            detail = short(result.detail, max(DETAIL_LIMIT - len(said), 60)) + said
            result = replace(result, detail=short(detail))
        result = with_auth_hint(result, self.auth_hint)
        # A proxy echoing our request back must not carry the key into the ledger.
        return redact_result(result, self.secrets())


def bearer_key_adapter(
    config: ModelConfig, env: Mapping[str, str], dialect: ClientDialect, variables: tuple[str, ...],
    default_base_url: str,
) -> OpenAICompatAdapter:
    """A hosted OpenAI-compatible API keyed by the first of `variables` set in `env`."""
    found = first_set(env, variables)
    if found is None:
        raise ConfigError(
            f"model {config.name!r} ({dialect.provider}): set {' or '.join(variables)}"
        )
    check_values(config, dialect.provider)
    return OpenAICompatAdapter(
        provider=dialect.provider,
        config=config,
        url=chat_url(config.base_url or default_base_url),
        dialect=replace(dialect, token_field=token_field(config, dialect.token_field)),
        credential=found[1],
        auth_hint=f"credential from {found[0]}",
    )


# --------------------------------------------------------------------------- reply parsing

_RATE_LIMIT_TEXT = re.compile(r"rate.?limit|too many requests|throttl", re.IGNORECASE)
#: Not a bare "billing": Groq ends every per-minute 429 with "Need more tokens? Upgrade to Dev
#: Tier today at https://console.groq.com/settings/billing", which is no spent quota. OpenAI's
#: 429 for an account without billing ("billing_not_active": "... please check your billing
#: details ...") is one: retrying it within the minute only gives each request up.
_QUOTA_TEXT = re.compile(
    r"per day|\b(?:RPD|TPD)\b|daily|insufficient_quota|exceeded your current quota"
    r"|billing[ _]hard[ _]limit|billing_not_active|check your billing details"
    r"|credits? (?:exhausted|depleted)|out of credits",
    re.IGNORECASE,
)


class _Envelope:
    """What every reply says about itself, for whichever branch classifies it.

    The limits are read at once (every result carries them); the wait and the header request
    id only when asked, as a plain success needs neither (its body has the id), and it is most
    replies. Properties, not `functools.cached_property`: on Python 3.11 that takes a lock on
    every first read, and a failure reads each at most twice.
    """

    __slots__ = ("_request_id_headers", "body", "data", "headers", "limits", "status")

    def __init__(
        self, status: int, headers: Headers, data: Any, body: bytes, dialect: ClientDialect
    ) -> None:
        self.status = status
        self.headers = headers
        self.data = data
        self.body = body
        self.limits = rate_limit_info(headers)
        self._request_id_headers = dialect.request_id_headers

    @property
    def retry_after_s(self) -> float | None:
        return retry_after_seconds(self.headers)

    @property
    def header_request_id(self) -> str | None:
        return self.headers.get_first(*self._request_id_headers)


def _error_fields(data: Any) -> tuple[str, str, str]:
    """(message, code, type) from `{"error": {...}}` or `{"error": "text"}`; empty when absent."""
    if not isinstance(data, dict):
        return "", "", ""
    error = data.get("error")
    if isinstance(error, str):
        return error, "", ""
    if not isinstance(error, dict):
        message = data.get("message") or data.get("detail")
        if isinstance(message, dict):  # DeepInfra: {"detail": {"error": "Unauthorized"}}
            message = message.get("error") or message.get("message") or message
        return (str(message) if message else ""), "", ""
    message = error.get("message")
    return (
        str(message) if message is not None else "",
        str(error.get("code") or ""),
        str(error.get("type") or ""),
    )


def _usage(data: Mapping[str, Any]) -> tuple[int | None, int | None, float | None]:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None, None, None
    return (
        as_int(usage.get("prompt_tokens")),
        as_int(usage.get("completion_tokens")),
        as_float(usage.get("estimated_cost")),
    )


def _body_request_id(data: Mapping[str, Any]) -> str | None:
    x_groq = data.get("x_groq")
    if isinstance(x_groq, dict) and isinstance(x_groq.get("id"), str) and x_groq["id"]:
        return str(x_groq["id"])
    value = data.get("id")
    return value if isinstance(value, str) and value else None


def _text(content: Any) -> str | None:
    """Message content as text: a string, or a list of `{"type": "text", "text": ...}` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        texts = [p for p in parts if isinstance(p, str)]
        return "".join(texts) if texts else None
    return None


def parse_reply(
    status: int, headers: Mapping[str, str], body: bytes, dialect: ClientDialect
) -> Completion | Failure:
    """Classify one chat-completions reply (section 6 of the provider reference)."""
    env = _Envelope(status, Headers(headers), load_json(body), body, dialect)
    if not 200 <= status < 300:
        return _classify_error(env, dialect)
    return _classify_success(env, dialect)


def _failure(env: _Envelope, outcome: Outcome, detail: str, **extra: Any) -> Failure:
    request_id = extra.pop("provider_request_id", None) or env.header_request_id
    return Failure(
        outcome=outcome,
        detail=short(detail),
        http_status=env.status,
        retry_after_s=extra.pop("retry_after_s", env.retry_after_s),
        provider_request_id=request_id,
        limits=env.limits,
        **extra,
    )


#: Groq's 400 codes for a generation its parser refused, the text kept as `failed_generation`:
#: malformed JSON in JSON mode, and a tool call no request offered (gpt-oss-120b calls
#: tools such as `repo_browser.open_file` unasked: "Tool choice is none, but model called a
#: tool"). The model's fault, not the request's: another sample can answer, where a bad
#: request is never asked again and three in a row stop the lane.
_GENERATION_FAILED = frozenset({"json_validate_failed", "tool_use_failed"})


def _status_outcome(status: int, message: str, code: str, dialect: ClientDialect) -> Outcome:
    """The outcome a non-2xx status means before any provider-specific reading of the body."""
    # 498: Groq flex tier capacity_exceeded.
    if status == 501:
        # "Not Implemented": the server at base_url has no such method (a static file server
        # on the port a model server was meant to have). Asking again cannot change that, so
        # it is the request's fault and stops the lane, where a 5xx would probe for minutes.
        return Outcome.BAD_REQUEST
    outcome = status_outcome(status, rate_limits=(498,), provider_errors=(409, 424, 499))
    # DeepInfra's "Model busy, retry later" (autoscaling) is its fault, not our rate
    # (reference §6): retried, and the lane's concurrency kept for when it is back.
    busy = dialect.busy_429
    if status == 429 and busy and re.search(busy, message, re.IGNORECASE):
        return Outcome.PROVIDER_ERROR
    if outcome is not Outcome.BAD_REQUEST:
        return outcome
    if code in _GENERATION_FAILED:  # Groq: the model's output failed; a retry can succeed
        return Outcome.INVALID_RESPONSE
    if code == "content_filter":  # Azure: the prompt tripped the content filter
        return Outcome.REFUSAL
    return Outcome.BAD_REQUEST


def _validation_errors(data: Any) -> str | None:
    """The messages of a FastAPI/pydantic request-validation body (`{"detail": [{"loc": [...],
    "msg": "..."}]}`), or None. llama-cpp-python answers a body it cannot validate (OpenAI's
    `json_schema` response format) with such a body under HTTP 500: the same request fails the
    same way every time, so it is the request's fault, not the server's."""
    if not isinstance(data, dict) or not isinstance(data.get("detail"), list):
        return None
    parts = []
    for item in data["detail"]:
        if not isinstance(item, dict) or "msg" not in item or "loc" not in item:
            return None
        where = ".".join(str(p) for p in item["loc"]) if isinstance(item["loc"], list) else ""
        parts.append(f"{where}: {item['msg']}" if where else str(item["msg"]))
    return "; ".join(parts) or None


def _classify_error(env: _Envelope, dialect: ClientDialect) -> Failure:
    invalid = _validation_errors(env.data)
    if invalid is not None:
        detail = f"HTTP {env.status}: the server rejected the request: {invalid}"
        return _failure(env, Outcome.BAD_REQUEST, detail)
    message, code, kind = _error_fields(env.data)
    outcome = _status_outcome(env.status, message, code, dialect)
    label = " ".join(part for part in (code, kind) if part and part != str(env.status))
    text = message or (body_excerpt(env.body) if env.body else "")
    detail = f"HTTP {env.status}" + (f" {label}" if label else "") + (f": {text}" if text else "")
    extra: dict[str, Any] = {}
    if outcome in (Outcome.RATE_LIMIT, Outcome.PROVIDER_ERROR) and env.retry_after_s is None:
        waited = wait_from_message(message)
        if waited is not None:
            extra["retry_after_s"] = waited
    if outcome is Outcome.RATE_LIMIT:
        daily = dialect.requests_header_is_daily and env.limits.remaining_requests == 0
        stated = extra.get("retry_after_s", env.retry_after_s)
        said = daily or bool(_QUOTA_TEXT.search(message) or _QUOTA_TEXT.search(code))
        detail, extra["quota_exhausted"] = spent_by_wait(detail, said, stated)
        reset = env.limits.reset_requests_s
        if daily and reset:
            # The day's request counter is what is spent: capacity returns at its reset, the
            # quota's stated wait (`engine.retry.RetryPolicy.quota_pauses`) even where a
            # retry-after names a shorter one.
            extra["retry_after_s"] = max(stated or 0.0, reset)
    if outcome is Outcome.INVALID_RESPONSE and isinstance(env.data, dict):
        error = env.data.get("error")
        generation = error.get("failed_generation") if isinstance(error, dict) else None
        if isinstance(generation, str):
            extra["raw_text"] = generation
    return _failure(env, outcome, detail, **extra)


def _error_in_body(env: _Envelope, data: Mapping[str, Any]) -> Failure:
    """A 2xx reply whose body is an error (some gateways do this): a rate limit when it says
    so, else the provider's failure."""
    message_text, code, _ = _error_fields(data)
    outcome = (
        Outcome.RATE_LIMIT
        if _RATE_LIMIT_TEXT.search(message_text) or code in ("429", "rate_limit_exceeded")
        else Outcome.PROVIDER_ERROR
    )
    extra: dict[str, Any] = {}
    detail = f"error in 200 body: {message_text or code}"
    if outcome is Outcome.RATE_LIMIT:
        stated = env.retry_after_s
        if stated is None:
            stated = extra["retry_after_s"] = wait_from_message(message_text)
        said = bool(_QUOTA_TEXT.search(message_text))
        detail, extra["quota_exhausted"] = spent_by_wait(detail, said, stated)
    return _failure(env, outcome, detail, **extra)


def _classify_success(env: _Envelope, dialect: ClientDialect) -> Completion | Failure:
    data = env.data
    if not isinstance(data, dict):
        return _failure(env, Outcome.INVALID_RESPONSE,
                        f"unparseable body: {body_excerpt(env.body, 120)}", foreign=True)
    if "error" in data and not data.get("choices"):
        return _error_in_body(env, data)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _failure(env, Outcome.INVALID_RESPONSE, "reply has no choices", foreign=True)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        return _failure(env, Outcome.INVALID_RESPONSE, "choice has no message")
    tokens_in, tokens_out, cost = _usage(data)
    body_request_id = _body_request_id(data)
    request_id = body_request_id or env.header_request_id
    reported = data.get("model")
    model_reported = reported if isinstance(reported, str) and reported else None
    finish = choice.get("finish_reason")
    finish_reason = finish if isinstance(finish, str) else None
    text = _text(message.get("content"))
    counted = {"tokens_in": tokens_in, "tokens_out": tokens_out}

    missing = [
        name for name in dialect.required_fields
        if not (isinstance(data.get(name), str) and data.get(name))
        and not (name == "id" and body_request_id)
    ]
    if missing:
        return _failure(env, Outcome.MISSING_ROUTING_METADATA,
                        f"200 reply without {', '.join(missing)}",
                        provider_request_id=request_id, raw_text=text, **counted)
    refusal = message.get("refusal")
    if finish_reason == "content_filter" or (isinstance(refusal, str) and refusal.strip()):
        why = refusal if isinstance(refusal, str) and refusal.strip() else "content_filter"
        return _failure(env, Outcome.REFUSAL, f"refused: {why}",
                        provider_request_id=request_id, raw_text=text,
                        finish_reason=finish_reason, **counted)
    if finish_reason == "length":
        return _failure(env, Outcome.TRUNCATED,
                        f"output cap reached after {tokens_out} tokens",
                        provider_request_id=request_id, raw_text=text,
                        finish_reason=finish_reason, **counted)
    if text is None or not text.strip():
        return _failure(env, Outcome.INVALID_RESPONSE, f"empty content (finish {finish_reason})",
                        provider_request_id=request_id, raw_text=text,
                        finish_reason=finish_reason, **counted)
    return Completion(
        text=text,
        finish_reason=finish_reason,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        provider_request_id=request_id,
        model_reported=model_reported,
        limits=env.limits,
        cost_usd=cost,
    )
