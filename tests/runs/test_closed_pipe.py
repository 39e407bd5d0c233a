"""An output whose reader went away (`dutchbook status DIR | head -1`): a command that only
reads ends quietly with exit 0, as `head` users expect (click ended it in exit 1 without a
word); a command that writes a run folder says in one line that its output closed before it
finished, and the same command finishes it, or, its files all written, that only its printing
was cut (exit 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs.run_folders import SMALL_SPEC, FinishedRuns

ROOT = Path(__file__).resolve().parents[2]


DUTCHBOOK = [sys.executable, "-c", "from runs.cli import main; main()"]


def _dutchbook(args: list[str], stdout: int) -> subprocess.CompletedProcess[str]:
    """`dutchbook ARGS` with `stdout` as its standard output, stderr captured."""
    return subprocess.run(
        [*DUTCHBOOK, *args], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE, text=True,
        timeout=300,
    )  # fmt: skip


def _to_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`dutchbook ARGS` whose stdout is a pipe with no reader: every write fails (EPIPE)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return _dutchbook(args, write)
    finally:
        os.close(write)


def _finishes_when_run_again(args: list[str], out: Path) -> None:
    """The same `dutchbook run` again, its output open, finishes the run in `out`."""
    again = _dutchbook(args, subprocess.PIPE)
    assert again.returncode == 0, again.stderr
    assert (out / "report" / "index.html").is_file()


@pytest.mark.parametrize(
    "args",
    [
        ["status", "{folder}"],
        ["status", "{folder}", "--json"],
        ["audit", "{folder}"],
        ["plan", "runs/specs/quickstart.toml"],
        ["plan", "runs/specs/quickstart.toml", "--json"],
        ["check", "examples/figure1.toml"],
        ["check", "examples/figure1.toml", "--json"],
    ],
)
def test_a_reading_command_ends_quietly(args: list[str], tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text('name = "x"\n')  # a run folder stopped while planning
    done = _to_closed_pipe([arg.format(folder=tmp_path) for arg in args])
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(
    "args", [["--help"], ["run", "--help"], ["plan", "--help"], ["status", "--help"]]
)
def test_help_to_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    """`dutchbook --help | head -1`: typer prints help through rich, whose console meeting
    a closed pipe exits 1 without a word; help is read, not written, so it ends as a reading
    command does (exit 0), a writing command's help included."""
    done = _to_closed_pipe(args)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_run_says_its_output_closed_and_the_same_command_finishes(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    args = ["run", str(spec), "--out", str(tmp_path / "out")]
    done = _to_closed_pipe(args)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the output (stdout) closed"), lines
    assert "run the same command again" in lines[0]
    _finishes_when_run_again(args, tmp_path / "out")


def test_a_command_whose_files_are_written_says_only_its_printing_was_cut(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """`dutchbook reparse DIR | head -1`: the reparse was finished and recorded before it
    printed, yet it said it stopped part-way (exit 1) and to run it again, which changed
    nothing. So were `score` and `report`, which print after writing too."""
    folder = finished_runs.finish(tmp_path, SMALL_SPEC)
    for args in (
        ["reparse", str(folder), "--parser", "strict"],
        ["score", str(folder)],
        ["report", str(folder)],
    ):
        done = _to_closed_pipe(args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 0, (args, lines)
        assert len(lines) == 1 and lines[0].startswith("note: the output (stdout) closed"), lines
        assert "its work is finished and written, nothing to run again" in lines[0]
    reparses = (folder / "logs" / "reparses.jsonl").read_text("utf-8").splitlines()
    last = json.loads(reparses[-1])  # the reparse's finished line, not its begun one
    assert last["parser"] == "strict" and "begun" not in last, last


#: A model whose fractions ("11/36") the strict parser rejects and the lenient one accepts.
FRACTIONS_SPEC = SMALL_SPEC.replace('name = "small"', 'name = "fractions"\nparser = "strict"')
FRACTIONS_SPEC = FRACTIONS_SPEC.replace('model = "sim-coherent"', 'model = "sim-fraction"')


@pytest.mark.parametrize("as_json", [False, True])
def test_a_reparse_cut_after_its_files_says_the_folder_needs_scoring(
    finished_runs: FinishedRuns, tmp_path: Path, as_json: bool
) -> None:
    """`dutchbook reparse DIR --parser lenient | head -1` that changed the answers its scores
    were computed from said "its work is finished and written, nothing to run again", where
    the folder needs `dutchbook score DIR` (as `dutchbook status` and the reparse's own
    printed advice say): the line it ends in now says so."""
    folder, code = finished_runs.run(tmp_path, FRACTIONS_SPEC)
    assert code == 4 and (folder / "scores.parquet").is_file()  # every answer rejected
    done = _to_closed_pipe(
        ["reparse", str(folder), "--parser", "lenient", *(["--json"] if as_json else [])]
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 0, lines
    assert lines == [
        "note: the output (stdout) closed before `dutchbook reparse` printed all it had to say "
        "(its reader ended); its work is finished and written, but the scores still read the "
        f"answers before this re-parse: run `dutchbook score {folder}`, then `dutchbook report "
        f"{folder}`"
    ]


def test_a_reparse_that_changed_nothing_still_says_scores_an_earlier_one_left_behind(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """Strict, score, lenient, then lenient again: the last reparse changed no answer, but the
    scores still read the strict ones. Cut, it said "nothing to run again", and printed in
    full, nothing about the scores, where `status` said "scores out of date"."""
    folder, code = finished_runs.run(tmp_path, FRACTIONS_SPEC)
    assert code == 4 and (folder / "scores.parquet").is_file()
    lenient = ["reparse", str(folder), "--parser", "lenient"]
    assert _dutchbook(lenient, subprocess.PIPE).returncode == 0
    advice = (
        "the scores already read other answers than the folder's before this re-parse, which "
        f"left its answers as they were: run `dutchbook score {folder}`, then `dutchbook "
        f"report {folder}`"
    )
    printed = _dutchbook(lenient, subprocess.PIPE)
    assert printed.returncode == 0 and advice in " ".join(printed.stdout.split()), printed.stdout
    lines = _to_closed_pipe(lenient).stderr.strip().splitlines()
    assert lines == [
        "note: the output (stdout) closed before `dutchbook reparse` printed all it had to say "
        f"(its reader ended); its work is finished and written, but {advice}"
    ]
    assert _dutchbook(["score", str(folder)], subprocess.PIPE).returncode == 0
    lines = _to_closed_pipe(lenient).stderr.strip().splitlines()  # scored now: nothing to do
    assert "its work is finished and written, nothing to run again" in lines[0], lines


@pytest.mark.parametrize(
    ("command", "written", "code", "begins"),
    [
        ("reparse", False, 1, "error: the output (stdout) closed before `dutchbook reparse` fin"),
        ("reparse", True, 0, "note: the output (stdout) closed before `dutchbook reparse` prin"),
        ("score", False, 1, "error: the output (stdout) closed before `dutchbook score` finis"),
        ("report", True, 0, "note: the output (stdout) closed before `dutchbook report` print"),
        # A run's exit status after its report says how it ended: not given up for a 0.
        ("run", True, 1, "error: the output (stdout) closed before `dutchbook run` finished"),
    ],
)
def test_output_closed_tells_a_command_stopped_part_way_from_one_done(
    command: str, written: bool, code: int, begins: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from runs.cli import output_closed; from runs.output import "
         f"mark_files_written; mark_files_written({written}); output_closed({command!r})"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, lines
    assert len(lines) == 1 and lines[0].startswith(begins), lines


def _to_read_only(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`dutchbook ARGS 1</dev/null`: stdout open, but for reading, so every write fails
    (EBADF) where a closed pipe's fails with EPIPE."""
    read_only = os.open(os.devnull, os.O_RDONLY)
    try:
        return _dutchbook(args, read_only)
    finally:
        os.close(read_only)


@pytest.mark.parametrize(
    "args",
    [
        ["status", "{folder}"],
        ["status", "{folder}", "--json"],
        ["audit", "{folder}"],
        ["audit", "{folder}", "--json"],
        ["plan", "runs/specs/quickstart.toml"],
        ["plan", "runs/specs/quickstart.toml", "--json"],
        ["check", "examples/figure1.toml"],
        ["--version"],
        ["--help"],
        ["run", "--help"],
    ],
)
def test_a_reading_command_whose_output_is_not_open_for_writing_says_so(
    args: list[str], tmp_path: Path
) -> None:
    """`dutchbook status DIR 1</dev/null`: every command, help and --version included, ended
    in a traceback (OSError: Bad file descriptor), exit 1. No reader chose to stop here, as
    `head` does: one line says the output could not be written; the exit status is a closed
    pipe's (nothing left that anyone reads)."""
    (tmp_path / "spec.toml").write_text('name = "x"\n')  # a run folder stopped while planning
    done = _to_read_only([arg.format(folder=tmp_path) for arg in args])
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 0, lines
    assert lines == [
        "note: the output (stdout) could not be written (it is not open for writing: Bad file "
        "descriptor), so nothing was printed"
    ]


def test_a_run_whose_output_is_not_open_for_writing_says_so_and_the_work_is_kept(
    tmp_path: Path,
) -> None:
    """`dutchbook run SPEC 1</dev/null` ended in a traceback, exit 1: it ends as a run whose
    output's reader left does, in one line (exit 1), its folder kept for the same command,
    given an output it can write, to finish."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    args = ["run", str(spec), "--out", str(tmp_path / "out")]
    done = _to_read_only(args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, lines
    assert len(lines) == 1, lines
    assert lines[0] == (
        "error: the output (stdout) could not be written before `dutchbook run` finished (it "
        "is not open for writing: Bad file descriptor); what it wrote is kept: run the same "
        "command again, its output open for writing, to finish it"
    )
    assert (tmp_path / "out" / "plan.parquet").is_file()
    _finishes_when_run_again(args, tmp_path / "out")


def test_a_writing_command_whose_output_is_not_open_for_writing_keeps_its_ending(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """`dutchbook report DIR 1</dev/null` ended in "error: [Errno 9] Bad file descriptor",
    exit 2, as if the folder were at fault, and `score` in a traceback: once their files are
    written they end as they do when the output's reader left (exit 0, with a note)."""
    folder = finished_runs.finish(tmp_path, SMALL_SPEC)
    for args in (["score", str(folder)], ["report", str(folder)]):
        done = _to_read_only(args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 0, (args, lines)
        assert len(lines) == 1 and lines[0].startswith(
            "note: the output (stdout) could not be written before"
        ), lines
        assert "(it is not open for writing: Bad file descriptor); its work is finished" in lines[0]
