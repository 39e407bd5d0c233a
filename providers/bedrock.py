"""Amazon Bedrock through the Converse API: SigV4 or a Bedrock API key; one request, one reply.

The paper reached its Claude models this way. What makes Bedrock different from the
OpenAI-shaped providers:

- Requests are signed (SigV4, service `bedrock`) over the exact URL and body bytes sent,
  with credentials from the standard AWS chain through botocore, unless a Bedrock API key
  (`AWS_BEARER_TOKEN_BEDROCK`) is set, which is sent as a bearer token as botocore does.
- The model id is percent-encoded into the path (`...-v1%3A0`). The URL we return is already
  encoded and must be sent verbatim (with aiohttp: `yarl.URL(url, encoded=True)`), or the
  signature no longer matches what the server sees.
- Converse has no seed field, and recent Claude models reject temperature; such options are
  dropped and recorded in `HttpRequest.omitted` (a table keyed by model-id pattern below).
- Errors are named by `x-amzn-ErrorType` or the body's `__type`, not by status alone.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from providers.base import Headers, as_int, load_json, short, status_outcome, with_auth_hint
from providers.headers import rate_limit_info, retry_after_seconds, wait_from_message
from providers.openai_compat import encode, rule_model_names
from providers.secrets import Secret, credential_value, redact, redact_result
from providers.sigv4_signer import AwsCredentials, Clock, signed_headers, utc_now
from providers.types import (
    ChatRequest,
    Completion,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)

PROVIDER = "bedrock"
SIGNING_SERVICE = "bedrock"
BEARER_ENV = "AWS_BEARER_TOKEN_BEDROCK"
REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")
KEY_ENVS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"
#: Variables that point botocore's chain at credentials without putting keys in the env.
CHAIN_HINT_ENVS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)

#: Options each model family rejects, by model-id pattern (`re.search`, so inference-profile
#: prefixes such as `us.` and ARNs match too). Every matching row applies.
OPTION_RULES: tuple[tuple[re.Pattern[str], frozenset[str], str], ...] = (
    # Converse has no seed field at all, and Anthropic models take none.
    (re.compile(r""), frozenset({"seed"}), "Converse has no seed field"),
    # Claude Opus 4.7 and later: "`temperature` is deprecated for this model." (400).
    (
        re.compile(r"anthropic\.claude-opus-4-(?:[7-9]|[1-9]\d)(?!\d)"),
        frozenset({"temperature"}),
        "Claude Opus 4.7+ rejects temperature",
    ),
    # Claude generation 5 and later (Sonnet, Opus, Fable, Haiku): the paper could not send it.
    (
        re.compile(r"anthropic\.claude-[a-z]+-(?:[5-9]|[1-9]\d)(?!\d)"),
        frozenset({"temperature"}),
        "Claude 5+ rejects temperature",
    ),
)

#: Claude models that take adaptive thinking with an effort level (4.6 and later).
_ADAPTIVE_THINKING = re.compile(
    r"anthropic\.claude-(?:[a-z]+-(?:[5-9]|[1-9]\d)(?!\d)|[a-z]+-4-(?:[6-9]|[1-9]\d)(?!\d))"
)
#: Claude models with budgeted extended thinking (3.7 and the 4.x line before 4.6).
_BUDGET_THINKING = re.compile(r"anthropic\.claude-(?:3-7-|[a-z]+-4(?:-[0-5])?(?!\d))")
_ADAPTIVE_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
_THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}
_MIN_THINKING_BUDGET = 1024

#: stopReason -> the failure it means; absent reasons (end_turn, stop_sequence) are success.
STOP_FAILURES: dict[str, Outcome] = {
    "max_tokens": Outcome.TRUNCATED,
    "model_context_window_exceeded": Outcome.TRUNCATED,
    "content_filtered": Outcome.REFUSAL,
    "guardrail_intervened": Outcome.REFUSAL,
    "refusal": Outcome.REFUSAL,
    "malformed_model_output": Outcome.INVALID_RESPONSE,
    "malformed_tool_use": Outcome.INVALID_RESPONSE,
    "tool_use": Outcome.INVALID_RESPONSE,  # we offer no tools: a tool call is no answer
    "invalid_query": Outcome.BAD_REQUEST,
    "max_tool_invocations": Outcome.INVALID_RESPONSE,
}

#: Error code (from `x-amzn-ErrorType` or `__type`) -> outcome.
ERROR_CODES: dict[str, Outcome] = {
    "ThrottlingException": Outcome.RATE_LIMIT,
    "Throttling": Outcome.RATE_LIMIT,
    "ThrottledException": Outcome.RATE_LIMIT,
    "TooManyRequestsException": Outcome.RATE_LIMIT,
    "ServiceQuotaExceededException": Outcome.RATE_LIMIT,
    "ModelNotReadyException": Outcome.PROVIDER_ERROR,
    "ServiceUnavailableException": Outcome.PROVIDER_ERROR,
    "ServiceUnavailable": Outcome.PROVIDER_ERROR,
    "InternalServerException": Outcome.PROVIDER_ERROR,
    "InternalServerError": Outcome.PROVIDER_ERROR,
    "InternalFailure": Outcome.PROVIDER_ERROR,
    "ModelErrorException": Outcome.PROVIDER_ERROR,
    "ModelStreamErrorException": Outcome.PROVIDER_ERROR,
    "ModelTimeoutException": Outcome.TIMEOUT,
    "RequestTimeout": Outcome.TIMEOUT,
    "RequestTimeoutException": Outcome.TIMEOUT,
    "AccessDeniedException": Outcome.AUTH_ERROR,
    "UnrecognizedClientException": Outcome.AUTH_ERROR,
    "ExpiredToken": Outcome.AUTH_ERROR,
    "ExpiredTokenException": Outcome.AUTH_ERROR,
    "InvalidSignatureException": Outcome.AUTH_ERROR,
    "SignatureDoesNotMatch": Outcome.AUTH_ERROR,
    "IncompleteSignature": Outcome.AUTH_ERROR,
    "IncompleteSignatureException": Outcome.AUTH_ERROR,
    "MissingAuthenticationToken": Outcome.AUTH_ERROR,
    "MissingAuthenticationTokenException": Outcome.AUTH_ERROR,
    "InvalidClientTokenId": Outcome.AUTH_ERROR,
    "ValidationException": Outcome.BAD_REQUEST,
    "ResourceNotFoundException": Outcome.BAD_REQUEST,
    "SerializationException": Outcome.BAD_REQUEST,
    "UnknownOperationException": Outcome.BAD_REQUEST,
}

#: A throttling message that means a long quota is spent, not a momentary rate.
_QUOTA_MESSAGE = re.compile(r"quota|per[ _-]day|daily", re.IGNORECASE)
#: Access key ids, even when the server echoes one we did not send ourselves.


def options_omitted(model_id: str) -> frozenset[str]:
    """The request options `model_id` rejects, per `OPTION_RULES`."""
    omitted: set[str] = set()
    for pattern, options, _why in OPTION_RULES:
        if pattern.search(model_id):
            omitted |= options
    return frozenset(omitted)


def error_code(headers: Mapping[str, str], payload: Any) -> str | None:
    """The AWS error code as botocore reads it: header first, then the body, trimmed."""
    raw = Headers(headers).get_first("x-amzn-ErrorType")
    if raw is None and isinstance(payload, dict):
        for key in ("__type", "code", "Code"):
            value = payload.get(key)
            if isinstance(value, str) and value.strip():
                raw = value
                break
    if raw is None:
        return None
    code = raw.split(":", 1)[0]
    code = code.rsplit("#", 1)[-1]
    return code.strip() or None


def region_of(config: ModelConfig, env: Mapping[str, str]) -> str | None:
    if config.region:
        return config.region
    for name in REGION_ENVS:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def chain_configured(env: Mapping[str, str]) -> bool:
    """Whether botocore's chain has somewhere to look besides the instance metadata service."""
    if any(env.get(name) for name in CHAIN_HINT_ENVS):
        return True
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    return (home / ".aws" / "credentials").is_file() or (home / ".aws" / "config").is_file()


def required_env(config: ModelConfig, env: Mapping[str, str]) -> list[str]:
    """Variables this model needs: a region (unless the spec names one) and a credential.

    Credentials may come from shared profile files or a role rather than variables; when
    such a source is configured no credential variable is required.
    """
    needed: list[str] = []
    if not config.region:
        set_names = [name for name in REGION_ENVS if env.get(name)]
        needed.append(set_names[0] if set_names else REGION_ENVS[0])
    if config.api_key_env:
        needed.append(config.api_key_env)  # the spec names where its Bedrock API key is
    elif env.get(BEARER_ENV):
        needed.append(BEARER_ENV)
    elif any(env.get(name) for name in KEY_ENVS) or not chain_configured(env):
        needed.extend(KEY_ENVS)
    return needed


class CredentialSource:
    """AWS credentials for signing: fixed keys from `env`, or botocore's session chain.

    The chain (profiles, SSO, assumed roles, instance roles) is resolved on first use, not at
    construction, because it may block on the network; botocore's refreshable credentials
    then renew themselves, and `get_frozen_credentials` gives one consistent triple.
    """

    def __init__(self, model_name: str, env: Mapping[str, str]) -> None:
        self._model_name = model_name
        self._lock = threading.Lock()
        self._chain: Any = None
        self._static: AwsCredentials | None = None
        self._profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE")
        self._credentials_file = env.get("AWS_SHARED_CREDENTIALS_FILE")
        self._config_file = env.get("AWS_CONFIG_FILE")
        access_key = credential_value(env, KEY_ENVS[0])
        secret_key = credential_value(env, KEY_ENVS[1])
        if access_key and secret_key:
            token = credential_value(env, SESSION_TOKEN_ENV) or None
            self._static = AwsCredentials(access_key, secret_key, token)
        elif access_key or secret_key:
            missing = KEY_ENVS[1] if access_key else KEY_ENVS[0]
            raise ConfigError(f"model {model_name!r}: {missing} is not set (needed with the other)")

    def hint(self) -> str:
        """Where these credentials come from, for an auth failure's detail."""
        if self._static is not None:
            token = f" and {SESSION_TOKEN_ENV}" if self._static.token else ""
            return f"AWS credentials from {KEY_ENVS[0]}, {KEY_ENVS[1]}{token}"
        profile = f"profile {self._profile!r}" if self._profile else "the default profile"
        return f"AWS credentials of {profile} (botocore's chain)"

    def current(self) -> AwsCredentials:
        if self._static is not None:
            return self._static
        with self._lock:
            if self._chain is None:
                self._chain = self._resolve_chain()
        frozen = self._chain.get_frozen_credentials()
        return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    def _resolve_chain(self) -> Any:
        import botocore.session  # imported here: only the chain path needs a session

        session = botocore.session.Session(profile=self._profile)
        if self._credentials_file:
            session.set_config_variable("credentials_file", self._credentials_file)
        if self._config_file:
            session.set_config_variable("config_file", self._config_file)
        try:
            credentials = session.get_credentials()
        except Exception as exc:  # botocore raises many types; never echo their text (paths)
            raise ConfigError(
                f"model {self._model_name!r}: AWS credentials could not be loaded "
                f"({type(exc).__name__})"
            ) from None
        if credentials is None:
            raise ConfigError(
                f"model {self._model_name!r}: no AWS credentials found; set {BEARER_ENV}, or "
                f"{KEY_ENVS[0]} and {KEY_ENVS[1]}, or a profile (AWS_PROFILE)"
            )
        return credentials


class BedrockAdapter:
    """Speaks Converse for one Bedrock model; see the module docstring."""

    provider = PROVIDER
    #: `build` may block (token refresh / credential chain): the engine builds on a thread.
    may_block = True

    def __init__(
        self,
        config: ModelConfig,
        env: Mapping[str, str],
        *,
        clock: Clock = utc_now,
    ) -> None:
        region = region_of(config, env)
        if region is None:
            raise ConfigError(
                f"model {config.name!r}: no AWS region; set `region` in the spec or AWS_REGION"
            )
        self._config = config
        self._region = region
        self._clock = clock
        base = (config.base_url or f"https://bedrock-runtime.{region}.amazonaws.com").rstrip("/")
        self._url = f"{base}/model/{quote(config.model, safe='')}/converse"
        bearer = credential_value(env, config.api_key_env or BEARER_ENV)
        if config.api_key_env and not bearer:
            raise ConfigError(
                f"model {config.name!r}: {config.api_key_env} (a Bedrock API key) is not set"
            )
        self._bearer: Secret | None = Secret(bearer) if bearer else None
        self._credentials: CredentialSource | None = (
            None if self._bearer else CredentialSource(config.name, env)
        )
        self._seen_secrets: set[Secret] = set()  # Secret: masked even in vars(adapter)
        self._secrets_lock = threading.Lock()
        self._auth_hint = (
            f"credential from {config.api_key_env or BEARER_ENV}" if self._credentials is None
            else self._credentials.hint()
        )
        # The spec's `base_model` (and `name`) too: an application inference profile's ARN
        # says nothing of the model behind it, and Opus 4.7 refused the temperature sent.
        self._omitted_rules = frozenset().union(
            *(options_omitted(name) for name in rule_model_names(config))
        )
        self._thinking, self._thinking_omits_temperature = self._thinking_fields()

    def __repr__(self) -> str:
        auth = "bearer" if self._bearer else "sigv4"
        return f"BedrockAdapter({self._config.name!r}, {self._config.model!r}, {auth})"

    @property
    def url(self) -> str:
        """The percent-encoded Converse URL; send it verbatim."""
        return self._url

    # ---- building -------------------------------------------------------------------------

    def _thinking_fields(self) -> tuple[dict[str, Any] | None, bool]:
        """`additionalModelRequestFields` for an effort, and whether thinking bars temperature."""
        effort = (self._config.reasoning_effort or "").strip().lower()
        if effort in ("", "default"):
            return None, False
        names = rule_model_names(self._config)
        if effort == "none":
            return None, False  # thinking is off unless asked for
        if any(_ADAPTIVE_THINKING.search(name) for name in names):
            if effort not in _ADAPTIVE_EFFORTS:
                raise ConfigError(
                    f"model {self._config.name!r}: reasoning_effort {effort!r} is not one of "
                    f"{sorted(_ADAPTIVE_EFFORTS)}",
                    key="reasoning_effort",
                )
            return {"thinking": {"type": "adaptive"}, "output_config": {"effort": effort}}, True
        if any(_BUDGET_THINKING.search(name) for name in names):
            if effort not in _THINKING_BUDGETS:
                raise ConfigError(
                    f"model {self._config.name!r}: reasoning_effort {effort!r} is not one of "
                    f"{sorted(_THINKING_BUDGETS)}",
                    key="reasoning_effort",
                )
            cap = self._config.max_tokens
            # The budget must stay below maxTokens, whose Bedrock default we cannot see.
            budget = min(_THINKING_BUDGETS[effort], cap - 1) if cap is not None else 0
            if budget < _MIN_THINKING_BUDGET:
                raise ConfigError(
                    f"model {self._config.name!r}: extended thinking needs max_tokens above "
                    f"{_MIN_THINKING_BUDGET}",
                    key="max_tokens",
                )
            return {"thinking": {"type": "enabled", "budget_tokens": budget}}, True
        return None, False

    def _body(self, req: ChatRequest) -> tuple[bytes, tuple[str, ...]]:
        config = self._config
        omitted: list[str] = []
        inference: dict[str, Any] = {}
        cap = req.cap(config)
        if cap is not None:
            inference["maxTokens"] = cap
        if config.temperature is not None:
            if "temperature" in self._omitted_rules or self._thinking_omits_temperature:
                omitted.append("temperature")
            else:
                inference["temperature"] = config.temperature
        seed = req.seed if req.seed is not None else config.seed
        if seed is not None:
            omitted.append("seed")  # see OPTION_RULES: nowhere to put it
        if config.json_mode:
            omitted.append("json_mode")  # Converse structured output needs a schema we lack
        if config.response_format:
            omitted.append("response_format")  # the OpenAI-shaped forms mean nothing here
        if config.reasoning_effort and self._thinking is None:
            effort = config.reasoning_effort.strip().lower()
            if effort not in ("default", "none"):
                omitted.append("reasoning_effort")
        payload: dict[str, Any] = {
            "messages": [{"role": "user", "content": [{"text": req.user}]}],
        }
        if req.system:
            payload["system"] = [{"text": req.system}]
        if inference:
            payload["inferenceConfig"] = inference
        if self._thinking is not None:
            payload["additionalModelRequestFields"] = self._thinking
        return encode(payload), tuple(omitted)

    def converse_body(self, req: ChatRequest) -> tuple[bytes, tuple[str, ...]]:
        """The Converse body of `req` and the options left out: what a batch record carries
        as its `modelInput` (`providers.batch_bedrock`), byte for byte the live body."""
        return self._body(req)

    def build(self, req: ChatRequest) -> HttpRequest:
        """The signed Converse request. May block once to resolve the AWS credential chain."""
        body, omitted = self._body(req)
        headers = {"Content-Type": "application/json"}
        if self._bearer is not None:
            headers["Authorization"] = f"Bearer {self._bearer.reveal()}"
        else:
            assert self._credentials is not None
            credentials = self._credentials.current()
            self._remember(credentials.secrets())
            headers = signed_headers(
                "POST",
                self._url,
                headers,
                body,
                credentials,
                region=self._region,
                service=SIGNING_SERVICE,
                clock=self._clock,
            )
        return HttpRequest("POST", self._url, headers, body, omitted)

    def _remember(self, secrets: tuple[str, ...]) -> None:
        with self._secrets_lock:
            self._seen_secrets.update(Secret(value) for value in secrets)

    def secrets(self) -> tuple[Secret, ...]:
        with self._secrets_lock:
            seen = tuple(self._seen_secrets)
        return seen if self._bearer is None else (*seen, self._bearer)

    def _redact(self, text: str) -> str:
        return redact(text, self.secrets())

    # ---- parsing --------------------------------------------------------------------------

    def parse(self, status: int, headers: Mapping[str, str], body: bytes) -> Completion | Failure:
        """Classify one Converse reply (see `STOP_FAILURES` and `ERROR_CODES`), redacted
        (`redact_result`: an answer's text can echo a credential too)."""
        result = with_auth_hint(self._classify(status, headers, body), self._auth_hint)
        return redact_result(result, self.secrets())

    def _classify(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> Completion | Failure:
        view = Headers(headers)
        request_id = view.get_first("x-amzn-RequestId", "x-amz-request-id")
        payload = load_json(body)
        if status != 200:
            return self._error(status, view, payload, body, request_id)
        if not isinstance(payload, dict):
            return Failure(
                Outcome.INVALID_RESPONSE,
                "reply body is not a JSON object",
                http_status=status,
                provider_request_id=request_id,
                raw_text=body.decode("utf-8", errors="replace"),
                foreign=True,
            )
        usage = payload.get("usage")
        tokens_in = as_int(usage.get("inputTokens")) if isinstance(usage, dict) else None
        tokens_out = as_int(usage.get("outputTokens")) if isinstance(usage, dict) else None
        stop = payload.get("stopReason")
        text = _message_text(payload)

        def failure(outcome: Outcome, detail: str) -> Failure:
            return Failure(
                outcome,
                short(detail),  # one line, no control or reordering characters: it quotes stop
                http_status=status,
                provider_request_id=request_id,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                raw_text=text,
                finish_reason=stop if isinstance(stop, str) else None,  # as the server sent it
            )

        if text is None or not isinstance(stop, str):
            return failure(Outcome.INVALID_RESPONSE, "reply lacks output.message or stopReason")
        if request_id is None:
            return failure(Outcome.MISSING_ROUTING_METADATA, "reply lacks x-amzn-RequestId")
        if stop in STOP_FAILURES:
            return failure(STOP_FAILURES[stop], f"stopReason={stop}")
        if not text.strip():
            return failure(Outcome.INVALID_RESPONSE, f"no text content (stopReason={stop})")
        return Completion(
            text=text,
            finish_reason=stop,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            provider_request_id=request_id,
            model_reported=None,  # Converse does not echo the model; the request id routes
            limits=rate_limit_info(view),
        )

    def _error(
        self,
        status: int,
        view: Headers,
        payload: Any,
        body: bytes,
        request_id: str | None,
    ) -> Failure:
        code = error_code(view, payload)
        message = ""
        if isinstance(payload, dict):
            for key in ("message", "Message"):
                value = payload.get(key)
                if isinstance(value, str):
                    message = value
                    break
        elif payload is None:
            message = body.decode("utf-8", errors="replace")
        outcome = ERROR_CODES.get(
            code or "",
            # 424 is ModelErrorException without its header; a non-error status is no envelope
            status_outcome(status, provider_errors=(424,), otherwise=Outcome.INVALID_RESPONSE),
        )
        quota = outcome is Outcome.RATE_LIMIT and (
            code == "ServiceQuotaExceededException" or bool(_QUOTA_MESSAGE.search(message))
        )
        label = code or f"HTTP {status}"
        detail = f"{label}: {message}" if message else label
        retry_after = retry_after_seconds(view)
        if retry_after is None and message:
            retry_after = wait_from_message(message)
        return Failure(
            outcome,
            short(self._redact(detail)),
            http_status=status,
            retry_after_s=retry_after,
            provider_request_id=request_id,
            quota_exhausted=quota,
            limits=rate_limit_info(view),
        )


def _message_text(payload: Mapping[str, Any]) -> str | None:
    """Joined `text` blocks of `output.message.content`; None when the envelope is wrong."""
    output = payload.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return None
    parts = [
        block["text"]
        for block in content
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    ]
    return "".join(parts)


def create_adapter(config: ModelConfig, env: Mapping[str, str]) -> BedrockAdapter:
    """Registry entry point (see docs/interfaces.md)."""
    return BedrockAdapter(config, env)


__all__ = [
    "ERROR_CODES",
    "KEY_ENVS",
    "OPTION_RULES",
    "STOP_FAILURES",
    "BedrockAdapter",
    "CredentialSource",
    "chain_configured",
    "create_adapter",
    "error_code",
    "options_omitted",
    "region_of",
    "required_env",
]
