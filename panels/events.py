"""Events: named predicates on outcomes, with an optional structured description.

The LP only needs to know in which worlds an event holds (`holds`). Prompts need more: how
to say the event in words. Stock events are conjunctions of simple conditions ("day 1 falls
in B0 or B1", "asset B does not fall in B3"), so they carry those conditions as `clauses`,
letting the prompt code render the paper's wording ("falls in" / "does not fall in", "both of
the following") without parsing ids or text.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Clause:
    """`factor`'s value is in `values` (or, when `negated`, is not in them)."""

    factor: str
    values: tuple[Hashable, ...]
    negated: bool = False

    def holds(self, outcome: Mapping[str, Any]) -> bool:
        return (outcome[self.factor] in self.values) != self.negated


@dataclass(frozen=True)
class Event:
    """An event asked about: a stable id, plain-language text, and its truth predicate.

    `clauses` (a conjunction) and `group` are optional descriptions for prompt rendering and
    reporting; `holds` alone decides membership. Equality and hashing use the id only,
    because the predicate is a function and ids are unique within a panel.
    """

    id: str
    text: str
    holds: Callable[[Mapping[str, Any]], bool] = field(compare=False, repr=False)
    clauses: tuple[Clause, ...] = field(default=(), compare=False, repr=False)
    group: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("an event needs a non-empty id")


def conjunction_event(id: str, text: str, clauses: tuple[Clause, ...], group: str = "") -> Event:
    """An event that holds exactly when every clause holds."""
    if not clauses:
        raise ValueError(f"event {id!r}: a conjunction needs at least one clause")

    def holds(outcome: Mapping[str, Any]) -> bool:
        return all(clause.holds(outcome) for clause in clauses)

    return Event(id=id, text=text, holds=holds, clauses=clauses, group=group)
