"""How the simulator checks credentials: bearer keys, compared in constant time.

Shared by the OpenAI-shaped routes and the cloud routes; `Authenticator` is what the
pipeline (`providers.sim.pipeline.Simulator.serve`) calls before parsing a body.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from aiohttp import web

from providers.sim.call import BadRequest

#: Checks a request's credentials; raises `BadRequest(kind="auth")` to refuse it.
Authenticator = Callable[[web.Request, bytes], None]


def bearer_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so response timing says nothing about the key."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def bearer_auth(key: str, missing: str, wrong: str) -> Authenticator:
    def check(request: web.Request, body: bytes) -> None:
        del body
        token = bearer_token(request)
        if token is None:
            raise BadRequest(missing, status=401, code="invalid_api_key", kind="auth")
        if not same_secret(token, key):
            raise BadRequest(wrong, status=401, code="invalid_api_key", kind="auth")

    return check
