"""A lane stopped by a server that takes its connections and answers badly says so.

Such a server (a reply with too many headers, a body short of its length, a connection reset
once the request was sent) gave only connection errors, as a server that is not there does,
and the lane stopped with the hint for one that never replied: "no reply from its provider
... is the server up, base_url right, and timeout_s long enough?". The server was up. The
lane now says its replies could not be read, and what to check for that.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from engine.dispatch import DispatchSummary, dispatch
from engine.outage import OutagePolicy
from engine.retry import RetryPolicy
from engine.scan import scan_attempts

if TYPE_CHECKING:
    from tests.engine.conftest import Kit, RawReply, RawServe

from tests.engine.conftest import MANY_HEADERS

POLICY = RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.05)
OUTAGE = OutagePolicy(streak=5, probe_base_s=0.05, probe_cap_s=0.2, unanswered_probes=3)

async def _dispatch(
    tmp_path: Path, kit: type[Kit], root: str, model: str, queries: int, *,
    concurrency: int, timeout_s: float,
) -> DispatchSummary:
    """`queries` planned for `model` at `root`, dispatched into tmp_path/run."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(model, queries))
    config, adapter = kit.sim_model(model, root, concurrency=concurrency, timeout_s=timeout_s)
    return await dispatch(
        plan, tmp_path / "run", {model: config}, {model: adapter}, policy=POLICY,
        outage=OUTAGE, log_console=None,
    )  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "reply",
    [
        (b"HTTP/1.1 200 OK\r\n" + MANY_HEADERS + b"Content-Length: 2\r\n\r\n{}", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", False),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{"id"', True),
        (b"", True),
    ],
    ids=["too-many-headers", "short-body", "reset-mid-body", "reset-after-accept"],
)
async def test_a_server_answering_unreadably_is_not_asked_whether_it_is_up(
    tmp_path: Path, kit: type[Kit], raw_server: RawServe, reply: RawReply
) -> None:
    root = await raw_server(reply)
    summary = await _dispatch(tmp_path, kit, root, "bad", 10, concurrency=2, timeout_s=2.0)
    lane = summary.lanes["bad"]
    assert lane.state.value == "stopped" and lane.accepted == 0
    assert set(scan_attempts(tmp_path / "run").collect()["outcome"]) == {"connection_error"}
    message = lane.message
    assert message.startswith("bad (openai): no readable reply from its provider since"), message
    assert "3 probes failed" in message and "the last: " in message
    assert "is the server up" not in message and "timeout_s" not in message
    assert "the server takes the connections" in message
    assert "a proxy" in message and "the server's log" in message and "base_url" in message


@pytest.mark.timeout(60)
async def test_one_reset_among_timeouts_keeps_the_timeouts_hint(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """A load balancer resets one connection of a server whose every other request times
    out: the hint follows the last failure, as the stop line quotes it, and asks about
    timeout_s, not about a proxy breaking replies."""
    seen, ended = 0, asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        await reader.readuntil(b"\r\n\r\n")
        seen += 1
        if seen == 1:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        await ended.wait()  # past every timeout: silent until the test ends
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    root = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        # 1.5 s: the reset, on this same loop, must come within it even on a loaded machine.
        summary = await _dispatch(tmp_path, kit, root, "slow", 2, concurrency=1, timeout_s=1.5)
    finally:
        ended.set()
        server.close()
        await asyncio.sleep(0.05)  # the silent handlers close their connections
    outcomes = list(scan_attempts(tmp_path / "run").collect().sort("started_at")["outcome"])
    assert outcomes[0] == "connection_error" and outcomes[-1] == "timeout", outcomes
    message = summary.lanes["slow"].message
    assert "no reply from its provider since" in message, message
    assert "timeout_s (1.5s) long enough?" in message and "a proxy" not in message


@pytest.mark.timeout(60)
async def test_a_reset_says_the_systems_reason(
    tmp_path: Path, kit: type[Kit], raw_server: RawServe
) -> None:
    """A reset once the request was sent read only "ClientOSError talking to ...": aiohttp's
    error has no message of its own, the reason is the system's."""
    root = await raw_server((b"", True))
    await _dispatch(tmp_path, kit, root, "reset", 2, concurrency=1, timeout_s=2.0)
    details = set(scan_attempts(tmp_path / "run").collect()["detail"])
    assert details and all(
        d.startswith("ClientOSError (Connection reset by peer) talking to ") for d in details
    ), details
