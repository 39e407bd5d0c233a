"""A batch job as a person waiting on it reads it: its id, the provider's own word for where
it stands, its lines done as last polled, how long it has been at the provider, and when the
provider was last asked.

A job may run at its provider for a day. Of a run whose three jobs the provider kept
answering `in_progress`, `status` said only "3 batch jobs (28 queries) still at the
provider", the lane "running", its ETA "?", and the run's console said nothing between its
minutely lines. `JobWait` is what both say instead: `status` one line per job
(`job_lines`) and its `--json` each job (`JobWait.to_dict`); the console, while a batch lane
only waits on its jobs, one sentence of them all (`waiting_text`).

What a job stands at comes from `batches/jobs.jsonl` (each poll that changes what the
provider says is a line there: `engine.batch_lane`); when it was last polled, from the
lane's `logs/lanes.json` (`batch_polled_at`), rewritten every second, as a line per poll
would grow the jobs file without bound over a day of polls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.batch_jobs import BatchJob, still_at_provider
from engine.console_lines import duration, plural
from providers.batch import FINAL, JobState

#: Jobs `status` names one line each; the rest are counted ("and 15 more"): a paper-scale
#: Groq lane keeps 20 jobs of 50,000 lines in flight.
JOB_LINES = 5


def parse_time(text: object) -> datetime | None:
    """An ISO time as the jobs file and `lanes.json` write it; None when it is not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@dataclass(frozen=True)
class JobWait:
    """One created job not yet collected, as the provider last said it."""

    job_key: str
    job_id: str
    model: str
    #: The provider's own word (`JobState.provider_status`: in_progress, Scheduled,
    #: JOB_STATE_RUNNING...), else the normalised status.
    word: str
    status: str
    ended: bool
    completed: int | None
    failed: int | None
    #: The lines the provider counts, else those the job was planned with.
    total: int
    created_at: datetime | None
    polled_at: datetime | None = None

    @classmethod
    def of(
        cls, job: BatchJob, state: JobState | None = None, polled_at: datetime | None = None
    ) -> JobWait | None:
        """`job` as `state` (else its records' last state) says it; None before it is created."""
        state = state or job.state()
        if state is None:
            return None
        return cls(
            job_key=job.job_key, job_id=state.job_id, model=job.model,
            word=state.provider_status or state.status.value, status=state.status.value,
            ended=state.status in FINAL, completed=state.completed, failed=state.failed,
            total=state.total if state.total is not None else len(job.requests),
            created_at=parse_time(job.created_at), polled_at=polled_at,
        )

    def age_s(self, now: datetime) -> float | None:
        """Seconds since its `created` line; None when that time is not on file."""
        return None if self.created_at is None else max((now - self.created_at).total_seconds(), 0)

    def done_text(self) -> str:
        """`12/28 lines done` (`, 1 failed`), as the provider last counted them."""
        done = "?" if self.completed is None else f"{self.completed:,}"
        failed = f", {self.failed:,} failed" if self.failed else ""
        return f"{done}/{self.total:,} lines done{failed}"

    def line(self, now: datetime) -> str:
        """`status`' line: `batch_1 [workhorse]: in_progress, 12/28 lines done, at the
        provider 4:10, last polled 10:41:07 UTC (0:12 ago)`."""
        return (f"{self.job_id} [{self.model}]: {self.word}, {self.done_text()}, at the provider "
                f"{duration(self.age_s(now))}, {self._polled(now)}")

    def _polled(self, now: datetime) -> str:
        if self.polled_at is None:
            return "not polled by a run on file"
        ago = duration(max((now - self.polled_at).total_seconds(), 0))
        return f"last polled {self.polled_at.astimezone(UTC):%H:%M:%S} UTC ({ago} ago)"

    def to_dict(self, now: datetime) -> dict[str, Any]:
        """`status --json`'s entry of the job (`batch_jobs_at_provider`)."""
        age = self.age_s(now)
        return {
            "model": self.model, "job_key": self.job_key, "job_id": self.job_id,
            "provider_status": self.word, "status": self.status, "completed": self.completed,
            "failed": self.failed, "total": self.total,
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "at_provider_s": None if age is None else round(age, 1),
            "last_polled_at": None if self.polled_at is None else self.polled_at.isoformat(),
        }


def from_dict(entry: Mapping[str, Any]) -> JobWait:
    """A job as `JobWait.to_dict` wrote it (`status`' text is drawn from its `--json`)."""

    def count(key: str) -> int | None:
        value = entry.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    status = str(entry.get("status") or "")
    return JobWait(
        job_key=str(entry.get("job_key") or ""), job_id=str(entry.get("job_id") or ""),
        model=str(entry.get("model") or ""), word=str(entry.get("provider_status") or status),
        status=status, ended=status in {s.value for s in FINAL}, completed=count("completed"),
        failed=count("failed"), total=count("total") or 0,
        created_at=parse_time(entry.get("created_at")),
        polled_at=parse_time(entry.get("last_polled_at")),
    )


def at_provider_waits(
    jobs: Iterable[BatchJob], polled: Mapping[str, datetime]
) -> list[JobWait]:
    """The created jobs of `jobs` still at the provider (`engine.batch_jobs.still_at_provider`),
    oldest first, each with when it was last polled (`polled`, by job key), if known."""
    waits = (JobWait.of(job, polled_at=polled.get(job.job_key))
             for job in jobs if still_at_provider(job))  # fmt: skip
    return oldest_first(wait for wait in waits if wait is not None)


def polled_times(lanes: Mapping[str, Any]) -> dict[str, datetime]:
    """When each batch job was last polled, by key, from `lanes.json`'s lanes (each lane's
    `batch_polled_at`); what is not a time is left out (a file edited by hand)."""
    out: dict[str, datetime] = {}
    for lane in lanes.values():
        polled = lane.get("batch_polled_at") if isinstance(lane, dict) else None
        for key, text in (polled.items() if isinstance(polled, dict) else ()):
            if (at := parse_time(text)) is not None:
                out[str(key)] = at
    return out


def oldest_first(waits: Iterable[JobWait]) -> list[JobWait]:
    """Longest at the provider first (those with no created time last), then by id."""
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(waits, key=lambda w: (w.created_at or far, w.job_id))


def job_lines(waits: list[JobWait], now: datetime, most: int = JOB_LINES) -> list[str]:
    """One line per job, oldest first, at most `most`, the rest counted in a last line."""
    ordered = oldest_first(waits)
    lines = [wait.line(now) for wait in ordered[:most]]
    if len(ordered) > most:
        lines.append(f"and {len(ordered) - most:,} more (`dutchbook status --json` lists each)")
    return lines


def waiting_text(waits: Iterable[JobWait], now: datetime) -> str:
    """`waiting on 3 batch jobs at the provider (in_progress, 12/28 lines done, oldest 4:10)`:
    the provider's words (by how many jobs, when they differ), their lines done summed, and
    how long the oldest has been there."""
    waits = list(waits)
    words = Counter(wait.word for wait in waits)
    said = (next(iter(words)) if len(words) == 1
            else ", ".join(f"{word} {n:,}" for word, n in words.most_common()))  # fmt: skip
    known = [w.completed for w in waits if w.completed is not None]
    done = f"{sum(known):,}" if len(known) == len(waits) else "?"
    failed = sum(w.failed or 0 for w in waits)
    ages = [age for w in waits if (age := w.age_s(now)) is not None]
    return (
        f"waiting on {plural(len(waits), 'batch job')} at the provider ({said}, {done}/"
        f"{sum(w.total for w in waits):,} lines done" + (f", {failed:,} failed" if failed else "")
        + f", oldest {duration(max(ages) if ages else None)})"
    )


def only_waiting(waits: Mapping[str, JobWait], jobs_in_flight: int) -> bool:
    """Whether a batch lane's every job in flight is in its poll loop, none ended: the lane
    does nothing but wait on the provider."""
    return 0 < jobs_in_flight <= len(waits) and not any(w.ended for w in waits.values())


__all__ = [
    "JOB_LINES",
    "JobWait",
    "at_provider_waits",
    "from_dict",
    "job_lines",
    "oldest_first",
    "only_waiting",
    "parse_time",
    "polled_times",
    "waiting_text",
]
