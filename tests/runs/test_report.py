"""The campaign report's statistics, checked on synthetic scores whose answers are known.

Expected values come from hand arithmetic, scipy (Spearman, an independent LP) or direct
calls on hand-built vectors, never from the report itself.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from scipy import optimize
from scipy import stats as scipy_stats

from runs.report import (
    SCHEMA,
    incidence_from_units,
    repeated_elicitation,
    write_report,
)
from runs.report_page import render_page
from runs.scoring_step import AVERAGED_SCHEMA, FORECAST_SCHEMA, SCORE_SCHEMA
from scoring import dutch_books, stats

REPS = 1_000
COMPLEMENT = np.array([[1, 0], [0, 1]], dtype=np.uint8)  # events A, not-A over atoms {A, ¬A}


def row(
    model: str,
    arm: str,
    unit: str,
    pass_: int,
    profit: float,
    *,
    brier: float | None = None,
    cluster: str | None = None,
    set_: str = "h1",
    coverage: float = 1.0,
    events: Sequence[str] = ("A", "notA"),
) -> dict[str, Any]:
    return {
        "model": model,
        "arm": arm,
        "unit": unit,
        "pass": pass_,
        "set": set_,
        "cluster": cluster if cluster is not None else unit.split(":")[0],
        "norm": "l1" if arm.startswith("families/") else "inf",
        "profit": profit,
        "coverage": coverage,
        "events": list(events),
        "stakes": [],
        "coherent": [],
        "brier": brier,
        "answered": len(events),
    }


def frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCORE_SCHEMA)


def report(tmp_path: Path, scores: pl.DataFrame, **kw: Any) -> tuple[dict[str, Any], str]:
    out = StringIO()
    console = Console(file=out, width=200, color_system=None)
    kw.setdefault("figures", False)
    summary = write_report(tmp_path, scores, floor=0.9, seed=3, reps=REPS, console=console, **kw)
    return summary, out.getvalue()


def cell(summary: dict[str, Any], model: str, arm: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        r for r in summary["rows"] if r["model"] == model and r["arm"] == arm
    ]
    assert len(found) == 1
    return found[0]


UNITS = [f"2025-01-0{d}:{s}" for d in (1, 2, 3) for s in ("AAA", "BBB")]


def test_profit_is_pass_averaged_per_unit_with_a_date_clustered_interval(tmp_path: Path) -> None:
    pass0 = [0.0, 0.002, 0.004, 0.006, 0.012, 0.0008]
    pass1 = [0.0, 0.004, 0.006, float("nan"), 0.010, 0.0012]  # a NaN pass is left out
    briers = [0.20, 0.22, 0.18, 0.25, 0.21, 0.19]
    scores = frame(
        [
            row("m", "baseline", u, 0, p, brier=b)
            for u, p, b in zip(UNITS, pass0, briers, strict=True)
        ]
        + [
            row("m", "baseline", u, 1, p, brier=b)
            for u, p, b in zip(UNITS, pass1, briers, strict=True)
        ]
    )
    summary, _ = report(tmp_path, scores)
    got = cell(summary, "m", "baseline")
    per_unit = np.array([0.0, 0.003, 0.005, 0.006, 0.011, 0.001])
    dates = np.array([u.split(":")[0] for u in UNITS])
    assert got["status"] == "scored" and got["units"] == 6 and got["clusters"] == 3
    assert got["profit"]["mean"] == pytest.approx(per_unit.mean())
    expected = stats.cluster_bootstrap_mean(per_unit, dates, reps=REPS, seed=3)
    assert got["profit"]["lo"] == pytest.approx(expected.lo)
    assert got["profit"]["hi"] == pytest.approx(expected.hi)
    assert got["profit"]["lo"] < got["profit"]["mean"] < got["profit"]["hi"]
    # the paper's 4.1 counts: >= 0.001 (five units), >= 0.005 (three), >= 0.01 (one)
    assert got["at_least"]["0.001"] == {"units": 5, "share": pytest.approx(5 / 6)}
    assert got["at_least"]["0.005"]["units"] == 3
    assert got["at_least"]["0.01"]["units"] == 1
    assert got["brier"]["mean"] == pytest.approx(np.mean(briers))
    assert got["brier"]["lo"] <= np.mean(briers) <= got["brier"]["hi"]
    assert got["vs_baseline"] is None and got["arbitrage_free"] is None


def test_other_arms_are_paired_with_the_baseline_on_the_same_units(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 0.01, len(UNITS))
    scores = frame(
        [row("m", "baseline", u, 0, p) for u, p in zip(UNITS, base, strict=True)]
        + [row("m", "statistics", u, 0, p + 0.002) for u, p in zip(UNITS, base, strict=True)]
        + [row("m", "identity", u, 0, p) for u, p in zip(UNITS[:4], base[:4], strict=True)]
    )
    summary, _ = report(tmp_path, scores)
    shifted = cell(summary, "m", "statistics")["vs_baseline"]
    assert shifted["mean"] == pytest.approx(0.002)
    assert shifted["lo"] == pytest.approx(0.002) and shifted["hi"] == pytest.approx(0.002)
    assert shifted["excludes_zero"] is True and shifted["units"] == 6
    same = cell(summary, "m", "identity")["vs_baseline"]
    assert same["units"] == 4 and same["excludes_zero"] is False
    assert same["mean"] == pytest.approx(0.0, abs=1e-15)


def test_a_baseline_not_scored_enters_no_comparison(tmp_path: Path) -> None:
    """A referee: the baseline read 'not scored: coverage 89% < floor' while other arms still
    showed 'vs baseline' differences against it (and figure 4 drew them)."""
    base = np.linspace(0.001, 0.006, len(UNITS))
    scores = frame(
        [row("m", "baseline", u, 0, p, coverage=0.85) for u, p in zip(UNITS, base, strict=True)]
        + [row("m", "statistics", u, 0, p + 0.002) for u, p in zip(UNITS, base, strict=True)]
    )
    summary, _ = report(tmp_path, scores)
    assert cell(summary, "m", "baseline")["scored"] is False
    statistics = cell(summary, "m", "statistics")
    assert statistics["scored"] is True and statistics["vs_baseline"] is None


def test_joint_events_are_compared_with_their_marginals_not_the_baseline(
    tmp_path: Path,
) -> None:
    """A referee: 'horizon/2 full' (52 events) was paired with the 14-event baseline, which a
    larger set can only exceed; the paper compares within a horizon, joint events against the
    marginals alone (Figure 3, footnote 3; section 4.3's two-asset 'average increase')."""
    base = np.linspace(0.001, 0.006, len(UNITS))
    rows = [row("m", "baseline", u, 0, p) for u, p in zip(UNITS, base, strict=True)]
    for set_, shift in (("full", 0.004), ("marginals", 0.001), ("d1", 0.0005)):
        rows += [row("m", "horizon/2", u, 0, p + shift, set_=set_)
                 for u, p in zip(UNITS, base, strict=True)]
    summary, _ = report(tmp_path, frame(rows))
    full = cell(summary, "m", "horizon/2 full")
    assert full["vs_baseline"] is None
    assert full["vs_marginals"]["mean"] == pytest.approx(0.003)
    assert full["vs_marginals"]["units"] == 6 and full["vs_marginals"]["excludes_zero"] is True
    marginals = cell(summary, "m", "horizon/2 marginals")
    assert marginals["vs_baseline"] is None and marginals["vs_marginals"] is None
    day = cell(summary, "m", "horizon/2 d1")
    assert day["vs_baseline"]["mean"] == pytest.approx(0.0005) and day["vs_marginals"] is None
    written = (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    assert "+0.00300 [+0.00300, +0.00300] vs marginals" in written
    lines = (tmp_path / "report" / "leaderboard.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    assert header[-5:-1] == ["vs_marginals", "vs_marginals_lo", "vs_marginals_hi", "below_floor_in"]
    full_line = next(line for line in lines if ",horizon/2 full," in line).split(",")
    assert float(full_line[header.index("vs_marginals")]) == pytest.approx(0.003)


def test_across_models_spearman_and_pairwise_counts(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    unit_profit = rng.uniform(0, 0.01, len(UNITS))
    unit_brier = rng.uniform(0.15, 0.25, len(UNITS))
    # profit offsets: a and b identical (1 pair not significant, 5 of 6 are);
    # Brier offsets: a = b and c = d (2 pairs not significant, 4 of 6 are)
    profit_shift = {"a": 0.0, "b": 0.0, "c": 0.01, "d": 0.03}
    brier_shift = {"a": 0.0, "b": 0.0, "c": 0.02, "d": 0.02}
    rows = [
        row(m, "baseline", u, 0, p + profit_shift[m], brier=b + brier_shift[m])
        for m in profit_shift
        for u, p, b in zip(UNITS, unit_profit, unit_brier, strict=True)
    ]
    # a fifth model under the coverage floor must not enter any cross-model statistic
    rows += [row("low", "baseline", u, 0, 0.5, brier=0.9, coverage=0.5) for u in UNITS]
    summary, text = report(tmp_path, frame(rows))
    across = summary["across_models"]
    assert across["models"] == ["a", "b", "c", "d"]
    assert across["units"] == 6 and across["pairs"] == 6
    assert across["profit_pairs_excluding_zero"] == 5
    assert across["brier_pairs_excluding_zero"] == 4
    means_p = [unit_profit.mean() + profit_shift[m] for m in "abcd"]
    means_b = [unit_brier.mean() + brier_shift[m] for m in "abcd"]
    expected = scipy_stats.spearmanr(means_p, means_b).statistic
    assert across["spearman_profit_brier"] == pytest.approx(expected)
    assert "profit 5/6, Brier 4/6" in text


def test_pairs_beyond_the_limit_are_said_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,000 models made 4.5 million pairs, whose bootstrap samples ran a tester's report out
    of memory. Over `MAX_PAIRS` the counts are null, and every view says why."""
    import runs.report.data

    monkeypatch.setattr(runs.report.data, "MAX_PAIRS", 5)  # four models make six pairs
    rows = [row(m, "baseline", u, 0, 0.01, brier=0.2) for m in "abcd" for u in UNITS]
    summary, text = report(tmp_path, frame(rows))
    across = summary["across_models"]
    assert across["pairs"] == 6
    assert across["profit_pairs_excluding_zero"] is None is across["brier_pairs_excluding_zero"]
    said = "6 pairs of models, over the limit of 5 (each a bootstrap of"
    # the terminal's line wraps (it now says too why the tied models have no Spearman)
    assert said in across["pairs_not_counted"] and said in " ".join(text.split())
    assert across["pairs_not_counted"].endswith("): none counted") and across["units"] is None
    assert said in (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")


def _good_and_flaky_families() -> list[dict[str, Any]]:
    """Five families answered by "good" (three arbitrage-free) and by "flaky", which answered
    only 60% of its questions: its large profits must not show as incoherence."""
    fams = [f"fam{i}" for i in range(5)]
    rows = [
        row("good", "families/isolated", f, 0, p, cluster=f, set_="family")
        for f, p in zip(fams, [0.0, 0.05, 0.06, 0.2, 0.01], strict=True)
    ]
    return rows + [
        row("flaky", "families/isolated", f, 0, 0.9, cluster=f, set_="family", coverage=0.6)
        for f in fams
    ]


def test_under_the_coverage_floor_a_model_is_not_scored_never_incoherent(tmp_path: Path) -> None:
    rows = _good_and_flaky_families()
    rows += [row("flaky", "baseline", u, 0, 0.3, coverage=0.6) for u in UNITS]
    summary, text = report(tmp_path, frame(rows))
    good = cell(summary, "good", "families/isolated")
    # 0.0, 0.05 (at most 5 cents counts) and 0.01 are arbitrage-free: 3 of 5
    assert good["arbitrage_free"]["mean"] == pytest.approx(0.6)
    assert 0.0 <= good["arbitrage_free"]["lo"] <= 0.6 <= good["arbitrage_free"]["hi"] <= 1.0
    flaky = cell(summary, "flaky", "families/isolated")
    assert flaky["status"] == "below_coverage_floor" and flaky["scored"] is False
    assert flaky["profit"] is None and flaky["arbitrage_free"] is None
    assert flaky["at_least"] is None and flaky["coverage"] == 0.0  # no family whole
    fam = {(f["model"], f["arm"]): f for f in summary["families"]}
    assert fam[("flaky", "families/isolated")]["scored"] is False
    assert fam[("flaky", "families/isolated")]["arbitrage_free"] is None
    assert fam[("good", "families/isolated")]["arbitrage_free"]["mean"] == pytest.approx(0.6)
    assert "coverage floor" in fam[("good", "families/isolated")]["rule"]
    assert summary["across_models"]["models"] == []
    assert "not scored" in text and "0.9000" not in text


def test_every_families_csv_row_has_every_column_of_its_header(tmp_path: Path) -> None:
    """The header named the vs_marginals columns, but each row stopped after
    arbitrage_free_hi: 8 cells under 11 names, which a reader keyed by header misread."""
    report(tmp_path, frame(_good_and_flaky_families()))
    text = (tmp_path / "report" / "families.csv").read_text(encoding="utf-8")
    header, *lines = list(csv.reader(StringIO(text)))
    assert header[8:11] == ["vs_marginals", "vs_marginals_lo", "vs_marginals_hi"]
    assert header[11:] == [  # added after them: a reader of the old columns reads them still
        *(f"{kind}_{col}" for kind in ("future", "controls")
          for col in ("families", "arbitrage_free", "arbitrage_free_lo", "arbitrage_free_hi")),
        "below_floor_in",
        "simulated",
    ]  # fmt: skip
    assert len(lines) == 2
    assert all(len(line) == len(header) for line in lines)
    by_model = {line[0]: dict(zip(header, line, strict=True)) for line in lines}
    assert float(by_model["good"]["arbitrage_free"]) == pytest.approx(0.6)
    assert by_model["flaky"]["arbitrage_free"] == ""
    assert by_model["good"]["vs_marginals"] == ""  # a family arm has no marginals row


def test_family_profit_is_averaged_over_passes_before_the_five_cent_rule(tmp_path: Path) -> None:
    rows = [
        row("m", "families/joint", "f1", 0, 0.04, cluster="f1", set_="family"),
        row("m", "families/joint", "f1", 1, 0.08, cluster="f1", set_="family"),  # mean 0.06
        row("m", "families/joint", "f2", 0, 0.0, cluster="f2", set_="family"),
        row("m", "families/joint", "f2", 1, 0.02, cluster="f2", set_="family"),
    ]
    summary, _ = report(tmp_path, frame(rows))
    assert cell(summary, "m", "families/joint")["arbitrage_free"]["mean"] == pytest.approx(0.5)


def complement_frames(
    answers: dict[tuple[str, int], tuple[float, float]], model: str = "m"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Scores and forecasts of a complement pair; its sup-norm profit is |pA + p¬A - 1| / 2."""
    scores, forecasts = [], []
    for (unit, pass_), (pa, pn) in answers.items():
        scores.append(row(model, "baseline", unit, pass_, abs(pa + pn - 1) / 2))
        forecasts += [
            {"model": model, "arm": "baseline", "unit": unit, "pass": pass_, "event": e, "p": p}
            for e, p in (("A", pa), ("notA", pn))
        ]
    return frame(scores), pl.DataFrame(forecasts, schema=FORECAST_SCHEMA)


def complement_incidence(arm: str, unit: str, set_name: str, events: Sequence[str]) -> Any:
    assert list(events) == ["A", "notA"]
    return COMPLEMENT


def test_repeated_elicitation_averages_answers_before_solving(tmp_path: Path) -> None:
    answers = {
        ("2025-01-01:AAA", 0): (0.6, 0.6),  # 0.1
        ("2025-01-01:AAA", 1): (0.3, 0.5),  # 0.1; averaged (0.45, 0.55): 0
        ("2025-01-02:AAA", 0): (0.7, 0.5),  # 0.1
        ("2025-01-02:AAA", 1): (0.7, 0.1),  # 0.1; averaged (0.7, 0.3): 0
        ("2025-01-03:AAA", 0): (0.5, 0.7),  # 0.1
        ("2025-01-03:AAA", 1): (0.5, 0.9),  # 0.2; averaged (0.5, 0.8): 0.15
    }
    scores, forecasts = complement_frames(answers)
    summary, text = report(
        tmp_path, scores, forecasts=forecasts, incidence_for=complement_incidence
    )
    (rep,) = summary["repeated_elicitation"]
    assert rep["passes"] == 2 and rep["units"] == 3
    assert rep["single_pass_mean"] == pytest.approx((0.1 + 0.1 + 0.15) / 3)
    assert [k["k"] for k in rep["by_k"]] == [1, 2]
    assert rep["by_k"][0]["mean"] == pytest.approx(0.1)
    assert rep["by_k"][1]["mean"] == pytest.approx(0.05)
    assert rep["by_k"][-1]["mean"] <= rep["single_pass_mean"]  # convexity
    assert "lowers mean profit in 1 of 1" in text


def test_repeated_elicitation_reads_forecasts_from_the_run_folder(tmp_path: Path) -> None:
    answers = {(u, p): (0.5 + 0.1 * p, 0.6) for u in UNITS for p in range(3)}
    scores, forecasts = complement_frames(answers)
    forecasts.write_parquet(tmp_path / "forecasts.parquet")
    summary, _ = report(tmp_path, scores, incidence_for=complement_incidence)
    (rep,) = summary["repeated_elicitation"]
    # pA over the first k passes: 0.5, 0.55, 0.6 -> profit |pA + 0.6 - 1| / 2
    assert [k["mean"] for k in rep["by_k"]] == pytest.approx([0.05, 0.075, 0.1])
    # without an incidence callback the section is absent, not empty
    summary, _ = report(tmp_path, scores)
    assert summary["repeated_elicitation"] is None


# Three atoms; events: the atoms, the union of the first two, and the certain event.
PANEL = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]], dtype=np.uint8)


def sup_distance(incidence: np.ndarray, p: np.ndarray) -> float:
    """Independent LP: min t s.t. |M pi - p| <= t, pi in the simplex (scipy, not HiGHS via us)."""
    incidence = incidence.astype(float)
    n, m = incidence.shape
    c = np.r_[np.zeros(m), 1.0]
    a_ub = np.block([[incidence, -np.ones((n, 1))], [-incidence, -np.ones((n, 1))]])
    b_ub = np.r_[p, -p]
    a_eq = np.r_[np.ones(m), 0.0][None, :]
    res = optimize.linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=(0, None))
    assert res.success
    return float(res.fun)


@settings(deadline=None)
@given(
    st.lists(
        st.lists(st.floats(0, 1), min_size=PANEL.shape[0], max_size=PANEL.shape[0]),
        min_size=2,
        max_size=4,
    )
)
def test_averaging_over_passes_never_raises_profit(passes: list[list[float]]) -> None:
    ids = [f"e{i}" for i in range(PANEL.shape[0])]
    probs = np.array(passes)
    single = dutch_books(PANEL, probs).profit
    scores = frame(
        [
            row("m", "baseline", "2025-01-01:AAA", k, float(single[k]), events=ids)
            for k in range(len(passes))
        ]
    )
    forecasts = pl.DataFrame(
        [
            {
                "model": "m",
                "arm": "baseline",
                "unit": "2025-01-01:AAA",
                "pass": k,
                "event": e,
                "p": float(probs[k, i]),
            }
            for k in range(len(passes))
            for i, e in enumerate(ids)
        ],
        schema=FORECAST_SCHEMA,
    )
    from runs.report import build_rows

    rows = build_rows(scores, {}, floor=0.9, seed=0, reps=50)
    (rep,) = repeated_elicitation(scores, forecasts, lambda *a: PANEL, rows, seed=0, reps=50)
    by_k = [k["mean"] for k in rep["by_k"]]
    for k, got in enumerate(by_k, start=1):
        assert got == pytest.approx(sup_distance(PANEL, probs[:k].mean(axis=0)), abs=1e-7)
        assert got <= single[:k].mean() + 1e-9
    assert rep["single_pass_mean"] == pytest.approx(single.mean())


def test_summary_json_has_the_documented_shape_and_no_nan(tmp_path: Path) -> None:
    scores = frame(
        [row("m", "baseline", u, 0, 0.001 * i) for i, u in enumerate(UNITS)]  # no outcomes
        + [row("m", "statistics", u, 0, float("nan"), coverage=0.0) for u in UNITS]
    )
    summary, _ = report(tmp_path, scores)
    text = (tmp_path / "report" / "summary.json").read_text()

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in summary.json")

    on_disk = json.loads(text, parse_constant=no_constants)
    assert on_disk == summary
    assert set(on_disk) == {
        "schema", "coverage_floor", "bootstrap_replicates", "seed", "level", "baseline_arm",
        "thresholds", "arbitrage_free_cents", "rows", "models", "across_models",
        "repeated_elicitation", "families", "linked_vs_dispersed", "figures", "audit_sentence",
        "provenance",
    }  # fmt: skip
    assert on_disk["schema"] == SCHEMA and on_disk["bootstrap_replicates"] == REPS
    base = cell(on_disk, "m", "baseline")
    assert set(base) == {
        "model", "arm", "norm", "status", "scored", "coverage", "units", "clusters", "profit",
        "brier", "at_least", "arbitrage_free", "vs_baseline", "vs_marginals", "below_floor_in",
    }  # fmt: skip
    assert base["brier"] is None  # no outcomes: null, not NaN
    empty = cell(on_disk, "m", "statistics")
    assert empty["status"] == "no_answers" and empty["profit"] is None
    assert on_disk["across_models"]["spearman_profit_brier"] is None
    assert on_disk["models"] == {
        "m": {"coverage": pytest.approx(0.5), "provider": None, "simulated": False,
              "simulator_replies": None}
    }  # no spec.toml: its provider unknown; no attempt named a model
    # one row not scored (the legend says the rule: "... is not scored.")
    assert (tmp_path / "report" / "leaderboard.txt").read_text().count("not scored:") == 1


def test_terminal_output_is_the_table_and_a_few_lines(tmp_path: Path) -> None:
    rows = [
        row(m, "baseline", u, 0, 0.001 * i + s, brier=0.2 + s)
        for m, s in (("a", 0.0), ("b", 0.01), ("c", 0.02))
        for i, u in enumerate(UNITS)
    ]
    _, text = report(tmp_path, frame(rows))
    after_table = text.split("└")[-1].strip().splitlines()[1:]
    assert 1 <= len(after_table) <= 3
    assert "Spearman(profit, Brier) 1.000" in after_table[0]


@pytest.mark.figures
def test_figures_are_drawn_when_matplotlib_is_there(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [
        row(m, arm, u, 0, 0.002 * (i + 1) * (1 + s) + 0.001 * j, brier=0.2 + 0.01 * i)
        for m, s in (("a", 0), ("b", 1))
        for j, arm in enumerate(("baseline", "statistics"))
        for i, u in enumerate(UNITS)
    ]
    summary, _ = report(tmp_path, frame(rows), figures=True)
    figures = summary["figures"]
    assert figures["profit_brier"] == figures["leaderboard"] == "report/fig2_leaderboard.png"
    assert figures["arms"] == "report/fig4_arms.png"
    assert figures["note"] is None
    # Without the run's scores and forecasts on disk, the Dutch books cannot be drawn.
    assert figures["books"] is None
    for name in ("fig2_leaderboard.png", "fig4_arms.png"):
        assert (tmp_path / "report" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.figures
def test_without_matplotlib_the_report_notes_it_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now raises ImportError
    rows = [row("a", "baseline", u, 0, 0.001) for u in UNITS]
    summary, text = report(tmp_path, frame(rows), figures=True)
    assert summary["figures"]["profit_brier"] is None and summary["figures"]["arms"] is None
    assert "matplotlib is not installed" in summary["figures"]["note"]
    assert "matplotlib is not installed" in text
    assert not (tmp_path / "report" / "fig4_arms.png").exists()


def test_incidence_from_units_gives_each_scoring_sets_matrix() -> None:
    from panels.arms import ARMS
    from runs.spec import load_spec
    from runs.units import UnitSource

    spec = load_spec(Path(__file__).parents[2] / "runs" / "specs" / "quickstart.toml")
    units = UnitSource.from_spec(spec)
    unit = units.for_arm(ARMS["baseline"])[0]
    (scoring_set,) = ARMS["baseline"].scoring_sets(unit)
    events = list(scoring_set.event_ids)
    incidence = incidence_from_units(units)("baseline", unit.id, scoring_set.name, events)
    assert incidence.shape[0] == len(events) == 14
    # a point mass on any atom is coherent; every atom is a distinct signature
    assert len({tuple(col) for col in incidence.T}) == incidence.shape[1]
    point = incidence[:, 0].astype(float)
    assert dutch_books(incidence, point).profit[0] == pytest.approx(0.0, abs=1e-9)
    assert dutch_books(incidence, np.full(len(events), 0.5)).profit[0] > 0.01


def test_multi_set_arms_report_each_kind_of_set_on_its_own_row(tmp_path: Path) -> None:
    units = UNITS[:4]
    rows = []
    for u in units:
        rows += [
            row("m", "horizon/2", u, 0, 0.01, set_="d1"),
            row("m", "horizon/2", u, 0, 0.05, set_="full"),
            row("m", "linked", u, 0, 0.02, set_="linked/A/B0"),
            row("m", "linked", u, 0, 0.04, set_="linked/B/B1"),
            row("m", "linked", u, 0, 0.30, set_="linked/d1/c0o1/B2sB3d"),
        ]
    summary, _ = report(tmp_path, frame(rows))
    assert cell(summary, "m", "horizon/2 d1")["profit"]["mean"] == pytest.approx(0.01)
    assert cell(summary, "m", "horizon/2 full")["profit"]["mean"] == pytest.approx(0.05)
    # the eight two-asset sets of a unit are averaged together, apart from the two-day ones
    assert cell(summary, "m", "linked (assets)")["profit"]["mean"] == pytest.approx(0.03)
    assert cell(summary, "m", "linked (days)")["profit"]["mean"] == pytest.approx(0.30)
    assert {r["arm"] for r in summary["rows"]} == {
        "horizon/2 d1",
        "horizon/2 full",
        "linked (assets)",
        "linked (days)",
    }


def test_the_terminal_table_fits_many_models_by_ranking_them_on_the_baseline(
    tmp_path: Path,
) -> None:
    models = [f"model-{i:02d}" for i in range(15)]
    rows = [
        row(m, "baseline", u, 0, 0.001 * (i + 1) + 0.0001 * k)
        for i, m in enumerate(models)
        for k, u in enumerate(UNITS)
    ]
    rows += [row("model-03", "full-panel", u, 0, 0.0005) for u in UNITS]
    out = StringIO()
    summary = write_report(
        tmp_path,
        frame(rows),
        floor=0.9,
        seed=3,
        reps=REPS,
        figures=False,
        console=Console(file=out, width=80, color_system=None),
    )
    text = out.getvalue()
    assert "…" not in text.split("Mean arbitrage profit")[0]  # names and numbers not cut
    ranking = [line.split("│")[1].strip() for line in text.splitlines() if "│ model-" in line]
    assert ranking[:15] == models  # ranked by baseline profit, most coherent first
    assert "full-panel" in text  # the model with several arms gets its arms table
    assert len(summary["rows"]) == 16

    few = StringIO()
    write_report(
        tmp_path,
        frame(rows[: len(UNITS) * 2]),
        floor=0.9,
        seed=3,
        reps=REPS,
        figures=False,
        console=Console(file=few, width=80, color_system=None),
    )
    assert "Baseline arm: models ranked" not in few.getvalue()  # two models fit side by side


def test_no_model_is_dropped_when_the_arms_table_is_split(tmp_path: Path) -> None:
    models = [f"simulated-model-{i}" for i in range(5)]
    rows = [
        row(m, arm, u, 0, 0.001 * (i + 1))
        for i, m in enumerate(models)
        for arm in ("baseline", "full-panel")
        for u in UNITS
    ]
    out = StringIO()
    write_report(
        tmp_path,
        frame(rows),
        floor=0.9,
        seed=3,
        reps=REPS,
        figures=False,
        console=Console(file=out, width=80, color_system=None),
    )
    arms_tables = out.getvalue().split("Mean arbitrage profit per unit stake", 1)[1]
    for m in models:
        assert m in arms_tables, m
    assert "…" not in out.getvalue()


def test_every_table_is_also_written_as_csv_and_markdown(tmp_path: Path) -> None:
    rows = [
        row(m, arm, u, 0, 0.001 * i + s, brier=0.2 + s)
        for m, s in (("a", 0.0), ("b", 0.01), ("c", 0.02))
        for arm in ("baseline", "statistics")
        for i, u in enumerate(UNITS)
    ]
    summary, _ = report(tmp_path, frame(rows))
    out = tmp_path / "report"
    board = pl.read_csv(out / "leaderboard.csv")
    assert board.height == len(summary["rows"]) == 6
    for r in summary["rows"]:
        got = board.filter((pl.col("model") == r["model"]) & (pl.col("arm") == r["arm"]))
        assert got["profit"][0] == pytest.approx(r["profit"]["mean"])
        assert got["profit_lo"][0] == pytest.approx(r["profit"]["lo"])
        assert got["brier_hi"][0] == pytest.approx(r["brier"]["hi"])
        if r["vs_baseline"] is None:
            assert got["vs_baseline"][0] is None
        else:
            assert got["vs_baseline"][0] == pytest.approx(r["vs_baseline"]["mean"])
    across = pl.read_csv(out / "across_models.csv")
    assert across["spearman_profit_brier"][0] == pytest.approx(
        summary["across_models"]["spearman_profit_brier"]
    )
    assert pl.read_csv(out / "models.csv")["model"].to_list() == ["a", "b", "c"]
    assert not (out / "repeated_elicitation.csv").exists()  # section not computed
    markdown = (out / "report.md").read_text()
    assert markdown.count("\n| a | baseline |") == 1
    assert "profit [95% CI, date-clustered]" in markdown
    assert "Spearman(profit, Brier) = 1.0000" in markdown


def _by_k_one_at_a_time(
    averaged: pl.DataFrame, model: str, seed: int, reps: int
) -> list[dict[str, Any]]:
    """The repeated-elicitation curve as computed before its k were resampled together (issue
    12): per k, the rows of that k, their units' mean profit, one bootstrap of its own."""
    per_unit = (
        averaged.filter(pl.col("model") == model)
        .group_by(["unit", "cluster", "k"], maintain_order=True)
        .agg(pl.col("profit").drop_nans().mean())
        .filter(pl.col("profit").is_not_null() & pl.col("profit").is_not_nan())
    )
    out: list[dict[str, Any]] = []
    for k in range(1, int(averaged["k"].max()) + 1):  # type: ignore[arg-type]
        at_k = per_unit.filter(pl.col("k") == k)
        if at_k.height == 0:
            out.append({"k": k, "mean": None, "lo": None, "hi": None})
            continue
        iv = stats.cluster_bootstrap_mean(
            at_k["profit"].to_numpy(), at_k["cluster"].to_numpy(), reps=reps, seed=seed
        )
        out.append({"k": k, "mean": iv.mean, "lo": iv.lo, "hi": iv.hi})
    return out


def test_repeated_section_is_identical_to_one_bootstrap_per_k() -> None:
    """Many passes, two models, units over dates, NaN profits, a k where no unit has a profit
    and a k where a whole date has none (fewer clusters): every k's interval is bit for bit
    the one a bootstrap of its own gives."""
    from runs.report import build_rows
    from runs.report.repeated import repeated_section
    from runs.scoring_step import AVERAGED_SCHEMA

    rng = np.random.default_rng(4)
    units = [f"2025-01-{1 + i % 7:02d}:S{i}" for i in range(40)]
    passes = 30
    records = []
    for model in ("m1", "m2"):
        for unit in units:
            date = unit.split(":")[0]
            for k in range(1, passes + 1):
                profit = float(rng.random() * 0.01)
                if rng.random() < 0.1 or k == 7 or (k == 9 and date == "2025-01-03"):
                    profit = float("nan")
                records.append((model, "families/isolated", unit, "family", date, "l1", k, profit))
    averaged = pl.DataFrame(records, schema=AVERAGED_SCHEMA, orient="row")
    scores = frame(
        [
            row(m, "families/isolated", u, 0, 0.001, set_="family")
            for m in ("m1", "m2")
            for u in units
        ]
    )
    rows = build_rows(scores, {}, floor=0.9, seed=5, reps=200)
    section = repeated_section(averaged, rows, seed=5, reps=200)
    assert [s["model"] for s in section] == ["m1", "m2"]
    for entry in section:
        expected = _by_k_one_at_a_time(averaged, entry["model"], seed=5, reps=200)
        assert entry["by_k"] == expected
        assert entry["by_k"][6]["mean"] is None  # k = 7: nothing answered
        assert entry["by_k"][8]["mean"] is not None  # k = 9: six dates of seven


def test_the_terminal_names_the_metric_and_clusters_of_the_arms_run(tmp_path: Path) -> None:
    """Question families alone: L1 profit resampled by family; with the paper's arms beside
    them, both named (the terminal said per unit stake and date-clustered either way)."""
    fams = [f"fam{i}" for i in range(4)]
    family_rows = [
        row(m, "families/joint", f, 0, 0.01 * (i + 1), cluster=f, set_="family")
        for m in ("a", "b")
        for i, f in enumerate(fams)
    ]
    text = " ".join(report(tmp_path / "families", frame(family_rows))[1].split())  # unwrapped
    assert "Mean L1 arbitrage profit (lower is more coherent)" in text
    assert "95% intervals (clustered by family) and more" in text
    assert "per unit stake" not in text and "clustered by date" not in text
    # report.md and leaderboard.txt said per unit stake and date-clustered too (a referee)
    for name in ("report.md", "leaderboard.txt"):
        written = (tmp_path / "families" / "report" / name).read_text(encoding="utf-8")
        assert "profit [95% CI, family-clustered]" in written, name
        assert "per unit stake" not in written and "date-clustered" not in written, name
    md = (tmp_path / "families" / "report" / "report.md").read_text(encoding="utf-8")
    assert "on question families (the L1 distance); 0 means" in md
    assert "that resample whole clusters (families);" in md and "stock-day" not in md
    paper_rows = [row(m, "baseline", u, 0, 0.002) for m in ("a", "b") for u in UNITS]
    both = " ".join(report(tmp_path / "both", frame(family_rows + paper_rows))[1].split())
    assert (
        "Mean arbitrage profit, per unit stake on the stock-return arms and in the L1 metric "
        "on the question-family arms (lower is more coherent)"
    ) in both
    assert "95% intervals (clustered by date, question families' by family) and more" in both
    md = (tmp_path / "both" / "report" / "report.md").read_text(encoding="utf-8")
    assert "profit [95% CI, date- or family-clustered]" in md
    assert (
        "that resample whole clusters (dates on the stock-return arms, families on the family "
        "arms);" in md
    )


def test_a_family_arm_missing_exactly_one_minus_the_floor_is_not_scored(tmp_path: Path) -> None:
    """The family benchmark: a model that 'fails to answer 10% or more of its families ... is
    not scored at all'. A referee's model answering 9 of 10 was scored (the rule was
    'under the floor'); the paper's arms keep the design's 'under the floor'."""
    fams = [f"fam{i}" for i in range(20)]
    # "nine" asks 1 of 10 families in part (10% unanswered), "more" 1 of 20 (5%): the rule
    # counts families, so a family with one statement unanswered is unanswered.
    rows = [
        row(m, "families/isolated", f, 0, 0.02, cluster=f, set_="family",
            coverage=0.5 if f == "fam0" and m != "all" else 1.0)
        for m, n in (("nine", 10), ("all", 10), ("more", 20))
        for f in fams[:n]
    ]
    rows += [row("nine", "baseline", u, 0, 0.3, coverage=0.9) for u in UNITS]
    summary, text = report(tmp_path, frame(rows))
    assert cell(summary, "nine", "families/isolated")["status"] == "below_coverage_floor"
    assert cell(summary, "nine", "families/isolated")["coverage"] == pytest.approx(0.9)
    assert cell(summary, "all", "families/isolated")["scored"] is True
    assert cell(summary, "more", "families/isolated")["scored"] is True
    assert cell(summary, "more", "families/isolated")["units"] == 19
    assert cell(summary, "nine", "baseline")["scored"] is True  # at the floor: scored
    written = (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    assert "not scored: coverage 90% ≤ floor" in written and "not scored" in text
    fam = {(f["model"], f["arm"]): f for f in summary["families"]}
    rule = fam[("nine", "families/isolated")]["rule"]
    assert "1 - coverage floor or more of a family arm's families" in rule
    assert "is not scored on any family arm" in rule


def test_a_model_under_the_floor_on_one_family_arm_is_scored_on_none(tmp_path: Path) -> None:
    """The benchmark: a model failing to answer 10% or more of its families "is not scored at
    all". Held to the floor arm by arm, "gappy", which left 2 of 10 joint families
    unanswered, still showed its isolated arm's rate, the leaderboard's score."""
    fams = [f"fam{i}" for i in range(10)]
    rows = [
        row(m, arm, f, 0, 0.02, cluster=f, set_="family",
            coverage=0.5 if (m, arm) == ("gappy", "families/joint") and f < "fam2" else 1.0)
        for m in ("gappy", "whole")
        for arm in ("families/isolated", "families/joint")
        for f in fams
    ]
    summary, _ = report(tmp_path, frame(rows))
    joint = cell(summary, "gappy", "families/joint")
    isolated = cell(summary, "gappy", "families/isolated")
    assert isolated["status"] == "below_coverage_floor" and isolated["scored"] is False
    assert joint["status"] == "below_coverage_floor" and joint["below_floor_in"] is None
    assert isolated["below_floor_in"] == {"arm": "families/joint", "coverage": pytest.approx(0.8)}
    assert isolated["coverage"] == 1.0 and isolated["arbitrage_free"] is None
    assert isolated["profit"] is None and isolated["at_least"] is None
    for arm in ("families/isolated", "families/joint"):
        assert cell(summary, "whole", arm)["scored"] is True
        assert cell(summary, "whole", arm)["below_floor_in"] is None
    fam = {(f["model"], f["arm"]): f for f in summary["families"]}
    assert fam[("gappy", "families/isolated")]["scored"] is False
    assert fam[("gappy", "families/isolated")]["below_floor_in"]["arm"] == "families/joint"
    written = (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    assert "not scored: families/joint coverage 80% ≤ floor" in written
    assert "not scored: coverage 80% ≤ floor" in written  # the joint row's own
    for name in ("leaderboard.csv", "families.csv"):
        table = list(csv.DictReader(StringIO((tmp_path / "report" / name).read_text())))
        failed = {(r["model"], r["arm"]): r["below_floor_in"] for r in table}
        assert failed[("gappy", "families/isolated")] == "families/joint"
        assert failed[("gappy", "families/joint")] == "" == failed[("whole", "families/joint")]
    page = render_page(summary, [], tmp_path, spec={"name": "x"}, audit_sentence=None)
    assert "not scored: families/joint coverage 80% at or under the floor" in page


def test_a_family_asked_in_part_counts_neither_way(tmp_path: Path) -> None:
    """A referee: families with a statement unanswered were scored on the rest, losing the
    constraints that tie them to it, and 6 of 7 read arbitrage-free against 53% of whole
    ones; the model was scored on 94.9% of its questions answered with 19% of its families
    asked in part. A family asked in part is unanswered: out of the rate, and counted by
    the coverage rule."""
    fams = [f"fam{i}" for i in range(20)]
    rows = [  # 19 whole families, none arbitrage-free; the one asked in part would be
        row("m", "families/isolated", f, 0, 0.0 if f == "fam0" else 0.3, cluster=f,
            set_="family", coverage=0.75 if f == "fam0" else 1.0)
        for f in fams
    ]
    # 4 of 20 families asked in part (20%): 95% of statements answered, not scored
    rows += [
        row("gappy", "families/isolated", f, 0, 0.0, cluster=f, set_="family",
            coverage=0.75 if i < 4 else 1.0)
        for i, f in enumerate(fams)
    ]
    summary, _ = report(tmp_path, frame(rows))
    m = cell(summary, "m", "families/isolated")
    assert m["scored"] is True and m["units"] == 19 and m["coverage"] == pytest.approx(0.95)
    assert m["arbitrage_free"]["mean"] == 0.0 and m["profit"]["mean"] == pytest.approx(0.3)
    gappy = cell(summary, "gappy", "families/isolated")
    assert gappy["status"] == "below_coverage_floor" and gappy["coverage"] == pytest.approx(0.8)


def test_the_averaging_line_counts_rises_instead_of_denying_them(tmp_path: Path) -> None:
    """A referee: the terminal said averaging "lowers mean profit in 0 of 2 multi-pass cells
    (never raises it)" where both rose (answers missing, so the averaged sets held more
    questions than single passes). The line now counts what happened."""
    from runs.report.tables import headline_lines

    def cell(single: float, averaged: float) -> dict[str, Any]:
        return {"single_pass_mean": single, "by_k": [{"mean": single}, {"mean": averaged}]}

    summary: dict[str, Any] = {
        "across_models": {"models": []},
        "figures": {},
        "rows": [{"arm": "baseline"}],
        "repeated_elicitation": [cell(0.042, 0.045), cell(0.09, 0.12), cell(0.05, 0.03)],
    }
    line = headline_lines(summary, tmp_path)[0]
    assert line.startswith("averaging answers over passes before scoring lowers mean profit in 1")
    assert " in 1 of 3 multi-pass cells and raises" in line
    assert "raises it in 2 (passes that answered different questions" in line
    assert "never raises" not in line
    summary["repeated_elicitation"] = [cell(0.05, 0.03)]
    only = headline_lines(summary, tmp_path)[0]
    assert only.endswith("lowers mean profit in 1 of 1 multi-pass cells")


def test_one_assets_marginals_are_paired_with_that_assets_baseline_day(tmp_path: Path) -> None:
    """The paper (4.3): one stock's marginals in the two-asset arm against "the matched
    baseline elicitation". Its units are date pairs (`2018-01-02:AAA+BBB`, both orders), so
    a referee found no "vs baseline" for them at all; A is matched with the first asset's
    day, B with the second's."""
    days = {"2018-01-02:AAA": 0.001, "2018-01-02:BBB": 0.004,
            "2018-01-03:AAA": 0.002, "2018-01-03:BBB": 0.003}
    rows = [row("m", "baseline", u, 0, p) for u, p in days.items()]
    for date in ("2018-01-02", "2018-01-03"):
        for first, second in (("AAA", "BBB"), ("BBB", "AAA")):
            pair = f"{date}:{first}+{second}"
            rows.append(row("m", "two-asset", pair, 0, days[f"{date}:{first}"] + 0.01, set_="A"))
            rows.append(row("m", "two-asset", pair, 0, days[f"{date}:{second}"] + 0.02, set_="B"))
    summary, _ = report(tmp_path, frame(rows))
    a = cell(summary, "m", "two-asset A")["vs_baseline"]
    b = cell(summary, "m", "two-asset B")["vs_baseline"]
    assert a["units"] == 4 and a["mean"] == pytest.approx(0.01)
    assert b["units"] == 4 and b["mean"] == pytest.approx(0.02)


@pytest.mark.figures
def test_a_single_date_gives_means_without_intervals_or_significance(tmp_path: Path) -> None:
    """A referee's run on one date showed "+0.01207 [+0.01207, +0.01207]", every difference
    excluding zero and every model pair significant: resampling one date gives it back. The
    means stand; the intervals are unknown (null, "—", no error bar), and so is whether any
    difference excludes zero: "profit 0 of 1" (with `excludes_zero` false) read as no model
    differing, where nothing could be told (null, "—")."""
    day = ["2025-01-01:AAA", "2025-01-01:BBB"]
    rows = [row(m, "baseline", u, 0, p + shift) for m, shift in (("a", 0.0), ("b", 0.01))
            for u, p in zip(day, (0.01, 0.02), strict=True)]
    rows += [
        row("a", "statistics", u, 0, p + 0.005) for u, p in zip(day, (0.01, 0.02), strict=True)
    ]
    summary, _ = report(tmp_path, frame(rows), figures=True)
    base = cell(summary, "a", "baseline")
    assert base["profit"] == {"mean": pytest.approx(0.015), "lo": None, "hi": None}
    vs = cell(summary, "a", "statistics")["vs_baseline"]
    assert vs["mean"] == pytest.approx(0.005) and vs["excludes_zero"] is None
    assert summary["across_models"]["profit_pairs_excluding_zero"] is None
    assert summary["figures"]["leaderboard"] == "report/fig2_leaderboard.png"
    assert (tmp_path / "report" / "fig4_arms.png").exists()
    written = (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    assert "0.01500 [—, —]" in written and "+0.00500 [—, —]" in written
    assert "excludes zero: profit — of 1, Brier — of 1" in written, written
    from runs.report_page import render_page

    page = render_page(summary, [], tmp_path, spec={"name": "x"}, audit_sentence="")
    assert "no interval where a row spans a single date or family ([—, —])" in page
    assert "0.01500 [—,\u00a0—]" in page and "+0.00500 [—,\u00a0—]" in page


def test_both_orders_of_a_date_pair_are_one_unit(tmp_path: Path) -> None:
    """The paper asks each two-asset pair twice, the roles swapped, and averages the two
    profits (4.3, footnote 2); a referee found 6 units for 3 date pairs, so the shares at
    least 0.001/0.005/0.01 counted orders, not pairs."""
    rows = []
    pairs = {"2018-01-02": (0.004, 0.006), "2018-01-03": (0.0, 0.002)}
    for date, (first, second) in pairs.items():
        for (a, b), profit in ((("AAA", "BBB"), first), (("BBB", "AAA"), second)):
            for set_ in ("full", "marginals"):
                rows.append(row("m", "two-asset", f"{date}:{a}+{b}", 0, profit, set_=set_))
            rows.append(row("m", "two-asset", f"{date}:{a}+{b}", 0, profit, set_="A"))
    summary, _ = report(tmp_path, frame(rows))
    full = cell(summary, "m", "two-asset full")
    assert full["units"] == 2 and full["profit"]["mean"] == pytest.approx(0.003)
    # the pairs average 0.005 and 0.001: each at least 0.001, one at least 0.005
    assert full["at_least"]["0.001"]["units"] == 2 and full["at_least"]["0.005"]["units"] == 1
    assert cell(summary, "m", "two-asset A")["units"] == 4  # one asset's own set, by order


def test_linked_sets_over_two_assets_are_units_of_date_pairs(tmp_path: Path) -> None:
    """Read from the same two-asset answers, the linked and dispersed sets over two assets
    are pairs as "two-asset full" is: a referee found "linked (assets)" counting 4 units for
    2 date pairs. Those over two days stay one stock-day each."""
    rows = []
    for date, profits in {"2018-01-02": (0.004, 0.006), "2018-01-03": (0.0, 0.002)}.items():
        for (a, b), profit in zip((("AAA", "BBB"), ("BBB", "AAA")), profits, strict=True):
            pair = f"{date}:{a}+{b}"
            rows.append(row("m", "linked", pair, 0, profit, set_="linked/A/B0"))
            rows.append(row("m", "linked", pair, 0, profit + 0.002, set_="linked/B/B1"))
            rows.append(row("m", "dispersed", pair, 0, profit / 2, set_="dispersed/A/s0"))
            # over two days: Asset A's stock alone, so each order is its own stock-day
            rows.append(row("m", "linked", pair, 0, profit, set_="linked/d1/c0o1/B2sB3s"))
    summary, _ = report(tmp_path, frame(rows))
    assets = cell(summary, "m", "linked (assets)")
    assert assets["units"] == 2 and assets["profit"]["mean"] == pytest.approx(0.004)
    # the pairs average 0.006 and 0.002: each at least 0.001, one at least 0.005
    assert assets["at_least"]["0.005"]["units"] == 1
    assert cell(summary, "m", "dispersed (assets)")["units"] == 2
    assert cell(summary, "m", "linked (days)")["units"] == 4


def test_one_scored_model_has_no_pairs_to_count(tmp_path: Path) -> None:
    """A tester: leaderboard.txt said "profit None of 0, Brier None of 0" and report.md
    "1 scored models ... — of 0" when one model was scored."""
    report(tmp_path, frame([row("m", "baseline", u, 0, 0.002) for u in UNITS]))
    text = (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "Across models on baseline: 1 scored model, so no pair of models to compare" in text
    assert "On baseline: 1 scored model, so no pair of models to compare." in md
    assert "None of" not in text and "of 0" not in md and "scored models" not in md
    rows = [row(m, "baseline", u, 0, 0.002 + i * 0.001) for i, m in enumerate("ab")
            for u in UNITS]
    report(tmp_path / "two", frame(rows))
    md = (tmp_path / "two" / "report" / "report.md").read_text(encoding="utf-8")
    assert "On baseline (2 scored models, 6 common units): Spearman(profit, Brier) = —" in md


def test_families_rates_on_the_future_and_on_controls_are_given_apart(tmp_path: Path) -> None:
    """The family design's controls "separate 'cannot compute probabilities' from
    'incoherent when genuinely uncertain'": the families table gave one rate over both. Now
    each kind apart, with its count, in summary.json, report.md, families.csv and the page;
    a family whose kind is unknown (its file no longer read) splits nothing."""
    import csv

    from panels.families import FAMILIES_DIR, load_family

    shipped = [load_family(p) for p in sorted(FAMILIES_DIR.glob("*.toml"))]
    controls = [f.id for f in shipped if f.control][:3]
    future = [f.id for f in shipped if not f.control][:2]
    profits = dict.fromkeys(controls[:2], 0.0) | {controls[2]: 0.3} | dict.fromkeys(future, 0.2)
    rows = [row("m", "families/isolated", fid, 0, p, cluster=fid, set_="family")
            for fid, p in profits.items()]  # fmt: skip
    summary, _ = report(tmp_path / "run", frame(rows))  # no design.json: the shipped files
    [fam] = summary["families"]
    assert fam["controls"]["families"] == 3 and fam["future"]["families"] == 2
    assert fam["controls"]["arbitrage_free"]["mean"] == pytest.approx(2 / 3)
    assert fam["future"]["arbitrage_free"]["mean"] == 0.0
    assert fam["arbitrage_free"]["mean"] == pytest.approx(2 / 5)
    md = (tmp_path / "run" / "report" / "report.md").read_text(encoding="utf-8")
    assert "| 0.00 [0.00, 0.00] of 2 | 0.67 [" in md
    with open(tmp_path / "run" / "report" / "families.csv", encoding="utf-8") as handle:
        [line] = list(csv.DictReader(handle))
    assert line["future_families"] == "2" and line["controls_families"] == "3"
    from runs.report_page import render_page

    page = render_page(summary, [], tmp_path)
    assert "<td>0.00 [0.00,\u00a00.00] of 2</td>" in page
    unknown = [*rows, row("m", "families/isolated", "my-own-family", 0, 0.0,
                          cluster="my-own-family", set_="family")]  # fmt: skip
    summary, _ = report(tmp_path / "other", frame(unknown))
    [fam] = summary["families"]
    assert fam["future"] is None and fam["controls"] is None and fam["families"] == 6


def test_leaderboard_txt_gives_long_names_whole(tmp_path: Path) -> None:
    """Two 70-character names of one provider, differing at their end, were both cut to
    "an-extraordinarily-long-mode…" in leaderboard.txt, beside different numbers."""
    stem = "an-extraordinarily-long-model-name-sharing-its-prefix-variant-"
    names = [stem + "alpha-one", stem + "beta-one"]
    rows = [row(m, "baseline", u, 0, 0.002 + i * 0.001) for i, m in enumerate(names)
            for u in UNITS]  # fmt: skip
    report(tmp_path, frame(rows))
    text = (tmp_path / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    for name in names:
        assert any(name in line for line in text.splitlines())
    assert "…" not in text


def test_a_seed_past_64_bits_is_written_as_its_digits(tmp_path: Path) -> None:
    """A spec takes any seed (numpy's 128-bit entropy among them), but orjson writes no
    integer past 64 bits: such a folder's report ended in a traceback, every time. The
    intervals are those of the seed itself; summary.json holds its digits."""
    seed = 2**128 - 1
    scores = frame([row("m", "baseline", u, 0, 0.001 * i) for i, u in enumerate(UNITS)])
    console = Console(file=StringIO(), width=200, color_system=None)
    summary = write_report(
        tmp_path, scores, floor=0.9, seed=seed, reps=REPS, console=console, figures=False
    )
    written = json.loads((tmp_path / "report" / "summary.json").read_text(encoding="utf-8"))
    assert summary["seed"] == written["seed"] == str(seed)
    assert int(written["seed"]) == seed
    small = write_report(
        tmp_path, scores, floor=0.9, seed=2**64 - 1, reps=REPS, console=console, figures=False
    )
    assert small["seed"] == 2**64 - 1  # a number, as before, while it fits


def test_linked_minus_dispersed_is_in_every_view_not_only_figure_5(tmp_path: Path) -> None:
    """The paper's Appendix D headline, linked - dispersed per model with its interval and
    units, was in figure 5's caption alone: not in summary.json, the CSVs, leaderboard.txt,
    report.md or the page's text, and nowhere without the figures. Now computed once, in the
    report's data, and written in each (figures off here)."""
    rows = []
    days = {"2025-01-01": (0.03, 0.01), "2025-01-02": (0.05, 0.02), "2025-01-03": (0.04, 0.04)}
    for date, (linked, dispersed) in days.items():
        for asset in ("AAA", "BBB"):
            unit = f"{date}:{asset}"
            rows.append(row("m", "linked", unit, 0, linked, set_="linked/d1/c0o1/B2sB3s"))
            rows.append(row("m", "dispersed", unit, 0, dispersed, set_="dispersed/d1/s0"))
    summary, _ = report(tmp_path, frame(rows))
    (entry,) = summary["linked_vs_dispersed"]
    differences = np.repeat([0.02, 0.03, 0.0], 2)  # two stock-days a date
    expected = stats.paired_difference(
        differences, np.zeros(6), np.repeat([1, 2, 3], 2), reps=REPS, seed=3
    )
    assert entry == {"model": "m", "kind": "days", "mean": pytest.approx(0.05 / 3),
                     "lo": pytest.approx(expected.lo), "hi": pytest.approx(expected.hi),
                     "excludes_zero": expected.excludes_zero(), "units": 6}  # fmt: skip
    said = "+0.01667 ["
    out = tmp_path / "report"
    assert said in (out / "leaderboard.txt").read_text(encoding="utf-8")
    assert said in (out / "report.md").read_text(encoding="utf-8")
    (line,) = list(csv.DictReader(StringIO((out / "linked_vs_dispersed.csv").read_text())))
    assert (line["model"], line["kind"], line["units"]) == ("m", "days", "6")
    assert float(line["mean"]) == pytest.approx(0.05 / 3)
    page = render_page(summary, [], out)
    assert "<h2>Linked against dispersed sets</h2>" in page and said in page


def test_two_models_say_why_they_have_no_spearman_correlation(tmp_path: Path) -> None:
    """With two models Spearman(profit, Brier) was "—" with no reason, summary.json null, and
    the page left the sentence out: the rank correlation of two points is +1 or -1 whatever
    they are, so it stays null, and every view says why."""
    from runs.report.data import MIN_SPEARMAN_MODELS

    rows = [row(m, "baseline", u, 0, 0.002 + i * 0.001, brier=0.2 + i * 0.01)
            for i, m in enumerate("ab") for u in UNITS]  # fmt: skip
    summary, terminal = report(tmp_path, frame(rows))
    why = f"needs at least {MIN_SPEARMAN_MODELS} models; 2 here"
    across = summary["across_models"]
    assert across["spearman_profit_brier"] is None and across["spearman_not_computed"] == why
    out = tmp_path / "report"
    said = f"Spearman(profit, Brier) = — ({why});"
    assert said in (out / "leaderboard.txt").read_text(encoding="utf-8")
    assert said in (out / "report.md").read_text(encoding="utf-8")
    assert f"Spearman(profit, Brier) — ({why})" in " ".join(terminal.split())
    (line,) = list(csv.DictReader(StringIO((out / "across_models.csv").read_text())))
    assert line["spearman_profit_brier"] == "" and line["spearman_not_computed"] == why
    page = render_page(summary, [], out)
    assert f"Spearman rank correlation of profit and Brier — ({why})" in page
    # Three models with a Brier score: a correlation, and no reason.
    rows += [row("c", "baseline", u, 0, 0.005, brier=0.23) for u in UNITS]
    summary, _ = report(tmp_path / "three", frame(rows))
    assert summary["across_models"]["spearman_profit_brier"] == pytest.approx(1.0)
    assert "spearman_not_computed" not in summary["across_models"]


def test_the_repeated_elicitation_table_is_sorted_and_says_how(tmp_path: Path) -> None:
    """Every table but the repeated-elicitation one said how its rows are sorted, and its rows
    came in the pass-averaged scores' own order. They are now by arm, then by model name, in
    summary.json and every view, and each view says so under the table."""
    from runs.report.wording import ORDER_REPEATED

    models, arms = ("zeta", "alpha"), ("statistics", "baseline")  # neither in sorted order
    scores = frame([row(m, a, u, p, 0.004) for m in models for a in arms for u in UNITS
                    for p in (0, 1)])  # fmt: skip
    averaged = pl.DataFrame(
        [(m, a, u, "h1", u.split(":")[0], "inf", k, 0.003) for m in models for a in arms
         for u in UNITS for k in (1, 2)],
        schema=AVERAGED_SCHEMA, orient="row",
    )  # fmt: skip
    summary, _ = report(tmp_path, scores, averaged=averaged)
    said = [(r["arm"], r["model"]) for r in summary["repeated_elicitation"]]
    assert said == sorted((a, m) for m in models for a in arms)
    out = tmp_path / "report"
    text = (out / "leaderboard.txt").read_text(encoding="utf-8")
    assert text.count(ORDER_REPEATED) == 1 and text.rstrip().endswith(ORDER_REPEATED)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.count(f"|\n\n{ORDER_REPEATED}\n") == 1  # under its table
    unsorted = {**summary, "repeated_elicitation": summary["repeated_elicitation"][::-1]}
    page = render_page(unsorted, [], out)  # a summary written before: sorted on the page
    table, after = page[page.index("<h2>Repeated elicitation</h2>") :].split("</table>", 1)
    assert re.findall(r"<tr><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td>", table) == said
    assert after.startswith(f'</div>\n<p class="meta">{ORDER_REPEATED}</p>')


def test_a_one_date_difference_reads_alike_in_every_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One date gives no interval: the same linked - dispersed difference read "+0.02500
    [—, —]" in leaderboard.txt and report.md, "+0.02500" on the page, "0.02500 [—, —]" in
    figure 5's caption (unsigned) and "[+nan, +nan]" in its panel. Now one form: signed,
    "—" for a missing end."""
    from runs.report_figures import FigureInputs, _style, module_of

    rows = []
    for asset, (linked, dispersed) in {"AAA": (0.03, 0.01), "BBB": (0.05, 0.02)}.items():
        unit = f"2025-01-01:{asset}"
        rows.append(row("m", "linked", unit, 0, linked, set_="linked/d1/c0o1/B2sB3s"))
        rows.append(row("m", "dispersed", unit, 0, dispersed, set_="dispersed/d1/s0"))
    summary, _ = report(tmp_path, frame(rows))
    (entry,) = summary["linked_vs_dispersed"]
    assert entry["mean"] == pytest.approx(0.025) and entry["lo"] is None is entry["hi"]
    said = "+0.02500 [—, —]"
    out = tmp_path / "report"
    assert said in (out / "leaderboard.txt").read_text(encoding="utf-8")
    assert said in (out / "report.md").read_text(encoding="utf-8")
    assert "+0.02500 [—,\u00a0—]" in render_page(summary, [], out)  # kept whole in a cell
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = module_of(5).draw(FigureInputs(summary), tmp_path / "f.png")
    assert f"m, days: linked - dispersed {said} over 2 units" in caption
    panel = [t.get_text() for ax in kept[0].axes for t in ax.texts if t.get_text().startswith("Δ")]
    assert panel == ["Δ +0.0250\n[—, —]"]


def test_no_model_on_the_baseline_is_the_reason_for_no_spearman(tmp_path: Path) -> None:
    """A campaign with no model scored on the baseline arm (two-asset alone) said the
    correlation "needs at least 3 models; 0 here", as if models were missing; the baseline
    arm was not scored, and that is the reason given. The baseline arm not run at all,
    across_models.csv is its header alone (summary.json keeps the reason)."""
    rows = [row("m", "two-asset", u, 0, 0.01, set_="full") for u in UNITS]
    summary, _ = report(tmp_path, frame(rows))
    across = summary["across_models"]
    assert across["models"] == [] and across["spearman_profit_brier"] is None
    assert across["spearman_not_computed"] == "no model was scored on the baseline arm"
    written = (tmp_path / "report" / "across_models.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(StringIO(written))
    assert list(reader) == [] and "spearman_not_computed" in (reader.fieldnames or [])
