"""runs.memory: polars' allocator told to return freed pages at once, whatever it inherits."""

from __future__ import annotations

import os
import subprocess
import sys

from runs.memory import JEMALLOC_ENV

# Imports polars after the call, as `dutchbook` does, and prints the options jemalloc reads.
CODE = (
    "import os; from runs.memory import return_freed_pages_early as early; early(); "
    f"import polars; print(os.environ[{JEMALLOC_ENV!r}])"
)


def _options(inherited: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != JEMALLOC_ENV}
    if inherited is not None:
        env[JEMALLOC_ENV] = inherited
    out = subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    # jemalloc reads the options left to right: the last setting of each one wins.
    return dict(option.split(":", 1) for option in out.split(","))


def test_freed_pages_are_returned_at_once_in_a_fresh_process() -> None:
    options = _options(None)
    assert options["dirty_decay_ms"] == "0"
    assert options["muzzy_decay_ms"] == "0"


def test_polars_defaults_passed_down_by_a_parent_do_not_win() -> None:
    # A parent that imported polars (the sweep bench, a test runner) passes polars' own
    # defaults down in the same variable; the child's setting must still be the last.
    options = _options("dirty_decay_ms:500,muzzy_decay_ms:1000")
    assert options["dirty_decay_ms"] == "0"
    assert options["muzzy_decay_ms"] == "0"
