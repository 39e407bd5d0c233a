"""Return data, headlines, and the paper's stock-day sampling."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panels.calendar import sessions_between
from panels.data import (
    EMBEDDED_RETURNS,
    MAX_DAILY_RETURN,
    DataError,
    NoStockDay,
    TooFewDates,
    load_headlines,
    load_returns,
    sample_date_pairs,
    sample_stock_days,
    stock_day,
)
from panels.prompts import two_asset_history_block


@pytest.fixture(scope="module")
def embedded() -> pl.DataFrame:
    return load_returns()


def _synthetic(n_days: int, assets: tuple[str, ...] = ("X", "Y"), seed: int = 0) -> pl.DataFrame:
    """A small return table on real sessions; returns drawn at random."""
    dates = sessions_between(dt.date(2024, 1, 2), dt.date(2025, 12, 31))[:n_days]
    rng = np.random.default_rng(seed)
    rows = [
        {"date": d, "asset": a, "ret": float(rng.normal(0, 0.02))} for a in assets for d in dates
    ]
    return pl.DataFrame(rows)


def test_embedded_returns_are_real_and_small(embedded: pl.DataFrame) -> None:
    assert EMBEDDED_RETURNS.stat().st_size < 2_000_000
    assert embedded.columns == ["date", "asset", "ret", "name", "ticker"]
    assert embedded.schema["date"] == pl.Date
    assert embedded.schema["ret"] == pl.Float64
    assert embedded["asset"].n_unique() == 20
    assert embedded["name"].null_count() == 0
    assert embedded["ticker"].null_count() == 0
    assert embedded.filter(pl.col("asset") == "AAPL")["name"][0] == "Apple Inc."
    dates = embedded["date"].to_list()
    assert max(dates) - min(dates) > dt.timedelta(days=4 * 365)
    # Daily stock returns: centred near zero, a few percent wide, no absurd values.
    rets = embedded["ret"].to_numpy()
    assert abs(rets.mean()) < 0.005
    assert 0.005 < rets.std() < 0.05
    assert np.abs(rets).max() < 0.5
    # Provenance is recorded next to the data.
    provenance = (EMBEDDED_RETURNS.parent / "PROVENANCE.md").read_text()
    assert "skfolio" in provenance and "BSD 3-Clause" in provenance


def test_csv_roundtrip_with_optional_columns_absent(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("date,asset,ret\n2024-01-03,X,0.01\n2024-01-02,X,-0.02\n2024-01-02,Y,0.5\n")
    df = load_returns(path)
    assert df.columns == ["date", "asset", "ret", "name", "ticker"]
    assert df["date"].to_list() == [dt.date(2024, 1, 2), dt.date(2024, 1, 3), dt.date(2024, 1, 2)]
    assert df["ret"].to_list() == [-0.02, 0.01, 0.5]
    assert df["name"].null_count() == 3


def test_parquet_with_names(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame(
        {
            "date": [dt.date(2024, 1, 2)],
            "asset": ["X"],
            "ret": [0.01],
            "name": ["Ex Corp"],
            "ticker": ["EX"],
        }
    ).write_parquet(path)
    df = load_returns(path)
    assert df.row(0) == (dt.date(2024, 1, 2), "X", 0.01, "Ex Corp", "EX")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("date,asset\n2024-01-02,X\n", "missing column(s) ret"),
        ("date,asset,ret\n02/01/2024,X,0.01\n", "column 'date'"),
        ("date,asset,ret\n2024-01-02,X,abc\n", "column 'ret'"),
        ("date,asset,ret\n2024-01-02,X,\n", "column 'ret'"),
        # said neither that the column holds fractions nor which line of the file
        ("date,asset,ret\n2024-01-02,X,0.01\n2024-01-03,X,-1.5\n",
         "a simple return of -100% or less (it holds fractions, 0.01 = 1%, not percentages); "
         "data row 2 has '-1.5'"),
        # overflowed the scale's square: a numpy warning, then "no spread" naming no file
        ("date,asset,ret\n2024-01-02,X,0.01\n2024-01-03,X,1e160\n",
         "above +1000% (ret > 10), a data error (a percentage for a fraction?); data row 2 has "
         "'1e160'"),
        ("date,asset,ret\n2024-01-02,X,10.5\n", "row 1 has '10.5'"),
        ("date,asset,ret\n2024-01-02,,0.01\n", "column 'asset'"),
        ("date,asset,ret\n2024-01-02,X,0.01\n2024-01-02,X,0.02\n", "unique"),
    ],
)
def test_bad_files_name_the_file_and_column(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(DataError) as info:
        load_returns(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_a_table_not_in_utf8_says_to_save_it_as_utf8(tmp_path: Path, encoding: str) -> None:
    """A UTF-16 table was read into columns of replacement characters ("missing column(s)
    date, asset, ret; found \ufffd\ufffdd a t e, ..."), and Latin-1 said "invalid utf-8
    sequence" (a tester's)."""
    path = tmp_path / "r.csv"
    path.write_bytes("date,asset,ret\n2024-01-02,Zürich,0.01\n".encode(encoding))
    with pytest.raises(DataError) as info:
        load_returns(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text (")
    assert str(info.value).endswith("); save it as UTF-8")


def test_the_largest_plausible_return_loads_and_the_embedded_data_is_far_below_it(
    tmp_path: Path, embedded: pl.DataFrame
) -> None:
    path = tmp_path / "r.csv"
    path.write_text(f"date,asset,ret\n2024-01-02,X,{MAX_DAILY_RETURN}\n")
    assert load_returns(path)["ret"].to_list() == [MAX_DAILY_RETURN]
    big = tmp_path / "r.parquet"
    pl.DataFrame({"date": [dt.date(2024, 1, 2)], "asset": ["X"], "ret": [1e160]}).write_parquet(big)
    with pytest.raises(DataError, match=r"r\.parquet: column 'ret' has a daily return above"):
        load_returns(big)
    assert embedded["ret"].max() < MAX_DAILY_RETURN / 20  # type: ignore[operator]


def test_wrong_type_in_parquet_and_bad_paths(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pl.DataFrame({"date": [1], "asset": ["X"], "ret": [0.1]}).write_parquet(path)
    with pytest.raises(DataError, match="column 'date'"):
        load_returns(path)
    with pytest.raises(DataError, match="no such file"):
        load_returns(tmp_path / "missing.csv")
    other = tmp_path / "r.xlsx"
    other.write_text("x")
    with pytest.raises(DataError, match=r"\.csv or \.parquet"):
        load_returns(other)


def test_a_fifo_a_device_or_a_folder_as_a_data_file_is_refused_without_reading_it(
    tmp_path: Path,
) -> None:
    """polars opened a FIFO named `returns.csv` and waited for a writer in native code, deaf
    to SIGTERM (`dutchbook plan` hung until a SIGKILL): run in a child, so a wait fails
    the test instead of hanging it."""
    fifo = tmp_path / "returns.csv"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom panels.data import DataError, load_returns, load_headlines\n"
        "for load in (load_returns, load_headlines):\n"
        "    try:\n        load(sys.argv[1])\n"
        "    except DataError as exc:\n        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=30
    )
    said = f"{fifo}: is a FIFO, not a .csv or .parquet file"
    assert done.stdout.splitlines() == [said, said], done.stderr
    device = tmp_path / "zero.csv"
    device.symlink_to("/dev/zero")
    said = r"zero\.csv: is a character device, not a \.csv or \.parquet file$"
    with pytest.raises(DataError, match=said):
        load_returns(device)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    with pytest.raises(DataError, match=r"folder\.csv: is a folder, not a \.csv or \.parquet"):
        load_headlines(folder)


def test_headlines_first_row_wins(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text(
        "date,asset,headline\n2024-01-02,X,First news\n2024-01-02,X,Second\n2024-01-03,X,  Later \n"
    )
    df = load_headlines(path)
    assert df.rows() == [
        (dt.date(2024, 1, 2), "X", "First news"),
        (dt.date(2024, 1, 3), "X", "Later"),
    ]
    bad = tmp_path / "h2.csv"
    bad.write_text("date,asset\n2024-01-02,X\n")
    with pytest.raises(DataError, match="headline"):
        load_headlines(bad)


def test_the_sample_keeps_to_its_anchor_dates(embedded: pl.DataFrame) -> None:
    """The paper's window bounds the anchor dates only: a stock-day on its first day keeps
    the 60 returns before it, and one on its last day the 5 after it."""
    first, last = dt.date(2021, 3, 1), dt.date(2021, 3, 31)
    days = sample_stock_days(embedded, 40, seed=5, window=(first, last))
    assert len(days) == 40 and all(first <= d.date <= last for d in days)
    assert min(d.history_dates[0] for d in days) < first
    assert max(d.future_dates[-1] for d in days) > last
    # every date of the month that has two stocks: the window is the only limit
    in_month = embedded.filter(pl.col("date").is_between(first, last))["date"].n_unique()
    assert len({d.date for d in days}) == 20 <= in_month
    assert {d.date for d in sample_stock_days(embedded, 4, seed=5, window=(first, None))} <= {
        d for d in embedded["date"].to_list() if d >= first
    }
    assert all(
        d.date <= last for d in sample_stock_days(embedded, 4, seed=5, window=(None, last))
    )
    # no window: the sample as before
    assert sample_stock_days(embedded, 4, seed=5) == sample_stock_days(
        embedded, 4, seed=5, window=(None, None)
    )
    with pytest.raises(TooFewDates, match=r"only 23 dates qualify \(anchor dates 2021-03-01 "):
        sample_stock_days(embedded, 60, seed=5, window=(first, last))
    one = (dt.date(2021, 3, 1), dt.date(2021, 3, 1))
    with pytest.raises(TooFewDates, match=r"only 1 date qualifies \(anchor dates 2021-03-01 "):
        sample_stock_days(embedded, 4, seed=5, window=one)
    with pytest.raises(NoStockDay, match=r"\(anchor dates 2021-03-06 to 2021-03-07\)"):
        sample_stock_days(embedded, 2, seed=5, window=(dt.date(2021, 3, 6), dt.date(2021, 3, 7)))


def test_sample_is_the_papers_design_and_deterministic(embedded: pl.DataFrame) -> None:
    days = sample_stock_days(embedded, 100, seed=11)
    assert days == sample_stock_days(embedded, 100, seed=11)
    assert days != sample_stock_days(embedded, 100, seed=12)
    assert len(days) == 100
    dates = [d.date for d in days]
    assert len(set(dates)) == 50
    for date in set(dates):
        assets = [d.asset for d in days if d.date == date]
        assert len(assets) == 2 and assets[0] != assets[1]
    assert dates == sorted(dates)


def test_stock_day_contents_match_the_table(embedded: pl.DataFrame) -> None:
    for sd in sample_stock_days(embedded, 6, seed=3):
        rows = embedded.filter(pl.col("asset") == sd.asset).sort("date")
        dates = rows["date"].to_list()
        i = dates.index(sd.date)
        assert i >= 59 and len(dates) - 1 - i >= 5
        hist = np.array(rows["ret"].to_list()[i - 59 : i + 1])
        assert sd.history_dates == tuple(dates[i - 59 : i + 1])
        assert sd.history_dates[-1] == sd.date  # the anchor day's return is known at close
        assert sd.scale == pytest.approx(float(np.std(hist, ddof=1)), rel=1e-12)
        np.testing.assert_allclose(np.array(sd.history_z) * sd.scale, hist, rtol=1e-12)
        assert np.std(sd.history_z, ddof=1) == pytest.approx(1.0)
        future = np.array(rows["ret"].to_list()[i + 1 : i + 5])
        np.testing.assert_allclose(np.array(sd.future_z) * sd.scale, future, rtol=1e-12)
        assert sd.future_dates == tuple(dates[i + 1 : i + 5])
        assert sd.name and sd.ticker == sd.asset
        assert sd.id == f"{sd.date.isoformat()}:{sd.asset}"


def test_the_two_stocks_of_a_date_share_every_shown_date() -> None:
    """A table with a return missing here and there (a loader refuses missing values, so a
    user drops such rows): for a design asking pairs, a draw with a pair whose 60 prior
    dates differ is drawn again among stocks whose 60 prior and kept later dates are the
    same (here it is: its legacy draw has such a pair). One stock's gap in a
    drawn pair's window stopped the whole plan (`plan`: "the two assets' 60 prior dates
    differ"; `run`: a traceback). A design asking no pairs draws as every earlier build did
    (scoring draws the sample again from the seed: a folder planned then must score)."""
    full = _synthetic(130, ("X", "Y", "Z"), seed=3)
    dates = sorted(full["date"].unique().to_list())
    gap = dates[70]  # inside the window of every anchor date from index 66 to 129
    table = full.filter(~((pl.col("asset") == "Y") & (pl.col("date") == gap)))
    legacy = sample_stock_days(table, 60, seed=1, pool_size=1_000)
    drawn_pairs = zip(legacy[::2], legacy[1::2], strict=True)
    assert any(a.history_dates != b.history_dates for a, b in drawn_pairs)  # as drawn before
    days = sample_stock_days(table, 60, seed=1, pool_size=1_000, pairs=True)
    for a, b in zip(days[::2], days[1::2], strict=True):
        assert a.date == b.date
        assert a.history_dates == b.history_dates and a.future_dates == b.future_dates
    assert {d.asset for d in days if dates[66] <= d.date} == {"X", "Z"}
    for pair in sample_date_pairs(days):
        two_asset_history_block(pair)  # renders: the dates line up
    # Without a gap, asking pairs draws what it always drew.
    assert sample_stock_days(full, 60, seed=1, pool_size=1_000, pairs=True) == (
        sample_stock_days(full, 60, seed=1, pool_size=1_000)
    )
    # Y alone beside X, with the gap: the dates it spans cannot be paired.
    lone = table.filter(pl.col("asset") != "Z")
    drawn = sample_stock_days(lone, 2 * 7, seed=2, pairs=True)
    assert {d.date for d in drawn} <= set(dates[59:66])
    only_gapped = lone.filter(pl.col("date") >= dates[11])  # every anchor date spans the gap
    with pytest.raises(NoStockDay, match="two stocks with the same 60 prior and 5 later"):
        sample_stock_days(only_gapped, 2, seed=0, pairs=True)


def test_a_pair_designs_most_stock_days_count_dates_that_line_up() -> None:
    """"At most 124" was counted from every date; 124 asked for then found no pair to draw."""
    full = _synthetic(130, ("X", "Y"), seed=3)
    dates = sorted(full["date"].unique().to_list())
    table = full.filter(~((pl.col("asset") == "Y") & (pl.col("date") == dates[70])))
    with pytest.raises(TooFewDates) as loose:
        sample_stock_days(table, 140, seed=1)
    with pytest.raises(TooFewDates) as lined_up:
        sample_stock_days(table, 140, seed=1, pairs=True)
    assert lined_up.value.most == 14 < loose.value.most  # anchors 59 to 65 span no gap
    assert "only 7 dates whose two stocks' dates line up qualify" in str(lined_up.value)
    assert "only 65 dates qualify" in str(loose.value)
    assert len(sample_stock_days(table, lined_up.value.most, seed=1, pairs=True)) == 14


def test_a_pair_whose_next_days_differ_has_no_joint_outcome() -> None:
    """Drawn as every earlier build drew it (their 60 prior dates are one), two stocks whose
    next rows are two days: "the same next trading day" of the joint cells compared Y's
    Monday with X's Friday, and their Brier counted it. Coherence does not need outcomes."""
    from panels.arms import ARMS, units_for

    full = _synthetic(80, ("X", "Y"))
    dates = sorted(full["date"].unique().to_list())
    table = full.filter(~((pl.col("asset") == "Y") & (pl.col("date") == dates[70])))
    days = sample_stock_days(table, 2, 0, window=(dates[69], dates[69]), pairs=True)
    assert days[0].history_dates == days[1].history_dates
    assert days[0].future_dates[0] != days[1].future_dates[0]
    for name in ("two-asset", "linked", "dispersed"):
        assert all(ARMS[name].outcomes(u) is None for u in units_for(ARMS[name], days))
    lined_up = sample_stock_days(full, 2, 0, window=(dates[69], dates[69]), pairs=True)
    for name in ("two-asset", "linked"):
        assert all(ARMS[name].outcomes(u) for u in units_for(ARMS[name], lined_up))


def test_eligibility_boundary_60_prior_5_later() -> None:
    # 65 sessions: only the 60th row (index 59) has 60 returns up to it and 5 after it.
    df = _synthetic(65)
    days = sample_stock_days(df, 2, seed=0)
    dates = sorted(df["date"].unique().to_list())
    assert {d.date for d in days} == {dates[59]}
    with pytest.raises(TooFewDates, match="only 1 date qualifies") as info:
        sample_stock_days(df, 4, seed=0)
    assert info.value.most == 2
    with pytest.raises(NoStockDay, match="no stock-day"):
        sample_stock_days(_synthetic(64), 2, seed=0)
    with pytest.raises(NoStockDay, match="no date has two stocks"):  # not "ask for fewer"
        sample_stock_days(_synthetic(65, assets=("X",)), 2, seed=0)
    with pytest.raises(DataError, match="even"):
        sample_stock_days(df, 3, seed=0)


def test_headlines_restrict_the_sample(embedded: pl.DataFrame) -> None:
    dates = sorted(embedded["date"].unique().to_list())[100:110]
    heads = pl.DataFrame(
        {
            "date": [d for d in dates for _ in range(3)],
            "asset": [a for _ in dates for a in ("AAPL", "MSFT", "KO")],
            "headline": [f"{a} news on {d}" for d in dates for a in ("AAPL", "MSFT", "KO")],
        }
    )
    days = sample_stock_days(embedded, 8, seed=5, headlines=heads)
    for sd in days:
        assert sd.date in dates and sd.asset in {"AAPL", "MSFT", "KO"}
        assert sd.headline == f"{sd.asset} news on {sd.date}"


def test_date_pairs_both_orders(embedded: pl.DataFrame) -> None:
    days = sample_stock_days(embedded, 10, seed=2)
    pairs = sample_date_pairs(days)
    assert len(pairs) == 10
    assert len({p.id for p in pairs}) == 10
    for ab, ba in zip(pairs[::2], pairs[1::2], strict=True):
        assert ab.first == ba.second and ab.second == ba.first
        assert ab.cluster == ba.cluster
    assert len(sample_date_pairs(days, both_orders=False)) == 5
    with pytest.raises(DataError):
        sample_date_pairs(days[:3])


def test_stock_day_rejects_flat_history() -> None:
    df = _synthetic(70).with_columns(pl.lit(0.0).alias("ret"))
    date = sorted(df["date"].unique().to_list())[60]
    with pytest.raises(DataError, match="spread"):
        stock_day(df, "X", date)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31), half=st.integers(1, 6))
def test_any_seed_gives_a_valid_paper_sample(seed: int, half: int) -> None:
    df = _embedded_cached()
    days = sample_stock_days(df, 2 * half, seed)
    assert len({d.date for d in days}) == half
    assert len({d.id for d in days}) == 2 * half
    for sd in days:
        assert len(sd.history_z) == 60 and len(sd.future_z) == 4
        assert sd.history_dates[-1] == sd.date < sd.future_dates[0]


_CACHE: dict[str, pl.DataFrame] = {}


def _embedded_cached() -> pl.DataFrame:
    if "df" not in _CACHE:
        _CACHE["df"] = load_returns()
    return _CACHE["df"]


def test_build_script_transformation() -> None:
    """The embedded file's recipe: simple returns per ticker, from FIRST_DATE, with names."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "build_embedded_returns.py"
    spec = importlib.util.spec_from_file_location("build_embedded_returns", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    first = script.FIRST_DATE
    dates = [first - dt.timedelta(days=1), first, first + dt.timedelta(days=1)]
    prices = pl.DataFrame({"Date": dates, "AAPL": [100.0, 110.0, 99.0], "KO": [50.0, 50.0, 51.0]})
    out = script.to_returns(prices)
    assert out.columns == ["date", "asset", "ret", "name", "ticker"]
    assert out["date"].to_list() == [first, dates[2], first, dates[2]]
    np.testing.assert_allclose(out["ret"].to_numpy(), [0.1, -0.1, 0.0, 0.02], atol=1e-12)
    assert out["name"].to_list()[0] == "Apple Inc." and out["ticker"].to_list()[2] == "KO"
    with pytest.raises(SystemExit, match="no company name"):
        script.to_returns(prices.rename({"KO": "ZZZZ"}))
