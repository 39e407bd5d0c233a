"""Where a report's numbers come from: what a referee needs to tie them to their inputs.

Read from the run folder alone: the frozen `spec.toml` (its SHA-256, its campaign name and
parser, unless `dutchbook reparse` changed the parser since: `logs/reparses.jsonl`),
`design.json` (the version of dutchbook that planned the run and the SHA-256 of every input
file it was planned from), the ledger (when the first and the last attempt were sent) and
`logs/phases.jsonl` (how many `dutchbook run` processes got past planning: the first run and
each resume, a killed one included). The version that wrote the report is this one. Paths
are left out: they name a machine, and the digests say what the files were.
"""

from __future__ import annotations

import hashlib
import tomllib
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from runs import markdown

SPEC = "spec.toml"
DESIGN = "design.json"


def provenance(run_dir: Path) -> dict[str, Any]:
    """summary.json's `provenance` object (every key present; null where not known)."""
    spec_bytes = _read(run_dir / SPEC)
    spec = _toml(spec_bytes)
    design = _design(run_dir / DESIGN)
    first, last = _attempt_span(run_dir)
    parser, parser_from = _parser(run_dir, spec)
    return {
        "campaign": _text(spec.get("name")),
        "parser": parser,
        "parser_from": parser_from,
        "spec_sha256": hashlib.sha256(spec_bytes).hexdigest() if spec_bytes is not None else None,
        "planned_with": _text(design.get("dutchbook")),
        "reported_with": _installed_version(),
        "inputs": _inputs(design),
        "first_attempt_at": first,
        "last_attempt_at": last,
        "runs": _runs(run_dir),
    }


def provenance_markdown(prov: dict[str, Any]) -> str:
    """report.md's "Provenance" section."""
    text = markdown.text
    lines = ["## Provenance\n"]
    lines.append(
        f"- Campaign {text(prov['campaign'] or '(unnamed)')}, spec.toml SHA-256 "
        f"`{prov['spec_sha256'] or 'unknown'}`; {text(parser_words(prov))}."
    )
    lines.append(
        f"- Planned with dutchbook {text(prov['planned_with'] or 'unknown')}; this report "
        f"written with {text(prov['reported_with'] or 'unknown')}."
    )
    lines.append(f"- {text(answers_span(prov))}")
    lines.extend(f"- Input {text(name)}: SHA-256 `{digest}`" for name, digest in
                 prov["inputs"].items())  # fmt: skip
    return "\n".join(lines) + "\n"


def parser_words(prov: dict[str, Any]) -> str:
    """`answers read by the strict parser (the spec's)`, or `(dutchbook reparse at ...)`;
    answers of two parsers (a run after a reparse to another parser) are said as such."""
    source = "the spec's" if prov.get("parser_from") == "spec" else prov.get("parser_from")
    if prov.get("parser") == "mixed":
        return f"answers read by two parsers: {source}"
    return f"answers read by the {prov.get('parser') or 'unknown'} parser ({source})"


def answers_span(prov: dict[str, Any]) -> str:
    """When the answers were asked for, in one sentence."""
    first, last, runs = prov["first_attempt_at"], prov["last_attempt_at"], prov["runs"]
    if first is None:
        return "No attempt recorded."
    if runs > 1:
        over = f", over {runs} runs (the first and {runs - 1} resume{'s' if runs > 2 else ''})"
    else:
        over = ", in one run" if runs else ""
    return f"Attempts sent from {first} to {last} (UTC){over}."


def _parser(run_dir: Path, spec: dict[str, Any]) -> tuple[str | None, str]:
    """The parser that made the answers now in the folder, and where that is said: the spec
    (whose default is strict), or the last `dutchbook reparse` (`logs/reparses.jsonl`). A
    run that dispatched after that reparse read its new answers with the spec's parser: if
    the two differ, the answers are of both, and the words say so."""
    from engine.reparse import read_reparses

    in_spec = _text(spec.get("parser", "strict")) if spec else None
    done = [r for r in read_reparses(run_dir) if isinstance(r.get("parser"), str)]
    if not done:
        return in_spec, "spec"
    last, when = done[-1]["parser"], _instant(done[-1].get("at"))
    reparsed = f"dutchbook reparse at {done[-1].get('at')}"
    if when is not None and in_spec not in (None, last) and _dispatched_after(run_dir, when):
        return "mixed", f"{last} by {reparsed}, then {in_spec} for what later runs asked"
    return last, reparsed


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _dispatched_after(run_dir: Path, when: datetime) -> bool:
    """Whether a dispatch of this folder ended after `when` (`logs/phases.jsonl`)."""
    from runs.phases import read_phases

    return any(
        phase.get("phase") == "dispatch" and (at := _instant(phase.get("at"))) is not None
        and at > when
        for phase in read_phases(run_dir)
    )


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _toml(data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _design(path: Path) -> dict[str, Any]:
    data = _read(path)
    try:
        design = orjson.loads(data) if data is not None else {}
    except orjson.JSONDecodeError:
        return {}
    return design if isinstance(design, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _inputs(design: dict[str, Any]) -> dict[str, str]:
    """Each input file's name and SHA-256, as `design.json` recorded them."""
    files = design.get("files")
    if not isinstance(files, dict):
        return {}
    return {
        str(name): entry["sha256"]
        for name, entry in files.items()
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
    }


def _installed_version() -> str | None:
    try:
        return metadata.version("dutchbook")
    except metadata.PackageNotFoundError:
        return None


def _attempt_span(run_dir: Path) -> tuple[str | None, str | None]:
    """The first and the last attempt's `started_at`, to the second (UTC)."""
    from engine.scan import scan_attempts

    span = (
        scan_attempts(run_dir, ["started_at"])
        .select(first=pl.col("started_at").min(), last=pl.col("started_at").max())
        .collect()
    )
    first, last = span["first"][0], span["last"][0]
    return _second(first), _second(last)


def _second(value: object) -> str | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=None, microsecond=0).isoformat(sep=" ")


def _runs(run_dir: Path) -> int:
    """`dutchbook run` processes that recorded a phase in the folder (each laps its plan
    first, so a run killed while it dispatched counts too)."""
    from runs.phases import read_phases

    return len({phase.get("pid") for phase in read_phases(run_dir)})
