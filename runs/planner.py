"""From a spec to plan rows: models x arms x units x passes x queries.

Request ids are a hash of what identifies a query (campaign, model, arm, unit, the events it
asks, pass), so planning the same spec twice gives the same ids and resume is "plan minus
accepted". Rows are written in bounded batches so a paper-scale plan never sits in memory.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from panels.arms import ARMS, Arm
from runs.spec import ArmEntry, CampaignSpec, SpecError
from runs.units import UnitSource

PLAN_SCHEMA: dict[str, Any] = {
    "request_id": pl.String,
    "model": pl.String,
    "arm": pl.String,
    "unit": pl.String,
    "events": pl.List(pl.String),
    "keys": pl.List(pl.String),
    "pass": pl.Int32,
    "seed": pl.Int64,
    "system": pl.String,
    "user": pl.String,
}
BATCH_ROWS = 20_000
CHARS_PER_TOKEN = 4.0  # a conservative rule of thumb for English prose and digits
#: Typical completion size per requested key when a model answers tersely (JSON + a little text).
TYPICAL_OUTPUT_TOKENS_PER_KEY = 24


def request_id(campaign: str, model: str, arm: str, unit: str, events: Sequence[str], pass_index: int) -> str:
    key = "\x1f".join((campaign, model, arm, unit, ",".join(events), str(pass_index)))
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def pass_seed(campaign_seed: int, arm: str, unit: str, pass_index: int) -> int:
    """A task-specific seed, different per pass (Appendix C), stable across models."""
    digest = hashlib.sha256(f"{campaign_seed}\x1f{arm}\x1f{unit}\x1f{pass_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def arm_of(entry: ArmEntry, spec: CampaignSpec) -> Arm:
    try:
        return ARMS[entry.name]
    except KeyError:
        raise SpecError(spec.path, "arms", f"an arm from the catalogue, not {entry.name!r}") from None


def iter_rows(spec: CampaignSpec, units: UnitSource) -> Iterator[dict[str, Any]]:
    for entry in spec.arms:
        arm = arm_of(entry, spec)
        for unit in units.for_arm(arm):
            for pass_index in range(entry.passes):
                seed = pass_seed(spec.seed, arm.name, unit.id, pass_index)
                queries = arm.queries(unit, pass_index, seed)
                for model in spec.models_for(entry):
                    for q in queries:
                        yield {
                            "request_id": request_id(spec.name, model.name, arm.name, unit.id, q.events, pass_index),
                            "model": model.name,
                            "arm": arm.name,
                            "unit": unit.id,
                            "events": list(q.events),
                            "keys": list(q.keys),
                            "pass": pass_index,
                            "seed": seed,
                            "system": q.system,
                            "user": q.user,
                        }


def write_plan(spec: CampaignSpec, run_dir: Path, units: UnitSource | None = None) -> Path:
    """Write `plan.parquet` atomically, streaming batches through temporary part files."""
    units = units or UnitSource.from_spec(spec)
    run_dir.mkdir(parents=True, exist_ok=True)
    parts_dir = run_dir / ".plan-parts"
    shutil.rmtree(parts_dir, ignore_errors=True)
    parts_dir.mkdir()
    batch: list[dict[str, Any]] = []
    part = 0

    def flush() -> None:
        nonlocal part, batch
        if batch:
            pl.DataFrame(batch, schema=PLAN_SCHEMA).write_parquet(parts_dir / f"part-{part:05d}.parquet")
            part += 1
            batch = []

    for row in iter_rows(spec, units):
        batch.append(row)
        if len(batch) >= BATCH_ROWS:
            flush()
    flush()
    target = run_dir / "plan.parquet"
    tmp = run_dir / "plan.parquet.tmp"
    if part == 0:
        pl.DataFrame(schema=PLAN_SCHEMA).write_parquet(tmp)
    else:
        pl.scan_parquet(str(parts_dir / "*.parquet")).sink_parquet(tmp)
    with open(tmp, "rb") as fh:
        import os

        os.fsync(fh.fileno())
    tmp.replace(target)
    shutil.rmtree(parts_dir, ignore_errors=True)
    return target


@dataclass(frozen=True)
class PlanLine:
    """Planned queries and their estimated tokens and cost for one (model, arm)."""

    model: str
    arm: str
    queries: int
    tokens_in: int
    tokens_out: int
    tokens_out_max: int
    cost_usd: float | None
    cost_usd_max: float | None


def estimate(spec: CampaignSpec, units: UnitSource | None = None) -> list[PlanLine]:
    """Counts are exact; tokens come from rendering one unit per arm (prompts differ little by unit)."""
    units = units or UnitSource.from_spec(spec)
    lines: list[PlanLine] = []
    for entry in spec.arms:
        arm = arm_of(entry, spec)
        unit_list = list(units.for_arm(arm))
        if not unit_list:
            continue
        sample = arm.queries(unit_list[0], 0, pass_seed(spec.seed, arm.name, unit_list[0].id, 0))
        per_unit = len(sample)
        chars = sum(len(q.system) + len(q.user) for q in sample)
        keys = sum(len(q.keys) for q in sample)
        n_units = len(unit_list)
        for model in spec.models_for(entry):
            queries = per_unit * n_units * entry.passes
            tokens_in = round(chars / CHARS_PER_TOKEN * n_units * entry.passes)
            tokens_out = keys * TYPICAL_OUTPUT_TOKENS_PER_KEY * n_units * entry.passes
            cap = model.max_tokens or 8192
            tokens_out_max = queries * cap
            lines.append(
                PlanLine(
                    model=model.name, arm=arm.name, queries=queries, tokens_in=tokens_in,
                    tokens_out=tokens_out, tokens_out_max=tokens_out_max,
                    cost_usd=_cost(model.price_in_per_mtok, model.price_out_per_mtok, tokens_in, tokens_out),
                    cost_usd_max=_cost(model.price_in_per_mtok, model.price_out_per_mtok, tokens_in, tokens_out_max),
                )
            )
    return lines


def _cost(price_in: float | None, price_out: float | None, tokens_in: int, tokens_out: int) -> float | None:
    if price_in is None and price_out is None:
        return None
    return ((price_in or 0.0) * tokens_in + (price_out or 0.0) * tokens_out) / 1e6


def summarise(lines: Sequence[PlanLine]) -> dict[str, Any]:
    """The `--json` shape of `dutchbook plan`: totals, by model and by arm."""

    def fold(key: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for line in lines:
            name = getattr(line, key)
            acc = out.setdefault(name, {"queries": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": None})
            acc["queries"] += line.queries
            acc["tokens_in"] += line.tokens_in
            acc["tokens_out"] += line.tokens_out
            if line.cost_usd is not None:
                acc["cost_usd"] = (acc["cost_usd"] or 0.0) + line.cost_usd
        return out

    costs = [line.cost_usd for line in lines if line.cost_usd is not None]
    costs_max = [line.cost_usd_max for line in lines if line.cost_usd_max is not None]
    return {
        "total": {
            "queries": sum(line.queries for line in lines),
            "tokens_in": sum(line.tokens_in for line in lines),
            "tokens_out": sum(line.tokens_out for line in lines),
            "cost_usd": sum(costs) if costs else None,
            "cost_usd_max": sum(costs_max) if costs_max else None,
            "priced_models": sorted({line.model for line in lines if line.cost_usd is not None}),
        },
        "by_model": fold("model"),
        "by_arm": fold("arm"),
    }
