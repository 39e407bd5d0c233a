"""What the report says about each model beyond its numbers: whether it is a simulated
forecaster, and the spec's own `about` line (e.g. "a 270M base model").

Read from the run's frozen `spec.toml` (parsed as TOML data, never evaluated), so a report
rebuilt later from the folder says the same as the one written at the end of the run.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from runs import markdown


def frozen_spec(run_dir: Path) -> Mapping[str, Any]:
    """The run's spec as plain TOML data; empty if it is missing or unreadable."""
    try:
        return tomllib.loads((run_dir / "spec.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _models(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [m for m in spec.get("models", []) if isinstance(m, Mapping)]


#: Said after the simulated forecasters of a rehearsal's folder (`runs.rehearsal`).
REHEARSAL_WORDS = " (a rehearsal: --rehearse put the simulator in every provider's place)"


def simulated_models(spec: Mapping[str, Any], rehearsed: bool = False) -> list[str]:
    """Names of the models answered by the local simulator, sorted: every model of a
    rehearsal's folder (`rehearsed`). The one test of "simulated" every view of the report
    uses (summary.json's `models`, the CSVs, the figures' footer, the tables' notes)."""
    return sorted(
        str(m.get("name")) for m in _models(spec) if rehearsed or m.get("provider") == "sim"
    )


def model_providers(spec: Mapping[str, Any]) -> dict[str, str | None]:
    """Each model's `provider` as its spec wrote it, by name (None where not a string)."""
    return {
        str(m.get("name")): p if isinstance(p := m.get("provider"), str) else None
        for m in _models(spec)
    }


def simulated_note(names: Iterable[str]) -> str | None:
    """The line said under a leaderboard or a figure that shows simulated forecasters, or
    None when there are none: a simulated forecaster named like a real model (a spec may call
    sim-coherent "GPT-OSS-120B") stood in a figure and a table for that model, nothing on
    either saying it was not one."""
    listed = ", ".join(names)
    if not listed:
        return None
    return f"Simulated forecasters: {listed} (answered by the local simulator, not real models)."


def personalities(
    spec: Mapping[str, Any], rehearsed: bool = False
) -> list[tuple[str, list[str], str]]:
    """(personality, the simulated models answering with it, what it does) for every
    personality the run's simulated forecasters have, in the simulator's order and words
    (`providers.sim.forecasters.PERSONALITY_WORDS`): "answered from the local simulator"
    alone left a reader to take sim-coherent's incoherent isolated families for a fault."""
    from providers.sim.forecasters import PERSONALITIES, PERSONALITY_WORDS

    simulated = set(simulated_models(spec, rehearsed))
    by_personality: dict[str, list[str]] = {}
    for m in _models(spec):
        chosen = _personality(m) if str(m.get("name")) in simulated else None
        if chosen is not None:
            by_personality.setdefault(chosen, []).append(str(m.get("name")))
    return [
        (p, sorted(by_personality[p]), PERSONALITY_WORDS[p])
        for p in PERSONALITIES
        if p in by_personality
    ]


def _personality(model: Mapping[str, Any]) -> str | None:
    """The personality a spec's model entry answers with; None for one the simulator does
    not have (a spec of another version: nothing is said rather than a guess)."""
    from providers.sim.forecasters import spec_personality

    written = model.get("personality")
    model_id = str(model.get("model", model.get("name")))
    try:
        return spec_personality(model_id, written if isinstance(written, str) else None)
    except ValueError:
        return None


def model_notes(spec: Mapping[str, Any], rehearsed: bool = False) -> list[tuple[str, str]]:
    """(model name, its `about` text) for every model whose spec entry describes it; none in
    a rehearsal's folder, whose answers are not the models' ("a real model's real answers",
    the local spec's, was said of the simulator's)."""
    if rehearsed:
        return []
    return [
        (str(m.get("name")), str(m["about"]))
        for m in _models(spec)
        if isinstance(m.get("about"), str) and m["about"].strip()
    ]


def models_markdown(spec: Mapping[str, Any], rehearsed: bool = False) -> str | None:
    """`report.md`'s "Models" section, or None when there is nothing to say."""
    simulated = simulated_models(spec, rehearsed)
    notes = model_notes(spec, rehearsed)
    if not simulated and not notes:
        return None
    lines = ["## Models\n"]
    if simulated:
        lines.append(
            f"Simulated forecasters ({', '.join(map(markdown.text, simulated))}) answered from "
            "the local simulator, not a language model; no provider was called"
            f"{REHEARSAL_WORDS if rehearsed else ''}.\n"
        )
    lines.extend(
        f"- Personality {p} ({', '.join(map(markdown.text, names))}): {markdown.text(words)}"
        for p, names, words in personalities(spec, rehearsed)
    )
    lines.extend(f"- **{markdown.text(name)}**: {markdown.text(about)}" for name, about in notes)
    return "\n".join(lines) + "\n"
