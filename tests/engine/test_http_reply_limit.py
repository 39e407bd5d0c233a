"""A live reply's body is read up to a limit (`engine.http.MAX_REPLY_BYTES`).

Without it a server that sends a huge body (a misrouted download, a decompression bomb) was
read whole into memory for every request in flight, and again on each retry.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

import engine.http
from engine.http import MAX_REPLY_BYTES, HttpClient
from providers.base import Adapter
from providers.registry import adapter_for
from providers.types import Failure, HttpRequest, ModelConfig, Outcome

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Serve = Callable[[Handler], Awaitable[str]]


@pytest.fixture
def serve(serve_any: Serve) -> Serve:
    """`serve_any` (conftest), returning the chat completions URL."""

    async def start(handler: Handler) -> str:
        return f"{await serve_any(handler)}/v1/chat/completions"

    return start


def _adapter(url: str) -> Adapter:
    """An OpenAI adapter whose chat route is `url`."""
    config = ModelConfig(
        name="m", provider="openai", model="x", base_url=url.removesuffix("/chat/completions"),
        api_key_env="KEY",
    )  # fmt: skip
    return adapter_for(config, {"KEY": "not-a-key"})


def _post(url: str) -> HttpRequest:
    return HttpRequest("POST", url, {}, b"{}")


async def _chunked(request: web.Request, body: bytes, status: int = 200) -> web.StreamResponse:
    """`body` with no Content-Length (chunked transfer), in 4 KiB pieces."""
    reply = web.StreamResponse(status=status)
    reply.enable_chunked_encoding()
    await reply.prepare(request)
    for start in range(0, len(body), 4096):
        await reply.write(body[start : start + 4096])
    await reply.write_eof()
    return reply


async def test_a_body_within_the_limit_is_read_whole(serve: Serve) -> None:
    body = b"x" * 1000

    async def declared(request: web.Request) -> web.Response:
        return web.Response(body=body)

    async def chunked(request: web.Request) -> web.StreamResponse:
        return await _chunked(request, body)

    for handler in (declared, chunked):
        url = await serve(handler)
        async with HttpClient() as http:
            raw = await http.fetch(_post(url), 5.0, max_bytes=1000)
        assert isinstance(raw, tuple) and raw[0] == 200 and raw[2] == body


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_longer_success_body_is_an_invalid_response(serve: Serve, declared: bool) -> None:
    body = b"y" * 5000

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body) if declared else await _chunked(request, body)

    url = await serve(handler)
    async with HttpClient() as http:
        raw = await http.fetch(_post(url), 5.0, max_bytes=4999)
        unlimited = await http.fetch(_post(url), 5.0)
    assert isinstance(raw, Failure)
    assert raw.outcome is Outcome.INVALID_RESPONSE and raw.http_status == 200 and raw.foreign
    assert "longer than 4,999 bytes" in raw.detail and "/v1/chat/completions" in raw.detail
    # Without a limit (the batch lane's downloads) the same body is read whole.
    assert isinstance(unlimited, tuple) and unlimited[2] == body


async def test_a_decompression_bomb_is_cut_off_by_its_decoded_size(serve: Serve) -> None:
    decoded = b"0" * 200_000
    packed = gzip.compress(decoded)
    assert len(packed) < 1000  # the premise: small on the wire, large once decoded

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=packed, headers={"Content-Encoding": "gzip"})

    url = await serve(handler)
    async with HttpClient() as http:
        cut = await http.fetch(_post(url), 5.0, max_bytes=100_000)
        whole = await http.fetch(_post(url), 5.0, max_bytes=200_000)
    assert isinstance(cut, Failure) and cut.outcome is Outcome.INVALID_RESPONSE
    assert isinstance(whole, tuple) and whole[2] == decoded


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "declared-length"])
async def test_an_error_status_keeps_its_status_and_the_start_of_its_long_body(
    serve: Serve, declared: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error page over the limit: its status classifies it, and the adapter's detail shows
    that the body was cut off and how it began (it read only "HTTP 503")."""
    page = b"<html><title>503 Service Unavailable</title>" + b"z" * 50_000

    async def handler(request: web.Request) -> web.StreamResponse:
        if declared:
            await request.read()
            return web.Response(body=page, status=503)
        return await _chunked(request, page, status=503)

    url = await serve(handler)
    monkeypatch.setattr(engine.http, "MAX_REPLY_BYTES", 10_000)  # what `send` applies
    async with HttpClient() as http:
        raw = await http.fetch(_post(url), 5.0, max_bytes=10_000)
        failure = await http.send(_adapter(url), _post(url), 5.0)
    assert isinstance(raw, tuple) and raw[0] == 503
    assert raw[2].startswith(b"[reply body longer than 10,000 bytes; only its start was read] ")
    assert b"<title>503 Service Unavailable</title>" in raw[2] and len(raw[2]) < 500
    assert isinstance(failure, Failure) and failure.outcome is Outcome.PROVIDER_ERROR
    assert "only its start was read" in failure.detail and "Service Unavailable" in failure.detail


async def test_the_next_request_after_a_cut_off_reply_reads_its_own_body(serve: Serve) -> None:
    """The cut-off connection is closed, not reused with the rest of the old body unread."""
    calls: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        if len(calls) == 1:
            return await _chunked(request, b"a" * 100_000)
        return web.Response(body=b'{"second": true}')

    url = await serve(handler)
    async with HttpClient(max_connections=1) as http:
        first = await http.fetch(_post(url), 5.0, max_bytes=10_000)
        second = await http.fetch(_post(url), 5.0, max_bytes=10_000)
    assert isinstance(first, Failure)
    assert isinstance(second, tuple) and second[2] == b'{"second": true}'


async def test_send_reads_a_live_reply_up_to_the_engine_limit(serve: Serve) -> None:
    """`send` (the live lanes' path) applies `MAX_REPLY_BYTES`: one byte more is refused
    before the adapter sees it; a reply of exactly the limit reaches the adapter."""
    sizes = [MAX_REPLY_BYTES + 1, MAX_REPLY_BYTES]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await _chunked(request, b" " * sizes.pop(0))

    url = await serve(handler)
    async with HttpClient() as http:
        over = await http.send(_adapter(url), _post(url), 30.0)
        at = await http.send(_adapter(url), _post(url), 30.0)
    assert isinstance(over, Failure) and "longer than" in over.detail
    # Blanks are not JSON: the adapter's own complaint, not the limit's.
    assert isinstance(at, Failure) and "longer than" not in at.detail
