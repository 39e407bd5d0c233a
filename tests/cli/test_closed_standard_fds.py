"""A command started with a standard descriptor closed (`2>&-`, `<&-`) opens /dev/null there
first (`runs.entry.standard_fds_opened`): else the first file it opened took that number, and
what a child process or C code wrote to stderr went into that file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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

