"""Each model's option values checked as its run will build it, before a run folder is touched.

Building a model's adapter (and batch client) is what checks its values: `reasoning_effort`
against the model, `token_field`, an openai model's `base_url`, a batch model's bucket. A
rehearsal built them only after it had saved the folder's design, so a bad value left a
folder that refused the corrected spec as another design; and `plan` passed specs `run`
refuses. So every model is built here first, with stand-in credentials (the simulator's fake
ones, never the environment's): what is refused here is the spec's to mend, said naming the
file and `models[i].<key>`, while what `runs.pipeline.check_credentials` then finds lacking is
the environment's. `run --rehearse` builds each model as the rehearsal points it at the
simulator (`providers.sim.rehearse.rehearse_model`); `run` and `plan`, as the spec writes it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from providers.batch_registry import batch_client_for
from providers.registry import adapter_for
from providers.types import ConfigError, ModelConfig
from providers.urls import IN_CLEAR, in_clear_to_another_host, sends_credentials
from runs.leftovers import scratch_folder
from runs.spec import CampaignSpec, SpecError

if TYPE_CHECKING:  # the simulator is imported only when a spec is checked
    from providers.sim.credentials import SimCredentials

#: The simulator's root the stand-in models point at: never asked (building sends nothing).
STAND_IN_ROOT = "http://127.0.0.1:9"
#: What a model's own `api_key_env` holds while it is built here: nothing reads it.
STAND_IN_KEY = "dutchbook-stand-in-not-a-key"


def check_model_options(
    spec: CampaignSpec, *, rehearse: bool = False, credentials: SimCredentials | None = None
) -> None:
    """Refuse the first model whose option values its run could not build it with, as a
    `SpecError` naming `models[i].<key>` (the key where the provider's message knows it).

    `rehearse` builds each model as `run --rehearse` does, with `credentials` (the
    simulator's defaults when None); otherwise as written, as `run` and `plan` do, with the
    simulator's fake credentials standing in for the environment's, whose absence is not the
    spec's fault (`runs.pipeline.check_credentials` says what it lacks).
    """
    # A Vertex model's fake key file goes where a rehearsal's does: removed if this is killed.
    with scratch_folder("sim") as workdir:
        for index, model in enumerate(spec.models):
            where = f"models[{index}]"
            if _in_clear(model, rehearse):
                raise SpecError(
                    spec.path, where + ".base_url",
                    f"an https:// URL for model {model.name!r} ({model.provider}); {IN_CLEAR}",
                )  # fmt: skip
            try:
                config, env = built_with_stand_ins(model, rehearse, Path(workdir), credentials)
                adapter_for(config, env)
                if config.dispatch == "batch":
                    batch_client_for(config, env)
            except ConfigError as exc:
                raise SpecError(
                    spec.path, where + (f".{exc.key}" if exc.key else ""), str(exc)
                ) from None


def _in_clear(model: ModelConfig, rehearse: bool) -> bool:
    """Whether a real run would send the model's credentials over http:// to another host
    (a rehearsal points every model at the simulator on this machine)."""
    if rehearse or model.provider == "sim" or not sends_credentials(model):
        return False
    return in_clear_to_another_host(model.base_url or "")


def built_with_stand_ins(
    model: ModelConfig, rehearse: bool, workdir: Path, credentials: SimCredentials | None = None
) -> tuple[ModelConfig, dict[str, str]]:
    """The model as its run builds it and the environment it is built with: the simulator's
    fake credentials (and, for a model as written, stand-ins for its `base_url_env` and a
    batch model's bucket and role, as a rehearsal's). `workdir`: where a Vertex model's fake
    key file goes (a scratch folder's). Also `runs.batch_bytes.sizing_client`'s."""
    from providers.sim.credentials import DEFAULT_CREDENTIALS
    from providers.sim.rehearse import rehearse_model

    rehearsed, env = rehearse_model(
        model, STAND_IN_ROOT, workdir, credentials or DEFAULT_CREDENTIALS
    )
    if rehearse or model.provider == "sim":  # a run points sim models at the simulator
        return rehearsed, env
    variable = model.extra.get("base_url_env")
    if variable:  # a local server's root is the environment's to give, as a key is
        env[variable] = rehearsed.base_url or STAND_IN_ROOT
    if model.api_key_env and model.api_key_env not in env:
        # The rehearsal names no variable of a Bedrock or Vertex model's own (its fake
        # credentials go in the standard ones): `VERTEX_TOKEN` set or not, such a model was
        # refused as "VERTEX_TOKEN (an access token) is not set", by plan and run alike.
        env[model.api_key_env] = STAND_IN_KEY
    # A batch model's bucket and role are the account's, as its key is: `plan` prices a
    # Bedrock batch campaign before they exist (`check_credentials` asks for them at `run`).
    return replace(
        model,
        batch_bucket=model.batch_bucket or rehearsed.batch_bucket,
        batch_role_arn=model.batch_role_arn or rehearsed.batch_role_arn,
    ), env
