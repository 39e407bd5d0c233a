"""Point a real model entry at the simulator, with credentials only the simulator accepts.

A rehearsal should exercise the very adapter a paid run will use (its URL building,
signing and token refresh) and differ only in where requests go and which secrets they
carry. So this rewrites nothing but the endpoint fields of the `ModelConfig` and returns a
private environment; it never touches `os.environ`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from providers.sim.credentials import DEFAULT_CREDENTIALS, SimCredentials
from providers.types import ConfigError, ModelConfig

#: Where each provider's adapter finds its paths under the simulator root.
BASE_PATHS: dict[str, str] = {
    "sim": "/sim/v1",
    "openai": "/openai/v1",
    "groq": "/groq/openai/v1",
    "deepinfra": "/deepinfra/v1/openai",
    "azure": "/azure",
    "bedrock": "/bedrock",
    "vertex": "/vertex",
}
DEFAULT_REGION = "us-east-1"
#: Where rehearsed Bedrock and Vertex batch jobs keep their files, unless the spec says.
SIM_BATCH_BUCKETS = {"bedrock": "s3://dutchbook-sim-batch/jobs",
                     "vertex": "gs://dutchbook-sim-batch/jobs"}
SIM_BATCH_ROLE = "arn:aws:iam::000000000000:role/dutchbook-sim-batch"
DEFAULT_LOCATION = "us-central1"


def _sim_model(config: ModelConfig) -> str:
    """Simulated models carry their personality in the id, which the server reads."""
    # Here, not at import: a run checks every model's options through `rehearse_model`
    # (`runs.model_options`), and the forecasters cost a paid campaign's start 18 ms.
    from providers.sim.forecasters import PERSONALITIES, named_personality, personality_model

    personality = config.extra.get("personality")
    if personality is None or named_personality(config.model) is not None:
        return config.model
    if personality not in PERSONALITIES:
        raise ConfigError(
            f"model {config.name!r}: unknown personality {personality!r};"
            f" known: {', '.join(PERSONALITIES)}"
        )
    return personality_model(personality)


def rehearse_model(
    config: ModelConfig,
    root_url: str,
    workdir: Path | str,
    credentials: SimCredentials = DEFAULT_CREDENTIALS,
) -> tuple[ModelConfig, dict[str, str]]:
    """The model entry pointed at the simulator at `root_url`, and the env its adapter needs.

    `workdir` receives the simulated service-account file for Vertex models.
    """
    provider = config.provider
    if provider not in BASE_PATHS:
        raise ConfigError(f"model {config.name!r}: the simulator does not serve {provider!r}")
    root = root_url.rstrip("/")
    base = root + BASE_PATHS[provider]
    env: dict[str, str] = {}
    rehearsed = replace(config, base_url=base)
    if provider == "sim":
        rehearsed = replace(rehearsed, model=_sim_model(config))
    elif provider == "openai":
        if config.api_key_env:
            env[config.api_key_env] = credentials.openai_api_key
    elif provider == "groq":
        env[config.api_key_env or "GROQ_API_KEY"] = credentials.groq_api_key
    elif provider == "deepinfra":
        env[config.api_key_env or "DEEPINFRA_API_KEY"] = credentials.deepinfra_api_key
    elif provider == "azure":
        env[config.api_key_env or "AZURE_OPENAI_API_KEY"] = credentials.azure_api_key
        env["AZURE_OPENAI_ENDPOINT"] = base
    elif provider == "bedrock":
        region = config.region or DEFAULT_REGION
        rehearsed = replace(rehearsed, region=region,
                            batch_bucket=config.batch_bucket or SIM_BATCH_BUCKETS[provider],
                            batch_role_arn=config.batch_role_arn or SIM_BATCH_ROLE)
        if config.extra.get("bedrock_auth") == "api_key":
            env["AWS_BEARER_TOKEN_BEDROCK"] = credentials.bedrock_api_key
        else:
            env["AWS_ACCESS_KEY_ID"] = credentials.aws_access_key_id
            env["AWS_SECRET_ACCESS_KEY"] = credentials.aws_secret_access_key
            if credentials.aws_session_token:
                env["AWS_SESSION_TOKEN"] = credentials.aws_session_token
        env["AWS_REGION"] = region
        env["AWS_DEFAULT_REGION"] = region
    elif provider == "vertex":
        project = config.project or credentials.gcp_project
        location = config.location or DEFAULT_LOCATION
        rehearsed = replace(rehearsed, project=project, location=location,
                            batch_bucket=config.batch_bucket or SIM_BATCH_BUCKETS[provider])
        path = credentials.write_service_account(Path(workdir), f"{root}/oauth2/token")
        env["GOOGLE_APPLICATION_CREDENTIALS"] = str(path)
        env["GOOGLE_CLOUD_PROJECT"] = project
        env["GOOGLE_CLOUD_LOCATION"] = location
    return rehearsed, env
