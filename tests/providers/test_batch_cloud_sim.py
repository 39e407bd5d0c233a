"""Bedrock and Vertex batch end to end against the simulator: the input file uploaded
(S3 PutObject / Cloud Storage media upload), the job created (a Converse-type model
invocation job / a batch prediction job), polled, and its output records read back, every
call authenticated as on the real services (SigV4 with service `s3` and `bedrock`, verified
by the simulator's own HMAC code; OAuth tokens from the simulator's token endpoint), each
batch fault reconciled with the simulator's counts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
import orjson
import pytest
import yarl

from providers.batch import (
    FINAL,
    UNREADABLE,
    BatchClient,
    BatchError,
    Fetch,
    JobState,
    JobStatus,
    LineResult,
)
from providers.batch_bedrock import BedrockBatchClient
from providers.batch_cloud import record_key, request_id_of
from providers.batch_registry import batch_client_for
from providers.batch_vertex import LABEL, VertexBatchClient
from providers.bedrock import BedrockAdapter
from providers.registry import adapter_for
from providers.sim.faults import FaultProfile
from providers.sim.rehearse import rehearse_model
from providers.sim.server import SimHandle, start_sim
from providers.types import ChatRequest, Completion, Failure, HttpRequest, ModelConfig, Outcome

SYSTEM = "You are a careful forecaster. Reply with a JSON object only."


def prompts(n: int, prefix: str = "") -> list[ChatRequest]:
    """`n` distinct questions; ids are hex like the planner's (some with a prefix to escape)."""
    return [
        ChatRequest(f"{prefix}{i:024x}", SYSTEM,
                    f'Probability that stock {i} closes up? Reply as {{"probability": p}}.',
                    seed=i)
        for i in range(n)
    ]


def make_fetch(session: aiohttp.ClientSession, timeout_s: float = 5.0) -> Fetch:
    async def fetch(http: HttpRequest) -> tuple[int, Mapping[str, str], bytes] | Failure:
        try:
            async with asyncio.timeout(timeout_s):
                async with session.request(http.method, yarl.URL(http.url, encoded=True),
                                           headers=dict(http.headers), data=http.body) as r:
                    return r.status, dict(r.headers), await r.read()
        except TimeoutError:
            return Failure(Outcome.TIMEOUT, "client timeout")
        except aiohttp.ClientError as exc:
            return Failure(Outcome.CONNECTION_ERROR, type(exc).__name__)

    return fetch


def lost_reply(fetch: Fetch, sim: SimHandle, counter: str) -> Fetch:
    """`fetch`, but its reply is lost: it gives up (a client timeout) once the simulator has
    created the job, waited for, not after a fixed 0.3 s that a loaded machine could spend
    before the request even reached the simulator."""

    async def give_up(http: HttpRequest) -> tuple[int, Mapping[str, str], bytes] | Failure:
        sending = asyncio.ensure_future(fetch(http))  # a Fetch gives an Awaitable
        async with asyncio.timeout(20):
            while not sim.counts().get(counter, 0):
                await asyncio.sleep(0.01)
        assert not sending.done(), "the reply came before the client gave up"
        sending.cancel()
        return Failure(Outcome.TIMEOUT, "client timeout")

    return give_up


@dataclass
class Rig:
    sim: SimHandle
    client: BatchClient
    fetch: Fetch
    config: ModelConfig
    env: dict[str, str]


@asynccontextmanager
async def rig(config: ModelConfig, tmp_path: Path,
              faults: str | FaultProfile = "batch_seconds=0.4") -> AsyncIterator[Rig]:
    async with await start_sim(faults=faults) as sim:
        rehearsed, env = rehearse_model(config, sim.root_url, tmp_path)
        client = batch_client_for(rehearsed, env)
        async with aiohttp.ClientSession(trust_env=False) as session:
            yield Rig(sim, client, make_fetch(session), rehearsed, env)


async def wait_final(client: BatchClient, fetch: Fetch, job_id: str,
                     limit_s: float = 20.0) -> JobState:
    async with asyncio.timeout(limit_s):
        while True:
            state = await client.poll(fetch, job_id)
            if state.status in FINAL:
                return state
            await asyncio.sleep(0.1)


async def run_job(r: Rig, job_key: str, requests: list[ChatRequest]
                  ) -> tuple[JobState, list[LineResult]]:
    """upload, create, poll to the end, read the results: what the engine does per job."""
    ref = await r.client.upload(r.fetch, job_key, [r.client.line(q) for q in requests])
    created = await r.client.create(r.fetch, job_key, ref)
    final = await wait_final(r.client, r.fetch, created.job_id)
    return final, list(await r.client.results(r.fetch, final))


HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
N = 100  # Bedrock's (and the simulator's) minimum records per job


def model(**kw: object) -> ModelConfig:
    fields: dict[str, object] = {"name": "claude", "provider": "bedrock", "model": HAIKU,
                                 "temperature": 1.0, "max_tokens": 512, "dispatch": "batch"}
    fields.update(kw)
    return ModelConfig(**fields)  # type: ignore[arg-type]


def test_line_is_the_live_converse_body_under_a_record_id(tmp_path: Path) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_REGION": "us-east-1"}
    config = model(batch_bucket="s3://bucket/p", batch_role_arn="arn:aws:iam::123456789012:role/r")
    client = BedrockBatchClient(config, env)
    req = prompts(1, prefix="Q-")[0]
    line = orjson.loads(client.line(req))
    live = BedrockAdapter(config, env).build(req)
    assert line["modelInput"] == orjson.loads(live.body)
    assert line["recordId"].isalnum() and request_id_of(line["recordId"]) == req.request_id


def test_record_keys_round_trip_and_refuse_what_cannot_fit() -> None:
    for rid in ("00ab12", "x00", "Q-1", "r1", "a" * 62, "é"):
        assert request_id_of(record_key(rid)) == rid
    with pytest.raises(ValueError):
        record_key("Q" * 40)


async def test_a_job_answers_every_record_once(tmp_path: Path) -> None:
    async with rig(model(), tmp_path) as r:
        requests = prompts(N)
        final, results = await run_job(r, "job-0001", requests)
        counts = r.sim.counts()
    assert final.status is JobStatus.DONE and final.provider_status == "Completed"
    assert final.total == N and final.completed == N and final.failed == 0
    assert sorted(x.request_id for x in results) == sorted(q.request_id for q in requests)
    assert all(isinstance(x.result, Completion) for x in results)
    assert counts["batch.lines_run.bedrock"] == N and counts["s3.put"] == 1
    assert counts.get("auth_rejected", 0) == 0


async def test_upload_is_idempotent_and_create_repeats_return_one_job(tmp_path: Path) -> None:
    async with rig(model(), tmp_path) as r:
        lines = [r.client.line(q) for q in prompts(N)]
        first = await r.client.upload(r.fetch, "job-0002", lines)
        again = await r.client.upload(r.fetch, "job-0002", lines)
        job = await r.client.create(r.fetch, "job-0002", first)
        # A lost create reply: the same key again finds, or re-creates into, the same job.
        found = await r.client.find(r.fetch, "job-0002")
        repeat = await r.client.create(r.fetch, "job-0002", again)
        missing = await r.client.find(r.fetch, "job-0003")
        counts = r.sim.counts()
    assert first == again and len(r.sim.state.store.keys("dutchbook-sim-batch")) == 1
    assert found is not None and found.job_id == job.job_id == repeat.job_id
    assert missing is None
    assert counts["batch.jobs_created.bedrock"] == 1
    assert counts.get("batch.bedrock.create_repeated") == 1


async def test_find_after_a_create_whose_reply_was_lost(tmp_path: Path) -> None:
    faults = "batch_create_delay=1.0,batch_create_delay_s=2.0,batch_seconds=0.4"
    async with rig(model(), tmp_path, faults) as r:
        ref = await r.client.upload(r.fetch, "job-0004", [r.client.line(q) for q in prompts(N)])
        with pytest.raises(BatchError) as lost:
            await r.client.create(lost_reply(r.fetch, r.sim, "batch.jobs_created.bedrock"),
                                  "job-0004", ref)
        found = await r.client.find(r.fetch, "job-0004")
        assert found is not None
        final = await wait_final(r.client, r.fetch, found.job_id)
        counts = r.sim.counts()
    assert lost.value.failure.outcome is Outcome.TIMEOUT
    assert final.status is JobStatus.DONE and counts["batch.jobs_created.bedrock"] == 1
    assert counts["fault.batch_create_delay"] == 1


async def test_expired_job_returns_part_of_its_records(tmp_path: Path) -> None:
    async with rig(model(), tmp_path, "batch_expire=1.0,batch_seconds=0.4") as r:
        final, results = await run_job(r, "job-0005", prompts(N))
        counts = r.sim.counts()
    assert final.status is JobStatus.EXPIRED and final.provider_status == "Expired"
    assert len(results) == N // 2 == counts["batch.lines_run.bedrock"]
    assert counts["fault.batch_expire"] == 1


async def test_invalid_job_fails_with_no_records(tmp_path: Path) -> None:
    async with rig(model(), tmp_path, "batch_invalid=1.0,batch_seconds=0.4") as r:
        final, results = await run_job(r, "job-0006", prompts(N))
        counts = r.sim.counts()
    assert final.status is JobStatus.FAILED and "validation" in final.detail
    assert results == [] and counts["fault.batch_invalid"] == 1


async def test_too_few_records_fail_validation_as_on_bedrock(tmp_path: Path) -> None:
    async with rig(model(), tmp_path) as r:
        final, results = await run_job(r, "job-0007", prompts(N - 1))
    assert final.status is JobStatus.FAILED and "at least 100" in final.detail
    assert results == []


async def test_line_faults_are_classified_and_reconciled(tmp_path: Path) -> None:
    faults = ("batch_line_error=0.1,refusal=0.1,output_cap=0.1,server_error=0.05,"
              "rate_limit=0.05,missing_routing=0.05,batch_seconds=0.4")
    async with rig(model(), tmp_path, faults) as r:
        final, results = await run_job(r, "job-0008", prompts(3 * N))
        counts = r.sim.counts()
    seen = Counter(x.result.outcome.value for x in results if isinstance(x.result, Failure))
    assert len(results) == 3 * N and final.status is JobStatus.DONE
    assert seen["provider_error"] == (counts["fault.batch_line_error"]
                                      + counts["fault.server_error"]) > 0
    assert seen["rate_limit"] == counts["fault.rate_limit"] > 0
    assert seen["refusal"] == counts["fault.refusal"] > 0
    assert seen["truncated"] == counts["fault.output_cap"] > 0
    assert "missing_routing_metadata" not in seen and counts["batch.inert.missing_routing"] > 0
    ok = sum(isinstance(x.result, Completion) for x in results)
    assert ok == counts["answered.bedrock"]
    assert final.failed == seen["provider_error"] + seen["rate_limit"]


async def test_wrong_secret_is_an_auth_error_without_the_secret(tmp_path: Path) -> None:
    async with rig(model(), tmp_path) as r:
        env = {**r.env, "AWS_SECRET_ACCESS_KEY": "not-the-simulated-secret"}
        client = BedrockBatchClient(r.config, env)
        with pytest.raises(BatchError) as refused:
            await client.upload(r.fetch, "job-0009", [client.line(q) for q in prompts(2)])
    assert refused.value.failure.outcome is Outcome.AUTH_ERROR
    assert "not-the-simulated-secret" not in str(refused.value.failure)


# ---- Vertex -------------------------------------------------------------------------------

GEMINI = "gemini-3.5-flash"


def gemini(**kw: object) -> ModelConfig:
    fields: dict[str, object] = {"name": "gemini", "provider": "vertex", "model": GEMINI,
                                 "temperature": 1.0, "max_tokens": 512, "json_mode": True,
                                 "dispatch": "batch"}
    fields.update(kw)
    return ModelConfig(**fields)  # type: ignore[arg-type]


async def test_vertex_line_is_the_live_body_with_a_request_label(tmp_path: Path) -> None:
    async with rig(gemini(), tmp_path) as r:
        req = prompts(1, prefix="Q-")[0]
        line = orjson.loads(r.client.line(req))
        adapter = adapter_for(r.config, r.env)
        live = orjson.loads((await asyncio.to_thread(adapter.build, req)).body)
    labels = line["request"].pop("labels")
    assert line["request"] == live
    assert request_id_of(labels["dutchbook_request_id"]) == req.request_id


async def test_vertex_job_answers_every_line_once(tmp_path: Path) -> None:
    async with rig(gemini(), tmp_path) as r:
        requests = prompts(40, prefix="Q-")
        final, results = await run_job(r, "job-0101", requests)
        repeat = await r.client.upload(r.fetch, "job-0101", [r.client.line(q) for q in requests])
        found = await r.client.find(r.fetch, "job-0101")
        missing = await r.client.find(r.fetch, "job-0102")
        counts = r.sim.counts()
    assert final.status is JobStatus.DONE and final.provider_status == "JOB_STATE_SUCCEEDED"
    assert final.completed == 40 and final.failed == 0 and final.total == 40
    assert sorted(x.request_id for x in results) == sorted(q.request_id for q in requests)
    assert all(isinstance(x.result, Completion) for x in results)
    assert repeat.startswith("gs://dutchbook-sim-batch/jobs/job-0101/")
    assert found is not None and found.job_id == final.job_id and missing is None
    assert counts["batch.jobs_created.vertex"] == 1 and counts["batch.lines_run.vertex"] == 40


async def test_vertex_find_after_a_lost_create_reply(tmp_path: Path) -> None:
    faults = "batch_create_delay=1.0,batch_create_delay_s=2.0,batch_seconds=0.4"
    async with rig(gemini(), tmp_path, faults) as r:
        ref = await r.client.upload(r.fetch, "job-0103", [r.client.line(q) for q in prompts(5)])
        with pytest.raises(BatchError) as lost:
            await r.client.create(lost_reply(r.fetch, r.sim, "batch.jobs_created.vertex"),
                                  "job-0103", ref)
        found = await r.client.find(r.fetch, "job-0103")
        assert found is not None
        final = await wait_final(r.client, r.fetch, found.job_id)
        results = await r.client.results(r.fetch, final)
    assert lost.value.failure.outcome is Outcome.TIMEOUT
    assert final.status is JobStatus.DONE and len(results) == 5


@pytest.mark.parametrize(("fault", "status", "lines"), [
    ("batch_expire", JobStatus.EXPIRED, 10),
    ("batch_invalid", JobStatus.FAILED, 0),
])
async def test_vertex_job_faults(tmp_path: Path, fault: str, status: JobStatus,
                                 lines: int) -> None:
    async with rig(gemini(), tmp_path, f"{fault}=1.0,batch_seconds=0.4") as r:
        final, results = await run_job(r, "job-0104", prompts(20))
        counts = r.sim.counts()
    assert final.status is status and len(results) == lines
    assert counts[f"fault.{fault}"] == 1 and counts.get("batch.lines_run.vertex", 0) == lines


async def test_vertex_line_faults_are_classified_and_reconciled(tmp_path: Path) -> None:
    faults = ("batch_line_error=0.1,refusal=0.1,output_cap=0.1,server_error=0.05,"
              "rate_limit=0.05,missing_routing=0.05,batch_seconds=0.4")
    async with rig(gemini(), tmp_path, faults) as r:
        final, results = await run_job(r, "job-0105", prompts(300))
        counts = r.sim.counts()
    seen = Counter(x.result.outcome.value for x in results if isinstance(x.result, Failure))
    assert len(results) == 300 and final.status is JobStatus.DONE
    assert seen["provider_error"] == (counts["fault.batch_line_error"]
                                      + counts["fault.server_error"]) > 0
    assert seen["rate_limit"] == counts["fault.rate_limit"] > 0
    assert seen["refusal"] == counts["fault.refusal"] > 0
    assert seen["truncated"] == counts["fault.output_cap"] > 0
    assert "missing_routing_metadata" not in seen
    assert sum(isinstance(x.result, Completion) for x in results) == counts["answered.vertex"]


def test_vertex_open_models_have_no_batch_here(tmp_path: Path) -> None:
    from providers.types import ConfigError

    env = {"GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "us-central1", "TOKEN": "t"}
    config = gemini(model="meta/llama-4-maverick-17b-128e-instruct-maas", api_key_env="TOKEN",
                    batch_bucket="gs://bucket/p")
    with pytest.raises(ConfigError, match="Gemini models only"):
        batch_client_for(config, env)


@pytest.mark.parametrize("config", [model(), gemini()], ids=["bedrock", "vertex"])
async def test_an_upload_no_job_claimed_shows_in_the_gauge(tmp_path: Path,
                                                           config: ModelConfig) -> None:
    """A crash between upload and create leaves an input no job holds: the simulator counts
    it, and a create after the resume (same key: same object) claims it."""
    async with rig(config, tmp_path) as r:
        lines = [r.client.line(q) for q in prompts(N)]
        ref = await r.client.upload(r.fetch, "job-0201", lines)
        stranded = r.sim.counts()["batch.input_files_without_batch"]
        ref = await r.client.upload(r.fetch, "job-0201", lines)  # the resumed run
        await r.client.create(r.fetch, "job-0201", ref)
        after = r.sim.counts()["batch.input_files_without_batch"]
    assert (stranded, after) == (1, 0)


async def test_a_throttled_control_call_is_a_rate_limit_with_its_wait() -> None:
    """A control-plane 429 raises BatchError(rate_limit) with Retry-After, in AWS's words."""
    from providers.batch_cloud import send

    async def fetch(http: HttpRequest) -> tuple[int, dict[str, str], bytes]:
        return 429, {"x-amzn-ErrorType": "ThrottlingException:http://x", "Retry-After": "3"}, \
            b'{"message": "Rate exceeded"}'

    from providers.bedrock import ERROR_CODES, error_code

    with pytest.raises(BatchError) as raised:
        await send(fetch, HttpRequest("GET", "http://x/y", {}, b""), "poll batch job", (),
                   codes=ERROR_CODES, code_of=lambda h, b: error_code(h, orjson.loads(b)))
    failure = raised.value.failure
    assert failure.outcome is Outcome.RATE_LIMIT and failure.retry_after_s == 3.0
    assert failure.detail.startswith("poll batch job: HTTP 429 ThrottlingException")


def test_bedrock_batch_refuses_an_api_key_alone(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from providers.types import ConfigError

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws files to fall back on
    env = {"AWS_BEARER_TOKEN_BEDROCK": "ABSKsecret", "AWS_REGION": "us-east-1",
           "HOME": str(tmp_path)}
    config = model(batch_bucket="s3://bucket/p", batch_role_arn="arn:aws:iam::1:role/r")
    with pytest.raises(ConfigError, match="cannot sign") as refused:
        batch_client_for(config, env)
    assert "ABSKsecret" not in str(refused.value)


async def test_vertex_token_refused_is_an_auth_error(tmp_path: Path) -> None:
    async with rig(gemini(), tmp_path) as r:
        env = {**r.env, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "other.json")}
        other = r.sim.state.credentials.service_account_info(f"{r.sim.root_url}/oauth2/token")
        other["client_email"] = "intruder@sim-project.iam.gserviceaccount.com"
        (tmp_path / "other.json").write_text(orjson.dumps(other).decode())
        client = batch_client_for(r.config, env)
        with pytest.raises(BatchError) as refused:
            await client.upload(r.fetch, "job-0301", [client.line(q) for q in prompts(1)])
    assert refused.value.failure.outcome is Outcome.AUTH_ERROR
    assert "upload batch input" in refused.value.failure.detail


async def test_a_providers_own_host_as_base_url_keeps_storage_and_control_their_own() -> None:
    """A referee: with `base_url` set to a Vertex multi-region host or a Bedrock FIPS runtime
    host (both in providers-reference), batch uploads went to the Vertex host's
    `/upload/storage/...` and to `<bedrock-runtime host>/s3/<bucket>`, and Bedrock's jobs to
    the runtime host, as if it were the simulator's root. Nothing is sent: a recording fetch."""
    calls: list[tuple[str, str]] = []

    async def fetch(http: HttpRequest) -> tuple[int, Mapping[str, str], bytes]:
        calls.append((http.method, http.url))
        if "model-invocation-job" in http.url:
            arn = "arn:aws:bedrock:us-east-1:1:model-invocation-job/abc"
            return 200, {}, orjson.dumps({"jobArn": arn, "status": "Submitted"})
        name = "projects/p/locations/us/batchPredictionJobs/1"
        return 200, {}, orjson.dumps({"name": name, "state": "JOB_STATE_QUEUED"})

    vertex = batch_client_for(
        gemini(project="p", location="us", base_url="https://aiplatform.us.rep.googleapis.com",
               batch_bucket="gs://my-bucket/runs", api_key_env="VTOK"),
        {"VTOK": "ya29.x0123456789abcdef"},
    )
    await vertex.create(fetch, "job-1", await vertex.upload(fetch, "job-1", [b"{}"]))
    bedrock = BedrockBatchClient(
        model(region="us-east-1", base_url="https://bedrock-runtime-fips.us-east-1.amazonaws.com",
              batch_bucket="s3://my-bucket/runs", batch_role_arn="arn:aws:iam::1:role/r"),
        {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "HOME": "/x"},
    )
    await bedrock.create(fetch, "job-1", await bedrock.upload(fetch, "job-1", [b"{}"]))
    hosts = [(method, str(yarl.URL(url).host)) for method, url in calls]
    assert hosts == [
        ("POST", "storage.googleapis.com"),
        ("POST", "aiplatform.us.rep.googleapis.com"),
        ("PUT", "my-bucket.s3.us-east-1.amazonaws.com"),
        ("POST", "bedrock-fips.us-east-1.amazonaws.com"),
        ("GET", "bedrock-fips.us-east-1.amazonaws.com"),  # the job just made, read back
    ], calls


async def test_unreadable_records_are_returned_not_dropped(tmp_path: Path) -> None:
    """A torn record, one that is not an object, and one naming no request of ours come back
    as `UNREADABLE` lines (the engine says a job's results were damaged); a blank line is no
    line, and a record of ours for a request the job never sent keeps its id (the engine's
    to count)."""
    env = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_REGION": "us-east-1"}
    bedrock = BedrockBatchClient(
        model(batch_bucket="s3://bucket/p", batch_role_arn="arn:aws:iam::123456789012:role/r"),
        env)
    error = {"errorCode": 500, "errorMessage": "boom"}
    records = [{"recordId": record_key("r1"), "error": error}, {"recordId": "No-Such", **error},
               {"modelOutput": {}}]
    body = b"\n".join([*map(orjson.dumps, records), b"", b'{"recordId": "r2", "err', b"[1]"])
    async with rig(gemini(), tmp_path) as r:
        assert isinstance(r.client, VertexBatchClient)
        lines = [{"request": {"labels": {LABEL: record_key("r1")}}, "status": "INTERNAL: x"},
                 {"request": {"labels": {}}, "status": "INTERNAL: x"}]
        vertex = r.client._lines("jobs/1", b"\n".join(map(orjson.dumps, lines)) + b"\n{torn\n")
    got = bedrock._lines("job-1", body)
    assert [x.request_id for x in got] == ["r1", UNREADABLE, UNREADABLE, UNREADABLE, UNREADABLE]
    assert [x.request_id for x in vertex] == ["r1", UNREADABLE, UNREADABLE]
    torn = got[3].result
    assert isinstance(torn, Failure) and torn.detail.startswith('unreadable result line: {"rec')


def _listing_a_gone_object(fetch: Fetch, name: str) -> Fetch:
    """`fetch`, but a listing of result objects names one more, `name` under its prefix,
    first: an object deleted (or lost by a proxy) between the listing and its read, which
    the simulator answers 404 for."""

    async def listing(http: HttpRequest) -> tuple[int, Mapping[str, str], bytes] | Failure:
        reply = await fetch(http)
        query = parse_qs(urlsplit(http.url).query)
        if isinstance(reply, Failure) or http.method != "GET" or "prefix" not in query:
            return reply
        status, headers, body = reply
        key = query["prefix"][0] + name
        if body.lstrip().startswith(b"<"):  # S3's ListObjectsV2
            body = body.replace(b"<Contents>", f"<Contents><Key>{key}</Key></Contents>"
                                .encode() + b"<Contents>", 1)
        else:  # Cloud Storage's objects list
            data = orjson.loads(body)
            data["items"] = [{"name": key}, *data.get("items", [])]
            body = orjson.dumps(data)
        return status, headers, body

    return listing


@pytest.mark.parametrize(("config", "name", "n"), [
    (model(), "gone.jsonl.out", N), (gemini(), "predictions_gone.jsonl", 20),
])  # fmt: skip
async def test_a_result_object_gone_keeps_the_lines_of_the_others(
    tmp_path: Path, config: ModelConfig, name: str, n: int
) -> None:
    """A job's results several objects under one prefix, one answering 404: the lines of the
    objects read were discarded with it, and the lane took the whole output for gone (every
    line charged as damage and bought again). The 404 is raised once every other object is
    read, carrying their lines (`BatchError.read`), for the lane to judge."""
    async with rig(config, tmp_path) as r:
        requests = prompts(n)
        ref = await r.client.upload(r.fetch, "job-0201", [r.client.line(q) for q in requests])
        created = await r.client.create(r.fetch, "job-0201", ref)
        final = await wait_final(r.client, r.fetch, created.job_id)
        with pytest.raises(BatchError) as raised:
            await r.client.results(_listing_a_gone_object(r.fetch, name), final)
    assert raised.value.failure.http_status == 404
    assert sorted(x.request_id for x in raised.value.read) == sorted(
        q.request_id for q in requests)
