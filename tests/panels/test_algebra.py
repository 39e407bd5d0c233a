"""Atoms and incidence are derived from predicates: check them against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from panels.algebra import Panel
from panels.events import Clause, Event, conjunction_event
from panels.space import OutcomeSpace


def _membership_event(event_id: str, members: frozenset[tuple[int, ...]]) -> Event:
    return Event(event_id, event_id, lambda o: (o["x"], o["y"]) in members)


@st.composite
def spaces_and_events(draw: st.DrawFn) -> tuple[OutcomeSpace, list[Event]]:
    nx = draw(st.integers(1, 4))
    ny = draw(st.integers(1, 3))
    worlds = list(itertools.product(range(nx), range(ny)))
    banned = draw(st.sets(st.sampled_from(worlds), max_size=len(worlds) - 1))
    space = OutcomeSpace(
        {"x": range(nx), "y": range(ny)}, [lambda o: (o["x"], o["y"]) not in banned]
    )
    n = draw(st.integers(0, 6))
    events = [
        _membership_event(f"e{i}", frozenset(draw(st.sets(st.sampled_from(worlds)))))
        for i in range(n)
    ]
    return space, events


@given(spaces_and_events())
def test_atoms_are_the_distinct_signatures_of_the_worlds(
    case: tuple[OutcomeSpace, list[Event]],
) -> None:
    space, events = case
    panel = Panel.from_space(space, events)
    worlds = list(space.outcomes())
    signatures = {tuple(int(e.holds(w)) for e in events) for w in worlds}
    assert panel.n_atoms == len(signatures)
    assert panel.incidence.shape == (len(events), len(signatures))
    assert panel.incidence.dtype == np.uint8
    columns = {tuple(int(v) for v in panel.incidence[:, j]) for j in range(panel.n_atoms)}
    assert columns == signatures
    # every world sits in exactly the atom whose column is its signature
    assert sum(len(atom.outcomes) for atom in panel.atoms) == len(worlds)
    for j, atom in enumerate(panel.atoms):
        for world in atom.outcomes:
            assert tuple(panel.signature(world)) == tuple(panel.incidence[:, j])
            assert panel.atom_of(world) == j


@given(spaces_and_events(), st.randoms(use_true_random=False))
def test_subset_equals_deriving_from_the_space_again(
    case: tuple[OutcomeSpace, list[Event]], rng: object
) -> None:
    space, events = case
    panel = Panel.from_space(space, events)
    chosen = [e.id for e in events]
    rng.shuffle(chosen)  # type: ignore[attr-defined]
    chosen = chosen[: len(chosen) // 2 + 1] if chosen else []
    sub = panel.subset(chosen)
    direct = Panel.from_space(space, [panel[i] for i in chosen])
    assert sub.ids == tuple(chosen)
    np.testing.assert_array_equal(sub.incidence, direct.incidence)
    assert [a.outcomes for a in sub.atoms] == [a.outcomes for a in direct.atoms]


def test_worlds_in_no_event_form_the_all_zero_atom() -> None:
    space = OutcomeSpace({"bin": (0, 1, 2, 3)})
    panel = Panel.from_space(space, [_bin_event("low", (0,)), _bin_event("mid", (1, 2))])
    assert panel.n_atoms == 3
    zero = [j for j in range(3) if not panel.incidence[:, j].any()]
    assert len(zero) == 1
    assert [w["bin"] for w in panel.atoms[zero[0]].outcomes] == [3]


def _bin_event(event_id: str, bins: tuple[int, ...]) -> Event:
    return conjunction_event(event_id, event_id, (Clause("bin", bins),))


def test_atom_order_follows_the_space_and_is_repeatable() -> None:
    space = OutcomeSpace({"bin": (0, 1, 2, 3)})
    events = [_bin_event("b3", (3,)), _bin_event("b01", (0, 1))]
    first = Panel.from_space(space, events)
    second = Panel.from_space(space, events)
    np.testing.assert_array_equal(first.incidence, second.incidence)
    assert [a.representative["bin"] for a in first.atoms] == [0, 2, 3]
    np.testing.assert_array_equal(first.incidence, [[0, 0, 1], [1, 0, 0]])


def test_constraints_cut_the_space_and_an_empty_space_is_an_error() -> None:
    space = OutcomeSpace({"a": (False, True), "b": (False, True)}, [lambda o: o["a"] or o["b"]])
    assert space.size() == 3
    none = OutcomeSpace({"a": (False, True)}, [lambda o: False])
    with pytest.raises(ValueError, match="empty"):
        Panel.from_space(none, [Event("e", "e", lambda o: True)])


def test_lookup_by_id_and_errors() -> None:
    space = OutcomeSpace({"bin": (0, 1)})
    panel = Panel.from_space(space, [_bin_event("zero", (0,)), _bin_event("one", (1,))])
    assert panel.ids == ("zero", "one")
    assert panel["one"].id == "one" and panel.index("one") == 1 and "zero" in panel
    with pytest.raises(KeyError, match="nope"):
        panel["nope"]
    with pytest.raises(KeyError):
        panel.subset(["zero", "nope"])
    with pytest.raises(ValueError, match="duplicate"):
        panel.subset(["zero", "zero"])
    with pytest.raises(ValueError, match="duplicate"):
        Panel.from_space(space, [_bin_event("zero", (0,)), _bin_event("zero", (1,))])
    with pytest.raises(ValueError):
        panel.incidence[0, 0] = 1  # shared panels are read-only
