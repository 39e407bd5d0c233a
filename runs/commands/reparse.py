"""`dutchbook reparse DIR --parser lenient|strict`: rebuild the answers from kept replies."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import orjson
import typer

from engine.console_lines import plural
from engine.journal import JournalError
from engine.ledger import LedgerBusy
from engine.reparse import reparse as run_reparse
from runs.commands._errors import (
    disk_full_says,
    fail,
    interrupt_says_rerun,
    path_given,
    user_errors,
)
from runs.commands._run_folder import require_run_folder
from runs.folder_lock import folder_held
from runs.output import mark_next_step, print_text, stdout_console, warn
from runs.scored_from import (
    REPAIRED_FROM,
    SCORED_FROM,
    follow_reparse,
    read_scored_from,
    rerun_command,
    stale_repairs,
    stale_scores,
)


class Parser(StrEnum):
    strict = "strict"
    lenient = "lenient"


def reparse(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder", parser=path_given)],
    parser: Annotated[
        Parser, typer.Option("--parser", help="strict (the paper's rule) or lenient")
    ] = Parser.strict,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Re-parse every kept reply with another parser, without a single API call.

    Replaces the run's responses; score the run again afterwards to update the scores.
    """
    require_run_folder(run_dir)  # before the lock and the ledger, which would be made in it
    with (
        interrupt_says_rerun(),
        # OSError: a part of the folder this process may not write in (`responses/`,
        # `journal/`, `logs/`) ended in a traceback; a full disk is said first, below.
        user_errors(OSError, LedgerBusy, JournalError, folder=run_dir),
        disk_full_says(run_dir),
        folder_held(run_dir, "reparse"),
    ):
        _refuse_unrebuildable(run_dir)
        fresh = (run_dir / SCORED_FROM).exists() and stale_scores(run_dir) is None
        scored = read_scored_from(run_dir)
        repaired_fresh = (run_dir / REPAIRED_FROM).is_file() and stale_repairs(run_dir) is None
        repaired = read_scored_from(run_dir, REPAIRED_FROM)
        summary = run_reparse(run_dir, parser.value)
        changed = (
            summary.newly_accepted + summary.newly_rejected + summary.values_changed
            + summary.unplanned_left_out
        )
        # The answers scored, in a new shard (unchanged, or a round trip back): scores hold.
        holds = follow_reparse(
            run_dir, scored, fresh, summary.answers_digest_before, summary.answers_digest_after
        )
        follow_reparse(  # the repairs' record likewise
            run_dir, repaired, repaired_fresh, summary.answers_digest_before,
            summary.answers_digest_after, name=REPAIRED_FROM,
        )  # fmt: skip
        repairs = stale_repairs(run_dir)
    behind = _scores_behind(run_dir, changed, holds)
    mark_next_step(behind)  # an output cut from here on says it (`runs.cli.output_closed`)
    if as_json:
        print_text(orjson.dumps(summary.to_dict(), option=orjson.OPT_INDENT_2).decode())
        if repairs:  # beside the object, as `score` says it
            warn(repairs)
        return
    console = stdout_console(highlight=False)
    console.print(
        f"re-parsed the replies of {plural(summary.requests_with_replies, 'request')} with the "
        f"[bold]{summary.parser}[/] parser: accepted {summary.accepted_before:,} → "
        f"{summary.accepted_after:,} (newly accepted {summary.newly_accepted:,}, "
        f"newly rejected {summary.newly_rejected:,}, values changed "
        f"{summary.values_changed:,}, unchanged {summary.unchanged:,})"
    )
    if summary.still_rejected_by_subcause:
        console.print(
            "still rejected: "
            + ", ".join(f"{k} {v:,}" for k, v in summary.still_rejected_by_subcause.items())
        )
    if changed and holds:
        console.print(
            "the answers are again those the scores were computed from: no new score is needed",
            markup=False,
            soft_wrap=True,
        )
    elif behind:
        console.print(behind, markup=False, soft_wrap=True)
    if repairs:
        console.print(f"warning: {repairs}", style="yellow", markup=False, soft_wrap=True)
    if summary.unplanned_left_out:
        console.print(
            f"{plural(summary.unplanned_left_out, 'answer')} of requests plan.parquet does not "
            "hold (another run's, or an id damaged on disk) left out of responses/",
            markup=False, soft_wrap=True,
        )
    if skipped := summary.skipped_without_keys:
        console.print(
            f"[yellow]{plural(skipped, 'request')} skipped: no plan.parquet "
            "row "
            "says which keys were asked[/]"
        )


def _scores_behind(run_dir: Path, changed: int, holds: bool) -> str | None:
    """What the folder needs where its scores do not read its answers after the reparse:
    score and report again (None where it has no scores, or they read these answers). A
    reparse that changed nothing leaves scores an earlier one put behind as they were
    (strict, score, lenient, lenient again): it said nothing, and its cut output "nothing to
    run again"; it asks `stale_scores`, as `status` does for "scores out of date"."""
    if holds or not (run_dir / "scores.parquet").exists():
        return None
    then = f"run `{rerun_command(run_dir)}`, then `dutchbook report {run_dir}`"
    if changed:
        return f"the scores still read the answers before this re-parse: {then}"
    if not _scores_stale(run_dir):
        return None
    return (
        "the scores already read other answers than the folder's before this re-parse, which "
        f"left its answers as they were: {then}"
    )


def _scores_stale(run_dir: Path) -> bool:
    """Whether `stale_scores` says the scores do not read the answers (a damaged answers
    file, which it raises for, is the run folder's checks' to say, not this advice's)."""
    import polars as pl

    try:
        return stale_scores(run_dir) is not None
    except (pl.exceptions.PolarsError, OSError):
        return False


def _refuse_unrebuildable(run_dir: Path) -> None:
    """Exit in one line (status 2) before anything is replaced where the reparse would drop
    answers it cannot read the replies of (`runs.lost_answers.reparse_refusal`)."""
    from runs.lost_answers import reparse_refusal

    if (refusal := reparse_refusal(run_dir)) is not None:
        fail(refusal)


def register(app: typer.Typer) -> None:
    app.command("reparse")(reparse)
