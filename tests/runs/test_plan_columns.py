"""Frames built column by column (engine.frames) equal the row-wise construction."""

from __future__ import annotations

import math
import random

import polars as pl
import pytest

from engine.frames import frame_from_rows, lists_from_flat
from engine.records import ATTEMPT_SCHEMA, RESPONSE_SCHEMA
from runs.planner import MEMBER_SCHEMA


def member_rows(n: int) -> list[dict[str, object]]:
    return [
        {
            "request_id": f"r{i}",
            "model": "m",
            "arm": "a",
            "unit": f"u{i % 7}",
            "pass": i % 3,
            "events": [f"e{i}", "d1:B0|B1", "", "a\x1fb"][: i % 5],  # empty lists, odd strings
            "keys": ["k"] if i % 2 else [],
        }
        for i in range(n)
    ]


def response_rows(n: int) -> list[dict[str, object]]:
    rng = random.Random(3)
    rows: list[dict[str, object]] = []
    for i in range(n):
        k = rng.randint(0, 3)
        rows.append(
            {
                "request_id": f"r{i}",
                "model": "m",
                "arm": "a",
                "unit": "u",
                "pass": i,
                "events": None if i % 11 == 0 else [f"e{j}" for j in range(k)],
                "keys": ["p", "q", "r"][:k],
                "raw_text": None if i % 5 == 0 else '{"p": 0.5} é',
                "values": [rng.random() for _ in range(k)] + ([math.nan] if i % 7 == 0 else []),
                "tokens_in": i,
                "attempts": 1,
                # finish_reason, tokens_out and accepted_at missing: read as null
            }
        )
    return rows


@pytest.mark.parametrize("n", [0, 1, 37, 600])
def test_member_frames_match_row_wise_construction(n: int) -> None:
    rows = member_rows(n)
    assert frame_from_rows(rows, MEMBER_SCHEMA).equals(pl.DataFrame(rows, schema=MEMBER_SCHEMA))


@pytest.mark.parametrize("n", [0, 1, 600])
def test_journal_frames_match_row_wise_construction(n: int) -> None:
    schema = {**RESPONSE_SCHEMA, "accepted_at": pl.String()}
    rows = response_rows(n)
    expected = pl.DataFrame(rows, schema=schema)
    got = frame_from_rows(rows, schema)
    assert got.schema == expected.schema
    assert got.equals(expected, null_equal=True)
    attempts = [{"request_id": f"r{i}", "attempt": 1, "elapsed_ms": 0.5} for i in range(n)]
    schema = {**ATTEMPT_SCHEMA, "started_at": pl.String()}
    assert frame_from_rows(attempts, schema).equals(pl.DataFrame(attempts, schema=schema))


def test_score_columns_match_column_wise_construction() -> None:
    from engine.frames import frame_from_columns
    from runs.scoring_step import SCORE_SCHEMA

    rng = random.Random(5)
    n = 300
    columns: dict[str, list[object]] = {name: [] for name in SCORE_SCHEMA}
    for _ in range(n):
        k = rng.randint(0, 4)
        row: dict[str, object] = {name: None for name in SCORE_SCHEMA}
        row.update(
            {
                name: [rng.random() if rng.random() > 0.2 else None for _ in range(k)]
                for name, dtype in SCORE_SCHEMA.items()
                if isinstance(dtype, pl.List) and dtype.inner == pl.Float64
            }
        )
        row.update(
            {
                name: [f"e{j}" for j in range(k)]
                for name, dtype in SCORE_SCHEMA.items()
                if isinstance(dtype, pl.List) and dtype.inner == pl.String
            }
        )
        for name in SCORE_SCHEMA:
            columns[name].append(row[name])
    expected = pl.DataFrame(columns, schema=SCORE_SCHEMA)
    assert frame_from_columns(columns, SCORE_SCHEMA).equals(expected, null_equal=True)


@pytest.mark.parametrize("units", [1, 5, 150])
def test_repeated_string_lists_match_row_wise_construction(units: int) -> None:
    """A plan's lists repeat once per pass: the interned path must equal the row-wise one
    (nulls and empty lists among the repeats); 150 distinct lists in 600 rows takes the
    grouped path instead."""
    shapes: list[list[str] | None] = [
        None if u % 4 == 3 else [f"u{u}:e{j}" for j in range(u % 5)] + ["a\x1fb", ""][: u % 3]
        for u in range(units)
    ]
    rows = [
        {"request_id": f"r{i}", "model": "m", "arm": "a", "unit": f"u{i % units}", "pass": i,
         "events": shapes[i % units], "keys": shapes[(i + 1) % units]}
        for i in range(600)
    ]
    got = frame_from_rows(rows, MEMBER_SCHEMA)
    assert got.equals(pl.DataFrame(rows, schema=MEMBER_SCHEMA), null_equal=True)


def test_lists_from_flat_keeps_rows_without_values_as_empty_lists() -> None:
    """Rows 0, 2 and 5 own no value (first, middle, last): each is an empty list, not null."""
    rows = pl.Series([1, 1, 3, 4, 4, 4])
    flat = pl.Series([0.5, -1.0, 2.0, 0.0, -0.0, 3.5])
    lists = lists_from_flat("stakes", rows, flat, 6)
    assert lists.name == "stakes" and lists.dtype == pl.List(pl.Float64)
    assert lists.to_list() == [[], [0.5, -1.0], [], [2.0], [0.0, -0.0, 3.5], []]
    assert lists.null_count() == 0
    strings = lists_from_flat("events", pl.Series([0, 0], dtype=pl.Int32), pl.Series(["a", "b"]), 2)
    assert strings.to_list() == [["a", "b"], []] and strings.dtype == pl.List(pl.String)
