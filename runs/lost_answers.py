"""Accepted answers lost from a run folder's `responses/` (a deleted or moved shard, a shard
replaced by a folder) while their replies are kept in `attempts/`: the one refusal of every
command that would act on the answers left as if they were all.

A resume would ask and pay for them again; `score`, `repair` and `report` would replace a
finished run's good output with that of the answers left (a tester's `repair` wrote a 0-row
`repaired.parquet` over 670 rows, exit 0). `dutchbook reparse DIR --parser P` rebuilds them
without a call, P the parser that made them (`engine.reparse.parser_in_force`); `status`
and `audit` say the same in a warning (`engine.audit.missing_answers_line`).
"""

from __future__ import annotations

from pathlib import Path

from engine.console_lines import plural
from engine.reparse import ok_means_accepted, parser_in_force
from engine.scan import lost_answers


def lost_answers_refusal(
    run_dir: Path, spec_parser: str | None, would: str, then: str
) -> str | None:
    """The one line refusing to act on `run_dir` when `responses/` lost accepted answers
    (`engine.scan.lost_answers`), None when it lost none: how many, what acting now `would`
    do, and the reparse that rebuilds them, after which the user should `then` ... .

    A reply recorded `ok` with no answer is a lost answer only while every such reply is one
    the parser in force accepts (`engine.reparse.ok_means_accepted`): after a strict reparse
    of a lenient run, the replies strict rejected have no answer by design."""
    if not ok_means_accepted(run_dir, spec_parser):
        return None
    missing = lost_answers(run_dir)
    if not missing:
        return None
    parser = parser_in_force(run_dir, spec_parser) or "<the spec's parser>"
    return (
        f"{run_dir}: {plural(missing, 'accepted answer')} {'is' if missing == 1 else 'are'} "
        f"missing from responses/ (their replies are kept in the ledger); {would}: run "
        f"`dutchbook reparse {run_dir} --parser {parser}` first, which rebuilds them without "
        f"a call, then {then}"
    )


__all__ = ["lost_answers_refusal"]
