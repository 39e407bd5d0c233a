"""`dutchbook run SPEC`: plan, dispatch, score and report a campaign; running it again resumes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from providers.types import ConfigError
from runs.commands._errors import user_errors
from runs.pipeline import RunError, run_campaign
from runs.spec import SpecError


def run(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="campaign spec (TOML)")],
    out: Annotated[
        Path | None, typer.Option("--out", help="run folder (default out/<name>)")
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option("--max-cost", metavar="USD", help="refuse to start above this estimate"),
    ] = None,
    rehearse: Annotated[
        bool,
        typer.Option(
            "--rehearse", help="swap every provider for the local simulator: no keys, no spending"
        ),
    ] = False,
) -> None:
    """Run a campaign into a folder; an interrupted run resumes where it stopped."""
    with user_errors(SpecError, RunError, ConfigError, FileNotFoundError):
        result = asyncio.run(run_campaign(spec_path, out, max_cost=max_cost, rehearse=rehearse))
    typer.echo(f"run folder: {result.run_dir}")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
