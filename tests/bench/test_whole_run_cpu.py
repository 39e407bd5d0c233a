"""`bench.whole_run` reads another process's CPU time (psutil)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# `bench` is the repository's benchmark folder, not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.whole_run import process_cpu_s

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")

#: Waits for a line, spins 0.3 s of CPU, waits for another line.
SPIN = (
    "import sys, time\nsys.stdin.readline()\nt = time.process_time()\n"
    "while time.process_time() - t < 0.3: pass\nsys.stdin.readline()\n"
)


def test_a_busy_child_shows_its_cpu_and_a_gone_one_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE)
    assert child.stdin is not None
    try:
        time.sleep(0.2)  # let it start up and block
        before = process_cpu_s(child.pid)
        assert before is not None
        child.stdin.write(b"spin\n")
        child.stdin.flush()
        used = 0.0
        deadline = time.monotonic() + 30
        while used < 0.28 and time.monotonic() < deadline:
            time.sleep(0.02)
            now = process_cpu_s(child.pid)
            assert now is not None
            used = now - before
        assert 0.28 <= used < 5  # clock ticks are 10 ms
    finally:
        child.communicate(b"done\n")
    assert process_cpu_s(child.pid) is None


def test_each_round_is_judged_against_its_own_bare_loop() -> None:
    from bench.whole_run import paired_ratios

    # A fast round's bare loop beside a slow round's run must not pair up: the ratio of the
    # medians here would be 12/16 = 0.75, while every round read 0.6 or 0.8.
    bare, ours = [12.0, 9.6, 16.0], [20.0, 16.0, 20.0]
    assert paired_ratios(bare, ours) == pytest.approx([0.6, 0.6, 0.8])
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


def test_every_phase_the_bench_times_is_a_function_of_the_pipeline() -> None:
    """`runs.pipeline.write_report` became `write_report_folder`, and `make bench` failed in
    its whole-run case with an AttributeError, after every other case had run."""
    import inspect

    import runs.pipeline
    from bench.whole_run import TIMED

    for name, _, is_async in TIMED:
        function = getattr(runs.pipeline, name)
        assert inspect.iscoroutinefunction(function) == is_async, name
