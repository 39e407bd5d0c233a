"""The leaderboard's text: coverage rounded down to a whole percent, and no empty ranking.

Rounded to the nearest, a family arm at 89.8% read "90%", as an unscored one at exactly the
floor did and a scored one at 90.4%: the table said "not scored: coverage 90% ≤ floor" beside
a scored "90%". And 99.6% read "100%" with answers missing.
"""

from __future__ import annotations

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
    assert cells["n"][-1] == "90%"


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
