"""The formula parser: round trips against random syntax trees, precedence, hostile input."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panels.formula import (
    FormulaError,
    Node,
    evaluate,
    parse,
    to_text,
)
from tests.panels.formula_trees import formula_trees

NAMES = ("a", "b", "c", "rain_2030")


def _trees() -> st.SearchStrategy[Node]:
    return formula_trees(NAMES)


def _assignments() -> list[dict[str, bool]]:
    rows = itertools.product((False, True), repeat=len(NAMES))
    return [dict(zip(NAMES, values, strict=True)) for values in rows]


_SYMBOLS = {" and ": " & ", " or ": " | ", "not ": "~", "->": "->"}


@given(_trees(), st.booleans())
def test_printed_trees_parse_back_to_the_same_truth_table(tree: Node, symbols: bool) -> None:
    text = to_text(tree)
    if symbols:  # the symbol aliases mean the same as the words
        for word, symbol in _SYMBOLS.items():
            text = text.replace(word, symbol)
    parsed = parse(text, NAMES)
    for assignment in _assignments():
        assert parsed.evaluate(assignment) == evaluate(tree, assignment), (text, assignment)


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("not a and b", "(not a) and b"),
        ("a or b and c", "a or (b and c)"),
        ("a and b -> c", "(a and b) -> c"),
        ("a -> b -> c", "a -> (b -> c)"),  # right-associative
        ("a | b -> c & a", "(a or b) -> (c and a)"),
        ("!a & ~b", "not a and not b"),
        ("not not a", "a"),
        (
            "exactly_one(a, b and c, not a)",
            "(a and not (b and c)) or (not a and not b) or (not a and b and not c)",
        ),
    ],
)
def test_precedence(text: str, same_as: str) -> None:
    left, right = parse(text, NAMES), parse(same_as, NAMES)
    for assignment in _assignments():
        assert left.evaluate(assignment) == right.evaluate(assignment)


def test_right_associative_implication_differs_from_left() -> None:
    formula = parse("a -> b -> c", NAMES)
    assert formula.evaluate({"a": False, "b": False, "c": False})  # a false: true
    assert not parse("(a -> b) -> c", NAMES).evaluate({"a": False, "b": False, "c": False})


def test_exactly_one() -> None:
    formula = parse("exactly_one(a, b, c)", NAMES)
    for assignment in _assignments():
        expected = [assignment["a"], assignment["b"], assignment["c"]].count(True) == 1
        assert formula.evaluate(assignment) == expected
    assert parse("exactly_one(a)", NAMES).variables == {"a"}


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("a and c", "unknown variable 'c'", 6),
        ("a +", "unexpected character '+'", 2),
        ("a and", "expected a variable", 5),
        ("(a or b", "expected ')'", 7),
        ("a b", "unexpected 'b'", 2),
        ("exactly_one()", "expected a variable", 12),
        ("", "empty formula", 0),
        ("a -> ", "expected a variable", 5),
        ("and", "expected a variable", 0),
    ],
)
def test_errors_name_the_problem_and_position(text: str, message: str, position: int) -> None:
    with pytest.raises(FormulaError) as caught:
        parse(text, ("a", "b"))
    assert message in caught.value.message
    assert caught.value.position == position
    assert str(caught.value).endswith(f"at position {position}")


HOSTILE = [
    "__import__('os')",
    "__import__('os').system('true')",
    "a +",
    "a and",
    "é",
    "a ∧ b",
    "a\u200bb",
    "ａ",
    "()",
    ")(",
    "a,b",
    "exactly_one",
    "exactly_one(a,)",
    "a -> -> b",
    "a >",
    "a - b",
    "&&",
    "a; b",
    "lambda: a",
    "(" * 5000 + "a" + ")" * 5000,
    "not " * 3000 + "a",
    "a -> " * 3000 + "a",
    "exactly_one(" * 500 + "a" + ")" * 500,
    "\x00",
    "a" * 20000,
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_raise_formula_error(text: str) -> None:
    with pytest.raises(FormulaError):
        parse(text, ("a", "b"))


_PIECES = [*"ab() &|~!-><,_éx\u00a0", "exactly_one(", " and ", " or ", "not ", "->"]


@given(st.lists(st.sampled_from(_PIECES), max_size=25).map("".join))
def test_random_strings_parse_or_raise_formula_error_only(text: str) -> None:
    try:
        formula = parse(text, ("a", "b"))
    except FormulaError as error:
        assert 0 <= error.position <= len(text)
    else:
        formula.evaluate({"a": True, "b": False})


@given(st.text(max_size=30))
def test_arbitrary_unicode_never_escapes_as_another_exception(text: str) -> None:
    with contextlib.suppress(FormulaError):
        assert parse(text, ("a", "b")).variables <= {"a", "b"}


def test_long_flat_chains_are_fine() -> None:
    formula = parse(" and ".join(["a"] * 1500), ("a",))
    assert formula.evaluate({"a": True}) and not formula.evaluate({"a": False})


@pytest.mark.parametrize(
    ("text", "truth"),
    [
        ("a and b", lambda a, b: a and b),
        ("a & b", lambda a, b: a and b),
        ("a or b", lambda a, b: a or b),
        ("a | b", lambda a, b: a or b),
        ("not a", lambda a, b: not a),
        ("~a", lambda a, b: not a),
        ("!a", lambda a, b: not a),
        ("a -> b", lambda a, b: (not a) or b),
        ("exactly_one(a, b)", lambda a, b: a != b),
        ("(a)", lambda a, b: a),
    ],
)
def test_each_operator_has_its_truth_table(text: str, truth: object) -> None:
    formula = parse(text, ("a", "b"))
    for a, b in itertools.product((False, True), repeat=2):
        assert formula.evaluate({"a": a, "b": b}) == truth(a, b), (text, a, b)  # type: ignore[operator]
