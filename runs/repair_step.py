"""`repaired.parquet`: every answered set's Euclidean repair beside the stated probabilities.

The repair is the coherent forecast nearest to the stated one (`scoring.repair`, a
projection onto the convex hull of the outcome vectors). Where the outcome is known, the
Brier change (repaired minus stated, over the set's answered events) is recorded; a
projection onto a convex set holding every outcome vector never moves away from any of
them, so the change is never positive (a rise within `BRIER_ROUNDING`, the projection's
rounding, is written as 0). Read one (model, arm) at a time, like scoring.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from runs.answered_sets import SET_KEY_SCHEMA, AnswerSource, answered_sets, chunks
from runs.scored_from import (
    REPAIRED,
    REPAIRED_FROM,
    answers_now,
    forget_digest,
    record_scored_from,
)
from runs.scoring_step import PartFiles
from runs.spec import CampaignSpec
from runs.units import UnitSource
from scoring import brier, repair

#: A Brier "rise" no larger than this is the projection's rounding, written as 0: the exact
#: projection never rises, and one within its optimality tolerance moved a stated (0.3,
#: 0.70000001) by 5e-9 and its Brier up by 1.2e-13, above the true gain of about 1e-17.
BRIER_ROUNDING = 1e-12


def _never_above_zero(change: float) -> float:
    """`change`, or 0.0 for a rise within `BRIER_ROUNDING` (a larger one is left to be seen)."""
    return 0.0 if 0.0 < change <= BRIER_ROUNDING else change


REPAIRED_SCHEMA: dict[str, Any] = {
    **SET_KEY_SCHEMA,
    "events": pl.List(pl.String),
    "stated": pl.List(pl.Float64),
    "repaired": pl.List(pl.Float64),
    "answered": pl.Int32,
    "distance": pl.Float64,
    "brier_stated": pl.Float64,
    "brier_repaired": pl.Float64,
    "brier_change": pl.Float64,
}


@dataclass(frozen=True)
class RepairSummary:
    sets: int
    with_outcomes: int
    improved: int
    mean_brier_change: float | None
    largest_brier_change: float | None


def _nulls(row: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in row]


def repair_run(spec: CampaignSpec, run_dir: Path, units: UnitSource | None = None) -> RepairSummary:
    """Write `repaired.parquet`: one row per answered (model, arm, unit, pass, set)."""
    if units is None:
        from runs.design import folder_units  # only here: callers mostly pass `units`

        units = folder_units(spec, run_dir)
    answers = answers_now(run_dir)  # before they are read: what these repairs come from
    source = AnswerSource(run_dir)
    changes: list[float] = []
    count = 0
    with tempfile.TemporaryDirectory(prefix=".repair-", dir=run_dir) as tmp:
        parts = PartFiles(Path(tmp), "repaired", REPAIRED_SCHEMA)
        for chunk in chunks(spec):
            forecasts = source.forecasts(chunk.model, chunk.arm.name)
            rows: dict[str, list[Any]] = {name: [] for name in REPAIRED_SCHEMA}
            for s in answered_sets(chunk, forecasts, units):
                answered = np.isfinite(s.probs).any(axis=1)
                if not answered.any():
                    continue
                fixed = repair(s.incidence, s.probs[answered])
                for p, stated, coherent in zip(
                    np.flatnonzero(answered), s.probs[answered], fixed, strict=True
                ):
                    mask = np.isfinite(stated)
                    before = after = change = None
                    if s.outcomes is not None:
                        before = float(brier(stated, s.outcomes))
                        after = float(brier(coherent, s.outcomes))
                        change = _never_above_zero(after - before)
                        changes.append(change)
                    for name, value in (
                        ("model", chunk.model),
                        ("arm", chunk.arm.name),
                        ("unit", s.unit),
                        ("pass", int(p)),
                        ("set", s.name),
                        ("cluster", s.cluster),
                        ("events", list(s.events)),
                        ("stated", _nulls(stated)),
                        ("repaired", _nulls(coherent)),
                        ("answered", int(mask.sum())),
                        ("distance", float(np.linalg.norm((coherent - stated)[mask]))),
                        ("brier_stated", before),
                        ("brier_repaired", after),
                        ("brier_change", change),
                    ):
                        rows[name].append(value)
                    count += 1
            frame = pl.DataFrame(rows, schema=REPAIRED_SCHEMA)
            parts.add(frame.sort(["unit", "set", "pass"], maintain_order=True))
        # The old record stays until the new file is in place: removed first, a kill during
        # the commit left the old repairs with no record, and their staleness unsaid. A kill
        # after it leaves the new repairs beside the old record: said stale, wrongly but safely
        # (its digest dropped first, `forget_digest`, so a reparse back to it cannot undo that).
        forget_digest(run_dir, REPAIRED_FROM)
        parts.commit(run_dir / REPAIRED)
    record_scored_from(run_dir, answers, name=REPAIRED_FROM)
    return RepairSummary(
        sets=count,
        with_outcomes=len(changes),
        improved=sum(c < 0 for c in changes),
        mean_brier_change=float(np.mean(changes)) if changes else None,
        largest_brier_change=float(np.max(changes)) if changes else None,
    )
