"""A plan's estimate kept beside it, so a resume need not render every prompt again.

`dutchbook run` prints the planned count and the cost estimate before it starts. Rendering
and counting the paper's 365,100 prompts for that took 21-46 s on every resume, for figures
the plan already fixes. The estimate is saved as `plan-estimate.json` when the plan is made;
a resume whose design matches (`runs.design.design_matches`) reads it back, checks its query
counts against `plan.parquet` (a lazy scan: one streaming group-by, no prompt text read) and
prices the tokens at the spec's *current* prices (prices may change on resume).
Anything missing or inconsistent means "render again", never a wrong figure.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from engine.durable import write_bytes_atomic
from runs.design import design_matches
from runs.planner import PRICED_FIELDS, PlanLine, price_lines
from runs.spec import CampaignSpec

ESTIMATE_FILE = "plan-estimate.json"
_FORMAT = "dutchbook.plan-estimate/1"
#: PlanLine fields kept; the costs (live and batch) and the dispatch mode come from the
#: current spec.
_KEPT = tuple(f.name for f in fields(PlanLine) if f.name not in PRICED_FIELDS)


def _counting(spec: CampaignSpec) -> dict[str, list[Any]]:
    """What the token counts depend on beyond the design: each model's tokenizer settings
    (operational keys, so a resume may change them, and then the counts are redone)."""
    return {m.name: [m.tokenizer, m.fold_system] for m in spec.models}


def save_estimate(run_dir: Path, spec: CampaignSpec, lines: list[PlanLine]) -> None:
    record = {
        "format": _FORMAT,
        "counting": _counting(spec),
        "lines": [{k: v for k, v in asdict(line).items() if k in _KEPT} for line in lines],
    }
    write_bytes_atomic(run_dir / ESTIMATE_FILE, orjson.dumps(record, option=orjson.OPT_INDENT_2))


def plan_counts(plan_path: Path) -> dict[tuple[str, str], int]:
    """Distinct queries per (model, arm) in a plan file, read lazily (two columns, streamed)."""
    counts = (
        pl.scan_parquet(plan_path)
        .group_by("model", "arm")
        .agg(pl.len().alias("n"))
        .collect(engine="streaming")
    )
    return {(m, a): int(n) for m, a, n in counts.iter_rows()}


def resumed_estimate(spec: CampaignSpec, run_dir: Path) -> list[PlanLine] | None:
    """The saved estimate of `run_dir`'s plan, priced now; None when it must be rendered."""
    path, plan_path = run_dir / ESTIMATE_FILE, run_dir / "plan.parquet"
    if not (path.exists() and plan_path.exists() and design_matches(spec, run_dir)):
        return None
    try:
        record = orjson.loads(path.read_bytes())
        if record.get("format") != _FORMAT or record.get("counting") != _counting(spec):
            return None
        lines = [PlanLine(**{k: raw[k] for k in _KEPT}) for raw in record["lines"]]
        counts = plan_counts(plan_path)
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None
    saved = {(line.model, line.arm): line.queries for line in lines if line.queries}
    if saved != counts:  # the plan is not the one estimated: count it again
        return None
    return price_lines(spec, lines)
