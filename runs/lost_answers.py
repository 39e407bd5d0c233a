"""Accepted answers lost from a run folder's `responses/` (a deleted or moved shard, a shard
replaced by a folder) while their replies are kept in `attempts/`, or held there twice: the
one refusal (`answers_refusal`) of every command that would act on the answers as if they
were whole and single.

Lost, a resume would ask and pay for them again; `score`, `repair` and `report` would
replace a finished run's good output with that of the answers left (a tester's `repair`
wrote a 0-row `repaired.parquet` over 670 rows, exit 0). `dutchbook reparse DIR --parser P`
rebuilds them without a call, P the parser that made them (`engine.reparse.parser_in_force`);
`status` and `audit` say the same in a warning (`engine.audit.missing_answers_line`).

Held twice (a shard copied, or one moved aside before a reparse and put back:
`engine.scan.repeated_rows`), scoring read the copy in the lowest-numbered shard, the old
one put back, and so scored values the reparse had replaced, without a word. Which copy
belongs is the user's to say: they are refused in the line `status` warns with
(`engine.audit.repeated_rows_line`), naming the shards.

Of requests the plan does not hold (another run's shard copied in, an id damaged on disk:
`engine.scan.unplanned_rows`), scoring would score them as the run's; they are refused in
the words `status` warns with (`engine.audit.unplanned_rows_line`), whose reparse leaves
them out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from engine.audit import read_ok_replies, repeated_rows_line, unplanned_rows_line
from engine.console_lines import plural
from engine.reparse import PLAN, REPLY_OUTCOMES, parser_in_force
from engine.scan import RESPONSES, repeated_rows, scan_ledger, scan_responses, unplanned_rows
from runs.plan_checksums import CHECKSUMS_FILE
from runs.scored_from import REPAIRED_FROM, SCORED_FROM, gone_shards, outputs_at, reparsed_since


def lost_answers_refusal(
    run_dir: Path, spec_parser: str | None, would: str, then: str
) -> str | None:
    """The one line refusing to act on `run_dir` when `responses/` lost accepted answers
    (`engine.scan.lost_answers`), None when it lost none: how many, what acting now `would`
    do, and the reparse that rebuilds them, after which the user should `then` ... .

    Which replies recorded `ok` with no answer are lost answers, and how many, is `status`'s
    and the audit's reading (`engine.audit.read_ok_replies`, `OkReplies.lost_count`): every
    one while every such reply is one the parser in force accepts, less those a finished
    reparse with the run's own parser rejected; after a strict reparse of a lenient run, only
    those strict's parser takes (`engine.reparse.lost_after_reparse`)."""
    # As `status` and the audit read them, and counted by the same reading.
    missing = read_ok_replies(run_dir, spec_parser).lost_count(run_dir)
    if not missing:
        return None
    parser = parser_in_force(run_dir, spec_parser) or "<the spec's parser>"
    return (
        f"{run_dir}: {plural(missing, 'accepted answer')} {'is' if missing == 1 else 'are'} "
        f"missing from responses/ (their replies are kept in the ledger); {would}: run "
        f"`dutchbook reparse {run_dir} --parser {parser}` first, which rebuilds them without "
        f"a call, then {then}"
    )


def repeated_answers_refusal(run_dir: Path, then: str) -> str | None:
    """The one line refusing to act on `run_dir` when its `responses/` shards hold an answer
    twice, None when they hold none twice (read only where there are two shards or more:
    about 30 ms on 365,100 answers in 37 shards); `then`, what to do once the shard that
    does not belong is out. Repeated attempts are left to `status` and the audit, which
    count them once: no score reads them."""
    return repeated_rows_line(repeated_rows(run_dir, answers_only=True), str(run_dir), then)


def unplanned_answers_refusal(run_dir: Path, spec_parser: str | None, then: str) -> str | None:
    """The one line refusing to act on `run_dir` when `responses/` holds answers of requests
    its plan does not hold (`engine.scan.unplanned_rows`: another run's shard copied in, an
    id damaged on disk), None when it holds none; `then`, what to do once the reparse that
    leaves them out has run. Only where `plan-checksums.json` vouches for the plan: a plan
    it cannot vouch for (planned before checksums were kept) may be the one that is not
    theirs, which a resume refuses in its own words (`runs.plan_checksums.answers_outside_plan`)."""
    if not (run_dir / CHECKSUMS_FILE).is_file():
        return None
    # Attempts alone are not refused: nothing scores them, and a resume asks only the plan.
    unplanned = unplanned_rows(run_dir, answers_only=True)
    if not unplanned.answers:
        return None
    return unplanned_rows_line(unplanned, str(run_dir), parser_in_force(run_dir, spec_parser), then)


def answers_refusal(
    run_dir: Path,
    spec_parser: str | None,
    would: str,
    then: str,
    gone: Callable[[], str | None] | None = None,
) -> str | None:
    """The one line refusing to act on `run_dir`'s answers, lost (`lost_answers_refusal`,
    with what acting now `would` do), held twice (`repeated_answers_refusal`) or of requests
    the plan does not hold (`unplanned_answers_refusal`); None when they are whole, single
    and the plan's. `then`: what to do once the folder is mended. `gone` (a caller's
    `gone_answers_refusal`) is asked after the lost answers, whose reparse needs no backup,
    and before the others: another run's shard pair copied over the folder's own was refused
    as answers the plan does not hold, with a reparse that left none of the run's."""
    return (
        lost_answers_refusal(run_dir, spec_parser, would, then)
        or (gone() if gone is not None else None)
        or repeated_answers_refusal(run_dir, then)
        or unplanned_answers_refusal(run_dir, spec_parser, then)
    )


def gone_answers_refusal(
    run_dir: Path, kept: list[str], would: str, then: str, done: str = "nothing was written"
) -> str | None:
    """The one line refusing to act on `run_dir` when response shards its scores or repairs
    were computed from are gone and no reparse replaced them (`runs.scored_from.gone_shards`),
    None otherwise: which, what acting now `would` do, so what was `done` (a resume's:
    nothing asked), that the files it would replace (those of `kept` the folder has) stay as
    they are, and where the answers can come from. Asked after `answers_refusal`: where the
    replies are still in `attempts/`, its reparse rebuilds them without a backup."""
    gone = gone_answers(run_dir)
    if gone is None:
        return None
    return (
        f"{run_dir}: {gone}; {would}, so {done}{_kept(run_dir, kept)}: {RESTORE_ANSWERS}, "
        f"then {then}"
    )


def _kept(run_dir: Path, kept: list[str]) -> str:
    """The words ` (kept: NAMES)` naming those of `kept` the folder holds, which a refusal
    of its answers leaves as they are; empty where it holds none of them."""
    held = ", ".join(name for name in kept if (run_dir / name).is_file())
    return f" (kept: {held})" if held else ""


#: Each output of the answers whose rows were answers, with the record of what it was
#: computed from (`emptied_answers_refusal`).
_OUTPUTS = {"forecasts.parquet": SCORED_FROM, "repaired.parquet": REPAIRED_FROM}


def emptied_answers_refusal(
    run_dir: Path, output: str, kept: list[str], would: str, then: str
) -> str | None:
    """The one line refusing to act on `run_dir` when it holds no answer at all (shards and
    journal) while `output` (`forecasts.parquet` for `score`, `repaired.parquet` for
    `repair`) holds answered rows and no reparse begun since it was written accounts for it
    (a strict one that took none); None otherwise. With the shards, their replies and the
    record deleted, `gone_answers` had no record to name them by, and `score` wrote 0-row
    forecasts over the run's. `kept`, `would`, `then` as `gone_answers_refusal`'s."""
    if not (run_dir / output).is_file():
        return None
    if scan_responses(run_dir, ["request_id"]).head(1).collect().height:
        return None  # answers are there: the other refusals judge them
    rows = pl.scan_parquet(run_dir / output).filter(_ANSWERED_IN[output]).head(1)
    if not rows.collect().height:
        return None
    if reparsed_since(run_dir, outputs_at(run_dir, output, _OUTPUTS[output])):
        return None
    return (
        f"{run_dir}: the folder's answers are gone ({RESPONSES}/ holds none, where {output} "
        f"holds answers) and no reparse accounts for it; {would}, so nothing was written"
        f"{_kept(run_dir, kept)}: {RESTORE_ANSWERS}, then {then}"
    )


#: Where answers gone with their replies can come from (`gone_answers`): nothing rebuilds them.
RESTORE_ANSWERS = f"restore {RESPONSES}/ (and attempts/) from a backup of the folder"
#: The other way on from such a folder: no flag makes a resume ask every answer again (it
#: would score the new answers over the run's), a new folder does.
ASK_ALL_AGAIN = (
    "to ask every answer again, run the spec into a new folder (`--out`) and keep this one as "
    "it is"
)


#: The columns naming one pass of one unit for one model and arm: a forecast's and a repaired
#: set's, and a planned request's.
_PASS_KEY = ["model", "arm", "unit", "pass"]
#: The files holding what a run's answers were, each with its answered rows.
_ANSWERED_IN = {"forecasts.parquet": pl.lit(True), "repaired.parquet": pl.col("answered") > 0}


def answers_without_replies(run_dir: Path) -> int:
    """How many passes (`_PASS_KEY`) the folder's forecasts or repairs hold answers of that
    no planned request of theirs has an answer or a kept reply for (`engine.reparse`
    reads): answers a reparse cannot rebuild, gone with their replies. 0 without a plan."""
    held = _requests_kept(run_dir)
    if held is None:
        return 0
    answered = [
        pl.scan_parquet(run_dir / name).filter(rows).select(_PASS_KEY)
        for name, rows in _ANSWERED_IN.items()
        if (run_dir / name).is_file()
    ]
    if not answered:
        return 0
    kept = pl.scan_parquet(run_dir / PLAN).join(held, on="request_id", how="semi")
    gone = pl.concat(answered).unique().join(
        kept.select(_PASS_KEY).unique(), on=_PASS_KEY, how="anti"
    )
    return int(gone.select(pl.len()).collect().item())


def _requests_kept(run_dir: Path) -> pl.LazyFrame | None:
    """The request ids with an answer in `responses/` or a reply a reparse reads in
    `attempts/`; None without a plan (nothing to say whose they are)."""
    if not (run_dir / PLAN).is_file():
        return None
    attempts, responses = scan_ledger(
        run_dir, ["request_id", "outcome", "raw_text"], ["request_id"]
    )
    replies = attempts.filter(
        pl.col("outcome").is_in(REPLY_OUTCOMES) & pl.col("raw_text").is_not_null()
    ).select("request_id")
    return pl.concat([replies, responses.select("request_id")]).unique()


def answers_without_attempts(run_dir: Path) -> int:
    """How many of the plan's answers in `responses/` have no attempt row in `attempts/`
    (its shards deleted or replaced): a reparse reads their replies from the answers'
    own rows, and one whose parser rejects them drops them with the only copy left."""
    if not (run_dir / PLAN).is_file():
        return 0
    attempts, responses = scan_ledger(
        run_dir, ["request_id", "attempt"], ["request_id", "attempts"]
    )
    planned = pl.scan_parquet(run_dir / PLAN).select("request_id")
    orphans = responses.join(planned, on="request_id", how="semi").join(
        attempts.rename({"attempt": "attempts"}), on=["request_id", "attempts"], how="anti"
    )
    return int(orphans.select(pl.len()).collect().item())


def reparse_refusal(run_dir: Path) -> str | None:
    """The one line refusing `dutchbook reparse DIR`, None where it may run: where the
    answers the folder's forecasts or repairs hold are gone with their replies
    (`answers_without_replies`, `gone_answers` saying which shards where it can), a reparse
    read nothing of them, said "accepted 0 -> 0", exit 0, and wrote a shard and a line
    that `score` then took for the ones gone: it wrote 0-row forecasts over the run's, the
    only copy left. Where answers in `responses/` have lost their attempts
    (`answers_without_attempts`), it would rebuild them from their own rows, and drop
    those its parser rejects with their replies. Answers of requests the plan does not
    hold are left out by design (`unplanned_rows`), so not counted."""
    kept = f"nothing was replaced: {RESTORE_ANSWERS}, then reparse again"
    if missing := answers_without_replies(run_dir):
        gone = gone_answers(run_dir) or (
            f"{plural(missing, 'answered pass', 'answered passes')} of its forecasts or repairs "
            f"{'has' if missing == 1 else 'have'} no answer in {RESPONSES}/ and no reply "
            "in attempts/"
        )
        return f"{run_dir}: {gone}; a reparse cannot rebuild them, so {kept}"
    if orphans := answers_without_attempts(run_dir):
        return (
            f"{run_dir}: {plural(orphans, 'answer')} in {RESPONSES}/ "
            f"{'has' if orphans == 1 else 'have'} no attempt in attempts/ (deleted or "
            f"replaced), so a reparse could not read {'its' if orphans == 1 else 'their'} "
            f"replies and would drop those its parser rejects; {kept}"
        )
    return None


def gone_answers(run_dir: Path) -> str | None:
    """Which response shards the folder's scores or repairs were computed from are gone (or
    replaced by another file of that name: another run's copied over it), with no reparse
    to account for them (`runs.scored_from.gone_shards`), and which record
    names them; None when none is. What `status` warns of, and `score` and `repair` refuse."""
    gone = gone_shards(run_dir)
    if not gone:
        return None
    shards = [
        name if not (run_dir / RESPONSES / name).exists() else f"{name} replaced by another file"
        for name in sorted({name for names in gone.values() for name in names})
    ]
    return (
        f"answers it was scored from are gone from {RESPONSES}/ ({', '.join(shards)}, named in "
        f"{' and '.join(gone)}) and no reparse replaced them"
    )


__all__ = [
    "ASK_ALL_AGAIN",
    "RESTORE_ANSWERS",
    "answers_refusal",
    "answers_without_attempts",
    "answers_without_replies",
    "emptied_answers_refusal",
    "gone_answers",
    "gone_answers_refusal",
    "lost_answers_refusal",
    "reparse_refusal",
    "repeated_answers_refusal",
    "unplanned_answers_refusal",
]
