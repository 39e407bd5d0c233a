"""`score` and `repair` of a folder whose family files changed after the run.

A family id renamed left its answers unscored without a word: "scored 0 answered sets",
the report "not scored: no answers" at 100% coverage, exit 0. Answers about units or events
the data given no longer has are now refused in one line; a changed input file that still
fits the answers (a statement added, a text corrected) is scored, with a note naming it,
unless a new design would refuse it (a family file whose formulas no longer tie its answers).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import app

FAMILY = """id = "g1"
title = "Good"
shape = "negation"
variables = ["a"]
[[statements]]
id = "s1"
text = "A happens."
formula = "a"
[[statements]]
id = "s2"
text = "A does not happen."
formula = "not a"
"""

SPEC = """name = "rep"
seed = 1
parser = "lenient"
[data]
families = "fams"
[[models]]
name = "m1"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "families/isolated"
"""

ADDED = '[[statements]]\nid = "s9"\ntext = "A fails to happen."\nformula = "not a"\n'


def _run(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """The spec and folder of a finished run of family files `files` (name: text)."""
    folder = tmp_path / "fams"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return spec, out


@pytest.fixture
def answered(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A finished family run: its spec, its family file and its folder."""
    spec, out = _run(tmp_path, {"g.toml": FAMILY})
    return spec, tmp_path / "fams" / "g.toml", out


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("command", ["score", "repair"])
@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ('id = "g1"', 'id = "g-renamed"', "1 unit (g1)"),
        ('id = "s2"', 'id = "s3"', "1 event (g1: s2)"),
    ],
)
def test_answers_the_data_no_longer_has_are_refused(
    answered: tuple[Path, Path, Path], command: str, old: str, new: str, named: str
) -> None:
    spec, family, out = answered
    scores = (out / "scores.parquet").read_bytes()
    family.write_text(FAMILY.replace(old, new), encoding="utf-8")
    result = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
    assert result.exit_code == 2, result.output
    assert _errors(result.output) == [
        f"error: m1 / families/isolated: the folder holds answers about {named} that the data "
        "given does not have: it is not the data the run was planned from (a family, statement "
        "or date renamed or removed?); score with the data the run asked about"
    ]
    assert (out / "scores.parquet").read_bytes() == scores  # left as it was


@pytest.mark.parametrize("command", ["score", "repair"])
def test_a_changed_file_that_still_fits_is_scored_with_a_note(
    answered: tuple[Path, Path, Path], command: str
) -> None:
    spec, family, out = answered
    note = f"note: {out} was planned from other data: families/g.toml ({family}) changed"
    result = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
    assert result.exit_code == 0 and "note:" not in result.output, result.output
    family.write_text(FAMILY + ADDED, encoding="utf-8")
    result = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
    assert result.exit_code == 0, result.output
    assert note + "; its answers are scored against the data as it is now" in result.output


@pytest.mark.parametrize("command", ["score", "repair"])
@pytest.mark.parametrize("damage", ["not toml", "too big"])
def test_a_family_file_that_no_longer_loads_is_refused_without_the_note(
    answered: tuple[Path, Path, Path], command: str, damage: str
) -> None:
    """The note "scored against the data as it is now" was printed, then the data refused:
    the error alone now."""
    from panels.input_files import TEXT_INPUT_MAX_BYTES

    spec, family, out = answered
    if damage == "not toml":
        family.write_text(FAMILY + "[[statements\n", encoding="utf-8")
    else:
        family.write_bytes(FAMILY.encode() + b"#" * TEXT_INPUT_MAX_BYTES)
    result = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
    assert result.exit_code != 0, result.output
    assert "note:" not in result.output, result.output
    assert len(_errors(result.output)) == 1 and str(family) in result.output, result.output


#: A tester's edit: `not a` made a free variable, so no rule binds the two answers.
UNTIED = FAMILY.replace('"not a"', '"na"').replace('["a"]', '["a", "na"]')
#: A statement holding in every world: any answer below 1 charged as incoherence.
ALWAYS = '[[statements]]\nid = "s9"\ntext = "A happens or not."\nformula = "a or not a"\n'


@pytest.mark.parametrize("command", ["score", "repair"])
@pytest.mark.parametrize(
    ("edited", "check"),
    [
        (UNTIED, "family 'g1' is of shape 'negation', but its formulas do not make it one"),
        (FAMILY + ALWAYS, "statement 's9': holds in every possible world of family 'g1'"),
    ],
    ids=["untied", "always-true"],
)
def test_a_changed_file_a_new_design_would_refuse_is_refused(
    answered: tuple[Path, Path, Path], command: str, edited: str, check: str
) -> None:
    """It was scored against its answers, with a note, exit 0: a family edited after its run
    so that no rule bound its answers read coherent whatever they were (a tester's
    arbitrage-free share went from 33% to 67%), where `plan` refused the same file."""
    spec, family, out = answered
    scores = (out / "scores.parquet").read_bytes()
    family.write_text(edited, encoding="utf-8")
    result = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
    assert result.exit_code == 2, result.output
    [line] = _errors(result.output)
    assert line.startswith(f"error: {family}: ") and check in line, line
    assert line.endswith(
        f" (the file changed since {out} was planned, and a family file changed since is held "
        "to a new plan's checks; or put back the one the run was planned from)"
    ), line
    assert "note:" not in result.output
    assert (out / "scores.parquet").read_bytes() == scores  # left as it was


def test_a_family_file_unchanged_since_its_run_is_not_held_to_later_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder an earlier build ran with a family it took and this one refuses stays
    scorable while the file is as it was, renamed too (its content is what was planned);
    another file changed beside it is checked alone."""
    import panels.families

    with monkeypatch.context() as earlier_build:
        earlier_build.setattr(panels.families, "_has_shape", lambda shape, truth: True)
        spec, out = _run(tmp_path, {"g.toml": UNTIED, "h.toml": FAMILY.replace('"g1"', '"h1"')})
    folder = tmp_path / "fams"
    (folder / "g.toml").rename(folder / "f.toml")
    (folder / "h.toml").write_text(FAMILY.replace('"g1"', '"h1"') + ADDED, encoding="utf-8")
    for command in ("score", "repair"):
        result = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
        assert result.exit_code == 0, result.output
        assert "families/f.toml" in result.output and "families/h.toml" in result.output


def test_a_family_file_added_since_the_run_is_held_to_the_checks_beside_the_others(
    tmp_path: Path,
) -> None:
    """Its family id, the id of a family the run asked written in another Unicode form, would
    be drawn alike in every table; `plan` refuses the pair."""
    spec, out = _run(tmp_path, {"g.toml": FAMILY.replace('"g1"', '"caf\u00e9"')})
    added = tmp_path / "fams" / "h.toml"
    added.write_text(FAMILY.replace('"g1"', '"cafe\u0301"'), encoding="utf-8")
    result = CliRunner().invoke(app, ["score", str(out), "--spec", str(spec)])
    assert result.exit_code == 2, result.output
    [line] = _errors(result.output)
    assert line.startswith(
        f"error: {added}: family id 'cafe\\u0301' already used by {tmp_path / 'fams' / 'g.toml'}"
    ), line
