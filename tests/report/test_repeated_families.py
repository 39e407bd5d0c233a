"""Repeated elicitation counts families as the leaderboard does: one asked in part in any of
the first k passes is unanswered after k passes.

Its k-pass profits were solved on the statements answered: a family with a statement dropped
lost the constraints tying it to the others, and a dropped call read as coherence (sim-noisy's
brisbane-2032-golds, one of its two statements answered in a pass, scored 0.0 there against
0.1111 whole), in summary.json, the leaderboard's table, figure 7 and the terminal's line.
"""

from __future__ import annotations

import math

import polars as pl

from runs.report.data import STATUS_SCORED, ArmRow
from runs.report.repeated import repeated_section, whole_families_averaged
from scoring.stats import Interval


def _averaged() -> pl.DataFrame:
    rows = [
        # (arm, unit, k, profit): two families over two passes, and a paper arm's set
        ("families/isolated", "a", 1, 0.0), ("families/isolated", "a", 2, 0.05),
        ("families/isolated", "b", 1, 0.0), ("families/isolated", "b", 2, 0.0),
        ("families/isolated", "c", 1, 0.2), ("families/isolated", "c", 2, 0.1),
        ("baseline", "d", 1, 0.01), ("baseline", "d", 2, 0.02),
    ]  # fmt: skip
    return pl.DataFrame(
        {
            "model": ["m"] * len(rows),
            "arm": [r[0] for r in rows],
            "unit": [r[1] for r in rows],
            "set": ["family" if r[0] != "baseline" else "h1" for r in rows],
            "cluster": ["2030-01-01"] * len(rows),
            "norm": ["l1" if r[0] != "baseline" else "sup" for r in rows],
            "k": pl.Series([r[2] for r in rows], dtype=pl.Int32),
            "profit": [r[3] for r in rows],
        }
    )


def _scores() -> pl.DataFrame:
    rows = [
        # (arm, unit, pass, coverage): a whole in pass 0 and asked in part in pass 1, b in
        # part in pass 0, c whole in both; the paper arm's set partly answered in pass 0
        ("families/isolated", "a", 0, 1.0), ("families/isolated", "a", 1, 0.5),
        ("families/isolated", "b", 0, 0.5), ("families/isolated", "b", 1, 1.0),
        ("families/isolated", "c", 0, 1.0), ("families/isolated", "c", 1, 1.0),
        ("baseline", "d", 0, 0.5), ("baseline", "d", 1, 1.0),
    ]  # fmt: skip
    return pl.DataFrame(
        {
            "model": ["m"] * len(rows),
            "arm": [r[0] for r in rows],
            "unit": [r[1] for r in rows],
            "pass": [r[2] for r in rows],
            "set": ["family" if r[0] != "baseline" else "h1" for r in rows],
            "coverage": [r[3] for r in rows],
        }
    )


def test_a_family_asked_in_part_in_the_first_k_passes_is_unanswered_after_k() -> None:
    kept = whole_families_averaged(_averaged(), _scores())
    got = {(u, k): p for u, k, p in kept.select("unit", "k", "profit").iter_rows()}
    assert got[("a", 1)] == 0.0 and math.isnan(got[("a", 2)])  # part in pass 1: k = 2 on
    assert math.isnan(got[("b", 1)]) and math.isnan(got[("b", 2)])  # part in pass 0: all k
    assert (got[("c", 1)], got[("c", 2)]) == (0.2, 0.1)  # whole: as solved
    assert (got[("d", 1)], got[("d", 2)]) == (0.01, 0.02)  # a paper arm: its answered events
    assert kept.columns == _averaged().columns and kept["unit"].to_list() == list("aabbccdd")


def test_the_section_averages_only_whole_families() -> None:
    row = ArmRow("m", "families/isolated", "l1", units=3, clusters=1, coverage=1.0,
                 status=STATUS_SCORED, profit=Interval(0.1, 0.0, 0.2))  # fmt: skip
    [section] = [
        s for s in repeated_section(_averaged(), [row], seed=1, reps=50, scores=_scores())
        if s["arm"] == "families/isolated"
    ]
    by_k = {entry["k"]: entry["mean"] for entry in section["by_k"]}
    assert by_k[1] == (0.0 + 0.2) / 2  # a and c (b asked in part in pass 0)
    assert by_k[2] == 0.1  # c alone
    assert section["units"] == 2  # a and c: b is unanswered after every k
