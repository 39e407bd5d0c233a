"""One small campaign on the local simulator with every arm a figure needs and light faults,
shared by the report tests (it runs in seconds; its forecasters are simulated and labelled
so)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from runs.pipeline import run_campaign

# cdp_browser lives next to the tests (importlib import mode: no package to import it from).
sys.path.insert(0, str(Path(__file__).parent))

SPEC = Path(__file__).parents[1] / "runs" / "specs" / "figures.toml"


@pytest.fixture(scope="session")
def figures_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign's folder, run once per session by whichever xdist worker first asks (each
    worker ran its own, about 12 s of CPU): the others wait on its lock and share the folder,
    which no test changes (those that change a report copy it first)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _figures_run(tmp_path_factory.mktemp("figures"))
    shared = tmp_path_factory.getbasetemp().parent / "figures-run"
    shared.mkdir(exist_ok=True)
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        if not (shared / "complete").is_file():  # never made, or its run raised part-way
            shutil.rmtree(shared / "run", ignore_errors=True)
            _figures_run(shared)
            (shared / "complete").touch()
    return shared / "run"


def _figures_run(folder: Path) -> Path:
    out = folder / "run"
    console = Console(file=StringIO(), width=120)
    # A few percent of 5xx and malformed replies, so the audit has retries to show (rate
    # limits would also slow the lanes down, and this is shared by every report test).
    faults = "server_error=0.02,malformed_json=0.01"
    result = asyncio.run(run_campaign(SPEC, out, console=console, progress=False, faults=faults))
    assert result.summary is not None and result.summary.complete
    return out


@pytest.fixture(autouse=True)
def _figures_closed() -> Iterator[None]:
    """Every figure a test opened closed after it: tests that catch a figure before it is
    saved leave it open, and past 20 in one worker matplotlib warned of the memory held."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
