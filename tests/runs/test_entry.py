"""The console script holds the stop signals while it imports the CLI (`runs.entry`): one
that arrives then ends the command in one line, exit 130, not an import's traceback
(Ctrl-C) or a silent death (SIGTERM, a hangup)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runs.entry import _HELD
from runs.figure_workers import WORKERS_ENV
from runs.run_folder import has_run_marks
from runs.signals import EXIT_INTERRUPTED, INTERRUPTED, INTERRUPTED_MESSAGE, STOP_SIGNALS
from tests.runs.run_folders import SMALL_SPEC

ROOT = Path(__file__).resolve().parents[2]

#: Runs `dutchbook ARGV` (`dutchbook check` unless given) through the console script's
#: `main`, sending itself `SIG` as the import of `MODULE` begins: `runs.signals` (before any
#: handler exists: the hold must keep it) or the CLI (typer loading, the longest stretch).
DURING_IMPORT = """
import builtins, os, signal, sys
import runs.entry
real_import = builtins.__import__
sent = []
def importing(name, globals=None, locals=None, fromlist=(), level=0):
    asked = [name] + [name + "." + item for item in fromlist or ()]
    if "{module}" in asked and not sent:
        sent.append(True)
        os.kill(os.getpid(), signal.{sig})
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = importing
sys.argv = {argv!r}
runs.entry.main()
"""
CHECK = ["dutchbook", "check", "examples/figure1.toml"]


def _not_ignored() -> None:
    """The child as a terminal's command starts: a background job ignores Ctrl-C and `nohup`
    (under which the suite may run) a hangup, and an ignored signal stays ignored."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def test_the_entry_holds_exactly_the_stop_signals() -> None:
    assert set(_HELD) == set(STOP_SIGNALS)


@pytest.mark.parametrize("module", ["runs.signals", "runs.cli"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_while_the_cli_imports_ends_in_one_line(sig: str, module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DURING_IMPORT.format(sig=sig, module=module, argv=CHECK)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        preexec_fn=_not_ignored,
    )  # fmt: skip
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.strip() == INTERRUPTED  # no traceback, said once
    assert "Dutch-book profit" not in done.stdout  # the command never ran


def _run_stopped(module: str, spec: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`dutchbook run SPEC --out OUT` sent a Ctrl-C as the import of `module` begins."""
    argv = ["dutchbook", "run", str(spec), "--out", str(out)]
    return subprocess.run(
        [sys.executable, "-c", DURING_IMPORT.format(sig="SIGINT", module=module, argv=argv)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        preexec_fn=_not_ignored, env={**os.environ, WORKERS_ENV: "0"},
    )  # fmt: skip


#: Where a Ctrl-C stops `dutchbook run` before its folder holds a run, and what it then says
#: on stdout: as the CLI imports, nothing (no command begun: stderr alone, as for every
#: command); in the command as it imports the pipeline (held, and acted on as that import
#: ends, before the spec is read or a folder made), the run's line, on stdout too (a
#: separate pipe here: `_end_interrupted`).
BEFORE_THE_FOLDER = [("runs.cli", ""), ("runs.pipeline", INTERRUPTED + "\n")]


@pytest.mark.parametrize(("module", "stdout"), BEFORE_THE_FOLDER)
def test_a_run_stopped_before_its_folder_says_so_on_stderr_in_the_same_words(
    module: str, stdout: str, tmp_path: Path
) -> None:
    """The line went to stderr when the Ctrl-C came as the CLI loaded, but to stdout alone,
    saying "... to resume", a few tenths of a second later: a `run ... > log` stopped there
    said nothing on screen, and there was no folder to resume."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    out = tmp_path / "run"
    done = _run_stopped(module, tmp_path / "spec.toml", out)
    assert (done.returncode, done.stdout, done.stderr) == (
        EXIT_INTERRUPTED, stdout, INTERRUPTED + "\n"
    )
    assert not out.exists()


def test_a_run_stopped_on_a_folder_holding_a_run_says_to_resume_on_stderr(
    tmp_path: Path,
) -> None:
    """Once the folder holds a run (here an earlier run's frozen spec), running the same
    command again resumes it, and the line says so, on stderr and, a file of its own, on
    stdout, after the folder's name."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    out = tmp_path / "run"
    out.mkdir()
    (out / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    done = _run_stopped("runs.pipeline", tmp_path / "spec.toml", out)
    assert (done.returncode, done.stdout, done.stderr) == (
        EXIT_INTERRUPTED, f"run folder: {out}\n{INTERRUPTED_MESSAGE}\n", INTERRUPTED_MESSAGE + "\n"
    )


#: Runs `dutchbook ARGV` through the console script's `main`, stopped by a Ctrl-C as it
#: scores: after dispatch, outside its handlers, where the command's own
#: `except KeyboardInterrupt` says the line.
STOPPED_AS_IT_SCORES = """
import sys
import runs.entry, runs.pipeline
def stopped(*args, **kwargs):
    raise KeyboardInterrupt
runs.pipeline.score_run = stopped
sys.argv = {argv!r}
runs.entry.main()
"""


def _run_stopped_as_it_scores(
    argv: list[str], cwd: Path, pass_fds: tuple[int, ...] = (), merged: bool = False
) -> subprocess.CompletedProcess[str]:
    """`dutchbook ARGV` in `cwd`, stopped as it scores (`STOPPED_AS_IT_SCORES`); `merged`:
    its stderr is its stdout's pipe (`2>&1`)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", STOPPED_AS_IT_SCORES.format(argv=argv)],
        cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True, timeout=60,
        check=False, pass_fds=pass_fds, env={**os.environ, WORKERS_ENV: "0", "PYTHONPATH": path},
    )  # fmt: skip


def _fifo_spec(folder: Path) -> tuple[str, subprocess.Popen[bytes], tuple[int, ...]]:
    """`mkfifo spec.fifo; cat spec.toml > spec.fifo &`: the spec's path, its writer."""
    os.mkfifo(folder / "spec.fifo")
    writer = subprocess.Popen(["sh", "-c", "exec cat spec.toml > spec.fifo"], cwd=folder)
    return "spec.fifo", writer, ()


def _pipe_spec(folder: Path) -> tuple[str, subprocess.Popen[bytes], tuple[int, ...]]:
    """`run <(cat spec.toml)`: the spec is a pipe's `/dev/fd/N`, its writer done."""
    read, write = os.pipe()
    os.write(write, (folder / "spec.toml").read_bytes())
    os.close(write)
    return f"/dev/fd/{read}", subprocess.Popen(["true"]), (read,)


@pytest.mark.parametrize("given", [_fifo_spec, _pipe_spec], ids=["fifo", "pipe"])
def test_a_run_of_a_spec_read_once_stopped_as_it_scores_says_to_resume(
    given: Any, tmp_path: Path
) -> None:
    """Without --out, the stop's line found the folder by reading the spec a second time: a
    FIFO's second open waited for a writer that never came (a second Ctrl-C needed), and
    then, as a `<(...)` spec read empty, the line lacked "to resume", though `out/small`
    held the run. It names the folder the run resolved instead."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    spec, writer, fds = given(tmp_path)
    try:
        done = _run_stopped_as_it_scores(["dutchbook", "run", spec], tmp_path, fds)
    finally:
        writer.kill()
        writer.wait()
        for fd in fds:
            os.close(fd)
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.splitlines()[-1] == INTERRUPTED_MESSAGE
    assert has_run_marks(tmp_path / "out" / "small")


@pytest.mark.parametrize("merged", [False, True], ids=["apart", "2>&1"])
def test_a_stopped_run_says_its_line_last_on_stdout_and_on_stderr_once_each(
    merged: bool, tmp_path: Path
) -> None:
    """The line was moved from stdout to stderr, and scripts reading the run's last line on
    stdout (`runs.signals.INTERRUPTED_MESSAGE`) no longer found it. It is on both, stdout's
    last after its "run folder:" line; once where the two are one file (`2>&1`, a
    terminal)."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    argv = ["dutchbook", "run", "spec.toml", "--out", "run"]
    done = _run_stopped_as_it_scores(argv, tmp_path, merged=merged)
    assert done.returncode == EXIT_INTERRUPTED, done.stdout + (done.stderr or "")
    assert done.stdout.splitlines()[-1] == INTERRUPTED_MESSAGE
    assert done.stdout.count(INTERRUPTED) == 1
    if not merged:
        assert done.stderr.splitlines()[-1] == INTERRUPTED_MESSAGE


def test_a_run_stopped_as_it_scores_names_its_folder_before_the_line(tmp_path: Path) -> None:
    """A stop during scoring or the report said the line with no "run folder: ..." before it,
    as a stop during dispatch says (and docs/interfaces.md said it did): a script reading
    stdout had the line but not the folder the resume carries on."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    argv = ["dutchbook", "run", "spec.toml", "--out", "run"]
    done = _run_stopped_as_it_scores(argv, tmp_path)
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stdout.splitlines()[-2:] == ["run folder: run", INTERRUPTED_MESSAGE]


#: `STOPPED_AS_IT_SCORES` where the stop also ends stdout's reader, as a Ctrl-C to
#: `dutchbook run ... | tee log` stops tee too: stdout is from then a pipe no one reads.
STOPPED_WITH_ITS_READER = """
import os, sys
import runs.entry, runs.pipeline
def stopped(*args, **kwargs):
    read, write = os.pipe()
    os.close(read)
    sys.stdout.flush()
    os.dup2(write, 1)
    raise KeyboardInterrupt
runs.pipeline.score_run = stopped
sys.argv = {argv!r}
runs.entry.main()
"""


def test_a_run_stopped_as_it_scores_with_its_stdout_reader_gone_says_its_line(
    tmp_path: Path,
) -> None:
    """`dutchbook run ... | tee log` and a Ctrl-C: the same signal stops tee, and the run's
    "run folder:" line on that closed stdout ended it in "the output (stdout) closed", exit
    1, its interrupt line unsaid (a reviewer's). It is said on stderr, exit 130."""
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    argv = ["dutchbook", "run", "spec.toml", "--out", "run"]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_WITH_ITS_READER.format(argv=argv)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, WORKERS_ENV: "0", "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.splitlines()[-1] == INTERRUPTED_MESSAGE, done.stderr
    assert "closed" not in done.stderr


def test_the_cli_module_run_with_python_dash_m_runs_the_command() -> None:
    """`python -m runs.cli check FILE` ran nothing and exited 0 (no `__main__` guard): a
    script reading its exit status took a command never run for one that succeeded."""
    done = subprocess.run(
        [sys.executable, "-m", "runs.cli", "check", "examples/figure1.toml", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert '"profit"' in done.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "runs.cli", "check", "no-such-file.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "no-such-file.toml" in refused.stderr
