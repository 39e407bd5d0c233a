"""`dutchbook audit DIR`: retries and failures of a run, read from its folder alone.

Works on a finished, interrupted or running campaign (the ledger is read without its lock)
and never calls a provider. `--json` prints exactly one object (`engine.audit.Audit.to_dict`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runs.commands._errors import user_errors
from runs.commands._run_folder import require_run_folder


def audit(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
) -> None:
    """Retry attempts by cause, requests given up, latency, tokens and cost, per model."""
    from runs.audit import render, run_audit

    require_run_folder(run_dir)
    with user_errors(OSError, folder=run_dir):  # a file of the folder unreadable, in the way
        report = run_audit(run_dir)
    if as_json:
        import orjson

        typer.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
        return
    from runs.output import stdout_console

    render(report, stdout_console(), title=str(run_dir))


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)
