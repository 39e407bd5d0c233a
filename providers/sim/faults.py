"""Fault profiles: which failures the simulator injects, how often, reproducibly.

The engine's retry accounting is only trustworthy if it can be reconciled against a
known truth. So every fault is drawn from a seeded generator (same seed and request order,
same faults) and counted by kind; tests and rehearsals compare what the client saw with
`FaultInjector.counts`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

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


@dataclass(frozen=True)
class FaultProfile:
    """Per-request probability of each fault kind (their sum must stay <= 1)."""

    name: str
    rates: dict[FaultKind, float] = field(default_factory=dict)
    slow_delay_s: float = 5.0

    def __post_init__(self) -> None:
        total = sum(self.rates.values())
        if any(r < 0 for r in self.rates.values()) or total > 1.0 + 1e-12:
            raise ValueError(f"fault rates must be >= 0 and sum to <= 1, got {total:.4f}")
        if self.slow_delay_s < 0:
            raise ValueError("slow_delay_s must be >= 0")


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
    for key, outcome in _LIMIT_OUTCOMES.items():
        n = counts.get(key, 0)
        if n:
            out[outcome.value] = out.get(outcome.value, 0) + n
    return out


def parse_faults(spec: str | FaultProfile) -> FaultProfile:
    """A profile by name (`none`, `light`, `flaky`, `hostile`) or explicit `kind=rate,...`.

    Explicit form: `rate_limit=0.05,server_error=0.02,slow_delay_s=0.5`; a named profile may
    lead (`flaky,slow=0.1`) and later entries override it. Unknown names fail loudly,
    listing what is known, because a typo would otherwise rehearse nothing.
    """
    if isinstance(spec, FaultProfile):
        return spec
    text = spec.strip()
    if not text:
        return PROFILES["none"]
    rates: dict[FaultKind, float] = {}
    delay = 5.0
    name_parts: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" not in item:
            if item not in PROFILES:
                raise ValueError(
                    f"unknown fault profile {item!r}; known: {', '.join(PROFILES)}"
                    " or explicit kind=rate pairs"
                )
            base = PROFILES[item]
            rates.update(base.rates)
            delay = base.slow_delay_s
            name_parts.append(item)
            continue
        key, _, value = item.partition("=")
        key = key.strip()
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"fault rate for {key!r} is not a number: {value!r}") from None
        if key == "slow_delay_s":
            delay = number
        else:
            try:
                kind = FaultKind(key)
            except ValueError:
                known = ", ".join(k.value for k in ALL_KINDS)
                raise ValueError(f"unknown fault kind {key!r}; known: {known}") from None
            rates[kind] = number
        name_parts.append(item)
    return FaultProfile(",".join(name_parts) or "none", rates, delay)


class FaultInjector:
    """Draws at most one fault per request from a seeded stream, and counts what it drew."""

    def __init__(self, profile: FaultProfile, seed: int = 0) -> None:
        self.profile = profile
        self._rng = random.Random(seed)
        self.counts: Counter[FaultKind] = Counter()

    def draw(self) -> FaultKind | None:
        """One uniform draw per request, so the fault sequence depends only on the seed."""
        u = self._rng.random()
        edge = 0.0
        for kind in ALL_KINDS:
            edge += self.profile.rates.get(kind, 0.0)
            if u < edge:
                self.counts[kind] += 1
                return kind
        return None
