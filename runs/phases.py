"""Wall time of a run's phases (plan, dispatch, score, report), kept in `logs/phases.jsonl`.

One line per finished phase, appended as it ends, so a run killed half way still says how
long its finished phases took: `{"at": ISO time, "pid": ..., "phase": ..., "seconds": ...,
"started": ISO time}`. `at` is when the phase ended (UTC); `started` is when the run began,
the same on every lap of one `dutchbook run` (lines of older versions lack it): it names the
run a line came from, where a pid does not (each `docker run` is pid 1) and neither does a
plan lap, which may be missing (a lap the disk refused is let go).
Benchmarks (`make bench-sweep`), the report's provenance (`runs.report.provenance`: how many
runs the folder had) and users read it; nothing in a run depends on it.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from engine.durable import append_record_line, read_record_lines

PHASES_FILE = Path("logs") / "phases.jsonl"


class PhaseClock:
    """Laps of one process's run: `lap(name)` ends the phase that began at the last lap.
    Made as the run begins (`runs.pipeline.run_campaign`, before it plans), so its first lap
    times planning and its `started` is the run's start."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.started = datetime.now(UTC).isoformat()
        self.seconds: dict[str, float] = {}

    def lap(self, name: str, run_dir: Path) -> None:
        now = time.monotonic()
        self.seconds[name] = now - self._last
        self._last = now
        line = {
            "at": datetime.now(UTC).isoformat(),
            "pid": os.getpid(),
            "phase": name,
            "seconds": round(self.seconds[name], 3),
            "started": self.started,  # additive: which run the line is of
        }
        if run_dir.is_dir():  # a folder moved mid-run is not made again (`runs.folder_moved`)
            append_record_line(run_dir / PHASES_FILE, line)  # never stops a run (disk full)


def read_phases(run_dir: Path | str) -> list[dict[str, object]]:
    """Every phase line a run folder holds, oldest first (a missing file reads as none)."""
    return read_record_lines(Path(run_dir) / PHASES_FILE)
