"""SIGTERM and a hangup outside dispatch end a command as Ctrl-C does (`runs.signals`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runs.signals import raise_if_stop_pending, stops_as_interrupt
from tests.runs.run_folders import SMALL_SPEC

DUTCHBOOK = str(Path(sys.executable).with_name("dutchbook"))

linux_only = pytest.mark.skipif(
    not os.path.exists("/proc/self/status"), reason="reads a process's caught signals in /proc"
)


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_inside_the_block_a_signal_is_an_interrupt_and_after_it_as_before(
    sent: signal.Signals,
) -> None:
    before = signal.getsignal(sent)
    if before == signal.SIG_IGN:  # a suite under `nohup`: put the default in place first
        signal.signal(sent, signal.SIG_DFL)
    try:
        outer = signal.getsignal(sent)
        with pytest.raises(KeyboardInterrupt), stops_as_interrupt():
            os.kill(os.getpid(), sent)
            time.sleep(5)  # a handler runs at the next bytecode: this is never waited out
        assert signal.getsignal(sent) == outer
    finally:
        signal.signal(sent, before)


def test_an_ignored_signal_stays_ignored() -> None:
    """`nohup dutchbook run ...`: the user asked that a hangup not stop the command."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stops_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # nothing happens
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_ctrl_c_ignored_when_the_command_started_stops_it_as_dispatch_would() -> None:
    """A script's background job (`dutchbook run ... &`) starts with Ctrl-C ignored. Dispatch
    catches it regardless (`stop_signals_to_catch`); before it, a `kill -INT` went unheard
    and the run planned and dispatched to the end."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), stops_as_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # a handler runs at the next bytecode: this is never waited out
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with stops_as_interrupt():  # not ignored: Python's own handler is left in place
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def _catches(pid: int, sent: signal.Signals) -> bool:
    """Whether process `pid` has a handler for `sent` now (Linux: /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (sent - 1) & 1)


@linux_only
def test_a_sigterm_before_dispatch_ends_the_run_in_one_line_and_it_resumes(
    tmp_path: Path,
) -> None:
    """Sent as soon as the command can catch it: while it still imports what it needs or
    plans (by default a SIGTERM there killed it without a word, exit -15)."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    env.pop("PYTEST_CURRENT_TEST", None)
    spec = tmp_path / "spec.toml"  # a bigger plan only makes the resume slower
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    command = [DUTCHBOOK, "run", str(spec), "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    said = [line for line in (out + err).splitlines() if line.startswith("interrupted")]
    assert len(said) == 1, out + err
    assert said[0].startswith("interrupted — run the same command again")
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "run folder:" in again.stdout


def test_a_held_signal_is_acted_on_when_the_block_ends() -> None:
    """What keeps a Ctrl-C out of a compiled module's initialisation (orjson's crashed)."""
    from runs.signals import held

    before = signal.getsignal(signal.SIGTERM)
    try:
        with stops_as_interrupt():
            reached_the_end = False
            with pytest.raises(KeyboardInterrupt):
                with held():
                    # To this thread: sent to the process, another thread's (the test
                    # runner's) could take it, as at a command's start none can.
                    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
                    time.sleep(0.05)  # a handler would have run by now
                    reached_the_end = True
                time.sleep(5)  # never waited out: the interrupt comes as the hold ends
            assert reached_the_end
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_stop_signal_inside_a_swallowing_callback_is_delivered_after_the_block() -> None:
    """llama.cpp's vocabulary load runs a Python log callback through ctypes, which drops an
    exception raised inside it: a Ctrl-C landing there was lost. `deferred` notes the signal
    and delivers it to its handler when the block ends."""
    import os
    import signal as signals_module

    from runs.signals import deferred

    def callback_from_c() -> None:  # as ctypes runs one: whatever it raises is dropped
        try:
            os.kill(os.getpid(), signals_module.SIGINT)
            for _ in range(1000):  # the handler runs at the next bytecode boundaries
                pass
        except BaseException:
            pass

    # Python's own handler, whatever the suite inherited: started in the background from a
    # script without job control, it ignores SIGINT, and the kill above would be ignored too.
    before = signals_module.signal(signals_module.SIGINT, signals_module.default_int_handler)
    try:
        callback_from_c()  # without the block: the interrupt is lost, nothing is raised
        with pytest.raises(KeyboardInterrupt), deferred():
            callback_from_c()
        assert signals_module.getsignal(signals_module.SIGINT) is signals_module.default_int_handler
    finally:
        signals_module.signal(signals_module.SIGINT, before)


class _StopsInFinalizer:
    """Sends SIGTERM to this process while it is collected: the handler's KeyboardInterrupt
    is raised inside `__del__`, where Python prints "Exception ignored" and drops it."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler runs here, inside the finalizer


def test_a_stop_dropped_inside_a_finalizer_still_ends_the_command() -> None:
    """A hostile pass: a SIGTERM as dispatch ended raised its KeyboardInterrupt inside the
    event loop's teardown, which dropped it; the run scored, reported and exited 0."""
    before = signal.getsignal(signal.SIGTERM)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    reached: list[str] = []
    try:
        with pytest.raises(KeyboardInterrupt), stops_as_interrupt():
            _StopsInFinalizer()  # collected at once: its interrupt dropped (and not said)
            reached.append("after the finalizer")
            raise_if_stop_pending()  # a step's look: the stop ends the command here
            reached.append("after the look")
        assert reached == ["after the finalizer"]
        raise_if_stop_pending()  # said once: nothing left pending for the next command
        with stops_as_interrupt():
            _StopsInFinalizer()  # dropped after the block's last look: its work was done
        raise_if_stop_pending()  # and it ended with the block: the next command runs
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_delivered_stop_leaves_nothing_pending() -> None:
    before = signal.getsignal(signal.SIGTERM)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(KeyboardInterrupt), stops_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        raise_if_stop_pending()  # the next command is not stopped by this one's signal
    finally:
        signal.signal(signal.SIGTERM, before)


async def test_a_signal_the_loop_never_handed_over_still_counts_as_a_stop() -> None:
    """A SIGTERM 0 to 0.15 s after dispatch ended was taken by asyncio and dropped when
    dispatch's handlers were removed before the loop's next turn: exit 0, no word."""
    from runs.pipeline import StopSignals

    signals = StopSignals()
    with signals.installed():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # no await: the loop never turns before the handlers go
    assert signals.count == 1 and not signals.hard
    signals = StopSignals()
    with signals.installed():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
    assert signals.hard  # two: out at once, no scoring


def _stopped_as_dispatch_ends(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, signals: int
) -> tuple[int, str, Path]:
    """`dutchbook run` in this process, `signals` SIGTERMs sent as its dispatch returns."""
    import runs.pipeline
    from engine.dispatch import dispatch as real  # what runs.pipeline calls
    from tests.runs.quiet_campaign import invoke

    async def then_stopped(*args: Any, **kwargs: Any) -> Any:
        summary = await real(*args, **kwargs)
        for _ in range(signals):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # each its own arrival: two at once may be one
        return summary

    monkeypatch.setattr(runs.pipeline, "dispatch", then_stopped)
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    out = tmp_path / "run"
    code, said = invoke("run", str(tmp_path / "spec.toml"), "--out", str(out))
    return code, said, out


def test_a_stop_as_dispatch_ends_scores_what_is_there_and_says_so_last(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, said, out = _stopped_as_dispatch_ends(monkeypatch, tmp_path, 1)
    assert code == 130, said
    assert said.strip().splitlines()[-1] == "interrupted — run the same command again to resume"
    assert f"run folder: {out}" in said and (out / "scores.parquet").exists()


def test_a_second_stop_as_dispatch_ends_skips_scoring(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The second signal came once dispatch's task was done: nothing to cancel, and the run
    scored and reported for seconds (minutes at paper scale) before it stopped."""
    code, said, out = _stopped_as_dispatch_ends(monkeypatch, tmp_path, 2)
    assert code == 130, said
    assert said.strip().splitlines()[-1] == "interrupted — run the same command again to resume"
    assert not (out / "scores.parquet").exists() and not (out / "report").exists()


def test_a_stop_dropped_while_planning_sends_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stop whose KeyboardInterrupt was dropped while the run planned was acted on only
    after the whole dispatch (every answer paid for): now before anything is sent."""
    import runs.pipeline
    import runs.signals
    from tests.runs.quiet_campaign import invoke

    real = runs.pipeline._design_and_plan

    def planned_then_dropped(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        monkeypatch.setattr(runs.signals, "_stop_pending", True)  # as a finalizer drops one
        return plan

    monkeypatch.setattr(runs.pipeline, "_design_and_plan", planned_then_dropped)
    (tmp_path / "spec.toml").write_text(SMALL_SPEC, encoding="utf-8")
    out = tmp_path / "run"
    code, said = invoke("run", str(tmp_path / "spec.toml"), "--out", str(out))
    assert code == 130, said
    assert not list((out / "attempts").glob("*.parquet")) and "answers accepted" not in said
