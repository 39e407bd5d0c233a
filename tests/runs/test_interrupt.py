"""Stopping `dutchbook run` early and resuming: Ctrl-C / SIGTERM / a hangup, and the running
spend cap.

The command runs as a user runs it, in a subprocess, against the provider simulator that this
test process serves on a loopback port with slow replies, so attempts really are in flight
when the signal comes. A first signal lets them finish and be recorded; a second cancels at
once. Either way the exit status is 130, the ledger stays readable and reconciles with the
requests the simulator saw, and running the same command again finishes with every planned
request accepted exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import psutil
import pytest
from typer.testing import CliRunner, Result

from engine.scan import accepted_ids, scan_attempts, scan_responses
from providers.sim.server import SimHandle, start_sim
from runs.commands._errors import EXIT_DISK_FULL
from runs.figure_workers import SHARES
from runs.pipeline import INTERRUPTED_MESSAGE, SPEND_CAP_HINT
from runs.signals import INTERRUPTED
from tests.runs.run_folders import fraction_spec

DUTCHBOOK = str(Path(sys.executable).with_name("dutchbook"))

SPEC = """
name = "interrupt-me"
seed = 5

[data]
stock_days = 2

[[models]]
name = "coherent"
provider = "openai"
model = "sim-coherent"
base_url = "{root}/sim/v1"
concurrency = 4

[[arms]]
name = "baseline"
"""
PLANNED = 28  # baseline on two stock-days (checked against the plan below)
SLOW = "slow=0.5,slow_delay_s=1.0"  # half the replies take a second: attempts in flight


@pytest.fixture
async def slow_sim() -> AsyncIterator[SimHandle]:
    async with await start_sim(faults=SLOW, seed=1) as handle:
        yield handle
        await asyncio.sleep(1.1)  # let slow replies to a cancelled client run out before stopping


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [DUTCHBOOK, "run", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DUTCHBOOK, "run", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _wait_for_answers(proc: subprocess.Popen[str], run_dir: Path, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if (run_dir / "plan.parquet").exists():
            try:
                if len(accepted_ids(run_dir)) >= at_least:
                    return
            except (FileNotFoundError, pl.exceptions.ComputeError):
                pass
        time.sleep(0.1)
    raise AssertionError("the run never got going")


def _assert_ledger_intact(run_dir: Path) -> pl.DataFrame:
    attempts = scan_attempts(run_dir).collect()
    assert attempts["outcome"].null_count() == 0
    assert attempts.select("request_id", "attempt").is_unique().all()
    oks = attempts.filter(pl.col("outcome") == "ok")
    assert oks["request_id"].is_unique().all()  # no answer paid for twice
    responses = scan_responses(run_dir).collect()
    assert responses["request_id"].is_unique().all()
    assert set(responses["request_id"]) == set(oks["request_id"])
    assert not (run_dir / "run.pid").exists()
    return attempts


def _assert_resumes_to_completion(tmp_path: Path, run_dir: Path) -> pl.DataFrame:
    again = _run(["spec.toml", "--out", str(run_dir)], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "(resuming)" in again.stdout
    plan_ids = set(pl.read_parquet(run_dir / "plan.parquet")["request_id"])
    assert len(plan_ids) == PLANNED
    responses = scan_responses(run_dir).collect()
    assert responses.height == PLANNED and set(responses["request_id"]) == plan_ids
    attempts = _assert_ledger_intact(run_dir)
    per_request = attempts.filter(pl.col("outcome") == "ok").group_by("request_id").len()
    assert per_request.height == PLANNED and per_request["len"].max() == 1
    return attempts


async def _interrupt(tmp_path: Path, sim: SimHandle, signals: list[signal.Signals]) -> float:
    """Start a run, signal it once a few answers are in; return the time of the first signal."""
    (tmp_path / "spec.toml").write_text(SPEC.format(root=sim.root_url))
    run_dir = tmp_path / "run"
    proc = _start(["spec.toml", "--out", str(run_dir)], tmp_path)
    await asyncio.to_thread(_wait_for_answers, proc, run_dir, 3)
    signalled = time.time()
    for sig in signals:
        proc.send_signal(sig)
        await asyncio.sleep(0.05)
    out, err = await asyncio.to_thread(proc.communicate, None, 60)
    assert proc.returncode == 130, out + err
    # The last line, after the folder's: it came before "run folder: ..." (a hostile pass).
    # On stderr, as every closing error is (on stdout alone a `run ... > log` stopped without
    # a word), and on stdout too, a pipe of its own here, for the scripts that read it there.
    assert out.strip().splitlines()[-2].startswith("run folder: "), out
    assert out.strip().splitlines()[-1] == INTERRUPTED_MESSAGE, out
    assert err.strip().splitlines()[-1] == INTERRUPTED_MESSAGE, err
    assert "Traceback" not in err
    # One line says it was interrupted; each lane used to warn "cancelled: stop requested"
    # too, on stderr, before it (the summary's lane lines say so already).
    assert "lane_halted" not in err, err
    return signalled


async def test_ctrl_c_finishes_in_flight_attempts_exits_130_and_resumes(
    tmp_path: Path, slow_sim: SimHandle
) -> None:
    signalled = await _interrupt(tmp_path, slow_sim, [signal.SIGINT])
    run_dir = tmp_path / "run"
    attempts = _assert_ledger_intact(run_dir)
    # every request the simulator saw is an attempt with a real outcome: none left in flight
    assert attempts.height == slow_sim.counts()["requests"]
    assert "interrupted" not in set(attempts["outcome"])
    ended = [
        s.timestamp() + ms / 1000
        for s, ms in zip(attempts["started_at"], attempts["elapsed_ms"], strict=True)
    ]
    in_flight = [
        o
        for s, e, o in zip(attempts["started_at"], ended, attempts["outcome"], strict=True)
        if s.timestamp() < signalled < e
    ]
    assert in_flight and set(in_flight) == {"ok"}  # in flight at the signal, finished, kept
    assert 3 <= attempts.filter(pl.col("outcome") == "ok").height < PLANNED  # part-way
    leftovers = [p for p in (run_dir / "journal").iterdir() if p.stat().st_size > 0]
    assert leftovers == []  # compacted
    assert (run_dir / "scores.parquet").exists()  # what was there was scored
    await asyncio.to_thread(_assert_resumes_to_completion, tmp_path, run_dir)
    assert scan_attempts(run_dir).collect().height == slow_sim.counts()["requests"]


async def test_second_signal_cancels_at_once_and_the_run_still_resumes(
    tmp_path: Path, slow_sim: SimHandle
) -> None:
    signalled = await _interrupt(tmp_path, slow_sim, [signal.SIGTERM, signal.SIGTERM])
    # the interrupted run's own exit, not start-up or the resume (29 s together under load)
    assert time.time() - signalled < 60
    run_dir = tmp_path / "run"
    _assert_ledger_intact(run_dir)
    resumed = await asyncio.to_thread(_assert_resumes_to_completion, tmp_path, run_dir)
    # attempts cut off by the second signal are on record as `interrupted` after the resume.
    # Every request the simulator saw is an attempt; an interrupted one may not have reached
    # it (its dispatch line is written before the request is sent, and on a loaded machine
    # the cancel can fall in between), so those are the only ones it may not have seen.
    interrupted = resumed.filter(pl.col("outcome") == "interrupted").height
    seen = slow_sim.counts()["requests"]
    assert resumed.height - interrupted <= seen <= resumed.height, (resumed.height, seen)


BATCH_SPEC = """
name = "interrupt-batch"
seed = 5
[data]
stock_days = 2
[[models]]
name = "workhorse"
provider = "groq"
model = "openai/gpt-oss-120b"
dispatch = "batch"
batch_max_lines = 10
[[arms]]
name = "baseline"
"""


async def test_a_second_signal_while_batch_jobs_are_created_says_they_may_be_at_the_provider(
    tmp_path: Path,
) -> None:
    """Two Ctrl-Cs while the run's batch jobs were being created ended on "interrupted — run
    the same command again to resume" alone, though a job may have been made of each input
    uploaded, to run and be billed: the line says so, and that the resume collects them."""
    faults = "batch_create_delay=1.0,batch_create_delay_s=30"  # every create hangs
    async with await start_sim(faults=faults, seed=1) as sim:
        (tmp_path / "spec.toml").write_text(BATCH_SPEC)
        run_dir = tmp_path / "run"
        proc = _start(["spec.toml", "--out", str(run_dir), "--rehearse", "--sim-url",
                       sim.root_url], tmp_path)  # fmt: skip
        jobs = run_dir / "batches" / "jobs.jsonl"

        def creating() -> None:
            # An input uploaded and its job's create in flight (made at the simulator, its
            # reply held): signalled between the two, the lane halted before any create, and
            # dispatch could end before the second signal (a flaky run's bare last line).
            deadline = time.monotonic() + 60
            while not (jobs.is_file() and b'"uploaded"' in jobs.read_bytes()
                       and sim.counts().get("batch.jobs_created", 0) >= 1):  # fmt: skip
                assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
                time.sleep(0.05)

        await asyncio.to_thread(creating)
        for sig in (signal.SIGINT, signal.SIGINT):
            proc.send_signal(sig)
            await asyncio.sleep(0.05)
        out, err = await asyncio.to_thread(proc.communicate, None, 60)
    assert proc.returncode == 130, out + err
    last = err.strip().splitlines()[-1]
    assert out.strip().splitlines()[-1] == last, out  # on both: stdout is a pipe of its own
    assert last.startswith(INTERRUPTED_MESSAGE + "; batch jobs may be at the provider, which "
                           "the resume collects (nothing is bought twice): "), err
    assert "uploaded with no batch job on file" in last, last
    assert "Traceback" not in err


@pytest.mark.figure_workers
async def test_a_sigterm_to_the_whole_process_group_still_draws_the_report(
    tmp_path: Path, slow_sim: SimHandle
) -> None:
    """`timeout`, `kill -TERM -PGID` and service managers signal every process of the group,
    the figure workers included. They used to die of it, and the run, stopped softly, ended
    with "a figure worker died before the report was drawn" (exit 1); one that died now would
    leave its work to the run, which says so in a note."""
    (tmp_path / "spec.toml").write_text(SPEC.format(root=slow_sim.root_url))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [DUTCHBOOK, "run", "spec.toml", "--out", str(run_dir)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as under `timeout` or a service manager
    )
    await asyncio.to_thread(_wait_for_answers, proc, run_dir, 3)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = await asyncio.to_thread(proc.communicate, None, 60)
    assert proc.returncode == 130, out + err
    assert INTERRUPTED_MESSAGE in err and INTERRUPTED_MESSAGE in out
    assert "figure worker" not in out + err
    assert (run_dir / "report" / "index.html").exists()
    await asyncio.to_thread(_assert_resumes_to_completion, tmp_path, run_dir)


#: Starts a command with SIGHUP at its default, as a terminal's shell starts one: the suite
#: may itself run with hangups ignored (under `nohup`), which the command would inherit.
HANGUP_AT_DEFAULT = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]  # fmt: skip


def _drain(master: int, into: bytearray) -> None:
    """Whatever the run has written to its terminal so far (a full pty would block it)."""
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(master, 65536):
            into += chunk


def _figure_workers_of(pid: int) -> list[psutil.Process]:
    """The figure workers `dutchbook run` (`pid`) spawned and that are alive: before it
    scores, its only spawned processes (the resource tracker is not spawned so)."""
    alive = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):  # gone, or a zombie (died, not reaped)
                if "spawn_main" in " ".join(child.cmdline()):
                    alive.append(child)
    return alive


@pytest.mark.figure_workers
async def test_a_hangup_stops_softly_keeps_the_answers_in_flight_and_resumes(
    tmp_path: Path, slow_sim: SimHandle
) -> None:
    """The terminal closes (an SSH session drops): the run, the leader of the session whose
    controlling terminal it was, gets SIGHUP (Linux signals the leader alone, not its figure
    workers). It stops as Ctrl-C stops it: what is in flight, paid for, is kept, not left
    `interrupted` to be asked again; writing to the gone terminal fails nothing; the figure
    workers live on to draw; the report is drawn; a resume finishes."""
    (tmp_path / "spec.toml").write_text(SPEC.format(root=slow_sim.root_url))
    run_dir = tmp_path / "run"
    if shutil.which("setsid") is None:
        pytest.skip("no setsid (util-linux) here to give the run a terminal of its own")
    try:
        master, slave = pty.openpty()
    except OSError:
        pytest.skip("no pseudo-terminal here: a terminal's hangup cannot be staged")
    os.set_blocking(master, False)
    proc = subprocess.Popen(
        # `setsid --ctty`: a session of its own whose controlling terminal is the pty
        ["setsid", "--ctty", *HANGUP_AT_DEFAULT, DUTCHBOOK, "run", "spec.toml", "--out",
         str(run_dir)],
        cwd=tmp_path, env=_env(), stdin=slave, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()
    try:
        deadline = time.monotonic() + 60
        while len(_answered(run_dir)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, bytes(seen)
            _drain(master, seen)
            await asyncio.sleep(0.1)
        _drain(master, seen)
        workers = _figure_workers_of(proc.pid)
        assert len(workers) == len(SHARES), bytes(seen)
    finally:
        os.close(master)  # the hangup: SIGHUP to the session, and writes to it now fail
    # The workers outlive the hangup (the run's note on one that died would go to the closed
    # terminal, so they are looked at until the run exits): the run finishes what is in
    # flight, scores and draws with them. Linux signals the hangup to the session's leader,
    # the run, alone; `kill -HUP -PGID` would reach the workers, which ignore it
    # (`runs.figure_workers._serve`). Each look takes the workers first, then looks for the
    # report: one not drawn yet means the workers were not closed yet (the run closes them
    # after it), so each must have been alive, however fast the run ends.
    pids, deadline = {w.pid for w in workers}, time.monotonic() + 60
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the run did not end after the hangup"
        alive = {w.pid for w in _figure_workers_of(proc.pid)}
        if not (run_dir / "report" / "index.html").exists():
            # A subset, not equal: scoring's process pool (spawned too) may start meanwhile.
            assert pids <= alive, "a figure worker died before the report was drawn"
        await asyncio.sleep(0.05)
    assert proc.wait() == 130
    attempts = _assert_ledger_intact(run_dir)
    assert attempts.height == slow_sim.counts()["requests"]
    assert "interrupted" not in set(attempts["outcome"])  # in flight at the hangup: kept
    assert 3 <= attempts.filter(pl.col("outcome") == "ok").height < PLANNED  # part-way
    assert (run_dir / "scores.parquet").exists()
    assert (run_dir / "report" / "index.html").exists()
    await asyncio.to_thread(_assert_resumes_to_completion, tmp_path, run_dir)


async def test_under_nohup_a_hangup_does_not_stop_the_run(
    tmp_path: Path, slow_sim: SimHandle
) -> None:
    (tmp_path / "spec.toml").write_text(SPEC.format(root=slow_sim.root_url))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        ["nohup", DUTCHBOOK, "run", "spec.toml", "--out", str(run_dir)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    await asyncio.to_thread(_wait_for_answers, proc, run_dir, 3)
    proc.send_signal(signal.SIGHUP)
    out, err = await asyncio.to_thread(proc.communicate, None, 120)
    assert proc.returncode == 0, out + err
    assert INTERRUPTED not in out + err
    assert len(accepted_ids(run_dir)) == PLANNED


def _answered(run_dir: Path) -> set[str]:
    if not (run_dir / "plan.parquet").exists():
        return set()
    try:
        return set(accepted_ids(run_dir))
    except (FileNotFoundError, pl.exceptions.ComputeError):
        return set()


SPEND_SPEC = """
name = "capped"
seed = 5

[data]
stock_days = 2

[[models]]
name = "llama"
provider = "groq"
model = "llama-3.3-70b-versatile"
max_tokens = 256
concurrency = 2
price_in = 1000
price_out = 1000

[[arms]]
name = "baseline"
"""


def test_spend_cap_stops_the_run_non_zero_and_a_higher_cap_resumes(tmp_path: Path) -> None:
    """Rehearsed (the estimate check is skipped then), so the running cap is what stops it."""
    (tmp_path / "spec.toml").write_text(SPEND_SPEC)
    run_dir = tmp_path / "run"
    first = _run(["spec.toml", "--out", str(run_dir), "--rehearse", "--max-cost", "5"], tmp_path)
    assert first.returncode == 3, first.stdout + first.stderr
    assert "spend cap reached: $" in first.stdout and SPEND_CAP_HINT in first.stdout
    attempts = _assert_ledger_intact(run_dir)
    spent = ((int(attempts["tokens_in"].sum()) + int(attempts["tokens_out"].sum())) * 1000) / 1e6
    assert 0 < attempts.filter(pl.col("outcome") == "ok").height < PLANNED
    assert spent <= 5.0
    second = _run(["spec.toml", "--out", str(run_dir), "--rehearse", "--max-cost", "100"], tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "spend: $" in second.stdout  # the cap is reported when it did not stop the run
    assert scan_responses(run_dir).collect().height == PLANNED


@pytest.mark.parametrize("merged", [False, True], ids=["apart", "2>&1"])
def test_a_run_the_spend_cap_stops_ends_in_one_line_on_stderr(
    merged: bool, tmp_path: Path
) -> None:
    """Exit 3 was the one ending with no line on stderr: a run whose stdout went to a file
    stopped in silence on screen. It ends in one, saying what was spent of the cap, that
    the answers are kept and how to resume; stdout keeps its cap line before "run folder:"
    for scripts, but where the two are one file (`2>&1`, a terminal) it is said once.
    The cap's figures are said once on stdout, in that line: the lane's line and the
    dispatch summary's spend line said them too, three times in all; the lane's line says
    only that the cap stopped it."""
    (tmp_path / "spec.toml").write_text(SPEND_SPEC)
    done = subprocess.run(
        [DUTCHBOOK, "run", "spec.toml", "--out", "run", "--rehearse", "--max-cost", "5"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + (done.stderr or "")
    kept = len(accepted_ids(tmp_path / "run"))
    closing = (
        rf"spend cap reached: \$[\d.]+ of \$5\.00(;.*)? — the {kept} answers? accepted so far "
        rf"(is|are) kept in run, {PLANNED - kept} planned quer(y|ies) unanswered; "
        + re.escape(SPEND_CAP_HINT)
    )
    said = done.stdout if merged else done.stderr
    assert re.fullmatch(closing, said.splitlines()[-1]), said
    assert done.stdout.count("spend cap reached: $") == 1, done.stdout
    assert "  llama: cancelled, " in done.stdout, done.stdout
    lane = next(line for line in done.stdout.splitlines() if line.startswith("  llama: "))
    assert lane.endswith(" done — spend cap reached"), lane
    out = done.stdout.splitlines()
    cap_lines = [line for line in out if line.endswith(f"— {SPEND_CAP_HINT}")]
    if merged:
        assert out[-2] == "run folder: run" and not cap_lines, done.stdout
    else:
        assert out[-2:] == [*cap_lines, "run folder: run"], done.stdout
        assert done.stderr.count("spend cap reached") == 1, done.stderr


async def test_a_stop_does_not_wait_out_rate_limit_pacing(tmp_path: Path) -> None:
    """Workers queued behind a low rpm stop at once instead of each sending on its turn."""
    from engine.dispatch import dispatch
    from providers import openai as openai_provider
    from providers.types import ModelConfig

    rows = [
        {
            "request_id": f"r{i}",
            "model": "m",
            "arm": "a",
            "unit": f"u{i}",
            "events": ["e"],
            "keys": ["probability"],
            "pass": 0,
            "seed": i,
            "system": "Forecaster.",
            "user": f'Will asset {i} close up? Reply with a JSON object {{"probability": p}}.',
        }
        for i in range(8)
    ]
    plan = tmp_path / "plan.parquet"
    pl.DataFrame(rows).write_parquet(plan)
    async with await start_sim() as sim:
        config = ModelConfig(
            name="m",
            provider="openai",
            model="sim-coherent",
            base_url=f"{sim.root_url}/sim/v1",
            rpm=6,
            concurrency=4,
            max_tokens=64,  # one request, then one every ten seconds
        )
        stop = asyncio.Event()
        stopped_at: list[float] = []

        async def stop_after_first_answer() -> None:
            while True:
                try:
                    if scan_responses(tmp_path / "run").collect().height:
                        break
                except (FileNotFoundError, pl.exceptions.ComputeError):
                    pass  # the run folder is not there yet
                await asyncio.sleep(0.05)
            stopped_at.append(time.monotonic())
            stop.set()

        stopper = asyncio.create_task(stop_after_first_answer())
        summary = await dispatch(
            plan,
            tmp_path / "run",
            {"m": config},
            {"m": openai_provider.create_adapter(config, {})},
            stop_event=stop,
            log_console=None,
            compact_every_s=0.1,
        )
        # from the stop, not from the start: a loaded machine may take seconds to get going
        elapsed = time.monotonic() - stopped_at[0]
        await stopper
        requests = sim.counts()["requests"]
    assert summary.lanes["m"].state.value == "cancelled"
    assert summary.attempts == requests == 1
    assert elapsed < 5.0  # not the ~10 s per queued worker the bucket would have made them wait


async def test_a_run_folder_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    """A second `run` into a folder another process is writing says so instead of crashing."""
    from engine.ledger import Ledger
    from runs.pipeline import RunError, run_campaign

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(root="http://127.0.0.1:9"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = Ledger.open(run_dir)
    try:
        with pytest.raises(RunError, match="being written by another process"):
            await run_campaign(spec, run_dir, progress=False)
    finally:
        holder.close()


def test_ctrl_c_while_scoring_ends_the_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After dispatch, SIGINT was asyncio.run's again, which only cancels the task at its
    next await: scoring and the report ran to their end (seconds; minutes at paper scale)
    before the run said "interrupted". Now Ctrl-C ends them at once, as SIGTERM does."""

    import runs.pipeline
    from runs.cli import app

    scored: list[bool] = []
    real = getattr(runs.pipeline, "score_run")  # noqa: B009 (not re-exported: the one it calls)

    def interrupted(*args: object, **kwargs: object) -> object:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the handler's KeyboardInterrupt ends the sleep
        scored.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(runs.pipeline, "score_run", interrupted)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "ctrl-c"\n[data]\nstock_days = 2\n[[models]]\nname = "m"\nprovider = "sim"\n'
        'model = "sim-coherent"\n[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    done = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "run")])
    assert done.exit_code == 130, done.output
    assert not scored and not (tmp_path / "run" / "report").exists(), done.output


def test_a_closing_line_stderr_cannot_take_leaves_the_exit_status_as_it_was(
    tmp_path: Path,
) -> None:
    """With stderr on a full device, the spend cap's closing line (exit 3) failed, and the
    run ended in exit 6, "no space left", of a disk with room: the status says the cap."""
    (tmp_path / "spec.toml").write_text(SPEND_SPEC)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [DUTCHBOOK, "run", "spec.toml", "--out", "run", "--rehearse", "--max-cost", "5"],
            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=full, text=True,
            timeout=120,
        )  # fmt: skip
    assert done.returncode == 3, done.stdout
    assert done.stdout.splitlines()[-1] == "run folder: run"


def test_a_spend_cap_that_stopped_the_run_before_any_answer_says_none_was_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A first attempt that could cost more than the cap leaves stops the run with nothing
    accepted: its closing line said "the 0 answers accepted so far are kept"."""
    import typer

    from engine.spend import SpendCap
    from runs.commands.run import _end_on_spend_cap
    from runs.pipeline import CampaignResult

    cap = SpendCap(1.0)
    cap.reached = True
    summary = SimpleNamespace(planned=4, unaccepted=4, lost_to_damage=0, held_by_jobs={},
                              answer_budget_spent=0, spend=cap)  # fmt: skip
    result = CampaignResult(Path("run"), summary, {}, spend_cap_reached=True, parser="lenient")
    with pytest.raises(typer.Exit) as ended:
        _end_on_spend_cap(result)
    assert ended.value.exit_code == 3
    assert capsys.readouterr().err == (
        f"{cap.message()} — no answer was accepted yet in run, 4 planned queries unanswered; "
        f"{SPEND_CAP_HINT}\n"
    )
    # Those a resume does not ask, whatever the cap, are said, as an incomplete run says
    # them: "10 planned queries unanswered; raise --max-cost" hid 4 out of their budget.
    summary.planned, summary.answer_budget_spent = 14, 2
    with pytest.raises(typer.Exit):
        _end_on_spend_cap(result)
    assert capsys.readouterr().err == (
        f"{cap.message()} — the 10 answers accepted so far are kept in run, 4 planned queries "
        "unanswered (2 of them spent their answer-failure budget: a resume asks them again "
        f"only once max_answer_failures is raised in the spec); {SPEND_CAP_HINT}\n"
    )


def test_a_spend_cap_whose_unanswered_are_all_given_up_for_good_sends_no_one_to_resume(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every query the cap left unanswered lost twice to damaged batch results: no run asks
    them again, whatever the cap, yet both the cap's line on stdout and its closing line
    said "raise --max-cost and run the same command again to resume", which asks nothing.
    They say what the incomplete run's line says of them, in its words."""
    import typer

    from engine.spend import SpendCap
    from runs.commands.run import _end_on_spend_cap, _incomplete_line, _say_spend_cap_on_stdout
    from runs.pipeline import CampaignResult

    cap = SpendCap(1.0)
    cap.spent_now_usd, cap.reached = 0.97, True
    summary = SimpleNamespace(planned=10, unaccepted=2, lost_to_damage=2, held_by_jobs={},
                              answer_budget_spent=0, spend=cap)  # fmt: skip
    result = CampaignResult(Path("run"), summary, {}, spend_cap_reached=True)
    given_up = _incomplete_line(result).split(" (see above), ", 1)[1]
    assert given_up.startswith("all given up for good: ")  # the incomplete run's words
    _say_spend_cap_on_stdout(result)
    with pytest.raises(typer.Exit) as ended:
        _end_on_spend_cap(result)
    assert ended.value.exit_code == 3
    said = capsys.readouterr()
    assert said.out == f"{cap.message()} — 2 planned queries unanswered, {given_up}\n"
    assert said.err == (
        f"{cap.message()} — the 8 answers accepted so far are kept in run, 2 planned queries "
        f"unanswered, {given_up}\n"
    )
    # Some left for a resume to ask: the hint stays, those given up said apart.
    summary.unaccepted = 5
    _say_spend_cap_on_stdout(result)
    with pytest.raises(typer.Exit):
        _end_on_spend_cap(result)
    said = capsys.readouterr()
    assert said.out == f"{cap.message()} — {SPEND_CAP_HINT}\n"
    assert said.err.endswith(
        "5 planned queries unanswered (2 of them given up for good: damaged batch results lost "
        f"their lines twice, each loss billed, and no run asks them again); {SPEND_CAP_HINT}\n"
    )


#: How the runs below end: stopped by the spend cap (exit 3), finished (0), or incomplete (4).
ENDINGS = ["cap", "done", "incomplete"]


@pytest.mark.parametrize("full", [False, True], ids=["closed", "full"])
@pytest.mark.parametrize("ending", ENDINGS)
def test_a_run_whose_output_closes_at_its_closing_lines_keeps_its_ending(
    ending: str, full: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stdout's reader gone (`| head`) as the run printed its last lines, the cap's and "run
    folder:", after its report: it ended in "the output (stdout) closed before `dutchbook
    run` finished", exit 1, the cap's exit 3 and closing line unsaid, and a finished run told
    to run again. The run had ended: a capped one ends as such, on stderr (exit 3), as one
    interrupted does; a finished one in a note that only its printing was cut (exit 0).
    Stdout full there (a log's disk filled), a finished run was sent to "free some space
    and run the same command again": it says its work is finished, in exit 6."""
    from runs.commands import run as run_command

    monkeypatch.setattr(run_command, "print_text", _full if full else _closed)
    _assert_its_own_ending(_ended_run(ending, tmp_path), ending, full)


def _closed(*args: object) -> None:
    """A write to stdout whose reader has gone (`| head`), as `runs.output` raises it."""
    from runs.output import OutputClosed

    raise OutputClosed(BrokenPipeError(32, "Broken pipe"))


def _full(*args: object) -> None:
    """A write to stdout that found no room (`> log` on a full disk), as `runs.output`
    raises it."""
    from runs.output import OutputFull

    raise OutputFull(OSError(errno.ENOSPC, "No space left on device"))


#: A campaign whose every answer (a fraction, "11/36") the strict parser rejects: it ends
#: incomplete, exit 4, all 28 planned queries unanswered.
INCOMPLETE_SPEC = fraction_spec("rejected", 1, "strict")


def _ended_run(ending: str, tmp_path: Path) -> Result:
    """A campaign run in process that ends as `ending` (`ENDINGS`) says: SPEND_SPEC
    rehearsed, stopped by the spend cap or finished, or INCOMPLETE_SPEC; its result."""
    from runs.cli import app

    spec = tmp_path / "spec.toml"
    args = ["run", str(spec), "--out", str(tmp_path / "run")]
    if ending == "incomplete":
        spec.write_text(INCOMPLETE_SPEC)
        return CliRunner().invoke(app, args)
    spec.write_text(SPEND_SPEC)
    cap = ["--max-cost", "5" if ending == "cap" else "100"]
    return CliRunner().invoke(app, [*args, "--rehearse", *cap])


def _assert_its_own_ending(done: Result, ending: str, full: bool = False) -> None:
    """A run the cap stopped ends as such, on stderr (exit 3), and an incomplete one (exit
    4), each line then saying that the output was cut, and by what (it said only the run's
    ending, and a log cut part-way had no word why); a finished one in a note that only its
    printing was cut (exit 0), or, its output full, in a full output's error line saying its
    work is finished (exit 6); none in "the output (stdout) closed"'s error or a full
    output's "run the same command again"."""
    last = done.output.splitlines()[-1]
    cut = (
        "the output (stdout) could not be written before `dutchbook run` printed all it had "
        "to say (no room left for it: No space left on device)"
        if full
        else "the output (stdout) closed before `dutchbook run` printed all it had to say "
        "(its reader ended)"
    )
    if ending == "cap":
        assert done.exit_code == 3, done.output
        assert last.startswith("spend cap reached: $"), last
        assert last.endswith(f"; {SPEND_CAP_HINT}; {cut}"), last
    elif ending == "incomplete":
        assert done.exit_code == 4, done.output
        assert last.startswith("incomplete: 28 planned queries unanswered (see above);"), last
        assert last.endswith(f"; {cut}"), last
    elif full:
        assert done.exit_code == EXIT_DISK_FULL, done.output
        assert last.startswith(
            "error: the output (stdout) could not be written before `dutchbook run` printed"
        ), last
        assert "its work is finished and written, nothing to run again" in last
    else:
        assert done.exit_code == 0, done.output
        assert last.startswith("note: the output (stdout) closed before `dutchbook run` printed")
    assert "error: the output (stdout) closed" not in done.output
    assert "free some space and run the same command again" not in done.output


@pytest.mark.parametrize("full", [False, True], ids=["closed", "full"])
@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("at", ["leaderboard", "report page"])
def test_a_run_whose_output_closes_as_its_report_prints_keeps_its_ending(
    at: str, ending: str, full: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stdout's reader gone (`| head -4`) as the run printed its report, `report/` already
    in place: at the leaderboard (the first write once the report's files are marked
    written) or at "report page:". It ended in "the output (stdout) closed before
    `dutchbook run` finished", exit 1, a capped run's exit 3 and line unsaid, and no
    "report" lap in logs/phases.jsonl. It ends as the run did, its report lap written."""
    from runs import output
    from runs.phases import read_phases

    write = output._Stdout.write
    cut: list[str] = []

    def write_until_cut(self: output._Stdout, text: str) -> int:
        here = output.files_written() if at == "leaderboard" else text.startswith(at)
        if cut or (text and here):
            cut.append(text)  # its reader gone (or no room), every later write fails too
            _full() if full else _closed()
        return write(self, text)

    monkeypatch.setattr(output._Stdout, "write", write_until_cut)
    done = _ended_run(ending, tmp_path)
    assert cut, "the report's printing was never cut"
    _assert_its_own_ending(done, ending, full)
    assert (tmp_path / "run" / "report" / "index.html").is_file()
    assert "report" in [line["phase"] for line in read_phases(tmp_path / "run")]
