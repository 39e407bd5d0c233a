"""Server-side AWS Signature Version 4 verification, written from the specification.

The simulator recomputes the signature from the request exactly as it arrived (method,
raw path, query, the headers the client says it signed, the body) with its own HMAC chain,
independently of botocore, so a Bedrock adapter that signs the wrong host, path encoding or
header set is caught here rather than by AWS on a paid run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW = dt.timedelta(minutes=15)

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<cred>[^,\s]+)\s*,\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+)\s*,\s*Signature=(?P<sig>[0-9a-f]{64})\s*$"
)


class SigV4Error(Exception):
    """Why a signed request was refused, with the AWS error code and status to send."""

    def __init__(self, code: str, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Signed:
    """What a verified request was signed as."""

    access_key: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The HMAC chain "AWS4"+secret -> date -> region -> service -> "aws4_request"."""
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def canonical_uri(raw_path: str) -> str:
    """Each path segment URI-encoded once more (AWS double-encodes for non-S3 services)."""
    return quote(raw_path or "/", safe="/~")


def canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    encoded = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def canonical_request(
    method: str,
    raw_path: str,
    query: str,
    headers: Mapping[str, list[str]],
    signed_headers: tuple[str, ...],
    payload_hash: str,
    *,
    double_encode: bool = True,
) -> str:
    """The canonical request of the SigV4 specification (lines joined by \\n). S3 signs the
    path as sent (`double_encode=False`); every other service encodes it once more."""
    path = canonical_uri(raw_path) if double_encode else (raw_path or "/")
    lines = [method.upper(), path, canonical_query(query)]
    header_lines = []
    for name in signed_headers:
        values = headers.get(name, [])
        header_lines.append(f"{name}:" + ",".join(" ".join(v.split()) for v in values))
    lines.append("\n".join(header_lines) + "\n")
    lines.append(";".join(signed_headers))
    lines.append(payload_hash)
    return "\n".join(lines)


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    return f"{ALGORITHM}\n{amz_date}\n{scope}\n{_sha256(canonical.encode())}"


def signature(secret: str, amz_date: str, region: str, service: str, canonical: str) -> str:
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    key = signing_key(secret, date, region, service)
    return hmac.new(
        key, string_to_sign(amz_date, scope, canonical).encode(), hashlib.sha256
    ).hexdigest()


def verify(
    method: str,
    raw_path: str,
    query: str,
    headers: Mapping[str, list[str]],
    body: bytes,
    secret_for: Callable[[str], str | None],
    *,
    service: str,
    session_token: str | None = None,
    now: dt.datetime | None = None,
    double_encode: bool = True,
) -> Signed:
    """Verify a SigV4-signed request or raise `SigV4Error` in AWS's words.

    `headers` maps lower-case names to every value received; `now=None` skips the clock
    check (for the published test vectors, signed in 2015).
    """
    auth = (headers.get("authorization") or [""])[0]
    m = _AUTH.match(auth.strip())
    if not m:
        raise SigV4Error("IncompleteSignatureException",
                         "Authorization header requires 'Credential', 'Signature' and "
                         "'SignedHeaders' parameters with the AWS4-HMAC-SHA256 algorithm.")
    access_key, date, region, secret = _scope(m.group("cred"), service, secret_for)
    signed = tuple(m.group("signed").split(";"))
    if "host" not in signed:
        raise SigV4Error("InvalidSignatureException", "'Host' must be a signed header.")
    amz_date = _checked_date(headers, date, now)
    _check_session_token(headers, session_token, signed)
    canonical = canonical_request(
        method, raw_path, query, headers, signed, _payload_hash(headers, body),
        double_encode=double_encode,
    )
    expected = signature(secret, amz_date, region, service, canonical)
    if not hmac.compare_digest(expected, m.group("sig")):
        raise SigV4Error(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service "
            "documentation for details.",
        )
    return Signed(access_key, date, region, service, signed)


def _scope(
    credential: str, service: str, secret_for: Callable[[str], str | None]
) -> tuple[str, str, str, str]:
    """(access key, date, region, secret) of a `Credential=` scope, checked."""
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise SigV4Error("IncompleteSignatureException", "Credential is malformed.")
    access_key, date, region, scoped_service, _ = parts
    if scoped_service != service:
        raise SigV4Error("InvalidSignatureException",
                         f"Credential should be scoped to correct service: '{service}'.")
    secret = secret_for(access_key)
    if secret is None:
        raise SigV4Error("UnrecognizedClientException",
                         "The security token included in the request is invalid.")
    return access_key, date, region, secret


def _checked_date(
    headers: Mapping[str, list[str]], date: str, now: dt.datetime | None
) -> str:
    """`X-Amz-Date`, once it matches the scope's date and (unless `now` is None) the clock."""
    amz_date = (headers.get("x-amz-date") or [""])[0]
    if not re.fullmatch(r"\d{8}T\d{6}Z", amz_date):
        raise SigV4Error("IncompleteSignatureException",
                         "Authorization header requires existence of either a 'X-Amz-Date' or "
                         "a 'Date' header.")
    if amz_date[:8] != date:
        raise SigV4Error("InvalidSignatureException",
                         "Date in Credential scope does not match YYYYMMDD from ISO-8601 "
                         "version of date from HTTP.")
    if now is not None:
        when = dt.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        if abs(now - when) > MAX_SKEW:
            raise SigV4Error("InvalidSignatureException",
                             f"Signature expired: {amz_date} is now earlier than "
                             f"{(now - MAX_SKEW).strftime('%Y%m%dT%H%M%SZ')}.")
    return amz_date


def _check_session_token(
    headers: Mapping[str, list[str]], session_token: str | None, signed: tuple[str, ...]
) -> None:
    """The session token sent must be the expected one, and signed when present."""
    tokens = headers.get("x-amz-security-token")
    token = tokens[0] if tokens else None
    if token != session_token:
        raise SigV4Error("UnrecognizedClientException",
                         "The security token included in the request is invalid.")
    if token is not None and "x-amz-security-token" not in signed:
        raise SigV4Error("InvalidSignatureException",
                         "'x-amz-security-token' must be a signed header.")


def _payload_hash(headers: Mapping[str, list[str]], body: bytes) -> str:
    """The payload hash the signature covers: the declared one, checked, or the body's."""
    declared_values = headers.get("x-amz-content-sha256")
    declared = declared_values[0] if declared_values else None
    actual = _sha256(body)
    if declared is not None and declared not in (actual, "UNSIGNED-PAYLOAD"):
        raise SigV4Error("InvalidSignatureException",
                         "The provided 'x-amz-content-sha256' header does not match what was "
                         "computed.", status=400)
    return declared or actual
