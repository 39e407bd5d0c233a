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


def test_only_lasting_tls_failures_are_unreachable() -> None:
    """A plain-HTTP port or an untrusted certificate fails every try alike; another TLS alert
    (a server's internal error, a bad record on a flaky link, one backend mid-rotation) may
    pass, and stopping a lane on it, before any reply, stopped a campaign for a blip."""
    import ssl

    from engine.http import _unreachable

    url = "https://api.example.org/v1/chat/completions"

    def failure(cause: ssl.SSLError) -> Failure:
        return _unreachable(cause, cause, url)

    plain = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    plain.reason = "WRONG_VERSION_NUMBER"
    untrusted = ssl.SSLCertVerificationError(1, "certificate verify failed")
    untrusted.reason = "CERTIFICATE_VERIFY_FAILED"
    untrusted.verify_message = "certificate has expired"
    alert = ssl.SSLError(1, "[SSL: TLSV1_ALERT_INTERNAL_ERROR] tlsv1 alert internal error")
    alert.reason = "TLSV1_ALERT_INTERNAL_ERROR"
    assert failure(plain).unreachable and failure(untrusted).unreachable
    assert "(certificate has expired)" in failure(untrusted).detail
    transient = failure(alert)
    assert not transient.unreachable and transient.outcome is Outcome.CONNECTION_ERROR
    assert "(TLSV1_ALERT_INTERNAL_ERROR)" in transient.detail
