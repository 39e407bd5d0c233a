"""`dutchbook --version`: which version made a folder, for a bug report (design.json keeps it
too); answered without importing a command."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

ENTRY = "import sys; from runs.entry import main; sys.argv[0] = 'dutchbook'; main()"


def test_version_prints_the_installed_version_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "--version"],
        capture_output=True, text=True, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"dutchbook {metadata.version('dutchbook')}\n"
    assert done.stderr == ""


def test_python_dash_m_runs_entry_is_the_command() -> None:
    """`python -m runs.entry --version` printed nothing and exited 0: the module had no
    `__main__` guard, so a user (or a helper script) following it ran nothing."""
    done = subprocess.run(
        [sys.executable, "-m", "runs.entry", "--version"],
        capture_output=True, text=True, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dutchbook ") and done.stdout.strip().endswith(
        metadata.version("dutchbook")
    ), done.stdout
