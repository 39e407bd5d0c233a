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
