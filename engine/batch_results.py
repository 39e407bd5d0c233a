"""An ended batch job's result lines read against the requests it sent, and, when its result
files are damaged, what to say and record.

A job's results are *damaged* when they hold lines that name no request (torn, not JSON, no
id: `providers.batch.UNREADABLE`), lines for request ids the job never sent, or fewer reply
lines than the provider counted completed, or when the provider, which still knows the
ended job, answers 404 for its result file (a tester's proxy: reported as 3 jobs the
provider no longer knew, and abandoning them bought all 28 lines again at $0 each), or for
one of its result objects, the others' lines kept (`JobLines.gone_in_part`). The
provider ran (and billed) the lines it counted completed, so a request of such a job with
no readable line is not one the job never ran: its attempt is `damaged_batch_result`, its
detail says what the results held, and the lane says the job's damage in one console line
and a `batch_results_damaged` log event. A request the provider counted failed whose error
line is missing (an error file answering 404) was not billed: it is absent, not damage,
and where the results lost an answer beside such requests (`JobLines.unbilled`), which of
them was billed cannot be told: each keeps the absent line's outcome, its detail and the
console line saying that some ran, and the lane charges the `lost` dearest (each was charged
as damage, 11 lines' worst case for the 1 answer lost). A job that ended before running
every line (expired, failed, cancelled) whose results hold fewer reply lines than the
provider counted completed (its successes: error lines are not among them) lost some that
ran: which of its requests without a line they were cannot be told, so each keeps the
unrun line's outcome, its detail and the console line saying that some ran (a tester's
expired job, 25 lines completed and 24 in its results, read as 26
lines never run, nothing said); one whose provider counted every line completed ran them
all, so its console line says each request without a line ran and lost it (it said
"expired before running every line"). A tester's proxy that cut two answer lines short
and added a line for an id never sent got, before, "ended (done) with no line for this
request", nothing said, and the two requests bought again, 8 times each when every
download was damaged: now each is asked again once at most, and `engine.batch_lane` stops
the lane after `DAMAGED_JOB_STREAK` damaged jobs in a row.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from engine.console_lines import plural
from engine.spend import BATCH_MARK
from providers.batch import UNREADABLE, JobState, JobStatus, LineResult
from providers.types import Completion, Failure, Outcome

#: Damaged jobs in a row, each leaving requests with no readable line, before the lane
#: stops: result files damaged on every download re-bought the same requests until their
#: attempts ran out (6 requests paid for 8 times each).
DAMAGED_JOB_STREAK = 3
#: Ids kept to name in the console line and log event (of lines never sent, of repeats).
IDS_SHOWN = 3
#: Job states whose missing lines may simply not have run (their absent requests keep
#: `engine.batch_lane.absent_failure`'s outcome, the damage still said).
UNRUN_STATES = frozenset({JobStatus.EXPIRED, JobStatus.FAILED, JobStatus.CANCELLED})


@dataclass
class JobLines:
    """A job's result lines sorted: the first line of each request it sent, and the rest."""

    lines: dict[str, Completion | Failure] = field(default_factory=dict)
    #: Requests of the job with no readable line.
    missing: int = 0
    #: Lines naming no request, and how the first began.
    unreadable: int = 0
    example: str = ""
    #: Lines for request ids the job never sent, and the first few of those ids.
    foreign: int = 0
    foreign_ids: list[str] = field(default_factory=list)
    #: Lines for a request that had one already (kept: the first reply, else the first
    #: line), and the first few of those requests.
    repeated: int = 0
    repeated_ids: list[str] = field(default_factory=list)
    #: What the provider counted, as a clause ("" when it counted nothing), and whether it
    #: counted every line of the job run.
    counted: str = ""
    counted_all: bool = False
    #: The provider counted every line of the job completed, whatever its state: an expired,
    #: failed or cancelled job so counted ran every line, each request without one lost it.
    completed_all: bool = False
    #: Lines the provider ran and billed that the results do not hold (`sort_lines`): its
    #: reply lines counted completed, error lines apart (a request counted failed whose error
    #: line is missing is absent, not lost); every line, where the result file is gone.
    lost: int = 0
    #: Of `missing`, requests the provider counted failed whose error line the results lack
    #: (an error file answering 404), of a job that ran to its end, every line counted: not
    #: billed, so absent, not damage; beside a `lost` answer, which they are cannot be told.
    unbilled: int = 0
    #: How the job ended, where it ended before running every line (`UNRUN_STATES`), else "":
    #: a request of it without a line may not have run.
    unrun: str = ""
    #: What the provider said of the job's result file where it answers 404 for it (the job
    #: itself known and ended), else "": every line it ran is lost.
    gone: str = ""
    #: The file gone is one of several result objects (Bedrock, Vertex), the others read:
    #: every line it ran that they do not hold is lost.
    gone_in_part: bool = False

    @property
    def damaged(self) -> bool:
        """The results are not the lines the job ran (see the module docstring)."""
        return bool(self.unreadable or self.foreign or self.repeated or self.lost or self.gone)

    @property
    def held(self) -> str:
        """What the damaged results held: "2 unreadable result lines and 1 line for a
        request id never sent (never-1), while the provider counted 10 of 10 lines completed"."""
        return self.wrong + (f", while {self.counted}" if self.counted else "")

    @property
    def wrong(self) -> str:
        """`held` without what the provider counted."""
        parts = []
        if self.gone:
            what = "a result file missing" if self.gone_in_part else "no result file"
            parts.append(f"{what}: the provider answers 404 (not found) for it ({self.gone})")
        if self.unreadable:
            parts.append(f"{plural(self.unreadable, 'unreadable result line')}")
        if self.foreign:
            ids = ", ".join(self.foreign_ids) + (", ..." if self.foreign > IDS_SHOWN else "")
            parts.append(f"{plural(self.foreign, 'line')} for "
                         f"{'a request id' if self.foreign == 1 else 'request ids'} never sent "
                         f"({ids})")
        if self.repeated:
            more = len(self.repeated_ids) == IDS_SHOWN and self.repeated > IDS_SHOWN
            ids = ", ".join(self.repeated_ids) + (", ..." if more else "")
            parts.append(f"{plural(self.repeated, 'second line')} for "
                         f"{'a request' if self.repeated == 1 else 'requests'} it already "
                         f"had a line for ({ids})")
        if not parts:
            parts.append(f"{plural(self.lost, 'line')} fewer than it ran")
        return " and ".join(parts)


def sort_lines(requests: Collection[str], found: Iterable[LineResult],
               state: JobState, gone: str = "") -> JobLines:
    """`found` read against the job's `requests`: a request's first reply counts, else its
    first line. Two lines for one request are damage too: an error line before an answer
    line was taken, the answer dropped and bought again in the next job, with nothing said.
    `gone`: the provider answers 404 for the job's result file (what it said), so each line
    the job ran that `found` lacks is lost (`JobLines.gone`): `found` holds none, or the
    lines of the result objects read beside the one gone (`JobLines.gone_in_part`)."""
    out = JobLines(gone=gone)
    for line in found:
        if line.request_id in requests:
            kept = out.lines.get(line.request_id)
            if kept is None:
                out.lines[line.request_id] = line.result
                continue
            out.repeated += 1
            if len(out.repeated_ids) < IDS_SHOWN and line.request_id not in out.repeated_ids:
                out.repeated_ids.append(line.request_id)
            if isinstance(kept, Failure) and isinstance(line.result, Completion):
                out.lines[line.request_id] = line.result
        elif line.request_id == UNREADABLE:
            out.unreadable += 1
            if not out.example and isinstance(line.result, Failure):
                out.example = line.result.detail
        else:
            out.foreign += 1
            if len(out.foreign_ids) < IDS_SHOWN:
                out.foreign_ids.append(line.request_id)
    out.missing = sum(1 for rid in requests if rid not in out.lines)
    out.gone_in_part = bool(gone) and bool(out.lines or out.unreadable or out.foreign)
    out.counted, out.counted_all = _counted(state)
    out.completed_all = bool(state.total) and (state.completed or 0) >= (state.total or 0)
    if state.status in UNRUN_STATES:
        out.unrun = state.status.value
    # The lines billed and lost are the lines counted completed that are not readable reply
    # lines: every provider's completed count is of its successes alone (`_replied`), so an
    # error line among the lines read hid a lost answer. Failed lines are left out: a
    # provider may count the lines its end left unrun among them, with no line written, and
    # an error file answering 404 (`providers.batch_openai`) loses the lines of requests it
    # did not bill, which are absent, not damage (a job of 8 completed and 2 failed read as
    # 2 lines billed and lost, charged at their worst case and given up after two such jobs).
    completed = state.completed or 0
    replied = sum(1 for result in out.lines.values() if _replied(result))
    out.lost = max(0, completed - replied)
    if gone and not out.unrun:  # ran to its end, a result file gone: every line it held lost
        out.lost = out.missing
    elif out.counted_all:  # every line run and counted: only a request without a line lost one
        out.lost = min(out.lost, out.missing)
        out.unbilled = out.missing - out.lost  # counted failed: their error lines are missing
    return out


def _replied(result: Completion | Failure) -> bool:
    """Whether a result line is one its provider counts completed: a line carrying a reply
    with a 2xx status, an answer or one the adapter refused (a refusal, a truncation, a body
    not JSON: a `Failure` read from that reply keeps its status). What each counts: OpenAI's
    shape (Groq, DeepInfra, Azure) `request_counts.completed`, requests "completed
    successfully", beside `failed`, the error file's lines (a non-2xx reply, an `error`
    object); Bedrock `successRecordCount`, records with a `modelOutput`, beside
    `errorRecordCount`, records with an `error`; Vertex `completionStats.successfulCount`,
    lines with a `response`, beside `failedCount`, lines with a `status`. None of those error
    lines carries a 2xx status."""
    if isinstance(result, Completion):
        return True
    return result.http_status is not None and 200 <= result.http_status < 300


def _counted(state: JobState) -> tuple[str, bool]:
    """What the provider counted of the job's lines, and whether it counted them all run (an
    expired, failed or cancelled job's count is not taken as a promise of every line)."""
    if state.completed is None:
        return "", False
    failed = f" and {state.failed:,} failed" if state.failed else ""
    of = f" of {state.total:,}" if state.total is not None else ""
    clause = f"the provider counted {state.completed:,}{of} lines completed{failed}"
    run = state.completed + (state.failed or 0)
    counted_all = state.total is not None and state.total > 0 and run >= state.total
    return clause, counted_all and state.status not in UNRUN_STATES


def damaged_failure(state: JobState, job_id: str, lines: JobLines, before: bool) -> Failure:
    """The attempt of a request a damaged job's results hold no readable line for; `before`:
    its line was damaged in an earlier job too, so it is not asked again."""
    again = (": its line was damaged in an earlier job's results too, so it is not asked "
             "again (each time pays for it)") if before else ""
    return Failure(
        Outcome.DAMAGED_BATCH_RESULT,
        f"{BATCH_MARK}{job_id} ended ({state.status.value}) and its results hold no readable "
        f"line for this request: {lines.held}{again}",
    )


def damage_sentence(job_id: str, lines: JobLines, again: int, given_up: int,
                    stopping: bool = False) -> str:
    """The console line of a job whose results were damaged: `again` of the requests they
    lost go into the next job (unless the lane is `stopping`), `given_up` lost twice."""
    head = f"batch job {job_id} returned {lines.held}"
    if not lines.missing:
        return f"{head}; every request of the job has its line, so none is asked again"
    not_now = ", but not now, as the lane stops" if stopping else ""
    if lines.unrun and lines.completed_all:  # ended all the same, having run every line
        each = "its line: it is" if lines.missing == 1 else "their lines: each is"
        return (
            f"{head}; the job {lines.unrun} after running every line (the provider counted "
            f"every one completed), so its {plural(lines.missing, 'request')} without a "
            f"readable line ran (billed) and lost {each} asked again as a line never run"
            f"{not_now}"
        )
    if lines.unrun and not lines.lost:
        return (
            f"{head}; the job {lines.unrun} before running every line, and its "
            f"{plural(lines.missing, 'request')} without a readable line are asked again as "
            f"lines never run{not_now}"
        )
    if lines.unrun:
        return (
            f"{head}; the job {lines.unrun} before running every line, so which of its "
            f"{plural(lines.missing, 'request')} without a readable line ran (billed) cannot "
            f"be told: each is asked again as a line never run{not_now}"
        )
    if lines.unbilled:
        return f"{head}; {_unbilled_said(lines)}{not_now}"
    one = lines.missing == 1
    lost = (f"{plural(lines.missing, 'request')} of the job {'has' if one else 'have'} no "
            f"readable line, though the provider ran {'it' if one else 'them'} (billed)")
    said = []
    if again and stopping:
        said.append(f"{again:,} not asked again, as the lane stops")
    elif again:
        said.append(f"{again:,} to be asked again once")
    if given_up:
        said.append(f"{given_up:,} not asked again (damaged in an earlier job's results too)")
    return f"{head}; {lost}" + (f": {', '.join(said)}" if said else "")


def _unbilled_said(lines: JobLines) -> str:
    """What becomes of the requests without a line of a job some of which the provider
    counted failed (`JobLines.unbilled`)."""
    one = lines.missing == 1
    asked = f"{'it is' if one else 'each is'} asked again as an ordinary failure"
    if not lines.lost:
        return (f"the provider counted its {plural(lines.missing, 'request')} without a "
                f"readable line failed (not billed, the error lines missing): {asked}")
    return (
        f"of its {plural(lines.missing, 'request')} without a readable line the provider "
        f"counted {lines.unbilled:,} failed (not billed, the error lines missing) and "
        f"{lines.lost:,} completed (billed, {'its line' if lines.lost == 1 else 'their lines'} "
        f"lost), and which is which cannot be told: {asked}"
    )


def streak_message(streak: int, job_id: str, lines: JobLines) -> str:
    """The stop line of a lane after `DAMAGED_JOB_STREAK` damaged jobs in a row."""
    return (
        f"after {streak} batch jobs in a row returned damaged results (the last, {job_id}: "
        f"{lines.wrong}): the requests they hold no readable line for ran and were billed, and "
        "asking them again in more jobs pays for them again; check what serves the provider's "
        "result files (a proxy, the storage) before running the same command again, which asks "
        "the unanswered requests again"
    )


__all__ = [
    "DAMAGED_JOB_STREAK",
    "UNRUN_STATES",
    "JobLines",
    "damage_sentence",
    "damaged_failure",
    "sort_lines",
    "streak_message",
]
