"""A rehearsal across every real provider, then a scan of everything it left for secrets.

One model per provider, each speaking its own wire format to the simulator with the very
adapter a paid run would use (bearer keys, an Azure key, SigV4 with a session token, a
service-account JWT grant and the access tokens it yields). Every planned query must be
accepted, options a model rejects must be on record, and no credential value the rehearsal
used, nor real-looking keys sitting in the environment, may appear in any file of the run
folder (Parquet decoded to text), the console or the log stream.
"""

from __future__ import annotations

import io
import os
import signal
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from engine.scan import scan_attempts, scan_responses
from providers.sim.credentials import DEFAULT_CREDENTIALS
from providers.sim.oauth import TokenStore
from runs.pipeline import run_campaign

SPEC = """
name = "rehearse-all"
seed = 17

[data]
stock_days = 2

[[models]]
name = "groq-llama"
provider = "groq"
model = "llama-3.3-70b-versatile"
temperature = 0.7
max_tokens = 256

[[models]]
name = "deepinfra-llama"
provider = "deepinfra"
model = "meta-llama/Llama-3.3-70B-Instruct"
temperature = 0.7
max_tokens = 256

[[models]]
name = "azure-gpt5"
provider = "azure"
model = "gpt-5-mini"
deployment = "forecast-prod"
base_model = "gpt-5-mini"
temperature = 0.7
max_tokens = 2048

[[models]]
name = "bedrock-opus"
provider = "bedrock"
model = "us.anthropic.claude-opus-4-7-v1:0"
region = "us-west-2"
temperature = 0.7
max_tokens = 512

[[models]]
name = "vertex-gemini"
provider = "vertex"
model = "gemini-2.5-flash"
project = "sim-project"
location = "europe-west4"
temperature = 0.7
max_tokens = 1024

[[models]]
name = "vertex-maverick"
provider = "vertex"
model = "meta/llama-4-maverick-17b-128e-instruct-maas"
project = "sim-project"
location = "us-east5"
temperature = 0.7
max_tokens = 256

[[models]]
name = "gateway"
provider = "openai"
model = "my-gateway-model"
api_key_env = "MY_GATEWAY_KEY"
temperature = 0.7
max_tokens = 256

[[arms]]
name = "baseline"
"""

#: Real-looking keys in the environment: a rehearsal must neither use nor write them.
ENV_DECOYS = {
    "GROQ_API_KEY": "gsk_test_DECOYgroqKey8f3a9c2b7e1d4f6a0b5c",
    "DEEPINFRA_API_KEY": "DECOYdeepinfra_4b1e9f7a2c8d3e6f",
    "AZURE_OPENAI_API_KEY": "DECOYazure0f1e2d3c4b5a69788796a5b4",
    "AWS_ACCESS_KEY_ID": "AKIADECOY7EXAMPLE123",
    "AWS_SECRET_ACCESS_KEY": "DECOYwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE",
    "AWS_SESSION_TOKEN": "DECOYIQoJb3JpZ2luX2VjEXAMPLEsessiontoken",
    "AWS_BEARER_TOKEN_BEDROCK": "ABSKDECOYbedrockapikey000000000",
    "MY_GATEWAY_KEY": "sk-DECOY-gateway-2f9c4e1a7b3d8e6f",
}
SESSION_TOKEN = "FwoGZXIvYXdzSIMULATED//session+token/for/rehearsal0000"
MODELS = 7
PER_MODEL = 28  # baseline on two stock-days


def _credential_values(issued: list[str]) -> dict[str, str]:
    """Every secret the rehearsal used, by a name for the failure message."""
    creds = replace(DEFAULT_CREDENTIALS, aws_session_token=SESSION_TOKEN)
    values = {
        "groq key": creds.groq_api_key,
        "deepinfra key": creds.deepinfra_api_key,
        "azure key": creds.azure_api_key,
        "openai key": creds.openai_api_key,
        "aws access key id": creds.aws_access_key_id,
        "aws secret": creds.aws_secret_access_key,
        "aws session token": SESSION_TOKEN,
        "bedrock api key": creds.bedrock_api_key,
    }
    body = [line for line in creds.sa_private_key_pem.splitlines() if "PRIVATE KEY" not in line]
    values["service-account key body"] = "".join(body)
    for i, line in enumerate(body):
        values[f"service-account key line {i}"] = line
    for i, token in enumerate(issued):
        values[f"access token {i}"] = token
        values[f"access token {i} without prefix"] = token.removeprefix("ya29.")
    for name, value in ENV_DECOYS.items():
        values[f"env {name}"] = value
    return values


def _texts(run_dir: Path) -> dict[str, str]:
    """Every file of the run folder as text: Parquet decoded, everything else as read."""
    out: dict[str, str] = {}
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        out[str(path.relative_to(run_dir))] = raw.decode("utf-8", errors="replace")
        if path.suffix == ".parquet":
            decoded = pl.read_parquet(path).write_ndjson()
            out[f"{path.relative_to(run_dir)} (decoded)"] = decoded
    return out


@pytest.mark.figures
async def test_rehearsal_of_every_provider_accepts_all_and_leaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    for name, value in ENV_DECOYS.items():
        monkeypatch.setenv(name, value)
    issued: list[str] = []
    issue = TokenStore.issue

    def recording_issue(self: TokenStore) -> tuple[str, int]:
        token, ttl = issue(self)
        issued.append(token)
        return token, ttl

    monkeypatch.setattr(TokenStore, "issue", recording_issue)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    run_dir = tmp_path / "run"
    console_file = io.StringIO()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    result = await run_campaign(
        spec,
        run_dir,
        rehearse=True,
        console=Console(file=console_file, width=160, force_terminal=False),
        progress=True,
        sim_credentials=replace(DEFAULT_CREDENTIALS, aws_session_token=SESSION_TOKEN),
    )

    # the signal handlers of the caller are back in place
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    summary = result.summary
    assert not result.interrupted and summary.complete, summary.lines()
    responses = scan_responses(run_dir).collect()
    by_model = dict(responses.group_by("model").len().iter_rows())
    assert by_model == {name: PER_MODEL for name in by_model} and len(by_model) == MODELS
    assert responses["request_id"].n_unique() == MODELS * PER_MODEL
    attempts = scan_attempts(run_dir).collect()
    assert set(attempts["provider"]) == {
        "groq",
        "deepinfra",
        "azure",
        "bedrock",
        "vertex",
        "openai",
    }
    assert set(attempts["outcome"]) == {"ok"}, attempts.filter(pl.col("outcome") != "ok")

    def details(model: str) -> set[str]:
        return set(attempts.filter(pl.col("model") == model)["detail"])

    # options the model rejects were left out and that is on record for every attempt
    assert details("azure-gpt5") == {"omitted: temperature"}
    assert details("bedrock-opus") == {"omitted: temperature, seed"}
    assert details("groq-llama") == {""} and details("vertex-maverick") == {""}
    assert issued, "the Vertex lanes must have obtained tokens from the simulator"

    console_text = console_file.getvalue()
    captured = capfd.readouterr()
    streams = {
        "console": console_text,
        "stdout": captured.out,
        "stderr": captured.err,
    }
    assert "rehearse-all" in console_text  # the capture really saw the run
    texts = {**_texts(run_dir), **streams}
    assert any(name.endswith("(decoded)") for name in texts)
    assert "logs/engine.jsonl" in texts and any(k.startswith("report/") for k in texts)
    leaks = [
        f"{what} in {where}"
        for what, value in _credential_values(issued).items()
        for where, text in texts.items()
        if value in text
    ]
    assert leaks == []
    # and the simulator's service-account file stayed out of the run folder
    assert not any("service-account" in name for name in texts)
    assert os.environ["GROQ_API_KEY"] == ENV_DECOYS["GROQ_API_KEY"]
