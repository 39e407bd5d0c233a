"""`dutchbook status` of a run whose stop waits for an attempt a provider holds.

After one SIGINT a tester's run waited the attempt's whole `timeout_s` (600 s) for a provider
that hung, and `status` said "live", its lane "running", `--json`'s `notes` empty: nothing
said a stop was asked for, nor what it waited for.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from engine.outage import OutagePolicy

DUTCHBOOK = str(Path(sys.executable).with_name("dutchbook"))
#: The hung model's `timeout_s`: the cut at a provider that never answered
#: (`OutagePolicy.unanswered_stop_wait_s`, which a `dutchbook run` cannot set) is made only
#: when shorter than the attempt's timeout_s (`Lane._stop_wait_s`), so at this timeout the
#: stop waits for the attempt's timeout_s and says "(its timeout_s)". A longer timeout
#: would bring the cut in (its words: tests/engine/test_stop_waits.py).
TIMEOUT_S = OutagePolicy().unanswered_stop_wait_s

SPEC = """
name = "stop-waits"
seed = 5

[data]
stock_days = 2

[[models]]
name = "hung"
provider = "openai"
model = "hung"
base_url = "{url}/v1"
concurrency = 4
timeout_s = {timeout_s}

[[arms]]
name = "baseline"
"""


@pytest.fixture
async def hung_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A provider that takes each request and answers none; the event is set at the first."""
    asked, released = asyncio.Event(), asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await request.read()
        asked.set()
        await released.wait()
        return web.json_response({"error": {"message": "gone"}}, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", asked
    released.set()
    await runner.cleanup()


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="300", NO_COLOR="1",
               OPENAI_API_KEY="sk-test")  # fmt: skip
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


async def _status(run_dir: Path, *flags: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        DUTCHBOOK, "status", str(run_dir), *flags, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def _stopping(run_dir: Path) -> dict[str, Any]:
    """`status --json`'s `stopping` once it says one (dispatch rewrites `lanes.json` each
    second)."""
    async with asyncio.timeout(30):
        while True:
            summary: dict[str, Any] = orjson.loads(await _status(run_dir, "--json"))
            if summary.get("stopping"):
                return summary
            await asyncio.sleep(0.2)


async def test_status_says_a_stop_waits_for_the_attempt_in_flight(
    tmp_path: Path, hung_server: tuple[str, asyncio.Event]
) -> None:
    url, asked = hung_server
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(url=url, timeout_s=TIMEOUT_S))
    run_dir = tmp_path / "run"
    proc = await asyncio.create_subprocess_exec(
        DUTCHBOOK, "run", str(spec), "--out", str(run_dir), cwd=tmp_path, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(60):
            await asyncio.wait({asyncio.ensure_future(asked.wait()),
                                asyncio.ensure_future(proc.wait())},
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        assert asked.is_set(), await proc.communicate()
        proc.send_signal(signal.SIGINT)
        summary = await _stopping(run_dir)
        assert summary["state"] == "live"
        assert summary["stopping"]["attempts_in_flight"] == 1
        assert 0 < summary["stopping"]["wait_s"] <= TIMEOUT_S
        assert summary["models"]["hung"]["lane_state"] == "cancelled"
        said = await _status(run_dir)
        assert f"live (pid {proc.pid} on " in said
        assert "stopping: waiting for 1 attempt in flight, up to 0:" in said
        assert f"more (its timeout_s); signal it again (`kill {proc.pid}`) to stop at once" in said
        proc.send_signal(signal.SIGINT)  # the second: out at once
        async with asyncio.timeout(60):
            assert await proc.wait() == 130
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
