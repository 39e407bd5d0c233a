"""Question families (the family benchmark's design) loaded from TOML files.

A family is a handful of statements about the same small set of possible worlds. The
worlds are the truth assignments of the family's propositional variables that satisfy its
constraints; each statement is a formula over those variables. Mistakes in a family file
change what "coherent" means, so loading is strict: every problem is reported with the
file, the statement and the position, and nothing unknown is silently ignored.

File format (one family per file)::

    id = "fed-cut"            # unique across files
    title = "..."
    shape = "threshold"       # negation | threshold | deadline | partition | conjunction | story
    control = false           # true for exact-answer controls (dice, coins, cards)
    variables = ["a", "b"]
    constraints = ["b -> a"]  # optional formulas that every world satisfies
    notes = "..."             # optional free text (sources, resolution criteria)

    [[statements]]
    id = "q1"
    text = "the question as asked"
    formula = "a"
    exact = 0.5               # optional: the known probability (controls)
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from panels import toml_text
from panels.algebra import Panel
from panels.events import Event
from panels.formula import RESERVED, Formula, FormulaError, parse
from panels.input_files import (
    ID_MAX,
    TEXT_INPUT_MAX_BYTES,
    InputFileError,
    bidi_control,
    composed,
    file_kind,
    form_clash,
    has_control,
    invisible_character,
    not_utf8,
    read_input_file,
    without_invisible,
)
from panels.space import OutcomeSpace

FAMILIES_DIR = Path(__file__).parent / "families"
SHAPES = ("negation", "threshold", "deadline", "partition", "conjunction", "story")
MAX_VARIABLES = 16  # 2^16 worlds; families are meant to be small
#: The most (statement, world) truth values a family may need, counted before any is
#: evaluated: each is evaluated in Python (about 1.2 µs here) every time the family is
#: loaded, and the family's LP grows with them. A family of 300 statements over 16
#: variables took 29 s to load and 2 GB to score one set; the shipped ones need at most 2,048.
MAX_TRUTH_VALUES = 2**20
#: The most statements a new family may have (`check_well_posed`): the joint arm asks them
#: in one prompt, whose answer must fit its output cap, and a family of 20,000 within the
#: truth-value bound was planned, asked, and took its report 300 s and 4.2 GB. The shipped
#: families have at most 8.
MAX_STATEMENTS = 100
#: The longest statement text a new design takes: one question (the shipped families' longest
#: is 259 characters), where a 200,000-character text planned as 100,268 tokens and ran.
STATEMENT_TEXT_MAX = 2000

_FAMILY_KEYS = {"id", "title", "shape", "control", "variables", "constraints", "notes",
                "statements"}  # fmt: skip
_REQUIRED_FAMILY_KEYS = ("id", "title", "shape", "variables", "statements")
_STATEMENT_KEYS = {"id", "text", "formula", "exact"}


class FamilyError(ValueError):
    """A family file is malformed; the message names file, statement and position."""

    def __init__(
        self, file: str, message: str, statement: str | None = None, position: int | None = None
    ) -> None:
        where = f"{file}: " + (f"statement {statement!r}: " if statement is not None else "")
        at = f" at position {position}" if position is not None else ""
        super().__init__(f"{where}{message}{at}")
        self.file = file
        self.statement = statement
        self.position = position


@dataclass(frozen=True)
class Statement:
    id: str
    text: str
    formula: Formula
    exact: float | None = None


@dataclass(frozen=True)
class Family:
    id: str
    title: str
    shape: str
    control: bool
    variables: tuple[str, ...]
    constraints: tuple[Formula, ...]
    statements: tuple[Statement, ...]
    notes: str = ""
    path: Path | None = field(default=None, compare=False)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.statements)

    def space(self) -> OutcomeSpace:
        """Truth assignments of the variables that satisfy every constraint."""
        return OutcomeSpace(
            {name: (False, True) for name in self.variables},
            [c.evaluate for c in self.constraints],
        )

    @cached_property
    def _panel(self) -> Panel:
        events = [Event(s.id, s.text, s.formula.evaluate, group=self.id) for s in self.statements]
        return Panel.from_space(self.space(), events)

    def panel(self) -> Panel:
        """The family's events over its worlds (computed once per family object)."""
        return self._panel

    @property
    def exact(self) -> dict[str, float]:
        """The known probabilities of the statements that have one."""
        return {s.id: s.exact for s in self.statements if s.exact is not None}


#: Keys shown in tables, figures and messages: an escape sequence in them would reach the
#: terminal, a line break would split a one-line message.
_ONE_LINE_KEYS = frozenset({"id", "title"})
#: The longest title: one line of the report, like a model's `about` (`runs.spec.ABOUT_MAX`).
TITLE_MAX = 200


def _text(file: str, raw: Mapping[str, Any], key: str, statement: str | None = None) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise FamilyError(file, f"{key!r} must be a non-empty string", statement)
    if key in _ONE_LINE_KEYS:
        _check_shown(file, key, value, statement)
    return value


def _check_shown(file: str, key: str, value: str, statement: str | None) -> None:
    """An id or title as every table prints it: one line, nothing invisible (two ids that
    differ only by a zero-width space or a trailing space would read as one), not too long.
    A title, free text, may join emoji or letters (`invisible_character`)."""
    if has_control(value):
        raise FamilyError(file, f"{key!r} must be one line without control characters", statement)
    invisible = invisible_character(value, joiners_in_words=key == "title")
    if invisible is not None:
        raise FamilyError(
            file,
            f"{key!r} holds {invisible}, an invisible format character; leave it out (it is "
            f"printed in every table, where it cannot be seen)",
            statement,
        )
    limit = ID_MAX if key == "id" else TITLE_MAX
    if len(value) > limit:
        raise FamilyError(
            file, f"{key!r} must be at most {limit} characters, not {len(value):,}", statement
        )
    if key == "id" and value != value.strip():
        raise FamilyError(
            file,
            "'id' must have no leading or trailing spaces (\"q1\" and \"q1 \" would read as "
            "one in every table)",
            statement,
        )


def _formula(file: str, text: object, variables: tuple[str, ...], statement: str | None,
             what: str) -> Formula:  # fmt: skip
    if not isinstance(text, str):
        raise FamilyError(file, f"{what} must be a string", statement)
    try:
        return parse(text, variables)
    except FormulaError as error:
        message = error.message if statement is not None else f"{what}: {error.message}"
        raise FamilyError(file, message, statement, error.position) from None


def family_from_mapping(raw: Mapping[str, Any], file: str = "<family>") -> Family:
    """Validate an already-decoded family table (the TOML file's content)."""
    unknown = sorted(set(raw) - _FAMILY_KEYS)
    if unknown:
        raise FamilyError(file, f"unknown key {unknown[0]!r}")
    for key in _REQUIRED_FAMILY_KEYS:
        if key not in raw:
            raise FamilyError(file, f"missing key {key!r}")
    family_id = _text(file, raw, "id")
    title = _text(file, raw, "title")
    shape = raw["shape"]
    if shape not in SHAPES:
        raise FamilyError(file, f"unknown shape {shape!r} (expected one of {', '.join(SHAPES)})")
    control = raw.get("control", False)
    if not isinstance(control, bool):
        raise FamilyError(file, "'control' must be true or false")
    notes = raw.get("notes", "")
    if not isinstance(notes, str):
        raise FamilyError(file, "'notes' must be a string")

    variables = raw["variables"]
    if not isinstance(variables, list) or not variables:
        raise FamilyError(file, "'variables' must be a non-empty list of names")
    seen: set[str] = set()
    for name in variables:
        if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
            raise FamilyError(file, f"variable {name!r} is not a valid name")
        if name in RESERVED:
            raise FamilyError(file, f"variable {name!r} is a reserved word")
        if name in seen:
            raise FamilyError(file, f"duplicate variable {name!r}")
        seen.add(name)
    if len(variables) > MAX_VARIABLES:
        raise FamilyError(file, f"{len(variables)} variables; at most {MAX_VARIABLES} allowed")
    names = tuple(variables)

    raw_constraints = raw.get("constraints", [])
    if not isinstance(raw_constraints, list):
        raise FamilyError(file, "'constraints' must be a list of formulas")
    constraints = tuple(
        _formula(file, text, names, None, f"constraint {n + 1}")
        for n, text in enumerate(raw_constraints)
    )

    raw_statements = raw["statements"]
    if not isinstance(raw_statements, list) or not raw_statements:
        raise FamilyError(file, "'statements' must be a non-empty list of tables")
    statements: list[Statement] = []
    statement_ids: set[str] = set()
    for n, entry in enumerate(raw_statements):
        if not isinstance(entry, dict):
            raise FamilyError(file, f"statement {n + 1} must be a table")
        label = entry.get("id") if isinstance(entry.get("id"), str) else f"#{n + 1}"
        unknown = sorted(set(entry) - _STATEMENT_KEYS)
        if unknown:
            raise FamilyError(file, f"unknown key {unknown[0]!r}", label)
        statement_id = _text(file, entry, "id", label)
        if statement_id in statement_ids:  # as written: two Unicode forms, `check_one_form`
            raise FamilyError(file, "duplicate statement id", statement_id)
        statement_ids.add(statement_id)
        text = _text(file, entry, "text", statement_id)
        if "formula" not in entry:
            raise FamilyError(file, "missing key 'formula'", statement_id)
        formula = _formula(file, entry["formula"], names, statement_id, "formula")
        exact = _exact(file, entry.get("exact"), statement_id)
        statements.append(Statement(statement_id, text, formula, exact))
    values = (len(constraints) + len(statements)) << len(names)
    if values > MAX_TRUTH_VALUES:
        raise FamilyError(
            file,
            f"{len(statements)} statements and {len(constraints)} constraints over "
            f"{len(names)} variables need {values:,} truth values; at most "
            f"{MAX_TRUTH_VALUES:,} (a family is a handful of statements over few variables)",
        )
    family = Family(family_id, title, shape, control, names, constraints, tuple(statements), notes)
    try:
        family.panel()
    except ValueError:
        raise FamilyError(file, "the constraints leave no possible world") from None
    return family


def _the_families(families: Iterable[Family] | Mapping[str, Family]) -> list[Family]:
    """The families of a mapping (what `load_families` gives: its values, not its ids, which
    iterating it yields and the checks raised AttributeError on), or of any other iterable."""
    return list(families.values() if isinstance(families, Mapping) else families)


def check_well_posed(families: Iterable[Family] | Mapping[str, Family]) -> None:
    """Refuse a control with no `exact` value, a statement's text holding a control character
    or longer than `STATEMENT_TEXT_MAX`, and a statement that holds in no possible world
    (a model would be charged for any probability above 0: the author's typo), unless a
    control states it on purpose with `exact = 0`. For a design about to be frozen (a new run
    folder, `dutchbook plan`), as `check_one_form`: earlier builds ran such families, and a
    folder they ran must stay resumable, scorable and reportable, so the loaders take them.
    `families` may be `load_families`'s mapping (its values are checked)."""
    for family in _the_families(families):
        file = str(family.path or "<family>")
        if len(family.statements) > MAX_STATEMENTS:
            raise FamilyError(
                file,
                f"family {family.id!r} has {len(family.statements):,} statements; at most "
                f"{MAX_STATEMENTS} (a family is a handful of statements: the joint arm asks them "
                "all in one prompt)",
            )
        stated = next((s.id for s in family.statements if s.exact is not None), None)
        if not family.control and stated is not None:
            raise FamilyError(
                file,
                f"has 'exact', but family {family.id!r} is not a control (control = false): "
                "only a control's statements carry known probabilities; set control = true, or "
                "remove 'exact'",
                stated,
            )
        if family.control and all(s.exact is None for s in family.statements):
            raise FamilyError(
                file,
                f"family {family.id!r} is a control (control = true) but no statement has "
                "'exact': a control's statements carry their known probabilities; add them, "
                "or set control = false",
            )
        for statement in family.statements:
            _refuse_unaskable_text(statement, family.id, file)
        _refuse_trivial(family, file, impossible=True)
        _refuse_trivial(family, file, impossible=False)
        _refuse_one_text_two_events(family, file)
        _refuse_unshaped(family, file)


def _refuse_unaskable_text(statement: Statement, family_id: str, file: str) -> None:
    """Refuse a statement's text that a prompt cannot carry as written: a control character,
    a bidirectional control (a tester's U+202E in a text made it display other than it reads,
    in the file and wherever the prompt is shown), an invisible format character (a tester's
    two statements differing by a U+200B read as one question, scored as two events), more
    than `STATEMENT_TEXT_MAX` characters. Free text's joiners and variation selectors pass
    where `invisible_character(joiners_in_words=True)` lets them."""
    if has_control(statement.text):
        raise FamilyError(
            file,
            "'text' must be one line without control characters: it is asked after its "
            "label in the joint prompt, where a line break could start a question of "
            "its own (\"Q02: ...\") and an escape sequence reaches a terminal",
            statement.id,
        )
    if (bidi := bidi_control(statement.text)) is not None:
        raise FamilyError(
            file,
            f"'text' of family {family_id!r} holds {bidi}, a bidirectional control: it "
            "reorders what follows it on screen, so the text displays other than it reads and "
            "than the model is asked; leave it out",
            statement.id,
        )
    if (invisible := invisible_character(statement.text, joiners_in_words=True)) is not None:
        raise FamilyError(
            file,
            f"'text' of family {family_id!r} holds {invisible}, an invisible format character: "
            "it draws nothing, so two texts that differ by it read as one question; leave it "
            "out (a joiner between two letters, as Persian and Indic words and emoji use, is "
            "kept)",
            statement.id,
        )
    if len(statement.text) > STATEMENT_TEXT_MAX:
        raise FamilyError(
            file,
            f"'text' must be at most {STATEMENT_TEXT_MAX:,} characters, not "
            f"{len(statement.text):,} (a statement is one question; the joint arm asks "
            "a whole family in one prompt)",
            statement.id,
        )


#: What each shape's formulas must make true of its statements, over the family's worlds, so
#: that the benchmark's rule for it (family-benchmark.md's table) binds the answers.
SHAPE_NEEDS = {
    "negation": "two statements, one true in exactly the worlds where the other is false",
    "threshold": "two statements or more and, of any two, one true only where the other is (a "
    "higher threshold holds only where a lower one does)",
    "deadline": "two statements or more and, of any two, one true only where the other is (an "
    "earlier deadline is met only where a later one is)",
    "partition": "exactly one statement true in every possible world",
    "conjunction": "a statement true only where another is, but not everywhere that one is "
    '("A and B" beside A, or A beside "A or B")',
    "story": "a statement true only where another is, but not everywhere that one is (the "
    "story with a detail added)",
}


def _refuse_unshaped(family: Family, file: str) -> None:
    """Refuse a family whose formulas do not tie its statements as its shape says: a
    "negation" whose second formula is `b` where `not a` was meant has no rule binding the
    two answers, so every model reads coherent on it whatever it answers."""
    if not _has_shape(family.shape, np.asarray(family.panel().incidence, dtype=bool)):
        raise FamilyError(
            file,
            f"family {family.id!r} is of shape {family.shape!r}, but its formulas do not make "
            f"it one: that needs {SHAPE_NEEDS[family.shape]}; without it the shape's rule does "
            "not bind the answers, and any answers could read coherent; correct the formulas "
            "or the shape",
        )


def _has_shape(shape: str, truth: np.ndarray) -> bool:
    """Whether statements with these truth rows (statement x world) have `shape`'s ties."""
    rows = [row.tobytes() for row in truth]
    pairs = [(i, j) for i in range(len(rows)) for j in range(len(rows)) if i != j]
    if shape == "partition":
        return bool(np.all(truth.sum(axis=0) == 1))
    if shape == "negation":
        return any(bytes(a ^ 1 for a in rows[i]) == rows[j] for i, j in pairs)
    if shape in ("threshold", "deadline"):  # a chain: each pair nested one way or the other
        # and a pair at least: one statement, in no pair, is coherent at any answer
        return bool(pairs) and all(
            not (truth[i] & ~truth[j]).any() or not (truth[j] & ~truth[i]).any() for i, j in pairs
        )
    # story and conjunction: one statement strictly implies another (a conjunction family
    # need not ask both of its parts: "A", "A and B", "A or B" ties its answers as well)
    return any(not (truth[i] & ~truth[j]).any() and rows[i] != rows[j] for i, j in pairs)


#: For a statement that holds in no world and one that holds in every world: how the refusal
#: says it, what its formula is, the `exact` a control states it with on purpose, and which
#: answers would be charged.
_TRIVIAL = {
    True: ("holds in no possible world", "impossible", 0.0, "any probability above 0"),
    False: ("holds in every possible world", "always true", 1.0, "any probability below 1"),
}


def _trivial(panel: Panel, impossible: bool) -> tuple[str, ...]:
    return panel.impossible() if impossible else panel.certain()


def _refuse_trivial(family: Family, file: str, *, impossible: bool) -> None:
    """A statement that holds in no world ("heart and not heart") or in every world ("a or
    not a"): a model is charged for its author's typo, any answer but 0 (or 1) scored as
    incoherence. A control may ask one on purpose, its answer stated: exact = 0 (or 1). The
    message says "given the constraints" only where they make it so."""
    where, what, exact, charged = _TRIVIAL[impossible]
    meant = {s.id for s in family.statements if family.control and s.exact == exact}
    typo = next((i for i in _trivial(family.panel(), impossible) if i not in meant), None)
    if typo is None:
        return
    free = replace(family, constraints=()).panel() if family.constraints else family.panel()
    given = "" if typo in _trivial(free, impossible) else ", given the constraints"
    raise FamilyError(
        file,
        f"{where} of family {family.id!r} (its formula is {what}{given}): {charged} would be "
        "scored as incoherence; correct the formula",
        typo,
    )


def _refuse_one_text_two_events(family: Family, file: str) -> None:
    """Two statements of one text whose formulas hold in different worlds: a model reads one
    question (the isolated arm asks it once, its request named by its text), so at least one
    of the two answers is charged as incoherence. Texts are compared as they read: spaces
    aside, without the joiners and selectors free text keeps (`without_invisible`), and in
    one Unicode form (`composed`)."""
    panel = family.panel()
    incidence = np.asarray(panel.incidence)
    first: dict[str, Statement] = {}
    for statement in family.statements:  # "X wins." and "X  wins. " read alike
        read = " ".join(composed(without_invisible(statement.text)).split())
        seen = first.setdefault(read, statement)
        if seen is statement:
            continue
        rows = incidence[panel.index(seen.id)], incidence[panel.index(statement.id)]
        if not np.array_equal(*rows):
            raise FamilyError(
                file,
                f"has the text of statement {seen.id!r} of family {family.id!r} with another "
                "formula: a model is asked one question and gives one answer, scored against "
                "two different events; change the text or the formula",
                statement.id,
            )


def check_one_form(
    families: Iterable[Family] | Mapping[str, Family],
    beside: Iterable[Family] | Mapping[str, Family] = (),
) -> None:
    """Refuse family ids, and a family's statement ids, written twice in two Unicode forms
    ("café" with U+00E9 and "cafe" + U+0301): drawn alike in every table, they are asked of a
    model as two answer keys it cannot tell apart. For a design about to be frozen (a new
    run folder, `dutchbook plan`); a folder an earlier build ran with such a pair keeps it.
    `families` may be `load_families`'s mapping (its values are checked). `beside`: families
    not checked themselves whose ids those of `families` may not take in another form (the
    unchanged files of a run, beside one changed since: `runs.design.changed_family_refusal`)."""
    families = _the_families(families)
    clash = form_clash(families, lambda family: family.id) or _clash_beside(
        families, _the_families(beside)
    )
    if clash is not None:
        other, family = clash
        raise FamilyError(
            str(family.path or "<family>"),
            f"family id {family.id!a} already used by {other.path or '<family>'} "
            f"(written {other.id!a} there): one id in two Unicode forms, drawn alike in "
            "every table",
        )
    for family in families:
        pair = form_clash(family.statements, lambda statement: statement.id)
        if pair is not None:
            seen, statement = pair[0].id, pair[1].id
            raise FamilyError(
                str(family.path or "<family>"),
                f"duplicate statement id, written {seen!a} and {statement!a}: one id "
                "in two Unicode forms, drawn alike in every table and asked as two keys "
                "no reader can tell apart",
                statement,
            )


def _clash_beside(families: list[Family], beside: list[Family]) -> tuple[Family, Family] | None:
    """(one of `beside`, one of `families`) whose ids are one in two Unicode forms, or None;
    two of `beside` are not compared."""
    known = {composed(other.id): other for other in beside}
    for family in families:
        other = known.get(composed(family.id))
        if other is not None and other.id != family.id:
            return other, family
    return None


def _exact(file: str, exact: object, statement: str) -> float | None:
    """A statement's `exact` probability, checked before it becomes a float: an integer
    past a float's range (1 and 400 zeros, valid TOML to `tomllib`) raised OverflowError."""
    if exact is None:
        return None
    if isinstance(exact, bool) or not isinstance(exact, int | float):
        raise FamilyError(file, "'exact' must be a number", statement)
    if not 0 <= exact <= 1:  # an int is compared exactly, never converted
        raise FamilyError(file, f"'exact' = {_shown(exact)} is outside [0, 1]", statement)
    return float(exact)


def _shown(number: int | float) -> str:
    """A number for a one-line message: an integer of many digits cut to its first ones."""
    text = str(number)
    digits = text.lstrip("-")
    if isinstance(number, int) and len(digits) > 24:
        return f"{text[: len(text) - len(digits)]}{digits[:12]}... ({len(digits):,} digits)"
    return text


def load_family(path: str | Path) -> Family:
    """Read and validate one family file."""
    path = Path(path)
    file = str(path)
    try:
        raw = toml_text.loads(toml_text.decode(read_input_file(path, TEXT_INPUT_MAX_BYTES)))
    except InputFileError as error:
        raise FamilyError(file, str(error)) from None
    except FileNotFoundError:
        raise FamilyError(file, "no such file") from None
    except UnicodeDecodeError as error:
        raise FamilyError(file, not_utf8(error)) from None
    except tomllib.TOMLDecodeError as error:
        detail = " ".join(str(error).split())
        raise FamilyError(file, f"not valid TOML ({detail})") from None
    except OSError as error:  # a file it may not read
        raise FamilyError(file, f"cannot read ({error.strerror})") from None
    family = family_from_mapping(raw, file)
    return Family(
        family.id, family.title, family.shape, family.control, family.variables,
        family.constraints, family.statements, family.notes, path,
    )  # fmt: skip


def refuse_a_pipe(path: Path, mode: int | None = None) -> None:
    """Refuse anything but a regular file among a folder's family files (`load_families`,
    and `runs.design` before it hashes them, given the `mode` of the file it opened): a
    FIFO, opened, waits for a writer that never comes (`dutchbook plan` hung, and a
    SIGTERM's line said to run it again, to hang again); a folder or a device named `*.toml`
    is no family either. Asked of the file's status, never opened; worded by
    `panels.input_files.file_kind`: "is a FIFO, not a family file; move it out of the
    folder". A pipe named on its own (`load_family`) is read like a file, as a spec is."""
    if mode is None:
        try:
            mode = path.stat().st_mode
        except OSError:  # a dangling link, a loop: `load_family` words them
            return
    kind = file_kind(mode)
    if kind is not None:
        raise FamilyError(str(path), f"is {kind}, not a family file; move it out of the folder")


def family_files(directory: Path, keep: Collection[str] = ()) -> list[Path]:
    """A folder's family files: its `*.toml` entries in name order, but hidden ones (a name
    starting with ".", as most tools pass them over): an editor's lock (`.#a.toml`, a
    dangling link) and macOS's resource files (`._a.toml`) stopped the whole campaign as "no
    such file" and "not valid TOML", and a `.h.toml` was read as a family no listing showed.
    `keep`: hidden names read all the same, those a run folder's design records (an earlier
    build read `.h.toml` as a family; `runs.design.hidden_families`), so that folder is
    still resumed and scored. None from a folder that is not there (a run folder's recorded
    design, moved to another machine, is compared file by file); `FamilyError` when a folder
    there cannot be listed (it read as holding no family file)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise FamilyError(str(directory), f"cannot read ({error.strerror or error})") from None
    return [directory / name for name in sorted(names)
            if name.endswith(".toml") and (not name.startswith(".") or name in keep)]  # fmt: skip


#: The entries of a families folder a note or a refusal names (`names_shown`); past them, it
#: counts.
NOT_FAMILY_FILES_SHOWN = 3


def names_shown(names: list[str]) -> str:
    """The first `NOT_FAMILY_FILES_SHOWN` of a folder's `names`, then how many more: the
    entries not read as families (`runs.design.not_family_files_note`), the hidden ones of a
    folder holding no other (`runs.units`)."""
    more = len(names) - NOT_FAMILY_FILES_SHOWN
    return ", ".join(names[:NOT_FAMILY_FILES_SHOWN]) + (f" and {more:,} more" if more > 0 else "")


def not_family_files(directory: Path) -> list[str]:
    """The names in a families folder that `family_files` leaves out and a user may have
    meant as families: every entry not named `*.toml` (a folder's name ending in "/"), in
    name order, but hidden ones (`.DS_Store`, an editor's `.#a.toml`), which no one writes
    as a family. A family written as `g.json` beside `.toml` ones was passed over without a
    word (`runs.design.check_new_design` says these). None from a folder that cannot be
    listed: `family_files` says why."""
    return _entry_names(
        directory, lambda name: not name.endswith(".toml") and not name.startswith(".")
    )


def hidden_entries(directory: Path) -> list[str]:
    """The hidden `*.toml` entries of a families folder (a name starting with "."), in name
    order, which `family_files` passes over: a folder holding only `.h.toml` was said to have
    no family file, with no word of it (`runs.units.UnitSource.families` names them). Other
    hidden entries (`.git/`, `.DS_Store`) were never taken for families, and are not named."""
    return _entry_names(directory, lambda name: name.startswith(".") and name.endswith(".toml"))


def _entry_names(directory: Path, wanted: Callable[[str], bool]) -> list[str]:
    """The `wanted` names of a folder's entries in name order, a folder's ending in "/";
    none from a folder that cannot be listed."""
    try:
        with os.scandir(directory) as entries:
            names = [f"{e.name}/" if e.is_dir() else e.name for e in entries if wanted(e.name)]
    except OSError:
        return []
    return sorted(names)


def load_families(
    directory: str | Path = FAMILIES_DIR, keep: Collection[str] = ()
) -> dict[str, Family]:
    """Every family file of a directory (`family_files`, hidden ones in `keep` too), keyed by
    family id, in file-name order."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FamilyError(str(directory), "not a directory")
    families: dict[str, Family] = {}
    for path in family_files(directory, keep):
        refuse_a_pipe(path)
        family = load_family(path)
        if family.id in families:  # as written: see `check_one_form` for two Unicode forms
            other = families[family.id].path
            raise FamilyError(str(path), f"family id {family.id!r} already used by {other}")
        families[family.id] = family
    return families
