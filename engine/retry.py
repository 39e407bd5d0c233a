"""When to re-ask, how long to wait first, and the count of retries by cause.

The paper re-asked every transient failure and reported how many of each kind there were, so
the policy answers two questions per failed attempt (retry? after how long?) and a tally keeps
retries by cause rather than one counter. Waits come from tenacity's full-jitter exponential
strategy (uncoordinated lanes hitting one provider spread out instead of retrying in step),
capped, and never shorter than the provider's own Retry-After.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import tenacity

from providers.types import Outcome

#: Failures that will fail the same way on every try: they stop a lane after a few in a row.
PERMANENT: frozenset[Outcome] = frozenset({Outcome.AUTH_ERROR, Outcome.BAD_REQUEST})

#: The retry cause of a valid reply to a request that already had an accepted answer.
DUPLICATE = "duplicate"

_RETRYING = tenacity.Retrying()


@dataclass(frozen=True)
class RetryPolicy:
    """Per-request retry budget and backoff shape."""

    #: Attempts per request within one dispatch (a resume grants a fresh budget).
    max_attempts: int = 6
    #: First backoff window in seconds; doubles per attempt up to `cap_s`.
    base_s: float = 0.5
    cap_s: float = 30.0
    #: A Retry-After longer than this is clipped (a bogus header must not stall a lane for days).
    max_retry_after_s: float = 600.0
    #: Permanent failures in a row (auth, bad request) that stop a lane.
    permanent_streak: int = 3
    _wait: tenacity.wait.wait_base = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        wait = tenacity.wait_random_exponential(multiplier=self.base_s, max=self.cap_s)
        object.__setattr__(self, "_wait", wait)

    def delay(self, attempt_number: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after the `attempt_number`-th failed attempt of one request."""
        state = tenacity.RetryCallState(_RETRYING, None, (), {})
        state.attempt_number = attempt_number
        backoff = float(self._wait(state))
        if retry_after_s is not None and retry_after_s > 0:
            return max(backoff, min(retry_after_s, self.max_retry_after_s))
        return backoff


@dataclass
class RetryTally:
    """One lane's retry attempts by cause, as `engine.audit` defines them for the ledger.

    Every attempt of this dispatch that was not the accepted one counts once, under its
    outcome (a refused duplicate answer under `duplicate`): the last failed attempt of a
    request given up and a permanent failure included, so a fresh run's tally equals what
    `dutchbook audit` reads from the folder. Credential failures before anything was sent
    are not attempts (nothing is journalled); they are counted apart in `unsent`.
    """

    by_cause: Counter[str] = field(default_factory=Counter)
    #: Requests that ran out of attempts within this dispatch.
    exhausted: int = 0
    #: Tries that failed before sending (a transient credential refresh failure).
    unsent: int = 0

    def count(self, cause: Outcome | str) -> None:
        self.by_cause[str(cause)] += 1

    @property
    def total(self) -> int:
        return sum(self.by_cause.values())
