"""What the two object-store batch clients share (Bedrock on S3, Vertex on Cloud Storage).

Both keep a job's input and output under the spec's `batch_bucket` at a path named by the
engine's job key, so uploading the same key twice overwrites one object instead of making a
second job, and both must carry our request id through a field the provider echoes back:
Bedrock's `recordId` (alphanumeric) and a Vertex request label (lower-case letters, digits,
`_` and `-`, at most 63 characters). `record_key` maps a request id into the intersection of
those alphabets, reversibly, so a result line names its request without any state kept
between `create` and `results` (a resumed run may read a job another process created).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from http import HTTPStatus
from typing import Any

import orjson

from providers.base import Headers, body_excerpt, short, status_outcome
from providers.batch import BatchError, Fetch, LineResult
from providers.headers import retry_after_seconds
from providers.secrets import Secret, redact
from providers.types import ConfigError, Failure, HttpRequest, Outcome

#: Ids used as they are: lower-case alphanumerics, not starting with the escape letter.
_PLAIN = re.compile(r"[a-wyz0-9][a-z0-9]{0,61}")
#: The longest request id (in UTF-8 bytes) that still fits a 63-character label escaped.
MAX_ESCAPED_BYTES = 31
#: Job keys become object names, Bedrock job names and Vertex labels: keep the safe subset.
_JOB_KEY = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def record_key(request_id: str) -> str:
    """Our request id as a record id / label value (`x` + hex when it is not plain)."""
    if _PLAIN.fullmatch(request_id):
        return request_id
    raw = request_id.encode()
    if len(raw) > MAX_ESCAPED_BYTES:
        raise ValueError(f"request id {request_id!r} is too long to carry through a batch job")
    return "x" + raw.hex()


def request_id_of(key: str) -> str | None:
    """The request id `record_key` made `key` from, or None for a key we did not write."""
    if _PLAIN.fullmatch(key):
        return key
    if key.startswith("x") and len(key) % 2 == 1:
        try:
            return bytes.fromhex(key[1:]).decode()
        except (ValueError, UnicodeDecodeError):
            return None
    return None


def job_name(job_key: str) -> str:
    """`job_key` checked against what every provider accepts as a name (engine keys are
    already lower-case, digits and dashes: we refuse rather than silently rename)."""
    if not _JOB_KEY.fullmatch(job_key):
        raise ValueError(
            f"job key {job_key!r} must be 1-63 lower-case letters, digits and dashes"
        )
    return job_key


def split_bucket(uri: str | None, scheme: str, model: str) -> tuple[str, str]:
    """(bucket, prefix without slashes) of `s3://bucket/prefix` or `gs://bucket/prefix`."""
    if not uri or not uri.startswith(f"{scheme}://"):
        raise ConfigError(
            f"model {model!r}: batch dispatch needs batch_bucket = \"{scheme}://bucket/prefix\"",
            key="batch_bucket",
        )
    bucket, _, prefix = uri[len(scheme) + 3 :].partition("/")
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]", bucket):
        raise ConfigError(
            f"model {model!r}: {bucket!r} is not a valid bucket name", key="batch_bucket"
        )
    return bucket, prefix.strip("/")


def jsonl_records(body: bytes) -> Iterator[dict[str, Any] | bytes]:
    """Each line of a JSONL body: a JSON object as a dict, any other line (torn, not JSON,
    not an object) as its raw bytes, for the client to return as an `unreadable_line`;
    blank lines are skipped."""
    for raw in body.splitlines():
        if not raw.strip():
            continue
        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError:
            item = None
        yield item if isinstance(item, dict) else raw


async def read_objects(
    names: Sequence[str], read: Callable[[str], Awaitable[list[LineResult]]]
) -> list[LineResult]:
    """The result lines of a job's output objects `names`, each read by `read`. An object
    answering 404 (deleted, or lost by a proxy, after the listing) discarded the lines of
    the others, and the engine took the whole output for gone (every line charged as damage
    and bought again): the others are read on, and its 404 raised last carrying their lines
    (`BatchError.read`), so only the requests the gone object held are without a line."""
    out: list[LineResult] = []
    gone: list[Failure] = []
    for name in names:
        try:
            out.extend(await read(name))
        except BatchError as exc:
            if exc.failure.http_status != HTTPStatus.NOT_FOUND:
                raise
            gone.append(exc.failure)
    if not gone:
        return out
    said = f"{len(gone)} of {len(names)} result objects"
    raise BatchError(replace(gone[0], detail=short(f"{gone[0].detail} ({said})")), read=out)


def line_bytes(record: dict[str, Any] | bytes) -> bytes:
    """A `jsonl_records` item as bytes again (for an `unreadable_line`'s excerpt)."""
    return record if isinstance(record, bytes) else orjson.dumps(record)


def _message(body: bytes) -> str:
    """The error text of an AWS (`message`) or Google (`error.message`) JSON body, or an
    excerpt of whatever else came back (S3 errors are XML)."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body_excerpt(body)
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return f"{error.get('status') or ''} {error['message']}".strip()
        for key in ("message", "Message"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return body_excerpt(body)


async def send(
    fetch: Fetch,
    http: HttpRequest,
    what: str,
    secrets: Collection[Secret],
    *,
    ok: Collection[int] = (200,),
    codes: Mapping[str, Outcome] | None = None,
    code_of: Any = None,
) -> tuple[int, Mapping[str, str], bytes]:
    """Send one control-plane request; raise `BatchError` unless its status is in `ok`.

    The failure is classified by the provider's error code when `code_of(headers, body)`
    names one in `codes`, else by `status_outcome`, and carries the reply's Retry-After;
    its detail says which step failed and never holds a credential (`secrets` are masked).
    """
    reply = await fetch(http)
    if isinstance(reply, Failure):
        raise BatchError(
            Failure(reply.outcome, short(f"{what}: {redact(reply.detail, secrets)}"),
                    unreachable=reply.unreachable)
        )
    status, headers, body = reply
    if status in ok:
        return status, headers, body
    code = code_of(headers, body) if code_of is not None else None
    outcome = (codes or {}).get(code or "") or status_outcome(status)
    detail = redact(f"{what}: HTTP {status} {code or ''} {_message(body)}", secrets)
    raise BatchError(Failure(outcome, short(detail), http_status=status,
                             retry_after_s=retry_after_seconds(Headers(headers))))


__all__ = [
    "job_name",
    "jsonl_records",
    "line_bytes",
    "record_key",
    "request_id_of",
    "send",
    "split_bucket",
]
