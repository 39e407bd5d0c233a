"""Vertex AI batch prediction for Gemini: a JSONL file in Cloud Storage, a batch prediction
job, prediction lines back in Cloud Storage.

Each input line is `{"request": <GenerateContentRequest>}` whose body is exactly what the live
adapter sends, plus `labels: {"dutchbook_request_id": <record key>}`. Why a label: the output
lines (`{"request", "response", "status"}`) echo the request but Vertex does not promise their
order, and `labels` is a field of GenerateContentRequest itself, so it survives the round trip
where an extra top-level key might not; its value alphabet is what `record_key` produces.

A line with a `response` is classified by `VertexAdapter.parse` like a live reply; one with a
non-empty `status` and no response is a failure classified from the google.rpc status named
in it. The job's routing stands in for the reply's own where a line lacks it (`responseId`,
`modelVersion`): the job, not a load balancer, chose the model.

Layout under `batch_bucket` (`gs://bucket/prefix`), named from the engine's job key:

    prefix/<job key>/input.jsonl            the requests
    prefix/<job key>/output/                outputUriPrefix; Vertex adds a directory
                                            (`outputInfo.gcsOutputDirectory`) holding
                                            `predictions*.jsonl`

Tokens come from the live adapter's google-auth cache (refreshed on a worker thread: it may
block). Endpoints: the model's `base_url` (the simulator) serves both the Vertex and the
storage paths, unless it is one of Google's own hosts (a regional or multi-region Vertex
endpoint: storage stays Cloud Storage's); otherwise `STORAGE_EMULATOR_HOST`
(google-cloud-storage's own override) or `https://storage.googleapis.com`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from providers.base import as_int, short
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
from providers.secrets import Secret
from providers.types import (
    ChatRequest,
    Completion,
    ConfigError,
    Failure,
    HttpRequest,
    ModelConfig,
    Outcome,
)
from providers.urls import on_domain
from providers.vertex import (
    LOCATION_ENVS,
    PROJECT_ENVS,
    RPC_STATUS,
    TokenRefreshError,
    VertexAdapter,
    default_base_url,
)

PROVIDER = "vertex"
LABEL = "dutchbook_request_id"
JOB_LABEL = "dutchbook_job"
LIMITS = BatchLimits(
    max_lines=200_000,  # requests per job (see docs/providers.md for where each came from)
    max_bytes=1024**3,  # input file: 1 GB
    max_jobs_in_flight=8,  # an older Google page's concurrent Gemini jobs (more are queued)
    completion_window="24h",  # "jobs typically complete within 24 hours of starting"
    source=(
        "Google 'Batch prediction with Gemini' (no predefined quota, jobs typically done "
        "within 24 h), an older Google quota page (8 concurrent Gemini jobs), 200,000 "
        "requests and 1 GB per input file as relayed by docs.gmicloud.ai (1 GB also on "
        "Google's Gemini Embedding batch page); see docs/providers.md"
    ),
)
STATES: dict[str, JobStatus] = {
    "JOB_STATE_QUEUED": JobStatus.QUEUED,
    "JOB_STATE_PENDING": JobStatus.VALIDATING,
    "JOB_STATE_PAUSED": JobStatus.QUEUED,
    "JOB_STATE_RUNNING": JobStatus.RUNNING,
    "JOB_STATE_UPDATING": JobStatus.RUNNING,
    "JOB_STATE_CANCELLING": JobStatus.RUNNING,
    "JOB_STATE_SUCCEEDED": JobStatus.DONE,
    "JOB_STATE_PARTIALLY_SUCCEEDED": JobStatus.PARTIAL,
    "JOB_STATE_FAILED": JobStatus.FAILED,
    "JOB_STATE_CANCELLED": JobStatus.CANCELLED,
    "JOB_STATE_EXPIRED": JobStatus.EXPIRED,
}


def _first(value: str | None, env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return value or next((env[n].strip() for n in names if env.get(n, "").strip()), None)


class VertexBatchClient:
    """One Gemini model's batch prediction jobs; see the module docstring."""

    provider = PROVIDER

    def __init__(self, config: ModelConfig, env: Mapping[str, str]) -> None:
        self._adapter = VertexAdapter(config, env)
        if self._adapter.openai_endpoint:
            raise ConfigError(
                f"model {config.name!r}: Vertex batch is built for Gemini models only; "
                "open models (the OpenAI-compatible endpoint) must use dispatch = \"live\""
            )
        project = _first(config.project, env, PROJECT_ENVS)
        location = _first(config.location, env, LOCATION_ENVS)
        if project is None or location is None:  # the adapter found one in its file
            raise ConfigError(f"model {config.name!r}: batch needs `project` and `location`")
        self._config = config
        self.limits = limits_for(config, LIMITS)
        self._bucket, self._prefix = split_bucket(config.batch_bucket, "gs", config.name)
        base = (config.base_url or default_base_url(location)).rstrip("/")
        version = config.api_version or "v1"
        self._api = f"{base}/{version}"
        self._parent = f"projects/{quote(project, safe='')}/locations/{quote(location, safe='')}"
        model = config.model.removeprefix("publishers/google/models/").removeprefix("google/")
        self._model = f"publishers/google/models/{model}"
        # A simulator or gateway serves storage beside Vertex; Google's own Vertex hosts (a
        # multi-region `aiplatform.us.rep.googleapis.com`) do not: Cloud Storage is its own.
        beside = None if on_domain(config.base_url, "googleapis.com") else config.base_url
        storage = env.get("STORAGE_EMULATOR_HOST") or beside or ""
        self._storage = (storage or "https://storage.googleapis.com").rstrip("/")

    def __repr__(self) -> str:
        return f"VertexBatchClient({self._config.name!r}, gs://{self._bucket}/{self._prefix})"

    def secrets(self) -> tuple[Secret, ...]:
        return self._adapter.secrets()

    def _object(self, job_key: str, name: str) -> str:
        return "/".join(p for p in (self._prefix, job_name(job_key), name) if p)

    # ---- requests -------------------------------------------------------------------------

    async def _call(self, fetch: Fetch, method: str, url: str, what: str,
                    body: bytes = b"", content_type: str = "application/json") -> bytes:
        try:
            auth = await asyncio.to_thread(self._adapter.auth_headers)  # may refresh: blocks
        except TokenRefreshError as exc:  # the token endpoint refused, or was not reached
            outcome = Outcome.PROVIDER_ERROR if exc.retryable else Outcome.AUTH_ERROR
            raise BatchError(Failure(outcome, f"{what}: {exc}")) from None
        except ConfigError as exc:  # no credentials could be loaded at all
            raise BatchError(Failure(Outcome.AUTH_ERROR, short(str(exc)))) from None
        headers = {**auth, **({"Content-Type": content_type} if body else {})}
        _, _, reply = await send(fetch, HttpRequest(method, url, headers, body), what,
                                 self.secrets(), codes=RPC_STATUS, code_of=_rpc_status)
        return reply

    async def _json_call(self, fetch: Fetch, method: str, url: str, what: str,
                         payload: Any = None) -> dict[str, Any]:
        body = orjson.dumps(payload) if payload is not None else b""
        data = _json(await self._call(fetch, method, url, what, body))
        if not isinstance(data, dict):
            raise BatchError(Failure(Outcome.INVALID_RESPONSE, f"{what}: reply is not JSON"))
        return data

    # ---- the contract ---------------------------------------------------------------------

    def line(self, req: ChatRequest) -> bytes:
        body, _omitted = self._adapter.request_body(req)
        request = orjson.loads(body)
        request["labels"] = {LABEL: record_key(req.request_id)}
        return orjson.dumps({"request": request})

    async def upload(self, fetch: Fetch, job_key: str, lines: Sequence[bytes]) -> str:
        name = self._object(job_key, "input.jsonl")
        query = urlencode({"uploadType": "media", "name": name})
        url = f"{self._storage}/upload/storage/v1/b/{self._bucket}/o?{query}"
        await self._call(fetch, "POST", url, "upload batch input",
                         b"\n".join(lines) + b"\n", "application/jsonl")
        return f"gs://{self._bucket}/{name}"

    async def create(self, fetch: Fetch, job_key: str, input_ref: str) -> JobState:
        name = job_name(job_key)
        payload = {
            "displayName": name,
            "model": self._model,
            "labels": {JOB_LABEL: name},
            "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [input_ref]}},
            "outputConfig": {"predictionsFormat": "jsonl", "gcsDestination": {
                "outputUriPrefix": f"gs://{self._bucket}/{self._object(job_key, 'output')}"}},
        }
        url = f"{self._api}/{self._parent}/batchPredictionJobs"
        return _state(await self._json_call(fetch, "POST", url, "create batch job", payload))

    async def find(self, fetch: Fetch, job_key: str) -> JobState | None:
        name = job_name(job_key)
        query = urlencode({"filter": f'labels.{JOB_LABEL}="{name}"', "pageSize": 100})
        url = f"{self._api}/{self._parent}/batchPredictionJobs?{query}"
        data = await self._json_call(fetch, "GET", url, "list batch jobs")
        for job in data.get("batchPredictionJobs") or []:
            if isinstance(job, dict) and job.get("displayName") == name:
                return _state(job)
        return None

    async def poll(self, fetch: Fetch, job_id: str) -> JobState:
        return _state(await self._json_call(fetch, "GET", f"{self._api}/{job_id}",
                                            "poll batch job"))

    async def results(self, fetch: Fetch, state: JobState) -> Sequence[LineResult]:
        if state.output_ref is None:
            return []
        prefix = state.output_ref.removeprefix(f"gs://{self._bucket}/").rstrip("/") + "/"

        async def read(name: str) -> list[LineResult]:
            url = f"{self._storage}/storage/v1/b/{self._bucket}/o/{quote(name, safe='')}?alt=media"
            return self._lines(state.job_id,
                               await self._call(fetch, "GET", url, "read batch output"))

        names = [name for name in await self._list(fetch, prefix)
                 if name.rsplit("/", 1)[-1].startswith("predictions") and name.endswith(".jsonl")]
        return await read_objects(names, read)

    async def _list(self, fetch: Fetch, prefix: str) -> list[str]:
        names: list[str] = []
        token = ""
        while True:
            params = {"prefix": prefix, **({"pageToken": token} if token else {})}
            url = f"{self._storage}/storage/v1/b/{self._bucket}/o?{urlencode(params)}"
            data = await self._json_call(fetch, "GET", url, "list batch output")
            names += [i["name"] for i in data.get("items") or []
                      if isinstance(i, dict) and isinstance(i.get("name"), str)]
            token = str(data.get("nextPageToken") or "")
            if not token:
                return names

    def _lines(self, job_id: str, body: bytes) -> list[LineResult]:
        """Each prediction line; one naming no request we wrote (torn, not JSON, no label
        of ours) as an `unreadable_line`."""
        out = []
        for line in jsonl_records(body):
            request = line.get("request") if isinstance(line, dict) else None
            labels = request.get("labels") if isinstance(request, dict) else None
            key = labels.get(LABEL) if isinstance(labels, dict) else None
            request_id = request_id_of(key) if isinstance(key, str) else None
            if request_id is None:
                out.append(unreadable_line(line_bytes(line), self.secrets()))
                continue
            assert isinstance(line, dict)
            rid = f"{job_id.rsplit('/', 1)[-1]}/{key}"
            out.append(LineResult(request_id, self._line_result(line, rid)))
        return out

    def _line_result(self, line: Mapping[str, Any], rid: str) -> Completion | Failure:
        response = line.get("response")
        status = line.get("status")
        if isinstance(response, dict) and not status:
            routed = {"responseId": rid, "modelVersion": self._config.model, **response}
            return self._adapter.parse(200, {}, orjson.dumps(routed))
        text = str(status or "line has neither response nor status")
        outcome = next((o for word, o in RPC_STATUS.items() if word in text),
                       Outcome.PROVIDER_ERROR)
        return Failure(outcome, short(f"batch line error: {text}"), provider_request_id=rid)


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


def _rpc_status(headers: Mapping[str, str], body: bytes) -> str | None:
    del headers
    data = _json(body)
    error = data.get("error") if isinstance(data, dict) else None
    status = error.get("status") if isinstance(error, dict) else None
    return status if isinstance(status, str) else None


def _state(data: Mapping[str, Any]) -> JobState:
    name = data.get("name")
    if not isinstance(name, str) or "/batchPredictionJobs/" not in name:
        raise BatchError(Failure(Outcome.INVALID_RESPONSE, "batch job reply has no name"))
    word = str(data.get("state") or "JOB_STATE_UNSPECIFIED")
    stats = data.get("completionStats")
    stats = stats if isinstance(stats, dict) else {}
    info = data.get("outputInfo")
    directory = info.get("gcsOutputDirectory") if isinstance(info, dict) else None
    error = data.get("error")
    detail = error.get("message") if isinstance(error, dict) else ""
    done, failed = as_int(stats.get("successfulCount")), as_int(stats.get("failedCount"))
    incomplete = as_int(stats.get("incompleteCount"))
    counts = [n for n in (done, failed, incomplete) if n is not None]
    return JobState(
        job_id=name,
        status=STATES.get(word, JobStatus.QUEUED),
        provider_status=word,
        total=sum(counts) if counts else None,
        completed=done,
        failed=failed,
        output_ref=directory if isinstance(directory, str) else None,
        detail=short(str(detail or "")),
    )


def create_batch_client(config: ModelConfig, env: Mapping[str, str]) -> VertexBatchClient:
    """Registry entry point (`providers.batch_registry`)."""
    return VertexBatchClient(config, env)


__all__ = ["LABEL", "LIMITS", "STATES", "VertexBatchClient", "create_batch_client"]
