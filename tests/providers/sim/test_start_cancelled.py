"""A simulator start cut short (Ctrl-C while a rehearsal starts it) ends quietly: its loop
thread used to be stopped under a pending task, and Python printed "Task was destroyed but
it is pending!" and "coroutine ... was never awaited" at exit, after the one line a user
should see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CUT_SHORT = """
import asyncio
from providers.sim.server import start_sim

async def main(yields):
    start = asyncio.ensure_future(start_sim(port=0))
    for _ in range(yields):  # let the start reach its thread, or not yet
        await asyncio.sleep(0)
    start.cancel()
    try:
        handle = await start
    except asyncio.CancelledError:
        print("cancelled")
    else:  # it had finished already: stopping is the caller's to do
        await handle.stop()
        print("started")

asyncio.run(main({yields}))
"""


@pytest.mark.parametrize("yields", [1, 2, 5])
def test_a_cancelled_start_leaves_nothing_pending(yields: int) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", CUT_SHORT.replace("{yields}", str(yields))],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("cancelled", "started")
    assert "was destroyed" not in done.stderr, done.stderr
    assert "never awaited" not in done.stderr, done.stderr
