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
