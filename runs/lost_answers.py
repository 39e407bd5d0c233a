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

from pathlib import Path

from engine.audit import read_ok_replies, repeated_rows_line, unplanned_rows_line
from engine.console_lines import plural
from engine.reparse import parser_in_force
from engine.scan import RESPONSES, repeated_rows, unplanned_rows
from runs.plan_checksums import CHECKSUMS_FILE
from runs.scored_from import gone_shards


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
    run_dir: Path, spec_parser: str | None, would: str, then: str
) -> str | None:
    """The one line refusing to act on `run_dir`'s answers, lost (`lost_answers_refusal`,
    with what acting now `would` do), held twice (`repeated_answers_refusal`) or of requests
    the plan does not hold (`unplanned_answers_refusal`); None when they are whole, single
    and the plan's. `then`: what to do once the folder is mended."""
    return (
        lost_answers_refusal(run_dir, spec_parser, would, then)
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
    held = ", ".join(name for name in kept if (run_dir / name).is_file())
    return (
        f"{run_dir}: {gone}; {would}, so {done}"
        f"{f' (kept: {held})' if held else ''}: {RESTORE_ANSWERS}, then {then}"
    )


#: Where answers gone with their replies can come from (`gone_answers`): nothing rebuilds them.
RESTORE_ANSWERS = f"restore {RESPONSES}/ (and attempts/) from a backup of the folder"
#: The other way on from such a folder: no flag makes a resume ask every answer again (it
#: would score the new answers over the run's), a new folder does.
ASK_ALL_AGAIN = (
    "to ask every answer again, run the spec into a new folder (`--out`) and keep this one as "
    "it is"
)


def gone_answers(run_dir: Path) -> str | None:
    """Which response shards the folder's scores or repairs were computed from are gone,
    with no reparse to account for them (`runs.scored_from.gone_shards`), and which record
    names them; None when none is. What `status` warns of, and `score` and `repair` refuse."""
    gone = gone_shards(run_dir)
    if not gone:
        return None
    shards = sorted({name for names in gone.values() for name in names})
    return (
        f"answers it was scored from are gone from {RESPONSES}/ ({', '.join(shards)}, named in "
        f"{' and '.join(gone)}) and no reparse replaced them"
    )


__all__ = [
    "ASK_ALL_AGAIN", "RESTORE_ANSWERS", "answers_refusal", "gone_answers", "gone_answers_refusal",
    "lost_answers_refusal",
    "repeated_answers_refusal", "unplanned_answers_refusal",
]
