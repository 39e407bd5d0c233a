"""Bedrock batch inference in the simulator: an S3-shaped object store and the model
invocation job control plane (issue 13), in compressed time.

Paths mirror the real services under `/bedrock`: S3 path-style at `/bedrock/s3/<bucket>/<key>`
(PutObject, GetObject, ListObjectsV2, SigV4 with service `s3`), and the control plane's
`/model-invocation-job(s)` (SigV4 with service `bedrock`), so botocore's own `s3` and `bedrock`
clients pointed here work unchanged. A job validates, runs for `batch_seconds`, then writes
`<output>/<job id>/<input name>.out` (one record per input line, `modelOutput` a Converse
reply or an `error`) and `manifest.json.out`, with the profile's batch faults drawn per job
and per line and every one counted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote
from xml.sax.saxutils import escape

import orjson
from aiohttp import web

from providers.sim.auth import checked_body, sigv4_auth, sigv4_or_key_auth
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
from providers.sim.wire_bedrock import (
    BedrockDialect,
    aws_error,
    json_object,
    parse_converse_body,
)

if TYPE_CHECKING:
    from providers.sim.pipeline import Simulator

ACCOUNT = "000000000000"
REGION = "us-east-1"
LINE_ERROR_MESSAGE = "The model encountered an internal error while processing this record."
MIN_RECORDS = 100  # Bedrock's default "Minimum number of records per batch inference job"
_NAME = re.compile(r"[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}")
_TOKEN = re.compile(r"[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}")
_ROLE = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
_S3_URI = re.compile(r"s3://([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])/(.*)")
STATUS_WORDS = {Phase.VALIDATING: "Validating", Phase.RUNNING: "InProgress"}
ENDING_WORDS = {Ending.DONE: "Completed", Ending.EXPIRED: "Expired", Ending.INVALID: "Failed"}
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def s3_error(code: str, message: str, status: int) -> web.Response:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message></Error>")
    return web.Response(text=body, status=status, content_type="application/xml")


def _iso(epoch: float) -> str:
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def bedrock_batch_routes(sim: Simulator) -> list[web.RouteDef]:
    """The S3 object routes and the model invocation job routes (see the module docstring)."""
    s3 = _S3Routes(sim)
    jobs = _JobRoutes(sim)
    return [
        web.put("/bedrock/s3/{bucket}/{key:.+}", s3.put),
        web.get("/bedrock/s3/{bucket}/{key:.+}", s3.get),
        web.get("/bedrock/s3/{bucket}", s3.list),
        web.get("/bedrock/s3/{bucket}/", s3.list),
        web.post("/bedrock/model-invocation-job", jobs.create),
        web.get("/bedrock/model-invocation-job/{job:.+}", jobs.get),
        web.get("/bedrock/model-invocation-jobs", jobs.list),
    ]


class _S3Routes:
    def __init__(self, sim: Simulator) -> None:
        self.state = sim.state
        self.auth = sigv4_auth(sim.state.credentials, "s3")

    async def _checked(self, request: web.Request) -> bytes | web.Response:
        return await checked_body(request, self.auth, self.state.counts, _s3_refusal)

    async def put(self, request: web.Request) -> web.Response:
        body = await self._checked(request)
        if isinstance(body, web.Response):
            return body
        self.state.store.upload(request.match_info["bucket"], request.match_info["key"], body,
                                self.state.counts)
        self.state.counts["s3.put"] += 1
        return web.Response(headers={"ETag": f'"{len(body):x}"'})

    async def get(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        body = self.state.store.get(request.match_info["bucket"], request.match_info["key"])
        if body is None:
            return s3_error("NoSuchKey", "The specified key does not exist.", 404)
        self.state.counts["s3.get"] += 1
        return web.Response(body=body, content_type="application/octet-stream")

    async def list(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        if request.query.get("list-type") != "2":
            return s3_error("NotImplemented", "Only ListObjectsV2 is simulated.", 501)
        bucket = request.match_info["bucket"]
        prefix = request.query.get("prefix", "")
        limit = int(request.query.get("max-keys", "1000"))
        after = request.query.get("continuation-token") or request.query.get("start-after", "")
        keys = [k for k in self.state.store.keys(bucket, prefix) if k > after]
        page, more = keys[:limit], len(keys) > limit
        self.state.counts["s3.list"] += 1
        return web.Response(text=_list_xml(bucket, prefix, page, more, limit),
                            content_type="application/xml")


def _s3_refusal(exc: BadRequest) -> web.Response:
    return s3_error(exc.code or "AccessDenied", exc.message, exc.status)


def _list_xml(bucket: str, prefix: str, keys: list[str], more: bool, limit: int) -> str:
    contents = "".join(
        f"<Contents><Key>{escape(k)}</Key><LastModified>2026-01-01T00:00:00.000Z"
        "</LastModified><ETag>&quot;0&quot;</ETag><Size>0</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>" for k in keys)
    token = f"<NextContinuationToken>{escape(keys[-1])}</NextContinuationToken>" if more else ""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{S3_NS}">'
            f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>{limit}</MaxKeys>"
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{token}{contents}"
            "</ListBucketResult>")


def _validation(message: str) -> BadRequest:
    return BadRequest(message, code="ValidationException")


class _JobRoutes:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.state = sim.state
        self.dialect = BedrockDialect()
        self.auth = sigv4_or_key_auth(sim.state.credentials)

    async def _checked(self, request: web.Request) -> bytes | web.Response:
        return await checked_body(request, self.auth, self.state.counts,
                                  self.dialect.error)

    async def create(self, request: web.Request) -> web.Response:
        body = await self._checked(request)
        if isinstance(body, web.Response):
            return body
        try:
            job, fresh = self._create(body)
        except BadRequest as exc:
            self.state.counts["bad_request"] += 1
            return self.dialect.error(exc)
        if fresh and job.fault == BatchFaultKind.CREATE_DELAY:
            await asyncio.sleep(self.state.faults.profile.batch_create_delay_s)
        return web.json_response({"jobArn": job.job_id})

    def _create(self, body: bytes) -> tuple[CloudJob, bool]:
        data = json_object(body)
        token = data.get("clientRequestToken")
        if isinstance(token, str):
            if not _TOKEN.fullmatch(token):
                raise _validation("clientRequestToken failed to satisfy its pattern")
            known = self.state.cloud_jobs.by_token("bedrock", token)
            if known is not None:
                self.state.counts["batch.bedrock.create_repeated"] += 1
                return known, False
        name = data.get("jobName")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise _validation("Value at 'jobName' failed to satisfy constraint: Member must "
                              "satisfy regular expression pattern")
        if any(j.name == name for j in self.state.cloud_jobs.of("bedrock")):
            raise BadRequest(f"A job named {name} already exists.", status=409,
                             code="ConflictException")
        job = self.state.cloud_jobs.add(self._job(data, name, token), self.state.store,
                                        self.state.counts)
        return job, True

    def _job(self, data: dict[str, Any], name: str, token: str | None) -> CloudJob:
        if not isinstance(data.get("roleArn"), str) or not _ROLE.fullmatch(data["roleArn"]):
            raise _validation("Value at 'roleArn' failed to satisfy constraint")
        if data.get("modelInvocationType", "InvokeModel") not in ("InvokeModel", "Converse"):
            raise _validation("Value at 'modelInvocationType' failed to satisfy constraint")
        hours = data.get("timeoutDurationInHours", 24)
        if not isinstance(hours, int) or not 24 <= hours <= 168:
            raise _validation("Value at 'timeoutDurationInHours' failed to satisfy constraint: "
                              "Member must have value between 24 and 168")
        source = _uri(data, "inputDataConfig", "s3InputDataConfig")
        target = _uri(data, "outputDataConfig", "s3OutputDataConfig")
        jobs = self.state.cloud_jobs
        job_id = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/{jobs.new_id()}"
        fault = self.state.faults.draw_job()
        return CloudJob(
            "bedrock", job_id, name, str(data.get("modelId") or ""), *source, *target,
            created=jobs.clock(), seconds=self.state.faults.profile.batch_seconds,
            token=token, fault=fault.value if fault else None,
            extra={"request": data},
        )

    async def get(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        job = self.state.cloud_jobs.find("bedrock", unquote(request.match_info["job"]))
        if job is None:
            return aws_error("ResourceNotFoundException", "The specified job was not found.",
                             404)
        return web.json_response(self._describe(job))

    async def list(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        query = parse_qs(request.query_string)
        contains = (query.get("nameContains") or [""])[0]
        limit = int((query.get("maxResults") or ["1000"])[0])
        start = int((query.get("nextToken") or ["0"])[0])
        found = [j for j in self.state.cloud_jobs.of("bedrock") if contains in j.name]
        page = found[start:start + limit]
        body: dict[str, Any] = {"invocationJobSummaries": [self._describe(j) for j in page]}
        if start + limit < len(found):
            body["nextToken"] = str(start + limit)
        return web.json_response(body)

    def _describe(self, job: CloudJob) -> dict[str, Any]:
        phase = self.state.cloud_jobs.seen(job, self._finish)
        request = job.extra["request"]
        assert isinstance(request, dict)
        word = ENDING_WORDS[job.ending] if job.ending else STATUS_WORDS[phase]
        out: dict[str, Any] = {
            "jobArn": job.job_id, "jobName": job.name, "modelId": job.model,
            "roleArn": request["roleArn"], "status": word,
            "submitTime": _iso(_wall(job.created, self.state.cloud_jobs.clock())),
            "lastModifiedTime": _iso(_wall(job.created, self.state.cloud_jobs.clock())),
            "inputDataConfig": request["inputDataConfig"],
            "outputDataConfig": request["outputDataConfig"],
            "timeoutDurationInHours": request.get("timeoutDurationInHours", 24),
            "modelInvocationType": request.get("modelInvocationType", "InvokeModel"),
        }
        if isinstance(request.get("clientRequestToken"), str):
            out["clientRequestToken"] = request["clientRequestToken"]
        if job.message:
            out["message"] = job.message
        if job.ending is not None:
            out.update(totalRecordCount=job.total, processedRecordCount=job.succeeded
                       + job.failed, successRecordCount=job.succeeded,
                       errorRecordCount=job.failed)
        return out

    def _finish(self, job: CloudJob) -> None:
        _finish_bedrock(self.sim, self.dialect, job)


def _wall(created: float, now: float) -> float:
    """A monotonic job time as a wall-clock epoch (the wire wants dates)."""
    return time.time() - (now - created)


def _uri(data: dict[str, Any], outer: str, inner: str) -> tuple[str, str]:
    config = data.get(outer)
    s3 = config.get(inner) if isinstance(config, dict) else None
    uri = s3.get("s3Uri") if isinstance(s3, dict) else None
    match = _S3_URI.fullmatch(uri) if isinstance(uri, str) else None
    if match is None:
        raise _validation(f"Value at '{outer}.{inner}.s3Uri' failed to satisfy constraint")
    return match.group(1), match.group(2)


def _finish_bedrock(sim: Simulator, dialect: BedrockDialect, job: CloudJob) -> None:
    """Answer the job's records once and write `<input>.out` and `manifest.json.out`."""
    state = sim.state
    source = state.store.get(job.input_bucket, job.input_key)
    records = jsonl_input(source, "modelInput") if source is not None else None
    if job.fault == BatchFaultKind.INVALID or records is None or len(records) < MIN_RECORDS:
        job.ending = Ending.INVALID
        job.message = ("Input data failed validation: " + (
            "injected validation failure" if job.fault == BatchFaultKind.INVALID else
            f"the job needs at least {MIN_RECORDS} records" if records is not None else
            "no input file at the input location"))
        count_end(state.counts, job, 0)
        return
    job.total = len(records)
    if job.fault == BatchFaultKind.EXPIRE:
        records = records[: len(records) // 2]
    lines = [_record_out(sim, dialect, job, record) for record in records]
    job.ending = Ending.EXPIRED if job.fault == BatchFaultKind.EXPIRE else Ending.DONE
    name = job.input_key.rsplit("/", 1)[-1]
    prefix = f"{job.output_prefix.rstrip('/')}/{job.job_id.rsplit('/', 1)[-1]}"
    state.store.put(job.output_bucket, f"{prefix}/{name}.out", b"\n".join(lines) + b"\n")
    manifest = {"totalRecordCount": job.total, "processedRecordCount": len(lines),
                "successRecordCount": job.succeeded, "errorRecordCount": job.failed}
    state.store.put(job.output_bucket, f"{prefix}/manifest.json.out", orjson.dumps(manifest))
    count_end(state.counts, job, len(lines))


def _record_out(sim: Simulator, dialect: BedrockDialect, job: CloudJob,
                record: dict[str, Any]) -> bytes:
    """One output record: the Converse reply, or an `error` object (bad input, a fault)."""
    out: dict[str, Any] = {"recordId": record.get("recordId"),
                           "modelInput": record["modelInput"]}
    fault = sim.state.faults.draw_line()
    if fault == BatchFaultKind.LINE_ERROR:
        status, reply = 500, orjson.dumps({"message": LINE_ERROR_MESSAGE})
    else:
        status, _, reply = sim.answer_line(
            dialect, lambda body: parse_converse_body(job.model, body), None,
            orjson.dumps(record["modelInput"]), line_fault(fault))
    count_line(sim.state.counts, "bedrock", fault, status == 200)
    if status == 200:
        job.succeeded += 1
        out["modelOutput"] = orjson.loads(reply)
    else:
        job.failed += 1
        message = orjson.loads(reply).get("message", "") if reply.startswith(b"{") else ""
        out["error"] = {"errorCode": status, "errorMessage": str(message)}
    return orjson.dumps(out)
