"""`dutchbook status DIR`: how far a run has got, safe to use while it runs or after it died."""

from __future__ import annotations

import errno
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.audit import REJECTED_ON_REPARSE, earlier_lanes_text
from engine.batch_jobs import AtProvider
from engine.batch_lost import LostJob, lost_jobs, lost_jobs_line
from engine.batch_waits import from_dict, job_lines
from engine.console_lines import (
    duration,
    held_text,
    lane_state_said,
    plural,
    stop_wait_text,
)
from engine.console_tables import print_whole
from engine.journal import JournalError
from engine.lanefile import AS_OF_FORMAT
from engine.retry import CAUSE_LABELS
from engine.runlock import lock_held, names_another_host
from engine.status import lane_eta_s as lane_eta_s  # re-exported: the docs name it here
from engine.status import status as run_status
from engine.unresolved import interrupted_note
from runs.commands._errors import MADE_READ_ONLY_HINT, path_given, user_errors
from runs.commands._run_folder import require_run_folder
from runs.output import print_text, stdout_console
from runs.scored_from import rerun_command

#: What the header says of a died run whose folder cannot be written (`read_only`): a run
#: stopped by its disk turning read-only cannot remove its `run.pid`, and read "died"; but so
#: does a run killed (kill -9) whose folder was copied to a read-only disk since: not told apart.
STOPPED_READ_ONLY = "died or stopped, folder read-only"
_STATE_STYLE = {"live": "green", "died": "red", "finished": "cyan", "stopped": "yellow",
                STOPPED_READ_ONLY: "red"}  # fmt: skip
#: The gaps `_stale_scores` and `_stale_report` say, as the header words them after
#: "answered, " for a finished run (and `--json`'s additive `scored` and `reported` read).
NOT_SCORED, SCORES_STALE, SCORES_DAMAGED = "not scored", "scores out of date", "scores damaged"
REPORT_MISSING, REPORT_STALE = "report not written", "report out of date"
#: The gap of a folder whose last reparse did not finish: its answers are the parser's before
#: it or its own, so its scores and report are compared with neither (`scored`, `reported`
#: null); the reparse's own line says to run it again.
REPARSE_UNFINISHED = "reparse unfinished"
#: Lane states that a run which is not live left behind as its last word: a run that died
#: (kill -9, a crash) wrote no final `lanes.json`, and one stopped by a full disk could not.
#: `engine.lanes.LaneState` values, spelled here because importing that module (aiohttp
#: with it) would add 0.2 s to every `status`.
_ACTIVE_LANE_STATES = ("waiting", "running", "probing")
#: How old `logs/lanes.json` may be while a live run's lanes still ask before `status` says
#: so: dispatch rewrites it every second. A run frozen by SIGSTOP (or stalled) read "live",
#: its lanes "running" and their ETAs frozen, for as long as it stayed so.
LANES_STALE_S = 10.0
#: The lane column where `logs/lanes.json` is an earlier run's (`lanes_of_earlier_run`).
EARLIER_LANE = "not known (see the warning)"


#: What a folder with no plan yet says, by state (a run stopped while it planned, as a
#: hangup or a kill in its first seconds can leave it): every count would read zero.
_NO_PLAN = {
    "live": "planning: no plan written yet",
    "died": "no plan: the run died while planning; run the same command again to plan and start",
    "stopped": "no plan: the run stopped while planning; run the same command again to plan "
    "and start",
    "not started": "no plan yet: `dutchbook run` with this folder as --out plans and starts it",
}


#: The states whose word says a resume would go on; of a folder whose answers are gone with
#: their replies (`answers_gone`), which a resume refuses, the header says "answers missing"
#: instead: a finished run read "not started", and one whose answers a resume had added to
#: lost the run's, "stopped" with half its requests "attempted so far".
_RESUMABLE = ("not started", "stopped")


def no_plan_line(state: str) -> str:
    """What a folder with no plan yet says in `state` (`status` and `audit` alike)."""
    return _NO_PLAN.get(state, _NO_PLAN["stopped"])


def percent_done(done: int, planned: int) -> str:
    """A share rounded DOWN to 0.1%: 532 of 534 is 99.6%, never a 100% that is not done."""
    tenths = done * 1000 // planned
    return f"{tenths // 10}%" if tenths % 10 == 0 else f"{tenths / 10:.1f}%"


def _fraction(done: int, planned: int | None) -> str:
    if planned is None:
        return f"{done:,}/?"
    share = f" ({percent_done(done, planned)})" if planned else ""
    return f"{done:,}/{planned:,}{share}"


def _eta(entry: dict[str, Any], *, live: bool) -> str:
    """The lane's time left, as the live table spells it: "0:00" for a lane that is done (a
    blank here beside the live table's 0:00 and `--json`'s 0), "?" while it cannot be told
    (the provider down, no answer yet); nothing for a lane that halted, or no run live."""
    eta = lane_eta_s(entry, live=live)
    if eta is not None:
        return duration(eta)
    asking = live and entry.get("planned") is not None
    return "?" if asking and entry.get("lane_state") in _ACTIVE_LANE_STATES else ""


def _lane_text(entry: dict[str, Any], state: str, as_of: str | None = None) -> str:
    """The lane column: its state, whether that is stale, and why (or the provider's hold);
    `as_of`, the time of a `lanes.json` the run went on without (`lanes_behind_s`)."""
    lane, why = entry.get("lane_state") or "", entry.get("lane_message") or ""
    if not why:  # a lane that gave requests up is not said "done" (as dispatch says it),
        # but "gave up" or "done in part" alone: the row's other cells hold its counts, and
        # said whole ("done in part: 616 of 702 answered, 86 gave up") it wrapped five lines
        lane = lane_state_said(
            lane, entry.get("accepted") or 0, entry.get("planned"), entry.get("lane_gave_up")
        ).partition(":")[0]
    if as_of is not None:  # the run went on: neither what it is now nor how it ended
        lane += f" as of {as_of}"
    elif state != "live" and lane in _ACTIVE_LANE_STATES:  # `lanes.json` is stale
        lane += " when the run died" if state == "died" else " when the run stopped"
    elif state == "live" and not why:
        why = held_text(entry.get("lane_held_s"), entry.get("lane_held_by"))
    return f"{lane}: {why}" if why else lane


def render(summary: dict[str, Any], console: Console) -> None:
    """The human view: a header, one row per model, retries by cause, pending failures."""
    state = summary["state"]
    pid = summary.get("pid") or {}
    who = f" (pid {pid['pid']} on {pid.get('host', '?')})" if pid else ""
    header = Text(str(summary["run_dir"]), style="bold")  # a path is not markup
    if state in _RESUMABLE and summary.get("answers_gone"):  # a resume is refused: not so
        state = "answers missing"
    elif state == "died" and summary.get("read_only"):  # its pid file could not go
        state = STOPPED_READ_ONLY
    elif state == "stopped" and summary.get("reparse_rejected_only"):
        # Nothing stopped: a stricter reparse took answers back, and its note says what then.
        rejected = plural(summary["answers_rejected_on_reparse"], "answer")
        state = f"answered, {rejected} rejected by a re-parse since"
    elif state == "finished" and (gap := summary.get("outputs_gap")):
        # Every query answered and the scores or the report not written from those answers (a
        # stop while it scored or reported): "finished" read as the whole run done (a tester's).
        state = f"answered, {gap}"
    header.append(": ").append(state, style=_STATE_STYLE.get(state, "white")).append(who)
    held = AtProvider(**summary.get("batch_at_provider") or {})
    if held:  # a batch run's queries with the provider: "stopped, 3 batch jobs (28 ...) ..."
        header.append(f", {held.phrase()}")
    if stopping := summary.get("stopping"):  # a signal's stop, waiting on a hung provider
        again = f" (`kill {pid['pid']}`)" if pid.get("pid") else ""
        cut = bool(stopping.get("cut"))
        header.append(
            f", {stop_wait_text(stopping['attempts_in_flight'], stopping['wait_s'], cut)}; "
            f"signal it again{again} to stop at once"
        )
    if (silent := _lanes_silent_s(summary)) is not None:
        why = (" while attempts go on (see the warning below)" if summary.get("lanes_stale")
               else ": the process may be stopped (SIGSTOP, a debugger) or stalled")
        header.append(f", but no lane has said anything for {duration(silent)}{why}")
    console.print(header)
    if summary["planned"] is None and not summary["attempts"]:
        console.print(no_plan_line(state), soft_wrap=True)
        return
    console.print(
        f"accepted {_fraction(summary['accepted'], summary['planned'])}, "
        f"{plural(summary['attempts'], 'attempt')}, "
        f"{plural(summary['retries'], 'retry attempt')} across "
        f"{plural(summary['requests_retried'], 'request')}, "
        f"last attempt {summary['last_attempt_at'] or 'none yet'}"
        f" ({summary['attempts_last_minute']:,} in its last minute), "
        f"{plural(summary['journal_segments'], 'journal segment')} not yet compacted"
    )
    _say_unresolved(summary, console)
    as_of = _lanes_as_of(summary) if summary.get("lanes_stale") else None
    earlier = summary.get("lanes_of_earlier_run") is not None
    print_whole(console, _models_table(summary["models"], state, as_of, earlier=earlier))
    _render_jobs(summary.get("batch_jobs") or {}, console)
    _say_jobs_at_provider(summary.get("batch_jobs_at_provider") or [], console)
    if summary["retries_by_cause"]:
        causes = Table(title="retry attempts by cause", title_justify="left")
        causes.add_column("cause")
        causes.add_column("retry attempts", justify="right")
        # Largest first, as the audit's table is (a reviewer: sorted by the ledger's codes).
        by_count = sorted(summary["retries_by_cause"].items(), key=lambda kv: (-kv[1], kv[0]))
        for cause, n in by_count:
            causes.add_row(Text(CAUSE_LABELS.get(cause, cause)), f"{n:,}")
        print_whole(console, causes)
    _say_failures(summary["pending_failures"], console)
    for note in summary.get("notes") or []:
        console.print(note, soft_wrap=True, highlight=False, markup=False)
    for warning in summary.get("warnings") or []:
        console.print(f"warning: {warning}", style="yellow", soft_wrap=True, highlight=False,
                      markup=False)
    console.print(summary["sentence"], soft_wrap=True, highlight=False, markup=False)


def _resume(run_dir: Path, summary: dict[str, Any], busy: bool) -> str | None:
    """The line saying what resumes a run that died or stopped with requests left to ask
    (`runs.scored_from.resume_command`), as `audit` says "running the same command again";
    None where no resume would go on, or another line says what comes first (answers lost
    or rejected by a reparse, a reparse unfinished, a read-only folder, a writer at work)."""
    from runs.scored_from import resume_command

    first = ("answers_gone", "answers_missing", "answers_rejected_on_reparse",
             "reparse_unfinished", "read_only")  # fmt: skip
    if summary["state"] not in ("died", "stopped") or busy or not summary.get("remaining"):
        return None
    if any(summary.get(key) for key in first):
        return None
    rehearse = bool(summary.get("rehearsal"))  # set before: a run without --rehearse refuses
    return resume_command(run_dir, rehearse=rehearse, capped=_spend_capped(summary))


def _spend_capped(summary: dict[str, Any]) -> bool:
    """Whether the spend cap stopped a lane of the run's last dispatch, as its lanes' file
    says (not an earlier run's: `lanes_of_earlier_run`)."""
    from engine.spend import SPEND_CAP_REACHED

    if summary.get("lanes_of_earlier_run") is not None:
        return False
    return any(
        entry.get("lane_state") == "cancelled"
        and (entry.get("lane_message") or "").startswith(SPEND_CAP_REACHED)
        for entry in summary["models"].values()
    )


def _reparse_rejected_only(summary: dict[str, Any]) -> bool:
    """Whether a stopped folder's only requests left are those whose reply the run accepted
    and a later reparse rejected: the run asked everything and ended, yet its header read
    "stopped" (a user's strict reparse of a lenient run), the why lines further down."""
    rejected = summary.get("answers_rejected_on_reparse") or 0
    remaining = summary.get("remaining")
    if summary["state"] != "stopped" or not rejected or remaining is None:
        return False
    lost: int = summary["pending_failures"].get("lost_to_damage", 0)
    return bool(remaining - lost <= rejected)


def _lanes_silent_s(summary: dict[str, Any]) -> float | None:
    """How long a live run's lanes, some still asking, have not rewritten `logs/lanes.json`,
    when that is over `LANES_STALE_S`; None otherwise (a run planning, scoring or writing its
    report has no lane asking: its lanes' file stands still by design; a file older than the
    live run is an earlier run's, which a resume replaces once it dispatches: a review's
    resume, still opening its ledger, read "no lane has said anything for 2:27:03")."""
    updated = summary.get("lanes_updated_at")
    lanes = (entry.get("lane_state") for entry in summary["models"].values())
    if summary["state"] != "live" or not updated or not any(
        lane in _ACTIVE_LANE_STATES for lane in lanes
    ):
        return None
    try:
        at = datetime.fromisoformat(str(updated))
        started = (summary.get("pid") or {}).get("started_at")
        if started and datetime.fromisoformat(str(started)) > at:
            return None
    except ValueError:
        return None
    silent = (datetime.now(UTC) - at).total_seconds()
    return silent if silent > LANES_STALE_S else None


def lanes_behind_s(summary: dict[str, Any]) -> float | None:
    """How long before the run's last attempt `logs/lanes.json` was last written, when that
    is over `LANES_STALE_S` (dispatch rewrites it every second, and last after its last
    attempt); None otherwise, or when either time is unknown. A dispatch whose `logs/`
    could not be written (mounted read-only on its own) went on without it: `status` then
    showed the lanes as they were, "running when the run stopped" of a finished run."""
    try:
        written = datetime.fromisoformat(str(summary.get("lanes_updated_at")))
        last = datetime.fromisoformat(str(summary.get("last_attempt_at")))
        behind = (last - written).total_seconds()
    except (ValueError, TypeError):  # none of either, or damaged
        return None
    return behind if behind > LANES_STALE_S else None


def _lanes_as_of(summary: dict[str, Any]) -> str:
    """When `lanes.json` was last written, as the lane column says it."""
    written = datetime.fromisoformat(str(summary["lanes_updated_at"]))
    return written.astimezone(UTC).strftime(AS_OF_FORMAT)


def _say_lanes_stale(run_dir: Path, summary: dict[str, Any]) -> None:
    """Note in `lanes_stale` (additive) whether the lanes `status` reads are older than the
    run's attempts (`lanes_behind_s`), and in `lanes_of_earlier_run` (additive) whether they
    are an earlier run's (`_lanes_of_earlier_run`), and warn of either."""
    behind = lanes_behind_s(summary)
    summary["lanes_stale"] = behind is not None
    earlier = summary["lanes_of_earlier_run"] = _lanes_of_earlier_run(run_dir, summary)
    if earlier is not None:  # said as `audit` says it, not as a file behind its own run
        summary["warnings"].append(
            f"{earlier_lanes_text(earlier['updated_at'], earlier['run_started_at'])}: the lane "
            "column does not say the earlier run's lanes (the counts are the ledger's)"
        )
    elif behind is not None:
        summary["warnings"].append(
            f"logs/lanes.json was last written at {summary['lanes_updated_at']}, "
            f"{duration(behind)} before the run's last attempt (its logs/ could not be "
            "written, or the file was put back from an older copy): the lane column is as of "
            "then, the counts are the ledger's"
        )


def _lanes_of_earlier_run(run_dir: Path, summary: dict[str, Any]) -> dict[str, str] | None:
    """`{updated_at, run_started_at}` where `logs/lanes.json` is older than the folder's
    latest run, which sent attempts and never wrote it (`runs.run_history.run_since`, as
    `audit` asks it), else None. A resume killed before its lanes' first write (or whose
    `logs/` refused it) left the run before's file, and `status` said its lanes' reasons
    ("spend cap reached ...") as the resume's; `lanes_behind_s` warned only where the file
    was more than `LANES_STALE_S` behind, and said it was a file the run could not write. A
    live run writes it within a second of dispatching: not asked."""
    from runs.run_history import lanes_of_earlier_run

    written = summary.get("lanes_updated_at")
    if summary["state"] == "live" or written is None:
        return None
    return lanes_of_earlier_run(run_dir, written)


def _models_table(
    models: dict[str, dict[str, Any]], state: str, as_of: str | None = None,
    *, earlier: bool = False,
) -> Table:
    """One row per model; its pending failures are those that failed (`failed`), not the
    replies a strict reparse rejected, which their note says; `as_of`: `_lane_text`'s;
    `earlier`: the lanes read are an earlier run's (`lanes_of_earlier_run`), not said."""
    table = Table(title="per model", title_justify="left")
    columns = ("model", "done/planned", "attempts", "retry attempts", "pending failures", "lane",
               "ETA")
    for column in columns:
        table.add_column(column, justify="left" if column in ("model", "lane") else "right")
    for name, entry in models.items():
        table.add_row(
            Text(name), _fraction(entry["accepted"], entry["planned"]), f"{entry['attempts']:,}",
            f"{entry['retries']:,}", f"{entry['failed']:,}",
            Text(EARLIER_LANE if earlier else _lane_text(entry, state, as_of)),
            _eta(entry, live=state == "live"),
        )
    return table


def _say_failures(pending: dict[str, Any], console: Console) -> None:
    """The pending requests that failed (`failed`), by last outcome, with examples. Those a
    strict reparse rejected are pending too (listed as `invalid_response` with the detail
    `rejected_on_reparse`), but the run accepted their replies, so they neither failed nor
    were retried: their note says them instead."""
    failed = pending["failed"]
    if not failed:
        return
    # Said beside `permanent` (a last outcome no retry helps): "(0 permanent)" alone read as
    # every request to be asked again, of 56 that no resume would ask (the audit said so).
    spent = pending.get("answer_budget_spent", 0)
    budget = (
        f"; {spent:,} with the answer-failure budget spent, asked again only once the spec's "
        "max_answer_failures is raised" if spent else ""
    )  # fmt: skip
    if lost := pending.get("lost_to_damage", 0):  # retryable outcomes no run asks again
        budget += (f"; {lost:,} given up for good, their lines lost twice to damaged batch "
                   "results (each loss billed)")
    by_outcome = pending["failed_by_outcome"].items()  # in the audit's words, not the codes
    console.print(
        f"{plural(failed, 'request')} failed and {'is' if failed == 1 else 'are'} not yet "
        f"answered ({pending['permanent']:,} permanent{budget}): "
        + ", ".join(f"{CAUSE_LABELS.get(k, k)} {v:,}" for k, v in by_outcome)
    )
    for example in pending["examples"]:
        if example.get("detail") == REJECTED_ON_REPARSE:
            continue
        outcome, detail = str(example["outcome"]), str(example["detail"] or "")
        # A detail that begins with its outcome ("interrupted: dispatched but ...") is said
        # once: it read "interrupted interrupted: dispatched but ..." (a tester's).
        said = detail if detail.startswith(f"{outcome}:") else f"{outcome} {detail}"
        console.print(
            f"  {example['request_id']} [{example['model']}] after "
            f"{plural(example['attempts'], 'attempt')}: {said}",
            soft_wrap=True, highlight=False, markup=False,
        )


def _say_unresolved(summary: dict[str, Any], console: Console) -> None:
    """Attempts sent and not resolved (`engine.unresolved`): in flight, or, the run dead,
    counted above as the interrupted attempts its next run records."""
    flying, lost = summary.get("in_flight") or 0, summary.get("interrupted_unrecorded") or 0
    if flying:
        console.print(f"{plural(flying, 'attempt')} in flight now", soft_wrap=True)
    if lost:
        console.print(interrupted_note(lost, summary.get("interrupted_batch") or 0),
                      soft_wrap=True, highlight=False)


def _render_jobs(jobs: dict[str, dict[str, dict[str, int]]], console: Console) -> None:
    """Batch jobs per model (issue 13): jobs and the lines they carry, by where they stand."""
    if not jobs:
        return
    groups = list(next(iter(jobs.values())))
    table = Table(title="batch jobs (jobs / lines)", title_justify="left")
    table.add_column("model")
    for group in groups:
        table.add_column(group, justify="right")
    for model, by_group in jobs.items():
        table.add_row(
            Text(model),
            *(f"{by_group[g]['jobs']:,} / {by_group[g]['lines']:,}" for g in groups),
        )
    print_whole(console, table)


def _say_jobs_at_provider(entries: list[dict[str, Any]], console: Console) -> None:
    """One line per batch job still at the provider, longest there first, a few at most: its
    id, the provider's word, its lines done as last polled, its time there, its last poll."""
    if not entries:
        return
    console.print("batch jobs at the provider, longest there first:", highlight=False)
    for line in job_lines([from_dict(entry) for entry in entries], datetime.now(UTC)):
        console.print(f"  {line}", soft_wrap=True, highlight=False, markup=False)


def status(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder", parser=path_given)],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Show a run's progress: done/planned per model, retries by cause, failures, live or died."""
    require_run_folder(run_dir)
    from runs.audit import parser_and_budget
    from runs.plan_checksums import lost_plan
    from runs.rehearsal import REHEARSAL_NOTE, rehearsed
    from runs.scored_from import stale_repairs

    with user_errors(OSError, JournalError, folder=run_dir):
        summary = run_status(run_dir, *parser_and_budget(run_dir))
        # Probed once: a lock let go between two probes dropped both of their warnings.
        busy = summary["state"] != "live" and lock_held(run_dir)
        _say_read_only(run_dir, summary, busy)
        _say_lanes_stale(run_dir, summary)
        gone = _say_gone_answers(run_dir, summary)  # `repair` refuses: no line to run it
        if not gone and (repairs := stale_repairs(run_dir)):
            summary["warnings"].append(repairs)
        if summary["state"] != "live" and (lost := lost_plan(run_dir)):
            summary["warnings"].append(lost)
        lost_jobs = _lost_jobs(run_dir) if summary["state"] != "live" else []
        summary["lost_batch_jobs"] = [job.job_key for job in lost_jobs]  # additive
        if lost_jobs:
            summary["warnings"].append(lost_jobs_line(run_dir, lost_jobs))
        # Answers lost from responses/: the reparse their warning names comes first, and
        # `score` refuses until then (this line sent the user to it).
        # So do answers of requests the plan does not hold: `score` refuses until then.
        first = summary.get("answers_missing") or summary.get("answers_unplanned") or gone
        _say_outputs(run_dir, summary, compared=summary["state"] != "live" and not first)
        if busy:
            # A reparse, score, repair or report holds the folder (they write no pid file: no
            # run is live), and a warning below may be of the very work it is doing; or a
            # run live on the host its run.pid names, where status cannot see it.
            note = ELSEWHERE_NOTE if names_another_host(summary["pid"]) else BUSY_NOTE
            summary["warnings"].insert(0, note.format(host=(summary["pid"] or {}).get("host")))
        summary["rehearsal"] = rehearsed(run_dir)  # additive
        summary["reparse_rejected_only"] = _reparse_rejected_only(summary)  # additive
        summary["resume_command"] = _resume(run_dir, summary, busy)  # additive
        if summary["resume_command"]:
            summary["notes"].append(summary["resume_command"])
        if summary["rehearsal"]:
            summary["notes"] = [REHEARSAL_NOTE, *(summary.get("notes") or [])]
    if as_json:
        print_text(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        render(summary, stdout_console())


#: What `status` says first of a folder whose lock is held and whose run.pid names another
#: host (`{host}`): its processes cannot be seen from here, and "died" may be a live run.
ELSEWHERE_NOTE = (
    "run.pid names host {host}, whose processes status cannot see, and the folder's lock is "
    "held: the run is likely live there; what follows is as of now"
)
#: What `status` says first of a folder another command is writing (not a run).
BUSY_NOTE = (
    "another dutchbook command (a reparse, score, repair or report) is writing this folder "
    "now: what follows is as of now, and a warning below may be of the work it is doing"
)


def _say_read_only(run_dir: Path, summary: dict[str, Any], busy: bool) -> None:
    """Note in `read_only` (additive) whether a died run's folder refuses writes as read-only
    (`engine.durable.turned_read_only`: its mount says so, or a file made there fails with
    EROFS, as on ext4 turned read-only by an error, whose mount flags stay as they were), and
    warn of it first. A run stopped by its disk turning read-only ends in its own line, but
    cannot remove its `run.pid`: `status` then said the run "died", with no word of why nor
    of what resumes it. `state` stays "died" (its values are a contract); only a died run
    is asked, as only it reads wrong, and asking makes a file there where it may. Why the
    run ended is not known here (a run killed with kill -9, its folder copied to a read-only
    disk since, reads the same), so the warning says what is: the error, and what a disk
    turned read-only leaves."""
    from engine.durable import turned_read_only

    # A run.pid of another host names a process status cannot see (the run may be live
    # there, its folder read here through a read-only mount, and flock is not seen across
    # hosts on every network file system); its lock held (`busy`), a writer is at work:
    # neither is probed, nor said to be stopped by a read-only disk.
    summary["read_only"] = (
        summary["state"] == "died"
        and not names_another_host(summary["pid"])
        and not busy
        and turned_read_only(run_dir)
    )
    if summary["read_only"]:
        summary["warnings"].insert(0, (
            f"{run_dir} cannot be written ({os.strerror(errno.EROFS)}); a run stopped by its "
            f"disk turning read-only leaves its run.pid behind, and reads as died: "
            f"{MADE_READ_ONLY_HINT} to resume (a copy on a read-only disk: copy it somewhere "
            "writable and resume that)"
        ))  # fmt: skip


def _lost_jobs(run_dir: Path) -> list[LostJob]:
    """Batch jobs created at a provider that `batches/jobs.jsonl` no longer knows
    (`engine.batch_lost`), which stop the next run until they are given up."""
    import polars as pl

    try:  # whatever the frozen spec says now: a resume may switch `dispatch` to "live"
        return lost_jobs(run_dir)
    except pl.exceptions.PolarsError:  # a damaged shard: not this line's to say
        return []


def _say_gone_answers(run_dir: Path, summary: dict[str, Any]) -> bool:
    """Warn, first, of answers gone with their replies (`runs.lost_answers.gone_answers`),
    and note it in `answers_gone` (additive); whether they are. Such a finished run read
    "not started" with no other word (a tester's): with no attempt left, it looks unrun."""
    from runs.lost_answers import ASK_ALL_AGAIN, RESTORE_ANSWERS, gone_answers

    # Replies kept, the lost answers' own warning names the reparse that rebuilds them.
    asked = summary["state"] != "live" and not summary.get("answers_missing")
    gone = gone_answers(run_dir) if asked else None
    summary["answers_gone"] = gone is not None
    if gone is not None:
        summary["warnings"].insert(0, f"{gone}: {RESTORE_ANSWERS}; a resume (`dutchbook run`), "
                                      f"`score` and `repair` refuse the folder until then; "
                                      f"or, {ASK_ALL_AGAIN}")  # fmt: skip
    return gone is not None


def _say_outputs(run_dir: Path, summary: dict[str, Any], *, compared: bool) -> None:
    """Warn of scores or a report not written from the answers the folder holds, note the gap
    in `outputs_gap` (the header's words for a finished run), and whether the folder is
    `scored` and `reported` from them (additive; null where not `compared`: a live run, or
    answers missing, whose own line comes first; or a reparse unfinished, `REPARSE_UNFINISHED`,
    whose line says what to run)."""
    if compared and summary["reparse_unfinished"]:
        summary.update(outputs_gap=REPARSE_UNFINISHED, scored=None, reported=None)
        return
    gap = None
    if compared:
        gap = _stale_scores(run_dir, _unscored(summary)) or _stale_report(run_dir)
    if gap is not None:
        summary["warnings"].append(gap[1])
    summary["outputs_gap"] = gap[0] if gap else None
    unscored = (NOT_SCORED, SCORES_STALE, SCORES_DAMAGED)
    scored = (run_dir / "scores.parquet").is_file() and summary["outputs_gap"] not in unscored
    summary["scored"] = scored if compared else None
    summary["reported"] = scored and gap is None if compared else None


def _unscored(summary: dict[str, Any]) -> bool:
    """Whether the folder has nothing left to ask and holds answers, so that no scores at all
    is a gap for `_stale_scores` to say (a stopped run's own line says to resume). A run
    killed after its dispatch ("died", nothing left to ask) said nothing of it (a tester's)."""
    ended = summary["state"] == "finished" or (
        summary["state"] == "died" and summary["remaining"] == 0
    )
    return ended and bool(summary["accepted"])


def _stale_scores(run_dir: Path, answered: bool = False) -> tuple[str, str] | None:
    """The gap (`NOT_SCORED`, `SCORES_STALE`) and a line saying the scores and the report are
    of answers the folder no longer holds as they were, with what writes them again; None
    when they are of these (or there are none, or they cannot be compared: a damaged answers
    file, which `status` says otherwise; a reparse that did not finish is `_say_outputs`'
    `REPARSE_UNFINISHED`). A
    reparse, or a run killed before it scored, left the last report standing with nothing to
    say it was of other answers but `report` refusing it. A folder `answered` through
    (`_unscored`) with no scores at all is said too: a run that died after its dispatch (a
    full disk while it scored) read as "finished", nothing said, until `report` refused it."""
    from runs.scored_from import stale_scores

    if not (scores := run_dir / "scores.parquet").is_file():
        # A folder where it goes is `_stale_report`'s to say.
        return None if not answered or scores.exists() else (NOT_SCORED, (
            f"not scored yet ({run_dir} has no scores.parquet): `{rerun_command(run_dir)}`, "
            f"then `dutchbook report {run_dir}`, write the scores and the report"
        ))  # fmt: skip
    import polars as pl

    try:
        why = stale_scores(run_dir)
    except (pl.exceptions.PolarsError, OSError):  # a damaged shard: not this line's to say
        return None
    if why is None:
        return None
    return SCORES_STALE, (
        f"scores.parquet and report/ are out of date ({run_dir}: {why}): "
        f"`{rerun_command(run_dir)}`, then `dutchbook report {run_dir}`, write them again"
    )


def _stale_report(run_dir: Path) -> tuple[str, str] | None:
    """The gap (`SCORES_DAMAGED`, `REPORT_MISSING`, `REPORT_STALE`) and a line saying
    `report/` was written from other scores than the folder's now (a reparse, then `score`,
    and no `report` since), with the command that writes it again."""
    import polars as pl

    from runs.damaged_files import check_footers
    from runs.report_folder import report_dir
    from runs.scored_from import SCORES_FILES, has_report, stale_report, untold_report

    for name in SCORES_FILES:  # damaged, it reads as changed: said as what it is instead
        try:
            check_footers([run_dir / name])
        except FileNotFoundError:
            continue
        except (pl.exceptions.PolarsError, OSError):
            what = (
                "is a folder where a file goes: move or remove it, then"
                if (run_dir / name).is_dir()
                else "is damaged (its footer does not read):"
            )
            return SCORES_DAMAGED, (
                f"{run_dir / name} {what} `{rerun_command(run_dir)}` writes it again, then "
                f"`dutchbook report {run_dir}`"
            )
    if (run_dir / "scores.parquet").is_file() and not has_report(run_dir):
        # A run stopped while it wrote its report (it writes one however it ends) read as
        # "finished" with no word that its report/ was never written; or `score` was run.
        return REPORT_MISSING, (
            f"no report of these scores yet ({report_dir(run_dir)} is not written): "
            f"`dutchbook report {run_dir}` writes it"
        )
    if (why := untold_report(run_dir)) is not None:
        return REPORT_STALE, (
            f"report/ cannot be matched to the scores ({run_dir}: {why}): `dutchbook report "
            f"{run_dir}` writes it again"
        )
    if not stale_report(run_dir):
        said = _parser_said_otherwise(run_dir)
        return None if said is None else (REPORT_STALE, said)
    return REPORT_STALE, (
        f"report/ is out of date ({run_dir}: its scores changed after it was written): "
        f"`dutchbook report {run_dir}` writes it again"
    )


def _parser_said_otherwise(run_dir: Path) -> str | None:
    """A line saying the report names the answers' parser as it no longer is (a reparse it
    called unfinished has finished since), with the command that writes it again."""
    from runs.report.provenance import parser_said_otherwise
    from runs.scored_from import report_summary

    summary = report_summary(run_dir)
    provenance = summary.get("provenance") if isinstance(summary, dict) else None
    if not isinstance(provenance, dict):
        return None
    if (why := parser_said_otherwise(run_dir, provenance)) is None:
        return None
    return (
        f"report/ is out of date ({run_dir}: {why}): `dutchbook report {run_dir}` writes it "
        "again"
    )


def register(app: typer.Typer) -> None:
    app.command("status")(status)
