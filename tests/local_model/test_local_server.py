"""The local server's life (`runs.local_model`): started on a free port, waited for, stopped by
its pid on success, on failure and on interrupt; never left running. A small stand-in server
(stdlib http.server answering `GET /v1/models`) plays llama-cpp-python's part."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runs.local_model import (
    BASE_URL_ENV,
    LocalModelError,
    Server,
    free_port,
    run_child,
    running_server,
    server_command,
    server_gone,
)

STAND_IN = textwrap.dedent(
    """
    import sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    time.sleep(float(sys.argv[2]))  # loading the model
    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(b'{"data": []}')
        def log_message(self, *args):
            pass
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Models).serve_forever()
    """
)


def stand_in(port: int, delay: float = 0.3) -> list[str]:
    return [sys.executable, "-c", STAND_IN, str(port), str(delay)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_is_waited_for_then_stopped_by_its_pid(tmp_path: Path) -> None:
    port = free_port()
    with running_server(stand_in(port), port, tmp_path / "server.log", 20.0) as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        assert alive(server.pid)
    assert server.process.poll() is not None  # stopped, and reaped


def test_server_is_stopped_when_the_work_fails(tmp_path: Path) -> None:
    port = free_port()
    with (
        pytest.raises(RuntimeError, match="campaign failed"),
        running_server(stand_in(port), port, tmp_path / "server.log", 20.0) as server,
    ):
        raise RuntimeError("campaign failed")
    assert server.process.poll() is not None


def test_a_server_that_dies_while_loading_says_where_its_log_is(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-c", "import sys; print('no model'); sys.exit(3)"]
    log = tmp_path / "server.log"
    with (
        pytest.raises(LocalModelError, match="exited with status 3") as caught,
        running_server(command, port, log, 20.0),
    ):
        pass
    assert str(log) in str(caught.value)
    assert "no model" in log.read_text()


def test_a_server_that_never_answers_is_stopped_after_the_timeout(tmp_path: Path) -> None:
    port = free_port()
    with (
        pytest.raises(LocalModelError, match="did not answer"),
        running_server(stand_in(port, delay=60), port, tmp_path / "s.log", 1.0),
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


def test_a_server_that_dies_mid_campaign_stops_the_campaign_with_one_line(tmp_path: Path) -> None:
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
