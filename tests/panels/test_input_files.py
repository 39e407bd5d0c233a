"""Files a user names are read whole but bounded: a device or an oversized file is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from panels.families import FamilyError, load_family
from panels.input_files import TEXT_INPUT_MAX_BYTES, InputFileError, read_input_file
from runs.spec import SpecError, load_spec

DUTCHBOOK = str(Path(sys.executable).with_name("dutchbook"))
DEVICE = Path("/dev/zero")  # endless: read whole, it never ends


def test_a_file_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(b"x" * 100)
    assert read_input_file(path, 100) == b"x" * 100


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(b"x" * (2 * 2**20 + 1))
    with pytest.raises(InputFileError, match="larger than 2 MiB"):
        read_input_file(path, 2 * 2**20)


def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(InputFileError, match="is a device, not a file"):
        read_input_file(DEVICE, TEXT_INPUT_MAX_BYTES)


def test_a_pipe_is_read_to_its_end(tmp_path: Path) -> None:
    fifo = tmp_path / "forecasts.toml"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"a = 1\n" * 1000,))
    writer.start()
    try:
        assert read_input_file(fifo, TEXT_INPUT_MAX_BYTES) == b"a = 1\n" * 1000
    finally:
        writer.join()


def test_a_spec_and_a_family_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"^/dev/zero: is a device, not a file$"):
        load_spec(DEVICE)
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b" " * (TEXT_INPUT_MAX_BYTES + 1))
    with pytest.raises(SpecError, match="larger than 16 MiB"):
        load_spec(huge)
    with pytest.raises(FamilyError, match="larger than 16 MiB"):
        load_family(huge)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    with pytest.raises(FamilyError, match="cannot read"):
        load_family(folder)


@pytest.mark.parametrize("command", ["check", "plan", "run"])
def test_commands_given_a_device_end_in_one_line(command: str) -> None:
    done = subprocess.run(
        [DUTCHBOOK, command, str(DEVICE)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {DEVICE}: is a device, not a file"
