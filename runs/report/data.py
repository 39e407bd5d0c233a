"""The report's data: per-unit values, each (model, arm) row's statistics, the cross-model
and family sections. No printing, no files written: `runs.report.tables` renders this,
`runs.report.summary` turns it into `summary.json`, and the page's figures read it.

Statistics follow the paper (section 4): the LP value is averaged over passes per unit, then
over units, with a 95% percentile bootstrap clustered on date (stock-days of one date share
news, so whole dates are resampled); arms are compared with the baseline as paired
differences; models are compared on the baseline by the Spearman correlation of their mean
profit and mean Brier and by how many pairwise differences have an interval excluding zero.
Families follow the benchmark: the arbitrage-free rate (share of families where the L1 bookie
locks in at most 5 cents), and no score at all under the coverage floor, since a dropped call
must never read as incoherence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

import numpy as np
import polars as pl

from panels.arms import ARMS
from runs.planned_families import family_info
from runs.rehearsal import rehearsed
from runs.report.models import (
    Reported,
    SimulatorReplies,
    frozen_spec,
    model_providers,
    simulated_models,
    simulator_replies,
)
from scoring import stats
from scoring.dutch_book import CERTIFY_TOLERANCE
from scoring.stats import Interval

SCHEMA = "dutchbook.report/1"
ARBITRAGE_FREE_CENTS = 0.05
BASELINE_ARM = "baseline"
THRESHOLDS = (0.001, 0.005, 0.01)
#: A profit is certified to `CERTIFY_TOLERANCE`, so one that close to a threshold is on it
#: (both rules are inclusive: "at most 5 cents", "at least 1 percent"). Compared bare, an L1
#: profit of exactly 5 cents came back as 0.050000000000000044 and its family was counted
#: not arbitrage-free (ordinary answers: 0.55 and 0.50 for A and not A), and whether a
#: profit of exactly 1% counted as "at least 1%" depended on the batch it was scored in.
THRESHOLD_SLACK = CERTIFY_TOLERANCE
LEVEL = 0.95
COVERAGE_RULE = (
    "a model whose answered share of this arm's planned queries is under the coverage floor "
    "is not scored: an unanswered question is never counted as incoherence"
)
#: The family benchmark's own words: a model that "fails to answer 10% or more of its
#: families" is not scored, so a share missing of exactly 1 - floor is not scored either.
FAMILY_COVERAGE_RULE = (
    "a model that leaves 1 - coverage floor or more of a family arm's families unanswered "
    "(10% at the default floor of 90%; a family is unanswered in a pass where any of its "
    "statements is) is not scored on any family arm, and an unanswered family counts "
    "neither way: a dropped call is never counted as incoherence, nor as coherence"
)

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
    #: A row of joint events ("horizon/2 full"): its paired difference with the same arm's
    #: marginals (`within_arm_comparison`), in place of one with the baseline.
    vs_marginals: Interval | None = None
    vs_marginals_units: int = 0
    #: A family arm's arbitrage-free rate on the families about the future and on the
    #: controls (exact answers known) apart, and how many of each it scored: the design's
    #: controls "separate 'cannot compute probabilities' from 'incoherent when genuinely
    #: uncertain'", which one rate over both hid. None where the families' files could not
    #: be read (`control_families`).
    free_future: Interval | None = None
    free_controls: Interval | None = None
    future_families: int = 0
    control_families: int = 0
    #: A family arm's row left unscored by the model's coverage of another family arm: that
    #: arm and its coverage (`_family_arms_scored_together`); None where the row's own
    #: coverage decides.
    below_floor_in: tuple[str, float] | None = None

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
            "profit": interval_json(self.profit),
            "brier": interval_json(self.brier),
            "at_least": (
                {
                    threshold_key(t): {"units": c, "share": c / self.units if self.units else None}
                    for t, c in self.at_least.items()
                }
                if self.scored
                else None
            ),
            "arbitrage_free": interval_json(self.arbitrage_free),
            "vs_baseline": difference_json(self.vs_baseline, self.vs_baseline_units),
            "vs_marginals": difference_json(self.vs_marginals, self.vs_marginals_units),
            "below_floor_in": below_floor_json(self.below_floor_in),
        }


def below_floor_json(failed: tuple[str, float] | None) -> dict[str, Any] | None:
    """`{"arm", "coverage"}`: the other family arm whose coverage left a row unscored."""
    return None if failed is None else {"arm": failed[0], "coverage": failed[1]}


@overload
def difference_json(iv: Interval, units: int) -> dict[str, Any]: ...
@overload
def difference_json(iv: None, units: int) -> None: ...
@overload
def difference_json(iv: Interval | None, units: int) -> dict[str, Any] | None: ...
def difference_json(iv: Interval | None, units: int) -> dict[str, Any] | None:
    """A paired difference as `summary.json` has it: the interval, whether it excludes zero,
    and over how many paired units."""
    if iv is None:
        return None
    # No interval (fewer than two dates): whether it excludes zero is unknown, not "no".
    tested = not (math.isnan(iv.lo) or math.isnan(iv.hi))
    excludes = iv.excludes_zero() if tested else None
    return {**interval_json(iv), "excludes_zero": excludes, "units": units}  # type: ignore[dict-item]


# ---------------------------------------------------------------------------------------------
# Per-unit values and coverage


def arm_norm(label: str) -> str:
    """The metric a report row's arm is scored in (`panels.arms.Arm.norm`; "inf" if unknown)."""
    arm = ARMS.get(arm_of_label(label))
    return arm.norm if arm is not None else "inf"


def is_family(label: str) -> bool:
    """A report row of the family benchmark (its units are question families)."""
    arm = ARMS.get(arm_of_label(label))
    return arm is not None and arm.unit_kind == "family"


def family_arm() -> pl.Expr:
    """True on rows of the family benchmark's arms (their `Arm.unit_kind` is "family")."""
    return pl.col("arm").is_in([n for n, a in ARMS.items() if a.unit_kind == "family"])


def native_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """Each arm scored in its own metric (`Arm.norm`): sup-norm for the paper's arms, L1 for
    the family benchmark."""
    native = pl.col("arm").replace_strict(
        {name: arm.norm for name, arm in ARMS.items()}, default="inf", return_dtype=pl.String
    )
    return scores.filter(pl.col("norm") == native)


#: Single-set arms keep their name; for the others each kind of set is its own report row,
#: since a day's marginals, a whole horizon panel or a linked set are not comparable units.
def over_assets() -> pl.Expr:
    """Whether a linked or dispersed set is over two assets (`linked/A/B0`), not two days."""
    return pl.col("set").str.split("/").list.get(1, null_on_oob=True).is_in(["A", "B"])


SET_LABEL = (
    pl.when(pl.col("set").is_in(["h1", "family"]))
    .then(pl.col("arm"))
    .when(pl.col("arm").is_in(["linked", "dispersed"]))
    .then(
        pl.col("arm")
        + pl.when(over_assets())
        .then(pl.lit(" (assets)"))
        .otherwise(pl.lit(" (days)"))
    )
    .otherwise(pl.col("arm") + pl.lit(" ") + pl.col("set"))
)


def under_floor(coverage: float, floor: float, label: str) -> bool:
    """Whether a report row's answered share leaves it unscored: under the floor for the
    paper's arms (design: "a model under the coverage floor is not scored"); at or under it,
    unless nothing is missing, for the family benchmark's (`FAMILY_COVERAGE_RULE`). A share
    is a count over a count (or, without a plan, a float mean of shares, a few ulps off), so
    one within `SHARE_SLACK` of the floor is the floor: k/n differs from a floor of three
    decimals by at least 1/(1000 n), 2.7e-9 at the paper's 365,100 queries."""
    if is_family(label):
        return coverage < 1.0 - SHARE_SLACK and coverage <= floor + SHARE_SLACK
    return coverage < floor - SHARE_SLACK


#: How near the floor a share is the floor (`under_floor`; `coverage_text` shows it so).
SHARE_SLACK = 1e-10


def arm_of_label(label: str) -> str:
    """The catalogue arm behind a report row label ("horizon/2 full" -> "horizon/2")."""
    return label.split(" ", 1)[0]


def per_unit(scores: pl.DataFrame) -> pl.DataFrame:
    """Average the LP value over passes (and over the sets of one row label) for each unit.

    The `arm` column of the result is the report row label (see `SET_LABEL`).
    """
    return (
        whole_families(native_scores(scores))
        .with_columns(pair_unit())
        .with_columns(SET_LABEL.alias("arm"))
        .group_by(["model", "arm", "unit", "cluster"], maintain_order=True)
        .agg(
            pl.col("profit").drop_nans().mean().alias("profit"),
            pl.col("brier").drop_nans().mean().alias("brier"),
            pl.col("coverage").mean().alias("coverage"),
            pl.col("statements").mean(),
        )
    )


def pair_unit() -> pl.Expr:
    """The `unit` column with both orders of a two-asset date pair made one unit for the sets
    of both assets ("full", "marginals"): the paper asks each pair twice, the roles swapped,
    "and average[s] the resulting arbitrage profits" (section 4.3, footnote 2), so its counts
    of sets above a threshold are of pairs. A referee saw 6 units for 3 date pairs. The
    linked and dispersed sets over two assets (`linked/A/B0`, read from the same two-asset
    answers) are pairs alike: a later referee found "linked (assets)" counting 4 units where
    "two-asset full" counted 2. One asset's marginals ("A", "B") stay by order: each is that
    asset's own set, paired with its baseline day (`matched_stock_day`)."""
    both = ((pl.col("arm") == "two-asset") & pl.col("set").is_in(_WITHIN_ARM_SETS)) | (
        pl.col("arm").is_in(["linked", "dispersed"]) & over_assets()
    )
    date, assets = _date_and_assets()
    pair = pl.concat_str(date, pl.lit(":"), assets.list.sort().list.join("+"))
    return pl.when(both).then(pair).otherwise(pl.col("unit")).alias("unit")


def _date_and_assets() -> tuple[pl.Expr, pl.Expr]:
    """A two-asset unit id `2025-09-12:AAPL+MSFT` (`panels.units.DatePair.id`) as its date
    and its list of assets, in the pair's order."""
    date_and_pair = pl.col("unit").str.splitn(":", 2).struct
    return date_and_pair.field("field_0"), date_and_pair.field("field_1").str.split("+")


def whole_families(scores: pl.DataFrame) -> pl.DataFrame:
    """`scores` with a family asked in part (a statement of it unanswered in that pass) made
    unanswered, as the benchmark counts families: its profit and Brier NaN, its coverage 0
    (a whole family's 1; the share of statements answered is kept as `statements`). Scored
    on its answered statements, it would lose the constraints that tie those to the missing
    one, and a dropped call would read as coherence (a referee
    saw 6 of 7 such families arbitrage-free, against 53% of whole ones)."""
    family = family_arm()
    part = family & (pl.col("coverage") < 1.0)
    return scores.with_columns(pl.col("coverage").alias("statements")).with_columns(
        *(
            pl.when(part).then(float("nan")).otherwise(pl.col(c)).alias(c)
            for c in ("profit", "brier")
        ),
        pl.when(family)
        .then((pl.col("coverage") >= 1.0).cast(pl.Float64))
        .otherwise(pl.col("coverage"))
        .alias("coverage"),
    )


def ledger_coverage(run_dir: Path) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Share of planned queries (distinct requests) with an accepted answer, per model and per
    (model, arm); for a family arm, the share of its families (in each pass) with every
    statement answered.

    Read from `plan_members.parquet` (each arm's view of a query) and the accepted responses;
    empty when the run folder has no plan (then the scores' own coverage is used).
    """
    members_path = run_dir / "plan_members.parquet"
    if not members_path.exists():
        return {}, {}
    from engine.scan import scan_responses

    accepted = (
        scan_responses(run_dir, columns=["request_id"])
        .unique("request_id")
        .with_columns(pl.lit(1).alias("accepted"))
    )
    joined = (
        pl.scan_parquet(members_path)
        .select("request_id", "model", "arm", "unit", "pass")
        .join(accepted, on="request_id", how="left")
        .with_columns(pl.col("accepted").fill_null(0))
        .collect()
    )
    # A share of queries, each counted once: a query serving two members (one question in two
    # families of an arm) counted twice, answered or not (1014/1021 where 1014 of 1020 were).
    by_model = (
        joined.unique(["model", "request_id"]).group_by("model").agg(pl.col("accepted").mean())
    )
    by_arm = (
        joined.filter(~family_arm())
        .unique(["model", "arm", "request_id"])
        .group_by("model", "arm")
        .agg(pl.col("accepted").mean())
    )
    # The family benchmark counts families: one asked in part is unanswered (`whole_families`).
    by_family_arm = (
        joined.filter(family_arm())
        .group_by("model", "arm", "unit", "pass")
        .agg(pl.col("accepted").min())
        .group_by("model", "arm")
        .agg(pl.col("accepted").mean())
    )
    return (
        {str(m): float(a) for m, a in by_model.iter_rows()},
        {
            (str(m), str(arm)): float(a)
            for m, arm, a in pl.concat([by_arm, by_family_arm]).iter_rows()
        },
    )


# ---------------------------------------------------------------------------------------------
# Rows: per model and arm


def build_rows(
    scores: pl.DataFrame,
    arm_coverage: dict[tuple[str, str], float],
    floor: float,
    seed: int,
    reps: int,
    kinds: Mapping[str, bool] | None = None,
) -> list[ArmRow]:
    """The (model, arm) cells; `kinds`: whether each family (by id) is a control, whose rates
    are given apart from the others' (`control_families`), None when unknown."""
    units = per_unit(scores)
    rows: list[ArmRow] = []
    for (model, arm), group in units.group_by(["model", "arm"], maintain_order=True):
        model, arm = str(model), str(arm)
        norm = arm_norm(arm)
        cov = arm_coverage.get((model, arm_of_label(arm)))
        if cov is None:
            cov = float(group["coverage"].fill_null(0.0).mean() or 0.0)  # type: ignore[arg-type]
        asked_in_part = bool((group["statements"].fill_null(0.0) > 0).any())
        group = group.filter(pl.col("profit").is_not_null() & pl.col("profit").is_not_nan())
        if group.height == 0:
            # A family arm whose families were all asked in part answered something.
            status = STATUS_BELOW_FLOOR if asked_in_part else STATUS_NO_ANSWERS
            rows.append(ArmRow(model, arm, norm, 0, 0, cov, status))
            continue
        n_clusters = group["cluster"].n_unique()
        if under_floor(cov, floor, arm):
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
        free = _free_share(values, clusters, reps, seed) if is_family(arm) else None
        split = (
            _free_by_kind(group, kinds, reps, seed) if is_family(arm) and kinds is not None else {}
        )
        vs, vs_units = _paired(units, model, arm, baseline_of(arm), reps, seed)
        vm, vm_units = _paired(units, model, arm, marginals_of(arm), reps, seed)
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
                at_least={t: int((values >= t - THRESHOLD_SLACK).sum()) for t in THRESHOLDS},
                arbitrage_free=free,
                vs_baseline=vs,
                vs_baseline_units=vs_units,
                vs_marginals=vm,
                vs_marginals_units=vm_units,
                **split,
            )
        )
    return _compared_only_with_scored(_family_arms_scored_together(rows))


def _family_arms_scored_together(rows: list[ArmRow]) -> list[ArmRow]:
    """`rows` with every family arm of a model unscored where one of them is: the benchmark
    says a model failing to answer 10% or more of its families "is not scored at all". Held
    to the floor arm by arm, a model that dropped a fifth of its isolated families still
    showed its joint arm's rate (and one that dropped its joint families, its isolated
    leaderboard rate). The paper's arms keep the design's rule, arm by arm."""
    failed: dict[str, ArmRow] = {}
    for r in rows:
        if is_family(r.arm) and not r.scored:
            failed.setdefault(r.model, r)
    out = []
    for r in rows:
        by = failed.get(r.model)
        if by is not None and r.scored and is_family(r.arm):
            r = ArmRow(r.model, r.arm, r.norm, r.units, r.clusters, r.coverage,
                       STATUS_BELOW_FLOOR, below_floor_in=(by.arm, by.coverage))  # fmt: skip
        out.append(r)
    return out


def _free_share(values: np.ndarray, clusters: np.ndarray, reps: int, seed: int) -> Interval:
    """The share of units whose profit is at most `ARBITRAGE_FREE_CENTS` (to the LP's 1e-9),
    with its cluster bootstrap interval."""
    free = (values <= ARBITRAGE_FREE_CENTS + THRESHOLD_SLACK).astype(float)
    return stats.cluster_bootstrap_mean(free, clusters, reps=reps, seed=seed, level=LEVEL)


def _free_by_kind(
    group: pl.DataFrame, kinds: Mapping[str, bool], reps: int, seed: int
) -> dict[str, Any]:
    """`ArmRow`'s `free_future`, `free_controls` and their counts, from one family arm's scored
    families (`unit` is the family's id); nothing when a family's kind is unknown (its file
    no longer read), so that none is counted as a future family unseen."""
    known = [kinds.get(str(unit)) for unit in group["unit"].to_list()]
    if any(kind is None for kind in known):
        return {}
    is_control = np.array(known, dtype=bool)
    values, clusters = group["profit"].to_numpy(), group["cluster"].to_numpy()
    split: dict[str, Any] = {}
    for name, mask in (("future", ~is_control), ("controls", is_control)):
        n = int(mask.sum())
        split[f"free_{name}"] = _free_share(values[mask], clusters[mask], reps, seed) if n else None
        split["future_families" if name == "future" else "control_families"] = n
    return split


#: Sets spanning several days' or assets' panels (`SET_LABEL`'s "horizon/2 full"): not
#: comparable with the one-day baseline, whose profit a larger set can only exceed; the
#: paper compares them within their arm, joint events against the marginals alone (section
#: 4.3, Figure 3; footnote 3: "more cleanly interpreted by comparing incoherence within
#: horizon", each horizon's prompts bearing their own preamble).
_WITHIN_ARM_SETS = ("full", "marginals")


def baseline_of(label: str) -> str | None:
    """The row a report row is paired with as "vs baseline": the baseline arm, except for the
    baseline itself, family arms and sets of several panels (`_WITHIN_ARM_SETS`)."""
    _, space, set_name = label.rpartition(" ")
    if label == BASELINE_ARM or is_family(label) or (space and set_name in _WITHIN_ARM_SETS):
        return None
    return BASELINE_ARM


def marginals_of(label: str) -> str | None:
    """The row of a joint-events row's own marginals ("horizon/2 full" -> "horizon/2
    marginals"), the paper's within-arm comparison; None for any other row."""
    head, space, tail = label.rpartition(" ")
    return f"{head} marginals" if space and tail == "full" else None


def matched_stock_day(label: str) -> pl.Expr:
    """The `unit` column as the baseline's stock-day a row's unit is matched with: its own,
    except for one asset's marginals in the two-asset arm ("two-asset A"), whose pair
    `2025-09-12:AAPL+MSFT` is matched with that asset's day, `2025-09-12:AAPL` (A) or
    `2025-09-12:MSFT` (B): the paper's "matched baseline elicitation" (section 4.3). A pair
    id that does not split into two assets matches nothing."""
    set_name = label.rpartition(" ")[2]
    if arm_of_label(label) != "two-asset" or set_name not in ("A", "B"):
        return pl.col("unit")
    date, assets = _date_and_assets()
    asset = pl.when(assets.list.len() == 2).then(assets.list.get(0 if set_name == "A" else 1))
    return pl.concat_str(date, pl.lit(":"), asset).alias("unit")


def _compared_only_with_scored(rows: list[ArmRow]) -> list[ArmRow]:
    """`rows` without differences against a row that is not scored: a baseline under the
    coverage floor is not scored, so its numbers enter no comparison either."""
    scored = {(r.model, r.arm) for r in rows if r.scored}
    out = []
    for r in rows:
        if r.vs_baseline is not None and (r.model, BASELINE_ARM) not in scored:
            r = replace(r, vs_baseline=None, vs_baseline_units=0)
        marginals = marginals_of(r.arm)
        if r.vs_marginals is not None and (r.model, marginals) not in scored:
            r = replace(r, vs_marginals=None, vs_marginals_units=0)
        out.append(r)
    return out


def _paired(
    units: pl.DataFrame, model: str, arm: str, other: str | None, reps: int, seed: int
) -> tuple[Interval | None, int]:
    """Paired difference (row `arm` - row `other`) of one model on the units both answered
    (the same stock-days); (None, 0) without an `other` or a unit in common."""
    if other is None:
        return None, 0
    mine = units.filter((pl.col("model") == model) & (pl.col("arm") == arm))
    base = units.filter((pl.col("model") == model) & (pl.col("arm") == other))
    if mine.height == 0 or base.height == 0:
        return None, 0
    if other == BASELINE_ARM:
        mine = mine.with_columns(matched_stock_day(arm))
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


#: The most model pairs whose differences are counted, about 200 models (10 s here): 3,000
#: models made 4.5 million pairs, whose samples alone ran a tester's report out of memory,
#: and would have taken half an hour. More are said, not counted (`pairs_not_counted`).
MAX_PAIRS = 20_000


#: The fewest models a rank correlation across them is computed for: that of two points is
#: +1 or -1 whatever they are, and says nothing (`spearman_not_computed` says so).
MIN_SPEARMAN_MODELS = 3


def _no_spearman(models: int, with_brier: int) -> str:
    """Why `spearman_profit_brier` is null, as every view says it after its "—": with two
    models it was "—" with no reason, and the page left the sentence out. With none scored on
    the baseline arm (not run, or every model under the floor), that is the reason: "needs at
    least 3 models; 0 here" read as if models were missing."""
    if models == 0:
        return f"no model was scored on the {BASELINE_ARM} arm"
    if with_brier >= MIN_SPEARMAN_MODELS:  # computed: every rank on one side tied
        return "undefined: the models' mean profits, or their mean Brier scores, are all equal"
    if with_brier < models:
        return (
            f"needs at least {MIN_SPEARMAN_MODELS} models with a Brier score; {with_brier} of "
            f"{models} here"
        )
    return f"needs at least {MIN_SPEARMAN_MODELS} models; {models} here"


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
    if len(with_brier) >= MIN_SPEARMAN_MODELS:
        rho = stats.spearman(
            np.array([r.profit.mean for r in with_brier if r.profit is not None]),
            np.array([r.brier.mean for r in with_brier if r.brier is not None]),
        )
        result["spearman_profit_brier"] = None if math.isnan(rho) else rho
    if result["spearman_profit_brier"] is None:
        result["spearman_not_computed"] = _no_spearman(len(models), len(with_brier))
    if len(models) < 2:
        return result
    if result["pairs"] > MAX_PAIRS:
        result["units"] = None  # not looked for: 0 would say none were common
        result["pairs_not_counted"] = (
            f"{result['pairs']:,} pairs of models, over the limit of {MAX_PAIRS:,} (each a "
            f"bootstrap of {reps:,} replicates): none counted"
        )
        return result
    units = per_unit(scores).filter((pl.col("arm") == BASELINE_ARM) & pl.col("model").is_in(models))
    for metric in ("profit", "brier"):
        wide = _aligned(units, models, metric)
        if metric == "profit":
            result["units"] = wide.height
        # No interval on fewer than two dates (`scoring.stats.MIN_CLUSTERS`), so no count: a
        # referee's one-date run read "profit 0 of 3", as if no model differed (null, "—").
        if wide["cluster"].n_unique() < stats.MIN_CLUSTERS:
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
# Linked against dispersed sets (the paper's Appendix D)


#: The two kinds of linked and dispersed set, as their row labels name them (`SET_LABEL`):
#: over two assets (the paper's Figure 5) and over two days (its Figure 6).
LINKED_KINDS = ("assets", "days")


def linked_vs_dispersed(
    scores: pl.DataFrame, rows: Sequence[ArmRow], seed: int, reps: int
) -> list[dict[str, Any]]:
    """Per model and kind of set, the paired difference of per-unit profit, linked -
    dispersed, on the units both scored (`_paired`, date-clustered): the paper's Appendix D
    headline. Only where both rows are scored; by model name, then kind. Figure 5 draws it
    from the summary: computed there too, it was in the figure's caption alone."""
    return linked_differences(scores, {(r.model, r.arm) for r in rows if r.scored}, seed, reps)


def linked_differences(
    scores: pl.DataFrame, scored: AbstractSet[tuple[str, str]], seed: int, reps: int
) -> list[dict[str, Any]]:
    """`linked_vs_dispersed` of the (model, row label) pairs `scored`: figure 5 computes it so
    from a summary's scored rows where the summary, written before that key, has none."""
    units = per_unit(scores.filter(pl.col("arm").is_in(["linked", "dispersed"])))
    out = []
    for model in sorted({model for model, _ in scored}):
        for kind in LINKED_KINDS:
            linked, dispersed = f"linked ({kind})", f"dispersed ({kind})"
            if (model, linked) not in scored or (model, dispersed) not in scored:
                continue
            iv, n = _paired(units, model, linked, dispersed, reps, seed)
            if iv is not None and math.isfinite(iv.mean):
                out.append({"model": model, "kind": kind, **difference_json(iv, n)})
    return list(clean_json(out))  # an interval of one date has no ends: null, not NaN


# ---------------------------------------------------------------------------------------------
# Families


def family_section(rows: Sequence[ArmRow]) -> list[dict[str, Any]]:
    """The benchmark's leaderboard: arbitrage-free rate, or 'not scored' under the floor;
    ranked within each arm by that rate (`family_rank`)."""
    section = [
        {
            "model": r.model,
            "arm": r.arm,
            "families": r.units,
            "coverage": r.coverage,
            "status": r.status,
            "scored": r.scored,
            "arbitrage_free": interval_json(r.arbitrage_free),
            "future": _kind_json(r.free_future, r.future_families, r),
            "controls": _kind_json(r.free_controls, r.control_families, r),
            "rule": FAMILY_COVERAGE_RULE,
            "below_floor_in": below_floor_json(r.below_floor_in),
        }
        for r in rows
        if is_family(r.arm)
    ]
    return sorted(section, key=family_rank)


def _kind_json(free: Interval | None, families: int, row: ArmRow) -> dict[str, Any] | None:
    """`{"families", "arbitrage_free"}` of one kind of family (future or controls) in a scored
    row whose families' kinds are known; None otherwise."""
    if not row.scored or (row.future_families + row.control_families) == 0:
        return None
    return {"families": families, "arbitrage_free": interval_json(free)}


def arm_model_rank(entry: Mapping[str, Any]) -> tuple[str, str]:
    """Where a summary entry with an `arm` and a `model` stands in a table by arm, then by
    model name (`runs.report.wording.ORDER_ARMS`, `ORDER_REPEATED`): the page's arms table, and
    the repeated-elicitation section, which came in the scores' own order and said none."""
    return (str(entry["arm"]), str(entry["model"]))


def family_rank(entry: Mapping[str, Any]) -> tuple[str, bool, float, str]:
    """Where a `family_section` entry stands: by arm, then scored before not, then by the
    arbitrage-free rate, highest first (the family benchmark's leaderboard score: its design
    ranks by it, not by mean profit), then by name. Ordered by name alone, a reader had to
    rank the table by eye."""
    free = entry.get("arbitrage_free") or {}
    rate = free.get("mean") if isinstance(free, Mapping) else None
    ranked = -float(rate) if isinstance(rate, int | float) and math.isfinite(rate) else 0.0
    return (str(entry["arm"]), not entry.get("scored"), ranked, str(entry["model"]))


# ---------------------------------------------------------------------------------------------
# JSON helpers


def clean_json(obj: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN and infinities to None."""
    if isinstance(obj, dict):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean_json(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def interval_json(iv: Interval | None) -> dict[str, float] | None:
    if iv is None:
        return None
    return {"mean": float(iv.mean), "lo": float(iv.lo), "hi": float(iv.hi)}


def threshold_key(t: float) -> str:
    return f"{t:g}"


# ---------------------------------------------------------------------------------------------
# Everything the report shows, computed once


@dataclass(frozen=True)
class ReportData:
    """A campaign's report as data: what `summary.json`, the tables and the figures show.

    `rows` are the (model, arm) cells (`ArmRow`); `model_coverage` the share of each model's
    planned queries answered; `across_models` the baseline's cross-model statistics;
    `repeated` the repeated-elicitation section (None when not computed); `families` the
    benchmark's rows. `floor`, `seed`, `reps` are the settings the statistics used.
    `providers` names each model's provider as the frozen spec does; `simulated`, the models
    the local simulator answered (`runs.report.models.simulated_models`), labelled so in
    every view; `simulator_replies`, per model any of whose replies named the simulator as the
    model answering, how many did (`runs.report.models.simulator_replies`).
    """

    rows: list[ArmRow]
    model_coverage: dict[str, float]
    across_models: dict[str, Any]
    repeated: list[dict[str, Any]] | None
    families: list[dict[str, Any]]
    floor: float
    seed: int
    reps: int
    providers: Mapping[str, str | None] = field(default_factory=dict)
    simulated: frozenset[str] = frozenset()
    simulator_replies: Mapping[str, SimulatorReplies] = field(default_factory=dict)
    #: The summary's `linked_vs_dispersed` (`linked_vs_dispersed`).
    linked_vs_dispersed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def in_part(self) -> dict[str, tuple[int, int]]:
        """(replies from the simulator, replies) of the models it answered in part."""
        return {
            m: (r.simulator, r.replies) for m, r in self.simulator_replies.items() if r.in_part
        }

    def row(self, model: str, arm: str) -> ArmRow | None:
        return next((r for r in self.rows if r.model == model and r.arm == arm), None)


def control_families(run_dir: Path, scores: pl.DataFrame) -> dict[str, bool] | None:
    """Whether each family the run was planned with is a control, by id (read as figure 6
    reads them: `runs.planned_families.family_info`); None when no family arm was scored or
    their files cannot be read."""
    if scores.is_empty() or not scores.select(family_arm().any()).item():
        return None
    info = family_info(run_dir)
    if not info:
        return None
    return {fid: family.control for fid, family in info.items()}


def build_report_data(
    run_dir: Path,
    scores: pl.DataFrame,
    *,
    floor: float,
    seed: int,
    reps: int = stats.DEFAULT_REPS,
    repeated: Any = None,
    reported: Reported | None = None,
) -> ReportData:
    """The report's statistics from a run's scores (and its plan and ledger, for coverage).

    `repeated`, when given, is called as `repeated(rows)` and returns the repeated-
    elicitation section (see `runs.report.repeated`); without it the section is None.
    `reported`, the folder's audit's `models_reported`, tells the models whose replies named
    the local simulator (`runs.report.models.simulated_models`); without it, the spec alone.
    """
    model_cov, arm_cov = ledger_coverage(run_dir)
    spec = frozen_spec(run_dir)
    rows = build_rows(scores, arm_cov, floor, seed, reps, control_families(run_dir, scores))
    if not model_cov:
        model_cov = {
            str(m): float(c if c is not None else 0.0)
            for m, c in per_unit(scores)
            .group_by("model")
            .agg(pl.col("coverage").mean())
            .iter_rows()
        }
    return ReportData(
        rows=rows,
        model_coverage=dict(sorted(model_cov.items())),
        across_models=across_models(scores, rows, seed, reps),
        repeated=repeated(rows) if repeated is not None else None,
        families=family_section(rows),
        floor=floor,
        seed=seed,
        reps=reps,
        providers=model_providers(spec),
        simulated=frozenset(simulated_models(spec, rehearsed(run_dir), reported)),
        simulator_replies=simulator_replies(reported),
        linked_vs_dispersed=linked_vs_dispersed(scores, rows, seed, reps),
    )
