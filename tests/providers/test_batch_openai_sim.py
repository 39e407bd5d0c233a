"""End to end: each OpenAI-shaped provider's batch client against the simulator over real HTTP
(upload, create, poll, results, find after a lost create reply), every batch fault observed
and reconciled with the simulator's counts.

Compressed time: a job lives `batch_seconds` (0.3 s here). A batch answer is compared with
the live answer to the same request: the simulator's forecasters are deterministic, so equal
texts show the batch line went through the same body and the same pipeline.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import orjson
import pytest

from providers.batch import FINAL, BatchClient, BatchError, JobState, JobStatus, LineResult
from providers.batch_registry import batch_client_for
from providers.registry import adapter_for
from providers.sim.faults import INTENDED_OUTCOME, LINE_KINDS, expected_failures
from providers.sim.rehearse import rehearse_model
from providers.sim.server import COUNTS_PATH, SimHandle, start_sim
from providers.types import ChatRequest, Completion, Failure, HttpRequest, ModelConfig, Outcome

QUICK = "batch_seconds=0.3"
MODELS = {
    "sim": ModelConfig(name="s", provider="sim", model="sim-noisy", max_tokens=400),
    "openai": ModelConfig(name="o", provider="openai", model="gpt-oss-120b", max_tokens=400),
    "groq": ModelConfig(name="g", provider="groq", model="openai/gpt-oss-120b", max_tokens=400,
                        seed=3, json_mode=True),
    "deepinfra": ModelConfig(name="d", provider="deepinfra", model="Qwen/Qwen3-32B",
                             max_tokens=400),
    "azure": ModelConfig(name="a", provider="azure", model="luna", max_tokens=400,
                         api_version="2024-10-21"),
    "azure-v1": ModelConfig(name="a1", provider="azure", model="luna", max_tokens=400),
}


def requests(n: int) -> list[ChatRequest]:
    return [ChatRequest(f"q{i}", "You are a careful forecaster.",
                        f'Probability that event {i} happens? Reply as {{"probability": p}}.',
                        seed=i) for i in range(n)]


class Wire:
    """The engine's side of the contract: an aiohttp `Fetch`, with a timeout."""

    def __init__(self, session: aiohttp.ClientSession, timeout_s: float = 10.0) -> None:
        self.session = session
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def __call__(self, req: HttpRequest) -> tuple[int, Mapping[str, str], bytes] | Failure:
        try:
            async with self.session.request(req.method, req.url, headers=dict(req.headers),
                                            data=req.body or None, timeout=self.timeout) as r:
                return r.status, dict(r.headers), await r.read()
        except TimeoutError:
            return Failure(Outcome.TIMEOUT, f"{req.method} timed out")


class LostReply:
    """A `Fetch` whose reply to the create (the POST) is lost: it gives up (a client timeout)
    once the simulator has created the job, waited for, not after a fixed 0.2 s that a
    loaded machine could spend before the request even reached the simulator."""

    def __init__(self, wire: Wire, sim: SimHandle, counter: str) -> None:
        self.wire, self.sim, self.counter = wire, sim, counter

    async def __call__(self, req: HttpRequest) -> tuple[int, Mapping[str, str], bytes] | Failure:
        if req.method != "POST":  # the client looks for the job first: that reply arrives
            return await self.wire(req)
        sending = asyncio.create_task(self.wire(req))
        async with asyncio.timeout(20):
            while not self.sim.counts().get(self.counter, 0):
                await asyncio.sleep(0.01)
        assert not sending.done(), "the reply came before the client gave up"
        sending.cancel()
        return Failure(Outcome.TIMEOUT, f"{req.method} timed out")


async def setup(sim: SimHandle, name: str, tmp: Path) -> tuple[BatchClient, ModelConfig,
                                                                  dict[str, str]]:
    config, env = rehearse_model(MODELS[name], sim.root_url, tmp)
    return batch_client_for(config, env), config, env


async def run_job(client: BatchClient, fetch: Wire, key: str,
                  reqs: list[ChatRequest]) -> tuple[JobState, list[LineResult]]:
    file_id = await client.upload(fetch, key, [client.line(r) for r in reqs])
    state = await client.create(fetch, key, file_id)
    while state.status not in FINAL:
        await asyncio.sleep(0.05)
        state = await client.poll(fetch, state.job_id)
    return state, list(await client.results(fetch, state))


async def faulted_job(faults: str, name: str, n: int, tmp: Path, seed: int = 0
                      ) -> tuple[JobState, list[LineResult], dict[str, int]]:
    """One job of `n` lines through a simulator injecting `faults`, and its counts."""
    async with await start_sim(faults=f"{QUICK},{faults}", seed=seed) as sim, \
            aiohttp.ClientSession() as session:
        client, _, _ = await setup(sim, name, tmp)
        state, results = await run_job(client, Wire(session), "job", requests(n))
        return state, results, sim.counts()


@pytest.mark.parametrize("name", list(MODELS))
async def test_a_job_answers_every_line_as_live_would(name: str, tmp_path: Path) -> None:
    reqs = requests(4)
    async with await start_sim(faults=QUICK) as sim, aiohttp.ClientSession() as session:
        client, config, env = await setup(sim, name, tmp_path)
        fetch = Wire(session)
        state, results = await run_job(client, fetch, "job-a", reqs)
        assert state.status is JobStatus.DONE and state.provider_status == "completed"
        assert (state.total, state.completed, state.failed) == (4, 4, 0)
        live = adapter_for(config, env)
        for req, line in zip(reqs, sorted(results, key=lambda r: r.request_id), strict=True):
            assert line.request_id == req.request_id and isinstance(line.result, Completion)
            built = live.build(req)
            reply = await fetch(built)
            assert not isinstance(reply, Failure)
            same = live.parse(*reply)
            assert isinstance(same, Completion) and line.result.text == same.text
            assert line.result.tokens_in == same.tokens_in and line.result.provider_request_id
        counts = sim.counts()
    provider = config.provider
    assert counts[f"batch.jobs_created.{provider}"] == 1 and counts["batch.jobs.completed"] == 1
    assert counts[f"batch.lines_run.{provider}"] == 4
    assert counts["batch.input_files_without_batch"] == 0


async def test_a_lost_create_reply_is_found_and_nothing_runs_twice(tmp_path: Path) -> None:
    faults = f"{QUICK},batch_create_delay=1.0,batch_create_delay_s=3.0"
    async with await start_sim(faults=faults) as sim, aiohttp.ClientSession() as session:
        client, _, _ = await setup(sim, "groq", tmp_path)
        lines = [client.line(r) for r in requests(3)]
        file_id = await client.upload(Wire(session), "job-k", lines)
        assert await client.upload(Wire(session), "job-k", lines) == file_id  # stored once
        live = await _counts(session, sim)
        assert live["batch.input_files_without_batch"] == 1  # the kill window is visible
        with pytest.raises(BatchError) as caught:  # the reply is lost (our side timed out)
            await client.create(LostReply(Wire(session), sim, "batch.jobs_created"), "job-k",
                                file_id)
        assert caught.value.failure.outcome is Outcome.TIMEOUT
        found = await client.find(Wire(session), "job-k")
        assert found is not None
        again = await client.create(Wire(session), "job-k", file_id)
        assert again.job_id == found.job_id
        assert await client.find(Wire(session), "job-other") is None
        counts = sim.counts()
    assert counts["batch.jobs_created"] == 1 and counts["batch.files_uploaded"] == 1
    assert counts["fault.batch_create_delay"] == 1
    assert counts["batch.input_files_without_batch"] == 0


async def test_a_job_that_fails_validation_returns_no_lines(tmp_path: Path) -> None:
    state, results, counts = await faulted_job("batch_invalid=1.0", "deepinfra", 3, tmp_path)
    assert state.status is JobStatus.FAILED and "batch_invalid" in state.detail
    assert results == [] and counts["fault.batch_invalid"] == 1
    assert counts["batch.jobs.failed"] == 1 and counts.get("batch.lines_run", 0) == 0


async def test_an_expired_job_returns_the_lines_it_reached(tmp_path: Path) -> None:
    state, results, counts = await faulted_job("batch_expire=1.0", "azure", 10, tmp_path)
    assert state.status is JobStatus.EXPIRED and state.error_ref is not None
    assert len(results) == 5 and all(isinstance(r.result, Completion) for r in results)
    assert counts["fault.batch_expire"] == 1 and counts["batch.lines_unrun"] == 5
    assert counts["batch.jobs.expired"] == 1 and counts["batch.lines_run"] == 5


async def test_error_lines_are_failures_of_their_request(tmp_path: Path) -> None:
    state, results, counts = await faulted_job("batch_line_error=1.0", "groq", 4, tmp_path)
    assert state.status is JobStatus.DONE and state.failed == 4 and state.output_ref is None
    assert {r.result.outcome for r in results if isinstance(r.result, Failure)} == {
        Outcome.PROVIDER_ERROR}
    assert len(results) == 4
    assert expected_failures(counts) == {"provider_error": 4}


@pytest.mark.parametrize("kind", LINE_KINDS, ids=lambda k: k.value)
async def test_live_faults_inside_result_lines_read_as_live(kind: object, tmp_path: Path) -> None:
    assert kind in INTENDED_OUTCOME
    _, results, counts = await faulted_job(f"{kind}=1.0", "sim", 2, tmp_path)
    outcomes = [r.result.outcome for r in results if isinstance(r.result, Failure)]
    assert outcomes == [INTENDED_OUTCOME[kind]] * 2  # type: ignore[index]
    assert counts[f"fault.{kind}"] == 2


async def test_a_mixed_profile_reconciles_with_the_counts(tmp_path: Path) -> None:
    faults = "batch_line_error=0.1,rate_limit=0.1,server_error=0.1,output_cap=0.1"
    _, results, counts = await faulted_job(faults, "sim", 60, tmp_path, seed=5)
    seen = Counter(r.result.outcome.value for r in results if isinstance(r.result, Failure))
    assert len(results) == 60 and sum(seen.values()) > 5
    assert dict(seen) == expected_failures(counts)


async def test_bad_credentials_are_refused_in_the_providers_words(tmp_path: Path) -> None:
    async with await start_sim(faults=QUICK) as sim, aiohttp.ClientSession() as session:
        config, _ = rehearse_model(MODELS["groq"], sim.root_url, tmp_path)
        client = batch_client_for(config, {"GROQ_API_KEY": "gsk_wrong_key_123456789"})
        with pytest.raises(BatchError) as caught:
            await client.upload(Wire(session), "job-x", [b"{}"])
        counts = sim.counts()
    assert caught.value.failure.outcome is Outcome.AUTH_ERROR
    assert "gsk_wrong_key" not in caught.value.failure.detail
    assert counts["auth_rejected"] == 1


async def _counts(session: aiohttp.ClientSession, sim: SimHandle) -> dict[str, int]:
    async with session.get(sim.root_url + COUNTS_PATH) as resp:
        data: dict[str, int] = orjson.loads(await resp.read())
        return data


@pytest.mark.parametrize(("kind", "outcome"), [("batch_control_rate_limit", Outcome.RATE_LIMIT),
                                               ("batch_control_error", Outcome.PROVIDER_ERROR)])
async def test_control_plane_faults_refuse_a_call_before_it_does_anything(
    kind: str, outcome: Outcome, tmp_path: Path
) -> None:
    async with await start_sim(faults=f"{QUICK},{kind}=1.0", retry_after_s=0.5) as sim, \
            aiohttp.ClientSession() as session:
        client, _, _ = await setup(sim, "groq", tmp_path)
        with pytest.raises(BatchError) as caught:
            await client.upload(Wire(session), "job-c", [client.line(requests(1)[0])])
        counts = sim.counts()
    assert caught.value.failure.outcome is outcome
    if outcome is Outcome.RATE_LIMIT:
        assert caught.value.failure.retry_after_s == 0.5
    assert counts[f"fault.{kind}"] == 1 and counts.get("batch.files_uploaded", 0) == 0
