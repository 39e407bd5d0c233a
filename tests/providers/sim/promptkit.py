"""Appendix-B style prompts built locally (the simulator must not depend on `panels`)."""

from __future__ import annotations

import datetime as dt
import itertools
import random

SYSTEM = (
    "You are a probabilistic forecaster. Estimate the probability of the requested event "
    "using the information supplied."
)
BIN_TEXT = {
    0: "B0 (below -1)",
    1: "B1 (between -1 and 0)",
    2: "B2 (between 0 and 1)",
    3: "B3 (at least 1)",
}
BINS_BLOCK = (
    "Bins:\nB0 – below -1 (z < -1)\nB1 – between -1 and 0 (-1 <= z < 0)\n"
    "B2 – between 0 and 1 (0 <= z < 1)\nB3 – at least 1 (z >= 1)"
)
INSTRUCTION = (
    "Return only a JSON object with one field named 'probability'. Its value must be a "
    "number between 0 and 1, reported to four decimal places."
)


def history(seed: int, n: int = 60) -> list[tuple[str, float]]:
    rng = random.Random(seed)
    day = dt.date(2025, 6, 2)
    rows = []
    for _ in range(n):
        rows.append((day.isoformat(), round(rng.gauss(0.1, 1.0), 4)))
        day += dt.timedelta(days=1)
    return rows


def header(seed: int, extra: str = "") -> str:
    lines = [
        "You are making this forecast immediately after market close on 2025-08-29.",
        "Each of the previous 60 daily simple returns has been divided by the sample standard "
        "deviation of those same returns (0.01834512). The returns have not been mean-centered.",
    ]
    lines += [f"{d}: {z:.4f}" for d, z in history(seed)]
    lines.append(BINS_BLOCK)
    if extra:
        lines.append("Additional note from the person requesting this forecast: " + extra)
    return "\n".join(lines)


def h1_events() -> list[frozenset[int]]:
    """All 14 non-trivial subsets of the four bins."""
    subsets = []
    for r in (1, 2, 3):
        subsets += [frozenset(c) for c in itertools.combinations(range(4), r)]
    return subsets


def event_text(bins: frozenset[int]) -> str:
    """Singletons and pairs positively, triples as 'does not fall' in the missing bin."""
    if len(bins) == 3:
        (missing,) = set(range(4)) - bins
        return f"On future trading day 1, z does not fall in {BIN_TEXT[missing]}."
    names = " or ".join(BIN_TEXT[b] for b in sorted(bins))
    return f"On future trading day 1, z falls in {names}."


def single_prompt(seed: int, bins: frozenset[int], extra: str = "") -> str:
    return (
        header(seed, extra)
        + "\nWhat probability would you assign to the following occurring? – "
        + event_text(bins)
        + "\n"
        + INSTRUCTION
    )


def grouped_prompt(seed: int, events: list[frozenset[int]]) -> tuple[str, list[str]]:
    keys = [f"Q{i + 1:02d}" for i in range(len(events))]
    lines = [header(seed), "Assign a probability to each of these labeled forecast events:"]
    lines += [f"{k}: {event_text(b)}" for k, b in zip(keys, events, strict=True)]
    lines.append(
        "Return only a JSON object with exactly the keys " + ", ".join(keys)
        + "; each value a number between 0 and 1."
    )
    return "\n".join(lines), keys
