"""Plan rows become lane work items field for field (`engine.plan.plan_items`)."""

from __future__ import annotations

import polars as pl

from engine.plan import PLAN_SCHEMA, PlanItem, plan_items


def test_plan_rows_become_items_with_their_history() -> None:
    frame = pl.DataFrame(
        {
            "request_id": ["r1", "r2"],
            "model": ["m", "m"],
            "arm": ["families/isolated", "figure1"],
            "unit": ["u7", "u8"],
            "events": [["e1", "e2"], []],
            "keys": [["p1", "p2"], []],
            "pass": [3, 0],
            "seed": [123, None],
            "system": ["sys é", None],
            "user": ["ask \"q\"", "ask"],
        },
        schema=PLAN_SCHEMA,
    )
    items = plan_items(frame, prior={"r2": 4}, failed={"r2": 1})
    assert items == [
        PlanItem("r1", "m", "families/isolated", "u7", ["e1", "e2"], ["p1", "p2"], 3, 123,
                 "sys é", 'ask "q"'),
        PlanItem("r2", "m", "figure1", "u8", [], [], 0, None, "", "ask",
                 prior_attempts=4, prior_answer_failures=1),
    ]
    assert all(type(item.pass_) is int for item in items)
