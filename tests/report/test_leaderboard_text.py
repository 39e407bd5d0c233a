"""The leaderboard's text: coverage rounded down (to a whole percent, or to as many decimals
as the coverage floor is shown with, and more where a share over the floor would read as it),
and no empty ranking.

Rounded to the nearest, a family arm at 89.8% read "90%", as an unscored one at exactly the
floor did and a scored one at 90.4%: the table said "not scored: coverage 90% ≤ floor" beside
a scored "90%". And 99.6% read "100%" with answers missing. Rounded down alone, a scored arm
at 100 of 111 (90.09%) still read "90%" beside the unscored one at exactly 90%.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runs.report.data import STATUS_BELOW_FLOOR, STATUS_SCORED, THRESHOLDS, ArmRow
from runs.report.tables import leaderboard_cells
from runs.report.wording import coverage_text
from scoring.stats import Interval


@pytest.mark.parametrize(
    ("share", "shown"),
    [(0.898, "89%"), (0.9, "90%"), (0.904, "90%"), (0.29, "29%"), (0.57, "57%"),
     (0.996, "99%"), (1.0, "100%"), (0.0, "0%")],
)  # fmt: skip
def test_a_coverage_reads_at_a_percent_only_when_it_reaches_it(share: float, shown: str) -> None:
    assert coverage_text(share) == shown


def test_the_leaderboard_tells_a_coverage_under_the_floor_from_one_at_it() -> None:
    under = ArmRow("m", "families/isolated", "l1", units=36, clusters=36, coverage=0.898,
                   status=STATUS_BELOW_FLOOR)  # fmt: skip
    scored = ArmRow("n", "families/isolated", "l1", units=37, clusters=37, coverage=0.904,
                    status=STATUS_SCORED, profit=Interval(0.1, 0.05, 0.15),
                    at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip
    cells = {row[0]: row for row in leaderboard_cells([under, scored])}
    assert cells["m"][-1] == "89%" and "not scored: coverage 89% ≤ floor" in cells["m"]
    assert cells["n"][-1] == "90%"  # no floor given: a whole percent, rounded down


@pytest.mark.parametrize(
    ("share", "floor", "shown"),
    [(0.9, 0.9, "90%"), (100 / 111, 0.9, "90.09%"), (0.904, 0.9, "90.4%"),
     (0.9001, 0.9, "90.01%"), (0.9 + 2e-9, 0.9, "90.0000002%"), (0.898, 0.9, "89%"),
     (0.9 - 2e-9, 0.9, "89.9%"), (1.0, 0.9, "100%"), (0.996, 0.9, "99%"),
     (0.925, 0.925, "92.5%"), (0.9251, 0.925, "92.51%"), (0.9249, 0.925, "92.4%"),
     (1 / 3, 1 / 3, "33.3334%"), (0.3333334, 1 / 3, "33.33334%"),
     (0.33333, 1 / 3, "33.3330%"), (1.0, 1 / 3, "100.0000%")],
)  # fmt: skip
def test_a_coverage_reads_as_the_floor_only_when_it_is_the_floor(
    share: float, floor: float, shown: str
) -> None:
    """A family arm's model at 100 of 111 (90.09%) is scored, one at exactly the 90% floor
    is not: both read "90%". A share over the floor reads over its text, one under it under,
    one at it as it (the floor of 1/3 is shown rounded up, "33.3334%")."""
    from runs.report.wording import floor_text

    assert coverage_text(share, floor) == shown
    if shown == floor_text(floor):
        assert abs(share - floor) < 1e-10


def test_every_table_tells_a_scored_arm_over_the_floor_from_one_at_it(tmp_path: Path) -> None:
    """The leaderboard (terminal, leaderboard.txt, report.md) and the page: "90%" scored
    beside "not scored: coverage 90% ≤ floor"."""
    from runs.report_page import render_page

    at = ArmRow("m", "families/isolated", "l1", units=110, clusters=110, coverage=0.9,
                status=STATUS_BELOW_FLOOR)  # fmt: skip
    over = ArmRow("n", "families/isolated", "l1", units=111, clusters=111, coverage=100 / 111,
                  status=STATUS_SCORED, profit=Interval(0.1, 0.05, 0.15),
                  at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip
    cells = {row[0]: row for row in leaderboard_cells([at, over], 0.9)}
    assert cells["m"][-1] == "90%" and "not scored: coverage 90% ≤ floor" in cells["m"]
    assert cells["n"][-1] == "90.09%"
    rows = [{"model": r.model, "arm": r.arm, "units": r.units, "coverage": r.coverage,
             "scored": r.scored, "status": r.status,
             "profit": {"mean": 0.1, "lo": 0.05, "hi": 0.15} if r.scored else None}
            for r in (at, over)]  # fmt: skip
    page = render_page({"coverage_floor": 0.9, "rows": rows}, [], tmp_path / "report")
    assert ">90.09%<" in page and "not scored: coverage 90% at or under the floor" in page


def test_a_campaign_of_families_alone_prints_no_empty_baseline_ranking() -> None:
    """Too many models for the terminal's width: the baseline ranking was printed with its
    title alone, and a model of one arm was in no other table."""
    from runs.report.tables import terminal_leaderboard

    rows = [
        ArmRow(f"model-{n:02d}-with-a-long-name", "families/isolated", "l1", units=37,
               clusters=37, coverage=1.0, status=STATUS_SCORED,
               profit=Interval(0.1, 0.05, 0.15), at_least=dict.fromkeys(THRESHOLDS, 3))
        for n in range(12)
    ]  # fmt: skip
    tables = terminal_leaderboard(rows, {r.model: 1.0 for r in rows}, width=80)
    assert all("Baseline" not in str(t.title) for t in tables)
    shown = {str(c.header) for t in tables for c in t.columns}
    assert all(r.model in shown for r in rows), shown


def test_a_model_of_one_arm_other_than_the_baseline_is_in_a_table() -> None:
    """Twelve models on the baseline alone and one on a family arm alone, too wide for the
    terminal: that one was in no table (the others' arms were all the ranking's)."""
    from runs.report.tables import terminal_leaderboard

    def row(model: str, arm: str) -> ArmRow:
        return ArmRow(model, arm, "inf", units=10, clusters=10, coverage=1.0,
                      status=STATUS_SCORED, profit=Interval(0.1, 0.05, 0.15),
                      at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip

    rows = [row(f"model-{n:02d}-with-a-long-name", "baseline") for n in range(12)]
    rows.append(row("families-only-model", "families/isolated"))
    tables = terminal_leaderboard(rows, {r.model: 1.0 for r in rows}, width=80)
    shown = {str(c.header) for t in tables for c in t.columns}
    assert "families-only-model" in shown, shown


@pytest.mark.parametrize(
    ("floor", "floor_shown", "at", "above"),
    [(0.9, "90%", "90%", "92%"), (0.925, "92.5%", "92.5%", "92.9%"),
     (0.9189, "91.89%", "91.89%", "92.91%"), (1 / 3, "33.3334%", "33.3334%", "92.9100%"),
     (68 / 74, "91.8919%", "91.8919%", "92.9100%")],
)  # fmt: skip
def test_a_floor_that_is_no_whole_percent_is_shown_as_it_is_and_coverage_beside_it(
    floor: float, floor_shown: str, at: str, above: str
) -> None:
    """A floor of 92.5% read "92%" (`:.0%`), and a model at 92.9%, scored, "92%" beside it;
    at 68/74 a model exactly at the floor read "91%" under a floor said "92%". A floor that
    needs more than 4 decimals is rounded up, each coverage under it down: one under it never
    reads as equal to it, and one at it reads as the floor's text (it read "91.8918%", under
    a floor said "91.8919%")."""
    from runs.report.tables import floor_sentence
    from runs.report.wording import floor_text

    assert floor_text(floor) == floor_shown
    assert floor_sentence(floor, ["baseline"]) == (
        f"A model under the coverage floor ({floor_shown}) is not scored."
    )
    at_floor = ArmRow("m", "families/isolated", "l1", units=36, clusters=36, coverage=floor,
                      status=STATUS_BELOW_FLOOR)  # fmt: skip
    scored = ArmRow("n", "families/isolated", "l1", units=37, clusters=37, coverage=0.9291,
                    status=STATUS_SCORED, profit=Interval(0.1, 0.05, 0.15),
                    at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip
    cells = {row[0]: row for row in leaderboard_cells([at_floor, scored], floor)}
    assert cells["m"][-1] == at and f"not scored: coverage {at} ≤ floor" in cells["m"]
    assert cells["n"][-1] == above


def test_the_page_shows_the_floor_and_coverage_at_one_precision(tmp_path: Path) -> None:
    from runs.report_page import render_page

    def row(model: str, coverage: float, scored: bool) -> dict[str, object]:
        return {"model": model, "arm": "baseline", "units": 10, "coverage": coverage,
                "scored": scored, "status": "scored" if scored else STATUS_BELOW_FLOOR,
                "profit": {"mean": 0.1, "lo": 0.05, "hi": 0.15} if scored else None}  # fmt: skip

    summary = {"coverage_floor": 0.925, "baseline_arm": "baseline",
               "rows": [row("m", 0.925, False), row("n", 0.9291, True)]}  # fmt: skip
    page = render_page(summary, [], tmp_path / "report")
    assert "coverage floor 92.5%" in page and "92%" not in page
    assert "not scored: coverage 92.5% under the floor" in page
    assert "<td>92.9%</td>" in page or ">92.9%<" in page


def test_families_are_ranked_by_the_arbitrage_free_rate_not_by_profit(tmp_path: Path) -> None:
    """The family benchmark's leaderboard score is the arbitrage-free rate: a model with every
    family at 0.06 (none free) was listed above one 90% free with a higher mean profit, in the
    terminal's table, and the families table was in name order."""
    from runs.report.data import family_section
    from runs.report.tables import terminal_leaderboard
    from runs.report_page import render_page

    def row(model: str, mean: float, free: float | None) -> ArmRow:
        scored = free is not None
        return ArmRow(model, "families/isolated", "l1", units=37, clusters=37,
                      coverage=1.0 if scored else 0.5,
                      status=STATUS_SCORED if scored else STATUS_BELOW_FLOOR,
                      profit=Interval(mean, mean, mean) if scored else None,
                      arbitrage_free=None if free is None else Interval(free, free, free),
                      at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip

    rows = [row("a-steady", 0.06, 0.0), row("b-mostly-free", 0.09, 0.9), row("c-gone", 0, None)]
    assert [f["model"] for f in family_section(rows)] == ["b-mostly-free", "a-steady", "c-gone"]
    named = sorted(family_section(rows), key=lambda f: f["model"])  # as written before
    page = render_page({"families": named, "coverage_floor": 0.9}, [], tmp_path)
    table = page.split("<h2>Question families</h2>", 1)[1]
    assert table.index("b-mostly-free") < table.index("a-steady") < table.index("c-gone")
    assert "locks in at most $0.05, the family benchmark's leaderboard score" in table
    (terminal,) = terminal_leaderboard(rows, {r.model: r.coverage for r in rows}, width=200)
    assert [str(c.header) for c in terminal.columns][1:] == ["b-mostly-free", "a-steady", "c-gone"]


def _data(rows: list[ArmRow], **kw: Any) -> Any:
    """A report's data of `rows` alone (no model compared, no section but `kw`'s)."""
    from runs.report.data import ReportData

    across = {"arm": "baseline", "models": [], "units": 0, "spearman_profit_brier": None,
              "pairs": 0, "profit_pairs_excluding_zero": None,
              "brier_pairs_excluding_zero": None}  # fmt: skip
    settings: dict[str, Any] = {"model_coverage": {r.model: r.coverage for r in rows},
                                "across_models": across, "repeated": None, "families": [],
                                "floor": 0.9, "seed": 7, "reps": 2_000} | kw  # fmt: skip
    return ReportData(rows=rows, **settings)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_leaderboard_txt_defines_its_terms_in_the_pages_words(tmp_path: Path) -> None:
    """leaderboard.txt defined none of its terms where report.md and the page do: units, the
    ">=0.001" columns, the arbitrage-free cut-off, the bootstrap; and its repeated-elicitation
    table did not say its intervals are clustered by date. Its legend is the page's guide,
    the replicates and seed in its intervals' sentence, which the page's header said again
    ("95% intervals from a bootstrap of 2,000 replicates (seed 7) clustered by date")."""
    from runs.report.summary import build_summary
    from runs.report.tables import details_text, report_markdown
    from runs.report.wording import bootstrap_draws, reading_guide
    from runs.report_page import esc, render_page

    base = ArmRow("m", "baseline", "inf", units=6, clusters=3, coverage=1.0,
                  status=STATUS_SCORED, profit=Interval(0.01, 0.005, 0.015),
                  at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip
    by_k = [{"k": k, "mean": 0.01, "lo": 0.005, "hi": 0.015} for k in (1, 2)]
    repeated = [{"model": "m", "arm": "baseline", "passes": 2, "units": 6,
                 "single_pass_mean": 0.011, "by_k": by_k}]  # fmt: skip
    data = _data([base], repeated=repeated)
    text = _flat(details_text(data))
    bootstrap = "95% intervals from a bootstrap of 2,000 replicates (seed 7) clustered by date"
    guide = reading_guide(["baseline"], arbitrage_free=True, draws=bootstrap_draws(2_000, 7))
    assert any("at least t" in item for item in guide)  # the ≥ columns: shares of units
    assert any("at most $0.05" in item for item in guide)  # the arbitrage-free cut-off
    assert any("bootstraps of 2,000 replicates (seed 7)" in item for item in guide)
    for said in [*guide, "A model under the coverage floor (90%) is not scored."]:
        assert _flat(said) in text, said
    assert "over the first k passes (95% intervals clustered by date)" in text
    page = render_page(build_summary(data), [], tmp_path)
    page_guide = reading_guide(["baseline"], draws=bootstrap_draws(2_000, 7))
    assert bootstrap not in page and all(esc(item) in page for item in page_guide)
    assert all(item in report_markdown(data) for item in guide)


def test_ties_are_broken_by_model_name_and_every_table_says_its_order(tmp_path: Path) -> None:
    """In a tie the leaderboard kept the rows' own order, and put another model first than
    the families table did (which breaks ties by name); no table said how it was sorted."""
    from runs.report.data import family_section
    from runs.report.summary import build_summary
    from runs.report.tables import details_text, report_markdown
    from runs.report.wording import (
        ORDER_ARMS,
        ORDER_FAMILIES,
        ORDER_LEADERBOARD,
        ORDER_LINKED,
        ORDER_RANKING,
    )
    from runs.report_page import render_page

    def row(model: str, arm: str) -> ArmRow:
        free = Interval(0.5, 0.3, 0.7) if arm.startswith("families/") else None
        return ArmRow(model, arm, "inf", units=10, clusters=10, coverage=1.0,
                      status=STATUS_SCORED, profit=Interval(0.02, 0.01, 0.03),
                      arbitrage_free=free, at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip

    rows = [row(m, arm) for arm in ("baseline", "families/isolated") for m in ("zeta", "alpha")]
    linked = [{"model": "alpha", "kind": "days", "mean": 0.01, "lo": 0.0, "hi": 0.02,
               "excludes_zero": False, "units": 4}]  # fmt: skip
    data = _data(rows, families=family_section(rows), linked_vs_dispersed=linked)
    first = {arm: next(c[0] for c in leaderboard_cells(rows) if c[1] == arm)
             for arm in ("baseline", "families/isolated")}  # fmt: skip
    assert first == {"baseline": "alpha", "families/isolated": "alpha"}
    assert data.families[0]["model"] == "alpha"  # the families table's rule, the same
    text, md = details_text(data), report_markdown(data)
    assert f"┘\n{ORDER_LEADERBOARD}\n" in text  # under the table
    assert md.count(ORDER_LEADERBOARD) == 1 and md.count(ORDER_FAMILIES) == 1
    assert text.count(ORDER_LINKED) == 1 and md.count(ORDER_LINKED) == 1
    page = render_page(build_summary(data), [], tmp_path)
    for line in (ORDER_RANKING, ORDER_ARMS, ORDER_FAMILIES, ORDER_LINKED):
        assert page.count(f'<p class="meta">{line}</p>') == 1, line


def test_the_legend_says_the_bootstrap_once_with_all_its_facts() -> None:
    """leaderboard.txt's legend, and report.md's opening, explained the bootstrap twice:
    "Intervals are 95% percentile bootstraps that resample whole clusters (dates) ..." and
    "95% intervals from a bootstrap of 2,000 replicates (seed 7) clustered by date". Once
    now, keeping both: the clusters resampled, the replicates and the seed."""
    from runs.report.tables import details_text, legend, report_markdown

    base = ArmRow("m", "baseline", "inf", units=6, clusters=3, coverage=1.0,
                  status=STATUS_SCORED, profit=Interval(0.01, 0.005, 0.015),
                  at_least=dict.fromkeys(THRESHOLDS, 3))  # fmt: skip
    data = _data([base])
    said = ("Intervals are 95% percentile bootstraps of 2,000 replicates (seed 7) that resample "
            "whole clusters (dates); with few clusters they are rough.")  # fmt: skip
    assert [item for item in legend(data) if "bootstrap" in item] == [said]
    for text in (_flat(details_text(data)), _flat(report_markdown(data))):
        assert text.count("bootstrap") == 1 and said in text


def test_the_terminal_shows_the_family_coverage_a_family_arm_is_held_to() -> None:
    """A tester's: the terminal's table said "not scored" for a model on the family arms
    beside "coverage, all arms 94%" with the floor at 90%: that row counts queries, while a
    family arm is held to its share of families answered (80%, which leaderboard.txt shows),
    and the joint arm to the isolated arm's. It now shows each family arm's coverage and the
    floor rule in leaderboard.txt's words."""
    from rich.console import Console

    from runs.report.tables import floor_sentence, terminal_leaderboard

    def row(model: str, arm: str, coverage: float, scored: bool) -> ArmRow:
        return ArmRow(model, arm, "l1", units=10, clusters=10, coverage=coverage,
                      status=STATUS_SCORED if scored else STATUS_BELOW_FLOOR,
                      profit=Interval(0.1, 0.05, 0.15) if scored else None,
                      at_least=dict.fromkeys(THRESHOLDS, 3),
                      below_floor_in=None if scored or arm == "families/isolated"
                      else ("families/isolated", 0.8))  # fmt: skip

    rows = [row("a", "families/isolated", 1.0, True), row("b", "families/isolated", 0.8, False),
            row("a", "families/joint", 1.0, True), row("b", "families/joint", 0.97, False)]
    (table,) = terminal_leaderboard(rows, {"a": 1.0, "b": 0.94}, width=200, floor=0.9)
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(table)
    lines = console.export_text().splitlines()
    shown = [line.replace("│", " ").split() for line in lines]
    assert ["family", "coverage", "100%", "80%"] in shown, lines
    assert ["family", "coverage", "100%", "97%"] in shown, lines
    assert _flat(floor_sentence(0.9, [r.arm for r in rows])) in _flat(" ".join(lines))


def test_the_terminal_adds_no_family_coverage_where_every_family_arm_is_scored() -> None:
    from runs.report.tables import terminal_leaderboard

    rows = [ArmRow("a", "families/isolated", "l1", units=10, clusters=10, coverage=1.0,
                   status=STATUS_SCORED, profit=Interval(0.1, 0.05, 0.15),
                   at_least=dict.fromkeys(THRESHOLDS, 3))]  # fmt: skip
    (table,) = terminal_leaderboard(rows, {"a": 1.0}, width=200, floor=0.9)
    assert table.caption is None and table.row_count == 2  # the arm and its free share


def _family_row(model: str) -> ArmRow:
    return ArmRow(model, "families/isolated", "l1", units=10, clusters=10, coverage=1.0,
                  status=STATUS_SCORED, profit=Interval(0.1, 0.05, 0.15),
                  arbitrage_free=Interval(0.5, 0.2, 0.8), at_least=dict.fromkeys(THRESHOLDS, 3))


def test_a_campaign_without_the_baseline_arm_says_nothing_of_comparing_on_it() -> None:
    """A tester's families-only campaign: leaderboard.txt and report.md said "Across models
    on baseline: 0 scored models, so no pair of models to compare", the leaderboard had an
    empty "vs baseline" column, and across_models.csv a `baseline,,0,...` row, of an arm that
    was never run."""
    from runs.report.tables import csv_tables, details_text, report_markdown

    data = _data([_family_row("a"), _family_row("b")])
    text, md = details_text(data), report_markdown(data)
    for view in (text, md):
        assert "across models" not in view.lower() and "vs baseline" not in view
        assert "arb-free [95% CI]" in view  # the other columns are kept
    header, *rows = csv_tables(data)["across_models.csv"].splitlines()
    assert header.startswith("arm,models,units,") and rows == []


def test_a_campaign_with_the_baseline_arm_keeps_its_comparison() -> None:
    """The baseline arm run (its models unscored here): the sentence and the CSV row stay,
    and the vs-baseline column where a row has a value."""
    from runs.report.tables import csv_tables, details_text, report_markdown

    base = ArmRow("a", "baseline", "inf", units=10, clusters=10, coverage=0.5,
                  status=STATUS_BELOW_FLOOR)  # fmt: skip
    data = _data([base, _family_row("a")])
    for view in (details_text(data), report_markdown(data)):
        assert "no pair of models to compare" in view and "vs baseline" not in view
    assert len(csv_tables(data)["across_models.csv"].splitlines()) == 2
    paired = replace(_family_row("b"), vs_baseline=Interval(0.01, 0.0, 0.02))
    assert "vs baseline" in details_text(_data([base, _family_row("a"), paired]))


def test_the_page_leaves_out_an_empty_vs_baseline_column(tmp_path: Path) -> None:
    """The page's "Every arm and model" table had the same empty column as leaderboard.txt."""
    from runs.report_page import render_page

    rows = [_family_row("a").to_json(), _family_row("b").to_json()]
    page = render_page({"rows": rows, "coverage_floor": 0.9}, [], tmp_path)
    table = page.split("<h2>Every arm and model</h2>", 1)[1]
    assert "arbitrage-free [95% CI]" in table and "vs baseline" not in table
    rows[1]["vs_baseline"] = {"mean": 0.01, "lo": 0.0, "hi": 0.02}
    assert "vs baseline" in render_page({"rows": rows, "coverage_floor": 0.9}, [], tmp_path)
