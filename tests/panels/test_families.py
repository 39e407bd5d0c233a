"""Family files: worlds from variables and constraints, and errors that say where."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from panels.families import (
    FAMILIES_DIR,
    SHAPE_NEEDS,
    SHAPES,
    STATEMENT_TEXT_MAX,
    FamilyError,
    check_one_form,
    check_well_posed,
    family_files,
    load_families,
    load_family,
)

GOOD = """
id = "{id}"
title = "Two coins"
shape = "conjunction"
control = true
variables = ["h1", "h2"]

[[statements]]
id = "first"
text = "The first coin lands heads."
formula = "h1"
exact = 0.5

[[statements]]
id = "both"
text = "Both coins land heads."
formula = "h1 and h2"
exact = 0.25

[[statements]]
id = "either"
text = "At least one coin lands heads."
formula = "h1 | h2"
exact = 0.75
"""

PARTITION = """
id = "cup"
title = "Who wins"
shape = "partition"
variables = ["x", "y", "other"]
constraints = ["exactly_one(x, y, other)"]
notes = "one winner"

[[statements]]
id = "x"
text = "X wins."
formula = "x"

[[statements]]
id = "y"
text = "Y wins."
formula = "y"

[[statements]]
id = "rest"
text = "Someone else wins."
formula = "other"
"""


def _write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_a_family_and_its_panel(tmp_path: Path) -> None:
    family = load_family(_write(tmp_path, GOOD.format(id="coins")))
    assert (family.id, family.shape, family.control) == ("coins", "conjunction", True)
    assert family.ids == ("first", "both", "either")
    assert family.exact == {"first": 0.5, "both": 0.25, "either": 0.75}
    panel = family.panel()
    assert panel.ids == family.ids
    assert panel.n_atoms == 4  # (h1,h2) = FF: none; FT: either; TF: first+either; TT: all
    worlds = {(w["h1"], w["h2"]) for atom in panel.atoms for w in atom.outcomes}
    assert len(worlds) == 4
    # the exact answers are the probabilities of the uniform distribution over worlds
    weights = np.array([len(atom.outcomes) for atom in panel.atoms]) / 4
    np.testing.assert_allclose(panel.incidence @ weights, [0.5, 0.25, 0.75])


def test_constraints_cut_the_worlds(tmp_path: Path) -> None:
    family = load_family(_write(tmp_path, PARTITION))
    panel = family.panel()
    assert family.space().size() == 3
    np.testing.assert_array_equal(panel.incidence.sum(axis=0), [1, 1, 1])
    assert family.notes == "one winner"


def _broken(tmp_path: Path, old: str, new: str, base: str = GOOD, *, posed: bool = False) -> str:
    """The one-line error of the family file `base` with `old` replaced by `new`: the
    loader's, or with `posed` the new-design check's (`check_well_posed`), the loader having
    taken the file (a folder an earlier build ran with it must stay readable)."""
    text = base.format(id="coins") if "{id}" in base else base
    assert old in text
    path = _write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(FamilyError) as caught:
        family = load_family(path)
        if posed:
            check_well_posed([family])
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    return message


def test_unknown_variable_names_file_statement_and_position(tmp_path: Path) -> None:
    message = _broken(tmp_path, 'formula = "h1 and h2"', 'formula = "h1 and c"')
    assert message.endswith("statement 'both': unknown variable 'c' at position 7")


def test_malformed_formula(tmp_path: Path) -> None:
    message = _broken(tmp_path, 'formula = "h1 | h2"', 'formula = "h1 |"')
    assert "statement 'either'" in message and "at position 4" in message


def test_bad_constraint(tmp_path: Path) -> None:
    message = _broken(tmp_path, "exactly_one(x, y, other)", "exactly_one(x, y, z)", PARTITION)
    assert "constraint 1: unknown variable 'z' at position 18" in message


def test_duplicate_statement_ids(tmp_path: Path) -> None:
    message = _broken(tmp_path, 'id = "both"', 'id = "first"')
    assert "statement 'first': duplicate statement id" in message


def test_one_statement_id_in_two_unicode_forms_is_a_duplicate(tmp_path: Path) -> None:
    """"café" with U+00E9 and "cafe" + U+0301 were two statements, drawn alike in every table
    and asked as two answer keys a model could not tell apart. Loaded as written (a run
    folder an earlier build ran with them must stay readable), refused by `check_one_form`
    where a new design is planned."""
    text = GOOD.format(id="coins").replace('id = "first"', 'id = "caf\\u00e9"', 1)
    path = _write(tmp_path, text.replace('id = "both"', 'id = "cafe\\u0301"', 1))
    family = load_family(path)
    assert family.ids[:2] == ("caf\u00e9", "cafe\u0301")
    with pytest.raises(FamilyError) as info:
        check_one_form([family])
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "duplicate statement id, written 'caf\\xe9' and 'cafe\\u0301'" in message


@pytest.mark.parametrize(
    ("first", "second"),
    [("q 1", "q\\u00a01"), ("q-1", "q\\u20111"), ("q-1", "q\\u22121"), ("q1", "q\\uff11")],
)
def test_statement_ids_drawn_alike_are_a_duplicate(
    tmp_path: Path, first: str, second: str
) -> None:
    """A hostile tester's pairs, each drawn alike in a table: a no-break space for a space, a
    non-breaking hyphen or a minus sign for a hyphen, a fullwidth digit. Composition alone
    (NFC) took each as two ids."""
    text = GOOD.format(id="coins").replace('id = "first"', f'id = "{first}"', 1)
    path = _write(tmp_path, text.replace('id = "both"', f'id = "{second}"', 1))
    with pytest.raises(FamilyError, match="duplicate statement id, written"):
        check_one_form([load_family(path)])


def test_ids_drawn_apart_are_two(tmp_path: Path) -> None:
    """Compatibility folding (NFKC) also took "x2" and "x²", "fi" and "ﬁ" for one id; they are
    drawn apart."""
    for first, second in (("x2", "x\\u00b2"), ("fi", "\\ufb01"), ("IV", "\\u2163")):
        text = GOOD.format(id="coins").replace('id = "first"', f'id = "{first}"', 1)
        path = _write(tmp_path, text.replace('id = "both"', f'id = "{second}"', 1))
        check_one_form([load_family(path)])


def test_one_family_id_in_two_unicode_forms_is_used_once(tmp_path: Path) -> None:
    _write(tmp_path, GOOD.format(id="caf\\u00e9"), "a.toml")
    _write(tmp_path, GOOD.format(id="cafe\\u0301"), "b.toml")
    families = load_families(tmp_path)  # as written: see the test above
    assert list(families) == ["caf\u00e9", "cafe\u0301"]
    with pytest.raises(FamilyError, match=r"b\.toml: .*already used by .*a\.toml") as info:
        check_one_form(families.values())
    assert "(written 'caf\\xe9' there)" in str(info.value)


def test_one_form_beside_other_families_compares_with_them_not_among_them(
    tmp_path: Path,
) -> None:
    """`beside`: a run's unchanged families, which a family file changed since may not take
    the id of in another form; two of them a run asked (an earlier build's) are let be."""
    _write(tmp_path, GOOD.format(id="caf\u00e9"), "a.toml")
    _write(tmp_path, GOOD.format(id="cafe\u0301"), "b.toml")
    ran = list(load_families(tmp_path).values())
    check_one_form([load_family(_write(tmp_path, GOOD.format(id="coins"), "c.toml"))], beside=ran)
    changed = load_family(_write(tmp_path, GOOD.format(id="cafe\u0301"), "d.toml"))
    with pytest.raises(FamilyError, match=r"d\.toml: .*already used by .*a\.toml"):
        check_one_form([changed], beside=ran[:1])


def test_one_form_passes_ids_written_once(tmp_path: Path) -> None:
    _write(tmp_path, GOOD.format(id="caf\\u00e9"), "a.toml")
    _write(tmp_path, GOOD.format(id="coins"), "b.toml")
    check_one_form(load_families(tmp_path).values())


def test_unknown_shape(tmp_path: Path) -> None:
    assert "unknown shape 'lottery'" in _broken(tmp_path, '"conjunction"', '"lottery"')


@pytest.mark.parametrize("value", ["1.5", "-0.1", '"half"', "true"])
def test_exact_must_be_a_probability(tmp_path: Path, value: str) -> None:
    message = _broken(tmp_path, "exact = 0.25", f"exact = {value}")
    assert "statement 'both'" in message and "'exact'" in message


def test_constraints_that_leave_no_world(tmp_path: Path) -> None:
    message = _broken(tmp_path, 'constraints = ["exactly_one(x, y, other)"]',
                      'constraints = ["x and not x"]', PARTITION)  # fmt: skip
    assert "no possible world" in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('title = "Two coins"\n', 'title = "Two coins"\ncolour = "red"\n', "unknown key 'colour'"),
        ('text = "Both coins land heads."', 'txt = "x"', "unknown key 'txt'"),
        ('variables = ["h1", "h2"]', 'variables = ["h1", "h1", "h2"]', "duplicate variable"),
        ('variables = ["h1", "h2"]', 'variables = ["h1", "h2", "and"]', "reserved word"),
        ('variables = ["h1", "h2"]', 'variables = ["h1", "h2", "2x"]', "not a valid name"),
        ("control = true", 'control = "yes"', "'control' must be true or false"),
        ('formula = "h1 and h2"\n', "\n", "missing key 'formula'"),
        ('id = "coins"', 'id = "coins"\nid = "again"', "not valid TOML"),
        # shown in tables and messages: an escape would reach the terminal
        ('id = "coins"', 'id = "coins\\u001b[2J"', "'id' must be one line without control"),
        ('title = "Two coins"', 'title = "Two\\ncoins"', "'title' must be one line without"),
        ('id = "both"', 'id = "bo\\u0007th"', "'id' must be one line without control"),
        # invisible: "coins" and "coins" + U+200B were two families that read as one
        ('id = "coins"', 'id = "coins\\u200b"', "'id' holds U+200B ZERO WIDTH SPACE"),
        ('id = "coins"', 'id = "co\\u200dins"', "'id' holds U+200D ZERO WIDTH JOINER"),
        ('id = "coins"', 'id = "\\u202ecoins"', "'id' holds U+202E RIGHT-TO-LEFT OVERRIDE"),
        ('id = "both"', 'id = "both\\u200b"', "statement 'both\\u200b': 'id' holds U+200B"),
        ('title = "Two coins"', 'title = "Two\\u00adcoins"', "'title' holds U+00AD SOFT HYPHEN"),
        ('title = "Two coins"', 'title = "\\u202eTwo coins"', "'title' holds U+202E"),
        ('title = "Two coins"', 'title = "Two coins \\u200d"', "'title' holds U+200D"),
        ('id = "coins"', 'id = "coins "', "'id' must have no leading or trailing spaces"),
        ('id = "both"', 'id = " both"', "'id' must have no leading or trailing spaces"),
        # 5,000 and 100,000 characters were taken and printed whole in every table
        ('id = "coins"', f'id = "{"c" * 101}"', "'id' must be at most 100 characters, not 101"),
        ('title = "Two coins"', f'title = "{"t" * 201}"',
         "'title' must be at most 200 characters, not 201"),
    ],
)
def test_other_validation(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert expected in _broken(tmp_path, old, new)


def test_ids_and_titles_in_any_script_load_and_a_title_may_join_emoji(tmp_path: Path) -> None:
    """A joiner inside an emoji sequence or a word (Persian, Indic scripts) is part of what a
    title says; an id needs none, so there it is refused like any other."""
    technologist, fire_heart = "\U0001f469\u200d\U0001f4bb", "\u2764\ufe0f\u200d\U0001f525"
    title = f"硬币 café 🤖 {technologist} {fire_heart} \u0645\u06cc\u200c\u062e"
    text = GOOD.format(id="硬币-café-🤖").replace('"Two coins"', f'"{title}"')
    family = load_family(_write(tmp_path, text.replace('id = "both"', f'id = "{"b" * 100}"')))
    assert (family.id, family.title) == ("硬币-café-🤖", title)
    message = _broken(tmp_path, 'id = "coins"', f'id = "{technologist}"')
    assert "'id' holds U+200D ZERO WIDTH JOINER" in message


def test_load_families_keys_by_id_and_rejects_reused_ids(tmp_path: Path) -> None:
    _write(tmp_path, GOOD.format(id="coins"), "a.toml")
    _write(tmp_path, PARTITION, "b.toml")
    (tmp_path / "readme.md").write_text("not a family")
    families = load_families(tmp_path)
    assert list(families) == ["coins", "cup"]
    assert families["cup"].path == tmp_path / "b.toml"
    _write(tmp_path, GOOD.format(id="cup"), "c.toml")
    with pytest.raises(FamilyError, match="already used"):
        load_families(tmp_path)
    with pytest.raises(FamilyError, match="no such file"):
        load_family(tmp_path / "missing.toml")


def test_a_fifo_among_the_family_files_is_refused_without_opening_it(tmp_path: Path) -> None:
    """Opened, a FIFO waits for a writer: `dutchbook plan` hung on one named `z.toml`. Run in
    a child, so a wait fails the test instead of hanging it."""
    _write(tmp_path, GOOD.format(id="coins"), "a.toml")
    fifo = tmp_path / "z.toml"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom panels.families import FamilyError, load_families\n"
        "try:\n    load_families(sys.argv[1])\nexcept FamilyError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert done.stdout.strip() == (
        f"{fifo}: is a FIFO, not a family file; move it out of the folder"
    ), done.stderr


@pytest.mark.parametrize("held_by", ["folder", "device", "socket"])
def test_a_folder_or_a_device_among_the_family_files_is_refused_naming_it(
    tmp_path: Path, held_by: str
) -> None:
    """Only a FIFO was refused from its status: a folder named `y.toml` said "cannot read
    (Is a directory)", a link to /dev/null "is a device, not a file", a socket "cannot read
    (No such device or address)". Each is now named as `runs.design` names it."""
    _write(tmp_path, GOOD.format(id="coins"), "a.toml")
    odd = tmp_path / "y.toml"
    if held_by == "folder":
        odd.mkdir()
    elif held_by == "device":
        odd.symlink_to("/dev/null")
    else:
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(odd))
    kind = {"folder": "a folder", "device": "a character device", "socket": "a socket"}[held_by]
    with pytest.raises(FamilyError) as raised:
        load_families(tmp_path)
    assert str(raised.value) == f"{odd}: is {kind}, not a family file; move it out of the folder"


def test_stock_families_live_next_to_the_module() -> None:
    assert FAMILIES_DIR.name == "families" and FAMILIES_DIR.parent.name == "panels"


@pytest.mark.parametrize(
    ("encoded", "at"),
    [('id = "é"\n'.encode("latin-1"), 6), ('id = "x"\n'.encode("utf-16"), 0)],
    ids=["latin-1", "utf-16"],
)
def test_a_file_that_is_not_utf8_says_to_save_it_as_utf8(
    tmp_path: Path, encoded: bytes, at: int
) -> None:
    """As a spec does; it said "not valid TOML ('utf-8' codec can't decode ...)"."""
    path = tmp_path / "saved.toml"
    path.write_bytes(encoded)
    with pytest.raises(FamilyError) as raised:
        load_family(path)
    assert str(raised.value).endswith(f"at byte {at}); save it as UTF-8"), str(raised.value)


def _many_variables(variables: int, statements: int, constraints: int = 0) -> str:
    names = ", ".join(f'"v{i}"' for i in range(variables))
    always = ", ".join(['"v0 or not v0"'] * constraints)
    text = f'id = "big"\ntitle = "Big"\nshape = "story"\nvariables = [{names}]\n'
    text += f"constraints = [{always}]\n"
    for n in range(statements):
        formula = f"v{n % variables}"
        text += f'[[statements]]\nid = "s{n}"\ntext = "Statement {n}."\nformula = "{formula}"\n'
    return text


def test_a_family_too_large_to_evaluate_is_refused_before_any_world(tmp_path: Path) -> None:
    """16 statements over 16 variables need 2^20 truth values, the most allowed; one more
    statement or constraint is refused in one line, before a world is evaluated (300 such
    statements took 29 s to load and 2 GB to score one set)."""
    assert len(load_family(_write(tmp_path, _many_variables(16, 16))).panel().atoms) == 2**16
    path = _write(tmp_path, _many_variables(16, 17), "over.toml")
    with pytest.raises(FamilyError) as caught:
        load_family(path)
    assert str(caught.value) == (
        f"{path}: 17 statements and 0 constraints over 16 variables need 1,114,112 truth "
        "values; at most 1,048,576 (a family is a handful of statements over few variables)"
    )
    with pytest.raises(FamilyError, match="16 statements and 1 constraints"):
        load_family(_write(tmp_path, _many_variables(16, 16, constraints=1), "c.toml"))


def test_an_impossible_statement_is_refused_naming_file_family_and_statement(
    tmp_path: Path,
) -> None:
    """A hostile tester's family file (a shipped control made `control = false`, its `exact`
    lines removed, one formula "heart and not heart") was planned and run, exit 0, and the
    model charged a profit of 0.28 for the author's typo; `dutchbook check` refuses the same
    event. A statement impossible only under the constraints is refused too."""
    uncontrolled = GOOD.format(id="coins").replace("control = true", "control = false")
    uncontrolled = "\n".join(line for line in uncontrolled.split("\n") if "exact" not in line)
    message = _broken(
        tmp_path, 'formula = "h1 and h2"', 'formula = "h1 and not h1"', uncontrolled, posed=True
    )
    assert message.endswith(
        "statement 'both': holds in no possible world of family 'coins' (its formula is "
        "impossible): any probability above 0 would be scored as incoherence; correct the formula"
    )
    message = _broken(tmp_path, 'formula = "y"', 'formula = "y and x"', PARTITION, posed=True)
    assert message.endswith(
        "statement 'y': holds in no possible world of family 'cup' (its formula is "
        "impossible, given the constraints): any probability above 0 would be scored as "
        "incoherence; correct the formula"
    )


def test_a_control_may_state_an_impossible_statement_with_exact_zero(tmp_path: Path) -> None:
    """An impossible event asked on purpose, its known answer stated, is a control's to ask."""
    text = GOOD.format(id="coins").replace('formula = "h1 and h2"', 'formula = "h1 and not h1"')
    family = load_family(_write(tmp_path, text.replace("exact = 0.25", "exact = 0")))
    assert family.panel().impossible() == ("both",)
    check_well_posed([family])


def test_a_statement_true_in_every_world_is_refused(tmp_path: Path) -> None:
    """A hostile tester's "a or not a" (and a statement certain only under the constraints)
    was planned and run, exit 0: any answer below 1 is charged as incoherence, where the
    impossible statement, the same typo's twin, was refused."""
    message = _broken(tmp_path, 'formula = "x"', 'formula = "x or not x"', PARTITION, posed=True)
    assert message.endswith(  # true whatever the constraints: they are not named
        "statement 'x': holds in every possible world of family 'cup' (its formula is always "
        "true): any probability below 1 would be scored as incoherence; correct the formula"
    )
    message = _broken(tmp_path, 'formula = "y"', 'formula = "x or y or other"', PARTITION,
                      posed=True)  # fmt: skip
    assert "statement 'y': holds in every possible world of family 'cup' (its formula is " \
        "always true, given the constraints)" in message
    # A control may ask it on purpose, its answer stated: exact = 1.
    sure = GOOD.format(id="coins").replace('formula = "h1 | h2"', 'formula = "h1 | not h1"')
    family = load_family(_write(tmp_path, sure.replace("exact = 0.75", "exact = 1"), "s.toml"))
    assert family.panel().certain() == ("either",)
    check_well_posed([family])


def test_one_text_for_two_events_is_refused(tmp_path: Path) -> None:
    """Two statements of one text with formulas true in different worlds were accepted: a
    model is asked one question (the isolated arm asks it once) and charged for answering two
    events alike. The same text for the same event in other words is taken."""
    message = _broken(tmp_path, 'text = "Y wins."', 'text = "X  wins. "', PARTITION, posed=True)
    assert message.endswith(  # told apart by spaces alone, they read as one question
        "statement 'y': has the text of statement 'x' of family 'cup' with another formula: a "
        "model is asked one question and gives one answer, scored against two different "
        "events; change the text or the formula"
    )
    same = PARTITION.replace('text = "Y wins."', 'text = "X wins."').replace(
        'formula = "y"', 'formula = "x and not y"')  # the same worlds as "x", given one winner
    same = same.replace('shape = "partition"', 'shape = "threshold"').replace(
        'formula = "other"', 'formula = "x or y"')  # x twice is no partition: a chain then
    check_well_posed([load_family(_write(tmp_path, same, "same.toml"))])


def test_a_control_without_exact_values_is_refused(tmp_path: Path) -> None:
    """README: controls carry `exact`; the benchmark's controls are those whose exact answers
    are known. One with none was accepted, a control with nothing to be checked against."""
    bare = "\n".join(line for line in GOOD.split("\n") if "exact" not in line)
    message = _broken(tmp_path, "control = true", "control = true", bare, posed=True)
    assert message.endswith(
        "family 'coins' is a control (control = true) but no statement has 'exact': a "
        "control's statements carry their known probabilities; add them, or set control = false"
    )
    one = GOOD.format(id="coins").replace("exact = 0.5\n", "").replace("exact = 0.75\n", "")
    family = load_family(_write(tmp_path, one, "one.toml"))
    assert family.exact == {"both": 0.25}
    check_well_posed([family])


@pytest.mark.parametrize("sign", ["", "-"])
def test_an_exact_integer_past_a_float_is_refused_in_one_line(sign: str) -> None:
    """`exact = 1` and 400 zeros, an integer `tomllib` reads, raised OverflowError from
    `float(exact)` in family_from_mapping."""
    from panels.families import family_from_mapping
    from panels.toml_text import loads

    raw = loads(GOOD.format(id="coins").replace("exact = 0.25", "exact = 0.5"))
    raw["statements"][1]["exact"] = int(sign + "1" + "0" * 400)
    with pytest.raises(FamilyError) as caught:
        family_from_mapping(raw, "f.toml")
    assert str(caught.value) == (
        f"f.toml: statement 'both': 'exact' = {sign}100000000000... (401 digits) is outside [0, 1]"
    )



TWO = """
id = "pair"
title = "Two statements"
shape = "{shape}"
variables = ["a", "b"]
constraints = [{constraints}]

[[statements]]
id = "first"
text = "The first thing happens."
formula = "a"

[[statements]]
id = "second"
text = "The second thing happens."
formula = "{second}"
"""
#: A conjunction's third statement: the "and" or "or" of the first two, or neither.
THIRD = '\n[[statements]]\nid = "third"\ntext = "A third thing happens."\nformula = "{}"\n'


@pytest.mark.parametrize(
    ("shape", "untied", "tied"),
    [
        # the hostile pass's: "b" where "not a" was meant read coherent at 0.9 and 0.9
        ("negation", ("", "b", None), ("", "not a", None)),
        ("threshold", ("", "b", None), ('"b -> a"', "b", None)),
        ("deadline", ("", "b", None), ('"a -> b"', "b", None)),
        ("story", ("", "b", None), ("", "a and b", None)),
        ("partition", ("", "b", None), ('"exactly_one(a, b)"', "b", None)),
        ("conjunction", ("", "b", "(a and not b) or (b and not a)"), ("", "b", "a or b")),
    ],
)
def test_a_family_whose_formulas_lack_its_shapes_tie_is_refused(
    tmp_path: Path,
    shape: str,
    untied: tuple[str, str, str | None],
    tied: tuple[str, str, str | None],
) -> None:
    """No rule binds answers the formulas do not tie: every model read coherent on such a
    family whatever it answered (a "negation" of `a` and `b`; a "partition" without
    `exactly_one`)."""

    def text(constraints: str, second: str, third: str | None) -> str:
        body = TWO.format(shape=shape, constraints=constraints, second=second)
        return body + (THIRD.format(third) if third is not None else "")

    refused = _write(tmp_path, text(*untied), "untied.toml")
    with pytest.raises(FamilyError) as caught:
        check_well_posed([load_family(refused)])
    said = str(caught.value)
    assert said.startswith(f"{refused}: family 'pair' is of shape {shape!r}, but its formulas")
    assert SHAPE_NEEDS[shape] in said and "correct the formulas or the shape" in said
    check_well_posed([load_family(_write(tmp_path, text(*tied), "tied.toml"))])


ONE = """
id = "solo"
title = "One statement"
shape = "{shape}"
variables = ["a"]

[[statements]]
id = "above"
text = "The price of the asset is above 100 on 2031-01-01."
formula = "a"
"""


@pytest.mark.parametrize("shape", SHAPES)
def test_a_family_of_one_statement_is_refused_whatever_its_shape(
    tmp_path: Path, shape: str
) -> None:
    """A threshold or deadline family of one statement was taken (no pair to be out of
    order): one answer is coherent whatever it is, so it read arbitrage-free at every answer,
    and a tester's five such families lifted a model's arbitrage-free share from 20% to 60%.
    Negation, partition, story and conjunction families of one were refused already."""
    path = _write(tmp_path, ONE.format(shape=shape), "one.toml")
    with pytest.raises(FamilyError) as caught:
        check_well_posed([load_family(path)])
    said = str(caught.value)
    assert said.startswith(f"{path}: family 'solo' is of shape {shape!r}, but its formulas")
    assert SHAPE_NEEDS[shape] in said


def test_every_shipped_family_has_its_shapes_tie() -> None:
    families = load_families()
    assert {f.shape for f in families.values()} == set(SHAPE_NEEDS)
    check_well_posed(families.values())


def test_hidden_files_are_no_family_files(tmp_path: Path) -> None:
    """An editor's lock (`.#a.toml`, a dangling link) and macOS's `._a.toml` stopped the whole
    campaign as "no such file" and "not valid TOML", and a `.hidden.toml` was read as a
    family no listing showed. A hidden file named in `keep` (one a run folder's design
    records: an earlier build read it) is read all the same."""
    _write(tmp_path, GOOD.format(id="coins"), "a.toml")
    _write(tmp_path, GOOD.format(id="hidden-one"), ".hidden.toml")
    (tmp_path / ".#a.toml").symlink_to("user@host.1234:1700000000")
    (tmp_path / "._a.toml").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    assert family_files(tmp_path) == [tmp_path / "a.toml"]
    assert list(load_families(tmp_path)) == ["coins"]
    assert list(load_families(tmp_path, keep={".hidden.toml"})) == ["hidden-one", "coins"]


def test_an_unreadable_families_folder_is_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It read as a folder holding no family file (`glob` passes over a listing refused)."""
    import os

    _write(tmp_path, GOOD.format(id="coins"), "a.toml")
    listdir = os.listdir

    def refused(path: str | Path) -> list[str]:
        if Path(path) == tmp_path:
            raise PermissionError(13, "Permission denied", str(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", refused)
    with pytest.raises(FamilyError) as caught:
        load_families(tmp_path)
    assert str(caught.value) == f"{tmp_path}: cannot read (Permission denied)"


@pytest.mark.parametrize("text", ["X?\\nQ02: Y wins.", "X wins. \\u001b[2J", "X\\twins."])
def test_a_statement_text_with_a_control_character_is_refused(tmp_path: Path, text: str) -> None:
    """A text "X?" + a line break + "Q02: Y wins." forged a second question in the joint
    prompt; an escape sequence reached the terminal."""
    message = _broken(tmp_path, 'text = "Y wins."', f'text = "{text}"', PARTITION, posed=True)
    assert message.startswith(f"{tmp_path / 'x.toml'}: statement 'y': 'text' must be one line")


@pytest.mark.parametrize(
    ("char", "named"),
    [
        ("\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("\u2066", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("\u200f", "U+200F RIGHT-TO-LEFT MARK"),
    ],
)
def test_a_statement_text_with_a_bidirectional_control_is_refused_for_a_new_design(
    tmp_path: Path, char: str, named: str
) -> None:
    """A text holding U+202E was asked as written and displayed reversed after it, in the file
    and in every prompt shown; the loader still takes one (a folder an earlier build ran with
    it stays readable)."""
    text = f"Y wins{char} by 3 goals."
    load_family(_write(tmp_path, PARTITION.replace('text = "Y wins."', f'text = "{text}"')))
    message = _broken(tmp_path, 'text = "Y wins."', f'text = "{text}"', PARTITION, posed=True)
    assert message == (
        f"{tmp_path / 'x.toml'}: statement 'y': 'text' of family 'cup' holds {named}, a "
        "bidirectional control: it reorders what follows it on screen, so the text displays "
        "other than it reads and than the model is asked; leave it out"
    )


@pytest.mark.parametrize(
    ("char", "named"),
    [
        ("\u200b", "U+200B ZERO WIDTH SPACE"),
        ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("\u180e", "U+180E MONGOLIAN VOWEL SEPARATOR"),
        ("\u034f", "U+034F COMBINING GRAPHEME JOINER"),
        ("\u115f", "U+115F HANGUL CHOSEONG FILLER"),
        ("\u200d", "U+200D ZERO WIDTH JOINER"),  # beside a space: no word's joiner
    ],
)
def test_a_statement_text_with_an_invisible_character_is_refused_for_a_new_design(
    tmp_path: Path, char: str, named: str
) -> None:
    """A tester's two statements of one family whose texts differed by a U+200B alone passed
    as two events, a model asked one question and charged for answering both alike; the
    loader still takes such a text (a folder an earlier build ran with it stays readable)."""
    text = f"Y wins{char} by 3 goals."
    load_family(_write(tmp_path, PARTITION.replace('text = "Y wins."', f'text = "{text}"')))
    message = _broken(tmp_path, 'text = "Y wins."', f'text = "{text}"', PARTITION, posed=True)
    assert message.startswith(
        f"{tmp_path / 'x.toml'}: statement 'y': 'text' of family 'cup' holds {named}, an "
        "invisible format character: it draws nothing, so two texts that differ by it read as "
        "one question; leave it out"
    )


def test_a_joiner_in_a_word_passes_but_texts_are_compared_without_it(tmp_path: Path) -> None:
    """Persian and Indic words and emoji sequences need U+200C and U+200D between letters, so
    a text keeps them; two texts told apart by one alone still read as one question."""
    joined = 'text = "\u0645\u06cc\u200c\u0631\u0648\u062f wins \U0001f469\u200d\U0001f4bb."'
    check_well_posed([load_family(_write(tmp_path, PARTITION.replace('text = "Y wins."', joined)))])
    message = _broken(tmp_path, 'text = "Y wins."', 'text = "X w\u200dins."', PARTITION, posed=True)
    assert message.endswith("statement 'y': has the text of statement 'x' of family 'cup' with "
                            "another formula: a model is asked one question and gives one "
                            "answer, scored against two different events; change the text or "
                            "the formula")  # fmt: skip


def test_a_statement_text_too_long_for_a_question_is_refused_for_a_new_design(
    tmp_path: Path,
) -> None:
    """A 200,000-character text planned as 100,268 tokens and ran; the loader still takes one
    (a folder an earlier build ran with it stays readable)."""
    longest = "Y" * STATEMENT_TEXT_MAX
    load_family(_write(tmp_path, PARTITION.replace('text = "Y wins."', f'text = "{longest}"')))
    message = _broken(
        tmp_path, 'text = "Y wins."', f'text = "{longest}Y"', PARTITION, posed=True
    )
    assert message == (
        f"{tmp_path / 'x.toml'}: statement 'y': 'text' must be at most 2,000 characters, not "
        "2,001 (a statement is one question; the joint arm asks a whole family in one prompt)"
    )


def test_the_checks_take_load_families_mapping_as_well(tmp_path: Path) -> None:
    """`check_one_form(load_families())` and `check_well_posed(load_families())` raised
    AttributeError: iterating the mapping gave its ids. They check its values."""
    _write(tmp_path, GOOD.format(id="caf\\u00e9"), "a.toml")
    _write(tmp_path, GOOD.format(id="coins"), "b.toml")
    families = load_families(tmp_path)
    check_one_form(families)
    check_well_posed(families)
    _write(tmp_path, GOOD.format(id="cafe\\u0301"), "c.toml")
    with pytest.raises(FamilyError, match=r"c\.toml: .*already used by .*a\.toml"):
        check_one_form(load_families(tmp_path))
    _write(tmp_path, PARTITION.replace('formula = "x"', 'formula = "x or not x"'), "b.toml")
    (tmp_path / "c.toml").unlink()
    with pytest.raises(FamilyError, match=r"b\.toml: "):
        check_well_posed(load_families(tmp_path))
