"""AWS Signature Version 4 through botocore, with an injectable clock.

We sign with botocore's own `SigV4Auth` rather than our own HMAC code, so the canonical
request (double-encoded path, header selection, payload hash) is exactly what AWS's SDK
produces. The one thing botocore does not offer is a clock we can set: `add_auth` reads the
wall clock. Tests (the AWS test-suite vectors, the botocore oracle) and the simulator need a
frozen time, so `ClockedSigV4Auth` takes the timestamp from a callable and otherwise runs
botocore's steps unchanged.

Credentials reach this module as `AwsCredentials`, whose repr is masked: botocore's own
`ReadOnlyCredentials` is a namedtuple and would print the secret key in any traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.auth import SIGV4_TIMESTAMP, S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The signing clock used outside tests."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class AwsCredentials:
    """One consistent access-key / secret / session-token triple (masked in every view)."""

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:
        return "AwsCredentials(***)"

    __str__ = __repr__

    def secrets(self) -> tuple[str, ...]:
        """Every value here that must be kept out of logs and failure details."""
        values = (self.access_key, self.secret_key, self.token)
        return tuple(v for v in values if v)


class ClockedSigV4Auth(SigV4Auth):  # type: ignore[misc]  # botocore is untyped
    """botocore's SigV4 signer with the timestamp taken from `clock` instead of the wall."""

    def __init__(
        self, credentials: Credentials, service_name: str, region_name: str, clock: Clock
    ) -> None:
        super().__init__(credentials, service_name, region_name)
        self._clock = clock

    def add_auth(self, request: AWSRequest) -> None:
        # Same steps as botocore's SigV4Auth.add_auth, minus its call to the wall clock.
        moment = self._clock().astimezone(UTC)
        request.context["timestamp"] = moment.strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical_request = self.canonical_request(request)
        string_to_sign = self.string_to_sign(request, canonical_request)
        signature = self.signature(string_to_sign, request)
        self._inject_signature_to_request(request, signature)


class ClockedS3SigV4Auth(ClockedSigV4Auth, S3SigV4Auth):  # type: ignore[misc]
    """The same for S3 (batch files): botocore's S3 rules (the path signed as sent, not
    encoded twice; the payload hash in `X-Amz-Content-SHA256`) with our clock."""


def signed_headers(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: AwsCredentials,
    *,
    region: str,
    service: str,
    clock: Clock = utc_now,
) -> dict[str, str]:
    """`headers` plus `X-Amz-Date`, `X-Amz-Security-Token` (if any) and `Authorization`.

    `url` must be the exact, already percent-encoded URL that will go on the wire and `body`
    the exact bytes sent: the signature covers both. Host is derived from the URL (without a
    default port), as botocore does, so callers must not send a different Host header.
    """
    request, signer = _prepare(method, url, headers, body, credentials, region, service, clock)
    signer.add_auth(request)
    return {name: str(value) for name, value in request.headers.items()}


def canonical_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: AwsCredentials,
    *,
    region: str,
    service: str,
    clock: Clock = utc_now,
) -> tuple[str, str]:
    """The canonical request and string to sign our signer uses (for tests and debugging).

    Never log the result next to credentials; it holds no secret itself.
    """
    request, signer = _prepare(method, url, headers, body, credentials, region, service, clock)
    request.context["timestamp"] = clock().astimezone(UTC).strftime(SIGV4_TIMESTAMP)
    signer._modify_request_before_signing(request)
    creq: str = signer.canonical_request(request)
    sts: str = signer.string_to_sign(request, creq)
    return creq, sts


def _prepare(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: AwsCredentials,
    region: str,
    service: str,
    clock: Clock,
) -> tuple[AWSRequest, ClockedSigV4Auth]:
    """botocore's request and our clocked signer for one signing."""
    request = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    kind = ClockedS3SigV4Auth if service == "s3" else ClockedSigV4Auth
    signer = kind(
        Credentials(credentials.access_key, credentials.secret_key, credentials.token),
        service,
        region,
        clock,
    )
    return request, signer
