"""The simulator's Google OAuth token endpoint and the access tokens it hands out.

A Vertex adapter must obtain tokens through google-auth's service-account JWT grant and
refresh them before expiry; the only way to test that without Google is a token endpoint
that verifies the RS256 assertion against the test service account's public key and
issues short-lived tokens the Vertex routes then insist on.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
MAX_LIFETIME_S = 3600
CLOCK_SKEW_S = 300


class GrantError(Exception):
    """An OAuth error response: `error` code and human description (RFC 6749 §5.2)."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


def _b64url(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise GrantError("invalid_grant", "Invalid JWT: malformed base64.") from None


def verify_assertion(
    assertion: str,
    public_key: rsa.RSAPublicKey,
    issuer: str,
    audiences: tuple[str, ...],
    now: float,
) -> dict[str, Any]:
    """Check an RS256 JWT's signature and claims; return the claims."""
    pieces = assertion.split(".")
    if len(pieces) != 3:
        raise GrantError("invalid_grant", "Invalid JWT: not a compact JWS.")
    try:
        header = orjson.loads(_b64url(pieces[0]))
        claims = orjson.loads(_b64url(pieces[1]))
    except orjson.JSONDecodeError:
        raise GrantError("invalid_grant", "Invalid JWT: header or claims are not JSON.") from None
    if not isinstance(header, dict) or header.get("alg") != "RS256":
        raise GrantError("invalid_grant", "Invalid JWT: only RS256 is accepted.")
    try:
        public_key.verify(
            _b64url(pieces[2]),
            f"{pieces[0]}.{pieces[1]}".encode(),
            padding.PKCS1v15(),
            hashes.SHA256(),
        )
    except InvalidSignature:
        raise GrantError("invalid_grant", "Invalid JWT Signature.") from None
    if not isinstance(claims, dict):
        raise GrantError("invalid_grant", "Invalid JWT: claims must be an object.")
    if claims.get("iss") != issuer:
        raise GrantError("invalid_grant", "Invalid JWT: unknown issuer.", status=400)
    if claims.get("aud") not in audiences:
        raise GrantError("invalid_grant", "Invalid JWT: audience is not the token endpoint.")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int | float) or not isinstance(exp, int | float):
        raise GrantError("invalid_grant", "Invalid JWT: iat and exp are required.")
    if exp < now or iat > now + CLOCK_SKEW_S or exp - iat > MAX_LIFETIME_S + CLOCK_SKEW_S:
        raise GrantError(
            "invalid_grant",
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
            "timeframe. Check your iat and exp values in the JWT claim.",
        )
    if not isinstance(claims.get("scope"), str) or not claims["scope"]:
        raise GrantError("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
    return claims


@dataclass
class TokenStore:
    """Access tokens issued so far and when each expires."""

    ttl_s: float = 3600.0
    clock: Callable[[], float] = time.time
    _expiry: dict[str, float] = field(default_factory=dict)

    def issue(self) -> tuple[str, int]:
        token = "ya29.SIMULATED-" + secrets.token_urlsafe(24)
        self._expiry[token] = self.clock() + self.ttl_s
        return token, int(self.ttl_s)

    def valid(self, token: str | None) -> bool:
        if token is None:
            return False
        expiry = self._expiry.get(token)
        return expiry is not None and expiry > self.clock()
