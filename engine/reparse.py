"""Re-parse a run: rebuild its accepted answers from the raw replies it kept, no new calls.

Every reply a model sent is archived in the attempts table (`raw_text`: accepted
attempts and those rejected as `invalid_response`, or as `truncated` when a cut-off reply
did not parse). Re-parsing walks each request's
replies in attempt order and accepts the FIRST one the chosen parser takes, which is what
a run with that parser would have accepted from the same replies. The answer therefore
depends only on the replies and the parser, never on earlier re-parses: going to
lenient and back to strict restores the strict answers.

The attempts table is history and is left as it was (an attempt once rejected keeps its
`invalid_response` outcome). Only the responses are rebuilt, and they replace the old
ones atomically: one new shard, committed by rename through an intent file that readers
honour, then the old shards are deleted (`engine.shards.replace_all`). The run must not
be live: re-parse takes the ledger's lock like any writer.

Replies are read into memory for the rebuild (one row per reply, raw text included):
fine for a paper-scale run (~365k replies of a few hundred bytes), not streaming.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from engine.answers import AnswerError, parse_answer
from engine.durable import append_record_line, append_record_line_durably, read_record_lines
from engine.ledger import Ledger
from engine.records import ResponseRecord, responses_frame
from engine.runlock import lock_held, read_pid
from engine.scan import (
    JOURNAL,
    attempts_in_parts,
    budget_spent,
    scan_attempts,
    scan_ledger,
    scan_responses,
)
from providers.types import Outcome

PLAN = "plan.parquet"
# Replies a parser decided on: accepted, rejected as invalid, or cut off and unparseable.
REPLY_OUTCOMES = [str(Outcome.OK), str(Outcome.INVALID_RESPONSE), str(Outcome.TRUNCATED)]
_META = ["request_id", "model", "arm", "unit", "pass", "events", "keys"]
#: What an answers' digest covers: the values scoring reads, and the reply that gave them
#: (`_compare`'s "unchanged"). The rest of a row (`raw_text`, `accepted_at`, tokens) no score
#: reads, and `accepted_at` is rebuilt from the reply's own times by a reparse.
_DIGEST_COLUMNS = ["request_id", "attempts", "values"]


#: Two lines per reparse: `{"at", "parser", "begun": true, "accepted_before",
#: "accepted_after"}` before its answers replace the folder's, then, once they have, `at`
#: and `ReparseSummary.to_dict()` (its `parser` first). A begun line with no line after it
#: is a reparse killed or failed on the way, whose answers may or may not be in the folder
#: (`last_reparse`). Folders of earlier versions hold only the second kind, or begun lines
#: without the counts (`fewest_answers`).
REPARSES_FILE = Path("logs") / "reparses.jsonl"


@dataclass(frozen=True)
class LastReparse:
    """The last reparse of a folder: its parser, when, and whether it said it finished."""

    parser: str
    at: str | None
    finished: bool


@dataclass
class ReparseSummary:
    """What changed; `newly_accepted` are requests the new parser rescued."""

    parser: str
    requests_with_replies: int = 0
    accepted_before: int = 0
    accepted_after: int = 0
    newly_accepted: int = 0
    newly_rejected: int = 0
    values_changed: int = 0
    unchanged: int = 0
    skipped_without_keys: int = 0
    #: Answers of requests the plan does not hold, left out of the new answers (`_metadata`);
    #: `accepted_before` and the comparison count only the others.
    unplanned_left_out: int = 0
    still_rejected_by_subcause: dict[str, int] = field(default_factory=dict)
    #: `answers_digest` of the folder's answers before and after (`runs.scored_from` keeps
    #: scores that a round trip brought back to their answers).
    answers_digest_before: str = ""
    answers_digest_after: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _metadata(run_dir: Path, old: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per request: what was asked (model, arm, unit, pass, events, keys), from the plan
    where the folder has one: a request it does not hold is none of this run's (a shard of
    another run copied in, an id damaged on disk), which was rebuilt from its own answer row
    and kept for ever ("accepted 77/76" after a reparse): its replies are skipped
    (`skipped_without_keys`) and its answer left out (`unplanned_left_out`). From the
    answers' own rows only in a folder without a plan."""
    plan_path = run_dir / PLAN
    meta = (
        pl.scan_parquet(plan_path).select(_META).collect()
        if plan_path.exists()
        else old.select(_META).unique("request_id", keep="first")
    )
    return {row["request_id"]: row for row in meta.iter_rows(named=True)}


def _rebuild(
    replies: pl.DataFrame,
    meta: dict[str, dict[str, Any]],
    old: dict[str, dict[str, Any]],
    parser: str,
    summary: ReparseSummary,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    rejected: Counter[str] = Counter()
    current: str | None = None
    settled = False
    last_error: str | None = None

    def close_request() -> None:
        if current is not None and not settled and last_error is not None:
            rejected[last_error] += 1

    for reply in replies.iter_rows(named=True):
        rid = reply["request_id"]
        if rid != current:
            close_request()
            current, settled, last_error = rid, False, None
            summary.requests_with_replies += 1
            if rid not in meta:
                # An answer left out is counted as that (`unplanned_left_out`) alone: its
                # own row is among the replies, and `--json` counted it in both.
                summary.skipped_without_keys += rid not in old
                settled = True
        if settled:
            continue
        asked = meta[rid]
        keys = list(asked["keys"])
        try:
            parsed = parse_answer(reply["raw_text"], keys, parser)
        except AnswerError as exc:
            last_error = exc.subcause
            continue
        settled = True
        before = old.get(rid)
        same_attempt = before is not None and before["attempts"] == reply["attempt"]
        arrived = reply["started_at"] + timedelta(milliseconds=reply["elapsed_ms"] or 0.0)
        record = ResponseRecord(
            request_id=rid, model=asked["model"], arm=asked["arm"], unit=asked["unit"],
            pass_=int(asked["pass"]), events=list(asked["events"]), keys=keys,
            raw_text=reply["raw_text"], values=[parsed[k] for k in keys],
            finish_reason=reply["finish_reason"], tokens_in=reply["tokens_in"],
            tokens_out=reply["tokens_out"], attempts=int(reply["attempt"]),
            accepted_at=before["accepted_at"] if same_attempt and before else arrived,
        )
        rows.append(record.to_row())
    close_request()
    summary.still_rejected_by_subcause = dict(sorted(rejected.items()))
    return rows


def answers_digest(frame: pl.DataFrame) -> str:
    """A digest of a responses frame's content (`_DIGEST_COLUMNS`), whatever its row order or
    shards: the sorted row hashes, hashed. A reparse has both frames in memory, so it costs
    no read (about 50 ms for 365,000 answers). Polars' row hash is stable within one polars
    version only, so the version is part of the digest: across an upgrade the same answers
    read as changed (a score again), never the other way."""
    hashes = frame.select(_DIGEST_COLUMNS).hash_rows(seed=0).sort()
    return f"polars {pl.__version__}:{hashlib.sha256(hashes.to_numpy().tobytes()).hexdigest()}"


def _compare(old: dict[str, dict[str, Any]], new: pl.DataFrame, summary: ReparseSummary) -> None:
    after = {r["request_id"]: r for r in new.iter_rows(named=True)}
    summary.accepted_before = len(old)
    summary.accepted_after = len(after)
    summary.newly_accepted = len(after.keys() - old.keys())
    summary.newly_rejected = len(old.keys() - after.keys())
    for rid in after.keys() & old.keys():
        a, b = after[rid], old[rid]
        if a["values"] == b["values"] and a["attempts"] == b["attempts"]:
            summary.unchanged += 1
        else:
            summary.values_changed += 1


def _say_begun(run_dir: Path, summary: ReparseSummary) -> None:
    """Record that a reparse with `summary.parser` is about to replace the answers, durably,
    or raise; with how many answers the folder holds now and will hold after it
    (`accepted_before`, `accepted_after`: whichever it holds if the reparse stops on the way,
    `fewest_answers` knows how many at least).

    Said first: a kill between the replacement and the line after it would otherwise leave
    the new parser's answers with no word of it (and a resume with the old parser would pay
    again for every reply the new one rejected). Unlike the best-effort record files, a line
    that cannot be written stops the reparse before the answers change: skipped (a `logs/`
    this process may not write in), it left strict's answers under a lenient run's name, which
    `audit`, `score` and `report` then called lost and told the user to undo."""
    line = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"), "parser": summary.parser,
        "begun": True, "accepted_before": summary.accepted_before,
        "accepted_after": summary.accepted_after,
    }
    append_record_line_durably(run_dir / REPARSES_FILE, line)


def reparse(run_dir: Path | str, parser: str) -> ReparseSummary:
    """Rebuild `responses/` from the archived replies under `parser` ("strict"|"lenient").

    Raises `engine.ledger.LedgerBusy` if a run is writing this folder.
    """
    if parser not in ("strict", "lenient"):
        raise ValueError(f"parser must be 'strict' or 'lenient', not {parser!r}")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    summary = ReparseSummary(parser=parser)
    # The lock, recovery and a full compaction, without a pid file: a reparse is no run
    # (`runs.folder_lock`). Its own, written over a dead run's and cleared, erased that the
    # run died; and killed, it was left naming the reparse, which `status` called a run that
    # died ever after (and a later reparse kept as one).
    with Ledger.open(run_dir, pid_file=False) as ledger:
        old_frame = scan_responses(run_dir).collect()
        old = {r["request_id"]: r for r in old_frame.iter_rows(named=True)}
        columns = [
            "request_id", "attempt", "raw_text", "finish_reason", "tokens_in", "tokens_out",
            "started_at", "elapsed_ms",
        ]
        archived = (
            scan_attempts(run_dir)
            .filter(pl.col("outcome").is_in(REPLY_OUTCOMES) & pl.col("raw_text").is_not_null())
            .select(columns)
        )
        # An accepted reply is archived in its attempt row; the response row is a fallback
        # for ledgers written before that was so.
        answered = old_frame.lazy().select(
            "request_id", pl.col("attempts").alias("attempt"), "raw_text", "finish_reason",
            "tokens_in", "tokens_out", pl.col("accepted_at").alias("started_at"),
            pl.lit(0.0).alias("elapsed_ms"),
        )
        replies = (
            pl.concat([archived, answered], how="vertical")
            .unique(["request_id", "attempt"], keep="first", maintain_order=True)
            .sort("request_id", "attempt")
            .collect()
        )
        meta = _metadata(run_dir, old_frame)
        rows = _rebuild(replies, meta, old, parser, summary)
        new_frame = responses_frame(rows)
        planned = {rid: row for rid, row in old.items() if rid in meta}
        summary.unplanned_left_out = len(old) - len(planned)
        _compare(planned, new_frame, summary)
        summary.answers_digest_before = answers_digest(old_frame)
        summary.answers_digest_after = answers_digest(new_frame)
        _say_begun(run_dir, summary)
        ledger.replace_responses(new_frame)
        # Which parser made the answers now in the folder: the report's provenance reads it.
        append_record_line(
            run_dir / REPARSES_FILE,
            {"at": datetime.now(UTC).isoformat(timespec="seconds"), **summary.to_dict()},
        )
    return summary


def read_reparses(run_dir: Path | str) -> list[dict[str, Any]]:
    """Every recorded reparse line of a run folder, oldest first (none before this was
    kept): begun lines and finished ones (`REPARSES_FILE`)."""
    return read_record_lines(Path(run_dir) / REPARSES_FILE)


def last_reparse(run_dir: Path | str) -> LastReparse | None:
    """The folder's last reparse, None if it never had one. `finished` is False when its
    begun line is the last: it was stopped between saying it would replace the answers and
    saying it had, so the answers are the ones before it or its own (run it again)."""
    lines = _parser_lines(run_dir)
    return _as_last(lines[-1]) if lines else None


def _parser_lines(run_dir: Path | str) -> list[dict[str, Any]]:
    """The reparse lines that name their parser (a torn or foreign line names none)."""
    return [r for r in read_reparses(run_dir) if isinstance(r.get("parser"), str)]


def _as_last(line: dict[str, Any]) -> LastReparse:
    at = line.get("at")
    return LastReparse(line["parser"], at if isinstance(at, str) else None, not line.get("begun"))


def unfinished_line(run_dir: Path | str) -> str | None:
    """What every command says of a folder whose last reparse did not finish (its begun
    line is the last, `last_reparse`), None otherwise: the one thing to do, run the same
    reparse again. Its answers are whole either way (`engine.shards.replace_all` commits the
    new shard by one rename), but whose they are, its parser's or the ones before, is not
    recorded; the kept replies rebuild them without a call, so nothing is lost."""
    last = last_reparse(run_dir)
    if last is None or last.finished or _under_way(run_dir, last):
        return None
    begun = f" begun at {last.at}" if last.at else ""
    return (
        f"a `dutchbook reparse --parser {last.parser}`{begun} did not finish, so the answers "
        f"may be its own or the ones before it: run `dutchbook reparse {run_dir} --parser "
        f"{last.parser}` again (no API call; it rebuilds them from the kept replies)"
    )


def _under_way(run_dir: Path | str, last: LastReparse) -> bool:
    """Whether the reparse whose begun line is `last` is still running, not unfinished: a
    process holds the ledger's lock (`engine.runlock.lock_held`), and it is no run (a run is
    the one writer with a pid file, and one live now started after that line, which it would
    otherwise have finished). The reparse writes no pid file: killed, its own read as a run
    that died. `status` beside a running reparse shows no command to run again."""
    if last.at is None:
        return False
    writer = read_pid(run_dir)  # first: a live run holds the lock, and is not probed
    return (writer is None or not writer.get("alive")) and lock_held(Path(run_dir) / JOURNAL)


def parser_in_force(run_dir: Path | str, spec_parser: str | None) -> str | None:
    """The parser that made the answers now in the folder: its last reparse's, else the
    spec's (`spec_parser`, None when unknown). What a reparse that rebuilds lost answers
    must be given, so that it rebuilds these answers and no others."""
    last = last_reparse(run_dir)
    return last.parser if last is not None else spec_parser


def _lines_maybe_in_force(run_dir: Path | str) -> list[dict[str, Any]]:
    """The reparse lines whose answers the folder may hold, the last first: the last line
    and, while it is a begun line (its reparse did not finish), each one before it back to
    the last finished line, that one included. Empty when the folder was never reparsed."""
    chain: list[dict[str, Any]] = []
    for line in reversed(_parser_lines(run_dir)):
        chain.append(line)
        if not line.get("begun"):  # finished: the answers before it are gone
            break
    return chain


def parsers_maybe_in_force(run_dir: Path | str) -> list[str]:
    """The parsers of the reparses whose answers the folder may hold, the last first: the
    last reparse's, and while it did not finish (`last_reparse`), each one's before it back
    to the last that finished (none finished: the run's own answers may be there too, whose
    parser is the spec's and not listed). Empty when the folder was never reparsed.

    A lenient reparse back from a strict one, stopped on the way, gives `["lenient",
    "strict"]`: the answers may still be strict's, without those strict rejected."""
    return [line["parser"] for line in _lines_maybe_in_force(run_dir)]


def ok_means_accepted(run_dir: Path | str, spec_parser: str | None) -> bool:
    """Whether every reply recorded `ok` is one the parser in force accepts: no reparse, or
    every reparse whose answers the folder may hold was lenient (which takes all that strict
    takes, `parsers_maybe_in_force`), or the run's own parser was strict. Only a strict
    reparse of a lenient run (or of a run whose parser is unknown, `spec_parser` None) may
    have rejected them, its answers the folder's or, a lenient reparse back from it not
    finished, maybe still the folder's; otherwise such a reply without an answer is an answer
    lost from `responses/` (`engine.audit.classify`). Where it is False, the answers lost
    are `lost_after_reparse`'s."""
    return spec_parser == "strict" or all(
        parser == "lenient" for parser in parsers_maybe_in_force(run_dir)
    )


def _count(value: object) -> int | None:
    """A count of answers read from a reparse line; None where it holds none (a line of an
    earlier build, or edited by hand)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def fewest_answers(run_dir: Path | str) -> int | None:
    """The fewest answers the folder may hold by its reparse lines (`_lines_maybe_in_force`),
    None where they do not say (never reparsed, or a count missing from a line). A finished
    reparse left `accepted_after` answers; one that did not finish left those it found
    (`accepted_before`, in its begun line) or its own (`accepted_after`), and that one's line
    is not the first only where the ones before it did not finish either, whose own may be
    there. Nothing but a reparse removes an answer: dispatch adds answers, compaction moves
    them from the journal into shards, and a resume that could add some to a folder whose
    answers may be strict's with a lenient spec is refused (`resume_refusal`). So a folder
    holding fewer has lost at least the difference.

    A lenient reparse's begun line of an earlier build, which counted nothing, is passed
    over: from the same replies lenient answers every request strict or the run answered,
    so its answers are never the fewest."""
    chain = _lines_maybe_in_force(run_dir)
    counts = [
        _count(line.get("accepted_after"))
        for line in chain
        if not (line.get("begun") and line["parser"] == "lenient" and "accepted_after" not in line)
    ]
    if chain and chain[-1].get("begun"):  # none finished: the answers the first one found
        counts.append(_count(chain[-1].get("accepted_before")))
    known = [count for count in counts if count is not None]
    return min(known) if known and len(known) == len(counts) else None


_OK = pl.col("outcome") == str(Outcome.OK)

#: Parquet bytes of attempt shards whose replies `lost_after_reparse` reads at a time: on a
#: synthetic paper-scale folder (365,120 replies of ~450 characters in 37 shards, 64 MB, all
#: their answers lost), nine parts, its peak 240 MB above the baseline; parts of 32 MB, no
#: faster (the parse of each reply is most of the time), peaked at 500.
_LOST_PART_BYTES = 8 * 2**20


def lost_after_reparse(run_dir: Path | str, held: int | None = None) -> pl.DataFrame:
    """The requests (`request_id`) whose answer `responses/` lost where a strict reparse's
    answers may be the folder's (`ok_means_accepted` False), where a reply recorded `ok` with
    no answer is mostly one strict rejected, no loss. Empty unless the folder holds fewer
    answers (`held`, counted when None) than the fewest its reparses left (`fewest_answers`):
    then the lost ones are those replies that strict's own parser takes (strict answered
    them, as a reparse of either parser would), each parsed with its plan's keys.

    The count first, the parse only where it found a loss: the count costs `status` nothing
    it does not read already, where parsing every reply strict rejected (tens of thousands
    at paper scale, read back with their text) would slow every `status` of a strictly
    reparsed folder. Then the requests without an answer, by id alone (`_unanswered`), and
    of the replies only theirs kept and parsed, a few shards at a time (`attempts_in_parts`,
    the next part read while one is parsed: `_collected_ahead`); all of them at once, their
    text, keys and each row's Python objects together, took 2.4 s and 580 MB above the
    baseline where 365,120 answers were lost (a synthetic paper-scale folder), 1.6 s and
    240 MB so. The parse names the requests, so that `status`, the audit and the refusals
    of `score`, `repair`, `report` and a resume count the same ones. Not seen: a loss that
    leaves at least the fewest answers (the lenient answers of an unfinished reparse back
    from strict, a shard of them lost: `unfinished_line` says to run that reparse again,
    which rebuilds them all); lost answers strict rejects (of those same lenient answers);
    and replies kept only in their lost answer row (old ledgers)."""
    run_dir = Path(run_dir)
    none = pl.Series("request_id", [], dtype=pl.String)
    fewest = fewest_answers(run_dir)
    if fewest is None or not (run_dir / PLAN).exists():
        return none.to_frame()
    if held is None:
        ids = scan_responses(run_dir, ["request_id"]).select(pl.col("request_id").n_unique())
        held = int(ids.collect().item())  # unique: a shard copied counts once, as in `status`
    if held >= fewest:
        return none.to_frame()
    return _unanswered_taken_by(run_dir, "strict")


def lost_despite_reparse(run_dir: Path | str) -> pl.DataFrame | None:
    """Where the folder's last reparse finished: the requests whose reply recorded `ok` has
    no answer and which that reparse's parser takes (lost from `responses/`, as
    `lost_after_reparse`'s), the others being replies it rejected; None where no reparse
    finished last, and a reply recorded `ok` with no answer is the plain count's.

    A reparse with the parser the run read with rejected replies it had accepted (a reply
    edited in `attempts/`, or a parser changed between versions): each command then called
    them lost and said to run that very reparse, which changed nothing, for ever."""
    chain = _lines_maybe_in_force(run_dir)
    if not chain or chain[0].get("begun") or chain[0].get("parser") not in ("strict", "lenient"):
        return None
    if not (Path(run_dir) / PLAN).exists():
        return None  # no keys to parse a reply by: the plain count
    return _unanswered_taken_by(Path(run_dir), str(chain[0]["parser"]))


def _unanswered_taken_by(run_dir: Path, parser: str) -> pl.DataFrame:
    """The requests whose reply recorded `ok` has no answer and which `parser` takes, each
    reply parsed with its plan's keys, a few shards at a time (see `lost_after_reparse`)."""
    none = pl.Series("request_id", [], dtype=pl.String)
    asked, keysets = _unanswered(run_dir)
    columns = ["request_id", "outcome", "raw_text"]
    parts = attempts_in_parts(run_dir, columns, _LOST_PART_BYTES) if asked.height else ()
    found = [none]
    for replies in _collected_ahead(
        part.filter(_OK & pl.col("raw_text").is_not_null()).join(asked.lazy(), on="request_id")
        for part in parts
    ):
        texts, keys = replies["raw_text"].to_list(), replies["keyset"].to_list()
        taken = [_takes(parser, t, keysets[k]) for t, k in zip(texts, keys, strict=True)]
        found.append(replies["request_id"].filter(pl.Series(taken, dtype=pl.Boolean)))
        del replies, texts, keys, taken  # this part let go of before the next is asked for
    return pl.concat(found).unique().sort().to_frame()


def _collected_ahead(queries: Iterable[pl.LazyFrame]) -> Iterator[pl.DataFrame]:
    """Each of `queries` collected, the next one in a thread while the caller reads this
    one: polars reads the next part's replies outside the GIL, on the core their parse
    leaves idle (a sixth of `lost_after_reparse`'s time on the paper-scale folder of
    `_LOST_PART_BYTES`), one part ahead, no more: the next is asked for once this one is
    read, so that none waits queued while one is awaited. Ended early (an interrupt while
    a part is awaited, or the caller's), it waits for the part being read, never starts
    another (the pool shut down with anything queued cancelled), and holds none."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        pending: Future[pl.DataFrame] | None = None
        for query in queries:
            collected = None if pending is None else pending.result()
            pending = pool.submit(query.collect)
            if collected is not None:
                yield collected
                del collected  # the caller's now: not held while the next is awaited
        if pending is not None:
            yield pending.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _unanswered(run_dir: Path) -> tuple[pl.DataFrame, list[list[str]]]:
    """The planned requests, with keys, that have a reply recorded `ok` and no answer:
    `request_id` and `keyset`, the index of its plan's keys in the list returned, so that
    each distinct list of keys becomes a Python list once, not once a reply (on 365,120
    replies of 16 keys, that took longer than their parse). Read by id, no reply's text;
    the plan's keys as JSON text, streamed a row group at a time, whose distinct values
    number them."""
    attempts, responses = scan_ledger(run_dir, ["request_id", "outcome"], ["request_id"])
    unanswered = (
        attempts.filter(_OK).select("request_id").join(responses, on="request_id", how="anti")
    )
    asked = (
        pl.scan_parquet(run_dir / PLAN)
        .filter(pl.col("keys").list.len() > 0)  # none or empty: nothing to parse a reply by
        .select("request_id", pl.struct("keys").struct.json_encode().alias("_keys"))
        .join(unanswered, on="request_id", how="semi")
        .collect(engine="streaming")
    )
    keysets = asked.select(pl.col("_keys").unique(maintain_order=True)).with_row_index("keyset")
    numbered = asked.join(keysets, on="_keys").select("request_id", "keyset")
    lists = keysets["_keys"].str.json_decode(pl.Struct({"keys": pl.List(pl.String)}))
    return numbered, lists.struct.field("keys").to_list()


def _takes(parser: str, text: str, keys: list[str] | None) -> bool:
    """Whether `parser` takes the reply `text` as an answer to `keys`."""
    if not keys:  # nothing to parse it by
        return False
    try:
        parse_answer(text, keys, parser)
    except AnswerError:
        return False
    return True


#: Why a lenient spec's resume of a folder whose answers may be strict's is refused.
_PAY_AGAIN = "resuming would ask again for the replies strict rejected and mix two parsers' answers"


def resume_refusal(
    run_dir: Path | str,
    spec_parser: str | None,
    spec: str,
    *,
    unfinished_said: bool = False,
    unlocked: bool = False,
) -> str | None:
    """Why a resume of `run_dir` by a spec reading replies with `spec_parser` is refused, and
    what to do instead; None when it is not. `runs.pipeline` refuses the resume in these
    words (after `{run_dir}: `, `spec` "this spec"), and the audit says them where it would
    say what running the same command again does (`spec` "its spec").

    Refused while the folder may hold a strict reparse's answers and the spec is lenient
    (`parsers_maybe_in_force`: the last reparse was strict, finished or not, or a lenient one
    back from it did not finish): the requests strict rejected have no answer, so dispatch
    would ask them again, paying for replies lenient takes as they are kept, and the folder
    would hold two parsers' answers. A reparse back to lenient (no call) clears it. A strict
    spec's folder read by lenient resumes: what lenient rejected, strict rejects too.

    `unlocked`: the caller reads the folder without its lock (the audit), so the last
    reparse may still be running (`_under_way`, where `unfinished_line` says nothing): then
    the words say it is running and what to do once it has finished, not to run it again.
    `runs.pipeline` holds the lock: none is running (and the ledger's lock it holds would
    read as a reparse's, were it asked).
    `unfinished_said`: the caller has said `unfinished_line`, which names the reparse to run
    again (the audit's first note); the words then name no command it names, and say what
    is left once that reparse has run."""
    chain = _lines_maybe_in_force(run_dir)
    last = _as_last(chain[0]) if chain else None  # one read: the chain's first is the last
    if last is None or spec_parser != "lenient" or all(r["parser"] != "strict" for r in chain):
        return None
    state = (
        "finished" if last.finished
        else "running" if unlocked and _under_way(run_dir, last)
        else "said" if unfinished_said
        else "unfinished"
    )  # fmt: skip
    if last.parser == "strict":
        return _strict_refusal(str(run_dir), spec, state, last.at)
    # A lenient reparse back that did not finish: strict's answers may be the folder's, and
    # if the strict one did not finish either, the ones before it may be.
    strict_left = not chain[-1].get("begun") and chain[-1]["parser"] == "strict"
    held, either = (
        ("still be those a strict reparse left", "")
        if strict_left
        else ("be those of a strict reparse that did not finish, or the ones before it", " either")
    )
    back = f"the `dutchbook reparse --parser lenient` begun after it{_at(last.at)}"
    if state == "running":
        return (
            f"its answers may {held} while {back} is still running, and {spec} reads replies "
            f"with lenient: {_PAY_AGAIN}; let that reparse finish, then run again"
        )
    if state == "said":
        return (
            f"until the reparse back to lenient has been run again, its answers may {held}, "
            f"and {spec} reads replies with lenient: {_PAY_AGAIN}"
        )
    return (
        f"its answers may {held}: {back} did not finish{either}, and {spec} reads replies "
        f"with lenient: {_PAY_AGAIN}; run `dutchbook reparse {run_dir} --parser lenient` "
        "again first (no API call), then run again"
    )


def _at(at: str | None) -> str:
    """" at AT", when a begun line says when."""
    return f" at {at}" if at else ""


def _strict_refusal(run_dir: str, spec: str, state: str, at: str | None) -> str:
    """`resume_refusal`'s words where the last reparse was strict, by its `state`: finished,
    running (`_under_way`), unfinished, or unfinished and said by the caller before
    (`unfinished_said`), whose line names `dutchbook reparse DIR --parser strict`."""
    lenient = f"`dutchbook reparse {run_dir} --parser lenient`"
    keep = (
        f"keep strict's answers without resuming (`dutchbook score {run_dir}`, then "
        f"`dutchbook report {run_dir}`)"
    )
    parsed = {
        "finished": "were last parsed with strict (dutchbook reparse)",
        "running": "are being parsed with strict (a `dutchbook reparse --parser strict` "
        f"begun{_at(at)} is still running)",
        "unfinished": "may have been parsed with strict (a `dutchbook reparse --parser "
        f"strict` begun{_at(at)} did not finish)",
        "said": "may have been parsed with strict by the reparse that did not finish",
    }[state]
    why = f"its answers {parsed}, and {spec} reads replies with lenient: {_PAY_AGAIN}"
    if state == "running":
        return (
            f"{why}; once it has finished, run {lenient} (no API call), then run again, or "
            f"{keep}"
        )
    if state == "said":
        return (
            f"{why}; once that reparse has been run again, run {lenient} (no API call), then "
            f"run again, or {keep}"
        )
    if state == "unfinished":
        # Unfinished, the answers may be strict's or the ones before: scoring them is no way
        # to keep strict's, finishing the reparse is.
        keep = (
            f"run `dutchbook reparse {run_dir} --parser strict` again to finish it and keep "
            "strict's answers without resuming"
        )
    return f"{why}; run {lenient} first (no API call), then run again, or {keep}"


def spent_with_kept_replies(run_dir: Path, answer_budget: int | None = None) -> int:
    """Requests with no answer whose answer-failure budget (`answer_budget`, the spec's in
    force) is spent (`engine.scan.budget_spent`, as `engine.audit` counts them) and that
    have a reply a reparse reads (a `REPLY_OUTCOMES` attempt with text kept, not blank); 0
    when the ledger cannot be read. Refusals spend the budget too, and keep nothing a
    reparse reads. The replies' text is read only for the requests found spent, usually a
    handful of a campaign's."""
    try:
        spent = (
            scan_attempts(run_dir, ["request_id", "attempt", "outcome", "detail"])
            .join(scan_responses(run_dir, ["request_id"]), on="request_id", how="anti")
            .group_by("request_id")
            .agg(budget_spent(answer_budget).alias("spent"))
            .filter(pl.col("spent"))
            .select("request_id")
            .collect()
        )
        if spent.is_empty():
            return 0
        kept = (
            scan_attempts(run_dir, ["request_id", "outcome", "raw_text"])
            .join(spent.lazy(), on="request_id", how="semi")
            .filter(pl.col("outcome").is_in(REPLY_OUTCOMES))
            .filter(pl.col("raw_text").str.contains(r"\S"))
            .select(pl.col("request_id").n_unique())
            .collect()
        )
    except (pl.exceptions.PolarsError, OSError):  # advice withheld, not the caller's end
        return 0
    return int(kept.item())
