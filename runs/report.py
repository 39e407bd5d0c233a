"""The campaign report: a short leaderboard in the terminal, the paper's statistics on disk.

Statistics follow the paper (section 4): the LP value is averaged over passes per unit, then
over units, with a 95% percentile bootstrap clustered on date (stock-days of one date share
news, so whole dates are resampled); arms are compared with the baseline as paired
differences; models are compared on the baseline by the Spearman correlation of their mean
profit and mean Brier and by how many pairwise differences have an interval excluding zero;
repeated elicitation averages each event's answers over the first k passes *before* solving
(Figure 4C). Families follow the benchmark: the arbitrage-free rate (share of families where
the L1 bookie locks in at most 5 cents), and no score at all under the coverage floor, since
a dropped call must never read as incoherence.

`report/summary.json` has a stable shape users can script against (schema
"dutchbook.report/1"; every NaN or missing number is null; an *interval* is
`{"mean", "lo", "hi"}`, a 95% date-clustered percentile bootstrap):

- `schema`, `coverage_floor`, `bootstrap_replicates`, `seed`, `level` (0.95),
  `baseline_arm`, `thresholds` ([0.001, 0.005, 0.01]), `arbitrage_free_cents` (0.05).
- `rows`: one object per (model, arm): `model`, `arm`, `norm` ("inf" paper arms, "l1"
  family arms), `status` ("scored" | "below_coverage_floor" | "no_answers"), `scored`,
  `coverage` (share of the arm's planned queries answered), `units` (scored (unit, set)
  values, each averaged over passes), `clusters` (distinct dates or families), `profit`
  (interval), `brier` (interval or null), `at_least` (`{"0.001": {"units", "share"}, ...}`:
  units whose profit is at least the threshold, the paper's 4.1 counts), `arbitrage_free`
  (family arms: interval over families of the share with profit <= 0.05, else null),
  `vs_baseline` (`{"mean", "lo", "hi", "excludes_zero", "units"}`: paired difference with
  the baseline arm on the same stock-days, set `h1`; null for the baseline, family arms or
  without common units). Unscored rows carry null statistics: never a number.
- `models`: `{model: {"coverage": share of all its planned queries answered}}`.
- `across_models`: on the baseline arm, scored models only: `arm`, `models` (names),
  `units` (units common to all of them, used for the pairwise counts),
  `spearman_profit_brier` (on the models' mean profit and mean Brier), `pairs`,
  `profit_pairs_excluding_zero`, `brier_pairs_excluding_zero` (null when undefined).
- `repeated_elicitation`: null unless `write_report` was given `incidence_for`; else a list,
  one object per scored (model, arm) with at least two passes: `model`, `arm`, `passes`,
  `units`, `single_pass_mean` (mean over units of the mean single-pass profit, the row's
  `profit.mean`), `by_k` (`[{"k", "mean", "lo", "hi"}]`, k = 1..passes: profit after
  averaging each event's answers over the first k passes). By convexity the k = passes value
  is never above `single_pass_mean`.
- `families`: one object per (model, family arm): `model`, `arm`, `families`, `coverage`,
  `status`, `scored`, `arbitrage_free` (interval or null), `rule` (the coverage rule).
- `figures`: `{"profit_brier": path or null, "arms": path or null, "note": str or null}`
  (paths relative to the run folder; a note says why a figure was not drawn).
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from runs.scoring_step import native_norm
from scoring import dutch_books, stats
from scoring.stats import Interval

SCHEMA = "dutchbook.report/1"
ARBITRAGE_FREE_CENTS = 0.05
BASELINE_ARM = "baseline"
FAMILY_ARM_PREFIX = "families/"
THRESHOLDS = (0.001, 0.005, 0.01)
LEVEL = 0.95
COVERAGE_RULE = (
    "a model whose answered share of this arm's planned queries is under the coverage floor "
    "is not scored: an unanswered question is never counted as incoherence"
)

#: `incidence_for(arm, unit, set, events) -> (n_events, n_atoms) 0/1 matrix` of one scoring
#: set, rows in the order of `events` (the scores row's `events` column).
IncidenceFor = Callable[[str, str, str, Sequence[str]], npt.NDArray[Any]]

STATUS_SCORED = "scored"
STATUS_BELOW_FLOOR = "below_coverage_floor"
STATUS_NO_ANSWERS = "no_answers"


@dataclass(frozen=True)
class ArmRow:
    """One (model, arm) cell: its statistics, or why it is not scored."""

    model: str
    arm: str
    norm: str
    units: int
    clusters: int
    coverage: float
    status: str
    profit: Interval | None = None
    brier: Interval | None = None
    at_least: dict[float, int] = field(default_factory=dict)
    arbitrage_free: Interval | None = None
    vs_baseline: Interval | None = None
    vs_baseline_units: int = 0

    @property
    def scored(self) -> bool:
        return self.status == STATUS_SCORED

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "arm": self.arm,
            "norm": self.norm,
            "status": self.status,
            "scored": self.scored,
            "coverage": self.coverage,
            "units": self.units,
            "clusters": self.clusters,
            "profit": _interval_json(self.profit),
            "brier": _interval_json(self.brier),
            "at_least": (
                {
                    _threshold_key(t): {"units": c, "share": c / self.units if self.units else None}
                    for t, c in self.at_least.items()
                }
                if self.scored
                else None
            ),
            "arbitrage_free": _interval_json(self.arbitrage_free),
            "vs_baseline": (
                None
                if self.vs_baseline is None
                else {
                    **_interval_json(self.vs_baseline),  # type: ignore[dict-item]
                    "excludes_zero": self.vs_baseline.excludes_zero(),
                    "units": self.vs_baseline_units,
                }
            ),
        }


# ---------------------------------------------------------------------------------------------
# Per-unit values and coverage


def native_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """Each arm scored in its own metric: sup-norm for the paper's arms, L1 for families."""
    return scores.filter(
        pl.when(pl.col("arm").str.starts_with(FAMILY_ARM_PREFIX))
        .then(pl.col("norm") == "l1")
        .otherwise(pl.col("norm") == "inf")
    )


#: Single-set arms keep their name; for the others each kind of set is its own report row,
#: since a day's marginals, a whole horizon panel or a linked set are not comparable units.
SET_LABEL = (
    pl.when(pl.col("set").is_in(["h1", "family"]))
    .then(pl.col("arm"))
    .when(pl.col("arm").is_in(["linked", "dispersed"]))
    .then(
        pl.col("arm")
        + pl.when(pl.col("set").str.split("/").list.get(1).is_in(["A", "B"]))
        .then(pl.lit(" (assets)"))
        .otherwise(pl.lit(" (days)"))
    )
    .otherwise(pl.col("arm") + pl.lit(" ") + pl.col("set"))
)


def arm_of_label(label: str) -> str:
    """The catalogue arm behind a report row label ("horizon/2 full" -> "horizon/2")."""
    return label.split(" ", 1)[0]


def per_unit(scores: pl.DataFrame) -> pl.DataFrame:
    """Average the LP value over passes (and over the sets of one row label) for each unit.

    The `arm` column of the result is the report row label (see `SET_LABEL`).
    """
    return (
        native_scores(scores)
        .with_columns(SET_LABEL.alias("arm"))
        .group_by(["model", "arm", "unit", "cluster"], maintain_order=True)
        .agg(
            pl.col("profit").drop_nans().mean().alias("profit"),
            pl.col("brier").drop_nans().mean().alias("brier"),
            pl.col("coverage").mean().alias("coverage"),
        )
    )


def ledger_coverage(run_dir: Path) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Share of planned queries with an accepted answer, per model and per (model, arm).

    Read from `plan_members.parquet` (each arm's view of a query) and the accepted responses;
    empty when the run folder has no plan (then the scores' own coverage is used).
    """
    members_path = run_dir / "plan_members.parquet"
    if not members_path.exists():
        return {}, {}
    from engine.ledger import scan_responses

    accepted = (
        scan_responses(run_dir, columns=["request_id"])
        .unique("request_id")
        .with_columns(pl.lit(1).alias("accepted"))
    )
    joined = (
        pl.scan_parquet(members_path)
        .select("request_id", "model", "arm")
        .join(accepted, on="request_id", how="left")
        .with_columns(pl.col("accepted").fill_null(0))
        .collect()
    )
    by_model = joined.group_by("model").agg(pl.col("accepted").mean())
    by_arm = joined.group_by("model", "arm").agg(pl.col("accepted").mean())
    return (
        {str(m): float(a) for m, a in by_model.iter_rows()},
        {(str(m), str(arm)): float(a) for m, arm, a in by_arm.iter_rows()},
    )


# ---------------------------------------------------------------------------------------------
# Rows: per model and arm


def build_rows(
    scores: pl.DataFrame,
    arm_coverage: dict[tuple[str, str], float],
    floor: float,
    seed: int,
    reps: int,
) -> list[ArmRow]:
    units = per_unit(scores)
    rows: list[ArmRow] = []
    for (model, arm), group in units.group_by(["model", "arm"], maintain_order=True):
        model, arm = str(model), str(arm)
        norm = native_norm(arm)
        cov = arm_coverage.get((model, arm_of_label(arm)))
        if cov is None:
            cov = float(group["coverage"].fill_null(0.0).mean() or 0.0)  # type: ignore[arg-type]
        group = group.filter(pl.col("profit").is_not_null() & pl.col("profit").is_not_nan())
        if group.height == 0:
            rows.append(ArmRow(model, arm, norm, 0, 0, cov, STATUS_NO_ANSWERS))
            continue
        n_clusters = group["cluster"].n_unique()
        if cov < floor:
            rows.append(ArmRow(model, arm, norm, group.height, n_clusters, cov, STATUS_BELOW_FLOOR))
            continue
        values = group["profit"].to_numpy()
        clusters = group["cluster"].to_numpy()
        profit = stats.cluster_bootstrap_mean(values, clusters, reps=reps, seed=seed, level=LEVEL)
        briers = group["brier"].fill_null(np.nan).to_numpy()
        brier = (
            stats.cluster_bootstrap_mean(briers, clusters, reps=reps, seed=seed, level=LEVEL)
            if np.isfinite(briers).any()
            else None
        )
        free = (
            stats.cluster_bootstrap_mean(
                (values <= ARBITRAGE_FREE_CENTS).astype(float),
                clusters,
                reps=reps,
                seed=seed,
                level=LEVEL,
            )
            if arm.startswith(FAMILY_ARM_PREFIX)
            else None
        )
        vs, vs_units = _vs_baseline(units, model, arm, reps, seed)
        rows.append(
            ArmRow(
                model=model,
                arm=arm,
                norm=norm,
                units=group.height,
                clusters=n_clusters,
                coverage=cov,
                status=STATUS_SCORED,
                profit=profit,
                brier=brier,
                at_least={t: int((values >= t).sum()) for t in THRESHOLDS},
                arbitrage_free=free,
                vs_baseline=vs,
                vs_baseline_units=vs_units,
            )
        )
    return rows


def _vs_baseline(
    units: pl.DataFrame, model: str, arm: str, reps: int, seed: int
) -> tuple[Interval | None, int]:
    """Paired difference (arm - baseline) on the same stock-days' one-day panel."""
    if arm == BASELINE_ARM or arm.startswith(FAMILY_ARM_PREFIX):
        return None, 0
    # Rows of single-set arms keep the arm's name (their set is the one-day panel, h1).
    mine = units.filter((pl.col("model") == model) & (pl.col("arm") == arm))
    base = units.filter((pl.col("model") == model) & (pl.col("arm") == BASELINE_ARM))
    if mine.height == 0 or base.height == 0:
        return None, 0
    paired = mine.join(base, on=["unit", "cluster"], suffix="_base").filter(
        pl.col("profit").is_not_nan() & pl.col("profit_base").is_not_nan()
    )
    paired = paired.drop_nulls(["profit", "profit_base"])
    if paired.height == 0:
        return None, 0
    interval = stats.paired_difference(
        paired["profit"].to_numpy(),
        paired["profit_base"].to_numpy(),
        paired["cluster"].to_numpy(),
        reps=reps,
        seed=seed,
        level=LEVEL,
    )
    return interval, paired.height


# ---------------------------------------------------------------------------------------------
# Across models on the baseline arm


def across_models(
    scores: pl.DataFrame, rows: Sequence[ArmRow], seed: int, reps: int
) -> dict[str, Any]:
    """Spearman(profit, Brier) across models and the pairwise-significance counts (4.2).

    Only scored models enter. The counts pair models on the baseline units every one of them
    answered (and, for Brier, has an outcome for), so each difference is a paired one.
    """
    base = sorted(
        (r for r in rows if r.arm == BASELINE_ARM and r.scored and r.profit is not None),
        key=lambda r: r.model,
    )
    models = [r.model for r in base]
    result: dict[str, Any] = {
        "arm": BASELINE_ARM,
        "models": models,
        "units": 0,
        "spearman_profit_brier": None,
        "pairs": len(models) * (len(models) - 1) // 2,
        "profit_pairs_excluding_zero": None,
        "brier_pairs_excluding_zero": None,
    }
    with_brier = [r for r in base if r.brier is not None and r.profit is not None]
    if len(with_brier) >= 3:
        rho = stats.spearman(
            np.array([r.profit.mean for r in with_brier if r.profit is not None]),
            np.array([r.brier.mean for r in with_brier if r.brier is not None]),
        )
        result["spearman_profit_brier"] = None if math.isnan(rho) else rho
    if len(models) < 2:
        return result
    units = per_unit(scores).filter((pl.col("arm") == BASELINE_ARM) & pl.col("model").is_in(models))
    for metric in ("profit", "brier"):
        wide = _aligned(units, models, metric)
        if metric == "profit":
            result["units"] = wide.height
        if wide.height == 0:
            continue
        count = stats.count_pairwise_significant(
            {m: wide[m].to_numpy() for m in models},
            wide["cluster"].to_numpy(),
            reps=reps,
            seed=seed,
            level=LEVEL,
        )
        result[f"{metric}_pairs_excluding_zero"] = count
    return result


def _aligned(units: pl.DataFrame, models: Sequence[str], metric: str) -> pl.DataFrame:
    """One column per model, one row per unit that every model has a finite value for."""
    finite = units.filter(pl.col(metric).is_not_null() & pl.col(metric).is_not_nan())
    wide = finite.pivot(on="model", index=["unit", "cluster"], values=metric)
    if any(m not in wide.columns for m in models):
        return wide.clear()
    return wide.drop_nulls(list(models))


# ---------------------------------------------------------------------------------------------
# Repeated elicitation: average answers over the first k passes, then solve


def repeated_elicitation(
    scores: pl.DataFrame,
    forecasts: pl.DataFrame,
    incidence_for: IncidenceFor,
    rows: Sequence[ArmRow],
    seed: int,
    reps: int,
) -> list[dict[str, Any]]:
    """Profit of the k-pass average forecast, k = 1..passes, for scored multi-pass arms.

    Each event's answers are averaged over the passes that answered it (an event no pass
    answered stays unanswered). All LPs sharing an incidence matrix are solved in one batch.
    """
    scored = {(r.model, r.arm): r for r in rows if r.scored and r.profit is not None}
    native = native_scores(scores)
    answers: dict[tuple[str, str, str, int], dict[str, float]] = defaultdict(dict)
    for model, arm, unit, pass_, event, p in forecasts.select(
        "model", "arm", "unit", "pass", "event", "p"
    ).iter_rows():
        answers[(model, arm, unit, int(pass_))][event] = p
    batches: dict[tuple[str, tuple[int, ...], bytes], tuple[npt.NDArray[Any], list[Any]]] = {}
    plans: list[dict[str, Any]] = []
    for (model, arm), group in native.group_by(["model", "arm"], maintain_order=True):
        model, arm = str(model), str(arm)
        passes = sorted(int(p) for p in group["pass"].unique())
        if (model, arm) not in scored or len(passes) < 2:
            continue
        sets = group.unique(["unit", "set"], keep="first", maintain_order=True)
        plan: dict[str, Any] = {
            "model": model,
            "arm": arm,
            "norm": native_norm(arm),
            "passes": len(passes),
            "clusters": [],
            "profits": [],
        }
        for unit, set_name, cluster, events in sets.select(
            "unit", "set", "cluster", "events"
        ).iter_rows():
            ids = list(events)
            matrix = np.array(
                [
                    [answers.get((model, arm, unit, p), {}).get(e, np.nan) for e in ids]
                    for p in passes
                ],
                dtype=float,
            )
            if not np.isfinite(matrix).any():
                continue
            incidence = np.ascontiguousarray(
                incidence_for(arm, unit, set_name, ids), dtype=np.uint8
            )
            answered = np.isfinite(matrix)
            sums = np.cumsum(np.where(answered, matrix, 0.0), axis=0)
            counts = np.cumsum(answered, axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                averaged = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            key = (plan["norm"], incidence.shape, incidence.tobytes())
            batch = batches.setdefault(key, (incidence, []))
            slot = np.full(len(passes), np.nan)
            plan["profits"].append(slot)
            plan["clusters"].append(cluster)
            batch[1].append((averaged, slot))
        plans.append(plan)
    for (norm, _, _), (incidence, items) in batches.items():
        result = dutch_books(incidence, np.vstack([a for a, _ in items]), norm=norm)
        offset = 0
        for averaged, slot in items:
            slot[:] = result.profit[offset : offset + averaged.shape[0]]
            offset += averaged.shape[0]
    out: list[dict[str, Any]] = []
    for plan in plans:
        if not plan["profits"]:
            continue
        profits = np.vstack(plan["profits"])
        clusters = np.array(plan["clusters"])
        by_k: list[dict[str, Any]] = []
        for k in range(plan["passes"]):
            column = profits[:, k]
            if np.isfinite(column).any():
                iv = stats.cluster_bootstrap_mean(
                    column, clusters, reps=reps, seed=seed, level=LEVEL
                )
                by_k.append({"k": k + 1, "mean": iv.mean, "lo": iv.lo, "hi": iv.hi})
            else:
                by_k.append({"k": k + 1, "mean": None, "lo": None, "hi": None})
        row = scored[(plan["model"], plan["arm"])]
        out.append(
            {
                "model": plan["model"],
                "arm": plan["arm"],
                "passes": plan["passes"],
                "units": int(profits.shape[0]),
                "single_pass_mean": row.profit.mean if row.profit else None,
                "by_k": by_k,
            }
        )
    return out


def incidence_from_units(units: Any) -> IncidenceFor:
    """An `incidence_for` callback over a campaign's `runs.units.UnitSource`.

    The pipeline passes `incidence_for=incidence_from_units(units)` to `write_report` so the
    repeated-elicitation section can re-solve averaged forecasts; panels are built on demand
    (only for multi-pass arms) and cached per scoring set.
    """
    from panels.arms import ARMS

    by_id: dict[str, dict[str, Any]] = {}
    cache: dict[tuple[str, str, str, tuple[str, ...]], npt.NDArray[Any]] = {}

    def incidence_for(arm: str, unit: str, set_name: str, events: Sequence[str]) -> Any:
        key = (arm, unit, set_name, tuple(events))
        if key not in cache:
            spec_arm = ARMS[arm]
            if arm not in by_id:
                by_id[arm] = {u.id: u for u in units.for_arm(spec_arm, check=False)}
            panel = spec_arm.panel(by_id[arm][unit]).subset(list(events))
            cache[key] = np.asarray(panel.incidence, dtype=np.uint8)
        return cache[key]

    return incidence_for


# ---------------------------------------------------------------------------------------------
# Families


def family_section(rows: Sequence[ArmRow]) -> list[dict[str, Any]]:
    """The benchmark's leaderboard: arbitrage-free rate, or 'not scored' under the floor."""
    return [
        {
            "model": r.model,
            "arm": r.arm,
            "families": r.units,
            "coverage": r.coverage,
            "status": r.status,
            "scored": r.scored,
            "arbitrage_free": _interval_json(r.arbitrage_free),
            "rule": COVERAGE_RULE,
        }
        for r in rows
        if r.arm.startswith(FAMILY_ARM_PREFIX)
    ]


# ---------------------------------------------------------------------------------------------
# Writing


def write_report(
    run_dir: Path,
    scores: pl.DataFrame,
    *,
    floor: float,
    seed: int,
    reps: int = stats.DEFAULT_REPS,
    console: Console | None = None,
    forecasts: pl.DataFrame | None = None,
    incidence_for: IncidenceFor | None = None,
    figures: bool = True,
) -> dict[str, Any]:
    """Write `report/summary.json`, `report/leaderboard.txt` and the figures; print a summary.

    `incidence_for` (see `IncidenceFor`, or `incidence_from_units`) enables the repeated-
    elicitation section; `forecasts` defaults to the run folder's `forecasts.parquet`.
    Returns the summary as written (NaN as None).
    """
    console = console or Console()
    model_cov, arm_cov = ledger_coverage(run_dir)
    rows = build_rows(scores, arm_cov, floor, seed, reps)
    if not model_cov:
        model_cov = {
            str(m): float(c if c is not None else 0.0)
            for m, c in per_unit(scores)
            .group_by("model")
            .agg(pl.col("coverage").mean())
            .iter_rows()
        }
    repeated: list[dict[str, Any]] | None = None
    if incidence_for is not None:
        if forecasts is None and (run_dir / "forecasts.parquet").exists():
            forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
        if forecasts is not None:
            repeated = repeated_elicitation(scores, forecasts, incidence_for, rows, seed, reps)
    summary: dict[str, Any] = {
        "schema": SCHEMA,
        "coverage_floor": floor,
        "bootstrap_replicates": reps,
        "seed": seed,
        "level": LEVEL,
        "baseline_arm": BASELINE_ARM,
        "thresholds": list(THRESHOLDS),
        "arbitrage_free_cents": ARBITRAGE_FREE_CENTS,
        "rows": [r.to_json() for r in rows],
        "models": {m: {"coverage": c} for m, c in sorted(model_cov.items())},
        "across_models": across_models(scores, rows, seed, reps),
        "repeated_elicitation": repeated,
        "families": family_section(rows),
        "figures": {"profit_brier": None, "arms": None, "note": None},
    }
    out = run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    if figures:
        from runs.figures import write_figures

        drawn = write_figures(summary, out)
        summary["figures"] = {
            k: (str(Path(v).relative_to(run_dir)) if k != "note" and v else v)
            for k, v in drawn.items()
        }
    summary = _clean(summary)
    (out / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    (out / "leaderboard.txt").write_text(details_text(rows, summary), encoding="utf-8")
    for table in terminal_leaderboard(rows, model_cov, console.width):
        console.print(table)
    for line in headline_lines(summary, out):
        console.print(line, highlight=False)
    return summary


def _clean(obj: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN and infinities to None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _interval_json(iv: Interval | None) -> dict[str, float] | None:
    if iv is None:
        return None
    return {"mean": float(iv.mean), "lo": float(iv.lo), "hi": float(iv.hi)}


def _threshold_key(t: float) -> str:
    return f"{t:g}"


def _fmt(x: float | None, digits: int = 5) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def _fmt_iv(iv: Interval | None, digits: int = 5) -> str:
    if iv is None:
        return ""
    return f"{_fmt(iv.mean, digits)} [{_fmt(iv.lo, digits)}, {_fmt(iv.hi, digits)}]"


def headline_lines(summary: dict[str, Any], out: Path) -> list[str]:
    """Two or three lines under the table: the cross-model statistics and where the rest is."""
    lines: list[str] = []
    across = summary["across_models"]
    if len(across["models"]) >= 2:
        parts = [f"{BASELINE_ARM}, {len(across['models'])} models"]
        if across["spearman_profit_brier"] is not None:
            parts.append(f"Spearman(profit, Brier) {across['spearman_profit_brier']:.3f}")
        if across["profit_pairs_excluding_zero"] is not None:
            brier = across["brier_pairs_excluding_zero"]
            parts.append(
                f"pairs whose 95% interval excludes zero: profit "
                f"{across['profit_pairs_excluding_zero']}/{across['pairs']}"
                + (f", Brier {brier}/{across['pairs']}" if brier is not None else "")
            )
        lines.append("; ".join(parts))
    repeated = summary.get("repeated_elicitation") or []
    if repeated:
        lower = sum(
            1
            for r in repeated
            if r["by_k"][-1]["mean"] is not None
            and r["single_pass_mean"] is not None
            and r["by_k"][-1]["mean"] < r["single_pass_mean"] - 1e-12
        )
        lines.append(
            f"averaging answers over passes before scoring lowers mean profit in {lower} of "
            f"{len(repeated)} multi-pass cells (never raises it)"
        )
    note = summary["figures"].get("note")
    lines.append(
        f"95% date-clustered intervals and more: {out / 'leaderboard.txt'}, "
        f"{out / 'summary.json'}" + (f" ({note})" if note else "")
    )
    return lines


def leaderboard(rows: Sequence[ArmRow]) -> Table:
    table = Table(title="Arbitrage profit per unit stake (lower is more coherent)")
    columns = (
        "model",
        "arm",
        "units",
        "profit [95% CI, date-clustered]",
        *(f"≥{t:g}" for t in THRESHOLDS),
        "vs baseline [95% CI]",
        "Brier [95% CI]",
        "arb-free [95% CI]",
        "coverage",
    )
    for col in columns:
        table.add_column(col, justify="left" if col in {"model", "arm"} else "right")
    for r in sorted(rows, key=lambda r: (r.arm, not r.scored, r.profit.mean if r.profit else 1e9)):
        if not r.scored:
            reason = (
                f"not scored: coverage {r.coverage:.0%} < floor"
                if r.status == STATUS_BELOW_FLOOR
                else "not scored: no answers"
            )
            table.add_row(
                Text(r.model),
                r.arm,
                str(r.units),
                reason,
                *[""] * (len(columns) - 5),
                f"{r.coverage:.0%}",
            )
            continue
        shares = [f"{r.at_least[t] / r.units:.0%}" if r.units else "" for t in THRESHOLDS]
        vs = (
            f"{r.vs_baseline.mean:+.5f} [{r.vs_baseline.lo:+.5f}, {r.vs_baseline.hi:+.5f}]"
            if r.vs_baseline
            else ""
        )
        table.add_row(
            Text(r.model),
            r.arm,
            str(r.units),
            _fmt_iv(r.profit),
            *shares,
            vs,
            _fmt_iv(r.brier, 4),
            _fmt_iv(r.arbitrage_free, 2),
            f"{r.coverage:.0%}",
        )
    return table


def details_text(rows: Sequence[ArmRow], summary: dict[str, Any]) -> str:
    """The full leaderboard plus the cross-model and repeated-elicitation sections, as text."""
    parts = [_render_plain(leaderboard(rows))]
    across = summary["across_models"]
    parts.append(
        f"Across models on {across['arm']} ({len(across['models'])} scored, "
        f"{across['units']} common units): Spearman(profit, Brier) = "
        f"{_fmt(across['spearman_profit_brier'], 4)}; pairwise differences whose 95% interval "
        f"excludes zero: profit {across['profit_pairs_excluding_zero']} of {across['pairs']}, "
        f"Brier {across['brier_pairs_excluding_zero']} of {across['pairs']}\n"
    )
    repeated = summary.get("repeated_elicitation")
    if repeated is None:
        parts.append("Repeated elicitation: not computed (no incidence given to the report)\n")
    elif repeated:
        table = Table(title="Profit after averaging answers over the first k passes")
        table.add_column("model")
        table.add_column("arm")
        table.add_column("mean of single passes", justify="right")
        k_max = max(r["passes"] for r in repeated)
        for k in range(1, k_max + 1):
            table.add_column(f"k={k}", justify="right")
        for r in repeated:
            cells = [f"{_fmt(b['mean'])} [{_fmt(b['lo'])}, {_fmt(b['hi'])}]" for b in r["by_k"]]
            table.add_row(
                Text(r["model"]),
                r["arm"],
                _fmt(r["single_pass_mean"]),
                *cells,
                *[""] * (k_max - len(cells)),
            )
        parts.append(_render_plain(table))
    return "\n".join(parts)


def _columns_that_fit(rows: Sequence[ArmRow], models: Sequence[str], width: int) -> int:
    """How many model columns fit beside the arm column (rich adds 3 characters a column)."""
    arm_width = max([len(r.arm) for r in rows] + [len("Brier (baseline)")]) + 3
    model_width = max([len(m) for m in models] + [len("not scored")]) + 3
    return max((width - 1 - arm_width) // model_width, 1)


def terminal_leaderboard(
    rows: Sequence[ArmRow], model_coverage: dict[str, float], width: int
) -> list[Table]:
    """What fits the terminal, never cut: every arm by every model when the models fit side by
    side; otherwise the models ranked on the baseline, then the arms of the models that ran
    several (a paper-style workhorse), in as many tables as it takes."""
    models = _ranked_models(rows)
    fits = _columns_that_fit(rows, models, width)
    if len(models) <= fits:
        return [compact_leaderboard(rows, model_coverage)]
    tables = [model_ranking(rows, model_coverage)]
    arms_per_model: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        arms_per_model[r.model].add(r.arm)
    busy = [m for m in models if len(arms_per_model[m]) > 1]
    for start in range(0, len(busy), fits):
        chunk = set(busy[start : start + fits])
        tables.append(compact_leaderboard([r for r in rows if r.model in chunk], model_coverage))
    return tables


def _ranked_models(rows: Sequence[ArmRow]) -> list[str]:
    cell = {(r.model, r.arm): r for r in rows}

    def baseline_profit(m: str) -> float:
        r = cell.get((m, BASELINE_ARM))
        return r.profit.mean if r is not None and r.profit is not None else 1e9

    return sorted({r.model for r in rows}, key=lambda m: (baseline_profit(m), m))


def model_ranking(rows: Sequence[ArmRow], model_coverage: dict[str, float]) -> Table:
    """Models down, ranked by mean profit on the baseline arm (the paper's Figure 2)."""
    cell = {(r.model, r.arm): r for r in rows}
    table = Table(
        title="Baseline arm: models ranked by mean arbitrage profit (lower is more coherent)",
        title_justify="left",
    )
    for col in ("model", "profit", "95% CI", "Brier", "coverage"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for m in _ranked_models(rows):
        r = cell.get((m, BASELINE_ARM))
        if r is None:
            continue
        table.add_row(
            Text(m),
            _fmt(r.profit.mean, 5) if r.profit else "not scored",
            f"[{_fmt(r.profit.lo, 5)}, {_fmt(r.profit.hi, 5)}]" if r.profit else "",
            _fmt(r.brier.mean, 4) if r.brier else "",
            f"{model_coverage[m]:.0%}" if m in model_coverage else "",
        )
    return table


def compact_leaderboard(rows: Sequence[ArmRow], model_coverage: dict[str, float]) -> Table:
    """Arms down, models across (most coherent on the baseline first)."""
    cell = {(r.model, r.arm): r for r in rows}
    models = _ranked_models(rows)
    table = Table(
        title="Mean arbitrage profit per unit stake (lower is more coherent)", title_justify="left"
    )
    table.add_column("arm", no_wrap=True)
    for m in models:
        table.add_column(Text(m), justify="right")  # a model name is not markup
    for arm in sorted({r.arm for r in rows}):
        values = []
        for m in models:
            r = cell.get((m, arm))
            values.append(
                "" if r is None else (_fmt(r.profit.mean, 4) if r.profit else "not scored")
            )
        table.add_row(arm, *values)
        if arm.startswith(FAMILY_ARM_PREFIX):
            free = [cell.get((m, arm)) for m in models]
            table.add_row(
                "  arb-free share",
                *[f"{r.arbitrage_free.mean:.0%}" if r and r.arbitrage_free else "" for r in free],
            )
    briers = [cell.get((m, BASELINE_ARM)) for m in models]
    if any(r is not None and r.brier is not None for r in briers):
        table.add_row(
            "Brier (baseline)",
            *[_fmt(r.brier.mean, 4) if r and r.brier else "" for r in briers],
            style="dim",
        )
    table.add_row(
        "coverage",
        *[f"{model_coverage[m]:.0%}" if m in model_coverage else "" for m in models],
        style="dim",
    )
    return table


def _render_plain(table: Table) -> str:
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    return console.export_text()
