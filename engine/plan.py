"""The plan file (`plan.parquet`): its columns, defined once, and how the engine reads it.

`runs.planner` writes plans with `PLAN_SCHEMA`; `engine.dispatch` reads them in row slices
through the functions here, decoding full rows only for requests still to ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from engine.ledger import Ledger

#: Plan rows, in order (docs/interfaces.md, "Plan rows").
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
PLAN_COLUMNS = tuple(PLAN_SCHEMA)


@dataclass(slots=True)
class PlanItem:
    """One plan row waiting to be asked, with the attempts it already had in earlier runs."""

    request_id: str
    model: str
    arm: str
    unit: str
    events: list[str]
    keys: list[str]
    pass_: int
    seed: int | None
    system: str
    user: str
    prior_attempts: int = 0
    #: Answer failures (`engine.retry.ANSWER_FAILURES`) in earlier runs: their budget is kept.
    prior_answer_failures: int = 0


def plan_counts(plan_path: Path) -> dict[str, int]:
    """Rows per model, read from the `model` column only."""
    counts = pl.scan_parquet(plan_path).group_by("model").len().collect()
    return dict(zip(counts["model"].to_list(), counts["len"].to_list(), strict=True))


def plan_spans(plan_path: Path) -> dict[str, tuple[int, int]]:
    """Per model, the rows from its first to just past its last: where its lane need read.

    A planner's plan is sorted by model, so a lane reads its own stretch of the plan instead
    of every slice of it (in the paper's plan, 14 of the 15 lanes hold 1,400 rows each at the
    end of 365,100; each used to read and filter all 37 slices, on every resume).
    """
    spans = (
        pl.scan_parquet(plan_path)
        .select("model")
        .with_row_index("_pos")
        .group_by("model")
        .agg(pl.col("_pos").min().alias("first"), pl.col("_pos").max().alias("last"))
        .collect()
    )
    return {
        str(model): (int(first), int(last) + 1)
        for model, first, last in spans.select("model", "first", "last").iter_rows()
    }


def read_pending(
    plan_path: Path, offset: int, rows: int, model: str, ledger: Ledger,
    held: frozenset[str] = frozenset(),
) -> tuple[int, int, list[int], list[str]]:
    """One plan slice: (its rows, `model`'s rows in it, positions and ids still to ask).

    Only `request_id` and `model` are decoded, and acceptance is decided for the slice's id
    column at once (`Ledger.accepted_series`: one search of the ledger's shards), so rows
    already accepted never become Python objects. Rows `held` by a batch job not yet
    collected are left out of both counts: that job's lane accounts for them.
    """
    frame = (
        pl.scan_parquet(plan_path)
        .select("request_id", "model")
        .slice(offset, rows)
        .with_row_index("_pos")
        .collect()
    )
    height = frame.height
    mine = frame.filter(pl.col("model") == model)
    if held:
        mine = mine.filter(~pl.col("request_id").is_in(list(held)))
    del frame
    todo = mine.filter(~ledger.accepted_series(mine["request_id"]))
    return height, mine.height, todo["_pos"].to_list(), todo["request_id"].to_list()


def read_rows(plan_path: Path, offset: int, rows: int, positions: list[int]) -> pl.DataFrame:
    """The full rows at `positions` (row numbers within the slice `offset`, `rows`)."""
    return (
        pl.scan_parquet(plan_path)
        .select(*PLAN_COLUMNS)
        .slice(offset, rows)
        .with_row_index("_pos")
        .filter(pl.col("_pos").is_in(positions))
        .collect()
    )


def plan_items(
    frame: pl.DataFrame, prior: Mapping[str, int], failed: Mapping[str, int] | None = None
) -> list[PlanItem]:
    """Plan rows as lane work items; `prior` is attempts already made per request id, `failed`
    the answer failures among them (their budget lasts across resumes)."""
    failed = failed or {}
    # Column by column and positional: this runs on the event loop for every request, and
    # row tuples with keyword construction cost about 1.5 µs an item more.
    columns = [frame.get_column(name).to_list() for name in PLAN_COLUMNS]
    return [
        PlanItem(
            rid, model, arm, unit, events, keys, pass_, seed, system or "", user or "",
            prior.get(rid, 0), failed.get(rid, 0),
        )
        for rid, model, arm, unit, events, keys, pass_, seed, system, user in zip(
            *columns, strict=True
        )
    ]
