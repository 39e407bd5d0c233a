"""A scoring output that cannot be replaced at the swap, for a reason other than access or a
read-only mount: a file bind-mounted read-only over `scores.parquet` gives "Device or
resource busy" from the rename.

Before, `score` and `repair` ended in a traceback, exit 1, and `score` had replaced
forecasts.parquet already: its new forecasts beside the old scores (a tester's). The outputs
are now replaced all or none (`engine.durable.commit_files`), and the failure said in one
line, exit 2.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns

_WRITTEN = {
    "score": ["forecasts.parquet", "scores.parquet", "averaged.parquet", "scored-from.json"],
    "repair": ["repaired.parquet", "repaired-from.json"],
}


@pytest.mark.parametrize(
    ("command", "busy"),
    [("score", "scores.parquet"), ("score", "averaged.parquet"), ("repair", "repaired.parquet")],
)
def test_a_busy_output_is_said_in_one_line_and_nothing_is_replaced(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    command: str, busy: str,
) -> None:
    run = finished_runs.finish(tmp_path, SMALL_SPEC)
    assert CliRunner().invoke(app, ["repair", str(run)]).exit_code == 0
    before = {name: os.stat(run / name) for name in _WRITTEN[command]}
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == run / busy:  # what a file mounted over it says
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(src), str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    result = CliRunner().invoke(app, [command, str(run)])
    assert (result.exit_code, result.output) == (
        2,
        f"error: Device or resource busy: {run / busy}; nothing was replaced (kept as they "
        f"were: {', '.join(_WRITTEN[command][:-1])})\n",
    )
    after = {name: os.stat(run / name) for name in _WRITTEN[command]}
    assert {name: (s.st_ino, s.st_mtime_ns) for name, s in after.items()} == {
        name: (s.st_ino, s.st_mtime_ns) for name, s in before.items()
    }
    assert not list(run.glob(".scoring-*")) and not list(run.glob(".repair-*"))
