"""The CLI answers at once: importing it pulls in no heavy library, commands load lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import COMMANDS, app, load_command
from runs.signals import EXIT_INTERRUPTED, INTERRUPTED

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "numpy", "polars", "aiohttp", "matplotlib", "highspy", "providers.sim", "panels", "pydantic"
)  # fmt: skip


def loaded_after(code: str) -> list[str]:
    """Heavy modules in sys.modules after running `code` in a fresh interpreter."""
    probe = (
        f"{code}\nimport sys\n"
        f"print('LOADED:', *(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("LOADED:")][-1]
    return line.split()[1:]


def test_importing_the_cli_imports_no_heavy_library() -> None:
    assert loaded_after("import runs.cli") == []


def test_help_lists_every_command_without_importing_them() -> None:
    code = (
        "import sys\nfrom runs.cli import main\nsys.argv = ['dutchbook', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code) == []
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def test_check_imports_no_server_dataframe_or_plotting_library() -> None:
    code = (
        "import sys\nfrom runs.cli import main\n"
        "sys.argv = ['dutchbook', 'check', 'examples/figure1.toml']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    loaded = loaded_after(code)
    assert "numpy" in loaded  # it did score the file
    # pydantic: typer 0.29 imports it to coerce any parameter, doubling the command's start-up
    assert not {"polars", "aiohttp", "matplotlib", "providers.sim", "pydantic"} & set(loaded)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_summary_is_the_commands_own_help(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    first = " ".join((command.help or "").split("\n\n")[0].split())
    assert COMMANDS[name][1] == first


def test_running_a_command_loads_the_real_one() -> None:
    result = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--repair" in result.output


def test_ctrl_c_while_a_command_imports_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import runs.cli

    def interrupted(name: str) -> None:  # Ctrl-C in the first second of `dutchbook run`
        raise KeyboardInterrupt

    monkeypatch.setattr(runs.cli, "load_command", interrupted)
    result = CliRunner().invoke(app, ["run", "spec.toml"])
    assert result.exit_code == EXIT_INTERRUPTED == 130
    assert result.output.strip() == INTERRUPTED  # typer alone said nothing
