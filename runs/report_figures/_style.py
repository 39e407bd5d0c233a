"""What every figure shares: the Agg backend chosen before pyplot loads, one style per model
for the whole report, one legend from every panel, error bars from intervals, and one way to
save.

matplotlib is imported here only, inside functions, so importing the report costs nothing
until a figure is drawn (the command line must start fast).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import math
import textwrap
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

#: Pixel density of the PNGs: sharp on a laptop, light enough to inline in one page.
DPI = 110
#: Width in inches; the page scales figures down to a phone's width.
WIDTH = 8.0
_MARKERS = ("o", "s", "^", "D", "v", "P")
_HATCHES = ("", "//", "..", "xx", "\\\\", "++")

_T = TypeVar("_T")


#: Fonts for the characters DejaVu Sans lacks (a model named in Chinese or Japanese, a
#: family file's statements), tried in this order where installed: matplotlib falls back
#: glyph by glyph. What none has is drawn as a box (`runs.report_figures.missing_glyphs`).
FALLBACK_FONTS = (
    "Noto Sans CJK JP", "Noto Sans CJK SC", "Droid Sans Fallback", "WenQuanYi Zen Hei",
    "Noto Sans", "Noto Sans Symbols2", "Symbola",
)  # fmt: skip


@functools.cache
def font_families() -> list[str]:
    """DejaVu Sans (matplotlib's own, the figures' look), then the installed fallbacks (one
    not installed would make matplotlib log a warning at each figure)."""
    installed = _installed_fonts()
    return ["DejaVu Sans", *(name for name in FALLBACK_FONTS if name in installed)]


def _installed_fonts() -> set[str]:
    """The families of the fonts on this machine now. matplotlib lists them once, in a cache
    it renews only with its own version: a font installed after that (`apt-get install
    fonts-noto-cjk` to draw a model's Chinese name) was never used. It is added here, in
    this process (a few ms to look, when nothing is new), and a font removed since is not
    named."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    known = {font.fname for font in manager.ttflist}
    for path in font_manager.findSystemFonts():
        if path not in known:
            with contextlib.suppress(OSError, RuntimeError, ValueError):  # unreadable: unused
                manager.addfont(path)
    return {font.name for font in manager.ttflist if Path(font.fname).exists()}


#: matplotlib's log line for a font asked in a weight it lacks (`FontManager.findfont`).
_NO_SUCH_WEIGHT = "findfont: Failed to find font weight %s for %s, now using %s."


class _FallbackWeights(logging.Filter):
    """Drops matplotlib's line for a fallback font used in a weight it lacks. Bold text (the
    binding events of figure 1) asks every family of `font.family` for a bold face; Noto
    Sans Symbols2 and Symbola ship a regular one only, and `dutchbook run` printed
    "findfont: Failed to find font weight bold for Noto Sans Symbols2, now using 400." to
    the console. The regular face is what a fallback is for: its glyphs are drawn, upright.
    matplotlib's other font lines, and this one for any other font, pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (
            record.msg == _NO_SUCH_WEIGHT
            and isinstance(args, tuple)
            and len(args) == 3
            and args[1] in FALLBACK_FONTS
        )


_FALLBACK_WEIGHTS = _FallbackWeights()


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display, no GUI toolkit)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    # Once per logger: `addFilter` adds a filter it holds already no second time.
    logging.getLogger("matplotlib.font_manager").addFilter(_FALLBACK_WEIGHTS)

    plt.rcParams.update(
        {
            "font.family": font_families(),
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "figure.dpi": DPI,
            # Labels are the user's text (model names, event ids, family titles), drawn as
            # written: a `$` pair in a model's name started mathtext, and a name such as
            # `m$\frac{$x` failed every figure, and with them the report.
            "text.parse_math": False,
        }
    )
    return plt


def isolated(text: str) -> str:
    """A user's text (a model's name, a family's id) set inside a label of ours, as one
    isolated run for Unicode's bidirectional algorithm, which matplotlib's text layout
    (libraqm) applies to each line. Written in Hebrew or Arabic, a name took the text beside
    it into its right-to-left run: "מודל: 18 attempts, ..." was drawn "attempts, ... 18 :מודל"
    (figure 8), and "#3 <Arabic name> · families/isolated" as "families/isolated · <name> #3"
    (figure 1). Text with no right-to-left letter, which cannot reorder ours, is left as it
    is, and so is all text where matplotlib lays text out without that algorithm (it would
    draw the isolates as boxes, and reorders nothing)."""
    from panels.input_files import right_to_left

    if not _bidi_layout() or not right_to_left(text):
        return text
    return f"\u2068{text}\u2069"  # FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE


#: The longest name a figure draws whole (`short_name`).
NAME_CHARS = 32


def short_name(name: str, limit: int = NAME_CHARS, tail: int | None = None) -> str:
    """A model's name as a figure draws it: whole up to `limit` characters, else its start
    and its last `tail` characters (a third by default) around an ellipsis: names of one
    provider differ at the end ("-v1", "-v2"). A tester's 69-character name ran figure 2's
    tick labels over its panel titles, and 100 characters over figure 1's panels and through
    figures 4, 7 and 8; the report's tables give every name whole. A figure naming several
    models shortens them together (`short_names`), so that no two read alike."""
    if len(name) <= limit:
        return name
    tail = (limit - 1) // 3 if tail is None else tail
    head_end, tail_start = limit - 1 - tail, len(name) - tail
    # Never between a character and a mark on it (an accent, a Thai or Devanagari vowel
    # sign, a variation selector, a joiner): it would sit on the ellipsis.
    while head_end > 1 and joins_previous(name[head_end]):
        head_end -= 1
    while tail_start > head_end and joins_previous(name[tail_start]):
        tail_start -= 1
    return f"{name[:head_end].rstrip()}…{name[tail_start:].lstrip()}"


def short_names(names: Iterable[str], limit: int = NAME_CHARS) -> dict[str, str]:
    """Each name as `short_name` draws it, those that would read alike given more of their
    end (a numbered family, "...-variant-07-instruct", kept only its last digit beside
    nine others), and drawn whole where no such cut tells them apart."""
    shown = {name: short_name(name, limit) for name in dict.fromkeys(names)}
    for tail in range((limit - 1) // 3 + 1, limit - 2):
        clashing = _alike(shown)
        if not clashing:
            return shown
        shown.update((name, short_name(name, limit, tail)) for name in clashing)
    shown.update((name, name) for name in _alike(shown))
    return shown


def _alike(shown: dict[str, str]) -> list[str]:
    """The names whose shown forms another name shares."""
    counts = Counter(shown.values())
    return [name for name, label in shown.items() if counts[label] > 1]


def joins_previous(char: str) -> bool:
    """Whether `char` is drawn with the character before it, so no cut or line break may
    come between them."""
    return (
        unicodedata.category(char).startswith("M")  # every mark, not only `combining`'s
        or char == "\u200d"  # ZERO WIDTH JOINER
        or "\U0001f3fb" <= char <= "\U0001f3ff"  # an emoji's skin tone
    )


@functools.cache
def _bidi_layout() -> bool:
    from matplotlib import ft2font

    return hasattr(ft2font, "__libraqm_version__")


#: Margin kept around a figure's content when it is trimmed (inches).
PAD_INCHES = 0.15


def tight_layout(fig: Any, **params: Any) -> None:
    """`fig.tight_layout(**params)`, laid out the same, but leaving no layout engine set.

    `Figure.tight_layout` sets a `TightLayoutEngine`, lays out, then sets "none", which
    leaves a `PlaceHolderLayoutEngine` that lays nothing out; yet `savefig` draws a figure
    with any engine set once more, rendering off, before drawing it, and `save` took such a
    figure for one that keeps a layout engine. So every figure was drawn twice (the pass
    with rendering off cost figure 1, the report's critical path, about 4% of its CPU)."""
    from matplotlib.layout_engine import TightLayoutEngine

    TightLayoutEngine(**params).execute(fig)


#: The line `save` writes under a figure: set by `draw_all` around each figure it draws
#: (`footer`), so that every figure carries it without each module passing it on.
_FOOTER: ContextVar[str | None] = ContextVar("figure_footer", default=None)
#: Gap between a figure's content and its footer (inches), and its type size (points).
_FOOTER_GAP = 0.08
_FOOTER_POINTS = 8
#: A generous mean width of DejaVu Sans' characters, in ems: a footer line is wrapped at
#: the figure's width divided by it.
_CHAR_EMS = 0.6


@contextlib.contextmanager
def footer(text: str | None) -> Iterator[None]:
    """Figures saved inside the block carry `text` as their last line (none when None): the
    simulated forecasters of the report, which a figure drawn in the paper's style showed
    as if they were the real models they were named after."""
    token = _FOOTER.set(text)
    try:
        yield
    finally:
        _FOOTER.reset(token)


def add_footer(fig: Any) -> None:
    """The `footer` in force, if any, in small grey type under everything the figure draws,
    wrapped to its width."""
    text = _FOOTER.get()
    if text is None:
        return
    box = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    width, height = fig.get_figwidth(), fig.get_figheight()
    # Wrapped here, not by matplotlib (`wrap=True` measures the text as mathtext whatever
    # `text.parse_math` says, and a model named `m$\frac{$x` failed its report).
    chars = max(int(box.width * 72 / (_FOOTER_POINTS * _CHAR_EMS)), 20)
    fig.text(
        (box.x0 + box.x1) / 2 / width, (box.y0 - _FOOTER_GAP) / height,
        textwrap.fill(text, chars, break_long_words=False, break_on_hyphens=False),
        ha="center", va="top", fontsize=_FOOTER_POINTS, color="#4b5563",
    )  # fmt: skip


def save(fig: Any, path: Path) -> None:
    """PNG at `DPI`, trimmed to its content, and the figure freed.

    The trim is the box `bbox_inches="tight"` would find, computed here and passed as a box:
    "tight" first draws the whole figure with rendering switched off (for a layout engine,
    which none of ours keeps: they lay out once with `tight_layout` above) and then
    measures, so every figure was drawn twice. The files are byte-identical to the "tight"
    ones (tested), and each figure is drawn once (tested). A figure that does keep a layout
    engine is saved the "tight" way, which that engine needs.

    The PNG is made in memory and then written all or nothing (`write_bytes_atomic`): saved
    straight onto `path`, a report killed while it drew (SIGKILL) left the old figure cut
    short, 0 bytes once, until the next report replaced it.
    """
    from engine.durable import write_bytes_atomic

    plt = pyplot()
    png = io.BytesIO()
    add_footer(fig)
    if fig.get_layout_engine() is not None:
        fig.savefig(png, format="png", dpi=DPI, bbox_inches="tight", pad_inches=PAD_INCHES)
    else:
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(PAD_INCHES)
        fig.savefig(png, format="png", dpi=DPI, bbox_inches=box)
    plt.close(fig)
    # No fsync, as for the report's other files: they are rebuilt from the folder at will.
    write_bytes_atomic(path, png.getvalue(), sync=False)


class ModelStyle(NamedTuple):
    """How one model is drawn: its colour, its marker (points) and its hatching (bars)."""

    colour: Any
    marker: str
    hatch: str


def model_styles(models: Sequence[str]) -> dict[str, ModelStyle]:
    """A style per model by its place in `models`: give the report's models
    (`FigureInputs.models`), not a figure's, so a model looks the same in every figure. Each
    figure once numbered the models it drew, and orange was one model in figure 4 and another
    in figure 7. The palette has 10 colours: past them, hatching tells models' bars apart. The
    markers' shapes change with every model, so that colour is never the only thing telling
    two models' points apart (a referee: red and green beside each other), and step by one
    more every ten models, so that no two of the first 60 share both colour and shape."""
    plt = pyplot()
    cmap = plt.get_cmap("tab10")
    return {
        m: ModelStyle(
            cmap(i % 10),
            _MARKERS[(i + i // 10) % len(_MARKERS)],
            _HATCHES[(i // 10) % len(_HATCHES)],
        )
        for i, m in enumerate(models)
    }


def legend_entries(axes: Iterable[Any], order: Sequence[str]) -> tuple[list[Any], list[str]]:
    """One handle per label over every panel, labels in `order` (others after, as met).

    Read from every panel: read from the first alone, a model drawn only in a later panel had
    no entry. An empty container (a model's bars in a panel it has none in) is passed over: its
    swatch is drawn in matplotlib's default colour, not the model's."""
    from matplotlib.container import Container

    found: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if not isinstance(handle, Container) or handle.get_children():
                found.setdefault(label, handle)
    rank = {label: i for i, label in enumerate(order)}
    labels = sorted(found, key=lambda label: rank.get(label, len(rank)))  # stable: met order
    return [found[label] for label in labels], labels


def bottom_legend(fig: Any, handles: Sequence[Any], labels: Sequence[str], ncol: int) -> float:
    """One legend for all panels, centred under them; returns the share of the figure's
    height to keep free for it (`tight_layout(fig, rect=(0, that, 1, 1))`).

    Measured, not guessed: a fixed share let a legend of two rows, or one under a short
    figure, cover the lowest panel's axis label."""
    ncol = max(ncol, 1)
    shown = short_names(labels)  # models' names; figure 8's are outcomes, all short
    legend = fig.legend(
        column_major(handles, ncol),
        column_major([shown[label] for label in labels], ncol),
        loc="lower center",
        ncol=ncol,
        frameon=False,
        fontsize=8,
        bbox_to_anchor=(0.5, _LEGEND_Y),
    )
    height = legend.get_window_extent(fig.canvas.get_renderer()).height
    return _LEGEND_Y + float(height / fig.bbox.height) + _LEGEND_GAP


def column_major(items: Sequence[_T], ncol: int) -> list[_T]:
    """`items` reordered so that a legend of `ncol` columns reads them row by row.

    matplotlib fills a legend column by column (the first n % ncol columns one entry longer),
    so five models in four columns read "anchored, fraction, framing, noisy" on the first row
    and "coherent" under the first: out of the order the report keeps everywhere else."""
    n = len(items)
    rows = -(-n // ncol)  # ceil
    longer = n % ncol or ncol  # columns holding `rows` entries; the rest hold one fewer
    sizes = [rows if c < longer else rows - 1 for c in range(ncol)]
    at = {}
    i = 0
    for r in range(rows):
        for c in range(ncol):
            if r < sizes[c]:
                at[(r, c)] = items[i]
                i += 1
    return [at[(r, c)] for c in range(ncol) for r in range(sizes[c])]


#: Where the bottom legend's lower edge sits (a share of the figure's height; `save` trims).
_LEGEND_Y = -0.01
#: Free space between the legend and the axis label above it (a share of the height).
_LEGEND_GAP = 0.01


def errors(ivs: Sequence[Mapping[str, float | None]]) -> list[list[float]]:
    """Asymmetric error-bar lengths from `{"mean", "lo", "hi"}` (matplotlib wants distances);
    NaN, which matplotlib leaves undrawn, where an end is unknown (`interval`)."""

    def length(far: float | None, near: float | None) -> float:
        if far is None or near is None or not math.isfinite(far - near):
            return math.nan
        return max(far - near, 0.0)

    return [
        [length(iv["mean"], iv["lo"]) for iv in ivs],
        [length(iv["hi"], iv["mean"]) for iv in ivs],
    ]


def known_end(iv: Mapping[str, float | None], end: str) -> float:
    """An interval's end `end` ("lo", "hi") where it is known, else its mean (no interval is
    drawn: fewer than two dates), as autoscaling and the captions read an interval."""
    value, mean = iv[end], iv["mean"]
    assert mean is not None
    return mean if value is None or not math.isfinite(value) else value


#: Profits below this are rounding-level (the paper: 4 decimals allow at most 5e-5), so a
#: log axis reaching down to them would spend most of its width on nothing.
LOG_FLOOR = 1e-5


def use_log(means: Sequence[float]) -> bool:
    """Log scale when means span two decades or more (the paper's profits span ~100x), none
    at rounding level."""
    return bool(means) and min(means) >= LOG_FLOOR and max(means) / min(means) >= 100


#: Exponents written as superscripts in plain text (the fonts have them).
_SUPERSCRIPT = str.maketrans(
    "-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
)


def decade_label(value: float, _position: int | None = None) -> str:
    """A log axis' tick as plain text: 10⁻³ for a decade, the number itself otherwise."""
    if value <= 0:
        return ""
    exponent = math.log10(value)
    if abs(exponent - round(exponent)) > 1e-9:
        return f"{value:g}"
    return "10" + str(round(exponent)).translate(_SUPERSCRIPT)


def log_x_axis(ax: Any) -> None:
    """A log x axis whose ticks read 10⁻³. matplotlib writes a log axis' ticks as mathtext
    (`$\\mathdefault{10^{-3}}$`), which `pyplot` turns off for the user's labels: the ticks
    were drawn as that raw source, overlapping."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(decade_label))
    ax.xaxis.set_minor_formatter(NullFormatter())


def interval(value: Any) -> dict[str, float] | None:
    """A summary interval with its mean present, else None; ends that are null (fewer than
    two clusters: `scoring.stats.MIN_CLUSTERS`) are NaN, drawn as no error bar."""
    if not isinstance(value, Mapping) or value.get("mean") is None:
        return None
    return {k: math.nan if value.get(k) is None else float(value[k]) for k in ("mean", "lo", "hi")}
