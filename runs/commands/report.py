"""`dutchbook report DIR`: rebuild a run's report from its folder, without a single call.

Reads the frozen spec and `scores.parquet`, writes `report/summary.json`, the leaderboard,
the figures and `report/index.html` (the self-contained page), and prints where the page is.
Run it after `dutchbook reparse` and `dutchbook score` (scores of answers that changed
since are refused: `runs.scored_from`), or to redraw a report with this version's figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from runs.commands._errors import (
    disk_full_says,
    fail,
    interrupt_says_rerun,
    path_given,
    user_errors,
)
from runs.commands._run_folder import require_run_folder
from runs.folder_lock import folder_held
from runs.output import stdout_console
from runs.plan_checksums import lost_plan
from runs.scored_from import rerun_command, stale_repairs, stale_scores


def build_report(run_dir: Path, console: Console) -> Path:
    """Summary, tables, figures and page of a scored run folder; returns the page's path."""
    from runs.audit import run_audit
    from runs.report import write_report_folder
    from runs.scoring_step import read_scored
    from runs.spec import load_spec

    # The report reads no data: a `[data]` path written relative to the spec's own folder,
    # which the frozen copy in the run folder cannot resolve, failed every `report`.
    spec = load_spec(run_dir / "spec.toml", data_must_exist=False)
    has_averaged = (run_dir / "averaged.parquet").exists()
    audit = run_audit(run_dir)
    # The statistics read the scores' slim columns only (the figures scan the file for the
    # rest): the per-event lists of a paper-scale run are most of its size in memory.
    scored = read_scored(run_dir)
    _, page = write_report_folder(
        run_dir,
        scored.scores,
        floor=spec.coverage_floor,
        seed=spec.seed,
        console=console,
        averaged=scored.averaged if has_averaged else None,
        audit=audit,
    )
    return page


def _refuse_lost_answers(run_dir: Path) -> None:
    """Exit in one line when `responses/` lost accepted answers (`runs.lost_answers`), where
    the report said its answers changed and sent its user to `score`, which would score the
    answers left (`dutchbook reparse` rebuilds them without a call); or holds answers twice,
    which `score` refuses too."""
    from runs.lost_answers import answers_refusal
    from runs.spec import load_spec

    spec = load_spec(run_dir / "spec.toml", data_must_exist=False)
    refusal = answers_refusal(
        run_dir,
        spec.parser,
        would="a report now would not match its answers",
        then=f"`{rerun_command(run_dir)}`, then this command",
    )
    if refusal is not None:
        fail(refusal)


def report(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder", parser=path_given)],
) -> None:
    """Write a run's report (summary, leaderboard, figures, report/index.html) from its folder."""
    from engine.reparse import unfinished_line
    from runs.figures_env import figures_wanted
    from runs.planned_families import changed_family_files
    from runs.spec import SpecError

    try:
        figures_wanted()  # a value it does not understand: said before any file is written
    except ValueError as exc:
        fail(str(exc))
    require_run_folder(run_dir)
    if not (frozen := run_dir / "spec.toml").is_file():
        # Its other files say it is a run folder (`require_run_folder`): "not a run folder"
        # sent a tester whose spec.toml alone was gone looking for another folder.
        what, first = ("is not a file", "move it aside, then ") if frozen.exists() else (
            "is missing", ""
        )
        fail(
            f"{frozen} {what}: it is the spec the run was started with; {first}`dutchbook run "
            f"SPEC --out {run_dir}` with that spec puts it back"
        )
    console = stdout_console()
    with (
        interrupt_says_rerun(),
        user_errors(SpecError, OSError, folder=run_dir),
        disk_full_says(run_dir),
        folder_held(run_dir, "report"),
    ):
        # Under the lock: a run still going says so (it writes the report when it ends),
        # where "no scores yet; run the campaign" sent its user to a second `run` that the
        # lock refuses; and no reparse or score can change the answers or scores after this.
        if not (run_dir / "scores.parquet").is_file():
            # A resume may be refused (after a strict reparse of a lenient run): `score`
            # scores the answers held without a call, whatever stopped the run. A journal
            # line `score` would refuse is said first (`JournalError`), not `score` advised.
            _read_journal_whole(run_dir)
            fail(
                f"{run_dir} has no scores.parquet yet: `{rerun_command(run_dir)}` scores the "
                "answers it holds, without a call (or run the campaign, or resume it, first)"
            )
        _refuse_lost_answers(run_dir)
        if (lost := lost_plan(run_dir)) is not None:
            fail(lost)  # its coverage and audit would count only the requests found asked
        unfinished = unfinished_line(run_dir)
        stale = stale_scores(run_dir)
        if stale is not None:
            # A reparse that did not finish is run again first: scoring now would score
            # answers whose parser no record names.
            then = f"`{rerun_command(run_dir)}`"
            fail(
                f"{run_dir}: {stale}; {unfinished}, then {then}, then this command"
                if unfinished
                else f"{run_dir}: {stale}; run {then} first, then this command"
            )
        page = build_report(run_dir, console)
    if changed := changed_family_files(run_dir):
        console.print(
            f"note: {run_dir} was planned from other family files: {'; '.join(changed)}; the "
            "report reads each family's shape and control flag as its file is now",
            style="yellow", highlight=False, markup=False, soft_wrap=True,
        )  # fmt: skip
    if unfinished:  # the page says "an unknown parser"; this says what to do
        console.print(f"warning: {unfinished}", style="yellow", highlight=False, markup=False,
                      soft_wrap=True)
    console.print(f"report: {page}", highlight=False, soft_wrap=True)
    if repairs := stale_repairs(run_dir):  # not in the report, but published beside it
        console.print(f"warning: {repairs}", style="yellow", highlight=False, markup=False,
                      soft_wrap=True)


def _read_journal_whole(run_dir: Path) -> None:
    """Read every line of the run's journal segments: raises `JournalError` for a bad line a
    crash cannot have left, as `score` would."""
    from engine.journal import read_journal
    from engine.scan import JOURNAL

    for _ in read_journal(run_dir / JOURNAL):
        pass


def register(app: typer.Typer) -> None:
    app.command("report")(report)
