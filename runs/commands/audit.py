"""`dutchbook audit DIR`: retries and failures of a run, read from its folder alone.

Works on a finished, interrupted or running campaign (the ledger is read without its lock)
and never calls a provider. `--json` prints exactly one object (`engine.audit.Audit.to_dict`,
`live`: whether a run is writing the folder now, and `warnings`: what it said on stderr).

Of a run still going, the counts are a snapshot: a request "given up" there is one not
answered yet, which the run may still retry (a Retry-After being waited out, say). The
audit says so, where it read as final.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runs.commands._errors import path_given, user_errors
from runs.commands._run_folder import require_run_folder
from runs.output import warn

if TYPE_CHECKING:
    from engine.audit import Audit


def audit(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder", parser=path_given)],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
) -> None:
    """Retry attempts by cause, requests given up, latency, tokens and cost, per model."""
    from engine.runlock import read_pid
    from runs.audit import render, run_audit
    from runs.rehearsal import AUDIT_REHEARSAL_NOTE, rehearsed

    require_run_folder(run_dir)
    with user_errors(OSError, folder=run_dir):  # a file of the folder unreadable, in the way
        report = run_audit(run_dir)
        writer = read_pid(run_dir)
    live = bool(writer and writer.get("alive"))
    from runs.output import print_text, stdout_console

    unplanned = _no_plan(run_dir, report)
    from runs.plan_checksums import lost_plan

    warnings = []
    rehearsal = rehearsed(run_dir)
    if unplanned is None and (lost := lost_plan(run_dir)) is not None:
        # Its counts are of the requests found asked, not of those planned: said first.
        warn(lost)
        warnings.append(lost)
    if as_json:
        import orjson

        # `warnings` as `status --json` has them: a script reads stdout, not stderr.
        payload = {**report.to_dict(), "live": live, "warnings": warnings,
                   "rehearsal": rehearsal,  # additive, as `status --json` has it
                   "notes": [AUDIT_REHEARSAL_NOTE] if rehearsal else []}  # fmt: skip
        if unplanned is not None:
            payload["sentence"] = unplanned
        print_text(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        return
    if unplanned is not None:
        from rich.text import Text

        console = stdout_console()
        console.print(Text(str(run_dir), style="bold"))
        console.print(unplanned, markup=False, highlight=False, soft_wrap=True)
        return

    note = None
    if live and writer is not None:
        note = (
            f"live (pid {writer.get('pid')}): counts as of now; a request counted as given "
            "up is one not answered yet, which the run may still retry"
        )
    elif _asked_by_a_resume(report) and (why := _stopped_early(report, writer)):
        # A refused resume asks nothing: its last line says why and what to run first.
        then = (
            "once the refusal said last is cleared" if report.resume_refused else
            "unless its answer-failure budget is spent"
            + (" or damaged batch results lost it twice" if report.totals.lost_to_damage else "")
        )
        note = (
            f"{why}: a request counted as given up is one not answered yet, which running "
            f"the same command again asks again {then}"
        )
    elif (again := _asked_again(report)) is not None:
        note = again
    if rehearsal:  # first: every table below reads as the providers' otherwise
        note = AUDIT_REHEARSAL_NOTE if note is None else f"{AUDIT_REHEARSAL_NOTE}\n{note}"
    render(report, stdout_console(), title=str(run_dir), note=note)


def _asked_again(report: Audit) -> str | None:
    """For a run that ended: its requests given up other than with their answer-failure
    budget spent or lost for good to damaged batch results (`AuditRow.lost_to_damage`),
    which running the same command again asks again (`max_attempts` and the
    stop at a reply repeated at temperature 0 are per run, and a lane a permanent failure
    stopped starts again); None when there are none, or
    a spend cap stopped a lane (a resume asks nothing until --max-cost is raised, as the
    run's own line says), or a resume is refused (`Audit.resume_refused`, said last). "Given
    up" alone read as given up for good."""
    from engine.console_lines import plural

    totals = report.totals
    again = _asked_by_a_resume(report) - totals.answer_budget_spent
    # Refused: the audit's last line says why.
    if again <= 0 or report.spend_capped or report.resume_refused:
        return None
    return (
        f"{plural(again, 'request')} counted as given up {'was' if again == 1 else 'were'} "
        f"given up by the run that asked {'it' if again == 1 else 'them'} (max_attempts, and "
        "the stop at a reply repeated at temperature 0, hold per run): running the same "
        f"command again asks {'it' if again == 1 else 'them'} again"
    )


def _asked_by_a_resume(report: Audit) -> int:
    """Requests counted as given up that a resume may ask: all but those damaged batch results
    lost for good (`AuditRow.lost_to_damage`), which no run asks again."""
    return report.totals.given_up_total - report.totals.lost_to_damage


def _stopped_early(report: Audit, writer: dict[str, Any] | None) -> str | None:
    """Why the run's last dispatch ended before its lanes did, or None: it died (a pid left
    by a kill), or a signal stopped its lanes (`cancelled` with `STOP_REQUESTED` among the
    audit's `lane_ends`; a spend cap's stop is `cancelled` too, and running the same command
    again asks nothing more until `--max-cost` is raised, as its own line says). A tester's
    audit of a run stopped by SIGTERM called its unanswered failed requests given up, where
    `status` calls them pending and the audit's own last line said a resume asks them. A
    lane that stopped (`_lane_stopped`) is said too: its requests are asked by a resume."""
    from engine.lanes import STOP_REQUESTED

    if writer is not None:  # not alive: `live` is checked first
        return "the run died before it ended"
    stopped = ("cancelled", STOP_REQUESTED)
    if any((end["state"], end["reason"]) == stopped for end in report.lane_ends):
        return "the run was stopped before it ended"
    return _lane_stopped(report)


def _lane_stopped(report: Audit) -> str | None:
    """Which lanes with requests given up stopped (`stopped`: their provider down past
    `max_down_s` or never answering, a streak of permanent failures), and why, or None. A
    tester's audit of a lane stopped while its provider was down called its requests "given
    up" by their `max_attempts` after two or three attempts each, where `status` calls them
    pending: a resume starts the lane again and asks them."""
    from engine.console_lines import plural

    whys = [
        f"{end['model']}'s lane stopped ({_first_clause(end)})"
        for end in report.lane_ends
        if end["state"] == "stopped"
        and (row := report.by_model.get(str(end["model"]))) is not None and row.given_up_total
    ]
    if not whys:
        return None
    if len(whys) > 3:
        return f"{plural(len(whys), 'lane')} stopped before the run ended"
    return "; ".join(whys)


def _first_clause(end: dict[str, Any]) -> str:
    """Why a lane stopped, short: its reason up to its first detail ("after its provider
    was down 0:00:12, past its max_down_s of 2s"), its cause and the last failure left to
    the line the audit gives each lane that ended early."""
    why = str(end.get("reason") or end.get("message") or "no reason on file").strip()
    for cut in (" (", ": ", "; "):
        why = why.split(cut, 1)[0]
    return why


def _no_plan(run_dir: Path, report: Audit) -> str | None:
    """What `status` says of a folder with no plan and nothing asked (a run killed while it
    planned), where the audit's sentence read "every attempt was accepted (0 requests)";
    None for a folder with a plan or an attempt."""
    if (run_dir / "plan.parquet").exists() or report.totals.attempts or report.totals.accepted:
        return None
    from engine.status import status
    from runs.commands.status import no_plan_line

    return no_plan_line(str(status(run_dir)["state"]))


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)
