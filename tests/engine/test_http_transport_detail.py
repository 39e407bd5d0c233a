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


PLAIN_KEY = "LEAKCHECK-plain-0123456789"  # no credential shape: masked only as a declared value


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 \x1b[31mPWNED " + PLAIN_KEY.encode() + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Echo: " + PLAIN_KEY.encode() + b"x" * 9_000 + b"\r\n\r\n",
        b"HTTP/1.1 308 Permanent Redirect\r\nLocation: /login/"
        + PLAIN_KEY.encode()
        + b"/x\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=["status-line", "long-header", "redirect-path"],
)
async def test_a_failure_made_here_is_redacted_with_the_adapters_secrets(
    raw_server: RawServe, reply: bytes
) -> None:
    """A failure `HttpClient` makes itself quotes what the server sent: a tester's server
    echoed the key into its status line, a header and a redirect's path, and the key
    reached the ledger, logs/lanes.json, the report and the lane's stop line."""
    from providers.registry import adapter_for
    from providers.secrets import MASK
    from providers.types import ChatRequest, ModelConfig

    root = await raw_server((reply, False))
    config = ModelConfig(name="m", provider="openai", model="m", base_url=f"{root}/v1",
                         api_key_env="K")  # fmt: skip
    adapter = adapter_for(config, {"K": PLAIN_KEY})
    request = adapter.build(ChatRequest("r", "s", "u", seed=1))
    async with HttpClient() as http:  # one client each: the server closes after one reply
        fetched = await http.fetch(request, 5.0)
    async with HttpClient() as http:
        sent = await http.send(adapter, request, 5.0)
    assert isinstance(fetched, Failure) and PLAIN_KEY in fetched.detail  # the server's words
    assert isinstance(sent, Failure) and PLAIN_KEY not in sent.detail and MASK in sent.detail
