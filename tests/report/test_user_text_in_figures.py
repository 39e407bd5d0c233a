"""The figures draw a user's text as written: a model named with `$` signs (mathtext's
delimiters) used to fail every figure, and with them the report (exit 1, a traceback); the
characters no installed font has are said once, not warned about at every figure."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import unicodedata
import warnings
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from runs.figures import read_manifest
from runs.report_figures import Omit, _style, missing_glyphs, module_of
from runs.report_figures.inputs import FigureInputs
from tests.runs.quiet_campaign import run_quietly

SPEC = r"""
name = "dollars"
seed = 3
[data]
stock_days = 2
[[models]]
name = 'm$\frac{$x'
provider = "sim"
model = "sim-noisy"
[[models]]
name = "costs $5 or $6"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


def test_a_model_named_with_dollar_signs_gets_its_report(tmp_path: Path) -> None:
    run_dir = run_quietly(tmp_path, "dollars", SPEC)
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert "m$\\frac{$x" in page and "costs $5 or $6" in page
    figures = sorted(p.name for p in (run_dir / "report").glob("fig*.png"))
    assert "fig1_books.png" in figures and "fig2_leaderboard.png" in figures, figures


#: U+E000, a private-use character: no font has a glyph for it, on any machine.
NO_FONT_HAS = "\ue000"
BOXES_SPEC = f"""
name = "boxes"
seed = 3
[data]
stock_days = 2
[[models]]
name = "m{NO_FONT_HAS}"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
"""


def test_characters_no_font_has_are_said_once_not_warned(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A model named in Chinese printed 32 lines of matplotlib warnings under the run's
    leaderboard (figures drawn with boxes for its name). Now one line says which characters
    are boxes, and so do the figures' captions and the summary."""
    with warnings.catch_warnings(record=True) as caught:  # figures drawn in this process
        warnings.simplefilter("always")
        run_dir = run_quietly(tmp_path, "boxes", BOXES_SPEC)
    assert not [w for w in caught if "Glyph" in str(w.message)]
    assert "Glyph" not in capfd.readouterr().err  # or in figure workers
    console = " ".join((tmp_path / "console.txt").read_text(encoding="utf-8").split())
    assert console.count(f"figures: no installed font has {NO_FONT_HAS}, drawn as boxes") == 1
    summary = orjson.loads((run_dir / "report" / "summary.json").read_bytes())
    assert summary["figures"]["missing_glyphs"] == NO_FONT_HAS
    manifest = {f["key"]: f for f in read_manifest(run_dir / "report")}
    said = f"No installed font has {NO_FONT_HAS}: drawn as boxes here."
    assert manifest["leaderboard"]["missing_glyphs"] == NO_FONT_HAS
    assert manifest["leaderboard"]["caption"].endswith(said)
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert said in page


def test_other_warnings_while_drawing_are_shown_as_before(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.warns(RuntimeWarning, match="something else"), missing_glyphs() as boxes:
        warnings.warn("Glyph 57344 (\\N{PRIVATE USE}) missing from font(s) X.", UserWarning,
                      stacklevel=1)  # fmt: skip
        warnings.warn("something else", RuntimeWarning, stacklevel=1)
    assert boxes == {NO_FONT_HAS}
    assert "Glyph" not in capfd.readouterr().err
    # ... also from a figure left out after it warned
    left = pytest.warns(RuntimeWarning, match="before leaving")
    with left, pytest.raises(Omit), missing_glyphs():
        warnings.warn("before leaving", RuntimeWarning, stacklevel=1)
        raise Omit("nothing to show")


def test_a_fallback_font_installed_after_matplotlibs_cache_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib renews its list of fonts only with its own version: a font installed
    later (fonts-noto-cjk, to draw a Chinese name) was never used. Here a fallback font
    (DejaVu Sans Mono, standing in) is missing from the cached list and present on disk."""
    from matplotlib import font_manager

    from runs.report_figures import _style

    manager = font_manager.fontManager
    shipped = Path(font_manager.findfont("DejaVu Sans Mono"))
    installed_later = tmp_path / shipped.name
    shutil.copy(shipped, installed_later)
    cached = [f for f in manager.ttflist if f.name != "DejaVu Sans Mono"]
    monkeypatch.setattr(manager, "ttflist", cached)
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda: [str(installed_later)])
    monkeypatch.setattr(_style, "FALLBACK_FONTS", ("DejaVu Sans Mono", "No Such Font"))
    _style.font_families.cache_clear()
    try:
        assert _style.font_families() == ["DejaVu Sans", "DejaVu Sans Mono"]
        installed_later.unlink()  # and a font removed since is not named
        _style.font_families.cache_clear()
        assert _style.font_families() == ["DejaVu Sans"]
    finally:
        _style.font_families.cache_clear()


def _bold_text_saved(path: Path, text: str) -> None:
    plt = _style.pyplot()
    fig = plt.figure(figsize=(2, 1))
    fig.text(0.1, 0.5, text, fontweight="bold")
    _style.save(fig, path)


def test_a_fallback_font_without_a_bold_face_draws_bold_text_unannounced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Noto Sans Symbols2 has a regular face only: figure 1's bold labels made matplotlib log
    "findfont: Failed to find font weight bold for Noto Sans Symbols2, now using 400.",
    which `dutchbook run` printed. A fallback drawn upright in bold text is no fault: the
    line is not logged, and the fallback is still asked for the glyphs it has. DejaVu Sans
    Mono, its bold faces taken away, stands in for it here."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    findfont_cache: Any = getattr(font_manager.FontManager, "_findfont_cached")  # noqa: B009
    regular = [f for f in manager.ttflist if f.name != "DejaVu Sans Mono" or f.weight == 400]
    monkeypatch.setattr(manager, "ttflist", regular)
    monkeypatch.setattr(font_manager, "findSystemFonts", list)  # nothing installed since
    monkeypatch.setattr(_style, "FALLBACK_FONTS", ("DejaVu Sans Mono",))
    _style.font_families.cache_clear()
    findfont_cache.cache_clear()  # it logs once per question
    try:
        with caplog.at_level(logging.INFO, logger="matplotlib.font_manager"):
            _bold_text_saved(tmp_path / "bold.png", "binding")
        bold = font_manager.FontProperties(family=_style.font_families(), weight="bold")
        chain = [Path(p).name for p in manager._find_fonts_by_props(bold)]
    finally:
        _style.font_families.cache_clear()
        findfont_cache.cache_clear()
        monkeypatch.undo()
        _style.pyplot()  # rcParams' font.family back to this machine's fallbacks
    assert not [r for r in caplog.records if "font weight" in r.getMessage()]
    assert chain == ["DejaVuSans-Bold.ttf", "DejaVuSansMono.ttf"]


def test_noto_sans_symbols2_still_draws_its_glyphs_in_bold_text(tmp_path: Path) -> None:
    """Where Noto Sans Symbols2 is installed, a character only it has (U+2B50, a star) is
    drawn from it in bold text, not as a box."""
    if "Noto Sans Symbols2" not in _style.font_families():
        pytest.skip("Noto Sans Symbols2 is not installed")
    with missing_glyphs() as boxes:
        _bold_text_saved(tmp_path / "star.png", "\u2b50 binding")
    assert not boxes


def test_a_right_to_left_name_keeps_the_text_beside_it_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib lays each line out by Unicode's bidirectional algorithm: a model named in
    Hebrew took the count after it into its right-to-left run, and figure 8's panel title
    "מודל: 1 attempt, ..." was drawn "attempt, ... 1 :מודל". The name is now an isolated
    run (FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE); a name without right-to-left
    letters, which cannot reorder the rest, is drawn as it is."""
    if not _style._bidi_layout():
        # Without libraqm matplotlib reorders nothing, and `isolated` adds no isolates.
        pytest.skip("this matplotlib lays text out without libraqm (no bidi algorithm)")
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    timeline = pl.DataFrame(  # engine.audit.attempt_timeline's columns
        {"model": ["\u05de\u05d5\u05d3\u05dc", "m"], "bin": [0, 0], "start": [t0, t0],
         "end": [t0, t0], "outcome": ["accepted", "accepted"], "attempts": [1, 1]}
    )  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    with missing_glyphs() as boxes:
        module_of(8).draw(FigureInputs({"rows": []}, timeline=timeline), tmp_path / "f.png")
    titles = sorted(ax.get_title(loc="left") for ax in kept[0].axes if ax.patches)
    assert titles == [
        "m: 1 attempt, 0 retry attempts (0.0%)",
        "\u2068\u05de\u05d5\u05d3\u05dc\u2069: 1 attempt, 0 retry attempts (0.0%)",
    ]
    assert not boxes  # the isolates draw nothing


@pytest.mark.parametrize(
    "name",
    [
        "x" * 70,  # one unbroken part longer than a line
        "a" + "e\u0301" * 30,  # decomposed accents: a cut at 48 fell between e and its mark
        "a" * 40 + " \u0301" + "b" * 10,  # a mark after a space began the next line alone
        # so did a joiner, and an emoji's skin tone (parts short enough not to be shortened)
        "a" * 30 + " " + "c" * 15 + " \u200d" + "b" * 10,
        "a" * 30 + " " + "c" * 15 + " \U0001f3fd" + "b" * 10,
    ],
    ids=["unbroken", "accents", "mark-after-space", "joiner-after-space", "tone-after-space"],
)
def test_figure_8s_panel_title_never_cuts_a_mark_from_its_letter(name: str) -> None:
    """`panel_title` broke a name with no space in it at the line's width (textwrap breaks
    long words by default), mid-word and even between a letter and its combining accent. A
    part that cannot be broken and is longer than a figure draws whole is shortened around
    an ellipsis (a tester's 100-character name ran into the next panel's title), its start
    and end kept, and never with a mark cut from its letter."""
    from runs.report_figures._style import joins_previous
    from runs.report_figures.audit import panel_title, title_names

    lines = panel_title(title_names([name], 48)[name], "1 attempt", 48).split("\n")
    assert not any(joins_previous(line[0]) for line in lines)
    assert all(len(line) <= 48 for line in lines)
    shown = " ".join(lines).removesuffix(": 1 attempt").removesuffix(":")
    first, last = name.split(" ")[0], name.split(" ")[-1]
    assert shown.startswith(first[:10]) and shown.endswith(last[-5:])
    if "…" in shown:
        _, tail = shown.split("…")
        assert not unicodedata.combining(tail[0]) and len(shown) <= 32


@pytest.mark.parametrize(
    "name",
    ["short", "x" * 32, "openai/gpt-oss-120b-deployment-eu-west-1-with-a-rather-long-suffix-v2",
     "X" * 100, "a" + "e\u0301" * 40, "ab" + "\u0e01\u0e31" * 20 + "x",
     "\u0915\u093f" * 20 + "x", "m-" + "\u2764\ufe0f" * 20 + "x"],
)  # fmt: skip
def test_a_figure_draws_a_long_name_as_its_start_and_end(name: str) -> None:
    """A tester's 69-character name ran figure 2's tick labels over its panel titles; 100
    characters ran over figure 1's panels and through figures 4, 7 and 8. Figures draw a
    name whole up to `NAME_CHARS`, else its start and end around an ellipsis (names of one
    provider differ at the end), never a mark cut from its letter."""
    shown = _style.short_name(name)
    if len(name) <= _style.NAME_CHARS:
        assert shown == name
        return
    head, tail = shown.split("…")
    assert len(shown) <= _style.NAME_CHARS and name.startswith(head) and name.endswith(tail)
    assert len(tail) >= 8 and not unicodedata.category(tail[0]).startswith("M")


@pytest.mark.parametrize(
    "names",
    [
        [f"vendor/some-model-family-variant-{i:02d}-instruct" for i in range(30)],
        ["accounts/fireworks/models/llama-v3p1-405b-instruct",
         "accounts/fireworks/models/qwen2p5-72b-instruct"],
        ["a" * 40 + "1" + "b" * 40, "a" * 40 + "2" + "b" * 40],  # alike but in the middle
    ],
    ids=["numbered", "same-provider", "middle"],
)  # fmt: skip
def test_names_a_figure_draws_together_never_read_alike(names: list[str]) -> None:
    """A reviewer's 30 models `...-variant-00-instruct` to `-29-` were drawn as ten labels,
    each three times (only the last digit kept); two Fireworks ids as one."""
    shown = _style.short_names(names)
    assert len(set(shown.values())) == len(names)
    assert all(len(label) <= _style.NAME_CHARS or label == name for name, label in shown.items())


def test_figure_2_and_the_legends_draw_long_names_shortened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runs.report_figures import leaderboard

    names = ["openai/gpt-oss-120b-deployment-eu-west-1-with-a-rather-long-suffix-v2", "short"]
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    rows = [
        {"model": m, "arm": "baseline", "scored": True, "brier": None,
         "profit": {"mean": v, "lo": v * 0.8, "hi": v * 1.2}}
        for m, v in zip(names, (0.01, 0.02), strict=True)
    ]  # fmt: skip
    leaderboard.draw(FigureInputs({"rows": rows}), tmp_path / "fig2.png")
    ticks = [t.get_text() for t in kept[0].axes[0].get_yticklabels()]
    assert ticks == [_style.short_name(names[0]), "short"]
    plt = _style.pyplot()
    fig, ax = plt.subplots()
    for name in names:
        ax.plot([0], [0], label=name)
    handles, labels = _style.legend_entries([ax], names)
    assert labels == names  # whole for the styles they are looked up in
    _style.bottom_legend(fig, handles, labels, 2)
    drawn = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sorted(drawn) == sorted(_style.short_name(n) for n in names)
    plt.close(fig)


def test_figure_5_draws_a_long_name_shortened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figure 5's tick labels name each model over its dispersed bar: shortened as every
    figure's (the tables give it whole)."""
    from runs.report_figures import linked

    name = "openai/gpt-oss-120b-deployment-eu-west-1-with-a-rather-long-suffix-v2"
    rows = [
        {"model": name, "arm": f"{arm} (assets)", "scored": True,
         "profit": {"mean": v, "lo": v, "hi": v}}
        for arm, v in (("linked", 0.4), ("dispersed", 0.15))
    ]  # fmt: skip
    kept: list[Any] = []
    monkeypatch.setattr(_style, "save", lambda fig, _path: kept.append(fig))
    linked.draw(FigureInputs({"rows": rows}), tmp_path / "f.png")
    ticks = [t.get_text() for ax in kept[0].axes for t in ax.get_yticklabels()]
    assert f"{_style.short_name(name)}\ndispersed" in ticks
    assert not any(name in tick for tick in ticks)
