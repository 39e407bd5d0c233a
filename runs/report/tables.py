"""The report's tables: the terminal leaderboard, `leaderboard.txt`, `report.md` and one CSV
per table, all rendered from `runs.report.data.ReportData` (nothing here computes a statistic).

CSV files in `report/` (one row per line, header first; empty cell = no value):
- `leaderboard.csv`: one row per (model, arm) cell: `model, arm, norm, status, coverage,
  units, clusters, profit, profit_lo, profit_hi, at_least_0.001, at_least_0.005,
  at_least_0.01` (shares of units), `vs_baseline, vs_baseline_lo, vs_baseline_hi,
  brier, brier_lo, brier_hi, arbitrage_free, arbitrage_free_lo, arbitrage_free_hi,
  vs_marginals, vs_marginals_lo, vs_marginals_hi` (a joint-events row against its marginals),
  `below_floor_in`.
- `models.csv`: `model, coverage`, then (additive) `provider` (the spec's) and `simulated`.
- `across_models.csv`: one row: `arm, models, units, spearman_profit_brier, pairs,
  profit_pairs_excluding_zero, brier_pairs_excluding_zero`, then (additive)
  `spearman_not_computed` (why the correlation is empty, as summary.json says it); its
  header alone where no model ran the baseline arm (a campaign of families alone), which
  leaderboard.txt and report.md then say nothing across models of, and whose summary.json
  keeps its `across_models` as before (0 models).
- `repeated_elicitation.csv`: `model, arm, passes, units, single_pass_mean, k, mean, lo, hi`
  (one row per k; absent when the section was not computed).
- `linked_vs_dispersed.csv` (additive): summary.json's `linked_vs_dispersed`, one row per
  (model, kind): `model, kind, mean, lo, hi, excludes_zero, units` (header alone where
  there is none).
- `families.csv`: `model, arm, families, coverage, status, arbitrage_free, _lo, _hi,
  vs_marginals, _lo, _hi` (these three empty: a family arm has no marginals row), then
  `future_families, future_arbitrage_free, _lo, _hi` and the same four of `controls_`
  (empty where the families' kinds are unknown), then `below_floor_in`.
- Every table with a `model` column ends (additive) in `simulated`: `true` where the local
  simulator answered the model (`runs.report.models.simulated_models`: in part too, where
  some of its replies named the simulator as the model answering), else `false`.
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.console_lines import plural
from panels.arms import ISOLATED_FAMILIES
from runs import markdown
from runs.report.data import (
    BASELINE_ARM,
    STATUS_BELOW_FLOOR,
    THRESHOLDS,
    ArmRow,
    ReportData,
    is_family,
    threshold_key,
)
from runs.report.models import in_part_of, simulated_note
from runs.report.provenance import answered_parser_note
from runs.report.wording import (
    LINKED_COLUMNS,
    LINKED_TITLE,
    LINKED_WORDS,
    ORDER_FAMILIES,
    ORDER_LEADERBOARD,
    ORDER_LINKED,
    ORDER_REPEATED,
    VS_BASELINE_COLUMN,
    bootstrap_draws,
    cluster_words,
    coverage_text,
    difference_text,
    fixed_or_dash,
    floor_text,
    floor_words,
    interval_text,
    metric_words,
    of_families,
    reading_guide,
    without_empty_comparison,
)
from scoring.stats import Interval


def _fmt_iv(iv: Interval | None, digits: int = 5) -> str:
    if iv is None:
        return ""
    return interval_text(iv._asdict(), digits)


def headline_lines(summary: dict[str, Any], out: Path) -> list[str]:
    """Two or three lines under the table: the simulated forecasters it shows, the parser
    when not strict and something was answered (`answered_parser_note`), the cross-model
    statistics and where the rest is."""
    models = summary.get("models") or {}
    simulated = simulated_note(
        (m for m, v in models.items() if v.get("simulated")), in_part_of(models)
    )
    lines: list[str] = [simulated] if simulated else []
    # The parser's note too: the table above was scored from what it accepted.
    lines += [note for note in [answered_parser_note(summary)] if note]
    across = summary["across_models"]
    if len(across["models"]) >= 2:
        parts = [f"{BASELINE_ARM}, {len(across['models'])} models"]
        if across["spearman_profit_brier"] is not None:
            parts.append(f"Spearman(profit, Brier) {across['spearman_profit_brier']:.3f}")
        elif across.get("spearman_not_computed"):
            parts.append(f"Spearman(profit, Brier) — ({across['spearman_not_computed']})")
        if across["profit_pairs_excluding_zero"] is not None:
            brier = across["brier_pairs_excluding_zero"]
            parts.append(
                f"pairs whose 95% interval excludes zero: profit "
                f"{across['profit_pairs_excluding_zero']}/{across['pairs']}"
                + (f", Brier {brier}/{across['pairs']}" if brier is not None else "")
            )
        if across.get("pairs_not_counted"):
            parts.append(f"pairs not counted: {across['pairs_not_counted']}")
        lines.append("; ".join(parts))
    repeated = summary.get("repeated_elicitation") or []
    if repeated:
        lines.append(_averaging_line(repeated))
    note = summary["figures"].get("note")
    clusters = cluster_words(str(r["arm"]) for r in summary["rows"])
    lines.append(
        f"95% intervals ({clusters}) and more: {out / 'leaderboard.txt'}, "
        f"{out / 'summary.json'}" + (f" ({note})" if note else "")
    )
    boxes = summary["figures"].get("missing_glyphs")
    if boxes:
        lines.append(
            f"figures: no installed font has {' '.join(boxes)}, drawn as boxes in the PNGs; "
            "the page, tables and files have them whole (a font with them, such as Debian's "
            "fonts-noto-cjk, mends the figures)"
        )
    return lines


def _averaging_line(repeated: Sequence[dict[str, Any]]) -> str:
    """How averaging over all passes moved each multi-pass cell's mean profit, as counted.

    By convexity it cannot raise a set's profit when every pass answered the same events; a
    referee's run with answers missing saw it raise both cells while this line said "never
    raises it", so the line counts both ways and says why a rise can happen."""
    moved = [
        r["by_k"][-1]["mean"] - r["single_pass_mean"]
        for r in repeated
        if r["by_k"][-1]["mean"] is not None and r["single_pass_mean"] is not None
    ]
    lower = sum(change < -1e-12 for change in moved)
    higher = sum(change > 1e-12 for change in moved)
    line = (
        f"averaging answers over passes before scoring lowers mean profit in {lower} of "
        f"{len(repeated)} multi-pass cells"
    )
    if not higher:
        return line
    return (
        f"{line} and raises it in {higher} (passes that answered different questions: the "
        "average holds questions a single pass left out)"
    )


def _leaderboard_order(rows: Sequence[ArmRow]) -> list[ArmRow]:
    """By arm, scored first, most coherent first, then by model name (`ORDER_LEADERBOARD`):
    a tie kept the rows' own order, and put another model first than the families table's
    (`runs.report.data.family_rank`) in the same tie."""
    return sorted(
        rows, key=lambda r: (r.arm, not r.scored, r.profit.mean if r.profit else 1e9, r.model)
    )


LEADERBOARD_COLUMNS = (
    "model",
    "arm",
    "units",
    "profit [95% CI, date-clustered]",  # `leaderboard_columns` names the clusters of the rows
    *(f"≥{t:g}" for t in THRESHOLDS),
    VS_BASELINE_COLUMN,
    "Brier [95% CI]",
    "arb-free [95% CI]",
    "coverage",
)


def baseline_run(rows: Sequence[ArmRow]) -> bool:
    """Whether any model ran the baseline arm: a campaign of families alone said "Across
    models on baseline: 0 scored models" of an arm it never ran."""
    return any(r.arm == BASELINE_ARM for r in rows)


def _without_empty_comparison(
    rows: Sequence[ArmRow], lines: Sequence[Sequence[str]]
) -> list[list[str]]:
    """`lines` of the leaderboard without its "vs baseline" column where no row has a
    paired difference (`without_empty_comparison`)."""
    comparisons = (r.vs_marginals or r.vs_baseline for r in rows)
    return without_empty_comparison(comparisons, LEADERBOARD_COLUMNS, lines)


def leaderboard_columns(rows: Sequence[ArmRow]) -> tuple[str, ...]:
    """`LEADERBOARD_COLUMNS` with the profit's clusters as the rows' arms resampled them (a
    family's profit is resampled by family, not by date), and without the "vs baseline"
    column where no row has a value in it."""
    families = {is_family(r.arm) for r in rows}
    clusters = "family-clustered" if families == {True} else "date- or family-clustered"
    named = [
        f"profit [95% CI, {clusters}]" if col.startswith("profit [") and True in families
        else col
        for col in LEADERBOARD_COLUMNS
    ]  # fmt: skip
    return tuple(_without_empty_comparison(rows, [named])[0])


def leaderboard_cells(rows: Sequence[ArmRow], floor: float | None = None) -> list[list[str]]:
    """The full leaderboard's cells (columns `leaderboard_columns`), in display order;
    coverage with the decimals of the `floor` (`coverage_text`)."""
    out: list[list[str]] = []
    for r in _leaderboard_order(rows):
        if not r.scored:
            blank = [""] * (len(LEADERBOARD_COLUMNS) - 5)
            cells = [r.model, r.arm, str(r.units), _status_text(r, floor), *blank]
            out.append([*cells, coverage_text(r.coverage, floor)])
            continue
        out.append(
            [
                r.model,
                r.arm,
                str(r.units),
                _fmt_iv(r.profit),
                *(f"{r.at_least[t] / r.units:.0%}" if r.units else "" for t in THRESHOLDS),
                _comparison(r),
                _fmt_iv(r.brier, 4),
                _fmt_iv(r.arbitrage_free, 2),
                coverage_text(r.coverage, floor),
            ]
        )
    return _without_empty_comparison(rows, out)


def leaderboard(rows: Sequence[ArmRow], floor: float | None = None) -> Table:
    metric = metric_words(r.arm for r in rows)
    table = Table(title=f"{metric[0].upper()}{metric[1:]} (lower is more coherent)")
    for col in leaderboard_columns(rows):
        # A label too wide is folded onto more lines, never cut: two long names of one
        # provider, cut, read alike in leaderboard.txt beside different numbers.
        label = col in {"model", "arm"}
        table.add_column(col, justify="left" if label else "right",
                         overflow="fold" if label else "ellipsis")  # fmt: skip
    for model, *cells in leaderboard_cells(rows, floor):
        table.add_row(Text(model), *cells)  # a model name is not markup
    return table


def details_text(data: ReportData, notes: Sequence[str] = ()) -> str:
    """The full leaderboard plus the cross-model and repeated-elicitation sections, as text;
    `notes` are said under the leaderboard (the parser, when not strict)."""
    parts = [_render_plain(leaderboard(data.rows, data.floor)) + f"{ORDER_LEADERBOARD}\n"]
    parts += [f"{line}\n" for line in [*_simulated_lines(data), *notes]]
    if data.rows:
        parts.append(_legend_text(data))
    across = data.across_models
    if baseline_run(data.rows):  # no comparison to speak of on an arm not run
        parts.append(f"Across models {_across_text(across, str(across['arm']))}\n")
    if data.linked_vs_dispersed:
        table = Table(title=LINKED_TITLE)
        for col in LINKED_COLUMNS:
            table.add_column(col, justify="right" if col == "units" else "left",
                             overflow="fold")  # fmt: skip
        for cells in _linked_cells(data.linked_vs_dispersed):
            table.add_row(Text(cells[0]), *cells[1:])  # a model name is not markup
        parts.append(_render_plain(table) + f"{ORDER_LINKED}\n{LINKED_WORDS}\n")
    repeated = data.repeated
    if repeated is None:
        parts.append("Repeated elicitation: not computed\n")
    elif repeated:
        table = Table(title=f"Profit after averaging answers over the first k passes "
                            f"({_repeated_intervals(repeated)})")  # fmt: skip
        table.add_column("model", overflow="fold")
        table.add_column("arm", overflow="fold")
        table.add_column("mean of single passes", justify="right")
        k_max = max(r["passes"] for r in repeated)
        for k in range(1, k_max + 1):
            table.add_column(f"k={k}", justify="right")
        for r in repeated:
            cells = [interval_text(b) for b in r["by_k"]]
            table.add_row(
                Text(r["model"]),
                r["arm"],
                fixed_or_dash(r["single_pass_mean"]),
                *cells,
                *[""] * (k_max - len(cells)),
            )
        parts.append(_render_plain(table) + f"{ORDER_REPEATED}\n")
    return "\n".join(parts)


def _repeated_intervals(repeated: Sequence[dict[str, Any]]) -> str:
    """How the repeated-elicitation table's intervals were drawn, from its rows' arms: its
    title said nothing of the clusters the leaderboard's header names."""
    return f"95% intervals {cluster_words(str(r['arm']) for r in repeated)}"


def _columns_that_fit(rows: Sequence[ArmRow], models: Sequence[str], width: int) -> int:
    """How many model columns fit beside the arm column (rich adds 3 characters a column)."""
    arm_width = max([len(r.arm) for r in rows] + [len("Brier (baseline)")]) + 3
    model_width = max([len(m) for m in models] + [len("not scored")]) + 3
    return max((width - 1 - arm_width) // model_width, 1)


def terminal_leaderboard(
    rows: Sequence[ArmRow], model_coverage: dict[str, float], width: int,
    floor: float | None = None,
) -> list[Table]:
    """What fits the terminal, never cut: every arm by every model when the models fit side by
    side; otherwise the models ranked on the baseline, then the arms of the models that ran
    any arm but the baseline, in as many tables as it takes. Without a baseline arm (the
    family benchmark alone) there is no ranking to show: it was printed empty, its title
    alone."""
    models = _ranked_models(rows)
    fits = _columns_that_fit(rows, models, width)
    if len(models) <= fits:
        return [compact_leaderboard(rows, model_coverage, floor)]
    ranked = any(r.arm == BASELINE_ARM for r in rows)
    tables = [model_ranking(rows, floor)] if ranked else []
    arms_per_model: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        arms_per_model[r.model].add(r.arm)
    # Every model the ranking does not show whole: one of a single arm other than the
    # baseline was in no table.
    busy = [m for m in models if arms_per_model[m] != {BASELINE_ARM}]
    for start in range(0, len(busy), fits):
        chunk = set(busy[start : start + fits])
        chunk_rows = [r for r in rows if r.model in chunk]
        tables.append(compact_leaderboard(chunk_rows, model_coverage, floor))
    return tables


def _ranked_models(rows: Sequence[ArmRow]) -> list[str]:
    """Models by mean profit on the baseline arm; those without it by the family benchmark's
    score, the arbitrage-free rate on isolated families, highest first (they were ordered
    by name); then the rest by name."""
    cell = {(r.model, r.arm): r for r in rows}

    def rank(m: str) -> tuple[int, float, str]:
        r = cell.get((m, BASELINE_ARM))
        if r is not None and r.profit is not None:
            return (0, r.profit.mean, m)
        f = cell.get((m, ISOLATED_FAMILIES))
        if f is not None and f.arbitrage_free is not None:
            return (1, -f.arbitrage_free.mean, m)
        return (2, 0.0, m)

    return sorted({r.model for r in rows}, key=rank)


def model_ranking(rows: Sequence[ArmRow], floor: float | None = None) -> Table:
    """Models down, ranked by mean profit on the baseline arm (the paper's Figure 2)."""
    cell = {(r.model, r.arm): r for r in rows}
    table = Table(
        title="Baseline arm: models ranked by mean arbitrage profit (lower is more coherent)",
        title_justify="left",
    )
    for col in ("model", "profit", "95% CI", "Brier", "coverage"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for m in _ranked_models(rows):
        r = cell.get((m, BASELINE_ARM))
        if r is None:
            continue
        table.add_row(
            Text(m),
            fixed_or_dash(r.profit.mean) if r.profit else "not scored",
            f"[{fixed_or_dash(r.profit.lo)}, {fixed_or_dash(r.profit.hi)}]" if r.profit else "",
            fixed_or_dash(r.brier.mean, 4) if r.brier else "",
            coverage_text(r.coverage, floor),  # the baseline's, which the floor was held to
        )
    return table


def compact_leaderboard(
    rows: Sequence[ArmRow], model_coverage: dict[str, float], floor: float | None = None
) -> Table:
    """Arms down, models across (most coherent on the baseline first). Under a family arm
    with a model not scored for its coverage, that arm's family coverage (the share of
    families answered, which the floor is held to) and, under the table, the floor rule in
    leaderboard.txt's words: the "coverage, all arms" row counts queries, and read alone a
    model at 94% there was left "not scored" at a floor of 90% with no reason shown."""
    cell = {(r.model, r.arm): r for r in rows}
    models = _ranked_models(rows)
    metric = metric_words(r.arm for r in rows)
    floored = [r for r in rows if is_family(r.arm) and r.status == STATUS_BELOW_FLOOR]
    table = Table(
        title=f"Mean {metric} (lower is more coherent)", title_justify="left",
        caption=floor_sentence(floor, [r.arm for r in rows])
        if floored and floor is not None else None,
        caption_justify="left",
    )
    table.add_column("arm", no_wrap=True)
    for m in models:
        table.add_column(Text(m), justify="right")  # a model name is not markup
    for arm in sorted({r.arm for r in rows}):
        values = []
        for m in models:
            r = cell.get((m, arm))
            values.append(
                "" if r is None else (fixed_or_dash(r.profit.mean, 4) if r.profit else "not scored")
            )
        table.add_row(arm, *values)
        free = [cell.get((m, arm)) for m in models]
        if any(r is not None and r.arbitrage_free is not None for r in free):
            table.add_row(
                "  arb-free share",
                *[f"{r.arbitrage_free.mean:.0%}" if r and r.arbitrage_free else "" for r in free],
            )
        if any(r.arm == arm for r in floored):
            table.add_row(
                "  family coverage",
                *["" if r is None else coverage_text(r.coverage, floor) for r in free],
                style="dim",
            )
    briers = [cell.get((m, BASELINE_ARM)) for m in models]
    if any(r is not None and r.brier is not None for r in briers):
        table.add_row(
            "Brier (baseline)",
            *[fixed_or_dash(r.brier.mean, 4) if r and r.brier else "" for r in briers],
            style="dim",
        )
    table.add_row(
        "coverage, all arms",
        *[coverage_text(model_coverage[m], floor) if m in model_coverage else "" for m in models],
        style="dim",
    )
    return table


#: The widths a text file's table is laid out in: as wide as it needs within them (a long
#: name folded its interval columns onto two lines at 200).
PLAIN_WIDTHS = (200, 320)


def _render_plain(table: Table) -> str:
    low, high = PLAIN_WIDTHS
    console = Console(width=high, record=True, file=io.StringIO(), color_system=None)
    console.width = max(low, min(console.measure(table).maximum, high))
    console.print(table)
    return console.export_text()


# ---------------------------------------------------------------------------------------------
# report.md and the CSV files


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return "\n".join(markdown.table(header, rows)) + "\n"


def _status_text(r: ArmRow, floor: float | None) -> str:
    if r.scored:
        return ""
    if r.below_floor_in is not None:
        arm, coverage = r.below_floor_in
        return f"not scored: {arm} coverage {coverage_text(coverage, floor)} ≤ floor"
    if r.status == STATUS_BELOW_FLOOR:
        under = "≤" if is_family(r.arm) else "<"
        return f"not scored: coverage {coverage_text(r.coverage, floor)} {under} floor"
    return "not scored: no answers"


def floor_sentence(floor: float, labels: Sequence[str]) -> str:
    """The coverage-floor rule as report.md states it, with the family benchmark's where a
    family arm is among `labels` (it said "under" alone, where a family arm's model at the
    floor is not scored either)."""
    rule = f"A model under the coverage floor ({floor_text(floor)}){floor_words(labels)}"
    return f"{rule} is not scored."


def legend(data: ReportData) -> list[str]:
    """What the leaderboard's words and columns mean, one sentence an item: the page's guide
    (`reading_guide`, the arbitrage-free share too, whose column the leaderboard always has,
    and the bootstrap's replicates and seed, which the page's header says), and the coverage
    floor. report.md opens with it; leaderboard.txt, which defined none of it, lists it under
    its leaderboard."""
    labels = [r.arm for r in data.rows]
    draws = bootstrap_draws(data.reps, data.seed)
    return [
        *reading_guide(labels, arbitrage_free=True, draws=draws),
        floor_sentence(data.floor, labels),
    ]


def _legend_text(data: ReportData) -> str:
    """`legend` as leaderboard.txt has it: "Legend:", then an item a line, wrapped."""
    items = [
        textwrap.fill(item, LEGEND_WIDTH, initial_indent="- ", subsequent_indent="  ",
                      break_long_words=False, break_on_hyphens=False)  # only between words
        for item in legend(data)
    ]
    return "\n".join(["Legend:", *items]) + "\n"


#: The width leaderboard.txt's legend is wrapped at.
LEGEND_WIDTH = 100


def report_markdown(
    data: ReportData, extra: Sequence[str] = (), notes: Sequence[str] = ()
) -> str:
    """`report/report.md`: every table of the report in Markdown, intervals in brackets.

    `extra` paragraphs (the audit sentence, say) are appended as they are; `notes`, plain
    text, are said under the leaderboard.
    """
    parts = ["# Campaign report\n"]
    parts.append(f"{' '.join(legend(data))}\n")
    parts.append("## Leaderboard\n")
    cells = leaderboard_cells(data.rows, data.floor)
    parts.append(_md_table(leaderboard_columns(data.rows), cells) + f"\n{ORDER_LEADERBOARD}\n")
    parts += [
        f"{markdown.text(line, starts_block=True)}\n" for line in [*_simulated_lines(data), *notes]
    ]
    across = data.across_models
    if baseline_run(data.rows):  # no comparison to speak of on an arm not run
        parts.append("## Across models\n")
        text = _across_text(across, markdown.text(across["arm"]))
        parts.append(f"{text[0].upper()}{text[1:]}.\n")
    if data.linked_vs_dispersed:
        parts.append(f"## {LINKED_TITLE}\n")
        table_md = _md_table(LINKED_COLUMNS, _linked_cells(data.linked_vs_dispersed))
        parts.append(f"{LINKED_WORDS}\n\n{table_md}\n{ORDER_LINKED}\n")
    parts.append("## Repeated elicitation\n")
    if data.repeated is None:
        parts.append("Not computed.\n")
    elif not data.repeated:
        parts.append("No scored model ran an arm with two passes or more.\n")
    else:
        k_max = max(r["passes"] for r in data.repeated)
        rows = [
            [
                r["model"],
                r["arm"],
                fixed_or_dash(r["single_pass_mean"]),
                *(interval_text(b) for b in r["by_k"]),
                *[""] * (k_max - len(r["by_k"])),
            ]
            for r in data.repeated
        ]
        parts.append(
            "Profit after averaging each event's answers over the first k passes "
            f"({_repeated_intervals(data.repeated)}):\n\n"
            + _md_table(
                ["model", "arm", "mean of single passes", *(f"k={k}" for k in range(1, k_max + 1))],
                rows,
            )
            + f"\n{ORDER_REPEATED}\n"
        )
    if data.families:
        parts.append("## Question families\n")
        parts.append(
            _md_table(
                ["model", "arm", "families", "arbitrage-free share [95% CI]", "future families",
                 "controls", "coverage"],
                [
                    [
                        f["model"],
                        f["arm"],
                        str(f["families"]),
                        _fmt_json_iv(f["arbitrage_free"], 2) if f["scored"] else "not scored",
                        _kind_text(f.get("future")),
                        _kind_text(f.get("controls")),
                        coverage_text(f["coverage"], data.floor),
                    ]
                    for f in data.families
                ],
            )
            + f"\n{ORDER_FAMILIES}\n"
        )
    parts += [f"{p.rstrip()}\n" for p in extra]
    return "\n".join(parts)


def _simulated_lines(data: ReportData) -> list[str]:
    """The line under a leaderboard naming its simulated forecasters (none without them)."""
    note = simulated_note(sorted({r.model for r in data.rows} & data.simulated), data.in_part)
    return [note] if note else []


def _across_text(across: dict[str, Any], arm: str) -> str:
    """The cross-model statistics in words (leaderboard.txt and report.md): with fewer than
    two scored models there is no pair to count ("profit None of 0" was printed)."""
    n = len(across["models"])
    if n < 2:
        return f"on {arm}: {plural(n, 'scored model')}, so no pair of models to compare"
    pairs = across["pairs"]
    if across.get("pairs_not_counted"):
        return (
            f"on {arm} ({n} scored models): Spearman(profit, Brier) = {_spearman(across)}; "
            "pairwise differences not counted: "
            f"{across['pairs_not_counted']}"
        )
    return (
        f"on {arm} ({n} scored models, {plural(across['units'], 'common unit')}): "
        f"Spearman(profit, Brier) = {_spearman(across)}; pairwise "
        f"differences whose 95% interval excludes zero: profit "
        f"{_count(across['profit_pairs_excluding_zero'])} of {pairs}, Brier "
        f"{_count(across['brier_pairs_excluding_zero'])} of {pairs}"
    )


def _spearman(across: dict[str, Any]) -> str:
    """The cross-model Spearman correlation, or "—" and why not (`spearman_not_computed`)."""
    why = across.get("spearman_not_computed")
    value = fixed_or_dash(across["spearman_profit_brier"], 4)
    return f"{value} ({why})" if why else value


def _count(value: int | None) -> str:
    return "—" if value is None else str(value)


def _linked_cells(entries: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The linked - dispersed table's cells (`LINKED_COLUMNS`), from the summary's entries."""
    return [
        [e["model"], e["kind"], difference_text(e), str(e["units"])]
        for e in entries
    ]


def _fmt_signed_iv(iv: Interval | None) -> str:
    return "" if iv is None else difference_text(iv._asdict())


def _comparison(r: ArmRow) -> str:
    """The "vs baseline" cell: a joint-events row's difference is with its own marginals
    (`runs.report.data.marginals_of`), and says so."""
    if r.vs_marginals is not None:
        return f"{_fmt_signed_iv(r.vs_marginals)} vs marginals"
    return _fmt_signed_iv(r.vs_baseline)


def _fmt_json_iv(iv: dict[str, Any] | None, digits: int = 5) -> str:
    """A `summary.json` interval as "mean [lo, hi]" ("—" for a null end)."""
    if iv is None:
        return ""
    return interval_text(iv, digits)


def _iv_cells(iv: Interval | None) -> list[float | None]:
    return [None, None, None] if iv is None else [iv.mean, iv.lo, iv.hi]


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(
            ["" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v for v in row]
        )
    return buffer.getvalue()


def csv_tables(data: ReportData) -> dict[str, str]:
    """One CSV text per table of the report, keyed by file name (see the module docstring)."""
    tables: dict[str, str] = {}
    thresholds = [f"at_least_{threshold_key(t)}" for t in THRESHOLDS]
    tables["leaderboard.csv"] = _csv_text(
        [
            "model",
            "arm",
            "norm",
            "status",
            "coverage",
            "units",
            "clusters",
            "profit",
            "profit_lo",
            "profit_hi",
            *thresholds,
            "vs_baseline",
            "vs_baseline_lo",
            "vs_baseline_hi",
            "brier",
            "brier_lo",
            "brier_hi",
            "arbitrage_free",
            "arbitrage_free_lo",
            "arbitrage_free_hi",
            "vs_marginals",
            "vs_marginals_lo",
            "vs_marginals_hi",
            "below_floor_in",
            "simulated",
        ],
        [
            [
                r.model,
                r.arm,
                r.norm,
                r.status,
                r.coverage,
                r.units,
                r.clusters,
                *_iv_cells(r.profit),
                *(r.at_least[t] / r.units if r.scored and r.units else None for t in THRESHOLDS),
                *_iv_cells(r.vs_baseline),
                *_iv_cells(r.brier),
                *_iv_cells(r.arbitrage_free),
                *_iv_cells(r.vs_marginals),
                r.below_floor_in[0] if r.below_floor_in else None,
                _simulated_cell(data, r.model),
            ]
            for r in data.rows
        ],
    )
    tables["models.csv"] = _csv_text(
        ["model", "coverage", "provider", "simulated"],
        [[m, c, data.providers.get(m), _simulated_cell(data, m)]
         for m, c in sorted(data.model_coverage.items())],
    )  # fmt: skip
    a = data.across_models
    tables["across_models.csv"] = _csv_text(
        [
            "arm",
            "models",
            "units",
            "spearman_profit_brier",
            "pairs",
            "profit_pairs_excluding_zero",
            "brier_pairs_excluding_zero",
            "spearman_not_computed",
        ],
        [
            [
                a["arm"],
                " ".join(a["models"]),
                a["units"],
                a["spearman_profit_brier"],
                a["pairs"],
                a["profit_pairs_excluding_zero"],
                a["brier_pairs_excluding_zero"],
                a.get("spearman_not_computed"),
            ]
        ]
        if baseline_run(data.rows)
        else [],  # its header alone: no comparison on an arm not run
    )
    if data.repeated is not None:
        tables["repeated_elicitation.csv"] = _csv_text(
            ["model", "arm", "passes", "units", "single_pass_mean", "k", "mean", "lo", "hi",
             "simulated"],
            [
                [
                    r["model"],
                    r["arm"],
                    r["passes"],
                    r["units"],
                    r["single_pass_mean"],
                    b["k"],
                    b["mean"],
                    b["lo"],
                    b["hi"],
                    _simulated_cell(data, r["model"]),
                ]
                for r in data.repeated
                for b in r["by_k"]
            ],
        )
    tables["linked_vs_dispersed.csv"] = _csv_text(
        ["model", "kind", "mean", "lo", "hi", "excludes_zero", "units", "simulated"],
        [[e["model"], e["kind"], e["mean"], e["lo"], e["hi"], _bool_cell(e["excludes_zero"]),
          e["units"], _simulated_cell(data, e["model"])] for e in data.linked_vs_dispersed],
    )  # fmt: skip
    tables["families.csv"] = _csv_text(
        [
            "model",
            "arm",
            "families",
            "coverage",
            "status",
            "arbitrage_free",
            "arbitrage_free_lo",
            "arbitrage_free_hi",
            "vs_marginals",
            "vs_marginals_lo",
            "vs_marginals_hi",
            *(f"{kind}_{col}" for kind in ("future", "controls")
              for col in ("families", "arbitrage_free", "arbitrage_free_lo", "arbitrage_free_hi")),
            "below_floor_in",
            "simulated",
        ],
        [
            # a family arm has no marginals row; the kinds' columns added after (additive)
            [*_family_cells(f), None, None, None, *_kind_cells(f.get("future")),
             *_kind_cells(f.get("controls")), (f.get("below_floor_in") or {}).get("arm"),
             _simulated_cell(data, f["model"])]
            for f in data.families
        ],
    )
    return tables


def _bool_cell(value: bool | None) -> str | None:
    """A yes-or-no cell as the `simulated` cells write it ("true", "false"); empty for null."""
    return None if value is None else str(value).lower()


def _simulated_cell(data: ReportData, model: str) -> str:
    """A CSV's `simulated` cell: "true" where the local simulator answered the model, as
    summary.json says it."""
    return "true" if model in data.simulated else "false"


def _kind_text(kind: dict[str, Any] | None) -> str:
    """One kind of family's rate and count, as the page has it ("0.61 [0.43, 0.79] of 28")."""
    if kind is None:
        return ""
    return of_families(_fmt_json_iv(kind["arbitrage_free"], 2), int(kind["families"]))


def _kind_cells(kind: dict[str, Any] | None) -> list[Any]:
    """`families.csv`'s four cells of one kind of family: count, rate, its interval."""
    if kind is None:
        return [None] * 4
    return [kind["families"], *_json_iv_cells(kind["arbitrage_free"])]


def _family_cells(f: dict[str, Any]) -> list[Any]:
    """A `families.csv` row up to its arbitrage-free interval; its three `vs_marginals`
    cells, empty, follow: without them each row stopped three cells short of its header."""
    return [f["model"], f["arm"], f["families"], f["coverage"], f["status"],
            *_json_iv_cells(f["arbitrage_free"])]  # fmt: skip


def _json_iv_cells(iv: dict[str, Any] | None) -> list[Any]:
    """A `summary.json` interval as its three CSV cells (mean, lo, hi), empty when null."""
    return [None] * 3 if iv is None else [iv[k] for k in ("mean", "lo", "hi")]
