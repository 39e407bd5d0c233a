"""When to re-ask, how long to wait first, and the count of retries by cause.

The paper re-asked every transient failure and reported how many of each kind there were, so
the policy answers two questions per failed attempt (retry? after how long?) and a tally keeps
retries by cause rather than one counter. Waits come from tenacity's full-jitter exponential
strategy (uncoordinated lanes hitting one provider spread out instead of retrying in step),
capped, and never shorter than the provider's own Retry-After.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

import tenacity

from engine.console_lines import plural
from providers.types import Failure, Outcome

if TYPE_CHECKING:
    import polars as pl

#: Failures that will fail the same way on every try: they stop a lane after a few in a row.
#: An auth error is asked again all the same until then (`engine.lanes.Lane._retryable`):
#: one refusal among answers, or just before the first, is the provider's hiccup.
PERMANENT: frozenset[Outcome] = frozenset({Outcome.AUTH_ERROR, Outcome.BAD_REQUEST})

#: Failures of the answer itself (the server replied; the reply is not a usable answer). They
#: tend to repeat (a small model echoing its prompt to the cap does it on every ask), so they
#: have their own, smaller budget, kept across resumes, and each retry changes the request.
ANSWER_FAILURES: frozenset[Outcome] = frozenset(
    {Outcome.TRUNCATED, Outcome.INVALID_RESPONSE, Outcome.REFUSAL}
)
ANSWER_FAILURE_CAUSES: frozenset[str] = frozenset(o.value for o in ANSWER_FAILURES)


#: Times damaged batch results (`Outcome.DAMAGED_BATCH_RESULT`, `engine.batch_results`) may
#: lose a request's line before it is given up for good: each loss ran and was billed, so a
#: request lost this often is bought by no lane and no resume again, batch or live.
DAMAGED_LOSSES = 2
#: What is said of the requests `lost_for_good`: by the audit, and by a run's closing line,
#: which then sends no one to a resume that would ask nothing.
GIVEN_UP_FOR_GOOD = (
    "given up for good: damaged batch results lost their lines twice, each loss billed, and "
    "no run asks them again"
)


@overload
def lost_for_good(losses: int) -> bool: ...
@overload
def lost_for_good(losses: pl.Expr) -> pl.Expr: ...
def lost_for_good(losses: int | pl.Expr) -> bool | pl.Expr:
    """Whether a request whose line damaged results lost `losses` times is given up for good
    (`DAMAGED_LOSSES`): the batch lane's rule as it collects (`engine.batch_lane`), and, of
    a count in polars, a resume's and the audit's as they read the ledger
    (`engine.scan.lost_to_damage`, `engine.scan.damaged_for_good`)."""
    return losses >= DAMAGED_LOSSES


def charges_answer_budget(failure: Failure) -> bool:
    """Whether `failure` is booked against its request's answer-failure budget: an answer
    failure, but not a reply outside the provider's format (`Failure.foreign`, no answer of
    the model's: `engine.records.FOREIGN_NOTE`)."""
    return failure.outcome in ANSWER_FAILURES and not failure.foreign

#: The retry cause of a valid reply to a request that already had an accepted answer.
DUPLICATE = "duplicate"
#: What the ledger adds to the detail of such a reply, recorded `ok` and refused as an answer
#: (`engine.ledger.Ledger.record_result`): `engine.audit.classify` tells it by these words
#: from a reply a reparse rejected before its request was asked again.
DUPLICATE_REFUSED = "duplicate acceptance refused"
#: What `engine.audit.classify` marks a reply the run accepted and a stricter reparse
#: rejected: no retry. Here, not in `engine.audit`, so that figure 8's module (imported by
#: each figure worker as it warms) names it without importing the audit (about 0.1 s).
REJECTED_ON_REPARSE = "rejected_on_reparse"

#: How each retry cause reads in words: the audit's sentence and tables, the run's summary.
CAUSE_LABELS: dict[str, str] = {
    "rate_limit": "rate limits",
    "provider_error": "provider errors",
    "connection_error": "connection errors",
    "timeout": "timeouts",
    "interrupted": "interrupted dispatches",
    "missing_routing_metadata": "missing routing metadata",
    "damaged_batch_result": "damaged batch results",
    "invalid_response": "invalid responses",
    "refusal": "refusals",
    "truncated": "truncations",
    "auth_error": "authentication errors",
    "bad_request": "bad requests",
    "duplicate": "duplicate answers",
}

_RETRYING = tenacity.Retrying()


@dataclass(frozen=True)
class RetryPolicy:
    """Per-request retry budget and backoff shape."""

    #: Attempts per request within one dispatch (a resume grants a fresh budget).
    max_attempts: int = 6
    #: First backoff window in seconds; doubles per attempt up to `cap_s`.
    base_s: float = 0.5
    cap_s: float = 30.0
    #: A Retry-After longer than this is clipped (a bogus header must not stall a lane for days;
    #: one past any wait a provider states is ignored as it is read:
    #: `providers.headers.plausible_wait`).
    max_retry_after_s: float = 600.0
    #: The longest wait a spent quota (`Failure.quota_exhausted`) may state and still be held
    #: out in this run, the lane carrying on after it; a quota stating none, or a longer one,
    #: pauses the lane until a resume (`quota_pauses`). An hour rather than the 600 s above:
    #: that clips a wait a provider asks of a burst, while a quota names when it returns, and
    #: Groq's rolling per-day limits name waits past ten minutes (a TPD 429's "try again in
    #: 11m39.216s"). A held lane sends nothing and costs nothing, where a paused one waits
    #: for someone to resume it; a wait past an hour is a day's quota the user is better told
    #: of, and a bogus one stalls the lane an hour at most (the hold is shown as it runs).
    max_quota_wait_s: float = 3600.0
    #: Permanent failures in a row (auth, bad request) that stop a lane.
    permanent_streak: int = 3
    #: Replies in a row not in the provider's format (`Failure.foreign`), before any reply
    #: that was, that stop a lane: its address is not the API's (a wrong base_url). After
    #: one was, they count toward the outage's streak instead (`engine.outage`).
    foreign_streak: int = 10
    #: Answer failures (`ANSWER_FAILURES`) per request, counted across resumes.
    max_answer_failures: int = 3
    #: A rate limit is not charged to its request's `max_attempts` while the lane has had
    #: a reply with the model's answer, usable or not, within this many seconds: the
    #: provider is pacing the lane, not refusing the request, and a throttled sweep should
    #: not give up answerable requests.
    #: A lane refused for longer is charged as before, so an always-refused key still ends.
    #: The same holds for a server not reached at all (`Failure.unreachable`), which is how a
    #: server restarting looks.
    rate_limit_grace_s: float = 60.0
    _wait: tenacity.wait.wait_base = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.max_answer_failures < 1:
            raise ValueError("max_answer_failures must be at least 1")
        if self.rate_limit_grace_s < 0:
            raise ValueError("rate_limit_grace_s must be at least 0")
        if self.max_quota_wait_s < 0:
            raise ValueError("max_quota_wait_s must be at least 0")
        wait = tenacity.wait_random_exponential(multiplier=self.base_s, max=self.cap_s)
        object.__setattr__(self, "_wait", wait)

    def quota_pauses(self, failure: Failure) -> bool:
        """Whether `failure` pauses its lane until a resume: a spent quota that states no
        wait (`retry_after_s`), or one past `max_quota_wait_s`. One rule for every provider;
        a quota saying when it returns within the cap is held out instead."""
        if not failure.quota_exhausted:
            return False
        wait = failure.retry_after_s
        return not wait or wait > self.max_quota_wait_s

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
    #: Requests given up because their answer-failure budget (`AnswerRetry`) was spent, in
    #: this dispatch or an earlier one: not out of attempts, and not counted as such.
    answer_budget_spent: int = 0
    #: Tries that failed before sending (a transient credential refresh failure).
    unsent: int = 0

    def count(self, cause: Outcome | str) -> None:
        self.by_cause[str(cause)] += 1

    @property
    def total(self) -> int:
        return sum(self.by_cause.values())


#: What the reason a spent answer-failure budget stops a request with says after its count
#: (`AnswerRetry.failed`: "1 answer failure (budget 1, ...", "3 answer failures (budget 3,
#: ..."); the audit finds such requests by it in their last attempt's detail (`engine.audit`).
BUDGET_SPENT_REASON = "answer failure"
#: How the detail of the attempt that stopped its request begins its mark (`gave_up_detail`);
#: the audit finds the requests whose answer-failure budget was spent by it.
GAVE_UP_MARK = "[gave up: "
#: The mark in a detail (a regular expression) of the attempt that spent its request's
#: answer-failure budget: `gave_up_detail` with `BUDGET_SPENT_REASON`.
BUDGET_SPENT_PATTERN = re.escape(GAVE_UP_MARK) + r"\d+ " + re.escape(BUDGET_SPENT_REASON)


def gave_up_detail(detail: str, reason: str) -> str:
    """An attempt's `detail` with the mark that its request is asked no more, and why."""
    return f"{detail} {GAVE_UP_MARK}{reason}]"


@dataclass
class AnswerRetry:
    """How one request is re-asked after answer failures: what changes, and when to stop.

    Re-sending a body that already failed deterministically is pointless (issue 11: 270 of 297
    failed attempts of a real small model were identical repeats). So each retry changes
    something: after a truncation the output cap is doubled once, otherwise the seed moves on
    (`seed + failures`, so a resume continues the sequence instead of repeating it). At
    temperature 0 a seed changes nothing on most servers: the same reply coming back there
    stops the request at once, with the cause. `failures` starts from the ledger's count, so
    the budget holds across resumes.
    """

    base_seed: int | None
    base_cap: int | None
    temperature: float | None
    budget: int
    failures: int = 0
    seed: int | None = None
    cap: int | None = None
    _replies: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.seed = self.base_seed
        if self.failures:  # a resume: carry on from where the earlier runs left the seed
            self.seed = (self.base_seed or 0) + self.failures

    @property
    def spent(self) -> bool:
        return self.failures >= self.budget

    @property
    def sent_cap(self) -> int | None:
        """The output cap the next attempt is sent with: the doubled one after a truncation,
        else the spec's (None where the spec names none). What a `tpm` estimate and a spend
        reservation charge the attempt at."""
        return self.cap if self.cap is not None else self.base_cap

    def note(self) -> str:
        """What this attempt changed, for its ledger detail ('' when nothing did)."""
        changes = []
        if self.seed != self.base_seed:
            changes.append(f"seed {self.seed}")
        if self.cap is not None and self.cap != self.base_cap:
            changes.append(f"max_tokens {self.cap}")
        return ("retry with " + ", ".join(changes)) if changes else ""

    def failed(self, outcome: Outcome, reply: str | None, attempt: int) -> str | None:
        """Book one answer failure and choose the next request; the reason to stop, if any."""
        self.failures += 1
        key = (reply or "").strip()
        earlier = self._replies.get(key) if key else None
        if key:
            self._replies.setdefault(key, attempt)
        if earlier is not None and self.temperature == 0:
            # In this run: a resume asks it again, up to the budget, which counts across runs.
            return f"same reply as attempt {earlier} at temperature 0: not asked again this run"
        if self.spent:
            spent = plural(self.failures, BUDGET_SPENT_REASON)
            return f"{spent} (budget {self.budget}, across runs)"
        if outcome is Outcome.TRUNCATED and self.cap is None and self.base_cap is not None:
            self.cap = 2 * self.base_cap
        else:
            self.seed = (self.base_seed or 0) + self.failures
        return None
