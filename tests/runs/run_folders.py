"""A finished small campaign to copy, and a folder's files to compare, for the tests of the
commands that rewrite a run folder (`score`, `repair`, `reparse`, `report`)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runs.cli import app

#: The smallest campaign worth a folder: two stock-days of the baseline arm, one simulated model.
SMALL_SPEC = """
name = "small"
seed = 2
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


def finish_run(root: Path, spec_text: str) -> Path:
    """`dutchbook run` of `spec_text` into `root/out`, which it returns (the run must end 0)."""
    spec = root / "spec.toml"
    spec.write_text(spec_text, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(root / "out")])
    assert result.exit_code == 0, result.output
    return root / "out"


def folder_contents(folder: Path, skip: frozenset[str] = frozenset()) -> dict[str, bytes]:
    """Every file's bytes below `folder` by relative path, files named in `skip` left out."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in skip
    }
