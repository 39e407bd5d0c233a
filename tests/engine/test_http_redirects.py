"""A 3xx reply is a failure, never followed (`engine.http._redirected`).

Followed, aiohttp resent the request to whatever host `Location` named, with its prompt and
every credential header but `Authorization`: an Azure model's `api-key` reached a second
server on another port, which answered, and the run accepted its answers as the model's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aiohttp import web

from engine.http import HttpClient
from providers.types import Failure, HttpRequest, Outcome

if TYPE_CHECKING:
    from tests.engine.conftest import ServeAny

KEY = "azure-key-never-sent-on"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_to_another_host_is_a_failure_and_not_followed(
    serve_any: ServeAny, status: int
) -> None:
    seen: list[dict[str, str]] = []

    async def other(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"id": "x", "model": "m", "choices": []})

    other_root = await serve_any(other)

    async def redirecting(request: web.Request) -> web.Response:
        location = f"{other_root}/v1/chat/completions?sig=abc"
        return web.Response(status=status, headers={"Location": location})

    url = f"{await serve_any(redirecting)}/openai/v1/chat/completions"
    request = HttpRequest("POST", url, {"api-key": KEY}, b'{"messages": []}')
    async with HttpClient() as http:
        raw = await http.fetch(request, 5.0)
    assert seen == []  # the other host never heard of the request, nor its key
    assert isinstance(raw, Failure) and raw.outcome is Outcome.INVALID_RESPONSE
    assert raw.http_status == status and raw.foreign  # a lane of these stops (not its format)
    assert f"redirect to {other_root}/v1/chat/completions from" in raw.detail
    assert "sig=abc" not in raw.detail and "not followed" in raw.detail


async def test_a_redirect_with_an_unreadable_location_is_still_a_failure(
    serve_any: ServeAny,
) -> None:
    async def redirecting(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "http://[::1"})

    url = await serve_any(redirecting)
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("POST", url, {}, b"{}"), 5.0)
    assert isinstance(raw, Failure) and raw.http_status == 302
    assert "unreadable Location" in raw.detail
