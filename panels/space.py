"""Finite outcome spaces: the worlds a panel of events is judged against.

Coherence is a statement about every possible world at once, so the worlds must be
enumerable. An `OutcomeSpace` is the product of a few finite factors (the return bin of
each day, the truth value of each proposition), optionally cut down by constraints that
rule some combinations out (for example "exactly one team wins"). Atoms and the incidence
matrix are then derived from it by `panels.algebra.Panel`, never typed by hand.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

#: One world: factor name -> value. Plain dicts, so predicates can use `outcome["d1"]`.
Outcome = Mapping[str, Any]
Predicate = Callable[[Outcome], bool]


class OutcomeSpace:
    """The product of finite factors, filtered by constraint predicates.

    Factors keep their declared order, and values their declared order within a factor, so
    enumeration (and therefore atom order downstream) is deterministic.
    """

    __slots__ = ("_constraints", "_factors")

    def __init__(
        self,
        factors: Mapping[str, Sequence[Hashable]],
        constraints: Sequence[Predicate] = (),
    ) -> None:
        if not factors:
            raise ValueError("an outcome space needs at least one factor")
        checked: dict[str, tuple[Hashable, ...]] = {}
        for name, values in factors.items():
            values = tuple(values)
            if not values:
                raise ValueError(f"factor {name!r} has no values")
            if len(set(values)) != len(values):
                raise ValueError(f"factor {name!r} repeats a value")
            checked[name] = values
        self._factors = checked
        self._constraints = tuple(constraints)

    @property
    def factors(self) -> Mapping[str, tuple[Hashable, ...]]:
        return dict(self._factors)

    @property
    def constraints(self) -> tuple[Predicate, ...]:
        return self._constraints

    def outcomes(self) -> Iterator[dict[str, Any]]:
        """Every world that satisfies all constraints, in product (odometer) order."""
        names = tuple(self._factors)
        for combo in itertools.product(*self._factors.values()):
            outcome = dict(zip(names, combo, strict=True))
            if all(constraint(outcome) for constraint in self._constraints):
                yield outcome

    def size(self) -> int:
        """The number of worlds left after the constraints (enumerates them)."""
        return sum(1 for _ in self.outcomes())

    def __repr__(self) -> str:
        shape = " x ".join(f"{name}[{len(v)}]" for name, v in self._factors.items())
        return f"OutcomeSpace({shape}, {len(self._constraints)} constraints)"
