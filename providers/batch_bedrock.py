"""Amazon Bedrock batch inference: JSONL records in S3, a model invocation job, records out.

The job is created with `modelInvocationType = "Converse"` (botocore's `bedrock` service
model, `CreateModelInvocationJob`): each record's `modelInput` is exactly the Converse body
the live adapter sends and each `modelOutput` is a Converse reply, so results are classified
by `BedrockAdapter.parse` like live replies (the alternative, the model's native
InvokeModel body, would need a second body builder and parser per model family).

Layout under `batch_bucket` (`s3://bucket/prefix`), all named from the engine's job key so a
second upload of the same key overwrites the first:

    prefix/<job key>/input/<job key>.jsonl      the records (recordId = our request id)
    prefix/<job key>/output/<job id>/...        Bedrock writes `<input>.jsonl.out` there,
                                                plus `manifest.json.out`

Requests are SigV4-signed with botocore (service `s3` for objects, `bedrock` for the control
plane at `bedrock.<region>.amazonaws.com`) from the same credential chain as the live
adapter; resolving that chain may block, so signing runs on a worker thread. Endpoints follow
botocore's own overrides (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL_BEDROCK`), else a model
whose `base_url` points at the simulator finds both under it; a `base_url` on AWS's own
runtime host (a FIPS endpoint) gives the control plane's host beside it and S3's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode
from xml.etree import ElementTree

import orjson

from providers.base import short, status_outcome
from providers.batch import (
    BatchError,
    BatchLimits,
    Fetch,
    JobState,
    JobStatus,
    LineResult,
    unreadable_line,
)
from providers.batch_cloud import (
    job_name,
    jsonl_records,
    line_bytes,
    read_objects,
    record_key,
    request_id_of,
    send,
    split_bucket,
)
from providers.batch_openai import limits_for
from providers.bedrock import (
    ERROR_CODES,
    KEY_ENVS,
    BedrockAdapter,
    CredentialSource,
    chain_configured,
    error_code,
    region_of,
)
from providers.secrets import Secret
from providers.sigv4_signer import Clock, signed_headers, utc_now
from providers.types import (
    ChatRequest,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)
from providers.urls import on_domain

PROVIDER = "bedrock"
#: Bedrock's batch quotas (AWS General Reference, "Amazon Bedrock endpoints and quotas",
#: default values; adjustable per account). See docs/providers.md.
LIMITS = BatchLimits(
    max_lines=50_000,  # quota "Records per batch inference job" (per model; a default)
    max_bytes=1024**3,  # quota "Batch inference input file size": 1 GB
    max_jobs_in_flight=20,  # quota "Sum of in-progress and submitted batch inference jobs"
    completion_window="24h",  # timeoutDurationInHours 24..168 (botocore service model)
    min_lines=100,  # quota "Minimum number of records per batch inference job"
    source=(
        "Amazon Bedrock service quotas (per model, adjustable; names from the Bedrock user "
        "guide's batch-inference-data page, default values 100 min / 50,000 records, 1 GB "
        "input file, 20 jobs submitted+in progress as published projects quote them); "
        "timeoutDurationInHours 24..168 from botocore's bedrock service model 2023-04-20; "
        "see docs/providers.md"
    ),
)
TIMEOUT_HOURS = 24
#: Bedrock's words -> ours (the enum of `ModelInvocationJobStatus`).
STATUSES: dict[str, JobStatus] = {
    "Submitted": JobStatus.QUEUED,
    "Validating": JobStatus.VALIDATING,
    "Scheduled": JobStatus.QUEUED,
    "InProgress": JobStatus.RUNNING,
    "Stopping": JobStatus.RUNNING,
    "Completed": JobStatus.DONE,
    "PartiallyCompleted": JobStatus.PARTIAL,
    "Failed": JobStatus.FAILED,
    "Stopped": JobStatus.CANCELLED,
    "Expired": JobStatus.EXPIRED,
}
_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class BedrockBatchClient:
    """One Bedrock model's batch jobs; see the module docstring."""

    provider = PROVIDER

    def __init__(
        self, config: ModelConfig, env: Mapping[str, str], *, clock: Clock = utc_now
    ) -> None:
        region = region_of(config, env)
        if region is None:
            raise ConfigError(
                f"model {config.name!r}: no AWS region; set `region` in the spec or AWS_REGION"
            )
        if not config.batch_role_arn:
            raise ConfigError(
                f"model {config.name!r}: Bedrock batch needs batch_role_arn (the IAM role "
                "Bedrock assumes to read and write the bucket)"
            )
        self._config = config
        self.limits = limits_for(config, LIMITS)
        self._region = region
        self._clock = clock
        self._bucket, self._prefix = split_bucket(config.batch_bucket, "s3", config.name)
        # The live adapter builds the Converse body; its bearer key cannot sign S3 requests,
        # so batch always signs with the AWS credential chain.
        self._adapter = BedrockAdapter(config, {k: v for k, v in env.items()
                                                if k != "AWS_BEARER_TOKEN_BEDROCK"},
                                       clock=clock)
        if not all(env.get(k) for k in KEY_ENVS) and not chain_configured(env):
            raise ConfigError(
                f"model {config.name!r}: Bedrock batch signs its S3 requests with AWS "
                f"credentials: set {KEY_ENVS[0]} and {KEY_ENVS[1]}, or a profile (a Bedrock "
                "API key alone cannot sign them)"
            )
        self._credentials = CredentialSource(config.name, env)
        self._seen: set[Secret] = set()
        base = (config.base_url or "").rstrip("/")
        control = base
        if on_domain(base, "amazonaws.com"):
            # AWS's own runtime host (`bedrock-runtime-fips.<region>...`): its control plane
            # is the same host without "-runtime", and S3 is S3's own, not under it.
            control, base = base.replace("//bedrock-runtime", "//bedrock", 1), ""
        self._control = (env.get("AWS_ENDPOINT_URL_BEDROCK") or control
                         or f"https://bedrock.{region}.amazonaws.com").rstrip("/")
        s3 = env.get("AWS_ENDPOINT_URL_S3") or (f"{base}/s3" if base else "")
        # Path-style under an override (as botocore does for custom endpoints), else the
        # virtual-hosted bucket address AWS recommends.
        self._s3 = (f"{s3.rstrip('/')}/{self._bucket}" if s3
                    else f"https://{self._bucket}.s3.{region}.amazonaws.com")

    def __repr__(self) -> str:
        return f"BedrockBatchClient({self._config.name!r}, s3://{self._bucket}/{self._prefix})"

    def secrets(self) -> tuple[Secret, ...]:
        return (*self._seen, *self._adapter.secrets())

    # ---- naming ---------------------------------------------------------------------------

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self._prefix, *parts) if p)

    def input_key(self, job_key: str) -> str:
        name = job_name(job_key)
        return self._key(name, "input", f"{name}.jsonl")

    def output_key(self, job_key: str) -> str:
        return self._key(job_name(job_key), "output") + "/"

    # ---- requests -------------------------------------------------------------------------

    async def _signed(self, method: str, url: str, body: bytes, service: str,
                      content_type: str = "application/json") -> HttpRequest:
        """A SigV4-signed request; the chain may block (first use, refresh): off the loop."""
        def sign() -> dict[str, str]:
            credentials = self._credentials.current()
            self._seen.update(Secret(v) for v in credentials.secrets())
            headers = {"Content-Type": content_type} if body else {}
            return signed_headers(method, url, headers, body, credentials,
                                  region=self._region, service=service, clock=self._clock)

        try:
            headers = await asyncio.to_thread(sign)
        except ConfigError as exc:  # the chain found nothing, or could not be read
            raise BatchError(Failure(Outcome.AUTH_ERROR, short(str(exc)))) from None
        return HttpRequest(method, url, headers, body)

    async def _control_call(self, fetch: Fetch, method: str, path: str, what: str,
                            payload: Any = None) -> dict[str, Any]:
        body = orjson.dumps(payload) if payload is not None else b""
        http = await self._signed(method, f"{self._control}{path}", body, "bedrock")
        _, _, reply = await send(fetch, http, what, self.secrets(), codes=ERROR_CODES,
                                 code_of=lambda h, b: error_code(h, _json(b)))
        data = _json(reply)
        return data if isinstance(data, dict) else {}

    async def _s3_call(self, fetch: Fetch, method: str, key: str, what: str,
                       body: bytes = b"", query: str = "") -> bytes:
        url = f"{self._s3}/{quote(key, safe='/-_.~')}" + (f"?{query}" if query else "")
        http = await self._signed(method, url, body, "s3", "application/x-ndjson")
        _, _, reply = await send(fetch, http, what, self.secrets(),
                                 code_of=lambda h, b: _s3_code(b))
        return reply

    # ---- the contract ---------------------------------------------------------------------

    def line(self, req: ChatRequest) -> bytes:
        body, _omitted = self._adapter.converse_body(req)
        return b'{"recordId":"' + record_key(req.request_id).encode() + b'","modelInput":' \
            + body + b"}"

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        key = self.input_key(job_key)
        data = b"\n".join(lines) + b"\n"
        await self._s3_call(fetch, "PUT", key, "upload batch input", data)
        return f"s3://{self._bucket}/{key}"

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        name = job_name(job_key)
        payload = {
            "jobName": name,
            "clientRequestToken": name,  # a repeated create returns the same job
            "roleArn": self._config.batch_role_arn,
            "modelId": self._config.model,
            "modelInvocationType": "Converse",
            "timeoutDurationInHours": TIMEOUT_HOURS,
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": input_ref,
                                                      "s3InputFormat": "JSONL"}},
            "outputDataConfig": {"s3OutputDataConfig": {
                "s3Uri": f"s3://{self._bucket}/{self.output_key(job_key)}"}},
        }
        data = await self._control_call(fetch, "POST", "/model-invocation-job",
                                        "create batch job", payload)
        arn = data.get("jobArn")
        if not isinstance(arn, str) or not arn:
            raise _invalid("create batch job: reply has no jobArn")
        return await self.poll(fetch, arn)

    async def find(self, fetch: Fetch, job_key: str) -> JobState | None:
        name = job_name(job_key)
        query = urlencode({"nameContains": name, "maxResults": 100})
        data = await self._control_call(fetch, "GET", f"/model-invocation-jobs?{query}",
                                        "list batch jobs")
        for summary in data.get("invocationJobSummaries") or []:
            if isinstance(summary, dict) and summary.get("jobName") == name:
                return _state(summary)
        return None

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        path = f"/model-invocation-job/{quote(_short_id(job_id), safe='')}"
        return _state(await self._control_call(fetch, "GET", path, "poll batch job"))

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        if state.output_ref is None:
            return []
        prefix = state.output_ref.removeprefix(f"s3://{self._bucket}/").rstrip("/")
        prefix = f"{prefix}/{_short_id(state.job_id)}/"

        async def read(key: str) -> list[LineResult]:
            return self._lines(state.job_id,
                               await self._s3_call(fetch, "GET", key, "read batch output"))

        keys = [key for key in await self._list(fetch, prefix) if key.endswith(".jsonl.out")]
        return await read_objects(keys, read)

    async def _list(self, fetch: Fetch, prefix: str) -> list[str]:
        """Every object key under `prefix` (ListObjectsV2, following continuation tokens)."""
        keys: list[str] = []
        token: str | None = None
        while True:
            params = {"list-type": "2", "prefix": prefix}
            if token:
                params["continuation-token"] = token
            query = urlencode(sorted(params.items()), quote_via=quote)
            body = await self._s3_call(fetch, "GET", "", "list batch output", query=query)
            found, token = _list_page(body)
            keys.extend(found)
            if not token:
                return keys

    def _lines(self, job_id: str, body: bytes) -> list[LineResult]:
        """Each record of an output object; one naming no request we wrote (torn, not
        JSON, no `recordId` of ours) as an `unreadable_line`."""
        out = []
        for record in jsonl_records(body):
            key = record.get("recordId") if isinstance(record, dict) else None
            request_id = request_id_of(key) if isinstance(key, str) else None
            if request_id is None:
                out.append(unreadable_line(line_bytes(record), self.secrets()))
                continue
            assert isinstance(record, dict)
            # No per-record AWS request id exists; the job and record name the attempt.
            rid = f"{_short_id(job_id)}/{key}"
            output = record.get("modelOutput")
            if isinstance(output, dict):
                result = self._adapter.parse(200, {"x-amzn-RequestId": rid},
                                             orjson.dumps(output))
            else:
                result = _record_error(record.get("error"), rid)
            out.append(LineResult(request_id, result))
        return out


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


def _invalid(detail: str) -> BatchError:
    return BatchError(Failure(Outcome.INVALID_RESPONSE, detail))


def _short_id(job: str) -> str:
    """The 12-character job id of a job ARN (or the id itself)."""
    return job.rsplit("/", 1)[-1]


def _state(data: Mapping[str, Any]) -> JobState:
    arn = data.get("jobArn")
    if not isinstance(arn, str) or not arn:
        raise _invalid("batch job reply has no jobArn")
    word = str(data.get("status") or "")
    output = data.get("outputDataConfig")
    s3 = output.get("s3OutputDataConfig") if isinstance(output, dict) else None
    uri = s3.get("s3Uri") if isinstance(s3, dict) else None

    def count(name: str) -> int | None:
        value = data.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return JobState(
        job_id=arn,
        status=STATUSES.get(word, JobStatus.QUEUED),
        provider_status=word,
        total=count("totalRecordCount"),
        completed=count("successRecordCount"),
        failed=count("errorRecordCount"),
        output_ref=uri if isinstance(uri, str) else None,
        detail=short(str(data.get("message") or "")),
    )


def _record_error(error: Any, rid: str) -> Failure:
    """An output record's `error` object (`errorCode`, `errorMessage`) as a failure."""
    error = error if isinstance(error, dict) else {}
    code = error.get("errorCode")
    message = str(error.get("errorMessage") or "record has neither modelOutput nor error")
    if isinstance(code, int) and not isinstance(code, bool):
        outcome = status_outcome(code, provider_errors=(424,))  # as the live adapter reads it
        status: int | None = code
    else:
        outcome = ERROR_CODES.get(str(code or ""), Outcome.PROVIDER_ERROR)
        status = None
    return Failure(outcome, short(f"batch record error {code}: {message}"),
                   http_status=status, provider_request_id=rid)


def _s3_code(body: bytes) -> str | None:
    """The `<Code>` of an S3 XML error."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return None
    code = root.findtext("Code")
    return code.strip() if code else None


def _list_page(body: bytes) -> tuple[list[str], str | None]:
    """(keys, next continuation token) of one ListObjectsV2 page."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        raise _invalid("list batch output: reply is not XML") from None
    keys = [k.text for k in root.iter(f"{_S3_NS}Key") if k.text]
    truncated = (root.findtext(f"{_S3_NS}IsTruncated") or "").strip() == "true"
    token = root.findtext(f"{_S3_NS}NextContinuationToken") if truncated else None
    return keys, token or None


def create_batch_client(config: ModelConfig, env: Mapping[str, str]) -> BedrockBatchClient:
    """Registry entry point (`providers.batch_registry`)."""
    return BedrockBatchClient(config, env)


__all__ = ["LIMITS", "STATUSES", "BedrockBatchClient", "create_batch_client"]
