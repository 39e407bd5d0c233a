"""How long a model's own rate limits (`rpm`, `tpm`) hold its queries at the least.

`plan` said so only at an hour or more, and `run` not at all: a rehearsal of
`runs/specs/families.toml` (`--rehearse`, which keeps the spec's limits: the simulator is
paced as the provider would be) took six and a half minutes at one model's `rpm = 30`, and
nothing said why. Both now say it past `FLOOR_NOTE_MINUTES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.console_lines import plural
from engine.limits import whole_per_minute

if TYPE_CHECKING:
    from providers.types import ModelConfig
    from runs.spec import CampaignSpec

#: Minutes of a model's floor at its limits past which `plan` and `run` say it: a wait
#: longer than a few minutes that a user would otherwise take for a stall.
FLOOR_NOTE_MINUTES = 5.0


def floor_hours(model: ModelConfig, row: dict[str, Any]) -> float | None:
    """The fewest hours a live model's queries take at its `rpm` and `tpm` (typical tokens:
    the token bucket books what a reply reports), or None without limits or in batch."""
    if row.get("dispatch") == "batch" or (model.rpm is None and model.tpm is None):
        return None
    minutes = max(
        row["queries"] / whole_per_minute(model.rpm) if model.rpm else 0.0,  # 10 of 10.5
        (row["tokens_in"] + row["tokens_out"]) / model.tpm if model.tpm else 0.0,
    )
    return minutes / 60.0


def limit_floors(spec: CampaignSpec, summary: dict[str, Any]) -> list[str]:
    """One line per model whose rate limits hold its queries past `FLOOR_NOTE_MINUTES`: a
    `tpm` of 50 (for 50,000) made a 155-query campaign take about nine hours, silently."""
    lines = []
    for name, row in summary["by_model"].items():
        model = spec.model(name)
        hours = floor_hours(model, row)
        if hours is None or hours * 60.0 <= FLOOR_NOTE_MINUTES:
            continue
        limits = ", ".join(
            f"{key} {value:,g}" for key, value in (("rpm", model.rpm), ("tpm", model.tpm)) if value
        )
        whole, minutes = divmod(round(hours * 60), 60)
        lines.append(
            f"at its rate limits ({limits}), {name} needs at least {whole}:{minutes:02d} "
            f"(hours:minutes) for its {plural(row['queries'], 'query', 'queries')}"
        )
    return lines


def run_floors(spec: CampaignSpec, summary: dict[str, Any], *, rehearse: bool) -> list[str]:
    """`limit_floors` as `run` prints them once it has planned: a rehearsal's say that it
    keeps the limits, which a user rehearsing for speed would not expect."""
    kept = "; a rehearsal keeps the spec's rate limits" if rehearse else ""
    return [line + kept for line in limit_floors(spec, summary)]
