"""Scoring must not write to stdout: commands print JSON there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_first_solve_prints_no_highs_banner() -> None:
    code = (
        "import scoring\n"
        "print(round(float(scoring.dutch_books([[1, 0], [0, 1]], [0.6, 0.6]).profit[0]), 6))\n"
        "print(scoring.repair([[1, 0], [0, 1]], [0.6, 0.6]).round(6).tolist())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout == "0.1\n[0.5, 0.5]\n"
