"""Scoring on a disk that fills while polars writes a part (`runs.scoring_step.PartFiles`).

Polars can lose a write's ENOSPC and fail with "Invalid thrift: transport error"; the
scoring folder is then removed on the way out, which gives the disk its room back, so the
one-line disk-full handler found room and let polars' traceback through (exit 1).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns

LOST_ENOSPC = "parquet: File out of specification: Invalid thrift: transport error"


def test_a_part_whose_enospc_polars_lost_ends_score_in_the_disk_full_line(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_runs.finish(tmp_path, SMALL_SPEC)
    scores = (run / "scores.parquet").read_bytes()
    real_write, real_statvfs = pl.DataFrame.write_parquet, os.statvfs
    half_written: list[Path] = []

    def write_parquet(frame: pl.DataFrame, file: Any, *args: Any, **kwargs: Any) -> None:
        path = Path(file)
        if not path.parent.name.startswith(".scoring-"):
            return real_write(frame, file, *args, **kwargs)
        path.write_bytes(b"PAR1" + bytes(4096))
        half_written.append(path)
        raise pl.exceptions.ComputeError(LOST_ENOSPC)

    def statvfs(path: Any) -> Any:  # no room while the half-written part is there
        if any(p.exists() for p in half_written):
            return SimpleNamespace(f_bavail=0, f_frsize=4096)
        return real_statvfs(path)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
    monkeypatch.setattr(os, "statvfs", statvfs)
    result = CliRunner().invoke(app, ["score", str(run)])
    assert result.exit_code == 6, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "disk full" in errors[0], result.output
    assert half_written and not any(p.exists() for p in half_written)  # no part left
    assert not list(run.glob(".scoring-*"))
    assert (run / "scores.parquet").read_bytes() == scores
