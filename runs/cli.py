"""The `dutchbook` command line: one typer app, one module per command under `runs.commands`."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="dutchbook",
    help="Label-free coherence scoring of language-model forecasts by Dutch-book LPs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module exposes `register(app)`; keeping the list here makes the command set explicit.
COMMAND_MODULES: tuple[str, ...] = (
    "check",
    "serve_sim",
    "plan",
    "run",
    "status",
    "reparse",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"runs.commands.{name}")
        module.register(app)


_register_all()


def main() -> None:
    app()
