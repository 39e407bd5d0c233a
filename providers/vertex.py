"""Google Vertex AI: Gemini `generateContent`, and the OpenAI-compatible endpoint for open models.

The paper reached Gemini and Llama 4 Maverick through Vertex. Both speak to the same project
and location with the same OAuth bearer token (google-auth, cached in `TokenCache`); they
differ in body and reply:

- Gemini: `systemInstruction` / `contents` / `generationConfig` in, `candidates` out, with
  safety blocks reported as a `finishReason` or, for a blocked prompt, as no candidates and a
  `promptFeedback.blockReason`.
- Open models (model ids like `meta/llama-4-maverick-17b-128e-instruct-maas`, or
  `extra.endpoint = "openai"`): the OpenAI chat-completions shape at
  `.../endpoints/openapi/chat/completions`, built and parsed by `providers.openai_compat`.

Errors of both come in Google's `{"error": {"code", "message", "status"}}` envelope, read by
`status` first because the HTTP code alone is ambiguous (a 503 may be RESOURCE_EXHAUSTED); a
`google.rpc.RetryInfo` among its `details` says how long to wait.

`build` may block to refresh the token (about once an hour); the engine may call it in a
worker thread. It raises `ConfigError` when credentials cannot be loaded at all, and
`TokenRefreshError` (with `.retryable`) when the token endpoint refuses or cannot be reached.
"""

from __future__ import annotations

import os
import re
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from providers.base import Headers, as_int, load_json, short, status_outcome, with_auth_hint
from providers.google_auth_tokens import (
    CREDENTIALS_FILE_ENV,
    TokenCache,
    TokenRefreshError,
    credentials_source,
    load_credentials,
)
from providers.headers import (
    parse_number,
    plausible_wait,
    rate_limit_info,
    retry_after_seconds,
    spent_by_wait,
    wait_from_message,
)
from providers.openai_compat import ClientDialect, build_body, encode, parse_reply, token_field
from providers.secrets import Secret, credential_value, redact_result
from providers.types import (
    ChatRequest,
    Completion,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)

PROVIDER = "vertex"
PROJECT_ENVS = ("GOOGLE_CLOUD_PROJECT",)
LOCATION_ENVS = ("GOOGLE_CLOUD_LOCATION",)
DEFAULT_API_VERSION = "v1"

#: google.rpc status -> outcome (https://cloud.google.com/apis/design/errors).
RPC_STATUS: dict[str, Outcome] = {
    "RESOURCE_EXHAUSTED": Outcome.RATE_LIMIT,
    "UNAVAILABLE": Outcome.PROVIDER_ERROR,
    "INTERNAL": Outcome.PROVIDER_ERROR,
    "UNKNOWN": Outcome.PROVIDER_ERROR,
    "ABORTED": Outcome.PROVIDER_ERROR,
    "CANCELLED": Outcome.PROVIDER_ERROR,
    "DATA_LOSS": Outcome.PROVIDER_ERROR,
    "DEADLINE_EXCEEDED": Outcome.TIMEOUT,
    "UNAUTHENTICATED": Outcome.AUTH_ERROR,
    "PERMISSION_DENIED": Outcome.AUTH_ERROR,
    "INVALID_ARGUMENT": Outcome.BAD_REQUEST,
    "NOT_FOUND": Outcome.BAD_REQUEST,
    "FAILED_PRECONDITION": Outcome.BAD_REQUEST,
    "OUT_OF_RANGE": Outcome.BAD_REQUEST,
    "UNIMPLEMENTED": Outcome.BAD_REQUEST,
    "ALREADY_EXISTS": Outcome.BAD_REQUEST,
}

#: Gemini finishReason -> the failure it means; STOP (and an absent reason) is success, and
#: a reason missing here is a failure too (`_finish_failure`).
FINISH_FAILURES: dict[str, Outcome] = {
    "MAX_TOKENS": Outcome.TRUNCATED,
    "SAFETY": Outcome.REFUSAL,
    "PROHIBITED_CONTENT": Outcome.REFUSAL,
    "BLOCKLIST": Outcome.REFUSAL,
    "SPII": Outcome.REFUSAL,
    "RECITATION": Outcome.REFUSAL,
    "IMAGE_SAFETY": Outcome.REFUSAL,
    "IMAGE_PROHIBITED_CONTENT": Outcome.REFUSAL,
    "IMAGE_RECITATION": Outcome.REFUSAL,
    "IMAGE_OTHER": Outcome.INVALID_RESPONSE,
    "NO_IMAGE": Outcome.INVALID_RESPONSE,
    "LANGUAGE": Outcome.REFUSAL,
    "MALFORMED_FUNCTION_CALL": Outcome.INVALID_RESPONSE,
    "UNEXPECTED_TOOL_CALL": Outcome.INVALID_RESPONSE,
    "TOO_MANY_TOOL_CALLS": Outcome.INVALID_RESPONSE,
    "OTHER": Outcome.INVALID_RESPONSE,
    "FINISH_REASON_UNSPECIFIED": Outcome.INVALID_RESPONSE,
}

#: Gemini 3 and later take a thinking *level*; 2.5 takes a token *budget*.
_THINKING_LEVEL_MODEL = re.compile(r"gemini-(?:[3-9]|[1-9]\d)(?![\d])")
_THINKING_BUDGET_MODEL = re.compile(r"gemini-2\.5")
_THINKING_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}
_THINKING_BUDGETS = {"none": 0, "low": 1024, "medium": 8192, "high": 24576}
#: A per-day quota is spent (pause the lane) rather than a per-minute rate hit.
_DAILY_QUOTA = re.compile(r"per[ _-]?day|daily", re.IGNORECASE)
#: The `error.details[]` entry that says when to ask again (`retryDelay`, a Duration "37s").
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
#: How many recently issued tokens are remembered for redaction.
_TOKENS_REMEMBERED = 8


def _first(config_value: str | None, env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    if config_value:
        return config_value
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def uses_openai_endpoint(config: ModelConfig) -> bool:
    """Open (MaaS) models speak the OpenAI shape; Gemini models speak `generateContent`."""
    chosen = config.extra.get("endpoint", "").strip().lower()
    if chosen in ("openai", "openapi"):
        return True
    if chosen in ("gemini", "generatecontent"):
        return False
    if chosen:
        raise ConfigError(
            f"model {config.name!r}: endpoint must be 'openai' or 'gemini', not {chosen!r}",
            key="endpoint",
        )
    return config.model.startswith("meta/")


#: Multi-region locations, whose host is `aiplatform.{location}.rep.googleapis.com`
#: (providers-reference, Vertex; google-genai's client picks the same host for them).
MULTI_REGIONS = frozenset({"us", "eu"})


def default_base_url(location: str) -> str:
    """Regional host, the global one for `locations/global`, or a multi-region's."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in MULTI_REGIONS:
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def required_env(config: ModelConfig, env: Mapping[str, str]) -> list[str]:
    """Project and location variables unless the spec names them, and a credential.

    The credential is a service-account (or gcloud) file named by
    `GOOGLE_APPLICATION_CREDENTIALS`, unless the spec's `api_key_env` names a variable holding
    a ready access token or gcloud's application-default file exists.
    """
    needed: list[str] = []
    if not config.project:
        needed.append(PROJECT_ENVS[0])
    if not config.location:
        needed.append(LOCATION_ENVS[0])
    if config.api_key_env:
        needed.append(config.api_key_env)
    elif env.get(CREDENTIALS_FILE_ENV) or not _gcloud_adc_file(env).is_file():
        needed.append(CREDENTIALS_FILE_ENV)
    return needed


def _gcloud_adc_file(env: Mapping[str, str]) -> Path:
    """Where `gcloud auth application-default login` leaves credentials (google-auth looks
    there when `GOOGLE_APPLICATION_CREDENTIALS` is unset)."""
    config_dir = env.get("CLOUDSDK_CONFIG")
    if config_dir:
        return Path(config_dir) / "application_default_credentials.json"
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    return home / ".config" / "gcloud" / "application_default_credentials.json"


def _error_object(payload: Any) -> dict[str, Any] | None:
    """The `error` object of a google.rpc envelope, which Vertex sometimes wraps in a
    one-element list; None if `payload` is not one."""
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else None


def rpc_error(payload: Any) -> tuple[str, str, int | None] | None:
    """(status, message, code) of a google.rpc error envelope, or None if `payload` is not one.

    Vertex sometimes wraps the envelope in a one-element list.
    """
    error = _error_object(payload)
    if error is None:
        return None
    status = error.get("status")
    message = error.get("message")
    return (
        status if isinstance(status, str) else "",
        message if isinstance(message, str) else "",
        as_int(error.get("code")),
    )


def _retry_delay(payload: Any) -> float | None:
    """Seconds of the envelope's google.rpc.RetryInfo `retryDelay`, or None.

    The delay is a Duration in its JSON form ("37s", "1.5s"). Anything else (negative, not a
    number, past any wait a provider states: `providers.headers.plausible_wait`) is ignored as
    an unreadable Retry-After header is: a wrong guess is worse than the engine's own backoff.
    A long wait is clipped by the engine, or read as a spent quota
    (`providers.headers.is_spent_quota_wait`).
    """
    error = _error_object(payload)
    details = error.get("details") if error is not None else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, dict) and detail.get("@type") == _RETRY_INFO:
            delay = detail.get("retryDelay")
            if not (isinstance(delay, str) and delay.strip().endswith("s")):
                return None
            return plausible_wait(parse_number(delay.strip()[:-1]))
    return None


def _status(status: int) -> Outcome:
    """504 is DEADLINE_EXCEEDED, 499 CANCELLED; a 200 carrying an error envelope is theirs."""
    return status_outcome(
        status, timeouts=(504,), provider_errors=(499,), otherwise=Outcome.PROVIDER_ERROR
    )


class VertexAdapter:
    """One Vertex model; see the module docstring for which endpoint it speaks."""

    provider = PROVIDER
    #: `build` may block (token refresh / credential chain): the engine builds on a thread.
    may_block = True

    def __init__(
        self,
        config: ModelConfig,
        env: Mapping[str, str],
        *,
        tokens: TokenCache | None = None,
    ) -> None:
        self._config = config
        self._openai = uses_openai_endpoint(config)
        self._env_token: Secret | None = None
        self._tokens = tokens
        self._tokens_lock = threading.Lock()
        self._issued: deque[Secret] = deque(maxlen=_TOKENS_REMEMBERED)
        self._credentials_file = env.get(CREDENTIALS_FILE_ENV, "").strip()
        self._env = {CREDENTIALS_FILE_ENV: self._credentials_file} if self._credentials_file else {}
        file_project: str | None = None
        if tokens is None and config.api_key_env:
            value = credential_value(env, config.api_key_env)
            if not value:
                raise ConfigError(
                    f"model {config.name!r}: {config.api_key_env} (an access token) is not set"
                )
            self._env_token = Secret(value)
        elif tokens is None and self._credentials_file:
            credentials, file_project = load_credentials(self._env, config.name)
            source = credentials_source(credentials, self._credentials_file)
            self._tokens = TokenCache(credentials, source=source)
        self._auth_hint = self._credential_hint(config)
        project = _first(config.project, env, PROJECT_ENVS) or file_project
        location = _first(config.location, env, LOCATION_ENVS)
        if project is None:
            raise ConfigError(
                f"model {config.name!r}: no Google Cloud project; set `project` in the spec "
                f"or {PROJECT_ENVS[0]}"
            )
        if location is None:
            raise ConfigError(
                f"model {config.name!r}: no Vertex location; set `location` in the spec "
                f"or {LOCATION_ENVS[0]}"
            )
        self._project = project
        self._location = location
        base = (config.base_url or default_base_url(location)).rstrip("/")
        version = config.api_version or DEFAULT_API_VERSION
        prefix = (
            f"{base}/{version}/projects/{quote(project, safe='')}"
            f"/locations/{quote(location, safe='')}"
        )
        if self._openai:
            self._url = f"{prefix}/endpoints/openapi/chat/completions"
            self._dialect = ClientDialect(
                provider=PROVIDER,
                token_field=token_field(config, "max_tokens"),
                request_id_headers=("x-request-id",),
            )
        else:
            # Accept the short id and the resource-style spellings of it.
            model = config.model.removeprefix("publishers/google/models/").removeprefix("google/")
            self._url = f"{prefix}/publishers/google/models/{quote(model, safe='')}:generateContent"
            self._dialect = ClientDialect(provider=PROVIDER)
        self._thinking = None if self._openai else self._thinking_config()

    def __repr__(self) -> str:
        kind = "openai" if self._openai else "gemini"
        return f"VertexAdapter({self._config.name!r}, {self._config.model!r}, {kind})"

    @property
    def url(self) -> str:
        return self._url

    # ---- credentials ----------------------------------------------------------------------

    def _credential_hint(self, config: ModelConfig) -> str:
        """Where the token comes from, for an auth failure's detail."""
        if self._env_token is not None:
            return f"credential from {config.api_key_env}"
        if self._credentials_file:
            return f"credentials from {CREDENTIALS_FILE_ENV}"
        return (
            "credentials from Application Default Credentials "
            "(gcloud auth application-default login)"
        )

    def _token_cache(self) -> TokenCache:
        if self._tokens is None:
            with self._tokens_lock:
                if self._tokens is None:  # ADC: resolved on first use, may touch the network
                    credentials, _ = load_credentials(self._env, self._config.name)
                    self._tokens = TokenCache(credentials)
        return self._tokens

    def _auth_headers(self) -> dict[str, str]:
        if self._env_token is not None:
            return {"Authorization": f"Bearer {self._env_token.reveal()}"}
        cache = self._token_cache()
        token = cache.token()
        with self._tokens_lock:
            if not self._issued or self._issued[-1].reveal() != token:
                self._issued.append(Secret(token))
        headers = {"Authorization": f"Bearer {token}"}
        if cache.quota_project_id:
            headers["x-goog-user-project"] = cache.quota_project_id
        return headers

    def secrets(self) -> tuple[Secret, ...]:
        with self._tokens_lock:
            issued = tuple(self._issued)
        return issued if self._env_token is None else (*issued, self._env_token)

    # ---- building -------------------------------------------------------------------------

    def _thinking_config(self) -> dict[str, Any] | None:
        """`generationConfig.thinkingConfig` for the spec's effort, if the model takes one."""
        effort = (self._config.reasoning_effort or "").strip().lower()
        if effort in ("", "default"):
            return None
        model = self._config.model
        if _THINKING_LEVEL_MODEL.search(model):
            if effort == "none":
                return None  # Gemini 3 cannot switch thinking off; recorded as omitted
            if effort not in _THINKING_LEVELS:
                raise ConfigError(
                    f"model {self._config.name!r}: reasoning_effort {effort!r} is not one of "
                    f"{sorted(_THINKING_LEVELS)}",
                    key="reasoning_effort",
                )
            return {"thinkingLevel": _THINKING_LEVELS[effort]}
        if _THINKING_BUDGET_MODEL.search(model):
            if effort not in _THINKING_BUDGETS:
                raise ConfigError(
                    f"model {self._config.name!r}: reasoning_effort {effort!r} is not one of "
                    f"{sorted(_THINKING_BUDGETS)}",
                    key="reasoning_effort",
                )
            if effort == "none" and "pro" in model:
                return None  # 2.5 Pro cannot switch thinking off; recorded as omitted
            budget = _THINKING_BUDGETS[effort]
            cap = self._config.max_tokens
            if cap is not None and budget >= cap:
                # Thinking shares maxOutputTokens: a reply could end before any answer text,
                # each one paid for and retried as cut short (Bedrock's Claude refuses this).
                raise ConfigError(
                    f"model {self._config.name!r}: reasoning_effort {effort!r} gives "
                    f"{model} a thinking budget of {budget:,} tokens, which shares max_tokens "
                    f"({cap:,}): replies could end before any answer; raise max_tokens above "
                    "the budget and the answer's length, or lower reasoning_effort",
                    key="reasoning_effort",
                )
            return {"thinkingBudget": budget}
        return None

    def _gemini_body(self, req: ChatRequest) -> tuple[bytes, tuple[str, ...]]:
        config = self._config
        omitted: list[str] = []
        generation: dict[str, Any] = {}
        if config.temperature is not None:
            generation["temperature"] = config.temperature
        cap = req.cap(config)
        if cap is not None:
            generation["maxOutputTokens"] = cap
        seed = req.seed if req.seed is not None else config.seed
        if seed is not None:
            generation["seed"] = seed
        if config.json_mode:
            generation["responseMimeType"] = "application/json"
        if config.response_format:
            omitted.append("response_format")  # the OpenAI-shaped forms mean nothing here
        effort = (config.reasoning_effort or "").strip().lower()
        if self._thinking is not None:
            generation["thinkingConfig"] = self._thinking
        elif effort not in ("", "default"):
            omitted.append("reasoning_effort")
        payload: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": req.user}]}]}
        if req.system:
            payload["systemInstruction"] = {"parts": [{"text": req.system}]}
        if generation:
            payload["generationConfig"] = generation
        return encode(payload), tuple(omitted)

    def _openai_body(self, req: ChatRequest) -> tuple[bytes, tuple[str, ...]]:
        config = self._config
        omitted: tuple[str, ...] = ()
        effort = (config.reasoning_effort or "").strip().lower()
        if effort:
            # Open MaaS models take no reasoning effort; sending it would only fail.
            config = replace(config, reasoning_effort=None)
            if effort != "default":
                omitted = ("reasoning_effort",)
        body, dropped = build_body(config, req, self._dialect)
        return encode(body), dropped + omitted

    @property
    def openai_endpoint(self) -> bool:
        """Whether this model speaks the OpenAI-compatible endpoint (open models)."""
        return self._openai

    def request_body(self, req: ChatRequest) -> tuple[bytes, tuple[str, ...]]:
        """The body `build` sends, and the options left out (batch lines carry the same)."""
        return self._openai_body(req) if self._openai else self._gemini_body(req)

    def auth_headers(self) -> dict[str, str]:
        """The bearer (and quota-project) headers of the current token; may block to refresh."""
        return self._auth_headers()

    def build(self, req: ChatRequest) -> HttpRequest:
        """The request with a current bearer token (may block once an hour to refresh it)."""
        body, omitted = self.request_body(req)
        headers = {"Content-Type": "application/json", **self._auth_headers()}
        return HttpRequest("POST", self._url, headers, body, omitted)

    # ---- parsing --------------------------------------------------------------------------

    def parse(self, status: int, headers: Mapping[str, str], body: bytes) -> Completion | Failure:
        """Classify one reply; see `RPC_STATUS` and `FINISH_FAILURES`."""
        view = Headers(headers)
        payload = load_json(body)
        envelope = rpc_error(payload)
        if envelope is not None and (envelope[0] or not self._openai):
            result: Completion | Failure = self._rpc_failure(
                status, view, envelope, _retry_delay(payload)
            )
        elif self._openai:
            result = parse_reply(status, view, body, self._dialect)
        elif status != 200:
            result = Failure(
                _status(status),
                short(f"HTTP {status}: {body.decode('utf-8', errors='replace')}"),
                http_status=status,
                retry_after_s=retry_after_seconds(view),
            )
        else:
            result = self._gemini_reply(status, view, payload, body)
        if status == 401 and isinstance(result, Failure):
            result = self._refused(result)
        return redact_result(with_auth_hint(result, self._auth_hint), self.secrets())

    def _refused(self, failure: Failure) -> Failure:
        """A 401 (UNAUTHENTICATED): the token may have been revoked or expired early. Drop it
        so the next attempt fetches another, as google-auth's AuthorizedSession refreshes and
        retries on a 401 (`TokenCache.reject`: once per token). The reply does not say which
        token it refused; the latest handed out is the one almost every request carries."""
        if self._env_token is not None or self._tokens is None:
            return failure  # a ready token from the environment cannot be refreshed
        with self._tokens_lock:
            latest = self._issued[-1].reveal() if self._issued else None
        if latest is None or not self._tokens.reject(latest):
            return failure
        return replace(failure, stale_credential=True)

    def _rpc_failure(
        self,
        status: int,
        view: Headers,
        envelope: tuple[str, str, int | None],
        delay: float | None,
    ) -> Failure:
        rpc_status, message, code = envelope
        # The envelope's status names the error; without it, its code (a 200 may carry a 429).
        outcome = RPC_STATUS.get(rpc_status) or _status(code or status)
        # Each wait the reply states is the server's: a Retry-After header (a gateway's, as
        # Google documents none), RetryInfo's `delay` (the API's own) and the prose ("Please
        # retry in 58.934310785s", finer than RetryInfo's "58s"). The longest is kept, as
        # asking again at a shorter one only meets the same limit.
        waits = [retry_after_seconds(view), delay]
        if outcome in (Outcome.RATE_LIMIT, Outcome.PROVIDER_ERROR):
            waits.append(wait_from_message(message))
        retry_after = max((wait for wait in waits if wait is not None), default=None)
        label = rpc_status or f"HTTP {status}"
        detail = f"{label}: {message}" if message else label
        quota = False
        if outcome is Outcome.RATE_LIMIT:
            detail, quota = spent_by_wait(detail, bool(_DAILY_QUOTA.search(message)), retry_after)
        return Failure(
            outcome,
            short(detail),
            http_status=status,
            retry_after_s=retry_after,
            quota_exhausted=quota,
            limits=rate_limit_info(view),
        )

    def _gemini_reply(
        self, status: int, view: Headers, payload: Any, body: bytes
    ) -> Completion | Failure:
        if not isinstance(payload, dict):
            return Failure(
                Outcome.INVALID_RESPONSE,
                "reply body is not a JSON object",
                http_status=status,
                raw_text=body.decode("utf-8", errors="replace"),
                foreign=True,  # not Gemini's reply at all (a proxy's page): see Failure.foreign
            )
        tokens_in, tokens_out = _gemini_usage(payload.get("usageMetadata"))
        response_id = payload.get("responseId")
        request_id = response_id if isinstance(response_id, str) and response_id else None
        version = payload.get("modelVersion")
        model_version = version if isinstance(version, str) and version else None
        candidates = payload.get("candidates")
        candidate = (
            candidates[0] if isinstance(candidates, list) and candidates
            and isinstance(candidates[0], dict) else None
        )
        text = _candidate_text(candidate) if candidate is not None else None
        finish = candidate.get("finishReason") if candidate is not None else None
        finish_reason = finish if isinstance(finish, str) and finish else None

        def failure(outcome: Outcome, detail: str) -> Failure:
            return Failure(
                outcome, short(detail), http_status=status, provider_request_id=request_id,
                tokens_in=tokens_in, tokens_out=tokens_out, raw_text=text,
                finish_reason=finish_reason,  # as the server sent it, truncated ones included
            )

        if request_id is None or model_version is None:
            fields = (("responseId", request_id), ("modelVersion", model_version))
            missing = ", ".join(name for name, value in fields if value is None)
            return failure(Outcome.MISSING_ROUTING_METADATA, f"200 reply without {missing}")
        if candidate is None:
            blocked = _prompt_blocked(payload.get("promptFeedback"))
            if blocked is not None:
                return failure(Outcome.REFUSAL, blocked)
            return failure(Outcome.INVALID_RESPONSE, "reply has no candidates")
        finish_failure = _finish_failure(finish_reason)
        if finish_failure is not None:
            return failure(*finish_failure)
        if text is None or not text.strip():
            return failure(Outcome.INVALID_RESPONSE, f"no text (finishReason={finish_reason})")
        return Completion(
            text=text,
            finish_reason=finish_reason,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            provider_request_id=request_id,
            model_reported=model_version,
            limits=rate_limit_info(view),
        )


def _gemini_usage(usage: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens of `usageMetadata`; thinking tokens bill as output."""
    if not isinstance(usage, dict):
        return None, None
    candidates_n = as_int(usage.get("candidatesTokenCount"))
    thoughts_n = as_int(usage.get("thoughtsTokenCount"))
    tokens_out = None
    if candidates_n is not None or thoughts_n is not None:
        tokens_out = as_int((candidates_n or 0) + (thoughts_n or 0))  # the sum a count too
    return as_int(usage.get("promptTokenCount")), tokens_out


def _finish_failure(reason: str | None) -> tuple[Outcome, str] | None:
    """The failure a candidate's finishReason means, or None for STOP and an absent reason."""
    if reason is None or reason == "STOP":
        return None
    if reason in FINISH_FAILURES:
        return FINISH_FAILURES[reason], f"finishReason={reason}"
    # A reason this adapter does not know yet (Google adds them: the IMAGE_* family came after
    # the rest) still says generation stopped short of its natural end, so the text may be cut
    # or filtered. Taken as an answer, it would be recorded unread; as an invalid response it
    # is asked again within the answer-failure budget, and the detail names the reason.
    return Outcome.INVALID_RESPONSE, f"finishReason={reason}, a reason this adapter does not know"


def _prompt_blocked(feedback: Any) -> str | None:
    """Why the prompt was blocked (`promptFeedback.blockReason`), or None if it was not."""
    reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
    if not (isinstance(reason, str) and reason):
        return None
    why = feedback.get("blockReasonMessage")
    return f"prompt blocked: {reason}" + (f" ({why})" if isinstance(why, str) else "")


def _candidate_text(candidate: Mapping[str, Any]) -> str | None:
    """Joined text parts, skipping thoughts; None when the candidate has no parts at all."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        return None
    return "".join(
        part["text"]
        for part in parts
        if isinstance(part, dict) and isinstance(part.get("text"), str) and not part.get("thought")
    )


def create_adapter(config: ModelConfig, env: Mapping[str, str]) -> VertexAdapter:
    """Registry entry point (see docs/interfaces.md)."""
    return VertexAdapter(config, env)


__all__ = [
    "FINISH_FAILURES",
    "RPC_STATUS",
    "TokenRefreshError",
    "VertexAdapter",
    "create_adapter",
    "default_base_url",
    "required_env",
    "rpc_error",
    "uses_openai_endpoint",
]
