"""A reply aiohttp cannot read fails with aiohttp's reason in its detail (`engine.http._why`).

Before, a reply with 10,000 headers or a 1 MB header read "ClientResponseError talking to
...", and one whose body fell short of its Content-Length "ClientPayloadError talking to
...": the lane then stopped asking whether the server was up, though it had answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from engine.http import HttpClient
from providers.types import Failure, HttpRequest, Outcome

Raw = Callable[[bytes], Awaitable[str]]


@pytest.fixture
async def raw_server() -> AsyncIterator[Raw]:
    """A loopback server that answers every request with the given bytes, then closes."""
    servers: list[asyncio.Server] = []

    async def start(reply: bytes) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


MANY_HEADERS = b"".join(b"X-H%d: v\r\n" % i for i in range(10_000))


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"HTTP/1.1 200 OK\r\n" + MANY_HEADERS + b"Content-Length: 2\r\n\r\n{}",
         "(Too many headers received)"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",
         "(Not enough data to satisfy content length header (received 2 of 100 bytes).)"),
    ],
    ids=["too-many-headers", "short-body"],
)  # fmt: skip
async def test_an_unreadable_reply_says_why_and_not_its_query(
    raw_server: Raw, reply: bytes, reason: str
) -> None:
    root = await raw_server(reply)
    request = HttpRequest("POST", f"{root}/v1/x?key=secret-in-query", {}, b"{}")
    async with HttpClient() as http:
        raw = await http.fetch(request, 5.0)
    assert isinstance(raw, Failure) and raw.outcome is Outcome.CONNECTION_ERROR
    assert reason in raw.detail and "secret-in-query" not in raw.detail
    assert raw.detail.endswith(f"talking to {root}/v1/x")
