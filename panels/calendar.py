"""NYSE trading sessions, offline.

The unresolved-outcome arms ask about "the first NYSE trading session strictly after the
{s}-year anniversary of {date}" (paper, Appendix B). Campaigns must be planned with no
network, so the calendar comes from the `holidays` package's NYSE financial calendar
(full-day closures, including one-off closures it knows of) with weekends removed. Early
closes (half days) are still sessions, as they are on the exchange.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

__all__ = [
    "anniversary",
    "first_session_after",
    "is_session",
    "sessions_between",
    "target_session",
]


@lru_cache(maxsize=256)
def _closures(year: int) -> frozenset[dt.date]:
    """Full-day NYSE closures of one year (cached: the holidays object is slow to build)."""
    import holidays  # here, not at the top: 45 ms of start-up that campaigns without dates skip

    calendar = holidays.financial_holidays("NYSE", years=year)
    return frozenset(calendar.keys())


def is_session(day: dt.date) -> bool:
    """True when the NYSE is open for a regular or shortened session on `day`."""
    return day.weekday() < 5 and day not in _closures(day.year)


def first_session_after(day: dt.date) -> dt.date:
    """The first NYSE session strictly after `day` (never `day` itself)."""
    candidate = day + dt.timedelta(days=1)
    while not is_session(candidate):
        candidate += dt.timedelta(days=1)
    return candidate


def sessions_between(start: dt.date, end: dt.date) -> list[dt.date]:
    """Sessions `start <= d <= end`, in order (used to check return data against the calendar)."""
    out: list[dt.date] = []
    day = start
    while day <= end:
        if is_session(day):
            out.append(day)
        day += dt.timedelta(days=1)
    return out


def anniversary(day: dt.date, years: int) -> dt.date:
    """The calendar date `years` years after `day`.

    February 29 has no anniversary in a common year; we take February 28 of that year (the
    last day of the anniversary month). The target session "strictly after" it is then the
    first session in March, the same session a reading of "March 1" would give unless March 1
    itself is a session, and it never lands before the true anniversary has passed.
    """
    if years < 0:
        raise ValueError(f"years must be non-negative, got {years}")
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # Feb 29 -> common year
        return dt.date(day.year + years, 2, 28)


def target_session(day: dt.date, years: int) -> dt.date:
    """The unresolved arms' target: first NYSE session strictly after the anniversary."""
    return first_session_after(anniversary(day, years))
