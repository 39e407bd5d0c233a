"""Answers read by the lenient parser (sim-fraction's "11/36" in prose) are not the paper's
acceptance rule (Appendix C: one valid JSON object), and only the Provenance section at the
foot of the report said which parser read them: now a note under the leaderboard does, in
leaderboard.txt, report.md, the page and the terminal."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import polars as pl
from rich.console import Console

from runs.report import write_report
from runs.report_page import write_page
from runs.scoring_step import SCORE_SCHEMA

NOTE = "Not the paper's acceptance rule: answers read by the lenient parser (the spec's)."


def _scores() -> pl.DataFrame:
    units = [f"2025-01-0{d}:AAA" for d in (1, 2, 3)]
    rows = [
        {"model": "m", "arm": "baseline", "unit": u, "pass": 0, "set": "h1",
         "cluster": u.split(":")[0], "norm": "inf", "profit": 0.001 * i, "coverage": 1.0,
         "events": ["A", "notA"], "stakes": [], "coherent": [], "brier": 0.2, "answered": 2}
        for i, u in enumerate(units)
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=SCORE_SCHEMA)


def _texts(run: Path, parser: str, scores: pl.DataFrame | None = None) -> dict[str, str]:
    """The leaderboard's views, and what the terminal said under its table ("terminal")."""
    run.mkdir()
    (run / "spec.toml").write_text(f'name = "p"\nparser = "{parser}"\n', encoding="utf-8")
    said = StringIO()
    console = Console(file=said, width=200, color_system=None)
    scores = _scores() if scores is None else scores
    write_report(run, scores, floor=0.9, seed=3, reps=100, console=console, figures=False)
    write_page(run)
    report = run / "report"
    views = {name: (report / name).read_text(encoding="utf-8").replace("&#x27;", "'")
             for name in ("leaderboard.txt", "report.md", "index.html")}  # fmt: skip
    return views | {"terminal": "Leaderboard\n" + said.getvalue()}


def test_a_lenient_runs_leaderboard_says_it_is_not_the_papers_rule(tmp_path: Path) -> None:
    # What follows the leaderboard (the terminal's table: a reviewer's run printed no note).
    after = {"leaderboard.txt": "Across models", "report.md": "## Across models",
             "index.html": "<h2>Every arm", "terminal": "95% intervals"}  # fmt: skip
    for name, text in _texts(tmp_path / "run", "lenient").items():
        assert NOTE in text.replace("\\", ""), name  # report.md escapes its punctuation
        board = text.index("Leaderboard") if name != "leaderboard.txt" else 0
        assert board < text.index("Not the paper's") < text.index(after[name]), name


def test_a_strict_run_says_nothing_of_it(tmp_path: Path) -> None:
    for text in _texts(tmp_path / "run", "strict").values():
        assert "Not the paper's acceptance rule" not in text


def test_a_lenient_run_that_accepted_no_answer_says_nothing_of_its_parser(tmp_path: Path) -> None:
    # A note on how answers were read, under a table of none, spoke of answers there were not.
    texts = _texts(tmp_path / "run", "lenient", _scores().head(0))
    for name, text in texts.items():
        assert "Not the paper's acceptance rule" not in text, name
