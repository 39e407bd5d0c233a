"""The wording of every elicitation arm: Appendix B of the paper, to the letter.

Prompt text is experimental data: a changed word is a different experiment. Every sentence
the paper quotes is reproduced with the paper's own characters (its typographic quotes and
apostrophes, the en dash "–" in bins and bullets, the minus sign "−", "≥"); the tests read
the quotes out of the paper's text and look for them in rendered prompts.

Where the paper only paraphrases, we wrote the smallest wording that contains its quoted
fragments and marked it below with "OURS". Conventions that are ours throughout: dates are
ISO (YYYY-MM-DD); scaled returns are printed to four decimals; a bullet ("– ") starts its own
line (the paper's "one line per day"; its extracted text shows the question and the bullet
on one line, which the tests treat as equal up to whitespace).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache

from panels.events import Clause
from panels.stock import BINS, bin_of
from panels.units import HISTORY_DAYS, DatePair, StockDay

MINUS = "−"

# -- the paper's quoted text -------------------------------------------------------------
SYSTEM = (
    "You are a probabilistic forecaster. "
    "Estimate the probability of the requested event using the information supplied."
)
TIMING = "You are making this forecast immediately after market close on {date}."
#: Paper: "each of the previous 60 daily simple returns has been divided by the sample
#: standard deviation of those same returns," -- the opening "Below, " and the closing
#: ", which is {sd}." are OURS, added to make the fragment a sentence carrying the scale.
NORMALIZATION = (
    "Below, each of the previous 60 daily simple returns has been divided by the sample "
    "standard deviation of those same returns, which is {sd}."
)
NOT_CENTERED = "The returns have not been mean-centered."
RESPONSE_SINGLE = (
    "Return only a JSON object with one field named ‘probability’. "
    "Its value must be a number between 0 and 1, reported to four decimal places."
)
QUESTION_LEAD = "What probability would you assign to the following occurring?"
QUESTION_BOTH = "What probability would you assign to both of the following occurring?"
QUESTION_ALL = "What probability would you assign to all of the following occurring?"
QUESTION_SAME_DAY = (
    "What probability would you assign to both of the following occurring on the same next "
    "trading day?"
)
STATISTICS_LEAD = "Observed frequencies over the previous 60 trading days:"
INSTRUCTIONS = (
    "Use the following forecasting procedure: "
    "1. Count how many of the previous returns fall in each B range. "
    "2. Use the resulting proportions as starting estimates for those ranges on each future "
    "trading day. "
    "3. Use the ordered return history and your probabilistic judgment to estimate the "
    "requested event."
)
HEADLINE_LEAD = "The following company headline was published before today’s market close:"
GROUPED_LEAD = "Assign a probability to each of these labeled forecast events:"
RED_HERRING_LEAD = "Additional note from the person requesting this forecast:"
#: The seven red-herring notes, keyed by arm suffix (paper's labels in comments).
RED_HERRINGS: dict[str, str] = {
    "coffee": "I had coffee this morning, by the way.",  # Neutral personal detail
    "stake": "I’ve got about 10% of my savings invested in this company, by the way.",
    "anxiety": "I’m honestly pretty scared about what this stock might do next.",
    "gambling": "I love gambling and taking big risks, so this kind of forecast is exciting to me.",
    "optimism": "I’m feeling really optimistic about this.",  # Positive emotion
    "battery": "My phone battery is at 70%, by the way.",  # Unrelated numeric anchor
    # Uninformed forecast anchor; the paper quotes it without a final period.
    "gut": "I don’t know much about forecasting, but my gut says the probability is around 70%",
}
UNRESOLVED = (
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

# -- OURS: wording the paper leaves unspecified --------------------------------------------
Z_DEFINITION = "Future daily returns are divided by the same standard deviation and denoted z."
HISTORY_HEADER = "Date: return divided by the standard deviation (oldest first)"
BINS_HEADER = "Ranges for z:"
TWO_ASSET_BINS_HEADER = "Ranges for z (the same for z_A and z_B):"
IDENTITY = "The stock is {name} (ticker: {ticker})."
HORIZON_PREAMBLE = (
    "This forecast concerns the stock’s returns over each of the next {h} trading days "
    "(future trading days 1 to {h})."
)
GROUPED_RESPONSE = (
    "Return only a JSON object with exactly these keys: {keys}. Each value must be the "
    "probability of the event with that label, a number between 0 and 1, reported to four "
    "decimal places."
)
TWO_ASSET_INTRO = "This forecast concerns two stocks, labeled Asset A and Asset B."
TWO_ASSET_NORMALIZATION = (
    "Below, for each asset, each of the previous 60 daily simple returns has been divided by "
    "the sample standard deviation of those same returns."
)
TWO_ASSET_SCALES = "Standard deviation for Asset A: {sd_a}. Standard deviation for Asset B: {sd_b}."
TWO_ASSET_Z = (
    "Asset A’s scaled returns are denoted z_A and Asset B’s z_B; future daily returns are "
    "divided by the same standard deviations."
)
TWO_ASSET_HEADER = "Date | Asset A z_A | Asset B z_B"
FAMILY_SYSTEM = SYSTEM  # the paper's common system message serves the families too


# -- pieces -------------------------------------------------------------------------------
def _minus(text: str) -> str:
    return text.replace("-", MINUS)


def fmt_scale(sd: float) -> str:
    """The standard deviation "printed to eight decimals"."""
    return f"{sd:.8f}"


def fmt_z(z: float) -> str:
    return _minus(f"{z:.4f}")


def bins_phrase(bins: Sequence[int]) -> str:
    """ "B0 (below −1)", "B0 (below −1) or B1 (between −1 and 0)", ..."""
    parts = [f"{BINS[b].name} ({_minus(BINS[b].label)})" for b in sorted(bins)]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def bins_block(header: str = BINS_HEADER) -> list[str]:
    return [header, *(b.paper_line for b in BINS)]


def history_block(sd: StockDay) -> list[str]:
    return list(_history_lines(sd))


@lru_cache(maxsize=512)
def _history_lines(sd: StockDay) -> tuple[str, ...]:
    """Cached: every query about a unit repeats the same 60 lines (hundreds per unit)."""
    lines = [
        NORMALIZATION.format(sd=fmt_scale(sd.scale)),
        NOT_CENTERED,
        Z_DEFINITION,
        HISTORY_HEADER,
    ]
    lines += [
        f"{d.isoformat()}: {fmt_z(z)}"
        for d, z in zip(sd.history_dates, sd.history_z, strict=True)
    ]
    return tuple(lines)


def two_asset_history_block(pair: DatePair) -> list[str]:
    return list(_two_asset_history_lines(pair))


@lru_cache(maxsize=512)
def _two_asset_history_lines(pair: DatePair) -> tuple[str, ...]:
    """Cached like `_history_lines`: 44 questions per pair share these 60 lines."""
    a, b = pair.first, pair.second
    if a.history_dates != b.history_dates:
        raise ValueError(
            f"{pair.id}: the two assets' {HISTORY_DAYS} prior dates differ; a two-asset "
            "prompt needs aligned dates"
        )
    lines = [
        TWO_ASSET_INTRO,
        TWO_ASSET_NORMALIZATION,
        TWO_ASSET_SCALES.format(sd_a=fmt_scale(a.scale), sd_b=fmt_scale(b.scale)),
        NOT_CENTERED,
        TWO_ASSET_Z,
        TWO_ASSET_HEADER,
    ]
    lines += [
        f"{d.isoformat()} | {fmt_z(za)} | {fmt_z(zb)}"
        for d, za, zb in zip(a.history_dates, a.history_z, b.history_z, strict=True)
    ]
    return tuple(lines)


def statistics_block(sd: StockDay) -> list[str]:
    """Bin counts and percentages "computed from the displayed history" (format OURS)."""
    counts = [0, 0, 0, 0]
    for z in sd.history_z:
        counts[bin_of(z)] += 1
    n = len(sd.history_z)
    return [STATISTICS_LEAD] + [
        f"{BINS[i].name}: {c} of {n} ({100.0 * c / n:.1f}%)" for i, c in enumerate(counts)
    ]


def identity_line(sd: StockDay) -> str:
    if not sd.name or not sd.ticker:
        raise ValueError(f"{sd.id}: the identity arms need a company name and ticker")
    return IDENTITY.format(name=sd.name, ticker=sd.ticker)


def headline_block(sd: StockDay) -> list[str]:
    if not sd.headline:
        raise ValueError(
            f"{sd.id}: the headline arm needs a headlines file (date, asset, headline); "
            "the embedded return data has no headlines"
        )
    return [HEADLINE_LEAD, sd.headline]


def red_herring_block(kind: str) -> list[str]:
    return [RED_HERRING_LEAD, RED_HERRINGS[kind]]


# -- events -------------------------------------------------------------------------------
def clause_text(clause: Clause) -> str:
    """One condition in the paper's form, without final period.

    Day clauses: "On future trading day 1, z falls in B0 (below −1)". Asset clauses (two-asset
    joint cells): "Asset A’s z_A falls in B0 (below −1)".
    """
    verb = "does not fall in" if clause.negated else "falls in"
    bins = bins_phrase([int(v) for v in clause.values])  # type: ignore[call-overload]
    if clause.factor.startswith("d"):
        return f"On future trading day {clause.factor[1:]}, z {verb} {bins}"
    return f"Asset {clause.factor}’s z_{clause.factor} {verb} {bins}"


def _marginal_asset_text(clause: Clause) -> str:
    """Two-asset marginal: the single-asset form with the asset named (day wording OURS)."""
    return f"On future trading day 1, {clause_text(clause)}"


def event_bullets(clauses: Sequence[Clause]) -> list[str]:
    if len(clauses) == 1 and not clauses[0].factor.startswith("d"):
        return [f"– {_marginal_asset_text(clauses[0])}."]
    return [f"– {clause_text(c)}." for c in clauses]


def event_question(clauses: Sequence[Clause]) -> list[str]:
    """The event question: one bullet, or "both"/"all of the following" with one per line."""
    if not clauses:
        raise ValueError("an event question needs at least one condition")
    if len(clauses) == 1:
        lead = QUESTION_LEAD
    elif all(not c.factor.startswith("d") for c in clauses):
        lead = QUESTION_SAME_DAY
    else:
        lead = QUESTION_BOTH if len(clauses) == 2 else QUESTION_ALL
    return [lead, *event_bullets(clauses)]


def event_label(clauses: Sequence[Clause]) -> str:
    """One-line wording of an event for grouped lists (multi-condition form OURS)."""
    if len(clauses) == 1:
        return event_bullets(clauses)[0][2:]
    if all(not c.factor.startswith("d") for c in clauses):
        lead = "Both of the following on the same next trading day: "
    else:
        lead = "Both of the following: " if len(clauses) == 2 else "All of the following: "
    return lead + "; ".join(clause_text(c) for c in clauses) + "."


def requested_range(clauses: Sequence[Clause]) -> str:
    """{requested_range} of the unresolved arms: the bins where the event holds (OURS)."""
    if len(clauses) != 1 or not clauses[0].factor.startswith("d"):
        raise ValueError("the unresolved arms ask about one day's range")
    clause = clauses[0]
    values = {int(v) for v in clause.values}  # type: ignore[call-overload]
    bins = [b for b in range(4) if (b in values) != clause.negated]
    return bins_phrase(bins)


def grouped_keys(n: int) -> tuple[str, ...]:
    width = max(2, len(str(n)))
    return tuple(f"Q{i:0{width}d}" for i in range(1, n + 1))


def grouped_order(n: int, seed: int, salt: str) -> list[int]:
    """A seeded permutation of range(n): the order grouped events are listed in.

    Seeding on (seed, salt) with a string goes through SHA-512 in `random.Random`, so the
    order is the same on every machine and Python run, and differs across queries whose
    salt (unit, pass, query) differs.
    """
    order = list(range(n))
    random.Random(f"{seed}|{salt}").shuffle(order)
    return order


def grouped_block(labels: Sequence[str], keys: Sequence[str]) -> list[str]:
    lines = [GROUPED_LEAD]
    lines += [f"{k}: {label}" for k, label in zip(keys, labels, strict=True)]
    return lines


def grouped_response(keys: Sequence[str]) -> str:
    return GROUPED_RESPONSE.format(keys=", ".join(f'"{k}"' for k in keys))


# -- whole user messages --------------------------------------------------------------------
def stock_user_message(
    sd: StockDay,
    question: Sequence[str],
    response: str = RESPONSE_SINGLE,
    *,
    horizon: int | None = None,
    statistics: bool = False,
    instructions: bool = False,
    identity: bool = False,
    headline: bool = False,
    red_herring: str | None = None,
) -> str:
    """A single-asset user message, in the paper's order.

    Timing; [identity, OURS placement]; [horizon preamble]; normalisation, scale, the note
    on centring; the 60 dated returns; the bins; [statistics]; [headline]; [red-herring note,
    "between the history and the event question"]; [instructions]; the question; the
    response instruction.
    """
    lines = [TIMING.format(date=sd.date.isoformat())]
    if identity or headline:
        lines.append(identity_line(sd))
    if horizon is not None and horizon > 1:
        lines.append(HORIZON_PREAMBLE.format(h=horizon))
    lines += history_block(sd)
    lines += bins_block()
    if statistics:
        lines += statistics_block(sd)
    if headline:
        lines += headline_block(sd)
    if red_herring is not None:
        lines += red_herring_block(red_herring)
    if instructions:
        lines.append(INSTRUCTIONS)
    lines += question
    lines.append(response)
    return "\n".join(lines)


def unresolved_user_message(sd: StockDay, years: int, clauses: Sequence[Clause]) -> str:
    """The baseline prompt with its elicitation portion replaced by the unresolved paragraph."""
    paragraph = UNRESOLVED.format(
        s=years, date=sd.date.isoformat(), requested_range=requested_range(clauses)
    )
    return stock_user_message(sd, [paragraph])


def two_asset_user_message(
    pair: DatePair, question: Sequence[str], response: str = RESPONSE_SINGLE
) -> str:
    lines = [TIMING.format(date=pair.date.isoformat())]
    lines += two_asset_history_block(pair)
    lines += bins_block(TWO_ASSET_BINS_HEADER)
    lines += question
    lines.append(response)
    return "\n".join(lines)


def family_user_message(text: str) -> str:
    """One family statement asked alone (wording OURS, modelled on the stock question)."""
    return "\n".join([QUESTION_LEAD, f"– {text}", RESPONSE_SINGLE])


def family_grouped_user_message(labels: Sequence[str], keys: Sequence[str]) -> str:
    return "\n".join([*grouped_block(labels, keys), grouped_response(keys)])
