"""A campaign run to the end for tests that read its folder, its console kept in a file; the
command line as a user runs it on that folder."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from runs.cli import app
from runs.pipeline import run_campaign


def run_quietly(root: Path, name: str, spec_text: str) -> Path:
    """Run `spec_text` (saved as `root/<name>.toml`) into `root/run`; the run folder."""
    spec = root / f"{name}.toml"
    spec.write_text(spec_text, encoding="utf-8")
    out = root / "run"
    with (root / "console.txt").open("w", encoding="utf-8") as log:
        asyncio.run(run_campaign(spec, out, console=Console(file=log, width=200), progress=False))
    return out


def copy_of(finished: Path, tmp_path: Path) -> Path:
    """A copy of the run folder `finished` at `tmp_path/run`, for a test to damage."""
    shutil.copytree(finished, tmp_path / "run")
    return tmp_path / "run"


def campaign_fixtures(name: str, spec_text: str, folder: str = "") -> tuple[Any, Any]:
    """A test module's `finished` (the campaign of `spec_text` run once for the module, into
    a temporary `folder`, else `name`, beside its `name`.toml) and `run_dir` (a copy of it per
    test, to damage): assign them to those two names in the module, which pytest reads."""

    @pytest.fixture(scope="module")
    def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return run_quietly(tmp_path_factory.mktemp(folder or name), name, spec_text)

    @pytest.fixture
    def run_dir(finished: Path, tmp_path: Path) -> Path:
        return copy_of(finished, tmp_path)

    return finished, run_dir


def scoring_commands(run_dir: Path, spec: Path) -> list[tuple[list[str], str]]:
    """The commands that read a run's answers to score them, each with what its refusal says
    to do once the folder is mended: `score`, `repair`, `report` and the resume."""
    return [
        (["score", str(run_dir)], "score again"),
        (["repair", str(run_dir)], "repair again"),
        (["report", str(run_dir)], f"`dutchbook score {run_dir}`, then this command"),
        (["run", str(spec), "--out", str(run_dir)], "run again"),
    ]


def retried_spec(name: str, seed: int) -> str:
    """One simulated noisy forecaster on the baseline arm over two stock-days, parsed
    leniently, a fifth of its requests answered by a server error: an audit with retries
    to get right."""
    return f"""
name = "{name}"
seed = {seed}
parser = "lenient"
sim_faults = "server_error=0.2"
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
"""


def invoke(*args: str) -> tuple[int, str]:
    """`dutchbook ARGS` in this process, wide enough that no line wraps: (exit code, output);
    an exception other than the exit is the test's failure, with the output shown."""
    done = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    return done.exit_code, done.output
