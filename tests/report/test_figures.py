"""The report's eight figures: drawn from a real small campaign, left out (with a reason and
no file) when their arms were not run, and built from the right numbers.

Numbers are checked against independent computations: a drawn Dutch book must win at least
its profit in every atom of the panel at the stated prices; family rates and time bins are
counted by hand on synthetic frames.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import orjson
import polars as pl
import pytest

from panels.arms import ARMS
from runs.figures import read_manifest
from runs.planned_families import FamilyInfo, family_info
from runs.report.data import STATUS_SCORED, ArmRow, linked_vs_dispersed
from runs.report_figures import (
    FIGURE_READS,
    FIGURES,
    Figure,
    FigureInputs,
    _style,
    books,
    draw_all,
    reads_of,
)
from runs.report_figures.books import WITH_BINS, WITHOUT_BINS, bin_grid, panels, top_books
from runs.report_figures.families import family_rates
from runs.report_figures.linked import linked_cells
from runs.scoring_step import SCORE_SCHEMA
from scoring import dutch_books

PNG = b"\x89PNG\r\n\x1a\n"


def _summary(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads((run / "report" / "summary.json").read_bytes())
    return loaded


def test_every_figure_is_drawn_when_its_arms_were_run(figures_run: Path) -> None:
    manifest = read_manifest(figures_run / "report")
    assert [(f["number"], f["key"]) for f in manifest] == [(n, k) for n, k, _ in FIGURES]
    for figure in manifest:
        assert figure["omitted"] is None, figure
        assert figure["caption"], figure
        png = (figures_run / "report" / figure["path"]).read_bytes()
        assert png.startswith(PNG) and len(png) > 5_000, figure["key"]
    summary = _summary(figures_run)
    assert summary["figures"]["books"] == "report/fig1_books.png"
    assert summary["figures"]["profit_brier"] == "report/fig2_leaderboard.png"


def test_without_a_baseline_figure_4_says_so_and_figure_3_draws_no_dashed_line(
    tmp_path: Path,
) -> None:
    """Figure 4's line said no arm but the baseline had run when the baseline had not, and
    figure 3's caption named a dashed baseline line it did not draw."""
    from runs.report_figures import Omit, arms, horizons

    interval = {"mean": 0.01, "lo": 0.005, "hi": 0.02}
    summary = {"baseline_arm": "baseline", "rows": [
        {"model": "m", "arm": arm, "scored": True, "profit": interval}
        for arm in ("statistics", "two-asset full", "two-asset marginals")
    ]}  # fmt: skip
    inputs = FigureInputs(summary)
    with pytest.raises(Omit, match="the baseline arm was not run \\(or not scored\\)"):
        arms.draw(inputs, tmp_path / "fig4.png")
    caption = horizons.draw(inputs, tmp_path / "fig3.png")
    assert "dashed" not in caption
    with_baseline = {**summary, "rows": [
        *summary["rows"], {"model": "m", "arm": "baseline", "scored": True, "profit": interval}
    ]}  # fmt: skip
    assert "the dashed line is the same model's baseline arm" in horizons.draw(
        FigureInputs(with_baseline), tmp_path / "fig3b.png"
    )


def test_a_figure_whose_arms_were_not_run_is_left_out_with_a_reason(tmp_path: Path) -> None:
    """Only a baseline with one pass: figures 2 and 8 drawn, the rest say why, no file."""
    summary = {
        "baseline_arm": "baseline",
        "rows": [
            {
                "model": "m",
                "arm": "baseline",
                "scored": True,
                "profit": {"mean": 0.01, "lo": 0.005, "hi": 0.02},
                "brier": {"mean": 0.2, "lo": 0.19, "hi": 0.21},
            }
        ],
        "repeated_elicitation": [],
    }
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    step = dt.timedelta(seconds=5)
    timeline = pl.DataFrame(  # engine.audit.attempt_timeline's columns
        {
            "model": ["m", "m"],
            "bin": [0, 1],
            "start": [t0, t0 + step],
            "end": [t0 + step, t0 + 2 * step],
            "outcome": ["rate_limit", "accepted"],
            "attempts": [1, 1],
        }
    )
    stale = tmp_path / "fig3_horizons.png"
    stale.write_bytes(PNG)  # from an earlier report of the same folder
    figures = draw_all(FigureInputs(summary, timeline=timeline), tmp_path)
    drawn = {f.key for f in figures if f.path is not None}
    assert drawn == {"leaderboard", "audit"}
    reasons = {f.key: f.omitted for f in figures}
    assert "two-asset" in str(reasons["horizons"]) and "horizon" in str(reasons["horizons"])
    assert "no elicitation arm other than baseline" in str(reasons["arms"])
    assert "linked" in str(reasons["linked"])
    assert "family" in str(reasons["families"])
    assert "two or more passes" in str(reasons["repeated"])
    assert "Dutch book" in str(reasons["books"])
    for f in figures:
        if f.path is None:
            assert f.omitted and "\n" not in f.omitted
            assert not (tmp_path / f"fig{f.number}_{f.key}.png").exists()
    assert not stale.exists()


def test_the_books_drawn_are_dutch_books_against_the_stated_prices(figures_run: Path) -> None:
    inputs = FigureInputs.from_run(figures_run, _summary(figures_run))
    books = top_books(inputs)
    assert len(books) == 3
    assert len({(b.model, b.arm, b.unit) for b in books}) == 3
    scores = pl.read_parquet(figures_run / "scores.parquet").filter(pl.col("norm") == "inf")
    assert books[0].profit == pytest.approx(float(cast(float, scores["profit"].max())))
    assert [b.profit for b in books] == sorted((b.profit for b in books), reverse=True)
    forecasts = pl.read_parquet(figures_run / "forecasts.parquet")
    for book in books:
        stated = dict(
            forecasts.filter(
                (pl.col("model") == book.model)
                & (pl.col("arm") == book.arm)
                & (pl.col("unit") == book.unit)
                & (pl.col("pass") == book.pass_)
            )
            .select("event", "p")
            .iter_rows()
        )
        assert book.stated == [stated[e] for e in book.events]
        # Independent of the LP: the stakes win at least the profit in every atom.
        panel = ARMS[book.arm].panel(_unit(book.arm, book.unit)).subset(book.events)
        incidence = np.asarray(panel.incidence, dtype=float)
        b = np.array(book.stakes)
        p = np.array(book.stated)
        payoff = b @ (incidence - p[:, None])
        assert payoff.min() >= book.profit - 1e-7
        assert np.abs(b).sum() <= 1 + 1e-7
        assert any(book.binding)


def _drawn_books(
    inputs: FigureInputs, path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, str]:
    """Figure 1 drawn from `inputs`: the matplotlib figure (kept, not saved) and its caption."""
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = books.draw(inputs, path)
    assert len(kept) == 1
    return kept[0], caption


def test_figure_1_shows_the_bins_panel_for_return_bins(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = FigureInputs.from_run(figures_run, _summary(figures_run))
    drawn = top_books(inputs)
    assert panels(drawn) == WITH_BINS
    fig, caption = _drawn_books(inputs, tmp_path / "fig1.png", monkeypatch)
    assert len(fig.axes) == 3 * len(drawn)
    assert "return bins each event covers" in caption
    # The bins panel of each book shades the bins its events cover (an image per book).
    assert sum(len(ax.images) for ax in fig.axes) == len(drawn)


def test_figure_1_of_family_statements_has_no_empty_bins_panel(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A campaign of family arms alone: its books' events are statements, which cover no
    return bin, so the figure is the probabilities (labelled by statement) and the stakes."""
    summary = _summary(figures_run)
    family_rows = [r for r in summary["rows"] if str(r["arm"]).startswith("families/")]
    assert family_rows
    only_families = pl.scan_parquet(figures_run / "scores.parquet").filter(
        pl.col("arm").str.starts_with("families/")
    )
    inputs = FigureInputs(
        {**summary, "rows": family_rows},
        scores=only_families,
        forecasts=pl.scan_parquet(figures_run / "forecasts.parquet"),
    )
    drawn = top_books(inputs)
    assert drawn and all(book.norm == "l1" for book in drawn)
    assert panels(drawn) == WITHOUT_BINS
    fig, caption = _drawn_books(inputs, tmp_path / "fig1.png", monkeypatch)
    assert len(fig.axes) == 2 * len(drawn)
    assert not any(ax.images for ax in fig.axes)
    assert "return bins" not in caption and "statements asked" in caption
    probabilities = fig.axes[0]  # the first book's: its rows are named by its statements
    assert [t.get_text() for t in probabilities.get_yticklabels()] == drawn[0].events[
        : len(probabilities.get_yticklabels())
    ]


def _unit(arm: str, unit_id: str) -> Any:
    """Stock panels do not depend on the unit; only family arms would need the family."""
    assert not arm.startswith("families/")
    return None


def test_bin_grid_reads_event_ids() -> None:
    factors, grid = bin_grid(["d1:B0|B1", "A:B3&B:B2"]) or ([], np.zeros(0))
    assert factors == ["A", "B", "d1"]
    assert grid.tolist() == [
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0],
    ]
    assert bin_grid(["d1:B0", "coin-heads"]) is None


def _score(model: str, arm: str, unit: str, pass_: int, profit: float, set_: str) -> dict[str, Any]:
    return {
        "model": model,
        "arm": arm,
        "unit": unit,
        "pass": pass_,
        "set": set_,
        "cluster": unit.split(":")[0],
        "norm": "l1" if arm.startswith("families/") else "inf",
        "profit": profit,
        "coverage": 1.0,
        "events": [],
        "stakes": [],
        "coherent": [],
        "brier": None,
        "answered": 1,
    }


def test_family_rates_by_shape_with_controls_apart() -> None:
    rows = [
        # f1 averages to 0.04 (free), f2 to 0.06 (not), f3 is a control at 0.0 (free).
        _score("m", "families/joint", "f1", 0, 0.03, "family"),
        _score("m", "families/joint", "f1", 1, 0.05, "family"),
        _score("m", "families/joint", "f2", 0, 0.06, "family"),
        _score("m", "families/joint", "f3", 0, 0.0, "family"),
        _score("m", "families/joint", "f4", 0, 0.2, "family"),
    ]
    info = {
        "f1": FamilyInfo("negation", False),
        "f2": FamilyInfo("negation", False),
        "f3": FamilyInfo("negation", True),
    }
    # Model "low" answered under the coverage floor: not scored, so never counted.
    rows += [_score("low", "families/joint", f, 0, 0.9, "family") for f in ("f1", "f2", "f3")]
    summary = {
        "rows": [
            {
                "model": m,
                "arm": "families/joint",
                "scored": m == "m",
                "profit": {"mean": 0.1, "lo": 0.0, "hi": 0.2} if m == "m" else None,
            }
            for m in ("m", "low")
        ]
    }
    scores = pl.DataFrame(rows, schema=SCORE_SCHEMA).lazy()
    inputs = FigureInputs(summary, scores=scores, families=info)
    assert set(family_rates(inputs)["model"].to_list()) == {"m"}
    rates = {
        g: (n, f)
        for g, n, f in family_rates(inputs).select("group", "families", "free").iter_rows()
    }
    assert rates == {"negation": (2, 0.5), "controls": (1, 1.0), "unknown": (1, 0.0)}
    # f2 asked in part in a second pass (a statement unanswered): that pass is unanswered,
    # as in the report's rate (`runs.report.data.whole_families`), not free at profit 0.
    rows.append({**_score("m", "families/joint", "f2", 1, 0.0, "family"), "coverage": 0.5})
    inputs = FigureInputs(summary, scores=pl.DataFrame(rows, schema=SCORE_SCHEMA).lazy(),
                          families=info)
    again = family_rates(inputs).filter(pl.col("model") == "m", pl.col("group") == "negation")
    assert again.select("families", "free").row(0) == (2, 0.5)


def test_a_family_at_exactly_five_cents_is_drawn_arbitrage_free() -> None:
    """family-benchmark.md: free when the bookie locks in "at most 5 cents". The LP gives an
    L1 profit of exactly 5 cents (0.55 and 0.50 for A and not A) as 0.050000000000000044,
    which the figure compared bare and drew as not free, as the report's rate did."""
    profit = float(dutch_books(np.eye(2), [0.55, 0.50], "l1").profit[0])
    assert abs(profit - 0.05) <= 1e-12
    profit = max(profit, float(np.nextafter(0.05, 1)))  # above 0.05, as this LP reads it
    rows = [_score("m", "families/joint", "f1", 0, profit, "family")]
    summary = {"rows": [{"model": "m", "arm": "families/joint", "scored": True,
                         "profit": {"mean": profit, "lo": profit, "hi": profit}}]}  # fmt: skip
    inputs = FigureInputs(
        summary, scores=pl.DataFrame(rows, schema=SCORE_SCHEMA).lazy(),
        families={"f1": FamilyInfo("negation", False)},
    )  # fmt: skip
    assert family_rates(inputs).select("families", "free").row(0) == (1, 1.0)


def test_shipped_families_are_known_by_shape(tmp_path: Path) -> None:
    info = family_info(tmp_path)  # no spec: the shipped families
    assert len(info) >= 30
    assert {i.shape for i in info.values()} >= {"negation", "partition", "story"}
    assert any(i.control for i in info.values()) and not all(i.control for i in info.values())


#: A user's family reusing a shipped id (`two-dice-negation`, a negation control there).
USERS_FAMILY = """
id = "two-dice-negation"
title = "A deadline family of the user's, under a shipped family's id"
shape = "deadline"
control = false
variables = ["a", "b"]
constraints = ["a -> b"]
[[statements]]
id = "by-2030"
text = "A crewed lunar base is occupied by 2030."
formula = "a"
[[statements]]
id = "by-2040"
text = "A crewed lunar base is occupied by 2040."
formula = "b"
"""


def test_families_are_known_from_the_files_the_run_was_planned_with(tmp_path: Path) -> None:
    """A spec's `data.families` relative to its own folder does not resolve from the run
    folder: figure 6 drew the shipped families' shapes for the user's. The files
    `design.json` records are read; a shipped one no longer where it was recorded (a folder
    moved to another machine), from this dutchbook's copy."""
    from panels.families import FAMILIES_DIR

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "dice.toml").write_text(USERS_FAMILY, encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.toml").write_text(
        'name = "f"\n[data]\nfamilies = "mine/"\n[[models]]\nname = "m"\nprovider = "sim"\n'
        'model = "sim-noisy"\n[[arms]]\nname = "families/isolated"\n', encoding="utf-8"
    )  # fmt: skip
    shipped = sorted(FAMILIES_DIR.glob("*.toml"))[0].name
    files = {
        "families/dice.toml": {"path": str(mine / "dice.toml"), "sha256": "0"},
        f"families (shipped)/{shipped}": {"path": f"/gone/{shipped}", "sha256": "0"},
    }
    (run / "design.json").write_bytes(orjson.dumps({"dutchbook": "0", "files": files}))
    info = family_info(run)
    assert info["two-dice-negation"] == FamilyInfo("deadline", False)
    assert len(info) == 2  # the user's and the shipped one recorded, none else


def test_a_family_file_changed_since_planning_is_said_and_a_fifo_never_opened(
    tmp_path: Path,
) -> None:
    """`report` read a family file edited after the run (a family made a control, another
    given a new shape) without a word, and hung for good on one made a FIFO."""
    import hashlib
    import os

    from runs.planned_families import changed_family_files

    mine = tmp_path / "mine"
    mine.mkdir()
    dice, other = mine / "dice.toml", mine / "other.toml"
    dice.write_text(USERS_FAMILY, encoding="utf-8")
    other.write_text(USERS_FAMILY.replace("two-dice-negation", "other"), encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    files = {
        f"families/{p.name}": {"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in (dice, other)
    }
    (run / "design.json").write_bytes(orjson.dumps({"dutchbook": "0", "files": files}))
    assert changed_family_files(run) == []
    dice.write_text(USERS_FAMILY.replace('shape = "deadline"', 'shape = "story"'), "utf-8")
    other.unlink()
    os.mkfifo(other)
    assert changed_family_files(run) == [
        f"families/dice.toml ({dice}) changed", f"families/other.toml ({other}) cannot be read"
    ]
    info = family_info(run)  # returns at once: the FIFO is passed over, never opened
    assert info == {"two-dice-negation": FamilyInfo("story", False)}


def _linked_rows(units: int) -> list[ArmRow]:
    """Both assets rows of model m, scored (what `linked_vs_dispersed` pairs)."""
    return [ArmRow("m", f"{a} (assets)", "inf", units, units, 1.0, STATUS_SCORED)
            for a in ("linked", "dispersed")]  # fmt: skip


def _linked_summary(entries: list[dict[str, Any]], linked: float, dispersed: float) -> Any:
    """A summary with m's two assets rows and `linked_vs_dispersed` as given."""
    return {"bootstrap_replicates": 200, "linked_vs_dispersed": entries, "rows": [
        {"model": "m", "arm": f"{a} (assets)", "scored": True,
         "profit": {"mean": v, "lo": v, "hi": v}}
        for a, v in (("linked", linked), ("dispersed", dispersed))
    ]}  # fmt: skip


def _two_dates_linked() -> pl.DataFrame:
    """Model m's linked and dispersed assets sets on two dates: differences 0.2 and 0.3."""
    rows = []
    for unit, (linked, dispersed) in {"d1:X": (0.3, 0.1), "d2:X": (0.5, 0.2)}.items():
        rows += [
            _score("m", "linked", unit, 0, linked, "linked/A/B0"),
            _score("m", "dispersed", unit, 0, dispersed, "dispersed/A/s1"),
        ]
    return pl.DataFrame(rows, schema=SCORE_SCHEMA)


def test_linked_minus_dispersed_is_paired_on_units() -> None:
    scores = _two_dates_linked()
    (entry,) = linked_vs_dispersed(scores, _linked_rows(2), seed=0, reps=200)
    assert entry["kind"] == "assets" and entry["units"] == 2
    assert entry["mean"] == pytest.approx(((0.3 - 0.1) + (0.5 - 0.2)) / 2)
    # Figure 5 draws the summary's difference, not one of its own.
    (cell,) = linked_cells(FigureInputs(_linked_summary([entry], 0.4, 0.15)))
    assert cell.kind == "assets" and cell.units == 2
    assert cell.difference == {k: entry[k] for k in ("mean", "lo", "hi")}


def test_figure_5_of_an_older_summary_computes_the_differences_from_the_scores() -> None:
    """A summary written before `linked_vs_dispersed` (the public `draw_all(FigureInputs.
    from_run(run, summary))` of an older report) lost the differences from figure 5's caption
    and panels: they are computed from the scores, as the report computes them. A summary
    whose key is there but empty (no pair both scored) has none."""
    scores = _two_dates_linked()
    (entry,) = linked_vs_dispersed(scores, _linked_rows(2), seed=0, reps=200)
    older = dict(_linked_summary([], 0.4, 0.15))
    del older["linked_vs_dispersed"]
    (cell,) = linked_cells(FigureInputs(older, scores=scores.lazy()))
    assert cell.units == 2 and cell.difference == {k: entry[k] for k in ("mean", "lo", "hi")}
    (none,) = linked_cells(FigureInputs(_linked_summary([], 0.4, 0.15), scores=scores.lazy()))
    assert none.difference is None and none.units == 0


def test_figure_5_counts_date_pairs_as_the_table_does() -> None:
    """Both role orders of a date pair are one unit (the paper's footnote 2): the table said
    3 units where figure 5's caption said "over 6 units" for the same sets."""
    rows = []
    for date, profits in {"d1": ((0.3, 0.1), (0.5, 0.1)), "d2": ((0.2, 0.2), (0.4, 0.0))}.items():
        for pair, (linked, dispersed) in zip(("X+Y", "Y+X"), profits, strict=True):
            rows += [
                _score("m", "linked", f"{date}:{pair}", 0, linked, "linked/A/B0"),
                _score("m", "dispersed", f"{date}:{pair}", 0, dispersed, "dispersed/A/s1"),
            ]
    scores = pl.DataFrame(rows, schema=SCORE_SCHEMA)
    (entry,) = linked_vs_dispersed(scores, _linked_rows(2), seed=0, reps=200)
    assert entry["units"] == 2
    # d1: 0.4 - 0.1; d2: 0.3 - 0.1
    assert entry["mean"] == pytest.approx((0.3 + 0.2) / 2)


def test_figure_5s_difference_keeps_a_real_sign_near_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figure 5 wrote its difference with the `z` format, which the report's tables left
    (`runs.report.wording.fixed`): a linked-minus-dispersed of -2e-6 read "+0.0000"."""
    entry = {"model": "m", "kind": "assets", "mean": -2e-6, "lo": -2e-6, "hi": -2e-6,
             "excludes_zero": True, "units": 2}  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    from runs.report_figures import module_of

    module_of(5).draw(FigureInputs(_linked_summary([entry], 0.15, 0.150002)), tmp_path / "f.png")
    said = [t.get_text() for ax in kept[0].axes for t in ax.texts if t.get_text().startswith("Δ")]
    assert said == ["Δ -0.0000\n[-0.0000, -0.0000]"]


def test_without_outcomes_the_leaderboard_has_no_brier_panel(tmp_path: Path) -> None:
    from runs.report_figures import leaderboard

    row = {"model": "m", "arm": "baseline", "scored": True, "brier": None,
           "profit": {"mean": 0.01, "lo": 0.005, "hi": 0.02}}  # fmt: skip
    path = tmp_path / "fig2.png"
    caption = leaderboard.draw(FigureInputs({"rows": [row]}), path)
    assert "no Brier score" in caption
    assert path.read_bytes().startswith(PNG)


def test_a_log_profit_axis_reads_as_numbers_not_mathtext_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profits spanning two decades put Figure 2 on a log axis. Its ticks were matplotlib's
    mathtext (`$\\mathdefault{10^{-2}}$`), which the report turns off for user labels, so
    the paper-scale rehearsal's figure showed that source, the labels overlapping."""
    from runs.report_figures import _style, leaderboard

    ticks: list[str] = []
    save = _style.save

    def read_ticks(fig: Any, path: Path) -> None:
        fig.canvas.draw()
        ax = fig.axes[0]
        assert ax.get_xscale() == "log"
        low, high = ax.get_xlim()
        shown = [t for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
        ticks.extend(t.get_text() for t in shown)
        save(fig, path)

    monkeypatch.setattr(_style, "save", read_ticks)
    rows = [
        {"model": f"m{i}", "arm": "baseline", "scored": True, "brier": None, "profit": _iv(v)}
        for i, v in enumerate((0.0004, 0.003, 0.05))
    ]
    leaderboard.draw(FigureInputs({"rows": rows}), tmp_path / "fig2.png")
    assert ticks == ["10\u207b\u00b3", "10\u207b\u00b2"]
    assert _style.decade_label(1.0) == "10\u2070" and _style.decade_label(100.0) == "10\u00b2"
    assert _style.decade_label(0.002) == "0.002"


def _iv(mean: float) -> dict[str, float]:
    return {"mean": mean, "lo": mean * 0.8, "hi": mean * 1.2}


def test_a_paper_sized_summary_draws_without_scores(tmp_path: Path) -> None:
    """15 models on the baseline, the workhorse on every arm, 5 passes: the figures that need
    only the summary are drawn (the paper's Figures 2, 3, 4 and 4C), the rest say why not."""
    from panels.arms import ARMS

    models = [f"model-{i:02d}" for i in range(15)]
    rows = [
        {"model": m, "arm": "baseline", "scored": True, "profit": _iv(0.002 * (i + 1) ** 1.7),
         "brier": _iv(0.2 + 0.001 * i), "vs_baseline": None}
        for i, m in enumerate(models)
    ]  # fmt: skip
    single = [a for a in ARMS if "/" not in a or a.startswith(("red-herring/", "unresolved/"))]
    for arm in single:
        if arm in {"baseline", "two-asset", "linked", "dispersed"}:
            continue
        rows.append({"model": models[0], "arm": arm, "scored": True, "profit": _iv(0.004),
                     "vs_baseline": _iv(0.002)})  # fmt: skip
    for key in ("A", "B", "marginals", "full"):
        rows.append({"model": models[0], "arm": f"two-asset {key}", "scored": True,
                     "profit": _iv(0.003)})  # fmt: skip
    for h in (2, 3, 4):
        for key in [*(f"d{d}" for d in range(1, h + 1)), "marginals", "full"]:
            rows.append({"model": models[0], "arm": f"horizon/{h} {key}", "scored": True,
                         "profit": _iv(0.003 * h)})  # fmt: skip
    repeated = [{"model": models[0], "arm": "baseline", "passes": 5, "single_pass_mean": 0.0021,
                 "by_k": [{"k": k, **_iv(0.0021 - 0.0001 * k)} for k in range(1, 6)]}]  # fmt: skip
    figures = draw_all(FigureInputs({"rows": rows, "repeated_elicitation": repeated}), tmp_path)
    drawn = {f.key for f in figures if f.path is not None}
    assert drawn == {"leaderboard", "horizons", "arms", "repeated"}
    for f in figures:
        if f.path is not None:
            assert f.path.read_bytes().startswith(PNG)
        else:
            assert f.omitted


def _drawn_figure(module: Any, inputs: FigureInputs, path: Path, monkeypatch: Any) -> Any:
    """Draw one figure and keep the matplotlib figure (saved too) to look inside it."""
    from runs.report_figures import _style

    kept: list[Any] = []
    save = _style.save

    def keep(fig: Any, p: Path) -> None:
        kept.append(fig)
        save(fig, p)

    monkeypatch.setattr(_style, "save", keep)
    module.draw(inputs, path)
    (fig,) = kept
    return fig


@pytest.mark.parametrize("passes", [5, 300])
def test_repeated_elicitation_ticks_stay_readable_at_any_number_of_passes(
    passes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few passes: a tick and an error bar per k. Hundreds: a line in a shaded band, a few
    integer ticks (one label per k printed them on top of one another)."""
    from runs.report_figures import repeated as figure

    by_k = [{"k": k, **_iv(0.002 + 0.001 / k)} for k in range(1, passes + 1)]
    cell = {"model": "m", "arm": "baseline", "passes": passes, "single_pass_mean": 0.003,
            "by_k": by_k}  # fmt: skip
    inputs = FigureInputs({"rows": [], "repeated_elicitation": [cell]})
    fig = _drawn_figure(figure, inputs, tmp_path / "fig7.png", monkeypatch)
    (ax,) = fig.axes
    ticks = [t for t in ax.get_xticks() if 1 <= t <= passes]
    if passes <= figure.MANY_PASSES:
        assert ticks == list(range(1, passes + 1))
        assert len(ax.containers) == 1  # the error bars
    else:
        assert 3 <= len(ticks) <= 12 and all(float(t).is_integer() for t in ticks)
        assert not ax.containers
        (band,) = ax.collections  # the intervals' band
        edge = band.get_paths()[0].vertices[:, 1]
        low, high = edge.min(), edge.max()
        assert low == pytest.approx(min(b["lo"] for b in by_k))
        assert high == pytest.approx(max(b["hi"] for b in by_k))


@pytest.mark.parametrize("unknown", [None, float("nan")])
def test_repeated_elicitation_on_a_single_date_keeps_every_pass_in_view(
    unknown: float | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On one date no interval is drawn (its ends unknown): the k axis began at 0, a third of
    the panel empty, and the last pass's markers were cut in half at its right edge."""
    from runs.report_figures import repeated as figure

    by_k = [{"k": k, "mean": 0.002 + 0.001 / k, "lo": unknown, "hi": unknown} for k in (1, 2, 3)]
    cell = {"model": "m", "arm": "baseline", "passes": 3, "single_pass_mean": 0.003,
            "by_k": by_k}  # fmt: skip
    inputs = FigureInputs({"rows": [], "repeated_elicitation": [cell]})
    fig = _drawn_figure(figure, inputs, tmp_path / "fig7.png", monkeypatch)
    (ax,) = fig.axes
    left, right = ax.get_xlim()
    assert 0.5 < left < 1 and 3 < right < 3.5, (left, right)


def test_repeated_elicitation_of_the_papers_ten_arms_wraps_into_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paper's sweep scores ten arms with several passes: side by side, ten panels were
    too narrow for their labels, and matplotlib's layout gave up with a warning that reached
    the run's stderr. Three panels a row, each arm in one, no warning."""
    import warnings

    from runs.report_figures import repeated as figure

    arms = [f"arm-{i}" for i in range(10)]
    cells = [
        {"model": m, "arm": arm, "passes": 5, "single_pass_mean": 0.003,
         "by_k": [{"k": k, **_iv(0.002 + 0.001 / k)} for k in range(1, 6)]}
        for arm in arms for m in ("gpt-oss-120b", "claude-sonnet-5")
    ]  # fmt: skip
    inputs = FigureInputs({"rows": [], "repeated_elicitation": cells})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = _drawn_figure(figure, inputs, tmp_path / "fig7.png", monkeypatch)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title(loc="left") for ax in shown] == arms
    rows = sorted({round(ax.get_position().y0, 3) for ax in shown}, reverse=True)
    assert len(rows) == 4  # 3 + 3 + 3 + 1
    assert len(fig.axes) - len(shown) == 2  # the last row's two empty places, hidden


def test_a_horizons_panel_a_model_did_not_run_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One model ran the two-asset arm only, the other a horizon arm only: each row keeps both
    columns, and the slot it has nothing for says why instead of standing blank."""
    from runs.report_figures import horizons as figure

    rows = [{"model": m, "arm": "baseline", "scored": True, "profit": _iv(0.01)} for m in "ab"]
    rows += [{"model": "a", "arm": f"two-asset {key}", "scored": True, "profit": _iv(0.02)}
             for key in ("A", "B", "marginals", "full")]  # fmt: skip
    rows += [{"model": "b", "arm": f"horizon/2 {key}", "scored": True, "profit": _iv(0.03)}
             for key in ("d1", "d2", "marginals", "full")]  # fmt: skip
    fig = _drawn_figure(figure, FigureInputs({"rows": rows}), tmp_path / "fig3.png", monkeypatch)
    assert len(fig.axes) == 4
    blank = [ax for ax in fig.axes if not ax.axison]
    said = sorted(" ".join(t.get_text().split()) for ax in blank for t in ax.texts)
    assert said == [
        "(A) two assets: the two-asset arm was not run for b",
        "(B) horizons: no horizon arm was run for a",
    ]


@dataclass(frozen=True)
class DrawnOnce:
    """Every figure of `figures_run` drawn once into `folder` by `draw_all`, everything read,
    and the identity of the figure each matplotlib `Figure.draw` and each `_style.save` was
    given, in order."""

    folder: Path
    figures: list[Figure]
    draws: list[int]
    saved: list[int]


@pytest.fixture(scope="session")
def drawn_once(
    figures_run: Path, made_once: Callable[[str, Callable[[Path], None]], Path]
) -> DrawnOnce:
    """Drawn once per session (`made_once`) for the three tests that each drew every figure
    of the run afresh, one of them twice, to compare with or count: about 3 s of CPU a draw."""
    from matplotlib.figure import Figure as MplFigure

    def draw(out: Path) -> None:
        draws: list[int] = []
        saved: list[int] = []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(MplFigure, "draw", _noting_whose(MplFigure.draw, draws))
            patch.setattr(_style, "save", _noting_whose(_style.save, saved))
            figures = draw_all(FigureInputs.from_run(figures_run, _summary(figures_run)), out)
        drawn = {"figures": [f.to_json() for f in figures], "draws": draws, "saved": saved}
        (out / "drawn.json").write_bytes(orjson.dumps(drawn))

    folder = made_once("figures-drawn", draw)
    drawn = orjson.loads((folder / "drawn.json").read_bytes())
    figures = [
        Figure(f["number"], f["key"], f["title"], None if f["path"] is None else Path(f["path"]),
               f["caption"], f["omitted"], f["missing_glyphs"])
        for f in drawn["figures"]
    ]  # fmt: skip
    return DrawnOnce(folder, figures, drawn["draws"], drawn["saved"])


def test_each_figure_drawn_with_only_its_reads_is_the_same_picture(
    figures_run: Path, drawn_once: DrawnOnce, tmp_path: Path
) -> None:
    """A figure worker reads only what its share of figures uses (`reads_of`): every figure
    drawn that way is byte for byte the one drawn with everything read, so `FIGURE_READS`
    leaves nothing out that a figure uses (and a figure that needs a read says so: figure 8
    without the timeline is left out)."""
    summary = _summary(figures_run)
    everything = drawn_once.figures  # draw_all(FigureInputs.from_run(figures_run, summary))
    for figure in everything:
        alone = FigureInputs.from_run(figures_run, summary, reads=reads_of([figure.number]))
        [again] = draw_all(alone, tmp_path / f"alone{figure.number}", [figure.number])
        assert again.omitted == figure.omitted
        if figure.path is not None:
            assert again.path is not None
            assert again.path.read_bytes() == figure.path.read_bytes(), figure.key
    assert {f.number for f in everything if f.path} >= set(FIGURE_READS)  # the reads matter
    bare = FigureInputs.from_run(figures_run, summary, reads=())
    [audit] = draw_all(bare, tmp_path / "bare", [8])
    assert audit.path is None and audit.omitted


def _legend_clear_of_axis_labels(fig: Any) -> None:
    """The figure's bottom legend lies wholly below every panel with its tick labels and axis
    label (none is covered)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    top = legend.get_window_extent(renderer).y1
    panels = [ax for ax in fig.axes if ax.axison]
    assert panels
    assert all(top <= ax.get_tightbbox(renderer).y0 for ax in panels)


@pytest.mark.parametrize("models", [2, 6])
def test_figure_4s_legend_leaves_the_axis_label_clear(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: int
) -> None:
    """Six models make two legend rows under a short figure: they once covered the label."""
    from runs.report_figures import arms

    summary = _summary(figures_run)
    paired = [r for r in summary["rows"] if r.get("vs_baseline") and " " not in r["arm"]]
    assert paired
    rows = [{**r, "model": f"model-{k}"} for k in range(models) for r in paired]
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    arms.draw(FigureInputs({**summary, "rows": rows}), tmp_path / "fig4.png")
    _legend_clear_of_axis_labels(kept[0])


@pytest.mark.parametrize("number", [6, 8])
def test_the_other_bottom_legends_leave_the_axis_labels_clear(
    figures_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, number: int
) -> None:
    from runs.report_figures import module_of

    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    module_of(number).draw(
        FigureInputs.from_run(figures_run, _summary(figures_run)), tmp_path / "f.png"
    )
    _legend_clear_of_axis_labels(kept[0])


def _save_tight(fig: Any, path: Path) -> None:
    """What `_style.save` did before: matplotlib's own "tight" trim (a draw, then measure),
    of the figure with its footer (`_style.footer`)."""
    plt = _style.pyplot()
    _style.add_footer(fig)
    fig.savefig(path, dpi=_style.DPI, bbox_inches="tight", pad_inches=_style.PAD_INCHES)
    plt.close(fig)


def test_every_figure_is_saved_byte_for_byte_as_the_tight_trim_saves_it(
    figures_run: Path, drawn_once: DrawnOnce, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = FigureInputs.from_run(figures_run, _summary(figures_run))
    measured, tight = drawn_once.folder, tmp_path / "tight"  # measured: `_style.save`'s
    tight.mkdir()
    monkeypatch.setattr(_style, "save", _save_tight)
    draw_all(inputs, tight)
    drawn = sorted(p.name for p in measured.glob("*.png"))
    assert drawn == sorted(f"fig{n}_{key}.png" for n, key, _ in FIGURES)  # every module
    for name in drawn:
        assert (measured / name).read_bytes() == (tight / name).read_bytes(), name


def _noting_whose(function: Any, seen: list[int]) -> Any:
    """`function`, noting the identity of its first argument (a figure) at each call."""

    def noted(first: Any, *args: Any) -> Any:
        seen.append(id(first))
        return function(first, *args)

    return noted


def test_every_figure_is_drawn_once(drawn_once: DrawnOnce) -> None:
    """Saving draws a figure once: matplotlib draws one that has any layout engine set (even
    the placeholder `Figure.tight_layout` leaves behind) a second time, rendering off, first.
    (`drawn_once` notes the draws and saves of a `draw_all` of every figure.)"""
    draws, saved = drawn_once.draws, drawn_once.saved
    assert len(saved) == len(FIGURES)
    assert draws == saved  # each figure once, when it is saved


def test_a_figure_keeping_a_layout_engine_is_trimmed_the_tight_way(tmp_path: Path) -> None:
    plt = _style.pyplot()
    files: list[Path] = []
    for save in (_style.save, _save_tight):
        fig = plt.figure(figsize=(4, 3), layout="constrained")
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel("a label long enough to reach past the axes on both sides of it")
        fig.legend(["line"], loc="lower center", bbox_to_anchor=(0.5, -0.2))
        files.append(tmp_path / f"{len(files)}.png")
        save(fig, files[-1])
    assert files[0].read_bytes() == files[1].read_bytes()


def test_a_save_cut_short_leaves_the_figure_before_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`save` wrote the PNG straight onto its file: a report killed (SIGKILL) while it did
    left `fig1_books.png` cut short, 0 bytes once. Here the save stops after half a PNG,
    as a kill would stop it: the file is the one before, and no temporary is left beside."""
    from matplotlib.figure import Figure as MplFigure

    def cut_short(self: Any, fname: Any, **_kw: Any) -> None:
        half = b"\x89PNG\r\n\x1a\n half of it"
        if isinstance(fname, str | Path):
            Path(fname).write_bytes(half)
        else:
            fname.write(half)
        raise KeyboardInterrupt  # stands for the kill: nothing after this line runs

    plt = _style.pyplot()
    path = tmp_path / "fig1_books.png"
    fig = plt.figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [0, 1])
    _style.save(fig, path)
    before = path.read_bytes()
    monkeypatch.setattr(MplFigure, "savefig", cut_short)
    fig = plt.figure(figsize=(2, 2))
    with pytest.raises(KeyboardInterrupt):
        _style.save(fig, path)
    plt.close(fig)
    assert path.read_bytes() == before


def test_the_audit_figure_of_one_attempt_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane stopped at its first reply: every attempt at one instant, slices of no width.
    The bar is still drawn, and the panel's title counts in the singular."""
    from runs.report_figures import module_of

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    timeline = pl.DataFrame(  # engine.audit.attempt_timeline's columns
        {"model": ["m"], "bin": [0], "start": [t0], "end": [t0],
         "outcome": ["connection_error"], "attempts": [1]}
    )  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = module_of(8).draw(FigureInputs({"rows": []}, timeline=timeline), tmp_path / "f.png")
    [ax] = [ax for ax in kept[0].axes if ax.patches]
    assert [bar.get_width() > 0 and bar.get_height() == 1 for bar in ax.patches] == [True]
    assert ax.get_title(loc="left") == "m: 1 attempt, 1 retry attempt (100.0%)"
    assert "each slice of the campaign (all at one instant)" in caption
    # The legend in the audit's words, not the ledger's codes (a referee: "connection_error").
    [legend] = kept[0].legends
    assert [text.get_text() for text in legend.get_texts()] == ["connection errors"]


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(3.2, "3.2 s each"), (300, "5.0 min each"), (0.0794, "79.4 ms each"),
     (1e7, "115.7 days each")],  # no "1e+03 min" for a folder resumed weeks later
)  # fmt: skip
def test_the_audit_figures_caption_says_how_long_a_slice_is(
    tmp_path: Path, seconds: float, said: str
) -> None:
    """A referee: the caption said "each slice" without saying how long one is, and not that
    each panel has its own scale."""
    from runs.report_figures import module_of

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    step = dt.timedelta(seconds=seconds)
    timeline = pl.DataFrame(  # engine.audit.attempt_timeline's columns
        {"model": ["m", "m"], "bin": [0, 1], "start": [t0, t0 + step],
         "end": [t0 + step, t0 + 2 * step], "outcome": ["ok", "ok"], "attempts": [3, 4]}
    )  # fmt: skip
    caption = module_of(8).draw(FigureInputs({"rows": []}, timeline=timeline), tmp_path / "f.png")
    assert f"each slice of the campaign ({said})" in caption
    assert "Each panel has its own scale of attempts." in caption


def test_the_audit_figure_counts_no_retry_for_replies_a_strict_reparse_rejected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replies the run accepted and a strict reparse rejected (`rejected_on_reparse` in the
    audit's timeline) were drawn and counted as invalid-response retry attempts, where the
    audit counts none: they are drawn apart, said in the caption, and no retry. They were
    drawn in the fallback grey, which the caption named "those in grey" beside the accepted
    attempts' grey and the refusals': they have a colour of their own, and the caption names
    them by what they are, where they are stacked."""
    from matplotlib.colors import to_rgba

    from engine.audit import REJECTED_ON_REPARSE
    from runs.report_figures import module_of
    from runs.report_figures.audit import OUTCOME_COLOURS

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    timeline = pl.DataFrame(
        [("m", 0, t0, t0 + dt.timedelta(seconds=1), outcome, n)
         for outcome, n in (("accepted", 3), ("rejected_on_reparse", 2), ("timeout", 1))],
        schema=["model", "bin", "start", "end", "outcome", "attempts"], orient="row",
    )  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = module_of(8).draw(FigureInputs({"rows": []}, timeline=timeline), tmp_path / "f")
    [ax] = [ax for ax in kept[0].axes if ax.patches]
    assert ax.get_title(loc="left") == "m: 6 attempts, 1 retry attempt (16.7%)"
    assert (
        " Except the replies the run accepted and a strict reparse rejected (rejected_on_reparse"
        " in the legend, stacked just above the accepted attempts): never retried." in caption
    )
    assert "grey" not in caption
    own = OUTCOME_COLOURS[REJECTED_ON_REPARSE]
    assert own not in {c for o, c in OUTCOME_COLOURS.items() if o != REJECTED_ON_REPARSE}
    bottom_up = [to_rgba(p.get_facecolor()) for p in ax.patches]
    assert bottom_up == [to_rgba(c) for c in (OUTCOME_COLOURS["accepted"], own,
                                               OUTCOME_COLOURS["timeout"])]


def test_the_audit_figures_titles_beside_each_other_do_not_run_into_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four models named like "openai/gpt-oss-120b-long-deployment-name-eu-1" (two columns
    of panels) wrote their titles over each other's, the counts unreadable. A title now
    breaks into lines that fit its panel, the name whole."""
    from runs.report_figures import module_of
    from runs.report_figures.audit import TITLE_CHARS

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    models = [f"openai/gpt-oss-120b-long-deployment-name-eu-{n}" for n in range(4)]
    timeline = pl.DataFrame(
        [(m, 0, t0, t0 + dt.timedelta(seconds=1), "accepted", 3) for m in models],
        schema=["model", "bin", "start", "end", "outcome", "attempts"], orient="row",
    )  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    module_of(8).draw(FigureInputs({"rows": []}, timeline=timeline), tmp_path / "f.png")
    titles = [ax.get_title(loc="left") for ax in kept[0].axes if ax.patches]
    counts = "3 attempts, 0 retry attempts (0.0%)"
    assert titles[0] == f"openai/gpt-oss-120b-long-deployment-name-eu-0:\n{counts}"
    assert all(len(line) <= TITLE_CHARS[2] for title in titles for line in title.split("\n"))


def test_the_audit_figure_of_many_models_draws_those_with_the_most_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand models took 9 minutes to draw one panel each; the figure draws at most
    MAX_PANELS, the models with the most retry attempts (ties by name), and says so."""
    from runs.report_figures import module_of
    from runs.report_figures.audit import MAX_PANELS

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    models = [f"m{n:03d}" for n in range(100)]
    # Model n: 5 accepted attempts and n % 7 rate limits (none for multiples of 7).
    rows = [(m, 0, t0, t0 + dt.timedelta(seconds=1), "accepted", 5) for m in models] + [
        (m, 0, t0, t0 + dt.timedelta(seconds=1), "rate_limit", n % 7)
        for n, m in enumerate(models) if n % 7
    ]  # fmt: skip
    timeline = pl.DataFrame(
        rows, schema=["model", "bin", "start", "end", "outcome", "attempts"], orient="row"
    )
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = module_of(8).draw(FigureInputs({"rows": []}, timeline=timeline), tmp_path / "f.png")
    titles = [ax.get_title(loc="left") for ax in kept[0].axes if ax.patches]
    # By retries, then name: the 14 models with 6 (n % 7 == 6), then 10 of those with 5.
    most = sorted(models, key=lambda m: (-(int(m[1:]) % 7), m))[:MAX_PANELS]
    assert [title.split(":")[0] for title in titles] == sorted(most)
    assert caption.endswith(
        f" Drawn: the {MAX_PANELS} of 100 models with the most retry attempts; every model's "
        "counts are in audit.csv."
    )
    kept.clear()
    few = timeline.filter(pl.col("model").is_in(models[:MAX_PANELS]))
    caption = module_of(8).draw(FigureInputs({"rows": []}, timeline=few), tmp_path / "g.png")
    assert len([ax for ax in kept[0].axes if ax.patches]) == MAX_PANELS
    assert "Drawn:" not in caption


def test_the_family_figure_of_many_models_is_a_table_of_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past 10 models a bar colour stood for several models (32 models: three or four a
    colour); the figure is then one row per model, each cell its share, written out."""
    from runs.report_figures import module_of
    from runs.report_figures.families import MAX_BAR_MODELS

    models = [f"m{n:02d}" for n in range(MAX_BAR_MODELS + 2)]
    info = {"f1": FamilyInfo("negation", False), "f2": FamilyInfo("negation", False),
            "c1": FamilyInfo("negation", True)}  # fmt: skip
    # Model n is arbitrage-free on f1 always, on f2 when n is even; the control always.
    rows = [
        _score(m, "families/joint", f, 0, 0.0 if f != "f2" or n % 2 == 0 else 0.5, "family")
        for n, m in enumerate(models)
        for f in ("f1", "f2", "c1")
    ]
    profit = {"mean": 0.1, "lo": 0.0, "hi": 0.2}
    summary = {
        "rows": [
            {"model": m, "arm": "families/joint", "scored": True, "profit": profit}
            for m in models
        ]
    }
    inputs = FigureInputs(
        summary, scores=pl.DataFrame(rows, schema=SCORE_SCHEMA).lazy(), families=info
    )
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = module_of(6).draw(inputs, tmp_path / "f.png")
    [ax] = [ax for ax in kept[0].axes if ax.images]
    assert [t.get_text() for t in ax.get_yticklabels()] == models
    assert [t.get_text() for t in ax.get_xticklabels()] == ["negation (n=2)", "controls (n=1)"]
    written = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
               for t in ax.texts}  # fmt: skip
    assert written == {
        (n, column): ("100%" if column == 1 or n % 2 == 0 else "50%")
        for n in range(len(models))
        for column in (0, 1)
    }
    assert "per model (rows) and family shape (columns)" in caption and "Drawn:" not in caption


def test_repeated_elicitation_of_question_families_names_their_metric_and_clusters(
    tmp_path: Path,
) -> None:
    """Figure 7 said 'per unit stake' and 'date-clustered' of family arms too, which are
    scored in L1 and resampled by family (the summary's rows give each arm's norm)."""
    from runs.report_figures import repeated as figure

    by_k = [{"k": k, **_iv(0.02 + 0.01 / k)} for k in (1, 2)]
    cells = [{"model": "m", "arm": arm, "passes": 2, "single_pass_mean": 0.03, "by_k": by_k}
             for arm in ("families/isolated", "baseline")]  # fmt: skip
    rows = [{"model": "m", "arm": "families/isolated", "norm": "l1"},
            {"model": "m", "arm": "baseline", "norm": "inf"}]  # fmt: skip
    families = figure.draw(FigureInputs({"rows": rows, "repeated_elicitation": cells[:1]}),
                           tmp_path / "f.png")  # fmt: skip
    assert "Mean L1 profit after" in families and "95% family-clustered intervals" in families
    assert "per unit stake" not in families and "date" not in families
    paper = figure.draw(FigureInputs({"rows": rows, "repeated_elicitation": cells[1:]}),
                        tmp_path / "p.png")  # fmt: skip
    assert "Mean profit per unit stake after" in paper and "95% date-clustered" in paper
    both = figure.draw(FigureInputs({"rows": rows, "repeated_elicitation": cells}),
                       tmp_path / "b.png")  # fmt: skip
    assert "question families' in L1" in both and "date- or family-clustered" in both


def test_figure_7_says_when_averaging_cannot_raise_the_profit(tmp_path: Path) -> None:
    """A referee's run with answers missing saw the all-pass average above the single-pass
    mean in both cells, under a caption saying it "can never exceed" it: convexity bounds it
    only when every pass answered the same questions."""
    from runs.report_figures import repeated as figure

    by_k = [{"k": k, **_iv(0.002 + 0.001 / k)} for k in (1, 2)]
    cell = {"model": "m", "arm": "baseline", "passes": 2, "single_pass_mean": 0.0025,
            "by_k": by_k}  # fmt: skip
    caption = figure.draw(FigureInputs({"rows": [], "repeated_elicitation": [cell]}),
                          tmp_path / "fig7.png")
    assert "never exceed when every pass answered the same questions" in caption
    assert "left different questions unanswered, may land on either side" in caption


def test_the_audit_figures_legend_lists_causes_in_the_tables_order() -> None:
    """Figure 8's legend follows its colour table: `damaged_batch_result`, added last there,
    came after every other cause where every table lists it before invalid responses."""
    from engine.audit import CAUSES, REJECTED_ON_REPARSE
    from runs.report_figures.audit import ACCEPTED, OUTCOME_COLOURS

    # Replies a strict reparse rejected, no retry either, sit on the accepted attempts.
    assert list(OUTCOME_COLOURS) == [ACCEPTED, REJECTED_ON_REPARSE, *CAUSES]


#: Dichromacy at full severity as Machado, Oliveira and Fernandes (2009) simulate it: a matrix
#: applied to linear sRGB.
DICHROMACY = {
    "deuteranopia": [[0.367322, 0.860646, -0.227968],
                     [0.280085, 0.672501, 0.047413],
                     [-0.011820, 0.042940, 0.968881]],
    "protanopia": [[0.152286, 1.052583, -0.204868],
                   [0.114503, 0.786281, 0.099216],
                   [-0.003882, -0.048116, 1.051998]],
}  # fmt: skip
#: Linear sRGB to CIE XYZ, and the D65 white, for CIELAB.
SRGB_TO_XYZ = [[0.4124564, 0.3575761, 0.1804375],
               [0.2126729, 0.7151522, 0.0721750],
               [0.0193339, 0.1191920, 0.9503041]]  # fmt: skip
D65 = (0.95047, 1.0, 1.08883)
#: The least CIE76 distance asked of two outcome colours as a dichromat sees them: about five
#: just-noticeable differences (2.3 each). Connection errors and timeouts were 1.7 apart.
DISTINCT = 12.0


def seen_with(kind: str, colour: str) -> np.ndarray:
    """CIELAB of `colour` (#rrggbb) as simulated `kind` of dichromacy shows it."""
    srgb = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    simulated = np.clip(np.array(DICHROMACY[kind]) @ linear, 0.0, 1.0)
    xyz = np.array(SRGB_TO_XYZ) @ simulated / np.array(D65)
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("kind", sorted(DICHROMACY))
def test_the_audit_figures_outcome_colours_stay_apart_to_a_dichromat(kind: str) -> None:
    """Figure 8 drew connection errors (violet) and timeouts (blue) in what a deuteranope sees
    as one blue (CIE76 1.7), and provider errors and missing routing metadata as one olive
    (3.8); protanopia joined rate limits and truncated replies (7.4). Every two causes now
    stay `DISTINCT` apart under both simulations."""
    from runs.report_figures.audit import OUTCOME_COLOURS

    seen = {outcome: seen_with(kind, colour) for outcome, colour in OUTCOME_COLOURS.items()}
    close = {
        (a, b): round(float(np.linalg.norm(seen[a] - seen[b])), 1)
        for a, b in itertools.combinations(seen, 2)
        if np.linalg.norm(seen[a] - seen[b]) < DISTINCT
    }
    assert close == {}, close


def test_a_book_of_thousands_of_binding_statements_draws_its_largest_stakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the L1 metric every statement of a family can bind: a family of 20,000 drew 20,000
    rows, and its report took five minutes and 4 GB. The largest stakes are drawn, and said."""
    n = 2_000
    stakes = [(-1.0) ** i * (i + 1) / n for i in range(n)]  # all binding, the largest last
    book = books.Book("m", "families/isolated", "big", 0, "family", "l1", 5.0,
                      [f"s{i}" for i in range(n)], [0.5] * n, [0.4] * n, stakes)  # fmt: skip
    shown = books._shown(book)
    assert shown == list(range(n - books.MAX_EVENTS_SHOWN, n))
    monkeypatch.setattr(books, "top_books", lambda inputs: [book])
    fig, _ = _drawn_books(cast(FigureInputs, None), tmp_path / "fig1.png", monkeypatch)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"s{i}" for i in shown]
    assert f"the {books.MAX_EVENTS_SHOWN} largest of 2,000 stakes" in fig.axes[0].get_title(
        loc="left"
    )


def test_the_leaderboard_caption_says_when_it_draws_no_interval(tmp_path: Path) -> None:
    """A real model's two-stock, one-date run drew bare points under a caption promising
    95% intervals (one date gives none: their ends are null)."""
    from runs.report_figures import leaderboard

    def row(model: str, lo: float | None, hi: float | None) -> dict[str, Any]:
        return {"model": model, "arm": "baseline", "scored": True, "brier": None,
                "profit": {"mean": 0.01, "lo": lo, "hi": hi}}  # fmt: skip

    def caption(*rows: dict[str, Any]) -> str:
        return leaderboard.draw(FigureInputs({"rows": list(rows)}), tmp_path / "fig2.png")

    assert "with 95% date-clustered bootstrap intervals;" in caption(row("a", 0.005, 0.02))
    said = caption(row("a", None, None), row("b", None, None))
    assert "without intervals (fewer than two dates with scores" in said and "95%" not in said
    said = caption(row("a", 0.005, 0.02), row("b", None, None))
    assert "intervals (none where fewer than two dates have scores)" in said
    # Brier's too: outcomes known on one date only, its points bare beside profit's bars.
    briered = row("a", 0.005, 0.02) | {"brier": {"mean": 0.2, "lo": None, "hi": None}}
    assert "(none where fewer than two dates have scores)" in caption(briered)


@pytest.mark.parametrize(("drawn", "said"), [(1, "Only one book is"),
                                              (2, "Only 2 books are"), (3, None)])
def test_figure_1_says_when_it_draws_fewer_than_three_books(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drawn: int, said: str | None
) -> None:
    """Under its title "The three most profitable Dutch books" a real model's two-unit run
    drew two, without a word."""
    book = books.Book("m", "baseline", "2020-01-02:AAA", 0, "d1", "inf", 0.2, ["a", "b"],
                      [0.6, 0.6], [0.5, 0.5], [-0.5, -0.5])  # fmt: skip
    monkeypatch.setattr(books, "top_books", lambda inputs: [book] * drawn)
    _, caption = _drawn_books(cast(FigureInputs, None), tmp_path / "fig1.png", monkeypatch)
    if said is None:
        assert "Only" not in caption
    else:
        assert (
            f"{said} drawn: no other model, arm and unit of the stock-return arms had a "
            "positive profit." in caption
        ), caption


def test_figures_of_arms_that_ran_with_no_model_scored_say_so(tmp_path: Path) -> None:
    """A hostile run, every model under the coverage floor: figure 1 said no scored set had a
    positive profit (the unscored baseline's sets did) and figure 6 that no family arm was run
    (both had: 131 of 155 statements answered). Each says now that no model was scored."""
    unscored = [
        {"model": m, "arm": arm, "scored": False, "status": status, "coverage": cov}
        for m, status, cov in (("a", "below_coverage_floor", 0.85), ("b", "no_answers", 0.0))
        for arm in ("baseline", "families/isolated", "families/joint", "horizon/2 full",
                    "linked (assets)")
    ]  # fmt: skip
    positive = [_score("a", "baseline", "2020-01-02:AAA", 0, 4e-5, "h1"),
                _score("a", "families/joint", "f1", 0, 0.76, "family")]  # fmt: skip
    inputs = FigureInputs(
        {"baseline_arm": "baseline", "coverage_floor": 0.9, "rows": unscored},
        scores=pl.DataFrame(positive, schema=SCORE_SCHEMA).lazy(),
        forecasts=pl.DataFrame(schema={"model": pl.String}).lazy(),
    )
    reasons = {f.key: f.omitted for f in draw_all(inputs, tmp_path, numbers=(1, 3, 5, 6))}
    why = ("no model was scored {} (1 model under the 90% coverage floor, 1 model with no "
           "answers there)")
    assert reasons["books"] == why.format("on any arm") + ": there is no Dutch book to draw"
    assert reasons["families"] == (
        "the family arms ran (families/isolated, families/joint), but " + why.format("on them")
    )
    assert reasons["horizons"] == "the two-asset or horizon arms ran, but " + why.format("on them")
    assert reasons["linked"] == "the linked or dispersed arms ran, but " + why.format("on them")


def test_figure_1_names_a_books_pass_as_the_scores_table_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A referee: a one-pass run's book read "pass 1" where scores.parquet has pass 0 only."""
    book = books.Book("m", "baseline", "2020-01-02:AAA", 0, "d1", "inf", 0.2, ["a", "b"],
                      [0.6, 0.6], [0.5, 0.5], [-0.5, -0.5])  # fmt: skip
    monkeypatch.setattr(books, "top_books", lambda inputs: [book])
    fig, _ = _drawn_books(cast(FigureInputs, None), tmp_path / "fig1.png", monkeypatch)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any("· pass 0" in t for t in titles) and not any("pass 1" in t for t in titles)


def test_figure_1s_caption_says_which_sets_its_books_are_ranked_among() -> None:
    """A referee: "The three most profitable Dutch books" did not say they were the
    stock-return sets' only, where family sets reached 1.34 in L1 units."""
    assert "the most profitable of the stock-return arms' sets alone" in books.caption(WITH_BINS)
    said = books.caption(WITHOUT_BINS)
    assert "No stock-return set had a book" in said and "question-family sets" in said
