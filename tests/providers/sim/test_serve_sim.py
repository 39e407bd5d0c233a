"""`dutchbook serve-sim` and the serve-forever loop behind it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import aiohttp
from simkit import chat_body
from typer.testing import CliRunner

from providers.sim.server import SimHandle, serve_forever
from runs.cli import app


async def test_serve_forever_reports_start_and_final_counts() -> None:
    started: list[SimHandle] = []
    finished: list[dict[str, int]] = []
    done = asyncio.get_running_loop().create_future()

    def on_start(handle: SimHandle) -> None:
        started.append(handle)

    async def client() -> None:
        while not started:
            await asyncio.sleep(0.01)
        async with aiohttp.ClientSession() as http:
            for _ in range(3):
                async with http.post(started[0].root_url + "/sim/v1/chat/completions",
                                     json=chat_body()) as resp:
                    assert resp.status == 200
        done.set_result(None)

    task = asyncio.create_task(client())
    counts = await serve_forever(0, "none", on_start=on_start, on_stop=finished.append,
                                 until=done)
    await task
    assert counts["answered.sim"] == 3
    assert finished == [counts]
    assert started[0].root_url.startswith("http://127.0.0.1:")


def test_cli_help_and_bad_profile() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["serve-sim", "--help"])
    assert result.exit_code == 0
    assert "--faults" in result.output and "--port" in result.output
    result = runner.invoke(app, ["serve-sim", "--faults", "stormy", "--port", "0"])
    assert result.exit_code == 2
    assert "unknown fault profile" in result.output


def test_standalone_process_prints_root_credentials_and_counts_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from runs.cli import main; main()", "serve-sim", "--port", "0",
         "--faults", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "Ctrl-C" in line:
                break
        text = "".join(lines)
        assert "listening on http://127.0.0.1:" in text
        assert "export GROQ_API_KEY=" in text and "AWS_SECRET_ACCESS_KEY" in text
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=20)
        assert "simulator counts" in rest
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
