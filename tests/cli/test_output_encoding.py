"""A model named in Chinese, on an output whose encoding has not got its characters (a
terminal or log in ASCII or Latin-1): `report` ended in a UnicodeEncodeError at its
leaderboard, before it wrote its page, and `status` at its table. The characters are now
written as backslash escapes, as Python writes them to stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs.report_page import PAGE
from tests.runs.quiet_campaign import run_quietly

NAME = "模型-α"
SPEC = f"""
name = "encoding"
seed = 3
[data]
stock_days = 2
[[models]]
name = "{NAME}"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
"""
ENTRY = "import sys; from runs.entry import main; sys.argv[0] = 'dutchbook'; main()"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_quietly(tmp_path_factory.mktemp("encoding"), "encoding", SPEC)


@pytest.mark.parametrize("command", ["status", "audit", "report"])
def test_a_name_the_output_cannot_spell_is_escaped_not_fatal(run_dir: Path, command: str) -> None:
    if command == "report":
        (run_dir / "report" / PAGE).unlink()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, command, str(run_dir)],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "200"},
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    err = done.stderr.decode("ascii")
    assert done.returncode == 0, err
    assert "UnicodeEncodeError" not in err
    assert NAME.encode("ascii", "backslashreplace") in done.stdout
    if command == "report":
        assert (run_dir / "report" / PAGE).exists()  # written after the leaderboard's print
