"""Where a run stands, read from its folder alone: while it runs, after it finished or died.

Nothing here takes the ledger's lock or writes a file, so `dutchbook status` is safe to
run next to a live dispatch. Every count comes from the lazy readers (shards ∪ journal,
torn last line skipped, deduplicated), so a run killed with -9 reads the same as one
that is still going, only its state differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from engine.audit import (
    REJECTED_ON_REPARSE,
    by_cause,
    classify,
    missing_answers_line,
    models_reported_by,
    read_ok_replies,
    rejected_answers_line,
    repeated_rows_line,
    reported_model_lines,
    retry_sentence,
    said_in_full,
    unplanned_rows_line,
    unrecorded_answers_line,
    unrecorded_by_model,
)
from engine.batch_jobs import BatchJob, at_provider, fold_jobs, jobs_summary
from engine.batch_waits import at_provider_waits, polled_times
from engine.console_lines import StopWait, longest_stop_wait
from engine.durable import record_number
from engine.journal import list_segments
from engine.lane_counts import GAVE_UP_KEYS, time_left_s
from engine.lanefile import read_lane_states
from engine.reparse import parser_in_force, unfinished_line
from engine.retry import DUPLICATE
from engine.runlock import read_pid
from engine.scan import (
    JOURNAL,
    budget_spent,
    damaged_for_good,
    read_settled,
    repeated_rows,
    scan_ledger,
    unplanned_rows,
)
from engine.unresolved import with_unresolved
from providers.types import RETRYABLE, Outcome

PLAN = "plan.parquet"
_RETRYABLE = sorted(str(o) for o in RETRYABLE)
_EXAMPLES = 10
_ATTEMPT_COLUMNS = [
    "request_id", "attempt", "model", "outcome", "detail", "tokens_in", "tokens_out",
    "started_at", "model_reported",
]


def _state(run_dir: Path, pid: dict[str, Any] | None, remaining: int | None, any_rows: bool) -> str:
    """live: a writer holds the run now; died: it stopped without closing (kill, crash);
    finished: nothing left to ask (`remaining`: the requests a run may still ask); stopped:
    closed cleanly with work left; not started.
    `any_rows`: an attempt, or a batch job (a batch run stopped before it collected a job
    has none of the first, its queries all at the provider: it read "not started")."""
    if pid is not None:
        return "live" if pid.get("alive") else "died"
    if remaining == 0:
        return "finished"
    if any_rows or list_segments(run_dir / JOURNAL):
        return "stopped"
    return "not started"


def _counts(frame: pl.DataFrame, key: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in frame.select(key, "len").iter_rows()}


def status(
    run_dir: Path | str, spec_parser: str | None = None, answer_budget: int | None = None
) -> dict[str, Any]:
    """A JSON-ready summary of a run folder (see `dutchbook status --json`).

    Keys: `state`, `planning` (live, no plan written yet, nothing asked), `pid`, `planned`,
    `accepted`, `remaining`, `attempts`, `outcomes`,
    `retries_by_cause` (retry attempts by cause, as `engine.audit.classify` defines them:
    every attempt that was not the accepted one, nor a reply a strict reparse rejected;
    nonzero causes only), `retries`,
    `requests_retried`, `sentence` (the audit sentence), `tokens_in`, `tokens_out`,
    `last_attempt_at`, `attempts_last_minute`, `journal_segments`, `models` (per model:
    planned, accepted, attempts, outcomes, retries, retries_by_cause (every cause),
    pending_failures, answers_rejected_on_reparse, failed (pending_failures less those),
    and from the engine's `logs/lanes.json`
    when present: lane_state, lane_message, rate_per_s, lane_held_s, lane_held_by,
    lane_gave_up, additive lane_limit_rate_per_s, lane_in_flight and lane_stop_wait_s; and
    eta_s, `lane_eta_s`), additive lane_stop_wait_cut (that wait ends in a cut: the
    provider has not answered yet, `OutagePolicy.unanswered_stop_wait_s`), additive
    `stopping` (while a live run's stop waits for attempts in flight: `attempts_in_flight`,
    `wait_s`, the most it waits yet, and `cut`, whether that longest wait ends in a cut;
    else None),
    `batch_jobs` (per batch model, per
    group of `engine.batch_jobs.STATUS_GROUPS`: jobs and lines), `batch_at_provider` (`jobs`
    not yet collected and the `queries` they hold, and additive `uncreated_jobs`, those of
    them uploaded with no job id on file, and `uncreated_queries`, their queries, and
    `simulator_jobs`, those a simulator inside the run that planned them held:
    `engine.batch_jobs.AtProvider`), additive `batch_jobs_at_provider` (each created job
    still at the provider, oldest first, its id, the provider's word and counts as last
    polled, its age and last poll: `engine.batch_waits.JobWait.to_dict`),
    `lanes_updated_at`,
    `pending_failures` (requests with attempts but no accepted answer: total, by last
    outcome, how many are permanent, a few examples; of them, `failed` and
    `failed_by_outcome`: all but replies a strict reparse rejected; additive,
    `answer_budget_spent`: of `failed`, those whose answer-failure budget is spent, which a
    resume asks only once the spec's `max_answer_failures` is raised, counted as the audit
    counts them with `answer_budget`, the spec's in force, else from what the run said; and
    `lost_to_damage`: of `failed`, those damaged batch results lost the line of twice, which
    no run asks again, whatever their budget (none of them among `answer_budget_spent`),
    `engine.scan.damaged_for_good`),
    `answers_missing` (accepted answers lost from `responses/`, `engine.audit.classify`;
    `spec_parser`, the run's own parser, tells them from replies a reparse rejected),
    `answers_unrecorded`
    (answers whose accepted attempt is not in `attempts/`), `answers_repeated` and
    `attempts_repeated` (rows a shard
    copied or put back holds a second time, `engine.scan.repeated_rows`: counted once
    everywhere else), `answers_unplanned` and `attempts_unplanned` (rows of requests the
    plan does not hold, `engine.scan.unplanned_rows`: counted nowhere else), `warnings`
    (lines saying what is wrong with the folder, and what to do),
    `answers_rejected_on_reparse` (requests whose reply the run accepted and a later
    `reparse --parser strict` rejected: pending, of `pending_failures`, as `invalid_response`
    with the detail `rejected_on_reparse`; not retries, and not failures: `failed` and
    `dutchbook status` count as failed only the others), `notes` (lines
    saying what the user may do that is not wrong: the reparse that takes those back),
    `reparse_unfinished` (the last reparse's begun line is the last and that reparse is
    not the folder's live writer: its warning, first, says to run it again,
    `engine.reparse.unfinished_line`, and is then the only line of answers missing from
    `responses/`, which that reparse rebuilds too).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    # Read again when a reparse replaced the answers' shards while they were read.
    return read_settled(run_dir, lambda: _read_status(run_dir, spec_parser, answer_budget))


def _read_status(
    run_dir: Path, spec_parser: str | None, answer_budget: int | None
) -> dict[str, Any]:
    """`status`'s summary, read once. (Long only by the dict it builds, whose keys `status`
    lists.)"""
    # One narrow pass over each table; every count below works on these frames.
    repeats = repeated_rows(run_dir)  # a shard copied: its rows count once
    unplanned = unplanned_rows(run_dir)  # another run's, or damaged: not counted
    attempts_scan, responses_scan = scan_ledger(
        run_dir, _ATTEMPT_COLUMNS, ["request_id", "model", "attempts"], repeats, unplanned
    )
    responses = responses_scan.collect().lazy()
    attempts = attempts_scan.collect().lazy()
    pid = read_pid(run_dir)
    attempts, unresolved = with_unresolved(run_dir, attempts, responses)
    # Retries by the one definition shared with `run`, `audit` and the report (engine.audit).
    accepted_by_model = _counts(responses.group_by("model").len().collect(), "model")
    reading = read_ok_replies(run_dir, spec_parser, sum(accepted_by_model.values()))
    # A reply rejected on reparse by the parser the answers are read with (not by a strict
    # reparse of a lenient run): said as such (`engine.audit.rejected_answers_line`).
    own = parser_in_force(run_dir, spec_parser) if reading.own_parser else None
    # With `detail`: it tells a duplicate refused from a reply a reparse rejected (`classify`).
    every = classify(
        attempts, responses, ok_means_accepted=reading.ok_means_accepted, lost=reading.lost
    )
    marked = every.filter(pl.col("cause").is_not_null())
    lost = every.filter(pl.col("answer_missing")).select("request_id").unique().collect()
    # Replies the run accepted and a strict reparse rejected: counted as the audit counts them.
    rejected_ids = (
        every.filter(pl.col(REJECTED_ON_REPARSE)).select("request_id", "model").unique().collect()
    )
    rejected_by_model = _counts(rejected_ids.group_by("model").len(), "model")
    rejected = rejected_ids.height
    planned_by_model = _planned_by_model(run_dir)
    outcomes, retries, per_model = _by_model(attempts, marked)
    pending, failures_by_model, failed_by_model = _pending_failures(
        attempts, responses, lost.lazy(), rejected_ids.lazy(), answer_budget
    )
    models = sorted(set(per_model) | set(accepted_by_model) | set(planned_by_model or {}))
    counts = {"planned": planned_by_model, "accepted": accepted_by_model,
              "pending_failures": failures_by_model,
              "answers_rejected_on_reparse": rejected_by_model, "failed": failed_by_model}
    lanes = read_lane_states(run_dir)
    _complete_models(per_model, models, counts, lanes)

    planned = None if planned_by_model is None else sum(planned_by_model.values())
    accepted = sum(accepted_by_model.values())
    remaining = None if planned is None else max(planned - accepted, 0)
    activity = _activity(attempts)
    retried = int(marked.select(pl.col("request_id").n_unique()).collect().item())
    seen = accepted + lost.height + pending["total"] + sum(unresolved.first_asked.values())
    parser = parser_in_force(run_dir, spec_parser)
    unrecorded = int(unrecorded_by_model(attempts, responses).collect()["n"].sum())
    jobs = fold_jobs(run_dir)
    held = at_provider(jobs, attempts)  # batch jobs not yet collected: their queries asked
    named = models_reported_by(attempts)  # a resume against another server is said
    unfinished = unfinished_line(run_dir)
    warnings = [
        line
        for line in (
            unfinished,
            # Its reparse run again rebuilds them too: one line names that command, not two.
            None if unfinished else missing_answers_line(lost.height, str(run_dir), parser),
            unrecorded_answers_line(unrecorded),
            repeated_rows_line(repeats, str(run_dir)),
            unplanned_rows_line(unplanned, str(run_dir), parser),
        )
        if line
    ]
    # Requests damaged results lost twice are not left to ask: no run asks them again (the
    # lane said "done in part" of such a run, and status "stopped", as if a resume had work).
    askable = None if remaining is None else max(remaining - pending["lost_to_damage"], 0)
    state = _state(run_dir, pid, askable, activity["attempts"] > 0 or bool(jobs))
    for entry in per_model.values():  # the table's time left (its ETA column)
        entry["eta_s"] = lane_eta_s(entry, live=state == "live")
    return {
        "run_dir": str(run_dir),
        "state": state,
        # A live run with no plan written and nothing asked yet renders its prompts.
        "planning": state == "live" and planned is None and not activity["attempts"],
        "pid": pid,
        "planned": planned,
        "accepted": accepted,
        "remaining": remaining,
        "attempts": activity["attempts"],
        "outcomes": dict(sorted(outcomes.items())),
        "retries_by_cause": dict(sorted(retries.items())),
        "retries": sum(retries.values()),
        "requests_retried": retried,
        # The paper's sentence, as `dutchbook audit` and the report write it.
        "sentence": said_in_full(
            retry_sentence(
                sum(retries.values()), retried, planned if planned is not None else seen,
                retries, attempted=seen, unrecorded=unrecorded, rejected=rejected,
                rejected_by=own or "strict",
            ),
            retries, in_flight=unresolved.in_flight, attempted=seen,
            requests=planned if planned is not None else seen, held=held,
        ),
        # Sent and not resolved (engine.unresolved): live, in flight; else counted above as
        # the `interrupted` attempts the next run records.
        "in_flight": unresolved.in_flight,
        "interrupted_unrecorded": unresolved.interrupted,
        "interrupted_batch": unresolved.interrupted_batch,
        # `ok` attempts refused as duplicates, as the audit counts them: not a reply the run
        # accepted and a strict reparse rejected, nor one whose answer is lost.
        "duplicate_ok_attempts": retries.get(DUPLICATE, 0),
        "tokens_in": activity["tokens_in"],
        "tokens_out": activity["tokens_out"],
        "last_attempt_at": activity["last_attempt_at"],
        "attempts_last_minute": activity["attempts_last_minute"],
        "journal_segments": len(list_segments(run_dir / JOURNAL)),
        "models": {m: per_model[m] for m in models},
        "stopping": _stopping(per_model, live=state == "live"),
        "lanes_updated_at": (lanes or {}).get("updated_at") if isinstance(lanes, dict) else None,
        "batch_jobs": jobs_summary(run_dir, jobs),
        "batch_at_provider": asdict(held),
        # Additive: each created job still at the provider, longest there first.
        "batch_jobs_at_provider": _jobs_at_provider(jobs, lanes),
        "pending_failures": pending,
        "answers_missing": lost.height,
        "answers_unrecorded": unrecorded,
        "answers_repeated": repeats.answers,
        "attempts_repeated": repeats.attempts,
        "answers_unplanned": unplanned.answers,
        "attempts_unplanned": unplanned.attempts,
        "answers_rejected_on_reparse": rejected,
        "reparse_unfinished": unfinished is not None,
        "warnings": warnings,
        # Not while a reparse is unfinished: its warning says the one thing to do.
        "notes": [] if unfinished else [
            line for line in (rejected_answers_line(rejected, str(run_dir), own_parser=own),)
            if line
        ] + [f"{line}." for line in reported_model_lines(named)],
        # Additive: per model, attempts by the model their reply named, as `audit --json`.
        "models_reported": named,
    }


def _jobs_at_provider(jobs: dict[str, BatchJob], lanes: Any) -> list[dict[str, Any]]:
    """Each created batch job still at the provider (`engine.batch_waits.JobWait.to_dict`),
    longest there first: its id, the provider's word and counts as last polled (the jobs
    file), how long since its `created` line, and when it was last polled (`lanes.json`,
    None when no lane there says)."""
    lanes_by_model = (lanes or {}).get("lanes") if isinstance(lanes, dict) else None
    polled = polled_times(lanes_by_model if isinstance(lanes_by_model, dict) else {})
    now = datetime.now(UTC)
    return [wait.to_dict(now) for wait in at_provider_waits(jobs.values(), polled)]


def _stopping(per_model: dict[str, dict[str, Any]], *, live: bool) -> dict[str, Any] | None:
    """While a live run's stop (a signal) waits for attempts in flight, as its lanes last
    said (`lane_stop_wait_s`): how many it waits for, and how long at most (`wait_s`, as
    of `lanes_updated_at`; `cut`: it then cuts them, their provider not having answered
    yet, `OutagePolicy.unanswered_stop_wait_s`); None otherwise. A hung provider held a
    stopped run for its `timeout_s`, and `status` said only "running"."""
    stop = longest_stop_wait(
        StopWait(wait, bool(entry.get("lane_stop_wait_cut")), int(entry.get("lane_in_flight") or 0))
        for entry in per_model.values()
        if (wait := entry.get("lane_stop_wait_s")) is not None
    )
    if not live or stop is None:
        return None
    return {"attempts_in_flight": stop.in_flight, "wait_s": stop.wait_s, "cut": stop.cut}


def _planned_by_model(run_dir: Path) -> dict[str, int] | None:
    """Plan rows per model, or None before a plan exists."""
    plan_path = run_dir / PLAN
    if not plan_path.exists():
        return None
    return _counts(pl.scan_parquet(plan_path).group_by("model").len().collect(), "model")


def _by_model(
    attempts: pl.LazyFrame, marked: pl.LazyFrame
) -> tuple[dict[str, int], dict[str, int], dict[str, dict[str, Any]]]:
    """Attempts by outcome and retries by cause: in total, and per model."""
    outcomes: dict[str, int] = {}
    per_model: dict[str, dict[str, Any]] = {}
    for model, outcome, n in attempts.group_by("model", "outcome").len().collect().iter_rows():
        outcomes[outcome] = outcomes.get(outcome, 0) + n
        entry = per_model.setdefault(model, {"attempts": 0, "outcomes": {}})
        entry["attempts"] += n
        entry["outcomes"][outcome] = n
    retries: dict[str, int] = {}
    for model, cause, n in marked.group_by("model", "cause").len().collect().iter_rows():
        retries[cause] = retries.get(cause, 0) + n
        entry = per_model.setdefault(model, {"attempts": 0, "outcomes": {}})
        entry.setdefault("retries_by_cause", {})[cause] = n
    return outcomes, retries, per_model


def _activity(attempts: pl.LazyFrame) -> dict[str, Any]:
    """How much was sent, how many tokens, and how recently."""
    totals = attempts.select(
        pl.len().alias("n"),
        pl.col("tokens_in").sum().alias("tokens_in"),
        pl.col("tokens_out").sum().alias("tokens_out"),
        pl.col("started_at").max().alias("last"),
    ).collect()
    last = totals["last"][0]
    recent = 0
    if last is not None:
        recent = attempts.filter(pl.col("started_at") > last - timedelta(minutes=1)).select(
            pl.len()
        ).collect().item()
    return {
        "attempts": int(totals["n"][0]),
        "tokens_in": int(totals["tokens_in"][0] or 0),
        "tokens_out": int(totals["tokens_out"][0] or 0),
        "last_attempt_at": None if last is None else last.isoformat(),
        "attempts_last_minute": int(recent),
    }


def _pending_failures(
    attempts: pl.LazyFrame, responses: pl.LazyFrame, lost: pl.LazyFrame,
    rejected_ids: pl.LazyFrame, answer_budget: int | None,
) -> tuple[dict[str, Any], dict[str, int], dict[str, int]]:
    """Requests tried but not accepted, by their last outcome (with a few examples, those
    that failed first), how many per model, and how many per model failed: all but those in
    `rejected_ids` (`request_id`: a reply the run accepted that a stricter reparse rejected,
    `classify`'s `rejected_on_reparse`); `lost` (`request_id`), those accepted whose answer
    is missing. `answer_budget` (`engine.scan.budget_spent`) tells which failed requests have
    their answer-failure budget spent: `permanent` counts only last outcomes no retry helps,
    and said "(0 permanent)" of 56 requests that no resume would ask again."""
    answered = pl.concat([responses.select("request_id"), lost], how="vertical")
    last_attempts = (
        attempts.join(answered, on="request_id", how="anti")
        .group_by("request_id")
        .agg(
            pl.col("model").first(),
            pl.col("attempt").max().alias("attempts"),
            pl.col("outcome").sort_by("attempt").last(),
            pl.col("detail").sort_by("attempt").last(),
            budget_spent(answer_budget).alias("_spent"),
            damaged_for_good().alias("_lost"),
        )
        .join(
            rejected_ids.select("request_id", pl.lit(True).alias("_rejected")),
            on="request_id", how="left",
        )
        .with_columns(pl.col("_rejected").fill_null(False))
        .collect()
    )
    # A reply the run accepted without an answer now (not a lost one: those are left out
    # above) is one a stricter reparse rejected; it was listed as a failure named "ok",
    # permanent. It is pending as an invalid response, whatever attempt came after it (a
    # duplicate), so `dutchbook status` can tell it from the requests that failed.
    rejected = pl.col("_rejected")
    last_attempts = last_attempts.with_columns(
        pl.when(rejected).then(pl.lit(str(Outcome.INVALID_RESPONSE))).otherwise("outcome")
        .alias("outcome"),
        pl.when(rejected).then(pl.lit(REJECTED_ON_REPARSE)).otherwise("detail").alias("detail"),
    )
    by_outcome = _counts(last_attempts.group_by("outcome").len(), "outcome")
    failed = last_attempts.filter(~pl.col("_rejected"))
    summary = {
        "total": last_attempts.height,
        "permanent": int(last_attempts.filter(~pl.col("outcome").is_in(_RETRYABLE)).height),
        "by_outcome": dict(sorted(by_outcome.items())),
        "examples": last_attempts.sort("_rejected", "request_id").head(_EXAMPLES)
        .drop("_rejected", "_spent", "_lost").to_dicts(),
        "failed": failed.height,
        # Lost first, as the lane rules (`engine.batch_lane._given_up`): no budget asks them.
        "answer_budget_spent": int((failed["_spent"] & ~failed["_lost"]).sum()),
        "lost_to_damage": int(failed["_lost"].sum()),
        "failed_by_outcome": dict(
            sorted(_counts(failed.group_by("outcome").len(), "outcome").items())
        ),
    }
    return (
        summary, _counts(last_attempts.group_by("model").len(), "model"),
        _counts(failed.group_by("model").len(), "model"),
    )


def _complete_models(
    per_model: dict[str, dict[str, Any]],
    models: list[str],
    counts: dict[str, dict[str, int] | None],
    lanes: dict[str, Any] | None,
) -> None:
    """Every model's entry: retries by every cause, its `counts` (`planned` is None when
    there is no plan yet), and what the dispatcher last said about its lane (paused on a
    quota, stopped on a bad key, its rate; from `logs/lanes.json`, absent for older runs)."""
    lane_states = (lanes or {}).get("lanes", {}) if isinstance(lanes, dict) else {}
    for model in models:
        entry = per_model.setdefault(model, {"attempts": 0, "outcomes": {}})
        entry["retries_by_cause"] = by_cause(entry.get("retries_by_cause", {}))
        entry["retries"] = sum(entry["retries_by_cause"].values())
        for key, by_model in counts.items():
            entry[key] = None if by_model is None else by_model.get(model, 0)
        lane = lane_states.get(model) if isinstance(lane_states, dict) else None
        entry.update(_lane_fields(lane if isinstance(lane, dict) else {}))


def _lane_fields(lane: dict[str, Any]) -> dict[str, Any]:
    """A model's lane as `status` shows it, each field of the type it is written with or
    None: a `lanes.json` edited by hand or damaged on disk ("rate_per_s": "fast") ended
    `status` in a TypeError where it should say what it can."""

    def text(key: str) -> str | None:
        value = lane.get(key)
        return value if isinstance(value, str) else None

    def number(key: str) -> float | None:
        value = record_number(lane.get(key))
        return value if value is not None and value >= 0 else None

    return {
        "lane_state": text("state"),
        "lane_message": text("message"),
        "rate_per_s": number("rate_per_s"),
        "lane_held_s": number("held_s"),
        "lane_limit_rate_per_s": number("limit_rate_per_s"),
        "lane_held_by": text("held_by"),
        "lane_gave_up": _gave_up(lane, number),
        "lane_in_flight": None if (flying := number("in_flight")) is None else int(flying),
        "lane_stop_wait_s": number("stop_wait_s"),
        "lane_stop_wait_cut": lane.get("stop_wait_cut") is True,
    }


def _gave_up(lane: dict[str, Any], number: Callable[[str], float | None]) -> int | None:
    """The requests the lane gave up this run, as `LaneStats.given_up` counts them (the sum
    of `engine.lane_counts.GAVE_UP_KEYS`); None when `lanes.json` has none of its counts (a run
    older than them)."""
    counts = [number(key) for key in GAVE_UP_KEYS]
    if all(n is None for n in counts):
        return None
    return int(sum(n or 0 for n in counts))


def lane_eta_s(entry: dict[str, Any], *, live: bool) -> float | None:
    """A model's time left in seconds (`eta_s` of its `status` entry), as dispatch's
    `LaneStats.eta_s` counts it (`engine.lane_counts.time_left_s`), from what `lanes.json` last
    said of its lane and the answers the ledger holds: its provider's hold, then the rest at
    its rate, never faster than its own limits allow (`lane_limit_rate_per_s`); 0 for a lane
    that is done; None when it cannot be told (no answer yet, the provider down, no plan) or
    no lane will ask (the lane halted, or no run is live)."""
    planned = entry.get("planned")
    if not live or planned is None:
        return None
    return time_left_s(
        entry.get("lane_state"), planned - entry["accepted"], entry.get("rate_per_s"),
        entry.get("lane_held_s"), entry.get("lane_limit_rate_per_s"),
    )
