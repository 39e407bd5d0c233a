"""Simulated forecasters: deterministic stand-ins for language models.

Each one holds a latent *coherent* belief (smoothed bin frequencies of the history it was
shown, days independent, the two assets' joint cell frequencies when there are two) and
then reports it through a personality that distorts it the way real models were seen to
(`PERSONALITY_WORDS` says what each does; the report says it of each simulated model).

Question-family prompts (plain-language statements, no history) are read as sentences by
`providers.sim.family_beliefs`: chance controls computed exactly, thresholds monotone in the
number, deadlines in the year, complements, added detail, "A and B" / "A or B"; in a joint
prompt also mutually exclusive alternatives (renormalised). The same personalities then
distort those beliefs. Asked in isolation, alternatives of a partition are not seen together,
so even `coherent` can be incoherent there, as real models are.

Answers depend only on (model, seed, system, user), so reruns and resumes are comparable.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from fractions import Fraction
from itertools import product

from providers.sim import family_beliefs
from providers.sim.prompts import AskedEvent, ParsedPrompt, parse_prompt, statement_text

PERSONALITIES: tuple[str, ...] = ("coherent", "noisy", "anchored", "framing", "fraction")
#: What each personality does to the latent belief, in one line (`report` does it).
PERSONALITY_WORDS: dict[str, str] = {
    "coherent": "reports its coherent belief, rounded to four decimals (incoherence ~ rounding "
    "only where it sees the questions together); asked one statement at a time, it never "
    "sees a partition's other alternatives, so its answers there need not sum to one",
    "noisy": "independent noise on every query, so related answers stop adding up",
    "anchored": "pulled toward any percentage stated in the prompt (or toward 50%)",
    "framing": "inflates events worded as complements and sways with emotional wording",
    "fraction": 'answers in prose with fractions such as "11/36" (only a lenient parser copes)',
}
#: Personalities a model name without an explicit one may be given: all strict-parseable.
_IMPLICIT: tuple[str, ...] = ("coherent", "noisy", "anchored", "framing")

#: P(bin) under a standard normal: the prior the history's frequencies are shrunk toward.
NORMAL_BINS: tuple[float, float, float, float] = (0.158655, 0.341345, 0.341345, 0.158655)
_PRIOR_WEIGHT = 4.0

_POSITIVE = re.compile(r"\b(optimistic|love|exciting|excited|great|confident)\b", re.I)
_NEGATIVE = re.compile(r"\b(scared|afraid|anxious|worried|nervous|fear)\b", re.I)


#: What begins the model every simulated reply names as the one answering ("sim/noisy"): the
#: report tells the simulator's answers by it in a folder whose spec names a real model
#: (`runs.report.models.simulator_replies`).
MODEL_LABEL_PREFIX = "sim/"


def model_label(personality: str) -> str:
    """The model a simulated reply names as the one answering: `sim/<personality>`."""
    return f"{MODEL_LABEL_PREFIX}{personality}"


def named_personality(model: str) -> str | None:
    """The personality the model id names (`sim-noisy`: noisy), the first of
    `PERSONALITIES` in it; None when it names none. The id decides over a spec's
    `personality` key, which is checked against it (`runs.spec`)."""
    lowered = model.lower()
    return next((name for name in PERSONALITIES if name in lowered), None)


def named_doubtfully(model: str) -> str | None:
    """Why the personality an id names (`named_personality`) may not be the one meant, or
    None: it is named inside a longer word (`sim-incoherent` answers as coherent), or the id
    names more than one (`sim-noisy-coherent`: the first of `PERSONALITIES` wins)."""
    lowered = model.lower()
    named = [name for name in PERSONALITIES if name in lowered]
    if len(named) > 1:
        taken = f"{named[0]} is taken (first of {', '.join(PERSONALITIES)})"
        return f"names {len(named)} personalities ({', '.join(named)}); {taken}"
    for name in named:
        word = re.search(f"[a-z]*{name}[a-z]*", lowered)
        if word is not None and word.group() != name:
            return f"names {name} inside the word {word.group()!r}"
    return None


def spec_personality(model: str, written: str | None = None) -> str:
    """The personality a spec's model answers with: the one its id names, else the spec's
    `personality` key (`written`), else the id's hash (as `providers.sim.rehearse` sends it)."""
    return personality_for(model, None if named_personality(model) else written)


def personality_model(personality: str) -> str:
    """The model id that names `personality` (`sim-noisy`), as the quickstart writes them."""
    return f"sim-{personality}"


def id_like(model: str) -> str | None:
    """The id naming a personality (`personality_model`) closest to a `model` id that names
    none: what a typo meant (`sim-coherant`: sim-coherent); None when none is close."""
    import difflib

    ids = [personality_model(name) for name in PERSONALITIES]
    return next(iter(difflib.get_close_matches(model.lower(), ids, n=1)), None)


def personality_for(model: str, explicit: str | None = None) -> str:
    """The personality named in the model id (e.g. `sim-noisy`), else a stable pick by hash."""
    if explicit:
        if explicit not in PERSONALITIES:
            raise ValueError(f"unknown personality {explicit!r}; known: {PERSONALITIES}")
        return explicit
    named = named_personality(model)
    if named is not None:
        return named
    digest = hashlib.sha256(model.encode()).digest()
    return _IMPLICIT[digest[0] % len(_IMPLICIT)]


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _bin_of(z: float) -> int:
    if z < -1.0:
        return 0
    if z < 0.0:
        return 1
    if z < 1.0:
        return 2
    return 3


def _marginal(history: tuple[float, ...]) -> list[float]:
    counts = [0.0] * 4
    for z in history:
        counts[_bin_of(z)] += 1.0
    total = len(history) + _PRIOR_WEIGHT
    return [(c + _PRIOR_WEIGHT * p) / total for c, p in zip(counts, NORMAL_BINS, strict=True)]


def _joint(a: tuple[float, ...], b: tuple[float, ...]) -> list[list[float]]:
    counts = [[0.0] * 4 for _ in range(4)]
    for za, zb in zip(a, b, strict=False):
        counts[_bin_of(za)][_bin_of(zb)] += 1.0
    total = min(len(a), len(b)) + _PRIOR_WEIGHT
    return [
        [(counts[i][j] + _PRIOR_WEIGHT * NORMAL_BINS[i] * NORMAL_BINS[j]) / total for j in range(4)]
        for i in range(4)
    ]


def belief(prompt: ParsedPrompt, event: AskedEvent, model: str) -> float:
    """The latent coherent probability of one stock-bin event; other statements are read as
    sentences (see `_generic_beliefs`), whatever the model."""
    del model
    if not event.conditions or not prompt.histories:
        return _generic_beliefs([event])[event.key]
    days = sorted({c.day for c in event.conditions})
    p = 1.0
    for day in days:
        slot = {c.asset: c.bins for c in event.conditions if c.day == day}
        if "A" in prompt.histories and "B" in prompt.histories:
            joint = _joint(prompt.histories["A"], prompt.histories["B"])
            bins_a = slot.get("A", frozenset(range(4)))
            bins_b = slot.get("B", frozenset(range(4)))
            p *= sum(joint[i][j] for i, j in product(sorted(bins_a), sorted(bins_b)))
        else:
            history = next(iter(prompt.histories.values()))
            q = _marginal(history)
            bins = frozenset(range(4))
            for b in slot.values():
                bins &= b
            p *= sum(q[i] for i in bins)
    return min(1.0, max(0.0, p))


def _generic_beliefs(events: Sequence[AskedEvent]) -> dict[str, float]:
    """Statements that are not stock bins (the question families): beliefs read from the
    sentences (`family_beliefs`); asked together, the structure across them is used too."""
    texts = [statement_text(e) for e in events]
    if len(texts) == 1:
        values = [family_beliefs.statement_belief(texts[0])]
    else:
        values = family_beliefs.joint_beliefs(texts)
    return {e.key: v for e, v in zip(events, values, strict=True)}


def _direction(event: AskedEvent) -> int:
    """+1 if the event only concerns up-bins, -1 if only down-bins, 0 otherwise."""
    bins = set().union(*(c.bins for c in event.conditions)) if event.conditions else set()
    if bins and bins <= {2, 3}:
        return 1
    if bins and bins <= {0, 1}:
        return -1
    return 0


def report(
    personality: str, p: float, prompt: ParsedPrompt, event: AskedEvent, rng: random.Random
) -> float:
    """Distort the belief `p` the way the personality does; always a probability."""
    if personality == "noisy":
        p = p + rng.gauss(0.0, 0.04)
    elif personality == "anchored":
        anchor = prompt.anchors[-1] if prompt.anchors else 0.5
        weight = 0.45 if prompt.anchors else 0.15
        p = (1 - weight) * p + weight * anchor + rng.gauss(0.0, 0.005)
    elif personality == "framing":
        if event.complement_wording:
            p = p + 0.03 + 0.06 * (1.0 - p)
        mood = (1 if _POSITIVE.search(prompt.text) else 0) - (
            1 if _NEGATIVE.search(prompt.text) else 0
        )
        p = p + 0.06 * mood * _direction(event) + rng.gauss(0.0, 0.005)
    return min(0.9999, max(0.0001, p)) if personality != "coherent" else min(1.0, max(0.0, p))


def _as_fraction(p: float) -> str:
    """Small fractions the way people write them; an exactly computed chance (a dice or card
    control, e.g. 11/36 or 33/221) is written exactly."""
    exact = Fraction(p).limit_denominator(52 * 51)
    if exact.denominator <= 52 * 51 and abs(float(exact) - p) < 1e-12 and 0 < exact < 1:
        return f"{exact.numerator}/{exact.denominator}"
    f = Fraction(p).limit_denominator(40)
    if f.numerator == 0:
        f = Fraction(1, 40)
    if f == 1:
        f = Fraction(39, 40)
    return f"{f.numerator}/{f.denominator}"


def answer(
    model: str, system: str, user: str, seed: int | None = None, personality: str | None = None
) -> str:
    """The simulated model's full reply text to one elicitation."""
    chosen = personality_for(model, personality)
    prompt = parse_prompt(user)
    generic = [e for e in prompt.events if not e.conditions or not prompt.histories]
    beliefs = _generic_beliefs(generic) if generic else {}
    values: dict[str, float] = {}
    for event in prompt.events:
        rng = _rng(model, seed, system, user, event.key)
        p = beliefs[event.key] if event.key in beliefs else belief(prompt, event, model)
        values[event.key] = report(chosen, p, prompt, event, rng)
    if chosen == "fraction":
        shown = {k: _as_fraction(v) for k, v in values.items()}
        body = json.dumps(shown)
        first = next(iter(shown.values()))
        lead = "Looking at the history" if prompt.histories else "Thinking it through"
        return f"{lead}, I would put this at about {first}.\n\n```json\n{body}\n```"
    rounded = {k: round(v, 4) for k, v in values.items()}
    return "{" + ", ".join(f"{json.dumps(k)}: {v:.4f}" for k, v in rounded.items()) + "}"


def count_tokens(text: str) -> int:
    """A rough token count (4 characters a token), enough for usage fields and caps."""
    return max(1, math.ceil(len(text) / 4))
