"""Wall time of a run's phases (plan, dispatch, score, report), kept in `logs/phases.jsonl`.

One line per finished phase, appended as it ends, so a run killed half way still says how
long its finished phases took: `{"at": ISO time, "pid": ..., "phase": ..., "seconds": ...}`.
Benchmarks (`make bench-sweep`) and users read it; nothing in a run depends on it.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from engine.durable import append_record_line, read_record_lines

PHASES_FILE = Path("logs") / "phases.jsonl"


class PhaseClock:
    """Laps of one process's run: `lap(name)` ends the phase that began at the last lap."""

    def __init__(self) -> None:
        self._last = time.monotonic()
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
        }
        if run_dir.is_dir():  # a folder moved mid-run is not made again (`runs.folder_moved`)
            append_record_line(run_dir / PHASES_FILE, line)  # never stops a run (disk full)


def read_phases(run_dir: Path | str) -> list[dict[str, object]]:
    """Every phase line a run folder holds, oldest first (a missing file reads as none)."""
    return read_record_lines(Path(run_dir) / PHASES_FILE)
