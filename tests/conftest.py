"""Suite-wide settings. Area fixtures live in each test folder's own conftest.py."""

import os

import pytest
from hypothesis import HealthCheck, settings

from runs.figure_workers import WORKERS_ENV
from runs.figures_env import FIGURES_ENV

# CI machines are small and shared: keep property tests deterministic and bounded.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    """`dutchbook run` draws its figures in its own process (`DUTCHBOOK_FIGURE_WORKERS=0`,
    `runs.figure_workers`) in every test but those marked `figure_workers`: each run's two
    spawned workers import matplotlib afresh, about 1.1 s of CPU a run, on a 2-core machine
    that the suite keeps busy. Set in this process's environment, before any fixture runs,
    so that the runs of session and module fixtures and every `dutchbook` the tests start as
    a process of its own (their environments are copies of this one) go without them too. A
    value given to the suite stands: `DUTCHBOOK_FIGURE_WORKERS=2 make test` runs every test
    with the workers.

    Nor does a report draw its figures (`DUTCHBOOK_FIGURES=0`, `runs.figures_env`) outside the
    tests of the report (`tests/report/`) and those marked `figures` or `figure_workers`:
    drawing them was about 45% of the CPU of the test files that run campaigns end to end
    to check their other files, statuses and lines. `DUTCHBOOK_FIGURES=1 make test` draws
    them in every test."""
    os.environ.setdefault(WORKERS_ENV, "0")
    os.environ.setdefault(FIGURES_ENV, "0")


@pytest.fixture(autouse=True)
def _figures_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked `figure_workers` tests the workers: `dutchbook run` in it, in this
    process or started from it, starts them (the variable unset for the test), and draws
    the figures. One marked `figures` draws them (the report's own tests all do:
    tests/report/conftest.py)."""
    if request.node.get_closest_marker("figure_workers") is not None:
        monkeypatch.delenv(WORKERS_ENV, raising=False)
        monkeypatch.delenv(FIGURES_ENV, raising=False)
    elif request.node.get_closest_marker("figures") is not None:
        monkeypatch.delenv(FIGURES_ENV, raising=False)


@pytest.fixture(autouse=True)
def _no_interrupt_said_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh process does: no interrupt's line said and no stop pending
    (`runs.signals`' process-wide flags). A test that said the line left it set, and a later
    test in the same worker expecting the line got none (`test_signals` before
    `test_cli_startup`'s Ctrl-C while a command imports, which xdist may order so)."""
    import runs.signals

    monkeypatch.setattr(runs.signals, "_interrupt_said", False)
    monkeypatch.setattr(runs.signals, "_stop_pending", False)
