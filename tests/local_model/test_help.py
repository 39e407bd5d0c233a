"""`python -m runs.local_model --help` says what each command and option is for."""

from __future__ import annotations

import re

import pytest

from runs.local_model import parse_args


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "100")  # each option's words beside it, not below
        return _printed_help(capsys)


def _printed_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        parse_args(["--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("shown", ["{demo,test,serve}", "--spec SPEC", "--out OUT", "--threads N"])
def test_every_argument_has_its_words(capsys: pytest.CaptureFixture[str], shown: str) -> None:
    """The commands, --spec, --out and --threads were listed with nothing beside them."""
    assert re.search(rf"^  {re.escape(shown)} +\S", _help(capsys), re.MULTILINE), shown


def test_each_command_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    words = " ".join(_help(capsys).split())
    for command in ("demo:", "test:", "serve:"):
        assert command in words
