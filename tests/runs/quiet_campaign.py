"""A campaign run to the end for tests that read its folder, its console kept in a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console

from runs.pipeline import run_campaign


def run_quietly(root: Path, name: str, spec_text: str) -> Path:
    """Run `spec_text` (saved as `root/<name>.toml`) into `root/run`; the run folder."""
    spec = root / f"{name}.toml"
    spec.write_text(spec_text, encoding="utf-8")
    out = root / "run"
    with (root / "console.txt").open("w", encoding="utf-8") as log:
        asyncio.run(run_campaign(spec, out, console=Console(file=log, width=200), progress=False))
    return out
