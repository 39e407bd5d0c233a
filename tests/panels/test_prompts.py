"""Prompt wording against the paper itself.

The quotes are read out of Appendix B of the paper's text file, not copied from our module,
so a drifting constant fails here. The paper's LaTeX maths ($-1$, $z\\geq 1$, $z_{A}$) is
turned into the characters a prompt carries (−1, z≥1, z_A); whitespace is compared loosely
because the extracted text runs a question and its bullet line together.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panels import prompts
from panels.arms import ARMS, Arm, Query
from panels.data import load_returns, sample_date_pairs, sample_stock_days
from panels.stock import bin_of, horizon_panel
from panels.units import DatePair, StockDay

# The paper sits in the `shared/` folder beside the repository (so in CI too).
PAPER = Path(__file__).resolve().parents[3] / "shared" / "reference" / "dutch-books-paper.txt"


def _math(segment: str) -> str:
    text = segment.strip().replace("\\geq", "≥").replace("-", "−")
    text = re.sub(r"_\{(\w+)\}", r"_\1", text)
    return text.replace(" ", "")


def _delatex(quote: str) -> str:
    text = re.sub(r"\$([^$]*)\$", lambda m: _math(m.group(1)), quote)
    text = text.replace("( ", "(").replace(" )", ")")
    return _squash(text)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@cache
def appendix_b_quotes() -> tuple[str, ...]:
    """Every “...” quote of Appendix B, in order (empty when the paper is not on disk)."""
    if not PAPER.exists():
        return ()
    text = PAPER.read_text()
    section = text[text.index("Appendix B Prompts") : text.index("Appendix C Elicitation")]
    return tuple(_delatex(q) for q in re.findall(r"“(.*?)”", section, flags=re.S))


@cache
def sample() -> tuple[StockDay, ...]:
    return tuple(sample_stock_days(load_returns(), 4, seed=21))


def unit_with_headline() -> StockDay:
    return dataclasses.replace(sample()[0], headline="Company beats quarterly estimates")


def pair() -> DatePair:
    return sample_date_pairs(sample())[0]


def rendered(arm: Arm, unit: object) -> list[Query]:
    return arm.queries(unit, 0, 7)  # type: ignore[arg-type]


def corpus(arm_name: str) -> str:
    arm = ARMS[arm_name]
    unit: object
    if arm.unit_kind == "date-pair":
        unit = pair()
    elif arm_name == "headline":
        unit = unit_with_headline()
    else:
        unit = sample()[0]
    return "\n\n".join(_squash(q.user) for q in rendered(arm, unit))


RED = {
    "coffee": "coffee",
    "savings": "stake",
    "scared": "anxiety",
    "gambling": "gambling",
    "optimistic": "optimism",
    "battery": "battery",
    "gut": "gut",
}
STOCK_ARMS = ("baseline", "statistics", "instructions", "identity", "headline")


def arms_for(quote: str) -> list[str]:
    """Which arms' prompts must contain a quote of Appendix B."""
    for word, suffix in RED.items():
        if word in quote:
            return [f"red-herring/{suffix}"]
    rules = [
        ("{s}", ["unresolved/2", "unresolved/5", "unresolved/10"]),
        ("Additional note", [f"red-herring/{s}" for s in RED.values()]),
        ("Observed frequencies", ["statistics"]),
        ("forecasting procedure", ["instructions"]),
        ("headline was published", ["headline"]),
        ("labeled forecast events", ["complement-pairs", "relation-poor-pairs", "full-panel"]),
        ("same next trading day", ["two-asset"]),
        ("Asset A", ["two-asset"]),
        ("all of the following", ["horizon/3", "horizon/4"]),
        ("both of the following", ["horizon/2"]),
    ]
    for needle, names in rules:
        if needle in quote:
            return names
    return list(STOCK_ARMS)


def test_the_paper_yields_the_expected_quotes() -> None:
    if not PAPER.exists():
        pytest.skip("the paper's text is not available on this machine")
    quotes = appendix_b_quotes()
    assert len(quotes) >= 20
    assert any(q.startswith("B0 – below −1 (z<−1)") for q in quotes)
    assert "B3 – at least 1 (z≥1)" in quotes


@pytest.mark.parametrize("quote", appendix_b_quotes(), ids=lambda q: q[:40])
def test_every_appendix_b_quote_is_in_its_arms_prompts(quote: str) -> None:
    if quote.startswith("You are a probabilistic forecaster"):
        for name, arm in ARMS.items():
            unit = pair() if arm.unit_kind == "date-pair" else sample()[0]
            if arm.unit_kind == "family" or name == "headline":
                continue
            assert rendered(arm, unit)[0].system == quote
        return
    for name in arms_for(quote):
        text = corpus(name)
        expected = quote
        if "{s}" in quote:
            unit = sample()[0]
            years = name.split("/")[1]
            # {requested_range} is one event's bins; every range we render must fit.
            head, tail = quote.split("{requested_range}")
            head = head.replace("{s}", years).replace("{date}", unit.date.isoformat())
            assert text.count(head) == 14, name
            assert tail in text
            continue
        if "{date}" in quote:
            expected = quote.replace("{date}", sample()[0].date.isoformat())
        assert expected in text, (name, expected)


def test_event_question_and_complement_wording() -> None:
    q = {x.events[0]: _squash(x.user) for x in rendered(ARMS["baseline"], sample()[0])}
    assert (
        "What probability would you assign to the following occurring? – On future trading "
        "day 1, z falls in B0 (below −1)." in q["d1:B0"]
    )
    assert "z does not fall in B0 (below −1)." in q["d1:B1|B2|B3"]
    assert "does not fall" not in q["d1:B0|B1"]


def test_cross_day_conjunctions_one_line_per_day() -> None:
    h3 = {x.events[0]: x.user for x in rendered(ARMS["horizon/3"], sample()[0])}
    two = h3["d1:B0|B1&d2:B2|B3"]
    assert "What probability would you assign to both of the following occurring?\n" in two
    assert "\n– On future trading day 1, z falls in B0 (below −1) or B1" in two
    assert "\n– On future trading day 2, z falls in B2 (between 0 and 1) or B3" in two
    three = h3["d1:B0|B1&d2:B0|B1&d3:B2|B3"]
    assert "What probability would you assign to all of the following occurring?\n" in three
    assert three.count("\n– On future trading day") == 3


def test_message_order_and_numbers() -> None:
    sd = sample()[0]
    query = rendered(ARMS["red-herring/coffee"], sd)[0]
    lines = query.user.split("\n")
    assert lines[0] == f"You are making this forecast immediately after market close on {sd.date}."
    assert f"which is {sd.scale:.8f}." in lines[1]
    assert re.search(r"which is \d\.\d{8}\.$", lines[1])
    history = [ln for ln in lines if re.match(r"\d{4}-\d\d-\d\d: ", ln)]
    assert [ln[:10] for ln in history] == [d.isoformat() for d in sd.history_dates]
    assert len(history) == 60
    shown = [float(ln.split(": ")[1].replace("−", "-")) for ln in history]
    assert shown == pytest.approx(list(sd.history_z), abs=5e-5)
    order = [
        lines.index(history[-1]),
        lines.index("B3 – at least 1 (z≥1)"),
        lines.index(prompts.RED_HERRING_LEAD),
        lines.index(prompts.QUESTION_LEAD),
        lines.index(prompts.RESPONSE_SINGLE),
    ]
    assert order == sorted(order)
    assert lines[-1] == prompts.RESPONSE_SINGLE


def test_statistics_counts_match_the_history() -> None:
    sd = sample()[1]
    text = rendered(ARMS["statistics"], sd)[0].user
    counts = [0, 0, 0, 0]
    for z in sd.history_z:
        counts[bin_of(z)] += 1
    for i, c in enumerate(counts):
        assert f"B{i}: {c} of 60 ({100 * c / 60:.1f}%)" in text
    assert sum(counts) == 60


def test_identity_and_headline() -> None:
    sd = unit_with_headline()
    text = rendered(ARMS["headline"], sd)[0].user
    assert f"{sd.name} (ticker: {sd.ticker})" in text
    assert prompts.HEADLINE_LEAD + "\nCompany beats quarterly estimates" in text
    assert sd.name is not None and sd.name not in rendered(ARMS["baseline"], sd)[0].user
    with pytest.raises(ValueError, match="headlines file"):
        rendered(ARMS["headline"], sample()[0])


def test_two_asset_table_and_misaligned_dates() -> None:
    p = pair()
    text = rendered(ARMS["two-asset"], p)[0].user
    assert "Date | Asset A z_A | Asset B z_B" in text
    assert f"Asset A: {p.first.scale:.8f}" in text and f"Asset B: {p.second.scale:.8f}" in text
    assert p.first.asset not in text and (p.first.name or "?") not in text
    rows = [ln for ln in text.split("\n") if re.match(r"\d{4}-\d\d-\d\d \| ", ln)]
    assert len(rows) == 60
    shifted = dataclasses.replace(
        p.second, history_dates=(dt.date(1999, 1, 4), *p.second.history_dates[1:])
    )
    with pytest.raises(ValueError, match="aligned"):
        rendered(ARMS["two-asset"], DatePair(p.first, shifted))


def _label_bins(label: str) -> set[int]:
    """Bins where a rendered one-day label holds, read back from its words."""
    named = {int(b) for b in re.findall(r"B(\d)", label)}
    return set(range(4)) - named if "does not fall" in label else named


def _id_bins(event_id: str) -> set[int]:
    return {int(b[1:]) for b in event_id.split(":")[1].split("|")}


@pytest.mark.parametrize("arm", ["full-panel", "complement-pairs", "relation-poor-pairs"])
def test_grouped_keys_map_back_to_their_events(arm: str) -> None:
    for query in rendered(ARMS[arm], sample()[0]):
        lines = query.user.split("\n")
        listed = {ln[:3]: ln[5:] for ln in lines if re.match(r"Q\d\d: ", ln)}
        assert tuple(listed) == query.keys
        for key, event in zip(query.keys, query.events, strict=True):
            assert _label_bins(listed[key]) == _id_bins(event)
        assert prompts.GROUPED_LEAD in lines
        assert all(f'"{k}"' in lines[-1] for k in query.keys)


def test_grouped_order_is_seeded_and_varies() -> None:
    arm = ARMS["full-panel"]
    sd = sample()[0]
    first = arm.queries(sd, 0, 7)[0]
    assert arm.queries(sd, 0, 7)[0] == first  # reproducible
    others = {
        arm.queries(sd, 1, 7)[0].events,
        arm.queries(sd, 0, 8)[0].events,
        arm.queries(sample()[1], 0, 7)[0].events,
    }
    assert first.events not in others and len(others) == 3
    assert sorted(first.events) == sorted(horizon_panel(1).ids)
    # Complement pairs: the two events of a query are ordered independently per query.
    orders = {q.events[0] < q.events[1] for p in range(6)
              for q in ARMS["complement-pairs"].queries(sd, p, 7)}  # fmt: skip
    assert orders == {True, False}


@given(st.integers(1, 30), st.integers(0, 2**32), st.text(max_size=12))
def test_grouped_order_is_a_permutation(n: int, seed: int, salt: str) -> None:
    order = prompts.grouped_order(n, seed, salt)
    assert sorted(order) == list(range(n))
    assert order == prompts.grouped_order(n, seed, salt)


def test_unresolved_prompt_replaces_the_question() -> None:
    sd = sample()[0]
    queries = {q.events[0]: q.user for q in rendered(ARMS["unresolved/10"], sd)}
    text = queries["d1:B1|B2|B3"]
    assert "10-year anniversary of " + sd.date.isoformat() in text
    assert text.endswith(
        "z falls in B1 (between −1 and 0), B2 (between 0 and 1) or B3 (at least 1).\n"
        + prompts.RESPONSE_SINGLE
    )
    assert prompts.QUESTION_LEAD not in text
    assert "what probability would you assign to the following occurring? On the target" in text


def test_horizon_preamble_only_beyond_one_day() -> None:
    sd = sample()[0]
    assert "next 3 trading days" in rendered(ARMS["horizon/3"], sd)[0].user
    assert "trading days (future" not in rendered(ARMS["baseline"], sd)[0].user


def test_identity_needs_names() -> None:
    nameless = dataclasses.replace(sample()[0], name=None, ticker=None)
    with pytest.raises(ValueError, match="company name and ticker"):
        rendered(ARMS["identity"], nameless)
    assert rendered(ARMS["baseline"], nameless)  # only the identity arms need them
