"""A campaign's retry and failure audit, as `audit`, `run` and the report show it.

The counting is `engine.audit`'s (one definition of a retry, read from the ledger alone);
this module adds what only a campaign knows, the models' prices and providers from the
spec frozen in the run folder, and renders the result: terminal tables, a Markdown section
for `report/report.md`, and `report/audit.json` / `report/audit.csv`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runs import markdown as md  # `markdown` here is this module's section
from runs.report_folder import REPORT_DIR

if TYPE_CHECKING:  # polars and rich are imported when an audit is made, not at start-up
    import polars as pl
    from rich.console import Console

    from engine.audit import Audit, AuditRow
    from engine.spend import Prices

SPEC = "spec.toml"
AUDIT_JSON = Path(REPORT_DIR) / "audit.json"
AUDIT_CSV = Path(REPORT_DIR) / "audit.csv"


def spec_prices(run_dir: Path) -> tuple[dict[str, Prices], dict[str, str]]:
    """Prices and providers of the models of the spec frozen in `run_dir` (empty if none).

    Read with `tomllib` alone, not validated as a whole: data paths in the spec may not
    resolve from here, and an audit needs only the models' names, providers and prices.
    """
    return _prices_of(_frozen_spec(run_dir))


def _prices_of(raw: dict[str, Any] | None) -> tuple[dict[str, Prices], dict[str, str]]:
    from engine.spend import Prices

    prices: dict[str, Prices] = {}
    providers: dict[str, str] = {}
    for name, entry in _models_of(raw):
        if isinstance(entry.get("provider"), str):
            providers[name] = entry["provider"]
        price_in, price_out = _number(entry.get("price_in")), _number(entry.get("price_out"))
        if price_in is not None or price_out is not None:
            prices[name] = Prices(price_in or 0.0, price_out or 0.0)
    return prices, providers


def spec_batch_prices(run_dir: Path) -> dict[str, Prices]:
    """Batch prices (`batch_price_in` and `batch_price_out`, both) of the frozen spec's models."""
    return _batch_prices_of(_frozen_spec(run_dir))


def _batch_prices_of(raw: dict[str, Any] | None) -> dict[str, Prices]:
    from engine.spend import Prices

    prices: dict[str, Prices] = {}
    for name, entry in _models_of(raw):
        price_in = _number(entry.get("batch_price_in"))
        price_out = _number(entry.get("batch_price_out"))
        if price_in is not None and price_out is not None:
            prices[name] = Prices(price_in, price_out)
    return prices


def spec_parser(run_dir: Path) -> str | None:
    """The parser the frozen spec reads replies with (`strict` when it names none, as
    `runs.spec` defaults); None when the spec cannot be read or names no parser it knows."""
    return _parser_of(_frozen_spec(run_dir))


def parser_and_budget(run_dir: Path) -> tuple[str | None, int | None]:
    """`spec_parser`'s parser and the answer-failure budget the frozen spec holds each
    request to (`_answer_budget_of`), from one read of it: for `status`, which counts the
    requests given up with it spent as the audit does."""
    raw = _frozen_spec(run_dir)
    return _parser_of(raw), _answer_budget_of(raw)


def _parser_of(raw: dict[str, Any] | None) -> str | None:
    parser = raw.get("parser", "strict") if raw is not None else None
    return parser if parser in ("strict", "lenient") else None


def _answer_budget_of(raw: dict[str, Any] | None) -> int | None:
    """The answer-failure budget a frozen spec's tables give each request
    (`max_answer_failures`, their defaults where it names none), which the next run holds
    every request to; None when there is no spec, either value is not a whole number of at
    least 1, or the budget exceeds `max_attempts` (a spec `runs.spec` refuses)."""
    from runs.spec import SpecError, retry_limits

    if raw is None:
        return None
    # A spec `runs.spec` refuses (and `report` with it) gives no budget, rather than one it
    # does not state.
    try:
        return retry_limits(raw, Path(SPEC))[1]
    except SpecError:
        return None


def _frozen_spec(run_dir: Path) -> dict[str, Any] | None:
    """The frozen spec's tables, read with `tomllib` alone; None if unreadable."""
    try:
        return tomllib.loads((run_dir / SPEC).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _models_of(raw: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, table) of each named `[[models]]` table of a frozen spec; none if unreadable."""
    models = (raw or {}).get("models")
    return [
        (entry["name"], entry)
        for entry in (models if isinstance(models, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    ]


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def run_audit(run_dir: Path | str) -> Audit:
    """The audit of a run folder, usage priced with the frozen spec's prices (lines a batch
    job carried at its batch prices)."""
    from engine.audit import audit

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    raw = _frozen_spec(run_dir)  # read once for the four things the audit takes from it
    prices, providers = _prices_of(raw)
    return _lanes_of_latest_run(run_dir, audit(
        run_dir, prices=prices, providers=providers, batch_prices=_batch_prices_of(raw),
        spec_parser=_parser_of(raw), answer_budget=_answer_budget_of(raw),
        output_caps=_output_caps_of(raw),
    ))  # fmt: skip


def _lanes_of_latest_run(run_dir: Path, report: Audit) -> Audit:
    """`report`, its lanes that ended early left out where `logs/lanes.json` is of an earlier
    run than the folder's latest, which sent attempts and never wrote it (a resume killed
    before its lanes' first write, or whose `logs/` refused it): the file is then said to be
    an earlier run's (`Audit.lanes_of_earlier_run`), not read as how that run's lanes ended."""
    import dataclasses

    from engine.lanefile import read_lane_states
    from runs.run_history import lanes_of_earlier_run

    if not report.lane_ends:  # nothing read from the file that could be another run's
        return report
    written = (read_lane_states(run_dir) or {}).get("updated_at")
    earlier = lanes_of_earlier_run(run_dir, written)
    if earlier is None:
        return report
    earlier_run = {**earlier, "lanes_ended_early": report.lane_ends}
    return dataclasses.replace(report, lane_ends=[], lanes_of_earlier_run=earlier_run)


def _output_caps_of(raw: dict[str, Any] | None) -> dict[str, int | None]:
    """Each frozen spec model's `max_tokens` (None where it names none, or not a whole
    number): what a batch line billed with no readable result is priced at."""
    return {
        name: cap if isinstance(cap := entry.get("max_tokens"), int)
        and not isinstance(cap, bool) else None
        for name, entry in _models_of(raw)
    }


# --------------------------------------------------------------------------- rendering


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def cost_text(value: float | None) -> str:
    """A cost as the audit shows it (and the report page's audit table, without the `$`):
    `engine.spend.dollars`, or "-" where nothing is priced."""
    from engine.spend import dollars

    return "-" if value is None else dollars(value)


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


#: A row's requests neither accepted nor given up (`engine.audit.Audit.table()`: accepted +
#: given up + these = requests, but for first attempts still in flight), each a column after
#: "given up" where some row has any: after a strict reparse a row read "702 requests, 0
#: accepted, given up 0", its 702 rejected answers said only in a note under the table.
BALANCE_COLUMNS = (
    ("not_attempted", "not attempted"),
    ("answers_missing", "answers missing"),
    ("answers_rejected_on_reparse", "rejected on reparse"),
)


def summary_rows(report: Audit, scope: str = "model") -> tuple[list[str], list[list[str]]]:
    """Requests and attempts per model (or per `provider`), then `all`: header and cells;
    the `BALANCE_COLUMNS` that some row has a count in come last."""
    named = _named(report, scope)
    balance = [(k, h) for k, h in BALANCE_COLUMNS if any(getattr(r, k) for _, r in named)]
    header = [
        scope, "requests", "accepted", "attempts", "retry attempts", "requests retried",
        "given up", *(h for _, h in balance),
    ]
    cells = [
        [
            name, f"{r.requests:,}", f"{r.accepted:,}", f"{r.attempts:,}",
            f"{r.retry_attempts:,}", f"{r.requests_retried:,}", f"{r.given_up_total:,}",
            *(f"{getattr(r, k):,}" for k, _ in balance),
        ]
        for name, r in named
    ]
    return header, cells


def usage_rows(report: Audit, scope: str = "model") -> tuple[list[str], list[list[str]]]:
    """Latency of accepted attempts, tokens and cost per model (or provider), then `all`."""
    header = [scope, "p50 ms", "p95 ms", "p99 ms", "tokens in", "tokens out", "cost"]
    cells = [
        [
            name, _ms(r.latency_ms["p50"]), _ms(r.latency_ms["p95"]), _ms(r.latency_ms["p99"]),
            f"{r.tokens_in:,}", f"{r.tokens_out:,}", cost_text(r.cost_usd),
        ]
        for name, r in _named(report, scope)
    ]
    return header, cells


def _named(report: Audit, scope: str) -> list[tuple[str, AuditRow]]:
    rows = report.by_provider if scope == "provider" else report.by_model
    return [*rows.items(), ("all", report.totals)]


#: The header of the cause tables (`cause_rows`, `paper_cause_rows`) after their first column.
_CAUSE_COLUMNS = ["retry attempts", "share", "given up", "by model"]


def cause_rows(report: Audit) -> tuple[list[str], list[list[str]]]:
    """One row per cause that occurred (largest first): retry attempts, their share, the
    requests given up with it as their last cause, and the models it struck."""
    from engine.retry import CAUSE_LABELS

    totals = report.totals
    causes = sorted(
        (c for c in totals.retries_by_cause if totals.retries_by_cause[c] or totals.given_up[c]),
        key=lambda c: -totals.retries_by_cause[c],
    )
    by_model = {m: r.retries_by_cause for m, r in report.by_model.items()}
    cells = [
        _cause_cells(report, CAUSE_LABELS.get(c, c), totals.retries_by_cause[c],
                     totals.given_up.get(c, 0), {m: n.get(c, 0) for m, n in by_model.items()})
        for c in causes
    ]  # fmt: skip
    return ["cause", *_CAUSE_COLUMNS], cells


def paper_cause_rows(report: Audit) -> tuple[list[str], list[list[str]]]:
    """The same retry attempts as Appendix C groups them (`engine.audit.paper_causes`): each
    of its six causes, 0 where none happened (left out, a cause the run had none of read as
    one it does not count), then any other cause that happened."""
    from engine.audit import paper_causes

    totals = report.totals
    given_up = paper_causes(totals.given_up)
    by_model = {m: paper_causes(r.retries_by_cause) for m, r in report.by_model.items()}
    cells = [
        _cause_cells(report, label, n, given_up.get(label, 0),
                     {m: counts.get(label, 0) for m, counts in by_model.items()})
        for label, n in paper_causes(totals.retries_by_cause).items()
    ]  # fmt: skip
    return ["cause (Appendix C)", *_CAUSE_COLUMNS], cells


def _cause_cells(
    report: Audit, label: str, n: int, given_up: int, by_model: dict[str, int]
) -> list[str]:
    """A cause table's row: retry attempts, share of all, requests given up, and the models
    it struck, most first."""
    total = report.totals.retry_attempts
    struck = sorted(by_model.items(), key=lambda item: -item[1])
    return [
        label,
        f"{n:,}",
        f"{n / total:.0%}" if total else "-",
        f"{given_up:,}",
        ", ".join(f"{m} {k:,}" for m, k in struck if k),
    ]


def _subcauses_line(report: Audit) -> str | None:
    found = _nonzero(report.totals.invalid_response_subcauses)
    if not found:
        return None
    return "invalid responses by subcause: " + ", ".join(f"{k} {v:,}" for k, v in found.items())


def render(
    report: Audit, console: Console, *, title: str | None = None, note: str | None = None
) -> None:
    """The human view of `dutchbook audit`: tables, then the paper's sentence; `note`, a
    line under the title (a run still going)."""
    from rich.table import Table
    from rich.text import Text

    from engine.console_tables import print_whole

    def show(
        name: str, header: list[str], cells: list[list[str]], free_text: bool = False
    ) -> None:
        """Numbers right-aligned under one-word-a-line headers; a last free-text column
        (`free_text`) left-aligned; nothing cut (`engine.console_tables`)."""
        out = Table(title=name, title_justify="left")
        for i, column in enumerate(header):
            text = i == 0 or (free_text and i == len(header) - 1)
            out.add_column(column, justify="left" if text else "right")
        for row in cells:
            out.add_row(*(Text(cell) for cell in row))  # model names are never markup
        print_whole(console, out)

    if title:
        console.print(Text(title, style="bold"))
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    show("requests and attempts", *summary_rows(report))
    show("latency of accepted attempts, usage", *usage_rows(report))
    if len(report.by_provider) > 1:
        show("by provider", *summary_rows(report, "provider"))
    header, cells = cause_rows(report)
    if cells:
        show("retry attempts by cause", header, cells, free_text=True)
        show("retry attempts as Appendix C groups them", *paper_cause_rows(report),
             free_text=True)  # fmt: skip
    line = _subcauses_line(report)
    if line:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in report.notes():
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    console.print(report.sentence, markup=False, highlight=False, soft_wrap=True)


def markdown(report: Audit) -> str:
    """The audit section of `report/report.md`: the sentence, then its tables."""
    lines = ["## Retries and failures", "", md.text(report.sentence, starts_block=True), ""]
    lines += md.table(*summary_rows(report))
    lines += ["", *md.table(*usage_rows(report))]
    if len(report.by_provider) > 1:
        lines += ["", *md.table(*summary_rows(report, "provider"))]
    header, cells = cause_rows(report)
    if cells:
        lines += ["", *md.table(header, cells), "", *md.table(*paper_cause_rows(report))]
    line = _subcauses_line(report)
    if line:
        lines += ["", md.text(line[0].upper() + line[1:] + ".", starts_block=True)]
    notes = report.notes()
    if notes:
        lines += ["", *(f"- {md.text(note, starts_block=True)}" for note in notes)]
    lines += [
        "",
        "A retry attempt is every attempt that was not the accepted one, nor a reply the run "
        "accepted that a later strict reparse rejected, attributed to its outcome; latency is "
        "that of accepted attempts. The paper's \"provider/response errors\" are the provider "
        "errors, invalid responses, refusals and truncations here.",
    ]
    return "\n".join(lines) + "\n"


def write_files(run_dir: Path | str, report: Audit, out: Path | None = None) -> list[Path]:
    """`report/audit.json` (`Audit.to_dict()`: the `dutchbook audit --json` object without
    the `live` and `warnings` the command adds, a moment's state and its stderr lines, which
    a file kept past that moment would say falsely) and `report/audit.csv`, or those files in
    `out` (a report's scratch folder, `runs.report_folder`)."""
    import orjson

    from engine.durable import write_bytes_atomic

    out = Path(run_dir) / AUDIT_JSON.parent if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for target, data in (
        (out / AUDIT_JSON.name, orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2)),
        (out / AUDIT_CSV.name, csv_table(run_dir, report).write_csv().encode()),
    ):
        write_bytes_atomic(target, data)  # a reader never sees half a file
        written.append(target)
    return written


def csv_table(run_dir: Path | str, report: Audit) -> pl.DataFrame:
    """`report/audit.csv`: `Audit.table()` and, last (additive), `simulated`: "true" or
    "false" on a model's row, by the one rule the report's other CSVs and summary.json's
    `models` use (`runs.report.models.simulated_models`: the spec's provider, a rehearsal's
    folder, the replies' named model), empty on a provider's row and on `all`'s. The CSVs
    with a `model` column ended in it, the audit's per-model rows with no label."""
    import polars as pl

    from runs.rehearsal import rehearsed
    from runs.report.models import frozen_spec, simulated_models

    run_dir = Path(run_dir)
    named = set(simulated_models(frozen_spec(run_dir), rehearsed(run_dir), report.models_reported))
    table = report.table()
    cells = [
        (("true" if name in named else "false") if scope == "model" else None)
        for scope, name in table.select("scope", "name").iter_rows()
    ]
    return table.with_columns(pl.Series("simulated", cells, dtype=pl.String))
