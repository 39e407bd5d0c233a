"""What the report says about each model beyond its numbers: whether it is a simulated
forecaster, and the spec's own `about` line (e.g. "a 270M base model").

Read from the run's frozen `spec.toml` (parsed as TOML data, never evaluated), so a report
rebuilt later from the folder says the same as the one written at the end of the run.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
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


def simulated_models(spec: Mapping[str, Any]) -> list[str]:
    """Names of the models answered by the local simulator, sorted."""
    return sorted(str(m.get("name")) for m in _models(spec) if m.get("provider") == "sim")


def model_notes(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(model name, its `about` text) for every model whose spec entry describes it."""
    return [
        (str(m.get("name")), str(m["about"]))
        for m in _models(spec)
        if isinstance(m.get("about"), str) and m["about"].strip()
    ]


def models_markdown(spec: Mapping[str, Any]) -> str | None:
    """`report.md`'s "Models" section, or None when there is nothing to say."""
    simulated = simulated_models(spec)
    notes = model_notes(spec)
    if not simulated and not notes:
        return None
    lines = ["## Models\n"]
    if simulated:
        lines.append(
            f"Simulated forecasters ({', '.join(map(markdown.text, simulated))}) answered from "
            "the local simulator, not a language model; no provider was called.\n"
        )
    lines.extend(f"- **{markdown.text(name)}**: {markdown.text(about)}" for name, about in notes)
    return "\n".join(lines) + "\n"
