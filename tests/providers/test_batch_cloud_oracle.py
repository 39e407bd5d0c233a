"""botocore as the oracle of the simulator's S3 and Bedrock batch wire: AWS's own `s3` and
`bedrock` clients (endpoint_url at the simulator, the simulated keys) put, list and get
objects and create, get and list model invocation jobs, which they would refuse to parse if
the simulator spoke anything but the real shapes; and the requests our client sends are
validated against botocore's `bedrock` service model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import orjson
import pytest
from botocore.config import Config
from botocore.validate import ParamValidator

from providers.batch_bedrock import BedrockBatchClient
from providers.sim.credentials import DEFAULT_CREDENTIALS
from providers.sim.rehearse import rehearse_model
from providers.sim.server import SimHandle, start_sim
from providers.types import ChatRequest, HttpRequest, ModelConfig

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
ROLE = "arn:aws:iam::123456789012:role/batch"


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    handle = asyncio.run(start_sim(faults="batch_seconds=0.2"))
    yield handle
    asyncio.run(handle.stop())


def aws_client(service: str, endpoint: str) -> Any:
    session = botocore.session.Session()
    return session.create_client(
        service, region_name="us-east-1", endpoint_url=endpoint,
        aws_access_key_id=DEFAULT_CREDENTIALS.aws_access_key_id,
        aws_secret_access_key=DEFAULT_CREDENTIALS.aws_secret_access_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def records(n: int) -> bytes:
    body = {"messages": [{"role": "user", "content": [{"text": "P(up)? Reply {\"p\": x}"}]}],
            "inferenceConfig": {"maxTokens": 256}}
    return b"".join(orjson.dumps({"recordId": f"r{i:05d}", "modelInput": body}) + b"\n"
                    for i in range(n))


def test_botocore_s3_puts_lists_and_gets_objects(sim: SimHandle) -> None:
    s3 = aws_client("s3", f"{sim.root_url}/bedrock/s3")
    s3.put_object(Bucket="oracle-bucket", Key="in/a b+c.jsonl", Body=b"one\n")
    s3.put_object(Bucket="oracle-bucket", Key="in/two.jsonl", Body=b"two\n")
    s3.put_object(Bucket="oracle-bucket", Key="other/x", Body=b"x")
    listed = s3.list_objects_v2(Bucket="oracle-bucket", Prefix="in/")
    assert [o["Key"] for o in listed["Contents"]] == ["in/a b+c.jsonl", "in/two.jsonl"]
    assert listed["KeyCount"] == 2 and listed["IsTruncated"] is False
    page = s3.list_objects_v2(Bucket="oracle-bucket", Prefix="in/", MaxKeys=1)
    rest = s3.list_objects_v2(Bucket="oracle-bucket", Prefix="in/",
                              ContinuationToken=page["NextContinuationToken"])
    assert [o["Key"] for o in page["Contents"] + rest["Contents"]] == [
        o["Key"] for o in listed["Contents"]]
    assert s3.get_object(Bucket="oracle-bucket", Key="in/a b+c.jsonl")["Body"].read() == b"one\n"
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket="oracle-bucket", Key="in/none")


def test_botocore_bedrock_creates_gets_and_lists_a_job(sim: SimHandle) -> None:
    s3 = aws_client("s3", f"{sim.root_url}/bedrock/s3")
    s3.put_object(Bucket="oracle-bucket", Key="in/job.jsonl", Body=records(100))
    bedrock = aws_client("bedrock", f"{sim.root_url}/bedrock")
    created = bedrock.create_model_invocation_job(
        jobName="oracle-job", roleArn=ROLE, modelId=MODEL, modelInvocationType="Converse",
        clientRequestToken="oracle-token",
        inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://oracle-bucket/in/job.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://oracle-bucket/out/"}})
    arn = created["jobArn"]
    again = bedrock.create_model_invocation_job(
        jobName="oracle-job", roleArn=ROLE, modelId=MODEL, clientRequestToken="oracle-token",
        inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://oracle-bucket/in/job.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://oracle-bucket/out/"}})
    assert again["jobArn"] == arn
    asyncio.run(asyncio.sleep(0.3))
    job = bedrock.get_model_invocation_job(jobIdentifier=arn)
    assert job["status"] == "Completed" and job["jobName"] == "oracle-job"
    assert job["successRecordCount"] == 100 and job["submitTime"].year >= 2026
    listed = bedrock.list_model_invocation_jobs(nameContains="oracle")
    assert [j["jobArn"] for j in listed["invocationJobSummaries"]] == [arn]
    out = s3.list_objects_v2(Bucket="oracle-bucket", Prefix="out/")
    job_id = arn.rsplit("/", 1)[-1]
    assert sorted(o["Key"] for o in out["Contents"]) == [
        f"out/{job_id}/job.jsonl.out", f"out/{job_id}/manifest.json.out"]
    with pytest.raises(bedrock.exceptions.ValidationException):
        bedrock.create_model_invocation_job(
            jobName="bad", roleArn=ROLE, modelId=MODEL, timeoutDurationInHours=200,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://oracle-bucket/in/job.jsonl"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://oracle-bucket/out/"}})


def test_our_create_request_fits_the_service_model(tmp_path: Path) -> None:
    """The body our client sends is a valid CreateModelInvocationJob input for botocore."""
    sent: list[HttpRequest] = []

    async def fetch(http: HttpRequest) -> tuple[int, dict[str, str], bytes]:
        sent.append(http)
        arn = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abcdefghijkl"
        return 200, {}, orjson.dumps({
            "jobArn": arn, "status": "Submitted", "modelId": MODEL, "roleArn": ROLE,
            "submitTime": "2026-01-01T00:00:00Z", "inputDataConfig": {}, "outputDataConfig": {}})

    config = ModelConfig("c", "bedrock", MODEL, batch_bucket="s3://b-bucket/runs/x",
                         batch_role_arn=ROLE, max_tokens=64)
    rehearsed, env = rehearse_model(config, "http://127.0.0.1:9", tmp_path)
    client = BedrockBatchClient(rehearsed, env)
    asyncio.run(client.create(fetch, "job-7", "s3://b-bucket/runs/x/job-7/input/job-7.jsonl"))
    model = botocore.session.Session().get_service_model("bedrock")
    shape = model.operation_model("CreateModelInvocationJob").input_shape
    report = ParamValidator().validate(orjson.loads(sent[0].body), shape)
    assert not report.has_errors(), report.generate_report()
    assert sent[0].url.endswith("/model-invocation-job") and sent[0].method == "POST"
    line = orjson.loads(client.line(ChatRequest("ab12", "s", "u")))
    converse = botocore.session.Session().get_service_model("bedrock-runtime")
    converse_in = converse.operation_model("Converse").input_shape
    report = ParamValidator().validate({"modelId": MODEL, **line["modelInput"]}, converse_in)
    assert not report.has_errors(), report.generate_report()


# ---- Google: google-cloud-storage and google-genai as the oracles of the GCS and Vertex side --


def google_token(sim: SimHandle, tmp_path: Path) -> str:
    """An access token from the simulator's OAuth endpoint for its service account."""
    from providers.google_auth_tokens import TokenCache, load_credentials

    _, env = rehearse_model(ModelConfig("g", "vertex", "gemini-3.5-flash"), sim.root_url,
                            tmp_path)
    credentials, _ = load_credentials(env, "g")
    return TokenCache(credentials).token()


def test_google_cloud_storage_uploads_lists_and_downloads(sim: SimHandle,
                                                          tmp_path: Path) -> None:
    # A test extra since issue 13: a checkout whose venv predates it skips, `make install` runs it.
    storage = pytest.importorskip("google.cloud.storage")
    from google.oauth2.credentials import Credentials

    client = storage.Client(project="sim-project",
                            credentials=Credentials(token=google_token(sim, tmp_path)),  # type: ignore[no-untyped-call]
                            client_options={"api_endpoint": f"{sim.root_url}/vertex"})
    bucket = client.bucket("oracle-bucket")
    bucket.blob("in/a b.jsonl").upload_from_string(b'{"x": 1}\n')  # multipart upload
    bucket.blob("in/b.jsonl").upload_from_string(b"two\n")
    bucket.blob("other/c").upload_from_string(b"c")
    assert [b.name for b in client.list_blobs("oracle-bucket", prefix="in/")] == [
        "in/a b.jsonl", "in/b.jsonl"]
    assert bucket.blob("in/a b.jsonl").download_as_bytes() == b'{"x": 1}\n'
    from google.api_core.exceptions import NotFound

    with pytest.raises(NotFound):
        bucket.blob("in/none").download_as_bytes()


def test_google_genai_creates_gets_and_lists_a_vertex_batch_job(sim: SimHandle,
                                                                tmp_path: Path) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import types
    from google.oauth2.credentials import Credentials

    request = {"contents": [{"role": "user", "parts": [{"text": 'P(up)? {"p": x}'}]}]}
    sim.state.store.put("oracle-bucket", "in/job.jsonl",
                        orjson.dumps({"request": request}) + b"\n" + orjson.dumps(
                            {"request": request}) + b"\n")
    client = genai.Client(
        vertexai=True, project="sim-project", location="us-central1",
        credentials=Credentials(token=google_token(sim, tmp_path)),  # type: ignore[no-untyped-call]
        http_options=types.HttpOptions(base_url=f"{sim.root_url}/vertex/", api_version="v1"))
    job = client.batches.create(
        model="gemini-3.5-flash", src="gs://oracle-bucket/in/job.jsonl",
        config=types.CreateBatchJobConfig(dest="gs://oracle-bucket/out",
                                          display_name="oracle-job"))
    assert job.name is not None and job.state == types.JobState.JOB_STATE_PENDING
    asyncio.run(asyncio.sleep(0.3))
    done = client.batches.get(name=job.name)
    assert done.state == types.JobState.JOB_STATE_SUCCEEDED
    assert done.completion_stats is not None and done.completion_stats.successful_count == 2
    listed = client.batches.list(config=types.ListBatchJobsConfig(
        filter='display_name="oracle-job"'))
    assert [j.name for j in listed] == [job.name]
    out = [k for k in sim.state.store.keys("oracle-bucket", "out/")]
    assert len(out) == 1 and out[0].endswith("/predictions.jsonl")
    predictions = sim.state.store.get("oracle-bucket", out[0])
    assert predictions is not None
    lines = [orjson.loads(x) for x in predictions.splitlines()]
    assert [set(x) for x in lines] == [{"request", "response", "status"}] * 2
