"""Repeated elicitation (the paper's Figure 4C): average each event's answers over the first
k passes, then solve the Dutch-book LP again on the averaged forecast.

By convexity of the profit in the stated probabilities, the k-pass average's profit is never
above the mean of the single passes' profits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from runs.report.data import LEVEL, ArmRow, native_scores
from runs.scoring_step import native_norm
from scoring import dutch_books, stats

#: `incidence_for(arm, unit, set, events) -> (n_events, n_atoms) 0/1 matrix` of one scoring
#: set, rows in the order of `events` (the scores row's `events` column).
IncidenceFor = Callable[[str, str, str, Sequence[str]], npt.NDArray[Any]]


def repeated_elicitation(
    scores: pl.DataFrame,
    forecasts: pl.DataFrame,
    incidence_for: IncidenceFor,
    rows: Sequence[ArmRow],
    seed: int,
    reps: int,
) -> list[dict[str, Any]]:
    """Profit of the k-pass average forecast, k = 1..passes, for scored multi-pass arms.

    Each event's answers are averaged over the passes that answered it (an event no pass
    answered stays unanswered). All LPs sharing an incidence matrix are solved in one batch.
    """
    scored = {(r.model, r.arm): r for r in rows if r.scored and r.profit is not None}
    native = native_scores(scores)
    answers: dict[tuple[str, str, str, int], dict[str, float]] = defaultdict(dict)
    for model, arm, unit, pass_, event, p in forecasts.select(
        "model", "arm", "unit", "pass", "event", "p"
    ).iter_rows():
        answers[(model, arm, unit, int(pass_))][event] = p
    batches: dict[tuple[str, tuple[int, ...], bytes], tuple[npt.NDArray[Any], list[Any]]] = {}
    plans: list[dict[str, Any]] = []
    for (model, arm), group in native.group_by(["model", "arm"], maintain_order=True):
        model, arm = str(model), str(arm)
        passes = sorted(int(p) for p in group["pass"].unique())
        if (model, arm) not in scored or len(passes) < 2:
            continue
        sets = group.unique(["unit", "set"], keep="first", maintain_order=True)
        plan: dict[str, Any] = {
            "model": model,
            "arm": arm,
            "norm": native_norm(arm),
            "passes": len(passes),
            "clusters": [],
            "profits": [],
        }
        for unit, set_name, cluster, events in sets.select(
            "unit", "set", "cluster", "events"
        ).iter_rows():
            ids = list(events)
            matrix = np.array(
                [
                    [answers.get((model, arm, unit, p), {}).get(e, np.nan) for e in ids]
                    for p in passes
                ],
                dtype=float,
            )
            if not np.isfinite(matrix).any():
                continue
            incidence = np.ascontiguousarray(
                incidence_for(arm, unit, set_name, ids), dtype=np.uint8
            )
            answered = np.isfinite(matrix)
            sums = np.cumsum(np.where(answered, matrix, 0.0), axis=0)
            counts = np.cumsum(answered, axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                averaged = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
            key = (plan["norm"], incidence.shape, incidence.tobytes())
            batch = batches.setdefault(key, (incidence, []))
            slot = np.full(len(passes), np.nan)
            plan["profits"].append(slot)
            plan["clusters"].append(cluster)
            batch[1].append((averaged, slot))
        plans.append(plan)
    for (norm, _, _), (incidence, items) in batches.items():
        result = dutch_books(incidence, np.vstack([a for a, _ in items]), norm=norm)
        offset = 0
        for averaged, slot in items:
            slot[:] = result.profit[offset : offset + averaged.shape[0]]
            offset += averaged.shape[0]
    out: list[dict[str, Any]] = []
    for plan in plans:
        if not plan["profits"]:
            continue
        profits = np.vstack(plan["profits"])
        clusters = np.array(plan["clusters"])
        by_k: list[dict[str, Any]] = []
        for k in range(plan["passes"]):
            column = profits[:, k]
            if np.isfinite(column).any():
                iv = stats.cluster_bootstrap_mean(
                    column, clusters, reps=reps, seed=seed, level=LEVEL
                )
                by_k.append({"k": k + 1, "mean": iv.mean, "lo": iv.lo, "hi": iv.hi})
            else:
                by_k.append({"k": k + 1, "mean": None, "lo": None, "hi": None})
        row = scored[(plan["model"], plan["arm"])]
        out.append(
            {
                "model": plan["model"],
                "arm": plan["arm"],
                "passes": plan["passes"],
                "units": int(profits.shape[0]),
                "single_pass_mean": row.profit.mean if row.profit else None,
                "by_k": by_k,
            }
        )
    return out


def incidence_from_units(units: Any) -> IncidenceFor:
    """An `incidence_for` callback over a campaign's `runs.units.UnitSource`.

    The pipeline passes `incidence_for=incidence_from_units(units)` to `write_report` so the
    repeated-elicitation section can re-solve averaged forecasts; panels are built on demand
    (only for multi-pass arms) and cached per scoring set.
    """
    from panels.arms import ARMS

    by_id: dict[str, dict[str, Any]] = {}
    cache: dict[tuple[str, str, str, tuple[str, ...]], npt.NDArray[Any]] = {}

    def incidence_for(arm: str, unit: str, set_name: str, events: Sequence[str]) -> Any:
        key = (arm, unit, set_name, tuple(events))
        if key not in cache:
            spec_arm = ARMS[arm]
            if arm not in by_id:
                by_id[arm] = {u.id: u for u in units.for_arm(spec_arm, check=False)}
            panel = spec_arm.panel(by_id[arm][unit]).subset(list(events))
            cache[key] = np.asarray(panel.incidence, dtype=np.uint8)
        return cache[key]

    return incidence_for
