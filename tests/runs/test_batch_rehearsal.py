"""The batch rehearsal (`make bench-batch`, issue 13) at small scale: a few hundred queries
in batch mode across the providers that have batch clients, against `dutchbook serve-sim` in
its own process with batch faults, SIGKILLed three times (once between an upload and its
job's creation) and resumed; `bench.batch` itself checks exactly once, no request in two live
jobs, no job created twice, and retries by cause against the injected faults, and returns 1
on any failure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_small_batch_rehearsal_is_exactly_once_and_reconciles(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.batch", "--stock-days", "4", "--passes", "2",
         "--max-lines", "12", "--keep", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=230, check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    once = re.search(r"exactly once: ([\d,]+) planned, ([\d,]+) accepted", out)
    assert once is not None and once.group(1) == once.group(2), out
    assert int(once.group(1).replace(",", "")) >= 300, out  # a few hundred queries
    assert "killed between upload and create: 0 " not in out, out
    assert "killed between upload and create:" in out and "FAILED" not in out, out
    assert "MISMATCH" not in out, out


@pytest.mark.timeout(120)
def test_a_sim_batch_run_stopped_with_jobs_out_resumes_to_the_end(tmp_path: Path) -> None:
    """The simulator a run starts inside itself ends with it, and so do the batch jobs it
    held: the resume stopped on their 404s (exit 4), its only way out a flag naming every
    job. It gives them up unasked and asks their lines again."""
    import os
    import signal
    import time

    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "b"\nseed = 7\nparser = "lenient"\nsim_faults = "batch_seconds=3"\n'
        '[data]\nstock_days = 2\n[[models]]\nname = "simb"\nprovider = "sim"\n'
        'model = "sim-coherent"\ndispatch = "batch"\nbatch_max_lines = 5\n'
        '[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    command = [str(Path(sys.executable).with_name("dutchbook")), "run", str(spec), "--out",
               str(out)]  # fmt: skip
    env = {**os.environ, "DUTCHBOOK_BATCH_POLL_S": "0.2"}
    # Its jobs take two minutes: none can be collected before the signal, however slow the
    # machine (the resume's take the spec's 3 s).
    slow = [*command, "--faults", "batch_seconds=120"]
    first = subprocess.Popen(slow, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)  # fmt: skip
    jobs = out / "batches" / "jobs.jsonl"
    deadline = time.monotonic() + 60
    while not (jobs.is_file() and b'"created"' in jobs.read_bytes()):
        assert time.monotonic() < deadline and first.poll() is None, "no job was created"
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)  # a job out at the simulator
    said, _ = first.communicate(timeout=60)
    assert first.returncode == 130, said
    assert "held by the simulator inside this run, which ends with it" in said
    stopped = subprocess.run([command[0], "status", str(out)], capture_output=True, text=True,
                             check=True)  # fmt: skip
    assert "left with the simulator of the run that planned them" in stopped.stdout
    assert "still at the provider" not in stopped.stdout
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90,
                             check=False)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "was held by the simulator inside an earlier `dutchbook run`" in resumed.stderr
    shown = subprocess.run(
        [command[0], "status", str(out), "--json"], capture_output=True, text=True, check=True
    )
    assert '"state": "finished"' in shown.stdout
