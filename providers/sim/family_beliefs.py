"""What a simulated forecaster believes about plain-language statements (question families).

Why this exists: the family benchmark asks about dice, coins, cards and the real future in
plain English. A simulator that answered 1/2 to everything looked incoherent on every
partition family even in its "coherent" personality, which misled users of the keyless demo.
This module reads the statement text alone (providers may not import `panels`, and a real
model only sees the prompt) and gives beliefs with the structure a careful reader would see:

- chance controls (dice, coins, cards) simple enough to parse are computed exactly by
  counting equally likely outcomes (`exact_probability`);
- a *threshold* ("above 50,000", "more than 30%", "below 1 million") is a survival function
  of the number for the sentence with the number removed, so the same sentence with
  different numbers is monotone, and "below x" / "at least x" are exact complements;
- a *deadline* ("on or before 31 December 2035") is a cumulative hazard in the year, so the
  same sentence with later years is never less likely;
- a strict comparison ("X is larger than Y") and its non-strict reverse ("Y is at least as
  large as X") share one belief b and get b and 1 - b;
- "not" turns a belief into its complement;
- a trailing added detail (", after ...", " by a ...", " that ...") multiplies the belief of
  the sentence without it by a factor below one, so a story is never more likely than its
  plainer version;
- "Both of the following happen: A, and B" / "At least one ...: A, or B" combine the beliefs
  of A and B (mild positive dependence, always within the Frechet bounds);
- anything else gets a stable belief hashed from its content words.

Beliefs depend only on the statement text, so a statement asked alone and inside a joint
prompt gets the same belief. `joint_beliefs` then adds what only a joint prompt shows: which
statements are mutually exclusive alternatives (renormalised to sum to one) and which
statement is "A and B" / "A or B" of two others asked alongside it. Asked one by one, such
structure is invisible, so a coherent forecaster can still be incoherent in isolation (its
partition answers need not sum to one): that is realistic, and it is what the isolated arm
measures.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import combinations, permutations, product
from statistics import NormalDist

#: The year a deadline's hazard starts from (the simulator's "now").
NOW_YEAR = 2026
#: Dependence between the two parts of a conjunction: 0 = independent, 1 = nested.
CONJUNCTION_DEPENDENCE = 0.25

_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "is",
        "are",
        "be",
        "was",
        "were",
        "and",
        "its",
        "it",
        "this",
        "that",
        "these",
        "those",
        "as",
        "with",
        "from",
        "any",
        "some",
        "calendar",
        "year",
    ]
)
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "once": 1,
    "twice": 2,
}


# ---- small helpers ---------------------------------------------------------------------
def _unit(*parts: str) -> float:
    """A stable number in (0, 1) from text: the same words always give the same belief."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


def _logistic(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-min(x, 700.0)))
    e = math.exp(max(x, -700.0))
    return e / (1.0 + e)


def _clean(text: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2212", "-").replace("\u2013", "-")
    return re.sub(r"\s+", " ", text).strip()


def tokens(text: str) -> list[str]:
    """Content words, lower-cased and crudely stemmed (possessive and plural 's' dropped)."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", _clean(text).lower())
    out: list[str] = []
    for word in re.findall(r"[a-z0-9][a-z0-9.&%'-]*", text):
        word = word.rstrip(".'-")
        if word.endswith("'s"):
            word = word[:-2]
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if word and word not in _STOP:
            out.append(word)
    return out


def _key(text: str) -> str:
    return " ".join(tokens(text))


def base_belief(key: str) -> float:
    """A stable, spread-out belief for a statement nothing structural is known about."""
    z = NormalDist().inv_cdf(_unit("base", key))
    return min(0.97, max(0.03, _logistic(-0.3 + 1.3 * z)))


# ---- chance controls: count equally likely outcomes ------------------------------------
Outcome = tuple[int, ...]
Predicate = Callable[[Outcome], bool]

_DICE_SETUP = re.compile(
    r"^(?P<n>a|one|two|three|\d) fair six-sided (?:die|dice) (?:is|are) rolled once\.\s*", re.I
)
_COIN_SETUP = re.compile(r"^a fair coin is tossed (?P<n>\w+) times?\.\s*", re.I)
_CARD_SETUP = re.compile(
    r"^one card is drawn at random from a well-shuffled standard 52-card deck\.\s*", re.I
)
_TWO_CARD_SETUP = re.compile(
    r"^two cards are drawn at random, without replacement, from a well-shuffled "
    r"standard 52-card deck\.\s*",
    re.I,
)
_ORDINAL = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4}
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "at least": lambda a, b: a >= b,
    "at most": lambda a, b: a <= b,
    "more than": lambda a, b: a > b,
    "greater than": lambda a, b: a > b,
    "less than": lambda a, b: a < b,
    "fewer than": lambda a, b: a < b,
    "exactly": lambda a, b: a == b,
    "": lambda a, b: a == b,
}
_SUITS = {"heart": 0, "diamond": 1, "club": 2, "spade": 3}


def _count(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS.get(word.lower())


def _dice_atom(text: str, n: int) -> Predicate | None:
    cmp = "|".join(sorted((k for k in _COMPARE if k), key=len, reverse=True))
    m = re.fullmatch(rf"the sum of the (?:two |three )?dice is (not )?({cmp})? ?(\d+)", text)
    if m:
        rel, target, neg = _COMPARE[m.group(2) or ""], int(m.group(3)), bool(m.group(1))
        return lambda o: rel(sum(o), target) != neg
    m = re.fullmatch(r"(?:the (first|second|third) die|it) shows an? (even|odd) number", text)
    if m:
        i = _ORDINAL[m.group(1)] if m.group(1) else 0
        parity = 0 if m.group(2) == "even" else 1
        return lambda o: i < len(o) and o[i] % 2 == parity
    m = re.fullmatch(r"(at least one|neither|no|each|every) die shows an? (\d)", text)
    if m:
        face, q = int(m.group(2)), m.group(1)
        if q == "at least one":
            return lambda o: face in o
        if q in ("neither", "no"):
            return lambda o: face not in o
        return lambda o: all(x == face for x in o)
    m = re.fullmatch(r"(?:it|the die) shows (\d)(?: or (\d))?", text)
    if m and n == 1:
        faces = {int(g) for g in m.groups() if g}
        return lambda o: o[0] in faces
    return None


def _coin_atom(text: str, n: int) -> Predicate | None:
    m = re.fullmatch(r"the (first|second|third|fourth|fifth|last) toss is (heads|tails)", text)
    if m:
        i = n - 1 if m.group(1) == "last" else _ORDINAL[m.group(1)]
        side = 1 if m.group(2) == "heads" else 0
        return lambda o: i < len(o) and o[i] == side
    m = re.fullmatch(r"at least one of the first (\w+) tosses is (heads|tails)", text)
    if m and (k := _count(m.group(1))) is not None:
        side = 1 if m.group(2) == "heads" else 0
        return lambda o: side in o[:k]
    m = re.fullmatch(
        r"(at least|at most|exactly|more than|fewer than|less than) (\w+) of the "
        r"tosses (?:are|is) (heads|tails)",
        text,
    )
    if m and (k := _count(m.group(2))) is not None:
        rel, side = _COMPARE[m.group(1)], 1 if m.group(3) == "heads" else 0
        return lambda o: rel(o.count(side), k)
    m = re.fullmatch(r"all (?:of )?the tosses are (heads|tails)", text)
    if m:
        side = 1 if m.group(1) == "heads" else 0
        return lambda o: all(x == side for x in o)
    return None


def _card_kind(text: str) -> Callable[[int, int], bool] | None:
    """A one-card property over (rank 1..13, suit 0..3)."""
    text = re.sub(r"^(?:it is |also )+", "", text)
    m = re.fullmatch(r"an? (heart|diamond|club|spade)", text)
    if m:
        suit = _SUITS[m.group(1)]
        return lambda r, s: s == suit
    if text in ("an ace", "ace"):
        return lambda r, s: r == 1
    if text in ("a jack, queen or king", "a face card", "a jack, a queen or a king"):
        return lambda r, s: r >= 11
    if text in ("a number card from 2 to 10", "a number card"):
        return lambda r, s: 2 <= r <= 10
    if text in ("a red card", "red"):
        return lambda r, s: s in (0, 1)
    if text in ("a black card", "black"):
        return lambda r, s: s in (2, 3)
    return None


def _card_atom(text: str) -> Predicate | None:
    kind = _card_kind(text)
    return None if kind is None else (lambda o: kind(o[0], o[1]))


def _two_card_atom(text: str) -> Predicate | None:
    m = re.fullmatch(
        r"(at least one|neither|both|at most one|exactly one|none) of them "
        r"(?:is|are) (an ace|aces|a heart|hearts)",
        text,
    )
    if not m:
        return None
    ace = m.group(2) in ("an ace", "aces")

    def hits(o: Outcome) -> int:
        return sum(1 for r, s in ((o[0], o[1]), (o[2], o[3])) if (r == 1 if ace else s == 0))

    counts = {
        "at least one": {1, 2},
        "neither": {0},
        "none": {0},
        "both": {2},
        "at most one": {0, 1},
        "exactly one": {1},
    }[m.group(1)]
    return lambda o: hits(o) in counts


def _compound(text: str, atom: Callable[[str], Predicate | None]) -> Predicate | None:
    """`A, or B` / `A and B` / `A, and B` over atoms (the "(or both)" note is redundant)."""
    text = text.replace(" (or both)", "").strip().rstrip(".").strip()
    for sep, conj in ((", or ", False), (", and ", True), (" and also ", True), (" and ", True)):
        if sep in text:
            parts = [p.strip() for p in text.split(sep)]
            preds = [atom(p) for p in parts]
            if all(p is not None for p in preds):
                ok = [p for p in preds if p is not None]
                if conj:
                    return lambda o: all(p(o) for p in ok)
                return lambda o: any(p(o) for p in ok)
    return atom(text)


@lru_cache(maxsize=4096)
def exact_probability(text: str) -> Fraction | None:
    """The exact chance of a simple dice, coin or card statement, or None if unreadable."""
    text = _clean(text)
    space: list[Outcome]
    atom: Callable[[str], Predicate | None]
    if m := _DICE_SETUP.match(text):
        n = _count(m.group("n")) or 0
        if not 1 <= n <= 3:
            return None
        space = list(product(range(1, 7), repeat=n))
        atom = lambda t: _dice_atom(t, n)  # noqa: E731
    elif m := _COIN_SETUP.match(text):
        n = _count(m.group("n")) or 0
        if not 1 <= n <= 10:
            return None
        space = list(product((0, 1), repeat=n))
        atom = lambda t: _coin_atom(t, n)  # noqa: E731
    elif m := _CARD_SETUP.match(text):
        space = list(product(range(1, 14), range(4)))
        atom = _card_atom
    elif m := _TWO_CARD_SETUP.match(text):
        deck = list(product(range(1, 14), range(4)))
        space = [a + b for a, b in permutations(deck, 2)]
        atom = _two_card_atom
    else:
        return None
    rest = text[m.end() :].strip()
    if not rest:
        return None
    event = rest[0].lower() + rest[1:]
    predicate = _compound(event, atom)
    if predicate is None:
        return None
    return Fraction(sum(1 for o in space if predicate(o)), len(space))


# ---- future statements -----------------------------------------------------------------
_UP = r"more than|greater than|higher than|above|exceeds?|over|at least|no less than"
_DOWN = r"less than|fewer than|lower than|below|under|at most|no more than"
_THRESHOLD = re.compile(
    rf"\b(?:of\s+)?(?P<cmp>{_UP}|{_DOWN})\s+(?:US\s*\$|\$)?(?P<num>\d[\d,]*(?:\.\d+)?)"
    r"(?P<pct>\s*(?:%|percent\b))?",
    re.I,
)
_DEADLINE = re.compile(
    r"\b(?:on or before|no later than|by|before)\s+(?:the end of\s+)?"
    r"(?:\d{1,2}\s+[A-Za-z]+\s+)?(?P<year>(?:19|20|21)\d{2})\b",
    re.I,
)
_NONSTRICT = re.compile(r"\bat least as (?:\w+\s+){1,4}?as\b", re.I)
_STRICT = re.compile(r"\b(?:larger|greater|bigger|higher|more)\s+(?:\w+\s+){0,3}?than\b", re.I)
_COMPARISON_WORDS = frozenset(
    [
        "at",
        "least",
        "as",
        "large",
        "larger",
        "greater",
        "bigger",
        "higher",
        "more",
        "than",
        "many",
        "much",
        "big",
        "high",
    ]
)
_NEGATION = re.compile(r"\b(?:(?:do|does|did|will)\s+not|not)\b\s*", re.I)
_DETAIL = re.compile(
    r",\s*(?:and\b|(?:that|it|after|caused by|which|who|whose|where|a|an)\b)"
    r"|\s+(?:that|which|who|by an?)\s",
    re.I,
)
_BOTH = re.compile(r"^both of the following happen(?P<qual>[^:]*):\s*(?P<rest>.+)$", re.I)
_EITHER = re.compile(
    r"^at least one of the following happens(?P<qual>[^:]*):\s*(?P<rest>.+)$", re.I
)
_MIN_PREFIX_WORDS = 5
#: "X wins ..." / "X finishes first ...": one of many named contenders, so a careful reader
#: starts low even without seeing the others (a catch-all "anyone else" is exempt).
_ONE_OF_MANY = re.compile(
    r"\b(?:wins?|finishes first|comes first|is the (?:world's )?(?:largest|biggest|richest))\b",
    re.I,
)
_ONE_OF_MANY_SHRINK = 0.4


@dataclass(frozen=True)
class Threshold:
    value: float
    up: bool  # "above x" (True) or "below x" (False)
    percent: bool


def _threshold_cdf(key: str, index: int, th: Threshold) -> float:
    """P(quantity <= value) for the sentence `key`: a logistic in the value's scale."""
    if th.percent:
        mu = 10.0 + 60.0 * _unit("pct-mu", key, str(index))
        return _logistic((th.value - mu) / 12.0)
    x = math.log10(th.value) if th.value > 0 else th.value
    mu = -0.5 + 7.0 * _unit("mu", key, str(index))
    sigma = 0.6 + 0.8 * _unit("sigma", key, str(index))
    return _logistic((x - mu) / sigma)


def _deadline_cdf(key: str, year: int) -> float:
    """P(it has happened by the end of `year`): a saturating hazard from now."""
    ceiling = 0.3 + 0.65 * _unit("ceiling", key)
    tau = 4.0 + 26.0 * _unit("tau", key)
    elapsed = max(year - NOW_YEAR + 0.5, 0.05)
    return ceiling * (1.0 - math.exp(-elapsed / tau))


def _atomic(text: str) -> float:
    """Belief in a statement with no detail to peel and no compound form."""
    text, n_neg = _NEGATION.subn("", text)
    negated = n_neg == 1
    thresholds: list[Threshold] = []
    years: list[int] = []

    def take_threshold(m: re.Match[str]) -> str:
        value = float(m.group("num").replace(",", ""))
        up = re.match(_UP, m.group("cmp"), re.I) is not None
        thresholds.append(Threshold(value, up, bool(m.group("pct"))))
        return " <x> "

    def take_deadline(m: re.Match[str]) -> str:
        years.append(int(m.group("year")))
        return " <by> "

    template = _DEADLINE.sub(take_deadline, _THRESHOLD.sub(take_threshold, text))
    key = _key(template)
    strict, nonstrict = _STRICT.search(template), _NONSTRICT.search(template)
    if (strict or nonstrict) and not thresholds and not years:
        words = sorted(w for w in tokens(template) if w not in _COMPARISON_WORDS)
        b = base_belief("compare|" + " ".join(words))
        p = 1.0 - b if nonstrict else b
    elif thresholds or years:
        p = 1.0
        for i, th in enumerate(thresholds):
            below = _threshold_cdf(key, i, th)
            p *= (1.0 - below) if th.up else below
        if years:
            p *= _deadline_cdf(key, max(years))
    else:
        p = base_belief(key)
        if _ONE_OF_MANY.search(template) and not _is_catch_all(template):
            p *= _ONE_OF_MANY_SHRINK
    return 1.0 - p if negated else p


def _detail_factor(detail: str) -> float:
    return 0.2 + 0.65 * _unit("detail", _key(detail))


def _split_detail(text: str) -> tuple[str, str] | None:
    """The sentence without its last added detail, and the detail; None if there is none."""
    for m in reversed(list(_DETAIL.finditer(text))):
        prefix = text[: m.start()].strip()
        if len(tokens(prefix)) >= _MIN_PREFIX_WORDS:
            return prefix, text[m.start() :]
    return None


def split_compound(text: str) -> tuple[bool, str, str] | None:
    """("Both of the following happen: A, and B") -> (True, A, B); "At least one": False."""
    text = _clean(text).rstrip(".")
    for pattern, conj, sep in ((_BOTH, True, ", and "), (_EITHER, False, ", or ")):
        m = pattern.match(text)
        if m and sep in m.group("rest"):
            a, b = m.group("rest").rsplit(sep, 1)
            qual = m.group("qual").strip()
            if qual:
                a, b = f"{a} {qual}", f"{b} {qual}"
            return conj, a, b
    return None


def conjunction(pa: float, pb: float) -> float:
    """P(A and B): between independence and nesting, hence inside the Frechet bounds."""
    independent = pa * pb
    return independent + CONJUNCTION_DEPENDENCE * (min(pa, pb) - independent)


@lru_cache(maxsize=4096)
def statement_belief(text: str) -> float:
    """The belief in one statement, a function of its text only."""
    text = _clean(text)
    exact = exact_probability(text)
    if exact is not None:
        return float(exact)
    compound = split_compound(text)
    if compound is not None:
        conj, a, b = compound
        pa, pb = statement_belief(a), statement_belief(b)
        both = conjunction(pa, pb)
        return both if conj else pa + pb - both
    body = text.rstrip(".").strip()
    split = _split_detail(body)
    if split is not None:
        prefix, detail = split
        return statement_belief(prefix) * _detail_factor(detail)
    return min(1.0, max(0.0, _atomic(body)))


# ---- what only a joint prompt shows ----------------------------------------------------
_OTHER_THAN = re.compile(
    r"\b(?:other than|except(?: for)?)\s+(?P<names>.+?)\s+"
    r"(?:wins?|is|are|finishes|becomes|will|takes|tops)\b",
    re.I,
)
_NEITHER = re.compile(
    r"\bneither\s+(?P<a>.+?)\s+nor\s+(?P<b>.+?)\s+(?:wins?|is|are|finishes)\b", re.I
)
_CATCH_ALL = re.compile(
    r"\b(?:anyone else|someone else|something else|none of (?:these|the above|them)|"
    r"no one else|another (?:team|country|company|candidate|party|player))\b",
    re.I,
)
_CATCH_ALL_WORDS = frozenset(
    [
        "other",
        "than",
        "except",
        "neither",
        "nor",
        "anyone",
        "someone",
        "something",
        "else",
        "none",
        "no",
        "one",
        "another",
    ]
)
_OR_MARK = re.compile(r"\bat least one\b|\beither\b|,\s*or\b|\(or both\)", re.I)
_AND_MARK = re.compile(r"\bboth\b|\band\b", re.I)


def _names(text: str) -> list[str]:
    parts = re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", text)
    names = [re.sub(r"^(?:the)\s+", "", p.strip(), flags=re.I) for p in parts]
    return [n for n in names if n]


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _is_catch_all(text: str) -> bool:
    return bool(_OTHER_THAN.search(text) or _NEITHER.search(text) or _CATCH_ALL.search(text))


def partitions(texts: Sequence[str]) -> list[list[int]]:
    """Groups of statements that are mutually exclusive and exhaustive alternatives.

    A group is recognised by its catch-all statement ("a team other than A, B and C wins
    ...", "neither A nor B ...", "anyone else ...") and the statements of the same template
    that name one of the listed alternatives.
    """
    groups: list[list[int]] = []
    used: set[int] = set()
    token_sets = [set(tokens(t)) for t in texts]
    for i, text in enumerate(texts):
        names: list[str] = []
        if m := _OTHER_THAN.search(text):
            names = _names(m.group("names"))
        elif m := _NEITHER.search(text):
            names = _names(m.group("a")) + _names(m.group("b"))
        elif not _CATCH_ALL.search(text):
            continue
        name_words = {w for n in names for w in tokens(n)}
        frame = token_sets[i] - name_words - _CATCH_ALL_WORDS
        members = [i]
        for j, other in enumerate(texts):
            if j == i or j in used:
                continue
            if names:
                hits = [n for n in names if re.search(rf"\b{re.escape(n)}\b", other, re.I)]
                if len(hits) != 1:
                    continue
                rest = token_sets[j] - set(tokens(hits[0]))
            else:
                rest = token_sets[j] - _CATCH_ALL_WORDS
            if _jaccard(rest, frame) >= 0.5:
                members.append(j)
        if len(members) >= 3 or (len(members) == 2 and not names):
            groups.append(members)
            used.update(members)
    return groups


def find_compound(
    index: int, texts: Sequence[str], excluded: set[int]
) -> tuple[bool, int, int] | None:
    """If statement `index` reads as "A and B" / "A or B" of two others: (is_and, a, b)."""
    text = texts[index]
    is_or = _OR_MARK.search(text) is not None
    if not is_or and not _AND_MARK.search(text):
        return None
    whole = set(tokens(text))
    best: tuple[float, int, int] | None = None
    candidates = [j for j in range(len(texts)) if j != index and j not in excluded]
    for a, b in combinations(candidates, 2):
        ta, tb = set(tokens(texts[a])), set(tokens(texts[b]))
        only_a, only_b = ta - tb, tb - ta
        if not ta or not tb or not only_a or not only_b:
            continue
        cover_a, cover_b = len(ta & whole) / len(ta), len(tb & whole) / len(tb)
        distinct = (len(only_a & whole) / len(only_a), len(only_b & whole) / len(only_b))
        if min(cover_a, cover_b) < 0.75 or min(distinct) < 0.75:
            continue
        # The compound must need both parts: neither part alone covers it.
        if len(whole - ta) == 0 or len(whole - tb) == 0:
            continue
        score = cover_a + cover_b + sum(distinct)
        if best is None or score > best[0]:
            best = (score, a, b)
    if best is None:
        return None
    return (not is_or, best[1], best[2])


def joint_beliefs(texts: Sequence[str]) -> list[float]:
    """Coherent answers to statements asked together: each statement's own belief, then the
    structure visible across them (exclusive alternatives, "A and B", "A or B", added
    detail) imposed so the whole set could come from one distribution."""
    cleaned = [_clean(t) for t in texts]
    values = [statement_belief(t) for t in cleaned]
    exact = {i for i, t in enumerate(cleaned) if exact_probability(t) is not None}
    done: set[int] = set(exact)
    for group in partitions(cleaned):
        group = [i for i in group if i not in exact]
        total = sum(values[i] for i in group)
        if len(group) >= 2 and total > 0:
            for i in group:
                values[i] = values[i] / total
            done.update(group)
    for i in range(len(cleaned)):
        if i in done:
            continue
        found = find_compound(i, cleaned, done | {i})
        if found is None:
            continue
        is_and, a, b = found
        both = conjunction(values[a], values[b])
        values[i] = both if is_and else values[a] + values[b] - both
        done.add(i)
    # Added detail: a statement that extends another is never more likely than it.
    order = sorted((i for i in range(len(cleaned)) if i not in done), key=lambda i: len(cleaned[i]))
    for pos, i in enumerate(order):
        stem = cleaned[i].rstrip(".").strip()
        for j in order[pos + 1 :]:
            if cleaned[j].startswith(stem) and len(cleaned[j].rstrip(".")) > len(stem):
                values[j] = min(values[j], values[i])
    return [min(1.0, max(0.0, v)) for v in values]
