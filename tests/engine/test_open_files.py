"""Connections stay within the open-file limit: raised first, then the pool capped below it."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import polars as pl

from engine.open_files import CEILING, RESERVED_FILES, connection_cap, raise_open_files_limit

DUTCHBOOK = str(Path(sys.executable).with_name("dutchbook"))
SPEC = """
name = "wide"
seed = 1
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
concurrency = 5000
[[arms]]
name = "baseline"
"""


def test_the_pool_is_capped_only_when_both_ends_would_not_fit() -> None:
    assert connection_cap(64, 2 * 64 + RESERVED_FILES) is None
    assert connection_cap(65, 2 * 64 + RESERVED_FILES) == 64
    assert connection_cap(5000, 256) == (256 - RESERVED_FILES) // 2
    assert connection_cap(5000, 100) == 1  # below the reserve: one at a time, never zero


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 200)
    probe = (
        "import resource\nfrom engine.open_files import raise_open_files_limit\n"
        "print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard)),
    )  # fmt: skip
    expected = CEILING if hard == resource.RLIM_INFINITY else hard
    assert done.stdout.split() == [str(expected), str(expected)]
    assert raise_open_files_limit() >= soft


def test_a_run_wider_than_its_file_limit_waits_for_connections_instead_of_failing(
    tmp_path: Path,
) -> None:
    # Before: every connection past the limit failed with EMFILE and was audited as the
    # provider's connection error (1,526 retries for these 1,400 queries), and the
    # simulator's accept loop printed a traceback for each.
    spec = tmp_path / "wide.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "run"
    done = subprocess.run(
        [DUTCHBOOK, "run", str(spec), "--out", str(out)],
        capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "dutchbook warning: the models' concurrency asks 5,000 requests at once, but the "
        "open-file limit (256) leaves room for 64 connections" in done.stderr
    )
    assert "Too many open files" not in done.stderr
    attempts = pl.read_parquet(out / "attempts" / "*.parquet")
    assert attempts.height == 1400
    assert attempts["outcome"].unique().to_list() == ["ok"]  # no connection errors
