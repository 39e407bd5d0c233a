"""Suite-wide settings. Area fixtures live in each test folder's own conftest.py."""

import contextlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# CI machines are small and shared: keep property tests deterministic and bounded.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _figures_drawn_in_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dutchbook run` invoked in this process draws its figures here, as a campaign too big
    for the workers does (`runs.pipeline`, `WORKERS_MAX_QUERIES`), unless the test is marked
    `figure_workers`. Each run's two spawned workers import matplotlib afresh (about 1.1 s of
    CPU each), where this process imports it once: about a third of the CPU of the suite's
    in-process campaigns, on a 2-core machine that the suite keeps busy. The workers are
    tested by `tests/report/test_figure_workers.py` (marked; the same bytes as one process)
    and by every test that runs `dutchbook` as a process of its own (signals, kills, the
    closed pipe, the full output device)."""
    if request.node.get_closest_marker("figure_workers") is None:
        monkeypatch.setattr("runs.commands.run.FigureWorkers", _no_workers)


@contextlib.contextmanager
def _no_workers() -> Iterator[None]:
    yield None


@pytest.fixture(autouse=True)
def _no_interrupt_said_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh process does: no interrupt's line said and no stop pending
    (`runs.signals`' process-wide flags). A test that said the line left it set, and a later
    test in the same worker expecting the line got none (`test_signals` before
    `test_cli_startup`'s Ctrl-C while a command imports, which xdist may order so)."""
    import runs.signals

    monkeypatch.setattr(runs.signals, "_interrupt_said", False)
    monkeypatch.setattr(runs.signals, "_stop_pending", False)
