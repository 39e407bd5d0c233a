"""`dutchbook check FILE`: score one set of stated probabilities, no campaign needed.

The input (TOML, or JSON when the name ends in `.json`) has one of two forms:

- propositional: `variables = ["a", ...]`, optional `constraints = ["formula", ...]`, and
  `[[events]]` with `id`, `formula`, `p` (optional `text`);
- explicit atoms: `atoms = m` and `[[events]]` with `id`, `atoms` (0-based indices of the
  atoms where the event holds), `p` (optional `text`).

Everything is validated before any LP is solved, and every problem is reported as one line
naming the file (and the event), because this is the command a newcomer runs first.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import numpy as np
import numpy.typing as npt
import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.console_tables import print_whole
from panels import toml_text
from panels.algebra import Panel, PanelTooLarge
from panels.events import Event
from panels.formula import (
    RESERVED,
    And,
    Formula,
    FormulaError,
    parse,
    term_count,
    truth_table,
    truth_tables,
)
from panels.input_files import (
    CHECK_INPUT_MAX_BYTES,
    ID_MAX,
    InputFileError,
    composed,
    has_control,
    invisible_character,
    read_input_file,
    read_input_stream,
)
from runs.commands._errors import EXIT_UNCERTIFIED, fail
from runs.input_kind import not_probabilities, spec_or_probabilities
from runs.output import print_text, stdout_console

FloatArray = npt.NDArray[np.float64]

#: Stakes smaller than this are solver noise, not part of the book.
STAKE_EPSILON = 1e-9
#: The most variables a propositional input may name (2^20 worlds).
MAX_VARIABLES = 20
#: The most (formula, world) truth values a file may ask for (a byte each: 256 MiB), checked
#: before any is computed: 20 variables and a few hundred events would otherwise fill memory
#: before the LP's own limit below could be checked.
MAX_TRUTH_VALUES = 2**28
#: The most terms (variables and operators) of all formulas times the worlds they are
#: evaluated in: 32,768 terms over 2^20 worlds, about a second. The truth values alone do
#: not bound the work: 255 events, each `exactly_one` of 2,840 variables (10,000
#: characters), took four minutes before evaluation was packed into bits, 8 s after.
MAX_TERM_WORLDS = 2**35
#: The most (event, atom) pairs solved as one LP. The LP's memory grows with them: measured
#: here, 10 million dense pairs (1,000 events over 10,000 atoms) took 1.7 GB and 18 s, 22.7
#: million (300 events over 75,545 atoms) 3.6 GB and 22 s, and 300 events over 2^20
#: atoms ran a 24 GB machine out of memory after three minutes.
MAX_LP_PAIRS = 20_000_000
#: The most atoms a file may list by hand (`"atoms"`); the refusal names it, since a count
#: above it is still a positive whole number.
MAX_ATOMS = 1_000_000


class Norm(enum.StrEnum):
    inf = "inf"
    l1 = "l1"


class CheckInputError(ValueError):
    """The input file cannot be scored as written (one line, names the file)."""


@dataclass(frozen=True)
class CheckInput:
    """A validated input: the panel, the stated probabilities, and how to name an atom."""

    panel: Panel
    probs: FloatArray
    describe_atom: Callable[[int], str]
    #: What the file counts the panel's atoms out of: its "atom"s (listed by hand) or its
    #: variables' "possible world"s (`_atoms_words`).
    unit: str = "atom"


# -- reading and validating ------------------------------------------------------------
#: The FILE that names standard input, as for `cat` (`./-` is a file so named).
STDIN_NAME = "-"


def _read(path: Path, *, stdin: bool) -> bytes:
    """The bytes of `path`, or of standard input: `check -` said "-: no such file"."""
    if not stdin:
        return read_input_file(path, CHECK_INPUT_MAX_BYTES)
    if sys.stdin is None:  # started with its descriptor 0 closed
        raise InputFileError("standard input is closed")
    return read_input_stream(sys.stdin.buffer, CHECK_INPUT_MAX_BYTES)


def _decode(path: Path, *, stdin: bool) -> dict[str, Any]:
    name = str(path)
    try:
        data = _read(path, stdin=stdin)
    except InputFileError as error:
        raise CheckInputError(f"{name}: {error}") from None
    except FileNotFoundError:
        raise CheckInputError(f"{name}: no such file") from None
    except IsADirectoryError:  # made a folder after `read_input_file` looked: its words
        raise CheckInputError(f"{name}: is a folder, not a file") from None
    except OSError as error:
        raise CheckInputError(f"{name}: cannot read ({error.strerror})") from None
    is_json = _is_json(path, data)
    try:
        text = data.decode("utf-8") if is_json else toml_text.decode(data)
        del data  # the bytes go before the values are built: one copy of the text at a time
        raw = _json_document(name, text) if is_json else toml_text.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        detail = " ".join(str(error).split())
        kind = "JSON" if is_json else "TOML"
        raise CheckInputError(f"{name}: not valid {kind} ({detail})") from None
    if not isinstance(raw, dict):
        raise CheckInputError(f"{name}: the top level must be an object/table")
    return raw


def _is_json(path: Path, data: bytes) -> bool:
    """JSON by its name's `.json`, or, for a name that says neither (a pipe:
    `dutchbook check <(make-forecasts)` reads `/dev/fd/63`), by its first character: a JSON
    object opens with `{`, which no TOML document does. JSON from a pipe was read as TOML."""
    suffix = path.suffix.lower()
    if suffix in (".json", ".toml"):
        return suffix == ".json"
    return _OPENS_AN_OBJECT.match(data) is not None


_OPENS_AN_OBJECT = re.compile(rb"[ \t\r\n]*\{")


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _half_surrogate(value: object) -> str | None:
    """A code point U+D800..U+DFFF in a string, named `U+D800`: `json` reads an escape such
    as \\ud800 without its other half as one; no terminal or UTF-8 file can take it."""
    if not isinstance(value, str) or value.isascii():
        return None
    found = _SURROGATE.search(value)
    return None if found is None else f"U+{ord(found.group()):04X}"


def _json_document(name: str, text: str) -> Any:
    """The JSON text's values, read once, by `json`.

    A JSON object naming one key twice is refused, as TOML refuses it: JSON readers keep
    the last value without a word, so `{"p": 0.3, "p": 0.9}` would be scored at 0.9 whatever
    the writer meant. Read by orjson, and again by `json` to see such keys, a file of atom
    indices took 15 times its size in memory (a 64 MiB one 950 MB; the most accepted, 512
    MiB, some 7.5 GB): orjson alone peaked at 930 MB reading it, `json` at 400 MB. Read
    once by `json` (and its indices marked in chunks, `_mark_atoms`), `check` of that file
    peaks at 360 MB. What orjson refused is refused here too: NaN and Infinity, a string
    holding half a surrogate pair (no terminal or UTF-8 file takes it), a byte order mark,
    an integer `int()` does not convert, nesting too deep.
    """

    def refuse(what: str) -> NoReturn:
        raise CheckInputError(f"{name}: not valid JSON ({what})")

    def one_of_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, value in pairs:
            if key in seen:
                refuse(f"the key {key!r} twice in one object")
            seen.add(key)
            for string in (key, value):
                half = _half_surrogate(string)
                if half is not None:
                    refuse(f"a string holding {half}, half a surrogate pair, not a character")
        return dict(pairs)

    def no_constant(word: str) -> NoReturn:
        refuse(f"{word} is not a JSON number")

    if text.startswith("\ufeff"):
        refuse("a byte order mark (U+FEFF) at the start: JSON has none; save the file without")
    try:
        return json.loads(text, object_pairs_hook=one_of_each, parse_constant=no_constant)
    except RecursionError:  # json's C reader stops near Python's recursion limit
        refuse("nested too deeply")
    except (CheckInputError, json.JSONDecodeError):
        raise
    except ValueError:  # int() of a number of more digits than it converts (4,300)
        refuse(f"an integer of more than {sys.get_int_max_str_digits():,} digits")


def _probability(name: str, event_id: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CheckInputError(f"{name}: event {event_id!r}: 'p' must be a number, not {value!r}")
    p = toml_text.finite(value)
    if p is None or not 0.0 <= p <= 1.0:
        shown = value if p is not None or isinstance(value, float) else "an integer that large"
        raise CheckInputError(f"{name}: event {event_id!r}: p = {shown} is outside [0, 1]")
    return p + 0.0  # -0.0 read as 0.0, as a model's answer is: it printed as "-0.0000"


def _checked_event_id(where: str, event_id: object) -> str:
    """An id as every table prints it: an escape would reach the terminal, and ids that
    differ only by something unseen (a zero-width space, a trailing space) would read as one
    event while scored as two."""
    if not isinstance(event_id, str) or not event_id.strip():
        raise CheckInputError(f"{where} must be a non-empty string")
    if has_control(event_id):
        raise CheckInputError(f"{where} must be one line without control characters")
    invisible = invisible_character(event_id)
    if invisible is not None:
        raise CheckInputError(
            f"{where} holds {invisible}, an invisible character; leave it out"
        )
    if event_id != event_id.strip():
        raise CheckInputError(f"{where} must have no leading or trailing spaces")
    if len(event_id) > ID_MAX:  # printed whole in every table
        raise CheckInputError(f"{where} must be at most {ID_MAX} characters, not {len(event_id):,}")
    return event_id


def _event_tables(name: str, raw: Mapping[str, Any], shape_key: str) -> list[dict[str, Any]]:
    """The `[[events]]` tables, with ids checked and unknown keys rejected."""
    events = raw.get("events")
    if not isinstance(events, list) or not events:
        raise CheckInputError(f"{name}: 'events' must be a non-empty list of tables")
    allowed = {"id", "p", "text", shape_key}
    seen: set[str] = set()
    forms: dict[str, str] = {}  # each id's NFC form: "café" twice, as U+00E9 and e + U+0301
    for n, entry in enumerate(events):
        if not isinstance(entry, dict):
            raise CheckInputError(f"{name}: event {n + 1} must be a table/object")
        event_id = _checked_event_id(f"{name}: event {n + 1}: 'id'", entry.get("id"))
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise CheckInputError(f"{name}: event {event_id!r}: unknown key {unknown[0]!r}")
        for key in ("p", shape_key):
            if key not in entry:
                raise CheckInputError(f"{name}: event {event_id!r}: missing key {key!r}")
        if "text" in entry and not isinstance(entry["text"], str):
            raise CheckInputError(f"{name}: event {event_id!r}: 'text' must be a string")
        if event_id in seen:
            raise CheckInputError(f"{name}: duplicate event id {event_id!r}")
        seen.add(event_id)
        if (other := forms.setdefault(composed(event_id), event_id)) != event_id:
            raise CheckInputError(
                f"{name}: event ids written {other!a} and {event_id!a}: one id in two Unicode "
                "forms, drawn alike in every table"
            )
    return events


def _formula(name: str, where: str, text: object, variables: tuple[str, ...]) -> Formula:
    if not isinstance(text, str):
        raise CheckInputError(f"{name}: {where}: the formula must be a string")
    try:
        return parse(text, variables)
    except FormulaError as error:
        raise CheckInputError(f"{name}: {where}: {error}") from None


def _propositional(name: str, raw: Mapping[str, Any]) -> CheckInput:
    variables = raw.get("variables")
    if not isinstance(variables, list) or not variables:
        raise CheckInputError(f"{name}: 'variables' must be a non-empty list of names")
    for variable in variables:
        valid = isinstance(variable, str) and variable.isidentifier() and variable.isascii()
        if not valid or variable in RESERVED:
            raise CheckInputError(f"{name}: {variable!r} is not a valid variable name")
    if len(set(variables)) != len(variables):
        raise CheckInputError(f"{name}: 'variables' repeats a name")
    if len(variables) > MAX_VARIABLES:
        raise CheckInputError(
            f"{name}: {len(variables)} variables; at most {MAX_VARIABLES} are supported"
        )
    names = tuple(variables)
    constraints_raw = raw.get("constraints", [])
    if not isinstance(constraints_raw, list):
        raise CheckInputError(f"{name}: 'constraints' must be a list of formulas")
    constraints = [
        _formula(name, f"constraint {n + 1}", text, names) for n, text in enumerate(constraints_raw)
    ]
    tables = _event_tables(name, raw, "formula")
    formulas_count = len(constraints) + len(tables)
    _within_truth_values(name, formulas_count, 1 << len(names), "formulas", "possible worlds")
    terms = _Terms(name, 1 << len(names))
    for n, constraint in enumerate(constraints):
        terms.add(constraint, f"constraint {n + 1}")
    events, formulas, probs = [], [], []
    for entry in tables:
        formula = _formula(name, f"event {entry['id']!r}", entry["formula"], names)
        terms.add(formula, f"event {entry['id']!r}")
        text = entry.get("text", entry["formula"])
        events.append(Event(entry["id"], text, formula.evaluate))
        formulas.append(formula)
        probs.append(_probability(name, entry["id"], entry["p"]))
    holds, world = _truth_tables(names, constraints, formulas)
    try:
        panel = Panel.from_truth_table(events, holds, world, max_pairs=MAX_LP_PAIRS)
    except PanelTooLarge as error:
        raise _too_large(name, error) from None
    except ValueError:
        raise CheckInputError(f"{name}: the constraints leave no possible world") from None

    def describe(atom: int) -> str:
        worlds = panel.atoms[atom].outcomes
        first = ", ".join(f"{k}={'T' if v else 'F'}" for k, v in worlds[0].items())
        more = len(worlds) - 1
        return first + (f" (and {more} more world{'s' if more > 1 else ''})" if more else "")

    return _checked(name, panel, probs, describe, "its formula is impossible", "possible world")


def _truth_tables(
    names: tuple[str, ...], constraints: list[Formula], formulas: list[Formula]
) -> tuple[npt.NDArray[np.bool_], Callable[[int], dict[str, bool]]]:
    """Each formula's truth in every possible world (`holds[event, world]`), and a world
    rebuilt from its position: all worlds at once, in `OutcomeSpace`'s order ({False, True}
    per variable, the last varying fastest), which `Panel.from_space` would walk one by one."""
    codes = np.arange(1 << len(names), dtype=np.uint32)
    shifts = {v: len(names) - 1 - i for i, v in enumerate(names)}
    columns = {v: ((codes >> shift) & 1).astype(bool) for v, shift in shifts.items()}
    if constraints:
        possible = truth_table(And(tuple(c.root for c in constraints)), columns)
        codes = codes[possible]
        columns = {v: column[possible] for v, column in columns.items()}
    holds = truth_tables([formula.root for formula in formulas], columns)

    def world(position: int) -> dict[str, bool]:
        code = int(codes[position])
        return {v: bool((code >> shift) & 1) for v, shift in shifts.items()}

    return holds, world


def _explicit_atoms(name: str, raw: Mapping[str, Any]) -> CheckInput:
    m = raw.get("atoms")
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_ATOMS:
        raise CheckInputError(
            f"{name}: 'atoms' must be a whole number from 1 to {MAX_ATOMS:,}, not {m!r}"
        )
    tables = _event_tables(name, raw, "atoms")
    _within_truth_values(name, len(tables), m, "events", "atoms")
    events, probs = [], []
    holds = np.zeros((len(tables), m), dtype=bool)
    for row, entry in enumerate(tables):
        event_id, members = entry["id"], entry["atoms"]
        if not isinstance(members, list):
            raise CheckInputError(f"{name}: event {event_id!r}: 'atoms' must be a list of indices")
        _mark_atoms(f"{name}: event {event_id!r}", members, m, holds[row])
        events.append(Event(event_id, entry.get("text", event_id), _member_of(holds[row])))
        probs.append(_probability(name, event_id, entry["p"]))
    try:
        panel = Panel.from_truth_table(
            events, holds, lambda position: {"atom": position}, max_pairs=MAX_LP_PAIRS
        )
    except PanelTooLarge as error:
        raise _too_large(name, error) from None

    def describe(atom: int) -> str:
        indices = [str(world["atom"]) for world in panel.atoms[atom].outcomes]
        return ("atom " if len(indices) == 1 else "atoms ") + ", ".join(indices)

    return _checked(name, panel, probs, describe, "its 'atoms' list is empty")


#: Atom indices checked and marked this many at a time: a list of 32 million, converted
#: whole, held a second 256 MB beside itself, and was checked one index at a time for 7 s.
_INDEX_CHUNK = 2**20


def _mark_atoms(where: str, members: list[Any], m: int, row: npt.NDArray[np.bool_]) -> None:
    """Mark `row[i]` for each listed index, each a whole number in 0..m-1: a chunk's types
    told by a set, its range by numpy; a chunk with a bad index is walked to name it."""
    for start in range(0, len(members), _INDEX_CHUNK):
        chunk = members[start : start + _INDEX_CHUNK]
        indices = None
        if set(map(type, chunk)) == {int}:  # a bool's type is bool
            with contextlib.suppress(OverflowError):
                indices = np.array(chunk, dtype=np.int64)
        if indices is None or indices.min() < 0 or indices.max() >= m:
            for index in chunk:
                if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < m:
                    raise CheckInputError(f"{where}: atom index {index!r} is not in 0..{m - 1}")
            raise AssertionError("a chunk of atom indices refused with none out of place")
        row[indices] = True


def _member_of(row: npt.NDArray[np.bool_]) -> Callable[[Mapping[str, Any]], bool]:
    """Whether an atom is the event's, read from its row of `holds` (a set of a million
    listed indices took some 40 MB an event)."""
    return lambda world: bool(row[world["atom"]])


def _within_truth_values(name: str, rows: int, worlds: int, what: str, over: str) -> None:
    """Refuse, before computing any, more truth values than `MAX_TRUTH_VALUES`."""
    if rows * worlds > MAX_TRUTH_VALUES:
        raise CheckInputError(
            f"{name}: {rows:,} {what} over {worlds:,} {over} are {rows * worlds:,} truth values; "
            f"check computes at most {MAX_TRUTH_VALUES:,} (use fewer {what} or "
            f"{'variables' if over == 'possible worlds' else 'atoms'})"
        )


class _Terms:
    """The formulas' terms (variables and operators) counted as each is parsed, refused once
    they times the worlds exceed `MAX_TERM_WORLDS`: before any is evaluated, and before the
    rest of a file too long for it is parsed."""

    def __init__(self, name: str, worlds: int) -> None:
        self.name, self.worlds, self.count = name, worlds, 0

    def add(self, formula: Formula, where: str) -> None:
        self.count += term_count(formula.root)
        if self.count * self.worlds > MAX_TERM_WORLDS:
            raise CheckInputError(
                f"{self.name}: {where}: formulas of {self.count:,} terms (variables and "
                f"operators) so far, over {self.worlds:,} possible worlds, are "
                f"{self.count * self.worlds:,} term evaluations; check does at most "
                f"{MAX_TERM_WORLDS:,} (use shorter formulas, fewer events or fewer variables)"
            )


def _too_large(name: str, error: PanelTooLarge) -> CheckInputError:
    pairs = error.n_events * error.n_atoms
    return CheckInputError(
        f"{name}: {error} are {pairs:,} event-atom pairs, more than check solves as one LP "
        f"({MAX_LP_PAIRS:,}, a few GB of memory); use fewer events or fewer distinct worlds"
    )


def _checked(
    name: str,
    panel: Panel,
    probs: list[float],
    describe: Callable[[int], str],
    why: str,
    unit: str = "atom",
) -> CheckInput:
    impossible = panel.impossible()  # the rule a family file is refused by, too
    if impossible:
        raise CheckInputError(f"{name}: event {impossible[0]!r} holds in no atom ({why})")
    return CheckInput(panel, np.asarray(probs, dtype=np.float64), describe, unit)


def read_input(path: Path, *, stdin: bool = False) -> CheckInput:
    """Decode and validate a check file, or standard input (`stdin`, named `path` in
    messages); raises `CheckInputError` with a one-line message."""
    name = str(path)
    raw = _decode(path, stdin=stdin)
    if "atoms" in raw and "variables" in raw:
        raise CheckInputError(f"{name}: give either 'variables' or 'atoms', not both")
    form = "atoms" if "atoms" in raw else "variables"
    allowed = {"atoms", "events"} if form == "atoms" else {"variables", "constraints", "events"}
    unknown = sorted(set(raw) - allowed)
    if unknown and spec_or_probabilities(raw) == "spec":
        raise CheckInputError(f"{name}: {not_probabilities(name)}")
    if unknown:
        raise CheckInputError(
            f"{name}: unknown key {unknown[0]!r} (this file's keys: {', '.join(sorted(allowed))})"
        )
    if form == "atoms":
        return _explicit_atoms(name, raw)
    if "variables" not in raw:
        raise CheckInputError(f"{name}: missing key 'variables' (or 'atoms')")
    return _propositional(name, raw)


# -- the report ------------------------------------------------------------------------
def atom_payoffs(incidence: npt.ArrayLike, probs: FloatArray, stakes: FloatArray) -> FloatArray:
    """Net payoff of the whole book in each atom: sum_i b_i (M_ij - p_i)."""
    matrix = np.asarray(incidence, dtype=np.float64)
    return np.asarray(stakes @ (matrix - probs[:, None]), dtype=np.float64)


def book_rows(
    incidence: npt.ArrayLike, probs: FloatArray, stakes: FloatArray
) -> tuple[int, list[tuple[int, float]]]:
    """The worst atom for the bookie and each traded contract's net payoff there.

    A contract bought at stake b > 0 costs b * p and pays b if its event happens; sold
    (b < 0), the bookie receives |b| * p and pays |b| if it happens. Its net payoff in atom j
    is b * (M_ij - p_i). The *worst atom* is the one where the whole book earns least; the
    book's guarantee is exactly its total there, so the per-contract payoffs in that atom
    add up to it, showing which trades carry the guarantee and which pay for it. That is the
    certificate's lower bound on the profit, which `dutch_books` reports as its upper bound:
    the two agree to `CERTIFY_TOLERANCE` (1e-9), not exactly.
    """
    matrix = np.asarray(incidence, dtype=np.float64)
    worst = int(np.argmin(atom_payoffs(matrix, probs, stakes)))
    rows = [  # + 0.0: selling a certain event at 1 pays -1 * 0, printed "-0.00000"
        (i, float(stakes[i] * (matrix[i, worst] - probs[i])) + 0.0)
        for i in range(len(probs))
        if abs(stakes[i]) > STAKE_EPSILON
    ]
    return worst, rows


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _atoms_words(data: CheckInput) -> str:
    """The panel's atoms counted, and where the file gave more (atoms or possible worlds no
    event tells apart, merged into one atom), how many it gave: examples/atoms.json, which
    declares 4 atoms, read "3 atoms" with no word why."""
    atoms = data.panel.n_atoms
    given = sum(len(atom.positions) for atom in data.panel.atoms)
    if given == atoms:
        return _count(atoms, "atom")
    of = f"{given:,} given" if data.unit == "atom" else f"{given:,} {data.unit}s"
    merged = data.unit.split()[-1]  # "worlds no event tells apart", not "possible worlds ..."
    return f"{_count(atoms, 'atom')} (of {of}; {merged}s no event tells apart are merged)"


def _as_dict(ids: tuple[str, ...], values: FloatArray) -> dict[str, float | None]:
    return {i: (None if math.isnan(v) else float(v)) for i, v in zip(ids, values, strict=True)}


#: Decimals a profit or a payoff is printed to (`_money`).
_MONEY_DECIMALS = 5


def _money(value: float, *, signed: bool = False) -> str:
    """A profit or payoff to `_MONEY_DECIMALS` places, or in scientific notation when it is
    not zero but would round to zero there: a profit of 1e-10 read "0.00000" beside its book,
    or, before the verdict took scoring's rule, beside "coherent"."""
    sign = "+" if signed else ""
    if value != 0 and abs(value) < 0.5 * 10.0**-_MONEY_DECIMALS:
        return f"{value:{sign}.2e}"
    return f"{value:{sign}.{_MONEY_DECIMALS}f}"


def _print_book(console: Console, data: CheckInput, profit: float, stakes: FloatArray) -> None:
    """The Dutch book, each traded contract's payoff in its worst atom, and their total: what
    the book earns, which may fall short of the profit (`_say_the_bound`)."""
    worst, rows = book_rows(data.panel.incidence, data.probs, stakes)
    earned = math.fsum(payoff for _, payoff in rows)
    table = Table(title="Dutch book (guaranteed profit in every atom)")
    for column in ("event", "action", "stake", "price", "payoff in worst atom"):
        table.add_column(column, justify="left" if column in ("event", "action") else "right")
    for i, payoff in rows:
        action = "buy" if stakes[i] > 0 else "sell"
        table.add_row(Text(data.panel.ids[i]), action, f"{abs(stakes[i]):.4f}",
                      f"{data.probs[i]:.4f}", _money(payoff, signed=True))  # fmt: skip
    table.add_section()
    table.add_row("total", "", f"{np.abs(stakes).sum():.4f}", "", _money(earned, signed=True))
    print_whole(console, table)
    console.print(f"worst atom: {data.describe_atom(worst)}", markup=False)
    _say_the_bound(console, profit, earned)


def _say_the_bound(console: Console, profit: float, earned: float) -> None:
    """Say, where the two print apart, that the book earns less than the profit above it.

    The profit is the LP's upper bound (the nearest coherent forecast's distance), the book's
    guarantee its lower one, agreeing to `CERTIFY_TOLERANCE`. The total row printed the
    profit, which the rows above it did not add up to: just above the resolution a book
    earning 4.25e-09 (l1 norm) was totalled +4.32e-09, 1.8% more than it wins, and up to 6%
    in a search of small random sets."""
    from scoring.dutch_book import CERTIFY_TOLERANCE  # loaded by now: `check` solved with it

    if _money(earned, signed=True) == _money(profit, signed=True):
        return
    console.print(
        f"the book earns {_money(earned)} in its worst atom; the profit above, "
        f"{_money(profit)}, is the LP's upper bound (the two agree to the certificate's "
        f"resolution, {CERTIFY_TOLERANCE:g})",
        markup=False,
    )


def _print_forecasts(
    console: Console,
    data: CheckInput,
    norm: str,
    coherent: FloatArray | None,
    repaired: FloatArray | None,
) -> None:
    """The stated probabilities beside the nearest coherent forecast (None: a set scored
    coherent, its own) and the repair (None: not asked for); nothing when neither is shown."""
    if coherent is None and repaired is None:
        return
    nearest = f"Nearest coherent forecast ({norm} distance)"
    table = Table(title="Euclidean repair" if coherent is None else nearest)
    columns = {"stated": data.probs, "coherent": coherent, "repaired": repaired}
    shown = {name: values for name, values in columns.items() if values is not None}
    table.add_column("event", justify="left")
    for name in shown:
        table.add_column(name, justify="right")
    for i, event_id in enumerate(data.panel.ids):
        table.add_row(Text(event_id), *(f"{values[i]:.4f}" for values in shown.values()))
    print_whole(console, table)
    if repaired is not None:
        moved = float(np.linalg.norm(repaired - data.probs))
        console.print(f"repair: Euclidean projection onto the coherent set moved p by {moved:.5f}")


def _print_report(
    data: CheckInput,
    norm: str,
    profit: float,
    stakes: FloatArray,
    coherent: FloatArray,
    repaired: FloatArray | None,
) -> None:
    # loaded by now: `check` solved with them
    from scoring.dutch_book import CERTIFY_TOLERANCE, ROUNDING_PROFIT

    console = stdout_console(highlight=False)
    panel = data.panel
    norm_words = "total stake at most 1" if norm == "inf" else "at most 1 of each contract"
    console.print(
        f"{_count(len(panel.ids), 'event')}, {_atoms_words(data)}; norm {norm} "
        f"({norm_words})\n"
        f"Dutch-book profit: [bold]{_money(profit)}[/]"
    )
    # Scoring's rule, not the stakes' noise cutoff: a profit of 1e-10 (a sum of 1 + 2e-10)
    # read "coherent" here and scored above 0 in `--json` and in a campaign's scores. Such a
    # set's nearest coherent forecast is itself: the mixture's rounding read 0.5000 beside
    # 0.5000 under "coherent".
    if profit <= ROUNDING_PROFIT:
        console.print(
            "[green]coherent[/]: no Dutch book exists against these probabilities "
            "(they are their own nearest coherent forecast)"
        )
        _print_forecasts(console, data, norm, None, repaired)
        return
    # The profit is the certificate's upper bound, the book its lower one, which agree only
    # to CERTIFY_TOLERANCE: below it a book of stakes 0.0, or one earning 9.93e-11 of a
    # total printed +2.36e-10, was shown as earning the profit.
    if profit <= CERTIFY_TOLERANCE:
        console.print(
            f"below the certificate's resolution ({CERTIFY_TOLERANCE:g}): the book found is "
            "not certified to earn it, so none is shown",
            markup=False,
        )
    else:
        _print_book(console, data, profit, stakes)
    _print_forecasts(console, data, norm, coherent, repaired)


def _as_scored(
    profit: float, probs: FloatArray, stakes: FloatArray, coherent: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(stakes, coherent) as the profit says: a set scored coherent (profit 0, scoring's
    `ROUNDING_PROFIT`) holds no book and is its own nearest coherent forecast. Its solver's
    book and mixture are rounding: at a profit of exactly 1e-12 `--json` gave "profit": 0.0
    beside "stakes": {"A": -0.5, "B": -0.5} and coherent values other than the stated ones.
    Here, not in `scoring.dutch_books`, whose certified stakes a campaign's scores keep."""
    from scoring.dutch_book import ROUNDING_PROFIT  # loaded by now: `check` solved with it

    if profit > ROUNDING_PROFIT:
        return stakes, coherent
    return np.where(np.isnan(stakes), np.nan, 0.0), probs.copy()


@contextlib.contextmanager
def _native_stdout_to_stderr() -> Iterator[None]:
    """Send anything native code writes to stdout (HiGHS prints a banner) to stderr.

    `--json` promises exactly one object on stdout; the solver library writes its banner
    straight to file descriptor 1, below Python, so it must be diverted at that level.
    """
    try:
        stdout_fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        saved = os.dup(stdout_fd)
    except (OSError, ValueError):  # no real stdout (embedded use): nothing to protect
        yield
        return
    sys.stdout.flush()
    try:
        os.dup2(sys.__stderr__.fileno() if sys.__stderr__ is not None else 2, stdout_fd)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, stdout_fd)
        os.close(saved)


def check(
    # A string, not a `Path`: `Path("")` is ".", and an empty argument was refused as the
    # directory "." ("error: .: is a directory, not a file").
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="probabilities (TOML or JSON); - reads stdin")
    ],
    norm: Annotated[
        Norm, typer.Option("--norm", help="inf: total stake <= 1 (paper); l1: <= 1 per contract")
    ] = Norm.inf,
    repair: Annotated[bool, typer.Option("--repair", help="also show the Euclidean repair")] = (
        False
    ),
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Score one set of stated probabilities: profit, Dutch book, nearest coherent forecast."""
    if not file:
        fail("the FILE argument is empty: name the file of probabilities to check")
    try:
        # `file`, not its Path: Path("./-") is "-", and `./-` names a file so called.
        data = read_input(Path(file), stdin=file == STDIN_NAME)
    except CheckInputError as error:
        fail(str(error))
    try:
        with _native_stdout_to_stderr():
            import scoring  # deferred: keeps `--help` fast and input errors solver-free

            result = scoring.dutch_books(data.panel.incidence, data.probs, norm=norm.value)
            repaired = None
            if repair:
                projected = scoring.repair(data.panel.incidence, data.probs)
                repaired = np.asarray(projected, dtype=np.float64)
    except ValueError as error:
        fail(f"{file}: {' '.join(str(error).split())}", code=1)
        return
    except RuntimeError as error:
        from scoring.dutch_book import UncertifiedError  # loaded by now, or failing as scoring did

        if not isinstance(error, UncertifiedError):  # repair's QP, a RecursionError: not this
            raise
        fail(f"{file}: {error}: no profit is printed rather than one not certified exact; "
             "please report it with this file", code=EXIT_UNCERTIFIED)  # fmt: skip
        return
    profit = float(result.profit[0])
    stakes, coherent = _as_scored(
        profit,
        data.probs,
        np.asarray(result.stakes[0], dtype=np.float64),
        np.asarray(result.coherent[0], dtype=np.float64),
    )
    if as_json:
        ids = data.panel.ids
        payload: dict[str, Any] = {
            "norm": norm.value,
            "profit": profit,
            "stakes": _as_dict(ids, stakes),
            "coherent": _as_dict(ids, coherent),
        }
        if repaired is not None:
            payload["repaired"] = _as_dict(ids, repaired)
        print_text(orjson.dumps(payload).decode())
        return
    _print_report(data, norm.value, profit, stakes, coherent, repaired)


def register(app: typer.Typer) -> None:
    app.command(name="check")(check)
