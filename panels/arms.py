"""The arm catalogue: every elicitation arm of the paper and of the family benchmark.

An arm answers four questions about one unit (a stock-day, an ordered pair of stock-days, or
a question family): which queries to send (`queries`), which event sets to score
(`scoring_sets`, all subsets of `panel(unit)`), what actually happened (`outcomes`, for Brier
scores) and, for control families, what the exact answers are (`exact`). The campaign runner
only sees this interface, so adding an arm never touches `runs/`.

Everything here is a pure function of the unit and the seed: re-planning a campaign gives
the same prompts byte for byte.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from panels import prompts
from panels.algebra import Panel
from panels.calendar import target_session
from panels.data import sample_date_pairs
from panels.events import Event
from panels.families import Family
from panels.space import OutcomeSpace
from panels.stock import (
    bin_of,
    dispersed_sets,
    horizon_events,
    horizon_panel,
    linked_sets,
    two_asset_panel,
)
from panels.units import DatePair, FamilyUnit, StockDay, Unit

__all__ = [
    "ARMS",
    "RELATION_POOR_PAIRS",
    "Arm",
    "Query",
    "ScoringSet",
    "UnitKind",
    "units_for",
]

UnitKind = Literal["stock-day", "date-pair", "family"]

#: Inputs an arm may need beyond returns: "names" (name and ticker columns), "headlines"
#: (a headlines file). The runner rejects an arm whose inputs the campaign lacks.
INPUTS = ("names", "headlines")


@dataclass(frozen=True)
class Query:
    """One request: `keys[i]` is the JSON key whose value answers `events[i]`."""

    events: tuple[str, ...]
    keys: tuple[str, ...]
    system: str
    user: str


@dataclass(frozen=True)
class ScoringSet:
    """A named subset of a unit's panel scored on its own (e.g. `h1`, `linked/A/B0`)."""

    name: str
    event_ids: tuple[str, ...]


SINGLE_KEY = ("probability",)


def _single(event: str, user: str) -> Query:
    return Query((event,), SINGLE_KEY, prompts.SYSTEM, user)


def _stock_day(unit: Unit, arm: str) -> StockDay:
    if not isinstance(unit, StockDay):
        raise TypeError(f"arm {arm!r} takes stock-day units, got {type(unit).__name__}")
    return unit


def _date_pair(unit: Unit, arm: str) -> DatePair:
    if not isinstance(unit, DatePair):
        raise TypeError(f"arm {arm!r} takes date-pair units, got {type(unit).__name__}")
    return unit


def _family(unit: Unit, arm: str) -> Family:
    """The family of a unit; a bare `Family` is accepted as its own unit."""
    if isinstance(unit, FamilyUnit):
        family: Family = unit.family
        return family
    if isinstance(unit, Family):
        return unit
    raise TypeError(f"arm {arm!r} takes family units, got {type(unit).__name__}")


def _day_outcome(sd: StockDay, days: int) -> dict[str, int]:
    """The realised bin of each future day, keyed like the horizon panels' factors."""
    if len(sd.future_z) < days:
        raise ValueError(f"{sd.id}: only {len(sd.future_z)} future returns, need {days}")
    return {f"d{d}": bin_of(sd.future_z[d - 1]) for d in range(1, days + 1)}


def _realised(panel: Panel, outcome: dict[str, int]) -> dict[str, bool]:
    return {e.id: bool(v) for e, v in zip(panel.events, panel.signature(outcome), strict=True)}


class Arm:
    """Base of all arms; subclasses set the class attributes and implement `queries`."""

    name: str
    unit_kind: UnitKind
    #: Inputs beyond return data (see INPUTS).
    requires: frozenset[str] = frozenset()
    #: Events elicited per unit, and queries per unit, when fixed (None: depends on the unit).
    events_per_unit: int | None = None
    queries_per_unit: int | None = None
    description: str = ""
    #: The metric its sets are scored in: the paper's arms cap the total stake ("inf", the
    #: sup-norm distance), the family benchmark caps each contract ("l1", the L1 distance).
    norm: Literal["inf", "l1"] = "inf"

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        raise NotImplementedError

    def query_count(self, unit: Unit) -> int:
        """Queries for this unit, without building prompts (for `dutchbook plan`)."""
        if self.queries_per_unit is None:
            raise NotImplementedError
        return self.queries_per_unit

    def panel(self, unit: Unit) -> Panel:
        raise NotImplementedError

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        raise NotImplementedError

    def outcomes(self, unit: Unit) -> dict[str, bool] | None:
        """Realised truth of every panel event (None when the outcome is not known)."""
        return None

    def exact(self, unit: Unit) -> dict[str, float] | None:
        """Known exact probabilities (control families only)."""
        return None

    def __repr__(self) -> str:
        return f"Arm({self.name!r}, {self.unit_kind})"


# -- single-day, one event per query ------------------------------------------------------
class SingleDayArm(Arm):
    """The 14 next-day events, each asked alone; variants add one thing to the prompt."""

    unit_kind: UnitKind = "stock-day"

    def __init__(
        self,
        name: str,
        description: str,
        *,
        statistics: bool = False,
        instructions: bool = False,
        identity: bool = False,
        headline: bool = False,
        red_herring: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self._options: dict[str, Any] = {
            "statistics": statistics,
            "instructions": instructions,
            "identity": identity,
            "headline": headline,
            "red_herring": red_herring,
        }
        needs = set()
        if identity or headline:
            needs.add("names")
        if headline:
            needs.add("headlines")
        self.requires = frozenset(needs)
        self.events_per_unit = len(horizon_panel(1))
        self.queries_per_unit = self.events_per_unit

    def panel(self, unit: Unit) -> Panel:
        return horizon_panel(1)

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        sd = _stock_day(unit, self.name)
        return [
            _single(
                e.id,
                prompts.stock_user_message(
                    sd, prompts.event_question(e.clauses), **self._options
                ),
            )
            for e in horizon_panel(1).events
        ]

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        return [ScoringSet("h1", horizon_panel(1).ids)]

    def outcomes(self, unit: Unit) -> dict[str, bool] | None:
        return _realised(horizon_panel(1), _day_outcome(_stock_day(unit, self.name), 1))


# -- grouped single-day arms --------------------------------------------------------------
def _h1_id(bins: Iterable[int]) -> str:
    return "d1:" + "|".join(f"B{b}" for b in sorted(bins))


def _complement_pairs() -> tuple[tuple[str, str], ...]:
    """Each next-day event with its complement: 7 pairs covering the 14 events."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for event in horizon_panel(1).events:
        if event.id in seen:
            continue
        bins = {int(b[1:]) for b in event.id.split(":")[1].split("|")}
        other = _h1_id(set(range(4)) - bins)
        pairs.append((event.id, other))
        seen |= {event.id, other}
    return tuple(pairs)


#: The relation-poor pairs (paper: "non-nested, with five overlapping pairs and two pairs
#: formed from disjoint events"), chosen by us since the paper does not list them. A
#: singleton can only be paired without nesting with a disjoint event, so the two disjoint
#: pairs are singleton pairs; neither is a complement pair. The other five pair each
#: three-bin event with a two-bin event containing its missing bin, and the last two two-bin
#: events with each other; every one overlaps in exactly one bin and neither contains the
#: other. Together the seven pairs cover the 14 events once each.
RELATION_POOR_PAIRS: tuple[tuple[str, str], ...] = (
    (_h1_id({1, 2, 3}), _h1_id({0, 2})),
    (_h1_id({0, 2, 3}), _h1_id({0, 1})),
    (_h1_id({0, 1, 3}), _h1_id({1, 2})),
    (_h1_id({0, 1, 2}), _h1_id({0, 3})),
    (_h1_id({1, 3}), _h1_id({2, 3})),
    (_h1_id({0}), _h1_id({2})),
    (_h1_id({1}), _h1_id({3})),
)


class GroupedArm(Arm):
    """Several next-day events per query, listed as Q01, Q02, ... in a seeded random order."""

    unit_kind: UnitKind = "stock-day"

    def __init__(self, name: str, description: str, groups: Sequence[Sequence[str]]) -> None:
        self.name = name
        self.description = description
        self.groups = tuple(tuple(g) for g in groups)
        ids = [i for g in self.groups for i in g]
        panel_ids = set(horizon_panel(1).ids)
        if sorted(ids) != sorted(panel_ids) or len(ids) != len(set(ids)):
            raise ValueError(f"arm {name!r}: groups must cover the 14 next-day events once")
        self.events_per_unit = len(ids)
        self.queries_per_unit = len(self.groups)

    def panel(self, unit: Unit) -> Panel:
        return horizon_panel(1)

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        sd = _stock_day(unit, self.name)
        panel = horizon_panel(1)
        out: list[Query] = []
        for q, group in enumerate(self.groups):
            order = prompts.grouped_order(
                len(group), seed, f"{self.name}|{sd.id}|{pass_index}|{q}"
            )
            events = tuple(group[i] for i in order)
            keys = prompts.grouped_keys(len(events))
            labels = [prompts.event_label(panel[e].clauses) for e in events]
            user = prompts.stock_user_message(
                sd, prompts.grouped_block(labels, keys), prompts.grouped_response(keys)
            )
            out.append(Query(events, keys, prompts.SYSTEM, user))
        return out

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        return [ScoringSet("h1", horizon_panel(1).ids)]

    def outcomes(self, unit: Unit) -> dict[str, bool] | None:
        return _realised(horizon_panel(1), _day_outcome(_stock_day(unit, self.name), 1))


# -- unresolved outcomes --------------------------------------------------------------------
class UnresolvedArm(Arm):
    """The 14 events about one session years ahead (Appendix B); no outcome to score."""

    unit_kind: UnitKind = "stock-day"

    def __init__(self, years: int) -> None:
        self.years = years
        self.name = f"unresolved/{years}"
        self.description = (
            f"next-day bins replaced by the first NYSE session after the {years}-year "
            "anniversary of the anchor date"
        )
        self.events_per_unit = len(horizon_panel(1))
        self.queries_per_unit = self.events_per_unit

    def panel(self, unit: Unit) -> Panel:
        return horizon_panel(1)

    def target_session(self, unit: Unit) -> dt.date:
        """The session the questions are about (reported, not shown to the model)."""
        return target_session(_stock_day(unit, self.name).date, self.years)

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        sd = _stock_day(unit, self.name)
        return [
            _single(e.id, prompts.unresolved_user_message(sd, self.years, e.clauses))
            for e in horizon_panel(1).events
        ]

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        return [ScoringSet("h1", horizon_panel(1).ids)]


# -- longer horizons ------------------------------------------------------------------------
class HorizonArm(Arm):
    """Every event of the horizon-h panel, each asked alone under an h-day preamble."""

    unit_kind: UnitKind = "stock-day"

    def __init__(self, h: int) -> None:
        self.h = h
        self.name = f"horizon/{h}"
        # Counted from the event list: building the panel's incidence (4^h atoms) here cost
        # every command that imports the catalogue about 0.1 s, horizon arm or not.
        events = len(horizon_events(h))
        self.description = f"the {events} events of the {h}-day panel"
        self.events_per_unit = events
        self.queries_per_unit = self.events_per_unit

    def panel(self, unit: Unit) -> Panel:
        return horizon_panel(self.h)

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        sd = _stock_day(unit, self.name)
        return [
            _single(
                e.id,
                prompts.stock_user_message(sd, prompts.event_question(e.clauses), horizon=self.h),
            )
            for e in horizon_panel(self.h).events
        ]

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        """Each day's 14 marginals (`d1`..), all marginals, and the full panel."""
        panel = horizon_panel(self.h)
        single = [e for e in panel.events if len(e.clauses) == 1]
        sets = [
            ScoringSet(f"d{d}", tuple(e.id for e in single if e.clauses[0].factor == f"d{d}"))
            for d in range(1, self.h + 1)
        ]
        sets.append(ScoringSet("marginals", tuple(e.id for e in single)))
        sets.append(ScoringSet("full", panel.ids))
        return sets

    def outcomes(self, unit: Unit) -> dict[str, bool] | None:
        sd = _stock_day(unit, self.name)
        return _realised(horizon_panel(self.h), _day_outcome(sd, self.h))


# -- two assets ----------------------------------------------------------------------------
def _pair_outcome(pair: DatePair) -> dict[str, int] | None:
    """Each asset's bin on "the same next trading day"; None when the two stocks' next rows
    are not one day (a table with a return missing from one of them, drawn as every earlier
    build drew it): their joint cells' outcome would be of two days, and its Brier wrong."""
    if pair.first.future_dates[:1] != pair.second.future_dates[:1]:
        return None
    return {"A": bin_of(pair.first.future_z[0]), "B": bin_of(pair.second.future_z[0])}


class TwoAssetArm(Arm):
    """14 marginals per asset and the 16 joint cells; units carry the A/B order."""

    unit_kind: UnitKind = "date-pair"
    name = "two-asset"
    description = "both stocks of a date: marginals for A and B and the 16 joint cells"

    def __init__(self) -> None:
        self.events_per_unit = len(two_asset_panel())
        self.queries_per_unit = self.events_per_unit

    def panel(self, unit: Unit) -> Panel:
        return two_asset_panel()

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        pair = _date_pair(unit, self.name)
        return [
            _single(e.id, prompts.two_asset_user_message(pair, prompts.event_question(e.clauses)))
            for e in two_asset_panel().events
        ]

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        panel = two_asset_panel()
        a = tuple(e.id for e in panel.events if len(e.clauses) == 1 and e.clauses[0].factor == "A")
        b = tuple(e.id for e in panel.events if len(e.clauses) == 1 and e.clauses[0].factor == "B")
        return [
            ScoringSet("A", a),
            ScoringSet("B", b),
            ScoringSet("marginals", a + b),
            ScoringSet("full", panel.ids),
        ]

    def outcomes(self, unit: Unit) -> dict[str, bool] | None:
        outcome = _pair_outcome(_date_pair(unit, self.name))
        return None if outcome is None else _realised(two_asset_panel(), outcome)


# -- linked and dispersed sets (Appendix D) --------------------------------------------------
def _style_sets(style: str) -> dict[str, tuple[str, ...]]:
    """The sets of `style` over assets, then over days: name -> event ids."""
    make = linked_sets if style == "linked" else dispersed_sets
    return {**make("assets"), **make("days")}


@cache
def _linked_panel(style: str) -> tuple[Panel, tuple[ScoringSet, ...]]:
    """One panel holding the two-asset and the two-day events the sets of `style` use.

    Its worlds are (A, B, d1, d2) with A == d1: Asset A's next-day bin *is* its day-1 bin.
    Two-asset events read A and B, two-day events d1 and d2, and their ids never collide,
    so each Appendix D set is a plain subset of this one panel.
    """
    sets = _style_sets(style)
    used = {i for ids in sets.values() for i in ids}
    events: list[Event] = [e for e in two_asset_panel().events if e.id in used]
    events += [e for e in horizon_panel(2).events if e.id in used]
    space = OutcomeSpace(
        {"A": range(4), "B": range(4), "d1": range(4), "d2": range(4)},
        [lambda o: o["A"] == o["d1"]],
    )
    panel = Panel.from_space(space, events)
    return panel, tuple(ScoringSet(name, ids) for name, ids in sets.items())


class LinkedArm(Arm):
    """Appendix D's linked or dispersed sets, each needed event asked alone.

    Units are date pairs in both role orders: the two-asset events are asked with the
    two-asset prompt, the two-day events about Asset A's stock with the 2-day prompt, so
    across the two orders every sampled stock-day gets its two-day sets once.
    """

    unit_kind: UnitKind = "date-pair"

    def __init__(self, style: Literal["linked", "dispersed"]) -> None:
        self.style = style
        self.name = style
        # Counted from the sets' ids (each event of the panel is one of them, once): the panel
        # itself is built when the arm is first asked or scored, not by importing the catalogue.
        sets = _style_sets(style)
        events = len({i for ids in sets.values() for i in ids})
        self.description = f"Appendix D {style} event sets ({len(sets)} sets of 8 events)"
        self.events_per_unit = events
        self.queries_per_unit = events

    def panel(self, unit: Unit) -> Panel:
        return _linked_panel(self.style)[0]

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        pair = _date_pair(unit, self.name)
        out = []
        for e in self.panel(unit).events:
            question = prompts.event_question(e.clauses)
            if e.clauses[0].factor.startswith("d"):
                user = prompts.stock_user_message(pair.first, question, horizon=2)
            else:
                user = prompts.two_asset_user_message(pair, question)
            out.append(_single(e.id, user))
        return out

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        return list(_linked_panel(self.style)[1])

    def outcomes(self, unit: Unit) -> dict[str, bool] | None:
        pair = _date_pair(unit, self.name)
        cells = _pair_outcome(pair)
        if cells is None:
            return None
        return _realised(self.panel(unit), {**cells, **_day_outcome(pair.first, 2)})


# -- question families ------------------------------------------------------------------------
#: The family arms' names; the isolated one's arbitrage-free rate is the family benchmark's
#: leaderboard score.
ISOLATED_FAMILIES = "families/isolated"
JOINT_FAMILIES = "families/joint"


class FamilyArm(Arm):
    """The family benchmark: statements one per query (isolated) or all in one (joint)."""

    unit_kind: UnitKind = "family"
    norm: Literal["inf", "l1"] = "l1"

    def __init__(self, joint: bool) -> None:
        self.joint = joint
        self.name = JOINT_FAMILIES if joint else ISOLATED_FAMILIES
        self.description = (
            "a whole family per query, labelled Q01.. in a seeded order"
            if joint
            else "one family statement per query"
        )

    def query_count(self, unit: Unit) -> int:
        family = _family(unit, self.name)
        return 1 if self.joint else len(family.statements)

    def panel(self, unit: Unit) -> Panel:
        panel: Panel = _family(unit, self.name).panel()
        return panel

    def queries(self, unit: Unit, pass_index: int, seed: int) -> list[Query]:
        family = _family(unit, self.name)
        statements = list(family.statements)
        if not self.joint:
            return [
                Query(
                    (s.id,), SINGLE_KEY, prompts.FAMILY_SYSTEM, prompts.family_user_message(s.text)
                )
                for s in statements
            ]
        order = prompts.grouped_order(
            len(statements), seed, f"{self.name}|{family.id}|{pass_index}|0"
        )
        chosen = [statements[i] for i in order]
        keys = prompts.grouped_keys(len(chosen))
        user = prompts.family_grouped_user_message([s.text for s in chosen], keys)
        return [Query(tuple(s.id for s in chosen), keys, prompts.FAMILY_SYSTEM, user)]

    def scoring_sets(self, unit: Unit) -> list[ScoringSet]:
        family = _family(unit, self.name)
        return [ScoringSet("family", tuple(s.id for s in family.statements))]

    def exact(self, unit: Unit) -> dict[str, float] | None:
        family = _family(unit, self.name)
        if not family.control:
            return None
        return dict(family.exact)


# -- the catalogue ------------------------------------------------------------------------------
def _catalogue() -> dict[str, Arm]:
    arms: list[Arm] = [
        SingleDayArm("baseline", "the 14 next-day events, one per query"),
        SingleDayArm("statistics", "baseline plus the bin frequencies", statistics=True),
        SingleDayArm("instructions", "baseline plus a forecasting procedure", instructions=True),
        SingleDayArm("identity", "baseline naming the company and ticker", identity=True),
        SingleDayArm(
            "headline", "identity plus the stock-day's pre-close headline", headline=True
        ),
        GroupedArm(
            "complement-pairs", "each event asked with its complement", _complement_pairs()
        ),
        GroupedArm(
            "relation-poor-pairs",
            "five overlapping and two disjoint non-nested pairs",
            RELATION_POOR_PAIRS,
        ),
        GroupedArm("full-panel", "all 14 next-day events in one query", [horizon_panel(1).ids]),
    ]
    arms += [
        SingleDayArm(f"red-herring/{kind}", f"baseline plus the note: {text}", red_herring=kind)
        for kind, text in prompts.RED_HERRINGS.items()
    ]
    arms += [UnresolvedArm(years) for years in (2, 5, 10)]
    arms.append(TwoAssetArm())
    arms += [HorizonArm(h) for h in (2, 3, 4)]
    arms += [LinkedArm("linked"), LinkedArm("dispersed")]
    arms += [FamilyArm(joint=False), FamilyArm(joint=True)]
    return {arm.name: arm for arm in arms}


ARMS: dict[str, Arm] = _catalogue()


def units_for(
    arm: Arm,
    stock_days: Sequence[StockDay] = (),
    families: Iterable[Family] | Mapping[str, Family] = (),
) -> list[Unit]:
    """The units an arm runs on, from a stock-day sample and loaded families.

    Date-pair arms use both role orders of each date's two stocks (paper, footnote 2).
    `families` may be `load_families()`'s dict or any iterable of families.
    """
    if arm.unit_kind == "stock-day":
        return list(stock_days)
    if arm.unit_kind == "date-pair":
        return list(sample_date_pairs(stock_days, both_orders=True))
    values = families.values() if isinstance(families, Mapping) else families
    return [FamilyUnit(f) for f in values]
