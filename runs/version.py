"""The installed dutchbook's version: what `--version` prints, `design.json` records and a
report's provenance names. Standard library only, so the command line can ask it at once."""

from __future__ import annotations

from importlib import metadata


def installed_version() -> str | None:
    """The version of the installed package; None when run from a source tree that was
    never installed."""
    try:
        return metadata.version("dutchbook")
    except metadata.PackageNotFoundError:
        return None
