"""Model names a report's reader would misread are refused for a new design
(`runs.spec.check_one_form`): one beginning with `=`, `+`, `-` or `@`, which a spreadsheet
opening the report's CSV files runs as a formula (a tester's `=HYPERLINK(...)` and
`+cmd|' /C calc'!A0` went into leaderboard.csv, models.csv and audit.csv as written), and
`all`, which the audit's tables use for their total row (two rows read `all`). A folder an
earlier build ran with one stays readable."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.spec import FORMULA_STARTS, TOTAL_ROW

SPEC = """
name = "names"
seed = 2
[data]
stock_days = 2
[[models]]
name = "{name}"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


def _spec(root: Path, name: str) -> Path:
    path = root / "spec.toml"
    path.write_text(SPEC.format(name=name), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name", [*(start + "cmd|' /C calc'!A0" for start in FORMULA_STARTS), TOTAL_ROW, "All"]
)
def test_a_name_a_spreadsheet_or_the_audit_would_misread_is_refused(
    tmp_path: Path, name: str
) -> None:
    for command in (["plan"], ["run"]):
        args = [*command, str(_spec(tmp_path, name))]
        if command == ["run"]:
            args += ["--out", str(tmp_path / "out")]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "models[0].name: a name" in result.output
        assert not (tmp_path / "out").exists()


def test_names_that_only_hold_such_characters_are_taken(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["plan", str(_spec(tmp_path, "gpt-4o+tools@eu=1 (all)"))])
    assert result.exit_code == 0, result.output


def test_a_folder_an_earlier_build_ran_with_such_a_name_stays_readable(tmp_path: Path) -> None:
    good = CliRunner().invoke(
        app, ["run", str(_spec(tmp_path, "m")), "--out", str(tmp_path / "out")]
    )
    assert good.exit_code == 0, good.output
    frozen = tmp_path / "out" / "spec.toml"  # as an earlier build froze it
    frozen.write_text(frozen.read_text("utf-8").replace('name = "m"', 'name = "=m"'), "utf-8")
    for command in ("status", "audit", "report"):
        result = CliRunner().invoke(app, [command, str(tmp_path / "out")])
        assert result.exit_code == 0, (command, result.output)


def test_a_folder_an_earlier_build_ran_with_such_a_name_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made as a build before the check made it, then resumed by this one: the frozen
    design is not asked again (`runs.design.check_new_design`)."""
    import runs.spec

    spec = _spec(tmp_path, "=m")
    monkeypatch.setattr(runs.spec, "_name_misread", lambda name: None)
    first = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "out")])
    assert first.exit_code == 0, first.output
    monkeypatch.undo()
    again = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "out")])
    assert again.exit_code == 0, again.output
