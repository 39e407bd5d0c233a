"""Lock-free readers of a run's ledger: safe while a writer runs, or after it crashed.

`status`, `reparse`, `spend`, scoring and the report read a run through these functions
and never import the writer (`engine.ledger`). Each reads the journal before listing the
shards, so a segment compacted in between is found as a shard (and deduplicated), never
missed. The layout they read (folder names, journal line kinds) is defined here and written
by `engine.ledger.Ledger`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
import polars as pl

from engine.journal import list_segments, read_journal, read_segment
from engine.records import (
    ATTEMPT_SCHEMA,
    FOREIGN_NOTE,
    ISO_FORMAT,
    RESPONSE_SCHEMA,
    attempts_frame,
    responses_frame,
)

# The journal line kinds, re-exported: their readers here and elsewhere import them from this
# module; `engine.records` defines them beside the lines' shapes (`journal_line_fault`).
from engine.records import DISPATCH as DISPATCH
from engine.records import RESULT as RESULT
from engine.retry import ANSWER_FAILURE_CAUSES, BUDGET_SPENT_PATTERN, lost_for_good
from engine.shards import list_shards, visible_shards
from providers.types import Outcome

JOURNAL = "journal"
ATTEMPTS = "attempts"
RESPONSES = "responses"
#: The plan, whose requests are the run's: rows of others are `Unplanned`.
PLAN_FILE = "plan.parquet"


def scan_shards(
    shards: Path | list[Path], schema: dict[str, pl.DataType], **options: Any
) -> pl.LazyFrame:
    """Ledger shards read as `schema`: a column added to the schema since a shard was
    written (`model_reported`) reads as null in it, so older run folders stay readable, and
    one a later version adds is left out, so this one reads that version's folders."""
    return pl.scan_parquet(
        shards, schema=schema, missing_columns="insert", extra_columns="ignore", **options
    )


def result_rows(
    records: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The attempt rows and accepted-response rows of a stream of journal records."""
    attempts: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for record in records:
        if record.get("kind") == RESULT:
            attempts.append(record["attempt"])
            if record.get("response") is not None:
                responses.append(record["response"])
    return attempts, responses


#: How the writer (`engine.ledger.Ledger`, through orjson) begins each kind of line.
_RESULT_PREFIX = b'{"kind":"result"'
_DISPATCH_PREFIX = b'{"kind":"dispatch"'


def _as_json_schema(schema: dict[str, pl.DataType], timestamp: str) -> pl.Struct:
    """A table's schema as its journal lines spell it: the timestamp an ISO string."""
    return pl.Struct({k: pl.String() if k == timestamp else v for k, v in schema.items()})


_RESULT_LINE = {
    "kind": pl.String(),
    "attempt": _as_json_schema(ATTEMPT_SCHEMA, "started_at"),
    "response": _as_json_schema(RESPONSE_SCHEMA, "accepted_at"),
}


def _utc(column: str) -> pl.Expr:
    return pl.col(column).str.to_datetime(time_unit="us", time_zone="UTC", format=ISO_FORMAT)


def result_frames(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The attempts and accepted responses of one journal segment, as tables.

    Equal to `attempts_frame`/`responses_frame` of `result_rows(read_segment(path))`, but
    the result lines are parsed by polars, outside the GIL: compaction runs in a thread
    beside the event loop, and decoding a 5,000-result segment line by line in Python held
    the GIL about 70 ms of every fold (about 10 ms this way), stolen from dispatch. Lines
    are told apart by how the writer begins them; a segment holding anything else (or a
    line polars cannot read) takes the line-by-line path, which keeps its checks (a torn
    last line skipped, `JournalError` for a corrupt one elsewhere).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if lines and not _parses(lines[-1]):
        lines.pop()  # torn by a kill (or mid-write): `read_segment` skips it too
    results = [line for line in lines if line.startswith(_RESULT_PREFIX)]
    if len(results) + sum(1 for line in lines if line.startswith(_DISPATCH_PREFIX)) == len(
        lines
    ):
        with contextlib.suppress(pl.exceptions.PolarsError):
            tables = _result_tables(results)
            if tables is not None:
                return tables
    attempts, responses = result_rows(read_segment(path))
    return attempts_frame(attempts), responses_frame(responses)


def _parses(line: bytes) -> bool:
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


#: The result lines' type, for `str.json_decode`.
_RESULT_STRUCT = pl.Struct(_RESULT_LINE)


def _result_tables(results: list[bytes]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The tables of result lines; None if one lacks its attempt (the slow path says how).

    Each line is decoded by `str.json_decode` into the line's struct: about 7 µs of CPU a
    line where `read_ndjson` of the same lines took 11 (one thread either way, both outside
    the GIL; measured on 5,000 typical result lines). Compaction runs during dispatch, when
    the client and the server already keep both cores busy, so its CPU is dispatch's.
    """
    if not results:
        return attempts_frame([]), responses_frame([])
    lines = pl.Series("line", results, dtype=pl.Binary).cast(pl.String)
    frame = lines.str.json_decode(_RESULT_STRUCT).struct.unnest()
    attempts = frame.select(pl.col("attempt").struct.unnest()).with_columns(_utc("started_at"))
    responses = (
        frame.filter(pl.col("response").is_not_null())
        .select(pl.col("response").struct.unnest())
        .with_columns(_utc("accepted_at"))
    )
    if frame["attempt"].null_count():
        return None
    return attempts, responses


def _journal_rows(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return result_rows(record for _, record in read_journal(run_dir / JOURNAL))


def _union(
    shards: list[Path],
    journal: pl.DataFrame,
    schema: dict[str, pl.DataType],
    key: list[str],
    columns: Sequence[str] | None,
    repeated: int = 0,
) -> pl.LazyFrame:
    """Shards ∪ journal, one row per `key`, narrowed to `columns` (plus the key).

    Shards are disjoint by construction (a segment's rows go only to the shard named after
    it; a redone fold rewrites that same file), so the only duplicates are journal rows of
    a segment already folded but not yet deleted. Those are removed by an anti-join of the
    (small) journal against the shard rows with the same request ids, instead of hashing
    every row of the campaign. Where a shard was copied or put back (`repeated`, rows found
    in two shards by `repeated_rows`), the shards' rows are made unique by `key` too, the
    copy in the shard of the highest id kept: the ledger's newest.
    """
    wanted = list(schema) if columns is None else key + [c for c in columns if c not in key]
    recent = journal.lazy().select(wanted).unique(subset=key, keep="first", maintain_order=True)
    if not shards:
        frame = recent
    else:
        folded = scan_shards(shards, schema).select(wanted)
        if repeated:
            folded = folded.unique(subset=key, keep="last")
        if journal.height:
            ids = journal["request_id"].unique().to_list()
            overlap = folded.filter(pl.col("request_id").is_in(ids)).select(key)
            recent = recent.join(overlap, on=key, how="anti")
        frame = pl.concat([folded, recent], how="vertical")
    return frame if columns is None else frame.select(list(columns))


_T = TypeVar("_T")

#: How many times `read_settled` reads a folder whose shards a writer replaced meanwhile.
SETTLE_TRIES = 5


def _shard_names(run_dir: Path) -> tuple[list[str], list[str]]:
    return (
        [p.name for _, p in list_shards(run_dir / ATTEMPTS)],
        [p.name for _, p in list_shards(run_dir / RESPONSES)],
    )


def read_settled(run_dir: Path, read: Callable[[], _T]) -> _T:
    """`read()` of the folder, done again when it met a shard gone because the shards changed
    while it read; other errors, and a shard missing from a folder that did not change (a
    deleted file: damage to say), are raised as they are.

    A reader lists the shards, then reads them later (lazily, at `collect`): a `reparse`
    replacing `responses/` deletes the old shards in between, and `status` and `audit` run
    beside it ended in "No such file or directory" for a shard the listing had just named.
    """
    for left in reversed(range(SETTLE_TRIES)):
        before = _shard_names(run_dir)
        try:
            return read()
        except FileNotFoundError as exc:
            if _shard_names(run_dir) == before:
                raise
            if left == 0:  # reparses back to back: polars' bare "No such file" read as damage
                raise FileNotFoundError(
                    f"the answers in {run_dir} changed {SETTLE_TRIES} times while they were "
                    "read (a `dutchbook reparse` running?); run this again once it has finished"
                ) from exc
    raise AssertionError("unreachable: the last try returns or raises")


def scan_attempts(run_dir: Path | str, columns: Sequence[str] | None = None) -> pl.LazyFrame:
    """Every attempt (shards ∪ journal, torn last line skipped), one row per (request, attempt).

    Safe while a writer is running: the journal is read before the shards are listed, so a
    segment compacted in between is found as a shard (and deduplicated), never missed.
    `columns` narrows the scan (cheaper on big runs than selecting afterwards).
    """
    run_dir = Path(run_dir)
    attempts, _ = _journal_rows(run_dir)
    shards = [p for _, p in list_shards(run_dir / ATTEMPTS)]
    key = ["request_id", "attempt"]
    return _union(shards, attempts_frame(attempts), ATTEMPT_SCHEMA, key, columns)


def attempts_in_parts(
    run_dir: Path | str, columns: Sequence[str], part_bytes: int
) -> Iterator[pl.LazyFrame]:
    """Every attempt's `columns`, in parts: the shards a few at a time, up to `part_bytes` of
    Parquet a part (a bigger shard alone), then the journal's, so that a reader of a wide
    column (`raw_text`) holds a part of it at a time, never the campaign's.

    For readers of a set (the requests with such a reply), not of counts: rows are not made
    unique (a journal line folded into a shard since it was read comes twice, and so do the
    rows of a shard copied). The journal is read before the shards are listed, so a segment
    folded in between is found as a shard, never missed."""
    run_dir = Path(run_dir)
    attempts, _ = _journal_rows(run_dir)
    parts: list[list[Path]] = []
    size = 0
    for _, shard in list_shards(run_dir / ATTEMPTS):
        shard_bytes = shard.stat().st_size
        if not parts or size + shard_bytes > part_bytes:  # the first shard starts a part
            parts.append([])
            size = 0
        parts[-1].append(shard)
        size += shard_bytes
    for part in parts:
        yield scan_shards(part, ATTEMPT_SCHEMA).select(list(columns))
    if attempts:
        yield attempts_frame(attempts).lazy().select(list(columns))


def scan_responses(run_dir: Path | str, columns: Sequence[str] | None = None) -> pl.LazyFrame:
    """Every accepted answer (shards ∪ journal), one row per request_id; `columns` narrows."""
    run_dir = Path(run_dir)
    _, responses = _journal_rows(run_dir)
    shards = visible_shards(run_dir / RESPONSES)
    return _union(shards, responses_frame(responses), RESPONSE_SCHEMA, ["request_id"], columns)


def scan_ledger(
    run_dir: Path | str,
    attempt_columns: Sequence[str] | None = None,
    response_columns: Sequence[str] | None = None,
    repeats: Repeats | None = None,
    unplanned: Unplanned | None = None,
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Attempts and responses from ONE read of the journal, for readers that compare them.

    Response shards are listed before attempt shards, and compaction writes a segment's
    attempts shard before its responses shard, so every response seen has its attempt
    seen too (while a writer runs, attempts may run slightly ahead, never behind).
    `repeats` (`repeated_rows`, for readers that count) makes rows found in two shards
    count once; `unplanned` (`unplanned_rows`, likewise) leaves out the rows of requests the
    plan does not hold, where it found any.
    """
    run_dir = Path(run_dir)
    repeats = repeats or Repeats()
    attempts, responses = _journal_rows(run_dir)
    response_shards = visible_shards(run_dir / RESPONSES)
    attempt_shards = [p for _, p in list_shards(run_dir / ATTEMPTS)]
    frames = (
        _union(
            attempt_shards,
            attempts_frame(attempts),
            ATTEMPT_SCHEMA,
            ["request_id", "attempt"],
            attempt_columns,
            repeats.attempts,
        ),
        _union(
            response_shards,
            responses_frame(responses),
            RESPONSE_SCHEMA,
            ["request_id"],
            response_columns,
            repeats.answers,
        ),
    )
    if unplanned is None or not unplanned.rows:
        return frames
    planned = _planned_keys(run_dir)
    return _in_plan(frames[0], planned), _in_plan(frames[1], planned)


@dataclass(frozen=True)
class Repeats:
    """Rows of a run's shards that another row of them already holds: `answers` (a request
    id twice in `responses/`) and `attempts` (a request's attempt twice in `attempts/`), and
    the `shards` (`responses/part-….parquet`, …) that hold them. The ledger writes each row to
    one shard, so these are none unless a shard was copied, or one moved aside before a
    reparse was put back beside the shard the reparse wrote: then `status` and the audit
    counted each of its answers twice ("56/28, 200%") and its retries too."""

    answers: int = 0
    attempts: int = 0
    shards: tuple[str, ...] = ()


def repeated_rows(run_dir: Path | str, *, answers_only: bool = False) -> Repeats:
    """The `Repeats` of `run_dir`'s shards (none read where a folder has fewer than two);
    `answers_only`: of `responses/` alone (what scoring reads: `runs.lost_answers`).

    Counted on a 64-bit hash of each row's key, then, only where one is found, again on the
    key itself: on 365,100 answers and 430,000 attempts in 37 shards each, about 30 and 35
    ms, where making every row unique took 70 and 150 ms; `status` there went 0.38 -> 0.41 s
    and the audit 0.87 -> 0.90 s (medians of 8 alternating runs, no shard repeated).
    """
    run_dir = Path(run_dir)
    answers = _repeated(visible_shards(run_dir / RESPONSES), RESPONSE_SCHEMA, ["request_id"],
                        RESPONSES)  # fmt: skip
    if answers_only:
        return Repeats(answers[0], 0, answers[1])
    attempts = _repeated([p for _, p in list_shards(run_dir / ATTEMPTS)], ATTEMPT_SCHEMA,
                         ["request_id", "attempt"], ATTEMPTS)  # fmt: skip
    return Repeats(answers[0], attempts[0], answers[1] + attempts[1])


def _repeated(
    shards: list[Path], schema: dict[str, pl.DataType], key: list[str], folder: str
) -> tuple[int, tuple[str, ...]]:
    """Rows of `shards` beyond the first of their `key`, and the shards holding those keys."""
    if len(shards) < 2:
        return 0, ()
    scan = scan_shards(shards, schema)
    hashed = pl.struct(key).hash(0) if len(key) > 1 else pl.col(key[0]).hash(0)
    counts = scan.select(pl.len(), hashed.n_unique()).collect().row(0)
    if counts[0] == counts[1]:
        return 0, ()
    rows = (
        scan_shards(shards, schema, include_file_paths="_shard")
        .select(*key, "_shard")
        .filter(pl.struct(key).is_duplicated())
        .collect()
    )
    extra = rows.height - rows.select(key).n_unique()
    names = sorted({f"{folder}/{Path(path).name}" for path in rows["_shard"]})
    return extra, tuple(names) if extra else ()


@dataclass(frozen=True)
class Unplanned:
    """Rows of a run's ledger for requests its `plan.parquet` does not hold: `answers` (in
    `responses/` or the journal) and `attempts` (in `attempts/` or the journal), the files
    holding each (`answer_files`, `attempt_files`: `responses/part-….parquet`,
    `journal/seg-….jsonl`, …; `files`, both), and of those `only` the ones holding nothing
    else. The ledger records only the plan's requests, so these
    are none unless a shard of another run was copied in, a request id was damaged on disk
    or a journal line written by hand: `status` read "accepted 136/76 (178.9%)" of a
    folder holding another run's shard, and counted an answer whose id was damaged as
    accepted, and its request's reply as an answer lost."""

    answers: int = 0
    attempts: int = 0
    only: tuple[str, ...] = ()
    answer_files: tuple[str, ...] = ()
    attempt_files: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return self.answers + self.attempts

    @property
    def files(self) -> tuple[str, ...]:
        """Every file holding such rows, sorted: those of the answers and of the attempts."""
        return tuple(sorted({*self.answer_files, *self.attempt_files}))


def _request_key() -> pl.Expr:
    """A 64-bit hash of the request id: joins on it hold a tenth of the strings' memory
    (`lost_answers`); a collision could only hide an unplanned row, about once in 10^8
    folders of the paper's size."""
    return pl.col("request_id").hash(0).alias("_key")


def _planned_keys(run_dir: Path) -> pl.LazyFrame:
    return pl.scan_parquet(run_dir / PLAN_FILE).select(_request_key())


def _in_plan(frame: pl.LazyFrame, planned: pl.LazyFrame) -> pl.LazyFrame:
    """`frame`'s rows whose request the plan holds (a semi-join on the key, the plan's ids
    never held as strings)."""
    columns = frame.collect_schema().names()
    keyed = frame.with_columns(_request_key())
    return keyed.join(planned, on="_key", how="semi").select(columns)


def unplanned_rows(run_dir: Path | str, *, answers_only: bool = False) -> Unplanned:
    """The `Unplanned` rows of `run_dir` (none where it has no plan); `answers_only`: of
    `responses/` and the journal's answers alone (what scoring reads: `runs.lost_answers`).

    One streamed anti-join of the shards' request ids (each row's file named) against the
    plan's, on a 64-bit hash of the id, and the journal's segments read one at a time; only
    the rows outside are kept, counted once by their key (a segment folded but not yet
    deleted, or a shard copied, holds them twice). On 365,100 planned requests, answers and
    430,100 attempts in 37 shards each, about 80 ms and 60 MB above the baseline, freed
    before `status` reads the rest, whose peak (about 290 MB there) it does not raise."""
    run_dir = Path(run_dir)
    if not (run_dir / PLAN_FILE).is_file():
        return Unplanned()
    parts = _unplanned_parts(run_dir, _planned_keys(run_dir))
    if answers_only:
        parts[ATTEMPTS] = []
    found = {
        folder: pl.concat(frames).collect(engine="streaming")
        for folder, frames in parts.items()
        if frames
    }
    key = {ATTEMPTS: ["_key", "attempt"], RESPONSES: ["_key"]}
    counts = {folder: found[folder].select(key[folder]).n_unique() if folder in found else 0
              for folder in key}  # fmt: skip
    held = {folder: tuple(sorted(set(found[folder]["_file"]))) if folder in found else ()
            for folder in key}  # fmt: skip
    return Unplanned(counts[RESPONSES], counts[ATTEMPTS], _holding_nothing_else(run_dir, found),
                     held[RESPONSES], held[ATTEMPTS])  # fmt: skip


def _unplanned_parts(run_dir: Path, planned: pl.LazyFrame) -> dict[str, list[pl.LazyFrame]]:
    """Per folder (`attempts`, `responses`), the queries of its rows outside the plan: the
    journal's segments', then the shards'."""
    parts: dict[str, list[pl.LazyFrame]] = {ATTEMPTS: [], RESPONSES: []}
    for _, segment in list_segments(run_dir / JOURNAL):
        name = pl.lit(f"{JOURNAL}/{segment.name}").alias("_file")
        for folder, rows in zip((ATTEMPTS, RESPONSES), result_frames(segment), strict=True):
            parts[folder].append(_outside(rows.lazy(), planned, name, folder))
    shards = {ATTEMPTS: [p for _, p in list_shards(run_dir / ATTEMPTS)],
              RESPONSES: visible_shards(run_dir / RESPONSES)}  # fmt: skip
    for folder, schema in ((ATTEMPTS, ATTEMPT_SCHEMA), (RESPONSES, RESPONSE_SCHEMA)):
        if shards[folder]:
            scan = scan_shards(shards[folder], schema, include_file_paths="_file")
            name = pl.lit(f"{folder}/") + pl.col("_file").str.extract(r"([^/]+)$")
            parts[folder].append(_outside(scan, planned, name.alias("_file"), folder))
    return parts


def _outside(
    rows: pl.LazyFrame, planned: pl.LazyFrame, name: pl.Expr, folder: str
) -> pl.LazyFrame:
    """The key (and attempt) and file name of `rows` whose request the plan does not hold."""
    attempt = pl.col("attempt") if folder == ATTEMPTS else pl.lit(0)
    return rows.select(_request_key(), attempt.cast(pl.Int64).alias("attempt"), name).join(
        planned, on="_key", how="anti"
    )


def _holding_nothing_else(run_dir: Path, rows: dict[str, pl.DataFrame]) -> tuple[str, ...]:
    """Of the shards `rows` name, those whose every row is one of them (its footer's count):
    a shard that holds nothing else can be moved out of the folder whole. A journal segment
    is never among them: the next writer folds it into the shards."""
    only = []
    for frame in rows.values():
        for name, n in frame.group_by("_file").agg(pl.len()).iter_rows():
            if name.startswith(f"{JOURNAL}/"):
                continue
            if n >= pl.scan_parquet(run_dir / name).select(pl.len()).collect().item():
                only.append(name)
    return tuple(sorted(only))


def accepted_ids(run_dir: Path | str) -> set[str]:
    """Request ids with an accepted answer: resume skips exactly these.

    Reads only the `request_id` column, a shard at a time, and lets the set deduplicate
    (about 0.4 s for a million accepted requests here). A set of a million ids costs
    ~190 MB; a long-running process should ask `Ledger.accepted_series` about the ids it
    is handling instead. The journal is read before the shards are listed, so a segment
    folded in between is found as a shard, never missed.
    """
    run_dir = Path(run_dir)
    _, responses = _journal_rows(run_dir)
    ids = {row["request_id"] for row in responses}
    for shard in visible_shards(run_dir / RESPONSES):
        scan = scan_shards(shard, RESPONSE_SCHEMA).select("request_id")
        ids.update(scan.collect().get_column("request_id").to_list())
    return ids


def lost_answers(run_dir: Path | str) -> int:
    """Requests with an attempt recorded `ok` and no answer in the ledger: their answers were
    accepted, so `responses/` lost them (a deleted or moved file), while the reply is kept
    in the attempt. Nothing else removes an answer but `dutchbook reparse`: with a stricter
    parser than the run's, which the caller rules out first (`runs.pipeline`), or with the
    run's own where it rejects a reply (`engine.reparse.lost_despite_reparse` then counts
    only those its parser takes).

    Dispatch skips what `responses/` holds, so a resume would ask these again and pay for
    them. One streamed anti-join, never a Python loop over the ids, on a 64-bit hash of the
    id rather than the string: on 365,100 answers and attempts in 37 shards each, 0.05 s and
    about 65 MB above polars' own, where the strings took twice the memory. A collision
    could only hide a lost answer, about once in 10^8 such folders. Requests the plan does
    not hold are left out (`Unplanned`).
    """
    run_dir = Path(run_dir)
    attempts, responses = scan_ledger(run_dir, ["request_id", "outcome"], ["request_id"])
    accepted = attempts.filter(pl.col("outcome") == "ok").select(_request_key()).unique()
    missing = accepted.join(responses.select(_request_key()), on="_key", how="anti")
    count = int(missing.select(pl.len()).collect(engine="streaming").item())
    if not count or not (run_dir / PLAN_FILE).is_file():
        return count
    # Only where some are missing: an `ok` attempt of a request the plan does not hold
    # (`unplanned_rows`) is no answer of this run, and no reparse rebuilds it.
    planned = missing.join(_planned_keys(run_dir), on="_key", how="semi").select(pl.len())
    return int(planned.collect(engine="streaming").item())


def found_among(shards: list[Path], request_ids: pl.Series) -> pl.Series:
    """Those of `request_ids` present in the `request_id` column of `shards`.

    One pass over that column, with the `is_in` filter pushed into the Parquet reader so
    that only matches are kept: peak memory grows with the number of ids asked about, not
    with the shards. (Matching on a 64-bit hash first was no faster, measured on a million
    ids, 26 vs 28 ms per 10,000 asked.)
    """
    if not shards or request_ids.is_empty():
        return pl.Series("request_id", [], dtype=pl.String)
    return (
        scan_shards(shards, RESPONSE_SCHEMA)
        .select("request_id")
        .filter(pl.col("request_id").is_in(request_ids.unique().implode()))
        .collect()
        .get_column("request_id")
    )




def attempt_counts(
    run_dir: Path | str, request_ids: Collection[str] | None = None
) -> dict[str, int]:
    """Highest attempt number per request so far (recorded results and pending dispatches).

    `request_ids` limits the answer to those requests (the filter is pushed into the
    Parquet scan, so a batch of a large campaign reads little). No deduplication needed:
    a maximum does not change when a row is seen twice.
    """
    run_dir = Path(run_dir)
    wanted = None if request_ids is None else set(request_ids)
    recent: dict[str, int] = {}
    for _, record in read_journal(run_dir / JOURNAL):
        kind = record.get("kind")
        row = record if kind == DISPATCH else record.get("attempt") if kind == RESULT else None
        if row is not None and (wanted is None or row["request_id"] in wanted):
            rid = row["request_id"]
            recent[rid] = max(recent.get(rid, 0), int(row["attempt"]))
    counts: dict[str, int] = {}
    shards = [p for _, p in list_shards(run_dir / ATTEMPTS)]
    if shards:
        scan = scan_shards(shards, ATTEMPT_SCHEMA).select("request_id", "attempt")
        if wanted is not None:
            scan = scan.filter(pl.col("request_id").is_in(list(wanted)))
        done = scan.group_by("request_id").agg(pl.col("attempt").max()).collect()
        counts = dict(zip(done["request_id"].to_list(), done["attempt"].to_list(), strict=True))
    for rid, attempt in recent.items():
        counts[rid] = max(counts.get(rid, 0), attempt)
    return counts


def budget_spent(answer_budget: int | None) -> pl.Expr:
    """Per request (in a `group_by` of its attempts, which need `attempt`, `outcome` and
    `detail`), whether its answer-failure budget is spent. With the budget in force, counted
    as `failure_counts` counts before a run asks, so a budget lowered on a resume counts the
    requests that run did not ask; without it, as the request's last attempt said
    (`BUDGET_SPENT_PATTERN`)."""
    if answer_budget is None:
        return pl.col("detail").sort_by("attempt").last().str.contains(BUDGET_SPENT_PATTERN)
    charged = pl.col("outcome").is_in(list(ANSWER_FAILURE_CAUSES)) & ~_foreign()
    return charged.sum() >= answer_budget


def damaged_for_good() -> pl.Expr:
    """Per request (in a `group_by` of its attempts, which need `outcome`), whether damaged
    batch results lost its line often enough that it is given up for good
    (`engine.retry.lost_for_good`): no run asks it again."""
    return lost_for_good((pl.col("outcome") == Outcome.DAMAGED_BATCH_RESULT.value).sum())


def lost_to_damage(run_dir: Path | str, model: str | None = None) -> frozenset[str]:
    """The requests of `model` (of every model: None) given up for good as damaged batch
    results lost their line (`damaged_for_good`), which a resume neither feeds its lanes
    (`engine.dispatch`) nor counts as lines to cut (`engine.batch_lane.lines_to_cut`). Read
    from the damaged attempts alone, so it holds as many ids as such requests, never the
    plan's. A request answered after all may be among them: readers ask only unanswered ones."""
    damaged = pl.col("outcome") == Outcome.DAMAGED_BATCH_RESULT.value
    if model is not None:
        damaged = damaged & (pl.col("model") == model)
    frame = (
        scan_attempts(run_dir, ["request_id", "model", "outcome"])
        .filter(damaged)
        .group_by("request_id")
        .agg(damaged_for_good().alias("lost"))
        .filter(pl.col("lost"))
        .collect()
    )
    return frozenset(frame["request_id"].to_list())


def _foreign() -> pl.Expr:
    """Whether an attempt's reply was not in its provider's format (`FOREIGN_NOTE`): never
    charged to the answer-failure budget."""
    return pl.col("detail").fill_null("").str.ends_with(FOREIGN_NOTE)


def failure_counts(
    run_dir: Path | str, request_ids: Collection[str], outcomes: Collection[str]
) -> dict[str, int]:
    """Recorded attempts per request whose outcome is one of `outcomes` (journal and shards),
    leaving out replies not in their provider's format (`detail` ending in `FOREIGN_NOTE`).

    A retry budget that must last across resumes (answer failures) is counted from here. A
    row may be both in the journal and in a shard until compaction: attempts are counted once
    by their (request, attempt) pair.
    """
    run_dir = Path(run_dir)
    wanted, kinds = set(request_ids), set(outcomes)
    seen: set[tuple[str, int]] = set()
    for _, record in read_journal(run_dir / JOURNAL):
        row = record.get("attempt") if record.get("kind") == RESULT else None
        if (
            row is not None and row["request_id"] in wanted and row.get("outcome") in kinds
            and not str(row.get("detail") or "").endswith(FOREIGN_NOTE)
        ):  # fmt: skip
            seen.add((row["request_id"], int(row["attempt"])))
    shards = [p for _, p in list_shards(run_dir / ATTEMPTS)]
    if shards and wanted:
        found = (
            scan_shards(shards, ATTEMPT_SCHEMA)
            .select("request_id", "attempt", "outcome", "detail")
            .filter(
                pl.col("request_id").is_in(list(wanted)) & pl.col("outcome").is_in(list(kinds))
                & ~_foreign()
            )
            .collect()
        )
        seen.update(zip(found["request_id"].to_list(), found["attempt"].to_list(), strict=True))
    counts: dict[str, int] = {}
    for rid, _ in seen:
        counts[rid] = counts.get(rid, 0) + 1
    return counts
