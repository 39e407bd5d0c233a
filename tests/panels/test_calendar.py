"""The offline NYSE calendar behind the unresolved arms' target sessions."""

from __future__ import annotations

import datetime as dt

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from panels.calendar import (
    anniversary,
    first_session_after,
    is_session,
    sessions_between,
    target_session,
)
from panels.data import EMBEDDED_RETURNS


def test_known_sessions_after_holidays() -> None:
    # Thanksgiving 2027 is Thursday 25 November; the Friday after is a (short) session.
    assert first_session_after(dt.date(2027, 11, 25)) == dt.date(2027, 11, 26)
    # Christmas 2030 is a Wednesday: the 24th is a session, the 25th is not.
    assert first_session_after(dt.date(2030, 12, 24)) == dt.date(2030, 12, 26)
    # Good Friday 2027 is 26 March: Thursday -> Monday.
    assert first_session_after(dt.date(2027, 3, 25)) == dt.date(2027, 3, 29)
    # New Year's Day 2029 is a Monday.
    assert first_session_after(dt.date(2028, 12, 29)) == dt.date(2029, 1, 2)
    # Juneteenth 2026 falls on a Friday.
    assert first_session_after(dt.date(2026, 6, 18)) == dt.date(2026, 6, 22)


def test_strictly_after_a_session() -> None:
    assert is_session(dt.date(2027, 11, 26))
    assert first_session_after(dt.date(2027, 11, 26)) == dt.date(2027, 11, 29)


def test_february_29_anniversary() -> None:
    leap = dt.date(2024, 2, 29)
    assert anniversary(leap, 2) == dt.date(2026, 2, 28)
    assert anniversary(leap, 4) == dt.date(2028, 2, 29)
    # 2026-02-28 is a Saturday, so the target is Monday 2 March.
    assert target_session(leap, 2) == dt.date(2026, 3, 2)
    # 2028-02-29 is a Tuesday: the target is the next day.
    assert target_session(leap, 4) == dt.date(2028, 3, 1)


def test_target_session_examples() -> None:
    # 2025-09-12 + 10 years is a Wednesday; + 2 years is a Sunday.
    assert target_session(dt.date(2025, 9, 12), 10) == dt.date(2035, 9, 13)
    assert target_session(dt.date(2025, 9, 12), 2) == dt.date(2027, 9, 13)


def test_embedded_data_dates_are_exactly_the_nyse_sessions() -> None:
    dates = sorted(set(pl.read_parquet(EMBEDDED_RETURNS, columns=["date"])["date"].to_list()))
    assert dates == sessions_between(dates[0], dates[-1])


@given(st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2060, 12, 31)))
def test_first_session_after_is_the_next_session(day: dt.date) -> None:
    nxt = first_session_after(day)
    assert nxt > day
    assert is_session(nxt)
    assert nxt.weekday() < 5
    gap = day + dt.timedelta(days=1)
    while gap < nxt:
        assert not is_session(gap)
        gap += dt.timedelta(days=1)
