"""The arm catalogue: names, queries, scoring sets, realised outcomes."""

from __future__ import annotations

import dataclasses
import datetime as dt
from functools import cache

import numpy as np
import pytest

from panels.arms import ARMS, RELATION_POOR_PAIRS, Arm, units_for
from panels.data import load_returns, sample_stock_days
from panels.families import load_families
from panels.stock import bin_of, dispersed_sets, linked_sets, source_panel
from panels.units import DatePair, FamilyUnit, StockDay, Unit

EXPECTED = [
    "baseline", "statistics", "instructions", "identity", "headline",
    "complement-pairs", "relation-poor-pairs", "full-panel",
    "red-herring/coffee", "red-herring/stake", "red-herring/anxiety", "red-herring/gambling",
    "red-herring/optimism", "red-herring/battery", "red-herring/gut",
    "unresolved/2", "unresolved/5", "unresolved/10",
    "two-asset", "horizon/2", "horizon/3", "horizon/4", "linked", "dispersed",
    "families/isolated", "families/joint",
]  # fmt: skip


@cache
def days() -> tuple[StockDay, ...]:
    return tuple(
        dataclasses.replace(sd, headline=f"News about {sd.asset}")
        for sd in sample_stock_days(load_returns(), 6, seed=4)
    )


@cache
def families() -> tuple[FamilyUnit, ...]:
    return tuple(FamilyUnit(f) for f in load_families().values())


def some_units(arm: Arm) -> list[Unit]:
    return units_for(arm, days(), [u.family for u in families()])[:4]


def test_catalogue_names() -> None:
    assert sorted(ARMS) == sorted(EXPECTED)
    assert all(name == arm.name for name, arm in ARMS.items())


def test_requirements() -> None:
    assert ARMS["headline"].requires == {"headlines", "names"}
    assert ARMS["identity"].requires == {"names"}
    assert ARMS["baseline"].requires == frozenset()


@pytest.mark.parametrize("name", EXPECTED)
def test_queries_cover_the_scoring_sets(name: str) -> None:
    arm = ARMS[name]
    for unit in some_units(arm):
        queries = arm.queries(unit, 0, 3)
        assert queries == arm.queries(unit, 0, 3)  # pure
        assert len(queries) == arm.query_count(unit)
        if arm.queries_per_unit is not None:
            assert arm.queries_per_unit == len(queries)
        asked = [e for q in queries for e in q.events]
        assert len(asked) == len(set(asked)), "an event asked twice in one pass"
        panel = arm.panel(unit)
        assert set(asked) == set(panel.ids)
        if arm.events_per_unit is not None:
            assert arm.events_per_unit == len(asked)
        for q in queries:
            assert len(q.keys) == len(q.events)
            if len(q.events) == 1 and name != "families/joint":
                assert q.keys == ("probability",)
        sets = arm.scoring_sets(unit)
        assert sets and len({s.name for s in sets}) == len(sets)
        for s in sets:
            assert set(s.event_ids) <= set(asked)
            panel.subset(s.event_ids)  # every set is a valid sub-panel


def _holds(event_id: str, bins: dict[str, int]) -> bool:
    """Truth of a stock event read from its id (e.g. `d1:B0|B1&d2:B3`), independently."""
    for clause in event_id.split("&"):
        factor, members = clause.split(":")
        if bins[factor] not in {int(b[1:]) for b in members.split("|")}:
            return False
    return True


@pytest.mark.parametrize(
    "name", ["baseline", "full-panel", "horizon/2", "horizon/4", "two-asset", "linked", "dispersed"]
)
def test_outcomes_follow_the_future_returns(name: str) -> None:
    arm = ARMS[name]
    for unit in some_units(arm):
        outcomes = arm.outcomes(unit)
        assert outcomes is not None
        if isinstance(unit, StockDay):
            bins = {f"d{d}": bin_of(unit.future_z[d - 1]) for d in range(1, 5)}
        else:
            assert isinstance(unit, DatePair)
            bins = {
                "A": bin_of(unit.first.future_z[0]),
                "B": bin_of(unit.second.future_z[0]),
                "d1": bin_of(unit.first.future_z[0]),
                "d2": bin_of(unit.first.future_z[1]),
            }
        panel = arm.panel(unit)
        assert set(outcomes) == set(panel.ids)
        for event_id, value in outcomes.items():
            assert value == _holds(event_id, bins), event_id
        # What happened is one of the panel's atoms (a vertex of the coherent set).
        realised = np.array([outcomes[i] for i in panel.ids], dtype=np.uint8)
        assert (panel.incidence == realised[:, None]).all(axis=0).any()


def test_outcomes_absent_where_unknown() -> None:
    sd = days()[0]
    for years in (2, 5, 10):
        assert ARMS[f"unresolved/{years}"].outcomes(sd) is None
    for unit in families():
        assert ARMS["families/isolated"].outcomes(unit) is None


def test_unresolved_target_session() -> None:
    sd = dataclasses.replace(days()[0], date=dt.date(2018, 6, 7))
    arm = ARMS["unresolved/2"]
    assert arm.target_session(sd) == dt.date(2020, 6, 8)  # type: ignore[attr-defined]


def _bins(event_id: str) -> set[int]:
    return {int(b[1:]) for b in event_id.split(":")[1].split("|")}


def test_relation_poor_pairs_match_the_paper() -> None:
    kinds = []
    for a, b in RELATION_POOR_PAIRS:
        x, y = _bins(a), _bins(b)
        assert not (x <= y or y <= x), "nested"
        assert x | y != {0, 1, 2, 3} or x & y, "complements"
        kinds.append("disjoint" if not x & y else "overlap")
    assert kinds.count("overlap") == 5 and kinds.count("disjoint") == 2
    covered = [e for pair in RELATION_POOR_PAIRS for e in pair]
    assert sorted(covered) == sorted(ARMS["baseline"].panel(days()[0]).ids)


def test_complement_pairs_are_complements() -> None:
    for q in ARMS["complement-pairs"].queries(days()[0], 0, 1):
        a, b = q.events
        assert _bins(a) | _bins(b) == {0, 1, 2, 3} and not _bins(a) & _bins(b)


def test_two_asset_units_and_sets() -> None:
    arm = ARMS["two-asset"]
    units = units_for(arm, days())
    assert len(units) == len(days())  # both orders of each date
    assert isinstance(units[0], DatePair) and isinstance(units[1], DatePair)
    assert units[0].id != units[1].id and units[0].cluster == units[1].cluster
    sets = {s.name: s.event_ids for s in arm.scoring_sets(units[0])}
    assert [len(sets[k]) for k in ("A", "B", "marginals", "full")] == [14, 14, 28, 44]


def test_horizon_sets() -> None:
    sets = {s.name: s.event_ids for s in ARMS["horizon/3"].scoring_sets(days()[0])}
    assert [len(sets[f"d{d}"]) for d in (1, 2, 3)] == [14, 14, 14]
    assert len(sets["marginals"]) == 42 and len(sets["full"]) == 122


def _columns(panel_incidence: np.ndarray) -> set[bytes]:
    return {panel_incidence[:, j].tobytes() for j in range(panel_incidence.shape[1])}


@pytest.mark.parametrize("style", ["linked", "dispersed"])
def test_linked_sets_keep_the_logic_of_their_source_panels(style: str) -> None:
    arm = ARMS[style]
    unit = units_for(arm, days())[0]
    sets = {s.name: s.event_ids for s in arm.scoring_sets(unit)}
    make = linked_sets if style == "linked" else dispersed_sets
    expected = {**make("assets"), **make("days")}
    assert sets == expected
    panel = arm.panel(unit)
    for name, ids in sets.items():
        assert len(ids) == 8
        kind = "assets" if ids[0].startswith(("A", "B")) else "days"
        ours = panel.subset(ids).incidence
        theirs = source_panel(kind).subset(ids).incidence  # type: ignore[arg-type]
        assert _columns(ours) == _columns(theirs), name


def test_linked_prompts_by_event_kind() -> None:
    arm = ARMS["linked"]
    unit = units_for(arm, days())[0]
    assert isinstance(unit, DatePair)
    for q in arm.queries(unit, 0, 1):
        if q.events[0].startswith("d"):
            assert "next 2 trading days" in q.user
            assert f"{unit.first.scale:.8f}" in q.user
            assert "Asset A" not in q.user
        else:
            assert "Asset A z_A" in q.user


def test_family_arms() -> None:
    iso, joint = ARMS["families/isolated"], ARMS["families/joint"]
    total = sum(iso.query_count(u) for u in families())
    assert 140 <= total <= 180  # "about 160 calls per model"
    for unit in families():
        fam = unit.family
        single = iso.queries(unit, 0, 5)
        assert [q.events[0] for q in single] == list(fam.ids)
        assert all(s.text in q.user for s, q in zip(fam.statements, single, strict=True))
        (grouped,) = joint.queries(unit, 0, 5)
        assert sorted(grouped.events) == sorted(fam.ids)
        assert grouped.keys == tuple(f"Q{i:02d}" for i in range(1, len(fam.ids) + 1))
        text = {s.id: s.text for s in fam.statements}
        for key, event in zip(grouped.keys, grouped.events, strict=True):
            assert f"{key}: {text[event]}" in grouped.user
        exact = iso.exact(unit)
        assert (exact is not None) == fam.control
        if exact is not None:
            assert set(exact) == set(fam.ids)
        assert [s.name for s in iso.scoring_sets(unit)] == ["family"]
        # A bare Family is its own unit (the runner may pass load_families() values).
        assert iso.queries(fam, 0, 5) == single
        assert joint.queries(fam, 0, 5) == [grouped]
        assert iso.panel(fam) is fam.panel()
    orders = {joint.queries(families()[-1], p, 5)[0].events for p in range(5)}
    assert len(orders) > 1
    assert len(units_for(joint, families=load_families())) == 37


def test_wrong_unit_kind_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="date-pair"):
        ARMS["two-asset"].queries(days()[0], 0, 1)
    with pytest.raises(TypeError, match="stock-day"):
        ARMS["baseline"].queries(families()[0], 0, 1)


def test_importing_the_catalogue_builds_no_large_panel() -> None:
    """Every command loads the catalogue (issue 12): horizon, linked and dispersed arms count
    their events without building their panels (248 events over 256 atoms at horizon 4),
    which are built when the arm is first asked or scored."""
    import json
    import subprocess
    import sys

    code = (
        "import json\n"
        "import panels.algebra as alg\n"
        "built = []\n"
        "orig = alg.Panel.from_space.__func__\n"
        "def spy(cls, space, events):\n"
        "    events = tuple(events); built.append(len(events)); return orig(cls, space, events)\n"
        "alg.Panel.from_space = classmethod(spy)\n"
        "from panels.arms import ARMS\n"
        "print(json.dumps(sorted(built)))\n"
        "for name in ('horizon/4', 'linked', 'dispersed'):\n"
        "    ARMS[name].panel(None)\n"
        "print(json.dumps(sorted(built)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    at_import, after = (json.loads(line) for line in out.stdout.split("\n")[:2])
    assert max(at_import) <= 44  # the one-day panel and the two-asset panel
    assert 248 in after and after.count(44) >= 2  # built on first use: horizon 4, linked sets
