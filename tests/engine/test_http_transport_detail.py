"""A reply aiohttp cannot read fails with aiohttp's reason in its detail (`engine.http._why`).

Before, a reply with 10,000 headers or a 1 MB header read "ClientResponseError talking to
...", and one whose body fell short of its Content-Length "ClientPayloadError talking to
...": the lane then stopped asking whether the server was up, though it had answered.
"""

from __future__ import annotations

import pytest

from engine.http import HttpClient
from providers.types import Failure, HttpRequest, Outcome
from tests.engine.conftest import MANY_HEADERS, RawServe


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
    raw_server: RawServe, reply: bytes, reason: str
) -> None:
    root = await raw_server((reply, False))
    request = HttpRequest("POST", f"{root}/v1/x?key=secret-in-query", {}, b"{}")
    async with HttpClient() as http:
        raw = await http.fetch(request, 5.0)
    assert isinstance(raw, Failure) and raw.outcome is Outcome.CONNECTION_ERROR
    assert reason in raw.detail and "secret-in-query" not in raw.detail
    assert raw.detail.endswith(f"talking to {root}/v1/x")


def test_an_os_errors_reason_is_the_systems_words_never_aiohttps_text() -> None:
    """aiohttp puts the URL, query and all, in some of its OSErrors' text ("Can not write
    request body for <url>"): the detail takes the system's words for the errno instead."""
    import aiohttp

    from engine.http import _why

    sent = aiohttp.ClientOSError(104, "Can not write request body for http://h/x?key=secret")
    assert _why(sent) == " (Connection reset by peer)"
    assert _why(aiohttp.ClientOSError()) == ""  # no errno: nothing the system said
