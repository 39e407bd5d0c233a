"""What `status`'s first line says of a folder no run is working on, and what resumes it.

Found by a new user following the README: a strict reparse of a lenient run left the folder
reading "stopped", though nothing stopped (the why came lines later).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import runs
from runs.cli import app
from tests.runs.run_folders import fraction_spec

SPEC = fraction_spec("header", 3, "lenient")


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


@pytest.mark.parametrize("relative", [False, True])
def test_a_stopped_run_is_said_with_the_command_that_resumes_it(
    tmp_path: Path, relative: bool
) -> None:
    """A run that stopped (or died) with requests left said so, and nothing of what resumes
    it, where `audit` says "running the same command again". Its frozen spec naming a
    families folder relative to the spec it was started with (as `local.toml`'s is), the
    copy cannot resume it: the line says so."""
    started = tmp_path / "campaign"
    started.mkdir()
    data, arm = "stock_days = 2", "baseline"
    if relative:
        shutil.copytree(Path(runs.__file__).parent / "specs" / "local-families", started / "f")
        data, arm = 'families = "f"', "families/joint"
    spec = started / "spec.toml"
    spec.write_text(
        'name = "stops"\nseed = 1\nmax_attempts = 1\nsim_faults = "server_error=0.3"\n'
        f'[data]\n{data}\n[[models]]\nname = "m"\nprovider = "sim"\nmodel = "sim-coherent"\n'
        f'[[arms]]\nname = "{arm}"\n',
        encoding="utf-8",
    )  # fmt: skip
    out = tmp_path / "out"
    CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    summary = orjson.loads(_invoke("status", str(out), "--json"))
    assert summary["state"] == "stopped" and summary["remaining"] > 0
    copy = out / "spec.toml"
    said = f"`dutchbook run SPEC --out {out}` resumes it, SPEC the spec it was started with"
    said += (
        f" ({copy}, the folder's copy, names a relative [data] path it cannot resolve)"
        if relative
        else f" (or {copy}, the folder's copy)"
    )
    assert summary["resume_command"] == said
    assert said in _invoke("status", str(out)).splitlines()
    resumed = CliRunner().invoke(app, ["run", str(spec if relative else copy), "--out", str(out)])
    assert "queries planned (resuming)" in resumed.output, resumed.output


def test_a_stopped_rehearsal_is_said_with_the_rehearse_flag(tmp_path: Path) -> None:
    """A rehearsal's folder is refused to a run without --rehearse: the resume command
    `status` gives left the flag out (a reviewer's)."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "stops"\nseed = 1\nmax_attempts = 1\nsim_faults = "server_error=0.3"\n'
        '[data]\nstock_days = 2\n[[models]]\nname = "m"\nprovider = "groq"\n'
        'model = "llama-3.1-8b-instant"\n[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )  # fmt: skip
    out = tmp_path / "out"
    CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--rehearse"])
    summary = orjson.loads(_invoke("status", str(out), "--json"))
    assert summary["rehearsal"] and summary["state"] == "stopped" and summary["remaining"] > 0
    command = summary["resume_command"]
    assert command.startswith(f"`dutchbook run SPEC --out {out} --rehearse` resumes it"), command
    resumed = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--rehearse"])
    assert "queries planned (resuming)" in resumed.output, resumed.output
