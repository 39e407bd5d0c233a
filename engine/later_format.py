"""Refuse to write to a run folder that a later dutchbook version has written to.

A writer folds journal lines into shards of the columns it knows and rewrites shards by its
own schema, so a column a later version added (as 0.2.0 added `attempts.model_reported`)
would be dropped without a word by an earlier version resuming or re-parsing the folder. The
readers (`status`, `audit`, `score`, `report`) take such a folder as it is
(`engine.scan.scan_shards` ignores columns it does not know); the writer, `Ledger.open`
(`run`, `reparse`), refuses it before it folds or rewrites anything, naming the file and the
columns (it has made its folders and settled a re-parse's replacement by then, as every open
does: nothing a later version wrote is lost by either).

No marker file is needed: a later version's records say so by their columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from engine.journal import JournalError, list_segments, read_segment
from engine.records import ATTEMPT_SCHEMA, RESPONSE_SCHEMA
from engine.scan import result_rows
from engine.shards import list_shards


class LaterFormat(JournalError):
    """The folder holds records with fields this version does not know (a later version's)."""


def refuse_later_records(
    journal_dir: Path, attempts_dir: Path, responses_dir: Path
) -> dict[Path, list[str]]:
    """Raise `LaterFormat` if a shard or a journal result line holds a column of the attempts
    or responses table that this version's schema lacks; else return each attempts shard's
    columns, read from its footer here, for `engine.shards.add_missing_columns` (which read
    every footer a second time)."""
    attempt_columns: dict[Path, list[str]] = {}
    for directory, schema in ((attempts_dir, ATTEMPT_SCHEMA), (responses_dir, RESPONSE_SCHEMA)):
        for _, path in list_shards(directory):
            columns = list(pl.read_parquet_schema(path))
            _refuse(path, columns, schema)
            if directory == attempts_dir:
                attempt_columns[path] = columns
    for _, path in list_segments(journal_dir):
        attempts, responses = result_rows(read_segment(path))
        for rows, schema in ((attempts, ATTEMPT_SCHEMA), (responses, RESPONSE_SCHEMA)):
            for row in rows:
                _refuse(path, row, schema)
    return attempt_columns


def _refuse(path: Path, names: Iterable[str], schema: dict[str, pl.DataType]) -> None:
    unknown = sorted(set(names) - set(schema))
    if unknown:
        raise LaterFormat(
            f"{path} holds {', '.join(unknown)}, which this dutchbook does not know: a later "
            "version has written to this folder, and resuming or re-parsing it here would "
            "drop what it recorded; use that version (or a later one) to run or re-parse it "
            "(status, audit, score and report read it as it is)"
        )
