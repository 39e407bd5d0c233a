"""How the report names what it measured, from the arms of its rows.

The paper's arms score profit per unit stake (sup norm) and resample dates; the family
benchmark's arms score in its L1 metric and resample whole families (a family unit's
cluster is the family itself). A report that names one when only the other was run
misleads its reader, so the page and the terminal say it from the rows' arms
(`runs.report.data.arm_norm`, `is_family`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from runs.report.data import (
    ARBITRAGE_FREE_CENTS,
    SHARE_SLACK,
    THRESHOLD_SLACK,
    arm_norm,
    is_family,
)


def fixed(x: float, digits: int = 5, *, signed: bool = False) -> str:
    """`x` with `digits` decimals, its sign kept: only a value within the LP certificate's
    tolerance of 0 (a float's -7.6e-18 around an exact 0) reads as 0. Formatted with `z`,
    a difference of -2e-6 read "+0.00000 [+0.00000, +0.00000]", an interval that straddles 0
    shown as if it did not; "-0.00000 [-0.00000, +0.00000]" says that it does."""
    if abs(x) <= THRESHOLD_SLACK:
        x = 0.0
    return f"{x:{'+' if signed else ''}.{digits}f}"


def fixed_or_dash(x: float | None, digits: int = 5, *, signed: bool = False) -> str:
    """`fixed`, or "—" where there is no number: a null or NaN end, which an interval of one
    date (one cluster) has in place of its ends."""
    if x is None or not math.isfinite(x):
        return "—"
    return fixed(x, digits, signed=signed)


def interval_text(
    iv: Mapping[str, float | None],
    digits: int = 5,
    *,
    signed: bool = False,
    gap: str = " ",
    space: str = " ",
) -> str:
    """An interval as every view writes it: "0.01500 [0.01201, 0.01893]", "—" for a missing
    end ("0.01500 [—, —]" of one date, whose bootstrap cannot be computed; the page gave its
    profit and Brier as the mean alone). `signed`: each number with its sign, a paired
    difference's (`difference_text`); `gap` goes between the mean and the brackets (a
    panel's line break), `space` after the comma (the page's no-break space)."""
    mean, lo, hi = (fixed_or_dash(iv.get(k), digits, signed=signed) for k in ("mean", "lo", "hi"))
    return f"{mean}{gap}[{lo},{space}{hi}]"


def difference_text(
    iv: Mapping[str, float | None], digits: int = 5, *, gap: str = " ", space: str = " "
) -> str:
    """A paired difference as every view writes it: "+0.01557 [+0.01201, +0.01893]", each
    number signed, "—" for a missing end ("+0.01557 [—, —]" of one date). One date's
    linked - dispersed read four ways: that, "+0.01557" (the page), "0.01557 [—, —]" (figure
    5's caption) and "[+nan, +nan]" (its panel). `gap` and `space` as `interval_text`'s."""
    return interval_text(iv, digits, signed=True, gap=gap, space=space)


#: The column of the paired differences (vs baseline, or a joint-events row's vs marginals)
#: in leaderboard.txt's and report.md's leaderboard and the page's every arm and model table.
VS_BASELINE_COLUMN = "vs baseline [95% CI]"


def without_empty_comparison(
    comparisons: Iterable[object], header: Sequence[str], lines: Iterable[Sequence[str]]
) -> list[list[str]]:
    """`lines` (a table's rows of cells under `header`, or its header) without the
    `VS_BASELINE_COLUMN` where no row has a paired difference (`comparisons`: each row's vs
    baseline or vs marginals, None where it has neither): a campaign of families alone
    showed it empty. One rule for the tables (over `ArmRow`s) and the page (over
    summary.json's rows), which each had it."""
    kept = [list(line) for line in lines]
    if any(c is not None for c in comparisons):
        return kept
    column = list(header).index(VS_BASELINE_COLUMN)
    return [line[:column] + line[column + 1 :] for line in kept]


#: The most decimals a percent of the coverage floor is shown with.
_MOST_DECIMALS = 4


def floor_decimals(floor: float | None) -> int:
    """The fewest decimals (up to 4) that state the coverage floor as a percent exactly: 0
    for the 90% default, 1 for 92.5%. Coverage is shown with at least as many
    (`coverage_text`): a 92.5% floor read "92%", and a model at 92.9% "92%", scored, beside
    it."""
    if floor is None or not math.isfinite(floor):
        return 0
    percent = floor * 100
    for decimals in range(_MOST_DECIMALS):
        if abs(round(percent, decimals) - percent) < 1e-9:
            return decimals
    return _MOST_DECIMALS


def floor_text(floor: float) -> str:
    """The coverage floor as a percent at `floor_decimals`: exact for a floor of up to 4
    decimals; one that needs more (1/3) rounded up, as each coverage under it is rounded
    down, so a coverage under the floor never reads as equal to it (12.3456% beside a floor
    of 12.345678% said "under the floor" of "12.3456%")."""
    return _percent(floor, floor_decimals(floor), math.ceil)


#: The most decimals a coverage is shown with, to tell it from the floor: k/n differs from
#: a floor by more than `runs.report.data.under_floor`'s 1e-10, 1e-8 of a percent.
_MOST_COVERAGE_DECIMALS = 10


def coverage_text(share: float, floor: float | None = None) -> str:
    """A coverage as a percent rounded down, with the decimals the floor is shown with
    (`floor_decimals`; whole without one), and more where it would read as the floor or
    under it and is above: rounded to the nearest, 89.8% read "90%", as an unscored family
    arm at the 90% floor did, and 99.6% read "100%" with answers missing; rounded down
    alone, a scored family arm at 100 of 111 (90.09%) read "90%" beside an unscored one at
    exactly the 90% floor. So a share reads as the floor (`floor_text`) only when it is
    the floor (within the report's slack, `under_floor`), under it when under, over it
    when over: "89%", "90%", "90.09%"."""
    if floor is None or not math.isfinite(floor):
        return _percent(share, 0, math.floor)
    shown_floor = floor_text(floor)
    if abs(share - floor) <= SHARE_SLACK:
        return shown_floor
    decimals = floor_decimals(floor)
    percent = round(floor * 100, 11)  # 0.07 * 100 is 7.000000000000001
    while True:
        text = _percent(share, decimals, math.floor)
        # Rounded down, a share over the floor may read as the floor, or (a floor rounded
        # up, 1/3) under its text; one a hair under it, as the floor once float noise is
        # rounded off: more decimals tell them apart.
        shown = float(text[:-1])
        same_side = shown < percent if share < floor else shown > percent
        if (text != shown_floor and same_side) or decimals >= _MOST_COVERAGE_DECIMALS:
            return text
        decimals += 1


def _percent(share: float, decimals: int, to_whole: Callable[[float], int]) -> str:
    """`share` as a percent of `decimals` decimals, rounded by `to_whole` (up or down) once
    float noise is rounded off."""
    scaled = to_whole(round(share * 100 * 10**decimals, 6))
    return f"{scaled / 10**decimals:.{decimals}f}%"


def dollars(amount: float) -> str:
    """A sum of money as the report writes it: "$0.05"."""
    return f"${amount:.2f}"


def of_families(rate: str, families: int) -> str:
    """One kind of family's rate (future, or controls) and over how many, as the page and
    report.md write it: "0.61 [0.43, 0.79] of 28", or "none" where the arm scored none."""
    return f"{rate} of {families}" if families else "none"


def metric_words(labels: Iterable[str]) -> str:
    """'arbitrage profit per unit stake', 'L1 arbitrage profit', or both named, for the
    report rows' arm labels. Both: which arms each unit is of, in a sentence (it read
    "arbitrage profit per unit stake, question families' in L1", a column of two units
    said in a fragment)."""
    norms = {arm_norm(label) for label in labels}
    if norms == {"l1"}:
        return "L1 arbitrage profit"
    if "l1" in norms:
        return (
            "arbitrage profit, per unit stake on the stock-return arms and in the L1 metric "
            "on the question-family arms"
        )
    return "arbitrage profit per unit stake"


def cluster_words(labels: Iterable[str]) -> str:
    """What the bootstrap resampled: 'clustered by date', 'by family', or both named."""
    families = {is_family(label) for label in labels}
    if families == {True}:
        return "clustered by family"
    if True in families:
        return "clustered by date, question families' by family"
    return "clustered by date"


#: What the coverage-floor rule adds where a family arm is reported: there a model exactly
#: at the floor is not scored either (`runs.report.data.under_floor`, the family benchmark's
#: rule: one missing 10% or more of its families), and one not scored on a family arm is
#: scored on none (`runs.report.data._family_arms_scored_together`: "not scored at all").
FAMILY_FLOOR_WORDS = (
    " (on a family arm, at or under it, unless nothing is missing; a model not scored on one"
    " family arm is scored on none)"
)


def floor_words(labels: Iterable[str]) -> str:
    """`FAMILY_FLOOR_WORDS` where a family arm is among `labels`, else nothing: what the
    page's and report.md's floor sentences add after "under the coverage floor"."""
    return FAMILY_FLOOR_WORDS if any(is_family(label) for label in labels) else ""


#: The linked - dispersed section's heading, words and columns (`runs.report.data.
#: linked_vs_dispersed`), one text for leaderboard.txt, report.md and the page: the paper's
#: Appendix D headline was in figure 5's caption alone.
LINKED_TITLE = "Linked against dispersed sets"
LINKED_WORDS = (
    "Linked - dispersed: the paired difference in mean profit per unit stake between the "
    "linked and the dispersed sets of one kind (over two assets, or over two days) on the "
    "units both scored, the paper's Appendix D comparison, with its 95% interval clustered by "
    "date; above zero, the linked sets are the less coherent."
)
LINKED_COLUMNS = ("model", "sets over", "linked - dispersed [95% CI]", "units")


#: The order of a table's rows, said under it, one line each: ties are broken one way in
#: every table, by model name (`runs.report.tables._leaderboard_order`,
#: `runs.report.data.family_rank`); the leaderboard put a different model first than the
#: families table in the same tie, and no table said how it was sorted.
ORDER_LEADERBOARD = (
    "Rows: by arm, scored first, then by mean profit, lowest first; ties by model name."
)
ORDER_FAMILIES = (
    "Rows: by arm, scored first, then by arbitrage-free share, highest first; ties by model "
    "name."
)
ORDER_RANKING = "Rows: scored first, then by mean profit, lowest first; ties by model name."
ORDER_ARMS = "Rows: by arm, then by model name."
ORDER_REPEATED = ORDER_ARMS  # the repeated-elicitation table's, as the arms table's
ORDER_LINKED = "Rows: by model name, then sets over two assets before two days."


#: The paper the method and the stock-return arms follow, as the report cites it.
PAPER = "Andrews and Sarkar, \u201cDutch Books for Language Models\u201d"


def reading_guide(
    labels: Iterable[str], *, arbitrage_free: bool = False, draws: str | None = None
) -> list[str]:
    """What the report's words and columns mean, for the arms of its rows, one item a term:
    the page said none of it (a referee met "units", "Brier" and "the paper" undefined), and
    report.md only the profit. One text for all (the page lists the items, report.md joins
    them, leaderboard.txt's legend lists them). `arbitrage_free`: the arbitrage-free share
    defined without a family arm too, for a table whose column is always there (the
    leaderboard's); `draws` (`bootstrap_draws`), the bootstrap's replicates and seed said in
    the intervals' sentence, for a text with no header that says them (leaderboard.txt's
    legend said the bootstrap twice, this sentence and the header's words)."""
    labels = list(labels)
    if not labels:  # nothing scored or shown: no term to define
        return []
    families = {is_family(label) for label in labels}
    stock, family = False in families, True in families
    metric = []
    if stock:
        metric.append("per unit of total stake on the stock-return arms (the sup-norm "
                      "distance to the nearest coherent forecast)")
    if family:
        metric.append("with at most $1 of each contract on question families (the L1 "
                      "distance)")
    units = []
    if stock:
        units.append("a stock-day on the stock-return arms (the return bins asked about one "
                     "stock from one day, over the days after it on the horizon arms and the "
                     "linked and dispersed sets over two days; both stocks of one date on the "
                     "two-asset arm's full and marginals sets and the linked and dispersed "
                     "sets over two assets; one asset's own marginals, two-asset A and B, "
                     "once per order the pair was asked in)")
    if family:
        units.append("a question family on the family arms")
    sentences = [
        "Profit: the largest gain a bookie is sure of, whatever happens, when trading at the "
        f"model's stated probabilities, {' and '.join(metric)}; 0 means the probabilities "
        "could come from one distribution (coherent), and lower is more coherent.",
        f"A unit is one set of related questions scored together: {'; '.join(units)}. A "
        "unit's profit is averaged over its passes, then the units are averaged.",
        f"Intervals are 95% percentile bootstraps{f' of {draws}' if draws else ''} that "
        f"resample whole clusters ({_cluster_kinds(stock, family)}); with few clusters they "
        "are rough.",
    ]
    if stock:
        sentences.append(
            "\u2265 t: the share of units whose profit is at least t. Brier: the mean squared "
            "error of the stated probabilities against what happened (lower is better), where "
            "the outcomes are known."
        )
    if family or arbitrage_free:
        sentences.append(
            "Arbitrage-free: the share of families on which the bookie locks in at most "
            f"{dollars(ARBITRAGE_FREE_CENTS)}, the family benchmark's leaderboard score."
        )
    if stock:
        sentences.append(f"The method and the stock-return arms follow {PAPER}.")
    return sentences


def bootstrap_draws(replicates: int | None, seed: object) -> str:
    """The bootstrap's size and seed, "20,000 replicates (seed 7)", as every view says them
    (the intervals' sentence of `reading_guide`: the page's guide, leaderboard.txt's legend,
    report.md's opening)."""
    reps = f"{replicates:,}" if isinstance(replicates, int) else "—"
    return f"{reps} replicates (seed {seed})"


def bootstrap_words(replicates: int | None, seed: object, labels: Iterable[str]) -> str:
    """The bootstrap behind every interval in one phrase, "95% intervals from a bootstrap of
    20,000 replicates (seed 7) clustered by date": the page's header said it until its guide
    alone did (`reading_guide`); kept for callers of the documented name."""
    return (
        f"95% intervals from a bootstrap of {bootstrap_draws(replicates, seed)} "
        f"{cluster_words(labels)}"
    )


def _cluster_kinds(stock: bool, family: bool) -> str:
    """The clusters the intervals resample: with both kinds of arm, which arm's are which
    (report.md's "dates or families" left a reader to guess, where it had said "clustered
    by date, question families' by family")."""
    if stock and family:
        return "dates on the stock-return arms, families on the family arms"
    return "dates" if stock else "families"
