"""Vertex batch prediction in the simulator: a Cloud Storage JSON API and the
`batchPredictionJobs` resource (issue 13), in compressed time.

Under `/vertex`, as the live Vertex routes: media and multipart upload
(`/upload/storage/v1/b/<bucket>/o?uploadType=media&name=`), download
(`/storage/v1/b/<bucket>/o/<object>?alt=media`, or under `/download`) and list
(`?prefix=`), and `/<version>/projects/<p>/locations/<l>/batchPredictionJobs` (create, get, list
with a `labels.<k>="<v>"` or `display_name="<v>"` filter). Every call needs an access
token from the simulator's OAuth endpoint. A finished job writes
`<outputUriPrefix>/prediction-model-<time>/predictions.jsonl`: one `{"request", "response",
"status"}` line per input line it ran.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from providers.sim.auth import checked_body, issued_token_auth
from providers.sim.call import BadRequest
from providers.sim.faults import BatchFaultKind
from providers.sim.object_store import (
    CloudJob,
    Ending,
    Phase,
    count_end,
    count_line,
    jsonl_input,
    line_fault,
)
from providers.sim.wire_vertex import (
    VERTEX_UNAUTHENTICATED,
    VertexDialect,
    google_error,
    parse_generate_body,
)

if TYPE_CHECKING:
    from providers.sim.pipeline import Simulator

_GS = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])/(.+)")
_FILTER = re.compile(r'\s*(labels\.[a-z0-9_-]+|display_name|displayName)\s*=\s*"([^"]*)"\s*')
STATE_WORDS = {Phase.VALIDATING: "JOB_STATE_PENDING", Phase.RUNNING: "JOB_STATE_RUNNING"}
ENDING_WORDS = {Ending.DONE: "JOB_STATE_SUCCEEDED", Ending.EXPIRED: "JOB_STATE_EXPIRED",
                Ending.INVALID: "JOB_STATE_FAILED"}
BASE = "/vertex/{version:v1|v1beta1}/projects/{project}/locations/{location}"


def vertex_batch_routes(sim: Simulator) -> list[web.RouteDef]:
    """Cloud Storage objects and batch prediction jobs (see the module docstring)."""
    routes = _VertexBatch(sim)
    return [
        web.post("/vertex/upload/storage/v1/b/{bucket}/o", routes.upload),
        web.get("/vertex/storage/v1/b/{bucket}/o", routes.list_objects),
        web.get("/vertex/storage/v1/b/{bucket}/o/{name:.+}", routes.download),
        web.get("/vertex/download/storage/v1/b/{bucket}/o/{name:.+}", routes.download),
        web.post(BASE + "/batchPredictionJobs", routes.create),
        web.get(BASE + "/batchPredictionJobs", routes.list_jobs),
        web.get(BASE + "/batchPredictionJobs/{job}", routes.get_job),
    ]


def _iso(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _VertexBatch:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.state = sim.state
        self.dialect = VertexDialect()
        self.auth = issued_token_auth(sim.state.tokens, VERTEX_UNAUTHENTICATED)

    async def _checked(self, request: web.Request) -> bytes | web.Response:
        return await checked_body(request, self.auth, self.state.counts,
                                  lambda exc: google_error(exc.status, exc.message))

    # ---- Cloud Storage --------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        body = await self._checked(request)
        if isinstance(body, web.Response):
            return body
        kind, name = request.query.get("uploadType"), request.query.get("name", "")
        if kind == "multipart":  # what google-cloud-storage sends for small objects
            name, body = _multipart(request.headers.get("Content-Type", ""), body)
        if kind not in ("media", "multipart") or not name:
            return google_error(400, "Only uploadType=media (with a name) and multipart "
                                "uploads are simulated.")
        bucket = request.match_info["bucket"]
        self.state.store.upload(bucket, name, body, self.state.counts)
        self.state.counts["gcs.upload"] += 1
        return web.json_response({"kind": "storage#object", "bucket": bucket, "name": name,
                                  "size": str(len(body)), "generation": "1",
                                  "id": f"{bucket}/{name}/1"})

    async def download(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        name = unquote(request.match_info["name"])
        body = self.state.store.get(request.match_info["bucket"], name)
        if body is None or request.query.get("alt") != "media":
            return google_error(404, f"No such object: {request.match_info['bucket']}/{name}")
        self.state.counts["gcs.download"] += 1
        return web.Response(body=body, content_type="application/octet-stream")

    async def list_objects(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        bucket = request.match_info["bucket"]
        after = request.query.get("pageToken", "")
        limit = int(request.query.get("maxResults", "1000"))
        names = [k for k in self.state.store.keys(bucket, request.query.get("prefix", ""))
                 if k > after]
        body: dict[str, Any] = {"kind": "storage#objects", "items": [
            {"kind": "storage#object", "bucket": bucket, "name": n} for n in names[:limit]]}
        if len(names) > limit:
            body["nextPageToken"] = names[limit - 1]
        self.state.counts["gcs.list"] += 1
        return web.json_response(body)

    # ---- batch prediction jobs ------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        body = await self._checked(request)
        if isinstance(body, web.Response):
            return body
        try:
            job = self._job(request, body)
        except BadRequest as exc:
            self.state.counts["bad_request"] += 1
            return google_error(exc.status, exc.message)
        self.state.cloud_jobs.add(job, self.state.store, self.state.counts)
        if job.fault == BatchFaultKind.CREATE_DELAY:
            await asyncio.sleep(self.state.faults.profile.batch_create_delay_s)
        return web.json_response(self._describe(job))

    def _job(self, request: web.Request, body: bytes) -> CloudJob:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise BadRequest("Invalid JSON payload received.") from None
        if not isinstance(data, dict) or not isinstance(data.get("displayName"), str):
            raise BadRequest("displayName is required.")
        model = data.get("model")
        if not isinstance(model, str) or not model.startswith("publishers/google/models/"):
            raise BadRequest("model must name a publisher model: publishers/google/models/...")
        source = _gs(data, "inputConfig", "gcsSource", "uris")
        target = _gs(data, "outputConfig", "gcsDestination", "outputUriPrefix")
        info = request.match_info
        jobs = self.state.cloud_jobs
        name = (f"projects/{info['project']}/locations/{info['location']}"
                f"/batchPredictionJobs/{jobs.new_id(19).translate(_DIGITS)}")
        fault = self.state.faults.draw_job()
        return CloudJob("vertex", name, data["displayName"], model.rsplit("/", 1)[-1],
                        *source, *target, created=jobs.clock(),
                        seconds=self.state.faults.profile.batch_seconds,
                        fault=fault.value if fault else None,
                        extra={"request": data, "created": dt.datetime.now(dt.UTC)})

    async def get_job(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        job = self.state.cloud_jobs.find("vertex", request.match_info["job"])
        if job is None:
            return google_error(404, "The BatchPredictionJob does not exist.")
        return web.json_response(self._describe(job))

    async def list_jobs(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        wanted = _FILTER.fullmatch(request.query.get("filter", "")) if request.query.get(
            "filter") else None
        if request.query.get("filter") and wanted is None:
            return google_error(400, "Unsupported filter (simulated: labels.k=\"v\", "
                                "display_name=\"v\").")
        jobs = [j for j in self.state.cloud_jobs.of("vertex") if _matches(j, wanted)]
        return web.json_response({"batchPredictionJobs": [self._describe(j) for j in jobs]})

    def _describe(self, job: CloudJob) -> dict[str, Any]:
        phase = self.state.cloud_jobs.seen(job, self._finish)
        request = job.extra["request"]
        created = job.extra["created"]
        assert isinstance(request, dict) and isinstance(created, dt.datetime)
        out: dict[str, Any] = {
            "name": job.job_id, "displayName": job.name, "model": request["model"],
            "inputConfig": request["inputConfig"], "outputConfig": request["outputConfig"],
            "state": ENDING_WORDS[job.ending] if job.ending else STATE_WORDS[phase],
            "createTime": _iso(created), "updateTime": _iso(dt.datetime.now(dt.UTC)),
            "labels": request.get("labels") or {},
        }
        if job.output_key is not None:
            directory = job.output_key.rsplit("/", 1)[0]
            out["outputInfo"] = {"gcsOutputDirectory": f"gs://{job.output_bucket}/{directory}"}
        if job.ending is not None and job.ending is not Ending.INVALID:
            out["completionStats"] = {"successfulCount": str(job.succeeded),
                                      "failedCount": str(job.failed),
                                      "incompleteCount": str(job.total - job.succeeded
                                                             - job.failed)}
        if job.message:
            out["error"] = {"code": 3, "message": job.message}
        return out

    def _finish(self, job: CloudJob) -> None:
        _finish_vertex(self.sim, self.dialect, job)


_DIGITS = str.maketrans("abcdefghijklmnopqrstuvwxyz", "12345678901234567890123456")


def _multipart(content_type: str, body: bytes) -> tuple[str, bytes]:
    """(object name, data) of a `multipart/related` upload: JSON metadata, then the data."""
    boundary = content_type.partition("boundary=")[2].strip().strip('"').encode()
    parts = [p for p in body.split(b"--" + boundary) if p.strip(b"\r\n-")] if boundary else []
    if len(parts) != 2:
        return "", b""
    (_, _, meta), (_, _, data) = (p.partition(b"\r\n\r\n") for p in parts)
    try:
        name = orjson.loads(meta).get("name", "")
    except (orjson.JSONDecodeError, AttributeError):
        return "", b""
    return str(name), data.removesuffix(b"\r\n")


def _gs(data: dict[str, Any], outer: str, inner: str, key: str) -> tuple[str, str]:
    config = data.get(outer)
    place = config.get(inner) if isinstance(config, dict) else None
    value = place.get(key) if isinstance(place, dict) else None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    match = _GS.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise BadRequest(f"{outer}.{inner}.{key} must be one gs://bucket/object URI.")
    return match.group(1), match.group(2)


def _matches(job: CloudJob, wanted: re.Match[str] | None) -> bool:
    if wanted is None:
        return True
    field, value = wanted.group(1), wanted.group(2)
    if field.startswith("labels."):
        request = job.extra["request"]
        labels = request.get("labels") if isinstance(request, dict) else None
        return isinstance(labels, dict) and labels.get(field[7:]) == value
    return job.name == value


def _finish_vertex(sim: Simulator, dialect: VertexDialect, job: CloudJob) -> None:
    """Answer the job's lines once and write `prediction-model-<time>/predictions.jsonl`."""
    source = sim.state.store.get(job.input_bucket, job.input_key)
    items = jsonl_input(source, "request") if source is not None else None
    lines = [item["request"] for item in items] if items else None
    if job.fault == BatchFaultKind.INVALID or not lines:
        job.ending = Ending.INVALID
        job.message = ("Invalid input: injected validation failure"
                       if job.fault == BatchFaultKind.INVALID
                       else "Invalid input: no readable JSONL request at the input URI")
        count_end(sim.state.counts, job, 0)
        return
    job.total = len(lines)
    if job.fault == BatchFaultKind.EXPIRE:
        lines = lines[: len(lines) // 2]
    out = [_line_out(sim, dialect, job, request) for request in lines]
    job.ending = Ending.EXPIRED if job.fault == BatchFaultKind.EXPIRE else Ending.DONE
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    job.output_key = f"{job.output_prefix.rstrip('/')}/prediction-model-{stamp}/predictions.jsonl"
    sim.state.store.put(job.output_bucket, job.output_key, b"\n".join(out) + b"\n")
    count_end(sim.state.counts, job, len(out))


def _line_out(sim: Simulator, dialect: VertexDialect, job: CloudJob,
              request: dict[str, Any]) -> bytes:
    """One prediction line: the request echoed, and a response or an error status."""
    fault = sim.state.faults.draw_line()
    if fault == BatchFaultKind.LINE_ERROR:
        status, reply = 500, orjson.dumps({"error": {"status": "INTERNAL", "message":
                                                     "Internal error encountered."}})
    else:
        status, _, reply = sim.answer_line(
            dialect, lambda body: parse_generate_body(job.model, body), None,
            orjson.dumps(request), line_fault(fault))
    count_line(sim.state.counts, "vertex", fault, status == 200)
    if status == 200:
        job.succeeded += 1
        return orjson.dumps({"request": request, "response": orjson.loads(reply),
                             "status": ""})
    job.failed += 1
    error = orjson.loads(reply).get("error", {})
    return orjson.dumps({"request": request,
                         "status": f"{error.get('status')}: {error.get('message')}"})
