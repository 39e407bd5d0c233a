"""Propositional formulas for question families, parsed by hand and never evaluated as Python.

Family files and `dutchbook check` inputs come from users and other tools; running them
through `eval` would turn a typo into arbitrary code. The grammar is small:

    implies := disj ( "->" implies )?            right-associative, lowest precedence
    disj    := conj ( ("or" | "|") conj )*
    conj    := unary ( ("and" | "&") unary )*
    unary   := ("not" | "~" | "!") unary | atom
    atom    := IDENT | "exactly_one" "(" implies ("," implies)* ")" | "(" implies ")"

Identifiers are ASCII (``[A-Za-z_][A-Za-z0-9_]*``) and must be declared variables; the
words ``and or not exactly_one`` are reserved. Every error is a `FormulaError` carrying the
0-based character position where the parser gave up.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RESERVED = frozenset({"and", "or", "not", "exactly_one"})
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_DEPTH = 100
MAX_LENGTH = 10_000


class FormulaError(ValueError):
    """A formula could not be parsed; `position` is the 0-based offset of the problem."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.message = message
        self.position = position


# -- syntax tree -----------------------------------------------------------------------
@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class And:
    """Conjunction of two or more operands (n-ary, so long chains stay shallow)."""

    args: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Disjunction of two or more operands."""

    args: tuple[Node, ...]


@dataclass(frozen=True)
class Implies:
    left: Node
    right: Node


@dataclass(frozen=True)
class ExactlyOne:
    args: tuple[Node, ...]


Node = Var | Not | And | Or | Implies | ExactlyOne


def evaluate(node: Node, assignment: Mapping[str, bool]) -> bool:
    """Truth value of a syntax tree under an assignment of every variable it uses."""
    if isinstance(node, Var):
        return bool(assignment[node.name])
    if isinstance(node, Not):
        return not evaluate(node.operand, assignment)
    if isinstance(node, And):
        return all(evaluate(arg, assignment) for arg in node.args)
    if isinstance(node, Or):
        return any(evaluate(arg, assignment) for arg in node.args)
    if isinstance(node, Implies):
        return (not evaluate(node.left, assignment)) or evaluate(node.right, assignment)
    return sum(evaluate(arg, assignment) for arg in node.args) == 1


def truth_table(
    node: Node | Formula, columns: Mapping[str, npt.NDArray[np.bool_]]
) -> npt.NDArray[np.bool_]:
    """`evaluate` on many assignments at once: `columns` holds each variable's truth value in
    every assignment (boolean arrays of one length), the result the formula's, rule for rule
    as `evaluate` (a `dutchbook check` space of 20 variables has 2^20 worlds). A `Formula`,
    as `parse` gives it, is read by its tree (`root`): the docs name the two in a row, and the
    parsed one was an AttributeError ('Formula' object has no attribute 'args')."""
    root = node.root if isinstance(node, Formula) else node
    return np.asarray(truth_tables([root], columns)[0], dtype=np.bool_)


def truth_tables(
    nodes: Sequence[Node], columns: Mapping[str, npt.NDArray[np.bool_]]
) -> npt.NDArray[np.bool_]:
    """`truth_table` of each node, one row each (`rows[node, assignment]`).

    Evaluated on truth values packed eight to a byte, each variable packed once for all the
    nodes: an operand costs a pass over an eighth of the bytes, in place. Unpacked, a
    formula of 10,000 characters (`exactly_one` of 2,840 variables) took 0.9 s over 2^20
    worlds, each operand a fresh int32 array: 255 such events ran four minutes.
    """
    size = len(next(iter(columns.values()))) if columns else 0
    bits = _PackedColumns(columns)
    packed = np.empty((len(nodes), (size + 7) // 8), dtype=np.uint8)
    for row, node in enumerate(nodes):
        packed[row] = bits.of(node)
    return np.unpackbits(packed, axis=1, count=size).view(np.bool_)


class _PackedColumns:
    """Truth values as bits (`np.packbits`); a variable's bits are shared, never written."""

    def __init__(self, columns: Mapping[str, npt.NDArray[np.bool_]]) -> None:
        self._columns = columns
        self._packed: dict[str, npt.NDArray[np.uint8]] = {}

    def of(self, node: Node) -> npt.NDArray[np.uint8]:
        """The node's bits: a variable's shared array, or a new one the caller may change."""
        if isinstance(node, Var):
            if node.name not in self._packed:
                self._packed[node.name] = np.packbits(self._columns[node.name])
            return self._packed[node.name]
        if isinstance(node, Not):
            return ~self.of(node.operand)
        if isinstance(node, Implies):
            result = ~self.of(node.left)
            result |= self.of(node.right)
            return result
        result = self.of(node.args[0]).copy()
        if isinstance(node, And):
            for arg in node.args[1:]:
                result &= self.of(arg)
        elif isinstance(node, Or):
            for arg in node.args[1:]:
                result |= self.of(arg)
        else:  # exactly one: true once so far, and not twice
            twice, both = np.zeros_like(result), np.empty_like(result)
            for arg in node.args[1:]:
                bits = self.of(arg)
                twice |= np.bitwise_and(result, bits, out=both)
                result |= bits
            result &= ~twice
        return result


def term_count(node: Node) -> int:
    """The variables and operators of a tree (`a and not b`: three), the passes over every
    world `truth_table` makes for it."""
    if isinstance(node, Var):
        return 1
    if isinstance(node, Not):
        return 1 + term_count(node.operand)
    if isinstance(node, Implies):
        return 1 + term_count(node.left) + term_count(node.right)
    return 1 + sum(term_count(arg) for arg in node.args)


def to_text(node: Node) -> str:
    """Fully parenthesised text that `parse` reads back to the same tree."""
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Not):
        return f"not {to_text(node.operand)}"
    if isinstance(node, And):
        return "(" + " and ".join(to_text(a) for a in node.args) + ")"
    if isinstance(node, Or):
        return "(" + " or ".join(to_text(a) for a in node.args) + ")"
    if isinstance(node, Implies):
        return f"({to_text(node.left)} -> {to_text(node.right)})"
    return "exactly_one(" + ", ".join(to_text(a) for a in node.args) + ")"


def variables_of(node: Node) -> frozenset[str]:
    if isinstance(node, Var):
        return frozenset({node.name})
    if isinstance(node, Not):
        return variables_of(node.operand)
    if isinstance(node, Implies):
        return variables_of(node.left) | variables_of(node.right)
    return frozenset().union(*(variables_of(a) for a in node.args))


@dataclass(frozen=True)
class Formula:
    """A parsed formula: its source text and tree."""

    text: str
    root: Node

    def evaluate(self, assignment: Mapping[str, bool]) -> bool:
        return evaluate(self.root, assignment)

    __call__ = evaluate

    @property
    def variables(self) -> frozenset[str]:
        return variables_of(self.root)

    def __str__(self) -> str:
        return to_text(self.root)


# -- tokens ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Token:
    kind: str  # "ident", "and", "or", "not", "->", "(", ")", ",", "exactly_one", "end"
    text: str
    position: int


_SYMBOLS = {"&": "and", "|": "or", "~": "not", "!": "not", "(": "(", ")": ")", ",": ","}


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in " \t\r\n":
            i += 1
        elif text.startswith("->", i):
            tokens.append(Token("->", "->", i))
            i += 2
        elif char in _SYMBOLS:
            tokens.append(Token(_SYMBOLS[char], char, i))
            i += 1
        elif (match := IDENTIFIER.match(text, i)) is not None:
            word = match.group()
            tokens.append(Token(word if word in RESERVED else "ident", word, i))
            i = match.end()
        else:
            raise FormulaError(f"unexpected character {char!r}", i)
    tokens.append(Token("end", "", len(text)))
    return tokens


# -- parser ----------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str, variables: Collection[str]) -> None:
        self.tokens = tokenize(text)
        self.variables = variables
        self.index = 0
        self.depth = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def take(self, kind: str) -> Token:
        token = self.current
        if token.kind != kind:
            raise FormulaError(f"expected {kind!r} but found {_show(token)}", token.position)
        self.index += 1
        return token

    def nested(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FormulaError(f"formula nested more than {MAX_DEPTH} deep", token.position)

    def parse(self) -> Node:
        node = self.implies()
        if self.current.kind != "end":
            raise FormulaError(f"unexpected {_show(self.current)}", self.current.position)
        return node

    def implies(self) -> Node:
        left = self.disjunction()
        if self.current.kind == "->":
            arrow = self.take("->")
            self.nested(arrow)
            right = self.implies()
            self.depth -= 1
            return Implies(left, right)
        return left

    def disjunction(self) -> Node:
        args = [self.conjunction()]
        while self.current.kind == "or":
            self.index += 1
            args.append(self.conjunction())
        return args[0] if len(args) == 1 else Or(tuple(args))

    def conjunction(self) -> Node:
        args = [self.unary()]
        while self.current.kind == "and":
            self.index += 1
            args.append(self.unary())
        return args[0] if len(args) == 1 else And(tuple(args))

    def unary(self) -> Node:
        token = self.current
        if token.kind == "not":
            self.index += 1
            self.nested(token)
            operand = self.unary()
            self.depth -= 1
            return Not(operand)
        return self.atom()

    def atom(self) -> Node:
        token = self.current
        if token.kind == "ident":
            if token.text not in self.variables:
                raise FormulaError(f"unknown variable {token.text!r}", token.position)
            self.index += 1
            return Var(token.text)
        if token.kind == "(":
            self.index += 1
            self.nested(token)
            node = self.implies()
            self.take(")")
            self.depth -= 1
            return node
        if token.kind == "exactly_one":
            self.index += 1
            self.take("(")
            self.nested(token)
            args = [self.implies()]
            while self.current.kind == ",":
                self.index += 1
                args.append(self.implies())
            self.take(")")
            self.depth -= 1
            return ExactlyOne(tuple(args))
        found = _show(token)
        raise FormulaError(f"expected a variable, 'not' or '(' but found {found}", token.position)


def _show(token: Token) -> str:
    return "end of formula" if token.kind == "end" else repr(token.text)


def parse(text: str, variables: Collection[str]) -> Formula:
    """Parse `text` over the declared `variables`; raises `FormulaError` on any problem."""
    if not isinstance(text, str):
        raise FormulaError(f"a formula must be a string, not {type(text).__name__}", 0)
    if len(text) > MAX_LENGTH:
        raise FormulaError(f"formula longer than {MAX_LENGTH} characters", MAX_LENGTH)
    if not text.strip():
        raise FormulaError("empty formula", 0)
    return Formula(text, _Parser(text, frozenset(variables)).parse())
