"""The audit of a folder whose journal holds attempts sent and not resolved (`engine.unresolved`).

`engine.audit.audit` counts the recorded attempts. An attempt sent and not resolved is in
flight while the run is live; once its writer is gone, the next `Ledger.open` records it as
`interrupted`, which made the same folder's audit jump from "every attempt was accepted" to
"16 retry attempts ... interrupted dispatches (16)" across a resume that sent nothing new
for them. `with_unresolved` counts them now as what they are: a died run's as the
`interrupted` attempts the next run records (the same counts, attempt for attempt, as after
it), a live run's as in flight, said in the sentence instead of "every attempt was accepted".

The counts of a died run are shifted here, request by request over the few requests
concerned, by `engine.audit.classify`'s own definition (before and after the attempts are
added), rather than inside `engine.audit.audit`, whose reading streams the whole ledger.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from engine.audit import Audit, AuditRow, by_cause, classify
from engine.runlock import read_pid
from engine.scan import scan_ledger
from engine.unresolved import as_interrupted, in_flight_sentence, unresolved_dispatches

#: The attempt columns the shift reads of the requests concerned.
_COLUMNS = ["request_id", "attempt", "model", "outcome"]


@dataclasses.dataclass(frozen=True)
class RunAudit(Audit):
    """An `Audit` that also knows the attempts sent and not resolved."""

    #: Attempts in flight now (a live run), not in any count but the sentence's.
    in_flight: int = 0
    #: Attempts a died run sent and did not resolve, counted as `interrupted` retry attempts.
    interrupted_unrecorded: int = 0

    @property
    def sentence(self) -> str:
        totals = self.totals
        attempted = totals.requests - totals.not_attempted
        return in_flight_sentence(super().sentence, self.in_flight, attempted, totals.requests)

    def notes(self) -> list[str]:
        n = self.interrupted_unrecorded
        if not n:
            return super().notes()
        were = f"{n:,} attempts were" if n != 1 else "1 attempt was"
        return [
            f"{were} in flight when the run died: counted as interrupted dispatches, as the "
            "next run of this folder records them.",
            *super().notes(),
        ]

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {
            "in_flight": self.in_flight, "interrupted_unrecorded": self.interrupted_unrecorded,
        }  # fmt: skip


def with_unresolved(report: Audit, run_dir: Path) -> Audit:
    """`report` (`engine.audit.audit` of `run_dir`) with the folder's attempts sent and not
    resolved counted (a `RunAudit` either way: `--json` has the same keys for every folder)."""
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    lines = unresolved_dispatches(run_dir)
    if not lines:
        return RunAudit(**fields)
    writer = read_pid(run_dir)
    live = bool(writer and writer.get("alive"))
    attempts, responses = _recorded(run_dir, {line["request_id"] for line in lines})
    before = _tally(attempts, responses)
    if live:  # nothing recorded changes; requests first asked now count as asked
        added = _tally(pl.concat([attempts, _as_rows(lines, attempts)]), responses)
        shift = {m: {"seen": added[m]["seen"] - before.get(m, {}).get("seen", 0)} for m in added}
    else:
        after = _tally(pl.concat([attempts, _as_rows(lines, attempts)]), responses)
        shift = {m: _difference(after[m], before.get(m, {})) for m in after}
    planned = (run_dir / "plan.parquet").exists()
    by_model = {m: _shifted(r, shift.get(m, {}), planned) for m, r in report.by_model.items()}
    by_provider = dict(report.by_provider)
    totals = report.totals
    for model, moved in shift.items():
        provider = report.providers.get(model, "unknown")
        if provider in by_provider:
            by_provider[provider] = _shifted(by_provider[provider], moved, planned)
        totals = _shifted(totals, moved, planned)
    return RunAudit(
        **(fields | {"totals": totals, "by_model": by_model, "by_provider": by_provider}),
        in_flight=len(lines) if live else 0,
        interrupted_unrecorded=0 if live else len(lines),
    )


def _recorded(run_dir: Path, ids: set[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The recorded attempts and answers of the requests `ids` (a handful: those in flight)."""
    attempts, responses = scan_ledger(run_dir, _COLUMNS, ["request_id", "attempts"])
    wanted = pl.col("request_id").is_in(sorted(ids))
    return attempts.filter(wanted).collect(), responses.filter(wanted).collect()


def _as_rows(lines: list[dict[str, Any]], like: pl.DataFrame) -> pl.DataFrame:
    return as_interrupted(lines).select(like.columns).cast(like.schema)


def _tally(attempts: pl.DataFrame, responses: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per model, what the audit counts of these requests: attempts, retry attempts by
    cause, requests retried, requests given up by their last attempt's cause, requests seen."""
    marked = classify(attempts.lazy(), responses.lazy()).collect()
    out: dict[str, dict[str, Any]] = {}
    for model, rows in marked.group_by("model"):
        retries = rows.filter(pl.col("cause").is_not_null())
        last = rows.filter(~pl.col("answered")).sort("attempt").group_by("request_id").last()
        out[str(model[0])] = {
            "attempts": rows.height,
            "retry_attempts": retries.height,
            "requests_retried": retries["request_id"].n_unique(),
            "causes": _counted(retries["cause"]),
            "given_up": _counted(last["cause"]),
            "seen": rows["request_id"].n_unique(),
        }
    return out


def _counted(values: pl.Series) -> dict[str, int]:
    return {str(k): int(n) for k, n in values.value_counts().iter_rows() if k is not None}


def _difference(after: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in after.items():
        if isinstance(value, dict):
            was = before.get(key, {})
            out[key] = {k: value.get(k, 0) - was.get(k, 0) for k in set(value) | set(was)}
        else:
            out[key] = value - before.get(key, 0)
    return out


def _shifted(row: AuditRow, shift: Mapping[str, Any], planned: bool) -> AuditRow:
    """`row` with `shift` added (its requests seen for the first time: no longer "not
    attempted" of a plan; without a plan, requests are those seen)."""
    if not shift:
        return row

    def plus(counts: dict[str, int], key: str) -> dict[str, int]:
        moved = shift.get(key, {})
        return by_cause({k: counts.get(k, 0) + moved.get(k, 0) for k in set(counts) | set(moved)})

    seen = shift.get("seen", 0)
    return dataclasses.replace(
        row,
        attempts=row.attempts + shift.get("attempts", 0),
        retry_attempts=row.retry_attempts + shift.get("retry_attempts", 0),
        requests_retried=row.requests_retried + shift.get("requests_retried", 0),
        retries_by_cause=plus(row.retries_by_cause, "causes"),
        given_up=plus(row.given_up, "given_up"),
        not_attempted=max(row.not_attempted - seen, 0) if planned else row.not_attempted,
        requests=row.requests if planned else row.requests + seen,
    )
