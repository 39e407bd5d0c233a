"""Polars frames from many Python rows, column by column, without per-row list conversion.

`pl.DataFrame(list_of_dicts, schema=...)` converts each row's list values (a List column)
into a Series of its own while holding the GIL: for the journal's 50,000-row segments
that took seconds, and since compaction runs in a thread beside the event loop, those
seconds were stolen from dispatch. Here scalar columns are built from one Python list
each, and list columns from their flattened values plus a row number, assembled by
polars (outside the GIL). The result equals the row-wise construction, which a test
checks on rows with empty lists, nulls and odd values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

_ROW = "__row"


def _list_column(name: str, values: Sequence[Any], dtype: pl.List) -> pl.Series:
    """A List column from Python lists (None allowed for a null list)."""
    if any(v is not None and not isinstance(v, list | tuple) for v in values):
        return pl.Series(name, values, dtype=dtype)  # not plain lists: the general path
    rows: list[int] = []
    flat: list[Any] = []
    for index, value in enumerate(values):
        if value:
            rows.extend([index] * len(value))
            flat.extend(value)
    inner = dtype.inner
    exploded = pl.DataFrame(
        [pl.Series(_ROW, rows, dtype=pl.Int64), pl.Series(name, flat, dtype=inner)]
    )
    grouped = exploded.group_by(_ROW, maintain_order=True).agg(pl.col(name))
    nulls = [value is None for value in values]
    full = (
        pl.DataFrame({_ROW: pl.arange(0, len(values), eager=True, dtype=pl.Int64)})
        .join(grouped, on=_ROW, how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.Series(nulls, dtype=pl.Boolean))
            .then(pl.lit(None, dtype=dtype))
            .otherwise(pl.col(name).fill_null(pl.lit([], dtype=dtype)))
            .alias(name)
        )
    )
    return full.get_column(name).cast(dtype)


def frame_from_columns(
    columns: Mapping[str, Sequence[Any]], schema: Mapping[str, Any]
) -> pl.DataFrame:
    """`pl.DataFrame(columns, schema=schema)` for a dict of equally long Python lists."""
    series = []
    for name, dtype in schema.items():
        values = columns[name]
        if isinstance(dtype, pl.List):
            series.append(_list_column(name, values, dtype))
        else:
            series.append(pl.Series(name, values, dtype=dtype))
    return pl.DataFrame(series, schema=dict(schema))


def frame_from_rows(rows: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> pl.DataFrame:
    """`pl.DataFrame(rows, schema=schema)` for dict rows (a missing key reads as null)."""
    return frame_from_columns({name: [row.get(name) for row in rows] for name in schema}, schema)
