"""A campaign's life: spec -> plan -> dispatch -> score -> report, resumable at every step.

Running the same spec into the same folder again resumes: the plan is the same (deterministic
request ids), the ledger says what is already accepted, and only the rest is asked.

Ctrl-C (SIGINT), SIGTERM or a hangup (SIGHUP) during dispatch stops starting attempts, lets
those in flight finish and be recorded, compacts the ledger and still scores what is there;
a second signal cancels at once (the ledger records what was in flight as `interrupted` when
next opened).
`--max-cost` is both a refusal of a run whose estimate is above it and a running cap on the
spend reported by the providers (`engine.spend`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from engine.batch_jobs import JOBS_FILE, AtProvider, at_provider, fold_jobs
from engine.batch_lane import lines_to_cut
from engine.batch_lost import (
    log_unlogged_then_unknown,
    lost_jobs,
    lost_jobs_line,
    write_down,
)
from engine.console_lines import SIGNAL_AGAIN, plural
from engine.dispatch import DispatchSummary, dispatch
from engine.durable import (
    DiskFull,
    disk_full_raised,
    has_no_room,
    is_disk_full,
    why_unwritable,
)
from engine.ledger import LedgerBusy
from engine.reparse import resume_refusal
from engine.retry import GIVEN_UP_FOR_GOOD
from engine.runlock import (
    LOCK_FILE,
    clear_pid,
    found_pid,
    put_back_pid,
    release_lock,
    write_pid,
)
from engine.scan import ATTEMPTS, RESPONSES, scan_attempts
from engine.shards import visible_shards
from engine.spend import beside_cap
from panels.arms import ARMS
from providers.batch_registry import batch_client_for
from providers.registry import adapter_for
from providers.types import ConfigError, ModelConfig
from providers.urls import IN_CLEAR, in_clear_to_another_host, sends_credentials
from runs.audit import run_audit
from runs.batch_bytes import PlannedSizes, answer_budget, left_sizes
from runs.damaged_files import (
    DERIVED,
    check_footers,
    damage_report,
    polars_panic,
    special_files_report,
)
from runs.design import (
    SPEC_FILE,
    DesignChanged,
    check_new_design,
    data_changes,
    design_matches,
    folder_units,
    freeze_design,
    other_design,
)
from runs.folder_lock import FolderBusy
from runs.folder_lock import take_folder_lock as lock_folder
from runs.folder_moved import moved_said
from runs.folder_writes import write_refusal
from runs.leftovers import remove_orphaned_scratch, scratch_folder
from runs.lost_answers import ASK_ALL_AGAIN, answers_refusal, gone_answers_refusal
from runs.memory import release_heap
from runs.model_options import check_model_options
from runs.output import (
    OutputClosed,
    OutputCut,
    OutputFull,
    files_written,
    mark_files_written,
    stdout_console,
    stdout_to_null,
    warn,
)
from runs.phases import PhaseClock
from runs.plan_checksums import (
    answers_outside_plan,
    lost_members,
    plan_damage,
    plan_damage_unless_written,
)
from runs.plan_estimate import resumed_estimate, save_estimate
from runs.planner import (
    PlanLine,
    PlannedQuery,
    PlanWriter,
    estimate,
    queries_before_sharing,
    summarise,
    write_plan,
)
from runs.planning_progress import PlanningProgress
from runs.rate_floors import run_floors
from runs.rehearsal import mark_folder, mixing_refusal, rehearsal_matters
from runs.report import write_report_folder
from runs.run_folder import ResolvedFolder, foreign_entries, has_run_marks
from runs.scored_from import report_summary
from runs.scoring_step import ScoredRun, score_run
from runs.signals import (
    INTERRUPTED_MESSAGE as INTERRUPTED_MESSAGE,  # re-exported: tests and scripts import it here
)
from runs.signals import (
    leave_terminal,
    raise_if_stop_pending,
    stop_signals_to_catch,
    stops_as_interrupt,
    terminal_fds,
)
from runs.spec import (
    CampaignSpec,
    SpecError,
    byte_capped_batch_models,
    check_batch_bytes,
    check_batch_floor,
    check_keys_read,
    faults_refusal,
    hash_picked_personalities,
    load_spec,
    short_batch_models,
)
from runs.units import UnitSource

if TYPE_CHECKING:  # the simulator is imported only when a run needs it
    from engine.audit import Audit
    from providers.sim.credentials import SimCredentials
    from runs.figure_workers import FigureWorkers


class RunError(RuntimeError):
    """A campaign that cannot start or continue; the message says why and what to do."""


class RunBusy(RunError):
    """Another live process is running a campaign in this folder."""


#: Above this many queries (`runs.planner.queries_before_sharing`) the report's figure
#: workers (about 115 MB each once warm) are ended before planning: planning and dispatch
#: hold more memory as the campaign grows, and with the workers beside them a paper-scale run
#: (409,100 queries before sharing) peaked at 468 MB while planning, close to issue 9's 500 MB
#: for its process tree; its report is dominated by its statistics anyway, not by the figures.
WORKERS_MAX_QUERIES = 100_000
#: What the user is told when the running spend cap stopped the run.
SPEND_CAP_HINT = "raise --max-cost and run the same command again to resume"
#: What a closing line says, in place of advice to run again, where every planned query left
#: unanswered is given up for good (`CampaignResult.all_given_up`): no run asks one again.
ALL_GIVEN_UP = f"all {GIVEN_UP_FOR_GOOD}"


@dataclass(frozen=True)
class CampaignResult:
    run_dir: Path
    summary: Any
    report: dict[str, Any]
    #: A signal stopped the dispatch (the run is resumable).
    interrupted: bool = False
    #: The running spend cap stopped the dispatch (resumable with a higher cap).
    spend_cap_reached: bool = False
    #: Faults the simulator this run started injected, by kind (empty without one).
    injected_faults: dict[str, int] = field(default_factory=dict)
    #: Why dispatch stopped when the disk filled up (resumable once there is space), or turned
    #: read-only (resumable once writable: `read_only`), else None.
    disk_full: str | None = None
    #: `disk_full` says the folder turned read-only (`engine.durable.FolderReadOnly`).
    read_only: bool = False
    #: The folder's retry and failure audit after this dispatch (`engine.audit.Audit`).
    audit: Audit | None = None
    #: Everything the simulator this run started counted (`SimHandle.counts()`: requests,
    #: faults by kind, its limiter's 429s...), None without one.
    sim_counts: dict[str, int] | None = None
    #: The spec's answer parser ("strict" or "lenient"), for the closing line's advice.
    parser: str = "strict"
    #: The spec's `max_answer_failures`, which this run held each request to (None: unknown).
    answer_budget: int | None = None
    #: Of a dispatch a second signal cancelled, the folder's batch jobs that may be at the
    #: provider (`engine.batch_jobs.at_provider`), said on the run's last line
    #: (`interrupted_line`); None otherwise (a first signal's lanes say theirs).
    jobs_left: AtProvider | None = None
    #: What cut the run's printing once its report was written whole (stdout's reader gone,
    #: a stdout not open for writing, or full; `runs.output.OutputCut`): the run ends as its
    #: own status says all the same (`runs.commands.run`), its report there; None otherwise.
    output_cut: OutputCut | None = None

    def unanswered(self) -> str:
        """"N planned queries unanswered", as the run's closing lines count them."""
        return f"{plural(self.summary.unaccepted, 'planned query', 'planned queries')} unanswered"

    def all_given_up(self) -> bool:
        """Whether every planned query left unanswered is given up for good, lost to damaged
        batch results (`engine.retry.GIVEN_UP_FOR_GOOD`): nothing a resume would ask,
        whatever its cap."""
        lost = self.summary.lost_to_damage
        return bool(lost) and lost == self.summary.unaccepted

    def spend_cap_line(self, kept: str | None = None) -> str | None:
        """"spend cap reached: $X of $Y ... — raise --max-cost ...", the line a run the
        running spend cap stopped prints on stdout before its "run folder:" line (scripts
        read it there; `runs.commands.run` prints it), or None where the cap did not stop
        it. `kept`, said before the hint, makes it the run's closing line on stderr. Where
        every query left unanswered is given up for good (`all_given_up`), it ends in their
        count and `ALL_GIVEN_UP` instead: the hint sent its user to a resume that asked
        nothing, and said so again, for ever."""
        if not self.spend_cap_reached:
            return None
        spend = self.summary.spend
        assert spend is not None, "the cap was reached: the dispatch had one"
        said = f"{spend.message()} — "
        if self.all_given_up():
            return f"{said}{'' if kept is None else f'{kept}, '}{self.unanswered()}, {ALL_GIVEN_UP}"
        return f"{said}{'' if kept is None else f'{kept}; '}{SPEND_CAP_HINT}"

    def interrupted_line(self) -> str:
        """The last line of an interrupted run: `INTERRUPTED_MESSAGE`, and, where a second
        signal cancelled dispatch with batch jobs uploaded or created and not collected,
        that they may be at the provider and the resume collects them. It said nothing of
        them: a double Ctrl-C while jobs were created left inputs a job may have been made
        of, to run and be billed, with no word that a resume (which finds each, or creates
        it) buys none twice."""
        left = self.jobs_left
        if not left:
            return INTERRUPTED_MESSAGE
        if left.simulator_jobs == left.jobs:  # gone with the simulator: the phrase says so
            return f"{INTERRUPTED_MESSAGE}; {left.phrase()}"
        return (f"{INTERRUPTED_MESSAGE}; batch jobs may be at the provider, which the resume "
                f"collects (nothing is bought twice): {left.phrase()}")


class StopSignals:
    """SIGINT/SIGTERM/SIGHUP handlers for one dispatch: the first asks the engine to stop
    starting attempts (`stop`), a second cancels the dispatch task outright.

    A hangup (the terminal closed, an SSH session dropped) stops the run as softly as
    Ctrl-C, so that the answers in flight, already paid for, are kept rather than left
    `interrupted` and asked again; the terminal is gone, so what this process still writes
    to it goes to /dev/null instead (a write to a hung-up terminal fails). Under `nohup`
    (a hangup ignored when the run started) it stays ignored.

    Installed on the running loop for the dispatch only; the handlers that were there
    before (asyncio.run's own, a test runner's) are put back afterwards.
    """

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.stop = asyncio.Event()
        self.count = 0
        #: Stop signals received, counted as each arrives (`_arrived`); `count` counts those
        #: the loop handed to `_handle`, a turn later.
        self.arrived = 0
        self.task: asyncio.Task[Any] | None = None
        self._on_first = on_first
        #: Of stdout and stderr, those that were a terminal when the handlers were installed
        #: (a hung-up terminal no longer says it is one).
        self._terminal_fds: tuple[int, ...] = ()

    def _handle(self, sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            leave_terminal(self._terminal_fds)
        self.count += 1
        if self.count == 1:
            self.stop.set()
            if self._on_first is not None:
                self._on_first()
        elif self.task is not None and not self.task.done():
            self.task.cancel()

    def _arrived(self, signum: int, frame: object) -> None:
        """Python's handler in place of asyncio's no-op: the signal's number still reaches
        the loop (the wakeup descriptor), which calls `_handle` on its next turn. A hangup
        leaves the terminal here: one the loop never hands over would be written to."""
        self.arrived += 1
        if signum == signal.SIGHUP:
            leave_terminal(self._terminal_fds)

    @property
    def hard(self) -> bool:
        """A second signal came: the dispatch was cancelled, not wound down."""
        return self.count > 1

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopSignals]:
        loop = asyncio.get_running_loop()
        previous: dict[signal.Signals, Any] = {}
        self._terminal_fds = terminal_fds()
        for sig in stop_signals_to_catch():
            try:
                before = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._handle, sig)
                signal.signal(sig, self._arrived)
                signal.siginterrupt(sig, False)  # as asyncio asks: calls it cuts restart
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread, or no signals here: run without handlers
            previous[sig] = before
        try:
            yield self
        finally:
            for sig, before in previous.items():
                loop.remove_signal_handler(sig)
                with contextlib.suppress(TypeError, ValueError):
                    signal.signal(sig, before if before is not None else signal.SIG_DFL)
            # A signal the loop had not handed over when its handlers were removed (as
            # dispatch ended) was dropped by asyncio: the run scored, reported and exited 0.
            self.count = max(self.count, self.arrived)


def default_run_dir(spec: CampaignSpec) -> Path:
    return Path("out") / spec.name


def check_max_cost(max_cost: float | None) -> None:
    """`--max-cost` is a number of USD, zero or more (inf: no cap); NaN would cap nothing."""
    if max_cost is not None and not max_cost >= 0:  # `not >=` also refuses NaN
        raise RunError(f"--max-cost must be a number of USD, 0 or more, not {max_cost}")


def check_run_folder(run_dir: Path) -> None:
    """Refuse, before anything is planned, a run folder that a file stands in the way of
    (the folder itself or one of its parents), or that this process may not write in (a
    read-only mount, another user's folder): `mkdir` and the folder's lock would only find
    out after planning, which takes seconds to minutes."""
    try:
        _check_run_folder(run_dir)
    except OSError as exc:  # a name too long, a parent it may not look in: not ENOENT
        # A file of the folder it may not read (its plan) is named, not the folder, which
        # exists and was said to be one it "cannot make".
        inside = exc.filename is not None and Path(exc.filename).parent == run_dir
        what = f"cannot read {exc.filename}" if inside else f"cannot make a run folder at {run_dir}"
        raise RunError(f"{what}: {exc.strerror or exc}") from None


def check_abandon(run_dir: Path, names: Iterable[str]) -> frozenset[str]:
    """The batch jobs `--abandon-batch-jobs` names (comma-separated ids or keys), each one a
    job of this folder not yet collected: a typo must not pass silently while the job it
    meant stays stuck, nor name a job of another folder."""
    names = list(names)
    wanted = frozenset(n.strip() for name in names for n in name.split(",") if n.strip())
    if names and not wanted:  # `--abandon-batch-jobs ""`: a key meant, none given
        raise RunError(
            "--abandon-batch-jobs names no job (give the ids or keys, comma-separated, that "
            "the run's last stop line names); nothing was sent"
        )
    if not wanted:
        return wanted
    jobs = fold_jobs(run_dir) if run_dir.is_dir() else {}
    known = {name for job in jobs.values() if job.live for name in (job.job_id, job.job_key)}
    if run_dir.is_dir():  # a job whose records were lost is given up by the same flag
        with _damage_named(run_dir):
            known.update(name for job in lost_jobs(run_dir) for name in job.names())
    strangers = sorted(wanted - known)
    if strangers:
        # "aaa, bbb is not a batch job" read as one name: several are said as several
        named = (
            f"{strangers[0]} is not a batch job"
            if len(strangers) == 1
            else f"{', '.join(strangers[:-1])} and {strangers[-1]} are not batch jobs"
        )
        raise RunError(
            f"--abandon-batch-jobs: {named} of {run_dir} waiting to be collected (the folder's job "
            "ids are in the run's last stop line and in batches/jobs.jsonl); nothing was sent"
        )
    return wanted


def _check_run_folder(run_dir: Path) -> None:
    for path in (run_dir, *run_dir.parents):
        if path.is_dir():
            if (reason := why_unwritable(path)) is not None:
                of = "" if path == run_dir else f", a parent of {run_dir}"
                raise RunError(
                    f"cannot write in {path} ({reason}){of}; give --out a folder you can write in"
                )
            if path != run_dir:
                return
            if has_run_marks(run_dir):  # a resume reads its files: a FIFO among them, for ever
                if (damaged := special_files_report(run_dir)) is not None:
                    raise RunError(damaged)
                # What it writes once dispatch has begun: found in the way there, the run
                # had paid for its answers, then ended without scores or report.
                if (refusal := write_refusal(run_dir)) is not None:
                    raise RunError(refusal)
                # Before the estimate, which a damaged plan's counts could make render every
                # prompt; checked again once the folder is locked (`_design_and_plan`).
                if (damaged := plan_damage_unless_written(run_dir) or lost_members(run_dir)):
                    raise RunError(damaged)
            elif names := foreign_entries(run_dir):
                raise RunError(
                    f"{run_dir} holds files and is not a run folder ({', '.join(names)}): a run "
                    "would write its report, scores and logs among them; give --out a new or "
                    "empty folder (or a run folder, to resume that run)"
                )
            return
        if path.exists() or path.is_symlink():
            parent = "" if path == run_dir else f" (a parent of {run_dir})"
            raise RunError(f"{path}{parent} is in the way: it is not a folder; give --out a folder")


def make_run_folder(run_dir: Path) -> None:
    """`run_dir` made with its parents; a full disk is `DiskFull`, anything else one line."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFull(run_dir, exc) from exc
        raise RunError(f"cannot make the run folder {run_dir}: {exc.strerror or exc}") from exc


def check_cap_counts(spec: CampaignSpec, max_cost: float | None) -> None:
    """A finite `--max-cost` must have a paid model's usage to count: with no model priced
    the cap counts nothing, and a run meant to be capped would spend without limit (a warning
    at the start and a line at the end were all it got). The simulator's models cost nothing."""
    from engine.spend import typed_dollars, unpriced

    if max_cost is None or math.isinf(max_cost):  # no cap (`run_campaign` makes inf None)
        return
    paid = any(m.provider != "sim" for m in spec.models)
    if paid and len(unpriced(spec.models)) == len(spec.models):
        raise RunError(
            f"--max-cost {typed_dollars(max_cost)} would cap nothing: no model of the spec has "
            "prices (price_in and price_out, or batch prices for a batch model); add them, or "
            "leave --max-cost out"
        )


def simulator_faults(
    spec: CampaignSpec, rehearse: bool, faults: str | None, sim_url: str | None
) -> str:
    """The faults the simulator a run starts injects: `faults` (`--faults`), else the spec's
    `sim_faults` (the quickstart's light ones), or "none" beside a simulator already running
    (`--sim-url`: its own). `--faults none` turned nothing off while "none" meant not given."""
    # `--faults` and `--sim-url` only mean something when the campaign uses the simulator.
    from providers.sim.faults import parse_faults

    try:
        parse_faults(faults or "none")
    except ValueError as exc:
        raise RunError(f"--faults: {faults_refusal(exc)}") from None
    uses_faults = (faults or "").strip() not in ("", "none")
    if (uses_faults or sim_url) and not needs_simulator(spec, rehearse):
        raise RunError(
            "--faults and --sim-url apply to the local simulator: add --rehearse "
            "(or use provider = \"sim\" models)"
        )
    if uses_faults and sim_url:
        raise RunError("--faults is the simulator's setting: give it to `serve-sim` at --sim-url")
    if sim_url is not None and not sim_url.startswith(("http://127.", "http://localhost")):
        raise RunError(
            f"--sim-url must be a simulator on this machine (http://127.0.0.1:PORT), not {sim_url}"
        )
    if sim_url is not None:
        check_simulator_answers(sim_url)
    # As parsed (its items stripped, empty ones passed over), as `serve-sim` says it:
    # `--faults " flaky"` was printed "( flaky)" in the line of faults injected.
    if faults is not None:
        return parse_faults(faults).name
    return parse_faults(spec.sim_faults).name if sim_url is None else "none"


#: How long `--sim-url`'s simulator has to answer before the run is refused.
SIM_URL_TIMEOUT_S = 5.0


def check_simulator_answers(sim_url: str) -> None:
    """The simulator at `--sim-url` answers its counts route, before anything is planned.

    Without this, a rehearsal against a simulator that is not running planned the whole
    campaign (seconds to minutes), stopped every lane on its first connection error, and
    wrote a report of nothing."""
    from providers.sim.server import read_live_counts

    start = "start `dutchbook serve-sim` there first, or leave out --sim-url to start one"
    try:
        counts = read_live_counts(sim_url, timeout_s=SIM_URL_TIMEOUT_S)
    except (OSError, ValueError) as exc:  # URLError is an OSError
        reason = getattr(exc, "reason", exc)
        why = getattr(reason, "strerror", None) or str(reason)
        raise RunError(f"--sim-url: nothing answers at {sim_url} ({why}); {start}") from None
    if counts is None:
        raise RunError(f"--sim-url: {sim_url} answers, but not as dutchbook's simulator; {start}")


def check_credentials(spec: CampaignSpec, env: Mapping[str, str]) -> None:
    """Every real provider's credentials must be present before anything is sent.

    Building the adapter is the check: it is what the run would do, so the message is the
    provider module's own (naming the model and the variables, never their values), the
    first model's in full and the others' names after it: one at a time, a campaign of five
    providers took five runs to learn what each lacked. After
    `runs.model_options.check_model_options`, which refuses the spec's own bad values (no
    hint of --rehearse: a rehearsal would refuse them too), so what is lacking here is the
    environment's, which a rehearsal's fake credentials stand in for.
    """
    failed: list[tuple[int, ModelConfig, ConfigError]] = []
    for index, model in enumerate(spec.models):
        if model.provider == "sim":
            continue
        if sends_credentials(model) and in_clear_to_another_host(model.base_url or ""):
            failed.append((index, model, ConfigError(
                f"model {model.name!r} ({model.provider}): base_url must be an https:// URL; "
                f"{IN_CLEAR}"
            )))  # fmt: skip
            continue
        try:
            adapter_for(model, env)
            if model.dispatch == "batch":
                batch_client_for(model, env)
        except ConfigError as exc:
            failed.append((index, model, exc))
    if not failed:
        return
    index, _, first = failed[0]
    others = ", ".join(f"{m.name!r} ({m.provider})" for _, m, _ in failed[1:])
    also = f"; also lacking what they need to be asked: {others}" if others else ""
    raise SpecError(
        spec.path,
        f"models[{index}]",
        f"{first}{also} (or run with --rehearse to use the local simulator)",
    )


def needs_simulator(spec: CampaignSpec, rehearse: bool) -> bool:
    return rehearse or any(m.provider == "sim" for m in spec.models)


@contextlib.asynccontextmanager
async def simulator_if_needed(
    spec: CampaignSpec,
    rehearse: bool,
    credentials: SimCredentials | None = None,
    *,
    faults: str = "none",
    sim_url: str | None = None,
    on_stop: Callable[[dict[str, int]], None] | None = None,
) -> AsyncIterator[str | None]:
    """The simulator's root URL when the campaign needs one (started here, with `faults`
    injected, unless `sim_url` names one already running); `on_stop` gets its counts."""
    if not needs_simulator(spec, rehearse):
        yield None
        return
    if sim_url is not None:
        yield sim_url.rstrip("/")
        return
    from providers.sim.server import start_sim

    handle = await start_sim(port=0, faults=faults, seed=spec.seed, credentials=credentials)
    try:
        yield handle.root_url
    finally:
        counts = handle.counts()
        await handle.stop()
        if on_stop is not None:
            on_stop(counts)


def fault_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """The faults a simulator injected, by kind (from its `counts()`)."""
    prefix = "fault."
    return {k.removeprefix(prefix): v for k, v in sorted(counts.items()) if k.startswith(prefix)}


def injected_faults_line(
    kinds: dict[str, int], spec: CampaignSpec, options: CampaignOptions
) -> str:
    """The line of the faults a simulator injected, by kind, the `slow` ones said with what
    they are: a delay, which a retry follows only where it outlasts the model's `timeout_s`
    (a user saw 324 faults injected and 314 retry attempts, the difference the slow ones)."""
    from providers.sim.faults import FaultKind, parse_faults

    said = [f"{kind} {n:,}" for kind, n in kinds.items()]
    if slow := kinds.get(FaultKind.SLOW.value):
        delay = parse_faults(options.faults).slow_delay_s
        timeouts = [model.timeout_s for model in spec.models
                    if options.rehearse or model.provider == "sim"]  # fmt: skip
        what = (
            "shorter than every timeout_s: no retry follows" if all(delay < t for t in timeouts)
            else "past timeout_s: retried as a timeout" if all(delay >= t for t in timeouts)
            else "retried as a timeout where it outlasts the model's timeout_s"
        )
        at = list(kinds).index(FaultKind.SLOW.value)
        said[at] = f"slow {slow:,} (a {delay:g} s delay, {what})"
    return (
        f"simulator injected {plural(sum(kinds.values()), 'fault')} ({options.faults}): "
        + (", ".join(said) or "none drawn")
    )


def resolve_models(
    spec: CampaignSpec,
    sim_root: str | None,
    rehearse: bool,
    workdir: Path,
    credentials: SimCredentials | None = None,
) -> tuple[dict[str, ModelConfig], dict[str, Mapping[str, str]]]:
    """Point simulated (and, when rehearsing, all) models at the local simulator."""
    models: dict[str, ModelConfig] = {}
    envs: dict[str, Mapping[str, str]] = {}
    for model in spec.models:
        if model.provider == "sim" or rehearse:
            assert sim_root is not None
            from providers.sim.rehearse import rehearse_model

            if credentials is None:
                config, env = rehearse_model(model, sim_root, workdir)
            else:
                config, env = rehearse_model(model, sim_root, workdir, credentials)
            models[model.name], envs[model.name] = config, env
        else:
            models[model.name], envs[model.name] = model, os.environ
    return models, envs


async def run_campaign(
    spec_path: str | Path,
    out: str | Path | None = None,
    *,
    max_cost: float | None = None,
    rehearse: bool = False,
    console: Console | None = None,
    progress: bool = True,
    sim_credentials: SimCredentials | None = None,
    faults: str | None = None,
    sim_url: str | None = None,
    figure_workers: FigureWorkers | None = None,
    abandon_batch_jobs: Iterable[str] = (),
    resolved: ResolvedFolder | None = None,
) -> CampaignResult:
    """Plan, dispatch, score and report one campaign (see the module docstring).

    `faults` (a `serve-sim --faults` profile or `kind=rate,...`) is injected by the simulator
    a rehearsal starts (None: the spec's `sim_faults`; "none" turns them off); `sim_url`
    rehearses against a simulator already running instead (say, one whose fault counts must
    outlive this process).

    A signal or the spend cap ends dispatch early without an error: the result says so
    (`interrupted`, `spend_cap_reached`) and what was answered is scored.
    `sim_credentials` replaces the simulator's default fake credentials (rehearsing, say,
    AWS session tokens); the default is `providers.sim.credentials.DEFAULT_CREDENTIALS`.
    `figure_workers` (`runs.figure_workers`, the caller's to close) draw the report's figures
    in their own processes, unless the campaign is too big for them (`WORKERS_MAX_QUERIES`).
    `abandon_batch_jobs` names batch jobs of the folder (ids or keys) to give up, and ask their
    lines again, if their provider answers 404 for them (`engine.batch_lane`).
    `resolved`, where given, is told the run folder as soon as it is known, for a caller
    that names it when the run is stopped before it returns (`dutchbook run`).
    """
    clock = PhaseClock()
    console = console or stdout_console()
    check_max_cost(max_cost)
    # -0.0 is 0 ("$-0.00" was said); inf is no cap ("spend: $0.0148 of the $inf cap").
    max_cost = None if max_cost is None or math.isinf(max_cost) else max_cost + 0.0
    spec = load_spec(spec_path)
    run_dir = Path(out) if out else default_run_dir(spec)
    if resolved is not None:  # as soon as it is known: a stop from here on names it
        resolved.path = run_dir
    faults = simulator_faults(spec, rehearse, faults, sim_url)
    check_cap_counts(spec, max_cost)
    # Before the folder is touched: a rehearsal built its models only after saving the
    # design, and the corrected spec was then refused as another design.
    check_model_options(spec, rehearse=rehearse, credentials=sim_credentials)
    # A resume's too (`batch_max_lines` may change on resume), but by the queries it has left
    # to ask, once the folder is held (`_check_batch_left`).
    # First: whether it resumes looks inside the folder (a name too long was said of its plan).
    check_run_folder(run_dir)
    if short_batch_models(spec) and not _resumes(spec, run_dir):
        check_batch_floor(spec)
    # A folder's own spec may hold keys taken when it was made. Any folder with a plan is
    # spared: one of another design is refused at its freeze anyway, and `_resumes` would
    # hash the input files once more on every resume.
    if not (run_dir / "plan.parquet").is_file():
        check_keys_read(spec)
    abandon = check_abandon(run_dir, abandon_batch_jobs)
    remove_orphaned_scratch()  # what runs killed before left in the temporary folder
    units = folder_units(spec, run_dir)
    for entry in spec.arms:
        units.check_requirements(ARMS[entry.name])
    check_new_design(spec, units, run_dir)  # before the prompts are rendered, for a new folder
    if not rehearse:
        check_credentials(spec, os.environ)
    # Once refusals are past, before planning; on stderr, as `plan` says them and warnings
    # go: on the console, stdout, `run ... > log` kept them from the screen.
    for line in hash_picked_personalities(spec):
        warn(line)
    # Held from before the plan is rendered (seconds, minutes at paper scale): `status` said
    # "no run folder" of a new run all that while, and a second run on the folder planned too.
    hold = take_folder_lock(run_dir)
    try:
        result = await _planned_campaign(
            spec, run_dir, units, hold,
            CampaignOptions(
                max_cost=max_cost, rehearse=rehearse, console=console, progress=progress,
                sim_credentials=sim_credentials, faults=faults, sim_url=sim_url, clock=clock,
                figure_workers=figure_workers, abandon_batch_jobs=abandon,
            ),
        )  # fmt: skip
    except BaseException as exc:
        hold.release(run_dir, exc)
        raise
    hold.release(run_dir)
    return result


async def _planned_campaign(
    spec: CampaignSpec, run_dir: Path, units: UnitSource, hold: FolderHold,
    options: CampaignOptions,
) -> CampaignResult:  # fmt: skip
    """The estimate (read back on a resume, else rendered), then the campaign; the folder held."""
    # A resume of the same design reads the estimate saved with its plan (runs.plan_estimate)
    # instead of rendering every prompt again; a new folder renders and counts.
    saved = resumed_estimate(spec, run_dir)
    figure_workers = options.figure_workers
    if figure_workers is not None and _queries_asked(spec, units, saved) > WORKERS_MAX_QUERIES:
        figure_workers.close()  # before they warm up beside planning (see WORKERS_MAX_QUERIES)
        options = replace(options, figure_workers=None)
    with _staged_plan(run_dir, saved is None) as staged, _damage_named(run_dir):
        writer = staged.writer if staged is not None else None
        # A new plan's batch lines are sized as it renders, and a `batch_max_bytes` that cuts
        # them below the provider's floor refused then, before anything is written (a
        # resume's, by the lines it has left: `_check_batch_left`).
        sized = PlannedSizes(spec) if staged is not None else None
        lines = (
            saved
            if saved is not None
            else _estimate(spec, units, writer, run_dir, options.console, options.progress,
                           sized.on_query if sized is not None else None)
        )  # fmt: skip
        if sized is not None:
            check_batch_bytes(spec, sized.sizes)
        return await _campaign(spec, run_dir, units, lines, saved is None, staged, options, hold)


@contextlib.contextmanager
def _damage_named(run_dir: Path) -> Iterator[None]:
    """A read of a damaged Parquet file of the folder becomes a `RunError` naming the file,
    polars' panic on one too (a `BaseException`)."""
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, Exception) and not polars_panic(exc):
            raise  # Ctrl-C, an exit, a cancelled task: not the folder's
        message = damage_report(run_dir, exc)
        if message is None:
            raise
        raise RunError(message) from exc


def _queries_asked(spec: CampaignSpec, units: UnitSource, saved: list[PlanLine] | None) -> int:
    """Every arm's view of a query, shared ones counted per arm: from a resume's saved
    estimate (its lines count both), else from the spec without rendering anything (a resume
    need not load every arm's units for it)."""
    if saved is not None:
        return sum(line.queries + line.shared for line in saved)
    return queries_before_sharing(spec, units)


#: What a full disk while the plan is staged says the staging folder is, and what to do.
STAGING_FULL = (
    "the system's temporary folder, where a new run's plan is written before it goes into the "
    "run folder; free space there, or point TMPDIR at a folder with room"
)


@dataclass(frozen=True)
class StagedPlan:
    """A new folder's plan written while the estimate renders every prompt (so they are
    rendered once): `writer`'s parts in a temporary folder outside the run folder (whose lock
    `run_campaign` already holds), committed into it by `_design_and_plan`, which then
    `discard`s the folder at once rather than when the campaign ends (a run killed during
    dispatch would otherwise leave it behind in the system's temporary folder)."""

    writer: PlanWriter
    folder: tempfile.TemporaryDirectory[str]

    def discard(self) -> None:
        self.writer.close()  # a part still being written would land in the removed folder
        self.folder.cleanup()  # idempotent: `_staged_plan` calls it again on the way out


@contextlib.contextmanager
def _staged_plan(run_dir: Path, rendering: bool) -> Iterator[StagedPlan | None]:
    """The `StagedPlan` of a new folder, removed at the latest when the context ends; None
    when nothing is rendered or the folder already has its plan."""
    if not rendering or (run_dir / "plan.parquet").exists():
        yield None
        return
    folder = scratch_folder("plan")
    staged = StagedPlan(PlanWriter(Path(folder.name)), folder)
    try:
        yield staged
    finally:
        staged.discard()


def _estimate(
    spec: CampaignSpec,
    units: UnitSource,
    staged: PlanWriter | None,
    run_dir: Path,
    console: Console,
    progress: bool,
    on_query: Callable[[PlannedQuery], None] | None = None,
) -> list[PlanLine]:
    # The staged plan's parts may run out of room in the system's temporary folder, not in
    # run_dir: the message must send the user there (freeing space in run_dir would not help).
    # Rendering a paper-scale plan takes seconds: count them, as dispatch counts answers.
    where, note = (run_dir, "") if staged is None else (staged.staging, STAGING_FULL)
    with disk_full_raised(where, staged.staging if staged else None, note), PlanningProgress(
        console, spec.name, enabled=progress and console.is_terminal, lines=progress
    ) as shown:
        return estimate(spec, units, plan=staged, progress=shown.update, on_query=on_query)


@dataclass(frozen=True)
class CampaignOptions:
    """How `run_campaign` was asked to run, handed down its steps as one value."""

    max_cost: float | None
    rehearse: bool
    console: Console
    progress: bool
    sim_credentials: SimCredentials | None
    faults: str
    sim_url: str | None
    clock: PhaseClock
    figure_workers: FigureWorkers | None = None
    #: Batch jobs (ids or keys) to abandon if their provider answers 404 for them.
    abandon_batch_jobs: frozenset[str] = frozenset()

    def simulated_here(self, spec: CampaignSpec) -> frozenset[str]:
        """The batch models whose provider is a simulator this run starts inside itself (a
        rehearsal's, or a sim model's, without --sim-url): it holds no job an earlier run
        made (`engine.dispatch`'s `batch_simulated_here`)."""
        return frozenset(
            model.name for model in spec.models
            if model.dispatch == "batch" and self.sim_url is None
            and (self.rehearse or model.provider == "sim")
        )  # fmt: skip


async def _campaign(
    spec: CampaignSpec,
    run_dir: Path,
    units: UnitSource,
    lines: list[PlanLine],
    rendered: bool,
    staged: StagedPlan | None,
    options: CampaignOptions,
    hold: FolderHold,
) -> CampaignResult:
    """The campaign once estimated, the folder held (`hold`): the cost check, then the rest."""
    plan_summary = summarise(lines)
    # At each model's dispatch mode: a batch model is charged its batch prices.
    cost = plan_summary["total"]["planned_cost_usd"]
    max_cost = options.max_cost
    if max_cost is not None and cost is not None and cost > max_cost and not options.rehearse:
        raise RunError(
            "estimated cost {} exceeds --max-cost {}; nothing was sent".format(
                *beside_cap(cost, max_cost)
            )
        )
    # planning, scoring or the report; the folder moved mid-run (`runs.folder_moved`)
    with disk_full_raised(run_dir, folder=run_dir), moved_said(run_dir):
        return await _run_locked(
            spec, run_dir, units, plan_summary, lines if rendered else None, staged,
            options, hold,
        )


def _check_lost_jobs(run_dir: Path, abandon: frozenset[str], console: Console) -> None:
    """Refuse to go on while a batch job created at a provider is missing from the jobs file
    (`engine.batch_lost`): its requests would be bought again, by a batch lane or, the model
    switched to `dispatch = "live"`, a live one. Jobs the user named to
    `--abandon-batch-jobs` are written down as given up, and their requests asked again;
    jobs whose every line the ledger holds, as collected. Jobs the jobs file records as
    created that the log does not name are logged now (`engine.batch_lost.log_unlogged`), so
    a later loss of the file still names them; the log is read once for both."""
    if not run_dir.is_dir():
        return
    # whatever the spec says now: `dispatch` may change
    unknown = log_unlogged_then_unknown(run_dir)
    unnamed = [job for job in unknown if job.lost and not abandon & set(job.names())]
    if unnamed:
        raise RunError(f"{lost_jobs_line(run_dir, unnamed)}; nothing was sent")
    if given_up := write_down(run_dir, unknown, abandon):
        console.print(
            f"gave up {plural(given_up, 'batch job')} whose records were lost from "
            f"{run_dir / JOBS_FILE}: their requests are asked again",
            soft_wrap=True,
        )


def _resumes(spec: CampaignSpec, run_dir: Path) -> bool:
    """Whether `spec` resumes `run_dir`'s plan: the folder has one, and the design matches."""
    return (run_dir / "plan.parquet").is_file() and design_matches(spec, run_dir)


def _check_batch_left(
    spec: CampaignSpec, run_dir: Path, simulated_here: frozenset[str] = frozenset()
) -> None:
    """A resume's `check_batch_floor`: a batch model's `batch_max_lines` below the least that
    cuts every count of queries (`BatchLimits.least_max_lines`, Bedrock's 199) is refused
    only if it would leave some of those the folder has left to ask waiting below the floor
    (`engine.batch_lane.lines_to_cut`, `BatchLimits.stranded`). Their count is read from the
    plan and the ledger only for such a model: the dispatch reads the ledger again as it
    feeds the lane, one read more, which no other run pays. Likewise its `check_batch_bytes`,
    by the lines it has left (`runs.batch_bytes.left_sizes`), for a model whose
    `batch_max_bytes` lowers its provider's. Both count the lines of the jobs the resume
    gives up and asks again (`engine.batch_lane.asked_again`: those a simulator inside an
    earlier run held, where `simulated_here`, `CampaignOptions.simulated_here`, names the
    model), which a rehearsal's check had left out as held by jobs, but not those the lane
    gives up at once (`max_attempts = 1`). Before the design is frozen, so a refused resume
    records no spec change."""
    short, capped = short_batch_models(spec), byte_capped_batch_models(spec)
    if not short and not capped:
        return
    if not _resumes(spec, run_dir):  # the folder changed since `run_campaign` looked
        check_batch_floor(spec)  # a new plan's lines were sized as it rendered
        return
    budget = answer_budget(spec)  # as `dispatch`'s policy
    plan = run_dir / "plan.parquet"
    check_batch_floor(spec, {
        name: lines_to_cut(run_dir, plan, name, budget, simulated_here=name in simulated_here,
                           fallback_live=spec.model(name).batch_fallback_live,
                           max_attempts=spec.max_attempts)
        for name in short
    })  # fmt: skip
    if capped:
        check_batch_bytes(spec, left_sizes(spec, run_dir, plan, simulated_here), left=True)


@dataclass
class FolderHold:
    """The folder's lock a run holds (`take_folder_lock`), and the pid file it found there.

    A resume refused before its ledger opened (the design changed, answers or the batch jobs
    file lost, ...) did nothing to what a died run left: the pid file it found is put back, so
    `status` still says that run died, its lanes "when the run died" and its batch jobs still
    at the provider, where it said the run had stopped. The ledger, once open, records the
    died run's unresolved attempts as interrupted; from then the pid file is this run's to
    clear.

    The folder is made and locked before the plan is rendered, so that `status` says the run
    is live and planning; a run that leaves having written nothing else there (refused over
    `--max-cost` once planned, stopped while it planned) takes its lock file away again, and
    the folders it made (`--out a/b` where neither was there): a mistyped `--out` must not
    leave an empty folder behind. A run waiting for the lock meanwhile takes the file at the
    path, not the one removed (`engine.runlock.acquire_lock`)."""

    fd: int
    #: The pid file found when the lock was taken (`engine.runlock.found_pid`).
    found: bytes | None
    ledger_opened: bool = False
    #: The names the folder held before the run locked it (none where the run made it).
    held_before: frozenset[str] = frozenset()
    #: The outermost folder the run made (`run_dir` or a parent of it); None: none.
    made_from: Path | None = None

    def opened(self) -> None:
        """Dispatch's ledger is open (`engine.dispatch.dispatch(on_ledger_open=)`)."""
        self.ledger_opened = True

    def release(self, run_dir: Path, error: BaseException | None = None) -> None:
        """Clear (or put back) the pid file, then let go of the lock, in that order: the
        lock's next holder writes its own. `error`, the one the run ends with: a full disk
        met before the run kept anything in the folder (its lock and the folder it made
        taken away again) is marked so (`DiskFull.nothing_kept`), and said so: "nothing
        written was lost ... to resume" was said of a folder that was no more, or held only
        the lock (a tester's, a new run on a disk already full)."""
        if self.ledger_opened:
            clear_pid(run_dir)
        else:
            put_back_pid(run_dir, self.found)
            if self._take_back(run_dir) and isinstance(error, DiskFull):
                error.nothing_kept = True
        release_lock(self.fd)

    def _take_back(self, run_dir: Path) -> bool:
        """Remove the lock file, and the folder if the run made it, when the run wrote
        nothing else there; before the lock is let go, so no other run writes there now.
        Whether the lock file is removed (the folder then as the run found it, or gone)."""
        with contextlib.suppress(OSError):  # a folder it may not list or change: left as is
            if {p.name for p in run_dir.iterdir()} - self.held_before != {LOCK_FILE}:
                return False
            (run_dir / LOCK_FILE).unlink()
            if self.made_from is None:  # the folder was there before the run
                return True
            # The folders it made, inward out, each only while empty (`rmdir`): a parent that
            # another process filled meanwhile stays.
            for folder in (run_dir, *run_dir.parents):
                folder.rmdir()
                if folder == self.made_from:
                    break
            return True
        return False


def take_folder_lock(run_dir: Path) -> FolderHold:
    """The folder's lock (`run_dir/.lock`), held from before anything is written to the end.

    The ledger's own lock (`journal/.lock`) is taken only at dispatch; two runs started at
    once on a new folder would both plan into it before that. This one comes first, so the
    second run is told the folder is busy before it writes a byte. The pid file says who,
    from the start: `status` says the run is live while it plans and checks the folder,
    which is made here first (with its parents) when there is none.
    """
    made_from = _first_missing(run_dir)
    listed = made_from is None and run_dir.is_dir()  # a file there: make_run_folder says so
    held_before = frozenset(p.name for p in run_dir.iterdir()) if listed else frozenset()
    for tries_left in reversed(range(3)):
        make_run_folder(run_dir)
        try:
            fd = lock_folder(
                run_dir,
                "let it finish, or stop it, then run again",
                "give --out a folder you can write in",
            )
            break
        except FolderBusy as exc:
            raise RunBusy(str(exc)) from None
        except FileNotFoundError:  # a run that wrote nothing took the folder away meanwhile
            if not tries_left:
                raise
    try:
        hold = FolderHold(fd, found_pid(run_dir), held_before=held_before, made_from=made_from)
    except BaseException:
        release_lock(fd)
        raise
    try:
        with disk_full_raised(run_dir):
            write_pid(run_dir)
    except BaseException as exc:  # a disk already full: the lock file and the folder go
        hold.release(run_dir, exc)
        raise
    return hold


def _first_missing(run_dir: Path) -> Path | None:
    """The outermost of `run_dir` and its parents that does not exist yet (None: `run_dir`
    exists): what `make_run_folder` makes, and a run that wrote nothing takes away."""
    missing = None
    for folder in (run_dir, *run_dir.parents):
        if folder.exists():
            return missing
        missing = folder
    return missing


async def _run_locked(
    spec: CampaignSpec,
    run_dir: Path,
    units: UnitSource,
    plan_summary: dict[str, Any],
    to_save: list[PlanLine] | None,
    staged: StagedPlan | None,
    options: CampaignOptions,
    hold: FolderHold,
) -> CampaignResult:
    """The campaign once this process holds the folder (`hold`): design, plan, dispatch,
    score, report."""
    console, clock = options.console, options.clock
    with _damage_named(run_dir):
        _check_lost_jobs(run_dir, options.abandon_batch_jobs, console)
        _check_batch_left(spec, run_dir, options.simulated_here(spec))
    plan_path = _design_and_plan(
        spec, run_dir, units, plan_summary, to_save, staged, options.rehearse, console
    )
    release_heap()  # planning's garbage (runs.memory), before dispatch allocates its own
    raise_if_stop_pending()  # a stop while planning, dropped: nothing is sent, nothing paid
    clock.lap("plan", run_dir)
    with _damage_named(run_dir):
        # Every lane reads the ledger's shards to skip what is answered: a damaged one would
        # stop each lane with polars' error; here it is one line naming the file.
        check_footers(p for kind in (ATTEMPTS, RESPONSES) for p in visible_shards(run_dir / kind))
    signals = StopSignals(
        on_first=lambda: console.print(
            f"stopping: finishing the attempts in flight ({SIGNAL_AGAIN})",
            soft_wrap=True,
        )
    )
    injected: dict[str, int] = {}  # the simulator's counts, once it has stopped
    summary = await _dispatch_campaign(
        spec, run_dir, plan_path, signals, injected.update, options, hold.opened
    )
    if summary is None or signals.hard:  # a second signal (as dispatch ended too): out at once
        return CampaignResult(run_dir=run_dir, summary=None, report={}, interrupted=True,
                              jobs_left=_jobs_left(run_dir))
    clock.lap("dispatch", run_dir)
    # Ctrl-C ends scoring and the report at once, as SIGTERM does: dispatch's handlers gave
    # SIGINT back to asyncio.run's, which only cancels the task at its next await, and the
    # report ran to its end (seconds; minutes at paper scale) before the run said
    # "interrupted".
    with stops_as_interrupt():
        return _score_and_report(
            spec, run_dir, units, summary, signals.count > 0, injected, options, console, clock
        )


def _jobs_left(run_dir: Path) -> AtProvider | None:
    """The folder's batch jobs not collected (`CampaignResult.interrupted_line`), if any."""
    if not (run_dir / JOBS_FILE).is_file():
        return None
    attempts = scan_attempts(run_dir, ["request_id", "attempt", "outcome"])
    return at_provider(fold_jobs(run_dir), attempts)


def _design_and_plan(
    spec: CampaignSpec,
    run_dir: Path,
    units: UnitSource,
    plan_summary: dict[str, Any],
    to_save: list[PlanLine] | None,
    staged: StagedPlan | None,
    rehearse: bool,
    console: Console,
) -> Path:
    """Freeze the design (or check a resume keeps it) and write the plan once; its path.

    `to_save` (the estimate rendered for this run, None when it was read back) is kept
    beside the plan for the next resume; `staged`, the plan written while it was rendered,
    is committed unless the folder has a plan by now (then it is left unused), and its
    temporary folder removed either way before dispatch starts."""
    if (mixing := mixing_refusal(run_dir, spec.models, rehearse=rehearse)) is not None:
        raise RunError(mixing)  # before freeze_design writes anything
    try:
        _check_last_parser(spec, run_dir)
        resumed = freeze_design(spec, run_dir)
    except DesignChanged as exc:
        raise RunError(str(exc)) from None
    if rehearsal_matters(spec.models):
        mark_folder(run_dir, rehearse)  # before anything is asked
    if resumed:
        _check_lost_answers(spec, run_dir)
    plan_path = run_dir / "plan.parquet"
    planned_now = not plan_path.exists()
    if not planned_now:
        if (damaged := plan_damage(run_dir) or lost_members(run_dir)) is not None:
            raise RunError(damaged)  # a resume would pay for what the damaged plan says
    elif staged is not None:
        _commit_staged(staged, run_dir)
    else:
        write_plan(spec, run_dir, units)
    if resumed and (outside := answers_outside_plan(run_dir, planned_now=planned_now)):
        raise RunError(outside)  # planned again to other ids: it would pay for them twice
    if staged is not None:
        staged.discard()  # committed, or unused: the folder has its plan either way
    if to_save is not None:
        save_estimate(run_dir, spec, to_save)
    console.print(
        f"[bold]{spec.name}[/]: {plural(plan_summary['total']['queries'], 'query', 'queries')} "
        "planned"
        + (" (resuming)" if resumed else "")
        + (" — rehearsal on the local simulator" if rehearse else "")
    )
    if not resumed:  # a resume's figures would count what is already answered
        for line in run_floors(spec, plan_summary, rehearse=rehearse):
            console.print(line, markup=False, highlight=False)
    return plan_path


def _check_last_parser(spec: CampaignSpec, run_dir: Path) -> None:
    """Refuse a resume of a folder whose answers `dutchbook reparse` may have read with a
    stricter parser than the spec's (`logs/reparses.jsonl`), in the words of
    `engine.reparse.resume_refusal`, which says why and what to do (the audit says the
    same after lanes that ended early). A reparse back to the spec's parser (no call)
    clears it; a strict spec's folder read by lenient is let through. Call with the
    folder's lock held (`reparse` takes it too)."""
    refusal = resume_refusal(run_dir, spec.parser, spec="this spec")
    if refusal is None:
        return
    if (run_dir / SPEC_FILE).exists() and (
        other_design(spec, run_dir) or data_changes(spec, run_dir)
    ):
        return  # another design: `freeze_design` refuses the resume anyway, and says why
    raise RunError(f"{run_dir}: {refusal}")


def _check_lost_answers(spec: CampaignSpec, run_dir: Path) -> None:
    """Refuse a resume of a folder whose ledger holds accepted attempts whose answers are not
    in `responses/` (`runs.lost_answers`, as `score`, `repair` and `report` refuse it: a
    deleted or moved file). Dispatch skips what `responses/` holds, so it would ask them
    again and pay for each, as a tester's resume did for 534 (exit 0, every request then
    accepted twice), though the replies are kept and `dutchbook reparse` rebuilds them
    without a call. Run after `_check_last_parser`:
    past it, the parser in force takes every reply recorded `ok`, so none of these is one a
    reparse rejected.

    The reverse, answers whose attempts are lost from `attempts/`, is not refused: those
    requests are answered, so a resume asks (and pays for) none of them again; only the
    audit's retry counts miss what `attempts/` held, which the audit says.

    Answers held twice in `responses/` (a shard put back after a reparse) are refused too,
    before anything is sent: the run ends by scoring, which could read either copy; and so
    are answers of requests a plan its checksums vouch for does not hold (another run's
    shard, an id damaged on disk), with the reparse that leaves them out, where the plan
    check after this one told the user to plan again, a dead end.

    So are a finished run's answers gone with their replies (`gone_answers_refusal`: the
    shards its scores were computed from, no reparse replacing them), which no reparse
    rebuilds: the resume asked every one again, paid for each with a real provider, and
    scored the new answers over the run's forecasts and scores, the only copy of its stated
    probabilities left. No flag asks them all again on purpose: a new folder does."""
    refusal = answers_refusal(
        run_dir,
        spec.parser,
        would="resuming would ask and pay for them again",
        then="run again",
        gone=lambda: gone_answers_refusal(
            run_dir,
            list(DERIVED),
            would="resuming would ask (and pay for) their requests again and score the new "
            "answers over these",
            done="nothing was asked",
            then=f"run again; or, {ASK_ALL_AGAIN}",
        ),
    )
    if refusal is not None:
        raise RunError(refusal)


def _commit_staged(staged: StagedPlan, run_dir: Path) -> None:
    """The staged plan into `run_dir`. A part that the full temporary folder cut short may
    fail only here, read back (polars can lose a write's ENOSPC): then the message names
    the temporary folder, not the run folder, which has room."""
    try:
        staged.writer.commit(run_dir)
    except Exception as exc:
        staging = staged.writer.staging
        if is_disk_full(exc, staging) and has_no_room(staging):
            raise DiskFull(staging, exc, STAGING_FULL) from exc
        raise


async def _dispatch_campaign(
    spec: CampaignSpec,
    run_dir: Path,
    plan_path: Path,
    signals: StopSignals,
    on_sim_stop: Callable[[dict[str, int]], None],
    options: CampaignOptions,
    on_ledger_open: Callable[[], None],
) -> DispatchSummary | None:
    """Dispatch the plan (beside the simulator when rehearsing), with SIGINT/SIGTERM handled
    by `signals`; None after a second signal cancelled it. `on_ledger_open`: see
    `FolderHold`."""
    # The simulator's fake credentials (a service-account key among them) live in a temporary
    # folder, never in the run folder, which users share.
    with scratch_folder("sim") as sim_workdir:
        rehearse, sim_credentials = options.rehearse, options.sim_credentials
        async with simulator_if_needed(
            spec, rehearse, sim_credentials, faults=options.faults, sim_url=options.sim_url,
            on_stop=on_sim_stop,
        ) as sim_root:  # fmt: skip
            models, envs = resolve_models(
                spec, sim_root, rehearse, Path(sim_workdir), sim_credentials
            )
            adapters = {name: adapter_for(config, envs[name]) for name, config in models.items()}
            batch_clients = {
                name: batch_client_for(config, envs[name])
                for name, config in models.items()
                if config.dispatch == "batch"
            }
            with signals.installed():
                task: asyncio.Task[DispatchSummary]
                signals.task = task = asyncio.ensure_future(
                    dispatch(
                        plan_path,
                        run_dir,
                        models,
                        adapters,
                        parser=spec.parser,
                        progress=options.console if options.progress else None,
                        max_attempts=spec.max_attempts,
                        max_answer_failures=spec.max_answer_failures,
                        stop_event=signals.stop,
                        budget_usd=options.max_cost,
                        batch_clients=batch_clients,
                        batch_abandon=options.abandon_batch_jobs,
                        on_ledger_open=on_ledger_open,
                        # The simulator started above holds no job an earlier run made.
                        batch_simulated_here=options.simulated_here(spec),
                    )
                )
                try:
                    return await task
                except asyncio.CancelledError:
                    if not signals.hard:
                        raise  # cancelled from outside, not by a second signal
                    return None
                except LedgerBusy as exc:
                    raise RunError(f"{exc}; let it finish, or stop it, then run again") from None


def _score_and_report(
    spec: CampaignSpec,
    run_dir: Path,
    units: UnitSource,
    summary: DispatchSummary,
    interrupted: bool,
    injected: dict[str, int],
    options: CampaignOptions,
    console: Console,
    clock: PhaseClock,
) -> CampaignResult:
    """Say what dispatch did, then score and report what was answered."""
    faults = options.faults
    if summary.disk_full is not None:  # scoring needs room too: stop here, resumable
        for line in summary.lines():
            console.print(line, soft_wrap=True, highlight=False, markup=False)
        return CampaignResult(
            run_dir=run_dir, summary=summary, report={}, injected_faults=fault_counts(injected),
            disk_full=summary.disk_full, read_only=summary.read_only,
        )  # fmt: skip
    if faults != "none" and injected:
        console.print(injected_faults_line(fault_counts(injected), spec, options),
                      soft_wrap=True, highlight=False, markup=False)  # fmt: skip
    # The dispatch summary, then the folder's audit sentence (earlier runs of it included),
    # counted as `dutchbook audit` and `status` count (engine.audit).
    for line in _dispatch_lines(summary):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    release_heap()  # dispatch's garbage (runs.memory), before scoring allocates its own
    raise_if_stop_pending()  # a stop as dispatch ended, its `KeyboardInterrupt` dropped
    workers = options.figure_workers
    reading = workers.audit(run_dir) if workers is not None else None  # beside scoring
    scored = score_run(spec, run_dir, units)
    raise_if_stop_pending()
    audit = reading.result() if reading is not None else run_audit(run_dir)
    console.print(audit.sentence, soft_wrap=True, highlight=False, markup=False)
    # A model whose replies named two models (a resume against another server: the local
    # simulator's `base_url` after a real one's) is said here, not only in report.md.
    for line in audit.reported_model_lines():
        console.print(f"{line}.", soft_wrap=True, highlight=False, markup=False)
    release_heap()  # scoring's garbage, before the report's scans
    clock.lap("score", run_dir)
    report, cut = _report_step(spec, run_dir, scored, audit, options, console)
    clock.lap("report", run_dir)
    raise_if_stop_pending()
    return CampaignResult(
        run_dir=run_dir,
        summary=summary,
        report=report,
        interrupted=interrupted,
        spend_cap_reached=summary.spend_cap_reached,
        injected_faults=fault_counts(injected),
        audit=audit,
        sim_counts=dict(injected) if injected else None,
        parser=spec.parser,
        answer_budget=spec.max_answer_failures,
        output_cut=cut,
    )


def _dispatch_lines(summary: DispatchSummary) -> list[str]:
    """The dispatch's summary lines (`DispatchSummary.lines`) as a run that goes on to score
    prints them: where the spend cap was reached, without the cap's own line (`SpendCap
    .message`), which the run's last lines say, with how to resume (`CampaignResult
    .spend_cap_line`, on stdout for scripts, and the closing line on stderr), the lanes it
    stopped naming it ("spend cap reached"). A capped run said the same words three times on
    stdout: on its lane's line, the spend line and the cap's line. A run the disk stopped
    says no cap's line at its end, and prints them all (`_score_and_report`)."""
    lines = summary.lines()
    if not summary.spend_cap_reached or summary.spend is None:
        return lines
    said = summary.spend.message()
    return [line for line in lines if line != said]


def _report_step(
    spec: CampaignSpec,
    run_dir: Path,
    scored: ScoredRun,
    audit: Audit,
    options: CampaignOptions,
    console: Console,
) -> tuple[dict[str, Any], OutputCut | None]:
    """Write `report/`, then print its leaderboard and "report page: PAGE": summary.json's
    dict, and what cut that printing once `report/` was in place (stdout's reader gone,
    `| head`; a stdout not open for writing; or full), or None. Cut so, the report's lap is still
    written and the run ends as its own status says (`runs.commands.run`): the error went
    up, and a run whose report was whole ended in "the output (stdout) closed before
    `dutchbook run` finished", exit 1, a capped run's exit 3 and closing line unsaid, and
    no "report" lap in logs/phases.jsonl. Cut before (`files_written` not yet marked), the
    run stopped short of its end, and the error still ends it so."""
    report: dict[str, Any] = {}
    mark_files_written(False)  # this report's mark, not an earlier one's in this process
    try:
        report, page = write_report_folder(
            run_dir,
            scored.scores,
            floor=spec.coverage_floor,
            seed=spec.seed,
            console=console,
            averaged=scored.averaged,
            audit=audit,
            figure_workers=options.figure_workers,
        )
        console.print(f"report page: {page}", highlight=False, soft_wrap=True)
    except (OutputClosed, OutputFull) as exc:
        if not files_written():
            raise
        stdout_to_null()
        # Cut at the leaderboard, before write_report_folder returned: the dict as written.
        return report or report_summary(run_dir) or {}, exc
    return report, None
