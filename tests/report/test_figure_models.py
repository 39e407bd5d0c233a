"""Models across the figures that draw one colour per model (4, 6, 7): a model drawn only in
a later panel is in the legend, and a model has one colour (and marker) in every figure of a
report.

A referee's three-model run drew sim-framing orange in figure 4 and sim-noisy orange in
figure 7 (each figure numbered the models it drew), and figure 4 named sim-noisy alone,
though sim-framing was drawn in its panel (D) (the legend was read from panel (A)).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from matplotlib.colors import to_rgba, to_rgba_array
from matplotlib.patches import Rectangle

from runs.planned_families import FamilyInfo
from runs.report_figures import FigureInputs, _style, module_of
from runs.scoring_step import SCORE_SCHEMA

FAMILIES = {"f1": FamilyInfo("negation", False), "f2": FamilyInfo("threshold", False)}


def _iv(mean: float) -> dict[str, float]:
    return {"mean": mean, "lo": mean * 0.5, "hi": mean * 1.5}


def _row(model: str, arm: str) -> dict[str, Any]:
    paired = None if arm == "baseline" or arm.startswith("families/") else _iv(0.002)
    return {"model": model, "arm": arm, "scored": True, "profit": _iv(0.01),
            "vs_baseline": paired}  # fmt: skip


def _repeated(model: str, arm: str) -> dict[str, Any]:
    by_k = [{"k": k, **_iv(0.01 - 0.001 * k)} for k in (1, 2)]
    return {"model": model, "arm": arm, "passes": 2, "single_pass_mean": 0.01, "by_k": by_k}


def _family_score(model: str, arm: str, unit: str) -> dict[str, Any]:
    return {"model": model, "arm": arm, "unit": unit, "pass": 0, "set": "family",
            "cluster": unit, "norm": "l1", "profit": 0.02, "coverage": 1.0, "events": [],
            "stakes": [], "coherent": [], "brier": None, "answered": 1}  # fmt: skip


def _inputs(
    rows: list[dict[str, Any]],
    repeated: list[dict[str, Any]] | None = None,
    models: list[str] | None = None,
) -> FigureInputs:
    """Rows, repeated cells, and each family arm's rows scored on two families."""
    scores = [
        _family_score(r["model"], r["arm"], unit)
        for r in rows
        if r["arm"].startswith("families/")
        for unit in FAMILIES
    ]
    summary: dict[str, Any] = {"rows": rows, "repeated_elicitation": repeated or []}
    if models is not None:
        summary["models"] = {m: {"coverage": 1.0} for m in models}
    frame = pl.DataFrame(scores, schema=SCORE_SCHEMA).lazy()
    return FigureInputs(summary, scores=frame, families=FAMILIES)


def _drawn(number: int, inputs: FigureInputs, tmp_path: Path, monkeypatch: Any) -> Any:
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    module_of(number).draw(inputs, tmp_path / f"fig{number}.png")
    (fig,) = kept
    return fig


def _legend_texts(fig: Any) -> list[str]:
    """The texts of every legend the figure holds, its own and its panels'."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def _colour(artist: Any) -> tuple[float, ...]:
    """An artist's colour: a bar's face, a line's colour (a collection's first)."""
    if isinstance(artist, Rectangle):
        return tuple(to_rgba(artist.get_facecolor()))
    return tuple(to_rgba(np.atleast_2d(to_rgba_array(artist.get_color()))[0]))


def _drawn_styles(fig: Any) -> dict[str, tuple[tuple[float, ...], str]]:
    """Colour and marker of each labelled model as drawn in the panels (not the legend)."""
    seen: dict[str, tuple[tuple[float, ...], str]] = {}
    for ax in fig.axes:
        for container in ax.containers:
            label = container.get_label()
            children = container.get_children()
            if label.startswith("_") or not children:
                continue
            first = children[0]
            marker = first.get_marker() if hasattr(first, "get_marker") else ""
            style = (_colour(first), str(marker))
            assert seen.setdefault(label, style) == style, label
    return seen


PANEL_LATER = {
    # figure: the rows (or repeated cells) that put model "b" in a later panel only
    4: ([_row("a", "statistics"), _row("b", "red-herring/anxiety")], None),
    6: ([_row("a", "families/isolated"), _row("b", "families/joint")], None),
    7: ([], [_repeated("a", "baseline"), _repeated("b", "red-herring/anxiety")]),
}


@pytest.mark.parametrize("number", sorted(PANEL_LATER))
def test_a_model_drawn_only_in_a_later_panel_is_in_the_legend(
    number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, repeated = PANEL_LATER[number]
    base = [_row(m, "baseline") for m in "ab"]
    fig = _drawn(number, _inputs([*base, *rows], repeated), tmp_path, monkeypatch)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    assert _legend_texts(fig) == ["a", "b"]


@pytest.mark.parametrize("number", sorted(PANEL_LATER))
def test_each_legend_entry_has_its_models_colour(
    number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figure 6's legend once took a model's swatch from an empty bar in panel one: the
    default colour, not the model's."""
    rows, repeated = PANEL_LATER[number]
    base = [_row(m, "baseline") for m in "ab"]
    fig = _drawn(number, _inputs([*base, *rows], repeated), tmp_path, monkeypatch)
    drawn = _drawn_styles(fig)
    (legend,) = fig.legends
    for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True):
        assert _colour(handle) == drawn[text.get_text()][0], text.get_text()


def test_a_model_has_one_colour_in_every_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three models: figure 4 draws alpha and gamma, figure 6 beta and gamma, figure 7 gamma
    alone. Each figure numbered its own models, so gamma was orange, orange, blue."""
    rows = [_row(m, "baseline") for m in ("alpha", "beta", "gamma")]
    rows += [_row("alpha", "statistics"), _row("gamma", "red-herring/anxiety")]
    rows += [_row(m, "families/joint") for m in ("beta", "gamma")]
    inputs = _inputs(rows, [_repeated("gamma", "baseline")])
    styles = {n: _drawn_styles(_drawn(n, inputs, tmp_path, monkeypatch)) for n in (4, 6, 7)}
    assert set(styles[4]) == {"alpha", "gamma"} and set(styles[6]) == {"beta", "gamma"}
    assert set(styles[7]) == {"gamma"}
    expected = _style.model_styles(["alpha", "beta", "gamma"])
    for drawn in styles.values():
        for model, (colour, marker) in drawn.items():
            assert colour == tuple(to_rgba(expected[model].colour)), model
            assert marker in {"", expected[model].marker}, model
    assert len({styles[4]["alpha"][0], styles[6]["beta"][0], styles[7]["gamma"][0]}) == 3


def test_the_report_models_are_every_model_it_names_sorted() -> None:
    """The summary's models (their coverage) and every row's and repeated cell's model, so
    the figures drawn before the repeated section and after it agree."""
    inputs = _inputs([_row("b", "baseline")], [_repeated("c", "baseline")], models=["z", "a"])
    assert inputs.models == ("a", "b", "c", "z")


def test_past_ten_models_bars_are_told_apart_by_hatching() -> None:
    """Ten colours: the 11th model's bars repeat the first's colour, so they are hatched (its
    markers differ likewise)."""
    styles = _style.model_styles([f"m{n:02d}" for n in range(12)])
    assert styles["m10"].colour == styles["m00"].colour
    assert styles["m10"].hatch != styles["m00"].hatch
    assert styles["m10"].marker != styles["m00"].marker
    assert len({(s.colour, s.hatch) for s in styles.values()}) == 12


def test_figure_4s_caption_says_why_its_letters_skip_c(tmp_path: Path) -> None:
    """The letters are the paper's Figure 4's panels, kept on purpose; its (C), repeated
    elicitation, is figure 7, which a reader seeing (A), (B), (D) could not know."""
    from runs.report_figures import arms

    rows = [_row("a", "baseline"), _row("a", "statistics"), _row("a", "red-herring/gut")]
    caption = arms.draw(_inputs(rows), tmp_path / "fig4.png")
    assert "its panel (C), repeated elicitation, is figure 7" in caption
    unlettered = arms.draw(_inputs([*rows[:1], _row("a", "unresolved/x")]), tmp_path / "u.png")
    assert "(C)" not in unlettered


def test_figure_4s_legend_markers_are_filled_whatever_the_first_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marker is filled where its interval excludes zero; the legend took each model's
    first point as its swatch, so a model read as "hollow" when its first arm's did."""
    straddles = {**_row("b", "statistics"),
                 "vs_baseline": {"mean": 0.001, "lo": -0.001, "hi": 0.003}}
    rows = [_row(m, "baseline") for m in "ab"] + [_row("a", "statistics"), straddles]
    fig = _drawn(4, _inputs(rows), tmp_path, monkeypatch)
    hollow = [c.get_children()[0] for ax in fig.axes for c in ax.containers
              if c.get_label() == "b"]
    assert to_rgba(hollow[0].get_markerfacecolor()) == to_rgba("white")  # drawn hollow
    (legend,) = fig.legends
    for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True):
        assert to_rgba(handle.get_markerfacecolor()) == _colour(handle), text.get_text()


@pytest.mark.parametrize(("n", "ncol"), [(5, 4), (2, 4), (8, 4), (7, 3), (1, 1), (6, 4)])
def test_a_bottom_legend_reads_row_by_row(n: int, ncol: int) -> None:
    """matplotlib fills a legend's columns first: five models in four columns read
    "anchored, fraction, framing, noisy" then "coherent" under the first."""
    plt = _style.pyplot()
    labels = [f"m{i}" for i in range(n)]
    fig, ax = plt.subplots()
    handles = [ax.plot([0], [i], label=label)[0] for i, label in enumerate(labels)]
    _style.bottom_legend(fig, handles, labels, ncol)
    fig.canvas.draw()
    (legend,) = fig.legends
    texts = legend.get_texts()
    placed = sorted(texts, key=lambda t: (-round(t.get_window_extent().y0),
                                          t.get_window_extent().x0))  # rows, top first
    assert [t.get_text() for t in placed] == labels
    for text, handle in zip(texts, legend.legend_handles, strict=True):  # pairs kept
        assert handle.get_label() == text.get_text()
    plt.close(fig)


@pytest.mark.parametrize("passes", [2, 20])
def test_models_points_differ_by_shape_and_never_hide_one_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, passes: int
) -> None:
    """A referee: in figure 7 a coherent model's markers lay whole under another's at 0, and
    the first ten models differed by colour alone (red beside green). A second: a shift in
    passes (0.04 of one) drew nothing apart in a panel of 20 passes."""
    from runs.report_figures import repeated

    styles = _style.model_styles([f"m{n}" for n in range(60)])
    assert len({s.marker for s in list(styles.values())[:6]}) == 6
    assert len({(s.colour, s.marker) for s in styles.values()}) == 60

    def cell(model: str, arm: str, value: float) -> dict[str, Any]:
        by_k = [{"k": k, "mean": value, "lo": value, "hi": value + 0.001}
                for k in range(1, passes + 1)]  # fmt: skip
        return {"model": model, "arm": arm, "passes": passes, "single_pass_mean": value,
                "by_k": by_k}  # fmt: skip

    cells = [cell(m, arm, v) for arm in ("a1", "a2", "a3")
             for m, v in (("alpha", 0.0), ("beta", 0.0), ("gamma", 0.01))]  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    caption = repeated.draw(
        FigureInputs({"rows": [], "repeated_elicitation": cells}), tmp_path / "f.png"
    )
    assert "set a few points apart" in caption
    ax = kept[0].axes[0]
    kept[0].canvas.draw()
    first = {}  # each model's first marker, in pixels on the page
    for container in ax.containers:  # an errorbar's: its label, then its data line first
        line = container.lines[0]
        first[container.get_label()] = line.get_transform().transform((line.get_xdata()[0], 0))
    gap = abs(first["alpha"][0] - first["beta"][0])
    assert gap >= 3 * kept[0].dpi / 72  # apart by points, whatever the number of passes
    low, high = ax.get_ylim()
    assert low <= 0.0 and high >= 0.011  # autoscaled to the data despite the shift
