"""A write with no room that no command turned into its own message ends in one line and
exit 6, not a traceback: above all the output itself (`dutchbook audit DIR > file` on a full
disk ended in rich's traceback)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import runs.cli
from runs.commands._errors import EXIT_DISK_FULL

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "args",
    [
        ["check", "examples/figure1.toml"],
        ["plan", "runs/specs/quickstart.toml", "--json"],
        ["plan", "runs/specs/quickstart.toml"],
    ],
)
def test_output_to_a_full_device_ends_in_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", "from runs.cli import main; main()", *args],
            cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    assert done.returncode == EXIT_DISK_FULL, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # nothing else: no traceback, no error at exit
    assert lines[0].startswith("error: a write failed: No space left on device")
    assert "run the same command again" in lines[0]


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
