"""The sweep rehearsal's copy of paper.toml: its three announced changes, and nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

from runs.spec import load_spec

# `bench` is the repository's benchmark folder, not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.sweep import ANSWER_FAILURES, PAPER_SPEC, PROVIDER_LIMITS, write_spec


def test_rehearsal_spec_changes_only_limits_headlines_and_answer_budget(tmp_path: Path) -> None:
    (tmp_path / "headlines.csv").write_text("date,asset,headline\n", encoding="utf-8")
    paper = load_spec(PAPER_SPEC)
    rehearsal = load_spec(write_spec(tmp_path, stock_days=100))

    assert paper.max_answer_failures == 3
    assert rehearsal.max_answer_failures == ANSWER_FAILURES <= rehearsal.max_attempts
    assert rehearsal.max_attempts == paper.max_attempts
    assert rehearsal.data.headlines is not None
    assert [arm.name for arm in rehearsal.arms] == [arm.name for arm in paper.arms]
    for before, after in zip(paper.models, rehearsal.models, strict=True):
        assert (after.name, after.provider, after.model) == (
            before.name,
            before.provider,
            before.model,
        )
        assert (after.rpm, after.concurrency) == PROVIDER_LIMITS[after.provider]
