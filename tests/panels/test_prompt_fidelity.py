"""Every stock arm's rendered prompts against Appendix B of the paper, byte for byte.

`test_prompts.py` finds each Appendix B quote in its arms' prompts after collapsing all
whitespace, and checks the sentences every prompt shares (timing, normalisation, bins,
response) in the five information arms only. Here the paper's sentences are written out
once below, each with the line of `shared/reference/dutch-books-paper.txt` it comes from
(`test_the_transcriptions_are_the_papers_text` reads them back out of that line), and each
arm's prompts must carry them exactly, as whole lines where the paper gives a whole line,
in the paper's order. Nothing is read from `panels.prompts`: a changed constant fails here.

Transcription of the extracted text: its LaTeX maths is written as the characters the
prompts carry ($-1$ -> "−1", U+2212; $z\\geq 1$ -> "z≥1"; $z_{A}$ -> "z_A"; $z$ -> "z"), and
the padding the extractor puts around maths ("( $z<-1$ )", "$z_{A}$ ,") is dropped. The one
layout allowance: the extracted text runs the single-event question and its "– " bullet
together (line 224); the prompts start the bullet on its own line, as the paper says of
conjunctions ("one line per day"). Dates are ISO, the project's convention (the paper only
writes "{date}").
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from pathlib import Path

import pytest

from panels.arms import ARMS, Query
from panels.data import load_returns, sample_date_pairs, sample_stock_days
from panels.units import DatePair, StockDay

PAPER = Path(__file__).resolve().parents[3] / "shared" / "reference" / "dutch-books-paper.txt"

# -- the paper's sentences (line numbers of the paper's text file) ---------------------------
SYSTEM = (  # 224
    "You are a probabilistic forecaster. "
    "Estimate the probability of the requested event using the information supplied."
)
TIMING = "You are making this forecast immediately after market close on {date}."  # 224
NORMALIZATION = (  # 224; the single-asset sentence goes on after the comma (with the scale)
    "each of the previous 60 daily simple returns has been divided by the sample standard "
    "deviation of those same returns,"
)
NOT_CENTRED = "The returns have not been mean-centered."  # 224
BIN_B0 = "B0 – below −1 (z<−1)"  # 224
BIN_B3 = "B3 – at least 1 (z≥1)"  # 224
RESPONSE = (  # 224
    "Return only a JSON object with one field named ‘probability’. "
    "Its value must be a number between 0 and 1, reported to four decimal places."
)
QUESTION = "What probability would you assign to the following occurring?"  # 224
BULLET_B0 = "– On future trading day 1, z falls in B0 (below −1)."  # 224
MARGINAL_A_B0 = "Asset A’s z_A falls in B0 (below −1)"  # 228
SAME_DAY = (  # 228
    "What probability would you assign to both of the following occurring on the same next "
    "trading day?"
)
STATISTICS_LEAD = "Observed frequencies over the previous 60 trading days:"  # 232
INSTRUCTIONS = (  # 232
    "Use the following forecasting procedure: 1. Count how many of the previous returns fall "
    "in each B range. 2. Use the resulting proportions as starting estimates for those ranges "
    "on each future trading day. 3. Use the ordered return history and your probabilistic "
    "judgment to estimate the requested event."
)
HEADLINE_LEAD = "The following company headline was published before today’s market close:"
GROUPED_LEAD = "Assign a probability to each of these labeled forecast events:"  # 236
RED_LEAD = "Additional note from the person requesting this forecast:"  # 240
RED_NOTES = {  # 240, in the paper's order; "gut" has no final period there (nor on line 154)
    "coffee": "I had coffee this morning, by the way.",
    "stake": "I’ve got about 10% of my savings invested in this company, by the way.",
    "anxiety": "I’m honestly pretty scared about what this stock might do next.",
    "gambling": "I love gambling and taking big risks, so this kind of forecast is exciting to me.",
    "optimism": "I’m feeling really optimistic about this.",
    "battery": "My phone battery is at 70%, by the way.",
    "gut": "I don’t know much about forecasting, but my gut says the probability is around 70%",
}
UNRESOLVED = (  # 246
    "The target is the stock’s one-day simple return on the first NYSE trading session "
    "strictly after the {s}-year anniversary of {date}. This is not the stock’s cumulative "
    "return over the intervening {s} years. Use the scale above for the target-session "
    "return. Treat every requested probability as conditional on the stock’s survival "
    "through this horizon, meaning that it remains listed and has a valid one-day return on "
    "the target session. Do not assign probability mass to delisting or non-survival. On "
    "that target trading session, place z into one of the previously defined ranges. "
    "Conditional on the stock’s survival through that horizon, what probability would you "
    "assign to the following occurring? On the target trading session, z falls in "
    "{requested_range}."
)
TRANSCRIBED = {
    224: [SYSTEM, TIMING, NORMALIZATION, NOT_CENTRED, BIN_B0, BIN_B3, RESPONSE,
          f"{QUESTION} {BULLET_B0}", "does not fall", "both of the following",
          "all of the following"],
    228: [MARGINAL_A_B0, SAME_DAY, "(date, Asset A z_A, Asset B z_B)"],
    232: [STATISTICS_LEAD, INSTRUCTIONS, HEADLINE_LEAD],
    236: [GROUPED_LEAD, "Q01, Q02"],
    240: [RED_LEAD, *RED_NOTES.values()],
    246: [UNRESOLVED],
}  # fmt: skip

#: How an event names its bins: B0 and B3 as on line 224, B1 and B2 the same way (their
#: words are the project's: the paper shows only the first and last bin).
BIN_WORDS = ("B0 (below −1)", "B1 (between −1 and 0)", "B2 (between 0 and 1)", "B3 (at least 1)")
ISO_LINE = re.compile(r"\d{4}-\d\d-\d\d\b")
HEADLINE = "Company beats quarterly estimates"


def _typeset(line: str) -> str:
    """A line of the extracted paper with its maths as the prompts write it."""

    def math(m: re.Match[str]) -> str:
        text = m.group(1).strip().replace("\\geq", "≥").replace("-", "−")
        return re.sub(r"_\{(\w+)\}", r"_\1", text).replace(" ", "")

    text = re.sub(r"\$([^$]*)\$", math, line)
    for padded, tight in (("( ", "("), (" )", ")"), (" ,", ","), (" .", ".")):
        text = text.replace(padded, tight)
    return text


# -- units and rendering -----------------------------------------------------------------------
@cache
def sample() -> tuple[StockDay, ...]:
    return tuple(sample_stock_days(load_returns(), 4, seed=21))


def stock_day() -> StockDay:
    """A sampled stock-day with a headline (the headline arm needs one; the others ignore it)."""
    return dataclasses.replace(sample()[0], headline=HEADLINE)


def pair() -> DatePair:
    return sample_date_pairs(sample())[0]


@cache
def queries(arm: str) -> tuple[Query, ...]:
    unit = pair() if ARMS[arm].unit_kind == "date-pair" else stock_day()
    return tuple(ARMS[arm].queries(unit, 0, 7))


def by_event(arm: str) -> dict[str, list[str]]:
    """Single-event arms: event id -> the user message's lines."""
    return {q.events[0]: q.user.split("\n") for q in queries(arm)}


STOCK_ARMS = [name for name, arm in ARMS.items() if arm.unit_kind != "family"]
SINGLE_DAY = ["baseline", "statistics", "instructions", "identity", "headline"] + [
    f"red-herring/{kind}" for kind in RED_NOTES
]


# -- expected event wording, built from the event ids -------------------------------------------
def _bins(values: str) -> list[int]:
    return [int(b[1:]) for b in values.split("|")]


def _phrase(bins: list[int]) -> str:
    words = [BIN_WORDS[b] for b in sorted(bins)]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def clause(part: str) -> str:
    """One condition of an id ("d2:B0|B1", "A:B1|B2|B3") in the paper's words: "falls in",
    and "does not fall in" the missing bin for a three-bin set (line 224's complements)."""
    factor, values = part.split(":")
    bins = _bins(values)
    words = (
        f"does not fall in {_phrase(sorted(set(range(4)) - set(bins)))}"
        if len(bins) == 3
        else f"falls in {_phrase(bins)}"
    )
    if factor.startswith("d"):
        return f"On future trading day {factor[1:]}, z {words}"
    return f"Asset {factor}’s z_{factor} {words}"


def question(event: str) -> list[str]:
    """The event question's lines (line 224; line 228 for the two assets)."""
    parts = event.split("&")
    if len(parts) == 1:
        text = clause(parts[0])
        if not text.startswith("On future"):  # a marginal takes the single-asset form
            text = f"On future trading day 1, {text}"
        return [QUESTION, f"– {text}."]
    if not parts[0].startswith("d"):
        lead = SAME_DAY
    else:
        many = "both of the following" if len(parts) == 2 else "all of the following"
        lead = QUESTION.replace("the following", many)
    return [lead, *(f"– {clause(p)}." for p in parts)]


# -- the frame every stock prompt shares (line 224: "in order") --------------------------------
def frame(lines: list[str], sd: StockDay, scales: tuple[float, ...] | None = None) -> int:
    """Check timing, normalisation, scale, centring note, the 60 dated returns one per line and
    the bins, in the paper's order; return the index of the last bin line."""
    assert lines[0] == TIMING.format(date=sd.date.isoformat())
    norm = [i for i, line in enumerate(lines) if NORMALIZATION.rstrip(",") in line]
    assert len(norm) == 1
    if scales is None:  # one asset: the sentence goes on with the scale, eight decimals
        assert lines[norm[0]].endswith(f"{NORMALIZATION} which is {sd.scale:.8f}.")
        scales = (sd.scale,)
    centred = lines.index(NOT_CENTRED)
    shown = " ".join(lines[norm[0] : centred])
    assert all(f"{s:.8f}" in shown for s in scales)
    assert len(re.findall(r"\d\.\d{8}\b", shown)) == len(scales)
    dated = [i for i, line in enumerate(lines) if ISO_LINE.match(line)]
    assert dated == list(range(dated[0], dated[0] + 60))
    assert [lines[i][:10] for i in dated] == [d.isoformat() for d in sd.history_dates]
    b0 = lines.index(BIN_B0)
    assert lines[b0 + 3] == BIN_B3
    assert [lines[b0 + k][:5] for k in range(4)] == [f"B{k} – " for k in range(4)]
    assert 0 < norm[0] < centred < dated[0] and dated[-1] < b0
    return b0 + 3


@pytest.mark.parametrize("arm", STOCK_ARMS)
def test_every_stock_arm_sends_the_papers_system_message(arm: str) -> None:
    """Line 224: "Queries share a common system message" (test_prompts skips the headline arm)."""
    assert {q.system for q in queries(arm)} == {SYSTEM}


@pytest.mark.parametrize(
    "arm", [*SINGLE_DAY, "horizon/2", "horizon/3", "horizon/4", "unresolved/2", "unresolved/5",
            "unresolved/10"],
)  # fmt: skip
def test_single_asset_prompts_carry_the_papers_frame_byte_for_byte(arm: str) -> None:
    """Line 224, every query of the arm: timing, normalisation with the scale to eight
    decimals, the centring note, 60 dated returns, B0..B3, and the response instruction last."""
    for q in queries(arm):
        lines = q.user.split("\n")
        frame(lines, stock_day())
        assert lines[-1] == RESPONSE


@pytest.mark.parametrize("arm", ["baseline", "horizon/2", "horizon/3", "horizon/4"])
def test_event_questions_are_the_papers_words(arm: str) -> None:
    """Line 224: "What probability would you assign to the following occurring? – On future
    trading day 1, z falls in B0 (below −1).", "does not fall" for complements, and for
    cross-day conjunctions a "both of the following" lead ("all of the following" for three or
    more days) with one line per day. The lead sentences around those words are the project's."""
    for event, lines in by_event(arm).items():
        expected = question(event)
        assert lines[-len(expected) - 1 : -1] == expected, event
        assert lines[-len(expected) - 2] == BIN_B3
    if arm == "baseline":
        assert by_event(arm)["d1:B0"][-3:-1] == [QUESTION, BULLET_B0]


@pytest.mark.parametrize("arm", SINGLE_DAY[1:])
def test_information_and_red_herring_arms_are_the_baseline_plus_their_lines(arm: str) -> None:
    """Lines 232 and 240: each arm is the baseline prompt (the identity arm's, for the headline
    arm, which "further appends") with its own lines added, the added text byte for byte the
    paper's; the red-herring note sits "between the history and the event question", the
    statistics give "one count and percentage per bin"."""
    sd, base = stock_day(), by_event("identity" if arm == "headline" else "baseline")
    for event, lines in by_event(arm).items():
        kept = [line for line in lines if line in base[event]]
        added = [line for line in lines if line not in base[event]]
        assert kept == base[event], event
        start, ask = lines.index(added[0]), lines.index(QUESTION)
        assert lines[start : start + len(added)] == added and start < ask
        if arm.startswith("red-herring/"):
            assert added == [RED_LEAD, RED_NOTES[arm.split("/")[1]]]
            assert start > lines.index(BIN_B3)
        elif arm == "statistics":
            assert added[0] == STATISTICS_LEAD and len(added) == 5
            assert all(re.fullmatch(rf"B{k}: \d+ of 60 \(\d+\.\d%\)", line)
                       for k, line in enumerate(added[1:]))  # fmt: skip
        elif arm == "instructions":
            assert added == [INSTRUCTIONS] and start == ask - 1
        elif arm == "headline":
            assert added == [HEADLINE_LEAD, HEADLINE] and start > lines.index(BIN_B3)
        else:  # "a line naming the company and ticker"
            assert len(added) == 1 and f"{sd.name}" in added[0] and f"{sd.ticker}" in added[0]


GROUPED = {"complement-pairs": (7, 2), "relation-poor-pairs": (7, 2), "full-panel": (1, 14)}


@pytest.mark.parametrize("arm", sorted(GROUPED))
def test_grouped_arms_list_labeled_events_after_the_same_history(arm: str) -> None:
    """Line 236: the same history (the baseline's lines up to the last bin, byte for byte),
    then "Assign a probability to each of these labeled forecast events:", the events as Q01,
    Q02, ... each in the single-event words of line 224, and a JSON object asked with exactly
    those keys (that request's wording is the project's)."""
    base = by_event("baseline")["d1:B0"]
    head = base[: base.index(BIN_B3) + 1]
    count, size = GROUPED[arm]
    assert [len(q.events) for q in queries(arm)] == [size] * count
    for q in queries(arm):
        lines = q.user.split("\n")
        assert lines[: len(head) + 1] == [*head, GROUPED_LEAD]
        keys = tuple(f"Q{i:02d}" for i in range(1, size + 1))
        assert q.keys == keys
        listed = lines[len(head) + 1 : -1]
        assert listed == [f"{k}: {clause(e)}." for k, e in zip(keys, q.events, strict=True)]
        assert re.findall(r'"(Q\d\d)"', lines[-1]) == list(keys)
        assert lines[-1].startswith("Return only a JSON object with exactly these keys: ")


@pytest.mark.parametrize("years", [2, 5, 10])
def test_unresolved_arms_replace_the_question_with_the_papers_paragraph(years: int) -> None:
    """Line 246: the baseline prompt with its event question replaced by the paragraph, {s}
    the horizon, {date} the anchor date, {requested_range} the event's bins in line 224's
    words (listed, where the baseline says "does not fall in" one bin: the project's)."""
    sd = stock_day()
    base = by_event("baseline")
    for event, lines in by_event(f"unresolved/{years}").items():
        requested = _phrase(_bins(event.split(":")[1]))
        paragraph = UNRESOLVED.format(s=years, date=sd.date.isoformat(), requested_range=requested)
        asked = base[event][: -len(question(event)) - 1]
        assert lines == [*asked, paragraph, RESPONSE], event
    assert by_event(f"unresolved/{years}")["d1:B0"][-2].endswith("z falls in B0 (below −1).")


def test_two_asset_prompts_carry_the_papers_frame_and_questions() -> None:
    """Lines 224 and 228: both assets' scales, z_A and z_B, the sixty aligned dates as a table
    (date, Asset A z_A, Asset B z_B), assets labeled A and B only; marginals in the
    single-asset form ("Asset A’s z_A falls in B0 (below −1)"), joint cells asked "on the same
    next trading day" with one bullet per asset; the response instruction last."""
    p = pair()
    for q in queries("two-asset"):
        lines = q.user.split("\n")
        last_bin = frame(lines, p.first, scales=(p.first.scale, p.second.scale))
        assert lines[last_bin + 1 :] == [*question(q.events[0]), RESPONSE], q.events
        assert "z_A" in q.user and "z_B" in q.user
        for sd in (p.first, p.second):
            assert sd.asset not in q.user and (sd.name or "?") not in q.user
    lines = by_event("two-asset")["A:B0"]
    assert lines[-2].endswith(f"{MARGINAL_A_B0}.")
    rows = [line.split(" | ") for line in lines if ISO_LINE.match(line)]
    assert [r[0] for r in rows] == [d.isoformat() for d in p.first.history_dates]
    assert {len(r) for r in rows} == {3}
    header = lines[next(i for i, line in enumerate(lines) if ISO_LINE.match(line)) - 1]
    assert re.fullmatch(r"Date \| Asset A z_A \| Asset B z_B", header)
    assert by_event("two-asset")["A:B0&B:B3"][-4:] == [
        SAME_DAY,
        f"– {MARGINAL_A_B0}.",
        "– Asset B’s z_B falls in B3 (at least 1).",
        RESPONSE,
    ]


@pytest.mark.parametrize("arm", ["linked", "dispersed"])
def test_linked_and_dispersed_ask_in_the_two_asset_and_two_day_prompts(arm: str) -> None:
    """Appendix D (lines 256-262) adds no wording: a two-asset event is asked with the
    two-asset prompt, a two-day event with the horizon-2 prompt about Asset A's stock, both
    pinned to the paper above."""
    two_asset = by_event("two-asset")
    two_day = {q.events[0]: q.user.split("\n") for q in
               ARMS["horizon/2"].queries(pair().first, 0, 7)}  # fmt: skip
    for event, lines in by_event(arm).items():
        assert lines == (two_day if event.startswith("d") else two_asset)[event], event


@pytest.mark.parametrize("h", [2, 3, 4])
def test_horizon_preamble_stands_between_timing_and_history(h: int) -> None:
    """Line 118: horizon-h prompts "bear a preamble asking the model to think about returns
    out to this horizon" (its words are the project's): one line after the timing, otherwise
    the baseline's frame."""
    base = by_event("baseline")["d1:B0"]
    lines = by_event(f"horizon/{h}")["d1:B0"]
    assert lines[:1] + lines[2:] == base
    assert f"next {h} trading days" in lines[1]


def test_the_transcriptions_are_the_papers_text() -> None:
    """Each sentence above is in the paper line it cites, with the maths typeset."""
    if not PAPER.exists():
        pytest.skip("the paper's text is not available on this machine")
    lines = PAPER.read_text(encoding="utf-8").split("\n")
    for number, sentences in TRANSCRIBED.items():
        line = _typeset(lines[number - 1])
        for sentence in sentences:
            assert sentence in line, (number, sentence)
