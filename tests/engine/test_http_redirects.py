"""A 3xx reply to a request with a prompt is a failure, never followed
(`engine.http._redirected`); a GET follows it (`engine.http._next_hop`).

Followed, aiohttp resent the request to whatever host `Location` named, with its prompt and
every credential header but `Authorization`: an Azure model's `api-key` reached a second
server on another port, which answered, and the run accepted its answers as the model's.
A batch job's result download is a GET, and a storage service may answer it with a signed
link on its own host: never following it would leave the job's paid answers uncollected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from unittest.mock import Mock

import pytest
import yarl
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
    # Permanent (a lane of these stops), and not an answer failure (no request is given up).
    assert isinstance(raw, Failure) and raw.outcome is Outcome.BAD_REQUEST
    assert raw.http_status == status and not raw.retryable
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


async def test_a_get_follows_a_redirect_leaving_its_credentials_on_the_first_host(
    serve_any: ServeAny,
) -> None:
    """A batch result's download redirected to a signed link on a storage host: the bytes
    are collected, and neither the key nor the bearer token reaches that host."""
    seen: list[dict[str, str]] = []

    async def storage(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(body=b'{"custom_id": "r1"}\n')

    storage_root = await serve_any(storage)

    async def provider(request: web.Request) -> web.Response:
        if request.path == "/files/1/content":  # the same origin: credentials kept
            assert request.headers["api-key"] == KEY
            raise web.HTTPFound("/files/1/signed")
        return web.Response(status=307, headers={"Location": f"{storage_root}/blob?sig=abc"})

    url = f"{await serve_any(provider)}/files/1/content"
    headers = {"api-key": KEY, "Authorization": "Bearer t", "Accept": "application/json",
               "X-Amz-Date": "20261205T000000Z", "x-goog-user-project": "p"}  # fmt: skip
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("GET", url, headers, b""), 5.0)
    assert not isinstance(raw, Failure) and raw[0] == 200
    assert raw[2] == b'{"custom_id": "r1"}\n'
    assert len(seen) == 1 and seen[0]["Accept"] == "application/json"
    # S3 refuses a presigned link sent an unsigned x-amz-* header; a project id is ours
    assert not {"api-key", "authorization", "x-amz-date", "x-goog-user-project"} & {
        k.lower() for k in seen[0]
    }


async def test_a_get_stops_after_too_many_hops_and_at_another_scheme(serve_any: ServeAny) -> None:
    from engine.http import MAX_REDIRECTS

    hops: list[str] = []

    async def looping(request: web.Request) -> web.Response:
        hops.append(request.path)
        if request.path == "/down":
            return web.Response(status=302, headers={"Location": "ftp://example.invalid/x"})
        raise web.HTTPFound(f"/hop{len(hops)}")

    root = await serve_any(looping)
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("GET", f"{root}/start", {}, b""), 5.0)
        assert isinstance(raw, Failure) and raw.http_status == 302
        assert len(hops) == MAX_REDIRECTS + 1  # the first request and its hops
        assert raw.detail.endswith(f"not followed (more than {MAX_REDIRECTS} hops)")
        down = await http.fetch(HttpRequest("GET", f"{root}/down", {}, b""), 5.0)
    assert isinstance(down, Failure)
    assert down.detail.endswith("not followed (a download goes by http(s), not ftp)")


@pytest.mark.parametrize(
    "location",
    [
        "http://xn--a.com/blob",  # an IDNA host that does not decode: UnicodeError when read
        "http://u:p@127.0.0.1:1/blob",  # aiohttp: "Cannot combine AUTHORIZATION header ..."
        "http://h:abc/x",  # ports that raise only when the URL is spelled
        "https://h:99999/x",
        "http://u:pa/ss@h/x",  # a password with a slash: its tail read as the port
    ],
)
async def test_a_get_to_an_odd_location_is_a_failure_not_an_exception(
    serve_any: ServeAny, location: str
) -> None:
    """A batch download's redirect is the server's URL: one that raised out of `fetch` ended
    the lane, where nothing expects an exception from it."""

    async def redirecting(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": location})

    request = HttpRequest("GET", await serve_any(redirecting), {"Authorization": "Bearer t"}, b"")
    async with HttpClient() as http:
        raw = await http.fetch(request, 5.0)
    assert isinstance(raw, Failure)
    if location.startswith("http://u:p@"):  # a user and password: not followed, nor written
        assert "not followed (a user and password in the URL)" in raw.detail
        assert "u:p" not in raw.detail and "to http://127.0.0.1:1/blob from" in raw.detail


def test_a_get_is_not_led_from_https_to_http() -> None:
    from engine.http import _next_hop

    reply = Mock(headers={"Location": "http://example.org/blob"},
                 url=yarl.URL("https://example.org/files/1"))  # fmt: skip
    request = HttpRequest("GET", "https://example.org/files/1", {}, b"")
    refused = _next_hop(reply, request, 0)
    assert isinstance(refused, Failure)
    assert refused.detail.endswith("not followed (from https to http)")
    reply.headers = {"Location": "https://example.org/blob"}
    moved = _next_hop(reply, request, 0)
    assert isinstance(moved, HttpRequest) and moved.url == "https://example.org/blob"


@pytest.mark.parametrize(
    ("method", "headers", "said"),
    [
        ("GET", {}, "redirect from https://example.org/files/1: not followed (no Location)"),
        ("GET", {"Location": "http://[::1"}, "not followed (an unreadable Location)"),
        ("POST", {"Location": "http://h:abc/x"}, "not followed (an unreadable Location)"),
        ("GET", {"Location": "https://h:99999/x"}, "not followed (an unreadable Location)"),
        ("POST", {"Location": "/v2"}, "to https://example.org/v2 from https://example.org/"
         "files/1: not followed (the request and its credential go to base_url only; if "
         "the API moved there, set base_url to it)"),
    ],
)  # fmt: skip
def test_a_redirect_not_followed_says_why(method: str, headers: dict[str, str], said: str) -> None:
    """Each refusal names its own reason: "more than 5 hops, or to a URL a download may not
    go to" left a user to guess which of five it was."""
    from engine.http import _next_hop

    reply = Mock(headers=headers, url=yarl.URL("https://example.org/files/1"), status=302)
    refused = _next_hop(reply, HttpRequest(method, str(reply.url), {}, b""), 0)
    assert isinstance(refused, Failure) and said in refused.detail
    # A prompt's redirect fails alike on every try: permanent. A batch GET's hop not taken
    # stays retried (a storage host's link may be good on the next poll).
    permanent = method == "POST"
    assert refused.outcome is (Outcome.BAD_REQUEST if permanent else Outcome.INVALID_RESPONSE)
    assert refused.retryable is not permanent
