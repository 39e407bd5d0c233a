"""`dutchbook run SPEC`: plan, dispatch, score and report a campaign; running it again resumes.

Exit codes: 0 done (every planned query answered), 2 a user error (bad spec, missing key,
estimate above --max-cost), 3 the running spend cap stopped the run, 4 finished but incomplete
(a lane stopped on a permanent failure or a spent quota, or requests ran out of attempts, or
accepted answers went missing from responses/ while it ran: the report scores what there is and
says so), 5 busy (another process is running a campaign in the folder; nothing was done), 6 a
write found no room (the run folder's disk, or the output's: the message says which), 7 the run
folder's disk turned read-only while it ran (remounted read-only after a file-system error; a
folder read-only from the start is 2), 130 interrupted (SIGINT/SIGTERM/SIGHUP; 128 + SIGINT as
shells report Ctrl-C; its line on stderr, as the others' closing errors, and last on stdout
too unless stdout is stderr's file), 1 a set whose profit no solve could certify (scoring
stops, writing no scores; the answers are kept: `runs.scoring_step.UncertifiedSet`), or
stdout's reader gone before the run ended (`runs.cli.output_closed`; gone once its report
is written, as the report or its last lines print, the run's own status stands, 0 with a
note, 3 and 4 with their closing lines saying the output was cut). All are resumable by
running the same command again but 2 and an uncertified set's 1, whose solve stops there
again (5 once the other is done). A figure worker that dies (`runs.figure_workers`) is no
error: the run draws its report in this process instead.
`DUTCHBOOK_FIGURE_WORKERS=0` starts none, the report drawn here from the start; a value other
than 0 or 2 is a user error, before anything is started.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from engine.durable import DiskFull
from runs.commands._errors import (
    EXIT_BUSY,
    EXIT_UNCERTIFIED,
    disk_refused_says,
    fail,
    path_given,
    user_errors,
)
from runs.figure_workers import FigureWorkers, workers_wanted
from runs.memory import imports_frozen
from runs.output import (
    OutputClosed,
    OutputCut,
    OutputFull,
    print_text,
    say,
    stdout_is_stderr,
    stdout_to_null,
)
from runs.run_folder import ResolvedFolder, has_run_marks
from runs.signals import (
    EXIT_INTERRUPTED,
    INTERRUPTED,
    INTERRUPTED_MESSAGE,
    held,
    mark_interrupt_said,
)

if TYPE_CHECKING:
    from runs.pipeline import CampaignResult

# EXIT_BUSY (5), EXIT_DISK_FULL (6) and EXIT_READ_ONLY (7) are every command's, from
# runs.commands._errors (`disk_refused_says` picks 6 or 7), and EXIT_INTERRUPTED (130) from
# runs.signals; the codes below are the run's own.
#: Exit status when the running spend cap stopped the run.
EXIT_SPEND_CAP = 3
#: Exit status when the dispatch ended with planned queries still unanswered.
EXIT_INCOMPLETE = 4


def run(
    spec_path: Annotated[
        Path, typer.Argument(metavar="SPEC", help="campaign spec (TOML)", parser=path_given)
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="run folder (default out/<name>)", parser=path_given),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            metavar="USD",
            help="refuse to start above this estimate, and stop starting requests before the "
            "spend reported so far (this folder's earlier runs included) could pass it",
        ),
    ] = None,
    rehearse: Annotated[
        bool,
        typer.Option(
            "--rehearse", help="swap every provider for the local simulator: no keys, no spending"
        ),
    ] = False,
    faults: Annotated[
        str | None,
        typer.Option(
            "--faults",
            metavar="PROFILE",
            help="with --rehearse or `provider = \"sim\"` models: faults the simulator "
            "injects, as `serve-sim --faults` "
            "(none, light, flaky, hostile, or kind=rate pairs such as 'flaky,server_error=0.1'); "
            "not given: the spec's sim_faults",
            show_default=False,
        ),
    ] = None,
    sim_url: Annotated[
        str | None,
        typer.Option(
            "--sim-url",
            metavar="URL",
            help="with --rehearse or `provider = \"sim\"` models: use the simulator already "
            "running at URL (`dutchbook serve-sim`) instead of starting one, e.g. to keep its "
            "counts across runs",
        ),
    ] = None,
    abandon_batch_jobs: Annotated[
        list[str] | None,
        typer.Option(
            "--abandon-batch-jobs",
            metavar="IDS",
            help="batch jobs of this run folder (comma-separated ids) to give up if their "
            "provider answers 404 (not found) for them, or whose records were lost from "
            "batches/jobs.jsonl: their queries are asked again, which pays twice if the jobs "
            "still run (under other credentials, account or region)",
        ),
    ] = None,
) -> None:
    """Run a campaign into a folder; an interrupted run resumes where it stopped."""
    _refuse_a_folder_for_the_spec(spec_path)
    resolved = ResolvedFolder(out)  # the campaign sets it once it has read the spec's name
    try:
        result = _run_with_workers(
            spec_path, out, max_cost=max_cost, rehearse=rehearse, faults=faults,
            sim_url=sim_url, abandon_batch_jobs=abandon_batch_jobs or (), resolved=resolved,
        )
    except KeyboardInterrupt:  # a signal before or after dispatch (during it, handlers run)
        _end_stopped_outside_dispatch(resolved.path)
    # Cut as the report printed, or at the last lines: the run's own ending follows.
    cut = result.output_cut or _closing_lines_on_stdout(result)
    if _ends_interrupted(result):  # the folder's line, then this one
        _end_interrupted(result.interrupted_line(), folder=result.run_dir)
    if result.disk_full is not None:
        fail(*disk_refused_says(result.disk_full, result.read_only, resumes=True))
    if result.spend_cap_reached:
        _end_on_spend_cap(result, cut)
    lost = _lost_answers_line(result)
    if lost is not None:
        _say_closing(lost, cut)
        raise typer.Exit(EXIT_INCOMPLETE)
    if not result.summary.complete:
        _say_closing(_incomplete_line(result), cut)
        raise typer.Exit(EXIT_INCOMPLETE)
    if cut is not None:  # a run that ended well, only its printing cut
        from runs.cli import output_closed

        output_closed("run", cut, finished=True)


def _say_closing(line: str, cut: OutputCut | None) -> None:
    """The run's closing `line` on stderr (the spend cap's, an incomplete run's), and, where
    its printing was cut once its report was written (`cut`: stdout's reader gone, not open
    for writing, or full), that it was, as a finished run's cut output says (`runs.cli
    .cut_words`): the line said only the run's ending, and a user whose log (`> log` on a
    disk that filled) ended part-way was told nothing of why. The exit status stays the
    run's."""
    if cut is not None:
        from runs.cli import cut_words

        line = f"{line}; {cut_words('run', cut)}"
    say(line)


def _closing_lines_on_stdout(result: CampaignResult) -> OutputCut | None:
    """Stdout's last lines, the spend cap's then "run folder: FOLDER" (an interrupted run's
    `_end_interrupted` says its own), or what cut them: stdout's reader gone meanwhile
    (`| head`), a stdout not open for writing, or one with no room left. The run has ended
    by then, its report written: its own ending follows all the same, its line on stderr and
    its exit status, as an interrupted run's does. A closed stdout ended it in "the output
    (stdout) closed before `dutchbook run` finished", exit 1: a run the cap stopped said
    nothing of the cap (exit 3), and a finished one was sent to run again; a full one, in
    exit 6, to free some space and run it again."""
    try:
        _say_spend_cap_on_stdout(result)
        if not _ends_interrupted(result):
            print_text(f"run folder: {result.run_dir}")
    except (OutputClosed, OutputFull) as exc:
        stdout_to_null()
        return exc
    return None


def _ends_interrupted(result: CampaignResult) -> bool:
    """Whether a signal is what ends the run (exit 130): it stopped the dispatch, and no
    refused write did, whose line comes first."""
    return result.interrupted and result.disk_full is None


def _end_interrupted(line: str, folder: Path | None = None) -> NoReturn:
    """End the run on its interrupt `line`, exit 130, after "run folder: FOLDER" on stdout
    where a resume carries one on. On stderr, where every command's interrupt line and the
    run's other closing errors (a full disk's, exit 4's) go: on stdout alone, a run whose
    output went to a file (`run ... > log`) stopped without a word on screen. And on stdout
    too, as its last line there, unless stdout is stderr's file (a terminal, `2>&1`: said
    once), for the scripts that read it there (`INTERRUPTED_MESSAGE`). A stdout or stderr
    with no room or reader left (`| tee log`, whose tee the same Ctrl-C stopped) is passed
    over: the folder's line on a closed stdout ended the run in "the output (stdout) closed",
    exit 1, its interrupt unsaid."""
    with contextlib.suppress(OutputFull, OutputClosed):
        if folder is not None:
            print_text(f"run folder: {folder}")
        if not stdout_is_stderr():
            print_text(line)
    say(line)
    mark_interrupt_said()
    raise typer.Exit(EXIT_INTERRUPTED)


def _ends_on_spend_cap(result: CampaignResult) -> bool:
    """Whether the spend cap is what ends the run (exit 3): it stopped the dispatch, and no
    signal or refused write did, whose own closing lines come first."""
    return result.spend_cap_reached and not _ends_interrupted(result)


def _say_spend_cap_on_stdout(result: CampaignResult) -> None:
    """The spend cap's line (`CampaignResult.spend_cap_line`) on stdout, before the "run
    folder:" line, where scripts read it; not where the run ends on the cap and stdout is
    stderr's file (a terminal, `2>&1`): its closing line on stderr says it there, once."""
    line = result.spend_cap_line()
    if line is None or (_ends_on_spend_cap(result) and stdout_is_stderr()):
        return
    print_text(line)


def _end_on_spend_cap(result: CampaignResult, cut: OutputCut | None = None) -> NoReturn:
    """End a run the spend cap stopped in one line on stderr, exit 3, as every other ending
    has one: the cap's words (what was spent, this folder's earlier runs included, of
    what cap), that the answers accepted are kept, and how to resume (then what `cut` its
    printing, if anything did: `_say_closing`). It ended with no word on stderr: a run whose
    stdout went to a file (`run ... > log`) stopped, exit 3, in silence on screen."""
    from engine.console_lines import plural

    summary = result.summary
    answered = summary.planned - summary.unaccepted
    if answered:
        were = "is" if answered == 1 else "are"
        kept = f"the {plural(answered, 'answer')} accepted so far {were} kept in {result.run_dir}"
    else:  # a first attempt that could cost more than the cap leaves: nothing to keep yet
        kept = f"no answer was accepted yet in {result.run_dir}"
    if not result.all_given_up():  # else the cap's line counts them, and says none is asked
        kept += f", {result.unanswered()}{_not_asked_again(result)}"
    line = result.spend_cap_line(kept=kept)
    assert line is not None, "the cap was reached"
    _say_closing(line, cut)
    raise typer.Exit(EXIT_SPEND_CAP)


def _end_stopped_outside_dispatch(run_dir: Path | None) -> NoReturn:
    """End a run stopped outside dispatch (planning, scoring, the report) as one stopped in
    it ends: "run folder: ..." on stdout, then `INTERRUPTED_MESSAGE`, "... to resume", where
    its folder, `run_dir` as the run resolved it (`ResolvedFolder`), holds a run
    (`has_run_marks`) for the next one to carry on from; a stop during scoring or the report
    named no folder, though docs/interfaces.md said the line came after it. Stopped before
    that (while it checks the spec, or plans a new folder, which it takes away again having
    written nothing else there), or before it knew its folder (None: the spec's name not
    read yet), running it again starts it afresh: no folder, and what every command says
    (`INTERRUPTED`), as a stop before the command began does (the console script cannot
    tell which command, or folder, it was). The spec is not read again to find the folder:
    a FIFO's second open waited for a writer that never came (a second Ctrl-C needed), and
    a `<(...)` spec read empty, so a run that held a folder said it had none."""
    try:
        resumes = run_dir is not None and has_run_marks(run_dir)
    except OSError:  # a folder it may not look in: nothing of this run's there to resume
        resumes = False
    if resumes:
        _end_interrupted(INTERRUPTED_MESSAGE, folder=run_dir)
    _end_interrupted(INTERRUPTED)


def _refuse_a_folder_for_the_spec(spec_path: Path) -> None:
    """A run folder given as SPEC (to resume it) was "is a folder, not a file", saying nothing
    of how a folder is resumed: with the spec it was run with and the folder as --out. The
    folder's frozen `spec.toml` is that spec (a `[data]` path relative to the spec first run
    resolves against the frozen copy's folder instead: then the original is the one)."""
    if not spec_path.is_dir():
        return
    frozen = spec_path / "spec.toml"
    how = (
        "to resume a run folder, give the spec it was run with and the folder as --out: "
        f"dutchbook run SPEC --out {spec_path}"
    )
    if frozen.is_file():
        how += f" (its frozen copy {frozen} serves as SPEC unless its [data] paths are relative)"
    fail(f"{spec_path}: is a folder, not a file; {how}")


def _run_with_workers(
    spec_path: Path, out: Path | None, *, max_cost: float | None, rehearse: bool,
    faults: str | None, sim_url: str | None, abandon_batch_jobs: Iterable[str],
    resolved: ResolvedFolder,
) -> CampaignResult:
    """The campaign, with the report's figure workers started before the pipeline is
    imported: they import matplotlib while this process imports the campaign's modules
    (about half a second on one core, the other idle then) and plans; none where
    `DUTCHBOOK_FIGURE_WORKERS` is 0 (`_figure_workers`). `resolved` is told the run folder
    as soon as the campaign knows it."""
    with _figure_workers() as workers:
        with held():  # as every command's imports are (`runs.cli.load_command`, why there)
            from runs.folder_moved import FolderMoved
            from runs.pipeline import RunBusy, RunError, run_campaign
            from runs.planner import CampaignTooLarge
            from runs.scoring_step import UncertifiedSet

        # PermissionError: a file or folder of a run folder this user may not write (its
        # `logs/`, `journal/`, `spec-history.jsonl`) ended a resume in a traceback.
        with user_errors(
            RunError, FileNotFoundError, CampaignTooLarge, PermissionError
        ), imports_frozen():
            try:
                return asyncio.run(
                    run_campaign(
                        spec_path, out, max_cost=max_cost, rehearse=rehearse, faults=faults,
                        sim_url=sim_url, figure_workers=workers,
                        abandon_batch_jobs=abandon_batch_jobs, resolved=resolved,
                    )
                )
            except RunBusy as exc:
                fail(str(exc), EXIT_BUSY)
            except FolderMoved as exc:  # what it wrote is kept: resumable, at its new place
                fail(str(exc), EXIT_INCOMPLETE)
            except DiskFull as exc:  # planning, scoring or the report: no room, or read-only
                fail(*disk_refused_says(exc, resumes=True))
            except UncertifiedSet as exc:  # scoring, the folder known by then
                assert resolved.path is not None
                fail(exc.line(resolved.path), EXIT_UNCERTIFIED)


def _figure_workers() -> contextlib.AbstractContextManager[FigureWorkers | None]:
    """The report's figure workers, or none where `DUTCHBOOK_FIGURE_WORKERS` is 0: the run
    then reads the audit and draws the figures itself, as it does for a campaign too big for
    them. A value it does not understand ends the run in one line, before a worker is
    started or a file written."""
    try:
        wanted = workers_wanted()
    except ValueError as exc:
        fail(str(exc))
    return FigureWorkers() if wanted else contextlib.nullcontext()


def _lost_answers_line(result: CampaignResult) -> str | None:
    """Accepted answers gone from `responses/` by the end of the run (a shard moved or
    deleted while it ran): dispatch counted them, so the run read as done, exit 0, while
    every arm went unscored (a tester's). The audit found them; so does the exit."""
    from engine.audit import missing_answers_line  # polars: not for `--help`

    audit = result.audit
    if audit is None:
        return None
    return missing_answers_line(audit.totals.answers_missing, str(result.run_dir), audit.parser)


def _incomplete_line(result: CampaignResult) -> str:
    """What an incomplete run says last: how many are unanswered, and what would answer them."""
    from runs.pipeline import ALL_GIVEN_UP

    queries = f"{result.unanswered()} (see above)"
    if result.all_given_up():  # nothing a resume asks: "run again" would say this for ever
        return f"incomplete: {queries}, {ALL_GIVEN_UP}"
    line = f"incomplete: {queries}; fix the cause and run the same command again to resume"
    return line + _not_asked_again(result)


def _not_asked_again(result: CampaignResult) -> str:
    """What of the unanswered queries the same command again does not ask, as parentheses
    after the line that counts them (an incomplete run's, the spend cap's): held by batch
    jobs, given up for good, or out of their answer-failure budget; "" where none is."""
    from engine.retry import GIVEN_UP_FOR_GOOD  # tenacity: not for `--help`

    line = ""
    lost = result.summary.lost_to_damage
    if held := result.summary.held_by_jobs:
        # A live model never asks what a batch job holds: the same command again said the
        # same line for ever.
        line += (
            f" ({sum(held.values()):,} of them held by batch jobs of an earlier run, which a "
            f"live model does not ask: set dispatch = \"batch\" again for "
            f"{', '.join(sorted(held))} to collect them)"
        )
    if lost:
        # Each loss was billed: no resume buys them again, so the same command again would
        # say this line for ever.
        line += f" ({lost:,} of them {GIVEN_UP_FOR_GOOD})"
    spent = result.summary.answer_budget_spent
    if not spent:
        return line
    line += (
        f" ({spent:,} of them spent their answer-failure budget: a resume asks them again only "
        "once max_answer_failures is raised in the spec"
    )
    # A model answering in fractions (11/36) failed every answer under the strict parser,
    # and `reparse` accepted all 11,792 from their kept replies without a call. Refusals
    # spend the budget and keep nothing a reparse reads.
    kept = 0
    if result.parser == "strict":
        from engine.reparse import spent_with_kept_replies  # polars: not for `--help`

        kept = spent_with_kept_replies(result.run_dir, result.answer_budget)
    if kept:
        whose = "their kept replies" if kept >= spent else f"the replies kept for {kept:,} of them"
        line += (
            f"; first try `dutchbook reparse {result.run_dir} --parser lenient`, which reads "
            f"{whose} again without a call"
        )
    return line + ")"


def register(app: typer.Typer) -> None:
    app.command("run")(run)
