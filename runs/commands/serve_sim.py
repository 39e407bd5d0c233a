"""Placeholder until the `serve_sim` command lands; registers nothing."""

import typer


def register(app: typer.Typer) -> None:
    del app
