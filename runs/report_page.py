"""`report/index.html`: the whole report as one self-contained page.

Everything is inside the file: the figures as PNG data URIs, the CSS inline, no script, no
font or stylesheet from elsewhere, and a Content-Security-Policy that forbids the browser to
fetch anything (`default-src 'none'`), so the page reads the same offline, mailed, or
archived. It is laid out for a laptop and narrows to a phone's width: figures scale down,
wide tables scroll sideways inside their own box instead of widening the page.

It is built from what the report already wrote (`summary.json`, `figures.json`) and the
frozen `spec.toml`, so `dutchbook report DIR` can rebuild it without a single call.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import orjson

from engine.console_lines import plural
from engine.durable import write_bytes_atomic
from panels.input_files import right_to_left
from runs.audit import BALANCE_COLUMNS, cost_text, paper_cause_rows
from runs.figures import read_manifest
from runs.rehearsal import rehearsed
from runs.report.data import ARBITRAGE_FREE_CENTS, arm_model_rank, family_rank, is_family
from runs.report.models import (
    REHEARSAL_WORDS,
    Reported,
    frozen_spec,
    in_part_of,
    model_notes,
    personalities,
    simulated_models,
    simulated_note,
)
from runs.report.provenance import answered_parser_note, provenance_sentences
from runs.report.wording import (
    LINKED_COLUMNS,
    LINKED_TITLE,
    LINKED_WORDS,
    ORDER_ARMS,
    ORDER_FAMILIES,
    ORDER_LINKED,
    ORDER_RANKING,
    ORDER_REPEATED,
    VS_BASELINE_COLUMN,
    bootstrap_draws,
    coverage_text,
    dollars,
    fixed,
    floor_text,
    floor_words,
    interval_text,
    metric_words,
    of_families,
    reading_guide,
    without_empty_comparison,
)
from runs.report_folder import report_dir as report_folder

PAGE = "index.html"
#: The browser may load nothing but the page's own inline images and style.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
:root { color-scheme: light; --ink: #1f2937; --muted: #6b7280; --rule: #e5e7eb;
  --accent: #1d4ed8; --warn: #fef3c7; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink); background: #fff; }
main { max-width: 1100px; margin: 0 auto; padding: 1.2rem 1rem 3rem; }
h1 { font-size: 1.6rem; margin: 0.2rem 0 0.4rem; line-height: 1.25; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 0.5rem; border-bottom: 1px solid var(--rule);
  padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 0.4rem; }
p { margin: 0.4rem 0 0.8rem; }
.meta { color: var(--muted); font-size: 0.95rem; }
.sim { background: var(--warn); padding: 0.5rem 0.8rem; border-radius: 6px; }
.about { background: var(--soft, #f3f4f6); padding: 0.5rem 0.8rem; border-radius: 6px; }
.audit { border-left: 4px solid var(--accent); padding: 0.3rem 0.9rem; background: #eff6ff; }
figure { margin: 1rem 0 2rem; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figure > a { display: block; overflow-x: auto; }
ul.guide { font-size: 0.93rem; padding-left: 1.2rem; margin: 0.4rem 0 0.9rem; }
ul.guide li { margin: 0.15rem 0; }
figcaption { color: var(--muted); font-size: 0.92rem; margin-top: 0.4rem; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; margin: 0.5rem 0 1rem;
  border: 1px solid var(--rule); border-radius: 6px; }
table { border-collapse: collapse; font-size: 0.9rem; width: 100%; }
th, td { padding: 0.35rem 0.6rem; border-bottom: 1px solid var(--rule); text-align: right; }
th { background: #f9fafb; vertical-align: bottom; }
td.text { white-space: nowrap; }
th:first-child, td:first-child, .text { text-align: left; }
td.long { white-space: normal; overflow-wrap: anywhere; min-width: 12rem; }
p, li, h1, figcaption { overflow-wrap: anywhere; }
tr.unscored td { color: var(--muted); }
ul.omitted { color: var(--muted); font-size: 0.92rem; padding-left: 1.2rem; }
nav ol { padding-left: 1.3rem; margin: 0.3rem 0; columns: 2 16rem; font-size: 0.95rem; }
a { color: var(--accent); }
/* A table's first label column (`.key`: its model, or its arm) stays while a wide table's
   numbers scroll past, so a row is never read without its name. */
th.key, td.key { position: sticky; left: 0; z-index: 1; background: #fff;
  box-shadow: 1px 0 0 var(--rule); }
th.key { background: #f9fafb; }
th.key + th.key, td.key + td.key { position: static; }
@media (max-width: 640px) {
  body { font-size: 15px; }
  main { padding: 0.8rem 0.6rem 2rem; }
  h1 { font-size: 1.3rem; }
  th, td { padding: 0.3rem 0.45rem; font-size: 0.85rem; }
  /* A table's label columns (its first two words columns, `.key`) stay while its numbers
     scroll past, each 6rem wide, their words wrapped: the arm and model columns filled a
     phone's width, and scrolled away with the numbers. */
  th.key, td.key { white-space: normal; overflow-wrap: anywhere; box-sizing: border-box;
    width: 6.9rem; min-width: 6.9rem; max-width: 6.9rem; box-shadow: none; }
  th.key + th.key, td.key + td.key { position: sticky; left: 6.9rem;
    box-shadow: 1px 0 0 var(--rule); }
  td.long { min-width: 6rem; }
  /* An input's digest breaks where it must, so the provenance table fits a phone. */
  td code { overflow-wrap: anywhere; }
  /* A figure keeps a width its labels can be read at, and scrolls sideways in its box. */
  figure img { max-width: none; width: 44rem; }
}
@media print {
  main { max-width: none; padding: 0; }
  .scroll { overflow: visible; border: 0; }
  table { font-size: 0.7rem; }
  th, td, td.text { padding: 0.15rem 0.3rem; white-space: normal; }
  th.key, td.key { position: static; box-shadow: none; }
  figure { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  figure img { width: auto; max-width: 100%; max-height: 80vh; }
  a { color: inherit; text-decoration: none; }
}
"""


def write_page(run_dir: Path, *, audit: Any = None, report_dir: Path | None = None) -> Path:
    """Write `report/index.html` from the report already in `run_dir/report/` (or in
    `report_dir`, a report's scratch folder: `runs.report_folder`).

    `audit` (an `engine.audit.Audit`) defaults to the run folder's own (`runs.audit`).
    """
    report_dir = report_dir or report_folder(run_dir)
    summary = orjson.loads((report_dir / "summary.json").read_bytes())
    if audit is None and ((run_dir / "attempts").is_dir() or (run_dir / "journal").is_dir()):
        from runs.audit import run_audit

        audit = run_audit(run_dir)
    page = render_page(
        summary,
        read_manifest(report_dir),
        report_dir,
        spec=frozen_spec(run_dir),
        rehearsed=rehearsed(run_dir),
        reported=None if audit is None else audit.models_reported,
        audit_sentence=None if audit is None else audit.sentence,
        audit_table=None if audit is None else audit.table(),
        audit_notes=() if audit is None else audit.notes(),
        audit_causes=None if audit is None else paper_cause_rows(audit),
        files=_files(report_dir),
    )
    path = report_dir / PAGE
    # Through the durable writer: a write the disk cut short leaves no half page (a temporary
    # of some 200 KB) taking the room the user must free to run the report again.
    write_bytes_atomic(path, page.encode("utf-8"))
    return path


def _files(report_dir: Path) -> list[str]:
    """The report's other files, linked at the foot of the page (relative links)."""
    wanted = {".json", ".txt", ".md", ".csv", ".png"}
    return sorted(
        p.name
        for p in report_dir.iterdir()
        if p.suffix in wanted and p.name != PAGE  # a write's `.name.tmp` has suffix `.tmp`
    )


# ---------------------------------------------------------------------------------------------
# Rendering


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def esc_name(name: str) -> str:
    """A model's name escaped, set in prose of ours: isolated (`<bdi>`) when it holds a
    right-to-left letter, which took the text beside it into its run ("מודל: 24 requests
    given up" read "24 :מודל requests given up"; "a, מודל, عربي" swapped the two names about
    their comma). A name in a table cell of its own needs no isolation."""
    return f"<bdi>{esc(name)}</bdi>" if right_to_left(name) else esc(name)


def _note_html(note: str, names: Iterable[str]) -> str:
    """A line of the audit's notes (`engine.audit.Audit.notes`), escaped, the model's name
    it begins with (lanes that ended early, pauses, spent budgets) set by `esc_name`."""
    name = max((n for n in names if note.startswith(n)), key=len, default="")
    return esc_name(name) + esc(note[len(name) :]) if name else esc(note)


def render_page(
    summary: Mapping[str, Any],
    figures: Sequence[Mapping[str, Any]],
    report_dir: Path,
    *,
    spec: Mapping[str, Any] | None = None,
    rehearsed: bool = False,
    audit_sentence: str | None = None,
    audit_table: Any = None,
    audit_notes: Sequence[str] = (),
    files: Sequence[str] = (),
    audit_causes: tuple[list[str], list[list[str]]] | None = None,
    reported: Reported | None = None,
) -> str:
    """The page as a string; `figures` is the manifest (`figures.json`), paths under
    `report_dir`; `rehearsed`: the folder is a rehearsal's (`runs.rehearsal`); `reported`:
    the models its replies named (`engine.audit.Audit.models_reported`);
    `audit_causes`: the retry attempts as Appendix C groups them (`runs.audit.paper_cause_rows`)."""
    spec = spec or {}
    name = str(spec.get("name") or report_dir.parent.name)
    drawn = [f for f in figures if f.get("path")]
    omitted = [f for f in figures if not f.get("path")]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>dutchbook report: {esc(name)}</title>",
        f"<style>{STYLE}</style>",
        "</head><body><main>",
        *_header(name, summary, spec, rehearsed, reported),
        *_audit(audit_sentence, audit_table, audit_notes),
        *_paper_causes(audit_sentence, audit_table, audit_causes),
        *_leaderboard(summary),
        *_contents(drawn),
        *_shortened_names(summary, drawn),
        *(_figure(f, report_dir, summary) for f in drawn),
        *_omitted(omitted),
        *_figures_skipped(summary, figures),
        *_arms_table(summary),
        *_linked_table(summary),
        *_repeated_table(summary),
        *_families_table(summary),
        *_provenance(summary.get("provenance")),
        *_footer(files),
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _one_cluster_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """Why a scored row shows no interval: it spans one cluster (`scoring.stats.MIN_CLUSTERS`)."""
    if not any(r.get("scored") and r.get("clusters") == 1 for r in rows):
        return ""
    return (
        " · no interval where a row spans a single date or family ([—, —]): resampling one "
        "gives it back"
    )


def _header(
    name: str,
    summary: Mapping[str, Any],
    spec: Mapping[str, Any],
    rehearsed: bool,
    reported: Reported | None = None,
) -> list[str]:
    rows = summary.get("rows", [])
    models = sorted({r["model"] for r in rows})
    arms = sorted({r["arm"].split(" ")[0] for r in rows})
    labels = [str(r["arm"]) for r in rows]
    draws = bootstrap_draws(_whole(summary.get("bootstrap_replicates")), summary.get("seed"))
    out = [
        f"<h1>Coherence report: {esc(name)}</h1>",
        '<p class="meta">'
        f"{plural(len(models), 'model')} · {plural(len(arms), 'arm')} · "
        f"{metric_words(labels)} (lower is more coherent) · "
        f"coverage floor {_floor_text(summary)}{_one_cluster_note(rows)}</p>",
        *_guide(labels, draws),
    ]
    simulated = simulated_models(spec, rehearsed)
    if simulated:
        out.append(
            '<p class="sim"><strong>Simulated forecasters:</strong> '
            + ", ".join(esc_name(n) for n in simulated)
            + " answered from the local simulator, not a language model; no provider was "
            f"called{esc(REHEARSAL_WORDS) if rehearsed else ''}.</p>"
        )
    out += _personalities_html(spec, rehearsed, reported)
    out.extend(
        f'<p class="about"><strong>{esc_name(name)}:</strong> {esc(text)}</p>'
        for name, text in model_notes(spec, rehearsed, reported)
    )
    return out


def _personalities_html(
    spec: Mapping[str, Any], rehearsed: bool, reported: Reported | None
) -> list[str]:
    """What each simulated personality of the run does, one item each, with its models."""
    items = "".join(
        f"<li><strong>{esc(p)}</strong> ({', '.join(esc_name(n) for n in names)}): "
        f"{esc(words)}</li>"
        for p, names, words in personalities(spec, rehearsed, reported)
    )
    return [f'<ul class="sim-personalities">{items}</ul>'] if items else []


def _guide(labels: Sequence[str], draws: str) -> list[str]:
    """The terms the page uses, one item each (`runs.report.wording.reading_guide`), the
    bootstrap's replicates and seed (`draws`) in its intervals' sentence, as leaderboard.txt's
    legend says them: the header said the bootstrap too, in other words, so the page said it
    twice."""
    if not labels:
        return []
    items = "".join(f"<li>{esc(item)}</li>" for item in reading_guide(labels, draws=draws))
    return [f'<ul class="guide">{items}</ul>']


#: The audit table's columns shown on the page (`engine.audit.Audit.table()`), and headers.
AUDIT_COLUMNS = (
    ("name", "model"),
    ("provider", "provider"),
    ("requests", "requests"),
    ("accepted", "accepted"),
    ("attempts", "attempts"),
    ("retry_attempts", "retry attempts"),
    ("requests_retried", "requests retried"),
    ("given_up", "given up"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p95_ms", "p95 ms"),
    ("latency_p99_ms", "p99 ms"),
    ("tokens_in", "tokens in"),
    ("tokens_out", "tokens out"),
    ("cost_usd", "cost $"),
)


def _audit(sentence: str | None, table: Any, notes: Sequence[str] = ()) -> list[str]:
    """The paper's retry sentence; lanes that ended early and pauses, with why
    (`engine.audit.Audit.notes`); then one row per model and the total (`engine.audit`)."""
    if not sentence:
        return []
    out = ["<h2>Retries and failures</h2>", f'<p class="audit">{esc(sentence)}</p>']
    if notes:
        names = [] if table is None or "name" not in table.columns else table["name"].to_list()
        items = "".join(f"<li>{_note_html(note, map(str, names))}</li>" for note in notes)
        out.append(f'<ul class="audit-notes">{items}</ul>')
    if table is None or not getattr(table, "height", 0):
        return out
    rows = [r for r in table.iter_rows(named=True) if r.get("scope") in {"model", "all"}]
    causes = [c for c in table.columns if c.startswith("retries.") and any(r.get(c) for r in rows)]
    # The causes right after the retry attempts they divide, in words ("rate limit", as the
    # sentence above says them): last, under code names that could not wrap, they were the
    # columns a laptop's page hid off to the side.
    known = [(k, h) for k, h in AUDIT_COLUMNS if k in table.columns]
    # What else the requests came to, after "given up", so that a row adds up: a strict
    # reparse's rejected answers, said only in a note, left "702 | 0 accepted | given up 0".
    balance = [(k, h) for k, h in BALANCE_COLUMNS if any(r.get(k) for r in rows)]
    given = next((i + 1 for i, (k, _) in enumerate(known) if k == "given_up"), len(known))
    known = [*known[:given], *balance, *known[given:]]
    cut = next((i + 1 for i, (k, _) in enumerate(known) if k == "retry_attempts"), len(known))
    causes_named = [(c, c.removeprefix("retries.").replace("_", " ")) for c in causes]
    columns = [*known[:cut], *causes_named, *known[cut:]]
    header = [h for _, h in columns]
    body = [[_cell(r.get(k), k) for k, _ in columns] for r in rows]
    said = {
        "not_attempted": "not yet asked",
        "answers_missing": "whose accepted answers left responses/",
        "answers_rejected_on_reparse": "whose accepted replies a strict reparse rejected",
    }
    others = "".join(f", requests {said[k]}" for k, _ in balance)
    out.append(
        "<p>Per model: planned requests, attempts, retry attempts (every attempt that was not "
        "the accepted one, nor a reply the run accepted that a later strict reparse rejected) "
        f"and their causes, requests given up{esc(others)}, latency of accepted attempts, "
        "tokens and cost where priced.</p>"
    )
    out.append(_table(header, body, text_columns={0, 1}))
    return out


def _paper_causes(
    sentence: str | None, table: Any, causes: tuple[list[str], list[list[str]]] | None
) -> list[str]:
    """Under the per-model table, whose cause columns are those that happened: the retry
    attempts as Appendix C groups them, each of its six causes with 0 where none happened."""
    if not sentence or causes is None or table is None or not getattr(table, "height", 0):
        return []
    header, body = causes
    return [
        "<p>The same retry attempts as the paper's Appendix C groups them, each of its six "
        "causes listed, 0 where none happened.</p>",
        _table(header, body, text_columns={0, len(header) - 1}),
    ]


def _cell(value: Any, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if column == "cost_usd":  # as `dutchbook audit` shows it: cents alone left rows unsummed
        return cost_text(value).removeprefix("$")
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _leaderboard(summary: Mapping[str, Any]) -> list[str]:
    baseline = str(summary.get("baseline_arm") or "baseline")
    rows = [r for r in summary.get("rows", []) if r["arm"] == baseline]
    if not rows:
        return []
    rows.sort(key=lambda r: (not r.get("scored"), _mean(r.get("profit")), r["model"]))
    floor = _floor(summary)
    body = []
    rank = 0
    for r in rows:
        if r.get("scored") and r.get("profit"):
            rank += 1
            body.append(
                (
                    str(rank),
                    r["model"],
                    _iv(r.get("profit")),
                    _iv(r.get("brier"), 4),
                    str(r.get("units", "")),
                    _coverage(r.get("coverage"), floor),  # this arm's, held to the floor
                )
            )
        else:
            body.append(
                (
                    "",
                    r["model"],
                    _status(r, floor),
                    "",
                    str(r.get("units", "")),
                    _coverage(r.get("coverage"), floor),  # this arm's, held to the floor
                )
            )
    out = [
        "<h2>Leaderboard</h2>",
        f"<p>Models ranked by mean arbitrage profit on the {esc(baseline)} arm "
        "(the paper's Figure 2).</p>",
        _table(
            ("#", "model", "profit [95% CI]", "Brier [95% CI]", "units", "coverage"),
            body,
            text_columns={1},
        ),
        _order(ORDER_RANKING),
        *_simulated_line(summary, {str(r["model"]) for r in rows}),
        *(f'<p class="sim">{esc(n)}</p>' for n in [answered_parser_note(summary)] if n),
    ]
    across = summary.get("across_models") or {}
    if len(across.get("models") or []) >= 2:
        facts = []
        if across.get("spearman_profit_brier") is not None:
            facts.append(
                f"Spearman rank correlation of profit and Brier "
                f"{across['spearman_profit_brier']:.3f}"
            )
        elif across.get("spearman_not_computed"):  # the sentence was left out, no reason said
            facts.append(
                "Spearman rank correlation of profit and Brier — "
                f"({across['spearman_not_computed']})"
            )
        if across.get("profit_pairs_excluding_zero") is not None:
            pairs = across.get("pairs")
            text = (
                f"pairs of models whose 95% interval of the difference excludes zero: profit "
                f"{across['profit_pairs_excluding_zero']} of {pairs}"
            )
            if across.get("brier_pairs_excluding_zero") is not None:
                text += f", Brier {across['brier_pairs_excluding_zero']} of {pairs}"
            facts.append(text + f" (on {plural(int(across.get('units') or 0), 'common unit')})")
        if across.get("pairs_not_counted"):
            facts.append(f"pairwise differences not counted: {across['pairs_not_counted']}")
        if facts:
            out.append(f"<p>{esc('; '.join(facts))}.</p>")
    return out


def _simulated_line(summary: Mapping[str, Any], shown: AbstractSet[str]) -> list[str]:
    """The line under a table naming the simulated forecasters among the models it shows
    (summary.json's `simulated`), as leaderboard.txt and the terminal say it."""
    models = summary.get("models") or {}
    names = sorted(m for m in shown if (models.get(m) or {}).get("simulated"))
    # The names escaped and isolated one by one; the sentence around them has nothing to escape.
    note = simulated_note(names, in_part_of(models), show=esc_name)
    return [f'<p class="sim">{note}</p>'] if note else []


def _shortened_names(summary: Mapping[str, Any], drawn: Sequence[Mapping[str, Any]]) -> list[str]:
    """Say that the figures shorten long names, when a model's name is that long."""
    from runs.report_figures._style import NAME_CHARS  # a constant: matplotlib not imported

    models = {str(row.get("model", "")) for row in summary.get("rows", [])}
    if not drawn or all(len(model) <= NAME_CHARS for model in models):
        return []
    return [
        f'<p class="meta">The figures draw a name longer than {NAME_CHARS} characters as its '
        "start and end around “…” (Figure 8's panel titles break it over lines where they "
        "can); the tables give every name whole.</p>"
    ]


def _contents(drawn: Sequence[Mapping[str, Any]]) -> list[str]:
    if not drawn:
        return []
    items = "".join(
        f'<li value="{int(f["number"])}"><a href="#fig{int(f["number"])}">{esc(f["title"])}</a>'
        "</li>"
        for f in drawn
    )
    return ["<h2>Figures</h2>", f"<nav><ol>{items}</ol></nav>"]


#: Where a figure's values are given as numbers on the page, by figure key: its alt text says
#: so (it repeated the title alone, and a reader who cannot see the figure lost its data).
FIGURE_DATA = {
    "leaderboard": "the Leaderboard table",
    "horizons": "the horizon and two-asset rows of the Every arm and model table",
    "arms": "the vs baseline column of the Every arm and model table",
    "linked": "the linked and dispersed rows of the Every arm and model table",
    "families": "the Question families table, by arm rather than by shape",
    "repeated": "the Repeated elicitation table",
    "audit": "the Retries and failures table, as totals per model",
}


def _figure_data(key: str, summary: Mapping[str, Any]) -> str | None:
    """Where figure `key`'s values are on the page (`FIGURE_DATA`); figure 5's differences
    too, in their table where the page has it (`_linked_table`): named always, it was not
    there when summary.json's `linked_vs_dispersed` is empty."""
    where = FIGURE_DATA.get(key)
    if key == "linked" and summary.get("linked_vs_dispersed"):
        return f"the {LINKED_TITLE} table and {where}"
    return where


def _figure(figure: Mapping[str, Any], report_dir: Path, summary: Mapping[str, Any]) -> str:
    number = int(figure["number"])
    path = report_dir / str(figure["path"])
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    alt = f"Figure {number}: {figure['title']}."
    where = _figure_data(str(figure.get("key")), summary)
    if where:
        alt += f" Its values are in {where}."
    return (
        f'<figure id="fig{number}"><h3>Figure {number}. {esc(figure["title"])}</h3>'
        # The link opens the PNG beside the page, full size (small screens zoom into it).
        f'<a href="{esc(figure["path"])}"><img src="data:image/png;base64,{data}" '
        f'alt="{esc(alt)}"></a>'
        f"<figcaption>{esc(figure.get('caption') or '')}</figcaption></figure>"
    )


def _omitted(omitted: Sequence[Mapping[str, Any]]) -> list[str]:
    if not omitted:
        return []
    items = "".join(
        f"<li>Figure {int(f['number'])} ({esc(f['title'])}) is left out: {esc(f['omitted'])}.</li>"
        for f in omitted
    )
    return [f'<ul class="omitted">{items}</ul>']


def _figures_skipped(summary: Mapping[str, Any], figures: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why the page shows no figure where none was drawn and no manifest says why of each
    (matplotlib not installed, `DUTCHBOOK_FIGURES=0`: `runs.figures`): the page said
    nothing of them, and read as one whose figures were lost."""
    drawn = summary.get("figures")
    note = drawn.get("note") if isinstance(drawn, Mapping) else None
    if figures or not isinstance(note, str):
        return []
    return [f'<ul class="omitted"><li>{esc(note[:1].upper() + note[1:])}.</li></ul>']


def _arms_table(summary: Mapping[str, Any]) -> list[str]:
    rows = summary.get("rows", [])
    if not rows:
        return []
    thresholds = [f"{t:g}" for t in summary.get("thresholds", [])]
    floor = _floor(summary)
    body = []
    classes = []
    for r in sorted(rows, key=arm_model_rank):
        at_least = r.get("at_least") or {}
        shares = [_pct((at_least.get(t) or {}).get("share")) for t in thresholds]
        vs, marginals = r.get("vs_baseline"), r.get("vs_marginals")
        body.append(
            (
                r["arm"],
                r["model"],
                str(r.get("units", "")),
                str(r.get("clusters", "")),
                _iv(r.get("profit")) if r.get("scored") else _status(r, floor),
                f"{_iv(marginals, signed=True)} vs marginals"
                if marginals
                else (_iv(vs, signed=True) if vs else ""),
                *shares,
                _iv(r.get("brier"), 4),
                _iv(r.get("arbitrage_free"), 2),
                _coverage(r.get("coverage"), floor),
            )
        )
        classes.append("" if r.get("scored") else "unscored")
    header = (
        "arm",
        "model",
        "units",
        "clusters",
        "profit [95% CI]",
        VS_BASELINE_COLUMN,
        *(f"≥ {t}" for t in thresholds),
        "Brier [95% CI]",
        "arbitrage-free [95% CI]",
        "coverage",
    )
    comparisons = (r.get("vs_marginals") or r.get("vs_baseline") for r in rows)
    shown, *cells = without_empty_comparison(comparisons, header, [header, *body])
    return [
        "<h2>Every arm and model</h2>",
        "<p>Mean profit per unit stake (passes averaged per unit, then units averaged); the "
        "paired difference with the baseline on the same stock-days (for joint events, with "
        "the same arm's marginals: a panel of several days or assets is compared within its "
        "arm, as in the paper); the share of units with "
        "at least each profit; family arms in the L1 metric with their arbitrage-free rate. "
        "Clusters: the dates or families the interval resampled (a handful makes it rough). "
        f"A model under the coverage floor{floor_words(str(r.get('arm', '')) for r in rows)} "
        "is not scored: an unanswered question is never counted as incoherence.</p>",
        _table(shown, cells, text_columns={0, 1}, row_classes=classes),
        _order(ORDER_ARMS),
    ]


def _linked_table(summary: Mapping[str, Any]) -> list[str]:
    """The linked - dispersed differences (summary.json's `linked_vs_dispersed`), with or
    without figure 5: its caption was the only place the page gave them."""
    entries = summary.get("linked_vs_dispersed") or []
    if not entries:
        return []
    body = [
        (e["model"], e["kind"], _iv(e, signed=True), str(e.get("units", ""))) for e in entries
    ]
    return [
        f"<h2>{esc(LINKED_TITLE)}</h2>",
        f"<p>{esc(LINKED_WORDS)}</p>",
        _table(LINKED_COLUMNS, body, text_columns={0, 1}),
        _order(ORDER_LINKED),
    ]


def _repeated_table(summary: Mapping[str, Any]) -> list[str]:
    repeated = summary.get("repeated_elicitation") or []
    if not repeated:
        return []
    k_max = max(int(r["passes"]) for r in repeated)
    body = []
    for r in sorted(repeated, key=arm_model_rank):  # a summary.json written before was not
        cells = [_iv(b) for b in r.get("by_k", [])]
        body.append(
            (
                r["arm"],
                r["model"],
                _num(r.get("single_pass_mean")),
                *cells,
                *[""] * (k_max - len(cells)),
            )
        )
    header = ("arm", "model", "single passes", *(f"k = {k}" for k in range(1, k_max + 1)))
    return [
        "<h2>Repeated elicitation</h2>",
        "<p>Mean profit after averaging each event's answers over the first k passes, beside "
        "the mean profit of single passes (never below the average of all passes when every "
        "pass answered the same questions, the profit being convex; an average of fewer "
        "passes, or of passes that left different questions unanswered, may land on either "
        "side of it).</p>",
        _table(header, body, text_columns={0, 1}),
        _order(ORDER_REPEATED),
    ]


def _families_table(summary: Mapping[str, Any]) -> list[str]:
    families = summary.get("families") or []
    if not families:
        return []
    floor = _floor(summary)
    body = [
        (
            f["arm"],
            f["model"],
            str(f.get("families", "")),
            _iv(f.get("arbitrage_free"), 2) if f.get("scored") else _status(f, floor),
            _kind_cell(f.get("future")),
            _kind_cell(f.get("controls")),
            _coverage(f.get("coverage"), floor),
        )
        for f in sorted(families, key=family_rank)  # a summary.json written before was not
    ]
    rule = families[0].get("rule")
    cents = summary.get("arbitrage_free_cents", ARBITRAGE_FREE_CENTS)
    threshold = dollars(cents) if _finite(cents) else str(cents)
    return [
        "<h2>Question families</h2>",
        "<p>Share of families on which the L1 bookie locks in at most "
        f"{esc(threshold)}, the family benchmark's leaderboard score (on the isolated "
        "arm), highest first within each arm, then apart on the families about the future and "
        "on the controls, whose exact answers are known (a model that cannot compute "
        "probabilities fails the controls; one incoherent only when genuinely uncertain, the "
        "future)" + (f"; {esc(rule)}" if rule else "") + ".</p>",
        _table(
            ("arm", "model", "families", "arbitrage-free [95% CI]", "future families",
             "controls", "coverage"),
            body,
            text_columns={0, 1},
        ),
        _order(ORDER_FAMILIES),
    ]


def _provenance(prov: Any) -> list[str]:
    """Where the numbers come from (`runs.report.provenance`): spec, versions, when the
    answers were asked for, and the inputs' digests (folded: a campaign may have dozens)."""
    if not isinstance(prov, dict):
        return []  # a summary.json written before reports kept it
    inputs = prov.get("inputs") or {}
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td><code>{esc(sha)}</code></td></tr>"
        for name, sha in inputs.items()
    )
    folded = (
        f"<details><summary>{len(inputs)} input file{'s' if len(inputs) != 1 else ''} "
        f"(SHA-256)</summary><div class=\"scroll\"><table><tbody>{rows}</tbody></table></div>"
        "</details>"
        if inputs
        else ""
    )
    said = " ".join(provenance_sentences(prov))
    return ["<h2>Provenance</h2>", f'<p class="meta">{esc(said)}</p>', folded]


def _footer(files: Sequence[str]) -> list[str]:
    if not files:
        return []
    links = " · ".join(f'<a href="{esc(name)}">{esc(name)}</a>' for name in files)
    return [
        "<h2>Files</h2>",
        f'<p class="meta">Beside this page in <code>report/</code>: {links}.</p>',
    ]


def _table(
    header: Sequence[str],
    body: Iterable[Sequence[str]],
    *,
    text_columns: AbstractSet[int] = frozenset(),
    row_classes: Sequence[str] | None = None,
) -> str:
    keys = _key_columns(text_columns)
    head = "".join(
        f'<th class="text{keys.get(j, "")}" scope="col">{esc(h)}</th>' if j in text_columns
        else f'<th scope="col">{esc(h)}</th>'
        for j, h in enumerate(header)
    )
    lines = []
    for i, row in enumerate(body):
        cls = row_classes[i] if row_classes else ""
        cells = "".join(
            f'<td class="{_text_class(c)}{keys.get(j, "")}">{esc(c)}</td>' if j in text_columns
            else f"<td>{esc(c)}</td>"
            for j, c in enumerate(row)
        )  # fmt: skip
        lines.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table></div>"
    )


def _order(line: str) -> str:
    """The line under a table saying how its rows are sorted (`runs.report.wording.ORDER_*`)."""
    return f'<p class="meta">{esc(line)}</p>'


def _key_columns(text_columns: AbstractSet[int]) -> dict[int, str]:
    """The class a table's label columns add (` key`): its first words column, and the one
    right after it when that is words too (`arm`, `model`), which stay on a phone while the
    numbers scroll (the page's style: side by side, so only adjacent columns)."""
    if not text_columns:
        return {}
    first = min(text_columns)
    return {j: " key" for j in (first, first + 1) if j in text_columns}


def _text_class(text: str) -> str:
    """A text cell's class: one longer than `WRAPPED_CHARS` wraps (`td.long`), so a name of
    100 characters neither pushes every number out of its table's box nor widens the page;
    shorter ones stay on one line, as every table's cells do."""
    return "text long" if len(text) > WRAPPED_CHARS else "text"


#: Text cells longer than this wrap (about the width `td.long` keeps at least).
WRAPPED_CHARS = 28


# ---------------------------------------------------------------------------------------------
# Numbers


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _num(x: Any, digits: int = 5) -> str:
    return fixed(x, digits) if _finite(x) else "—"


def _mean(iv: Any) -> float:
    return float(iv["mean"]) if isinstance(iv, Mapping) and _finite(iv.get("mean")) else math.inf


#: Inside an interval's brackets, after the comma: a narrow cell breaks before them, never
#: inside.
NO_BREAK = "\u00a0"


def _iv(iv: Any, digits: int = 5, *, signed: bool = False) -> str:
    """A summary interval's cell as every view writes one (`interval_text`; `signed`, a
    paired difference's): "—" for an end one date leaves out, "0.01500 [—, —]", where the
    page gave a profit or Brier of one date as its mean alone and leaderboard.txt and
    report.md "[—, —]"."""
    if not isinstance(iv, Mapping) or not _finite(iv.get("mean")):
        return ""
    ends = {key: iv.get(key) if _finite(iv.get(key)) else None for key in ("mean", "lo", "hi")}
    return interval_text(ends, digits, signed=signed, space=NO_BREAK)


def _pct(x: Any) -> str:
    return f"{x:.0%}" if _finite(x) else ""


def _kind_cell(kind: Any) -> str:
    """One kind of family's rate (future, or controls) and over how many: "0.61 [0.43, 0.79]
    of 28"; blank where the split is unknown (an older summary, unreadable family files)."""
    if not isinstance(kind, Mapping):
        return ""
    return of_families(_iv(kind.get("arbitrage_free"), 2), int(kind.get("families") or 0))


def _floor(summary: Mapping[str, Any]) -> float | None:
    floor: Any = summary.get("coverage_floor")
    return float(floor) if _finite(floor) else None


def _floor_text(summary: Mapping[str, Any]) -> str:
    floor = _floor(summary)
    return "" if floor is None else floor_text(floor)


def _coverage(x: Any, floor: float | None) -> str:
    """A coverage with the decimals the floor is shown with (`coverage_text`)."""
    return coverage_text(x, floor) if _finite(x) else ""


def _whole(x: Any) -> int | None:
    return int(x) if _finite(x) else None


def _status(row: Mapping[str, Any], floor: float | None) -> str:
    status = row.get("status")
    failed = row.get("below_floor_in")
    if status == "below_coverage_floor" and isinstance(failed, Mapping):
        # Another family arm of the model under the floor (`_family_arms_scored_together`).
        arm, coverage = failed.get("arm"), _coverage(failed.get("coverage"), floor)
        return f"not scored: {arm} coverage {coverage} at or under the floor"
    if status == "below_coverage_floor":
        # `under_floor`: a family arm's rows carry no norm; their arm says the rule (a model
        # exactly at the floor was said "under" it in the families table).
        under = "at or under" if is_family(str(row.get("arm", ""))) else "under"
        return f"not scored: coverage {_coverage(row.get('coverage'), floor)} {under} the floor"
    if status == "no_answers":
        return "not scored: no answers"
    return "not scored"
