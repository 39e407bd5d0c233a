"""Area fixtures of the run tests: finished campaigns made once and copied."""

from __future__ import annotations

import os

import pytest

from tests.runs.run_folders import FinishedRuns


@pytest.fixture(scope="session")
def finished_runs(tmp_path_factory: pytest.TempPathFactory) -> FinishedRuns:
    """Finished small campaigns, each run once by whichever worker first asks and copied.

    Under xdist each worker's base folder is its own, below one folder of the session: the
    cache is kept there, so the workers share it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent / "finished-runs"
        root.mkdir(exist_ok=True)
        return FinishedRuns(root)
    return FinishedRuns(tmp_path_factory.mktemp("finished-runs"))
