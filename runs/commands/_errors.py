"""One-line errors for users: a message and a non-zero exit, never a traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console

_stderr = Console(stderr=True, highlight=False)


def fail(message: str, code: int = 2) -> None:
    _stderr.print(f"[red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def user_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Turn the listed exception types into a one-line message and exit code 2."""
    try:
        yield
    except kinds as exc:
        fail(str(exc))
