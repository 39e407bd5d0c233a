"""Fault profiles: which failures the simulator injects, how often, reproducibly.

The engine's retry accounting is only trustworthy if it can be reconciled against a
known truth. So every fault is drawn from a seeded generator (same seed and request order,
same faults) and counted by kind; tests and rehearsals compare what the client saw with
`FaultInjector.counts`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from providers.types import Outcome


class FaultKind(StrEnum):
    """One way a provider exchange can go wrong, as a client observes it."""

    RATE_LIMIT = "rate_limit"  # 429 with the provider's wait hint (Retry-After where it sends one)
    RATE_LIMIT_BARE = "rate_limit_bare"  # 429 with no wait hint at all
    SERVER_ERROR = "server_error"  # 5xx in the provider's error shape
    CONNECTION_RESET = "connection_reset"  # connection closed before any response byte
    SLOW = "slow"  # a correct answer, but only after `slow_delay_s`
    TRUNCATED_BODY = "truncated_body"  # Content-Length larger than the bytes sent, then close
    MALFORMED_JSON = "malformed_json"  # 200 whose body is not valid JSON
    REFUSAL = "refusal"  # the model declines, in the provider's refusal signal
    OUTPUT_CAP = "output_cap"  # output-token cap reached: partial text + truncation signal
    MISSING_ROUTING = "missing_routing"  # 200 without the request id / model the client expects


ALL_KINDS: tuple[FaultKind, ...] = tuple(FaultKind)


class BatchFaultKind(StrEnum):
    """One way a batch job (issue 13) can go wrong, drawn apart from the live faults.

    Job faults are drawn once per created job, line faults once per line the job runs; the
    live kinds that make sense inside a result line (`LINE_KINDS`) are drawn with them at
    their live rates, so a `flaky` rehearsal in batch mode sees the same kinds of trouble.
    """

    EXPIRE = "batch_expire"  # the job expires with only part of its lines done
    INVALID = "batch_invalid"  # the job fails validation: no line runs
    CREATE_DELAY = "batch_create_delay"  # creating the job waits `batch_create_delay_s` first
    LINE_ERROR = "batch_line_error"  # a line in the error file with an `error` object, no reply
    #: A files or batches call refused before it does anything: 429 with the wait hint, or
    #: a 5xx. Not attempts of any request: the engine waits and calls again.
    CONTROL_RATE_LIMIT = "batch_control_rate_limit"
    CONTROL_ERROR = "batch_control_error"


JOB_KINDS: tuple[BatchFaultKind, ...] = (
    BatchFaultKind.EXPIRE, BatchFaultKind.INVALID, BatchFaultKind.CREATE_DELAY
)
CONTROL_KINDS: tuple[BatchFaultKind, ...] = (
    BatchFaultKind.CONTROL_RATE_LIMIT, BatchFaultKind.CONTROL_ERROR
)
#: Live faults a batch result line can carry: a non-2xx reply in the error file, or a 200
#: whose body says refusal, truncation or no routing. Transport faults (resets, slowness,
#: torn bodies) have no meaning inside a downloaded file.
LINE_KINDS: tuple[FaultKind, ...] = (
    FaultKind.RATE_LIMIT,
    FaultKind.RATE_LIMIT_BARE,
    FaultKind.SERVER_ERROR,
    FaultKind.REFUSAL,
    FaultKind.OUTPUT_CAP,
    FaultKind.MISSING_ROUTING,
)

#: How a client should classify each injected fault: the simulator's promise, which the
#: adapter tests hold every provider's parser to (a provider whose wire lacks a signal, such
#: as a refusal on Groq, is the test's own exception to make).
INTENDED_OUTCOME: dict[FaultKind, Outcome] = {
    FaultKind.RATE_LIMIT: Outcome.RATE_LIMIT,
    FaultKind.RATE_LIMIT_BARE: Outcome.RATE_LIMIT,
    FaultKind.SERVER_ERROR: Outcome.PROVIDER_ERROR,
    FaultKind.CONNECTION_RESET: Outcome.CONNECTION_ERROR,
    FaultKind.SLOW: Outcome.TIMEOUT,
    FaultKind.TRUNCATED_BODY: Outcome.CONNECTION_ERROR,
    FaultKind.MALFORMED_JSON: Outcome.INVALID_RESPONSE,
    FaultKind.REFUSAL: Outcome.REFUSAL,
    FaultKind.OUTPUT_CAP: Outcome.TRUNCATED,
    FaultKind.MISSING_ROUTING: Outcome.MISSING_ROUTING_METADATA,
}
#: The batch faults a client records as a failed attempt of one line (the others act on a
#: whole job: its lines come back absent, and the engine counts them from its job record).
BATCH_INTENDED_OUTCOME: dict[BatchFaultKind, Outcome] = {
    BatchFaultKind.LINE_ERROR: Outcome.PROVIDER_ERROR,
}


@dataclass(frozen=True)
class FaultProfile:
    """Per-request probability of each fault kind (their sum must stay <= 1)."""

    name: str
    rates: dict[FaultKind, float] = field(default_factory=dict)
    slow_delay_s: float = 5.0
    #: Per-job (`JOB_KINDS`) and per-line (`batch_line_error`) batch fault rates.
    batch_rates: dict[BatchFaultKind, float] = field(default_factory=dict)
    #: Compressed time: a batch job's whole life (validating, running, finalizing), seconds.
    batch_seconds: float = 2.0
    batch_create_delay_s: float = 2.0

    def __post_init__(self) -> None:
        _check_each_rate(self.rates)
        _check_each_rate(self.batch_rates)
        total = sum(self.rates.values())
        if total > 1.0 + 1e-12:
            raise ValueError(f"fault rates must be >= 0 and sum to <= 1, got {total:.4f}")
        job_total = max(sum(self.batch_rates.get(k, 0.0) for k in kinds)
                        for kinds in (JOB_KINDS, CONTROL_KINDS))
        line_total = self.batch_rates.get(BatchFaultKind.LINE_ERROR, 0.0) + sum(
            self.rates.get(k, 0.0) for k in LINE_KINDS
        )
        if max(job_total, line_total) > 1.0 + 1e-12:
            raise ValueError("batch fault rates must be >= 0 and sum to <= 1 per job and per line")
        seconds = (self.slow_delay_s, self.batch_seconds, self.batch_create_delay_s)
        if not all(math.isfinite(s) and s >= 0 for s in seconds):
            raise ValueError(
                "slow_delay_s, batch_seconds and batch_create_delay_s must be finite and >= 0"
            )


def _check_each_rate(rates: Mapping[FaultKind, float] | Mapping[BatchFaultKind, float]) -> None:
    """Each rate a probability, checked one by one: a NaN compares false with everything, so
    a sum check alone let `server_error=nan` through, and the draws then went wrong silently
    (a `hostile` profile with it injected rate limits only)."""
    for kind, rate in rates.items():
        if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
            raise ValueError(f"fault rate for {kind.value!r} must be >= 0 and <= 1, not {rate}")


PROFILES: dict[str, FaultProfile] = {
    "none": FaultProfile("none"),
    # Roughly what a paper-scale run saw: a few percent of transient trouble.
    "flaky": FaultProfile(
        "flaky",
        {
            FaultKind.RATE_LIMIT: 0.03,
            FaultKind.RATE_LIMIT_BARE: 0.01,
            FaultKind.SERVER_ERROR: 0.02,
            FaultKind.CONNECTION_RESET: 0.005,
            FaultKind.SLOW: 0.002,
            FaultKind.TRUNCATED_BODY: 0.003,
            FaultKind.MALFORMED_JSON: 0.003,
            FaultKind.REFUSAL: 0.002,
            FaultKind.OUTPUT_CAP: 0.003,
            FaultKind.MISSING_ROUTING: 0.002,
        },
    ),
    # The quickstart's: a few percent of the commonest trouble, so a demo shows retry
    # accounting at work without slowing down (no wait hints: a hinted 429 holds a lane).
    "light": FaultProfile(
        "light",
        {
            FaultKind.RATE_LIMIT_BARE: 0.01,
            FaultKind.SERVER_ERROR: 0.01,
            FaultKind.MALFORMED_JSON: 0.005,
        },
    ),
    # Everything at once, often: for proving that nothing is lost or double counted.
    "hostile": FaultProfile(
        "hostile",
        {
            FaultKind.RATE_LIMIT: 0.10,
            FaultKind.RATE_LIMIT_BARE: 0.05,
            FaultKind.SERVER_ERROR: 0.08,
            FaultKind.CONNECTION_RESET: 0.04,
            FaultKind.SLOW: 0.02,
            FaultKind.TRUNCATED_BODY: 0.03,
            FaultKind.MALFORMED_JSON: 0.03,
            FaultKind.REFUSAL: 0.03,
            FaultKind.OUTPUT_CAP: 0.03,
            FaultKind.MISSING_ROUTING: 0.03,
        },
    ),
}


#: Counters of `SimHandle.counts()` that are failures without being injected faults.
_LIMIT_OUTCOMES: dict[str, Outcome] = {
    "rate_limiter.429": Outcome.RATE_LIMIT,
    "auth_rejected": Outcome.AUTH_ERROR,
    "bad_request": Outcome.BAD_REQUEST,
}


def expected_failures(counts: Mapping[str, int]) -> dict[str, int]:
    """The failed attempts a client should have recorded, by outcome, from the simulator's
    counts: each injected fault as `INTENDED_OUTCOME` says, plus the simulator's own rate
    limiter's 429s and its refusals of bad credentials or requests.

    Exact when every fault reaches the client as intended (a `slow` fault is a timeout only
    when the client's timeout is shorter than `slow_delay_s`) and the forecasters' answers
    all parse (a reply the parser rejects is the client's doing, not a fault).
    """
    out: dict[str, int] = {}
    for kind, outcome in INTENDED_OUTCOME.items():
        n = counts.get(f"fault.{kind.value}", 0)
        if n:
            out[outcome.value] = out.get(outcome.value, 0) + n
    for batch_kind, outcome in BATCH_INTENDED_OUTCOME.items():
        n = counts.get(f"fault.{batch_kind.value}", 0)
        if n:
            out[outcome.value] = out.get(outcome.value, 0) + n
    for key, outcome in _LIMIT_OUTCOMES.items():
        n = counts.get(key, 0)
        if n:
            out[outcome.value] = out.get(outcome.value, 0) + n
    return out


#: Settings (not rates) an explicit profile may give, as `name=seconds`.
_SETTINGS = ("slow_delay_s", "batch_seconds", "batch_create_delay_s")


def parse_faults(spec: str | FaultProfile) -> FaultProfile:
    """A profile by name (`none`, `light`, `flaky`, `hostile`) or explicit `kind=rate,...`.

    Explicit form: `rate_limit=0.05,server_error=0.02,slow_delay_s=0.5`; a named profile may
    lead (`flaky,slow=0.1`) and later entries override it. Batch kinds (`batch_expire=0.2`)
    and settings (`batch_seconds=3`, `batch_create_delay_s=5`) mix in the same list. Unknown
    names fail loudly, listing what is known, because a typo would otherwise rehearse nothing.
    A kind or setting given twice is refused, naming it: which of the two was meant cannot be
    told (a named profile's rates are there to be overridden, so they do not count). So is a
    profile name after the first item: it replaced every rate before it without a word
    (`light,server_error=0.5,hostile` injected hostile's 8%, `flaky,none` flaky's faults).
    """
    if isinstance(spec, FaultProfile):
        return spec
    rates: dict[FaultKind, float] = {}
    batch_rates: dict[BatchFaultKind, float] = {}
    settings: dict[str, float] = {"slow_delay_s": 5.0}
    name_parts: list[str] = []
    given: set[str] = set()
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" not in item:
            base = _named_profile(item, ",".join(name_parts))
            name_parts.append(item)
            rates.update(base.rates)
            batch_rates.update(base.batch_rates)
            settings["slow_delay_s"] = base.slow_delay_s
            continue
        name_parts.append(item)
        key, number = _pair(item)
        if key in _SETTINGS:
            settings[key] = number
        elif key in _BATCH_NAMES:
            batch_rates[BatchFaultKind(key)] = number
        else:
            rates[_live_kind(key)] = number
        if key in given:
            raise ValueError(f"{key!r} is given twice; give each kind or setting once")
        given.add(key)
    return FaultProfile(
        ",".join(name_parts) or "none", rates, settings.pop("slow_delay_s"),
        batch_rates=batch_rates, **settings,
    )


_BATCH_NAMES = frozenset(k.value for k in BatchFaultKind)
#: The kinds a list may give rates, as its messages list them (live, then batch).
_KIND_NAMES = (*(k.value for k in ALL_KINDS), *sorted(_BATCH_NAMES))
#: Every name that takes a value after `=`: the kinds and the settings.
_VALUED = frozenset(_KIND_NAMES) | frozenset(_SETTINGS)
#: What a kind (False) or a setting (True) written without `=` is told it takes.
_TAKES = {
    False: ("a fault kind, whose rate is the fraction of requests it strikes", "RATE (0.05)"),
    True: ("a setting, in seconds", "SECONDS (5)"),
}


class UnknownFaultName(ValueError):
    """A fault profile, kind or setting no one knows (`flakey`, `rate_limt=0.1`): the
    message lists what is known, and `name` and `choices` let a caller add the nearest of
    them (`runs.spec.faults_refusal`: providers cannot import the CLI's "did you mean")."""

    def __init__(self, what: str, name: str, known: str, choices: frozenset[str]) -> None:
        self.what, self.name, self.known, self.choices = what, name, known, choices
        super().__init__(self.said(""))

    def said(self, hint: str) -> str:
        """The message with `hint` ("did you mean flaky?") after the unknown name."""
        return f"unknown {self.what} {self.name!r}; {hint + ' ' if hint else ''}known: {self.known}"


def _named_profile(name: str, before: str = "") -> FaultProfile:
    """The profile an entry without `=` names, leading the list (`before` the entries ahead
    of it, "" for the first). A kind or setting so written is told it takes a value
    (`rate_limit` was called an unknown profile); past the first entry, a name no profile
    has is an unknown kind, whose nearest names are kinds (`light,flakey` was told "did you
    mean flaky?", which then failed as a profile after the first entry)."""
    if name in _VALUED:
        takes, value = _TAKES[name in _SETTINGS]
        raise ValueError(
            f"{name!r} is {takes}: give it as {name}={value}; only a profile name stands alone"
        )
    if before and name in PROFILES:
        raise ValueError(
            f"fault profile {name!r} comes after {before!r}: a profile name may only lead the "
            "list (flaky,server_error=0.5), one profile at most"
        )
    if before:
        raise UnknownFaultName(
            "fault kind", name,
            f"{', '.join(_KIND_NAMES)} (each as kind=RATE; a profile name may only lead the list)",
            frozenset(_VALUED),
        )  # fmt: skip
    if name not in PROFILES:
        raise UnknownFaultName(
            "fault profile", name, f"{', '.join(PROFILES)} or explicit kind=rate pairs",
            frozenset(PROFILES),
        )  # fmt: skip
    return PROFILES[name]


def _pair(item: str) -> tuple[str, float]:
    key, _, value = item.partition("=")
    key = key.strip()
    try:
        return key, float(value)
    except ValueError:
        raise ValueError(f"fault rate for {key!r} is not a number: {value!r}") from None


def _live_kind(key: str) -> FaultKind:
    try:
        return FaultKind(key)
    except ValueError:
        raise UnknownFaultName("fault kind", key, ", ".join(_KIND_NAMES), _VALUED) from None


K = TypeVar("K", FaultKind, BatchFaultKind)


def _pick(u: float, rates: Mapping[K, float], kinds: tuple[K, ...]) -> K | None:
    edge = 0.0
    for kind in kinds:
        edge += rates.get(kind, 0.0)
        if u < edge:
            return kind
    return None


class FaultInjector:
    """Draws at most one fault per request from a seeded stream, and counts what it drew.

    Batch jobs and lines draw from a second stream of the same seed, so turning batch faults
    on leaves the live sequence of a seed exactly as it was.
    """

    def __init__(self, profile: FaultProfile, seed: int = 0) -> None:
        self.profile = profile
        self._rng = random.Random(seed)
        self._batch_rng = random.Random(f"batch:{seed}")
        self.counts: Counter[FaultKind] = Counter()

    def draw(self) -> FaultKind | None:
        """One uniform draw per request, so the fault sequence depends only on the seed."""
        kind = _pick(self._rng.random(), self.profile.rates, ALL_KINDS)
        if kind is not None:
            self.counts[kind] += 1
        return kind

    def draw_job(self) -> BatchFaultKind | None:
        """At most one job fault per created batch job."""
        return _pick(self._batch_rng.random(), self.profile.batch_rates, JOB_KINDS)

    def draw_control(self) -> BatchFaultKind | None:
        """At most one fault per files or batches call (no draw at all when none is set, so
        the job and line sequences of a seed stay as they were)."""
        if not any(self.profile.batch_rates.get(k) for k in CONTROL_KINDS):
            return None
        return _pick(self._batch_rng.random(), self.profile.batch_rates, CONTROL_KINDS)

    def draw_line(self) -> FaultKind | BatchFaultKind | None:
        """At most one fault per batch line: `batch_line_error` or a live `LINE_KINDS` one."""
        u = self._batch_rng.random()
        line_error = self.profile.batch_rates.get(BatchFaultKind.LINE_ERROR, 0.0)
        if u < line_error:
            return BatchFaultKind.LINE_ERROR
        return _pick(u - line_error, self.profile.rates, LINE_KINDS)
