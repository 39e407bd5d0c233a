"""`dutchbook serve-sim` and the serve-forever loop behind it."""

from __future__ import annotations

import asyncio
import errno
import http.server
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from rich.console import Console
from simkit import chat_body
from typer.testing import CliRunner

import runs.commands.serve_sim as serve_sim_command
from providers.sim.server import SimHandle, read_live_counts, serve_forever, start_sim
from runs.cli import app

#: `dutchbook serve-sim` as a process of its own.
SERVE_SIM = [sys.executable, "-c", "from runs.cli import main; main()", "serve-sim"]


async def test_serve_forever_reports_start_and_final_counts() -> None:
    started: list[SimHandle] = []
    finished: list[dict[str, int]] = []
    done = asyncio.get_running_loop().create_future()

    def on_start(handle: SimHandle) -> None:
        started.append(handle)

    async def client() -> None:
        while not started:
            await asyncio.sleep(0.01)
        async with aiohttp.ClientSession() as http:
            for _ in range(3):
                async with http.post(started[0].root_url + "/sim/v1/chat/completions",
                                     json=chat_body()) as resp:
                    assert resp.status == 200
        done.set_result(None)

    task = asyncio.create_task(client())
    counts = await serve_forever(0, "none", on_start=on_start, on_stop=finished.append,
                                 until=done)
    await task
    assert counts["answered.sim"] == 3
    assert finished == [counts]
    assert started[0].root_url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    ("given", "said"), [(",light", "light"), ("flaky, ,slow=0.1,", "flaky,slow=0.1")]
)
async def test_the_fault_profile_is_said_as_parsed(given: str, said: str) -> None:
    """`--faults ',light'` was taken (the empty item passed over) and said as given."""
    console = Console(record=True, width=300)
    async with await start_sim(port=0) as handle:
        serve_sim_command.describe_start(handle, given, console)
    assert f"fault profile: {said}\n" in console.export_text()


def test_cli_help_and_bad_profile() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["serve-sim", "--help"])
    assert result.exit_code == 0
    assert "--faults" in result.output and "--port" in result.output
    result = runner.invoke(app, ["serve-sim", "--faults", "stormy", "--port", "0"])
    assert result.exit_code == 2
    assert "unknown fault profile" in result.output


def test_standalone_process_prints_root_credentials_and_counts_on_sigterm() -> None:
    proc = subprocess.Popen(
        [*SERVE_SIM, "--port", "0", "--faults", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "Ctrl-C" in line:
                break
        text = "".join(lines)
        assert "listening on http://127.0.0.1:" in text
        assert "export GROQ_API_KEY=" in text and "AWS_SECRET_ACCESS_KEY" in text
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=20)
        assert "simulator counts" in rest
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_counts_that_cannot_be_written_on_stop_are_said_in_one_line(tmp_path: Path) -> None:
    """Stopped, the simulator writes its counts: to a named pipe no one reads it waited for
    ever (a file that refuses the write: `test_a_write_that_fails_is_said_by_its_reason`)."""
    target = tmp_path / "counts.json"
    os.mkfifo(target)
    reason = "a named pipe no one reads"
    proc = subprocess.Popen(
        [*SERVE_SIM, "--port", "0", "--counts-file", str(target)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "Ctrl-C" not in proc.stdout.readline():
            pass
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert "simulator counts" in out
        assert err.strip() == (
            f"error: --counts-file: the counts could not be written to {target} ({reason}); "
            "they are in the table above"
        )
        assert proc.returncode == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _serves(url: str) -> bool:
    """Whether the simulator at `url` answers its live counts."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/_sim/counts", timeout=10) as reply:
        return bool(reply.status == 200)


#: What the note says of a stdout the simulator cannot write, by how it was given.
CANNOT_WRITE = {"read-only": "(Bad file descriptor)", "full": "(No space left on device)",
                "reader gone before": "(Broken pipe)"}  # fmt: skip


def _cut_stdout(stdout: str) -> int | None:
    """A descriptor for the simulator's stdout, cut as `stdout` says (None: a pipe read)."""
    if stdout == "reader gone before":  # `serve-sim | true`: gone before the first line
        read, write = os.pipe()
        os.close(read)
        return write
    return {"read-only": os.open(os.devnull, os.O_RDONLY),
            "full": os.open("/dev/full", os.O_WRONLY)}.get(stdout)  # fmt: skip


@pytest.mark.parametrize("stdout", ["reader gone", "reader gone before", "read-only", "full"])
def test_a_stdout_it_cannot_write_leaves_it_serving_and_its_counts_written(
    tmp_path: Path, stdout: str
) -> None:
    """`serve-sim | head -1` (a script reading the URL) stopped it at its stop table, exit 0,
    without a word, its `--counts-file` never written; `1</dev/null` stopped it at once, and
    `>/dev/full` too, exit 6 (hostile testers'). It serves on, silent on stdout, and writes
    its counts when stopped; a stdout that took not even the URL is said on stderr, with the
    URL: `serve-sim | true`, its reader gone before the first line, served on where no one
    could find it."""
    target = tmp_path / "counts.json"
    argv = [*SERVE_SIM, "--port", "0", "--counts-file", str(target)]
    fd = _cut_stdout(stdout)
    out = subprocess.PIPE if fd is None else fd
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True)
    if fd is not None:
        os.close(fd)
    try:
        if proc.stdout is not None:  # the URL read, then the reader gone
            url = proc.stdout.readline().split()[-1]
            proc.stdout.close()
        else:
            assert proc.stderr is not None
            ready = select.select([proc.stderr], [], [], 30)[0]  # a note never said: no wait
            note = proc.stderr.readline() if ready else ""
            said = f"note: the output (stdout) cannot be written {CANNOT_WRITE[stdout]}"
            assert note.startswith(said), note
            url = note.split(" serves on ")[1].split()[0]
        for _ in range(3):
            assert _serves(url)
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0 and err == "", err
        assert isinstance(orjson.loads(target.read_bytes()), dict)  # written, whole
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    ("make", "error", "reason"),
    [
        (None, errno.EIO, "Input/output error"),  # /proc/version, written as root: a traceback
        ("socket", errno.ENXIO, "No such device or address"),  # was "a named pipe no one reads"
    ],
)
def test_a_write_that_fails_is_said_by_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: str | None, error: int, reason: str
) -> None:
    """In this process, so that it holds for any user (only root gets past the options'
    check of /proc/version to its EIO)."""
    target = tmp_path / "counts.json"
    listening = socket.socket(socket.AF_UNIX)
    if make == "socket":
        listening.bind(str(target))
    else:
        target.touch()

    def refusing(counts_file: Path, counts: dict[str, int]) -> None:
        raise OSError(error, os.strerror(error), str(counts_file))

    monkeypatch.setattr(serve_sim_command, "write_counts", refusing)
    problems: list[str] = []
    with listening, open(os.devnull, "w") as devnull:
        serve_sim_command.stopped({"requests": 1}, Console(file=devnull), target, problems)
    assert problems == [
        f"--counts-file: the counts could not be written to {target} ({reason}); "
        "they are in the table above"
    ]


def test_counts_no_table_showed_are_given_in_the_line_that_says_the_file_refused_them(
    tmp_path: Path,
) -> None:
    """Stdout cut (`serve-sim | head -1`), no table showed the counts, yet the line said
    "they are in the table above" of a named pipe no one read: the counts were nowhere (a
    reviewer's)."""
    target = tmp_path / "counts.json"
    os.mkfifo(target)
    quiet = Console(quiet=True)  # as `shown` leaves it once stdout could not take a line
    problems: list[str] = []
    serve_sim_command.stopped({"requests": 2, "faults": 1}, quiet, target, problems)
    assert problems == [
        f"--counts-file: the counts could not be written to {target} (a named pipe no one "
        'reads); they were: {"faults":1,"requests":2}'
    ]


# --------------------------------------------------------------------------- options refused
# Before, a port in use or out of range and a non-positive --rpm ended in a traceback, and an
# unwritable --counts-file in one only when the simulator stopped, its counts lost.


def _not_served(*args: object, **kwargs: object) -> None:
    raise AssertionError("the simulator started on options it should have refused")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--rpm", "-5"], "error: --rpm: a positive number, not -5.0"),
        (["--tpm", "nan"], "error: --tpm: a positive number, not nan"),
        (["--rpm", "0"], "error: --rpm: a positive number, not 0.0"),
        (["--retry-after", "-1"], "error: --retry-after: seconds, 0 or more, not -1.0"),
        (["--faults", "stormy"], "error: --faults: unknown fault profile 'stormy'; known:"),
        (
            ["--faults", "hostle"],
            "error: --faults: unknown fault profile 'hostle'; did you mean hostile?",
        ),
        (["--counts-file", "{tmp}"], "error: --counts-file: {tmp} is a folder; give a file name"),
        (
            ["--counts-file", "{tmp}/none/counts.json"],
            "error: --counts-file: no folder {tmp}/none to write counts.json in",
        ),
    ],
)
def test_an_option_the_simulator_would_trip_over_is_refused_in_one_line_before_it_listens(
    options: list[str], error: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_sim_command, "serve_forever", _not_served)
    given = [option.format(tmp=tmp_path) for option in options]
    result = CliRunner().invoke(app, ["serve-sim", "--port", "0", *given])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(error.format(tmp=tmp_path)), result.output


def test_a_counts_file_in_a_folder_it_cannot_write_in_is_refused_before_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_sim_command, "serve_forever", _not_served)
    monkeypatch.setattr(
        serve_sim_command, "why_unwritable", lambda folder: os.strerror(errno.EROFS)
    )
    result = CliRunner().invoke(
        app, ["serve-sim", "--port", "0", "--counts-file", str(tmp_path / "c.json")]
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: --counts-file: cannot write in {tmp_path} (Read-only file system)"
    )


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_a_port_out_of_range_is_a_usage_error(port: str) -> None:
    result = CliRunner().invoke(app, ["serve-sim", "--port", port])
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in result.output and "Traceback" not in result.output


def test_a_port_in_use_is_said_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve-sim", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use; give --port "
        "another (0: any free port)"
    )


def test_an_error_after_it_listened_is_not_said_to_be_the_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def listened_then_failed(*args: object, on_start: Any, **kwargs: object) -> None:
        on_start(SimHandle.__new__(SimHandle))
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/counts.json")

    monkeypatch.setattr(serve_sim_command, "serve_forever", listened_then_failed)
    monkeypatch.setattr(serve_sim_command, "describe_start", lambda *args: None)
    result = CliRunner().invoke(app, ["serve-sim", "--port", "0"])
    assert isinstance(result.exception, PermissionError)
    assert "cannot listen" not in result.output


async def test_read_live_counts_reads_the_running_simulator_and_nothing_else() -> None:
    handle = await start_sim(0, "none")
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(handle.root_url + "/sim/v1/chat/completions", json=chat_body()) as resp,
        ):
            assert resp.status == 200
        counts = await asyncio.to_thread(read_live_counts, handle.root_url + "/")
    finally:
        await handle.stop()
    assert counts is not None and counts["answered.sim"] == 1
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:  # something else answering there (a 404 here) is not the simulator
        other = f"http://127.0.0.1:{server.server_address[1]}"
        assert await asyncio.to_thread(read_live_counts, other) is None
    finally:
        server.shutdown()
        server.server_close()
