"""The design decides how the sample is drawn (`runs.units.UnitSource`): a date-pair arm asks
the two stocks of a date together, so their dates must line up (`panels.data`'s `pairs`);
a design without one draws as every earlier build did (scoring draws again from the seed)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from panels.data import load_returns
from runs.spec import load_spec
from runs.units import UnitSource


@pytest.mark.parametrize(
    ("arms", "pairs"),
    [(["baseline"], False), (["baseline", "two-asset"], True), (["linked"], True),
     (["horizon/2", "dispersed"], True)],
)
def test_a_date_pair_arm_asks_for_pairs_that_line_up(
    tmp_path: Path, arms: list[str], pairs: bool
) -> None:
    returns = load_returns()
    dropped = returns["date"].unique().sort().to_list()[100::40]  # a row now and then
    gappy = returns.filter(~((pl.col("asset") == "AAPL") & pl.col("date").is_in(dropped)))
    data = tmp_path / "returns.parquet"
    gappy.write_parquet(data)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'name = "p"\nseed = 3\n[data]\nstock_days = 400\nreturns = "{data.as_posix()}"\n'
        '[[models]]\nname = "m"\nprovider = "sim"\nmodel = "sim-coherent"\n'
        + "".join(f'[[arms]]\nname = "{arm}"\n' for arm in arms),
        encoding="utf-8",
    )
    days = UnitSource.from_spec(load_spec(spec)).stock_days
    misaligned = [a for a, b in zip(days[::2], days[1::2], strict=True)
                  if a.history_dates != b.history_dates]  # fmt: skip
    assert bool(misaligned) is not pairs  # this seed's legacy draw holds such a pair
