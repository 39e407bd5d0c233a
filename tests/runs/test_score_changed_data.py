"""`score` and `repair` of a folder whose family files changed after the run.

A family id renamed left its answers unscored without a word: "scored 0 answered sets",
the report "not scored: no answers" at 100% coverage, exit 0. Answers about units or events
the data given no longer has are now refused in one line; a changed input file that still
fits the answers (a statement added, a text corrected) is scored, with a note naming it.
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

ADDED = '[[statements]]\nid = "s9"\ntext = "A or not A."\nformula = "a or not a"\n'


@pytest.fixture
def answered(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A finished family run: its spec, its family file and its folder."""
    family = tmp_path / "fams" / "g.toml"
    family.parent.mkdir()
    family.write_text(FAMILY, encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return spec, family, out


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
