"""How the simulator checks credentials: bearer keys (compared in constant time), Bedrock's
SigV4 signatures or API keys, and the OAuth access tokens it issued for Vertex.

Shared by the OpenAI-shaped routes and the cloud routes; `Authenticator` is what the
pipeline (`providers.sim.pipeline.Simulator.serve`) calls before parsing a body.
"""

from __future__ import annotations

import datetime as dt
import hmac
from collections.abc import Callable, MutableMapping

from aiohttp import web

from providers.sim import sigv4_verifier
from providers.sim.call import BadRequest
from providers.sim.credentials import SimCredentials
from providers.sim.oauth import TokenStore

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


AZURE_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
    "provide a valid key for an active subscription and use a correct regional API endpoint "
    "for your resource."
)


def azure_key_auth(key: str) -> Authenticator:
    """Azure OpenAI's: the `api-key` header, or an Entra ID token as a bearer."""

    def check(request: web.Request, body: bytes) -> None:
        del body
        given = request.headers.get("api-key") or bearer_token(request)
        if not same_secret(given, key):
            raise BadRequest(AZURE_DENIED, status=401, kind="auth")

    return check


def sigv4_or_key_auth(creds: SimCredentials) -> Authenticator:
    """Bedrock's: a Bedrock API key as a bearer token, or a SigV4 signature by the
    configured AWS keys (verified from the specification, session token included)."""

    def check(request: web.Request, body: bytes) -> None:
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            if not same_secret(bearer_token(request), creds.bedrock_api_key):
                raise BadRequest("The security token included in the request is invalid.",
                                 status=403, code="UnrecognizedClientException", kind="auth")
            return
        if not header:
            raise BadRequest("Missing Authentication Token", status=403,
                             code="MissingAuthenticationTokenException", kind="auth")
        _verify_sigv4(request, body, creds, "bedrock")

    return check


def sigv4_auth(creds: SimCredentials, service: str) -> Authenticator:
    """SigV4 only, scoped to `service` (S3 for the batch object store: path signed as sent)."""

    def check(request: web.Request, body: bytes) -> None:
        if not request.headers.get("Authorization"):
            raise BadRequest("Access Denied", status=403, code="AccessDenied", kind="auth")
        _verify_sigv4(request, body, creds, service)

    return check


def _verify_sigv4(request: web.Request, body: bytes, creds: SimCredentials, service: str) -> None:
    """Verify the request's signature by the configured AWS keys, or refuse it in AWS's words."""
    raw_path, _, query = request.raw_path.partition("?")
    try:
        sigv4_verifier.verify(
            request.method, raw_path, query, _headers_multi(request), body,
            lambda key: creds.aws_secret_access_key if key == creds.aws_access_key_id
            else None,
            service=service, session_token=creds.aws_session_token,
            now=dt.datetime.now(dt.UTC), double_encode=service != "s3",
        )
    except sigv4_verifier.SigV4Error as exc:
        raise BadRequest(exc.message, status=exc.status, code=exc.code, kind="auth") from None


def issued_token_auth(tokens: TokenStore, refused: str) -> Authenticator:
    """Vertex's: a bearer access token this simulator's token endpoint issued, still valid."""

    def check(request: web.Request, body: bytes) -> None:
        del body
        if not tokens.valid(bearer_token(request)):
            raise BadRequest(refused, status=401, kind="auth")

    return check


def _headers_multi(request: web.Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in request.headers.items():
        out.setdefault(name.lower(), []).append(value)
    return out


async def checked_body(
    request: web.Request,
    authenticate: Authenticator,
    counts: MutableMapping[str, int],
    refuse: Callable[[BadRequest], web.Response],
) -> bytes | web.Response:
    """The request's body once its credentials pass, else the refusal in the provider's
    words (counted as `auth_rejected`): for routes outside `Simulator.serve`."""
    body = await request.read()
    try:
        authenticate(request, body)
    except BadRequest as exc:
        counts["auth_rejected"] = counts.get("auth_rejected", 0) + 1
        return refuse(exc)
    return body
