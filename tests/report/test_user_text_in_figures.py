"""The figures draw a user's text as written: a model named with `$` signs (mathtext's
delimiters) used to fail every figure, and with them the report (exit 1, a traceback)."""

from __future__ import annotations

from pathlib import Path

from tests.runs.quiet_campaign import run_quietly

SPEC = r"""
name = "dollars"
seed = 3
[data]
stock_days = 2
[[models]]
name = 'm$\frac{$x'
provider = "sim"
model = "sim-noisy"
[[models]]
name = "costs $5 or $6"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


def test_a_model_named_with_dollar_signs_gets_its_report(tmp_path: Path) -> None:
    run_dir = run_quietly(tmp_path, "dollars", SPEC)
    page = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert "m$\\frac{$x" in page and "costs $5 or $6" in page
    figures = sorted(p.name for p in (run_dir / "report").glob("fig*.png"))
    assert "fig1_books.png" in figures and "fig2_leaderboard.png" in figures, figures
