"""Which runs a folder's `logs/phases.jsonl` records, and when each began.

Each `dutchbook run` process appends its laps there (`runs.phases`); the report's
provenance counts the runs (`runs.report.provenance`), and `dutchbook audit` asks whether
`logs/lanes.json` is older than the latest run (`run_since`). Kept apart from the report so
that the audit reads it without importing the report's other readers (an import cycle
through `runs.scored_from`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from runs.phases import read_phases


def runs_of(phases: list[dict[str, object]]) -> list[list[dict[str, object]]]:
    """The lines of each run `phases` records, in the order the runs first appear. A line
    names its run by `started` (`runs.phases`), one run to each: told apart by plan laps and
    pids, a run whose plan lap was lost merged with the run before where both were pid 1 (a
    container's), and one whose plan and dispatch laps were lost opened at its score lap,
    after its attempts. A line without a readable `started` (an older version's, or one
    hand-edited) is told apart as before: it opens a run if it is a `plan` lap, which a
    `dutchbook run` writes once, before it sends anything; or, where that lap was not
    written (a full disk: `runs.phases` lets it go), if it is the first line, or of a pid
    other than the line before's. The folder's lock keeps runs from interleaving their
    lines."""
    runs: list[list[dict[str, object]]] = []
    named: dict[datetime, list[dict[str, object]]] = {}
    run: list[dict[str, object]] | None = None
    before: object = None
    for phase in phases:
        started = _started(phase)
        if started is not None:
            run = named.get(started)
            if run is None:
                run = named[started] = []
                runs.append(run)
        elif run is None or phase.get("phase") == "plan" or phase.get("pid") != before:
            run = []
            runs.append(run)
        run.append(phase)
        before = phase.get("pid")
    return runs


#: How late after a time written to the second (`logs/lanes.json`'s `updated_at`, cut down
#: to it) a run must begin to have begun after it.
_TO_THE_SECOND = timedelta(seconds=1)


def run_since(run_dir: Path, written: object) -> datetime | None:
    """When the latest run that began after `written` (an ISO time to the second: a file's
    own record of when it was written) and sent an attempt from then on began (`_run_start`);
    else None: no run recorded a lap after it, or none of those that did sent anything (a
    run of a finished folder, one refused before it dispatched). Such a run's attempts are
    not what a file written before it describes. Every run after the file is asked, not only
    the last: a resume that sent attempts and was killed before its lanes' first write,
    then a run refused before it dispatched, read as the file's own run (a reviewer's)."""
    from engine.scan import scan_attempts

    at, starts = utc_instant(written), run_starts(read_phases(run_dir))
    if at is None:
        return None
    try:
        later = [start for start in starts if start >= at + _TO_THE_SECOND]
    except OverflowError:  # a hand-edited year 9999: no run began after it
        return None
    attempts = scan_attempts(run_dir, ["started_at"])
    for start in reversed(later):
        if attempts.filter(pl.col("started_at") >= start).head(1).collect().height:
            return start
    return None

def _started(phase: Mapping[str, object]) -> datetime | None:
    """A line's `started`, or None where it has none that can be read as a time."""
    return utc_instant(phase.get("started"))


def run_starts(phases: list[dict[str, object]]) -> list[datetime]:
    """When each run `phases` records began, in order (`_run_start`)."""
    return sorted(start for run in runs_of(phases) if (start := _run_start(run)) is not None)


def _run_start(run: list[dict[str, object]]) -> datetime | None:
    """When a run began, as far as the attempts it sent are concerned: its plan lap's time,
    written once the folder's lock was held and before it sent anything; else its `started`
    (taken as it began, before it took the lock); else, a line of an older version, its
    opening line's time less the lap's `seconds`. A lap is written as its phase ends: a run
    whose plan lap was lost opened at its dispatch lap, written once dispatch ended, and
    its attempts read as the run's before it ("in 1 of 3 runs" of two that sent attempts)."""
    opening, started = run[0], _started(run[0])
    plans = (utc_instant(line.get("at")) for line in run if line.get("phase") == "plan")
    if (at := next((at for at in plans if at is not None), None)) is not None:
        return at
    if started is not None:
        return started
    at = utc_instant(opening.get("at"))
    if at is None:
        return None
    seconds = opening.get("seconds")
    if isinstance(seconds, int | float) and seconds > 0:
        with contextlib.suppress(OverflowError, ValueError):  # a hand-edited 1e308, inf, nan
            at -= timedelta(seconds=seconds)
    return at


def utc_instant(value: object) -> datetime | None:
    """`value` read as a time in UTC (naive taken as UTC), or None: no time, or one UTC
    cannot hold (a hand-edited year 1 at +14:00, on which polars' comparison overflowed)."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def lanes_of_earlier_run(run_dir: Path, written: object) -> dict[str, str] | None:
    """`{updated_at, run_started_at}` of a `logs/lanes.json` written at `written` (its own
    `updated_at`) that is an earlier run's (`run_since`), else None: what `audit` and
    `status` record of it (each adds what it does of the file's lanes)."""
    began = run_since(run_dir, written)
    if began is None:
        return None
    return {"updated_at": str(written), "run_started_at": began.isoformat(timespec="seconds")}
