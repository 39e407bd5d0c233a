"""Reading the wait hints and limit headers providers send, in all their spellings.

The engine paces each lane from these numbers, so a misread (milliseconds taken as seconds,
an HTTP date taken as garbage, Groq's `2m59.56s` taken as nothing) either hammers a provider
or stalls a campaign. Every adapter uses these functions rather than its own parsing.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from providers.base import Headers
from providers.types import RateLimitInfo

#: One `<number><unit>` piece of a Go-style duration string (`2m59.56s`, `120ms`, `1h0m0s`).
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s|d)")
_UNIT_SECONDS = {
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}
#: Reset values above this are epoch timestamps, not durations (no limit resets in 30 years).
_EPOCH_THRESHOLD = 1e9


def _finite_nonnegative(value: float) -> float | None:
    return value if math.isfinite(value) and value >= 0 else None


def parse_number(text: str | None) -> float | None:
    """A plain non-negative number, or None (Azure sends `-1` for "not reported")."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return _finite_nonnegative(value)


def parse_duration(text: str | None, now: float | None = None) -> float | None:
    """Seconds from a duration string: `7.66s`, `2m59.56s`, `120ms`, `1h2m`, or a bare number.

    A bare number is seconds, unless it is so large that it can only be an epoch timestamp,
    in which case it becomes the time remaining until then. Anything else is None: a wrong
    guess here is worse than no hint, because the engine then falls back to its own backoff.
    """
    if text is None:
        return None
    cleaned = text.strip().lower()
    if not cleaned:
        return None
    number = parse_number(cleaned)
    if number is not None:
        if number > _EPOCH_THRESHOLD:
            return max(0.0, number - (time.time() if now is None else now))
        return number
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(cleaned):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned) or pos == 0:
        return None
    return _finite_nonnegative(total)


def parse_retry_after(text: str | None, now: float | None = None) -> float | None:
    """Seconds from a `Retry-After` value: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if text is None:
        return None
    number = parse_number(text)
    if number is not None:
        return number
    try:
        when = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC dates are GMT; a naive result means it said so implicitly
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's wait hint: `retry-after-ms` first (more precise), then `retry-after`;
    None past any wait a provider states (`plausible_wait`). An implausible `retry-after-ms`
    is ignored as an unreadable one is, so a plausible `retry-after` beside it still counts."""
    view = headers if isinstance(headers, Headers) else Headers(headers)
    millis = parse_number(view.get_first("retry-after-ms"))
    if millis is not None and (wait := plausible_wait(millis / 1000.0)) is not None:
        return wait
    return plausible_wait(parse_retry_after(view.get_first("retry-after"), now))


#: A rate-limited reply that asks for a wait longer than this is a spent quota in all but
#: name (Azure's S0 tier: "Please retry after 86400 seconds"). Per-minute limits ask for
#: seconds, and hourly windows (Groq's audio seconds per hour) for an hour at most, so only a
#: quota of more than an hour crosses it. Read as a rate limit, its wait is clipped to ten
#: minutes (`engine.retry.RetryPolicy.max_retry_after_s`) and the lane asks again all day,
#: each request charged until given up; as a spent quota the lane pauses and says so.
SPENT_QUOTA_WAIT_S = 3600.0
#: The longest wait read as a spent quota: a month, a monthly budget's reset. A longer one
#: is no quota any provider documents but a bogus or misread value (`retry-after: 1e308`),
#: and is ignored (`plausible_wait`).
LONGEST_QUOTA_WAIT_S = 31 * 86400.0


def plausible_wait(seconds: float | None) -> float | None:
    """A wait a reply states, or None past `LONGEST_QUOTA_WAIT_S`: such a value
    (`retry-after: 999999999`, an HTTP date in 2099) is ignored as an unreadable one (`inf`,
    `abc`) is, and the engine's own backoff paces the retries, as the OpenAI and Groq SDKs
    ignore a `retry-after` past their bound. Clipped to `max_retry_after_s` as a rate limit's
    wait, as it was, the most absurd value held its lane ten minutes a cycle, the longest
    stall any header got short of a quota; read as a spent quota, a misread value would pause
    the lane until someone resumes it, where every other reading of the reply says a rate
    limit."""
    return None if seconds is None or seconds > LONGEST_QUOTA_WAIT_S else seconds


def is_spent_quota_wait(seconds: float | None) -> bool:
    """Whether a rate limit's stated wait is long enough, and plausible enough, to mean its
    quota is spent."""
    return seconds is not None and SPENT_QUOTA_WAIT_S < seconds <= LONGEST_QUOTA_WAIT_S


def spent_quota_said(seconds: float) -> str:
    """Put before a failure's detail when the wait alone made it a spent quota: the pause
    line then says why, though the provider's words name no quota or another wait."""
    return f"asks to wait {seconds:,.0f} s, taken as a spent quota: "  # 3601 s is not 1 h


def spent_by_wait(detail: str, said: bool, stated: float | None) -> tuple[str, bool]:
    """A rate limit's detail, and whether its quota is spent: as `said` (its words, or a
    daily counter at 0), else when its stated wait alone makes one (`is_spent_quota_wait`),
    the detail then saying so first (`spent_quota_said`)."""
    if not said and stated is not None and is_spent_quota_wait(stated):
        return spent_quota_said(stated) + detail, True
    return detail, said


_RATE_LIMIT_PREFIX = "x-ratelimit-"
_NO_LIMITS = RateLimitInfo()


def rate_limit_info(headers: Mapping[str, str], now: float | None = None) -> RateLimitInfo:
    """The `x-ratelimit-*` family (OpenAI, Groq, Azure spellings) as one record.

    Which window a number describes differs by provider (Groq's request limits are per day,
    its token limits per minute); the record keeps the numbers and the adapter decides.
    """
    view = headers if isinstance(headers, Headers) else Headers(headers)
    for name in view:  # a loop, not any(genexpr): half the cost on every reply
        if name.startswith(_RATE_LIMIT_PREFIX):
            break
    else:
        return _NO_LIMITS  # servers that send none (local ones): six lookups saved a reply
    return RateLimitInfo(
        limit_requests=parse_number(view.get_first("x-ratelimit-limit-requests")),
        remaining_requests=parse_number(view.get_first("x-ratelimit-remaining-requests")),
        reset_requests_s=parse_duration(view.get_first("x-ratelimit-reset-requests"), now),
        limit_tokens=parse_number(view.get_first("x-ratelimit-limit-tokens")),
        remaining_tokens=parse_number(view.get_first("x-ratelimit-remaining-tokens")),
        reset_tokens_s=parse_duration(view.get_first("x-ratelimit-reset-tokens"), now),
    )


#: Phrases in a provider's message that give a wait ("Please try again in 5.289s",
#: "try again in 1m26.4s", "Please retry after 6 seconds"); used when no header has the hint.
_MESSAGE_WAIT = re.compile(
    r"(?:try again|retry)\s+(?:after|in)\s+(?:"
    r"(?P<go>(?:\d+(?:\.\d+)?(?:ms|h|m|s))+)(?![a-z])"
    r"|(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>milliseconds?|seconds?|secs?|minutes?|mins?)\b)",
    re.IGNORECASE,
)


def wait_from_message(message: str) -> float | None:
    """A wait stated in an error message's prose, in seconds, or None (none stated, or one
    past `plausible_wait`)."""
    match = _MESSAGE_WAIT.search(message)
    if match is None:
        return None
    if match.group("go") is not None:
        return plausible_wait(parse_duration(match.group("go")))
    value = float(match.group("value"))
    unit = match.group("unit").lower()
    if unit.startswith("milli"):
        value /= 1000.0
    elif unit.startswith("min"):
        value *= 60.0
    return plausible_wait(value)
