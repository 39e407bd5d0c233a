"""The CLI answers at once: importing it pulls in no heavy library, commands load lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _main_exit(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """`runs.cli.main` as the console script runs it; its exit status."""
    import runs.cli
    import runs.signals

    monkeypatch.setattr(runs.signals, "_interrupt_said", False)
    monkeypatch.setattr(sys, "argv", ["dutchbook", *argv])
    with pytest.raises(SystemExit) as exited:
        runs.cli.main()
    code = exited.value.code
    assert isinstance(code, int)
    return code


def test_ctrl_c_in_typers_own_frames_still_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Ctrl-C after the command's work, as typer leaves the command's context: typer turns
    # it into exit 130 without a word (once in about 400 fuzzed early interrupts).
    import typer

    import runs.cli

    invoked: list[bool] = []
    invoke = runs.cli.LazyGroup.invoke

    def invoke_then_mark(self: runs.cli.LazyGroup, ctx: Any) -> Any:
        try:
            return invoke(self, ctx)
        finally:
            invoked.append(True)

    # typer's own click (a private copy): its context class, found through the group.
    context = typer.main.get_command(app).context_class
    leave = context.__exit__

    def interrupted(self: Any, *exc: Any) -> Any:
        if invoked and self.parent is None:  # typer leaving the command's outer context
            raise KeyboardInterrupt
        return leave(self, *exc)

    monkeypatch.setattr(runs.cli.LazyGroup, "invoke", invoke_then_mark)
    monkeypatch.setattr(context, "__exit__", interrupted)
    assert _main_exit(["check", str(ROOT / "examples" / "figure1.toml")], monkeypatch) == 130
    assert capsys.readouterr().err.splitlines()[-1:] == [INTERRUPTED]


def test_an_interrupt_a_command_already_explained_is_not_said_twice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import runs.cli

    def interrupted(name: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runs.cli, "load_command", interrupted)
    assert _main_exit(["run", "spec.toml"], monkeypatch) == 130
    assert capsys.readouterr().err.count(INTERRUPTED) == 1


def test_an_ordinary_exit_says_nothing_of_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main_exit(["check", str(ROOT / "examples" / "figure1.toml")], monkeypatch) == 0
    assert INTERRUPTED not in capsys.readouterr().err


@pytest.mark.figure_workers
def test_run_starts_its_figure_workers_before_it_imports_the_pipeline(tmp_path: Path) -> None:
    """The workers' matplotlib import then uses the core the pipeline's import leaves idle
    (issue 12), instead of competing with dispatch."""
    code = (
        "import sys\nimport runs.figure_workers as fw\n"
        "start = fw.FigureWorkers.__init__\n"
        "def started(self, *args, **kwargs):\n"
        "    print('PIPELINE LOADED:', 'runs.pipeline' in sys.modules, file=sys.stderr)\n"
        "    start(self, *args, **kwargs)\n"
        "fw.FigureWorkers.__init__ = started\n"
        "import signal\n"
        "class Watch:\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'runs.pipeline':\n"
        "            held = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "            print('PIPELINE IMPORTED HELD:', held, file=sys.stderr)\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from runs.cli import main\n"
        f"sys.argv = ['dutchbook', 'run', {str(tmp_path / 'no-such-spec.toml')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "PIPELINE LOADED: False" in done.stderr.splitlines()
    # and imported with the stop signals held, as `runs.cli.load_command` imports a command
    assert "PIPELINE IMPORTED HELD: True" in done.stderr.splitlines()
    assert "no-such-spec.toml" in done.stderr  # it went on to the pipeline, which said so
