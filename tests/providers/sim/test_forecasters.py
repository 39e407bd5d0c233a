"""Simulated forecasters: deterministic, able to read the real prompts, and distinct.

The strongest check reads every stock arm's real prompts (built by `panels.arms`): a
coherent forecaster that misread any event would be caught by the Dutch-book LP.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from promptkit import SYSTEM, grouped_prompt, h1_events, single_prompt

from engine.answers import AnswerError, parse_answer
from providers.sim.forecasters import PERSONALITIES, answer, personality_for
from providers.sim.prompts import parse_prompt
from scoring import dutch_books

SINGLES = [frozenset({b}) for b in range(4)]


def _p(model: str, prompt: str, seed: int = 1) -> float:
    return float(json.loads(answer(model, SYSTEM, prompt, seed))["probability"])


def test_answers_are_deterministic_per_model_seed_and_prompt() -> None:
    prompt = single_prompt(4, frozenset({0, 3}))
    assert answer("sim-noisy", SYSTEM, prompt, 7) == answer("sim-noisy", SYSTEM, prompt, 7)
    noisy = {answer("sim-noisy", SYSTEM, prompt, s) for s in range(6)}
    assert len(noisy) > 1  # the seed matters for a noisy forecaster...
    coherent = {answer("sim-coherent", SYSTEM, prompt, s) for s in range(6)}
    assert len(coherent) == 1  # ...and not for one that only rounds


def test_coherent_h1_singletons_sum_to_one_and_noisy_do_not() -> None:
    gaps: dict[str, list[float]] = {"coherent": [], "noisy": []}
    for day in range(6):
        for personality in gaps:
            total = sum(_p(f"sim-{personality}", single_prompt(day, b)) for b in SINGLES)
            gaps[personality].append(abs(total - 1.0))
    assert max(gaps["coherent"]) <= 0.01
    assert statistics.mean(gaps["noisy"]) > 0.03


def test_coherent_answers_follow_the_history() -> None:
    """More history in B3 means a higher P(B3): the belief is read from the prompt."""
    from promptkit import history

    def share_b3(seed: int) -> float:
        return sum(z >= 1 for _, z in history(seed)) / 60

    days = sorted(range(8), key=share_b3)
    low, high = days[0], days[-1]
    assert share_b3(high) > share_b3(low)
    assert _p("sim-coherent", single_prompt(high, SINGLES[3])) > _p(
        "sim-coherent", single_prompt(low, SINGLES[3]))


def test_grouped_prompt_gets_exactly_the_requested_keys_in_order() -> None:
    prompt, keys = grouped_prompt(3, h1_events())
    reply = json.loads(answer("sim-framing", SYSTEM, prompt, 2))
    assert list(reply) == keys
    assert all(0.0 <= v <= 1.0 for v in reply.values())


def test_anchored_forecaster_is_pulled_toward_a_stated_percentage() -> None:
    gut = "I don't know much about forecasting, but my gut says the probability is around 70%"
    plain = [_p("sim-anchored", single_prompt(d, b)) for d in range(3) for b in h1_events()]
    pulled = [_p("sim-anchored", single_prompt(d, b, gut)) for d in range(3) for b in h1_events()]
    distance = [abs(p - 0.7) for p in plain]
    distance_pulled = [abs(p - 0.7) for p in pulled]
    assert statistics.mean(distance_pulled) < statistics.mean(distance) - 0.05
    coherent = [_p("sim-coherent", single_prompt(d, b, gut)) for d in range(3)
                for b in h1_events()]
    assert coherent == [_p("sim-coherent", single_prompt(d, b)) for d in range(3)
                        for b in h1_events()]


def test_framing_forecaster_inflates_complements_and_sways_with_mood() -> None:
    for day in range(3):
        for b in range(4):
            event, complement = frozenset({b}), frozenset(set(range(4)) - {b})
            total = _p("sim-framing", single_prompt(day, event)) + _p(
                "sim-framing", single_prompt(day, complement))
            assert total > 1.03
    up = frozenset({2, 3})
    calm = _p("sim-framing", single_prompt(1, up))
    happy = _p("sim-framing", single_prompt(1, up, "I'm feeling really optimistic about this."))
    scared = _p("sim-framing", single_prompt(
        1, up, "I'm honestly pretty scared about what this stock might do next."))
    assert scared < calm < happy


def test_fraction_forecaster_needs_the_lenient_parser() -> None:
    prompt = single_prompt(5, frozenset({1, 2}))
    reply = answer("sim-fraction", SYSTEM, prompt, 1)
    assert "/" in reply
    with pytest.raises(AnswerError):
        parse_answer(reply, ("probability",), mode="strict")
    lenient = parse_answer(reply, ("probability",), mode="lenient")["probability"]
    assert abs(lenient - _p("sim-coherent", prompt)) <= 1 / 40


def test_personality_comes_from_the_model_id_or_explicitly() -> None:
    assert personality_for("sim-noisy") == "noisy"
    assert personality_for("openai/gpt-oss-120b", "anchored") == "anchored"
    implicit = personality_for("openai/gpt-oss-120b")
    assert implicit == personality_for("openai/gpt-oss-120b") and implicit != "fraction"
    assert {personality_for(f"model-{i}") for i in range(40)} == set(PERSONALITIES) - {"fraction"}
    with pytest.raises(ValueError):
        personality_for("x", "grumpy")


def test_prompt_reader_finds_days_assets_and_negations() -> None:
    parsed = parse_prompt(single_prompt(1, frozenset({0, 1, 3})))
    (event,) = parsed.events
    assert event.key == "probability" and event.complement_wording
    assert [(c.day, set(c.bins)) for c in event.conditions] == [(1, {0, 1, 3})]
    assert len(parsed.histories[""]) == 60


@given(st.text(max_size=400))
def test_any_prompt_gets_a_strict_json_probability(user: str) -> None:
    for personality in ("coherent", "noisy", "anchored", "framing"):
        reply = json.loads(answer(f"sim-{personality}", "sys", user, 0))
        assert reply and all(0.0 <= value <= 1.0 for value in reply.values())


# ----- the real prompts of every stock arm ---------------------------------------------
ARM_NAMES = ["baseline", "statistics", "complement-pairs", "full-panel", "red-herring/gut",
             "unresolved/5", "two-asset", "horizon/3", "linked", "dispersed"]


def _worst_profit(personality: str, name: str) -> float:
    from panels.arms import ARMS
    from panels.data import load_returns, sample_date_pairs, sample_stock_days

    stock_days = sample_stock_days(load_returns(), 2, seed=3)
    arm = ARMS[name]
    unit = sample_date_pairs(stock_days)[0] if arm.unit_kind == "date-pair" else stock_days[1]
    values: dict[str, float] = {}
    for query in arm.queries(unit, 0, 5):
        reply = json.loads(answer(f"sim-{personality}", query.system, query.user, 5))
        assert list(reply) == list(query.keys)
        values.update(zip(query.events, reply.values(), strict=True))
    panel = arm.panel(unit)
    worst = 0.0
    for scoring_set in arm.scoring_sets(unit):
        sub = panel.subset(scoring_set.event_ids)
        probs = np.array([values[e] for e in sub.ids])
        worst = max(worst, float(dutch_books(sub.incidence, probs).profit[0]))
    return worst


@pytest.mark.parametrize("name", ARM_NAMES)
def test_coherent_forecaster_reads_every_stock_arm_correctly(name: str) -> None:
    assert _worst_profit("coherent", name) < 1e-3
    assert _worst_profit("noisy", name) > 0.01


BIN_WORDS = {0: "B0 (below −1)", 1: "B1 (between −1 and 0)", 2: "B2 (between 0 and 1)",
             3: "B3 (at least 1)"}
bin_sets = st.frozensets(st.integers(0, 3), min_size=1, max_size=3)


@given(st.lists(bin_sets, min_size=1, max_size=4), st.booleans())
def test_prompt_reader_recovers_any_multi_day_event(days: list[frozenset[int]],
                                                     grouped: bool) -> None:
    """Whatever days and bins an event names, in either wording, the reader gets them back."""
    lines = []
    for day, bins in enumerate(days, start=1):
        if len(bins) == 3:
            (missing,) = set(range(4)) - bins
            lines.append(f"– On future trading day {day}, z does not fall in {BIN_WORDS[missing]}.")
        else:
            names = " or ".join(BIN_WORDS[b] for b in sorted(bins))
            lines.append(f"– On future trading day {day}, z falls in {names}.")
    lead = {1: "the following", 2: "both of the following"}.get(len(days), "all of the following")
    if grouped:
        body = ("Assign a probability to each of these labeled forecast events:\nQ01: "
                + " ".join(line.lstrip("– ") for line in lines))
    else:
        body = f"What probability would you assign to {lead} occurring?\n" + "\n".join(lines)
    parsed = parse_prompt(single_prompt(0, frozenset({0})).split("What probability")[0] + body)
    (event,) = parsed.events
    assert event.key == ("Q01" if grouped else "probability")
    assert [(c.day, c.bins) for c in event.conditions] == list(enumerate(days, start=1))


def test_family_statements_are_answered_with_their_structure() -> None:
    """Family questions have no history to read: the coherent forecaster reads the wording
    (a negation, a later deadline) and stays coherent; noisy wobbles around it."""
    user = ("Assign a probability to each of these labeled forecast events:\n"
            "Q01: Humans land on Mars by 2035.\nQ02: Humans do not land on Mars by 2035.\n"
            "Q03: Humans land on Mars by 2040.\n"
            'Return only a JSON object with exactly these keys: "Q01", "Q02", "Q03".')
    coherent = json.loads(answer("sim-coherent", "sys", user, 1))
    assert list(coherent) == ["Q01", "Q02", "Q03"]
    assert abs(coherent["Q01"] + coherent["Q02"] - 1.0) <= 1e-4
    assert coherent["Q03"] >= coherent["Q01"]
    noisy = json.loads(answer("sim-noisy", "sys", user, 1))
    assert list(noisy) == ["Q01", "Q02", "Q03"] and noisy != coherent


def test_memoised_line_reading_matches_a_fresh_reading() -> None:
    """Prompts sharing lines (a stock-day's history) read the same whether their lines were
    seen before or not: the per-line memo holds no state a later prompt could change."""
    from providers.sim import prompts

    texts = [single_prompt(d, frozenset({b})) for d in (1, 2) for b in range(4)]
    lead = "What probability"
    texts.append(texts[0].replace(lead, "Around 70% of analysts agree.\n" + lead))
    warm = [parse_prompt(t) for t in texts]
    fresh = []
    for text in texts:
        prompts._facts.cache_clear()
        fresh.append(parse_prompt(text))
    assert warm == fresh
    assert warm[-1].anchors == (0.7,) and warm[0].anchors == ()
    assert warm[0].histories and warm[0].events[0].conditions


def test_every_personality_is_described_and_no_other() -> None:
    """The report says each simulated model's personality in these words (runs.report.models)."""
    from providers.sim.forecasters import PERSONALITIES, PERSONALITY_WORDS

    assert list(PERSONALITY_WORDS) == list(PERSONALITIES)
