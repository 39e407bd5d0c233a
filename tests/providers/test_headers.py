"""Wait hints and limit headers: every spelling providers use, and the misreads to avoid."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.base import Headers
from providers.headers import (
    LONGEST_QUOTA_WAIT_S,
    parse_duration,
    parse_number,
    parse_retry_after,
    rate_limit_info,
    retry_after_seconds,
    wait_from_message,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2m59.56s", 179.56),  # Groq x-ratelimit-reset-requests
        ("7.66s", 7.66),  # Groq x-ratelimit-reset-tokens
        ("120ms", 0.12),
        ("1h0m0s", 3600.0),
        ("6m0s", 360.0),  # OpenAI style
        ("1d", 86400.0),
        ("0s", 0.0),
        ("2", 2.0),  # bare number = seconds
        ("0.5", 0.5),
        (" 3s ", 3.0),
    ],
)
def test_duration_strings(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "1s2", "s", "-1s", "-3", "2 m", "1x", "nan", "inf"])
def test_durations_we_cannot_read_are_none_not_guesses(text: str) -> None:
    assert parse_duration(text) is None


def test_epoch_reset_becomes_time_remaining() -> None:
    assert parse_duration("1700000030", now=1700000000.0) == pytest.approx(30.0)
    assert parse_duration("1700000000", now=1700000100.0) == 0.0


@given(
    h=st.integers(0, 30),
    m=st.integers(0, 59),
    s=st.decimals(0, 59, places=2),
    ms=st.integers(0, 999),
    parts=st.sets(st.sampled_from(["h", "m", "s", "ms"]), min_size=1),
)
def test_go_durations_add_up(h: int, m: int, s: object, ms: int, parts: set[str]) -> None:
    values = {"h": (h, 3600.0), "m": (m, 60.0), "s": (float(str(s)), 1.0), "ms": (ms, 1e-3)}
    text = "".join(f"{values[p][0]}{p}" for p in ("h", "m", "s", "ms") if p in parts)
    expected = sum(values[p][0] * values[p][1] for p in parts)
    assert parse_duration(text) == pytest.approx(expected)


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("2") == 2.0
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC).timestamp()
    date = format_datetime(datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(date, now=now) == pytest.approx(30.0)
    past = format_datetime(datetime(2026, 11, 30, 11, 0, 0, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(past, now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_retry_after_ms_wins_and_is_not_read_as_seconds() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "2"}) == 1.5
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"RETRY-AFTER-MS": "250"}) == 0.25
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": ""}) is None


@pytest.mark.parametrize(
    "headers",
    [{"retry-after": "999999999"}, {"retry-after": "Thu, 01 Jan 2099 00:00:00 GMT"},
     {"retry-after": "1e308"}, {"retry-after-ms": "2678400001"}, {"retry-after": "inf"}],
)
def test_a_wait_past_any_a_provider_states_is_ignored_as_an_unreadable_one_is(
    headers: dict[str, str],
) -> None:
    """Clipped to the engine's ten minutes, the most absurd Retry-After held its lane the
    longest (a tester's): now it is no hint at all, as `inf` was, and a month is still one."""
    assert retry_after_seconds(headers, now=0.0) is None
    month = LONGEST_QUOTA_WAIT_S
    assert retry_after_seconds({"retry-after": f"{month:.0f}"}) == month
    assert retry_after_seconds({"retry-after-ms": f"{month * 1000:.0f}"}) == month
    assert wait_from_message(f"Please retry after {month + 1:.0f} seconds.") is None
    assert wait_from_message("Please try again in 999999h.") is None
    assert wait_from_message(f"Please retry after {month:.0f} seconds.") == month


def test_an_implausible_retry_after_ms_gives_way_to_a_plausible_retry_after() -> None:
    """An absurd `retry-after-ms` is no hint, so the `retry-after` beside it is read, as it
    is beside an unreadable one; before, the ms value won, and its being ignored lost both."""
    assert retry_after_seconds({"retry-after-ms": "2678400001", "retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "abc", "retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "2678400001", "retry-after": "1e308"}) is None


def test_groq_rate_limit_headers() -> None:
    info = rate_limit_info(
        {
            "x-ratelimit-limit-requests": "14400",
            "x-ratelimit-remaining-requests": "14370",
            "x-ratelimit-limit-tokens": "18000",
            "x-ratelimit-remaining-tokens": "17997",
            "x-ratelimit-reset-requests": "2m59.56s",
            "x-ratelimit-reset-tokens": "7.66s",
        }
    )
    assert info.limit_requests == 14400
    assert info.remaining_requests == 14370
    assert info.limit_tokens == 18000
    assert info.remaining_tokens == 17997
    assert info.reset_requests_s == pytest.approx(179.56)
    assert info.reset_tokens_s == pytest.approx(7.66)


def test_azure_minus_one_means_not_reported() -> None:
    info = rate_limit_info(
        {"X-RateLimit-Remaining-Tokens": "-1", "x-ratelimit-remaining-requests": "0"}
    )
    assert info.remaining_tokens is None
    assert info.remaining_requests == 0
    assert parse_number("-1") is None


@pytest.mark.parametrize(
    ("message", "seconds"),
    [
        ("Rate limit reached ... Please try again in 5.289s. Need more tokens?", 5.289),
        ("Please try again in 1m26.4s.", 86.4),
        ("Please retry after 6 seconds. For more information", 6.0),
        ("try again in 250ms", 0.25),
        ("retry after 2 minutes", 120.0),
        ("Model busy, retry later", None),
        ("Please try again later.", None),
    ],
)
def test_wait_from_message(message: str, seconds: float | None) -> None:
    got = wait_from_message(message)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def test_headers_view_is_case_insensitive() -> None:
    view = Headers({"X-Request-ID": "abc", "apim-request-id": " "})
    assert view["x-request-id"] == "abc"
    assert "X-REQUEST-ID" in view
    assert view.get_first("apim-request-id", "x-request-id") == "abc"  # blank is skipped
