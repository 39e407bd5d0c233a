"""A command started with a standard descriptor closed (`2>&-`, `<&-`) opens /dev/null there
first (`runs.entry.standard_fds_opened`): else the first file it opened took that number, and
what a child process or C code wrote to stderr went into that file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Opens a file as the command's first, and prints the number it got.
PROBE = (
    "import os\n"
    "from runs.entry import standard_fds_opened\n"
    "standard_fds_opened()\n"
    "print(os.open(os.devnull, os.O_RDONLY))\n"
)


@pytest.mark.parametrize("closed", [0, 2])
def test_a_file_opened_after_start_never_takes_a_standard_number(closed: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        preexec_fn=lambda: os.close(closed), check=True,
    )  # fmt: skip
    assert int(done.stdout) > 2



def _dutchbook(args: list[str], **fds: Any) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = subprocess.run(
        [sys.executable, "-m", "runs.entry", *args], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True, timeout=60, **fds,
    )  # fmt: skip
    return done


def test_a_child_inherits_the_null_stderr_not_a_closed_or_borrowed_one() -> None:
    """`os.open`'s descriptors are not inherited: a spawned child found fd 2 closed, and a
    multiprocessing worker's fd 2 was one of its own pipes."""
    child = (
        "import os, subprocess, sys\n"
        "from runs.entry import standard_fds_opened\n"
        "standard_fds_opened()\n"
        "reads = 'import os; print(os.readlink(\"/proc/self/fd/2\"))'\n"
        "subprocess.run([sys.executable, '-c', reads])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(2), check=True,
    )  # fmt: skip
    assert done.stdout.strip() == os.devnull


def test_a_command_with_stdout_closed_exits_as_it_would_have() -> None:
    """`>&-`: Python left `sys.stdout` None, and every command ended in a traceback, exit 1."""
    done = _dutchbook(["check", "examples/figure1.toml"], stderr=subprocess.PIPE,
                      preexec_fn=lambda: os.close(1))  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done.stderr


def test_a_user_error_stderr_cannot_take_keeps_exit_2() -> None:
    """Its line failed on a full stderr, and the failure read as a full disk: exit 6; on a
    stderr whose reader was gone (`2>&1 | true`), rich's own handling of the broken pipe
    ended it in exit 1 (and pointed stdout at /dev/null), a hostile tester's."""
    with open("/dev/full", "w") as full:
        done = _dutchbook(["status", "/no/such/run/folder"], stdout=subprocess.PIPE, stderr=full)
    assert done.returncode == 2, done.stdout
    read, write = os.pipe()
    os.close(read)
    try:
        for args in (["status", "/no/such/run/folder"], ["run", "--bogus"]):
            done = _dutchbook(args, stdout=subprocess.PIPE, stderr=write)
            assert done.returncode == 2, (args, done.stdout)
    finally:
        os.close(write)


def test_an_interrupt_stderr_cannot_take_keeps_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """`score`, `report`, `repair` stopped by Ctrl-C with stderr full ended in exit 6."""
    import io

    import typer

    from runs.commands._errors import interrupt_says_rerun

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(sys, "stderr", Full())
    with pytest.raises(typer.Exit) as ended, interrupt_says_rerun():
        raise KeyboardInterrupt
    assert ended.value.exit_code == 130


def _stdout_given(how: str) -> int | None:
    """A descriptor for the command's stdout, cut as `how` says (None: none, `>&-`)."""
    if how == "reader gone":  # `dutchbook | true`
        read, write = os.pipe()
        os.close(read)
        return write
    return {"closed": None, "read-only": os.open(os.devnull, os.O_RDONLY),
            "full": os.open("/dev/full", os.O_WRONLY)}[how]  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("how", ["reader gone", "closed", "read-only", "full"])
def test_dutchbook_alone_keeps_its_usage_errors_exit_2_whatever_became_of_its_help(
    how: str,
) -> None:
    """`dutchbook` alone prints its help and exits 2, a usage error; with the help's reader
    gone (`dutchbook | true`) it exited 0, as `dutchbook --help | true` rightly does, with
    its output not open for writing (`1</dev/null`) 0 too, and on a full one 6 and "run the
    same command again", which only shows the help again."""
    fd = _stdout_given(how)
    try:
        done = _dutchbook(
            [], stdout=fd, stderr=subprocess.PIPE,
            preexec_fn=(lambda: os.close(1)) if fd is None else None,
        )  # fmt: skip
    finally:
        if fd is not None:
            os.close(fd)
    assert done.returncode == 2, done.stderr
    said = done.stderr.splitlines()
    if how in ("read-only", "full"):  # no reader chose to stop: the output's failure is said
        assert len(said) == 1, said
        assert said[0].startswith("note: the output (stdout) could not be written ("), said
    else:
        assert said == [], said
