"""`dutchbook run`'s closing line offers `dutchbook reparse --parser lenient` only for
requests whose kept replies a reparse can read.

The line offered it whenever a strict run had requests given up with their answer-failure
budget spent. A reply over the engine's size limit was such a failure, and is not kept: a run
against a server sending some replies too long was told to "first try `dutchbook reparse ...
--parser lenient`, which reads their kept replies again", and the reparse then accepted
nothing. Such a reply is no answer of the model's and no longer spends that budget
(`engine.records.FOREIGN_NOTE`); a refusal is an answer failure that keeps no reply either.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import polars as pl
import pytest
from aiohttp import ClientSession, web

from engine.http import MAX_REPLY_BYTES
from engine.records import FOREIGN_NOTE
from engine.scan import scan_attempts
from providers.sim.server import start_sim

SPEC = """
name = "toolong"
seed = 1
[data]
stock_days = 2
[[models]]
name = "sim-a"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""
#: Replies passed on whole, and sent, before the proxy sends any too long: the lane has
#: seen the provider's format, so too-long replies are retried, not taken for a foreign
#: address. Counted when asked, ten cut replies could reach the lane before the whole ones
#: (`RetryPolicy.foreign_streak`) on a loaded machine, and it stopped as foreign.
WHOLE_FIRST = 3
#: Response headers not copied from the simulator's reply (the proxy's own framing).
HOP_HEADERS = {"content-length", "transfer-encoding", "content-encoding", "connection"}

Proxy = Callable[[str], Awaitable[str]]


@pytest.fixture
async def too_long_for_some() -> AsyncIterator[Proxy]:
    """A proxy in front of a simulator that, once `WHOLE_FIRST` answers went through, answers
    about a third of the questions (always the same ones, at every try) with a reply longer
    than `MAX_REPLY_BYTES`: its head declares the length, and the engine reads no further."""
    session = ClientSession(auto_decompress=False)
    runners: list[web.AppRunner] = []

    async def start(sim_root: str) -> str:
        passed, cut = [0], set[str]()

        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            chat = request.method == "POST" and request.path.endswith("/chat/completions")
            if chat:
                user = json.loads(body)["messages"][-1]["content"]
                third = hashlib.sha256(user.encode()).digest()[0] % 3 == 0
                if user in cut or (passed[0] >= WHOLE_FIRST and third):
                    cut.add(user)
                    reply = web.StreamResponse(headers={"Content-Type": "application/json"})
                    reply.content_length = MAX_REPLY_BYTES + 1
                    await reply.prepare(request)
                    await reply.write(b'{"id": "chatcmpl-long", "choices": [')
                    return reply
            headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
            async with session.request(
                request.method, sim_root + request.path_qs, headers=headers, data=body
            ) as forwarded:
                kept = {k: v for k, v in forwarded.headers.items() if k.lower() not in HOP_HEADERS}
                whole = web.Response(
                    status=forwarded.status, headers=kept, body=await forwarded.read()
                )
            await whole.prepare(request)
            await whole.write_eof()
            if chat:  # counted once sent, not once asked (see WHOLE_FIRST)
                passed[0] += 1
            return whole

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()
    await session.close()


async def dutchbook(*args: str) -> tuple[int, str, str]:
    """The CLI in a child process (this loop serves the proxy meanwhile)."""
    child = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("dutchbook")), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(child.communicate(), timeout=240)
    assert child.returncode is not None
    return child.returncode, out.decode(), err.decode()


@pytest.mark.timeout(300)
async def test_requests_spent_on_replies_never_kept_are_not_sent_to_a_reparse(
    tmp_path: Path,
) -> None:
    """Refusals (the provider's refusal signal: no text kept) spend a budget of one."""
    spec = tmp_path / "refused.toml"
    faults = 'seed = 1\nmax_answer_failures = 1\nsim_faults = "refusal=0.4"\n'
    spec.write_text(SPEC.replace("seed = 1\n", faults), encoding="utf-8")
    out = tmp_path / "run"
    code, stdout, stderr = await dutchbook("run", str(spec), "--out", str(out))
    assert code == 4, stdout + stderr
    closing = stderr.strip().splitlines()[-1]
    assert "spent their answer-failure budget" in closing, closing
    assert "max_answer_failures is raised in the spec" in closing
    assert "reparse" not in closing, closing
    # What the advice would have led to: nothing was kept, so nothing is read again.
    code, stdout, stderr = await dutchbook("reparse", str(out), "--parser", "lenient", "--json")
    assert code == 0, stdout + stderr
    assert json.loads(stdout)["newly_accepted"] == 0


@pytest.mark.timeout(300)
async def test_replies_too_long_spend_attempts_not_the_answer_failure_budget(
    tmp_path: Path, too_long_for_some: Proxy
) -> None:
    """The same third of the questions answered too long at every try: each is asked
    max_attempts times in the run, none is given up for good, and the closing line sends its
    user to no reparse (a resume asks them again, as the line says)."""
    spec = tmp_path / "toolong.toml"
    spec.write_text(SPEC.replace("seed = 1\n", "seed = 1\nmax_attempts = 3\n"), encoding="utf-8")
    out = tmp_path / "run"
    async with await start_sim(port=0) as sim:
        proxy = await too_long_for_some(sim.root_url)
        code, stdout, stderr = await dutchbook(
            "run", str(spec), "--out", str(out), "--sim-url", proxy
        )
    assert code == 4, stdout + stderr
    closing = stderr.strip().splitlines()[-1]
    assert "unanswered" in closing and "run the same command again" in closing, closing
    assert "answer-failure budget" not in closing and "reparse" not in closing, closing
    cut = scan_attempts(out).filter(pl.col("outcome") == "invalid_response").collect()
    assert cut.height and cut["detail"].str.ends_with(FOREIGN_NOTE).all()
    per_request = cut.group_by("request_id").len()["len"]
    assert (per_request == 3).all(), per_request.to_list()
