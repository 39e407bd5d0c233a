"""One small campaign on the local simulator with every arm a figure needs and light faults,
shared by the report tests (it runs in seconds; its forecasters are simulated and labelled
so)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from runs.figures_env import FIGURES_ENV
from runs.pipeline import run_campaign

# cdp_browser lives next to the tests (importlib import mode: no package to import it from).
sys.path.insert(0, str(Path(__file__).parent))

SPEC = Path(__file__).parents[1] / "runs" / "specs" / "figures.toml"


#: `made_once`: `make(folder)` run once per session, the folder it filled returned.
MadeOnce = Callable[[str, Callable[[Path], None]], Path]


@pytest.fixture(scope="session")
def figures_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign's folder, run once per session by whichever xdist worker first asks (each
    worker ran its own, about 12 s of CPU): the others wait on its lock and share the folder,
    which no test changes (those that change a report copy it first)."""
    return _made_once(tmp_path_factory, "figures-run", _figures_run, leaf="run")


@pytest.fixture(scope="session")
def made_once(tmp_path_factory: pytest.TempPathFactory) -> MadeOnce:
    """`made_once(name, make)`: as `figures_run` is made, for a session fixture's own
    folder (`make` fills the empty folder it is given; the folder is returned)."""
    return lambda name, make: _made_once(tmp_path_factory, name, make)


def _made_once(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None], leaf: str = "made"
) -> Path:
    """`make(folder)` run once per session: in this process without xdist, else by the
    first worker to take `name`'s lock, the others waiting on it and sharing the folder.
    Its reports draw their figures, as the report's tests' own runs do."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = factory.mktemp(name) / leaf
        with figures_drawn():
            make(folder)
        return folder
    shared = factory.getbasetemp().parent / name
    shared.mkdir(exist_ok=True)
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        if not (shared / "complete").is_file():  # never made, or its making raised part-way
            shutil.rmtree(shared / leaf, ignore_errors=True)
            with figures_drawn():
                make(shared / leaf)
            (shared / "complete").touch()
    return shared / leaf


def _figures_run(out: Path) -> None:
    console = Console(file=StringIO(), width=120)
    # A few percent of 5xx and malformed replies, so the audit has retries to show (rate
    # limits would also slow the lanes down, and this is shared by every report test).
    faults = "server_error=0.02,malformed_json=0.01"
    result = asyncio.run(run_campaign(SPEC, out, console=console, progress=False, faults=faults))
    assert result.summary is not None and result.summary.complete


@contextlib.contextmanager
def figures_drawn() -> Iterator[None]:
    """The figures drawn inside the block (`FIGURES_ENV` unset), whatever the suite's
    setting (tests/conftest.py): the report's tests draw them, and a session fixture's run
    is made before the module's setting (`_figures_drawn_here`) applies."""
    before = os.environ.pop(FIGURES_ENV, None)
    try:
        yield
    finally:
        if before is not None:
            os.environ[FIGURES_ENV] = before


@pytest.fixture(scope="module", autouse=True)
def _figures_drawn_here() -> Iterator[None]:
    """The report's tests draw the figures, their module fixtures' runs as well (a test's
    own setting, tests/conftest.py, comes after those are made; an autouse fixture comes
    before the others of its scope). Module-scoped: with no `__init__.py`, a "package"
    fixture here lasts the session, and the tests after these drew figures too."""
    with figures_drawn():
        yield


@pytest.fixture(autouse=True)
def _figures_closed() -> Iterator[None]:
    """Every figure a test opened closed after it: tests that catch a figure before it is
    saved leave it open, and past 20 in one worker matplotlib warned of the memory held."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
