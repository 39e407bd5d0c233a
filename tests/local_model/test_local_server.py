"""The local server's life (`runs.local_model`): started on a free port, waited for, stopped by
its pid on success, on failure and on interrupt, killed with the wrapper; never left running.
A small stand-in server (stdlib http.server answering `GET /v1/models` as llama-cpp-python
does, listing its model) plays llama-cpp-python's part."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from engine.runlock import LOCK_FILE, acquire_lock, release_lock, write_pid
from runs import local_model
from runs.local_model import (
    BASE_URL_ENV,
    LocalModelError,
    Server,
    run_child,
    running_server,
    server_command,
    server_gone,
    wait_ready,
)
from tests.ports import free_port

#: The model the stand-in serves (llama-cpp-python lists its `--model` path).
MODEL = "m.gguf"
STAND_IN = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port, delay, model, life, killed_when = sys.argv[1:6]
    print("loading", model, flush=True)  # a line of its log
    time.sleep(float(delay))  # loading the model
    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(json.dumps({"object": "list", "data": [{"id": model}]}).encode())
        def log_message(self, *args):
            pass
    if float(life) > 0:  # then it dies, with status 3
        threading.Timer(float(life), os._exit, (3,)).start()
    def killed():  # once the file `killed_when` exists, by SIGKILL
        while not os.path.exists(killed_when):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    if killed_when:
        threading.Thread(target=killed, daemon=True).start()
    HTTPServer(("127.0.0.1", int(port)), Models).serve_forever()
    """
)
REPO = Path(__file__).parents[2]
#: The stock spec (its run folder `out/local`), which a demo's check reads as the campaign does.
SPEC = str(REPO / "runs" / "specs" / "local.toml")


def stand_in(
    port: int, delay: float = 0.3, model: str = MODEL, life: float = 0, killed_when: str = ""
) -> list[str]:
    return [sys.executable, "-c", STAND_IN, str(port), str(delay), model, str(life), killed_when]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_is_waited_for_then_stopped_by_its_pid(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with running_server(stand_in(port), port, log, 20.0, model_id=MODEL) as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        assert alive(server.pid)
    assert server.process.poll() is not None  # stopped, and reaped


def test_server_is_stopped_when_the_work_fails(tmp_path: Path) -> None:
    port = free_port()
    with (
        pytest.raises(RuntimeError, match="campaign failed"),
        running_server(stand_in(port), port, tmp_path / "s.log", 20.0, model_id=MODEL) as server,
    ):
        raise RuntimeError("campaign failed")
    assert server.process.poll() is not None


def test_a_server_that_dies_while_loading_says_where_its_log_is(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-c", "import sys; print('no model'); sys.exit(3)"]
    log = tmp_path / "server.log"
    with (
        pytest.raises(LocalModelError, match="exited with status 3") as caught,
        running_server(command, port, log, 20.0, model_id=MODEL),
    ):
        pass
    assert str(log) in str(caught.value)
    assert "no model" in log.read_text()


def test_a_server_that_never_answers_is_stopped_after_the_timeout(tmp_path: Path) -> None:
    port = free_port()
    with (
        pytest.raises(LocalModelError, match="did not answer"),
        running_server(stand_in(port, delay=60), port, tmp_path / "s.log", 1.0, model_id=MODEL),
    ):
        pass


def test_the_command_is_llama_cpp_pythons_server_on_loopback() -> None:
    command = server_command(Path("m.gguf"), 8123, 2)
    assert command[1:3] == ["-m", "llama_cpp.server"]
    pairs = dict(zip(command[3::2], command[4::2], strict=True))
    assert pairs == {
        "--model": "m.gguf", "--chat_format": "gemma", "--n_threads": "2", "--n_ctx": "4096",
        "--host": "127.0.0.1", "--port": "8123",
    }


def test_ctrl_c_reaches_the_campaign_once_and_it_decides_when_to_end(tmp_path: Path) -> None:
    # The child stands for `dutchbook run`: on SIGINT it finishes (exit 130) on its own terms.
    marker = tmp_path / "got-sigint"
    child = textwrap.dedent(
        f"""
        import os, signal, sys, time
        def stop(*_):
            open({str(marker)!r}, "a").write("x")
            sys.exit(130)
        signal.signal(signal.SIGINT, stop)
        assert os.environ[{BASE_URL_ENV!r}] == "http://x/v1"
        open({str(marker)!r} + ".ready", "w").close()
        time.sleep(30)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, sys
            from runs.local_model import run_child
            env = {{**os.environ, {BASE_URL_ENV!r}: "http://x/v1"}}
            sys.exit(run_child([sys.executable, "-c", {child!r}], env))
        """)],
        cwd=Path(__file__).parents[2],
    )
    ready = Path(str(marker) + ".ready")
    for _ in range(200):
        if ready.exists():
            break
        time.sleep(0.05)
    assert ready.exists()
    parent.send_signal(signal.SIGINT)
    assert parent.wait(timeout=20) == 130
    assert marker.read_text() == "x"  # forwarded exactly once


def test_a_hangup_is_passed_on_and_the_wrapper_outlives_it(tmp_path: Path) -> None:
    """The terminal of `make demo-local` closes: the wrapper must not die of the hangup (the
    model server would run on with no one to stop it); the campaign gets it and ends."""
    child = textwrap.dedent(
        f"""
        import signal, sys, time
        signal.signal(signal.SIGHUP, lambda *_: sys.exit(130))
        open({str(tmp_path / "ready")!r}, "w").close()
        time.sleep(30)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, signal, sys
            # At its default, as under a terminal (the suite may run under nohup).
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            from runs.local_model import run_child
            sys.exit(run_child([sys.executable, "-c", {child!r}], dict(os.environ)))
        """)],
        cwd=Path(__file__).parents[2],
    )
    for _ in range(1200):  # a loaded machine (the whole suite, a model server) is slow
        if (tmp_path / "ready").exists():
            break
        time.sleep(0.05)
    assert (tmp_path / "ready").exists()
    parent.send_signal(signal.SIGHUP)
    assert parent.wait(timeout=20) == 130


def test_a_hangup_while_the_child_starts_is_passed_on_once_it_has() -> None:
    """The wrapper caught signals only once the child had started: a hangup in between
    killed it and left the child running. Sent here just before the child is started."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import os, signal, subprocess, sys
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            from runs import local_model
            class HungUpFirst(subprocess.Popen):
                def __init__(self, *args, **kwargs):
                    os.kill(os.getpid(), signal.SIGHUP)
                    super().__init__(*args, **kwargs)
            local_model.subprocess.Popen = HungUpFirst
            sys.exit(local_model.run_child(
                [sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ)))
        """)],
        cwd=Path(__file__).parents[2],
    )
    # The wrapper lives on (not killed by the hangup: -1), and the child got it (not 30 s).
    assert parent.wait(timeout=20) == 256 - signal.SIGHUP


def test_run_child_returns_the_childs_status() -> None:
    assert run_child([sys.executable, "-c", "raise SystemExit(4)"], dict(os.environ)) == 4


def test_a_server_that_dies_mid_campaign_stops_the_campaign_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model server died after answering: the campaign probed it for ever (a provider
    that answered is waited for), though no one would start it again. The wrapper now sends
    the campaign a Ctrl-C and says why in its closing line."""
    ready = tmp_path / "campaign-ready"
    server_process = subprocess.Popen(  # dies once the campaign is under way
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, time
            while not os.path.exists({str(ready)!r}):
                time.sleep(0.05)
            raise SystemExit(3)
        """)]
    )
    server = Server(server_process, "http://127.0.0.1:9/v1", tmp_path / "server.log")
    campaign = textwrap.dedent(
        f"""
        import signal, sys, time
        signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
        open({str(ready)!r}, "w").close()
        time.sleep(30)
        """
    )
    started = time.monotonic()
    assert run_child([sys.executable, "-c", campaign], dict(os.environ), server_process) == 130
    assert time.monotonic() - started < 25  # not the campaign's 30 s
    # Said as the campaign is stopped, before its own "stopping: ... signal again" lines.
    assert capsys.readouterr().err == (
        f"the model server (pid {server.pid}) exited with status 3: stopping what runs "
        "against it as a Ctrl-C would\n"
    )
    assert server_gone(server) == (
        f"the model server (pid {server.pid}) exited with status 3 while the campaign ran "
        f"(see {tmp_path / 'server.log'}); what it answered is kept: run the same command "
        "again to resume"
    )
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert server_gone(Server(alive, "", tmp_path / "server.log")) is None
        # A live server does not stop the campaign: its own status comes back.
        status = run_child([sys.executable, "-c", "raise SystemExit(4)"], dict(os.environ), alive)
        assert status == 4
    finally:
        alive.kill()
        alive.wait()


def answering(port: int, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def test_a_port_in_use_is_refused_before_anything_is_started(tmp_path: Path) -> None:
    """Someone else's server on the port: the one started there failed ("address already in
    use"), the foreign one answered 200, "ready" was said, and the campaign went to it."""
    port = free_port()
    foreign = subprocess.Popen(stand_in(port, 0, "someone-elses-model"))
    started = tmp_path / "started"
    try:
        assert answering(port)
        with (
            pytest.raises(LocalModelError, match=f"^port {port} is in use"),
            running_server(
                [sys.executable, "-c", f"open({str(started)!r}, 'w')"], port,
                tmp_path / "s.log", 20.0, model_id=MODEL,
            ),
        ):  # fmt: skip
            pass
        done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, ["false"])
    finally:
        foreign.kill()
        foreign.wait()
    assert not started.exists()
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith(f"error: port {port} is in use (")
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "loaded").exists()


def test_ready_means_our_process_alive_and_our_model_listed(tmp_path: Path) -> None:
    """Any 200 on the port counted as ready, whoever answered it."""
    port = free_port()
    foreign = subprocess.Popen(stand_in(port, 0, "someone-elses-model"))
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    url = f"http://127.0.0.1:{port}/v1"
    try:
        assert answering(port)
        with pytest.raises(LocalModelError, match=r"another server answers .*someone-elses-model"):
            wait_ready(Server(ours, url, tmp_path / "s.log", MODEL), 20.0)
        ours.kill()
        ours.wait()
        # It answers, we died: of a signal, named ("exited with status -9" before).
        with pytest.raises(LocalModelError, match=r"^the model server was killed by SIGKILL bef"):
            wait_ready(Server(ours, url, tmp_path / "s.log", "someone-elses-model"), 20.0)
    finally:
        for process in (foreign, ours):
            process.kill()
            process.wait()


def run_main(
    argv: list[str], cwd: Path, command: list[str], before: str = ""
) -> subprocess.CompletedProcess[str]:
    """`python -m runs.local_model ARGV` in `cwd`, the model file standing for itself (a file
    `loaded` says it was asked for) and `command` for the server; `before` runs first."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from runs import local_model
        def model_file():
            open("loaded", "w").close()
            return Path({MODEL!r})
        local_model.model_file = model_file
        local_model.check_server_installed = lambda: None
        local_model.server_command = lambda *_: {command!r}
    """) + textwrap.dedent(before) + f"\nsys.exit(local_model.main({argv!r}))\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_serve_says_when_the_server_exits(tmp_path: Path) -> None:
    """It exited 1 without a word, its last line "serving until Ctrl-C"."""
    port = free_port()
    done = run_main(["serve", "--port", str(port)], tmp_path, stand_in(port, 0, MODEL, 3.0))
    assert done.returncode == 1, done.stderr
    assert "serving until Ctrl-C" in done.stdout
    assert done.stderr.splitlines()[-1] == (
        f"error: the model server (pid {done.stdout.split('(pid ')[1].split(')')[0]}) exited "
        "with status 3; see out/local-server.log"
    )


def test_a_busy_run_folder_is_refused_before_the_model_is_loaded(tmp_path: Path) -> None:
    """A second demo loaded a second model server, then its campaign was refused (exit 5)."""
    run_dir = tmp_path / "out" / "local"  # the spec's name, without --out
    run_dir.mkdir(parents=True)
    fd = acquire_lock(run_dir, run_dir)
    write_pid(run_dir)
    try:
        port = free_port()
        argv = ["demo", "--spec", SPEC, "--port", str(port)]
        done = run_main(argv, tmp_path, stand_in(port))
    finally:
        release_lock(fd)
    assert done.returncode == 5, done.stderr
    assert done.stderr == (
        f"error: out/local is being written by another process (pid {os.getpid()}); let it "
        "finish, or stop it, then run again\n"
    )
    assert not (tmp_path / "loaded").exists()
    assert (run_dir / LOCK_FILE).is_file()


def test_a_killed_wrapper_takes_the_server_and_the_campaign_with_it(tmp_path: Path) -> None:
    """SIGKILLed, the wrapper left both running (in sessions of their own), holding the port
    and the run folder; a rerun loaded a second model and was refused the folder."""
    port = free_port()
    campaign = f"import os, time; open({str(tmp_path / 'c')!r}, 'w').write(str(os.getpid()))"
    wrapper = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, sys
            from pathlib import Path
            from runs.local_model import run_child, running_server
            with running_server({stand_in(port)!r}, {port}, Path({str(tmp_path / 'log')!r}),
                                20.0, model_id={MODEL!r}) as server:
                open({str(tmp_path / 's')!r}, "w").write(str(server.pid))
                run_child([sys.executable, "-c", {campaign + "; time.sleep(60)"!r}], {{}})
        """)],
        cwd=REPO,
    )
    for _ in range(400):
        if all((tmp_path / name).is_file() and (tmp_path / name).read_text() for name in "sc"):
            break
        time.sleep(0.05)
    children = [psutil.Process(int((tmp_path / name).read_text())) for name in "sc"]
    assert all(os.getsid(child.pid) == child.pid for child in children)  # Ctrl-C comes via us
    wrapper.kill()
    wrapper.wait()
    _, left = psutil.wait_procs(children, timeout=10)
    for child in left:
        child.kill()
    assert not left


def test_the_run_folder_is_read_from_the_spec_as_a_run_reads_it(tmp_path: Path) -> None:
    """The runner read the spec's name with bare `tomllib`: nesting too deep ended the
    wrapper in a RecursionError traceback, and a device was read without end. It reads the
    spec as `dutchbook run` does; one it cannot read gives no folder (the campaign then says
    what is wrong, in one line)."""
    from runs.local_model import run_folder_of

    named = tmp_path / "named.toml"
    named.write_text('name = "t2"\n', encoding="utf-8")
    assert run_folder_of(named, None) == Path("out") / "t2"
    assert run_folder_of(named, tmp_path / "given") == tmp_path / "given"
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5_000 + "]" * 5_000 + '\nname = "x"\n', encoding="utf-8")
    assert run_folder_of(deep, None) is None
    assert run_folder_of(Path("/dev/zero"), None) is None
    assert run_folder_of(tmp_path / "missing.toml", None) is None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_as_the_campaign_starts_ends_it_in_its_one_line(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A Ctrl-C or SIGTERM that reached the wrapper as it started the campaign was passed on
    at once, into the campaign's start-up (Python starting, `runs.cli` importing): it ended
    in a KeyboardInterrupt traceback, or was killed without a word (the wrapper's exit 254).
    Sent here to the wrapper just before the campaign is started."""
    before = f"""
        import os, subprocess
        class StoppedFirst(subprocess.Popen):
            def __init__(self, args, *rest, **kwargs):
                if "launch_held" in " ".join(args):  # the campaign, not the server
                    os.kill(os.getpid(), {int(sig)})
                super().__init__(args, *rest, **kwargs)
        local_model.subprocess.Popen = StoppedFirst
    """
    for _ in range(3):  # a free port taken by another test's socket before the server's bind
        port = free_port()
        argv = ["demo", "--spec", SPEC, "--port", str(port)]
        done = run_main(argv, tmp_path, stand_in(port), before)
        if f"port {port} is in use" not in done.stderr:
            break
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted — run the same command again\n"
    assert not (tmp_path / "out" / "local").exists()  # the campaign did not begin


#: A burst of stop signals as the model server starts, each sent by the wrapper to itself
#: where the hostile pass's landed: the first as it waits for the server, the second in
#: `stop`'s wait for the server to exit, the third inside the "interrupted" line, the last
#: in Python's exit (the teardown of `__main__`, the signals' defaults put back by then).
#: The file `stopped` says the server's stop ran to its end; `server` holds its pid.
BURST = """
    import builtins, os, signal
    def burst(sig):
        os.kill(os.getpid(), sig)
    def wait_ready(server, *args):
        open("server", "w").write(str(server.pid))
        burst(signal.SIGINT)
    local_model.wait_ready = wait_ready
    stop = local_model.stop
    def stop_in_a_burst(server, *args):
        burst(signal.SIGINT)
        stop(server, *args)
        open("stopped", "w").close()
    local_model.stop = stop_in_a_burst
    said = builtins.print
    def print(*args, **kwargs):
        if "interrupted" in str(args):
            burst(signal.SIGTERM)
        said(*args, **kwargs)
    builtins.print = print
    class AtExit:
        def __del__(self, burst=burst, sig=signal.SIGINT):
            burst(sig)
    left = AtExit()
"""


def test_a_burst_of_stops_as_the_server_starts_ends_in_the_one_line(tmp_path: Path) -> None:
    """Ctrl-C, Ctrl-C, SIGTERM as the server started: in 1 burst of 15 a 40-line
    KeyboardInterrupt traceback through `stop` and the "interrupted" line; in 4 of 15 the
    wrapper killed by SIGINT (`make`: "Interrupt") where it exits 130. The first stop stops
    it; those after it let the stopping finish, and the wrapper exits 130 in its one line."""
    port = free_port()
    done = run_main(["serve", "--port", str(port)], tmp_path, stand_in(port), BURST)
    assert (done.returncode, done.stderr) == (130, "interrupted; no model server is left running\n")
    assert (tmp_path / "stopped").exists()
    assert not alive(int((tmp_path / "server").read_text()))


def test_a_second_ctrl_c_kills_a_check_that_has_not_ended(tmp_path: Path) -> None:
    """The folder check passed a Ctrl-C and still running is killed on a second one, not
    waited for to the end of `CHECK_STOP_TIMEOUT_S` (this check never lets the signal in)."""
    port = free_port()
    check = (
        "import os, signal, time; open('check', 'w').write(str(os.getpid())); "
        "os.kill(os.getppid(), signal.SIGINT); time.sleep(0.5); "
        "os.kill(os.getppid(), signal.SIGINT); time.sleep(30)"
    )
    before = f"""
        local_model.FOLDER_CHECK = (sys.executable, '-c', {check!r})
        local_model.CHECK_STOP_TIMEOUT_S = 50.0
    """
    started = time.monotonic()
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, ["false"], before)
    assert time.monotonic() - started < 25  # neither the check's 30 s nor the 50 s allowed
    assert (done.returncode, done.stderr) == (130, "interrupted; no model server is left running\n")
    assert not alive(int((tmp_path / "check").read_text()))
    assert not (tmp_path / "loaded").exists()


def test_a_log_folder_that_cannot_be_written_is_said_in_one_line(tmp_path: Path) -> None:
    """`out` a file (or not writable): the server's log ended the wrapper in a traceback.
    Then it was said only after "starting the model server" and the model's loading; it is
    now said before either."""
    (tmp_path / "out").write_text("")
    port = free_port()
    done = run_main(["serve", "--port", str(port)], tmp_path, stand_in(port))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        "error: cannot write the model server's log out/local-server.log (out: File exists)\n"
    )
    assert not (tmp_path / "loaded").exists()


def test_no_free_port_and_a_port_out_of_range_are_said_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ended the wrapper in a traceback (OSError, OverflowError from bind)."""
    for port in ("99999", "-5"):
        done = run_main(["demo", "--port", port], tmp_path, ["false"])
        assert (done.returncode, done.stderr) == (
            2, f"error: --port {port} is not a port (1-65535; 0: a free one)\n"
        )  # fmt: skip
    assert not (tmp_path / "loaded").exists()

    def no_port(self: socket.socket, address: object) -> None:
        raise OSError(errno.EADDRNOTAVAIL, os.strerror(errno.EADDRNOTAVAIL))

    monkeypatch.setattr(socket.socket, "bind", no_port)
    with pytest.raises(LocalModelError, match=r"^no free port on 127\.0\.0\.1 \(Cannot assign"):
        local_model.free_port()  # the wrapper's own pick, for a run given no --port


@pytest.mark.parametrize(
    ("package", "extras", "said"),
    [
        ("no_such_package_of_dutchbooks", ("json",), "llama-cpp-python is not installed: run"),
        ("json", ("json", "no_such_extra_x", "no_such_extra_y"), (
            "llama-cpp-python's server is not installed (no_such_extra_x, no_such_extra_y "
            "missing): pip install 'llama-cpp-python[server]' into this environment, or run"
        )),
    ],
)  # fmt: skip
def test_no_llama_cpp_python_is_said_in_one_line_before_the_model_is_written(
    tmp_path: Path, package: str, extras: tuple[str, ...], said: str
) -> None:
    """Without llama-cpp-python (or its server's extra), the model (about 250 MB) was
    written, the server started and died at once, and the wrapper said only "exited with
    status 1 before it was ready; see out/local-server.log", the missing package named inside
    the log. Stand-ins for the package and its extras, as on a machine without them."""
    script = textwrap.dedent(f"""
        import sys
        from runs import local_model
        local_model.SERVER_PACKAGE = {package!r}
        local_model.SERVER_EXTRAS = {extras!r}
        def model_file():
            open("loaded", "w").close()
            raise SystemExit("the model was asked for")
        local_model.model_file = model_file
        sys.exit(local_model.main(["demo", "--spec", {SPEC!r}]))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, (
        f"error: {said} `make demo-local` (it builds llama-cpp-python[server] once, 4-12 "
        "minutes; LLAMA_WHEEL=path installs a wheel built before)\n"
    ))  # fmt: skip
    assert not (tmp_path / "loaded").exists()
    assert not (tmp_path / "out").exists()


def test_a_campaign_killed_by_a_signal_is_said_in_one_line(tmp_path: Path) -> None:
    """The campaign SIGKILLed (the OOM killer, someone's `kill -9`): the wrapper stopped its
    server and exited 247 without a word."""
    port = free_port()
    before = """
        local_model._child_command = lambda args: [
            sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    """
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, stand_in(port), before)
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert done.stderr == (
        "error: the campaign was killed by SIGKILL; what it wrote is kept: run the same "
        "command again to resume\n"
    )


#: `make demo-local`'s campaign (`launch_held`, with a stand-in for `runs.cli.main`) that
#: prints its last line and ends; then, as Python exits, the user's Ctrl-C reaches the
#: wrapper (or a SIGTERM: `SIG`), which passes it on. Where it lands (`PHASE`): an atexit
#: callback, or the teardown of the campaign's modules (by then Python has put the signals'
#: defaults back). The campaign waits on the FIFO `passed` until the wrapper has passed it on
#: (`PASSED_ON`).
FINISHING = """
import atexit, os, signal, sys
import runs.cli
from runs.local_model import launch_held

def ctrl_c_now(os=os, sig=SIG):  # bound here: module teardown clears the globals
    passed = os.open("passed", os.O_RDWR)  # its own writer too: a read waits for a byte
    os.kill(os.getppid(), sig)
    os.read(passed, 1)

class Teardown:
    def __del__(self, ctrl_c_now=ctrl_c_now):
        ctrl_c_now()

def main():
    print("run folder: out/t2", flush=True)
    if PHASE == "atexit":
        atexit.register(ctrl_c_now)
    else:
        sys.modules["__main__"].left = Teardown()
    raise SystemExit(0)

runs.cli.main = main
launch_held()
"""
#: In the wrapper: each signal passed on to the campaign is then said on the FIFO `passed`.
PASSED_ON = """
import contextlib, os
sent = local_model.subprocess.Popen.send_signal
def send_signal(self, sig):
    sent(self, sig)
    with contextlib.suppress(OSError):  # the campaign died of it: no one reads
        fd = os.open("passed", os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
local_model.subprocess.Popen.send_signal = send_signal
"""


@pytest.mark.parametrize("phase", ["atexit", "teardown"])
@pytest.mark.parametrize(
    ("sig", "said"), [(signal.SIGINT, "the Ctrl-C"), (signal.SIGTERM, "SIGTERM")]
)
def test_a_ctrl_c_as_the_finished_campaign_exits_does_not_undo_it(
    tmp_path: Path, phase: str, sig: signal.Signals, said: str
) -> None:
    """A Ctrl-C that reached the campaign after its last line, as it exited, killed it in
    Python's exit (the wrapper: 'error: the campaign was killed by SIGINT; ...', exit 130)
    or ended in a KeyboardInterrupt traceback ('Exception ignored in atexit callback'); a
    SIGTERM killed it in both (the default put back as its handlers ended). The campaign had
    completed and written its results: it exits as it would have, and the wrapper says the
    stop came after the end."""
    os.mkfifo(tmp_path / "passed")
    port = free_port()
    campaign = [sys.executable, "-c", f"PHASE, SIG = {phase!r}, {int(sig)}\n" + FINISHING]
    before = PASSED_ON + f"\nlocal_model._child_command = lambda args: {campaign!r}\n"
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, stand_in(port), before)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "run folder: out/t2"
    assert done.stderr == (
        f"the campaign had completed when {said} came: its results are written; nothing "
        "was interrupted\n"
    )


def test_a_ctrl_c_after_the_campaign_ended_leaves_its_end_as_it_was(tmp_path: Path) -> None:
    """A Ctrl-C while the wrapper stopped the model server, the campaign complete: 'interrupted;
    no model server is left running' and exit 130, the server's stop cut short."""
    port = free_port()
    before = """
        import os, signal
        stop = local_model.stop
        def stopped_after_a_ctrl_c(server, *args):
            os.kill(os.getpid(), signal.SIGINT)
            stop(server, *args)
            open("stopped", "w").close()
        local_model.stop = stopped_after_a_ctrl_c
        local_model._child_command = lambda args: [
            sys.executable, "-c", "print('run folder: out/t2')"]
    """
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, stand_in(port), before)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "run folder: out/t2"
    assert (tmp_path / "stopped").exists()


def test_only_a_campaign_that_completed_is_said_to_have_completed_before_a_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any other status is the campaign's own, said in its own last line: 130 (the stop ended
    it), 4 (left incomplete), 6 (the disk filled up, maybe as the stop came)."""
    from runs.local_model import _child_ended

    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    server = Server(alive, "", tmp_path / "server.log")
    try:
        for code in (130, 4, 6):
            assert _child_ended("demo", code, server, [signal.SIGINT]) == code
        assert _child_ended("test", 0, server, [signal.SIGINT]) == 0  # pytest says its own
        assert capsys.readouterr().err == ""
        assert _child_ended("demo", 0, server, [signal.SIGTERM]) == 0
    finally:
        alive.kill()
        alive.wait()
    assert capsys.readouterr().err == (
        "the campaign had completed when SIGTERM came: its results are written; nothing was "
        "interrupted\n"
    )


def test_an_out_folder_the_campaign_cannot_write_is_refused_before_the_model_is_loaded(
    tmp_path: Path,
) -> None:
    """`--out /proc/x` (or a file in the way, or a folder of other files): the campaign refused
    it in one line, but only once the model was loaded and answering. The same line now
    comes before the model is asked for; nothing is left made."""
    from runs.local_model import DUTCHBOOK

    spec = str(REPO / "runs" / "specs" / "local.toml")
    (tmp_path / "in-the-way").write_text("")
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "not-a-run" / "notes.txt").write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for out in ("/proc/x", "in-the-way/run", "not-a-run"):
        campaign = subprocess.run(
            [*DUTCHBOOK, "run", spec, "--out", out], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert campaign.returncode == 2, campaign.stderr
        assert campaign.stderr.startswith("error: ") and campaign.stderr.count("\n") == 1
        port = free_port()
        argv = ["demo", "--spec", spec, "--out", out, "--port", str(port)]
        done = run_main(argv, tmp_path, stand_in(port))
        assert (done.returncode, done.stdout, done.stderr) == (2, "", campaign.stderr)
    assert not (tmp_path / "loaded").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in-the-way", "not-a-run"]


def watched_check(then: str = "") -> str:
    """`FOLDER_CHECK`'s code: the real check, its maker watched. Once it has made the run
    folder and its parents, it writes those it made (and that are folders) to the file `made`,
    one a line, then runs the line `then`."""
    return textwrap.dedent(f"""
        import os, signal
        from runs import local_model
        make = local_model._make_folders
        def making(run_dir, made):
            make(run_dir, made)
            open("made", "w").write("".join(f"{{p}}\\n" for p in made if p.is_dir()))
            {then}
        local_model._make_folders = making
        local_model.folder_check()
    """)


def test_the_out_folders_check_leaves_no_folder_behind(tmp_path: Path) -> None:
    """The check makes a new run folder to see that it can (`/proc/x` cannot), then removes
    it and the parents it made: the campaign makes them as before. That it made them is seen
    in its maker (a check that did nothing passed too). `new/` holds the server's log by the
    time the campaign starts (`new/run-server.log`, beside the run folder)."""
    port = free_port()
    before = f"""
        local_model.FOLDER_CHECK = (sys.executable, "-c", {watched_check()!r})
        local_model._child_command = lambda args: [
            sys.executable, "-c", "import os, sys; sys.exit(3 if os.listdir('new') != "
            "['run-server.log'] else 0)"]
    """
    spec = str(REPO / "runs" / "specs" / "local.toml")
    argv = ["demo", "--spec", spec, "--out", "new/run", "--port", str(port)]
    done = run_main(argv, tmp_path, stand_in(port), before)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "made").read_text() == "new\nnew/run\n"
    assert (tmp_path / "loaded").exists()
    assert os.listdir(tmp_path / "new") == ["run-server.log"]


def test_a_ctrl_c_during_the_out_folders_check_leaves_no_folder_it_made(tmp_path: Path) -> None:
    """A Ctrl-C once the check had made `out/` and `out/local`: the wrapper SIGKILLed it, and
    both were left behind. It now passes the Ctrl-C on, and the check removes them as it ends.
    The check stands still after making them (on a FIFO nothing writes to) until then."""
    port = free_port()
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    then = f"os.kill(os.getppid(), signal.SIGINT); open({str(fifo)!r}).read()"
    before = f"""
        local_model.FOLDER_CHECK = (sys.executable, "-c", {watched_check(then)!r})
        local_model.CHECK_STOP_TIMEOUT_S = 50.0  # far more than it takes: nothing races it
    """
    argv = ["demo", "--spec", str(REPO / "runs" / "specs" / "local.toml"), "--port", str(port)]
    done = run_main(argv, tmp_path, stand_in(port), before)
    assert (done.returncode, done.stderr) == (130, "interrupted; no model server is left running\n")
    assert (tmp_path / "made").read_text() == "out\nout/local\n"
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "loaded").exists()


@pytest.mark.parametrize("run", ["in a terminal", "as a background job"])
def test_a_ctrl_c_during_the_out_folders_check_ends_it_and_the_wrapper(
    tmp_path: Path, run: str
) -> None:
    """The check holds the stop signals (its imports must not take one): a Ctrl-C then
    reaches the wrapper alone, which passes it on, and kills a check that has not ended in
    `CHECK_STOP_TIMEOUT_S` (this one never lets the signal in), and says it was interrupted.
    A background job starts with Ctrl-C ignored: its `kill -INT` went unheard, and the
    wrapper went on to start the server and the campaign (found by CI run in the background)."""
    port = free_port()
    check = (
        "import os, signal, time; open('check', 'w').write(str(os.getpid())); "
        "os.kill(os.getppid(), signal.SIGINT); time.sleep(30)"
    )
    ignored = (  # set either way: the suite may itself run as a background job
        "signal.signal(signal.SIGINT, signal.default_int_handler)"
        if run == "in a terminal"
        else "signal.signal(signal.SIGINT, signal.SIG_IGN)"
    )
    before = f"""
        import signal
        {ignored}
        local_model.FOLDER_CHECK = (sys.executable, '-c', {check!r})
        local_model.CHECK_STOP_TIMEOUT_S = 1.0
    """
    argv = ["demo", "--spec", str(REPO / "runs" / "specs" / "local.toml"), "--port", str(port)]
    started = time.monotonic()
    done = run_main(argv, tmp_path, stand_in(port), before)
    assert time.monotonic() - started < 25  # not the check's 30 s
    assert (done.returncode, done.stderr) == (130, "interrupted; no model server is left running\n")
    assert not alive(int((tmp_path / "check").read_text()))
    assert not (tmp_path / "loaded").exists()


def test_the_wrapper_imports_no_polars_before_main_catches_a_ctrl_c() -> None:
    """Until `main` runs, a Ctrl-C ends `make demo-local` in a KeyboardInterrupt traceback; so
    the module's own imports are the standard library's and `runs.signals`, not polars
    (`engine.runlock`, about 0.15 s), which `check_folder_free` imports when it runs, inside
    `main`'s one-line Ctrl-C."""
    probe = (
        "import sys, runs.local_model\n"
        "print([m for m in ('polars', 'numpy', 'engine.runlock') if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


#: A campaign standing for `dutchbook run` whose dispatch is over: it laps `dispatch` in its
#: run folder `out/local` (as `runs.phases` does), lets the wrapper's watch (a look every
#: quarter second) see the server alive after it, then has the model server killed (the file
#: `lapped`), waits until nothing answers on its port and for the watch, then "writes its
#: report" and exits `CODE`. A Ctrl-C ends it with 130 (let in as `launch_held` lets it in:
#: the campaign starts with the stop signals held).
DISPATCHED = """
import json, os, signal, socket, sys, time
from datetime import UTC, datetime
signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
os.makedirs("out/local/logs", exist_ok=True)
with open("out/local/logs/phases.jsonl", "a") as laps:
    lap = {"at": datetime.now(UTC).isoformat(), "pid": os.getpid(), "phase": "dispatch"}
    laps.write(json.dumps(lap) + "\\n")
time.sleep(1.5)
open("lapped", "w").close()
while socket.socket().connect_ex(("127.0.0.1", PORT)) == 0:
    time.sleep(0.05)
time.sleep(2.5)
print("report written", flush=True)
sys.exit(CODE)
"""


@pytest.mark.parametrize("code", [0, 4])
def test_a_server_killed_after_dispatch_lets_the_campaign_finish(
    tmp_path: Path, code: int
) -> None:
    """The server `kill -9`ed right after "answers accepted": the wrapper sent the campaign a
    Ctrl-C all the same ("interrupted", no report) and blamed the server, exit 4. Scoring and
    the report need no server: the campaign ends as it would have (its own status; 4 here
    for answers its dispatch left unanswered), and nothing is said of the server."""
    port = free_port()
    campaign = DISPATCHED.replace("PORT", str(port)).replace("CODE", str(code))
    before = f"local_model._child_command = lambda args: {[sys.executable, '-c', campaign]!r}\n"
    server = stand_in(port, killed_when=str(tmp_path / "lapped"))
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, server, before)
    assert (done.returncode, done.stderr) == (code, "")
    assert done.stdout.splitlines()[-1] == "report written"


#: A campaign whose server dies before its first answer: it has the server killed, waits
#: until nothing answers, then laps `dispatch` at once (its lane stopped on "connection
#: refused") and exits 4 before the wrapper's next look.
REFUSED = """
import json, os, signal, socket, sys, time
from datetime import UTC, datetime
signal.signal(signal.SIGINT, lambda *_: sys.exit(4))  # the wrapper's Ctrl-C: the lane's end
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
open("lapped", "w").close()
while socket.socket().connect_ex(("127.0.0.1", PORT)) == 0:
    time.sleep(0.01)
os.makedirs("out/local/logs", exist_ok=True)
with open("out/local/logs/phases.jsonl", "a") as laps:
    lap = {"at": datetime.now(UTC).isoformat(), "pid": os.getpid(), "phase": "dispatch"}
    laps.write(json.dumps(lap) + "\\n")
sys.exit(4)
"""


def test_a_server_killed_before_dispatch_ended_is_named_though_the_lap_came_first(
    tmp_path: Path,
) -> None:
    """A server killed before its first answer: the lane stopped at once and the campaign
    lapped dispatch before the wrapper's next look, which took the lap for a dispatch over
    before the server died and said nothing of it (a hostile pass, against the real server)."""
    port = free_port()
    campaign = REFUSED.replace("PORT", str(port))
    before = f"local_model._child_command = lambda args: {[sys.executable, '-c', campaign]!r}\n"
    server = stand_in(port, killed_when=str(tmp_path / "lapped"))
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, server, before)
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith("error: the model server (pid "), done.stderr
    assert "was killed by SIGKILL while the campaign ran" in done.stderr


def test_only_the_campaigns_own_dispatch_lap_after_it_started_counts(tmp_path: Path) -> None:
    """Earlier runs of the folder lapped dispatch too, under pids that repeat: those laps are
    before the offset. A server that exits before the campaign's own lap still stops it."""
    from runs.local_model import DispatchEnd

    laps = tmp_path / "logs" / "phases.jsonl"
    laps.parent.mkdir()
    laps.write_text('{"phase": "dispatch", "pid": 7}\n{"phase": "plan", "pid": 8}\n{"pha')
    dispatch = DispatchEnd.before_start(tmp_path)
    assert not dispatch.reached(7)
    with laps.open("a") as more:  # a torn line before it, as a kill leaves one
        more.write('\n{"phase": "plan", "pid": 8}\n{"phase": "dispatch", "pid": 8}\n')
    assert (dispatch.reached(7), dispatch.reached(8)) == (False, True)
    assert DispatchEnd.before_start(tmp_path / "new").reached(8) is False

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    campaign = [sys.executable, "-c", "import sys, signal, time\n"
                "signal.signal(signal.SIGINT, lambda *_: sys.exit(130)); time.sleep(30)"]
    fresh = DispatchEnd.before_start(tmp_path)  # no lap of the campaign's: it is stopped
    assert run_child(campaign, dict(os.environ), gone, dispatch=fresh) == 130
    assert not fresh.server_outlived


def test_the_wrapper_reads_the_dispatch_lap_the_campaign_writes(tmp_path: Path) -> None:
    """The lap reader is tied to `runs.phases`' writer: a lap renamed or restamped there would
    bring back the campaign interrupted after its dispatch, with every other test green."""
    import runs.phases
    from runs.local_model import PHASES_FILE, DispatchEnd

    assert Path(runs.phases.PHASES_FILE) == PHASES_FILE
    dispatch = DispatchEnd.before_start(tmp_path)
    before = time.time()
    runs.phases.PhaseClock().lap("dispatch", tmp_path)
    assert dispatch.reached(os.getpid(), by=time.time() + 1)
    assert not dispatch.reached(os.getpid(), by=before - 1)


def test_a_server_killed_by_a_signal_is_named(tmp_path: Path) -> None:
    """"exited with status -9": the campaign's end named its signal, the server's did not."""
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    killed.kill()
    killed.wait()
    line = server_gone(Server(killed, "", tmp_path / "s.log"))
    assert line is not None
    assert line.startswith(f"the model server (pid {killed.pid}) was killed by SIGKILL while")


def test_a_spec_the_campaign_refuses_is_said_before_a_missing_llama_cpp_python(
    tmp_path: Path,
) -> None:
    """`demo --spec missng.toml` on a machine without llama-cpp-python said "not installed:
    run `make demo-local`", whose 4-12 minute build ended in the spec's refusal."""
    script = textwrap.dedent("""
        import sys
        from runs import local_model
        local_model.SERVER_PACKAGE = "no_such_package_of_dutchbooks"
        sys.exit(local_model.main(["demo", "--spec", "missng.toml"]))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("error: missng.toml: "), done.stderr
    assert done.stderr.count("\n") == 1 and "llama" not in done.stderr


def test_a_spec_the_campaign_refuses_is_refused_before_the_model_is_loaded(
    tmp_path: Path,
) -> None:
    """`demo --spec /tmp/nonexist.toml` loaded the model and started its server, then the
    campaign said "no such file" (exit 2). The wrapper reads the spec as the campaign does,
    first, and says the campaign's own line."""
    from runs.local_model import DUTCHBOOK

    (tmp_path / "not-toml.toml").write_text("name = \n")
    (tmp_path / "invalid.toml").write_text('name = "t2"\nseed = -1\n')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for spec in ("missing.toml", "not-toml.toml", "invalid.toml"):
        campaign = subprocess.run(
            [*DUTCHBOOK, "run", spec], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert campaign.returncode == 2, campaign.stderr
        assert campaign.stderr.startswith(f"error: {spec}: ") and campaign.stderr.count("\n") == 1
        for out in ([], ["--out", "given"]):
            port = free_port()
            argv = ["demo", "--spec", spec, *out, "--port", str(port)]
            done = run_main(argv, tmp_path, stand_in(port))
            assert (done.returncode, done.stdout, done.stderr) == (2, "", campaign.stderr)
    assert not (tmp_path / "loaded").exists()
    assert not (tmp_path / "given").exists()


def test_a_fifo_spec_is_refused_in_one_line_before_the_model_is_loaded(tmp_path: Path) -> None:
    """The demo reads its spec more than once (the folder it names, the check before the
    model is loaded, then the campaign, a process of its own that reads it by its path):
    `mkfifo s.toml; demo --spec s.toml` with a writer that wrote the spec once hung on the
    second read, waiting for another writer. Refused first, in one line, read by nothing."""
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    port = free_port()
    for out in ([], ["--out", "given"]):
        done = run_main(["demo", "--spec", "s.toml", *out, "--port", str(port)], tmp_path,
                        stand_in(port), before=WRITES_THE_SPEC_ONCE)  # fmt: skip
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.startswith("error: s.toml: is a FIFO") and "a file" in done.stderr
        assert done.stderr.count("\n") == 1
    assert not (tmp_path / "loaded").exists() and not (tmp_path / "out").exists()
    assert not (tmp_path / "given").exists()


#: A writer that writes the stock spec once to the FIFO `s.toml` (`run_main`'s `before`),
#: should anything open it; none must.
WRITES_THE_SPEC_ONCE = f"""
    import threading
    def write_once():
        with open("s.toml", "wb") as fifo:
            fifo.write(Path({SPEC!r}).read_bytes())
    threading.Thread(target=write_once, daemon=True).start()
"""


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder in which `dutchbook run runs/specs/local.toml --rehearse` ran: its run folder
    `out/local`. Rehearsed once (seconds of CPU) by whichever xdist worker first asks, the
    others waiting on its lock; the tests copy it before they change it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    made = shared / "local-rehearsal"
    with (shared / "local-rehearsal.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        if not (made / "complete").is_file():  # never made, or its rehearsal failed
            shutil.rmtree(made, ignore_errors=True)
            made.mkdir()
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            rehearsal = subprocess.run(
                [*local_model.DUTCHBOOK, "run", SPEC, "--rehearse"], cwd=made, env=env,
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert rehearsal.returncode == 0, rehearsal.stderr
            (made / "complete").touch()
    return made / "out"


def test_a_rehearsals_folder_is_refused_before_the_model_is_loaded(
    tmp_path: Path, rehearsed: Path
) -> None:
    """`dutchbook run runs/specs/local.toml --rehearse` writes to `out/local` too: the demo
    resumed it, asked nothing, and reported the simulator's answers as the model's. Refused
    in the campaign's own line, before the model is loaded (`runs.rehearsal`)."""
    from runs.local_model import DUTCHBOOK

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    shutil.copytree(rehearsed, tmp_path / "out")  # `out/local`, the stock spec's folder
    campaign = subprocess.run(
        [*DUTCHBOOK, "run", SPEC], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert campaign.returncode == 2 and "holds a rehearsal's answers" in campaign.stderr
    port = free_port()
    done = run_main(["demo", "--spec", SPEC, "--port", str(port)], tmp_path, stand_in(port))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", campaign.stderr)
    assert not (tmp_path / "loaded").exists()


def test_a_folder_of_another_design_is_refused_before_the_model_is_loaded(
    tmp_path: Path, rehearsed: Path
) -> None:
    """The commonest refusal of a resume, a folder run with another design, came only once
    the model was loaded and answering."""
    from runs.local_model import DUTCHBOOK
    from runs.rehearsal import REHEARSAL_FILE

    other = tmp_path / "other.toml"  # the stock spec with its baseline arm left out
    stock = Path(SPEC).read_text(encoding="utf-8")
    families = str(Path(SPEC).parent / "local-families")
    other.write_text(
        stock.replace('[[arms]]\nname = "baseline"\n', "").replace(
            '"local-families"', f'"{families}"'
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # The stock spec's rehearsal, resumed with the other design (the rehearsal shared with
    # the test above: which of the two designs the folder holds does not matter).
    shutil.copytree(rehearsed / "local", tmp_path / "run")
    (tmp_path / "run" / REHEARSAL_FILE).unlink()  # as a real run's folder reads
    campaign = subprocess.run(
        [*DUTCHBOOK, "run", str(other), "--out", "run"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert campaign.returncode == 2 and "was run with a different design" in campaign.stderr
    port = free_port()
    argv = ["demo", "--spec", str(other), "--out", "run", "--port", str(port)]
    done = run_main(argv, tmp_path, stand_in(port))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", campaign.stderr)
    assert not (tmp_path / "loaded").exists()


def test_threads_below_one_are_refused_in_one_line(tmp_path: Path) -> None:
    """`--threads 0` (or -5) went to the server, which died of it once the model was written:
    "exited with status 1 before it was ready". Refused first, as `--port` is."""
    before = 'local_model._child_command = lambda args: [sys.executable, "-c", "pass"]\n'
    for threads in ("0", "-5"):
        port = free_port()
        argv = ["demo", "--spec", SPEC, "--threads", threads, "--port", str(port)]
        done = run_main(argv, tmp_path, stand_in(port), before)
        assert (done.returncode, done.stdout, done.stderr) == (
            2, "", f"error: --threads {threads} is not a number of threads (1 or more)\n"
        )  # fmt: skip
    assert not (tmp_path / "loaded").exists()


def test_each_start_has_a_log_of_its_own(tmp_path: Path) -> None:
    """The log was appended to and never emptied (60,887 lines seen), the lines of runs at
    once mixed in it. Each start now empties it, and a start beside a live one (which holds
    the log's lock) writes the next name, leaving the other's log as it was."""
    import fcntl

    before = 'local_model._child_command = lambda args: [sys.executable, "-c", "pass"]\n'
    log = tmp_path / "out" / "local-server.log"

    def demo() -> subprocess.CompletedProcess[str]:
        port = free_port()
        argv = ["demo", "--spec", SPEC, "--port", str(port)]
        done = run_main(argv, tmp_path, stand_in(port), before)
        assert done.returncode == 0, done.stderr
        return done

    for _ in range(2):
        assert "(log: out/local-server.log)" in demo().stdout
        assert log.read_text() == f"loading {MODEL}\n"
    with log.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a live wrapper's
        held.write("the other run's\n")
        held.flush()
        done = demo()
    assert "(log: out/local-server.2.log)" in done.stdout
    assert log.read_text() == f"loading {MODEL}\nthe other run's\n"
    assert (tmp_path / "out" / "local-server.2.log").read_text() == f"loading {MODEL}\n"


def test_the_tests_server_log_leaves_the_demos_as_it_was(tmp_path: Path) -> None:
    """`make test-local` said "(log: out/local-server.log)", the log of the demo of
    `out/local`, and emptied it: a failed demo's log was lost to the next test run. The
    tests' server writes a log of its own beside it."""
    demo_log = tmp_path / "out" / "local-server.log"
    demo_log.parent.mkdir()
    demo_log.write_text("the failed demo's\n")
    before = 'local_model._child_command = lambda args: [sys.executable, "-c", "pass"]\n'
    port = free_port()
    done = run_main(["test", "--port", str(port)], tmp_path, stand_in(port), before)
    assert done.returncode == 0, done.stderr
    assert "(log: out/local-test-server.log)" in done.stdout
    assert demo_log.read_text() == "the failed demo's\n"
    assert (tmp_path / "out" / "local-test-server.log").read_text() == f"loading {MODEL}\n"


def test_the_log_goes_beside_the_run_folder_given(tmp_path: Path) -> None:
    """The log was `out/local-server.log` of the working folder whatever `--out` said: from a
    working folder it could not write in, a writable `--out` was refused ("cannot write the
    model server's log out/local-server.log"), after "starting the model server". It is
    beside the run folder, where the campaign writes; not in it, which a new run would refuse
    as holding files."""
    here = tmp_path / "here"
    here.mkdir()
    (here / "out").write_text("")  # `out` cannot be made here
    out = tmp_path / "runs" / "mine"
    lists = [sys.executable, "-c", f"import os; print(os.listdir({str(out.parent)!r}))"]
    before = f"local_model._child_command = lambda args: {lists!r}\n"
    port = free_port()
    argv = ["demo", "--spec", SPEC, "--out", str(out), "--port", str(port)]
    done = run_main(argv, here, stand_in(port), before)
    assert done.returncode == 0, done.stderr
    assert f"(log: {out.parent / 'mine-server.log'})" in done.stdout
    assert done.stdout.splitlines()[-1] == "['mine-server.log']"  # the run folder not made
    assert (out.parent / "mine-server.log").read_text() == f"loading {MODEL}\n"


@pytest.mark.parametrize(
    ("argv", "rest"),
    [
        (["test", "--port", "47113", "--", "-k", "nothing"], ["-k", "nothing"]),
        (["test", "-k", "foo"], ["-k", "foo"]),
        (["test", "-x", "--threads", "3"], ["-x"]),
        (["test", "--", "-x", "--port", "1"], ["-x", "--port", "1"]),
        (["test", "tests_local/test_a.py", "--tb=short"], ["tests_local/test_a.py", "--tb=short"]),
    ],
)
def test_pytest_arguments_go_anywhere_among_the_options(argv: list[str], rest: list[str]) -> None:
    """"extra pytest arguments" were taken only before any option and only when none began
    with `-` but after `--`: `test --port N -- -k x`, `test -k foo`, `test -x` were refused."""
    from runs.local_model import _child_command, parse_args

    args = parse_args(argv)
    assert _child_command(args)[-len(rest) - 1 :] == ["tests_local", *rest]
    assert args.threads == (3 if "--threads" in argv[:3] else 2)


def test_pytest_arguments_reach_pytest_and_are_refused_elsewhere(tmp_path: Path) -> None:
    port = free_port()
    before = "local_model.run_child = lambda command, *_, **__: print(command[-3:]) or 0\n"
    argv = ["test", "--port", str(port), "--", "-k", "nothing"]
    done = run_main(argv, tmp_path, stand_in(port), before)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "['tests_local', '-k', 'nothing']"
    done = run_main(["demo", "-k", "foo"], tmp_path, ["false"])
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith("error: unrecognized arguments: -k foo")


def test_a_ctrl_c_during_the_tests_ends_in_the_wrappers_one_line(tmp_path: Path) -> None:
    """A Ctrl-C passed on to pytest ended in its 100-line KeyboardInterrupt traceback (in its
    start-up), then "error: the tests were killed by SIGINT" (the user's own stop), or in its
    own "KeyboardInterrupt" lines mid-run and nothing of the wrapper's. The tests have nothing
    to keep: they are killed, with what they started, and the wrapper says the one line.
    The stand-in for pytest starts a process of its own, then the Ctrl-C comes."""
    port = free_port()
    tests = (
        "import os, signal, subprocess, sys, time\n"
        "own = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "open('own', 'w').write(str(own.pid))\n"
        "os.kill(os.getppid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
    )
    before = f"local_model._child_command = lambda args: {[sys.executable, '-c', tests]!r}\n"
    started = time.monotonic()
    done = run_main(["test", "--port", str(port)], tmp_path, stand_in(port), before)
    assert time.monotonic() - started < 25  # not the tests' 30 s
    assert (done.returncode, done.stderr) == (130, "interrupted — run the same command again\n")
    own = int((tmp_path / "own").read_text())
    for _ in range(100):  # reaped by init, not by us: it may show a moment longer
        if not alive(own) or psutil.Process(own).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    assert not alive(own) or psutil.Process(own).status() == psutil.STATUS_ZOMBIE
