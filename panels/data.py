"""Return data, headlines and the paper's stock-day sampling.

The only I/O in `panels`: reading a user's return and headline files (CSV or Parquet) or the
embedded default. Files are validated up front with errors that name the file and the column,
because a campaign should fail before its first paid request, not after.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from panels.calendar import first_session_after
from panels.input_files import (
    bidi_control,
    check_utf8_head,
    control_character,
    file_kind,
    not_utf8,
)
from panels.units import (
    FUTURE_DAYS_KEPT,
    FUTURE_DAYS_REQUIRED,
    HISTORY_DAYS,
    DatePair,
    StockDay,
)

__all__ = [
    "EMBEDDED_RETURNS",
    "EMBEDDED_SOURCE",
    "MAX_DAILY_RETURN",
    "AnchorWindow",
    "DataError",
    "NoStockDay",
    "TooFewDates",
    "check_headline_text",
    "embedded_returns_words",
    "first_session_after",
    "load_headlines",
    "load_returns",
    "sample_date_pairs",
    "sample_stock_days",
]

#: The default data: 20 large US stocks, 2018-2022 (see `panels/data/PROVENANCE.md`).
EMBEDDED_RETURNS = Path(__file__).parent / "data" / "returns.parquet"

#: Where the embedded returns come from, and the paper's sample they are not (in words for
#: the report's Provenance: `embedded_returns_words`; `panels/data/PROVENANCE.md` in full).
EMBEDDED_SOURCE = "S&P 500 stocks from skfolio's dataset, daily adjusted closes"
PAPER_SAMPLE = "CRSP returns and Refinitiv headlines, August-December 2025"


def embedded_returns_words(sha256: str | None) -> str:
    """What a run's embedded returns are, in one sentence, for a run planned from them whose
    digest was `sha256`: their assets and dates read from the file when it is the one shipped
    now, and in every case that they are not the paper's sample (a reader of a report of them
    could take its figures for the paper's)."""
    import hashlib

    if sha256 is not None and sha256 == hashlib.sha256(EMBEDDED_RETURNS.read_bytes()).hexdigest():
        span = pl.read_parquet(EMBEDDED_RETURNS, columns=["date", "asset"]).select(
            assets=pl.col("asset").n_unique(), first=pl.col("date").min(), last=pl.col("date").max()
        )
        assets, first, last = span.row(0)
        what = f"{assets} {EMBEDDED_SOURCE}, {first} to {last}"
    else:  # the file another dutchbook shipped: its digest, above, says which
        what = f"the embedded data another dutchbook version shipped ({EMBEDDED_SOURCE})"
    return (
        f"Stock returns: {what}, shipped with dutchbook (panels/data/PROVENANCE.md); "
        f"not the paper's sample ({PAPER_SAMPLE})."
    )


#: The paper first draws this many stock-days, then dates from them (section 3, "Sample").
PAPER_POOL_SIZE = 10_000
#: The first and last anchor date a stock-day may have (both included); None: unbounded.
AnchorWindow = tuple[dt.date | None, dt.date | None]


#: The largest daily simple return a file may hold: +1000%, a stock worth eleven times its
#: price of the day before. Past it the row is a data error (a percentage written where a
#: fraction goes, a price in the return column), not a market move: the embedded stocks'
#: largest is +36%. A value such as 1e160 also overflowed the square in the scale of every
#: history it fell in, which was then said to have "no spread".
MAX_DAILY_RETURN = 10.0


class DataError(ValueError):
    """A return or headline file cannot be used; the message names the file and column."""


class NoStockDay(DataError):
    """No stock-day of the data has the history and future a question needs (the message
    names no file: `sample_stock_days` is given tables, its caller knows their files)."""


class TooFewDates(DataError):
    """Fewer dates qualify than the stock-days asked for need; `most` is the most that can
    be drawn from the same data and seed."""

    def __init__(self, message: str, most: int) -> None:
        super().__init__(message)
        self.most = most


def _read_table(path: Path) -> pl.DataFrame:
    if not path.exists():
        raise DataError(f"{path}: no such file")
    why = not_a_file(path)
    if why is not None:
        raise DataError(f"{path}: {why}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pl.read_parquet(path)
        if suffix in {".csv", ".txt"}:
            check_utf8_head(path)
            # Everything as text first, so each column is converted (and blamed) by us.
            return pl.read_csv(path, infer_schema=False)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: {not_utf8(exc)}") from None
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"{path}: cannot be read as {suffix[1:]}: {exc}") from exc
    raise DataError(f"{path}: expected a .csv or .parquet file")


def not_a_file(path: Path, mode: int | None = None) -> str | None:
    """Why `path` (followed to its end) is no data file, else None: polars opens a FIFO
    named `returns.csv` and waits for a writer in native code, deaf to SIGTERM (`plan` and
    `run` hung until a SIGKILL), reads a device such as `/dev/zero` without end, and named a
    folder only as "expanded paths were empty (path expansion input: ...)". `mode`: the
    status already taken (`runs.design` asks of the file it opened), else `path` is asked.
    Worded by `panels.input_files.file_kind`: "is a FIFO, not a .csv or .parquet file"."""
    kind = file_kind(path.stat().st_mode if mode is None else mode)
    return None if kind is None else f"is {kind}, not a .csv or .parquet file"


def _require(df: pl.DataFrame, path: Path, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(
            f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(df.columns)}"
        )


def _first_bad(df: pl.DataFrame, ok: pl.Series, column: str) -> str:
    row = int(ok.not_().arg_true()[0])
    # "row 16" was read as a line of the file, where a CSV's header makes it line 17
    return f"data row {row + 1} has {df[column][row]!r}"


def _as_date(df: pl.DataFrame, path: Path) -> pl.Series:
    col = df["date"]
    if col.dtype == pl.Date:
        out = col
    elif isinstance(col.dtype, pl.Datetime):
        out = col.dt.date()
    elif col.dtype == pl.String:
        out = col.str.strip_chars().str.to_date("%Y-%m-%d", strict=False)
    else:
        raise DataError(f"{path}: column 'date' must hold dates (YYYY-MM-DD), found {col.dtype}")
    ok = out.is_not_null()
    if not ok.all():
        raise DataError(
            f"{path}: column 'date' must hold dates as YYYY-MM-DD; {_first_bad(df, ok, 'date')}"
        )
    return out.alias("date")


def _as_text(df: pl.DataFrame, path: Path, column: str, *, required: bool) -> pl.Series:
    col = df[column]
    if col.dtype not in (pl.String, pl.Categorical, pl.Null):
        if col.dtype.is_integer():
            col = col.cast(pl.String)
        else:
            raise DataError(f"{path}: column {column!r} must hold text, found {col.dtype}")
    col = col.cast(pl.String)
    if required:
        ok = col.is_not_null() & (col.str.strip_chars().str.len_chars() > 0)
        if not ok.all():
            raise DataError(f"{path}: column {column!r} is empty; {_first_bad(df, ok, column)}")
    return col.alias(column)


def _as_return(df: pl.DataFrame, path: Path) -> pl.Series:
    col = df["ret"]
    if col.dtype == pl.String:
        col = col.str.strip_chars().cast(pl.Float64, strict=False)
    elif col.dtype.is_numeric():
        col = col.cast(pl.Float64)
    else:
        raise DataError(f"{path}: column 'ret' must hold numbers, found {col.dtype}")
    ok = col.is_not_null() & col.is_finite()
    if not ok.all():
        raise DataError(
            f"{path}: column 'ret' must hold finite numbers (simple returns, 0.01 = 1%); "
            f"{_first_bad(df, ok, 'ret')}"
        )
    below = col <= -1.0
    if below.any():
        raise DataError(
            f"{path}: column 'ret' has a simple return of -100% or less (it holds fractions, "
            "0.01 = 1%, not percentages); "
            f"{_first_bad(df, below.not_(), 'ret')}"
        )
    above = col > MAX_DAILY_RETURN
    if above.any():
        raise DataError(
            f"{path}: column 'ret' has a daily return above +1000% (ret > {MAX_DAILY_RETURN:g}), "
            f"a data error (a percentage for a fraction?); {_first_bad(df, above.not_(), 'ret')}"
        )
    return col.alias("ret")


def load_returns(path: str | Path | None = None) -> pl.DataFrame:
    """Daily simple returns as `date, asset, ret, name, ticker`, sorted by asset and date.

    `None` loads the embedded default. `name` and `ticker` are optional in the file (null
    when absent); the identity arms need them.
    """
    source = EMBEDDED_RETURNS if path is None else Path(path)
    raw = _read_table(source)
    _require(raw, source, ("date", "asset", "ret"))
    columns = [
        _as_date(raw, source),
        _as_text(raw, source, "asset", required=True),
        _as_return(raw, source),
    ]
    for optional in ("name", "ticker"):
        if optional in raw.columns:
            columns.append(_as_text(raw, source, optional, required=False))
        else:
            columns.append(pl.Series(optional, [None] * raw.height, dtype=pl.String))
    df = pl.DataFrame(columns).sort(["asset", "date"])
    dup = df.select("date", "asset").is_duplicated()
    if dup.any():
        row = df.filter(dup).row(0, named=True)
        raise DataError(
            f"{source}: columns 'date', 'asset' must be unique; "
            f"{row['asset']} appears twice on {row['date']}"
        )
    return df


def load_headlines(path: str | Path) -> pl.DataFrame:
    """Headlines as `date, asset, headline` (published before that date's close).

    When a stock-day has several rows, the first one in file order is its headline.
    """
    rows = _headline_rows(Path(path))
    return rows.unique(subset=["date", "asset"], keep="first", maintain_order=True)


def _headline_rows(source: Path) -> pl.DataFrame:
    """Every data row of a headlines file, in file order, its headline stripped."""
    raw = _read_table(source)
    _require(raw, source, ("date", "asset", "headline"))
    return pl.DataFrame(
        [
            _as_date(raw, source),
            _as_text(raw, source, "asset", required=True),
            _as_text(raw, source, "headline", required=True).str.strip_chars(),
        ]
    )


#: Why a headline may hold neither kind of character: each is written into a prompt.
_UNASKABLE_HEADLINE = (
    (control_character, "a line break could start an instruction of its own in the prompt "
     "(\"Ignore previous instructions ...\") and an escape sequence reaches a terminal; make "
     "it one line"),
    (bidi_control, "a bidirectional control reorders what follows it on screen, so the "
     "headline displays other than it reads and than the model is asked; leave it out"),
)


def check_headline_text(path: str | Path) -> None:
    """Refuse a headline holding a control character or a bidirectional control, naming its
    data row and the character, as a statement's text is refused
    (`panels.families.check_well_posed`): the headline arm writes it into the prompt of its
    stock-day. For a new design only (`runs.design.check_new_design`): a folder an earlier
    build ran with such a file must stay resumable, scorable and reportable."""
    source = Path(path)
    for row, text in enumerate(_headline_rows(source)["headline"], start=1):
        for found, why in _UNASKABLE_HEADLINE:
            if (named := found(text)) is not None:
                raise DataError(f"{source}: data row {row}'s headline holds {named}: {why}")


def _sample_sd(values: Sequence[float]) -> float:
    """Sample standard deviation, ddof=1 (the paper's "sample standard deviation")."""
    return float(np.std(np.asarray(values, dtype=np.float64), ddof=1))


def _eligible(
    returns: pl.DataFrame, headlines: pl.DataFrame | None, window: AnchorWindow
) -> pl.DataFrame:
    """Stock-days with >= 60 returns up to and including the date and >= 5 after it, dated
    within `window` (the history and later days may lie outside it, as the paper's did)."""
    df = returns.sort(["asset", "date"]).with_columns(
        pl.int_range(pl.len()).over("asset").alias("_i"),
        pl.len().over("asset").alias("_n"),
    )
    first, last = window
    df = df.filter(
        (pl.col("_i") >= HISTORY_DAYS - 1)
        & (pl.col("_n") - 1 - pl.col("_i") >= FUTURE_DAYS_REQUIRED)
        & (pl.lit(True) if first is None else pl.col("date") >= first)
        & (pl.lit(True) if last is None else pl.col("date") <= last)
    )
    if headlines is not None:
        df = df.join(headlines, on=["date", "asset"], how="inner")
    return df.select("date", "asset").sort(["date", "asset"])


def sample_stock_days(
    returns: pl.DataFrame,
    n: int,
    seed: int,
    headlines: pl.DataFrame | None = None,
    pool_size: int = PAPER_POOL_SIZE,
    window: AnchorWindow = (None, None),
    pairs: bool = False,
) -> list[StockDay]:
    """Draw `n` stock-days the way the paper did (section 3, "Sample").

    Keep stock-days with at least 60 prior and 5 later trading days (and, when `headlines`
    is given, a headline) whose date lies in `window` (first, last; both included, None
    unbounded: the paper's August 15 to December 23, 2025); draw a pool of `pool_size` of
    them uniformly without replacement (all of them if fewer); pick `n / 2` dates uniformly
    among the pool's dates that have at least two stocks; on each date draw two of the pool's
    stocks uniformly. Deterministic per seed. Ordered by date, the two stocks of a date in
    the order drawn. `NoStockDay` when no date has two stocks to draw, `TooFewDates` when fewer
    than `n / 2` have.

    `pairs` (a design asking the two stocks of a date together, a date-pair arm): a draw
    with two stocks of a date whose 60 prior dates differ (a table with a row dropped from
    one of them) is drawn again from the same point among the stocks that line up
    (`_aligned`), where a two-asset prompt refused the whole plan. Every draw an earlier
    build planned is drawn as it was: scoring draws the sample again from the seed.
    """
    if n <= 0 or n % 2:
        raise DataError(f"n must be a positive even number (two stocks per date), got {n}")
    rng = np.random.default_rng(seed)
    eligible = _eligible(returns, headlines, window)
    need = (" with a headline" if headlines is not None else "") + _window_text(window)
    if eligible.height == 0:
        raise NoStockDay(
            f"no stock-day has {HISTORY_DAYS} prior and {FUTURE_DAYS_REQUIRED} later "
            f"trading days{need}"
        )
    if eligible.height > pool_size:
        picks = np.sort(rng.choice(eligible.height, size=pool_size, replace=False))
        pool = eligible[picks.tolist()]
    else:
        pool = eligible
    per_date = pool.group_by("date", maintain_order=True).agg(pl.col("asset"))
    per_date = per_date.filter(pl.col("asset").list.len() >= 2).sort("date")
    heads = _headline_map(headlines)
    drawn_from = rng.bit_generator.state
    try:
        out = _draw(returns, per_date, n, rng, heads, (need, window), lined_up=False)
    except TooFewDates:
        if not pairs:
            raise
        # Said of the dates whose stocks line up: "at most 124" from all the dates, then
        # 124 asked for, found no pair to draw.
        _draw(returns, _aligned(returns, per_date), n, rng, heads, (need, window),
              lined_up=True)  # fmt: skip
        raise
    pairs_drawn = zip(out[::2], out[1::2], strict=True)
    if pairs and any(a.history_dates != b.history_dates for a, b in pairs_drawn):
        rng.bit_generator.state = drawn_from
        out = _draw(returns, _aligned(returns, per_date), n, rng, heads, (need, window),
                    lined_up=True)  # fmt: skip
    return out


def _draw(
    returns: pl.DataFrame,
    per_date: pl.DataFrame,
    n: int,
    rng: np.random.Generator,
    heads: dict[tuple[dt.date, str], str],
    said: tuple[str, AnchorWindow],
    *,
    lined_up: bool,
) -> list[StockDay]:
    """`n / 2` dates of `per_date` (a date, its stocks), two stocks on each (`said`: how the
    messages name the headlines and the window; `lined_up`: the stocks are those of a date
    that line up, which the message says)."""
    need, window = said
    if per_date.height == 0:  # asking for fewer would not help: the data lacks pairs
        same = " the same" if lined_up else ""
        raise NoStockDay(
            f"no date has two stocks with{same} {HISTORY_DAYS} prior and "
            f"{FUTURE_DAYS_REQUIRED} later trading days{need}"
        )
    n_dates = n // 2
    if per_date.height < n_dates:
        # Of the dates whose stocks line up, said so: "only 7 dates qualify" of 65 in the data.
        which = " whose two stocks' dates line up" if lined_up else ""
        raise TooFewDates(
            f"asked for {n:,} stock-days ({n_dates:,} dates with two stocks each) but only "
            f"{per_date.height:,} date{'s' if per_date.height != 1 else ''}{which} "
            f"{'qualify' if per_date.height != 1 else 'qualifies'}{_window_text(window)}",
            most=2 * per_date.height,
        )
    date_rows = np.sort(rng.choice(per_date.height, size=n_dates, replace=False))
    out: list[StockDay] = []
    for row in date_rows.tolist():
        date = per_date["date"][row]
        assets = sorted(per_date["asset"][row])
        for k in rng.choice(len(assets), size=2, replace=False).tolist():
            out.append(stock_day(returns, assets[k], date, heads.get((date, assets[k]))))
    return out


def _aligned(returns: pl.DataFrame, per_date: pl.DataFrame) -> pl.DataFrame:
    """`per_date` (a date, its stocks in the pool) with each date's stocks narrowed to those
    whose 60 prior and kept later dates are the same, and dates left with fewer than two
    dropped. A two-asset prompt shows the sixty aligned dates and asks of "the same next
    trading day": two stocks drawn with a day missing from one of them stopped the whole plan
    (a table with a return dropped here and there, as one without missing values must be).
    The largest such group is kept (on a tie, the one holding the first stock by name), so on
    a table without gaps every stock of a date stays and the draw is as it always was."""
    wanted = set(per_date["asset"].explode().to_list())
    dates_of: dict[str, list[dt.date]] = {
        asset: dates
        for asset, dates in returns.filter(pl.col("asset").is_in(list(wanted)))
        .group_by("asset")
        .agg(pl.col("date").sort())
        .iter_rows()
    }
    kept_dates: list[dt.date] = []
    kept_assets: list[list[str]] = []
    for date, assets in per_date.iter_rows():
        groups: dict[tuple[dt.date, ...], list[str]] = {}
        for asset in sorted(assets):
            dates = dates_of[asset]
            i = bisect.bisect_left(dates, date)
            span = tuple(dates[i - HISTORY_DAYS + 1 : i + 1 + FUTURE_DAYS_KEPT])
            groups.setdefault(span, []).append(asset)
        largest = max(groups.values(), key=len)  # the first of the longest: ties by name
        if len(largest) >= 2:
            kept_dates.append(date)
            kept_assets.append(largest)
    return pl.DataFrame(
        {"date": kept_dates, "asset": kept_assets},
        schema={"date": per_date.schema["date"], "asset": per_date.schema["asset"]},
    )


def _window_text(window: AnchorWindow) -> str:
    """How the sampler's messages name the anchor dates' bounds ("" when there are none)."""
    first, last = window
    if first is not None and last is not None:
        return f" (anchor dates {first} to {last})"
    if first is not None:
        return f" (anchor dates from {first})"
    return f" (anchor dates up to {last})" if last is not None else ""


def _headline_map(headlines: pl.DataFrame | None) -> dict[tuple[dt.date, str], str]:
    if headlines is None:
        return {}
    return {
        (r["date"], r["asset"]): r["headline"] for r in headlines.iter_rows(named=True)
    }


def stock_day(
    returns: pl.DataFrame, asset: str, date: dt.date, headline: str | None = None
) -> StockDay:
    """Build one StockDay from the return table (the date must be one of the asset's rows)."""
    rows = returns.filter(pl.col("asset") == asset).sort("date")
    dates: list[dt.date] = rows["date"].to_list()
    try:
        i = dates.index(date)
    except ValueError:
        raise DataError(f"{asset} has no return on {date}") from None
    if i < HISTORY_DAYS - 1 or len(dates) - 1 - i < FUTURE_DAYS_REQUIRED:
        raise DataError(
            f"{asset} on {date} lacks {HISTORY_DAYS} prior or {FUTURE_DAYS_REQUIRED} later days"
        )
    rets: list[float] = rows["ret"].to_list()
    history = rets[i - HISTORY_DAYS + 1 : i + 1]
    scale = _sample_sd(history)
    if not math.isfinite(scale) or scale <= 0.0:
        raise DataError(f"{asset} on {date}: the 60 prior returns have no spread")
    future = rets[i + 1 : i + 1 + FUTURE_DAYS_KEPT]
    first = rows.row(i, named=True)
    return StockDay(
        date=date,
        asset=asset,
        name=first.get("name"),
        ticker=first.get("ticker"),
        history_dates=tuple(dates[i - HISTORY_DAYS + 1 : i + 1]),
        history_returns=tuple(history),
        scale=scale,
        history_z=tuple(r / scale for r in history),
        future_dates=tuple(dates[i + 1 : i + 1 + FUTURE_DAYS_KEPT]),
        future_z=tuple(r / scale for r in future),
        headline=headline,
    )


def sample_date_pairs(stock_days: Sequence[StockDay], both_orders: bool = True) -> list[DatePair]:
    """The two stocks of each sampled date as a pair (Asset A first); both role orders if asked.

    Expects the output of `sample_stock_days` (exactly two stock-days per date).
    """
    by_date: dict[dt.date, list[StockDay]] = {}
    for sd in stock_days:
        by_date.setdefault(sd.date, []).append(sd)
    pairs: list[DatePair] = []
    for date, days in by_date.items():
        if len(days) != 2:
            raise DataError(f"{date}: expected two stock-days for a pair, found {len(days)}")
        pair = DatePair(days[0], days[1])
        pairs.append(pair)
        if both_orders:
            pairs.append(pair.swapped())
    return pairs
