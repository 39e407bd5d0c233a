"""The campaign report: a leaderboard in the terminal and the same numbers on disk.

Statistics follow the paper: the LP value is averaged over passes per unit, then over units,
with a 95% percentile bootstrap clustered on date; arms are compared with the baseline as
paired differences; models' profit and Brier ranks are compared by Spearman correlation.
Families follow the benchmark: arbitrage-free rate (share of families where the L1 bookie
locks in at most 5 cents) and no score at all under the coverage floor.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
from rich.console import Console
from rich.table import Table

from scoring import stats

ARBITRAGE_FREE_CENTS = 0.05
BASELINE_ARM = "baseline"


@dataclass(frozen=True)
class ArmRow:
    model: str
    arm: str
    units: int
    profit: float
    lo: float
    hi: float
    brier: float | None
    coverage: float
    scored: bool
    arbitrage_free: float | None
    vs_baseline: tuple[float, float, float] | None


def per_unit(scores: pl.DataFrame) -> pl.DataFrame:
    """Average the LP value over passes for each unit (the paper's statistic), native norm only."""
    native = scores.filter(
        pl.when(pl.col("arm").str.starts_with("families/"))
        .then(pl.col("norm") == "l1")
        .otherwise(pl.col("norm") == "inf")
    )
    return native.group_by(["model", "arm", "unit", "set", "cluster"], maintain_order=True).agg(
        pl.col("profit").drop_nans().mean().alias("profit"),
        pl.col("brier").mean().alias("brier"),
        pl.col("coverage").mean().alias("coverage"),
    )


def model_coverage(run_dir: Path) -> dict[str, float]:
    """Share of each model's planned queries with an accepted answer."""
    plan = run_dir / "plan.parquet"
    if not plan.exists():
        return {}
    from engine.ledger import scan_responses

    planned = pl.scan_parquet(plan).group_by("model").agg(pl.len().alias("planned")).collect()
    accepted = scan_responses(run_dir).group_by("model").agg(pl.len().alias("accepted")).collect()
    joined = planned.join(accepted, on="model", how="left").fill_null(0)
    return {
        m: (a / p if p else 0.0)
        for m, p, a in joined.select("model", "planned", "accepted").iter_rows()
    }


def build_rows(
    scores: pl.DataFrame, coverage: dict[str, float], floor: float, seed: int, reps: int
) -> list[ArmRow]:
    units = per_unit(scores)
    rows: list[ArmRow] = []
    for (model, arm), group in units.group_by(["model", "arm"], maintain_order=True):
        group = group.filter(pl.col("profit").is_not_null() & pl.col("profit").is_not_nan())
        cov = (
            coverage.get(str(model), float(group["coverage"].fill_null(0.0).mean() or 0.0))  # type: ignore[arg-type]
            if group.height
            else 0.0
        )
        scored = cov >= floor and group.height > 0
        if group.height == 0:
            rows.append(
                ArmRow(
                    str(model),
                    str(arm),
                    0,
                    math.nan,
                    math.nan,
                    math.nan,
                    None,
                    cov,
                    False,
                    None,
                    None,
                )
            )
            continue
        values = group["profit"].to_numpy()
        clusters = group["cluster"].to_numpy()
        mean, lo, hi = stats.cluster_bootstrap_mean(values, clusters, reps=reps, seed=seed)
        briers = group["brier"].drop_nulls()
        af = (
            float((values <= ARBITRAGE_FREE_CENTS).mean())
            if str(arm).startswith("families/")
            else None
        )
        rows.append(
            ArmRow(
                model=str(model),
                arm=str(arm),
                units=group.height,
                profit=float(mean),
                lo=float(lo),
                hi=float(hi),
                brier=float(briers.mean()) if briers.len() else None,  # type: ignore[arg-type]
                coverage=cov,
                scored=scored,
                arbitrage_free=af,
                vs_baseline=_vs_baseline(units, str(model), str(arm), reps, seed),
            )
        )
    return rows


def _vs_baseline(
    units: pl.DataFrame, model: str, arm: str, reps: int, seed: int
) -> tuple[float, float, float] | None:
    if arm == BASELINE_ARM or arm.startswith("families/"):
        return None
    mine = units.filter(
        (pl.col("model") == model) & (pl.col("arm") == arm) & (pl.col("set") == "h1")
    )
    base = units.filter((pl.col("model") == model) & (pl.col("arm") == BASELINE_ARM))
    if mine.height == 0 or base.height == 0:
        return None
    paired = mine.join(base, on=["unit", "cluster"], suffix="_base").drop_nulls(
        ["profit", "profit_base"]
    )
    if paired.height == 0:
        return None
    diff = (paired["profit"] - paired["profit_base"]).to_numpy()
    mean, lo, hi = stats.cluster_bootstrap_mean(
        diff, paired["cluster"].to_numpy(), reps=reps, seed=seed
    )
    return float(mean), float(lo), float(hi)


def model_correlation(rows: list[ArmRow]) -> float | None:
    """Spearman correlation of models' mean profit and mean Brier on the baseline arm."""
    base = [r for r in rows if r.arm == BASELINE_ARM and r.scored and r.brier is not None]
    if len(base) < 3:
        return None
    return float(
        stats.spearman(np.array([r.profit for r in base]), np.array([r.brier for r in base]))
    )


def write_report(
    run_dir: Path,
    scores: pl.DataFrame,
    *,
    floor: float,
    seed: int,
    reps: int = 20_000,
    console: Console | None = None,
) -> dict[str, Any]:
    rows = build_rows(scores, model_coverage(run_dir), floor, seed, reps)
    summary = {
        "rows": [r.__dict__ for r in rows],
        "spearman_profit_brier": model_correlation(rows),
        "coverage_floor": floor,
        "bootstrap_replicates": reps,
    }
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    (out / "summary.json").write_bytes(
        orjson.dumps(
            summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY, default=_nan_safe
        )
    )
    (out / "leaderboard.txt").write_text(_render_plain(leaderboard(rows)), encoding="utf-8")
    (console or Console()).print(compact_leaderboard(rows))
    (console or Console()).print(
        f"details with 95% date-clustered intervals: {out / 'leaderboard.txt'}"
    )
    if summary["spearman_profit_brier"] is not None:
        (console or Console()).print(
            f"Spearman(profit, Brier) across models: {summary['spearman_profit_brier']:.4f}"
        )
    return summary


def _nan_safe(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


def _fmt(x: float | None, digits: int = 5) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def leaderboard(rows: list[ArmRow]) -> Table:
    table = Table(title="Arbitrage profit per unit stake (lower is more coherent)")
    for col in (
        "model",
        "arm",
        "units",
        "profit",
        "95% CI (date-clustered)",
        "vs baseline",
        "Brier",
        "arb-free",
        "coverage",
    ):
        table.add_column(col, justify="left" if col in {"model", "arm"} else "right")
    for r in sorted(
        rows, key=lambda r: (r.arm, not r.scored, r.profit if not math.isnan(r.profit) else 1e9)
    ):
        if not r.scored:
            profit, ci = "not scored", f"coverage {r.coverage:.0%} < floor"
        else:
            profit, ci = _fmt(r.profit), f"[{_fmt(r.lo)}, {_fmt(r.hi)}]"
        vs = (
            f"{r.vs_baseline[0]:+.5f} [{r.vs_baseline[1]:+.5f}, {r.vs_baseline[2]:+.5f}]"
            if r.vs_baseline
            else ""
        )
        af = f"{r.arbitrage_free:.0%}" if r.arbitrage_free is not None else ""
        table.add_row(
            r.model, r.arm, str(r.units), profit, ci, vs, _fmt(r.brier, 4), af, f"{r.coverage:.0%}"
        )
    return table


def compact_leaderboard(rows: list[ArmRow]) -> Table:
    """Arms down, models across (most coherent on the baseline first): fits a terminal."""
    models = sorted(
        {r.model for r in rows},
        key=lambda m: next(
            (r.profit for r in rows if r.model == m and r.arm == BASELINE_ARM and r.scored), 1e9
        ),
    )
    cell = {(r.model, r.arm): r for r in rows}
    table = Table(
        title="Mean arbitrage profit per unit stake (lower is more coherent)", title_justify="left"
    )
    table.add_column("arm", no_wrap=True)
    for m in models:
        table.add_column(m, justify="right")
    for arm in sorted({r.arm for r in rows}):
        values = []
        for m in models:
            r = cell.get((m, arm))
            values.append("" if r is None else (_fmt(r.profit, 4) if r.scored else "not scored"))
        table.add_row(arm, *values)
        if arm.startswith("families/"):
            table.add_row(
                "  arb-free share",
                *[
                    f"{cell[(m, arm)].arbitrage_free:.0%}"
                    if (m, arm) in cell
                    and cell[(m, arm)].scored
                    and cell[(m, arm)].arbitrage_free is not None
                    else ""
                    for m in models
                ],
            )
    briers = [cell.get((m, BASELINE_ARM)) for m in models]
    if any(r is not None and r.brier is not None for r in briers):
        table.add_row(
            "Brier (baseline)", *[_fmt(r.brier, 4) if r else "" for r in briers], style="dim"
        )
    table.add_row(
        "coverage",
        *[f"{max(r.coverage for r in rows if r.model == m):.0%}" for m in models],
        style="dim",
    )
    return table


def _render_plain(table: Table) -> str:
    console = Console(width=160, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.export_text()
