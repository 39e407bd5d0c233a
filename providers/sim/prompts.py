"""Reading an elicitation prompt the way a simulated forecaster needs to.

The simulator may not import `panels` (providers stand alone), and it must keep working
when the prompt wording evolves, so this reads prompts by their landmarks rather than by
exact templates: dated history lines, `B0`..`B3` bin names, `day N`, `Asset A/B`,
negations, and the requested JSON keys (`probability`, or `Q01`.. for grouped prompts).
Anything it cannot place becomes a *generic* event, answered from a hash of its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_DATE_LINE = re.compile(r"^\s*[-•*|]?\s*(\d{4}-\d{2}-\d{2})\b(.*)$")
_NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_GROUP_KEY_LINE = re.compile(
    r"^\s*[-•*]?\s*\**\s*(Q\d{2,3})\b\s*\**\s*[:.)\-\u2013\u2014]?\s*(.*)$"
)
_KEY_REQUEST = re.compile(
    r"(?:field|key)\s+(?:named|called)\s+[\"'\u2018\u201c`]?([A-Za-z_][A-Za-z0-9_]*)"
)
_BIN = re.compile(r"\bB([0-3])\b")
_DAY = re.compile(r"\bday\s+(\d+)\b", re.IGNORECASE)
_ASSET = re.compile(r"\bAsset\s+([AB])\b|\bz_?\{?([AB])\}?(?![A-Za-z])")
_NEGATION = re.compile(
    r"\b(?:does\s+not|do\s+not|doesn't|don't|not|never|outside|fails\s+to)\b", re.IGNORECASE
)
_UP = re.compile(r"\b(?:up|positive|rises?|above\s+(?:zero|0)|at\s+least\s+(?:zero|0))\b", re.I)
_DOWN = re.compile(r"\b(?:down|negative|below\s+(?:zero|0))\b", re.IGNORECASE)
_Z = re.compile(r"(?<![\w])z(?:_?\{?[AB]\}?)?(?![\w])")
_TAILS = re.compile(r"\b(?:tails?|extreme)\b", re.IGNORECASE)
_CENTER = re.compile(r"\b(?:cent(?:er|re)|middle)\b", re.IGNORECASE)
_QUESTION_LEAD = re.compile(
    r"what probability would you assign|assign a probability|how likely|probability that",
    re.IGNORECASE,
)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*(?:%|percent\b)")
_INSTRUCTION = re.compile(r"^\s*(?:return|respond|reply|answer|output)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Condition:
    """One asset's scaled return on one future day lies in `bins` (subset of 0..3)."""

    asset: str  # "" for single-asset prompts, "A" or "B" for two-asset ones
    day: int
    bins: frozenset[int]


@dataclass(frozen=True)
class AskedEvent:
    """One event the prompt asks about, under the JSON key that should answer it."""

    key: str
    text: str
    conditions: tuple[Condition, ...]  # empty: not a stock-bin event (answered generically)
    complement_wording: bool


@dataclass(frozen=True)
class ParsedPrompt:
    """What the forecaster could make of a prompt."""

    histories: dict[str, tuple[float, ...]]  # asset ("" | "A" | "B") -> scaled returns
    events: tuple[AskedEvent, ...]
    anchors: tuple[float, ...]  # numbers stated as percentages outside the data (0..1)
    text: str


def _to_float(token: str) -> float:
    return float(token.replace("\u2212", "-"))


@dataclass(frozen=True, slots=True)
class _LineFacts:
    """What the prompt readers need to know of one line, computed once per distinct line."""

    numbers: tuple[float, ...] | None  # a dated line's numbers; None if not a dated line
    has_bin: bool
    question_lead: bool
    anchors: tuple[float, ...]  # percentages stated on a line that is neither data nor a bin


@lru_cache(maxsize=1 << 14)
def _facts(line: str) -> _LineFacts:
    """One line read by every landmark at once, memoised: the prompts of one stock-day share
    their history lines (60 or more dated lines asked again for every event, arm and pass),
    and reading those lines again was most of the simulator's CPU per request (issue 9)."""
    dated = _DATE_LINE.match(line)
    has_bin = _BIN.search(line) is not None
    anchors: list[float] = []
    if dated is None and not has_bin:
        for m in _PERCENT.finditer(line):
            value = float(m.group(1)) / 100.0
            if 0.0 <= value <= 1.0:
                anchors.append(value)
    return _LineFacts(
        numbers=None
        if dated is None
        else tuple(_to_float(t) for t in _NUMBER.findall(dated.group(2))),
        has_bin=has_bin,
        question_lead=_QUESTION_LEAD.search(line) is not None,
        anchors=tuple(anchors),
    )


def _history_of(lines: list[str]) -> dict[str, tuple[float, ...]]:
    rows = [f.numbers for f in map(_facts, lines) if f.numbers]
    if not rows:
        return {}
    if all(len(r) >= 2 for r in rows) and len(rows) >= 2:
        return {"A": tuple(r[0] for r in rows), "B": tuple(r[1] for r in rows)}
    return {"": tuple(r[0] for r in rows)}


def parse_history(user: str) -> dict[str, tuple[float, ...]]:
    """Dated lines carry one scaled return (single asset) or two (assets A and B)."""
    return _history_of(user.splitlines())


def _bins_of(clause: str) -> frozenset[int] | None:
    found = {int(b) for b in _BIN.findall(clause)}
    if found:
        return frozenset(found)
    if not _Z.search(clause):  # direction words count only in statements about z
        return None
    if _TAILS.search(clause):
        return frozenset({0, 3})
    if _CENTER.search(clause):
        return frozenset({1, 2})
    if _UP.search(clause):
        return frozenset({2, 3})
    if _DOWN.search(clause):
        return frozenset({0, 1})
    return None


def _clauses(block: str) -> list[str]:
    """Split an event's text into per-day / per-asset clauses (lines, bullets, dashes)."""
    parts: list[str] = []
    for line in block.splitlines():
        for piece in re.split(r"\s[\u2013\u2014]\s|\s•\s|;|(?<=[.?!])\s+(?=[A-Z\u2013])", line):
            piece = piece.strip(" -•*\t\u2013")
            if piece:
                parts.append(piece)
    return parts


def parse_event(key: str, block: str, two_assets: bool) -> AskedEvent:
    """Turn one event's wording into conditions; unknown wording yields no conditions."""
    by_slot: dict[tuple[str, int], frozenset[int]] = {}
    complement = False
    for clause in _clauses(block):
        if _QUESTION_LEAD.search(clause) and not _BIN.search(clause):
            continue
        bins = _bins_of(clause)
        if bins is None:
            continue
        # Strip parenthesised bin descriptions ("below -1") before looking for negation words.
        bare = re.sub(r"\([^)]*\)", "", clause)
        if _NEGATION.search(bare):
            bins = frozenset(range(4)) - bins
            complement = True
        day_match = _DAY.search(clause)
        day = int(day_match.group(1)) if day_match else 1
        asset = ""
        if two_assets:
            a = _ASSET.search(clause)
            asset = (a.group(1) or a.group(2)) if a else "A"
        slot = (asset, day)
        by_slot[slot] = by_slot.get(slot, frozenset(range(4))) & bins
    conditions = tuple(Condition(a, d, b) for (a, d), b in sorted(by_slot.items()))
    return AskedEvent(key, block.strip(), conditions, complement)


def _event_region(lines: list[str]) -> list[str]:
    """The lines after the last question lead (where the event wording lives)."""
    start = 0
    for i, line in enumerate(lines):
        if _facts(line).question_lead:
            start = i
    return lines[start:]


def parse_events(user: str, two_assets: bool) -> tuple[AskedEvent, ...]:
    """Grouped prompts list `Qnn` items; single ones ask one event under one key."""
    return _events_of(user, user.splitlines(), two_assets)


def _events_of(user: str, lines: list[str], two_assets: bool) -> tuple[AskedEvent, ...]:
    region = _event_region(lines)
    grouped: list[tuple[str, list[str]]] = []
    for line in region:
        m = _GROUP_KEY_LINE.match(line)
        if m:
            grouped.append((m.group(1), [m.group(2)]))
        elif grouped and line.strip() and not _INSTRUCTION.match(line):
            grouped[-1][1].append(line)
        elif grouped and _INSTRUCTION.match(line):
            break
    if grouped:
        seen: dict[str, AskedEvent] = {}
        for key, block in grouped:
            seen.setdefault(key, parse_event(key, "\n".join(block), two_assets))
        return tuple(seen.values())
    key_match = _KEY_REQUEST.search(user)
    key = key_match.group(1) if key_match else "probability"
    body = [ln for ln in region if not _INSTRUCTION.match(ln)]
    return (parse_event(key, "\n".join(body), two_assets),)


def parse_anchors(user: str) -> tuple[float, ...]:
    """Percentages stated outside the data lines and bin statistics (e.g. "around 70%")."""
    return tuple(a for line in user.splitlines() for a in _facts(line).anchors)


def statement_text(event: AskedEvent) -> str:
    """The plain statement an event asks about, without the question lead or bullets.

    Family prompts ask about sentences rather than bins; the belief is a function of the
    sentence alone, so the same statement reads the same asked alone or among others.
    """
    lines = []
    for line in event.text.splitlines():
        if _QUESTION_LEAD.search(line) and not _BIN.search(line):
            continue
        stripped = line.strip().lstrip("-\u2013\u2014\u2022*").strip()
        if stripped:
            lines.append(stripped)
    return " ".join(lines)


def parse_prompt(user: str) -> ParsedPrompt:
    lines = user.splitlines()
    histories = _history_of(lines)
    events = _events_of(user, lines, two_assets="A" in histories)
    anchors = tuple(a for line in lines for a in _facts(line).anchors)
    return ParsedPrompt(histories, events, anchors, user)
