"""The report's figures drawn by warmed worker processes (runs.figure_workers, issue 12): the
same bytes as one process; a figure that fails raises its own error, and a worker that dies
leaves its work to this process, which draws the same report."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
from rich.console import Console
from typer.testing import CliRunner

import runs.figure_workers as figure_workers
import runs.pipeline as pipeline
import runs.planner as planner
from runs.audit import run_audit
from runs.cli import app
from runs.figure_workers import SHARES, WORKERS_ENV, FigureWorkers, workers_wanted
from runs.report import write_report
from runs.report_figures import FIGURES
from runs.report_page import write_page
from runs.scoring_step import read_scored
from runs.spec import load_spec

#: `dutchbook run` here starts its workers (`tests/conftest.py` spares the other tests them).
pytestmark = pytest.mark.figure_workers


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    shutil.rmtree(to / "report")
    return to


def _report(run: Path, workers: FigureWorkers | None) -> None:
    """What `dutchbook run` writes after scoring, with or without workers."""
    spec = load_spec(run / "spec.toml")
    scored = read_scored(run)
    console = Console(file=open(os.devnull, "w"), width=120)  # noqa: SIM115
    write_report(run, scored.scores, floor=spec.coverage_floor, seed=spec.seed,
                 console=console, averaged=scored.averaged, figure_workers=workers)  # fmt: skip
    write_page(run)


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run / "report").iterdir())}


def _drawn_alone(figures_run: Path) -> dict[str, bytes]:
    """What one process writes for the folder: its own report, which `run_campaign` drew in
    one process (`figures_run` is run without workers) with `_report`'s calls, so the same
    bytes as `_report(copy, None)` (compared when this replaced that draw, 4-5 s of CPU in
    each of three tests)."""
    return _files(figures_run)


def test_the_shares_are_every_figure_once() -> None:
    assert sorted(n for share in SHARES for n in share) == [n for n, _, _ in FIGURES]


def test_workers_write_the_bytes_one_process_writes(figures_run: Path, tmp_path: Path) -> None:
    pooled = _copy(figures_run, tmp_path / "pooled")
    with FigureWorkers() as workers:
        _report(pooled, workers)
    files = _drawn_alone(figures_run)
    assert {name for name in files if name.endswith(".png")} == {
        f"fig{n}_{key}.png" for n, key, _ in FIGURES
    }  # every figure drawn, so every module's path is compared
    assert _files(pooled) == files  # the PNGs, figures.json, summary.json and index.html


def test_a_killed_worker_leaves_its_work_to_this_process(
    figures_run: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A worker killed (SIGKILL, out of memory, or a Python it cannot start) used to fail
    the report, and `dutchbook run` with it, before scoring when it was the audit's: the
    report is now drawn here instead, the same bytes, with one line saying so."""
    run = _copy(figures_run, tmp_path / "run")
    with FigureWorkers() as workers:
        processes = [process for process, _ in workers._workers]
        process = processes[1]
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        _report(run, workers)
        # The other is gone too: left drawing its share, it would write figure 1 beside the
        # same figure drawn here (most likely why a page once differed).
        assert not any(p.is_alive() for p in processes)
        assert workers.audit(run).result() == run_audit(run)  # later calls: here too
    assert _files(run) == _drawn_alone(figures_run)
    said = [line for line in capfd.readouterr().err.splitlines() if "figure worker" in line]
    assert len(said) == 1 and "drawn in this process" in said[0], said


def test_a_worker_killed_while_it_reads_the_audit(figures_run: Path) -> None:
    """The audit's worker (the last) killed while the run scores: the audit is read here."""
    with FigureWorkers() as workers:
        process = workers._workers[-1][0]
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        assert workers.audit(figures_run).result() == run_audit(figures_run)


def test_closed_workers_take_no_more_work(figures_run: Path) -> None:
    workers = FigureWorkers()
    workers.close()
    with pytest.raises(RuntimeError, match="closed"):
        workers.audit(figures_run)


def test_a_figure_that_fails_in_a_worker_raises_its_own_error(
    figures_run: Path, tmp_path: Path
) -> None:
    run = _copy(figures_run, tmp_path / "run")
    (run / "report" / "fig1_books.png").mkdir(parents=True)  # figure 1 cannot be saved
    with FigureWorkers() as workers, pytest.raises(IsADirectoryError):
        summary = orjson.loads((figures_run / "report" / "summary.json").read_bytes())
        # Figure 1 alone: the other worker's share (2 s of CPU) raised nothing, and went on
        # drawing into this folder beside the report below.
        workers.draw(summary, run / "report", [1]).figures()
    with pytest.raises(IsADirectoryError):  # as in one process
        _report(run, None)


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_workers_ignore_a_signal_meant_for_the_campaign(
    tmp_path: Path, sent: signal.Signals
) -> None:
    """Both reach the whole process group (a terminal's Ctrl-C; `timeout`, a service manager)."""
    run = tmp_path / "run"
    # A summary of no rows, in a folder of nothing: each figure says why it is left out, at
    # once. `figures_run`'s report, drawn here as it was, is 3 s of the workers' CPU, and
    # `test_workers_write_the_bytes_one_process_writes` draws it.
    summary: dict[str, Any] = {"rows": []}
    with FigureWorkers() as workers:
        # Warmed, each past its SIGINT handler: a worker answers a call once its warm-up has
        # ended (it was a whole report drawn, 4-5 s of CPU).
        for worker, (process, _) in enumerate(workers._workers):
            assert workers._call(worker, os.getpid).result() == process.pid
        processes = [process for process, _ in workers._workers]
        for process in processes:
            assert process.pid is not None
            os.kill(process.pid, sent)
        drawn = workers.draw(summary, run / "report").figures()
        # Drawn by them: one killed by the signal leaves its work to this process, which
        # draws the same figures (`_fall_back`).
        assert all(process.is_alive() for process in processes)
    assert [f.number for f in drawn] == [n for n, _, _ in FIGURES]


def test_workers_outlive_a_signal_sent_while_they_start(figures_run: Path) -> None:
    """Sent at once, while each worker is still importing: it is held until the worker
    ignores it (before, the worker died of it, and the run's report with it). The first
    worker gets a Ctrl-C, the second a SIGTERM."""
    with FigureWorkers() as workers:
        # Kept: a worker that died leaves `_workers` empty (`_fall_back`), all of none alive.
        processes = [process for process, _ in workers._workers]
        for process, sent in zip(processes, (signal.SIGINT, signal.SIGTERM), strict=True):
            assert process.pid is not None
            os.kill(process.pid, sent)
        assert workers.audit(figures_run).result() == run_audit(figures_run)
        assert all(process.is_alive() for process in processes)


def _hangup_held(pid: int) -> bool:
    """Whether `pid` has a SIGHUP pending and held back, never to be acted on (Linux: /proc);
    one pending but not held is about to be."""
    masks = {}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone
        return False
    for line in status.splitlines():
        if line[:6] in ("SigPnd", "ShdPnd", "SigBlk"):
            masks[line[:6]] = int(line.split()[1], 16) & (1 << (signal.SIGHUP - 1))
    return bool((masks["SigPnd"] or masks["ShdPnd"]) and masks["SigBlk"])


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_resource_tracker_the_workers_start_outlives_a_hangup() -> None:
    """multiprocessing's resource tracker, which the workers' start starts, ignores SIGINT and
    SIGTERM but not a hangup: sent to the group, it killed the tracker, and the run's end
    warned that it "died unexpectedly" while the one started again printed a KeyError
    traceback for each of the scoring pool's semaphores. Started with it held, it keeps it
    held (this process sends it here, and waits until it is pending)."""
    code = (
        "import signal\n"
        "signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as a terminal's shell starts `run`\n"
        "from multiprocessing import resource_tracker\n"
        "from runs.figure_workers import FigureWorkers\n"
        "if __name__ == '__main__':\n"
        "    with FigureWorkers():\n"
        "        print(resource_tracker._resource_tracker._pid, flush=True)\n"
        "        input()  # until the test has signalled the tracker\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        tracker = int(proc.stdout.readline())
        tracked = psutil.Process(tracker)
        os.kill(tracker, signal.SIGHUP)
        while tracked.is_running() and tracked.status() != psutil.STATUS_ZOMBIE:
            if _hangup_held(tracker):
                break
            time.sleep(0.01)
        alive = tracked.is_running() and tracked.status() != psutil.STATUS_ZOMBIE
        _, err = proc.communicate("\n", timeout=60)
        assert alive, "the hangup killed the resource tracker"
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_worker_reads_the_audit_this_process_reads(figures_run: Path) -> None:
    with FigureWorkers() as workers:
        assert workers.audit(figures_run).result() == run_audit(figures_run)


def test_replies_are_matched_to_their_calls(figures_run: Path, tmp_path: Path) -> None:
    """Calls queue on a worker and are answered in order, whichever is waited for first."""
    run = _copy(figures_run, tmp_path / "run")
    summary = orjson.loads((figures_run / "report" / "summary.json").read_bytes())
    with FigureWorkers() as workers:
        late = workers.draw(summary, run / "report", [7])
        early = workers.draw(summary, run / "report", [1, 8])
        reading = workers.audit(run)
        assert [f.number for f in early.figures()] == [1, 8]
        assert reading.result() == run_audit(run)
        assert [f.number for f in early.joined(late).figures()] == [1, 7, 8]


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread priority is Linux's")
def test_only_the_warm_up_is_lowered_the_drawing_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker draws at this process's priority; only its warm-up thread yields. (Lowered
    as a whole, a worker drew the report at nice 19: with two busy loops beside the run,
    its report still waited after minutes.)"""
    import threading

    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    with FigureWorkers() as workers:
        for worker, (process, _) in enumerate(workers._workers):
            # The worker's main thread (which draws) and its process as a whole.
            assert workers._call(worker, os.getpriority, os.PRIO_PROCESS, 0).result() == own
            assert process.pid is not None
            assert os.getpriority(os.PRIO_PROCESS, process.pid) == own
    seen: list[int] = []
    monkeypatch.setattr(
        figure_workers,
        "_warm",
        lambda: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())),
    )
    warm_up = threading.Thread(target=figure_workers._warm_lowered)
    warm_up.start()
    warm_up.join()
    assert seen == [max(own, figure_workers.WARM_NICENESS)]


def test_a_worker_skips_matplotlibs_set_docstrings_and_set_still_works() -> None:
    """A worker's warm-up spares matplotlib's `set()` docstrings (`_skip_set_docstrings`,
    issue 12); `set` still sets, and a subclass of a subclass still gets its own `set`. The
    figures' bytes are the same (`test_workers_write_the_bytes_one_process_writes`)."""
    probe = (
        "from runs.figure_workers import _warm\n"
        "_warm()\n"
        "from matplotlib.lines import Line2D\n"
        "from matplotlib.patches import Rectangle\n"
        "line = Line2D([0], [0]); line.set(lw=3)\n"
        "print(Line2D.set.__doc__ is None, 'set' in vars(Rectangle),\n"
        "      Rectangle.set._autogenerated_signature, line.get_linewidth())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "3.0"]
    from matplotlib.lines import Line2D

    assert "Supported properties" in (Line2D.set.__doc__ or "")  # this process keeps them


def test_unused_workers_are_ended_at_once() -> None:
    workers = FigureWorkers()
    processes = [process for process, _ in workers._workers]
    workers.close()
    for process in processes:
        process.join()
        assert process.exitcode == -signal.SIGKILL  # not left to finish importing


def test_a_worker_told_to_stop_skips_the_interpreters_teardown(tmp_path: Path) -> None:
    """`dutchbook run`'s exit waits for its workers (multiprocessing joins its children), and
    their teardown of matplotlib's modules took 0.14-0.19 s of every campaign: a worker told
    to stop ends at once. An exit handler registered in it is the teardown's witness."""
    witness = tmp_path / "torn-down"
    workers = FigureWorkers()
    processes = [process for process, _ in workers._workers]
    for worker in range(len(processes)):
        workers._call(worker, atexit.register, Path.touch, witness).result()
    workers.close()  # used: told to stop, not killed
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert not witness.exists()


SPEC = (
    'name = "workers"\nseed = 2\n[data]\nstock_days = 2\n'
    '[[models]]\nname = "a"\nprovider = "sim"\nmodel = "sim-noisy"\n'
    '[[arms]]\nname = "baseline"\n'
)


def test_dutchbook_run_draws_the_report_itself_when_a_figure_worker_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed before the audit was asked of them (the hostile tester's repro1: during
    dispatch), the workers used to end `run` in exit 1 saying "answers and scores are kept"
    with no scores written. Now the run scores and reports as without workers."""
    audit = FigureWorkers.audit

    def killed_first(self: FigureWorkers, *args: Any) -> Any:
        for process, _ in self._workers:
            assert process.pid is not None
            os.kill(process.pid, signal.SIGKILL)
            process.join()
        return audit(self, *args)

    monkeypatch.setattr(figure_workers.FigureWorkers, "audit", killed_first)
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "error:" not in result.output and "Traceback" not in result.output
    said = [line for line in result.output.splitlines() if "figure worker" in line]
    assert len(said) == 1, result.output
    assert (out / "scores.parquet").exists()
    assert (out / "report" / "index.html").exists()
    assert (out / "report" / "fig1_books.png").exists()


def _spawns_recorded(monkeypatch: pytest.MonkeyPatch) -> list[SpawnProcess]:
    """Every process spawned from now on (the workers are: `FigureWorkers`), still started."""
    spawned: list[SpawnProcess] = []
    start = SpawnProcess.start

    def recorded(self: SpawnProcess) -> None:
        spawned.append(self)
        start(self)

    monkeypatch.setattr(SpawnProcess, "start", recorded)
    return spawned


def test_with_no_figure_workers_run_draws_the_workers_bytes_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`DUTCHBOOK_FIGURE_WORKERS=0`: `dutchbook run` spawns no process for its figures, says
    nothing of workers, and writes the report the workers draw for the folder, byte for byte."""
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setenv(WORKERS_ENV, "0")
        spawned = _spawns_recorded(patched)
        result = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert spawned == []
    assert "figure worker" not in result.output
    pooled = _copy(out, tmp_path / "pooled")
    with FigureWorkers() as workers:
        _report(pooled, workers)
    files = _files(out)
    assert "fig1_books.png" in files
    assert _files(pooled) == files


@pytest.mark.parametrize("value", ["two", "-1", "1", "3", " 0"])
def test_a_figure_workers_value_not_understood_ends_run_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(WORKERS_ENV, value)
    spawned = _spawns_recorded(monkeypatch)
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml"), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {WORKERS_ENV}={value!r} is not understood: set it to 0 to draw the report in "
        f"the run's own process, or to {len(SHARES)} (or leave it unset) for the "
        f"{len(SHARES)} figure workers"
    ]
    assert spawned == [] and not out.exists()


def test_the_figure_workers_are_started_unless_told_none() -> None:
    assert workers_wanted({}) and workers_wanted({WORKERS_ENV: ""})
    assert workers_wanted({WORKERS_ENV: str(len(SHARES))})
    assert not workers_wanted({WORKERS_ENV: "0"})


def test_a_campaign_too_big_for_the_workers_ends_them_before_planning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ended before the estimate renders a prompt, so they never warm up beside planning."""
    used: list[bool] = []
    events: list[str] = []
    draw, close, estimate = FigureWorkers.draw, FigureWorkers.close, planner.estimate

    def recorded(self: FigureWorkers, *args: Any) -> Any:
        used.append(True)
        return draw(self, *args)

    def closing(self: FigureWorkers) -> None:
        events.append("close")
        close(self)

    def estimating(*args: Any, **kwargs: Any) -> Any:
        events.append("estimate")
        return estimate(*args, **kwargs)

    monkeypatch.setattr(figure_workers.FigureWorkers, "draw", recorded)
    monkeypatch.setattr(figure_workers.FigureWorkers, "close", closing)
    monkeypatch.setattr(pipeline, "estimate", estimating)
    monkeypatch.setattr(pipeline, "WORKERS_MAX_QUERIES", 1)
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert used == []  # drawn here instead and (out / "report" / "index.html").exists()
    assert events[:2] == ["close", "estimate"]
    monkeypatch.setattr(pipeline, "WORKERS_MAX_QUERIES", 10**9)
    shutil.rmtree(out / "report")
    again = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml"), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert used  # the same campaign, small enough: drawn by the workers
    drawn = len(used)  # a resume counts from its saved estimate: too big again, never used
    monkeypatch.setattr(pipeline, "WORKERS_MAX_QUERIES", 1)
    third = CliRunner().invoke(app, ["run", str(tmp_path / "spec.toml"), "--out", str(out)])
    assert third.exit_code == 0, third.output
    assert len(used) == drawn


def test_a_worker_whose_run_was_killed_ends_without_a_word() -> None:
    """`dutchbook run` killed (kill -9) while a worker draws: the worker's reply finds no
    reader, and it ends quietly instead of printing tracebacks into the run's terminal."""
    code = (
        "import multiprocessing, os, time\n"
        "from runs import figure_workers\n"
        "if __name__ == '__main__':\n"
        "    parent, child = multiprocessing.get_context('spawn').Pipe()\n"
        "    worker = multiprocessing.get_context('spawn').Process(\n"
        "        target=figure_workers._serve, args=(child,))\n"
        "    worker.start()\n"
        "    child.close()\n"
        "    parent.send((time.sleep, (0.5,)))\n"
        "    print(worker.pid, flush=True)\n"
        "    os._exit(0)  # as a kill: no cleanup, the pipe's end closed by the kernel\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    # `run` returns once every holder of stderr closed it: the worker has ended too.
    assert done.returncode == 0
    assert done.stdout.strip().isdigit()
    assert done.stderr == ""


def _stop(processes: list[Any]) -> list[int]:
    pids = [process.pid for process in processes]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def _kill_left(pids: list[int]) -> None:
    """Those still there (the test failed): killed, or pytest's own exit would wait on them."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_a_stopped_worker_is_ended_and_its_work_drawn_here(
    figures_run: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A worker stopped (SIGSTOP) or stuck used to keep the wait for its reply, and `dutchbook
    run` with it, waiting for ever after scoring: it is now ended and its work drawn here,
    the same bytes, with one line saying so."""
    monkeypatch.setattr(figure_workers, "POLL_S", 0.05)
    monkeypatch.setattr(figure_workers, "STOPPED_S", 0.5)
    run = _copy(figures_run, tmp_path / "run")
    with FigureWorkers() as workers:
        processes = [process for process, _ in workers._workers]
        pids = _stop(processes[:1])  # figure 1's
        try:
            _report(run, workers)
            assert not any(p.is_alive() for p in processes)
        finally:
            _kill_left(pids)
    assert _files(run) == _drawn_alone(figures_run)
    said = [line for line in capfd.readouterr().err.splitlines() if "figure worker" in line]
    assert said == [figure_workers.STUCK], said


def test_a_worker_is_stuck_when_its_cpu_time_stands_still_not_while_it_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The liveness check behind the wait (`_Watch`): a process blocked without using the
    CPU is stuck after `STALLED_S`; one that computes, as a slow figure does, never is."""
    monkeypatch.setattr(figure_workers, "POLL_S", 0.1)
    monkeypatch.setattr(figure_workers, "STALLED_S", 1.0)
    code = {"idle": "import time; time.sleep(60)", "busy": "while True: pass"}
    procs = {kind: subprocess.Popen([sys.executable, "-c", c]) for kind, c in code.items()}
    try:
        time.sleep(0.3)  # started
        watches = {kind: figure_workers._Watch(p.pid) for kind, p in procs.items()}
        stuck_at: dict[str, float] = {}
        started = time.monotonic()
        while time.monotonic() - started < 3.0:
            time.sleep(0.1)
            for kind, watch in watches.items():
                if watch.stuck():
                    stuck_at.setdefault(kind, time.monotonic() - started)
        assert "busy" not in stuck_at
        assert 0.9 <= stuck_at["idle"] < 2.0, stuck_at
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_signal_while_run_waits_on_a_stopped_worker_ends_it(
    tmp_path: Path, sent: signal.Signals
) -> None:
    """`dutchbook run` waiting on a stopped worker's reply after dispatch: one signal used to
    print "interrupted" and leave the process waiting at its exit (multiprocessing joins its
    children, and the workers ignore the SIGTERM it sends them); now it ends, exit 130."""
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1")
    env.pop("PYTEST_CURRENT_TEST", None)
    exe = str(Path(sys.executable).with_name("dutchbook"))
    proc = subprocess.Popen(
        [exe, "run", "spec.toml", "--out", str(tmp_path / "run")], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pids: list[int] = []
    try:
        started = time.monotonic()
        while len(pids) < len(SHARES) and time.monotonic() - started < 60:
            pids += [c.pid for c in psutil.Process(proc.pid).children()
                     if c.pid not in pids and "spawn_main" in " ".join(c.cmdline())]  # fmt: skip
            time.sleep(0.02)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # up to dispatch's summary: the audit is asked of a worker
            lines.append(line)
            if "answers accepted" in line:
                break
        time.sleep(1.5)  # scored; waiting for the audit (a stopped worker is given 5 s)
        proc.send_signal(sent)
        output = "".join(lines) + proc.communicate(timeout=30)[0]
    finally:
        proc.kill()
        _kill_left(pids)
    assert proc.returncode == 130, output
    assert pipeline.INTERRUPTED_MESSAGE in output
    assert "Traceback" not in output
