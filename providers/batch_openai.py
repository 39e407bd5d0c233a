"""OpenAI-shaped batch APIs (issue 13): Groq, DeepInfra, Azure OpenAI, OpenAI and the simulator.

All of them take the same steps: upload a JSONL file (`POST {root}/files`, multipart,
`purpose=batch`), create a batch over it (`POST {root}/batches`), poll it
(`GET {root}/batches/{id}`), then read its output and error files
(`GET {root}/files/{id}/content`). Each line is `{custom_id, method, url, body}` going in and
`{id, custom_id, response: {status_code, request_id, body}, error}` coming out. They differ in
where `{root}` is, how a request authenticates, what the line's `url` says and in their
limits, all taken from the model's live adapter and `LIMITS` (sources in docs/providers.md).

Why the line body is the live adapter's own body: a batch answer then comes from the very
request a live attempt would send (same options, seed, output cap, response format, same
options left out), and its reply body is classified by the same `Adapter.parse`, so outcomes
are the live ones and nothing downstream changes.

Exactly once: `upload` looks for a file already named after the job key before sending one,
`create` looks for a batch already tagged with the job key (metadata `dutchbook_job`) before
creating one, and `find` lists batches for that tag, so a call repeated after a lost reply
neither stores the input twice nor starts a second job over the same requests.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from providers import azure
from providers.base import Headers, as_int, body_excerpt, load_json, short, status_outcome
from providers.batch import (
    BatchError,
    BatchLimits,
    Fetch,
    JobState,
    JobStatus,
    LineResult,
    unreadable_line,
)
from providers.headers import retry_after_seconds
from providers.openai_compat import OpenAICompatAdapter, encode
from providers.registry import adapter_for
from providers.secrets import Secret, redact, redact_failure
from providers.types import (
    ChatRequest,
    Completion,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)

#: The metadata key a batch is tagged with, its value the engine's job key.
METADATA_KEY = "dutchbook_job"
CHAT_ENDPOINT = "/v1/chat/completions"
#: Per-line `error` codes of requests the job never ran (its window ended, it was
#: cancelled): left out of `results`, as the contract asks, so the engine counts them from
#: its job record the same way for every provider (Bedrock and Vertex write no such lines).
UNRUN_CODES = frozenset({"batch_expired", "batch_cancelled"})
#: Pages a listing follows at most (10,000 files or batches a page on OpenAI's files list,
#: 100 on batches): a bound on a misbehaving cursor, far above any campaign's job count.
MAX_PAGES = 200

STATUSES: dict[str, JobStatus] = {
    "validating": JobStatus.VALIDATING,
    "queued": JobStatus.QUEUED,
    "in_progress": JobStatus.RUNNING,
    "finalizing": JobStatus.FINALIZING,
    "cancelling": JobStatus.FINALIZING,
    "completed": JobStatus.DONE,
    "failed": JobStatus.FAILED,
    "expired": JobStatus.EXPIRED,
    "cancelled": JobStatus.CANCELLED,
}

_OPENAI_DOC = "OpenAI API reference, Batch create: up to 50,000 requests, 200 MB, window 24h"
#: Each provider's documented limits, and where they were read (docs/providers.md says more).
#: Jobs in flight are documented by none of them as a count: the figure is our choice.
LIMITS: dict[str, BatchLimits] = {
    "openai": BatchLimits(50_000, 200_000_000, 20, "24h", source=_OPENAI_DOC),
    "sim": BatchLimits(50_000, 200_000_000, 20, "24h", source="the simulator (OpenAI's limits)"),
    "groq": BatchLimits(
        50_000, 100_000_000, 20, "24h",
        source="console.groq.com/docs/batch (24h window; the 50,000 lines are OpenAI's, not "
        "found for Groq); 100 MB per file from a third-party summary of the Groq docs, the "
        "smaller of the figures seen",
    ),
    "deepinfra": BatchLimits(
        50_000, 100_000_000, 20, "24h",
        source="docs.deepinfra.com/batch (OpenAI-compatible, window '24h' only); lines and "
        "bytes not found: OpenAI's 50,000 lines, bytes halved to 100 MB to be safe",
    ),
    "azure": BatchLimits(
        50_000, 200_000_000, 100, "24h",
        source="learn.microsoft.com Azure OpenAI batch how-to and REST reference (24h window; "
        "50,000 requests, 200 MB); 500 files per resource (Azure/azure-sdk-for-java#47401): "
        "100 jobs in flight keep input, output and error files under it",
    ),
}


#: Azure keeps input files forever unless told otherwise, and refuses a resource's 501st file
#: without expiry ("The quota for files without expiry is reached. The maximum is 500",
#: Azure/azure-sdk-for-java#47401): v1 uploads ask for Azure's shortest expiry, 14 days
#: (its how-to: 1209600 to 2592000 seconds), far beyond a job's 24-hour window. The classic
#: 2024-10-21 API has no such field (the same issue), so there jobs in flight stay bounded.
AZURE_EXPIRY: Mapping[str, str] = {
    "expires_after[anchor]": "created_at", "expires_after[seconds]": "1209600"}


@dataclass(frozen=True)
class Routes:
    """Where one provider keeps files and batches, and what a line's `url` says."""

    root: str
    #: Azure's classic URLs carry `api-version` on every call.
    query: Mapping[str, str]
    endpoint: str = CHAT_ENDPOINT
    #: Form fields an upload sends beside `purpose`.
    upload_fields: Mapping[str, str] = field(default_factory=dict)

    def url(self, path: str, **params: str) -> str:
        query = {**self.query, **params}
        return f"{self.root}/{path}" + (f"?{urlencode(query)}" if query else "")


def routes_for(config: ModelConfig, adapter: OpenAICompatAdapter, env: Mapping[str, str]) -> Routes:
    """Files and batches sit beside chat completions, except on Azure's classic URLs, where
    they sit under `{endpoint}/openai` with the same `api-version` and no deployment."""
    if config.provider != "azure":
        return Routes(adapter.url.removesuffix("/chat/completions"), {})
    root = azure.endpoint(config, env) or ""
    if config.api_version:
        base = root.removesuffix("/openai")
        return Routes(f"{base}/openai", {"api-version": config.api_version}, "/chat/completions")
    v1 = root if root.endswith("/openai/v1") else f"{root.removesuffix('/openai')}/openai/v1"
    return Routes(v1, {}, upload_fields=AZURE_EXPIRY)


def limits_for(config: ModelConfig, documented: BatchLimits | None = None) -> BatchLimits:
    """The provider's limits (`documented`, else this module's `LIMITS` entry), lowered
    (never raised) by `extra.batch_max_lines`, `extra.batch_max_bytes` and
    `extra.batch_max_jobs` (small jobs for a rehearsal). The Bedrock and Vertex clients
    lower theirs here too."""
    limits = documented or LIMITS[config.provider]
    return replace(
        limits,
        max_lines=_lowered(config, "batch_max_lines", limits.max_lines),
        max_bytes=_lowered(config, "batch_max_bytes", limits.max_bytes),
        max_jobs_in_flight=_lowered(config, "batch_max_jobs", limits.max_jobs_in_flight),
    )


def _lowered(config: ModelConfig, key: str, documented: int) -> int:
    raw = config.extra.get(key)
    if raw is None:
        return documented
    if (  # at or above the limit (past as_int's counts too): the limit
        isinstance(raw, int | float) and not isinstance(raw, bool)
        and float(raw).is_integer() and raw >= documented
    ):  # fmt: skip
        return documented
    value = as_int(raw)
    if value is None or value < 1:
        raise ConfigError(f"model {config.name!r}: extra.{key} must be a positive integer")
    return min(value, documented)


class OpenAIBatchClient:
    """A `providers.batch.BatchClient` for one model behind an OpenAI-shaped batch API."""

    def __init__(self, adapter: OpenAICompatAdapter, routes: Routes, limits: BatchLimits) -> None:
        self.adapter = adapter
        self.routes = routes
        self._limits = limits

    @property
    def provider(self) -> str:
        return self.adapter.provider

    @property
    def limits(self) -> BatchLimits:
        return self._limits

    def secrets(self) -> tuple[Secret, ...]:
        return self.adapter.secrets()

    def __repr__(self) -> str:
        return f"OpenAIBatchClient({self.provider!r}, root={self.routes.root!r})"

    def line(self, req: ChatRequest) -> bytes:
        """The live request's body wrapped as one input line (no re-encoding of the body)."""
        body = self.adapter.build(req).body
        return b"".join((b'{"custom_id":', encode_str(req.request_id), b',"method":"POST","url":',
                         encode_str(self.routes.endpoint), b',"body":', body, b"}"))

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        content = b"".join(line + b"\n" for line in lines)
        name = f"{job_key}.jsonl"
        try:
            existing = await self._stored_file(fetch, name, len(content))
        except BatchError as exc:
            # A provider that cannot list files (or not by purpose) still takes the upload: a
            # second copy of an input costs nothing, a second job would, and `create` finds
            # the job by its tag whatever file it was created over.
            if exc.failure.outcome is not Outcome.BAD_REQUEST:
                raise
            existing = None
        if existing is not None:
            return existing
        fields = {"purpose": "batch", **self.routes.upload_fields}
        body, content_type = multipart(fields, name, content)
        data = await self._json(fetch, "POST", self.routes.url("files"), body, content_type)
        return _text_field(data, "id", "upload")

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        found = await self.find(fetch, job_key)
        if found is not None:
            return found
        payload = {
            "input_file_id": input_ref,
            "endpoint": self.routes.endpoint,
            "completion_window": self.limits.completion_window,
            "metadata": {METADATA_KEY: job_key},
        }
        data = await self._json(fetch, "POST", self.routes.url("batches"), encode(payload),
                                "application/json")
        return job_state(data, self.secrets())

    async def find(self, fetch: Fetch, job_key: str) -> JobState | None:
        async for item in self._listing(fetch, "batches", limit="100"):
            metadata = item.get("metadata")
            if isinstance(metadata, dict) and metadata.get(METADATA_KEY) == job_key:
                return job_state(item, self.secrets())
        return None

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        url = self.routes.url(f"batches/{quote(job_id, safe='')}")
        return job_state(await self._json(fetch, "GET", url), self.secrets())

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        out: list[LineResult] = []
        for ref, errors in ((state.output_ref, False), (state.error_ref, True)):
            if not ref:
                continue
            url = self.routes.url(f"files/{quote(ref, safe='')}/content")
            try:
                raw = await self._send(fetch, "GET", url)
            except BatchError as exc:
                # An error file gone (404) holds no lines: its requests are absent, asked
                # again, never billed. Raised, it lost the output lines read, and the lane
                # took the job's output for gone (its lines charged at their worst case and
                # bought again); an output file's 404 is still the lane's to judge.
                if errors and exc.failure.http_status == HTTPStatus.NOT_FOUND:
                    continue
                raise
            out.extend(r for r in map(self._line_result, raw.splitlines()) if r is not None)
        return out

    # ----- reading result lines --------------------------------------------------------
    def _line_result(self, raw: bytes) -> LineResult | None:
        """One output or error line (a torn or unattributable one as `unreadable_line`);
        None for a blank line, or one the job never ran (`UNRUN_CODES`)."""
        if not raw.strip():
            return None
        item = load_json(raw)
        if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str) or not (
            item["custom_id"]
        ):
            return unreadable_line(raw, self.secrets())
        response = item.get("response")
        if isinstance(response, dict) and as_int(response.get("status_code")) is not None:
            return LineResult(item["custom_id"], self._classify(response))
        error = item.get("error")
        code = str(error.get("code") or "") if isinstance(error, dict) else ""
        if code in UNRUN_CODES:
            return None
        return LineResult(item["custom_id"], line_error(error, self.secrets()))

    def _classify(self, response: Mapping[str, Any]) -> Completion | Failure:
        """The live adapter's reading of the reply the line carries."""
        status = as_int(response.get("status_code")) or 0
        request_id = response.get("request_id")
        headers = {"x-request-id": request_id} if isinstance(request_id, str) else {}
        body = response.get("body")
        raw = body.encode() if isinstance(body, str) else orjson.dumps(body)
        return self.adapter.parse(status, headers, raw)

    # ----- control-plane calls ---------------------------------------------------------
    async def _stored_file(self, fetch: Fetch, name: str, size: int) -> str | None:
        """The id of an input file already stored under `name` with `size` bytes."""
        async for item in self._listing(fetch, "files", purpose="batch"):
            if (item.get("filename") == name and as_int(item.get("bytes")) == size
                    and item.get("status") not in ("error", "deleted")
                    and isinstance(item.get("id"), str)):
                return str(item["id"])
        return None

    async def _listing(
        self, fetch: Fetch, path: str, **params: str
    ) -> AsyncIterator[dict[str, Any]]:
        """Every item of a paginated list (`has_more` and `after` = the last id)."""
        after: str | None = None
        for _ in range(MAX_PAGES):
            query = {**params, **({"after": after} if after else {})}
            data = await self._json(fetch, "GET", self.routes.url(path, **query))
            items = data.get("data")
            if not isinstance(items, list):
                raise self._error(Outcome.INVALID_RESPONSE, f"{path} list without data", None)
            for item in items:
                if isinstance(item, dict):
                    yield item
            last = data.get("last_id") or (items[-1].get("id") if items and isinstance(
                items[-1], dict) else None)
            if not data.get("has_more") or not isinstance(last, str) or last == after:
                return
            after = last

    async def _json(self, fetch: Fetch, method: str, url: str, body: bytes = b"",
                    content_type: str | None = None) -> dict[str, Any]:
        raw = await self._send(fetch, method, url, body, content_type)
        data = load_json(raw)
        if not isinstance(data, dict):
            raise self._error(Outcome.INVALID_RESPONSE,
                              f"{method} {url}: not a JSON object: {body_excerpt(raw, 120)}", 200)
        return data

    async def _send(self, fetch: Fetch, method: str, url: str, body: bytes = b"",
                    content_type: str | None = None) -> bytes:
        # The adapter's JSON headers, less what a multipart upload or a file download
        # (JSONL bytes, not JSON) must not claim.
        dropped = ("Content-Type", "Accept") if method == "GET" and "/content" in url else (
            "Content-Type",)
        headers = {k: v for k, v in self.adapter.headers().items() if k not in dropped}
        if content_type is not None:
            headers["Content-Type"] = content_type
        reply = await fetch(HttpRequest(method, url, headers, body))
        if isinstance(reply, Failure):
            raise BatchError(redact_failure(reply, self.secrets()))
        status, reply_headers, raw = reply
        if not 200 <= status < 300:
            raise BatchError(control_failure(status, reply_headers, raw, f"{method} {url}",
                                             self.secrets()))
        return raw

    def _error(self, outcome: Outcome, detail: str, status: int | None) -> BatchError:
        return BatchError(Failure(outcome, short(redact(detail, self.secrets())), status))


def encode_str(value: str) -> bytes:
    return orjson.dumps(value)


def multipart(fields: Mapping[str, str], filename: str, content: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body: the text `fields`, then `content` as the part `file`."""
    boundary = f"dutchbook-{uuid.uuid4().hex}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/jsonl\r\n\r\n".encode() + content + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def control_failure(status: int, headers: Mapping[str, str], body: bytes, what: str,
                    secrets: Sequence[Secret]) -> Failure:
    """A failed upload, create, poll or download, read by the common status rules."""
    data = load_json(body)
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    text = str(message) if message else body_excerpt(body, 200)
    view = Headers(headers)
    return Failure(
        outcome=status_outcome(status),
        detail=short(redact(f"{what}: HTTP {status}: {text}", secrets)),
        http_status=status,
        retry_after_s=retry_after_seconds(view),
    )


#: How a per-line `error` code reads as an attempt outcome (anything else: provider error).
_LINE_ERROR_OUTCOMES: tuple[tuple[str, Outcome], ...] = (
    ("rate_limit", Outcome.RATE_LIMIT),
    ("quota", Outcome.RATE_LIMIT),
    ("timeout", Outcome.TIMEOUT),
    ("invalid", Outcome.BAD_REQUEST),
    ("bad_request", Outcome.BAD_REQUEST),
    ("content_filter", Outcome.REFUSAL),
)


def line_error(error: Any, secrets: Sequence[Secret]) -> Failure:
    """A line answered with an `error` object and no reply (OpenAI: "a non-HTTP error")."""
    fields = error if isinstance(error, dict) else {}
    code = str(fields.get("code") or "")
    message = str(fields.get("message") or "no error detail")
    outcome = next((o for key, o in _LINE_ERROR_OUTCOMES if key in code.lower()),
                   Outcome.PROVIDER_ERROR)
    return Failure(outcome, short(redact(f"batch line error {code or '?'}: {message}", secrets)))


def _text_field(data: Mapping[str, Any], name: str, what: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise BatchError(Failure(Outcome.INVALID_RESPONSE, f"{what} reply without {name!r}", 200))
    return value


def job_state(data: Mapping[str, Any], secrets: Sequence[Secret] = ()) -> JobState:
    """A Batch object read into the engine's `JobState`."""
    word = str(data.get("status") or "")
    counts = data.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    return JobState(
        job_id=_text_field(data, "id", "batch"),
        # An unknown word is taken as still running: polling on is safe, ending is not.
        status=STATUSES.get(word, JobStatus.RUNNING),
        provider_status=word,
        total=as_int(counts.get("total")),
        completed=as_int(counts.get("completed")),
        failed=as_int(counts.get("failed")),
        output_ref=_optional_text(data.get("output_file_id")),
        error_ref=_optional_text(data.get("error_file_id")),
        detail=short(redact(_job_detail(data), secrets)),
    )


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _job_detail(data: Mapping[str, Any]) -> str:
    """Why a job failed (its validation errors), in the provider's words."""
    errors = data.get("errors")
    items = errors.get("data") if isinstance(errors, dict) else None
    if not isinstance(items, list):
        return ""
    texts = [
        f"{e.get('code') or 'error'}: {e.get('message') or ''}"
        + (f" (line {e['line']})" if e.get("line") is not None else "")
        for e in items if isinstance(e, dict)
    ]
    return "; ".join(texts)


def create_batch_client(config: ModelConfig, env: Mapping[str, str]) -> OpenAIBatchClient:
    """The batch client for one model, over the very adapter its live requests use."""
    adapter = adapter_for(config, env)
    if not isinstance(adapter, OpenAICompatAdapter):
        raise ConfigError(f"model {config.name!r}: {config.provider} has no OpenAI-shaped API")
    return OpenAIBatchClient(adapter, routes_for(config, adapter, env), limits_for(config))
