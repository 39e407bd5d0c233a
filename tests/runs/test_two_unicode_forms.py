"""One name in two Unicode forms ("café" with U+00E9, and "cafe" + U+0301): a new campaign
is refused, but a folder an earlier build ran with such a pair stays resumable, scorable,
reportable and auditable (its tables already show both; renaming would be another design,
and the answers were paid for)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import panels.families
import panels.input_files
from runs.cli import app
from tests.runs.coin_family import coin_family

SPEC = """
name = "forms"
seed = 3
[data]
families = "{families}"
[[models]]
name = "{first}"
provider = "sim"
model = "sim-coherent"
[[models]]
name = "cafe\\u0301"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "families/isolated"
"""

def write(root: Path, *, first: str = "caf\\u00e9", family_id: str = "cafe\\u0301",
          heads: str = "heads") -> Path:  # fmt: skip
    """A spec of two models, "café" in both forms unless `first` says otherwise, over a
    families folder of two families whose ids are "café" in both forms unless `family_id`
    says otherwise; the second family's statements are `heads` and "tails"."""
    families = root / "families"
    families.mkdir()
    for name, (id_, heads_id) in {"a": ("caf\\u00e9", "heads"), "b": (family_id, heads)}.items():
        (families / f"{name}.toml").write_text(coin_family(id_, heads_id=heads_id), "utf-8")
    spec = root / "spec.toml"
    spec.write_text(SPEC.format(families=families.as_posix(), first=first), "utf-8")
    return spec


def dutchbook(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_a_folder_an_earlier_build_ran_with_two_forms_stays_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built as a build before the check ran it: names compared as written."""
    spec, out = write(tmp_path), tmp_path / "out"
    (tmp_path / "families" / "b.toml").write_text(
        coin_family("cafe\\u0301", heads_id="he\\u0301ads").replace(
            'id = "tails"', 'id = "h\\u00e9ads"'
        ),
        "utf-8",
    )  # statements "héads" in both forms
    with monkeypatch.context() as earlier:
        for module in (panels.input_files, panels.families):
            earlier.setattr(module, "composed", lambda text: text, raising=False)
        code, output = dutchbook("run", spec, "--out", out)
        assert code == 0, output
    commands: list[list[str | Path]] = [
        ["run", spec, "--out", out], ["score", out], ["report", out], ["audit", out],
        ["status", out],
    ]  # fmt: skip
    for command in commands:
        code, output = dutchbook(*command)
        assert code == 0, (command, output)
        assert "Unicode forms" not in output


def test_a_new_run_with_two_model_names_in_two_forms_is_refused(tmp_path: Path) -> None:
    code, output = dutchbook("run", write(tmp_path, family_id="coin"), "--out", tmp_path / "o")
    assert code != 0
    assert "'caf\\xe9' and 'cafe\\u0301'" in output and output.count("\n") == 1, output
    assert not (tmp_path / "o" / "spec.toml").exists()


def test_a_new_run_with_two_family_ids_in_two_forms_is_refused(tmp_path: Path) -> None:
    code, output = dutchbook("run", write(tmp_path, first="m"), "--out", tmp_path / "o")
    assert code != 0
    assert "(written 'caf\\xe9' there)" in output and output.count("\n") == 1, output
    assert not (tmp_path / "o" / "spec.toml").exists()


def test_a_new_run_with_two_statement_ids_in_two_forms_is_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, first="m", family_id="coin", heads="tails")
    (tmp_path / "families" / "b.toml").write_text(
        coin_family("coin", heads_id="caf\\u00e9").replace('"tails"', '"cafe\\u0301"'), "utf-8"
    )
    code, output = dutchbook("run", spec, "--out", tmp_path / "o")
    assert code != 0
    assert "written 'caf\\xe9' and 'cafe\\u0301'" in output and output.count("\n") == 1, output


def test_plan_refuses_two_model_names_in_two_forms(tmp_path: Path) -> None:
    code, output = dutchbook("plan", write(tmp_path, family_id="coin"))
    assert code != 0
    assert "'caf\\xe9' and 'cafe\\u0301'" in output and output.count("\n") == 1, output
