"""A run folder a later dutchbook wrote to, met by this one: the commands that write the ledger
(`run`, `reparse`) refuse it in one line before writing anything; the readers take it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents


def test_a_later_versions_folder_is_refused_by_writers_and_read_by_readers(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    out = finished_runs.finish(tmp_path, SMALL_SPEC)
    shard = sorted((out / "attempts").glob("part-*.parquet"))[-1]
    pl.read_parquet(shard).with_columns(cost_usd=pl.lit(0.0)).write_parquet(shard)
    logs = frozenset({"phases.jsonl"})  # `run` times its planning before it opens the ledger
    before = folder_contents(out, logs)
    spec = tmp_path / "spec.toml"
    for args in (["run", str(spec), "--out", str(out)], ["reparse", str(out)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        said = result.output.strip().splitlines()  # `run` says its plan first
        assert said[-1].startswith(f"error: {shard} holds cost_usd"), said
        assert "a later version has written to this folder" in said[-1]
        assert not any(line.startswith("error") for line in said[:-1]), said
    assert folder_contents(out, logs) == before, "nothing written by the refused commands"
    for args in (["status", str(out)], ["audit", str(out), "--json"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
