"""The paper's stock-return event panels (section 3 "Event panels", Appendices B and D).

A day's variance-normalised return z falls in one of four bins with edges -1, 0, 1. Events
are conjunctions of "day d (or asset X) falls in this set of bins" clauses, so each carries
its clauses for prompt rendering, and its id is built mechanically from them:

- one clause: ``d1:B0|B1`` (day 1 in B0 or B1), ``A:B3`` (asset A in B3);
- several clauses joined by ``&`` in day / asset order: ``d1:B0|B1&d2:B2|B3``,
  ``A:B0&B:B3``.

The bin set in an id is always the set where the event holds (``d1:B1|B2|B3``, never a
"not B0"), so equal ids mean literally the same event; the `Clause` instead states three-bin
sets as complements (``negated``, values ``(0,)``) because the paper words them "does not
fall in B0".

Panel sizes (events / atoms): horizon 1: 14 / 4; horizon 2: 52 / 16; horizon 3: 122 / 64;
horizon 4: 248 / 256; two assets: 44 / 16. No two constructions produce the same id, so
de-duplication (by id only) never removes anything; it is kept as a guard.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from panels.algebra import Panel
from panels.events import Clause, Event, conjunction_event
from panels.space import OutcomeSpace

MAX_HORIZON = 4

SetKind = Literal["assets", "days"]


@dataclass(frozen=True)
class Bin:
    """One return bin: `lower <= z < upper`."""

    index: int
    name: str
    label: str
    inequality: str
    lower: float
    upper: float

    @property
    def paper_line(self) -> str:
        """The bin as the paper's prompts list it, e.g. "B0 – below −1 (z<−1)"."""
        return f"{self.name} – {self.label.replace('-', '−')} ({self.inequality.replace('-', '−')})"

    def contains(self, z: float) -> bool:
        return self.lower <= z < self.upper


BINS: tuple[Bin, ...] = (
    Bin(0, "B0", "below -1", "z<-1", -math.inf, -1.0),
    Bin(1, "B1", "between -1 and 0", "-1≤z<0", -1.0, 0.0),
    Bin(2, "B2", "between 0 and 1", "0≤z<1", 0.0, 1.0),
    Bin(3, "B3", "at least 1", "z≥1", 1.0, math.inf),
)

#: The 14 non-empty proper unions of the bins, contiguous ranges first (B0, B0|B1, B0|B1|B2,
#: B1, B1|B2, ...) then the rest. This order reproduces the paper's Figure 1 numbering, where
#: event 4 is -1<=z<0, event 5 is -1<=z<1 and event 7 is 0<=z<1.
BIN_SETS: tuple[tuple[int, ...], ...] = (
    (0,), (0, 1), (0, 1, 2),
    (1,), (1, 2), (1, 2, 3),
    (2,), (2, 3),
    (3,),
    (0, 2), (0, 3), (1, 3), (0, 1, 3), (0, 2, 3),
)  # fmt: skip

DOWN, UP = (0, 1), (2, 3)
TAILS, CENTRE = (0, 3), (1, 2)


def bin_of(z: float) -> int:
    """Index of the bin containing a normalised return (NaN is an error, not a bin)."""
    if math.isnan(z):
        raise ValueError("a NaN return lies in no bin")
    return next(b.index for b in BINS if b.contains(z))


def _coarsenings() -> tuple[tuple[str, tuple[tuple[int, ...], ...]], ...]:
    """Two-class partitions of the bins used for pairs of days: name -> (class, class)."""
    rest = [tuple(i for i in range(4) if i != k) for k in range(4)]
    return (
        ("up/down", (DOWN, UP)),
        ("tails/centre", (TAILS, CENTRE)),
        *((f"B{k}/rest", ((k,), rest[k])) for k in range(4)),
    )


COARSENINGS = _coarsenings()


# -- clauses, ids and wording ----------------------------------------------------------
def bin_clause(factor: str, bins: Sequence[int]) -> Clause:
    """A clause "factor falls in bins", stated as a complement when it covers three bins."""
    chosen = tuple(sorted(set(bins)))
    if not chosen or len(chosen) == 4 or any(b not in range(4) for b in chosen):
        raise ValueError(f"{chosen} is not a non-trivial set of bins")
    if len(chosen) == 3:
        missing = next(b for b in range(4) if b not in chosen)
        return Clause(factor, (missing,), negated=True)
    return Clause(factor, chosen)


def clause_bins(clause: Clause) -> tuple[int, ...]:
    """The bins in which a clause holds (undoing the complement form)."""
    values = tuple(int(v) for v in clause.values)  # type: ignore[call-overload]
    if clause.negated:
        return tuple(b for b in range(4) if b not in values)
    return values


def clause_id(clause: Clause) -> str:
    return f"{clause.factor}:" + "|".join(f"B{b}" for b in clause_bins(clause))


def _bins_phrase(bins: Sequence[int]) -> str:
    parts = [f"{BINS[b].name} ({BINS[b].label})" for b in bins]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _clause_words(clause: Clause) -> str:
    verb = "does not fall in" if clause.negated else "falls in"
    values = [int(v) for v in clause.values]  # type: ignore[call-overload]
    if clause.factor.startswith("d"):
        return f"on future trading day {clause.factor[1:]}, z {verb} {_bins_phrase(values)}"
    asset = clause.factor
    return f"Asset {asset}'s z_{asset} {verb} {_bins_phrase(values)}"


def describe(clauses: Sequence[Clause]) -> str:
    """Plain-language wording in the paper's style (Appendix B)."""
    words = [_clause_words(c) for c in clauses]
    if len(words) == 1:
        sentence = words[0]
        if clauses[0].factor.startswith("d"):
            return sentence[0].upper() + sentence[1:] + "."
        return f"On the next trading day, {sentence}."
    if clauses[0].factor.startswith("d"):
        lead = "Both of the following" if len(words) == 2 else "All of the following"
        return f"{lead}: " + "; ".join(words) + "."
    return "Both of the following on the same next trading day: " + "; ".join(words) + "."


def make_event(clauses: Sequence[Clause], group: str) -> Event:
    clauses = tuple(clauses)
    event_id = "&".join(clause_id(c) for c in clauses)
    return conjunction_event(event_id, describe(clauses), clauses, group)


# -- horizon panels --------------------------------------------------------------------
def day_events(day: int) -> list[Event]:
    """The 14 events about one day's bin."""
    return [make_event([bin_clause(f"d{day}", s)], f"d{day}") for s in BIN_SETS]


def pair_events(first: int, second: int) -> list[Event]:
    """For two days: each coarsening's four cross-day intersections (6 x 4 = 24 events)."""
    events = []
    for name, classes in COARSENINGS:
        for a, b in itertools.product(classes, repeat=2):
            clauses = [bin_clause(f"d{first}", a), bin_clause(f"d{second}", b)]
            events.append(make_event(clauses, f"d{first}d{second}:{name}"))
    return events


def pattern_events(days: Sequence[int]) -> list[Event]:
    """Up/down patterns across several days (2^k events), down before up, day order."""
    group = "".join(f"d{d}" for d in days) + ":up/down"
    return [
        make_event([bin_clause(f"d{d}", c) for d, c in zip(days, pattern, strict=True)], group)
        for pattern in itertools.product((DOWN, UP), repeat=len(days))
    ]


def _new_events_for_day(day: int) -> list[Event]:
    """Everything horizon `day` adds to horizon `day - 1`: events whose last day is `day`."""
    events = day_events(day)
    for first in range(1, day):
        events += pair_events(first, day)
    for pair in itertools.combinations(range(1, day), 2):
        events += pattern_events((*pair, day))
    if day == 4:
        events += pattern_events((1, 2, 3, 4))
    return events


@cache
def horizon_events(h: int) -> tuple[Event, ...]:
    """The horizon-h events; horizon h's list is a prefix of horizon h+1's (nesting)."""
    if h not in range(1, MAX_HORIZON + 1):
        raise ValueError(f"horizon must be 1..{MAX_HORIZON}, not {h}")
    events = list(horizon_events(h - 1)) if h > 1 else []
    seen = {e.id for e in events}
    for event in _new_events_for_day(h):
        if event.id not in seen:
            seen.add(event.id)
            events.append(event)
    return tuple(events)


def horizon_space(h: int) -> OutcomeSpace:
    return OutcomeSpace({f"d{d}": tuple(range(4)) for d in range(1, h + 1)})


@cache
def horizon_panel(h: int) -> Panel:
    """The paper's panel for horizon h in 1..4 (14, 52, 122, 248 events; 4^h atoms)."""
    return Panel.from_space(horizon_space(h), horizon_events(h))


# -- two assets ------------------------------------------------------------------------
def asset_events(asset: str) -> list[Event]:
    return [make_event([bin_clause(asset, s)], asset) for s in BIN_SETS]


def cell_id(bin_a: int, bin_b: int) -> str:
    return f"A:B{bin_a}&B:B{bin_b}"


@cache
def two_asset_panel() -> Panel:
    """14 events for asset A, 14 for asset B, then the 16 joint cells (A in Bi and B in Bj)."""
    cells = [
        make_event([bin_clause("A", (i,)), bin_clause("B", (j,))], "AB:cells")
        for i, j in itertools.product(range(4), repeat=2)
    ]
    space = OutcomeSpace({"A": tuple(range(4)), "B": tuple(range(4))})
    return Panel.from_space(space, [*asset_events("A"), *asset_events("B"), *cells])


# -- linked and dispersed sets (Appendix D) --------------------------------------------
def source_panel(kind: SetKind) -> Panel:
    """The panel the linked/dispersed sets of `kind` are subsets of."""
    if kind == "assets":
        return two_asset_panel()
    if kind == "days":
        return horizon_panel(2)
    raise ValueError(f"kind must be 'assets' or 'days', not {kind!r}")


def _asset_marginals(base: str) -> list[str]:
    return [f"{base}:B{i}" for i in range(4)]


def _asset_cell(base: str, bin_base: int, bin_other: int) -> str:
    return cell_id(bin_base, bin_other) if base == "A" else cell_id(bin_other, bin_base)


def _rest_id(bin_index: int) -> str:
    return "|".join(f"B{b}" for b in range(4) if b != bin_index)


def _day_branch(base: int, bin_index: int, branch: str) -> str:
    """Joint event "base day in bin i and the other day in i ('s') / not in i ('d')"."""
    other = f"B{bin_index}" if branch == "s" else _rest_id(bin_index)
    if base == 1:
        return f"d1:B{bin_index}&d2:{other}"
    return f"d1:{other}&d2:B{bin_index}"


def linked_sets(kind: SetKind) -> dict[str, tuple[str, ...]]:
    """Linked event sets of Appendix D, as name -> event ids of `source_panel(kind)`.

    Every set has 8 events: the base's four marginals (bins B0..B3), then four joint events.

    - ``assets`` (8 sets): for base asset X in (A, B) and completed bin i in 0..3, the
      four cells "X in Bi and the other asset in Bj" for j = 0..3, completing the
      decomposition of P(X in Bi). Named ``linked/X/Bi``.
    - ``days`` (96 sets): for base day b in (1, 2), each bin i has two branches, "day b in
      Bi and the other day in Bi" (``s``) and "... not in Bi" (``d``). A set takes both
      branches of a completed bin c, neither of a different omitted bin o, and one branch of
      each of the two remaining bins: 4 x 3 x 2 x 2 = 48 per base day. Named
      ``linked/db/c{c}o{o}/B{r1}{x1}B{r2}{x2}`` with r1 < r2 the remaining bins and x their
      branch letters. The paper shows examples only ("more permutations in the full
      analysis"), so all of them are enumerated here.
    """
    sets: dict[str, tuple[str, ...]] = {}
    if kind == "assets":
        for base in ("A", "B"):
            for i in range(4):
                cells = [_asset_cell(base, i, j) for j in range(4)]
                sets[f"linked/{base}/B{i}"] = (*_asset_marginals(base), *cells)
    elif kind == "days":
        for day in (1, 2):
            marginals = [f"d{day}:B{i}" for i in range(4)]
            for complete, omit in itertools.permutations(range(4), 2):
                remaining = [r for r in range(4) if r not in (complete, omit)]
                for branches in itertools.product("sd", repeat=2):
                    joint: list[str] = []
                    for i in range(4):
                        if i == complete:
                            joint += [_day_branch(day, i, "s"), _day_branch(day, i, "d")]
                        elif i in remaining:
                            joint.append(_day_branch(day, i, branches[remaining.index(i)]))
                    tag = "".join(f"B{r}{x}" for r, x in zip(remaining, branches, strict=True))
                    sets[f"linked/d{day}/c{complete}o{omit}/{tag}"] = (*marginals, *joint)
    else:
        raise ValueError(f"kind must be 'assets' or 'days', not {kind!r}")
    return sets


def dispersed_sets(kind: SetKind) -> dict[str, tuple[str, ...]]:
    """Dispersed event sets of Appendix D, as name -> event ids of `source_panel(kind)`.

    Every set has 8 events: the base's four marginals, then one joint event per bin, so no
    marginal is fully decomposed.

    - ``assets`` (8 sets): base asset X in (A, B), shift s in 0..3; the cells "X in Bi and
      the other asset in B((i+s) mod 4)" for i = 0..3. Named ``dispersed/X/s{s}``.
    - ``days`` (32 sets): base day b in (1, 2); one branch (``s`` or ``d``, as in
      `linked_sets`) per bin, 2^4 = 16 selections per base day. Named ``dispersed/db/xxxx``
      with one branch letter per bin B0..B3.
    """
    sets: dict[str, tuple[str, ...]] = {}
    if kind == "assets":
        for base in ("A", "B"):
            for shift in range(4):
                cells = [_asset_cell(base, i, (i + shift) % 4) for i in range(4)]
                sets[f"dispersed/{base}/s{shift}"] = (*_asset_marginals(base), *cells)
    elif kind == "days":
        for day in (1, 2):
            marginals = [f"d{day}:B{i}" for i in range(4)]
            for branches in itertools.product("sd", repeat=4):
                joint = [_day_branch(day, i, x) for i, x in enumerate(branches)]
                sets[f"dispersed/d{day}/{''.join(branches)}"] = (*marginals, *joint)
    else:
        raise ValueError(f"kind must be 'assets' or 'days', not {kind!r}")
    return sets
