"""Repeated elicitation counts families as the leaderboard does: after k passes averaged, a
family with a statement answered in none of the first k passes is unanswered (NaN).

Its k-pass profits were solved on the statements answered: a family with a statement dropped
lost the constraints tying it to the others, and a dropped call read as coherence (sim-noisy's
brisbane-2032-golds, one of its two statements answered in a pass, scored 0.0 there against
0.1111 whole), in summary.json, the leaderboard's table, figure 7 and the terminal's line.
Checked here against the answers themselves, read from `scores.parquet`'s per-event lists.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.runs.run_folders import run_spec

#: Two passes of the family benchmark, a statement lost now and then (refusals, one answer
#: failure allowed): some families lose a statement in one pass only, some in both.
SPEC = """
name = "lost-statements"
seed = 11
parser = "lenient"
sim_faults = "refusal=0.08"
max_answer_failures = 1
[[models]]
name = "m"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "families/isolated"
passes = 2
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Requests given up end the run unfinished (not 0); it scores and reports all the same.
    out, _, output = run_spec(tmp_path_factory.mktemp("repeated-families"), SPEC)
    assert (out / "report" / "summary.json").is_file(), output
    return out


def test_a_family_is_averaged_only_once_every_statement_has_an_answer(run: Path) -> None:
    scores = pl.read_parquet(run / "scores.parquet").filter(pl.col("norm") == "l1")
    averaged = pl.read_parquet(run / "averaged.parquet").filter(pl.col("norm") == "l1")
    got = {(u, k): p for u, k, p in averaged.select("unit", "k", "profit").iter_rows()}
    by_family: dict[str, list[list[float]]] = {}
    for unit, _pass, probs in scores.sort("pass").select("unit", "pass", "probs").iter_rows():
        by_family.setdefault(unit, []).append([math.nan if v is None else v for v in probs])
    seen = {"blank": 0, "kept": 0, "union": 0}
    for unit, passes in by_family.items():
        answered = np.isfinite(np.array(passes))
        for k in (1, 2):
            whole = bool(answered[:k].any(axis=0).all())
            profit = got[(unit, k)]
            if whole:
                assert math.isfinite(profit), (unit, k)
                seen["kept"] += 1
                seen["union"] += k == 2 and not answered.all(axis=1).any()
            else:
                assert math.isnan(profit), (unit, k, profit)
                seen["blank"] += 1
    # The campaign holds each case: families blanked, kept, and one whole only by both passes.
    assert seen["blank"] and seen["kept"] and seen["union"], seen
    assert any(not a.all() for a in (np.isfinite(np.array(p)) for p in by_family.values()))
