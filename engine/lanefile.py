"""`logs/lanes.json`: the lanes' states as a dispatch last wrote them.

Written by `engine.dispatch` every second and at the end; read by `status` (which lane is
paused or stopped, and why) without importing the dispatcher.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine.durable import (
    NOT_WRITABLE_ERRNOS,
    disk_refused,
    is_disk_full,
    turned_read_only,
    write_bytes_atomic,
)

if TYPE_CHECKING:
    from engine.lanes import LaneStats
    from engine.logs import EngineLog

#: Where the lanes' states are written while a run goes (read by `read_lane_states`).
LANES_FILE = Path("logs") / "lanes.json"


def lane_states(lanes: list[LaneStats]) -> dict[str, Any]:
    """JSON-ready state of every lane: what `status` shows about paused or stopped lanes."""
    return {
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "lanes": {
            s.model: {
                "provider": s.provider,
                "state": s.state.value,
                "message": s.message,
                "reason": s.reason,
                "planned": s.planned,
                "done": s.done,
                "accepted_this_run": s.accepted,
                "attempts_this_run": s.attempts,
                "retries_by_cause": dict(s.retries.by_cause),
                **s.gave_up_counts,
                "concurrency_cap": s.cap,
                "in_flight": s.in_flight,
                "dispatch": s.dispatch,
                "jobs_in_flight": s.jobs_in_flight,
                "jobs_collected": s.jobs_collected,
                # When the provider was last asked about each batch job not yet collected, by
                # key: `status` says it beside what the jobs file holds of each job (a line
                # per poll there would grow it without bound over a day of polls).
                "batch_polled_at": {
                    key: wait.polled_at.isoformat(timespec="seconds")
                    for key, wait in s.batch_waits.items() if wait.polled_at is not None
                },
                "rate_per_s": round(s.rate_per_s, 3),
                # The time left the live table shows; None when not known (`LaneStats.eta_s`).
                "eta_s": None if (eta := s.eta_s) is None else round(eta, 1),
                # The most its own rpm and tpm allow (`LaneStats.limit_rate_per_s`): `status`
                # counts its time left no faster, as the live table does.
                "limit_rate_per_s": (
                    None if (limit := s.limit_rate_per_s) is None else round(limit, 6)
                ),
                "pauses": s.pauses,
                "paused_s": round(s.paused_s, 3),
                "held_s": round(s.held_now_s, 1),  # left of the provider's hold, when written
                "held_by": s.held_by,
                # Left, when written, of a stop's wait for the lane's attempts in flight
                # (`LaneStats.stop_wait_s`); None when no stop waits on it: `status` says it.
                "stop_wait_s": None if (wait := s.stop_wait_s) is None else round(wait, 1),
                "stop_wait_cut": s.stop_wait_cut,  # ... cut short: no answer from it yet
                "cut_at_stop": s.cut_at_stop,  # attempts in flight that wait then cut
            }
            for s in lanes
        },
    }


#: How a `lanes.json`'s `updated_at` is said to a user ("as of 16:22:46 UTC"): by `status`
#: and by the warning of a `logs/` refused, which quotes the time `status` will show.
AS_OF_FORMAT = "%H:%M:%S UTC"


def write_lane_states(run_dir: Path, lanes: list[LaneStats]) -> datetime:
    """Atomically replace `logs/lanes.json` (a reader never sees half a file). Its `logs/`
    only, never the run folder: one moved mid-run was made again, empty but for this file,
    at the old place. Returns the file's `updated_at`, as written."""
    target = run_dir / LANES_FILE
    target.parent.mkdir(exist_ok=True)
    states = lane_states(lanes)
    # Rewritten every second and rebuilt by the next dispatch: atomic, not fsync'd.
    write_bytes_atomic(target, orjson.dumps(states, option=orjson.OPT_INDENT_2), sync=False)
    return datetime.fromisoformat(states["updated_at"])


#: The event (and its `say`) of `logs/` refusing `lanes.json`, said once per dispatch.
LOGS_NOT_WRITTEN = "logs_not_written"


class LaneFileWriter:
    """`logs/lanes.json` for one dispatch, written each second and at its end: a snapshot
    for readers, so a write the disk refuses (full, read-only, not this user's to write) is
    skipped, never fatal: logs are not answers. A `logs/` refused alone (mounted read-only
    on its own, or made unwritable) while the run folder takes writes was silent: the run
    ended with exit 0 and `status` showed the lanes as they stood then. That is said once,
    on the console. A run folder whose own disk refuses is not: its journal's next write
    stops the run with that disk's own line."""

    def __init__(self, run_dir: Path, log: EngineLog) -> None:
        self.run_dir, self.log = run_dir, log
        #: Whether the refusal was said (once a dispatch).
        self.said = False
        #: The `updated_at` of this dispatch's last write that succeeded (None: none yet),
        #: which `status` shows of the lanes once the file falls behind the run.
        self.written_at: datetime | None = None

    def write(self, lanes: list[LaneStats]) -> None:
        try:
            self.written_at = write_lane_states(self.run_dir, lanes)
        except OSError as exc:
            if not disk_refused(exc) and exc.errno not in NOT_WRITABLE_ERRNOS:
                raise
            self._say(exc)

    def _say(self, exc: OSError) -> None:
        if self.said or is_disk_full(exc) or turned_read_only(self.run_dir):
            return
        self.said = True
        target = self.run_dir / LANES_FILE
        self.log.warning(LOGS_NOT_WRITTEN, path=str(target), error=str(exc), say=(
            f"{target} could not be written ({exc.strerror or exc}): the run goes on and "
            "keeps its answers, but logs/ is not kept current while it cannot be written, "
            f"and `dutchbook status` {self._shows()}"
        ))  # fmt: skip

    def _shows(self) -> str:
        """What `status` may show of the lanes: the file as this dispatch last wrote it
        (`status` says "as of" that time only once the file is `LANES_STALE_S` behind the
        run's last attempt), or, none written, whatever the file held before it."""
        if self.written_at is None:
            return "may show the lanes an earlier run left (this one wrote none), or none"
        return f"may show the lanes as of {self.written_at.strftime(AS_OF_FORMAT)}"


def read_lane_states(run_dir: Path | str) -> dict[str, Any] | None:
    """The last lane states a dispatch of this run wrote, or None if none ever did."""
    try:
        data = orjson.loads((Path(run_dir) / LANES_FILE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
