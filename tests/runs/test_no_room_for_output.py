"""A write with no room that no command turned into its own message ends in one line and
exit 6, not a traceback: above all the output itself (`dutchbook audit DIR > file` on a full
disk ended in rich's traceback). A command's printed output that finds no room is named as
the output, never taken for its run folder's disk (`runs.output`): `dutchbook run SPEC >
/dev/full` said "no space left for out/<name>" on a disk with room."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import runs.cli
from engine.durable import disk_full_raised, is_disk_full
from runs.commands._errors import EXIT_DISK_FULL
from runs.output import OutputClosed, OutputFull, stdout_console
from tests.runs.run_folders import SMALL_SPEC

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    ("args", "written"),
    [
        (["check", "examples/figure1.toml"], "a write to the output (stdout)"),
        (["plan", "runs/specs/quickstart.toml"], "a write to the output (stdout)"),
        # --json used typer's echo, whose stream (click's own) names no file: "a write failed"
        (["plan", "runs/specs/quickstart.toml", "--json"], "a write to the output (stdout)"),
        (["status", "{folder}", "--json"], "a write to the output (stdout)"),
        (["audit", "{folder}", "--json"], "a write to the output (stdout)"),
        (["status", "{folder}"], "a write to the output (stdout)"),
        (["audit", "{folder}"], "a write to the output (stdout)"),
        # typer's echo again: "a write failed", naming nothing
        (["check", "examples/figure1.toml", "--json"], "a write to the output (stdout)"),
        (["--version"], "a write to the output (stdout)"),
        # the help, which typer prints: "a write failed", naming nothing
        (["--help"], "a write to the output (stdout)"),
        (["status", "--help"], "a write to the output (stdout)"),
    ],
)
def test_output_to_a_full_device_ends_in_one_line(
    args: list[str], written: str, tmp_path: Path
) -> None:
    (tmp_path / "spec.toml").write_text('name = "x"\n')  # a run folder stopped while planning
    done = _to_dev_full([arg.format(folder=tmp_path) for arg in args])
    assert done.returncode == EXIT_DISK_FULL, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # nothing else: no traceback, no error at exit
    assert lines[0].startswith(f"error: {written} failed: No space left on device;")
    assert "run the same command again" in lines[0]


def _to_dev_full(args: list[str]) -> subprocess.CompletedProcess[str]:
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-c", "from runs.cli import main; main()", *args],
            cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_run_whose_output_is_full_names_the_output_not_its_folder(tmp_path: Path) -> None:
    """Both `run` and `report` hold their folder's full-disk handling around their prints;
    the run stops where its output failed, and the same command with room finishes it."""
    out = tmp_path / "small"
    spec = tmp_path / "spec.toml"  # the demo's 3,510 requests only made the second run slower
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    args = ["run", str(spec), "--out", str(out)]
    done = _to_dev_full(args)
    assert done.returncode == EXIT_DISK_FULL, done.stderr
    assert done.stderr.splitlines() == [
        "error: a write to the output (stdout) failed: No space left on device; free some "
        "space and run the same command again"
    ]
    assert (out / "plan.parquet").is_file()  # it stopped at its first print, after planning
    again = subprocess.run(
        [sys.executable, "-c", "from runs.cli import main; main()", *args],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (out / "report" / "index.html").is_file()
    # Their last lines went out through typer's echo: "a write failed", though the folder
    # was written in full and only the output had no room; then "run the same command
    # again", which wrote the same files again into the same full output.
    for command in (
        ["report", str(out)], ["reparse", str(out), "--json"], ["score", str(out)],
        ["repair", str(out)],
    ):  # fmt: skip
        done = _to_dev_full(command)
        assert done.returncode == EXIT_DISK_FULL, (command, done.stderr)
        assert done.stderr.splitlines() == [
            "error: the output (stdout) could not be written before `dutchbook "
            f"{command[0]}` printed all it had to say (no room left for it: No space left on "
            "device); its work is finished and written, nothing to run again (`dutchbook "
            "status` on the folder says what it needs next)"
        ], command


@pytest.mark.parametrize(("command", "written"), [("score", False), ("status", True)])
def test_a_full_output_before_the_work_is_written_is_mains_to_say(
    command: str, written: bool
) -> None:
    """Cut before its files are written, or by a command that writes none, a full output
    is `runs.cli.main`'s to say: free some space and run the same command again, exit 6."""
    done = subprocess.run(
        [sys.executable, "-c",
         "import errno, os; from runs.cli import main, output_closed; import runs.cli; "
         "from runs.output import OutputFull, mark_files_written; "
         f"mark_files_written({written}); full = OSError(errno.ENOSPC, 'No space left on "
         f"device'); runs.cli.app = lambda: output_closed({command!r}, OutputFull(full)); "
         "main()"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == EXIT_DISK_FULL, done.stderr
    assert done.stderr.splitlines() == [
        "error: a write to the output (stdout) failed: No space left on device; free some "
        "space and run the same command again"
    ]


def test_only_a_print_without_room_is_the_outputs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console writes to whatever `sys.stdout` is when it prints; a write that finds no
    room raises `OutputFull`, one that finds no reader `OutputClosed` (rich turned a
    `BrokenPipeError` into exit 1 without a word), any other failure as it was."""
    console = stdout_console(highlight=False)
    console.print("to the captured output")
    assert capsys.readouterr().out == "to the captured output\n"

    class Failing(io.StringIO):
        def __init__(self, code: int) -> None:
            super().__init__()
            self.code = code

        def write(self, text: str) -> int:
            raise OSError(self.code, os.strerror(self.code))

    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        monkeypatch.setattr(sys, "stdout", Failing(code))
        with pytest.raises(OutputFull) as full:
            console.print("x")
        assert full.value.error.errno == code
    monkeypatch.setattr(sys, "stdout", Failing(errno.EPIPE))
    with pytest.raises(OutputClosed):  # `runs.cli.output_closed` ends the command
        console.print("x")
    monkeypatch.setattr(sys, "stdout", Failing(errno.EIO))
    with pytest.raises(OSError, match="Input/output error"):
        console.print("x")


def test_output_full_is_no_folders_full_disk() -> None:
    """What lets it pass a run folder's handler (`engine.durable.disk_full_raised`)."""
    error = OutputFull(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert not is_disk_full(error)
    with pytest.raises(OutputFull), disk_full_raised(Path("out/run")):
        raise error


def test_main_names_the_output_for_output_full(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_room() -> None:
        raise OutputFull(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)))

    monkeypatch.setattr(runs.cli, "app", no_room)
    with pytest.raises(SystemExit) as ended:
        runs.cli.main()
    assert ended.value.code == EXIT_DISK_FULL
    assert capsys.readouterr().err == (
        f"error: a write to the output (stdout) failed: {os.strerror(errno.EDQUOT)}; free some "
        "space and run the same command again\n"
    )


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG])
def test_a_write_without_room_names_the_file_when_known(
    code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_room() -> None:
        raise OSError(code, os.strerror(code), "/data/out/report.md")

    monkeypatch.setattr(runs.cli, "app", no_room)
    with pytest.raises(SystemExit) as ended:
        runs.cli.main()
    assert ended.value.code == EXIT_DISK_FULL
    err = capsys.readouterr().err
    assert err == (
        f"error: a write to /data/out/report.md failed: {os.strerror(code)}; free some space "
        "and run the same command again\n"
    )


def test_other_os_errors_are_not_taken_for_a_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied() -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/data/out")

    monkeypatch.setattr(runs.cli, "app", denied)
    with pytest.raises(PermissionError):
        runs.cli.main()
