"""The all-worlds-at-once path equals the one-world-at-a-time one, exactly.

`formula.truth_table` must give `formula.evaluate`'s value in every assignment, and
`Panel.from_truth_table` the very panel `Panel.from_space` derives (incidence, atom order,
each atom's worlds and positions), on random formulas and constraints over random spaces.
`dutchbook check` builds its panels the fast way; `from_space` is the definition.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panels.algebra import Panel, PanelTooLarge
from panels.events import Event
from panels.formula import Node, evaluate, parse, truth_table
from panels.space import OutcomeSpace
from runs.commands.check import read_input
from tests.panels.formula_trees import formula_trees


def formulas(names: list[str]) -> st.SearchStrategy[Node]:
    return formula_trees(names, most_args=4)


@st.composite
def spaces(draw: st.DrawFn) -> tuple[list[str], list[Node], list[Node]]:
    names = [f"v{i}" for i in range(draw(st.integers(1, 6)))]
    constraints = draw(st.lists(formulas(names), max_size=2))
    events = draw(st.lists(formulas(names), min_size=1, max_size=6))
    return names, constraints, events


@settings(max_examples=150, deadline=None)
@given(spaces())
def test_truth_table_is_evaluate_in_every_assignment(
    space: tuple[list[str], list[Node], list[Node]],
) -> None:
    names, constraints, events = space
    worlds = [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product((False, True), repeat=len(names))
    ]
    columns = {n: np.array([w[n] for w in worlds]) for n in names}
    for node in [*constraints, *events]:
        table = truth_table(node, columns)
        assert table.dtype == bool and table.shape == (len(worlds),)
        assert table.tolist() == [evaluate(node, w) for w in worlds]


@settings(max_examples=150, deadline=None)
@given(spaces())
def test_from_truth_table_is_from_space(space: tuple[list[str], list[Node], list[Node]]) -> None:
    names, constraints, nodes = space
    outcome_space = OutcomeSpace(
        {n: (False, True) for n in names},
        [partial(evaluate, c) for c in constraints],
    )
    events = [Event(f"e{i}", f"e{i}", partial(evaluate, n)) for i, n in enumerate(nodes)]
    worlds = list(outcome_space.outcomes())
    if not worlds:
        with pytest.raises(ValueError, match="empty"):
            Panel.from_space(outcome_space, events)
        with pytest.raises(ValueError, match="empty"):
            Panel.from_truth_table(events, np.zeros((len(events), 0), bool), worlds.__getitem__)
        return
    holds = np.array([[e.holds(w) for w in worlds] for e in events], dtype=bool)
    _assert_same_panel(
        Panel.from_truth_table(events, holds, worlds.__getitem__),
        Panel.from_space(outcome_space, events),
    )


def _assert_same_panel(fast: Panel, slow: Panel) -> None:
    assert fast.ids == slow.ids
    assert np.array_equal(fast.incidence, slow.incidence)
    assert fast.incidence.dtype == slow.incidence.dtype and not fast.incidence.flags.writeable
    assert [a.positions for a in fast.atoms] == [a.positions for a in slow.atoms]
    assert [list(a.outcomes) for a in fast.atoms] == [list(a.outcomes) for a in slow.atoms]
    assert fast.atoms == slow.atoms  # lazily rebuilt worlds compare equal to the kept ones
    assert [a.representative for a in fast.atoms] == [a.representative for a in slow.atoms]


def _atom_in(atoms: frozenset[int], world: Mapping[str, Any]) -> bool:
    return world["atom"] in atoms


def _slow_panel(names: list[str], constraints: list[str], events: Mapping[str, str]) -> Panel:
    from panels.formula import parse

    space = OutcomeSpace(
        {n: (False, True) for n in names}, [parse(c, names).evaluate for c in constraints]
    )
    return Panel.from_space(
        space, [Event(i, f, parse(f, names).evaluate) for i, f in events.items()]
    )


@pytest.mark.parametrize(
    ("names", "constraints", "events"),
    [
        (["a", "b"], [], {"A": "a", "B": "b", "AB": "a and b", "AoB": "a or b"}),
        (
            ["r", "s", "t", "u"],
            ["exactly_one(r, s, t)", "u -> not r"],
            {"1": "r or s", "2": "not t", "3": "u", "4": "s and u", "5": "exactly_one(s, u)"},
        ),
        (
            [f"x{i}" for i in range(9)],
            ["x0 or x8"],
            {f"e{i}": f"x{i} or x{i + 1}" for i in range(8)},
        ),
    ],
)
def test_check_reads_a_propositional_file_into_from_spaces_panel(
    tmp_path: Path, names: list[str], constraints: list[str], events: dict[str, str]
) -> None:
    lines = [f"variables = {names!r}".replace("'", '"')]
    lines.append(f"constraints = {constraints!r}".replace("'", '"'))
    for event_id, formula in events.items():
        lines += ["[[events]]", f'id = "{event_id}"', f'formula = "{formula}"', "p = 0.5"]
    path = tmp_path / "input.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = read_input(path).panel
    _assert_same_panel(fast, _slow_panel(names, constraints, events))


def test_check_reads_an_atoms_file_into_from_spaces_panel(tmp_path: Path) -> None:
    members = {"a": [0, 2, 5], "b": [2, 3], "c": [], "d": [5, 0]}
    lines = ["atoms = 7"]
    for event_id, atoms in members.items():
        lines += ["[[events]]", f'id = "{event_id}"', f"atoms = {atoms}", "p = 0.3"]
    path = tmp_path / "atoms.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(Exception, match="'c' holds in no atom"):
        read_input(path)
    del members["c"]
    lines = ["atoms = 7"]
    for event_id, atoms in members.items():
        lines += ["[[events]]", f'id = "{event_id}"', f"atoms = {atoms}", "p = 0.3"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = read_input(path).panel
    space = OutcomeSpace({"atom": tuple(range(7))})
    slow = Panel.from_space(
        space, [Event(i, i, partial(_atom_in, frozenset(m))) for i, m in members.items()]
    )
    _assert_same_panel(fast, slow)


def test_an_atoms_worlds_are_rebuilt_only_when_read() -> None:
    built: list[int] = []

    def world(position: int) -> dict[str, Any]:
        built.append(position)
        return {"w": position}

    holds = np.array([[True, False, True, False], [False, False, True, True]])
    panel = Panel.from_truth_table([Event("x", "x", bool), Event("y", "y", bool)], holds, world)
    assert built == []
    assert [a.positions for a in panel.atoms] == [(0,), (1,), (2,), (3,)]
    assert panel.atoms[2].outcomes[0] == {"w": 2} and built == [2]
    assert panel.atoms[1].outcomes[:] == ({"w": 1},)


def test_max_pairs_refuses_once_atoms_are_counted_and_before_they_are_built() -> None:
    built: list[int] = []

    def world(position: int) -> dict[str, Any]:
        built.append(position)
        return {"w": position}

    events = [Event("x", "x", bool), Event("y", "y", bool)]
    holds = np.array([[True, False, True, False], [False, False, True, True]])
    # Two events over four atoms: eight pairs pass a limit of eight, not one of seven.
    assert Panel.from_truth_table(events, holds, world, max_pairs=8).n_atoms == 4
    with pytest.raises(PanelTooLarge) as caught:
        Panel.from_truth_table(events, holds, world, max_pairs=7)
    assert (caught.value.n_events, caught.value.n_atoms) == (2, 4)
    assert str(caught.value) == "2 events over 4 atoms"
    # Worlds that share a signature are one atom: counted after merging, not before.
    repeated = np.repeat(holds, 1000, axis=1)
    assert Panel.from_truth_table(events, repeated, world, max_pairs=8).n_atoms == 4
    assert built == []


def test_a_parsed_formula_is_taken_as_its_tree() -> None:
    """docs/interfaces.md names `parse(text, variables) -> Formula`, then
    `truth_table(node, columns)`: given what `parse` gave, it raised AttributeError ('Formula'
    object has no attribute 'args'). A `Formula` is read by its `root`."""
    formula = parse("a and not b", ["a", "b"])
    columns = {"a": np.array([True, True, False, False]), "b": np.array([True, False, True, False])}
    expected = [False, True, False, False]
    assert truth_table(formula, columns).tolist() == expected
    assert truth_table(formula.root, columns).tolist() == expected
