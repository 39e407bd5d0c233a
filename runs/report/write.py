"""`write_report`: compute the report's data once, then write every view of it.

Files in `report/`: `summary.json` (`runs.report.summary`), `leaderboard.txt` and
`report.md` and one CSV per table (`runs.report.tables`), and the figures
(`runs.figures`). The terminal gets the compact leaderboard and a few lines.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl
from rich.console import Console

from engine.console_tables import print_whole
from engine.durable import write_bytes_atomic
from runs.audit import markdown as audit_markdown
from runs.audit import run_audit
from runs.audit import write_files as write_audit_files
from runs.figures import NOT_PATHS, can_draw, write_figures
from runs.figures_env import figures_wanted
from runs.output import mark_files_written, stdout_console
from runs.rehearsal import REHEARSAL_NOTE, rehearsed
from runs.report.data import ReportData, build_report_data
from runs.report.models import frozen_spec, models_markdown
from runs.report.provenance import answered_parser_note, provenance, provenance_markdown
from runs.report.repeated import IncidenceFor, averaged_from_forecasts, repeated_section
from runs.report.summary import build_summary
from runs.report.tables import (
    csv_tables,
    details_text,
    headline_lines,
    report_markdown,
    terminal_leaderboard,
)
from runs.report_figures import FIGURES, SHOW_REPEATED
from runs.report_folder import report_dir, staged_report
from scoring import stats

if TYPE_CHECKING:
    from engine.audit import Audit
    from runs.figure_workers import Drawing, FigureWorkers

#: The figures figure workers may draw before the repeated-elicitation section is known.
EARLY_FIGURES = tuple(n for n, _, _ in FIGURES if n not in SHOW_REPEATED)


def write_report(
    run_dir: Path,
    scores: pl.DataFrame,
    *,
    floor: float,
    seed: int,
    reps: int = stats.DEFAULT_REPS,
    console: Console | None = None,
    forecasts: pl.DataFrame | None = None,
    incidence_for: IncidenceFor | None = None,
    figures: bool = True,
    averaged: pl.DataFrame | None = None,
    audit: Audit | None = None,
    figure_workers: FigureWorkers | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """Write `report/` (see the module docstring) and print a summary; return summary.json.
    `out`, the folder written into, is `report/` unless given: a scratch folder that takes
    its place once the report is whole (`runs.report_folder.staged_report`).

    The repeated-elicitation section comes from `averaged` (pass-averaged profits, as
    `runs.scoring_step.score_run` returns them), or else from `incidence_for` (see
    `runs.report.repeated`) with `forecasts` (default: the run folder's `forecasts.parquet`);
    with neither it is null. `audit` (the folder's `runs.audit.run_audit`, made here when not
    given) is the retries section. `figure_workers` draw the figures in their own processes.
    """
    console = console or stdout_console()
    if averaged is None and incidence_for is not None:
        if forecasts is None and (run_dir / "forecasts.parquet").exists():
            forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
        if forecasts is not None:
            averaged = averaged_from_forecasts(scores, forecasts, incidence_for)
    repeated = None
    if averaged is not None:
        pass_averaged = averaged

        def repeated(rows: Any) -> Any:
            return repeated_section(pass_averaged, rows, seed, reps)

    out = out or report_dir(run_dir)
    workers = figure_workers if figures and can_draw() and figures_wanted() else None
    early = None
    # Read first: the models its replies named tell those the simulator answered (in a folder
    # made for the report, as `write_views` makes it, when the scores came from elsewhere).
    out.mkdir(parents=True, exist_ok=True)
    audit = audit if audit is not None else run_audit(run_dir)
    reported = audit.models_reported
    if workers is not None and repeated is not None:
        # The figures that do not show the repeated section are drawn while it is computed.
        data = build_report_data(
            run_dir, scores, floor=floor, seed=seed, reps=reps, reported=reported
        )
        early = workers.draw(build_summary(data), out, EARLY_FIGURES)
        data = dataclasses.replace(data, repeated=repeated(data.rows))
    else:
        data = build_report_data(
            run_dir, scores, floor=floor, seed=seed, reps=reps, repeated=repeated,
            reported=reported,
        )  # fmt: skip
    return write_views(
        run_dir, data, console=console, figures=figures, audit=audit, workers=workers,
        early=early, out=out,
    )  # fmt: skip


def write_report_folder(
    run_dir: Path,
    scores: pl.DataFrame,
    *,
    floor: float,
    seed: int,
    console: Console,
    averaged: pl.DataFrame | None,
    audit: Audit,
    figure_workers: FigureWorkers | None = None,
) -> tuple[dict[str, Any], Path]:
    """`write_report` and the page (`runs.report_page.write_page`) written together into a
    scratch folder that then replaces `report/` whole (`runs.report_folder.staged_report`);
    summary.json's dict and the page's path in `report/`. `run` and `report` write it so.

    What the report prints is shown once `report/` is in place: a folder of the user's where
    a file goes is found at the swap, and the leaderboard and "report/leaderboard.txt, ..."
    were printed before its one line said no report was written."""
    from runs.report_page import PAGE, write_page

    with console.capture() as shown, staged_report(run_dir) as out:
        summary = write_report(
            run_dir, scores, floor=floor, seed=seed, console=console, averaged=averaged,
            audit=audit, figure_workers=figure_workers, out=out,
        )  # fmt: skip
        write_page(run_dir, audit=audit, report_dir=out)
    # `report/` is in place: an output closing now cuts only what `report` prints
    # (`runs.cli.output_closed`; `run` still has its exit status to give).
    mark_files_written()
    console.file.write(shown.get())
    console.file.flush()
    return summary, report_dir(run_dir) / PAGE


def write_views(
    run_dir: Path,
    data: ReportData,
    *,
    console: Console,
    figures: bool = True,
    audit: Audit | None = None,
    workers: FigureWorkers | None = None,
    early: Drawing | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """Every file of `report/` (or of `out`, to become it) from the report's data, and the
    terminal summary, which names the files where they will be: in `report/`.

    With `workers` (`runs.figure_workers`) the figures are drawn in their processes while
    this one writes the tables; `early`, those they are drawing already."""
    final = report_dir(run_dir)
    out = out or final
    out.mkdir(parents=True, exist_ok=True)
    audit = audit if audit is not None else run_audit(run_dir)
    write_audit_files(run_dir, audit, out)  # audit.json, audit.csv
    summary = build_summary(data)
    summary["audit_sentence"] = audit.sentence
    summary["provenance"] = provenance(run_dir)
    drawing = None
    if figures and workers is not None:
        done = early.numbers if early is not None else frozenset()
        drawing = workers.draw(summary, out, [n for n, _, _ in FIGURES if n not in done])
        drawing = drawing if early is None else early.joined(drawing)
    # Each file all or nothing (a full disk or a kill left summary.json cut short, which a
    # script reading it met before the next report replaced it); the rename's atomicity is
    # what matters here, not fsync: these files are rebuilt from the folder at will.
    rehearsal = rehearsed(run_dir)
    said = f"{REHEARSAL_NOTE}\n\n" if rehearsal else ""  # the file is read without the page
    notes = [n for n in [answered_parser_note(summary)] if n]  # under the leaderboard
    _write(out / "leaderboard.txt", said + details_text(data, notes))
    models_section = models_markdown(frozen_spec(run_dir), rehearsal, audit.models_reported)
    extra = [
        audit_markdown(audit),
        *([models_section] if models_section else []),
        provenance_markdown(summary["provenance"]),
    ]
    _write(out / "report.md", report_markdown(data, extra, notes))
    for name, text in csv_tables(data).items():
        _write(out / name, text)
    if figures:
        drawn = write_figures(summary, out, drawing=drawing)
        summary["figures"] = {
            k: (str(final.relative_to(run_dir) / Path(v).relative_to(out))
                if k not in NOT_PATHS and v else v)
            for k, v in drawn.items()
        }  # fmt: skip
    write_bytes_atomic(
        out / "summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2), sync=False
    )
    for table in terminal_leaderboard(
        data.rows, data.model_coverage, console.width, data.floor
    ):
        print_whole(console, table)
    for line in headline_lines(summary, final):
        console.print(line, highlight=False, markup=False)  # model names are not markup
    return summary


def _write(target: Path, text: str) -> None:
    write_bytes_atomic(target, text.encode("utf-8"), sync=False)
