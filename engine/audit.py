"""One definition of a retry, and the audit of a run folder read from its ledger alone.

The paper (Appendix C) counts "4,744 retry attempts across 4,114 requests out of 345,500,
attributed to rate limits (2,459), provider/response errors (2,268), ...". Here that count
has ONE definition, used by `dutchbook run`'s summary, `status`, `audit` and the report:

    a request's accepted attempt is the one its response row names (`responses.attempts`);
    every attempt that is not the accepted one, nor a reply the run accepted that a later
    strict reparse rejected, is one retry attempt, attributed to its outcome class.

So the last failed attempt of a request that was given up counts (it was not accepted), a
permanent failure counts, and an attempt in flight when the process died counts once, as
`interrupted` (before the next run records it so, too: `audit` reads the journal's attempts
sent and not resolved in with the recorded ones). A reply recorded `ok` has no outcome class
of its own: a valid reply to a request that already had an accepted answer (refused as a
duplicate, or superseded because a re-parse accepted an earlier reply) is a `duplicate`; a
reply the run accepted that a later reparse rejected (strict of a lenient run, or the run's
own parser after a reply was edited) is no retry attempt while its request has no answer:
the run asked nothing more, so it is counted apart (`rejected_on_reparse`,
`answers_rejected_on_reparse`), as neither retried nor given up; once a resume has asked
that request again (an answer came of it or not), the reply is an `invalid_response`
retry attempt of the subcause `rejected_on_reparse` (the query was asked again after a
reply now unusable), and a request still without an answer is given up as its last attempt
says. Every other attempt keeps the outcome the run recorded, its verdict at
the time: a reparse rebuilds the answers, not the history of why a query was asked again.
An `invalid_response` is further split by subcause: the answer parser's (`not_json`,
`missing_key`, ...), `malformed_reply` when the provider's reply itself was unusable, and
`rejected_on_reparse`.

Everything here reads the ledger lock-free through its lazy readers (shards ∪ journal), so
it works on a finished, interrupted or running campaign, and streams: the attempts are
scanned once, narrowed to the few columns needed, and reduced by group-bys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from engine.answers import SUBCAUSES
from engine.batch_jobs import AtProvider, at_provider, fold_jobs
from engine.console_lines import plural
from engine.durable import record_number
from engine.lanefile import read_lane_states
from engine.outage import read_pauses
from engine.reparse import (
    last_reparse,
    lost_after_reparse,
    lost_despite_reparse,
    ok_means_accepted,
    parser_in_force,
    resume_refusal,
    unfinished_line,
)
from engine.retry import CAUSE_LABELS, DUPLICATE, DUPLICATE_REFUSED, GIVEN_UP_FOR_GOOD
from engine.retry import (
    REJECTED_ON_REPARSE as REJECTED_ON_REPARSE,  # re-exported: the audit's name for it
)
from engine.scan import (
    ATTEMPTS,
    JOURNAL,
    RESPONSES,
    Repeats,
    Unplanned,
    budget_spent,
    damaged_for_good,
    lost_answers,
    read_settled,
    repeated_rows,
    scan_ledger,
    unplanned_rows,
)
from engine.spend import (
    SPEND_CAP_REACHED,
    Prices,
    carried_by_batch,
    dollars,
    unread_lines,
)
from engine.unresolved import in_flight_sentence, interrupted_note, with_unresolved
from providers.base import short

PLAN = "plan.parquet"

#: Retry causes: the attempt outcome classes, in the order tables list them.
CAUSES: tuple[str, ...] = (
    "rate_limit",
    "provider_error",
    "connection_error",
    "timeout",
    "interrupted",
    "missing_routing_metadata",
    "damaged_batch_result",
    "invalid_response",
    "refusal",
    "truncated",
    "auth_error",
    "bad_request",
    "duplicate",
)
INVALID = "invalid_response"
#: Subcauses of `invalid_response` beyond the answer parser's.
MALFORMED_REPLY = "malformed_reply"
INVALID_SUBCAUSES: tuple[str, ...] = (*SUBCAUSES, MALFORMED_REPLY, REJECTED_ON_REPARSE)

#: Appendix C's six retry causes, with the outcome classes each holds here. The paper re-asks
#: after "errors, refusals, truncations, or malformed responses" and names six causes, so its
#: "provider/response errors" are every reply that came back unusable, which this ledger tells
#: apart (a 5xx, a malformed answer, a refusal, a reply cut short, a damaged batch line).
PAPER_CAUSES: dict[str, tuple[str, ...]] = {
    "rate limits": ("rate_limit",),
    "provider/response errors": (
        "provider_error", "invalid_response", "refusal", "truncated", "damaged_batch_result",
    ),
    "interrupted dispatches": ("interrupted",),
    "connection errors": ("connection_error",),
    "timeouts": ("timeout",),
    "missing routing metadata": ("missing_routing_metadata",),
}  # fmt: skip

#: Outcome of the attempt a timeline bin counts when it was the accepted one.
ACCEPTED = "accepted"

_ATTEMPT_COLUMNS = [
    "request_id", "attempt", "model", "provider", "outcome", "elapsed_ms", "tokens_in",
    "tokens_out", "detail", "model_reported",
]
_SUBCAUSE_PATTERN = r"^(" + "|".join(SUBCAUSES) + r"):"
_QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


# --------------------------------------------------------------------------- the definition


def classify(
    attempts: pl.LazyFrame,
    responses: pl.LazyFrame,
    *,
    ok_means_accepted: bool = False,
    rejected_possible: bool = True,
    lost: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """`attempts` with `accepted` (bool), `answered` (bool), `answer_missing` (bool),
    `rejected_on_reparse` (bool) and `cause` (null if accepted or rejected on reparse).

    `attempts` needs `request_id`, `attempt`, `outcome` (and `detail` for `subcause`, which
    is added when present, and to tell a refused duplicate by); `responses` needs
    `request_id`, `attempts`. This is THE definition of a retry attempt: a row whose `cause`
    is not null.

    `ok_means_accepted` (`engine.reparse.ok_means_accepted`): no reparse since the run read
    the replies with a stricter parser, so a reply recorded `ok` is one the parser in force
    takes. A request with such a reply and no answer row then lost its answer from
    `responses/` (a deleted file), it was not rejected: its first `ok` attempt counts as the
    accepted one (`answer_missing`), not as an `invalid_response`, which a tester's audit
    said of 534 answers no reparse had touched.

    Otherwise such a reply is one the run accepted and a stricter reparse rejected
    (`rejected_on_reparse`), but for the requests in `lost` (`request_id`s whose answer was
    lost all the same, `engine.reparse.lost_after_reparse`: `answer_missing`): no retry
    attempt, since the engine sent nothing after it (the paper's retries are queries asked
    again after an error or an unusable reply). That is the request's first `ok` attempt
    only: a later one was refused as a duplicate, and stays a `duplicate` retry attempt.
    Once a resume asked such a request again and accepted a later attempt, the reply is a
    retry attempt, `invalid_response` of the subcause `rejected_on_reparse` (`_labelled`;
    without `detail`, a duplicate refused before the accepted attempt reads as one too).
    `rejected_possible=False` says every reply recorded `ok` still has its answer row: no
    reparse stricter than the run's parser has run, and no answer was lost
    (`engine.scan.lost_answers`; else pass `ok_means_accepted`). Nothing is then searched
    for, as that search more than doubled the time of the audit's common case; a lost
    answer's reply would be taken for a duplicate.
    """
    rejected_possible = rejected_possible and not ok_means_accepted
    chosen = _chosen(attempts, responses, ok_means_accepted, rejected_possible, lost)
    marked = attempts.join(chosen, on="request_id", how="left").with_columns(
        pl.col("answer_missing").fill_null(False),
        pl.col("_accepted_attempt").is_not_null().alias("answered"),
        (pl.col("attempt") == pl.col("_accepted_attempt")).fill_null(False).alias("accepted"),
    )
    return _labelled(marked, rejected_possible).drop(
        "_accepted_attempt", "_first_ok", "_asked_again", strict=False
    )


def _labelled(marked: pl.LazyFrame, rejected_possible: bool) -> pl.LazyFrame:
    """`classify`'s `rejected_on_reparse`, `cause` and `subcause` of `marked` (the attempts
    with `_chosen`'s columns joined). A reply recorded `ok` before the attempt its answer
    now names, and not refused as a duplicate (`engine.retry.DUPLICATE_REFUSED`, in the
    detail where `marked` has it), is one a reparse rejected (a reparse accepts the first
    reply its parser takes, the run the first reply that came back valid) whose request a
    resume then asked again: an `invalid_response` retry attempt of the subcause
    `rejected_on_reparse`, where it read as a `duplicate`, which it never was. So is such a
    reply whose request has no answer and failed attempts after it (a resume asked it
    again, in vain): it read as rejected on reparse, not retried."""
    ok = pl.col("outcome") == "ok"
    has_detail = "detail" in marked.collect_schema().names()
    refused = (
        pl.col("detail").str.contains(DUPLICATE_REFUSED, literal=True).fill_null(False)
        if has_detail
        else pl.lit(False)
    )
    asked_again = ok & (pl.col("attempt") < pl.col("_accepted_attempt")).fill_null(False)
    asked_again = asked_again & ~refused
    if rejected_possible:
        # Its first `ok` attempt alone: a later `ok` was refused as a duplicate and stays one.
        first = ok & (pl.col("attempt") == pl.col("_first_ok")).fill_null(False)
        # Asked again after it (by a resume) though no answer came of it: a retry attempt too.
        # Told by a failure after it: a later reply recorded `ok` with no answer is one the
        # run refused as a duplicate (or the reparse rejected as well), no asking again.
        later = pl.when(~ok).then(pl.col("attempt")).max().over("request_id")
        again = (later > pl.col("_first_ok")).fill_null(False)
        rejected, asked_again = first & ~again, asked_again | (first & again)
    else:
        rejected = pl.lit(False)
    marked = marked.with_columns(
        rejected.alias(REJECTED_ON_REPARSE),
        asked_again.alias("_asked_again"),
        pl.when(pl.col("accepted") | rejected)
        .then(None)
        .when(asked_again)
        .then(pl.lit(INVALID))
        .when(ok)
        .then(pl.lit(DUPLICATE))
        .otherwise(pl.col("outcome"))
        .alias("cause"),
    )
    if not has_detail:
        return marked
    return marked.with_columns(
        pl.when(pl.col("cause") != INVALID)
        .then(None)
        .when(pl.col("_asked_again"))
        .then(pl.lit(REJECTED_ON_REPARSE))
        .otherwise(pl.col("detail").str.extract(_SUBCAUSE_PATTERN, 1).fill_null(MALFORMED_REPLY))
        .alias("subcause")
    )


@dataclass(frozen=True)
class OkReplies:
    """The one reading of the replies recorded `ok` with no answer in a folder
    (`read_ok_replies`), shared by `status`, the audit, figure 8 and the refusals of
    `runs.lost_answers`."""

    #: `classify`'s `ok_means_accepted`: each such reply is an answer lost from `responses/`.
    ok_means_accepted: bool
    #: `classify`'s `lost`: the requests whose such reply is a lost answer all the same (none:
    #: None), where a reparse rejected the others.
    lost: pl.LazyFrame | None
    #: `engine.reparse.ok_means_accepted`: no reparse stricter than the run's parser may have
    #: rejected them, so a reply a reparse rejected was rejected by the run's own parser
    #: (`rejected_answers_line`'s `own_parser`, `Audit.rejected_by_own_parser`).
    own_parser: bool
    #: How many answers were lost, where the reading counted them on the way (else None).
    counted: int | None = None

    def lost_count(self, run_dir: Path) -> int:
        """How many accepted answers `run_dir`'s `responses/` lost by this reading: every
        reply recorded `ok` with no answer (`engine.scan.lost_answers`) where each is a lost
        answer, else those in `lost`; counted once."""
        if self.counted is not None:
            return self.counted
        return lost_answers(run_dir) if self.ok_means_accepted else 0


def read_ok_replies(run_dir: Path, spec_parser: str | None, held: int | None = None) -> OkReplies:
    """The reading (`OkReplies`) of a reply recorded `ok` with no answer in the folder
    `run_dir`, whose run read replies with `spec_parser` (None where unknown) and which holds
    `held` answers (counted when None). Where no reparse stricter than the run's may have
    rejected such replies (`engine.reparse.ok_means_accepted`), each is a lost answer, unless
    the last reparse finished and its parser, the run's own, rejects some (then the ones it
    takes are `lost`: `lost_despite_reparse`); else they are mostly ones strict rejected, but
    for the answers lost all the same (`engine.reparse.lost_after_reparse`: none, read at no
    cost, unless the folder holds fewer answers than that reparse left)."""
    own = ok_means_accepted(run_dir, spec_parser)
    if own:
        # Where the last reparse finished, a reply it rejected is no lost answer, though its
        # parser was the run's (`lost_despite_reparse`): searched only where one is missing.
        last = last_reparse(run_dir)
        missing = lost_answers(run_dir) if last is not None and last.finished else None
        found = lost_despite_reparse(run_dir) if missing else None
        if found is None:
            return OkReplies(True, None, own, missing)
        return OkReplies(False, found.lazy() if found.height else None, own, found.height)
    lost = lost_after_reparse(run_dir, held)
    return OkReplies(False, lost.lazy() if lost.height else None, own, lost.height)


def reading_of_ok_replies(
    run_dir: Path, spec_parser: str | None, held: int | None = None
) -> tuple[bool, pl.LazyFrame | None]:
    """`classify`'s `ok_means_accepted` and `lost` for the folder `run_dir`
    (`read_ok_replies`, whose `OkReplies` also says whether the run's own parser rejected
    such replies and how many answers were lost)."""
    reading = read_ok_replies(run_dir, spec_parser, held)
    return reading.ok_means_accepted, reading.lost


def _chosen(
    attempts: pl.LazyFrame,
    responses: pl.LazyFrame,
    ok_means_accepted: bool,
    rejected_possible: bool,
    lost: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """Per request, `classify`'s `_accepted_attempt` (the one its response row names) and
    `answer_missing`; for a request with an `ok` attempt and no answer row, its first `ok`
    attempt: the reply the run accepted, whose answer is lost (`ok_means_accepted`, or the
    request in `lost`: the accepted attempt, `answer_missing`) or was rejected by a
    stricter reparse since (`_first_ok`)."""
    chosen = responses.select(
        "request_id",
        pl.col("attempts").cast(pl.Int64).alias("_accepted_attempt"),
        pl.lit(False).alias("answer_missing"),
    )
    if not (ok_means_accepted or rejected_possible):
        return chosen  # no answer lost and none rejected: nothing to look for
    first_ok = (  # the anti-join first: it leaves few rows (none before a strict reparse)
        attempts.filter(pl.col("outcome") == "ok")
        .join(chosen.select("request_id"), on="request_id", how="anti")
        .group_by("request_id")
        .agg(pl.col("attempt").min().cast(pl.Int64).alias("_first_ok"))
    )

    def missing(frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.select(
            "request_id", pl.col("_first_ok").alias("_accepted_attempt"),
            pl.lit(True).alias("answer_missing"),
        )

    if ok_means_accepted:
        return pl.concat([chosen, missing(first_ok)], how="vertical")
    if lost is None:
        return pl.concat([chosen, first_ok], how="diagonal")
    # One left join: a semi- and an anti-join of `first_ok` made the audit of a synthetic
    # paper-scale folder whose answers were lost after a strict reparse 0.4 s slower than
    # without `lost`; this, 0.05 s.
    marks = lost.select("request_id").unique().with_columns(pl.lit(True).alias("_lost"))
    is_lost = pl.col("_lost").fill_null(False)
    split = first_ok.join(marks, on="request_id", how="left").select(
        "request_id",
        pl.when(is_lost).then(pl.col("_first_ok")).alias("_accepted_attempt"),
        is_lost.alias("answer_missing"),
        pl.when(is_lost).then(None).otherwise(pl.col("_first_ok")).alias("_first_ok"),
    )
    return pl.concat([chosen, split], how="diagonal")


def missing_answers_line(missing: int, run_dir: str, parser: str | None) -> str | None:
    """What `audit`, `status` and the report say of accepted answers lost from `responses/`
    (None when there are none): how many, and the reparse that rebuilds them with the
    parser that made them (`engine.reparse.parser_in_force`), where a resume would pay."""
    if not missing:
        return None
    which = parser if parser is not None else "<the spec's parser>"
    return (
        f"{plural(missing, 'accepted answer')} {'is' if missing == 1 else 'are'} missing "
        f"from responses/ (their replies are kept in the ledger): `dutchbook reparse "
        f"{run_dir} --parser {which}` rebuilds them without a call; `dutchbook run` "
        "refuses to resume until then, as it would pay for them again"
    )


def rejected_answers_line(
    rejected: int, run_dir: str, *, refusal_said: bool = False, own_parser: str | None = None
) -> str | None:
    """What `status` and `audit` say of requests whose reply the run accepted and a later
    `dutchbook reparse --parser strict` rejected (None when there are none): they count as
    pending, and a lenient spec's resume is refused (`engine.reparse.resume_refusal`), so
    the line names the reparse that takes them back. A reply recorded `ok` that strict
    rejects was accepted by lenient, so lenient is the way back whatever the spec says.

    With `refusal_said` (the audit's notes say the resume's refusal, whose words name that
    reparse command and that the resume waits for it), the command is left to the refusal:
    the line says only that a lenient reparse gives the answers back without a call.

    With `own_parser`, the replies were rejected by a reparse with the parser the answers
    are read with (`engine.reparse.lost_despite_reparse`: a reply edited in `attempts/`, or
    another version's parser): no reparse takes them back, and a resume asks them again."""
    if not rejected:
        return None
    one = rejected == 1
    if own_parser is not None:
        return (
            f"{plural(rejected, 'request')} {'has' if one else 'have'} no answer because "
            f"`dutchbook reparse --parser {own_parser}`, the parser its answers are read "
            f"with, rejected the {'reply' if one else 'replies'} the run had accepted (edited "
            "in attempts/, or read by another version's parser): a resume asks "
            f"{'it' if one else 'them'} again"
        )
    line = (
        f"{plural(rejected, 'request')} {'has' if one else 'have'} no answer only because "
        f"`dutchbook reparse --parser strict` rejected the {'reply' if one else 'replies'} "
        "the run had accepted"
    )
    if refusal_said:
        answers = "its answer" if one else "their answers"
        return f"{line}; a lenient reparse gives {answers} back without a call"
    return (
        f"{line}: `dutchbook reparse {run_dir} --parser lenient` takes {'it' if one else 'them'} "
        "back without a call (a resume with a lenient spec is refused until then)"
    )


def unrecorded_answers_line(unrecorded: int) -> str | None:
    """What `audit`, `status` and the report say of answers whose accepted attempt is not in
    `attempts/` (None when there are none). A resume is not refused for them: they are
    answered, so it asks none of them again; only the audit's counts are short."""
    if not unrecorded:
        return None
    return (
        f"{plural(unrecorded, 'accepted answer')} {'has' if unrecorded == 1 else 'have'} no "
        "attempt in attempts/ (a lost or damaged file): the retry counts leave out whatever "
        "came before them; no command writes attempts/ again (restore it from a copy to count "
        "them)"
    )


def repeated_rows_line(repeats: Repeats, run_dir: str, then: str | None = None) -> str | None:
    """What `audit`, `status` and the report say of rows a run's shards hold twice (None
    when there are none, `engine.scan.Repeats`): each is counted once, and the shard that
    does not belong (a copy, or one put back after a reparse) is for the user to take out.

    With `then` (what to do once it is out), the one line in which `score`, `repair`,
    `report` and a resume refuse the folder (`runs.lost_answers`): which of two copies of an
    answer scoring reads is not known, and a reparse may have changed its values."""
    held = [
        text
        for n, text in (
            (repeats.answers, f"{plural(repeats.answers, 'answer')} in responses/"),
            (repeats.attempts, f"{plural(repeats.attempts, 'attempt')} in attempts/"),
        )
        if n
    ]
    if not held:
        return None
    one = repeats.answers + repeats.attempts == 1
    copies = (
        f"{' and '.join(held)} {'is a copy' if one else 'are copies'} of "
        f"{'one' if one else 'ones'} already there (in {_join(list(repeats.shards))}: a shard "
        "copied, or one put back after a reparse)"
    )
    if then is not None:
        return (
            f"{run_dir}: {copies}, and which copy of {'it' if one else 'each'} would be "
            f"read is not known; move each shard that does not belong out of the folder, "
            f"then {then}"
        )
    return (
        f"{copies}: each is counted once; move each shard that does not belong out of the "
        f"folder, then `dutchbook score {run_dir}` scores from one copy"
    )


def unplanned_rows_line(
    unplanned: Unplanned, run_dir: str, parser: str | None, then: str | None = None
) -> str | None:
    """What `audit`, `status` and the report say of rows the ledger holds for requests the
    plan does not hold (None when there are none, `engine.scan.Unplanned`): how many, in
    which files, that none is counted, and what mends it. A reparse rebuilds `responses/`
    from the plan's requests alone (`engine.reparse.reparse`), so it leaves such answers
    out; `attempts/` no command rewrites, but a shard holding nothing else can go whole,
    and otherwise nothing reads them.

    With `then` (what to do once they are out), the one line in which `score`, `repair`,
    `report` and a resume refuse a folder with such answers (`runs.lost_answers`): scoring
    would read them as the run's."""
    held = [
        f"{plural(n, what)} {_held_in(files, folder)}"
        for n, what, files, folder in (
            (unplanned.answers, "answer", unplanned.answer_files, RESPONSES),
            (unplanned.attempts, "attempt", unplanned.attempt_files, ATTEMPTS),
        )
        if n
    ]
    if not held:
        return None
    one = unplanned.rows == 1
    which = (
        f"{' and '.join(held)} {'is for a request' if one else 'are for requests'} "
        f"plan.parquet does not hold (in {_join(list(unplanned.files))}: a shard of another "
        "run copied in, a request id damaged on disk, or a line written by hand)"
    )
    which_parser = parser if parser is not None else "<the spec's parser>"
    them = "it" if unplanned.answers == 1 else "them"
    reparse = (
        f"`dutchbook reparse {run_dir} --parser {which_parser}` rebuilds responses/ from the "
        f"plan's requests alone, without {them}"
    )
    if then is not None:
        return (
            f"{run_dir}: {which}, and scoring would read {them} as this run's; {reparse}, "
            f"then {then}"
        )
    mends = ["it is not counted" if one else "none is counted"]
    if unplanned.answers:
        mends.append(reparse)
    if unplanned.attempts:
        mends.append(_unplanned_attempts_mend(unplanned))
    return f"{which}: {'; '.join(mends)}"


def _held_in(files: tuple[str, ...], folder: str) -> str:
    """Where unplanned rows of `folder` (`responses`, `attempts`) are, by the `files` holding
    them: "in responses/", "in the journal", or both ("a line written by hand" is the
    journal's, which a reparse folds into the shards); the folder where none are named."""
    places = [f"{folder}/"] * any(name.startswith(f"{folder}/") for name in files)
    places += ["the journal"] * any(name.startswith(f"{JOURNAL}/") for name in files)
    return f"in {' or '.join(places or [f'{folder}/'])}"


def _unplanned_attempts_mend(unplanned: Unplanned) -> str:
    """What mends attempts of requests the plan does not hold: no command rewrites
    `attempts/`, so a shard holding nothing else is moved out whole; otherwise they stay,
    counted by nothing."""
    shards = [name for name in unplanned.only if name.startswith("attempts/")]
    if shards:
        return (
            f"move {_join(shards)} out of the folder (it holds nothing else; no command "
            "rewrites attempts/)"
        )
    return "no command rewrites attempts/, and no count or resume reads those attempts"


def by_cause(counts: Mapping[str, int]) -> dict[str, int]:
    """Every known cause (zero when absent) in table order, then any unknown outcome."""
    out = {cause: int(counts.get(cause, 0)) for cause in CAUSES}
    out.update({k: int(v) for k, v in sorted(counts.items()) if k not in out})
    return out


def _join(parts: list[str]) -> str:
    if len(parts) <= 2:
        return " and ".join(parts)
    return ", ".join(parts[:-1]) + ", and " + parts[-1]


def retry_sentence(retry_attempts: int, requests_retried: int, requests: int,
                   retries_by_cause: Mapping[str, int], attempted: int | None = None,
                   unrecorded: int = 0, rejected: int = 0, rejected_by: str = "strict") -> str:
    """The paper's sentence: "N retry attempts across M requests out of T, attributed to
    rate limits (a), provider errors (b), ..." with every nonzero cause, largest first.

    `attempted`, the requests with an attempt in the ledger: where fewer than `requests`
    (a run stopped part-way), the sentence without retries says so, where it read as if
    every planned request had been asked.

    `unrecorded`, accepted answers whose attempt is not in the ledger (a lost attempts
    file): their retries are unknown, so the sentence never says every attempt was accepted,
    as it did of a folder whose attempts file was deleted.

    `rejected`, requests whose reply the run accepted and a reparse (`rejected_by`: strict,
    or the run's own parser, `engine.reparse.lost_despite_reparse`) rejected: not retries,
    and not accepted now, so the sentence says them after the retries and does not say
    every attempt was accepted."""
    said = _retries_said(
        retry_attempts, requests_retried, requests, retries_by_cause, attempted, unrecorded,
        every="" if rejected else ": every attempt was accepted",
    )
    return f"{said.rstrip('.')}; {_rejected_clause(rejected, rejected_by)}." if rejected else said


def _retries_said(retry_attempts: int, requests_retried: int, requests: int,
                  retries_by_cause: Mapping[str, int], attempted: int | None,
                  unrecorded: int, every: str) -> str:
    """`retry_sentence` without its clause on replies a reparse rejected; `every`, what
    follows "No retry attempts" when there were none."""
    if unrecorded and retry_attempts == 0:
        return (
            f"No retry attempts recorded, but {unrecorded:,} of "
            f"{plural(attempted if attempted is not None else requests, 'accepted answer')} "
            f"{'has' if unrecorded == 1 else 'have'} no recorded attempt, so the retries "
            "cannot be counted."
        )
    if retry_attempts == 0:
        if attempted == 0 and requests:  # "every attempt was accepted" of none at all
            return f"No attempts recorded yet (0 of {plural(requests, 'request')} attempted)."
        if attempted is not None and attempted < requests:
            return (
                f"No retry attempts{every} ({attempted:,} of "
                f"{plural(requests, 'request')} attempted so far)."
            )
        return f"No retry attempts{every} ({plural(requests, 'request')})."
    order = {cause: i for i, cause in enumerate(CAUSES)}
    causes = sorted(
        ((c, n) for c, n in retries_by_cause.items() if n),
        key=lambda item: (-item[1], order.get(item[0], len(order)), item[0]),
    )
    parts = [f"{CAUSE_LABELS.get(c, c.replace('_', ' '))} ({n:,})" for c, n in causes]
    unknown = (
        f" {plural(unrecorded, 'accepted answer')} {'has' if unrecorded == 1 else 'have'} no "
        "recorded attempt: their retries are not counted."
        if unrecorded
        else ""
    )
    return (
        f"{plural(retry_attempts, 'retry attempt')} across "
        f"{plural(requests_retried, 'request')} out of {requests:,}, attributed to "
        f"{_join(parts)}.{unknown}"
    )


def paper_causes(retries_by_cause: Mapping[str, int]) -> dict[str, int]:
    """Retry attempts by cause, grouped and labelled as the paper's Appendix C gives them
    (`PAPER_CAUSES`); a cause it does not name (an authentication error, a bad request, a
    duplicate) keeps its own words. The six are always there, 0 where nothing happened, so a
    reader tells a cause counted and absent from one not counted; another cause only where
    it happened. Largest first, ties in the paper's order."""
    group_of = {cause: label for label, causes in PAPER_CAUSES.items() for cause in causes}
    counts: dict[str, int] = dict.fromkeys(PAPER_CAUSES, 0)
    for cause, n in retries_by_cause.items():
        if n:
            label = group_of.get(cause) or CAUSE_LABELS.get(cause, cause.replace("_", " "))
            counts[label] = counts.get(label, 0) + n
    order = {label: i for i, label in enumerate(PAPER_CAUSES)}
    return dict(
        sorted(counts.items(), key=lambda item: (-item[1], order.get(item[0], len(order)), item[0]))
    )


def paper_causes_sentence(retries_by_cause: Mapping[str, int]) -> str | None:
    """The retries as Appendix C groups them, to set beside the paper's own counts; None
    where that grouping would only rename the sentence's causes (no reply was unusable but
    for 5xx errors), since the sentence already says them."""
    merged = set(PAPER_CAUSES["provider/response errors"]) - {"provider_error"}
    if not any(retries_by_cause.get(cause) for cause in merged):
        return None
    # The sentence says what happened, as the paper's does: the causes with none are in the
    # tables and `retries_by_paper_cause`, and six zeros said again by every run, status and
    # audit would bury the counts that matter.
    grouped = [(label, n) for label, n in paper_causes(retries_by_cause).items() if n]
    ours = [f"{label} ({n:,})" for label, n in grouped if label in PAPER_CAUSES]
    others = [f"{label} ({n:,})" for label, n in grouped if label not in PAPER_CAUSES]
    besides = f"; besides those six causes, {_join(others)}" if others else ""
    return f"As Appendix C groups them: {_join(ours)}{besides}."


def _rejected_clause(rejected: int, parser: str = "strict") -> str:
    """The audit sentence's words for requests whose reply a reparse with `parser` rejected:
    one reply each, the one the run accepted."""
    return (
        f"{plural(rejected, 'reply', 'replies')} the run accepted "
        f"{'was' if rejected == 1 else 'were'} rejected by `dutchbook reparse --parser "
        f"{parser}`, not retried"
    )


def at_provider_sentence(sentence: str, held: AtProvider) -> str:
    """The audit sentence of a folder with batch jobs still at the provider (`held`): their
    queries were asked, and no attempt of theirs is recorded until the jobs are collected."""
    return f"{sentence.rstrip('.')}; {held.phrase()}." if held else sentence


def said_in_full(
    sentence: str, retries_by_cause: Mapping[str, int], *, in_flight: int, attempted: int,
    requests: int, held: AtProvider,
) -> str:
    """The paper's sentence as `audit`, `status` and the report write it: `sentence`
    (`retry_sentence`'s), what is in flight (`in_flight_sentence`) and still at the provider
    (`at_provider_sentence`), then the retries as Appendix C groups them
    (`paper_causes_sentence`)."""
    said = at_provider_sentence(in_flight_sentence(sentence, in_flight, attempted, requests), held)
    grouped = paper_causes_sentence(retries_by_cause)
    return f"{said} {grouped}" if grouped else said


def resume_line(held: AtProvider, refused: str | None = None, capped: bool = False) -> str:
    """What running the same command again does, after lanes that ended early: a resume
    collects the batch jobs still at the provider, never asking their queries again. With
    `refused` (`engine.reparse.resume_refusal`: the folder may hold a strict reparse's
    answers and its spec is lenient), it asks nothing: the resume is refused, in the words it
    is refused in, which say what to do instead. `capped` (the spend cap stopped a lane): the
    cap counts what earlier runs spent, so the same command asks little or nothing more (it
    was said to ask every unanswered request, and asked none of them; what is left of the cap
    may still pay for a cheaper model's attempt, one at a time)."""
    if refused:
        return f"Running the same command again is refused: {refused}"
    again = "Running the same command again"
    if capped:
        again += (
            " with a higher --max-cost (the cap counts what earlier runs spent: under the same "
            "cap, little or nothing more is asked)"
        )
    if not held:
        return f"{again} asks only the unanswered requests"
    if held.simulator_jobs == held.jobs:  # nothing holds their answers any more
        return (
            f"{again} asks only the unanswered requests, those of the {held.counted()} left "
            "with the simulator of the run that planned them among them"
        )
    return f"{again} {', '.join(_resumed(held))}, and asks only the other unanswered requests"


def _resumed(held: AtProvider) -> list[str]:
    """What a resume does with the jobs `held` (`resume_line`): collects those created,
    without asking their queries again (but those a simulator that ended held), and finds or
    creates the jobs of the input files uploaded with no job on file, a job created asking
    their queries. Said together, the files were "collected, without asking their queries
    again"."""
    said = []
    if created := held.jobs - held.uncreated_jobs:
        gone = min(held.simulator_jobs - held.uncreated_simulator_jobs, created)
        jobs = AtProvider(created, held.queries - held.uncreated_queries, simulator_jobs=gone)
        if gone == created:
            said.append(f"asks again the queries of the {jobs.counted()} left with the "
                        "simulator of the run that planned them")
        else:
            whose = "the others'" if gone else "their"
            said.append(f"collects the {jobs.phrase()}, without asking {whose} queries again")
    if held.uncreated_jobs:
        each = "each of " if held.uncreated_jobs > 1 else ""
        files = plural(held.uncreated_jobs, "batch input file")
        queries = plural(held.uncreated_queries, "query", "queries")
        said.append(f"finds the job of {each}the {files} ({queries}) uploaded with no batch "
                    "job on file, or creates it (which asks its queries)")
    return said


# --------------------------------------------------------------------------- the audit


def earlier_lanes_text(updated_at: object, run_started_at: object) -> str:
    """What `audit` and `status` say of a `logs/lanes.json` older than a later run, which
    sent attempts and never wrote it (`runs.run_history.run_since`): how that
    run's lanes ended is not known (each adds what it does of the file's lanes)."""
    return (
        f"logs/lanes.json is of an earlier run (last written at {updated_at}): a later "
        f"run, begun at {run_started_at}, sent attempts and has not written it (it stopped "
        "before its lanes' first write, or its logs/ could not be written), so how its lanes "
        "ended is not known"
    )


@dataclass(frozen=True)
class AuditRow:
    """The audit of one scope (a model, a provider, or the whole run)."""

    #: Requests planned (distinct queries); without a plan, those seen in the ledger.
    requests: int
    accepted: int
    attempts: int
    retry_attempts: int
    requests_retried: int
    retries_by_cause: dict[str, int]
    #: Subcauses of `invalid_response` retry attempts.
    invalid_response_subcauses: dict[str, int]
    #: Requests with attempts but no accepted answer, by the cause of their last attempt
    #: (in a live run some of these are still being retried).
    given_up: dict[str, int]
    #: Latency of accepted attempts, ms (None when nothing was accepted).
    latency_ms: dict[str, float | None]
    tokens_in: int
    tokens_out: int
    #: Reported usage priced with the spec's prices (None when no model in scope is priced).
    cost_usd: float | None
    #: Requests never attempted yet (planned, no attempt in the ledger).
    not_attempted: int = 0
    #: Of `given_up`, requests whose answer-failure budget (`max_answer_failures`) is spent:
    #: a resume asks them again only once the spec raises it.
    answer_budget_spent: int = 0
    #: Of `given_up`, requests damaged batch results lost the line of twice
    #: (`engine.retry.lost_for_good`): each loss was billed, and no run asks them again,
    #: whatever their budget (so none of them is among `answer_budget_spent`).
    lost_to_damage: int = 0
    #: Requests whose accepted attempt is in the ledger and whose answer is not in
    #: `responses/` (a lost file; `classify`'s `answer_missing`): not retries, not given up.
    answers_missing: int = 0
    #: Accepted answers whose accepted attempt is not in the ledger (a lost attempts file):
    #: their retries cannot be counted, so the sentence does not claim there were none.
    answers_unrecorded: int = 0
    #: Requests whose reply the run accepted and a later `reparse --parser strict` rejected
    #: (`classify`'s `rejected_on_reparse`): no answer now, yet neither retried nor given up.
    answers_rejected_on_reparse: int = 0
    #: Batch lines the provider ran (billed) whose result the run could not read
    #: (`engine.spend.Unread`), and what `cost_usd` counts them at: each line's prompt and
    #: whole output cap, an upper bound (None where the scope is not priced).
    billed_unread: int = 0
    billed_unread_usd: float | None = None

    @property
    def given_up_total(self) -> int:
        return sum(self.given_up.values())

    def sentence(self, rejected_by: str = "strict") -> str:
        """`retry_sentence` of this scope; `rejected_by`, the parser of the reparse that
        rejected replies the run had accepted."""
        return retry_sentence(
            self.retry_attempts, self.requests_retried, self.requests, self.retries_by_cause,
            attempted=self.requests - self.not_attempted, unrecorded=self.answers_unrecorded,
            rejected=self.answers_rejected_on_reparse, rejected_by=rejected_by,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "accepted": self.accepted,
            "attempts": self.attempts,
            "retry_attempts": self.retry_attempts,
            "requests_retried": self.requests_retried,
            "retries_by_cause": dict(self.retries_by_cause),
            "retries_by_paper_cause": paper_causes(self.retries_by_cause),
            "invalid_response_subcauses": dict(self.invalid_response_subcauses),
            "given_up": dict(self.given_up),
            "not_attempted": self.not_attempted,
            "answer_budget_spent": self.answer_budget_spent,
            "lost_to_damage": self.lost_to_damage,
            "answers_missing": self.answers_missing,
            "answers_unrecorded": self.answers_unrecorded,
            "answers_rejected_on_reparse": self.answers_rejected_on_reparse,
            "latency_ms": dict(self.latency_ms),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            # Additive: of `cost_usd`, lines billed with no readable result, at their worst.
            "billed_unread": self.billed_unread,
            "billed_unread_cost_usd": self.billed_unread_usd,
        }


#: How a lane that ended early ended (`engine.lanes.LaneState`, as `logs/lanes.json` spells
#: it), in the audit's words.
_ENDED_EARLY = {"stopped": "stopped", "paused": "paused", "cancelled": "was stopped"}


def read_lane_ends(run_dir: Path | str) -> list[dict[str, Any]]:
    """The lanes of this run folder's last dispatch that ended early (stopped on a
    permanent failure, paused out of quota, cancelled by a stop or the spend cap), each
    `{model, provider, state, message, reason}`, from `logs/lanes.json` (none if it is
    absent; `reason` is None in a file written before lanes kept it)."""
    states = read_lane_states(run_dir)
    lanes = states.get("lanes") if states is not None else None
    if not isinstance(lanes, dict):
        return []
    # Each field a string or None: a file edited by hand or damaged on disk is said as far as
    # it can be, never as a list's or a number's repr.
    return [
        {
            "model": model,
            **{
                key: value if isinstance(value := lane.get(key), str) else None
                for key in ("provider", "state", "message", "reason")
            },
        }
        for model, lane in lanes.items()
        if isinstance(lane, dict) and lane.get("state") in _ENDED_EARLY
    ]


@dataclass(frozen=True)
class Audit:
    """A run folder's retry and failure audit: totals, per model, per provider."""

    totals: AuditRow
    by_model: dict[str, AuditRow]
    by_provider: dict[str, AuditRow]
    #: The provider of each model (from its attempts, else from the caller's mapping).
    providers: dict[str, str] = field(default_factory=dict)
    #: Lanes paused because their provider was down (`engine.outage`, `logs/pauses.jsonl`).
    pauses: list[dict[str, Any]] = field(default_factory=list)
    #: Lanes whose last dispatch ended before they finished (`read_lane_ends`).
    lane_ends: list[dict[str, Any]] = field(default_factory=list)
    #: `logs/lanes.json` where it is of an earlier run than the folder's latest, which sent
    #: attempts and never wrote it (`runs.audit.run_audit`): `{updated_at, run_started_at,
    #: lanes_ended_early}`, those lanes left out of `lane_ends`; None: the file is the latest
    #: run's, or not known to be another's.
    lanes_of_earlier_run: dict[str, Any] | None = None
    #: The folder, and the parser that made its answers (`engine.reparse.parser_in_force`),
    #: for the command that rebuilds answers lost from `responses/`.
    run_dir: str = "DIR"
    parser: str | None = None
    #: Whether replies rejected on reparse were rejected by `parser` itself, the run's own
    #: (`engine.reparse.lost_despite_reparse`), not by a strict reparse of a lenient run.
    rejected_by_own_parser: bool = False
    #: Attempts sent and not resolved (`engine.unresolved`) while a writer is live: in flight,
    #: in no count but the sentence's (their requests count as asked).
    in_flight: int = 0
    #: Attempts sent and not resolved by a run that died: counted as the `interrupted` retry
    #: attempts the next `Ledger.open` records, so the counts do not jump at the resume.
    interrupted_unrecorded: int = 0
    #: Of `interrupted_unrecorded`, batch lines (collected from their job, not sent again).
    interrupted_batch: int = 0
    #: Rows the shards hold twice (a shard copied, or put back after a reparse), counted
    #: once (`engine.scan.repeated_rows`).
    repeats: Repeats = field(default_factory=Repeats)
    #: Rows of requests the plan does not hold (another run's shard, an id damaged on disk),
    #: counted nowhere (`engine.scan.unplanned_rows`).
    unplanned: Unplanned = field(default_factory=Unplanned)
    #: Batch jobs not yet collected: their queries are with the provider (`AtProvider`).
    at_provider: AtProvider = field(default_factory=AtProvider)
    #: The line saying the folder's last reparse did not finish and to run it again
    #: (`engine.reparse.unfinished_line`), None when it did or there was none.
    reparse_unfinished: str | None = None
    #: Why a resume of the folder by its own spec is refused, and what to do instead
    #: (`engine.reparse.resume_refusal`), None when it is not: said by `notes()` in place of
    #: what running the same command again would ask (after lanes that ended early or
    #: budgets spent), and in `--json` as `resume_refused` whether said or not.
    resume_refused: str | None = None
    #: The refusal as `notes()` says it after `reparse_unfinished`'s line, which names the
    #: reparse to run again: naming no command that line names, and saying what is left once
    #: it has run (`resume_refusal(..., unfinished_said=True)`); None: `resume_refused`.
    resume_refused_note: str | None = None
    #: Per model, how many attempts' replies named each model as the one that answered
    #: (`attempts.model_reported`); empty for a folder written before the column.
    models_reported: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def sentence(self) -> str:
        totals = self.totals
        rejected_by = (self.parser if self.rejected_by_own_parser else None) or "strict"
        return said_in_full(
            totals.sentence(rejected_by), totals.retries_by_cause, in_flight=self.in_flight,
            attempted=totals.requests - totals.not_attempted, requests=totals.requests,
            held=self.at_provider,
        )  # fmt: skip

    def pause_lines(self) -> list[str]:
        """One line per model whose lane paused while its provider was down."""
        by_model: dict[str, list[dict[str, Any]]] = {}
        for pause in self.pauses:
            by_model.setdefault(str(pause.get("model")), []).append(pause)
        def total(pauses: list[dict[str, Any]], key: str) -> float:
            return sum(record_number(p.get(key)) or 0.0 for p in pauses)  # damaged: 0

        return [
            f"{model} paused {plural(len(ps), 'time')} for "
            f"{total(ps, 'seconds'):,.0f}s while its provider was down "
            f"({plural(int(total(ps, 'probes')), 'probe')}; "
            "no request was charged an attempt meanwhile)"
            for model, ps in by_model.items()
        ]

    @property
    def spend_capped(self) -> bool:
        """Whether the spend cap stopped a lane of the last dispatch (`SPEND_CAP_REACHED`
        begins the reason it was cancelled for)."""
        return any(
            end["state"] == "cancelled" and str(end["reason"]).startswith(SPEND_CAP_REACHED)
            for end in self.lane_ends
        )

    def lane_end_lines(self) -> list[str]:
        """One line per model whose lane ended its last dispatch early and left requests
        unanswered: how many, how the lane ended, and why (the lane's own message)."""
        lines = []
        for end in self.lane_ends:
            model = str(end.get("model"))
            provider = str(end.get("provider") or self.providers.get(model, "provider unknown"))
            row = self.by_model.get(model)
            if row is None or row.requests <= row.accepted:
                continue  # nothing of this model is left unanswered
            how = _ENDED_EARLY.get(str(end.get("state")), str(end.get("state")))
            # The reason, not the message, which names the lane the line has named already
            # (a lanes.json from before lanes kept their reason: its whole message).
            reason = end.get("reason")
            why = str(reason if isinstance(reason, str) else end.get("message") or "").strip()
            if why.startswith("after "):  # "stopped after 3 auth_error failures in a row ..."
                how = f"{how} {why}"
            elif why:
                how = f"{how} ({why})"
            lines.append(
                f"{model} ({provider}): {row.requests - row.accepted:,} of {row.requests:,} "
                f"requests unanswered; its lane {how}"
            )
        return lines

    def earlier_lanes_lines(self) -> list[str]:
        """The line saying `logs/lanes.json` is of an earlier run (`lanes_of_earlier_run`),
        in place of lines of how lanes ended: read as the latest run's, a resume given a
        higher --max-cost and killed before its lanes' first write said its lanes "was
        stopped (spend cap reached ...)" of the cap before, and to raise it."""
        earlier = self.lanes_of_earlier_run
        if earlier is None:
            return []
        ended = [str(end.get("model")) for end in earlier.get("lanes_ended_early") or []]
        return [
            earlier_lanes_text(earlier["updated_at"], earlier["run_started_at"])
            + " and none is said to have ended early"
            + (f" (the earlier run's file says {', '.join(ended)} did)" if ended else "")
        ]

    def budget_lines(self) -> list[str]:
        """One line per model with requests given up because their answer-failure budget
        is spent, which running the same command again does not ask. Where that resume is
        refused (`resume_refused`, which `notes()` then says after these lines), the lines
        promise it nothing: a resume asks them again only once the budget is raised."""
        again = (
            "a resume asks them again"
            if self.resume_refused
            else "running the same command again asks them"
        )
        return [
            f"{model}: {row.answer_budget_spent:,} request"
            f"{'s' if row.answer_budget_spent != 1 else ''} given up with the answer-failure "
            f"budget spent; {again} only once the spec's max_answer_failures is raised"
            for model, row in self.by_model.items()
            if row.answer_budget_spent
        ]

    def damage_lines(self) -> list[str]:
        """One line per model with requests given up for good as damaged batch results lost
        their lines twice (`AuditRow.lost_to_damage`): no run asks them again."""
        return [
            f"{model}: {plural(row.lost_to_damage, 'request')} {GIVEN_UP_FOR_GOOD}"
            for model, row in self.by_model.items()
            if row.lost_to_damage
        ]

    def unread_lines(self) -> list[str]:
        """One line per model with batch lines the provider ran, and billed, whose result
        could not be read (`AuditRow.billed_unread`): what its cost counts them at."""
        return [
            f"{model}: {plural(row.billed_unread, 'batch line')} the provider ran (billed) "
            f"{'has' if row.billed_unread == 1 else 'have'} no readable result, "
            + (f"counted in its cost at up to {dollars(row.billed_unread_usd)} (each line's "
               "prompt and whole output cap: their tokens are unknown, so the cost is an upper "
               "bound)" if row.billed_unread_usd is not None else "its cost not priced")
            for model, row in self.by_model.items()
            if row.billed_unread
        ]

    def reported_model_lines(self) -> list[str]:
        """One line per model whose replies named more than one model as the one that
        answered (`reported_model_lines`)."""
        return reported_model_lines(self.models_reported)

    def notes(self) -> list[str]:
        """What the tables do not show, as sentences: a reparse that did not finish first, then
        the attempts a died run left unresolved, answers lost from `responses/` (the folder is
        damaged; not while a reparse is unfinished, whose line names the same reparse), the
        reparse that takes back replies a strict reparse rejected, lanes that ended early,
        then pauses while a provider was down; after lanes that ended early, how to ask what
        they left; then requests whose answer-failure budget is spent. A resume being refused
        (`resume_refused`), no line promises it: after lanes that ended early or requests
        whose budget is spent, the last line says why running the same command again is
        refused and what to do instead, the one line to name the reparse that takes
        rejected replies back; after a reparse that did not finish, whose line (first) names
        the reparse to run again, it names no command that line names and says what is left
        once it has run (`resume_refused_note`)."""
        ends, budget = self.lane_end_lines(), self.budget_lines()
        # Refused, the resume is said (last) where a line would ask what is left; after an
        # unfinished reparse's line, without the command that line names.
        refused = (self.resume_refused_note or self.resume_refused) if ends or budget else None
        resume = (
            [resume_line(self.at_provider, refused, self.spend_capped)] if ends or refused else []
        )
        # An unfinished reparse's line names the reparse that rebuilds them too: said once.
        lost = None if self.reparse_unfinished else missing_answers_line(
            self.totals.answers_missing, self.run_dir, self.parser
        )
        unrecorded = unrecorded_answers_line(self.totals.answers_unrecorded)
        repeated = repeated_rows_line(self.repeats, self.run_dir)
        unplanned = unplanned_rows_line(self.unplanned, self.run_dir, self.parser)
        # As `status` notes them, and not while a reparse is unfinished (its line first).
        rejected = None if self.reparse_unfinished else rejected_answers_line(
            self.totals.answers_rejected_on_reparse, self.run_dir, refusal_said=bool(refused),
            own_parser=self.parser if self.rejected_by_own_parser else None,
        )
        lines = [
            *([self.reparse_unfinished] if self.reparse_unfinished else []),
            *self._interrupted_lines(),
            *([lost] if lost else []), *([unrecorded] if unrecorded else []),
            *([repeated] if repeated else []), *([unplanned] if unplanned else []),
            *([rejected] if rejected else []), *self.earlier_lanes_lines(), *ends,
            *self.pause_lines(), *self.reported_model_lines(),
            *([] if refused else resume), *budget, *self.damage_lines(), *self.unread_lines(),
            *(resume if refused else []),
        ]
        return [line if line.endswith((".", "?", "!")) else f"{line}." for line in lines]

    def _interrupted_lines(self) -> list[str]:
        n = self.interrupted_unrecorded
        return [f"{interrupted_note(n, self.interrupted_batch)}."] if n else []

    def to_dict(self) -> dict[str, Any]:
        """The `dutchbook audit --json` object."""
        return {
            "totals": self.totals.to_dict(),
            "by_model": {m: row.to_dict() for m, row in self.by_model.items()},
            "by_provider": {p: row.to_dict() for p, row in self.by_provider.items()},
            "providers": dict(self.providers),
            "sentence": self.sentence,
            "pauses": list(self.pauses),
            "lanes_ended_early": list(self.lane_ends),
            # Additive: lanes.json of an earlier run, its lanes left out of the list above.
            "lanes_of_earlier_run": self.lanes_of_earlier_run,
            "in_flight": self.in_flight,
            "interrupted_unrecorded": self.interrupted_unrecorded,
            "interrupted_batch": self.interrupted_batch,
            "answers_repeated": self.repeats.answers,
            "attempts_repeated": self.repeats.attempts,
            # Additive: rows of requests the plan does not hold, counted nowhere else.
            "answers_unplanned": self.unplanned.answers,
            "attempts_unplanned": self.unplanned.attempts,
            "batch_at_provider": asdict(self.at_provider),  # `uncreated_*`: additive
            "reparse_unfinished": self.reparse_unfinished,
            # Additive: why a resume by its spec is refused and what to do, or None.
            "resume_refused": self.resume_refused,
            # Additive: per model, attempts by the model their reply named.
            "models_reported": {m: dict(named) for m, named in self.models_reported.items()},
        }

    def table(self) -> pl.DataFrame:
        """One row per model, then one per provider, then `all`: the flat audit table.

        Columns: `scope` (model|provider|all), `name`, `provider`, the counts, one
        `retries.<cause>` and one `given_up.<cause>` column per cause, the invalid-response
        subcauses (`invalid.<subcause>`), `latency_p50_ms` ... and `cost_usd`; then
        `answers_missing`, `answers_rejected_on_reparse`, `answer_budget_spent`,
        `answers_unrecorded`, `lost_to_damage`, `billed_unread` and `billed_unread_cost_usd`,
        as in `--json`.
        """
        rows = [("model", m, self.providers.get(m), r) for m, r in self.by_model.items()]
        rows += [("provider", p, p, r) for p, r in self.by_provider.items()]
        rows.append(("all", "all", None, self.totals))
        causes = list(self.totals.retries_by_cause)
        subcauses = list(self.totals.invalid_response_subcauses)
        records = []
        for scope, name, provider, row in rows:
            record: dict[str, Any] = {
                "scope": scope,
                "name": name,
                "provider": provider,
                "requests": row.requests,
                "accepted": row.accepted,
                "attempts": row.attempts,
                "retry_attempts": row.retry_attempts,
                "requests_retried": row.requests_retried,
                "given_up": row.given_up_total,
                "not_attempted": row.not_attempted,
            }
            record.update({f"retries.{c}": row.retries_by_cause.get(c, 0) for c in causes})
            record.update(
                {f"invalid.{s}": row.invalid_response_subcauses.get(s, 0) for s in subcauses}
            )
            record.update({f"given_up.{c}": row.given_up.get(c, 0) for c in causes})
            record.update({f"latency_{k}_ms": v for k, v in row.latency_ms.items()})
            record.update(
                {"tokens_in": row.tokens_in, "tokens_out": row.tokens_out, "cost_usd": row.cost_usd}
            )
            # Last, so a script reading the columns by position reads the old ones as before.
            # accepted + given_up + not_attempted + answers_missing + answers_rejected_on_reparse
            # = requests, but for first attempts still in flight (without the last two a
            # damaged or reparsed folder's row fell short); answer_budget_spent is part of
            # given_up, and so is lost_to_damage (added after), answers_unrecorded part of
            # accepted.
            record.update(
                {
                    "answers_missing": row.answers_missing,
                    "answers_rejected_on_reparse": row.answers_rejected_on_reparse,
                    "answer_budget_spent": row.answer_budget_spent,
                    "answers_unrecorded": row.answers_unrecorded,
                    "lost_to_damage": row.lost_to_damage,
                    "billed_unread": row.billed_unread,
                    "billed_unread_cost_usd": row.billed_unread_usd,
                }
            )
            records.append(record)
        return pl.DataFrame(records, infer_schema_length=None)


def _counts(frame: pl.DataFrame, key: str, value: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for scope, name, n in frame.select("model", key, value).iter_rows():
        out.setdefault(str(scope), {})[str(name)] = int(n)
    return out


#: The attempts are audited in at most this many parts, split by a hash of the request id (a
#: request's attempts and answer fall in the same part), so the join of attempts with
#: answers holds a quarter of the campaign's ids at a time. Measured on a synthetic
#: paper-scale ledger (365,100 requests, 405,719 attempts in 37 shards): the whole audit
#: peaks at 167-188 MB RSS in about 2 s (one part: ~230 MB; importing polars and scanning
#: alone: ~90 MB).
PARTS = 4
#: A ledger of at most this many attempts is audited in one part, more in as many parts as
#: hold this many each, up to `PARTS` (`parts_for`): four parts of the benchmark's 46,500
#: attempts took 0.31-0.42 s and 0.40-0.49 s of CPU, one part 0.13 s and 0.20 s, each part a
#: pass over every shard. A part of this size held the paper scale's memory (a quarter of
#: 405,719 attempts).
ROWS_PER_PART = 100_000


def parts_for(attempts: pl.LazyFrame) -> int:
    """How many parts to audit `attempts` in (`ROWS_PER_PART`): their count is read from the
    shards' footers, a few milliseconds."""
    rows = int(attempts.select(pl.len()).collect().item())
    return max(1, min(PARTS, math.ceil(rows / ROWS_PER_PART)))


def _reduce(marked: pl.LazyFrame, answer_budget: int | None = None) -> list[pl.LazyFrame]:
    """Per model: summary counts, causes, subcauses, given-up requests (all additive over
    disjoint sets of requests), and the accepted attempts' latencies."""
    retry = pl.col("cause").is_not_null()  # the definition: not accepted, not rejected
    carried = carried_by_batch()  # lines a batch job carried are paid at batch prices
    summary = marked.group_by("model").agg(
        pl.len().alias("attempts"),
        retry.sum().alias("retry_attempts"),
        pl.col("request_id").filter(retry).n_unique().alias("requests_retried"),
        pl.col("tokens_in").sum().alias("tokens_in"),
        pl.col("tokens_out").sum().alias("tokens_out"),
        pl.col("tokens_in").filter(carried).sum().alias("batch_tokens_in"),
        pl.col("tokens_out").filter(carried).sum().alias("batch_tokens_out"),
        (pl.col("accepted") & pl.col("answer_missing")).sum().alias("answers_missing"),
        pl.col("request_id").filter(pl.col(REJECTED_ON_REPARSE)).n_unique()
        .alias("answers_rejected_on_reparse"),
    )
    causes = marked.filter(retry).group_by("model", "cause").agg(pl.len().alias("n"))
    subcauses = (
        marked.filter(pl.col("cause") == INVALID)
        .group_by("model", "subcause")
        .agg(pl.len().alias("n"))
    )
    # A request with attempts and no accepted answer: the cause of its last attempt, and
    # whether its answer-failure budget is spent (a resume does not ask it again until the
    # budget is raised). One whose reply the run accepted and a reparse rejected was not
    # given up: it is counted apart, above.
    given_up = (
        marked.filter(~pl.col("answered"))
        .group_by("request_id")
        .agg(
            pl.col("model").first(),
            pl.col("cause").sort_by("attempt").last(),
            budget_spent(answer_budget).alias("spent"),
            damaged_for_good().alias("lost"),
            pl.col(REJECTED_ON_REPARSE).any().alias("_rejected"),
        )
        .filter(~pl.col("_rejected"))
        .group_by("model", "cause")
        .agg(
            pl.len().alias("n"),
            # Counted once, lost first, as the lane rules (`engine.batch_lane._given_up`): a
            # raised budget asks no request lost for good.
            (pl.col("spent") & ~pl.col("lost")).sum().alias("spent"),
            pl.col("lost").sum().alias("lost"),
        )
    )
    latencies = marked.filter(pl.col("accepted")).select(
        pl.col("model", "provider").cast(pl.Categorical), "elapsed_ms"
    )
    return [summary, causes, subcauses, given_up, latencies]


def _partitioned(
    attempts: pl.LazyFrame, responses: pl.LazyFrame, ok_accepted: bool, *,
    rejected_possible: bool = True, lost: pl.LazyFrame | None = None,
    answer_budget: int | None = None,
) -> list[pl.DataFrame]:
    """`_reduce` over `parts_for` disjoint sets of requests, counts summed across them;
    `ok_accepted`, `rejected_possible` and `lost` are `classify`'s, `answer_budget` `audit`'s."""
    parts = parts_for(attempts)
    part = pl.col("request_id").hash(0) % parts
    pieces: list[list[pl.DataFrame]] = [[] for _ in range(6)]
    for k in range(parts):
        some_attempts, some_responses = attempts.filter(part == k), responses.filter(part == k)
        marked = classify(
            some_attempts, some_responses, ok_means_accepted=ok_accepted,
            rejected_possible=rejected_possible, lost=lost,
        )
        queries = [
            *_reduce(marked, answer_budget), unrecorded_by_model(some_attempts, some_responses)
        ]
        for i, query in enumerate(queries):
            pieces[i].append(query.collect(engine="streaming"))
    summary, causes, subcauses, given_up, latencies, unrecorded = (pl.concat(p) for p in pieces)
    counts = [c for c in summary.columns if c != "model"]
    return [
        summary.group_by("model").agg(pl.col(c).sum() for c in counts),
        causes.group_by("model", "cause").agg(pl.col("n").sum()),
        subcauses.group_by("model", "subcause").agg(pl.col("n").sum()),
        given_up.group_by("model", "cause").agg(
            pl.col("n").sum(), pl.col("spent").sum(), pl.col("lost").sum()
        ),
        unrecorded.group_by("model").agg(pl.col("n").sum()),
        latencies,
    ]


def unrecorded_by_model(attempts: pl.LazyFrame, responses: pl.LazyFrame) -> pl.LazyFrame:
    """Per `model`, `n` answers whose accepted attempt (`responses.attempts`) has no row in
    `attempts`: every answer is written with its attempt, so only a lost file leaves one."""
    # On a 64-bit hash of the id, as `engine.scan.lost_answers` (a collision could only hide
    # one): the strings made this join a fifth of a paper-scale audit's time.
    key = pl.col("request_id").hash(0).alias("key")
    recorded = attempts.select(key, pl.col("attempt").cast(pl.Int64))
    return (
        responses.select(key, "model", pl.col("attempts").cast(pl.Int64).alias("attempt"))
        .join(recorded, on=["key", "attempt"], how="anti")
        .group_by("model")
        .agg(pl.len().cast(pl.Int64).alias("n"))
    )


def _percentiles(latencies: pl.DataFrame, key: str | pl.Expr) -> dict[str, list[Any]]:
    """p50, p95, p99 of the accepted attempts' latency per `key` value."""
    frame = latencies.group_by(key).agg(
        pl.col("elapsed_ms").quantile(q, interpolation="linear").alias(name)
        for name, q in _QUANTILES.items()
    )
    return {str(k): v for k, *v in frame.iter_rows()}


def _plan_counts(run_dir: Path) -> dict[str, int] | None:
    path = run_dir / PLAN
    if not path.exists():
        return None
    frame = pl.scan_parquet(path).group_by("model").len().collect()
    return {str(m): int(n) for m, n in frame.iter_rows()}


def audit(
    run_dir: Path | str,
    *,
    prices: Mapping[str, Prices] | None = None,
    providers: Mapping[str, str] | None = None,
    batch_prices: Mapping[str, Prices] | None = None,
    spec_parser: str | None = None,
    answer_budget: int | None = None,
    output_caps: Mapping[str, int | None] | None = None,
) -> Audit:
    """Audit a run folder from its plan and ledger (no lock, no provider, no write).

    `prices` (model -> `engine.spend.Prices`) prices the reported usage; `batch_prices`
    prices the usage of lines a batch job carried (else `prices` do); `providers`
    (model -> provider) names the provider of models with no attempt yet (others are
    read from their attempts); `spec_parser`, the run's own parser, tells answers lost
    from `responses/` from replies a reparse rejected (`classify`). The journal's attempts
    sent and not resolved are read in with the recorded ones (`engine.unresolved.with_unresolved`).
    `answer_budget`, the spec's `max_answer_failures` in force, tells which requests given up
    the next run will not ask (`AuditRow.answer_budget_spent`); without it, those whose last
    attempt said their budget was spent. `output_caps` (model -> the spec's `max_tokens`)
    prices batch lines billed whose result could not be read at their worst case
    (`engine.spend.Unread`; a model without one at `engine.spend.DEFAULT_OUTPUT_CAP`).

    Memory: the attempts are reduced per model in one streaming pass (a request belongs to
    one model, so provider and total counts are sums of model rows); only the latency
    percentiles of providers and of the whole run need a second, narrow pass, and the models
    the replies named (`Audit.models_reported`) a third (about 0.1 s at the paper's scale).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    # Read again when a reparse replaced the answers' shards while they were read.
    return read_settled(
        run_dir,
        lambda: _read_audit(run_dir, prices, providers, batch_prices, spec_parser, answer_budget,
                            output_caps or {}),
    )


def _read_audit(
    run_dir: Path,
    prices: Mapping[str, Prices] | None,
    providers: Mapping[str, str] | None,
    batch_prices: Mapping[str, Prices] | None,
    spec_parser: str | None,
    answer_budget: int | None,
    output_caps: Mapping[str, int | None],
) -> Audit:
    """`audit`'s report, read once."""
    repeats = repeated_rows(run_dir)  # a shard copied: its rows count once
    unplanned = unplanned_rows(run_dir)  # another run's, or damaged: not counted
    attempts, responses = scan_ledger(
        run_dir, _ATTEMPT_COLUMNS, ["request_id", "model", "attempts"], repeats, unplanned
    )
    attempts, unresolved = with_unresolved(run_dir, attempts, responses)
    provider_of = (
        attempts.group_by("model").agg(pl.col("provider").drop_nulls().first()).collect()
    )
    mapping = {str(m): str(p) for m, p in provider_of.iter_rows() if p is not None}
    for model, provider in (providers or {}).items():
        mapping.setdefault(model, provider)
    answered = responses.group_by("model").agg(pl.len()).collect(engine="streaming")
    accepted_by_model = {str(m): int(n) for m, n in answered.iter_rows()}
    reading = read_ok_replies(run_dir, spec_parser, sum(accepted_by_model.values()))
    # Lost answers are searched for only in a folder that lost some: the search added a
    # third to a paper-scale audit's time and 50 MB to its peak, where `lost_answers` asks
    # it of the whole folder in a fraction of that.
    ok_accepted = reading.ok_means_accepted and reading.lost_count(run_dir) > 0
    *reduced, latencies = _partitioned(
        attempts, responses, ok_accepted, rejected_possible=not reading.ok_means_accepted,
        lost=reading.lost, answer_budget=answer_budget,
    )
    planned = _plan_counts(run_dir)

    first_asked = unresolved.first_asked
    models = sorted(
        set(planned or {}) | set(accepted_by_model) | {str(m) for m in reduced[0]["model"]}
        | set(first_asked)
    )

    unread = _unread(attempts, run_dir, prices or {}, batch_prices or {}, output_caps)

    def cost(names: list[str]) -> float | None:
        return _cost(prices, names, reduced[0], batch_prices, _priced(unread))

    per_model = _percentiles(latencies, "model")
    by_model = {
        m: _row(reduced, m, _sum(planned, [m]), accepted_by_model.get(m, 0), cost([m]),
                per_model.get(m), first_asked.get(m, 0), unread.get(m, (0, None)))
        for m in models
    }
    by_provider, totals = _rolled_up(by_model, mapping, latencies, cost)
    return Audit(totals=totals, by_model=by_model, by_provider=by_provider,
                 providers={m: mapping[m] for m in models if m in mapping},
                 pauses=read_pauses(run_dir), lane_ends=read_lane_ends(run_dir),
                 run_dir=str(run_dir), parser=parser_in_force(run_dir, spec_parser),
                 rejected_by_own_parser=reading.own_parser,
                 in_flight=unresolved.in_flight, interrupted_unrecorded=unresolved.interrupted,
                 interrupted_batch=unresolved.interrupted_batch,
                 repeats=repeats, unplanned=unplanned,
                 at_provider=at_provider(fold_jobs(run_dir), attempts),
                 models_reported=models_reported_by(attempts),
                 lanes_of_earlier_run=None,  # the campaign's `runs.audit` tells
                 **_reparse_notes(run_dir, spec_parser))


def reported_model_lines(models_reported: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per model whose replies named more than one model as the one that answered
    (`models_reported`, `Audit.models_reported`'s shape): a gateway's fallback, an alias
    resolved to another model, a deployment upgraded during the run, or a resume against
    another server (a `base_url` now the simulator's) answered some of its queries. `audit`
    notes them, `status` and `run`'s closing lines say them."""
    # A name is the provider's text: one line without control characters, as a
    # failure's detail is (`short`), for the console and report.md.
    return [
        f"{model}: its replies named {len(named)} models as the one answering ("
        + ", ".join(f"{short(name, 200)} {n:,}" for name, n in sorted(
            named.items(), key=lambda kv: (-kv[1], kv[0])))
        + "): another model answered some of its queries (attempts.model_reported)"
        for model, named in models_reported.items()
        if len(named) > 1
    ]


def models_reported_by(attempts: pl.LazyFrame) -> dict[str, dict[str, int]]:
    """Per model, how many attempts' replies named each model (`Audit.models_reported`)."""
    named = (
        attempts.filter(pl.col("model_reported").is_not_null())
        .group_by("model", "model_reported")
        .agg(pl.len().alias("n"))
        .collect(engine="streaming")
    )
    found: dict[str, dict[str, int]] = {}
    for model, reported, n in named.sort("model", "model_reported").iter_rows():
        found.setdefault(str(model), {})[str(reported)] = int(n)
    return found


def _reparse_notes(run_dir: Path, spec_parser: str | None) -> dict[str, str | None]:
    """`Audit.reparse_unfinished`, `.resume_refused` and `.resume_refused_note`: after the
    unfinished reparse's line, which names the reparse to run again, the refusal names no
    command that line names and says what is left once it has run. Read without the lock,
    a reparse still running is said to be (`unlocked`), as `unfinished_line` leaves it."""
    unfinished = unfinished_line(run_dir)
    refused = resume_refusal(run_dir, spec_parser, spec="its spec", unlocked=True)
    note = refused and unfinished and resume_refusal(
        run_dir, spec_parser, spec="its spec", unfinished_said=True, unlocked=True
    )
    return {"reparse_unfinished": unfinished, "resume_refused": refused,
            "resume_refused_note": note or None}


def _rolled_up(
    by_model: dict[str, AuditRow],
    mapping: Mapping[str, str],
    latencies: pl.DataFrame,
    cost: Callable[[list[str]], float | None],
) -> tuple[dict[str, AuditRow], AuditRow]:
    """The rows per provider (of each model's, by `mapping`) and the total: sums of model
    rows, with their own latency percentiles and cost."""
    names: dict[str, list[str]] = {}
    for m in by_model:
        names.setdefault(mapping.get(m, "unknown"), []).append(m)
    per_provider = _percentiles(latencies, "provider")
    by_provider = {
        p: _combine([by_model[m] for m in ms], per_provider.get(p), cost(ms))
        for p, ms in sorted(names.items())
    }
    overall = _percentiles(latencies, pl.lit("all").alias("all")).get("all")
    return by_provider, _combine(list(by_model.values()), overall, cost(list(by_model)))


def _combine(rows: list[AuditRow], latency: list[Any] | None, cost: float | None) -> AuditRow:
    """Several models' rows as one (their requests are disjoint, so counts add up)."""

    def total(name: str) -> int:
        return sum(getattr(r, name) for r in rows)

    def added(name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in rows:
            for k, v in getattr(r, name).items():
                out[k] = out.get(k, 0) + v
        return out

    return AuditRow(
        requests=total("requests"),
        accepted=total("accepted"),
        attempts=total("attempts"),
        retry_attempts=total("retry_attempts"),
        requests_retried=total("requests_retried"),
        retries_by_cause=by_cause(added("retries_by_cause")),
        invalid_response_subcauses=_subcauses(added("invalid_response_subcauses")),
        given_up=by_cause(added("given_up")),
        latency_ms=_latency_ms(latency),
        tokens_in=total("tokens_in"),
        tokens_out=total("tokens_out"),
        cost_usd=cost,
        not_attempted=total("not_attempted"),
        answer_budget_spent=total("answer_budget_spent"),
        lost_to_damage=total("lost_to_damage"),
        answers_missing=total("answers_missing"),
        answers_unrecorded=total("answers_unrecorded"),
        answers_rejected_on_reparse=total("answers_rejected_on_reparse"),
        billed_unread=total("billed_unread"),
        billed_unread_usd=_priced_sum([r.billed_unread_usd for r in rows]),
    )


def _priced_sum(values: list[float | None]) -> float | None:
    """The sum of the priced `values`, None when none is."""
    priced = [v for v in values if v is not None]
    return math.fsum(priced) if priced else None


def _sum(planned: Mapping[str, int] | None, models: Iterable[str]) -> int | None:
    if planned is None:
        return None
    return sum(planned.get(m, 0) for m in models)


def _cost(
    prices: Mapping[str, Prices] | None,
    models: list[str],
    summary: pl.DataFrame,
    batch_prices: Mapping[str, Prices] | None = None,
    unread_usd: Mapping[str, float] | None = None,
) -> float | None:
    """Live attempts at `prices`, lines a batch job carried at `batch_prices` (else `prices`),
    and, per model, what its batch lines billed with no readable result count (`unread_usd`,
    `_unread_cost`).

    Added by `math.fsum`, whose total does not depend on the order of its terms: the
    summary's rows come in no fixed order (a `group_by`), and a plain sum of the same
    models' costs gave `report/audit.json` 1.38044028 and `dutchbook audit --json`
    1.3804402800000002 for one folder."""
    live, batch = prices or {}, batch_prices or {}
    if not any(m in live or m in batch for m in models):
        return None
    terms: list[float] = []
    usage = summary.select(
        "model", "tokens_in", "tokens_out", "batch_tokens_in", "batch_tokens_out"
    )
    for scope, tokens_in, tokens_out, batch_in, batch_out in usage.iter_rows():
        if scope not in models:
            continue
        batch_in, batch_out = batch_in or 0, batch_out or 0
        if scope in live:
            terms.append(
                live[scope].cost((tokens_in or 0) - batch_in, (tokens_out or 0) - batch_out)
            )
        if (carried := batch.get(scope, live.get(scope))) is not None:
            terms.append(carried.cost(batch_in, batch_out))
    terms += [usd for m, usd in (unread_usd or {}).items() if m in models]
    return math.fsum(terms)


def _unread(
    attempts: pl.LazyFrame, run_dir: Path, prices: Mapping[str, Prices],
    batch_prices: Mapping[str, Prices], output_caps: Mapping[str, int | None],
) -> dict[str, tuple[int, float | None]]:
    """Per model, its batch lines billed with no readable result (`engine.spend.Unread`),
    and their worst case at the prices its batch lines are counted at (`_cost`), None where
    it has none."""
    out: dict[str, tuple[int, float | None]] = {}
    for model, lines in unread_lines(attempts, run_dir / PLAN).items():
        carried = batch_prices.get(model, prices.get(model))
        usd = None if carried is None else lines.cost(carried, output_caps.get(model))
        out[model] = (lines.lines, usd)
    return out


def _priced(unread: Mapping[str, tuple[int, float | None]]) -> dict[str, float]:
    """`_unread`'s dollars of the models it priced."""
    return {model: usd for model, (_, usd) in unread.items() if usd is not None}


def _row(
    frames: list[pl.DataFrame],
    name: str,
    planned: int | None,
    accepted: int,
    cost: float | None,
    latency: list[Any] | None,
    first_asked: int = 0,
    unread: tuple[int, float | None] = (0, None),
) -> AuditRow:
    """One model's row from `_partitioned`'s frames; `first_asked` requests have nothing
    recorded but an attempt in flight (`_first_asked`); `unread`, its batch lines billed with
    no readable result and what they count (`AuditRow.billed_unread`)."""
    summary, causes, subcauses, given_up, unrecorded = frames
    found = summary.filter(pl.col("model") == name)
    stats: dict[str, Any] = found.row(0, named=True) if found.height else {}
    given = by_cause(_counts(given_up, "cause", "n").get(name, {}))
    # Requests the ledger has seen: answered, answered with the answer lost, attempted and
    # not answered (given up, or rejected on reparse; counted so rather than by a distinct
    # count of every id, which would cost memory at paper scale), or asked now for the first
    # time.
    missing = int(stats.get("answers_missing") or 0)
    rejected = int(stats.get("answers_rejected_on_reparse") or 0)
    seen = accepted + missing + sum(given.values()) + rejected + first_asked
    requests = planned if planned is not None else seen
    return AuditRow(
        requests=requests,
        accepted=accepted,
        attempts=int(stats.get("attempts") or 0),
        retry_attempts=int(stats.get("retry_attempts") or 0),
        requests_retried=int(stats.get("requests_retried") or 0),
        retries_by_cause=by_cause(_counts(causes, "cause", "n").get(name, {})),
        invalid_response_subcauses=_subcauses(_counts(subcauses, "subcause", "n").get(name, {})),
        given_up=given,
        latency_ms=_latency_ms(latency),
        tokens_in=int(stats.get("tokens_in") or 0),
        tokens_out=int(stats.get("tokens_out") or 0),
        cost_usd=cost,
        not_attempted=max(requests - seen, 0) if planned is not None else 0,
        answer_budget_spent=sum(_counts(given_up, "cause", "spent").get(name, {}).values()),
        lost_to_damage=sum(_counts(given_up, "cause", "lost").get(name, {}).values()),
        answers_missing=missing,
        answers_unrecorded=int(unrecorded.filter(pl.col("model") == name)["n"].sum()),
        answers_rejected_on_reparse=rejected,
        billed_unread=unread[0],
        billed_unread_usd=unread[1],
    )


def _subcauses(counts: Mapping[str, int]) -> dict[str, int]:
    out = {s: int(counts.get(s, 0)) for s in INVALID_SUBCAUSES}
    out.update({k: int(v) for k, v in sorted(counts.items()) if k not in out})
    return out


def _latency_ms(values: list[Any] | None) -> dict[str, float | None]:
    values = values or [None] * len(_QUANTILES)
    return {
        k: None if v is None else round(float(v), 3)
        for k, v in zip(_QUANTILES, values, strict=True)
    }


# --------------------------------------------------------------------------- figure 8


def attempt_timeline(run_dir: Path | str, bins: int = 60) -> pl.DataFrame:
    """Attempts over time by outcome, per model: the data of the report's audit figure.

    The campaign's span (first to last attempt start) is cut into `bins` equal bins; each
    row counts one model's attempts in one bin with one outcome: `accepted` for the accepted
    attempt (an answer lost from `responses/` since included, as `status` and the audit read
    them: `read_ok_replies`), `rejected_on_reparse` for a reply the run accepted and a
    strict reparse rejected (no retry), else its retry cause (`classify`). Columns: `model`, `bin`
    (0-based), `start`, `end` (UTC datetimes), `outcome`, `attempts`. Empty frame when
    nothing was attempted.
    """
    if bins < 1:
        raise ValueError("bins must be at least 1")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    attempts, responses = scan_ledger(
        run_dir, ["request_id", "attempt", "model", "outcome", "detail", "started_at"],
        ["request_id", "attempts"], repeated_rows(run_dir), unplanned_rows(run_dir),
    )
    epoch = pl.col("started_at").dt.epoch("us")
    span = attempts.select(epoch.min().alias("t0"), epoch.max().alias("t1")).collect()
    t0, t1 = span["t0"][0], span["t1"][0]
    schema = {
        "model": pl.String(), "bin": pl.Int64(), "start": pl.Datetime("us", "UTC"),
        "end": pl.Datetime("us", "UTC"), "outcome": pl.String(), "attempts": pl.Int64(),
    }
    if t0 is None:
        return pl.DataFrame(schema=schema)
    width_us = max(int(t1) - int(t0), 1) / bins
    offset = (epoch - int(t0)).cast(pl.Float64)
    part = pl.col("request_id").hash(0) % (parts := parts_for(attempts))
    # The run's parser unknown here: cautious. Answers lost after a strict reparse are drawn
    # as the accepted attempts they were, as `status` and the audit count them.
    reading = read_ok_replies(run_dir, None)
    pieces = [
        classify(
            attempts.filter(part == k), responses.filter(part == k),
            ok_means_accepted=reading.ok_means_accepted, lost=reading.lost,
        )
        .select(
            "model",
            (offset / width_us).floor().cast(pl.Int64).clip(0, bins - 1).alias("bin"),
            pl.when(pl.col(REJECTED_ON_REPARSE))
            .then(pl.lit(REJECTED_ON_REPARSE))
            .otherwise(pl.col("cause").fill_null(ACCEPTED))
            .alias("outcome"),
        )
        .group_by("model", "bin", "outcome")
        .agg(pl.len().cast(pl.Int64).alias("attempts"))
        .collect(engine="streaming")
        for k in range(parts)  # as in `audit`: a part of the requests joined at a time
    ]
    counted = pl.concat(pieces).group_by("model", "bin", "outcome").agg(pl.col("attempts").sum())
    start = pl.lit(int(t0)) + (pl.col("bin").cast(pl.Float64) * width_us).cast(pl.Int64)
    end = pl.lit(int(t0)) + ((pl.col("bin") + 1).cast(pl.Float64) * width_us).cast(pl.Int64)
    return (
        counted.with_columns(
            start.cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("start"),
            end.cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("end"),
        )
        .select(list(schema))
        .cast(schema)  # type: ignore[arg-type]
        .sort("model", "bin", "outcome")
    )
