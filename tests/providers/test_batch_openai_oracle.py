"""Oracle: the official `openai` client drives the simulator's files and batches endpoints for
each OpenAI-shaped provider (its response models must parse every object the simulator
returns), and our batch client's control-plane requests match the `openai` client's.

The first shows the simulator speaks the real wire format; the second that our client speaks
the same one, so our client passing against the simulator means something for the real APIs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from aiohttp import web
from openai.types import Batch, FileObject
from openai.types.chat import ChatCompletion

from providers.batch import JobStatus
from providers.batch_openai import METADATA_KEY, OpenAIBatchClient
from providers.batch_registry import batch_client_for
from providers.sim.credentials import DEFAULT_CREDENTIALS as CREDS
from providers.sim.rehearse import rehearse_model
from providers.sim.server import start_sim
from providers.types import ChatRequest, HttpRequest, ModelConfig

MODELS = {
    "groq": ModelConfig(name="g", provider="groq", model="openai/gpt-oss-120b", max_tokens=300),
    "deepinfra": ModelConfig(name="d", provider="deepinfra", model="Qwen/Qwen3-32B",
                             max_tokens=300),
    "azure": ModelConfig(name="a", provider="azure", model="luna", max_tokens=300,
                         api_version="2024-10-21"),
    "azure-v1": ModelConfig(name="a1", provider="azure", model="luna", max_tokens=300),
    "sim": ModelConfig(name="s", provider="sim", model="sim-noisy", max_tokens=300),
}
REQS = [ChatRequest(f"q{i}", "You forecast.", f"P(event {i})? JSON.", seed=i) for i in range(3)]
TERMINAL = {"completed", "failed", "expired", "cancelled"}


def official(name: str, root: str, base_url: str) -> openai.AsyncOpenAI:
    """The `openai` client as a user of each provider would configure it."""
    if name == "azure":
        return openai.AsyncAzureOpenAI(api_key=CREDS.azure_api_key, api_version="2024-10-21",
                                       azure_endpoint=root + "/azure", max_retries=0)
    keys = {"groq": CREDS.groq_api_key, "deepinfra": CREDS.deepinfra_api_key,
            "azure-v1": CREDS.azure_api_key, "sim": "unused"}
    base = base_url + "/openai/v1" if name == "azure-v1" else base_url
    return openai.AsyncOpenAI(api_key=keys[name], base_url=base, max_retries=0)


@pytest.mark.parametrize("name", list(MODELS))
async def test_the_openai_client_reads_every_simulated_batch_object(
    name: str, tmp_path: Path
) -> None:
    async with await start_sim(faults="batch_seconds=0.3") as sim:
        config, env = rehearse_model(MODELS[name], sim.root_url, tmp_path)
        ours = batch_client_for(config, env)
        assert isinstance(ours, OpenAIBatchClient)
        client = official(name, sim.root_url, config.base_url or "")
        content = b"".join(ours.line(r) + b"\n" for r in REQS)
        stored = await client.files.create(file=("job-o.jsonl", content), purpose="batch")
        assert isinstance(stored, FileObject) and stored.bytes == len(content)
        batch = await client.batches.create(
            input_file_id=stored.id, endpoint=ours.routes.endpoint,  # type: ignore[arg-type]
            completion_window="24h", metadata={METADATA_KEY: "job-o"})
        while batch.status not in TERMINAL:
            await asyncio.sleep(0.05)
            batch = await client.batches.retrieve(batch.id)
        listed = [b async for b in client.batches.list(limit=10)]
        output = await client.files.content(batch.output_file_id or "")
        await client.close()
    assert isinstance(batch, Batch) and batch.status == "completed"
    assert batch.request_counts is not None and batch.request_counts.completed == 3
    assert [b.id for b in listed] == [batch.id] and listed[0].metadata == {METADATA_KEY: "job-o"}
    lines = [orjson.loads(line) for line in output.content.splitlines()]
    assert sorted(line["custom_id"] for line in lines) == ["q0", "q1", "q2"]
    for line in lines:
        assert line["response"]["status_code"] == 200 and line["error"] is None
        ChatCompletion.model_validate(line["response"]["body"])


class Recorder:
    """A server on 127.0.0.1 answering as the API would, keeping each request."""

    BATCH: Mapping[str, Any] = {
        "id": "batch_1", "object": "batch", "endpoint": "/v1/chat/completions",
        "input_file_id": "file-1", "completion_window": "24h", "status": "validating",
        "created_at": 1, "metadata": {METADATA_KEY: "job-r"}}
    FILE: Mapping[str, Any] = {"id": "file-1", "object": "file", "bytes": 1, "created_at": 1,
                               "filename": "job-r.jsonl", "purpose": "batch",
                               "status": "processed"}

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.root_url = ""

    async def handle(self, request: web.Request) -> web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.seen.append((request.method, request.path, headers, await request.read()))
        if request.method == "GET":
            return web.json_response({"object": "list", "data": [], "has_more": False})
        return web.json_response(self.FILE if request.path.endswith("/files") else self.BATCH)


@contextlib.asynccontextmanager
async def recording() -> AsyncIterator[Recorder]:
    recorder = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    recorder.root_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield recorder
    finally:
        await runner.cleanup()


async def aiohttp_fetch(session: aiohttp.ClientSession, req: HttpRequest
                        ) -> tuple[int, Mapping[str, str], bytes]:
    async with session.request(req.method, req.url, headers=dict(req.headers),
                               data=req.body or None) as r:
        return r.status, dict(r.headers), await r.read()


def form_fields(headers: Mapping[str, str], body: bytes) -> dict[str, bytes]:
    """Parts of a multipart/form-data body by name (file parts keyed name:filename)."""
    boundary = headers["content-type"].split("boundary=")[1].strip('"').encode()
    out: dict[str, bytes] = {}
    for part in body.split(b"--" + boundary)[1:-1]:
        head, _, value = part.strip(b"\r\n").partition(b"\r\n\r\n")
        disposition = head.split(b"\r\n")[0].decode()
        name = disposition.split('name="')[1].split('"')[0]
        if 'filename="' in disposition:
            name += ":" + disposition.split('filename="')[1].split('"')[0]
        out[name] = value
    return out


@pytest.mark.parametrize("provider", ["groq", "azure"])
async def test_our_requests_match_the_openai_clients(provider: str) -> None:
    async with recording() as recorder, aiohttp.ClientSession() as session:
        base = recorder.root_url + "/openai/v1"
        config = ModelConfig(name="g", provider=provider, model="openai/gpt-oss-120b",
                             base_url=base)
        key = CREDS.groq_api_key
        ours = batch_client_for(config, {"GROQ_API_KEY": key, "AZURE_OPENAI_API_KEY": key})
        client = openai.AsyncOpenAI(
            api_key=key, base_url=base, max_retries=0,
            default_headers={"api-key": key} if provider == "azure" else None)
        line = ours.line(REQS[0])
        expiry: Any = ({"anchor": "created_at", "seconds": 1209600} if provider == "azure"
                       else openai.omit)
        await client.files.create(file=("job-r.jsonl", line + b"\n"), purpose="batch",
                                  expires_after=expiry)
        await client.batches.create(input_file_id="file-1", endpoint="/v1/chat/completions",
                                    completion_window="24h", metadata={METADATA_KEY: "job-r"})
        await client.close()

        async def fetch(req: HttpRequest) -> tuple[int, Mapping[str, str], bytes]:
            return await aiohttp_fetch(session, req)

        await ours.upload(fetch, "job-r", [line])
        await ours.create(fetch, "job-r", "file-1")
    (t_up, t_up_path, t_up_h, t_up_body), (t_cr, t_cr_path, _, t_cr_body) = recorder.seen[:2]
    mine = [s for s in recorder.seen[2:] if s[0] == "POST"]
    (o_up, o_up_path, o_up_h, o_up_body), (o_cr, o_cr_path, o_cr_h, o_cr_body) = mine
    assert (o_up, o_up_path) == (t_up, t_up_path) == ("POST", "/openai/v1/files")
    assert form_fields(o_up_h, o_up_body) == form_fields(t_up_h, t_up_body)
    assert (o_cr, o_cr_path) == (t_cr, t_cr_path) == ("POST", "/openai/v1/batches")
    assert orjson.loads(o_cr_body) == orjson.loads(t_cr_body)
    auth = "api-key" if provider == "azure" else "authorization"
    assert o_up_h[auth] == t_up_h[auth] == o_cr_h[auth]


async def test_our_client_reads_a_job_the_openai_client_created(tmp_path: Path) -> None:
    async with await start_sim(faults="batch_seconds=0.2") as sim:
        config, env = rehearse_model(MODELS["groq"], sim.root_url, tmp_path)
        ours = batch_client_for(config, env)
        client = official("groq", sim.root_url, config.base_url or "")
        content = b"".join(ours.line(r) + b"\n" for r in REQS)
        stored = await client.files.create(file=("job-z.jsonl", content), purpose="batch")
        await client.batches.create(input_file_id=stored.id, endpoint="/v1/chat/completions",
                                    completion_window="24h", metadata={METADATA_KEY: "job-z"})
        await client.close()
        await asyncio.sleep(0.3)
        async with aiohttp.ClientSession() as http:
            async def fetch(req: HttpRequest) -> tuple[int, Mapping[str, str], bytes]:
                return await aiohttp_fetch(http, req)

            assert await ours.upload(fetch, "job-z", [ours.line(r) for r in REQS]) == stored.id
            state = await ours.find(fetch, "job-z")
            assert state is not None and state.status is JobStatus.DONE
            results = await ours.results(fetch, state)
    assert sorted(r.request_id for r in results) == ["q0", "q1", "q2"]


async def test_a_cancelled_job_returns_what_it_ran_and_leaves_out_the_rest(
    tmp_path: Path
) -> None:
    async with await start_sim(faults="batch_seconds=30") as sim:
        config, env = rehearse_model(MODELS["deepinfra"], sim.root_url, tmp_path)
        ours = batch_client_for(config, env)
        client = official("deepinfra", sim.root_url, config.base_url or "")
        content = b"".join(ours.line(r) + b"\n" for r in REQS)
        stored = await client.files.create(file=("job-c.jsonl", content), purpose="batch")
        batch = await client.batches.create(
            input_file_id=stored.id, endpoint="/v1/chat/completions", completion_window="24h",
            metadata={METADATA_KEY: "job-c"})
        cancelled = await client.batches.cancel(batch.id)
        errors = await client.files.content(cancelled.error_file_id or "")
        await client.close()
        async with aiohttp.ClientSession() as http:
            async def fetch(req: HttpRequest) -> tuple[int, Mapping[str, str], bytes]:
                return await aiohttp_fetch(http, req)

            state = await ours.poll(fetch, batch.id)
            results = await ours.results(fetch, state)
        counts = sim.counts()
    assert cancelled.status == "cancelled" and state.status is JobStatus.CANCELLED
    codes = [orjson.loads(line)["error"]["code"] for line in errors.content.splitlines()]
    assert codes == ["batch_cancelled"] * 3
    assert results == [] and counts["batch.lines_unrun"] == 3
