"""What the report says about each model beyond its numbers: whether it is a simulated
forecaster, and the spec's own `about` line (e.g. "a 270M base model").

Read from the run's frozen `spec.toml` (parsed as TOML data, never evaluated), so a report
rebuilt later from the folder says the same as the one written at the end of the run, and
from the model each reply named as the one answering (`attempts.model_reported`, as the
audit counts them: `engine.audit.Audit.models_reported`): a spec's real model whose
`base_url` was the simulator's (`serve-sim`), for a whole run or a resume, answered from it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.console_lines import plural
from providers.base import short
from providers.sim.forecasters import MODEL_LABEL_PREFIX, PERSONALITIES, model_label
from runs import markdown

#: Per model, how many attempts' replies named each model as the one answering
#: (`engine.audit.Audit.models_reported`).
Reported = Mapping[str, Mapping[str, int]]


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


@dataclass(frozen=True)
class SimulatorReplies:
    """A model's replies that named the local simulator as the model answering (its names
    begin `providers.sim.forecasters.MODEL_LABEL_PREFIX`), of all its replies naming one."""

    simulator: int
    replies: int
    #: The simulator's names in them, with their counts ("sim/anchored": 50).
    labels: Mapping[str, int]

    @property
    def in_part(self) -> bool:
        """Whether another model answered the rest (a resume against another server)."""
        return self.simulator < self.replies

    def said(self) -> str:
        """"50 of 58 replies named the local simulator (sim/anchored 50) as the model
        answering": the names are the provider's text, one line each (`short`)."""
        named = ", ".join(f"{short(name, 200)} {n:,}" for name, n in sorted(self.labels.items()))
        return (
            f"{self.simulator:,} of {plural(self.replies, 'reply', 'replies')} named the local "
            f"simulator ({named}) as the model answering"
        )


#: The names the simulator's replies give (`sim/<personality>`), exactly: a real server that
#: echoes the model id it was asked for (vLLM, llama.cpp) named "sim/my-finetune" and was
#: labelled simulated in every view when any name with the prefix counted.
_SIMULATOR_NAMES = frozenset(model_label(p) for p in PERSONALITIES)


def simulator_replies(reported: Reported | None) -> dict[str, SimulatorReplies]:
    """Per model any of whose replies named the local simulator as the model answering: a
    spec's "openai" model whose `base_url` was `serve-sim`'s, or which a resume pointed there,
    was reported as the real model its spec's `about` line describes."""
    found = {}
    for model, named in (reported or {}).items():
        labels = {name: n for name, n in named.items() if name in _SIMULATOR_NAMES}
        if labels:
            found[model] = SimulatorReplies(sum(labels.values()), sum(named.values()), labels)
    return found


def simulated_models(
    spec: Mapping[str, Any], rehearsed: bool = False, reported: Reported | None = None
) -> list[str]:
    """Names of the models answered by the local simulator, sorted: those of provider sim,
    every model of a rehearsal's folder (`rehearsed`), and any whose replies named the
    simulator as the model answering (`reported`, `simulator_replies`), in part or all. The
    one test of "simulated" every view of the report uses (summary.json's `models`, the
    CSVs, the figures' footer, the tables' notes)."""
    named = {str(m.get("name")) for m in _models(spec) if rehearsed or m.get("provider") == "sim"}
    return sorted(named | set(simulator_replies(reported)))


def in_part_of(models: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """(replies from the simulator, replies) of each model of summary.json's `models` that
    the simulator answered in part (its `simulator_replies`), for `simulated_note`."""
    found = {}
    for model, entry in models.items():
        counts = entry.get("simulator_replies") if isinstance(entry, Mapping) else None
        if isinstance(counts, Mapping):
            sim, replies = counts.get("simulator"), counts.get("replies")
            if isinstance(sim, int) and isinstance(replies, int) and sim < replies:
                found[str(model)] = (sim, replies)
    return found


def model_providers(spec: Mapping[str, Any]) -> dict[str, str | None]:
    """Each model's `provider` as its spec wrote it, by name (None where not a string)."""
    return {
        str(m.get("name")): p if isinstance(p := m.get("provider"), str) else None
        for m in _models(spec)
    }


def simulated_note(
    names: Iterable[str],
    in_part: Mapping[str, tuple[int, int]] | None = None,
    show: Callable[[str], str] = str,
) -> str | None:
    """The line said under a leaderboard or a figure that shows simulated forecasters, or
    None when there are none: a simulated forecaster named like a real model (a spec may call
    sim-coherent "GPT-OSS-120B") stood in a figure and a table for that model, nothing on
    either saying it was not one. Those the simulator answered in part (`in_part`: name ->
    (replies from it, replies), `in_part_of`) are said so, with the counts; `show` writes a
    name as the view shows names (escaped, isolated)."""
    in_part = in_part or {}
    names = list(names)
    whole = ", ".join(show(n) for n in names if n not in in_part)
    parts = [f"{whole} (answered by the local simulator, not real models)"] if whole else []
    parts += [
        f"{show(n)} in part ({in_part[n][0]:,} of {plural(in_part[n][1], 'reply', 'replies')} "
        "from the local simulator)"
        for n in names
        if n in in_part
    ]
    return f"Simulated forecasters: {'; '.join(parts)}." if parts else None


def personalities(
    spec: Mapping[str, Any], rehearsed: bool = False, reported: Reported | None = None
) -> list[tuple[str, list[str], str]]:
    """(personality, the simulated models answering with it, what it does) for every
    personality the run's simulated forecasters have, in the simulator's order and words
    (`providers.sim.forecasters.PERSONALITY_WORDS`): "answered from the local simulator"
    alone left a reader to take sim-coherent's incoherent isolated families for a fault.
    A model the simulator answered in place of a real one (`simulator_replies`) has the
    personalities its replies named (`sim/anchored`), not one its spec's id would get."""
    from providers.sim.forecasters import PERSONALITY_WORDS

    by_reply = simulator_replies(reported)
    by_personality: dict[str, set[str]] = {}
    for name, chosen in _spec_personalities(spec, rehearsed):
        if name not in by_reply:
            by_personality.setdefault(chosen, set()).add(name)
    for name, replies in by_reply.items():
        for label in replies.labels:
            by_personality.setdefault(label.removeprefix(MODEL_LABEL_PREFIX), set()).add(name)
    return [
        (p, sorted(by_personality[p]), PERSONALITY_WORDS[p])
        for p in PERSONALITIES
        if p in by_personality
    ]


def _spec_personalities(spec: Mapping[str, Any], rehearsed: bool) -> list[tuple[str, str]]:
    """(name, personality) of the spec's simulated models (provider sim, or a rehearsal's)."""
    simulated = set(simulated_models(spec, rehearsed))
    found = []
    for m in _models(spec):
        chosen = _personality(m) if str(m.get("name")) in simulated else None
        if chosen is not None:
            found.append((str(m.get("name")), chosen))
    return found


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


def model_notes(
    spec: Mapping[str, Any], rehearsed: bool = False, reported: Reported | None = None
) -> list[tuple[str, str]]:
    """(model name, what is said of it) for every model whose spec entry describes it
    (its `about` text), or whose replies named the local simulator as the model answering
    (`simulator_replies`): how many did, before the `about` text, which is not true of them
    ("a real model's real answers", the local spec's, was said of the simulator's). None in
    a rehearsal's folder, whose answers are all the simulator's."""
    if rehearsed:
        return []
    # A model of provider sim is said above, with its personality: not again by its replies.
    spec_sim = set(simulated_models(spec))
    by_reply = {
        name: replies for name, replies in simulator_replies(reported).items()
        if name not in spec_sim
    }  # fmt: skip
    abouts = {
        str(m.get("name")): str(m["about"])
        for m in _models(spec)
        if isinstance(m.get("about"), str) and m["about"].strip()
    }
    notes = []
    for name in [*abouts, *sorted(set(by_reply) - set(abouts))]:
        about, replies = abouts.get(name), by_reply.get(name)
        if replies is None:
            notes.append((name, str(about)))
        elif about is None:
            notes.append((name, f"{replies.said()}: the simulator's answers, not a model's"))
        else:
            notes.append((name, f"{replies.said()}, not the model its spec describes as: {about}"))
    return notes


def models_markdown(
    spec: Mapping[str, Any], rehearsed: bool = False, reported: Reported | None = None
) -> str | None:
    """`report.md`'s "Models" section, or None when there is nothing to say; `reported`
    as `simulated_models` takes it."""
    simulated = simulated_models(spec, rehearsed)
    notes = model_notes(spec, rehearsed, reported)
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
        for p, names, words in personalities(spec, rehearsed, reported)
    )
    lines.extend(f"- **{markdown.text(name)}**: {markdown.text(about)}" for name, about in notes)
    return "\n".join(lines) + "\n"
