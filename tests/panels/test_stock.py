"""The paper's stock panels: sizes, nesting, ids that mean what they say, Appendix D sets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from panels.algebra import Panel
from panels.stock import (
    BINS,
    bin_of,
    dispersed_sets,
    horizon_panel,
    linked_sets,
    source_panel,
    two_asset_panel,
)

SIZES = {1: (14, 4), 2: (52, 16), 3: (122, 64), 4: (248, 256)}


def _meaning(event_id: str) -> dict[str, set[int]]:
    """Read an id independently of the code that wrote it: factor -> bins where it holds."""
    meaning = {}
    for part in event_id.split("&"):
        factor, bins = part.split(":")
        meaning[factor] = {int(b.removeprefix("B")) for b in bins.split("|")}
    return meaning


def _check_ids_against_predicates(panel: Panel) -> None:
    for j, atom in enumerate(panel.atoms):
        for world in atom.outcomes:
            for i, event_id in enumerate(panel.ids):
                expected = all(world[f] in bins for f, bins in _meaning(event_id).items())
                assert panel.incidence[i, j] == expected, (event_id, world)


@pytest.mark.parametrize("h", [1, 2, 3, 4])
def test_horizon_sizes_and_atoms(h: int) -> None:
    panel = horizon_panel(h)
    assert (len(panel), panel.n_atoms) == SIZES[h]
    assert panel.n_atoms == 4**h
    assert len(set(panel.ids)) == len(panel)
    assert all(len(atom.outcomes) == 1 for atom in panel.atoms)  # every outcome distinguished


@pytest.mark.parametrize("h", [1, 2, 3])
def test_ids_mean_what_the_predicates_compute(h: int) -> None:
    _check_ids_against_predicates(horizon_panel(h))


def test_horizon_4_ids_on_a_sample_of_worlds() -> None:
    panel = horizon_panel(4)
    for j in range(0, panel.n_atoms, 17):  # 16 of the 256 worlds keep the test fast
        world = panel.atoms[j].representative
        for i, event_id in enumerate(panel.ids):
            expected = all(world[f] in b for f, b in _meaning(event_id).items())
            assert panel.incidence[i, j] == expected


def test_two_asset_panel() -> None:
    panel = two_asset_panel()
    assert (len(panel), panel.n_atoms) == (44, 16)
    assert sum(1 for i in panel.ids if i.startswith("A:") and "&" not in i) == 14
    assert sum(1 for i in panel.ids if i.startswith("B:")) == 14
    cells = [i for i in panel.ids if "&" in i]
    assert len(cells) == 16
    # the joint cells are the atoms: each cell holds in exactly one atom, all distinct
    rows = panel.incidence[[panel.index(c) for c in cells]]
    np.testing.assert_array_equal(np.sort(rows.sum(axis=0)), np.ones(16))
    _check_ids_against_predicates(panel)


def test_horizon_one_is_every_nontrivial_union_once() -> None:
    panel = horizon_panel(1)
    unions = {frozenset(np.flatnonzero(row)) for row in panel.incidence}
    expected = {frozenset(s) for r in (1, 2, 3) for s in itertools.combinations(range(4), r)}
    assert unions == expected


def test_figure_1_numbering() -> None:
    """The paper's Figure 1 calls -1<=z<0 event 4, -1<=z<1 event 5 and 0<=z<1 event 7."""
    ids = horizon_panel(1).ids
    assert (ids[3], ids[4], ids[6]) == ("d1:B1", "d1:B1|B2", "d1:B2")


@pytest.mark.parametrize("h", [1, 2, 3])
def test_panels_are_nested_with_the_same_ids_and_meaning(h: int) -> None:
    small, big = horizon_panel(h), horizon_panel(h + 1)
    assert big.ids[: len(small)] == small.ids
    np.testing.assert_array_equal(big.subset(small.ids).incidence, small.incidence)


def test_pair_coarsenings_partition_the_worlds() -> None:
    panel = horizon_panel(3)
    groups: dict[str, list[int]] = {}
    for i, event in enumerate(panel.events):
        groups.setdefault(event.group, []).append(i)
    def days(group: str) -> int:
        return group.split(":")[0].count("d")

    pair_groups = [g for g in groups if ":" in g and days(g) == 2]
    assert len(pair_groups) == 3 * 6  # 3 pairs of days x 6 coarsenings
    pattern_groups = [g for g in groups if days(g) == 3]
    assert pattern_groups == ["d1d2d3:up/down"]
    for group in pair_groups + pattern_groups:
        rows = panel.incidence[groups[group]]
        assert len(rows) in (4, 8)
        np.testing.assert_array_equal(rows.sum(axis=0), np.ones(panel.n_atoms))
    four = horizon_panel(4)
    cells = [i for i, e in enumerate(four.events) if e.group == "d1d2d3d4:up/down"]
    assert len(cells) == 16
    np.testing.assert_array_equal(four.incidence[cells].sum(axis=0), np.ones(256))


def test_wording_and_clauses() -> None:
    panel = horizon_panel(2)
    assert panel["d1:B0"].text == "On future trading day 1, z falls in B0 (below -1)."
    complement = panel["d1:B0|B1|B2"]
    assert "does not fall in B3 (at least 1)" in complement.text
    assert complement.clauses[0].negated and complement.clauses[0].values == (3,)
    both = panel["d1:B0|B1&d2:B2|B3"]
    assert both.text.startswith("Both of the following:")
    assert both.group == "d1d2:up/down" and [c.factor for c in both.clauses] == ["d1", "d2"]
    assert horizon_panel(3)["d1:B0|B1&d2:B0|B1&d3:B2|B3"].text.startswith("All of the following")
    assert two_asset_panel()["A:B0&B:B3"].text.startswith(
        "Both of the following on the same next trading day"
    )
    texts = [e.text for e in horizon_panel(4).events]
    assert len(set(texts)) == len(texts)


def test_bins() -> None:
    assert [b.name for b in BINS] == ["B0", "B1", "B2", "B3"]
    assert BINS[0].paper_line == "B0 – below −1 (z<−1)"
    assert BINS[3].paper_line == "B3 – at least 1 (z≥1)"
    assert [bin_of(z) for z in (-1.5, -1.0, -0.1, 0.0, 0.99, 1.0, 7.0)] == [0, 1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError):
        bin_of(math.nan)
    with pytest.raises(ValueError):
        horizon_panel(5)


def _decomposed_marginals(panel: Panel, ids: tuple[str, ...]) -> int:
    """How many of the set's four marginals are exactly the sum of joint events in the set."""
    marginals, joints = ids[:4], ids[4:]
    count = 0
    for marginal in marginals:
        row = panel.incidence[panel.index(marginal)].astype(int)
        inside = [panel.incidence[panel.index(j)] for j in joints]
        inside = [r.astype(int) for r in inside if (r <= row).all()]
        if inside and (sum(inside) == row).all():
            count += 1
    return count


@pytest.mark.parametrize(("kind", "n_linked", "n_dispersed"), [("assets", 8, 8), ("days", 96, 32)])
def test_linked_and_dispersed_sets(kind: str, n_linked: int, n_dispersed: int) -> None:
    panel = source_panel(kind)  # type: ignore[arg-type]
    linked, dispersed = linked_sets(kind), dispersed_sets(kind)  # type: ignore[arg-type]
    assert (len(linked), len(dispersed)) == (n_linked, n_dispersed)
    for sets, decomposed in ((linked, 1), (dispersed, 0)):
        assert len({frozenset(ids) for ids in sets.values()}) == len(sets)
        for name, ids in sets.items():
            assert len(ids) == len(set(ids)) == 8, name
            assert all(i in panel for i in ids)
            assert all("&" not in i for i in ids[:4]) and all("&" in i for i in ids[4:])
            assert _decomposed_marginals(panel, ids) == decomposed, name
            # every joint event refines one of the set's marginals
            for joint in ids[4:]:
                row = panel.incidence[panel.index(joint)]
                assert any((row <= panel.incidence[panel.index(m)]).all() for m in ids[:4])
    with pytest.raises(ValueError):
        linked_sets("weeks")  # type: ignore[arg-type]
