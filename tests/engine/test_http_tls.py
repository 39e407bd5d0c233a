"""An https base_url at a plain-HTTP port fails in words that say so (`engine.http`).

Before, the failure read "ClientConnectorSSLError (1) talking to https://...", and the lane
spent three tries and three probes (15 s at timeout_s 5) before it stopped, though every
handshake fails alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from engine.http import HttpClient
from providers.types import Failure, HttpRequest, Outcome

if TYPE_CHECKING:
    from tests.engine.conftest import ServeAny


async def test_https_to_a_plain_http_port_is_an_unreachable_tls_failure(
    serve_any: ServeAny,
) -> None:
    async def plain(request: web.Request) -> web.Response:
        return web.json_response({})

    root = (await serve_any(plain)).replace("http://", "https://")
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("POST", f"{root}/v1/chat/completions", {}, b"{}"), 5.0)
    assert isinstance(raw, Failure) and raw.outcome is Outcome.CONNECTION_ERROR
    assert raw.unreachable  # a lane that never got past the handshake stops at once
    assert raw.detail.startswith(f"TLS handshake with {root}/v1/chat/completions failed (")
    assert "base_url starts http://" in raw.detail
