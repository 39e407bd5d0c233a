"""What one query is about: a stock-day, an ordered pair of stock-days, or a question family.

A unit carries everything a prompt or an outcome needs, already computed (scaled history,
scale, realised future), so arms stay pure functions of the unit and a plan can be rebuilt
from the same sample without touching the return file again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from panels.families import Family

#: Returns shown in every prompt (paper, section 3: "the previous 60 daily returns").
HISTORY_DAYS = 60
#: Later sessions a stock-day needs in the data (paper: "at least five subsequent trading days").
FUTURE_DAYS_REQUIRED = 5
#: Future scaled returns kept on a unit: enough for outcomes at horizons 1 to 4.
FUTURE_DAYS_KEPT = 4


@dataclass(frozen=True)
class StockDay:
    """One stock at the close of one anchor date.

    `history_*` are the 60 returns dated up to and including the anchor date (the forecast is
    made "immediately after market close on {date}", so that day's return is known); `scale`
    is their sample standard deviation (ddof=1: the paper says "the sample standard
    deviation of those same returns"); `history_z` and `future_z` are returns divided by
    `scale`. `future_z[d-1]` is future trading day d's scaled return.
    """

    date: dt.date
    asset: str
    name: str | None
    ticker: str | None
    history_dates: tuple[dt.date, ...]
    history_returns: tuple[float, ...]
    scale: float
    history_z: tuple[float, ...]
    future_dates: tuple[dt.date, ...]
    future_z: tuple[float, ...]
    headline: str | None = None

    @property
    def id(self) -> str:
        """Stable unit id used in plans and outputs: `2025-09-12:AAPL`."""
        return f"{self.date.isoformat()}:{self.asset}"

    @property
    def cluster(self) -> str:
        """The bootstrap cluster (the paper clusters on date)."""
        return self.date.isoformat()


@dataclass(frozen=True)
class DatePair:
    """Two stock-days of the same date, in a fixed role order: `first` is Asset A.

    The two-asset arm asks every date twice with the roles swapped (paper, footnote 2), so
    the order is part of the id: `2025-09-12:AAPL+MSFT` and `2025-09-12:MSFT+AAPL`.
    """

    first: StockDay
    second: StockDay

    def __post_init__(self) -> None:
        if self.first.date != self.second.date:
            raise ValueError(
                f"a date pair needs one date, got {self.first.id} and {self.second.id}"
            )
        if self.first.asset == self.second.asset:
            raise ValueError(f"a date pair needs two assets, got {self.first.id} twice")

    @property
    def date(self) -> dt.date:
        return self.first.date

    @property
    def id(self) -> str:
        return f"{self.date.isoformat()}:{self.first.asset}+{self.second.asset}"

    @property
    def cluster(self) -> str:
        return self.date.isoformat()

    def swapped(self) -> DatePair:
        return DatePair(self.second, self.first)


@dataclass(frozen=True)
class FamilyUnit:
    """A question family as a unit (arms also accept a bare `Family` as its own unit)."""

    family: Family

    @property
    def id(self) -> str:
        return str(self.family.id)

    @property
    def cluster(self) -> str:
        return str(self.family.id)


#: Anything an arm can be asked about; a bare Family counts as a family unit.
Unit = StockDay | DatePair | FamilyUnit | Family
