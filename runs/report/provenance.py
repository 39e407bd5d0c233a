"""Where a report's numbers come from: what a referee needs to tie them to their inputs.

Read from the run folder alone: the frozen `spec.toml` (its SHA-256, its campaign name and
parser, unless `dutchbook reparse` changed the parser since: `logs/reparses.jsonl`),
`design.json` (the version of dutchbook that planned the run and the SHA-256 of every input
file it was planned from), the ledger (when the first and the last attempt were sent) and
`logs/phases.jsonl` (how many `dutchbook run` processes recorded a phase, told apart by the
`started` each of their lines carries, or in lines of older versions by their plan laps and
pids: the first run and each resume, a killed one included; and, with the ledger's attempt
times, how many of them sent an attempt), and the scores files it read (their SHA-256, by
which `status` tells a report of older scores). The version that wrote the report is this one. Paths
are left out: they name a machine, and the digests say what the files were.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from runs import markdown
from runs.design import DESIGN_FILE, EMBEDDED_LABEL, SPEC_FILE, DesignChanged, recorded_design
from runs.rehearsal import rehearsed
from runs.report.models import frozen_spec
from runs.run_history import run_starts, runs_of, utc_instant
from runs.scored_from import scores_digests
from runs.version import installed_version


def provenance(run_dir: Path) -> dict[str, Any]:
    """summary.json's `provenance` object (every key present; null where not known)."""
    from runs.phases import read_phases

    spec = frozen_spec(run_dir)
    design = _design(run_dir)
    phases = read_phases(run_dir)
    first, last, runs_with_attempts = _attempts_seen(run_dir, phases)
    parser, parser_from = _parser(run_dir, spec, phases)
    return {
        "campaign": _text(spec.get("name")),
        "parser": parser,
        "parser_from": parser_from,
        "spec_sha256": _sha256(run_dir / SPEC_FILE),
        "planned_with": _text(design.get("dutchbook")),
        "reported_with": installed_version(),
        "inputs": {name: entry["sha256"] for name, entry in design.get("files", {}).items()},
        "first_attempt_at": first,
        "last_attempt_at": last,
        # `dutchbook run` processes that recorded a phase (`_runs`): each laps its plan
        # first, so a run killed while it dispatched counts too.
        "runs": len(runs_of(phases)),
        # Additive: those of them that sent an attempt (a run of a finished folder sends none).
        "runs_with_attempts": runs_with_attempts,
        # Additive: every answer is the local simulator's (`--rehearse`, `runs.rehearsal`).
        "rehearsal": rehearsed(run_dir),
        # Additive: the scores this report was written from (`status` says when they change).
        "scores_sha256": scores_digests(run_dir),
    }


def parser_said_otherwise(run_dir: Path, recorded: Mapping[str, Any]) -> str | None:
    """What the folder's report (its recorded `provenance`) says of the parser that is no
    longer so, or None: a report written while a reparse was unfinished says "an unknown
    parser ... run it again", and once that reparse was run again (its answers and so its
    scores unchanged) nothing said the report was out of date."""
    from runs.phases import read_phases

    said = recorded.get("parser")
    if said is None:  # a report written before provenance recorded the parser
        return None
    parser, parser_from = _parser(run_dir, frozen_spec(run_dir), read_phases(run_dir))
    # The parser, not where it is said: a reparse back to the spec's parser left the same
    # answers, a report calling them the spec's no less true. A reparse unfinished now: its
    # own line (`engine.reparse.unfinished_line`) says what to do first, this one after it.
    if said == parser or parser in ("unknown", None):  # None: the frozen spec unread
        return None
    now = parser_words({"parser": parser, "parser_from": parser_from})
    return f"it says {parser_words(recorded)}, where now {now}"


def provenance_sentences(prov: Mapping[str, Any]) -> list[str]:
    """The provenance in plain sentences, inputs aside: what report.md lists and the page
    says (each escapes them its own way)."""
    return [
        f"Campaign {prov.get('campaign') or '(unnamed)'}, spec.toml SHA-256 "
        f"{prov.get('spec_sha256') or 'unknown'}; {parser_words(prov)}.",
        f"Planned with dutchbook {prov.get('planned_with') or 'unknown'}; this report written "
        f"with {prov.get('reported_with') or 'unknown'}.",
        answers_span(prov),
        *_embedded_returns(prov),
    ]


def _embedded_returns(prov: Mapping[str, Any]) -> list[str]:
    """What the embedded returns are, where the run was planned from them."""
    from panels.data import embedded_returns_words

    inputs = prov.get("inputs") or {}
    return [embedded_returns_words(inputs[EMBEDDED_LABEL])] if EMBEDDED_LABEL in inputs else []


def provenance_markdown(prov: dict[str, Any]) -> str:
    """report.md's "Provenance" section."""
    lines = ["## Provenance\n"]
    lines += [f"- {markdown.text(sentence)}" for sentence in provenance_sentences(prov)]
    lines += [f"- Input {markdown.text(name)}: SHA-256 `{digest}`"
              for name, digest in prov["inputs"].items()]  # fmt: skip
    lines += [f"- Scores {markdown.text(name)}: SHA-256 `{digest}`"
              for name, digest in (prov.get("scores_sha256") or {}).items()]  # fmt: skip
    return "\n".join(lines) + "\n"


def parser_words(prov: Mapping[str, Any]) -> str:
    """`answers read by the strict parser (the spec's)`, or `(dutchbook reparse at ...)`;
    answers of two parsers (a run after a reparse to another parser, which `run` refuses
    since `runs.pipeline._check_last_parser`, so a folder of an older version) are said so."""
    source = "the spec's" if prov.get("parser_from") == "spec" else prov.get("parser_from")
    if prov.get("parser") == "mixed":
        return f"answers read by two parsers: {source}"
    if prov.get("parser") == "unknown":
        return f"answers read by an unknown parser: {source}"
    return f"answers read by the {prov.get('parser') or 'unknown'} parser ({source})"


def parser_note(prov: Mapping[str, Any] | None) -> str | None:
    """The line said beside the leaderboard when the answers are not all the strict parser's
    (None when they are, or the parser is not known): a lenient answer, sim-fraction's
    "11/36" in prose, was scored as the paper would not have (its Appendix C accepts one
    valid JSON object only), and only the Provenance section at the foot said which parser."""
    if not prov or prov.get("parser") in ("strict", None):
        return None
    return (
        f"Not the paper's acceptance rule: {parser_words(prov)}. The lenient parser also "
        "takes replies that are not one valid JSON object of numbers (prose or code fences "
        'around one, values such as "11/36" or "35%"), which the paper\'s Appendix C rejects.'
    )


def answered_parser_note(summary: Mapping[str, Any]) -> str | None:
    """`parser_note`, said only where the parser read an answer: under a run that accepted
    none (every model's coverage nought), a note on how its answers were read spoke of
    answers there were not."""
    models = summary.get("models") or {}
    if not any((entry.get("coverage") or 0) > 0 for entry in models.values()):
        return None
    return parser_note(summary.get("provenance"))


def answers_span(prov: Mapping[str, Any]) -> str:
    """When the answers were asked for, in one sentence, and by how many of the folder's runs:
    two runs of a finished folder, sending nothing, read "over 3 runs (the first and 2
    resumes)" of attempts all sent by the first."""
    first, last, runs = prov["first_attempt_at"], prov["last_attempt_at"], prov["runs"]
    if first is None:
        return "No attempt recorded."
    sent = prov.get("runs_with_attempts", runs)  # a summary written before it was recorded
    if runs == 0 or sent == 0:  # no phases, or attempts sent before any run recorded one
        over = ""
    elif runs == 1:
        over = ", in one run"
    else:
        started = f"the first and {runs - 1} resume{'s' if runs > 2 else ''}"
        idle = runs - sent
        over = (
            f", over {runs} runs ({started})" if idle <= 0
            else f", in {sent} of {runs} runs ({started}; the other "
            f"{'' if idle == 1 else f'{idle} '}sent none)"
        )  # fmt: skip
    return f"Attempts sent from {first} to {last} (UTC){over}."


def _parser(
    run_dir: Path, spec: Mapping[str, Any], phases: list[dict[str, object]]
) -> tuple[str | None, str]:
    """The parser that made the answers now in the folder, and where that is said: the spec
    (whose default is strict), or the last `dutchbook reparse` (`logs/reparses.jsonl`). A
    run that dispatched after that reparse read its new answers with the spec's parser: if
    the two differ, the answers are of both, and the words say so."""
    from engine.reparse import last_reparse

    in_spec = _text(spec.get("parser", "strict")) if spec else None
    last_one = last_reparse(run_dir)
    if last_one is None:
        return in_spec, "spec"
    last, when = last_one.parser, utc_instant(last_one.at)
    reparsed = f"dutchbook reparse at {last_one.at}"
    if not last_one.finished:
        return "unknown", f"{reparsed} to {last} did not finish; run it again"
    if (
        when is not None and in_spec not in (None, last) and _dispatched_after(phases, when)
        and _accepted_after(run_dir, when)
    ):
        return "mixed", f"{last} by {reparsed}, then {in_spec} for what later runs asked"
    return last, reparsed


def _dispatched_after(phases: list[dict[str, object]], when: datetime) -> bool:
    """Whether a dispatch of this folder ended after `when` (`logs/phases.jsonl`). Both in
    UTC (`runs.run_history.utc_instant`): a lap time without an offset (hand-edited) against
    the reparse's ended `report`, `status` and a resume's last step in a TypeError."""
    return any(
        phase.get("phase") == "dispatch" and (at := utc_instant(phase.get("at"))) is not None
        and at > when
        for phase in phases
    )


def _accepted_after(run_dir: Path, when: datetime) -> bool:
    """Whether an answer the folder holds was accepted after `when` (the last reparse's
    line, to the second), so by a later run and its spec's parser: a resume after a reparse that
    asked nothing ("0 answers accepted") made the report say two parsers had read answers
    all of one. The reparse's own answers keep their replies' times, all before it."""
    import polars as pl

    from engine.scan import scan_responses

    try:
        after = when + timedelta(seconds=1)  # the reparse line's time is cut to the second
    except OverflowError:  # a hand-edited year 9999: nothing was accepted after it
        return False
    found = scan_responses(run_dir, ["accepted_at"]).filter(pl.col("accepted_at") > after)
    return found.head(1).collect().height > 0


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _design(run_dir: Path) -> Mapping[str, Any]:
    """`design.json` as `runs.design` validates it; empty if it is missing or damaged (the
    report still says what else it knows)."""
    try:
        return recorded_design(run_dir / DESIGN_FILE)
    except DesignChanged:
        return {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _attempts_seen(
    run_dir: Path, phases: list[dict[str, object]]
) -> tuple[str | None, str | None, int]:
    """The first and the last attempt's `started_at`, to the second (UTC), and how many of
    the runs `phases` records sent an attempt, from one read of the ledger's times. A run
    laps its plan before it sends anything, and the folder's lock keeps the next from
    starting before it ends: so each run's attempts start from its plan lap's time to the
    next run's (`runs.run_history.run_starts`). An attempt keeps its first send's time (a batch line
    collected by a later run, an attempt recorded as interrupted by the resume after a
    kill): the run that sent it."""
    from engine.scan import scan_attempts

    bounds = run_starts(phases)
    started = pl.col("started_at")
    row = (
        scan_attempts(run_dir, ["started_at"])
        .select(
            started.min().alias("first"),
            started.max().alias("last"),
            *[(started >= at).sum().alias(f"since{i}") for i, at in enumerate(bounds)],
        )
        .collect()
        .row(0)
    )
    # Attempts sent from each run's start on: a run sent some if more than from the next's.
    since = row[2:]
    nexts = [*since[1:], 0] if since else []  # no run recorded: none sent
    sent = sum(here > later for here, later in zip(since, nexts, strict=True))
    return _second(row[0]), _second(row[1]), sent


def _second(value: object) -> str | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=None, microsecond=0).isoformat(sep=" ")
