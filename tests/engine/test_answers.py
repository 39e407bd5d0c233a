"""Answer validation: the paper's strict rule, the opt-in lenient forms, and hostile replies."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.answers import SUBCAUSES, AnswerError, parse_answer

P = ("probability",)
GROUP = ("Q01", "Q02", "Q03")


def subcause(text: str, keys: tuple[str, ...] = P, mode: str = "strict") -> str:
    with pytest.raises(AnswerError) as caught:
        parse_answer(text, keys, mode)
    assert caught.value.subcause in SUBCAUSES
    return caught.value.subcause


# --------------------------------------------------------------------------- strict


def test_strict_accepts_exact_object_with_numbers() -> None:
    assert parse_answer('{"probability": 0.3500}', P) == {"probability": 0.35}
    got = parse_answer(' {"Q02": 1, "Q01": 0, "Q03": 2.5e-1}\n', GROUP)
    assert got == {"Q01": 0.0, "Q02": 1.0, "Q03": 0.25}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("probability: 0.3", "not_json"),
        ("[0.3]", "not_json"),
        ("0.3", "not_json"),
        ('```json\n{"probability": 0.3}\n```', "not_json"),
        ('Here you go: {"probability": 0.3}', "not_json"),
        ("{}", "missing_key"),
        ('{"prob": 0.3}', "missing_key"),
        ('{"probability": 0.3, "why": 0.1}', "extra_key"),
        ('{"probability": 1.0001}', "out_of_range"),
        ('{"probability": -0.01}', "out_of_range"),
        ('{"probability": 35}', "out_of_range"),
        ('{"probability": "0.3"}', "not_a_number"),
        ('{"probability": true}', "not_a_number"),
        ('{"probability": false}', "not_a_number"),
        ('{"probability": null}', "not_a_number"),
        ('{"probability": NaN}', "not_a_number"),
        ('{"probability": Infinity}', "not_a_number"),
        ('{"probability": -Infinity}', "not_a_number"),
        ('{"probability": {"value": 0.3}}', "not_a_number"),
        ('{"probability": [0.3]}', "not_a_number"),
        ('{"probability": 0.3, "probability": 0.4}', "ambiguous"),
    ],
)
def test_strict_rejections_name_their_subcause(text: str, expected: str) -> None:
    assert subcause(text) == expected


#: Around a JSON value only space, tab, LF and CR may stand (RFC 8259, section 2).
JSON_SPACE = " \t\n\r"
#: What `str.strip` also took, each refused by `json.loads`: no-break, ideographic and
#: line-separator spaces, NEL, the information separators, vertical tab and form feed.
OTHER_SPACE = "\u00a0\u3000\u2028\u2029\x85\x1c\x1d\x1e\x1f\x0b\x0c"


@pytest.mark.parametrize("space", list(OTHER_SPACE))
def test_strict_takes_json_whitespace_around_the_object_and_no_other(space: str) -> None:
    """Strict stripped the reply with `str.strip` first, so it took replies that are not valid
    JSON (the paper: "accepted only if it was a valid JSON ..."); `json.loads` is the oracle."""
    body = '{"probability": 0.5}'
    assert parse_answer(JSON_SPACE + body + JSON_SPACE[::-1], P) == {"probability": 0.5}
    for text in (space + body, body + space):
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        assert subcause(text) == "not_json"
        assert parse_answer(text, P, "lenient") == {"probability": 0.5}  # lenient's to take


@pytest.mark.parametrize("mode", ["strict", "lenient"])
@pytest.mark.parametrize(
    "literal",
    ["0e99999999999999999999", "0.000e+99999999999999999999", "-0E99999999999999999999",
     "1e-99999999999999999999", "7.5E-123456789012345678901"],
)
def test_an_exponent_past_decimals_reach_is_read_as_json_reads_it(mode: str, literal: str) -> None:
    """Exactly 0, or positive and below every float: JSON numbers in [0, 1], refused as "too
    extreme to evaluate" (Decimal takes no exponent past about 10^18)."""
    text = '{"probability": ' + literal + "}"
    assert parse_answer(text, P, mode) == json.loads(text) == {"probability": 0.0}


@pytest.mark.parametrize("mode", ["strict", "lenient"])
@pytest.mark.parametrize(
    "literal", ["-1e-99999999999999999999", "1e99999999999999999999", "-2.5E+99999999999999999999"]
)
def test_an_exponent_past_decimals_reach_outside_the_interval_is_out_of_range(
    mode: str, literal: str
) -> None:
    assert subcause('{"probability": ' + literal + "}", mode=mode) == "out_of_range"


def test_strict_grouped_keys_must_match_exactly() -> None:
    assert subcause('{"Q01": 0.1, "Q02": 0.2}', GROUP) == "missing_key"
    assert subcause('{"Q01": 0.1, "Q02": 0.2, "Q03": 0.3, "Q04": 0.4}', GROUP) == "extra_key"


# --------------------------------------------------------------------------- lenient


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('```json\n{"probability": 0.35}\n```', 0.35),
        ('Thinking done.\n{"probability": "11/36"}\nThat is my answer.', 11 / 36),
        ('{"probability": 11/36}', 11 / 36),
        ('{"probability": "35%"}', 0.35),
        ('{"probability": 35 %}', 0.35),
        ('{"probability": 1e-3}', 0.001),
        ('{"probability": "1E-3"}', 0.001),
        ('{"probability": " 0.35 "}', 0.35),
        ("{'probability': 0.35}", 0.35),
        ('{"probability": 0.35,}', 0.35),
        ('{"probability": "100%"}', 1.0),
        ('{"probability": "0/7"}', 0.0),
    ],
)
def test_lenient_reads_common_forms(text: str, value: float) -> None:
    got = parse_answer(text, P, "lenient")["probability"]
    assert got == pytest.approx(value, abs=1e-15)


def test_huge_fraction_is_computed_exactly() -> None:
    text = '{"probability": "' + "1" * 6000 + "/" + "3" * 6000 + '"}'
    assert parse_answer(text, P, "lenient")["probability"] == pytest.approx(1 / 3, abs=1e-15)
    above_one = '{"probability": "1' + "0" * 6000 + "1/1" + "0" * 6001 + '"}'
    assert subcause(above_one, mode="lenient") == "out_of_range"


def test_eleven_over_thirty_six_is_not_point_eleven() -> None:
    got = parse_answer('{"probability": "11/36"}', P, "lenient")["probability"]
    assert abs(got - 0.11) > 0.1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"probability": 0,35}', "ambiguous"),
        ('{"probability": "0,35"}', "ambiguous"),
        ('{"probability": "1/0"}', "not_a_number"),
        ('{"probability": 35}', "out_of_range"),
        ('{"probability": "35"}', "out_of_range"),
        ('{"probability": ".5.5"}', "not_a_number"),
        ('{"probability": .5.5}', "not_a_number"),
        ('{"probability": "about 0.3"}', "not_a_number"),
        ('{"probability": "0.3?"}', "not_a_number"),
        ('{"probability": "150%"}', "out_of_range"),
        ('{"probability": "-1/3"}', "out_of_range"),
        ('{"probability": "0x1p-2"}', "not_a_number"),
        ('{"probability": "½"}', "not_a_number"),
        ('{"probability": "٠.٥"}', "not_a_number"),  # Arabic-Indic digits
        ('{"probability": "０.５"}', "not_a_number"),  # fullwidth digits
        ('{"probability": "NaN"}', "not_a_number"),
        ('{"probability": inf}', "not_a_number"),
        ('{"probability": true}', "not_a_number"),
        ('{"probability": 0.3 0.4}', "not_a_number"),
        ('{"probability": 0.1} and {"probability": 0.2}', "ambiguous"),
        ('In set {B0, B1}: {"probability": 0.2}', "ambiguous"),
        ('{"probability": 0.2}}', "ambiguous"),
        ('{"probability": 0.2, "probability": 0.3}', "ambiguous"),
        ('{"probability": {"p": 0.2}}', "not_a_number"),
        ("no object here", "not_json"),
        ('{"probability" 0.2}', "not_json"),
        ('{"Q01": 0.2}', "missing_key"),
        ('{"probability": 0.2, "note": "x"}', "extra_key"),
    ],
)
def test_lenient_rejects_what_it_cannot_be_sure_of(text: str, expected: str) -> None:
    assert subcause(text, mode="lenient") == expected


@pytest.mark.parametrize("mode", ["strict", "lenient"])
@pytest.mark.parametrize(
    "text",
    [
        '{"probability": 1e999999999999999999999999999}',
        '{"probability": 1e400}',
        '{"probability": ' + "9" * 6000 + "}",
        '{"probability": "1' + "0" * 5999 + "1/1" + "0" * 6000 + '"}',
        "[" * 100_000,
        "{" * 100_000,
        '{"probability": ' + "[" * 50_000 + "]" * 50_000 + "}",
        '{"probability": "\\ud800"}',
        "\x00{\x00}",
        "",
    ],
)
def test_hostile_replies_are_rejected_not_crashing(mode: str, text: str) -> None:
    subcause(text, mode=mode)


# --------------------------------------------------------------------------- properties

# A formatting of p, returning the text and the largest error that formatting can introduce.
Formatter = Callable[[float, int], tuple[str, float]]


def _decimal(p: float, digits: int) -> tuple[str, float]:
    # + 1e-15: a tie such as 0.75 -> "0.8" errs by exactly half a unit, give or take an ulp
    return f"{p:.{digits}f}", 0.5 * 10.0**-digits + 1e-15


def _percent(p: float, digits: int) -> tuple[str, float]:
    return f"{p * 100:.{digits}f}%", 0.5 * 10.0 ** -(digits + 2) + 1e-15


def _fraction(p: float, digits: int) -> tuple[str, float]:
    approx = Fraction(p).limit_denominator(10**digits)
    return f"{approx.numerator}/{approx.denominator}", abs(float(approx) - p) + 1e-15


def _scientific(p: float, digits: int) -> tuple[str, float]:
    return f"{p:.{digits}e}", 0.5 * 10.0**-digits * p * (1 + 1e-12) + 1e-300


FORMATS: dict[str, Formatter] = {
    "decimal": _decimal,
    "percent": _percent,
    "fraction": _fraction,
    "scientific": _scientific,
}

WRAPPERS: dict[str, Callable[[str], str]] = {
    "bare_object": lambda obj: obj,
    "fenced": lambda obj: f"```json\n{obj}\n```",
    "fenced_plain": lambda obj: f"```\n{obj}\n```",
    "prose": lambda obj: f"Based on the returns, my estimate is:\n{obj}\nLet me know.",
    "fenced_in_prose": lambda obj: f"Answer below.\n```json\n{obj}\n```\nDone.",
}

probabilities = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(
    p=probabilities,
    digits=st.integers(min_value=1, max_value=9),
    form=st.sampled_from(sorted(FORMATS)),
    wrapper=st.sampled_from(sorted(WRAPPERS)),
    quoted=st.booleans(),
)
def test_lenient_round_trips_every_form(
    p: float, digits: int, form: str, wrapper: str, quoted: bool
) -> None:
    token, tolerance = FORMATS[form](p, digits)
    value = f'"{token}"' if quoted else token
    text = WRAPPERS[wrapper]('{"probability": ' + value + "}")
    got = parse_answer(text, P, "lenient")["probability"]
    assert 0.0 <= got <= 1.0
    assert math.isclose(got, p, abs_tol=tolerance), (text, got)


@given(
    p=probabilities,
    digits=st.integers(min_value=1, max_value=9),
    form=st.sampled_from(sorted(FORMATS)),
    wrapper=st.sampled_from(sorted(WRAPPERS)),
    quoted=st.booleans(),
)
def test_strict_rejects_every_lenient_only_form(
    p: float, digits: int, form: str, wrapper: str, quoted: bool
) -> None:
    token, _ = FORMATS[form](p, digits)
    value = f'"{token}"' if quoted else token
    text = WRAPPERS[wrapper]('{"probability": ' + value + "}")
    plain_json = wrapper == "bare_object" and not quoted and form in ("decimal", "scientific")
    if plain_json:
        assert math.isclose(parse_answer(text, P)["probability"], float(token))
    else:
        subcause(text, mode="strict")


@given(
    values=st.lists(probabilities, min_size=3, max_size=3),
    order=st.permutations(GROUP),
    digits=st.integers(min_value=2, max_value=6),
)
def test_grouped_answers_follow_keys_not_order(
    values: list[float], order: list[str], digits: int
) -> None:
    expected = dict(zip(GROUP, values, strict=True))
    body = ", ".join(f'"{k}": {expected[k]:.{digits}f}' for k in order)
    for mode in ("strict", "lenient"):
        got = parse_answer("{" + body + "}", GROUP, mode)
        assert set(got) == set(GROUP)
        for key in GROUP:
            assert math.isclose(got[key], expected[key], abs_tol=0.5 * 10.0**-digits)


_JSONISH = st.text(
    alphabet="{}[]\"':,.%/eE+-0123456789 \n\tprobabilityQ01٠５½truefalsenull`", max_size=80
)


@given(text=st.one_of(st.text(max_size=80), _JSONISH), mode=st.sampled_from(["strict", "lenient"]))
def test_nothing_but_answer_error_escapes(text: str, mode: str) -> None:
    try:
        got = parse_answer(text, P, mode)
    except AnswerError as exc:
        assert exc.subcause in SUBCAUSES
        return
    assert set(got) == {"probability"}
    assert 0.0 <= got["probability"] <= 1.0


@given(
    p=probabilities,
    q=probabilities,
    mode=st.sampled_from(["strict", "lenient"]),
    glue=st.sampled_from([" ", "\n", " and ", "\n```\n```json\n"]),
)
def test_two_objects_are_never_accepted(p: float, q: float, mode: str, glue: str) -> None:
    text = f'{{"probability": {p}}}{glue}{{"probability": {q}}}'
    subcause(text, mode=mode)


@given(
    whole=st.integers(min_value=0, max_value=99),
    frac=st.integers(min_value=0, max_value=999),
    quoted=st.booleans(),
)
def test_decimal_comma_is_never_misread(whole: int, frac: int, quoted: bool) -> None:
    token = f"{whole},{frac:03d}"
    value = f'"{token}"' if quoted else token
    assert subcause('{"probability": ' + value + "}", mode="lenient") == "ambiguous"


# --------------------------------------------------------------------------- the fast path

_KEYS = st.lists(
    st.sampled_from(["p", "Q01", "Q02", 'a"b', "é", "x y", ""]), min_size=1, max_size=3
)
_LITERAL = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "1", "0.0", "1.0", "-0.0", "1e-3", "5E-1", "0.99999999999999999999",
                     "1.00000000000000000001", "1e400", "true", "null", '"0.5"', "[0.5]", "NaN",
                     "Infinity", "0.5%", "1/3", "0,5", ".5"]),
)


@st.composite
def _replies(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Objects close to a plain answer: right or wrong keys, duplicates, edge literals, text
    around them, odd spacing."""
    import json

    keys = draw(_KEYS)
    written = draw(st.one_of(st.just(keys), _KEYS))
    colons = st.sampled_from([":", " : ", ":\n"])
    pairs = [
        json.dumps(k, ensure_ascii=draw(st.booleans())) + draw(colons) + draw(_LITERAL)
        for k in written
    ]
    text = "{" + draw(st.sampled_from([",", ", ", " ,\n"])).join(pairs) + "}"
    return draw(st.sampled_from(["", " ", "\n", "Answer: ", "```json\n"])) + text + draw(
        st.sampled_from(["", "\n", " thanks", "\n```"])), keys


def _outcome(parse: Callable[[], dict[str, float]]) -> dict[str, float] | str:
    try:
        return parse()
    except AnswerError as exc:
        return exc.subcause


@given(reply=_replies(), mode=st.sampled_from(["strict", "lenient"]))
def test_the_plain_reply_path_decides_as_each_mode_does(
    reply: tuple[str, list[str]], mode: str
) -> None:
    """`parse_answer` reads plain replies without the mode's parser: it must agree with it on
    every reply, values and subcauses alike."""
    from engine.answers import _lenient, _strict

    text, keys = reply
    full = _strict if mode == "strict" else _lenient
    got = _outcome(lambda: parse_answer(text, keys, mode))
    want = _outcome(lambda: full(text, keys))
    assert got == want


def test_the_plain_path_takes_only_plain_replies() -> None:
    from engine.answers import _plain_answer

    assert _plain_answer('{"probability": 0.2998}', ["probability"]) == {"probability": 0.2998}
    assert _plain_answer(' {"b": 1e-3, "a": 0.5}\n', ["a", "b"]) == {"a": 0.5, "b": 0.001}
    for text in ('{"p": 0}', '{"p": 1.0}', '{"p": "0.5"}', '{"p": 0.5, "p": 0.5}',
                 '{"p": 0.5, "q": 0.5}', '```json\n{"p": 0.5}\n```', '{"p": NaN}', "[0.5]",
                 '{"\\u0070": 0.4, "p": 0.5}', '{"p": 0.4, "p": 0.5, "q": 0.6}'):
        assert _plain_answer(text, ["p"]) is None, text
    # orjson keeps the last of duplicate keys: the same key twice must still not pass.
    assert _plain_answer('{"p": 0.4, "p": 0.5}', ["p", "q"]) is None


@given(
    digits=st.text("0123456789", min_size=1, max_size=40),
    exponent=st.one_of(st.just(""), st.integers(-330, 0).map(lambda e: f"e{e}")),
)
def test_the_plain_path_reads_a_literal_as_float_does(digits: str, exponent: str) -> None:
    """The values stored are the correctly rounded float of the literal, as the standard
    library's parser gave them before the plain path read replies with orjson."""
    from engine.answers import _plain_answer

    literal = f"0.{digits}{exponent}"
    value = float(literal)
    got = _plain_answer(f'{{"p": {literal}}}', ["p"])
    assert got == ({"p": value} if 0.0 < value < 1.0 else None)
    assert got is None or type(got["p"]) is float
