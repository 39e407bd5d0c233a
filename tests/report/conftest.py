"""One small campaign on the local simulator with every arm a figure needs, shared by the
report tests (it runs in seconds; its forecasters are simulated and labelled so)."""

from __future__ import annotations

import asyncio
import sys
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
    out = tmp_path_factory.mktemp("figures") / "run"
    console = Console(file=StringIO(), width=120)
    result = asyncio.run(run_campaign(SPEC, out, console=console, progress=False))
    assert result.summary is not None and result.summary.complete
    return out
