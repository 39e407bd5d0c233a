"""What `status`'s first line says of a folder no run is working on, and what resumes it.

Found by a new user following the README: a strict reparse of a lenient run left the folder
reading "stopped", though nothing stopped (the why came lines later).
"""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

from runs.cli import app

SPEC = """
name = "header"
seed = 3
parser = "lenient"
[data]
stock_days = 2
[[models]]
name = "fractions"
provider = "sim"
model = "sim-fraction"
[[arms]]
name = "baseline"
"""


def _invoke(*args: str) -> str:
    done = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    return done.stdout


def test_a_strict_reparse_of_a_lenient_run_is_not_said_stopped(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    _invoke("run", str(spec), "--out", str(out))
    _invoke("reparse", str(out), "--parser", "strict")
    summary = orjson.loads(_invoke("status", str(out), "--json"))
    rejected = summary["answers_rejected_on_reparse"]
    assert rejected > 0
    assert summary["remaining"] == rejected
    assert summary["state"] == "stopped"  # the contract's value, kept
    assert summary["reparse_rejected_only"] is True
    header = _invoke("status", str(out)).splitlines()[0]
    assert header == f"{out}: answered, {rejected:,} answers rejected by a re-parse since"
    _invoke("reparse", str(out), "--parser", "lenient")
    summary = orjson.loads(_invoke("status", str(out), "--json"))
    assert summary["reparse_rejected_only"] is False
