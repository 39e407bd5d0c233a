"""Accepted answers that leave `responses/` while the run is going (a shard moved aside):
dispatch counted them, so the run said every query was answered and exited 0 while every arm
went unscored; only report.md said why (a tester's). The run now ends as incomplete (exit 4),
in one line naming the reparse that rebuilds them without a call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.memory import release_heap
from tests.runs.quiet_campaign import retried_spec


def test_answers_lost_while_running_end_it_as_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "lost.toml"
    spec.write_text(retried_spec("lost-live", 5), encoding="utf-8")
    out = tmp_path / "run"
    moved: list[Path] = []

    def move_answers_aside(*args: Any, **kwargs: Any) -> Any:
        # Called between phases; the first after dispatch finds the answers' shard, and
        # moves it aside as a user tidying the folder while the run goes on would.
        if not moved:
            for shard in (out / "responses").glob("*.parquet"):
                moved.append(shard.rename(tmp_path / shard.name))
        return release_heap(*args, **kwargs)

    monkeypatch.setattr("runs.pipeline.release_heap", move_answers_aside)
    done = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert moved, done.output
    assert done.exit_code == 4, done.output
    line = done.output.strip().splitlines()[-1]
    assert "accepted answers are missing from responses/" in line
    assert f"dutchbook reparse {out} --parser lenient" in line
