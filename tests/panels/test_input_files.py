"""Files a user names are read whole but bounded: a device or an oversized file is refused."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from panels.families import FamilyError, load_family
from panels.input_files import (
    TEXT_INPUT_MAX_BYTES,
    InputFileError,
    check_utf8_head,
    invisible_character,
    read_input_file,
    read_input_stream,
)
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


#: A limit the tests' reads would take long enough to see, where `read_input_file` read it.
_SEEN_LIMIT = 32 * 2**20


def _peak_while(read: Callable[[], object]) -> int:
    """The most memory Python held at once (tracemalloc) while `read` ran and raised."""
    tracemalloc.start()
    try:
        with pytest.raises(InputFileError, match="larger than 32 MiB"):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_over_the_limit_is_refused_by_its_size_before_any_read(tmp_path: Path) -> None:
    """A sparse file of a terabyte (`truncate -s`, no room taken) is refused as it is opened:
    `check` read the limit's worth of it (512 MiB) into memory first, then refused it. The
    same file as standard input (`check - < huge.toml`) too, from where it is read."""
    path = tmp_path / "huge.toml"
    with path.open("wb") as huge:
        huge.truncate(2**40)
    assert _peak_while(lambda: read_input_file(path, _SEEN_LIMIT)) < _SEEN_LIMIT // 8
    with path.open("rb") as stream:
        stream.seek(2**40 - _SEEN_LIMIT)  # what is left to read is just within the limit
        assert read_input_stream(stream, _SEEN_LIMIT) == bytes(_SEEN_LIMIT)
        stream.seek(2**40 - _SEEN_LIMIT - 1)
        assert _peak_while(lambda: read_input_stream(stream, _SEEN_LIMIT)) < _SEEN_LIMIT // 8


def test_a_device_is_refused_without_opening_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Refused from its status: opening a device may wait (a terminal's) or do something.
    def no_opening(*args: object, **kwargs: object) -> None:
        raise AssertionError("opened")

    monkeypatch.setattr(Path, "open", no_opening)
    with pytest.raises(InputFileError, match=r"^is a character device, not a file$"):
        read_input_file(DEVICE, TEXT_INPUT_MAX_BYTES)


def test_a_stream_is_read_to_its_end_within_the_limit() -> None:
    """Standard input for `check -` (which said "-: no such file"): a pipe read whole, a
    terminal, a device or a larger input refused as a named file is."""
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as reading:
        with open(write_end, "wb") as writing:
            writing.write(b"a = 1\n" * 10)
        assert read_input_stream(reading, 60) == b"a = 1\n" * 10
    with pytest.raises(InputFileError, match="larger than 0 MiB"):
        read_input_stream(io.BytesIO(b"x" * 11), 10)
    with DEVICE.open("rb") as device, pytest.raises(InputFileError, match="character device"):
        read_input_stream(device, 10)
    controller, terminal = os.openpty()
    try:
        with open(terminal, "rb") as typed, pytest.raises(InputFileError, match="a terminal"):
            read_input_stream(typed, 10)  # not waited on: nothing is typed
    finally:
        os.close(controller)


def test_a_stream_over_the_limit_is_read_no_further_than_limit_plus_one_byte() -> None:
    """`head -c 2G /dev/zero | dutchbook check -` is refused after 512 MiB and a byte, as a
    named file is, not read to its end first: measured, a writer of 4 GiB got 512 MiB into
    the pipe before it closed."""
    endless = io.BytesIO(b"x" * 100)
    with pytest.raises(InputFileError, match="larger than"):
        read_input_stream(endless, 10)
    assert endless.tell() == 11


def test_a_stream_from_the_null_device_is_read_as_empty() -> None:
    """`check - < /dev/null` said "-: is a character device, not a file": standard input
    was asked for, and the null device is empty input. Other devices are still refused."""
    with open(os.devnull, "rb") as null:
        assert read_input_stream(null, 10) == b""
    with DEVICE.open("rb") as device, pytest.raises(InputFileError, match="character device"):
        read_input_stream(device, 10)


def test_a_pipe_is_read_to_its_end(tmp_path: Path) -> None:
    fifo = tmp_path / "forecasts.toml"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"a = 1\n" * 1000,))
    writer.start()
    try:
        assert read_input_file(fifo, TEXT_INPUT_MAX_BYTES) == b"a = 1\n" * 1000
    finally:
        writer.join()


def test_a_fifo_without_a_writer_is_waited_on_and_the_wait_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mkfifo f; dutchbook check f` waited for a writer for ever without a word: the wait
    is said once on stderr, and goes on until the writer comes."""
    import panels.input_files

    monkeypatch.setattr(panels.input_files, "FIFO_WAIT_SAID_AFTER", 0.05)
    fifo = tmp_path / "forecasts.toml"
    os.mkfifo(fifo)
    late = threading.Timer(0.5, fifo.write_bytes, args=(b"a = 1\n",))
    late.start()
    try:
        assert read_input_file(fifo, TEXT_INPUT_MAX_BYTES) == b"a = 1\n"
    finally:
        late.join()
    said = f"note: {fifo} is a FIFO with nothing written to it yet: waiting for input "
    assert capsys.readouterr().err == said + "(Ctrl-C to stop)\n"


@pytest.mark.parametrize("command", ["check", "plan"])
def test_ctrl_c_ends_the_wait_for_a_fifo_writer(tmp_path: Path, command: str) -> None:
    """`plan` imports polars, whose SIGINT handler restarts an interrupted call: Ctrl-C did
    not end its wait in `open` for a FIFO's writer (SIGKILL did)."""
    import select
    import signal

    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    with subprocess.Popen([DUTCHBOOK, command, str(fifo)], stderr=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, text=True) as proc:  # fmt: skip
        assert proc.stderr is not None
        try:
            ready, _, _ = select.select([proc.stderr], [], [], 120)
            assert ready, "the wait for a writer was not said"
            assert proc.stderr.readline().startswith(f"note: {fifo} is a FIFO")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
        finally:
            proc.kill()


def test_a_pipe_with_its_writer_is_read_without_a_word(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `<(generate-forecasts)` gives: a pipe whose writer is there."""
    import panels.input_files

    monkeypatch.setattr(panels.input_files, "FIFO_WAIT_SAID_AFTER", 0.5)
    read_end, write_end = os.pipe()
    os.write(write_end, b"a = 1\n")
    os.close(write_end)
    try:
        assert read_input_file(Path(f"/dev/fd/{read_end}"), 100) == b"a = 1\n"
    finally:
        os.close(read_end)
    threading.Event().wait(0.7)  # past the wait's timer, had it not been stopped
    assert capsys.readouterr().err == ""


def test_a_spec_and_a_family_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"^/dev/zero: is a character device, not a file$"):
        load_spec(DEVICE)
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b" " * (TEXT_INPUT_MAX_BYTES + 1))
    with pytest.raises(SpecError, match="larger than 16 MiB"):
        load_spec(huge)
    with pytest.raises(FamilyError, match="larger than 16 MiB"):
        load_family(huge)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    with pytest.raises(FamilyError, match=r"folder\.toml: is a folder, not a file$"):
        load_family(folder)
    with pytest.raises(SpecError, match=r"folder\.toml: is a folder, not a file$"):
        load_spec(folder)


@pytest.mark.parametrize("command", ["check", "plan", "run"])
def test_commands_given_a_device_end_in_one_line(command: str) -> None:
    done = subprocess.run(
        [DUTCHBOOK, command, str(DEVICE)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {DEVICE}: is a character device, not a file"


@pytest.mark.parametrize("command", ["check", "plan"])
@pytest.mark.parametrize("held_by", ["folder", "socket"])
def test_commands_given_a_folder_or_a_socket_name_it_as_a_device_is(
    tmp_path: Path, command: str, held_by: str
) -> None:
    """A folder was "is a directory, not a file" to `check`, "cannot read: Is a directory" to
    `plan`; a socket "cannot read (No such device or address)": one wording now, by type."""
    odd = tmp_path / "in.toml"
    if held_by == "folder":
        odd.mkdir()
    else:
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(odd))
    done = subprocess.run([DUTCHBOOK, command, str(odd)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {odd}: is a {held_by}, not a file"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("m1\u200b", "U+200B ZERO WIDTH SPACE"),
        ("m\u200d1", "U+200D ZERO WIDTH JOINER"),
        ("\u202em1", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("\ufeffm1", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("m\u00ad1", "U+00AD SOFT HYPHEN"),
        ("m\u20661\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("\U0001f3f4\U000e0067\U000e0062\U000e007f", "U+E0067 TAG LATIN SMALL LETTER G"),
        # not format characters, but as blank (found by a hostile tester after Cf was)
        ("m1\u3164", "U+3164 HANGUL FILLER"),
        ("m\u034f1", "U+034F COMBINING GRAPHEME JOINER"),
        ("m1\u2800", "U+2800 BRAILLE PATTERN BLANK"),
        ("\ufe0fm1", "U+FE0F VARIATION SELECTOR-16"),
    ],
)
def test_an_invisible_format_character_is_found_by_code_point(text: str, found: str) -> None:
    assert invisible_character(text) == found
    assert invisible_character(text, joiners_in_words=True) == found


@pytest.mark.parametrize("text", ["m1", "模型-七", "café", "Ünïcødé", "🤖 bot", "a b"])
def test_visible_text_of_any_script_has_none(text: str) -> None:
    assert invisible_character(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "\U0001f469\u200d\U0001f4bb",  # woman technologist
        "\u2764\ufe0f\u200d\U0001f525",  # heart on fire: after a variation selector
        "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # after a skin tone
        "\u0645\u06cc\u200c\u062e",  # a Persian word's non-joiner
        "I \u2764\ufe0f coherence",  # a variation selector after its heart
    ],
)
def test_free_text_may_join_within_a_word_or_an_emoji_sequence(text: str) -> None:
    assert invisible_character(text, joiners_in_words=True) is None
    assert invisible_character(text) is not None  # an id or a name: refused


@pytest.mark.parametrize("text", ["\u200dm", "m\u200d", "m\u200d1", "m \u200cx", "\u200d\u200d"])
def test_a_joiner_that_joins_nothing_is_refused_in_free_text_too(text: str) -> None:
    assert invisible_character(text, joiners_in_words=True) is not None


def test_the_utf8_check_passes_a_character_its_read_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the head of a table is checked; a character cut by its end is no error."""
    import panels.input_files

    path = tmp_path / "r.csv"
    path.write_bytes("ab ü".encode())  # "ü" is bytes 3 and 4
    monkeypatch.setattr(panels.input_files, "UTF8_HEAD_BYTES", 4)
    check_utf8_head(path)
    path.write_bytes(b"ab \xff")
    with pytest.raises(UnicodeDecodeError):
        check_utf8_head(path)
