"""A campaign's life: spec -> plan -> dispatch -> score -> report, resumable at every step.

Running the same spec into the same folder again resumes: the plan is the same (deterministic
request ids), the ledger says what is already accepted, and only the rest is asked.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from engine.dispatch import dispatch
from panels.arms import ARMS
from providers.registry import adapter_for
from providers.types import ConfigError, ModelConfig
from runs.planner import estimate, summarise, write_plan
from runs.report import write_report
from runs.scoring_step import score_run
from runs.spec import CampaignSpec, SpecError, load_spec
from runs.units import UnitSource


class RunError(RuntimeError):
    """A campaign that cannot start or continue; the message says why and what to do."""


@dataclass(frozen=True)
class CampaignResult:
    run_dir: Path
    summary: Any
    report: dict[str, Any]


def default_run_dir(spec: CampaignSpec) -> Path:
    return Path("out") / spec.name


def freeze_spec(spec: CampaignSpec, run_dir: Path) -> bool:
    """Write `spec.toml` into the run folder; True when this is a resume of the same spec."""
    run_dir.mkdir(parents=True, exist_ok=True)
    frozen = run_dir / "spec.toml"
    if frozen.exists():
        if frozen.read_text(encoding="utf-8") != spec.text:
            raise RunError(
                f"{run_dir} holds a different campaign spec; resume with the same spec, "
                "or choose a new folder with --out"
            )
        return True
    tmp = frozen.with_suffix(".tmp")
    tmp.write_text(spec.text, encoding="utf-8")
    tmp.replace(frozen)
    return False


def check_credentials(spec: CampaignSpec, env: Mapping[str, str]) -> None:
    """Every real provider's credentials must be present before anything is sent.

    Building the adapter is the check: it is what the run would do, so the message is the
    provider module's own (naming the model and the variables, never their values).
    """
    for index, model in enumerate(spec.models):
        if model.provider == "sim":
            continue
        try:
            adapter_for(model, env)
        except ConfigError as exc:
            raise SpecError(
                spec.path,
                f"models[{index}]",
                f"{exc} (or run with --rehearse to use the local simulator)",
            ) from None


@contextlib.asynccontextmanager
async def simulator_if_needed(spec: CampaignSpec, rehearse: bool) -> AsyncIterator[str | None]:
    if not rehearse and all(m.provider != "sim" for m in spec.models):
        yield None
        return
    from providers.sim.server import start_sim

    handle = await start_sim(port=0, faults="none", seed=spec.seed)
    try:
        yield handle.root_url
    finally:
        await handle.stop()


def resolve_models(
    spec: CampaignSpec, sim_root: str | None, rehearse: bool, workdir: Path
) -> tuple[dict[str, ModelConfig], dict[str, Mapping[str, str]]]:
    """Point simulated (and, when rehearsing, all) models at the local simulator."""
    models: dict[str, ModelConfig] = {}
    envs: dict[str, Mapping[str, str]] = {}
    for model in spec.models:
        if model.provider == "sim" or rehearse:
            assert sim_root is not None
            from providers.sim.rehearse import rehearse_model

            config, env = rehearse_model(model, sim_root, workdir)
            models[model.name], envs[model.name] = config, env
        else:
            models[model.name], envs[model.name] = model, os.environ
    return models, envs


async def run_campaign(
    spec_path: str | Path,
    out: str | Path | None = None,
    *,
    max_cost: float | None = None,
    rehearse: bool = False,
    console: Console | None = None,
    progress: bool = True,
) -> CampaignResult:
    console = console or Console()
    spec = load_spec(spec_path)
    run_dir = Path(out) if out else default_run_dir(spec)
    units = UnitSource.from_spec(spec)
    for entry in spec.arms:
        units.check_requirements(ARMS[entry.name])
    if not rehearse:
        check_credentials(spec, os.environ)
    plan_summary = summarise(estimate(spec, units))
    cost = plan_summary["total"]["cost_usd"]
    if max_cost is not None and cost is not None and cost > max_cost and not rehearse:
        raise RunError(
            f"estimated cost ${cost:,.2f} exceeds --max-cost ${max_cost:,.2f}; nothing was sent"
        )
    resumed = freeze_spec(spec, run_dir)
    plan_path = run_dir / "plan.parquet"
    if not plan_path.exists():
        write_plan(spec, run_dir, units)
    console.print(
        f"[bold]{spec.name}[/]: {plan_summary['total']['queries']:,} queries planned"
        + (" (resuming)" if resumed else "")
        + (" — rehearsal on the local simulator" if rehearse else "")
    )
    # The simulator's fake credentials (a service-account key among them) live in a temporary
    # folder, never in the run folder, which users share.
    # The simulator's fake credentials (a service-account key among them) live in a temporary
    # folder, never in the run folder, which users share.
    with tempfile.TemporaryDirectory(prefix="dutchbook-sim-") as sim_workdir:
        async with simulator_if_needed(spec, rehearse) as sim_root:
            models, envs = resolve_models(spec, sim_root, rehearse, Path(sim_workdir))
            adapters = {name: adapter_for(config, envs[name]) for name, config in models.items()}
            summary = await dispatch(
                plan_path,
                run_dir,
                models,
                adapters,
                parser=spec.parser,
                progress=console if progress else None,
                max_attempts=spec.max_attempts,
            )
    scores = score_run(spec, run_dir, units)
    report = write_report(
        run_dir, scores, floor=spec.coverage_floor, seed=spec.seed, console=console
    )
    return CampaignResult(run_dir=run_dir, summary=summary, report=report)
