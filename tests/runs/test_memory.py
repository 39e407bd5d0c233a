"""runs.memory: polars' allocator told to return freed pages at once, whatever it inherits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

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


def test_a_command_freezes_what_it_imported_and_only_that() -> None:
    """`imports_frozen`: what is alive when it starts is left out of later collections, what
    survives a `release_heap` inside it is not (it held memory past its use at paper scale);
    afterwards the collector is as before."""
    import gc

    from runs.memory import imports_frozen, release_heap

    before = gc.get_freeze_count()
    with imports_frozen():
        frozen = gc.get_freeze_count()
        assert frozen > before
        # tracked containers, alive past the phase
        survivor: list[list[object]] = [[] for _ in range(1_000)]
        release_heap()
        # Not `== frozen`: a frozen object may die meanwhile (another test's thread ending
        # beside the full suite took two); freezing the survivors would add 1,000.
        assert gc.get_freeze_count() < frozen + len(survivor)
    assert gc.get_freeze_count() == before


def test_dutchbook_run_runs_its_campaign_with_its_imports_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import runs.pipeline
    from runs.cli import app
    from runs.pipeline import RunError

    seen: list[int] = []

    async def campaign(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_freeze_count())
        raise RunError("stop here")

    monkeypatch.setattr(runs.pipeline, "run_campaign", campaign)  # the command imports it late
    before = gc.get_freeze_count()
    (tmp_path / "spec.toml").write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml")])
    assert result.exit_code == 2 and "stop here" in result.output
    assert seen and seen[0] > before + 10_000  # the command's modules, at least
    assert gc.get_freeze_count() == before
