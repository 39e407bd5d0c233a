"""Issue 9: an empty families folder and an incoherent control family are refused at plan time."""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path

import pytest

from panels.families import FamilyError
from runs.spec import SpecError, load_spec
from runs.units import UnitSource

SPEC = """
name = "fam"
seed = 1
[data]
families = "{families}"
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "families/isolated"
"""

COIN = """
id = "coin"
title = "A fair coin"
shape = "negation"
control = true
variables = ["heads"]
[[statements]]
id = "heads"
text = "heads"
formula = "heads"
exact = {heads}
[[statements]]
id = "tails"
text = "tails"
formula = "not heads"
exact = {tails}
"""


def units_for(tmp_path: Path, files: dict[str, str]) -> UnitSource:
    folder = tmp_path / "families"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC.format(families=folder.as_posix()), encoding="utf-8")
    return UnitSource.from_spec(load_spec(spec_path))


def test_an_empty_families_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"data\.families: a folder holding at least one family"):
        units_for(tmp_path, {}).families  # noqa: B018


def test_a_folder_of_hidden_files_alone_names_them(tmp_path: Path) -> None:
    """A families folder holding only `.h.toml` (a family written under a hidden name) was
    said to have no *.toml, with no word of the file passed over."""
    coin = COIN.format(heads=0.5, tails=0.5)
    units = units_for(tmp_path, {".h.toml": coin, ".DS_Store": "", ".a.toml": coin, ".z": ""})
    (tmp_path / "families" / ".git").mkdir()
    with pytest.raises(SpecError) as refused:
        units.families  # noqa: B018
    assert str(refused.value).endswith(
        f"{tmp_path / 'families'} has none; 2 hidden entries passed over (a name starting with "
        '"." is not read as a family): .a.toml, .h.toml'
    )  # not .DS_Store, .git/ or .z: never taken for families (a reviewer's)
    for name in (".DS_Store", ".a.toml", ".z"):
        (tmp_path / "families" / name).unlink()
    (tmp_path / "families" / ".git").rmdir()
    with pytest.raises(SpecError) as refused:
        UnitSource.from_spec(units.spec).families  # noqa: B018
    assert str(refused.value).endswith('is not read as a family): .h.toml')
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError) as refused:
        units_for(tmp_path / "empty", {}).families  # noqa: B018
    assert str(refused.value).endswith("has none")  # no hidden entry: nothing more said


def test_a_coherent_control_is_accepted(tmp_path: Path) -> None:
    units = units_for(tmp_path, {"coin.toml": COIN.format(heads=0.5, tails=0.5)})
    assert [u.id for u in units.families] == ["coin"]


def test_an_incoherent_control_is_refused_naming_the_file_and_profit(tmp_path: Path) -> None:
    # P(heads) + P(not heads) = 1.1: the L1 distance to the coherent set (a + b = 1) is 0.1,
    # which is the L1 Dutch-book profit (sell both contracts: collect 1.1, pay out 1).
    units = units_for(tmp_path, {"coin.toml": COIN.format(heads=0.5, tails=0.6)})
    with pytest.raises(FamilyError, match=r"coin\.toml: .*incoherent.*profit 0\.1 \(L1\)"):
        units.families  # noqa: B018


def test_a_control_no_solve_certifies_is_refused_in_its_files_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`UncertifiedError` from the control's check ended the run in a traceback."""
    import scoring
    from scoring.dutch_book import UncertifiedError

    def uncertified(*_args: object, **_kwargs: object) -> None:
        raise UncertifiedError("Dutch-book LP for set 0 could not be certified", gap=1e-6)

    monkeypatch.setattr(scoring, "dutch_books", uncertified)
    units = units_for(tmp_path, {"coin.toml": COIN.format(heads=0.5, tails=0.5)})
    with pytest.raises(FamilyError, match=r"coin\.toml: Dutch-book LP for the exact answers of "
                       r"control family 'coin' could not be certified \(duality gap 1e-06 > "
                       r"1e-09\), and a control not known coherent is refused"):  # fmt: skip
        units.families  # noqa: B018


def test_the_shipped_controls_are_coherent() -> None:
    from panels.families import FAMILIES_DIR, load_families
    from runs.units import check_control_coherent

    controls = [f for f in load_families(FAMILIES_DIR).values() if f.control]
    assert len(controls) >= 9
    for family in controls:
        check_control_coherent(family)


def test_plan_refuses_a_family_with_an_impossible_statement(tmp_path: Path) -> None:
    """`dutchbook plan` (and `run`) took a family whose statement could never hold, exit 0,
    and the run charged the model for it; the family file is now refused in one line."""
    from tests.runs.quiet_campaign import invoke

    impossible = COIN.format(heads=0.5, tails=0.5).replace("control = true", "control = false")
    impossible = impossible.replace('formula = "not heads"', 'formula = "heads and not heads"')
    units_for(tmp_path, {"coin.toml": impossible.replace("exact = 0.5\n", "")})
    code, said = invoke("plan", str(tmp_path / "spec.toml"))
    assert (code, said) == (
        2,
        f"error: {tmp_path / 'families' / 'coin.toml'}: statement 'tails': holds in no possible "
        "world of family 'coin' (its formula is impossible): any probability above 0 would be "
        "scored as incoherence; correct the formula\n",
    )


def test_a_folder_an_earlier_build_ran_with_an_impossible_statement_stays_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Earlier builds ran families with an impossible statement; the refusal (at plan time)
    once ran at every load, so such a folder could no longer be resumed, scored or reported,
    and a corrected family file would be another design: its paid answers were locked away."""
    import panels.families
    from panels.algebra import Panel
    from tests.runs.quiet_campaign import invoke

    impossible = COIN.format(heads=0.5, tails=0.5).replace("control = true", "control = false")
    impossible = impossible.replace('formula = "not heads"', 'formula = "heads and not heads"')
    units_for(tmp_path, {"coin.toml": impossible.replace("exact = 0.5\n", "")})
    spec, out = str(tmp_path / "spec.toml"), str(tmp_path / "out")
    assert invoke("run", spec, "--out", tmp_path.joinpath("new").as_posix())[0] == 2
    with monkeypatch.context() as earlier_build:
        earlier_build.setattr(Panel, "impossible", lambda panel: ())  # as it did not look
        earlier_build.setattr(panels.families, "_has_shape", lambda shape, truth: True)  # nor
        assert invoke("run", spec, "--out", out)[0] == 0
    for command in (["run", spec, "--out", out], ["score", out], ["report", out], ["audit", out]):
        code, said = invoke(*command)
        assert code == 0, said
        assert "no possible world" not in said


def test_a_hidden_family_file_is_no_input_but_one_an_earlier_build_ran_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hidden `.h.toml` in a families folder was read as a family (planned, asked, in
    design.json's inputs) though no listing shows it. It is passed over now; a folder an
    earlier build ran with one (design.json records it) still resumes, scores and reports."""
    import orjson

    import runs.design
    from tests.runs.quiet_campaign import invoke

    coin = COIN.format(heads=0.5, tails=0.5)
    units_for(tmp_path, {"coin.toml": coin, ".h.toml": coin.replace('"coin"', '"hidden"')})
    spec, new, old = (str(tmp_path / name) for name in ("spec.toml", "new", "old"))

    def inputs(folder: str) -> list[str]:
        return sorted(orjson.loads(Path(folder, "design.json").read_bytes())["files"])

    assert invoke("run", spec, "--out", new)[0] == 0
    assert inputs(new) == ["families/coin.toml"]
    with monkeypatch.context() as earlier_build:  # it read every *.toml
        earlier_build.setattr(runs.design, "hidden_families", lambda run_dir: {".h.toml"})
        assert invoke("run", spec, "--out", old)[0] == 0
    assert inputs(old) == ["families/.h.toml", "families/coin.toml"]
    for command in (["run", spec, "--out", old], ["score", old, "--spec", spec], ["report", old]):
        code, said = invoke(*command)
        assert code == 0 and "no longer an input" not in said, said


def test_plan_refuses_a_bidirectional_control_in_a_text_an_earlier_build_ran_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement text holding U+202E RIGHT-TO-LEFT OVERRIDE was planned and asked; a new
    design refuses it in one line naming the file, the family and the code point, and a folder
    an earlier build ran with it is still resumed, scored and reported."""
    import panels.families
    from tests.runs.quiet_campaign import invoke

    coin = COIN.format(heads=0.5, tails=0.5).replace('text = "tails"', 'text = "ta\u202eils"')
    units_for(tmp_path, {"coin.toml": coin})
    spec, out = str(tmp_path / "spec.toml"), str(tmp_path / "out")
    assert invoke("plan", spec) == (
        2,
        f"error: {tmp_path / 'families' / 'coin.toml'}: statement 'tails': 'text' of family "
        "'coin' holds U+202E RIGHT-TO-LEFT OVERRIDE, a bidirectional control: it reorders what "
        "follows it on screen, so the text displays other than it reads and than the model is "
        "asked; leave it out\n",
    )
    with monkeypatch.context() as earlier_build:
        earlier_build.setattr(panels.families, "bidi_control", lambda text: None)
        # U+202E is a format character too, which an earlier build let texts hold
        earlier_build.setattr(panels.families, "invisible_character", lambda text, **_: None)
        assert invoke("run", spec, "--out", out)[0] == 0
    for command in (["run", spec, "--out", out], ["score", out], ["report", out]):
        code, said = invoke(*command)
        assert code == 0, said
        assert "bidirectional" not in said


@pytest.mark.parametrize("shape", ["threshold", "deadline"])
def test_plan_refuses_a_chain_of_one_statement(tmp_path: Path, shape: str) -> None:
    """A threshold or deadline family of one statement was planned, exit 0, and read
    arbitrage-free whatever its model answered: one answer has no other to be out of order
    with. A folder an earlier build ran with one stays usable
    (`test_a_folder_an_earlier_build_ran_with_an_impossible_statement_stays_usable`)."""
    from panels.families import SHAPE_NEEDS
    from tests.runs.quiet_campaign import invoke

    one = COIN.format(heads=0.5, tails=0.5).split("[[statements]]")[:2]
    one[0] = one[0].replace("negation", shape).replace("control = true", "control = false")
    units_for(tmp_path, {"one.toml": "[[statements]]".join(one).replace("exact = 0.5\n", "")})
    code, said = invoke("plan", str(tmp_path / "spec.toml"))
    assert (code, said) == (
        2,
        f"error: {tmp_path / 'families' / 'one.toml'}: family 'coin' is of shape {shape!r}, but "
        f"its formulas do not make it one: that needs {SHAPE_NEEDS[shape]}; without it the "
        "shape's rule does not bind the answers, and any answers could read coherent; correct "
        "the formulas or the shape\n",
    )


def _family_of(statements: int) -> str:
    """A threshold family of `statements` statements over two variables, no control."""
    lines = ['id = "big"', 'title = "Many thresholds"', 'shape = "threshold"',
             'variables = ["a", "b"]']  # fmt: skip
    for n in range(statements):
        lines += ["[[statements]]", f'id = "s{n}"', f'text = "statement {n}"', 'formula = "a"']
    return "\n".join(lines) + "\n"


def test_plan_refuses_a_family_of_more_statements_than_a_family_has(tmp_path: Path) -> None:
    """A family of 20,000 statements (within the truth-value bound) was planned and asked,
    and its report took 300 s and 4.2 GB; one of 100 is taken."""
    from panels.families import MAX_STATEMENTS
    from tests.runs.quiet_campaign import invoke

    units_for(tmp_path, {"big.toml": _family_of(MAX_STATEMENTS + 1)})
    code, said = invoke("plan", str(tmp_path / "spec.toml"))
    assert (code, said) == (
        2,
        f"error: {tmp_path / 'families' / 'big.toml'}: family 'big' has 101 statements; at most "
        "100 (a family is a handful of statements: the joint arm asks them all in one prompt)\n",
    )
    (tmp_path / "families" / "big.toml").write_text(_family_of(MAX_STATEMENTS), encoding="utf-8")
    code, said = invoke("plan", str(tmp_path / "spec.toml"))
    assert code == 0, said


def test_plan_refuses_exact_on_a_family_that_is_no_control(tmp_path: Path) -> None:
    """`exact = 0.5` on a family with control = false was taken in silence (and never used)."""
    from tests.runs.quiet_campaign import invoke

    units_for(tmp_path, {"coin.toml": COIN.format(heads=0.5, tails=0.5).replace(
        "control = true", "control = false")})  # fmt: skip
    code, said = invoke("plan", str(tmp_path / "spec.toml"))
    assert (code, said) == (
        2,
        f"error: {tmp_path / 'families' / 'coin.toml'}: statement 'heads': has 'exact', but "
        "family 'coin' is not a control (control = false): only a control's statements carry "
        "known probabilities; set control = true, or remove 'exact'\n",
    )


def test_entries_not_named_toml_are_said_and_the_plan_goes_ahead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A family saved as `x.json` beside `.toml` files was passed over without a word, and
    the campaign planned without it. Hidden files (`.DS_Store`) no one writes as a family."""
    from runs.design import check_new_design

    coin = COIN.format(heads=0.5, tails=0.5)
    units = units_for(tmp_path, {"coin.toml": coin, "x.json": "{}", "b.txt": "", "c.csv": "",
                                 "d.md": "", ".DS_Store": ""})  # fmt: skip
    (tmp_path / "families" / "a").mkdir()
    check_new_design(units.spec, units)  # no refusal
    folder = tmp_path / "families"
    assert capsys.readouterr().err == (
        f"note: {folder} holds 5 entries not named *.toml, not read as families: a/, b.txt, "
        "c.csv and 2 more; a family file's name must end in .toml\n"
    )
    (folder / "a").rmdir()
    for name in ("b.txt", "c.csv", "d.md"):
        (folder / name).unlink()
    check_new_design(units.spec, UnitSource.from_spec(units.spec))
    assert capsys.readouterr().err == (
        f"note: {folder} holds 1 entry not named *.toml, not read as families: x.json; a "
        "family file's name must end in .toml\n"
    )
    # A note stderr cannot take is dropped, and the plan goes ahead: it ended `run` and
    # `plan` in exit 6 (a full stderr's error read as a full disk's).
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stderr", Full())
        check_new_design(units.spec, UnitSource.from_spec(units.spec))
    (folder / "x.json").unlink()
    check_new_design(units.spec, UnitSource.from_spec(units.spec))
    assert capsys.readouterr().err == ""
