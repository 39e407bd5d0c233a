"""Shared vocabulary of a single provider exchange.

These types are the contract between `providers` (which speaks one request to one API)
and `engine` (which decides when to send, retry and record). They carry no behaviour
beyond small conveniences so both sides can rely on them without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any, TypeVar

_T = TypeVar("_T")


def fills_dict(cls: type[_T]) -> type[_T]:
    """A frozen dataclass whose `__init__` writes the instance's `__dict__` directly.

    A frozen dataclass sets each field through `object.__setattr__`, about 1.1 µs for eight
    fields against 0.4 this way, and the engine makes a `ChatRequest`, an `HttpRequest` and a
    `Completion` for every request (issue 12). Only construction changes: the signature
    (names, defaults, annotations), equality, hashing, `replace` and the refusal to assign
    after construction are the dataclass's own (tested against the generated `__init__`,
    kept as `__init__.__wrapped__`). Fields with a default factory are not supported.
    """
    generated: Callable[..., None] = cls.__init__
    namespace: dict[str, Any] = {}
    params, lines = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not MISSING or not f.init:
            raise TypeError(f"{cls.__name__}.{f.name}: only plain fields and defaults")
        if f.default is MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        lines.append(f"    d[{f.name!r}] = {f.name}\n")
    source = f"def __init__(self, {', '.join(params)}):\n    d = self.__dict__\n{''.join(lines)}"
    exec(source, namespace)  # as `dataclasses` makes its own `__init__`
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(generated.__annotations__)
    init.__wrapped__ = generated
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


class Outcome(StrEnum):
    """How one HTTP attempt ended. The first six are the paper's retry causes (Appendix C),
    whose "provider/response errors" are split here: `provider_error` for the provider's,
    `invalid_response`, `refusal` and `truncated` for the replies it re-asked."""

    OK = "ok"
    RATE_LIMIT = "rate_limit"
    PROVIDER_ERROR = "provider_error"
    CONNECTION_ERROR = "connection_error"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    MISSING_ROUTING_METADATA = "missing_routing_metadata"
    INVALID_RESPONSE = "invalid_response"
    REFUSAL = "refusal"
    TRUNCATED = "truncated"
    AUTH_ERROR = "auth_error"
    BAD_REQUEST = "bad_request"
    #: A batch job ran the request's line (the provider counted it, and billed it), but the
    #: job's results hold no readable line for it: a torn or unreadable line, or lines for
    #: ids never sent in its place (`engine.batch_lane`). Not one of the paper's causes: a
    #: provider's fault a live request cannot have, re-asked once and counted apart.
    DAMAGED_BATCH_RESULT = "damaged_batch_result"


#: Outcomes the paper re-asked; everything else is permanent for that request.
RETRYABLE: frozenset[Outcome] = frozenset(
    {
        Outcome.RATE_LIMIT,
        Outcome.PROVIDER_ERROR,
        Outcome.CONNECTION_ERROR,
        Outcome.TIMEOUT,
        Outcome.INTERRUPTED,
        Outcome.MISSING_ROUTING_METADATA,
        Outcome.INVALID_RESPONSE,
        Outcome.REFUSAL,
        Outcome.TRUNCATED,
        Outcome.DAMAGED_BATCH_RESULT,  # once per request: `engine.batch_lane`
    }
)

PROVIDERS: tuple[str, ...] = ("sim", "openai", "groq", "deepinfra", "azure", "bedrock", "vertex")

#: The most requests one model may have in flight. A lane starts one worker per slot, so a
#: typo such as `concurrency = 1000000000` used to allocate until the machine ran out of
#: memory (24 GB here, 1,400 queries); no provider serves anything near this many at once.
MAX_CONCURRENCY = 10_000

#: The output cap's field names an OpenAI-compatible server may take (a model's
#: `token_field`): checked when a spec is read, used by `providers.openai_compat`.
TOKEN_FIELDS = ("max_completion_tokens", "max_tokens")


@dataclass(frozen=True)
class ModelConfig:
    """One `[[models]]` entry of a campaign spec, as the providers and engine need it.

    Secrets are never stored here: only the *name* of an environment variable may be.
    """

    name: str
    provider: str
    model: str
    base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    json_mode: bool = False
    #: Constrained output (`providers.constrained.RESPONSE_FORMATS`), generated from the keys.
    response_format: str | None = None
    #: Fold the system message into the user turn (chat templates without a system role).
    fold_system: bool = False
    #: A tokenizer known to fit the model (`runs.tokens`), for token estimates.
    tokenizer: str | None = None
    api_key_env: str | None = None
    region: str | None = None
    project: str | None = None
    location: str | None = None
    api_version: str | None = None
    # Engine-side limits; providers ignore them.
    rpm: float | None = None
    tpm: float | None = None
    concurrency: int | None = None  # at most MAX_CONCURRENCY
    price_in_per_mtok: float | None = None
    price_out_per_mtok: float | None = None
    timeout_s: float = 120.0
    #: Seconds a live lane may be down (its provider paused and probed) before it stops;
    #: None: probed until the provider comes back (`engine.outage`).
    max_down_s: float | None = None
    #: `"live"` (one HTTP request per query) or `"batch"` (jobs through the provider's batch
    #: API, `providers.batch`); issue 13.
    dispatch: str = "live"
    #: Where batch input and output files live for providers that use object storage
    #: (`s3://bucket/prefix` for Bedrock, `gs://bucket/prefix` for Vertex).
    batch_bucket: str | None = None
    #: The IAM role Bedrock assumes to read and write `batch_bucket` (its API requires one).
    batch_role_arn: str | None = None
    #: Whether lines a job failed or expired may be re-asked live (else they go in a new job).
    batch_fallback_live: bool = False
    #: Published batch prices (USD per million tokens), and when and where prices were read.
    batch_price_in_per_mtok: float | None = None
    batch_price_out_per_mtok: float | None = None
    price_date: str | None = None
    price_source: str | None = None
    # Free-form provider-specific extras (e.g. a simulated forecaster's personality).
    extra: Mapping[str, str] = field(default_factory=dict)


@fills_dict
@dataclass(frozen=True)
class ChatRequest:
    """One elicitation: a system and a user message sent to one model."""

    request_id: str
    system: str
    user: str
    seed: int | None = None
    #: The answer's JSON keys, in order (constrained output is generated from them).
    keys: tuple[str, ...] = ()
    #: An output cap for this attempt that wins over the model's (a retry after a truncation).
    max_tokens: int | None = None

    def cap(self, config: ModelConfig) -> int | None:
        """The output-token cap of this request: its own, else the model's."""
        return self.max_tokens if self.max_tokens is not None else config.max_tokens


@fills_dict
@dataclass(frozen=True)
class HttpRequest:
    """A fully built HTTP request; `omitted` names options left out as the model rejects them."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    omitted: tuple[str, ...] = ()
    #: What was done to the request that the ledger should say (e.g. the system prompt folded).
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:  # headers may carry credentials
        return (
            f"HttpRequest({self.method} {self.url}, {len(self.body)} bytes, omitted={self.omitted})"
        )


@dataclass(frozen=True)
class RateLimitInfo:
    """What a provider's headers said about its limits; every field optional."""

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None


@fills_dict
@dataclass(frozen=True)
class Completion:
    """A successful reply envelope (the answer inside may still be invalid)."""

    text: str
    finish_reason: str | None
    tokens_in: int | None
    tokens_out: int | None
    provider_request_id: str | None
    model_reported: str | None
    limits: RateLimitInfo = RateLimitInfo()
    cost_usd: float | None = None


@dataclass(frozen=True)
class Failure:
    """A classified failure of one attempt."""

    outcome: Outcome
    detail: str
    http_status: int | None = None
    retry_after_s: float | None = None
    provider_request_id: str | None = None
    #: The provider says a daily (or longer) quota is spent: don't retry in a loop. The lane
    #: holds out the wait `retry_after_s` states, up to a cap, and pauses without one
    #: (`engine.retry.RetryPolicy.quota_pauses`).
    quota_exhausted: bool = False
    limits: RateLimitInfo = RateLimitInfo()
    tokens_in: int | None = None
    tokens_out: int | None = None
    raw_text: str | None = None
    #: The finish reason as the server sent it (a truncated reply says `length`).
    finish_reason: str | None = None
    #: Nothing answered at that address (connection refused, unknown host): retrying at once
    #: is pointless, and a lane that never reached its server stops with the hint.
    unreachable: bool = False
    #: The reply is not in the provider's format at all (not JSON, no choices, too long): a
    #: web page or another API at base_url. A lane none of whose replies was in the format
    #: stops after `RetryPolicy.foreign_streak` of them (`engine.lanes`); one that had such
    #: a reply counts them as its provider down (`engine.outage`).
    foreign: bool = False
    #: Of `foreign`: a reply longer than the engine reads (`engine.http.MAX_REPLY_BYTES`). Its
    #: head was in the format as far as it went, and the length is the model's (a rambling
    #: answer), not a broken gateway's: no streak of them counts as the provider down.
    too_long: bool = False
    #: The provider refused the credential this attempt carried (an OAuth token refused with
    #: 401 before it expired) and the adapter dropped it: the next attempt carries a fresh one.
    #: Retried, and not counted toward the lane's permanent failures in a row; an adapter says
    #: so once per credential, so one refused again is the auth error it is.
    stale_credential: bool = False

    @property
    def retryable(self) -> bool:
        return self.outcome in RETRYABLE or self.stale_credential


class ConfigError(ValueError):
    """A model entry cannot be used as written (missing credential, bad option).

    `key` is the spec key whose value is refused (`reasoning_effort`), where the raiser
    knows it, for a message naming `models[i].<key>`; None for what the environment lacks.
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
